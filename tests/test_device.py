"""The device campaign (``--mode device``): its torch oracle, its buffers and its verdicts.

On a CPU machine the same engine runs with CPU tensors and the Triton interpreter, on small
cases: every case is also cross-checked against the NumPy and Numba oracles, so the torch
oracle (``oracles/tensor_ops.py``) and the buffers (on the device, or on the host for the
prepare kernels) are tested against them here. On a CUDA machine the same
tests run compiled, at production scale.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from eaglefuzz.harness.checking.device_mode import device_targets
from eaglefuzz.harness.checking.device_mode.engine import (
    CROSS_CHECK_S_PER_ELEMENT,
    _cross_check_clean,
    _may_cross_check,
    device_fuzz_target,
)
from eaglefuzz.harness.sources import implementations_for, parse_source
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.targetkit.step_batch import StepBatchDevice

pytestmark = pytest.mark.kernel
NAMES = sorted(device_targets())


def _workers(backend) -> int:  # noqa: ANN001
    """Producer processes for a host-checked target: one on a GPU (the pool's path, tested
    there, without a pool per xdist worker the size of a campaign's), none under the interpreter."""
    return 1 if backend.compiled else 0


def _source(name: str, needs) -> str:  # noqa: ANN001
    """The bundled copy, or the pinned vLLM release for the targets it lacks (the newer utils
    targets, the rejection sampler's kernels)."""
    from eaglefuzz.harness.sources import vllm
    from eaglefuzz.harness.sources.bundled import BundledSource

    if name in BundledSource().load().funcs:
        return "bundled"
    needs.release_files()
    return f"vllm-release:{vllm.PINNED_RELEASE}"


@pytest.mark.parametrize("name", NAMES)
def test_device_oracle_agrees_with_the_numpy_and_numba_oracles(name, backend, needs):
    """Every example cross-checked: the device oracle and buffers agree with the NumPy and
    Numba oracles on clean kernels. Ordinary cases only (``scale_cases=False``): on a GPU a
    production-scale case of the V1 rejection kernels finds vLLM 0.33.0's real int32 wrap
    (tests/test_scale.py and the GPU run cover those)."""
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=12, seed=3, cross_check_share=1.0,
                               workers=_workers(backend), scale_cases=False)
    assert not stats.findings, stats.findings[0].report()
    assert stats.examples == 12
    assert stats.cross_checked == 12
    assert stats.tokens > 0 and set(stats.stages) >= {"draw", "oracle", "kernel", "compare"}


def test_a_device_run_spares_the_heap_before_it_from_the_collector_and_gives_it_back(backend):
    """A run freezes the objects that exist when it starts (``gc.freeze``: the collector's
    passes then scan what the run makes, not the modules and caches) and unfreezes them when it
    ends, a finding or not; a caller that froze its own keeps them frozen. Garbage that exists
    when it starts (a cycle an earlier run left, which may hold a device table) is collected
    first, never frozen with the rest."""
    import gc
    import weakref

    class Node:  # a cycle of two, garbage before the run
        pass

    name = "eagle_prepare_next_token_padded_kernel"
    impls = implementations_for(parse_source("bundled"), [name])
    during: list[tuple[int, bool]] = []
    assert gc.get_freeze_count() == 0
    gc.disable()  # no pass of its own collects the cycle before the run starts
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None
        stats = device_fuzz_target(name, impls, backend.device, examples=16, seed=3, scale_cases=False,
                                   workers=_workers(backend),
                                   on_progress=lambda s: during.append((gc.get_freeze_count(), gone() is None)))
    finally:
        gc.enable()
    assert stats.examples == 16 and during and min(n for n, _ in during) > 0
    assert all(collected for _, collected in during)  # collected before the freeze
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        device_fuzz_target(name, impls, backend.device, examples=4, seed=3, scale_cases=False, workers=_workers(backend))
        assert gc.get_freeze_count() > 0  # not unfrozen (a frozen object still goes when nothing refers to it)
    finally:
        gc.unfreeze()


def test_a_device_run_on_a_gpu_does_its_torch_work_on_one_thread_and_gives_the_count_back(backend, monkeypatch):
    """On a GPU the run's host work (small torch operations, staged copies) runs on one torch
    thread, where a pool per process (per lane) would spin on the cores the other lanes need;
    the caller's count comes back when the run ends. The CPU backend keeps its threads."""
    import torch

    from eaglefuzz.harness.checking.device_mode import engine, host_threads

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert host_threads.one_thread("cpu") is None and torch.get_num_threads() == 2
        assert host_threads.one_thread("cuda:0") == 2 and torch.get_num_threads() == 1
        assert host_threads.one_thread("cuda:0") is None  # one already: nothing to give back
        host_threads.restore(2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    calls: list = []
    monkeypatch.setattr(engine, "one_thread", lambda device: calls.append(("one", device)) or 7)
    monkeypatch.setattr(engine, "restore", lambda n: calls.append(("restore", n)))
    name = "eagle_prepare_next_token_padded_kernel"
    impls = implementations_for(parse_source("bundled"), [name])
    device_fuzz_target(name, impls, backend.device, examples=4, seed=3, scale_cases=False, workers=_workers(backend),
                       on_progress=lambda s: calls.append(("progress", None)))
    assert calls[0] == ("one", backend.device) and calls[-1] == ("restore", 7) and ("progress", None) in calls


# (seeded bugs of tests/seeded_bugs/mutants.py: one per device target, and some of a production extreme
# the device draw reaches; never one of the extended tier, which --mode device does not draw)
BUGS = ["ce_masked_includes_bonus", "pi_rejected_missing_plus_one", "nt_first_valid_column", "nt_vocab_check_overflows",
        "gs_prompt_end_is_chunked", "gs_seq_len_int16", "cs_tail_overwritten", "cs_query_end_int16",
        "gd_placeholder_at_prompt_end", "gd_positions_int16", "ei_local_pos_from_one", "pc_batch_row_as_state_row", "fs_stride_k",
        "dd_rejected_ignored", "ps_pad_from_next", "ud_hidden_of_next_row", "dp_chunked_takes_last_sampled",
        "pp_copy_from_next_token", "pu_rejected_ignored", "pu_drafts_at_batch_row", "sm_cp_global_offset",
        "gb_row_of_batch_index", "st_sum_unshifted", "es_alias_reload", "dfl_block_table_row_0",
        "tk_token_row_as_state_row", "ns_new_tokens_forgotten", "bc_compiled_path_differs", "gs_step_seed_dropped",
        "cl_not_clamped", "rm_not_clamped", "rj_greedy_keeps_draft", "rs_bonus_as_rejection", "ir_slot_after_next"]
UNSHRUNK = ["gr_bonus_after_rejection", "rr_recovered_of_next", "ex_input_of_next", "sr_residual_swapped"]
"""The rejection sampler's (one per target), not shrunk here: that takes 15 to 35 s each under
the interpreter (their shrinking is tested with the seeded bugs' tests)."""


@pytest.mark.parametrize("bug", BUGS + UNSHRUNK)
def test_device_campaign_catches_a_seeded_bug(bug, seeded_bugs_dir, backend, needs):
    path = seeded_bugs_dir / f"{bug}.py"
    if not path.is_file():
        needs.release_files()  # a vLLM release's mutant: written once its module is here
    impls = implementations_for(FileSource(path))
    (name,) = impls
    stats = device_fuzz_target(name, impls, backend.device, examples=30, seed=0, cross_check_share=0.0,
                               workers=_workers(backend), shrink=bug not in UNSHRUNK)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()
    assert finding.origin.file == str(Path(path).resolve())


@pytest.mark.parametrize(("ulps", "found"), [(1, False), (1000, True)])
def test_a_device_batch_bounds_an_in_place_table(ulps, found, monkeypatch, backend, needs):
    """An input the kernel updates in place to bounded floats (``_temperature_kernel``'s logits:
    the quotients within 2 ulp) one unit in the last place off is what the contract allows: no
    finding; a thousand units off is a difference of the batch, which its case alone shows and
    the NumPy and Numba oracles confirm."""
    import torch

    name = "_temperature_kernel"
    record = device_targets()[name].record
    launch = type(record).launch

    def nudged(self, kernel, tensors, case):  # noqa: ANN001, ANN202  (the record's launch: its check sees it too)
        t = tensors["logits"]
        before = t.clone()
        launch(self, kernel, tensors, case)
        move = (t != 0) & torch.isfinite(t) & (t.view(torch.int32) != before.view(torch.int32))
        t.view(torch.int32)[move] += ulps

    monkeypatch.setattr(type(record), "launch", nudged)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=8, seed=1, cross_check_share=0.0, workers=0,
                               scale_cases=False, shrink=False)
    if not found:
        assert not stats.findings, stats.findings[0].report()
        return
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()


