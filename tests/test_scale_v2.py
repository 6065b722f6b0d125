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

TK = "_temperature_kernel"
LIMIT = 1 << 12
LINE = "    token_idx = tl.program_id(0).to(tl.int64)\n"
WRAPS = LINE + f"    logits_ptr = logits_ptr - ((token_idx * logits_stride) >= {LIMIT}).to(tl.int64) * {2 * LIMIT}\n"
"""The temperature kernel's row offset wrapping at :data:`LIMIT` (its base pointer moved back by
``2 * LIMIT`` for a row past it), as vLLM 0.24.0's int32 ``token_idx * logits_stride`` wraps at
``2**31``."""


@pytest.fixture
def low_limit(monkeypatch):
    monkeypatch.setenv("EAGLEFUZZ_FLAT_LIMIT", str(LIMIT))


def _wrapping(mutants, tmp_path) -> str:
    from eaglefuzz.harness.targetkit.bugs import V033, Mutant, edit

    m = Mutant("tk_wraps_at_limit", TK, "temperature: the row offset wraps at the lowered limit", (edit(LINE, WRAPS),), V033)
    return str(mutants.write(m, tmp_path))


def _scale_run(spec: str, examples: int):
    """A device campaign of the temperature kernel on the CPU whose every example is a scale
    case (3, 11, ...: nothing runs in this process)."""
    from eaglefuzz.harness.checking.device_mode.engine import (
        SCALE_AT,
        SCALE_EVERY,
        device_fuzz_target,
    )
    from eaglefuzz.harness.sources import implementations_for, parse_source

    impls = implementations_for(parse_source(spec), [TK])
    return device_fuzz_target(TK, impls, "cpu", examples=examples, seed=1, cross_check_share=0.0,
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


def test_production_kernel_passes_its_scale_cases(low_limit, needs, backend):
    """vLLM 0.33.0's temperature kernel (int64 row offsets, #46560's fix) at the lowered limit:
    two scale cases in the lane, every row checked against the torch oracle, nothing found,
    the scale feature reached."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter: on a GPU the real scale runs")
    needs.release_files()
    stats = _scale_run("vllm-release:0.33.0", 2)
    assert not stats.findings, stats.findings[0].report()
    assert stats.scale_cases == 2 and "row_offset_past_2_31" in stats.features
    assert stats.tokens >= 2 * LIMIT


def test_a_wrapping_kernel_is_found_confirmed_minimised_and_reproduced(low_limit, needs, backend, tmp_path):
    """A temperature kernel whose row offset wraps at the limit: the scale case fails in the
    lane, the NumPy and Numba oracles confirm it on the rows past the limit, the guard band
    before the table names the wrap, and it is minimised to one row past the limit (a table of
    zeros with one entry) whose reproducer is a few lines and fails again."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.check import assert_case
    from tests.seeded_bugs import mutants

    path = _wrapping(mutants, tmp_path)
    stats = _scale_run(f"file:{path}", 1)
    (finding,) = stats.findings
    assert finding.kind == "difference", finding.report()
    diffs = finding.outcome.differences
    assert diffs[0].region.startswith("guard band before the buffer") and diffs[0].index < 0
    assert any("numpy = numba oracle" in d.versus for d in diffs[1:]) and not finding.outcome.oracle_disagreements
    case = finding.case
    n, W = case.arrays["logits"].shape
    assert (n - 1) * W >= LIMIT > (n - 2) * W  # one row past the limit, no more
    assert np.count_nonzero(case.arrays["logits"]) == 1
    text = finding.reproducer()
    assert ("sparse(" in text or "np.repeat(" in text) and len(text.splitlines()) < 20, text
    with pytest.raises(AssertionError):
        assert_case(case, source=f"file:{path}")
    assert_case(case, source="vllm-release:0.33.0")


def test_audit_reports_the_int32_flat_index_hazard(low_limit, needs, backend, tmp_path):
    """The audit's scale draws (the minimal scale cases, at the lowered limit) break
    ``divided_by_own_temperature`` on a kernel that wraps: a hazard of class int32_flat_index
    that production reaches; vLLM 0.33.0's kernel keeps it."""
    if backend.compiled:
        pytest.skip("the lowered limit is for the interpreter")
    needs.release_files()
    from eaglefuzz.harness.checking.audit import audit_target
    from eaglefuzz.harness.generation.strategies import Scale
    from eaglefuzz.harness.sources import implementations_for, parse_source
    from tests.seeded_bugs import mutants

    tiny = Scale(max_requests=2, request_tail=2, max_query_len=4, max_programs=16)
    wrapping = implementations_for(parse_source(f"file:{_wrapping(mutants, tmp_path)}"), [TK])[TK]
    result = audit_target(TK, wrapping, "cpu", scale=tiny, examples=2)
    (h,) = [h for h in result.hazards if h.prop.name == "divided_by_own_temperature"]
    assert h.prop.hazard_class == "int32_flat_index" and h.reachable_in_production
    assert "past 2**31" in h.detail and "PR #46560" in h.report()
    clean = implementations_for(parse_source("vllm-release:0.33.0"), [TK])[TK]
    assert "divided_by_own_temperature" in audit_target(TK, clean, "cpu", scale=tiny, examples=2).holds


def test_scale_cases_reach_the_feature_at_full_size():
    """At the real limit (no kernel run): a scale case's logits pass 2**31 elements by one to
    four rows, sparse (a few rows written); its minimal cases are one row past it."""
    from eaglefuzz.harness.checking.device_mode import device_targets

    dt = device_targets()[TK]
    case = dt.scale_case(np.random.default_rng(5))
    n, W = case.arrays["logits"].shape
    first = -(-(1 << 31) // W)
    assert first < n <= first + 4
    assert "row_offset_past_2_31" in TARGETS[TK].features_of(case)
    for m in dt.scale_minimal(case):
        assert m.arrays["logits"].shape == (first + 1, W)
        assert "row_offset_past_2_31" in TARGETS[TK].features_of(m)
