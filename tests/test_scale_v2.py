"""Production scale of Model Runner V2's verification (docs/CONTRACT.md §28-§35): row offsets
past ``2**31`` elements, the class of vLLM #46560 and #47383 (int32 row offsets up to vLLM 0.24.0).

The cases need tables of 8 GiB and a GPU (``--mode device``; benchmarks/RESULTS.md has the
H200's runs). Here the machinery runs on the CPU with the flat limit lowered to ``2**12``
(``EAGLEFUZZ_FLAT_LIMIT``): the scale lane's check of a record-checked target a block of rows at
a time against the torch oracle (``oracles/tensor_ops_v2.py``), the confirmation by the NumPy and
Numba oracles on the rows past the limit, the minimiser, the reproducer, the audit's hazard,
against kernels that wrap at that limit as vLLM 0.24.0's int32 offsets wrap at ``2**31``.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.targets import TARGETS

pytestmark = pytest.mark.kernel

TK, ST, CL = "_temperature_kernel", "_compute_local_logits_stats_kernel", "_compute_cumulative_log_p_kernel"
GS, RM = "_gumbel_sample_kernel", "_compute_local_residual_mass_kernel"
RJ, RS = "_rejection_kernel", "_resample_kernel"
LIMIT = 1 << 12


def _wrap(line: str, ptr: str, row: str, stride: str, into: str | None = None) -> tuple[tuple[str, str], ...]:
    """Edits making ``ptr`` (or a new pointer ``into``) move back by ``2 * LIMIT`` once ``row *
    stride`` passes the limit, after ``line``."""
    indent = line[: len(line) - len(line.lstrip())]
    return ((line, line + f"{indent}{into or ptr} = {ptr} - (({row} * {stride}) >= {LIMIT}).to(tl.int64) * {2 * LIMIT}\n"),)


WRAPS = {
    TK: _wrap("    token_idx = tl.program_id(0).to(tl.int64)\n", "logits_ptr", "token_idx", "logits_stride"),
    GS: _wrap("    token_idx = tl.program_id(0).to(tl.int64)\n", "logits_ptr", "token_idx", "logits_stride"),
    ST: _wrap("    logit_idx = tl.program_id(0).to(tl.int64)\n", "target_logits_ptr", "logit_idx", "target_logits_stride"),
    RM: _wrap("    logit_idx = tl.program_id(0).to(tl.int64)\n", "target_logits_ptr", "logit_idx", "target_logits_stride"),
    CL: (*_wrap("        logit_idx = start_idx + step\n", "target_logits_ptr", "logit_idx", "target_logits_stride",
                "wrapped_ptr"), ("                    target_logits_ptr,\n", "                    wrapped_ptr,\n")),
    RJ: _wrap("    start_idx = tl.load(cu_num_logits_ptr + req_idx).to(tl.int64)\n", "target_logits_ptr", "start_idx",
              "target_logits_stride"),
    RS: _wrap("    resample_token_idx = start_idx + resample_idx\n", "target_logits_ptr", "resample_token_idx",
              "target_logits_stride"),
}
"""Each target's row offset wrapping at :data:`LIMIT` (the table's base pointer moved back by
``2 * LIMIT`` for a row past it), as vLLM 0.24.0's int32 row offsets (``token_idx *
logits_stride``, ``logit_idx * target_logits_stride``) wrap at ``2**31``."""
SCALED = tuple(WRAPS)
TABLE = {TK: "logits", GS: "logits", ST: "target_logits", CL: "target_logits", RM: "target_logits", RJ: "target_logits",
         RS: "target_logits"}


@pytest.fixture
def low_limit(monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_FLAT_LIMIT", str(LIMIT))


def _wrapping(mutants, tmp_path, name: str = TK) -> str:
    from eaglefuzz.harness.targetkit.bugs import V033, Mutant, edit

    m = Mutant(f"{name.strip('_')}_wraps_at_limit", name, "the row offset wraps at the lowered limit",
               tuple(edit(*e) for e in WRAPS[name]), V033)
    return str(mutants.write(m, tmp_path))


def _scale_run(spec: str, examples: int, name: str = TK):
    """A device campaign of ``name`` on the CPU whose every example is a scale case (3, 11,
    ...: nothing runs in this process)."""
    from eaglefuzz.harness.checking.device_mode.engine import (
        SCALE_AT,
        SCALE_EVERY,
        device_fuzz_target,
    )
    from eaglefuzz.harness.sources import implementations_for, parse_source

    impls = implementations_for(parse_source(spec), [name])
    return device_fuzz_target(name, impls, "cpu", examples=examples, seed=1, cross_check_share=0.0,
                              chunk_offset=SCALE_AT, chunk_step=SCALE_EVERY)


def test_the_torch_oracle_is_the_contract(backend):
    """``temperature_rows`` against the NumPy oracle on random rows (divided, greedy, unit rows,
    a ``vocab_size`` below the width); the comparison takes 2 ulp of a divided element, not 3,
    never a NaN, and an untouched element bit for bit."""
    import torch

    from eaglefuzz.harness.targetkit.scale_rows import mismatches
    from eaglefuzz.oracles import tensor_ops_v2, vectorized_v2_verify

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((6, 300)) * 5).astype(np.float32)
    temp = np.array([0.7, 1.0, 0.0, 1.3, 0.05, 2.0], np.float32)
    rows = np.array([0, 1, 2, 3, 4, 5, 0][:6], np.int64)
    want = x.copy()
    st = vectorized_v2_verify.temperature(logits=want, expanded_idx_mapping=rows, temperature=temp, vocab_size=250)
    got, bound = tensor_ops_v2.temperature_rows(torch.from_numpy(x), torch.from_numpy(temp[rows]), 250)
    assert np.array_equal(got.numpy().view(np.int32), want.view(np.int32))
    assert np.array_equal(bound.numpy(), st.bounds["logits"])
    assert int(mismatches(got, got, bound)) == 0
    off = got.clone()
    off[0, 0] = torch.nextafter(torch.nextafter(off[0, 0], torch.tensor(np.inf)), torch.tensor(np.inf))
    assert int(mismatches(off, got, bound)) == 0  # 2 ulp: a compiled division may give it
    off[0, 0] = torch.nextafter(off[0, 0], torch.tensor(np.inf))
    off[0, 1] = float("nan")
    off[1, 0] = torch.nextafter(off[1, 0], torch.tensor(np.inf))  # a unit row: untouched, bit for bit
    off[0, 299] = torch.nextafter(off[0, 299], torch.tensor(np.inf))  # past vocab_size: untouched
    assert int(mismatches(off, got, bound)) == 4


@pytest.mark.parametrize("name", SCALED)
def test_production_kernel_passes_its_scale_cases(name, low_limit, needs, backend):
    """vLLM 0.33.0's kernel (int64 row offsets, the fixes of #46560 and #47383) at the lowered
    limit: four scale cases in the lane, every element checked against the torch oracle,
    nothing found, the scale feature reached."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter: on a GPU the real scale runs")
    needs.release_files()
    stats = _scale_run("vllm-release:0.33.0", 4, name)
    assert not stats.findings, stats.findings[0].report()
    assert stats.scale_cases == 4 and "row_offset_past_2_31" in stats.features
    assert stats.tokens >= 4 * LIMIT // 8192