def test_a_wrong_device_oracle_is_an_oracle_disagreement_not_a_finding(monkeypatch, backend):
    """The confirmation by the NumPy and Numba oracles: a device oracle that expects what the
    contract does not gives an oracle disagreement (a harness bug), never a kernel finding."""
    from eaglefuzz.oracles import tensor_ops

    name = "copy_and_expand_eagle_inputs_kernel"
    right = tensor_ops.copy_and_expand_eagle_inputs

    def wrong(**kw):  # noqa: ANN003, ANN202
        w = right(**kw)
        index, value = w["out_input_ids"]
        w["out_input_ids"] = (index, value + 1)
        return w

    monkeypatch.setattr(tensor_ops, "copy_and_expand_eagle_inputs", wrong)
    impls = implementations_for(parse_source("bundled"), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=5, seed=0, cross_check_share=0.0)
    (finding,) = stats.findings
    assert finding.kind == "oracle disagreement", finding.report()
    assert "torch oracle" in finding.report()


def test_device_mode_without_a_gpu_is_a_one_line_error(backend, tmp_path):
    from eaglefuzz.harness.core.errors import UserError
    from eaglefuzz.harness.run.campaign import Campaign

    if backend.compiled:
        pytest.skip("a GPU is present: --mode device is valid here")
    c = Campaign(names=None, source=parse_source("bundled"), backend="auto", seed=0, mode="device", examples=1,
                 time_budget=None, shard=(0, 1), corpus_dir=tmp_path, keep_going=False, progress=False, as_json=True)
    with pytest.raises(UserError, match=r"^--mode device: needs a CUDA device"):
        c.run()


ORPHAN_SCRIPT = """
import multiprocessing, os, sys
from multiprocessing import resource_tracker
from eaglefuzz.harness.checking.device_mode.producers import HostCases
if __name__ == "__main__":
    cases = HostCases("eagle_prepare_inputs_padded_kernel", seed=5, first=0, step=1, max_requests=8, workers=1)
    next(cases)
    pids = [p.pid for p in multiprocessing.active_children()] + [resource_tracker._resource_tracker._pid]
    print(" ".join(map(str, pids)), flush=True)
    os._exit(0)  # as an xdist worker ends: no exit handler shuts the pool down
"""


def test_producer_processes_die_with_the_process_that_started_them(tmp_path):
    """A process that ends without its exit handlers (an xdist worker, a campaign killed) left its
    producer process and multiprocessing's resource tracker running, orphans of init, for good."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from eaglefuzz.harness.run.lifeline import alive

    script = tmp_path / "start_producers.py"
    script.write_text(ORPHAN_SCRIPT)
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "pids"
    with open(out, "w") as f:  # a file: an orphan holding a pipe open would keep the test waiting for it
        proc = subprocess.run([sys.executable, str(script)], stdout=f, stderr=subprocess.DEVNULL, timeout=300,
                              check=False, env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 0
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == 2, out.read_text()  # the producer and the resource tracker
    end = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:  # leave nothing behind, whatever the verdict
        os.kill(p, 9)
    assert not left, f"still running after their parent ended: {left}"


def test_producer_processes_make_the_same_cases_in_the_same_order():
    """A host-checked target's cases made by a worker process, in chunks, are those made in
    process, example for example: the seed alone decides a case (determinism)."""
    import numpy as np

    from eaglefuzz.harness.checking.device_mode import producers
    from eaglefuzz.harness.checking.device_mode.producers import CHUNK, HostCases

    name = "eagle_prepare_inputs_padded_kernel"
    runs = []
    for workers in (0, 1):
        cases = HostCases(name, seed=5, first=3, step=2, max_requests=8, workers=workers)
        try:
            runs.append([next(cases) for _ in range(CHUNK + 3)])  # past the first chunk
        finally:
            cases.close()
            producers._shutdown()  # the suite ends the processes it starts
    for (dc0, a0), (dc1, a1) in zip(*runs, strict=True):
        assert dc0.scalars == dc1.scalars and dc0.outputs == dc1.outputs
        for n in dc0.inputs:
            np.testing.assert_array_equal(dc0.inputs[n], dc1.inputs[n], strict=True)
        for s in a0.full:
            np.testing.assert_array_equal(a0.full[s], a1.full[s], strict=True)
            np.testing.assert_array_equal(a0.expected[s], a1.expected[s], strict=True)
    assert len({str(dc.scalars) for dc, _ in runs[0]}) > 1  # not one case over and over


@pytest.mark.parametrize("name", NAMES)
def test_device_draws_lie_in_the_production_tier(name):
    """``--mode device`` draws what the fuzz and bulk modes call production (docs/CONTRACT.md
    N.2): every drawn case, as a plain case, passes the target's production ``validate``."""
    import numpy as np
    import torch

    from eaglefuzz.harness.targets import TARGETS

    target = device_targets()[name]
    rng, gen = np.random.default_rng(22), torch.Generator().manual_seed(22)
    for _ in range(20):
        TARGETS[name].validate(target.to_case(target.draw(rng, gen, "cpu", 8)))


BATCHED = sorted(n for n, t in device_targets().items() if t.batch)


@pytest.mark.parametrize("name", BATCHED)
def test_batched_device_draws_lie_in_the_production_tier(name):
    """Every case of a batch (:meth:`~eaglefuzz.harness.targetkit.device.DeviceTarget.draw_batch`),
    as a plain case, passes the target's production ``validate``; the batch's cases differ."""
    from eaglefuzz.harness.targets import TARGETS

    target = device_targets()[name]
    batch = target.draw_batch((5, 6), "cpu", 6, 8)
    cases = [target.to_case(batch.case(k)) for k in range(len(batch))]
    for case in cases:
        TARGETS[name].validate(case)
    assert len({str(c.scalars) + str(sorted((n, a.tobytes()) for n, a in c.arrays.items())) for c in cases}) > 1


BOTH_SIDES = {"copy_and_expand_eagle_inputs_kernel": {"shift_on", "shift_off", "p_is_1", "p_at_least_2", "rejected_tokens",
                                                    "clamp_engaged", "last_request_rejected", "ids_past_65535"},
              "copy_and_expand_dflash_inputs_kernel": {"has_num_rejected_on", "has_num_rejected_off", "some_rejected",
                                                       "mrope_positions", "several_requests", "spare_buffers",
                                                       "query_crosses_kv_block"},
              "eagle_prepare_next_token_padded_kernel": {"discard_none", "discard_some", "discard_all", "full_row",
                                                         "minus_one_suffix", "several_valid_columns", "several_requests"},
              "expand_kernel": {"temperature", "top_k", "top_p", "replaced", "empty_row", "several_requests"},
              "rejection_greedy_sample_kernel": {"all_greedy", "mixed_batch", "greedy_tensor_all_true", "synthetic_mode",
                                                 "first_rejected", "later_rejected", "all_accepted", "ragged"}}
"""Features of each side of a mode that :func:`test_batch_features_are_the_records_features_of_each_case`
must see (the rejection sampler's: with and without draft probabilities; a Model Runner V2
step's: all of them, but those of size)."""


SIZE_FEATURES = {"many_requests", "logits_past_1024", "beyond_1024_rows", "sixteen_drafts", "offsets_past_32767",
                 "max_num_seqs_1024", "padding_past_1024", "chunk_past_1024",
                 "query_past_1024", "vocab_past_131072"}
"""The features of a Model Runner V2 step's size, which a test's batches of up to 32 rows do not
reach (:func:`test_step_batches_reach_their_size_features_at_production_scale` does; a
verification step's large vocabulary comes in one batch in twenty)."""


TOUR_ONLY = {"compute_new_slot_mapping": {"beyond_1024_requests"}}
"""Features that only one of a target's tour shapes reaches (one case in 30), which a test's
sixty small cases may miss: :func:`test_step_batches_reach_their_size_features_at_production_scale`
requires them instead (its tour kind of batch)."""


@pytest.mark.parametrize("name", [n for n in BATCHED if isinstance(device_targets()[n], StepBatchDevice)])
def test_step_batches_reach_their_size_features_at_production_scale(name):
    """A batch of Model Runner V2 steps at the device's own scale (up to 1024 rows, a tail to
    4096) reaches its size features, each case in the production tier."""
    from eaglefuzz.harness.targets import TARGETS

    target = device_targets()[name]
    seen = set()
    for kind in (None, *target.kinds):  # a kind of batch a run draws now and then: one of each
        batch = target.draw_batch((3, 4), "cpu", 32, **({"kind": kind} if kind else {}))
        seen |= set().union(*target.batch_features(batch, target.oracle_batch(batch)))
        for k in range(len(batch)):
            TARGETS[name].validate(target.to_case(batch.case(k)))
    assert (SIZE_FEATURES & set(TARGETS[name].features)) | TOUR_ONLY.get(name, set()) <= seen


