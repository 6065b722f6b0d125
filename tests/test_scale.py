"""Production scale (docs/CONTRACT.md §11.2, §13.2): flat indices past ``2**31``.

The cases themselves need 8 GiB tables and a GPU (``--mode device``; benchmarks/RESULTS.md has
the H200's run). Here the machinery runs on the CPU with the flat limit lowered to ``2**12``
(``EAGLEFUZZ_FLAT_LIMIT``, a test knob): tables of a few thousand elements, the scale lane (a
child process), the minimiser, a fault in the lane, against seeded kernels that wrap at that
limit as vLLM 0.33.0's int32 products wrap at ``2**31``. The production kernels do not wrap
there: they pass. What does not need a kernel (the scale features, the minimal cases, their
reproducers, the note a run gives where it cannot reach them) is checked at full size where it
is cheap.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.targets import TARGETS

pytestmark = pytest.mark.kernel

RR, SR = "rejection_random_sample_kernel", "sample_recovered_tokens_kernel"
LIMIT = 1 << 12

WRAP = ("(start_idx + pos) * vocab_size",
        f"(((start_idx + pos) * vocab_size) - (((start_idx + pos) * vocab_size) >= {LIMIT}).to(tl.int32) * {2 * LIMIT})")
"""The random kernel's row offset wrapping at :data:`LIMIT`, as int32 wraps at ``2**31``."""


def _mutant(mutants, tmp_path, name: str, edits) -> str:
    from eaglefuzz.harness.targetkit.bugs import V033, Mutant

    return str(mutants.write(Mutant(name, RR, f"random: {name}", tuple(edits), V033), tmp_path))


def _wild_store(mutants, tmp_path, name: str, condition: str) -> str:
    """The random kernel storing ``2**40`` elements away (under the interpreter: a fault of the
    process) where ``condition`` holds, after its uniform's load."""
    load = "            uniform_prob = tl.load(uniform_probs_ptr + start_idx + pos)\n"
    return _mutant(mutants, tmp_path, name, [(load, load + (
        f"            if {condition}:\n"
        "                tl.store(output_token_ids_ptr + (1 << 40), 0)\n"))])


@pytest.fixture
def low_limit(monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_FLAT_LIMIT", str(LIMIT))
    monkeypatch.setenv("EAGLEFUZZ_SCALE_MINIMISE_BUDGET", "300")


def _run(spec: str, examples: int, keep_going: bool = False, scale_only: bool = False, name: str = RR):
    """A device campaign of ``name`` on the CPU; ``scale_only``: examples 3, 11, 19, ... (every one a
    scale case: nothing runs in this process)."""
    from eaglefuzz.harness.checking.device_mode.engine import (
        SCALE_AT,
        SCALE_EVERY,
        device_fuzz_target,
    )
    from eaglefuzz.harness.sources import implementations_for, parse_source

    impls = implementations_for(parse_source(spec), [name])
    where = {"chunk_offset": SCALE_AT, "chunk_step": SCALE_EVERY} if scale_only else {}
    return device_fuzz_target(name, impls, "cpu", examples=examples, seed=1, cross_check_share=0.0,
                              stop_on_finding=not keep_going, **where)


def test_production_kernel_passes_its_scale_cases(low_limit, needs, backend):
    """vLLM 0.33.0's kernel at the lowered limit (its int32 arithmetic does not wrap there):
    the scale example (example 3) runs in the lane as a batch of production-scale cases drawn
    on the device, reaches the scale feature, finds nothing."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter: on a GPU the real scale runs")
    needs.release_files()
    from eaglefuzz.harness.checking.device_mode.scale_lane import CPU_SCALE_BATCH

    stats = _run("vllm-release:0.33.0", 4)
    assert not stats.findings, stats.findings[0].report()
    assert stats.scale_cases == CPU_SCALE_BATCH and stats.examples == 3 + CPU_SCALE_BATCH
    assert "flat_index_past_2_31" in stats.features


def test_a_wrapping_kernel_is_found_minimised_and_replays(low_limit, needs, backend, tmp_path):
    """A kernel whose row offset wraps at the limit: the scale case fails in the lane, the
    NumPy and Numba oracles confirm it, and it is minimised to one row past the limit with
    plain values, whose reproducer is a few lines (np.zeros, np.full)."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter: on a GPU the real scale runs")
    needs.release_files()
    from tests.seeded_bugs import mutants

    path = _mutant(mutants, tmp_path, "rr_wraps_at_limit", [(f"target_probs_ptr + {WRAP[0]} + draft_token_id",
                                                          f"target_probs_ptr + {WRAP[1]} + draft_token_id")])
    stats = _run(f"file:{path}", 6)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()
    case = finding.case
    V = case.scalars["vocab_size"]
    N = case.arrays["draft_token_ids"].size
    assert (N - 1) * V >= LIMIT > (N - 2) * V  # one row past the limit, no more
    assert "flat_index_past_2_31" in TARGETS[RR].features_of(case)
    assert not case.arrays["target_probs"].any() and "draft_probs" not in case.arrays
    text = finding.reproducer()
    assert ("np.zeros(" in text or "np.full(" in text) and len(text.splitlines()) < 25, text
    assert "flat_index_past_2_31" in finding.report().split("features: ")[1].splitlines()[0]