@pytest.mark.parametrize("name", SCALED)
def test_a_wrapping_kernel_is_found_confirmed_minimised_and_reproduced(name, low_limit, needs, backend, tmp_path):
    """A kernel whose row offset wraps at the limit: the scale case fails in the lane, the NumPy
    and Numba oracles confirm it on the rows past the limit (a kernel that writes its table: the
    guard band before it names the wrap), and it is minimised to one drafted row past the
    limit (a table of zeros with one entry) whose reproducer is a few lines and fails again."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.check import assert_case
    from tests.seeded_bugs import mutants

    path = _wrapping(mutants, tmp_path, name)
    stats = _scale_run(f"file:{path}", 1, name)
    finding = stats.findings[0]
    assert finding.kind == "difference", finding.report()
    diffs = finding.outcome.differences
    if name == TK:  # in place: the wrapped rows are written before the table
        assert diffs[0].region.startswith("guard band before the buffer") and diffs[0].index < 0
    assert any("numpy = numba oracle" in d.versus for d in diffs) and not finding.outcome.oracle_disagreements
    case = finding.case
    table = case.arrays[TABLE[name]]
    n, W = table.shape
    last = n - 1 if name in (TK, GS) else n - 2  # a chain kernel's last row is a bonus row (no draft read)
    assert last * W >= LIMIT > (last - 1) * W  # one row past the limit, no more
    assert np.count_nonzero(table) == 1
    text = finding.reproducer()
    assert ("sparse(" in text or "np.repeat(" in text) and len(text.splitlines()) < 25, text
    with pytest.raises(AssertionError):
        assert_case(case, source=f"file:{path}")
    assert_case(case, source="vllm-release:0.33.0")


BATCHED = (TK, ST, CL, GS, RM, RJ, RS)
"""The targets whose scale examples are production-scale batches (``scale_batches``)."""
REACHED = {
    TK: {"greedy_row", "unit_temperature", "scaled_row", "low_temperature", "untouched_state_rows", "shared_state_row"},
    ST: {"greedy_row", "random_row", "draft_logits", "one_hot_drafts", "masked_logits", "low_temperature"},
    CL: {"greedy_request", "random_request", "draft_logits", "one_hot_drafts"},
    GS: {"greedy_row", "random_row", "fp64_noise", "positions_past_65535", "masked_logits"},
    RM: {"residual_rows", "first_rows_skipped", "placeholder_next_skipped", "greedy_skipped", "zero_residual",
         "ratio_below_one"},
    RJ: {"greedy_request", "random_request", "standard", "draft_logits", "one_hot_drafts", "first_rejected", "all_accepted",
         "later_rejected", "greedy_corrected", "minus_one_draft", "no_drafts"},
    RS: {"bonus_draw", "residual_draw", "one_hot_residual", "placeholder_rejected", "greedy_bonus", "greedy_skipped",
         "fp64_noise", "residual_lanes_cut", "positions_past_65535"},
}
"""Features each target's scale batches of sixteen epochs reach (besides the scale feature)."""


