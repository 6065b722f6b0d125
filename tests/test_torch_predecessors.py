"""The torch predecessors of ``eagle_prepare_next_token_padded_kernel`` and
``eagle_prepare_inputs_padded_kernel`` (``--vllm-torch X.Y.Z``): vLLM 0.11.x's
``EagleProposer.prepare_next_token_ids_padded`` and ``EagleProposer.prepare_inputs_padded``,
taken from the release wheel at run time and fuzzed through adapters
(:mod:`eaglefuzz.harness.sources.vllm_torch`).

vLLM replaced the torch code by the Triton kernels and declared them equivalent (PR #28597):
on the production tier (docs/CONTRACT.md §3.2, the rejection sampler's rows) the post-fix
0.11.2 ``prepare_next_token_ids_padded`` must agree with the kernel's contract, and it parts
only in the extended tier (an invalid id before a valid one: it takes column ``count - 1``, not
the last valid column). The pre-fix 0.11.0 code (before PR #26231) counts a ``-1`` as valid in
its width-1 fast path, so a discarded request of a batch without drafts gets count 1 and next
token -1: a production finding. ``prepare_inputs_padded`` (both releases, the same formula as the
kernel) agrees in both tiers through the kernel's variant interface without
``num_rejected_tokens`` (§2.4); a copy with the rejected count off by one is caught. The wheels
are fetched once (``eagle.py`` only); offline, these tests skip.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target, fuzz_target
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.generation.strategies import Scale, derive_seed
from eaglefuzz.harness.sources import Implementations, implementations_for, parse_source, wheels
from eaglefuzz.harness.sources.file import exec_module
from eaglefuzz.harness.sources.vllm_torch import (
    METHODS,
    VARIANT,
    VllmTorchSource,
    inputs_padded_adapter,
    load_method,
    method_source,
)
from eaglefuzz.harness.targets import TARGETS, ContractViolation

NT = "eagle_prepare_next_token_padded_kernel"
PI = "eagle_prepare_inputs_padded_kernel"
SMALL = Scale(max_requests=8, request_tail=16, max_query_len=16, max_programs=64)

pytestmark = pytest.mark.kernel


def _source(version: str, needs) -> VllmTorchSource:  # noqa: ANN001
    source = parse_source(f"vllm-torch:{version}")
    assert isinstance(source, VllmTorchSource)
    try:
        source.module_file()
    except wheels.FetchFailed as exc:
        if not exc.offline:
            raise
        needs.unavailable("offline", f"vLLM {version}: {exc}")
    return source


def _impls(version: str, needs, name: str = NT):  # noqa: ANN001, ANN202
    impls = implementations_for(_source(version, needs), [name])
    assert list(impls) == [name]
    return impls


def _case(rows: list[list[int]], discard: list[bool], backup: list[int], vocab: int) -> Case:
    return Case(NT, {
        "sampled_token_ids": np.array(rows, dtype=np.int32),
        "discard_request_mask": np.array(discard, dtype=np.bool_),
        "backup_next_token_ids": np.array(backup, dtype=np.int32),
    }, {"vocab_size": vocab, "num_sampled_tokens_per_req": len(rows[0]), "num_reqs": len(rows)},
        {"block_size_tokens": None, "grid_size": None})


ISSUE_22 = ([[2147483616, 2147483594, 2147483587, 2147483647, 2147483615]], [False], [0], 2147483647)
"""Issue 22's example: an id >= vocab_size before a valid one (the rejection sampler never
writes one)."""

PR_26231 = ([[5]], [True], [7], 10)
"""PR #26231's scenario: a discarded request (a chunked prefill) in a batch without drafts."""


def test_post_fix_is_clean_in_production_and_diverges_in_the_extended_tier(needs, backend, warm_oracles):
    impls = _impls("0.11.2", needs)
    stats = bulk_fuzz_target(NT, impls, backend.device, SMALL, seed=derive_seed(0, "torch-0.11.2"), examples=60)
    assert not stats.findings, stats.findings[0].report()
    stats = fuzz_target(NT, impls, backend.device, SMALL, seed=derive_seed(0, "torch-0.11.2"), examples=40,
                        shrink=False)
    assert not stats.findings, stats.findings[0].report()
    assert check_case(_case(*PR_26231), impls, backend.device) is None
    case = _case(*ISSUE_22)
    with pytest.raises(ContractViolation, match="sampled_token_ids"):
        TARGETS[NT].validate(case)
    finding = check_case(case, impls, backend.device, domain="extended")
    assert finding is not None and finding.kind == "edge divergence", finding and finding.report()
    assert [(d.array, d.expected, d.actual) for d in finding.outcome.differences] == [
        ("next_token_ids", 2147483615, 2147483647)]
    stats = bulk_fuzz_target(NT, impls, backend.device, SMALL, seed=derive_seed(0, "torch-0.11.2"), examples=40,
                             domain="extended")
    assert stats.findings and all(f.kind == "edge divergence" for f in stats.findings), stats.findings