@pytest.mark.parametrize("name", BATCHED)
def test_batch_features_are_the_records_features_of_each_case(name):
    """The features a batch counts for every case it checked (:meth:`batch_features`, from the
    sizes and modes the host knows) are exactly those the record's ``features_of`` gives each
    case, in short epochs and full ones, with and without draft probabilities."""
    from eaglefuzz.harness.targets import TARGETS

    target = device_targets()[name]
    assert target.batch_decides <= set(TARGETS[name].features)
    seen = set()
    for b in range(12):
        batch = target.draw_batch((5 + b // 3, 60 + b), "cpu", 5, 8 if b % 2 else 2, share=(0.25, 1.0)[b % 2])
        for k, got in enumerate(target.batch_features(batch, target.oracle_batch(batch))):
            want = TARGETS[name].features_of(target.to_case(batch.case(k))) & target.batch_decides
            assert got == want, (b, k, got ^ want)
            seen |= got
    if isinstance(target, StepBatchDevice):  # a Model Runner V2 step's: every feature but those of size and scale
        assert set(TARGETS[name].features) - SIZE_FEATURES - set(TARGETS[name].scale_features) - TOUR_ONLY.get(name, set()) <= seen
        return
    assert BOTH_SIDES.get(name, {"draft_probs", "no_draft_probs", "several_requests", "ragged"}) <= seen  # the test sees both sides


def test_copy_and_expand_batch_features_of_ids_below_65536():
    """``ids_past_65535`` of a batched copy_and_expand case whose next-token ids all lie below
    65536 comes from the ids its valid slots copy (the slow path), as ``features_of`` has it:
    with every copied id below 65536 too, and with some above."""
    from eaglefuzz.harness.targets import TARGETS

    name = "copy_and_expand_eagle_inputs_kernel"
    target = device_targets()[name]
    seen = set()
    for b in range(4):
        batch = target.draw_batch((0, 80 + b), "cpu", 4, 8)
        batch.cat["next_token_ids"].clamp_(max=65535)
        if b % 2:
            batch.cat["target_token_ids"].clamp_(max=65535)
        for k, got in enumerate(target.batch_features(batch, target.oracle_batch(batch))):
            want = TARGETS[name].features_of(target.to_case(batch.case(k))) & target.batch_decides
            assert got == want, (b, k, got ^ want)
            seen.add("ids_past_65535" in got)
    assert seen == {True, False}


def test_batch_features_of_recovered_winners_past_the_first_tiles(monkeypatch):
    """The recovered kernel's features its winners decide (later tiles, the partial last tile,
    ids past 32767), on a vocabulary of 40000 (five of vLLM's 8192-token tiles, the last
    partial), with and without draft probabilities: as ``features_of`` gives them."""
    from eaglefuzz.harness.targets import TARGETS
    from eaglefuzz.harness.targets.sample_recovered_tokens_kernel import device as sr_device

    name = "sample_recovered_tokens_kernel"
    target = device_targets()[name]
    monkeypatch.setattr(sr_device, "draw_vocab", lambda rng, on_cpu: 40000)
    seen = set()
    for b in range(6):
        batch = target.draw_batch((900 + b, 70 + b), "cpu", 3, 4, share=1 / 64)
        for k, got in enumerate(target.batch_features(batch, target.oracle_batch(batch))):
            want = TARGETS[name].features_of(target.to_case(batch.case(k))) & target.batch_decides
            assert got == want, (b, k, got ^ want)
            seen |= got
    assert {"later_tile", "winner_past_32767", "partial_last_tile"} <= seen
    target.release_tables()  # not the patched vocabulary's tables for a later test


def test_the_recovered_oracle_on_a_top_k_support_is_the_whole_row_oracle():
    """§13's torch oracle given the target's top-k positions (what the device batches draw in
    most epochs) reads them alone: the same winners as over whole rows, with and without draft
    probabilities, float32 and float64 noise, rows of zeros, one-hot rows at the draft id; and
    a table that breaks its support (a nonzero off it, a repeated position, a negative draft
    probability) is an error, not a silent winner."""
    import torch

    from eaglefuzz.harness.targetkit.device_draws import topk_table
    from eaglefuzz.oracles import tensor_ops

    gen = torch.Generator().manual_seed(0)
    seen = set()
    for trial in range(48):
        rng = np.random.default_rng(trial)
        V, R, B = int(rng.integers(1, 700)), int(rng.integers(1, 40)), int(rng.integers(1, 10))
        target, support = topk_table(rng, gen, R, V, "cpu")
        target[: R // 3] = 0.0
        hot = torch.rand((R, 1), generator=gen) < 0.3
        target = torch.where(hot, torch.zeros_like(target).scatter_(1, support[:, :1], 1.0), target)
        draft = None if trial % 2 else torch.rand((R, V), generator=gen).softmax(-1)
        if draft is not None:
            draft[::3] = target[::3]
        d = rng.integers(0, 6, size=B)
        N = int(d.sum())
        ids = torch.from_numpy(rng.integers(-1, V, size=N)).to(torch.int32)
        rows = torch.from_numpy(rng.integers(0, R, size=N))
        ids[::2] = support[rows[::2], 0].to(torch.int32)  # a one-hot row's token: every score 0
        iq = torch.empty((7, V), dtype=torch.float64 if trial % 4 == 0 else torch.float32)
        iq.exponential_(generator=gen).reciprocal_()
        kw = dict(cu_num_draft_tokens=torch.from_numpy(np.cumsum(d)).to(torch.int32), draft_token_ids=ids,
                  draft_probs=draft, target_probs=target, inv_q=iq, vocab_size=V, max_spec_len=int(d.max()),
                  table_row=rows, noise_row=torch.from_numpy(rng.integers(0, 7, size=B)))
        whole = tensor_ops.sample_recovered_tokens(**kw)["output_token_ids"]
        on_support = tensor_ops.sample_recovered_tokens(**kw, support=support)["output_token_ids"]
        assert torch.equal(whole[0], on_support[0]) and torch.equal(whole[1], on_support[1]), trial
        assert whole[1].dtype == torch.int32
        seen |= {"zero" if w == 0 else "winner" for w in whole[1].tolist()}
    assert seen == {"zero", "winner"}
    V = 64
    target, support = topk_table(np.random.default_rng(1), gen, 4, V, "cpu")
    kw.update(target_probs=target, draft_probs=None, vocab_size=V, inv_q=torch.ones((7, V)),
              draft_token_ids=torch.zeros(N, dtype=torch.int32), table_row=torch.zeros(N, dtype=torch.int64))
    off = target.clone()
    off[0, int(torch.isin(torch.arange(V), support[0]).logical_not().nonzero()[0])] = 0.5
    repeated = support.clone()
    repeated[:, -1] = repeated[:, 0]
    for bad, why in [({"target_probs": off}, "off its support"), ({"support": repeated}, "repeats"),
                     ({"draft_probs": torch.full((4, V), -1e-9)}, "negative")]:
        with pytest.raises(ValueError, match=why):
            tensor_ops.sample_recovered_tokens(**(kw | {"support": support} | bad))


def test_the_recovered_batches_of_an_epoch_find_its_known_winners_as_computed_afresh():
    """``sample_recovered_tokens_kernel``'s ``oracle_batch`` keeps each table epoch's winners
    (a token's table row, noise row and draft id decide it) and computes only the tokens no
    earlier batch of the epoch had: over the batches of two epochs, with and without draft
    probabilities, top-k and dense tables, the writes equal the oracle's on the batch alone,
    and later batches find a share of their tokens known."""
    import torch

    from eaglefuzz.harness.targets.sample_recovered_tokens_kernel.device import known_winners
    from eaglefuzz.oracles import tensor_ops

    target = device_targets()["sample_recovered_tokens_kernel"]
    seen, keys, computed = set(), 0, 0
    for epoch in (0, 1, 2, 3):
        for b in range(6):
            batch = target.draw_batch((700 + epoch, 40 + b), "cpu", 4, 8)
            e, sh = batch.extra, batch.shared
            mode = "draft_probs" in sh
            before = len(e["winners"][mode][0]) if mode in e["winners"] else 0
            got = target.oracle_batch(batch)["output_token_ids"]
            keys += tensor_ops.recovered_keys(cu_num_draft_tokens=e["cu"], draft_token_ids=batch.cat["draft_token_ids"],
                                              vocab_size=e["V"], max_spec_len=e["L"], with_draft=mode,
                                              table_row=e["table_row"], noise_row=e["noise_row"])[1].shape[0]
            computed += len(e["winners"][mode][0]) - before
            want = tensor_ops.sample_recovered_tokens(
                cu_num_draft_tokens=e["cu"], draft_token_ids=batch.cat["draft_token_ids"], draft_probs=sh.get("draft_probs"),
                target_probs=sh["target_probs"], inv_q=sh["inv_q"], vocab_size=e["V"], max_spec_len=e["L"],
                table_row=e["table_row"], noise_row=e["noise_row"], support=e["support"])["output_token_ids"]
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and got[1].dtype == torch.int32, (epoch, b)
            seen.add((mode, e["support"] is not None))
    assert {m for m, _ in seen} == {True, False} and {s for _, s in seen} == {True, False}
    assert computed < 0.9 * keys, (computed, keys)  # a share of the batches' distinct tokens was known (a quarter here)
    calls = []
    memo: dict = {}
    key = torch.tensor([[0, 0, -1], [0, 1, 3], [2, 0, -1]])
    def compute(k):  # noqa: E306
        calls.append(k.shape[0])
        return k[:, 0] * 10 + k[:, 1]
    assert known_winners(memo, True, key, (4, 2, 8), compute).tolist() == [0, 1, 20]
    assert known_winners(memo, True, torch.tensor([[2, 0, -1], [3, 1, 7], [0, 0, -1]]), (4, 2, 8), compute).tolist() == [20, 31, 0]
    assert known_winners(memo, False, key[:1], (4, 2, 8), compute).tolist() == [0]
    assert calls == [3, 1, 1]  # the second call computed its one new key alone, the other mode its own


def test_a_rejection_batch_is_settled_by_its_own_windows(monkeypatch):
    """``_rejection_kernel``'s batches settle by §33's windows: a request whose acceptance test
    lands in a window (here, request 0's while it keeps its drawn seed) is re-keyed, and the
    batch's §33 is the settled one, no window left in it."""
    import torch

    from eaglefuzz.harness.targetkit import verify_chain

    real, drawn = verify_chain.rejection_of, {}

    def windowed(b, method=None, q=None):  # noqa: ANN001, ANN202
        res = real(b, method, q)
        row = int((verify_chain.batch_requests(b) if q is None else q).state[0])
        seed = int(b.cat["seed"][row])
        window = res["window"].clone()
        window[0] |= drawn.setdefault("seed", (row, seed)) == (row, seed)
        return res | {"window": window}

    monkeypatch.setattr(verify_chain, "rejection_of", windowed)
    b = device_targets()["_rejection_kernel"].draw_batch((5, 6), "cpu", 4)
    row, seed = drawn["seed"]
    assert int(b.cat["seed"][row]) != seed, "the request in a window kept its seed"
    assert not bool(b.extra["rejection"]["window"].any())
    assert torch.equal(b.extra["rejection"]["num_sampled"], real(b)["num_sampled"])


@pytest.mark.parametrize("name", ["_resample_kernel", "_insert_resampled_kernel"])
def test_a_settled_chain_computes_again_only_the_re_keyed_requests(name, monkeypatch):
    """Settling a batch by §33's and §34's windows computes §34 again, after the first attempt,
    only for the requests it re-keyed (each request's draws its own): with windows forced on
    the requests whose seeds are multiples of 3 (any attempt: some settle late, some never and
    get placeholders), the batch (its every array and the §34 results it hands on) equals, bit
    for bit, the batch of the reference that computes every request again at each attempt, and
    fewer rows are computed."""
    import torch

    from eaglefuzz.harness.targetkit import verify_chain
    from eaglefuzz.oracles import tensor_ops_v2

    real_rejection, real_rows, rows = verify_chain.rejection_of, tensor_ops_v2.resample_rows, []

    def windowed(b, method=None, q=None):  # noqa: ANN001, ANN202
        res = real_rejection(b, method, q)
        state = (verify_chain.batch_requests(b) if q is None else q).state
        return res | {"window": res["window"] | (b.cat["seed"][state] % 3 == 0)}

    def counted(target, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        rows.append(target.shape[0])
        return real_rows(target, *args, **kwargs)

    monkeypatch.setattr(verify_chain, "rejection_of", windowed)
    monkeypatch.setattr(tensor_ops_v2, "resample_rows", counted)
    monkeypatch.setenv(verify_chain.AT_ONCE, "0")  # one call an attempt (at once: tests/test_settle_at_once.py)
    real_settle = verify_chain.settle_chain
    got = device_targets()[name].draw_batch((7, 8), "cpu", 6)
    fewer = sum(rows)
    rows.clear()
    monkeypatch.setattr(verify_chain, "settle_chain", lambda b, st: real_settle(b, st, every_request_again=True))
    monkeypatch.setattr(sys.modules[type(device_targets()[name]).__module__], "settle_chain",
                        lambda b, st: real_settle(b, st, every_request_again=True))
    ref = device_targets()[name].draw_batch((7, 8), "cpu", 6)
    assert fewer < sum(rows), "no request was re-keyed: the test forces none"

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.contiguous().view(torch.uint8),
                                                                         b.contiguous().view(torch.uint8))

    assert got.cat.keys() == ref.cat.keys() and all(same(got.cat[n], ref.cat[n]) for n in ref.cat)
    draws, ref_draws = got.extra.get("draws", {}), ref.extra.get("draws", {})
    assert draws.keys() == ref_draws.keys() and all(same(draws[n], ref_draws[n]) for n in ref_draws)


def test_table_epochs_are_short_early_in_a_run():
    """A short run meets many vocabularies: epochs of 1, 1, 2, 2, 4, 4, ... batches, each
    drawing tables sized by its length, then full epochs."""
    from eaglefuzz.harness.targetkit.device_batch import epoch_of

    got = [epoch_of(i, 8) for i in range(16)]
    assert [e for e, _ in got] == [0, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6]
    assert [s for _, s in got[:8]] == [1 / 8, 1 / 8, 2 / 8, 2 / 8, 2 / 8, 2 / 8, 4 / 8, 4 / 8]
    assert epoch_of(13, 8) == (5, 0.5) and epoch_of(14, 8) == (6, 1.0) and epoch_of(30, 8) == (8, 1.0)
    assert len({epoch_of(i, 64)[0] for i in range(130)}) == 13


HOST = sorted(n for n, t in device_targets().items() if t.checked_on == "host")


@pytest.mark.parametrize("name", [*BATCHED, HOST[0]])
def test_a_batch_catches_a_guard_band_write(name, monkeypatch, backend, needs):
    """A write into the guard band after one case's output, in a batch of cases (drawn on the
    device, or made on the host by the producers), is a difference: the batch's cases are then
    checked one at a time (the write is there too), and the NumPy and Numba oracles, which see
    the kernel alone, make it an oracle disagreement."""
    import torch

    target = device_targets()[name]
    launch = type(target).launch

    def stray(self, impl, views, dc):  # noqa: ANN001, ANN202
        launch(self, impl, views, dc)
        out = views[next(iter(dc.outputs))] if dc.outputs else next(
            (v for n, v in views.items() if n.startswith("out")), None)
        out = views[min(target.record.inout)] if out is None else out  # no output: an input updated in place
        torch.as_strided(out, (1,), (1,), out.storage_offset() + out.numel()).fill_(7)

    monkeypatch.setattr(type(target), "launch", stray)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=8, seed=0, cross_check_share=0.0, workers=0)
    (finding,) = stats.findings
    assert finding.kind == "oracle disagreement", finding.report()


@pytest.mark.parametrize("name", BATCHED)
def test_a_launch_that_fails_in_a_batch_is_a_finding(name, monkeypatch, backend, needs):
    """A launch that raises in the middle of a batch (here the harness's launch, the kernel
    itself fine: the NumPy and Numba oracles see nothing, so an oracle disagreement) is the
    batch's finding, never dropped for the cross-checks of a clean batch; the cases after it
    are not counted as checked."""
    target = device_targets()[name]
    launch = type(target).launch
    calls = []

    def failing(self, impl, views, dc):  # noqa: ANN001, ANN202
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("a launch that fails")
        launch(self, impl, views, dc)

    monkeypatch.setattr(type(target), "launch", failing)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=24, seed=0, cross_check_share=0.0, shrink=False)
    (finding,) = stats.findings  # batches of 3 cases: the second launch is the first batch's second case
    assert finding.kind == "oracle disagreement", finding.report()
    assert stats.examples == 2


EPOCHS = sorted(n for n, t in device_targets().items() if t.table_epoch > 1)


@pytest.mark.parametrize("name", EPOCHS)
def test_a_run_gives_back_the_tables_its_batches_kept(name, monkeypatch, backend, needs):
    """A table epoch's large inputs (GBs of a GPU's memory) are kept from one batch to the
    next and let go when the run ends: the process's next target, or a lane beside it, finds
    that memory free."""
    target = device_targets()[name]
    draw = type(target).draw_batch
    kept = []

    def drawing(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        batch = draw(self, *args, **kwargs)
        kept.append(self._epoch[1] is not None)
        return batch

    monkeypatch.setattr(type(target), "draw_batch", drawing)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    device_fuzz_target(name, impls, backend.device, examples=8, seed=0, cross_check_share=0.0, workers=0)
    assert len(kept) >= 2 and all(kept)
    assert target._epoch == (None, None)


def _views(arenas, upload, expected: bool):  # noqa: ANN001, ANN202
    """The views ``upload`` makes of ``arenas``' pre-filled buffers, or of its expected ones."""
    full = arenas.full
    arenas.full = arenas.expected if expected else full
    try:
        return upload("cpu")
    finally:
        arenas.full = full


@pytest.mark.parametrize("name", HOST)
def test_host_batches_hold_the_cases_and_buffers_of_one_at_a_time(name):
    """A host-checked target's batches (``HostBatchArenas``) hold the cases one at a time makes,
    in the same order, the last batch cut at the run's limit; each case's views hold, element
    for element, what its own ``HostArenas`` holds, before the launch (inputs, pre-filled
    outputs) and as expected after it; its cases, as the launching process rebuilds them from
    the batch a producer sent (pickled), hold the inputs as drawn, bit for bit."""
    import pickle

    import numpy as np
    import torch

    from eaglefuzz.harness.checking.device_mode.producers import HostCases

    single = HostCases(name, seed=5, first=3, step=2, max_requests=8, workers=0)
    batched = HostCases(name, seed=5, first=3, step=2, max_requests=8, workers=0, batch=3, limit=7)
    batches = [pickle.loads(pickle.dumps(hb)) for hb in batched]  # as a producer process sends them
    assert [len(b) for b in batches] == [3, 3, 1]
    for hb in batches:
        assert hb.mismatch() > 0  # written elements are pre-filled with their value's lowest bit flipped
        for expected in (False, True):
            half = hb.host[hb.full_bytes :] if expected else hb.host[: hb.full_bytes]
            views = hb.views_of(torch.from_numpy(half.copy()))
            for k, dc in enumerate(hb.cases):
                if not expected:
                    dc1, arenas = next(single)
                    assert dc.scalars == dc1.scalars and dc.outputs == dc1.outputs
                    assert dc.inputs.keys() == dc1.inputs.keys()
                    for n, a in dc1.inputs.items():
                        np.testing.assert_array_equal(dc.inputs[n], a, strict=True)
                        assert dc.inputs[n].view(np.uint8).tobytes() == a.view(np.uint8).tobytes(), n
                    ones = [arenas]
                    hb.alone = getattr(hb, "alone", []) + ones
                alone = _views(hb.alone[k], hb.alone[k].upload, expected)
                assert set(views[k]) == set(alone)
                for n, v in alone.items():
                    assert views[k][n].dtype == v.dtype and views[k][n].shape == v.shape, n
                    assert torch.equal(views[k][n].view(torch.uint8), v.view(torch.uint8)), (n, expected)
    assert np.unique([str(dc.scalars) for hb in batches for dc in hb.cases]).size > 1


def test_a_wrong_batched_oracle_is_an_oracle_disagreement(monkeypatch, backend, needs):
    """The batched oracle is checked as the per-case one is: a batched oracle that expects what
    the contract does not (here only when it runs over several cases at once) makes the batch
    differ while no case alone does: an oracle disagreement, never a kernel finding."""
    from eaglefuzz.oracles import tensor_ops

    name = "rejection_random_sample_kernel"
    right = tensor_ops.rejection_random_sample

    def wrong(**kw):  # noqa: ANN003, ANN202
        out = right(**kw)
        w = out[0] if kw.get("with_reads") else out
        if kw.get("out_start") is not None:
            index, value = w["output_token_ids"]
            w["output_token_ids"] = (index, value + 1)
        return out

    monkeypatch.setattr(tensor_ops, "rejection_random_sample", wrong)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=8, seed=0, cross_check_share=0.0)
    (finding,) = stats.findings
    assert finding.kind == "oracle disagreement", finding.report()
    assert "no case alone differs" in finding.report()


@pytest.mark.parametrize("name", HOST)
def test_a_host_batch_counts_the_features_of_every_case(name, backend, needs):
    """Every case of a clean host batch is checked element for element: the run's coverage is
    the record's features of every case drawn, not of the few cross-checked ones."""
    from eaglefuzz.harness.checking.device_mode.producers import HostCases
    from eaglefuzz.harness.targets import TARGETS

    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=8, seed=4, cross_check_share=0.0,
                               workers=0, scale_cases=False)
    assert not stats.findings, stats.findings[0].report()
    assert stats.cross_checked < 8
    max_requests = 8 if backend.device == "cpu" else None
    cases = HostCases(name, seed=4, first=0, step=1, max_requests=max_requests, workers=0)
    dt = device_targets()[name]
    drawn = set().union(*(TARGETS[name].features_of(dt.to_case(next(cases)[0])) for _ in range(8)))
    assert stats.features == drawn