def test_a_fault_in_the_lane_is_a_crash_and_the_run_goes_on(low_limit, needs, backend, tmp_path):
    """A kernel that stores 2**40 elements away once a read passes the limit kills the lane's
    process (under the interpreter: the Python heap): the campaign reports a crash of that case
    and, with --keep-going, runs every later example (a new lane for the next scale case). Only
    scale examples run (in this process the wild store would kill the test)."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from tests.seeded_bugs import mutants

    path = _wild_store(mutants, tmp_path, "rr_wild_store_past_limit", f"(start_idx + pos) * vocab_size >= {LIMIT}")
    stats = _run(f"file:{path}", 2, keep_going=True, scale_only=True)
    assert [f.kind for f in stats.findings] == ["crash", "crash"], [f.report() for f in stats.findings]
    assert "scale lane died" in stats.findings[0].outcome.crash
    assert stats.examples == 2 and stats.scale_cases == 2  # examples 3 and 11: the run went on


def test_a_scale_case_that_does_not_fit_the_gpus_free_memory_is_not_checked_and_never_a_finding(low_limit):
    """Lanes share a GPU: where another lane holds the memory a production-scale case needs, the
    lane says ``unfit`` (torch's ``OutOfMemoryError``, or a CUDA allocation said in words, of the
    check, the draw or the NumPy and Numba oracles' confirmation), and the campaign counts the
    example as not checked: no finding, no example, whether the drawn case, each minimal case
    or the drawn case's confirmation did not fit (an H100 with four lanes once reported such a
    crash as a finding of the kernel)."""
    from types import SimpleNamespace

    import torch

    from eaglefuzz.harness.checking.device_mode import engine
    from eaglefuzz.harness.checking.device_mode.scale_lane import (
        Verdict,
        out_of_memory,
        scale_minimal_count,
    )

    said = ("OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB. GPU 0 has a total capacity of 79.18 GiB",
            "RuntimeError: Triton Error [CUDA]: out of memory")
    assert all(out_of_memory(t) for t in said) and out_of_memory(torch.OutOfMemoryError("CUDA out of memory."))
    assert not any(out_of_memory(t) for t in (None, "RuntimeError: CUDA error: an illegal memory access was encountered",
                                              "OutOfResources: out of resource: shared memory", "IndexError: out of bounds"))
    unfit = Verdict(unfit=said[0], bad=3)  # a difference whose confirmation did not fit is not one either
    assert not unfit.failed and not Verdict(unfit=said[0], crash=said[0]).failed and Verdict(bad=1).failed

    class Lane:  # the campaign's side of a lane, answering as a GPU held by other lanes would
        batches, seed, name = False, 1, RR

        def __init__(self, first: Verdict) -> None:
            self.first, self.asked = first, []

        def run(self, example, *, minimal=None, confirm=False, epoch=None):  # noqa: ANN001, ANN202
            self.asked.append(minimal)
            return self.first if minimal is None and not confirm else unfit

    for first, asked in ((unfit, [None]), (Verdict(bad=2), [None, *range(scale_minimal_count(RR, 1, 3)), None])):
        stats = SimpleNamespace(examples=0, scale_cases=0, scale_unfit=0, tokens=0, features=set(), shrink_attempts=0)
        lane = Lane(first)
        assert engine._scale_example(lane, RR, None, 3, stats, shrink=True) is None
        assert (stats.scale_unfit, lane.asked) == (1, asked)
        assert stats.examples == (0 if first.unfit else 1)  # a drawn case that differed was checked: its minimal cases not
    stats = SimpleNamespace(examples=0, scale_cases=0, scale_unfit=0, tokens=0, features=set(), shrink_attempts=0)
    batch_lane = SimpleNamespace(batches=True, seed=1, device="cpu", batch=lambda i, epoch, k: unfit)
    assert engine._scale_batch_example(batch_lane, SR, None, 3, stats, shrink=True) is None
    assert (stats.scale_unfit, stats.examples) == (1, 0)


ACCEPT = "                accepted = draft_prob > 0 and target_prob / draft_prob >= uniform_prob\n"
PAST_DRAWN = f"(start_idx + pos) * vocab_size >= {LIMIT} and uniform_prob != 0.5"
"""A read past the limit with a uniform other than the minimal cases' 0.5: a bug that a drawn
production-scale case shows and no minimal one does."""


def test_a_scale_batch_difference_no_minimal_case_shows_is_the_batch_case_confirmed(low_limit, needs, backend, tmp_path):
    """A kernel that reverses its decision on every draft read past the limit unless its uniform is 0.5 (the
    minimal cases' value): the scale batch differs, no minimal case does, so the finding is the
    batch's case that differs alone, written out by the lane (tables do not cross a pipe) and
    confirmed there by the NumPy and Numba oracles: a case past the limit, which the report
    shows."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from tests.seeded_bugs import mutants

    path = _mutant(mutants, tmp_path, "rr_rejects_drawn_past_limit", [(ACCEPT, ACCEPT + (
        f"                if {PAST_DRAWN}:\n"
        "                    accepted = accepted == 0\n"))])
    stats = _run(f"file:{path}", 1, scale_only=True)
    (finding,) = stats.findings
    assert finding.kind == "difference" and not finding.outcome.oracle_disagreements, finding.report()
    assert "not minimised" in finding.shrink
    case = finding.case
    assert "flat_index_past_2_31" in TARGETS[RR].features_of(case)
    assert (case.arrays["uniform_probs"] != 0.5).any()
    assert "flat_index_past_2_31" in finding.report().split("features: ")[1].splitlines()[0]


def test_a_scale_batch_fault_no_minimal_case_shows_is_located_and_written_out(low_limit, needs, backend, tmp_path):
    """A kernel that stores 2**40 elements away on a read past the limit whose uniform is not
    0.5: the lane dies in the scale batch, no minimal case faults, so a fresh lane launches the
    batch a case at a time to find the case, and another writes it out: a crash finding of that
    case (the run goes on in this process)."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from tests.seeded_bugs import mutants

    path = _wild_store(mutants, tmp_path, "rr_wild_store_drawn_past_limit", PAST_DRAWN)
    stats = _run(f"file:{path}", 1, scale_only=True)
    (finding,) = stats.findings
    assert finding.kind == "crash" and "scale lane died" in finding.outcome.crash, finding.report()
    case = finding.case
    assert "flat_index_past_2_31" in TARGETS[RR].features_of(case)
    assert "not minimised" in finding.shrink


def test_a_scale_batch_hang_no_minimal_case_shows_is_located_and_written_out(low_limit, needs, backend, tmp_path,
                                                                             monkeypatch):
    """A kernel that spins for ever on a read past the limit whose uniform is not 0.5: the lane
    does not answer within its time limit (here 20 s) and is killed, no minimal case hangs, a
    fresh lane launching the batch a case at a time hangs at the case, and another writes it
    out: a hang finding of that case."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.device_mode import scale_lane
    from tests.seeded_bugs import mutants

    monkeypatch.setattr(scale_lane, "CASE_S", 20.0)
    load = "            uniform_prob = tl.load(uniform_probs_ptr + start_idx + pos)\n"
    path = _mutant(mutants, tmp_path, "rr_spins_drawn_past_limit", [(load, load + (
        f"            if {PAST_DRAWN}:\n"
        "                spin = uniform_prob\n"
        "                while spin == uniform_prob:\n"
        "                    spin = spin + 0.0\n"))])
    stats = _run(f"file:{path}", 1, scale_only=True)
    (finding,) = stats.findings
    assert finding.kind == "hang", finding.report()
    case = finding.case
    assert "flat_index_past_2_31" in TARGETS[RR].features_of(case)
    assert (case.arrays["uniform_probs"] != 0.5).any()


@pytest.mark.parametrize("name", [RR, SR])
def test_scale_batch_cases_pass_the_limit_and_have_the_records_features(low_limit, backend, name):
    """A scale batch (``draw_batch(..., scale=True)``): every case passes the limit (its
    tables' rows or, for the recovered kernel's epochs of requests, its noise's rows past the
    first one an int32 offset cannot reach), the batch's vocabulary is the one the campaign
    computes on the host for its minimal cases, and the features the batch decides for each
    case are exactly those the record gives it (the random kernel's ``flat_index_past_2_31``
    from the batched oracle's reads)."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import scale_epoch
    from eaglefuzz.harness.checking.device_mode.scale_lane import scale_batch_of
    from eaglefuzz.harness.generation.strategies import derive_seed

    dt = device_targets()[name]
    reached: dict[str, int] = {}
    for example in (3, 11, 19, 27, 35, 43, 291, 299):
        epoch = scale_epoch(example)
        b = scale_batch_of(dt, 1, example, epoch, 4, "cpu")
        V = b.extra["V"]
        assert V == dt.scale_batch_vocab(derive_seed(1, name, "scale tables", epoch))
        features = dt.batch_features(b, dt.oracle_batch(b))
        for j in range(len(b)):
            case = dt.to_case(b.case(j))
            rows = max(case.arrays["draft_token_ids"].size, case.arrays["cu_num_draft_tokens"].size)
            assert (rows - 1) * V >= LIMIT, (example, j, rows, V)
            assert features[j] == TARGETS[name].features_of(case) & dt.batch_decides, (example, j)
            for f in TARGETS[name].scale_features:
                reached[f] = reached.get(f, 0) + (f in features[j])
    assert set(reached) == set(TARGETS[name].scale_features) and min(reached.values()) >= 4, reached  # reached


def test_a_kernel_that_reads_a_few_elements_a_row_has_larger_scale_batches():
    """On a GPU, the targets whose kernels read a few elements a row (the random kernel,
    Model Runner V2's §31 and §33) check 1024 cases a scale batch, the others the lane's 256 (the
    gumbel kernel's draw caps its own at 128); on the CPU every target 4."""
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.scale_lane import (
        CPU_SCALE_BATCH,
        SCALE_BATCH,
        scale_batch_size,
    )

    few = {RR, "_compute_cumulative_log_p_kernel", "_rejection_kernel"}
    batched = {n: dt for n, dt in device_targets().items() if dt.scale_batches}
    assert few <= set(batched)
    for n, dt in batched.items():
        assert scale_batch_size(dt, "cuda") == (1024 if n in few else SCALE_BATCH), n
        assert scale_batch_size(dt, "cpu") == CPU_SCALE_BATCH


def test_the_recovered_kernels_scale_batches_find_its_wraps_minimised(low_limit, needs, backend, tmp_path):
    """``sample_recovered_tokens_kernel``'s scale examples are batches too: vLLM 0.33.0's kernel
    passes them; a kernel whose table and noise row offsets wrap at the limit (PR #48055's two
    products) fails its first scale batch, minimised to the minimal case of the wrap the
    batch's epoch passes, confirmed by the NumPy and Numba oracles."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.device_mode.scale_lane import CPU_SCALE_BATCH
    from eaglefuzz.harness.targetkit.bugs import V033, Mutant
    from tests.seeded_bugs import mutants

    stats = _run("vllm-release:0.33.0", 1, scale_only=True, name=SR)
    assert not stats.findings, stats.findings[0].report()
    assert stats.scale_cases == CPU_SCALE_BATCH
    assert stats.features & set(TARGETS[SR].scale_features)

    def wrap(x: str) -> str:
        return f"(({x}) - (({x}) >= {LIMIT}).to(tl.int32) * {2 * LIMIT})"

    t = "token_idx * vocab_size + vocab_offset,\n                mask="
    edits = [(f"{p} + {t}{m}", f"{p} + {wrap('token_idx * vocab_size')} + vocab_offset,\n                mask={m}")
             for p, m in (("target_probs_ptr", "(vocab_mask"), ("draft_probs_ptr", "vocab_mask"),
                          ("target_probs_ptr", "vocab_mask,\n                other=0.0,\n            )\n            prob"))]
    edits.append(("inv_q_ptr + req_idx * vocab_size + vocab_offset",
                  f"inv_q_ptr + {wrap('req_idx * vocab_size')} + vocab_offset"))
    path = mutants.write(Mutant("sr_wraps_at_limit", SR, "recovered: both row offsets wrap", tuple(edits), V033), tmp_path)
    stats = _run(f"file:{path}", 1, scale_only=True, name=SR)
    (finding,) = stats.findings
    assert finding.kind == "difference" and not finding.outcome.oracle_disagreements, finding.report()
    assert finding.case.note.endswith("past 2**31, minimised"), finding.case.note


def test_scale_features_and_the_note_where_they_cannot_be_reached():
    """The scale features are production features (the tier does not change with the
    backend); a run that cannot hold them names them in a note, and never as missed."""
    from eaglefuzz.harness.targetkit.scale import note, unreachable

    assert TARGETS[RR].scale_features == ("flat_index_past_2_31",)
    assert set(TARGETS[SR].scale_features) == {"table_rows_past_2_31", "noise_rows_past_2_31"}
    assert "interpreter" in unreachable("device", "cpu")
    assert "--mode bulk" in unreachable("bulk", "cuda:0")
    line = note(RR, TARGETS[RR].scale_features, unreachable("bulk", "cpu"))
    assert line.startswith(f"{RR}: scale features not reached on this backend") and "flat_index_past_2_31" in line


def test_audit_reports_the_int32_flat_index_hazard(low_limit, needs, backend, tmp_path):
    """The audit's scale draws (where the device holds them: here the lowered limit) break
    ``decided_by_own_row`` on a kernel that wraps, a hazard of class int32_flat_index that
    production reaches; vLLM 0.33.0's kernel keeps it at the lowered limit."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.audit import audit_target
    from eaglefuzz.harness.generation.strategies import Scale
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from tests.seeded_bugs import mutants

    tiny = Scale(max_requests=2, request_tail=2, max_query_len=4, max_programs=16)
    path = _mutant(mutants, tmp_path, "rr_wraps_at_limit", [(f"target_probs_ptr + {WRAP[0]} + draft_token_id",
                                                          f"target_probs_ptr + {WRAP[1]} + draft_token_id")])
    wrapping = implementations_for(parse_source(f"file:{path}"), [RR])[RR]
    result = audit_target(RR, wrapping, "cpu", scale=tiny, examples=2)
    (h,) = [h for h in result.hazards if h.prop.name == "decided_by_own_row"]
    assert h.prop.hazard_class == "int32_flat_index" and h.reachable_in_production
    assert "past 2**31" in h.detail and "PR #48055" in h.report()
    clean = implementations_for(parse_source("vllm-release:0.33.0"), [RR])[RR]
    assert "decided_by_own_row" in audit_target(RR, clean, "cpu", scale=tiny, examples=2).holds


@pytest.mark.parametrize("name", [RR, SR])
def test_pr_48055_fix_applies_to_the_release_text(name, needs, backend, tmp_path):
    """The fixed variant (vLLM PR #48055's int64 promotion, as text edits of vLLM 0.33.0's
    kernel applied at run time) loads and keeps the contract on ordinary cases; on the GPU it
    passes the production-scale findings the release fails (benchmarks/scale_wrap.py)."""
    needs.release_files()
    from eaglefuzz.harness.checking.audit import audit_of
    from eaglefuzz.harness.checking.check import check_case
    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.file import FileSource
    from eaglefuzz.harness.targetkit.bugs import V033, Mutant
    from tests.seeded_bugs import mutants

    fix = audit_of(name).fixes["PR #48055"]
    path = mutants.write(Mutant(f"{name}_pr48055", name, "PR #48055: int64 row offsets", fix, V033), tmp_path)
    assert path.read_text().count(".to(tl.int64)") == len(fix)
    impls = implementations_for(FileSource(path))
    rng = np.random.default_rng(0)
    for _ in range(3):
        case = TARGETS[name].random_case(rng, INTERPRETER_SCALE)
        finding = check_case(case, impls, backend.device)
        assert finding is None, finding.report()


def test_a_short_time_budget_runs_no_scale_case_and_says_so(low_limit, needs, backend):
    """--time-budget holds in device mode: a scale example with less than the 15 s a scale case
    needs left is an ordinary one (the report says scale cases were skipped, and why), and the
    run stops within its budget plus one case."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    import time

    from eaglefuzz.harness.checking.device_mode.engine import (
        SCALE_AT,
        SCALE_EVERY,
        device_fuzz_target,
    )
    from eaglefuzz.harness.sources import implementations_for, parse_source

    impls = implementations_for(parse_source("vllm-release:0.33.0"), [RR])
    t0 = time.monotonic()
    stats = device_fuzz_target(RR, impls, "cpu", examples=None, time_budget=4.0, seed=1, cross_check_share=0.0,
                               chunk_offset=SCALE_AT, chunk_step=SCALE_EVERY)
    assert stats.scale_cases == 0 and stats.examples >= 1
    assert "under the 15 s a scale case needs" in stats.scale_skipped
    assert time.monotonic() - t0 < 4.0 + 30  # its budget plus one case (an interpreted one: seconds)


@pytest.mark.parametrize("allowance", [60.0, 5.0])
def test_a_short_run_gives_its_scale_case_first_when_the_run_affords_it(low_limit, needs, backend, tmp_path, allowance):
    """Under a time budget the campaign gives a scale target the run's time for its first scale
    case (``scale_first``): with a short budget of its own (two seconds, too short for the
    every-eighth example to be a scale case) a wrapping kernel is still found at scale,
    minimised, before any ordinary example; where the run cannot afford one, no scale case
    runs and the report says why."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.device_mode.engine import device_fuzz_target
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from tests.seeded_bugs import mutants

    path = _mutant(mutants, tmp_path, "rr_wraps_at_limit", [(f"target_probs_ptr + {WRAP[0]} + draft_token_id",
                                                          f"target_probs_ptr + {WRAP[1]} + draft_token_id")])
    impls = implementations_for(parse_source(f"file:{path}"), [RR])
    stats = device_fuzz_target(RR, impls, "cpu", examples=None, time_budget=2.0, seed=1, cross_check_share=0.0,
                               scale_first=allowance)
    if allowance < 30:
        assert stats.scale_cases == 0  # (an ordinary case may still pass the lowered limit)
        assert "could go to a scale case" in stats.scale_skipped
        return
    from eaglefuzz.harness.checking.device_mode.scale_lane import CPU_SCALE_BATCH

    (finding,) = stats.findings
    # the first example run (a batch of scale cases), and the target stopped there
    assert stats.scale_cases == CPU_SCALE_BATCH and stats.examples == CPU_SCALE_BATCH
    assert finding.kind == "difference", finding.report()
    V, N = finding.case.scalars["vocab_size"], finding.case.arrays["draft_token_ids"].size
    assert (N - 1) * V >= LIMIT > (N - 2) * V  # minimised: one row past the limit


def test_a_scale_finding_is_minimised_even_with_no_time_left_for_it(low_limit, needs, backend, tmp_path):
    """With the scale case's time spent, its first minimal case is still tried (confirming it
    costs what confirming the drawn case would): the finding is minimal, confirmed."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.device_mode.engine import SCALE_AT, _scale_example
    from eaglefuzz.harness.checking.device_mode.scale_lane import ScaleLane
    from eaglefuzz.harness.checking.fuzz import Stats
    from tests.seeded_bugs import mutants

    path = _mutant(mutants, tmp_path, "rr_wraps_at_limit", [(f"target_probs_ptr + {WRAP[0]} + draft_token_id",
                                                          f"target_probs_ptr + {WRAP[1]} + draft_token_id")])
    lane = ScaleLane(RR, f"file:{path}", "cpu", 1)
    stats = Stats()
    stats.scale_cases = 0
    try:
        finding = _scale_example(lane, RR, None, SCALE_AT, stats, True, minimise_s=-1.0)
    finally:
        lane.close()
    assert finding is not None and finding.kind == "difference", finding
    assert finding.case.note == "the int32 flat index past 2**31, minimised" and not finding.shrink


def test_device_campaigns_under_a_budget_run_their_scale_targets_first():
    """The campaign's choice: in device mode under a time budget, where the backend holds
    scale cases, the targets with scale cases (the two V1 rejection kernels and seven of Model
    Runner V2's sampling and verification kernels) run first."""
    from pathlib import Path

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.run.campaign import Campaign

    c = Campaign(names=None, source=None, backend="cuda", seed=0, mode="device", examples=None, time_budget=300.0,
                 shard=(0, 1), corpus_dir=Path("."), keep_going=True, progress=False, as_json=True)
    c.scale_why = None
    names = sorted(TARGETS)
    run = dict.fromkeys(device_targets())
    assert c._scale_first(names, run, 1.0) == {RR, SR, "_temperature_kernel", "_gumbel_sample_kernel",
                                               "_compute_local_logits_stats_kernel", "_compute_cumulative_log_p_kernel",
                                               "_compute_local_residual_mass_kernel", "_rejection_kernel",
                                               "_resample_kernel"}
    assert c._scale_first(names, run, None) == set()  # --examples: every eighth example, in turn
    c.scale_why = "the interpreter"
    assert c._scale_first(names, run, 1.0) == set()


def test_a_lazy_table_crosses_to_the_device_by_its_written_pages_alone(monkeypatch):
    """A table of ``lazy_full`` goes to the device as its written pages and zeros (a scale case's
    table of gigabytes holds a few live rows): the tensor is the array, element for element, as a
    whole copy makes it; a change on the device, in a page never written or in a written one, is
    counted; an ordinary array, a strided view, or a system that does not tell which pages are
    made crosses whole."""
    import builtins

    import torch

    from eaglefuzz.harness.targetkit.device_draws import lazy_full, to_device, written_runs
    from eaglefuzz.harness.targetkit.scale_rows import DeviceTable

    table = lazy_full((64, 4099), np.float32)  # rows across page boundaries
    table[3, 7], table[40, :] = 1.5, -2.0
    table[63, 4098] = np.float32(np.nan)
    runs = written_runs(table)
    assert runs is not None and sum(hi - lo for lo, hi in runs) < table.size // 4
    flat = table.reshape(-1)
    assert all(any(lo <= i < hi for lo, hi in runs) for i in np.flatnonzero(flat != 0).tolist() + [flat.size - 1])
    assert written_runs(table[10:50]) is not None and written_runs(table[:, ::2]) is None
    assert written_runs(np.zeros(8, np.float32)) is None
    for a in (table, table[10:50], np.arange(12, dtype=np.int64).reshape(3, 4), table[:, ::2]):
        got = to_device(a, "cpu").numpy()
        assert got.dtype == a.dtype and got.shape == a.shape and got.tobytes() == np.ascontiguousarray(a).tobytes()

    t = DeviceTable(table, "cpu")
    assert t.changed() == 0
    t.view[20, 5] = 3.0  # a page never written on the host
    t.view[40, 9] = 0.0  # a written one
    assert t.changed() == 2

    real_open = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: (_ for _ in ()).throw(PermissionError(f)) if f == "/proc/self/pagemap" else real_open(f, *a, **k))
    assert written_runs(table) is None
    assert to_device(table, "cpu").numpy().tobytes() == table.tobytes()
    assert isinstance(t.rows(0, 64), torch.Tensor)


def test_a_lazy_table_is_written_out_as_a_plain_copy_of_it_is():
    """A reproducer's text and a corpus file's compact form of a table of ``lazy_full`` (found by
    its made pages alone) are those of a plain copy of it (found by reading every element): the
    same report on any machine."""
    from eaglefuzz.harness.checking.corpus import compact_form
    from eaglefuzz.harness.core.case import _array_source
    from eaglefuzz.harness.core.lazy import seal, written_runs, zero_sparse
    from eaglefuzz.harness.targetkit.device_draws import lazy_full

    for dtype in (np.float32, np.int32, np.bool_, np.int64):
        zeros = lazy_full((300, 4099), dtype)
        seal(zeros)
        assert _array_source(zeros) == _array_source(np.array(zeros)) and _array_source(zeros).startswith("np.zeros((300, 4099)")
        table = lazy_full((300, 4099), dtype)
        table[0, :3] = 1  # the first zero is past a run's first elements
        table[7, 11] = 1
        table[299, 4098] = 1
        if dtype == np.float32:
            table[150, 5] = -0.0  # not 0 bit for bit
        seal(table)
        plain = np.array(table)  # every page read: made, for Linux, but not written
        assert sum(hi - lo for lo, hi in written_runs(table)) < table.size // 4
        with pytest.raises(ValueError, match="read-only"):
            table[1, 1] = 1
        where, zero = zero_sparse(table)
        bits = plain.reshape(-1).view(np.uint8 if dtype == np.bool_ else np.dtype(f"u{plain.itemsize}"))
        assert where.tolist() == np.flatnonzero(bits != 0).tolist() and zero == int(np.argmax(bits == 0)) == 3
        assert zero_sparse(plain) is None
        assert _array_source(table) == _array_source(plain)
        assert compact_form(table) == compact_form(plain)
    dense = lazy_full((4, 1 << 20), np.float32)
    dense[:3] = 2.0  # most elements on made pages: read whole
    assert zero_sparse(dense) is None