def test_the_batched_targets_are_those_with_scale_batches():
    from eaglefuzz.harness.checking.device_mode import device_targets

    assert set(BATCHED) == {n for n in SCALED if device_targets()[n].scale_batches}


def _bits(t):
    """``t``'s elements as integers of its width (floats bit for bit)."""
    import torch

    return t.view({8: torch.int64, 4: torch.int32}[t.element_size()]) if t.is_floating_point() else t


@pytest.mark.parametrize("name", BATCHED)
def test_scale_batches_are_their_cases_alone(name, low_limit, backend):
    """A target with production-scale batches (``draw_batch(..., scale=True)``), for a scale
    example of each of sixteen epochs and a second batch of the first: every case lies in the
    production tier and its table passes the limit, the vocabulary is the one the campaign
    computes on the host for the epoch's minimal cases, the features the batch decides are the
    record's of each case, and the batched scale oracle (each distinct row once) writes exactly
    what the ordinary oracle of each case alone writes: every index, value and bound, bit for
    bit."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    import torch

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import SCALE_AT, SCALE_EVERY, scale_epoch
    from eaglefuzz.harness.checking.device_mode.scale_lane import SCALE_TABLE_EPOCH, scale_batch_of
    from eaglefuzz.harness.generation.strategies import derive_seed

    dt = device_targets()[name]
    target = TARGETS[name]
    seen: dict[str, int] = {}
    examples = [SCALE_AT + SCALE_EVERY * SCALE_TABLE_EPOCH * m for m in range(16)] + [SCALE_AT + SCALE_EVERY]
    for example in examples:
        epoch = scale_epoch(example)
        b = scale_batch_of(dt, 1, example, epoch, 4, "cpu")
        assert len(b) == 4
        V = b.extra["scale"].V
        assert V == dt.scale_batch_vocab(derive_seed(1, name, "scale tables", epoch))
        writes = dt.oracle_batch(b)
        features = dt.batch_features(b, writes)
        owned: dict[str, int] = {}
        for j in range(len(b)):
            dc = b.case(j)
            case = dt.to_case(dc)
            target.validate(case)
            n, W = case.arrays[TABLE[name]].shape
            assert (n - 1) * W >= LIMIT and W == V
            assert features[j] == target.features_of(case), (example, j, features[j] ^ target.features_of(case))
            for f in features[j]:
                seen[f] = seen.get(f, 0) + 1
            alone = dt.oracle(dc)
            assert set(alone) == set(writes)
            for out, got in writes.items():
                if out in b.shared:  # a shared table updated in place: the case's writes, in the table's coordinates
                    lo, sel = 0, torch.isin(got[0], alone[out][0])
                    assert int(sel.sum()) == alone[out][0].numel(), (example, j, out)
                    owned[out] = owned.get(out, 0) + int(sel.sum())
                else:
                    sizes = np.asarray(b.outputs[out][1], dtype=np.int64)
                    lo, hi = int(sizes[:j].sum()), int(sizes[: j + 1].sum())
                    sel = (got[0] >= lo) & (got[0] < hi)
                want = alone[out]
                assert len(want) == len(got), out
                mine, theirs = torch.argsort(got[0][sel]), torch.argsort(want[0])
                assert torch.equal(got[0][sel][mine] - lo, want[0][theirs].to(got[0].dtype)), (example, j, out)
                for x, y in zip(got[1:], want[1:], strict=True):
                    x, y = x[sel][mine], y[theirs]
                    assert x.dtype == y.dtype and torch.equal(_bits(x), _bits(y)), (example, j, out)
        for out, count in owned.items():  # the cases' writes to a shared table: theirs alone, none of them twice
            assert count == writes[out][0].numel() == torch.unique(writes[out][0]).numel(), (example, out)
    assert seen["row_offset_past_2_31"] == 4 * len(examples), seen
    assert REACHED[name] <= set(seen), (REACHED[name] - set(seen), seen)


def test_a_scale_batch_checks_what_its_kernel_writes_in_place(low_limit, needs, backend, tmp_path):
    """The temperature kernel's scale batches share one table that every case updates in place
    (rows of its own): a kernel that multiplies by the temperature fails its first scale batch
    (every divided element compared within its bound in the shared table's buffer, not just
    found changed), as does one that reads the temperature at the token's row; the release
    passes (:func:`test_production_kernel_passes_its_scale_cases`)."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.targets._temperature_kernel.bugs import BUGS
    from tests.seeded_bugs import mutants

    for bug in ("tk_multiplies", "tk_token_row_as_state_row"):
        (m,) = [b for b in BUGS if b.name == bug]
        stats = _scale_run(f"file:{mutants.write(m, tmp_path)}", 1, TK)
        assert stats.findings and stats.findings[0].kind == "difference", bug