def test_batched_rejection_tables_make_a_quotient_of_one_and_subnormal_probabilities():
    """The shared tables of ``rejection_random_sample_kernel``'s batches: in some epochs the
    draft agrees with the target on every fourth row (``p == q``: the quotient exactly 1,
    ``quotient_one``), in some the target is subnormal at the drafted ids of other rows
    (``subnormal_prob``). Independent softmax tables at production vocabularies never made
    either (H200 runs missed both); under the interpreter's small vocabularies chance does, so
    the test asks for the tables themselves."""
    import numpy as np
    import torch

    dt = device_targets()["rejection_random_sample_kernel"]
    tiny = float(np.finfo(np.float32).tiny)
    agree = subnormal = 0
    for seed in range(24):
        t = dt._tables(seed, "cpu", 8)
        target, draft, ids = t["target_probs"], t["draft_probs"], t["draft_ids"].long()
        agree += bool(torch.equal(draft[::4], target[::4]))
        rows = torch.arange(1, t["R"], 4)
        at = target[rows[:, None], ids[rows]]
        subnormal += bool(((at > 0) & (at < tiny)).all())
    assert 0 < agree < 24 and 0 < subnormal < 24, (agree, subnormal)


@pytest.mark.parametrize("name", HOST)
def test_host_features_are_the_records_features_of_each_case(name):
    """The features a producer counts for a host-checked case (:meth:`host_features`, from the
    oracle's writes where a target computes them itself) are exactly those the record's
    ``features_of`` gives it, on small cases and at production scale (4096 requests, 16
    drafts, synthetic mode, padding drafts)."""
    import numpy as np

    from eaglefuzz.harness.targets import TARGETS

    dt = device_targets()[name]
    seen = set()
    for i in range(240):
        rng = np.random.default_rng(1000 + i)
        dc = dt.draw(rng, None, "cpu", 8) if i % 4 else dt.draw(rng, None, "cpu")
        got = dt.host_features(dc, dt.oracle(dc))
        want = TARGETS[name].features_of(dt.to_case(dc))
        assert got is None or got == want, (i, got ^ want)
        seen |= want
    assert len(seen) >= 8, seen  # the draws reach both sides of most features