def test_pre_fix_is_caught_in_production(needs, backend, warm_oracles):
    impls = _impls("0.11.0", needs)
    finding = check_case(_case(*PR_26231), impls, backend.device)
    assert finding is not None and finding.kind == "difference" and finding.tier == "production"
    assert sorted((d.array, d.actual) for d in finding.outcome.differences) == [
        ("next_token_ids", -1), ("valid_sampled_tokens_count", 1)]
    stats = fuzz_target(NT, impls, backend.device, SMALL, seed=derive_seed(0, "torch-0.11.0"), examples=100,
                        shrink=False)
    assert [f.kind for f in stats.contract_findings] == ["difference"], [f.report() for f in stats.findings]
    assert "single_column" in TARGETS[NT].features_of(stats.findings[0].case)


def test_a_release_without_the_method_is_a_one_line_error(tmp_path):
    path = tmp_path / "eagle.py"
    path.write_text("class EagleProposer:\n    def prepare_inputs(self):\n        pass\n")
    with pytest.raises(UserError, match=r"has no EagleProposer.prepare_next_token_ids_padded \(the torch "):
        method_source(path, "prepare_next_token_ids_padded")
    assert method_source(path, "prepare_inputs").startswith("def prepare_inputs(self):")
    with pytest.raises(UserError, match="needs a version"):
        parse_source("vllm-torch")


def test_the_source_has_both_predecessors_each_named_as_what_ran(needs):
    impls = implementations_for(_source("0.11.2", needs))  # what `eaglefuzz fuzz --vllm-torch 0.11.2` runs
    assert sorted(impls) == sorted(METHODS) == [PI, NT]
    assert impls.origin[PI].function == "EagleProposer.prepare_inputs_padded"
    assert impls.origin[NT].function == "EagleProposer.prepare_next_token_ids_padded"
    assert TARGETS[PI].variant_of(impls[PI]) == VARIANT and TARGETS[NT].variant_of(impls[NT]) is None
    assert f"[variant: {VARIANT}]" in str(impls.origin[PI])


@pytest.mark.parametrize("version", ["0.11.2", "0.11.0"])
def test_prepare_inputs_padded_is_clean_in_both_tiers(version, needs, backend, warm_oracles):
    """PR #28597's equivalence for the other function: the torch code agrees with the kernel's
    contract on every case of the production and the extended tier (bulk and Hypothesis)."""
    impls = _impls(version, needs, PI)
    seed = derive_seed(0, f"torch-{version}-inputs")
    for domain in ("production", "extended"):
        stats = bulk_fuzz_target(PI, impls, backend.device, SMALL, seed=seed, examples=40, domain=domain)
        assert not stats.findings, stats.findings[0].report()
        assert stats.tiers.get(domain, 0) >= 1, stats.tiers
    stats = fuzz_target(PI, impls, backend.device, SMALL, seed=seed, examples=20, shrink=False)
    assert not stats.findings, stats.findings[0].report()


def test_prepare_inputs_padded_with_the_rejected_count_off_by_one_is_caught(needs, backend, warm_oracles, tmp_path):
    """The 0.11.2 method with ``d + 1 - valid`` turned into ``d - valid`` (one rejected token
    fewer), behind the same adapter: a production difference in token_indices_to_sample."""
    source = _source("0.11.2", needs)
    text = method_source(source.module_file(), METHODS[PI])
    right = "num_draft_tokens_gpu + 1 - valid_sampled_tokens_count"
    assert text.count(right) == 1
    good = load_method("0.11.2", source.module_file(), METHODS[PI])
    header = Path(good.__code__.co_filename).read_text(encoding="utf-8").split("def prepare_inputs_padded")[0]
    file = tmp_path / "broken_prepare_inputs_padded.py"
    file.write_text(header + text.replace(right, "num_draft_tokens_gpu - valid_sampled_tokens_count"), encoding="utf-8")
    broken = exec_module("eaglefuzz_test_broken_prepare_inputs_padded", file).prepare_inputs_padded
    impls = Implementations({PI: inputs_padded_adapter(broken)}, {PI: source.origin(PI)}, source)
    case = Case(PI, {"cu_num_draft_tokens": np.array([2, 2], dtype=np.int32),
                     "valid_sampled_tokens_count": np.array([1, 1], dtype=np.int32),
                     "query_start_loc": np.array([0, 3, 5], dtype=np.int32)}, {"num_reqs": 2}, {"grid_size": None})
    TARGETS[PI].validate(case)
    assert check_case(case, implementations_for(source, [PI]), backend.device) is None
    finding = check_case(case, impls, backend.device)
    assert finding is not None and finding.kind == "difference" and finding.tier == "production"
    assert [(d.array, d.index, d.expected, d.actual) for d in finding.outcome.differences] == [
        ("token_indices_to_sample", 0, 0, 1)]
    stats = bulk_fuzz_target(PI, impls, backend.device, SMALL, seed=derive_seed(0, "torch-broken"), examples=20)
    assert stats.contract_findings and stats.contract_findings[0].kind == "difference"