HAZARD = {TK: "divided_by_own_temperature", GS: "greedy_of_own_row", ST: "maxima_of_own_row", CL: "ratio_of_own_rows",
          RM: "mass_of_own_rows", RJ: "decided_by_own_rows", RS: "drawn_from_own_row"}


@pytest.mark.parametrize("name", tuple(HAZARD))
def test_audit_reports_the_int32_flat_index_hazard(name, low_limit, needs, backend, tmp_path):
    """The audit's scale draws (the minimal scale cases, at the lowered limit) break the
    target's int32_flat_index property on a kernel that wraps: a hazard of that class that
    production reaches; vLLM 0.33.0's kernel keeps it."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.audit import audit_target
    from eaglefuzz.harness.generation.strategies import Scale
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from tests.seeded_bugs import mutants

    tiny = Scale(max_requests=2, request_tail=2, max_query_len=4, max_programs=16)
    wrapping = implementations_for(parse_source(f"file:{_wrapping(mutants, tmp_path, name)}"), [name])[name]
    result = audit_target(name, wrapping, "cpu", scale=tiny, examples=2)
    (h,) = [h for h in result.hazards if h.prop.name == HAZARD[name]]
    assert h.prop.hazard_class == "int32_flat_index" and h.reachable_in_production
    assert "past 2**31" in h.detail and ("PR #46560" if name in (TK, GS) else "PR #47383") in h.report()
    clean = implementations_for(parse_source("vllm-release:0.33.0"), [name])[name]
    assert HAZARD[name] in audit_target(name, clean, "cpu", scale=tiny, examples=2).holds


@pytest.mark.parametrize("name", SCALED)
def test_scale_cases_are_production(name, low_limit):
    """Scale cases and their minimal cases (at the lowered limit: the same construction, a few
    thousand elements) lie in the production tier: the record's rules, no window met."""
    from eaglefuzz.harness.checking.device_mode import device_targets

    dt = device_targets()[name]
    for seed in range(6):
        case = dt.scale_case(np.random.default_rng(seed))
        for c in (case, *dt.scale_minimal(case)):
            TARGETS[name].production_rules(c)
            assert "row_offset_past_2_31" in TARGETS[name].features_of(c)