@pytest.mark.parametrize("name", HOST[:2])
def test_a_host_batch_on_a_gpu_is_compared_there_bit_for_bit(name):
    """A host batch copied to a GPU is compared there (launched half against expected half, as
    64-bit words) and copied back only where that finds a difference: a batch whose launched
    half holds what is expected is clean; one bit flipped anywhere (an output, the last byte
    of the last guard band, an input) is found and counted as one element. Simulated here with
    a copy in host memory standing for the GPU's."""
    import numpy as np
    import torch

    from eaglefuzz.harness.checking.device_mode.producers import host_batch

    hb = host_batch(name, 3, [0, 1, 2], max_requests=8)
    F = hb.full_bytes
    before, expected = hb.host.copy(), hb.host[F:].copy()
    for byte in (None, 0, F - 1, F // 2, hb._regions[next(iter(hb._regions))][0] + 4 * 300):
        dev = torch.from_numpy(np.concatenate([expected, expected]))
        if byte is not None:
            dev[byte] ^= 1 << (byte % 8)
        hb.dev, hb._copied = dev, True
        assert hb.mismatch() == (0 if byte is None else 1), byte
    hb.dev = torch.from_numpy(before)  # as uploaded, nothing launched: every written element differs
    dt = device_targets()[name]
    assert hb.mismatch() == sum(w[0].size for k in range(len(hb)) for w in dt.oracle(hb.case(k)).values()) > 0


@pytest.mark.parametrize("name", HOST)
def test_a_host_batchs_oracle_gives_each_case_its_own_writes(name):
    """The writes a producer lays out for a batch (:meth:`oracle_many`: one oracle call per
    mode where a target concatenates its cases) are, case for case, element for element and
    bit for bit, the oracle's on that case alone (in any order: each element is written once),
    small cases and production ones mixed."""
    import numpy as np

    dt = device_targets()[name]
    for b in range(3):
        rngs = [np.random.default_rng(2000 + 64 * b + i) for i in range(64)]
        cases = [dt.draw(r, None, "cpu", 8) if i % 3 else dt.draw(r, None, "cpu") for i, r in enumerate(rngs)]
        for dc, many in zip(cases, dt.oracle_many(cases), strict=True):
            alone = dt.oracle(dc)
            assert many.keys() == alone.keys()
            for n, (index, value) in alone.items():
                got, want = np.argsort(many[n][0], kind="stable"), np.argsort(index, kind="stable")
                np.testing.assert_array_equal(many[n][0][got], index[want], strict=True)
                np.testing.assert_array_equal(many[n][1][got].view(np.uint8), value[want].view(np.uint8), strict=True)


def test_host_batches_made_by_a_worker_travel_in_reused_shared_slots():
    """A producer process writes its batch's buffer into a slot (a file in shared memory) that
    the launching process maps, instead of pickling megabytes: the batches hold, byte for byte
    and case for case, what batches made in process hold; a released slot takes the next batch
    (a run of ten batches uses at most the pool's depth plus two); a batch larger than its slot
    travels pickled, the same, and later slots are made larger."""
    import numpy as np

    from eaglefuzz.harness.checking.device_mode import producers
    from eaglefuzz.harness.checking.device_mode.producers import HostCases

    name = "eagle_prepare_inputs_padded_kernel"
    ref = list(HostCases(name, seed=5, first=3, step=2, max_requests=8, workers=0, batch=3, limit=30))
    cases = HostCases(name, seed=5, first=3, step=2, max_requests=8, workers=1, batch=3, limit=30)
    cases.slots.capacity = 64  # smaller than any batch: the first ones travel pickled
    got = []
    try:
        for hb in cases:
            got.append((hb.slot, hb.host.copy(), [hb.case(k) for k in range(len(hb))]))
            hb.release()
        assert cases.slots.count <= cases.depth + 2
    finally:
        cases.close()
        producers._shutdown()  # the suite ends the processes it starts
    assert len(got) == len(ref) == 10
    assert got[0][0] is None and any(slot is not None for slot, _, _ in got), [s for s, _, _ in got]
    assert len({slot for slot, _, _ in got if slot}) < sum(slot is not None for slot, _, _ in got)  # reused
    for (_, host, made), want in zip(got, ref, strict=True):
        assert host.tobytes() == want.host.tobytes()
        for dc, dw in zip(made, want.cases, strict=True):
            assert dc.scalars == dw.scalars and dc.outputs == dw.outputs
            for n, a in dw.inputs.items():
                np.testing.assert_array_equal(dc.inputs[n], a, strict=True)


def test_slot_folders_of_ended_processes_are_removed(tmp_path):
    """Shared memory is memory: the slot folders of a process that ended without its exit
    handlers are removed by the next run's; a living process's are kept."""
    import os
    import subprocess
    import sys

    from eaglefuzz.harness.checking.device_mode.producers import _remove_orphans

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    for name in (f"eaglefuzz-slots-{gone}-abc", f"eaglefuzz-slots-{os.getpid()}-def", "other-123-x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "slot0").write_bytes(b"x")
    _remove_orphans(str(tmp_path), "eaglefuzz-slots-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"eaglefuzz-slots-{os.getpid()}-def", "other-123-x"])


def _fatal_on_cpu(monkeypatch) -> None:  # noqa: ANN001
    """A CUDA error counts as fatal on the CPU too (no GPU here: the sticky error is faked)."""
    from eaglefuzz.harness.targetkit.base import Outcome

    crashed = Outcome.crashed

    def fatal(self, exc, device, context=""):  # noqa: ANN001, ANN202
        crashed(self, exc, device, context)
        self.fatal = "CUDA error" in str(exc)
        return self

    monkeypatch.setattr(Outcome, "crashed", fatal)


RECORD_BATCHED = "_insert_resampled_kernel"
"""A target checked here as its record alone would (``record_device``: record host batches)."""


@pytest.mark.parametrize("name", [BATCHED[0], HOST[0], RECORD_BATCHED])
@pytest.mark.parametrize("seen_at", ["launch", "wait"])
def test_a_batch_that_loses_the_device_names_every_case_launched_as_a_suspect(name, seen_at, monkeypatch, backend,
                                                                            needs, tmp_path):
    """A sticky CUDA error in a batch (faked: raised by the third launch, or by the batch's one
    wait for the device after its launches) is a fatal crash finding, never a traceback; since
    a CUDA fault surfaces at a later call than the launch that made it, every case launched so
    far is a suspect, in launch order, the first being the finding's case; with a journal the
    process ends with EXIT_DEVICE_LOST, the suspects journaled for the supervisor to run one at
    a time (run/supervisor.py locate_fault)."""
    from eaglefuzz.harness.checking.device_mode import engine
    from eaglefuzz.harness.core.exitcodes import EXIT_DEVICE_LOST
    from eaglefuzz.harness.run.journal import Journal, orphans
    from eaglefuzz.harness.targetkit.device_batch import BatchArenas, HostBatchArenas

    _fatal_on_cpu(monkeypatch)
    if name == RECORD_BATCHED:
        from eaglefuzz.harness.targetkit.device import record_device
        from eaglefuzz.harness.targets import TARGETS, role

        monkeypatch.setattr(role(name, "device"), "DEVICE", record_device(TARGETS[name]))
    target = device_targets()[name]
    lost = RuntimeError("CUDA error: an illegal memory access was encountered")
    calls: list[int] = []
    owner = type(target.record) if target.checked_on == "record" else type(target)  # who launches a case
    if seen_at == "launch":
        launch = owner.launch

        def failing(self, impl, views, dc):  # noqa: ANN001, ANN202
            calls.append(1)
            if len(calls) == 3:
                raise lost
            launch(self, impl, views, dc)

        monkeypatch.setattr(owner, "launch", failing)
    else:
        def wait(self):  # noqa: ANN001, ANN202
            raise lost

        monkeypatch.setattr(BatchArenas if target.batch else HostBatchArenas, "mismatch", wait)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    stats = device_fuzz_target(name, impls, backend.device, examples=24, seed=0, shrink=False, workers=0)
    (finding,) = stats.findings
    assert finding.kind == "crash" and finding.fatal, finding.report()
    k = 3 if seen_at == "launch" else len(finding.suspects)
    assert len(finding.suspects) == k and k >= 3 and finding.case is finding.suspects[0]
    assert len({str(c.arrays) for c in finding.suspects}) == k  # the batch's cases, each once
    assert stats.examples == k
    if target.batch:  # drawn again in a fresh process (redraw.py): the batch's cases as this process draws them
        cpu = backend.device == "cpu"
        asked = max(1, min(engine.CPU_BATCH if cpu else target.batch, -(-24 // engine.MIN_BATCHES)))
        batch = engine.batch_of(target, 0, 0, asked, backend.device, engine.CPU_MAX_REQUESTS if cpu else None)
        for j, c in enumerate(finding.suspects):
            want = engine._case(target, batch.case(j), {n: t.cpu() for n, t in batch.case(j).inputs.items()})
            assert sorted(c.arrays) == sorted(want.arrays) and c.scalars == want.scalars
            for n, a in want.arrays.items():
                assert np.array_equal(np.asarray(c.arrays[n]), np.asarray(a)), n

    class Exited(Exception):
        pass

    def leave(code: int) -> None:  # the process's end, seen here (a fork of this one would deadlock in torch)
        raise Exited(code)

    monkeypatch.setattr(engine.os, "_exit", leave)
    if seen_at == "launch":
        calls.clear()
    with pytest.raises(Exited) as exited:
        device_fuzz_target(name, impls, backend.device, examples=24, seed=0, shrink=False, workers=0,
                           journal=Journal(tmp_path / "j"))
    assert exited.value.args == (EXIT_DEVICE_LOST,)
    (orphan,) = orphans(tmp_path / "j")
    assert "device became unusable" in orphan.message
    assert [c.arrays.keys() for c in orphan.suspects] == [c.arrays.keys() for c in finding.suspects]
    for a, b in zip(orphan.suspects, finding.suspects, strict=True):
        assert all(a.arrays[n].tobytes() == b.arrays[n].tobytes() for n in a.arrays) and a.scalars == b.scalars  # NaN too


def test_a_batch_still_being_made_when_the_time_is_up_ends_the_run():
    """``--time-budget`` holds while the producers make a batch: a batch not made by the run's
    deadline ends the iteration (here one never made: the wait gives up at the deadline instead
    of blocking), rather than the run waiting for it past its budget (a record target's batch
    of production-scale draws takes seconds)."""
    import threading
    import time
    from concurrent.futures import Future

    from eaglefuzz.harness.checking.device_mode.producers import HostCases

    hc = HostCases(HOST[0], 0, 0, 1, 8, workers=1, batch=4)

    class Never:
        def submit(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            return Future()

    hc.pool, hc.deadline = Never(), time.monotonic() + 0.2
    ended: list[str] = []

    def wait() -> None:
        try:
            next(hc)
        except StopIteration:
            ended.append("stopped")

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    t.join(60)
    hc.close()
    assert ended == ["stopped"]


def test_a_run_under_a_time_budget_ramps_its_batches_up_over_the_same_cases():
    """Under a time budget (``ramp``) the first batches hold 1, 2, 4, ... cases up to the batch
    size, so that a short run checks cases while the later batches are made; the cases are the
    same, in the same order, as without the ramp."""
    from eaglefuzz.harness.checking.device_mode.producers import HostCases

    def run(ramp: bool) -> list:  # noqa: FBT001
        return list(HostCases(HOST[0], seed=5, first=0, step=1, max_requests=8, workers=0, batch=4, limit=12, ramp=ramp))

    plain, ramped = run(False), run(True)
    assert [len(hb) for hb in plain] == [4, 4, 4]
    assert [len(hb) for hb in ramped] == [1, 2, 4, 4, 1]
    flat = [hb.case(k) for hb in plain for k in range(len(hb))]
    assert len(flat) == sum(len(hb) for hb in ramped) == 12
    for a, b in zip(flat, (hb.case(k) for hb in ramped for k in range(len(hb))), strict=True):
        assert a.scalars == b.scalars and all((a.inputs[n] == b.inputs[n]).all() for n in a.inputs)


def test_eagle_step_device_cases_share_a_few_compile_time_constants():
    """``eagle_step_slot_mapping_metadata_kernel``'s block size, model length and table width are
    ``tl.constexpr``: a device run draws them from its pool of deployments (each compiled once per
    process on a GPU), not a triple per case, which would compile the kernel for nearly every case."""
    from eaglefuzz.harness.targets.eagle_step_slot_mapping_metadata_kernel.device import deployments

    target = device_targets()["eagle_step_slot_mapping_metadata_kernel"]
    triples = set()
    for j in range(12):
        batch = target.draw_batch((1, j), "cpu", 32, 8)
        triples |= {(s["block_size"], s["max_model_len"], s["n_blocks_per_req"]) for s in batch.scalars}
    assert 8 < len(triples) <= len(deployments()["bs"])


def test_a_cross_check_counts_its_own_predicted_cost():
    """The next cross-check's cost, at the rate measured so far, counts against the share: 1 s
    spent on 4 elements (0.25 s an element) after 4 s, share 0.5 (2 s): a case of 4 elements
    (1 s more, 2 s in all) is checked, one of 8 (2 s more) is not, though the seconds spent so
    far are within the share."""
    assert _may_cross_check(1.0, 4, 4, 4.0, 0.5, None)
    assert not _may_cross_check(1.0, 4, 8, 4.0, 0.5, None)


def test_the_runs_first_cross_check_is_made_at_once():
    """Nothing spent yet: the case is checked whatever the share below 1 and the run's time
    (its cost at :data:`CROSS_CHECK_S_PER_ELEMENT`, 0.1 s here, exceeds the share of it)."""
    size = round(0.1 / CROSS_CHECK_S_PER_ELEMENT)
    for share in (0.0, 0.01, 0.5):
        for elapsed in (0.0, 1.0):
            assert _may_cross_check(0.0, 0, size, elapsed, share, None), (share, elapsed)


def test_a_cross_check_must_fit_the_time_budget():
    """A cross-check ends before the time budget, at the measured rate (1 s for this case after
    10 s) or, for the run's first, at :data:`CROSS_CHECK_S_PER_ELEMENT` (10 s after 5 s), even
    at share 1."""
    assert _may_cross_check(1.0, 4, 4, 10.0, 1.0, None)
    assert _may_cross_check(1.0, 4, 4, 10.0, 1.0, 12.0)
    assert not _may_cross_check(1.0, 4, 4, 10.0, 1.0, 10.5)
    size = round(10 / CROSS_CHECK_S_PER_ELEMENT)
    assert _may_cross_check(0.0, 0, size, 5.0, 1.0, 20.0)
    for share in (1.0, 0.5):
        assert not _may_cross_check(0.0, 0, size, 5.0, share, 12.0), share


def test_cross_check_share_one_checks_every_case_and_zero_none_after_the_first():
    """Share 1: every case, however far the cross-checks' seconds exceed the run's (100 s spent
    after 1 s, 1000 s more predicted); share 0: none after the run's first, however cheap."""
    assert _may_cross_check(100.0, 1, 1000, 1.0, 1.0, None)
    assert not _may_cross_check(1e-6, 10**6, 1, 1000.0, 0.0, None)


def test_the_runs_first_cross_check_is_on_the_batchs_smallest_case():
    """The run's first cross-check (nothing spent) is the batch's smallest case, the others
    follow in order; a later batch is checked in its own order (share 1, no budget: every case)."""
    sizes = [30, 20, 5, 40]

    class FakeStats:
        def __init__(self) -> None:
            self.cross_checked, self.stages = 0, {"cross-check": 0.0}

        def reach(self, name, case) -> None:  # noqa: ANN001
            pass

    def order(cross: list) -> list[int]:
        seen: list[int] = []

        def confirm(case, bad):  # noqa: ANN001, ANN202
            seen.append(case)

        assert _cross_check_clean("t", range(len(sizes)), sizes.__getitem__, lambda j: j, confirm, FakeStats(),
                                  0.0, None, 1.0, cross) is None
        return seen

    first = [0.0, 0]
    assert order(first) == [2, 0, 1, 3] and first[1] == sum(sizes)
    assert order([1.0, 100]) == [0, 1, 2, 3]


HOST_DRAWN = sorted(n for n, dt in device_targets().items() if dt.checked_on == "host")


@pytest.mark.parametrize("name", HOST_DRAWN)
def test_device_draws_reach_every_production_feature_at_the_gpu_size(name):
    """A host-checked target's device draw at the GPU size (its default ``max_requests``, the
    run's seeds; the cases are small, so 600 of them take a second) reaches every production
    feature of its record but the scale features and those its device module declares it leaves
    out (``not_drawn``: §N.4's generated inputs), never one of those, and every case it draws
    lies in the production tier. A draw that stops short of a production extreme (more than
    1024 requests, 16 or more rejected drafts, a row of 128) fails here."""
    from eaglefuzz.harness.generation.strategies import derive_seed
    from eaglefuzz.harness.targets import TARGETS

    dt, target = device_targets()[name], TARGETS[name]
    assert set(dt.not_drawn) <= set(target.features) - set(target.scale_features), "not_drawn names no production feature"
    reached: set[str] = set()
    for i in range(600):
        case = dt.to_case(dt.draw(np.random.default_rng(derive_seed(0, name, "device", i)), None, "cpu"))
        target.validate(case)
        reached |= target.features_of(case)
    missed = set(target.features) - set(target.scale_features) - set(dt.not_drawn) - reached
    assert not missed, f"{name}: 600 device draws at the GPU size never reach {sorted(missed)}"
    assert not reached & set(dt.not_drawn), f"{name}: drawn although declared not drawn: {sorted(reached & set(dt.not_drawn))}"


BATCHED_AT_GPU_SIZE = ("eagle_prepare_next_token_padded_kernel", "expand_kernel", "rejection_greedy_sample_kernel")
"""Batched targets of a V1 kernel whose batches are cheap to draw on the CPU at the GPU's size."""


@pytest.mark.parametrize("name", BATCHED_AT_GPU_SIZE)
def test_device_batches_reach_every_production_feature_at_the_gpu_size(name):
    """A batched target's batches at the GPU size (its default ``max_requests``, the run's
    seeds) reach every production feature of its record but the scale features and those it
    declares it leaves out (``not_drawn``, never one of those), counted as the
    run counts them (:meth:`batch_features` of a clean batch), and every case lies in the
    production tier. A draw that stops short of a production extreme (more than 1024 requests,
    16 or more rejected columns, the int32 vocabulary's last id) fails here."""
    from eaglefuzz.harness.checking.device_mode.engine import batch_of
    from eaglefuzz.harness.targets import TARGETS

    dt, target = device_targets()[name], TARGETS[name]
    reached: set[str] = set()
    for i in range(40):  # a batch draws some modes once for all of its cases: a few dozen batches
        batch = batch_of(dt, 0, i, 16, "cpu")
        reached |= set().union(*dt.batch_features(batch, dt.oracle_batch(batch)))
        for k in range(0, len(batch), 4):
            target.validate(dt.to_case(batch.case(k)))
    missed = set(target.features) - set(target.scale_features) - set(dt.not_drawn) - reached
    assert not missed, f"{name}: 40 batches at the GPU size never reach {sorted(missed)}"
    assert not reached & set(dt.not_drawn), f"{name}: drawn although declared not drawn: {sorted(reached & set(dt.not_drawn))}"


def test_a_batch_that_meets_the_device_out_of_memory_is_checked_again(monkeypatch, backend, needs):
    """Lanes share a GPU and their peaks come and go: a batch whose check raises
    ``torch.OutOfMemoryError`` is drawn and checked again, the same cases, and the run ends as
    one without it (the same examples, tokens and features, no finding); a batch that never
    fits ends the run with one line (a usage error naming the target, the batch and the remedy),
    never a traceback or a finding of the kernel."""
    import torch

    from eaglefuzz.harness.checking.device_mode import engine, memory
    from eaglefuzz.harness.core.errors import UserError

    name = "_expand_idx_mapping_kernel"
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    monkeypatch.setattr(memory, "pause", lambda s: None)

    def run():  # noqa: ANN202
        return device_fuzz_target(name, impls, backend.device, examples=6, seed=2, cross_check_share=0.0,
                                  workers=0, scale_cases=False)

    clean = run()
    real, calls = engine.check_batch, []

    def flaky(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        if len(calls) in (1, 3, 4):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.62 GiB.")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "check_batch", flaky)
    again = run()
    assert len(calls) >= 5 and not again.findings
    assert (again.examples, again.tokens, again.features) == (clean.examples, clean.tokens, clean.features)
    assert (clean.oom_retries, again.oom_retries) == (0, 3)  # the run counts the batches it checked again

    def never(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise torch.OutOfMemoryError("CUDA out of memory.")

    monkeypatch.setattr(engine, "check_batch", never)
    with pytest.raises(UserError, match=rf"^{name}, device batch 0 of \d+ cases: the device ran out of memory "
                                        rf"{memory.OOM_TRIES} times .* run fewer lanes"):
        run()

    slept: list[float] = []  # a lane (a GPU others share) waits for them as long as a scale case holds its tables
    monkeypatch.setattr(memory, "pause", slept.append)
    pauses = memory.waits(True)
    assert sum(pauses) >= memory.SHARED_WAIT_S > sum(pauses[:-1]) and max(pauses) == memory.SHARED_STEP_S
    assert all(b == min(2 * a, memory.SHARED_STEP_S) for a, b in zip(pauses, pauses[1:], strict=False))
    with pytest.raises(UserError, match=rf"ran out of memory {len(pauses) + 1} times drawing and checking it over "
                                        rf"{sum(pauses):.0f} s .* run fewer lanes"):
        device_fuzz_target(name, impls, backend.device, examples=6, seed=2, cross_check_share=0.0, workers=0,
                           scale_cases=False, shared_gpu=True)
    assert slept == pauses


def test_one_epochs_tables_at_a_time_on_the_device(monkeypatch, backend, needs):
    """A target whose batches share an epoch's tables (its guarded copies kept from batch to
    batch): when the next epoch's tables are drawn, no tensor of an earlier epoch's is held any
    more, its guarded copies' neither (each lane would otherwise hold two epochs' tables, tens
    of GB, at every change of epoch)."""
    import weakref

    import torch

    from eaglefuzz.harness.targets.sample_recovered_tokens_kernel import device as recovered

    name = "sample_recovered_tokens_kernel"
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    drawn: list[weakref.ref] = []  # every table of every epoch so far
    alive_at_draw: list[int] = []
    real = recovered.softmax_table

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the first table of an epoch drawn
        alive_at_draw.append(sum(r() is not None for r in drawn))
        return real(*args, **kwargs)

    real_tables = type(recovered.DEVICE)._tables

    def tables(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        out = real_tables(self, *args, **kwargs)
        drawn.extend(weakref.ref(t) for t in out.values() if isinstance(t, torch.Tensor))
        return out

    monkeypatch.setattr(recovered, "softmax_table", counted)
    monkeypatch.setattr(type(recovered.DEVICE), "_tables", tables)
    stats = device_fuzz_target(name, impls, backend.device, examples=16, seed=3, cross_check_share=0.0,
                               shrink=False, scale_cases=False)
    assert not stats.findings
    assert len(alive_at_draw) >= 4  # four epochs or more, the condition this test is about
    assert alive_at_draw == [0] * len(alive_at_draw), alive_at_draw


def _batches_asked(monkeypatch) -> list[tuple[int, int]]:  # noqa: ANN001
    """The batches the device engine draws from now on (index, cases asked), in order (its
    ``batch_of`` spied on; the real one is the spy's ``real``)."""
    from eaglefuzz.harness.checking.device_mode import engine

    asked: list[tuple[int, int]] = []
    real = engine.batch_of

    def spy(dt, seed, i, k, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        asked.append((i, k))
        return real(dt, seed, i, k, *args, **kwargs)

    spy.real = real
    monkeypatch.setattr(engine, "batch_of", spy)
    return asked


def test_a_run_of_examples_with_one_batch_at_least_checks_the_batches_of_a_run_without(monkeypatch, backend, needs):
    """``min_batches=1``: a run of ``examples`` cases draws the batches a run without a count
    draws (whole, the same sizes, so the same cases: a batch's cases depend on its size), where
    by default a short run splits them into :data:`~eaglefuzz.harness.checking.device_mode.engine.MIN_BATCHES`."""
    from eaglefuzz.harness.checking.device_mode import engine

    name = "_flatten_sampled_kernel"
    asked = _batches_asked(monkeypatch)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    k = engine.CPU_BATCH if backend.device == "cpu" else device_targets()[name].batch
    for min_batches, want in ((1, [(0, k), (1, k)]), (engine.MIN_BATCHES, [(i, 1) for i in range(2 * k)])):
        asked.clear()
        stats = device_fuzz_target(name, impls, backend.device, examples=2 * k, seed=0, shrink=False, min_batches=min_batches,
                                   cross_check_share=0.0)
        assert asked == want and stats.examples == 2 * k


def test_a_run_that_keeps_its_batches_lists_exactly_the_cases_it_checked(monkeypatch, backend, needs):
    """``keep_batches``: ``stats.batches`` is every batch the run checked, in order (index and
    cases asked, a lane's share included), and drawing them again gives its cases: as many, as
    many output tokens (the benchmark's kernel alone launches exactly these); without it, none."""
    from eaglefuzz.harness.checking.device_mode import engine

    name = "_flatten_sampled_kernel"
    dt = device_targets()[name]
    asked = _batches_asked(monkeypatch)
    impls = implementations_for(parse_source(_source(name, needs)), [name])
    small = engine.CPU_MAX_REQUESTS if backend.device == "cpu" else None
    for offset, step in ((0, 1), (1, 2)):
        asked.clear()
        stats = device_fuzz_target(name, impls, backend.device, examples=7, seed=0, shrink=False, cross_check_share=0.0,
                                   chunk_offset=offset, chunk_step=step, keep_batches=True)
        assert stats.batches == asked and len(asked) >= 2 and all(i % step == offset for i, _ in asked)
        again = [engine.batch_of.real(dt, 0, i, k, backend.device, small) for i, k in stats.batches]
        assert sum(len(b) for b in again) == stats.examples == 7
        assert sum(b.tokens(j) for b in again for j in range(len(b))) == stats.tokens
    assert device_fuzz_target(name, impls, backend.device, examples=3, seed=0, shrink=False,
                              cross_check_share=0.0).batches == []


def test_a_launchers_tables_of_pointers_and_strides_queue_behind_a_busy_device(needs):
    """The launchers of gather_block_tables and compute_slot_mappings build their tables of
    pointers and strides on the GPU without waiting for the work queued before them (vLLM builds
    them once; a launch that waits for the previous one makes each process on a shared GPU wait
    for the others' work): built while the stream is busy, they return before it is idle, and
    hold the tables' addresses and strides."""
    needs.gpu("pinned copies of a launch's small tables")
    import torch

    from eaglefuzz.kernels import launchers

    tables = [torch.zeros((3, w), dtype=torch.int32, device="cuda") for w in (5, 7, 9)]
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # the stream busy for a second or so
    pointers = launchers.pointer_table(tables)
    strides = launchers._small_table([t.stride(0) for t in tables], torch.int64, "cuda")
    assert not torch.cuda.current_stream().query()  # neither waited for the stream
    assert pointers.dtype == torch.uint64 and pointers.device.type == "cuda"
    assert pointers.view(torch.int64).cpu().tolist() == [t.data_ptr() for t in tables]
    assert strides.cpu().tolist() == [5, 7, 9]


def test_host_copies_queued_behind_a_busy_device_keep_their_values(needs):
    """:func:`~eaglefuzz.oracles.host_copy.host_to` on a GPU: arrays of every dtype the draws
    send, through both halves of the staging buffer several times while the device is still
    busy with earlier work, each changed on the host right after its call, arrive as they were
    at the call (same values, dtype and shape); an array past the staging limit and an empty
    one too."""
    needs.gpu("the pinned staging buffer")
    import torch

    from eaglefuzz.oracles import host_copy

    rng = np.random.default_rng(7)
    sizes = [1, 3, 255, 4097, 1 << 16, (1 << 20) + 5]
    dtypes = [np.int32, np.int64, np.float32, np.float64, np.bool_, np.uint8]
    arrays, total = [], 0
    while total < 3 * host_copy.HALF:  # each within the staging limit: none waits for the device
        n = int(rng.choice(sizes))
        a = rng.integers(1, 200, n).astype(dtypes[int(rng.integers(len(dtypes)))])
        if a.nbytes > host_copy.STAGED_LIMIT:  # a pageable copy would wait for the stream, which is then idle
            continue
        arrays.append(a.reshape(-1, 1) if n % 2 else a)
        total += a.nbytes
    arrays += [np.zeros(0, dtype=np.int32), rng.integers(0, 9, host_copy.STAGED_LIMIT // 8 + 1)]  # last: this one waits
    sent = [a.copy() for a in arrays]
    staging = host_copy._staging(torch.device("cuda"))
    switches = staging.switches
    torch.cuda._sleep(2_000_000_000)  # the stream busy for a second or so: the copies queue behind it
    copies = []
    for a in arrays:
        copies.append(host_copy.host_to(a, "cuda"))
        a[...] = 0  # the host changes it at once
    assert staging.switches >= switches + 2  # staged, each half reused after waiting for its copies
    for want, got in zip(sent, copies, strict=True):
        assert got.device.type == "cuda" and tuple(got.shape) == want.shape
        assert got.dtype == torch.from_numpy(want).dtype
        assert np.array_equal(got.cpu().numpy(), want)
