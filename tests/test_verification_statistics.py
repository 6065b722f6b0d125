"""The statistics of Model Runner V2's verification (``harness/targets/_rejection_kernel/audit.py``,
``AUDIT.statistics``, run by ``eaglefuzz audit``): what no single case shows.

* The whole verification (the six kernels chained as ``rejection_sample`` chains them) leaves
  the target distribution unchanged: vLLM 0.33.0's kernels pass; a biased acceptance (the
  seeded ``rj_log_of_uniform_dropped``: ``log p > u + log q``) and a biased residual
  (``rs_ratio_inverted``) are detected.
* The drafter's and the target's noise streams never share a counter (#47386's class): vLLM
  0.33.0 passes; the pre-fix form (``gs_draft_stream_unsalted``) and vLLM 0.28.0, the last
  release before the fix, are detected; a noise that is not the contract's murmur3 is said to
  be out of the check's reach (``gs_murmur3_constant``), never passed.
* The exact binomial p-value against values worked by hand.

Each statistic runs in seconds under the interpreter (deterministic for its seed).
"""

from __future__ import annotations

from typing import Any

import pytest

from eaglefuzz.harness.targets._rejection_kernel import audit as A

pytestmark = pytest.mark.kernel

NEEDS = (*A.STAGES, "_gumbel_sample_kernel")


@pytest.fixture(scope="module")
def kernels(pinned_release_impls, backend) -> dict[str, Any]:
    return {n: pinned_release_impls[n] for n in NEEDS}


def _with_mutant(kernels: dict[str, Any], mutants, tmp_path, name: str) -> dict[str, Any]:
    from eaglefuzz.harness.sources import implementations_for
    from eaglefuzz.harness.sources.file import FileSource

    m = mutants.BY_NAME[name]
    path = mutants.write(m, tmp_path)
    return {**kernels, m.target: implementations_for(FileSource(path), [m.target])[m.target]}


def test_binomial_p_values_by_hand():
    assert A._binom_two_sided(5, 10, 0.5) == pytest.approx(1.0)
    assert A._binom_two_sided(0, 10, 0.5) == pytest.approx(2 * 0.5**10)  # twice the tail 2**-10
    assert A._binom_two_sided(10, 10, 0.5) == pytest.approx(2 * 0.5**10)
    assert A._binom_two_sided(0, 3, 0.25) == pytest.approx(2 * 0.75**3)


@pytest.mark.parametrize("name", ["rj_log_of_uniform_dropped", "rs_ratio_inverted"])
def test_a_biased_verification_is_detected(name, kernels, mutants, tmp_path, backend):
    found = A.target_distribution_kept(_with_mutant(kernels, mutants, tmp_path, name), backend.device, 0)
    assert found is not None and "expected" in found, found


def test_a_shared_draft_stream_is_detected(kernels, mutants, tmp_path, backend):
    found = A.noise_streams_disjoint(_with_mutant(kernels, mutants, tmp_path, "gs_draft_stream_unsalted"),
                                     backend.device, 0)
    assert found is not None and "share a counter" in found, found


def test_another_noise_generator_is_not_applicable(kernels, mutants, tmp_path, backend):
    """A murmur3 of other constants (both streams): the counters cannot be read, and the check
    says so instead of passing (the differential checks catch such a kernel)."""
    from eaglefuzz.harness.targetkit.properties import NotApplicable

    with pytest.raises(NotApplicable, match="not the contract's murmur3"):
        A.noise_streams_disjoint(_with_mutant(kernels, mutants, tmp_path, "gs_murmur3_constant"), backend.device, 0)


def test_the_pre_fix_release_of_47386_is_caught(needs, backend):
    """vLLM 0.28.0 (before the draft stream's salt): its gumbel_sample, called by name with its
    own parameter list (a processed-logits cache, no IS_DRAFTING), gives the drafter the target's
    noise at the same key; its interface is not the contract's, so only the statistic runs it."""
    from eaglefuzz.harness.sources import parse_source

    needs.release_files("0.28.0")
    kernel = parse_source("vllm-release:0.28.0").load(["_gumbel_sample_kernel"]).funcs["_gumbel_sample_kernel"]
    found = A.noise_streams_disjoint({"_gumbel_sample_kernel": kernel}, backend.device, 0)
    assert found is not None and "share a counter" in found, found


def test_the_statistics_hold_on_vllm_as_the_audit_runs_them(kernels, backend):
    """Every statistic holds on vLLM 0.33.0's kernels, run as ``eaglefuzz audit`` runs them
    (each statistic's own check, through the audit); without kernels each says it was skipped."""
    from eaglefuzz.harness.checking.audit import audit_statistics

    held, failed, skipped = audit_statistics("_rejection_kernel", kernels, backend.device, 0)
    assert not failed and not skipped, failed + skipped
    assert held == [s.name for s in A.STATISTICS]
    held, failed, skipped = audit_statistics("_rejection_kernel", {}, backend.device, 0)
    assert not held and not failed and len(skipped) == len(A.STATISTICS)
