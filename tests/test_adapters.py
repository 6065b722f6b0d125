"""Ports and foreign implementations: :func:`~eaglefuzz.harness.adapters.grid_kernel` and the
example port ``examples/ports/next_token_torch.py``, fuzzed like any implementation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from eaglefuzz.harness.adapters import grid_kernel
from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.corpus import CORPUS_DIR, load_entry
from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target, fuzz_target
from eaglefuzz.harness.generation.strategies import Scale, derive_seed
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.file import FileSource

ROOT = Path(__file__).resolve().parent.parent
PORT = ROOT / "examples" / "ports" / "next_token_torch.py"
NT, PI = "eagle_prepare_next_token_padded_kernel", "eagle_prepare_inputs_padded_kernel"
SMALL = Scale(max_requests=8, request_tail=16, max_query_len=16, max_programs=64)


@pytest.mark.kernel
def test_the_torch_port_keeps_the_contract(backend, fuzz_seed, warm_oracles):
    impls = implementations_for(FileSource(PORT))
    assert list(impls) == [NT] and impls[NT].parameters[0] == "sampled_token_ids_ptr"
    stats = fuzz_target(NT, impls, backend.device, SMALL, seed=derive_seed(fuzz_seed, "torch-port"), examples=30)
    assert not stats.findings, stats.findings[0].report()
    for f in sorted((CORPUS_DIR / NT).glob("*.json")):
        entry = load_entry(f)
        finding = check_case(entry.case, impls, backend.device, domain=entry.tier)
        assert finding is None, finding.report()


@pytest.mark.kernel
def test_what_the_extended_tier_says_about_the_torch_port(backend, warm_oracles):
    """The port reads all S columns and has no use for BLOCK_SIZE_TOKENS: it parts from the
    reference where BLOCK_SIZE_TOKENS < S (the kernel reads only that many), and it raises on
    S = 0 (argmax over no column). Both are edge divergences, no contract violation."""
    impls = implementations_for(FileSource(PORT))
    stats = bulk_fuzz_target(NT, impls, backend.device, SMALL, seed=3, examples=60, domain="extended",
                             stop_on_finding=False)
    assert stats.findings and not stats.contract_findings
    causes = {"block_below_s", "no_column"}
    assert all(impls_edges(f) & causes for f in stats.findings), [f.report() for f in stats.findings]
    assert causes <= {e for f in stats.findings for e in impls_edges(f)}, [f.report() for f in stats.findings]
    crash = [f for f in stats.findings if f.outcome.crash]
    assert len(crash) == 1 and "argmax" in crash[0].outcome.crash


def impls_edges(finding) -> set[str]:
    from eaglefuzz.harness.targets import TARGETS

    return set(TARGETS[NT].extended_features_of(finding.case))


# -- grid_kernel ------------------------------------------------------------------------


def test_grid_kernel_binds_by_name_with_or_without_ptr():
    seen = {}

    @grid_kernel
    def eagle_prepare_inputs_padded_kernel(cu_num_draft_tokens, valid_sampled_tokens_count_ptr,
                                           query_start_loc_gpu, token_indices_to_sample, num_rejected_tokens_gpu,
                                           num_reqs, grid):
        seen.update(locals())

    k = eagle_prepare_inputs_padded_kernel
    assert k.__name__ == PI and k.parameters[-1] == "num_reqs"
    k[(4,)](1, 2, 3, 4, 5, num_reqs=6)
    assert [seen[n] for n in ("cu_num_draft_tokens", "valid_sampled_tokens_count_ptr", "num_reqs")] == [1, 2, 6]
    assert seen["grid"] == (4,)
    with pytest.raises(TypeError, match="missing arguments num_reqs"):
        k[(1,)](1, 2, 3, 4, 5)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: grid_kernel(lambda cu_num_draft_tokens: None, name=PI), "takes no valid_sampled_tokens_count_ptr"),
        (lambda: grid_kernel(lambda x: None, name="no_such_kernel"), "is not a kernel target"),
        (lambda: grid_kernel(lambda num_reqs, extra: None, name=PI,
                             ignores=("cu_num_draft_tokens_ptr", "valid_sampled_tokens_count_ptr",
                                      "query_start_loc_gpu_ptr", "token_indices_to_sample_ptr",
                                      "num_rejected_tokens_gpu_ptr")), "takes extra"),
        (lambda: grid_kernel(lambda num_reqs: None, name=PI, ignores=("num_reqs",)), "both taken and ignored"),
        (lambda: grid_kernel(lambda: None, name="extend_all_queries_by_N"), "is not a kernel target"),
        (lambda: grid_kernel(lambda num_reqs: None, name=PI, variant="no such variant"), "has no variant 'no such"),
        (lambda: grid_kernel(lambda cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc_gpu,
                             token_indices_to_sample, num_rejected_tokens_gpu, num_reqs: None, name=PI,
                             variant="without num_rejected_tokens"), "takes num_rejected_tokens_gpu, which"),
    ],
    ids=["missing", "unknown_target", "unknown_parameter", "taken_and_ignored", "not_a_kernel", "unknown_variant",
         "not_the_variants_parameters"],
)
def test_grid_kernel_refuses_what_does_not_line_up(make, message):
    with pytest.raises(TypeError, match=message):
        make()


NUMPY_PORT = '''
"""eagle_prepare_inputs_padded_kernel in NumPy, one request at a time."""
from eaglefuzz.harness.adapters import grid_kernel


@grid_kernel(numpy=True)
def eagle_prepare_inputs_padded_kernel(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc_gpu,
                                       token_indices_to_sample, num_rejected_tokens_gpu, num_reqs):
    prev = 0
    for r in range(num_reqs):
        d = int(cu_num_draft_tokens[r]) - prev
        prev = int(cu_num_draft_tokens[r])
        rejected = d + 1 - int(valid_sampled_tokens_count[r]) if d > 0 else 0
        token_indices_to_sample[r] = int(query_start_loc_gpu[r + 1]) - 1 - rejected
        num_rejected_tokens_gpu[r] = rejected
'''


@pytest.mark.kernel
def test_a_numpy_port_in_one_small_file(tmp_path, backend, warm_oracles):
    path = tmp_path / "numpy_port.py"
    path.write_text(NUMPY_PORT)
    impls = implementations_for(FileSource(path))
    for domain in ("production", "extended"):
        stats = bulk_fuzz_target(PI, impls, backend.device, SMALL, seed=5, examples=10, domain=domain)
        assert not stats.findings, stats.findings[0].report()


def test_numpy_adapter_writes_through_to_the_tensor():
    @grid_kernel(numpy=True, name=PI)
    def port(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc_gpu, token_indices_to_sample,
             num_rejected_tokens_gpu, num_reqs):
        assert isinstance(token_indices_to_sample, np.ndarray)
        token_indices_to_sample[:num_reqs] = 7

    out = torch.zeros(3, dtype=torch.int32)
    port[(3,)](None, None, None, out, None, 2)
    assert out.tolist() == [7, 7, 0]