@pytest.mark.parametrize("name", SCALED)
def test_scale_cases_reach_the_feature_at_full_size(name):
    """At the real limit (no kernel run): a scale case's table passes 2**31 elements by at
    most 17 rows, sparse (a few rows written); its minimal cases are one drafted row past it."""
    from eaglefuzz.harness.checking.device_mode import device_targets

    dt = device_targets()[name]
    case = dt.scale_case(np.random.default_rng(5))
    n, W = case.arrays[TABLE[name]].shape
    first = -(-(1 << 31) // W)
    assert first < n <= first + (19 if name in (RJ, RS) else 17)
    assert "row_offset_past_2_31" in TARGETS[name].features_of(case)
    for m in dt.scale_minimal(case):
        assert m.arrays[TABLE[name]].shape[0] == first + (1 if name in (TK, GS) else 2)
        assert "row_offset_past_2_31" in TARGETS[name].features_of(m)



def test_the_stats_torch_oracle_is_the_contract(backend):
    """``local_logits_stats_rows`` against the NumPy oracle on a small random step (greedy and
    random requests, masked logits, a drafter's cache, two blocks): the same elements written,
    the exact ones bit for bit, the sums and the draft's maxima within each other's bounds."""
    import torch

    from eaglefuzz.harness.targetkit.runner_v2_verify import STATS
    from eaglefuzz.harness.targetkit.scale_rows import bonus_rows
    from eaglefuzz.oracles import tensor_ops_v2, vectorized_v2_verify

    rng = np.random.default_rng(3)
    V, block, counts = 700, 512, [3, 2, 4]
    n, B = sum(counts), len(counts)
    x = (rng.standard_normal((n, V)) * 4).astype(np.float32)
    x[4, rng.integers(0, V, 300)] = -np.inf
    x[5, :block] = -np.inf  # a whole masked block of a random row
    x[0, [3, 9]] = 50.0  # a tie: the first wins
    dl = (rng.standard_normal((B, 4, V)) * 3).astype(np.float32)
    eidx = np.repeat(np.arange(B), counts).astype(np.int64)
    elp = np.concatenate([np.arange(c) for c in counts]).astype(np.int32)
    temp = np.array([0.0, 0.7, 1.3], np.float32)
    nb = -(-V // block)
    fill = {k: np.full((n, nb), -7, np.int64 if k == "target_local_argmax" else np.float32) for k in STATS}
    st = vectorized_v2_verify.compute_local_logits_stats(
        **fill, target_logits=x, draft_logits=dl, expanded_idx_mapping=eidx, expanded_local_pos=elp, temperature=temp,
        vocab_size=V, BLOCK_SIZE=block)
    got = tensor_ops_v2.local_logits_stats_rows(
        torch.from_numpy(x), torch.from_numpy(temp[eidx] == 0), torch.from_numpy(bonus_rows(elp)),
        torch.from_numpy(dl[eidx, np.minimum(elp, 3)]), torch.from_numpy(temp[eidx]), V, block)
    for k in STATS:
        w, e, b = (t.numpy() for t in got[k])
        assert np.array_equal(w, fill[k] != -7), k
        want = fill[k][w].astype(np.float64)
        bound = st.bounds[k][w] if k in st.bounds else np.zeros(want.shape)
        exact = bound == 0
        assert np.array_equal(e[w][exact], fill[k][w][exact]), k  # -inf of a masked block included
        with np.errstate(invalid="ignore"):
            assert np.all(np.abs(e[w][~exact].astype(np.float64) - want[~exact]) <= np.maximum(b[w], bound)[~exact]), k
        assert np.array_equal(b[w] > 0, bound > 0), k
        assert np.all(b[w] <= 2 * bound + 1e-30) and np.all(bound <= 2 * b[w] + 1e-30), k


def test_the_gumbel_torch_oracle_is_the_contract(backend):
    """``tensor_ops_v2``'s murmur3 noise is the NumPy oracle's bit for bit (any int64 seeds and
    positions); ``gumbel_sample_rows`` accepts the NumPy oracle's winners and maxima on random
    rows (random, greedy, masked blocks; both noise paths; temperature applied or not) and
    rejects a winner one lane off and a maximum moved past its bound."""
    import torch

    from eaglefuzz.oracles import tensor_ops_v2 as t
    from eaglefuzz.oracles import vectorized_v2_verify as o

    rng = np.random.default_rng(0)
    seed = rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64, endpoint=True)
    pos, off = rng.integers(0, 2**40, 500), rng.integers(0, 262144, 500)
    ts = [torch.from_numpy(v) for v in (seed, pos, off)]
    assert np.array_equal(o.murmur3_hash32(seed, pos, off).astype(np.int64), t.murmur3_hash32(*ts).numpy())
    assert np.array_equal(o.murmur3_uniform32(seed, pos, off), t.murmur3_uniform32(*ts).numpy())
    assert np.array_equal(o.murmur3_uniform64(seed, pos, off), t.murmur3_uniform64(*ts).numpy())
    for fp64, apply in ((False, False), (True, True)):
        T, V = 6, 2100
        x = (rng.standard_normal((T, V)) * 3).astype(np.float32)
        x[2] = 0
        x[3, 1024:2048] = -np.inf
        rows = np.array([0, 1, 2, 3, 4, 0])
        temp = np.array([0.7, 1.0, 0.0, 1.3, 0.5], np.float32)
        seeds = rng.integers(-(2**63), 2**63 - 1, 5, dtype=np.int64, endpoint=True)
        p = rng.integers(0, 5000, T)
        nb = -(-V // 1024)
        la, lm = np.zeros((T, nb), np.int64), np.zeros((T, nb), np.float64 if fp64 else np.float32)
        st = o.gumbel_sample(local_argmax=la, local_max=lm, logits=x, expanded_idx_mapping=rows, seeds=seeds, pos=p,
                             temperature=temp, apply_temperature=apply, is_drafting=False, use_fp64=fp64, logits_cache=None,
                             logits_cache_col=None, logits_cache_source=None)
        assert not st.windows
        res = t.gumbel_sample_rows(*(torch.from_numpy(v) for v in (x, rows, seeds, p, temp)), apply, False, fp64)
        assert int(t.gumbel_mismatches(res, torch.from_numpy(la), torch.from_numpy(lm))) == 0
        la[0, 0] += 1
        lm[1, 1] = lm[1, 1] + max(1e-3, abs(float(lm[1, 1])) * 1e-4)
        assert int(t.gumbel_mismatches(res, torch.from_numpy(la), torch.from_numpy(lm))) == 2


def test_the_rejection_and_resample_torch_oracles_are_the_contract(backend):
    """``tensor_ops_v2.rejection_steps`` and ``resample_rows`` against the NumPy oracles on settled
    random steps (standard, synthetic and block verification; every method's resampling, both noise
    paths, draft logits or one-hot drafts; random requests mostly, so that some of their
    acceptance tests lie near the threshold): ``tl_rand32`` bit for bit, the same tokens, counts
    and log-sum-exps (within the bounds), the same winners; a count one off, a token changed, a
    winner one lane off are each caught."""
    import torch

    from eaglefuzz.harness.targetkit.runner_v2_verify import _rng_chooser, draw_step, settle_step
    from eaglefuzz.harness.targetkit.scale_rows import mismatches
    from eaglefuzz.oracles import tensor_ops_v2 as t
    from eaglefuzz.oracles import vectorized_v2_verify as o

    def T(x):  # noqa: N802
        return None if x is None else torch.from_numpy(np.ascontiguousarray(x))

    rng = np.random.default_rng(7)
    seed = rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64, endpoint=True)
    pos = rng.integers(0, 2**40, 500)
    assert np.array_equal(o.tl_rand32(seed, pos), t.tl_rand32(T(seed), T(pos)).numpy())
    caught = set()
    for it in range(32):
        method = ("standard", "synthetic", "block", "standard")[it % 4]
        step, ch = settle_step(draw_step(_rng_chooser(rng), B=int(rng.integers(2, 9)), method=method, greedy=(0.0,) if it % 8 else (0.3,)))
        a = ch.arrays
        B = step.B
        dl = step.draft_logits
        got = t.rejection_steps(*(T(x) for x in (step.target_logits, a["target_local_argmax"], a["target_local_max"],
                                                 a["target_local_sumexp"], step.draft_sampled, dl,
                                                 a["draft_local_max"], a["draft_local_sumexp"], step.cu_num_logits,
                                                 step.idx_mapping, None if dl is None else step.idx_mapping * dl.shape[1],
                                                 step.temperature, step.seed, step.pos)),
                                step.nb, step.K, method,
                                None if step.rates is None else T(np.broadcast_to(step.rates, (B, step.K)).copy()),
                                T(a.get("cumulative_log_p")), T(a.get("local_residual_mass")))  # fmt: skip
        w, e = got["sampled_written"], got["sampled"]
        assert np.array_equal(np.where(w.numpy(), e.numpy(), -1), a["sampled_before"]), it
        assert np.array_equal(got["num_sampled"].numpy(), a["num_sampled_before"]), it
        assert not got["window"].any(), it  # settled
        for k in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            assert int(mismatches(T(a[k]), got[k], got[k + "_bound"])) == 0, (it, k)
        zero = torch.zeros(B, dtype=torch.float64)
        off = T(a["num_sampled_before"].copy())
        off[0] += 1
        caught.add(int(mismatches(off, got["num_sampled"], zero)) == 1)
        s2 = T(a["sampled_before"].copy())
        s2[0, 0] += 1
        caught.add(int(mismatches(s2, got["sampled"], torch.zeros(s2.shape, dtype=torch.float64))) == 1)
        k = a["num_sampled_before"].astype(np.int64)
        cu = step.cu_num_logits.astype(np.int64)
        j = cu[:-1] + k
        s = step.expanded_idx_mapping[j]
        bonus = j == cu[1:] - 1
        r = np.flatnonzero(~((step.temperature[s] == 0) & ~bonus))
        if not r.size:
            continue
        y = np.where(bonus[r], -1, step.draft_sampled[np.minimum(j[r] + 1, step.n - 1)]).astype(np.int64)
        dl = None if step.draft_logits is None else step.draft_logits[s[r], np.minimum(k[r], step.K - 1)]
        ltau = np.where(k[r] > 0, a["cumulative_log_p"][np.maximum(j[r] - 1, 0)], 0).astype(np.float32) if step.block else None
        res = t.resample_rows(*(T(x) for x in (step.target_logits[j[r]], dl, y, a["target_rejected_logsumexp"][r],
                                               a["draft_rejected_logsumexp"][r], ltau, step.temperature[s[r]],
                                               step.seed[s[r]], step.pos[j[r]])), step.V, step.use_fp64)  # fmt: skip
        la, lm = a["resampled_local_argmax"][r], a["resampled_local_max"][r]
        assert int(t.gumbel_mismatches(res, T(la), T(lm))) == 0, it
        la2 = la.copy()
        la2[0, 0] = la2[0, 0] + 1 if la2[0, 0] % 1024 < min(1023, step.V - 1) else la2[0, 0] - 1
        caught.add(int(t.gumbel_mismatches(res, T(la2), T(lm))) >= 1)
    assert caught == {True}


@pytest.mark.parametrize("name", SCALED)
def test_a_scale_case_is_placed_in_its_tier_by_its_live_rows(name, needs, backend, monkeypatch):
    """``check_case`` (replay, reproducers) takes a production-scale case through the device
    role's scale check, and decides its tier on the rows that matter alone (the rows the NumPy
    and Numba oracles confirm on: at ``2**15``, a few requests of zero rows before them are left
    out), never with the oracles over the whole table: production, and vLLM 0.33.0 passes it."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    monkeypatch.setenv("EAGLEFUZZ_FLAT_LIMIT", str(1 << 15))
    from eaglefuzz.harness.check import assert_case
    from eaglefuzz.harness.checking.device_mode import device_targets

    dt = device_targets()[name]
    case = dt.scale_case(np.random.default_rng(2))
    n = case.arrays[TABLE[name]].shape[0]
    live = dt.confirm_on(case)[0].arrays[TABLE[name]].shape[0]
    target = TARGETS[name]
    seen: list[int] = []
    windows_of = type(target).windows_of
    monkeypatch.setattr(type(target), "windows_of", lambda self, c: seen.append(c.arrays[TABLE[name]].shape[0]) or
                        windows_of(self, c))
    assert_case(case, source="vllm-release:0.33.0", domain="production")
    assert seen == [live] and live < n



@pytest.mark.parametrize("attempts", [None, 0])
def test_standard_steps_compute_again_only_the_requests_in_a_window(attempts, low_limit, monkeypatch):
    """The settling of production-scale standard-verification steps computes §33 and §34 again
    only for the requests left in a window (re-keyed, or after the last attempt made
    placeholders), each request's results its own: with windows forced on a request by its seed
    (its parity, any attempt; every attempt's, with ``attempts`` 0), the steps, their seeds, drafts
    and every settled result equal, bit for bit, those of the reference that computes every
    request again at each attempt, and fewer request rows are computed."""
    import torch

    from eaglefuzz.harness.targetkit import scale_steps
    from eaglefuzz.oracles import tensor_ops_v2

    real, rows = tensor_ops_v2.rejection_steps, []

    def forced(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        got = real(*args, **kwargs)
        seed, cu = args[12], args[8]
        rows.append(int(cu[-1]))
        got["window"] = got["window"] | (seed % 2 == 0)
        return got

    monkeypatch.setattr(tensor_ops_v2, "rejection_steps", forced)
    if attempts is not None:
        monkeypatch.setattr(scale_steps, "ATTEMPTS", attempts)
    for seed in range(3):
        epoch = scale_steps.scale_epoch(seed, "cpu")
        rows.clear()
        got = scale_steps.standard_steps((seed, 100 + seed), "cpu", 16, epoch)
        fewer = sum(rows)
        rows.clear()
        ref = scale_steps.standard_steps((seed, 100 + seed), "cpu", 16, epoch, every_request_again=True)
        assert fewer < sum(rows), "no request was left in a window: the test forces none"
        for a, b in [(got.draft_sampled, ref.draft_sampled), (got.seed, ref.seed), (got.pos, ref.pos),
                     *[(got.rejection[k], ref.rejection[k]) for k in ref.rejection],
                     *[(got.resample[k], ref.resample[k]) for k in ref.resample]]:
            assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))
        assert got.rejection.keys() == ref.rejection.keys() and got.resample.keys() == ref.resample.keys()
        settled = ~(got.rejection["window"] | got.resample["window"])
        assert bool(settled.all()) == (attempts is None)


@pytest.mark.parametrize("cache_share", [0.0, 1.0])
def test_distinct_stats_kept_for_an_epoch_are_each_row_computed_alone(cache_share, low_limit):
    """§30's statistics of a scale epoch's rows, kept per table row and per drafter's row and
    temperature for the epoch's later batches (:func:`~eaglefuzz.harness.targetkit.scale_steps.distinct_stats`),
    equal bit for bit the torch oracle's on each distinct row alone (its table row, temperature,
    bonus flag and drafter's row): every written flag, value and bound, in the epoch's first
    batch and in later ones whose rows are partly kept, partly new."""
    import torch

    from eaglefuzz.harness.targetkit import scale_steps
    from eaglefuzz.oracles import tensor_ops_v2

    epoch = scale_steps.scale_epoch(7, "cpu", cache_share=cache_share)
    assert (epoch.cache is None) == (cache_share == 0.0)
    rng = np.random.default_rng(0)
    live = np.arange(epoch.F, epoch.F + scale_steps.BAND)
    rows_seen, temps_seen = set(), set()
    for batch in range(4):  # the later batches meet rows kept and rows not yet seen
        m = 40
        content = torch.as_tensor(rng.choice(np.concatenate([[0], live[: 10 * (batch + 1)]]), size=m))
        t = torch.as_tensor(rng.choice(scale_steps.TAIL_TEMPERATURES, size=m), dtype=torch.float32)
        bonus = torch.as_tensor(rng.random(m) < 0.2)
        state = torch.as_tensor(rng.integers(epoch.q, epoch.q + scale_steps.TAIL_REQUESTS, size=m))
        elp = torch.as_tensor(rng.integers(0, scale_steps.K + 1, size=m))
        got, inverse = scale_steps.distinct_stats(epoch, content, t, bonus, state, elp)
        draft_at = torch.where((t != 0) & ~bonus, state * scale_steps.K + elp.clamp(max=scale_steps.K - 1), 0)
        draft = None if epoch.cache is None else epoch.cache.view(-1, epoch.V)[draft_at]
        ref = tensor_ops_v2.local_logits_stats_rows(epoch.table[content], t == 0, bonus, draft, t, epoch.V,
                                                    scale_steps.STATS_BLOCK)
        assert got.keys() == ref.keys()
        for name, (w, v, b) in ref.items():
            gw, gv, gb = (x[inverse] for x in got[name])
            assert torch.equal(gw, w), name
            assert gv.dtype == v.dtype and gb.dtype == b.dtype
            assert torch.equal(_bits(gv[w]), _bits(v[w])) and torch.equal(_bits(gb[w]), _bits(b[w])), name
        rows_seen |= set(content.tolist())
        temps_seen |= set(t[(t != 0) & ~bonus].tolist()) if epoch.cache is not None else set()
        assert int(epoch.memo["target"][0].sum()) == len(rows_seen)  # each table row computed once
        assert len(epoch.memo) == 1 + len(temps_seen)
