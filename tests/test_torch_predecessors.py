"""The torch predecessors of ``eagle_prepare_next_token_padded_kernel`` (``--vllm-torch X.Y.Z``):
vLLM 0.11.x's ``EagleProposer.prepare_next_token_ids_padded``, taken from the release wheel at
run time and fuzzed through an adapter (:mod:`eaglefuzz.harness.sources.vllm_torch`).

vLLM replaced the torch code by the Triton kernel and declared the two equivalent (PR #28597):
on the production tier (docs/CONTRACT.md §3.2, the rejection sampler's rows) the post-fix
0.11.2 code must agree with the kernel's contract, and it parts only in the extended tier (an
invalid id before a valid one: it takes column ``count - 1``, not the last valid column). The
pre-fix 0.11.0 code (before PR #26231) counts a ``-1`` as valid in its width-1 fast path, so a
discarded request of a batch without drafts gets count 1 and next token -1: a production
finding. The wheels are fetched once (``eagle.py`` only); offline, these tests skip.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target, fuzz_target
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.generation.strategies import Scale, derive_seed
from eaglefuzz.harness.sources import implementations_for, parse_source, wheels
from eaglefuzz.harness.sources.vllm_torch import VllmTorchSource, method_source
from eaglefuzz.harness.targets import TARGETS, ContractViolation

NT = "eagle_prepare_next_token_padded_kernel"
SMALL = Scale(max_requests=8, request_tail=16, max_query_len=16, max_programs=64)

pytestmark = pytest.mark.kernel


def _impls(version: str, needs):  # noqa: ANN001, ANN202
    source = parse_source(f"vllm-torch:{version}")
    assert isinstance(source, VllmTorchSource)
    try:
        source.module_file()
    except wheels.FetchFailed as exc:
        if not exc.offline:
            raise
        needs.unavailable("offline", f"vLLM {version}: {exc}")
    impls = implementations_for(source, [NT])
    assert list(impls) == [NT]
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
