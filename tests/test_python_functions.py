"""The two Python functions of the module: ``extend_all_queries_by_N`` and
``create_vllm_config_for_draft_model`` (docs/CONTRACT.md §4 and §5).

Both targets are also fuzzed by tests/test_differential.py and their seeded bugs are run by
tests/test_seeded_bugs.py; here: their oracles on hand-worked examples, fuzzing with more
examples, what the checks report (mutation, the assertion, dtype and device), the contract's
limits, and a run against vLLM's own classes when vLLM is installed.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, seed, settings

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.corpus import decode, encode
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.strategies import INT32_MAX, Scale, derive_seed
from eaglefuzz.harness.targets import TARGETS, ContractViolation
from eaglefuzz.harness.targets.create_vllm_config_for_draft_model.record import (
    DraftConfig,
    build_config,
)
from eaglefuzz.harness.targets.extend_all_queries_by_N.record import ExtendAllQueries
from eaglefuzz.oracles import python_functions as pf

EXTEND = "extend_all_queries_by_N"
DRAFT = "create_vllm_config_for_draft_model"
NAMES = (EXTEND, DRAFT)
SMALL = Scale(max_requests=4, request_tail=8, max_query_len=16, max_programs=64)


def _extend_case(**scalars) -> Case:
    base = dict(
        N=3,
        num_reqs=2,
        num_actual_tokens=7,
        max_query_len=4,
        max_seq_len=20,
        causal=True,
        optional_fields=True,
        device_copies_on_device=True,
    )
    base.update(scalars)
    return Case(
        kernel=EXTEND,
        arrays={
            "query_start_loc": np.array([0, 3, 7], dtype=np.int32),
            "seq_lens": np.array([10, 20], dtype=np.int32),
            "block_table": np.array([[1, 2], [3, 4]], dtype=np.int32),
            "slot_mapping": np.arange(7, dtype=np.int64),
            "new_slot_mapping": np.arange(100, 113, dtype=np.int64),
            "arange": np.arange(8, dtype=np.int32),
        },
        scalars=base,
    )


def _draft_case(**scalars) -> Case:
    rng = np.random.default_rng(7)
    case = TARGETS[DRAFT].random_case(rng, SMALL)
    return case.replace(scalars={"speculative_config_present": True, "quant_config_present": True, **scalars})


def _regions(finding) -> set[str]:
    return {d.region for d in finding.outcome.differences}


# -- oracles on hand-worked examples --------------------------------------------------------


@pytest.mark.parametrize("oracle", [pf.extend_all_queries_by_n, pf.extend_all_queries_by_n_loops])
def test_extend_oracle_example(oracle):
    out = oracle(
        query_start_loc=np.array([0, 3, 7], dtype=np.int32),
        seq_lens=np.array([10, 20], dtype=np.int32),
        num_actual_tokens=7,
        max_query_len=4,
        max_seq_len=20,
        n=3,
        new_slot_mapping=np.array([5, -1], dtype=np.int64),
    )
    assert out["query_start_loc"].dtype == np.int32 and out["query_start_loc"].tolist() == [0, 6, 13]
    assert out["query_start_loc_cpu"].tolist() == [0, 6, 13]
    assert out["seq_lens"].dtype == np.int32 and out["seq_lens"].tolist() == [13, 23]
    assert (out["num_actual_tokens"], out["max_query_len"], out["max_seq_len"]) == (13, 7, 23)
    assert out["slot_mapping"].dtype == np.int64 and out["slot_mapping"].tolist() == [5, -1]


@pytest.mark.parametrize("oracle", [pf.extend_all_queries_by_n, pf.extend_all_queries_by_n_loops])
def test_extend_oracle_batch_size_is_len_seq_lens_and_wraps_like_torch(oracle):
    out = oracle(
        query_start_loc=np.array([0, INT32_MAX], dtype=np.int32),
        seq_lens=np.array([INT32_MAX], dtype=np.int32),
        num_actual_tokens=0,
        max_query_len=0,
        max_seq_len=0,
        n=1,
        new_slot_mapping=np.zeros(0, dtype=np.int64),
    )
    assert out["num_actual_tokens"] == 1  # one request, not len(query_start_loc) = 2
    assert out["query_start_loc"].tolist() == [0, -(2**31)]
    assert out["seq_lens"].tolist() == [-(2**31)]
    q = torch.tensor([0, INT32_MAX], dtype=torch.int32) + 1 * torch.arange(2, dtype=torch.int32)
    assert q.tolist() == out["query_start_loc"].tolist()


def test_draft_oracle_example():
    target = {
        "model_config": {"model": "t"},
        "parallel_config": {"rank": 3, "tensor_parallel_size": 8},
        "quant_config": {"method": "fp8"},
        "cache_config": {"block_size": 16},
        "speculative_config": {
            "draft_model_config": {"model": "d"},
            "draft_parallel_config": {"rank": 0, "tensor_parallel_size": 1},
        },
    }
    snapshot = repr(target)
    out = pf.draft_vllm_config(target)
    assert out["model_config"] == {"model": "d"}
    assert out["parallel_config"] == {"rank": 3, "tensor_parallel_size": 1}
    assert out["quant_config"] is None
    assert out["cache_config"] == {"block_size": 16}
    assert out["speculative_config"] == target["speculative_config"]
    assert repr(target) == snapshot
    with pytest.raises(AssertionError):
        pf.draft_vllm_config({**target, "speculative_config": None})


# -- fuzzing --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_bulk_cases_pass(name, impls, backend, scale):
    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(0, "bulk", name))
    for _ in range(400):
        case = target.random_case(rng, scale)
        target.validate(case)
        assert target.oracle_check(case) == []
        finding = check_case(case, impls, backend.device)
        assert finding is None, finding.report()


@pytest.mark.parametrize("name", NAMES)
def test_cases_round_trip(name):
    target = TARGETS[name]
    rng = np.random.default_rng(3)
    for _ in range(20):
        case = target.random_case(rng, SMALL)
        assert eval(case.to_python(), {"np": np, "Case": Case}) == case
        assert decode(encode(case), "round-trip").case == case


# -- extend_all_queries_by_N: what the check reports ---------------------------------------------


def _run(case: Case, fn, device: str = "cpu", tier: str = "production"):
    target = TARGETS[case.kernel]
    target.validate(case, tier)
    outcome = target.check(case, fn, device)
    return outcome


def test_extend_hand_case_passes(impls, backend):
    for scalars in ({}, {"optional_fields": False}):
        assert check_case(_extend_case(**scalars), impls, backend.device) is None
    for scalars in ({"N": 0}, {"num_reqs": 1}, {"device_copies_on_device": False}):  # the extended tier (§4.4)
        assert check_case(_extend_case(**scalars), impls, backend.device, domain="extended") is None


def test_extend_in_place_mutation_is_reported(impls):
    good = impls[EXTEND]

    def in_place(cad, N, arange, new_slot_mapping):
        out = good(cad, N, arange, new_slot_mapping)
        cad.seq_lens.add_(N)  # the result is right; the input is not left alone
        return out

    outcome = _run(_extend_case(), in_place)
    assert {(d.array, d.region) for d in outcome.differences} == {("seq_lens", "input mutated")}


def test_extend_rebinding_an_input_field_is_reported(impls):
    good = impls[EXTEND]

    def rebinds(cad, N, arange, new_slot_mapping):
        out = good(cad, N, arange, new_slot_mapping)
        cad.slot_mapping = new_slot_mapping
        return out

    regions = {d.region for d in _run(_extend_case(), rebinds).differences}
    assert "input mutated (rebound)" in regions


def test_extend_returning_the_input_is_reported():
    def in_place_replace(cad, N, arange, new_slot_mapping):
        cad.num_actual_tokens += cad.batch_size() * N
        return cad

    outcome = _run(_extend_case(), in_place_replace)
    regions = {(d.array, d.region) for d in outcome.differences}
    assert ("result", "result") in regions
    assert ("num_actual_tokens", "input mutated") in regions
    assert ("query_start_loc", "changed field") in regions


def test_extend_argument_mutation_is_reported(impls):
    good = impls[EXTEND]

    def scribbles(cad, N, arange, new_slot_mapping):
        arange.mul_(N)
        return good(cad, 1, torch.arange(len(arange), dtype=torch.int32), new_slot_mapping)

    regions = {(d.array, d.region) for d in _run(_extend_case(), scribbles).differences}
    assert ("arange", "input mutated") in regions


def test_extend_unchanged_field_is_reported(impls):
    good = impls[EXTEND]

    def drops_block_table(cad, N, arange, new_slot_mapping):
        return replace(good(cad, N, arange, new_slot_mapping), block_table_tensor=cad.block_table_tensor[:1])

    outcome = _run(_extend_case(), drops_block_table)
    assert [(d.array, d.region) for d in outcome.differences] == [("block_table_tensor", "unchanged field (shape)")]


def test_extend_dtype_and_type_differences_are_reported(impls):
    good = impls[EXTEND]

    def widened(cad, N, arange, new_slot_mapping):
        out = good(cad, N, arange, new_slot_mapping)
        return replace(out, seq_lens=out.seq_lens.long(), max_seq_len=np.int64(out.max_seq_len))

    got = {(d.array, d.region) for d in _run(_extend_case(), widened).differences}
    assert got == {("seq_lens", "changed field (dtype)"), ("max_seq_len", "changed field")}


def test_extend_device_is_checked_when_a_gpu_is_present(impls, backend, needs):
    if backend.device == "cpu":
        needs.unavailable("gpu", "this run's backend is the CPU, where both copies live on the same device")
    good = impls[EXTEND]

    def cpu_result(cad, N, arange, new_slot_mapping):
        out = good(cad, N, arange, new_slot_mapping)
        return replace(out, seq_lens=out.seq_lens.cpu())

    got = {(d.array, d.region) for d in _run(_extend_case(), cpu_result, backend.device).differences}
    assert got == {("seq_lens", "changed field (device)")}


def test_extend_crash_is_a_crash():
    def raises(cad, N, arange, new_slot_mapping):
        raise RuntimeError("boom")

    outcome = _run(_extend_case(), raises)
    assert outcome.crash == "RuntimeError: boom" and not outcome.differences


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scalars": {"N": -1}}, "scalars.N"),
        ({"scalars": {"num_reqs": 3}}, "scalars.num_reqs"),
        ({"scalars": {"causal": 1}}, "scalars.causal"),
        ({"arrays": {"arange": np.arange(2, dtype=np.int32)}}, "arrays.arange"),
        ({"arrays": {"arange": np.arange(8, dtype=np.int64)}}, "arrays.arange"),
        ({"arrays": {"seq_lens": np.array([10, INT32_MAX - 2], dtype=np.int32)}}, "scalars.N"),
        ({"arrays": {"query_start_loc": np.array([0, 3, INT32_MAX - 5], dtype=np.int32)}}, "scalars.N"),
        ({"arrays": {"query_start_loc": np.array([0, 3], dtype=np.int32)}}, "arrays.query_start_loc"),
        ({"arrays": {"block_table": np.zeros((3, 2), dtype=np.int32)}}, "arrays.block_table"),
    ],
)
def test_extend_contract_limits(change, field):
    with pytest.raises(ContractViolation) as exc:
        TARGETS[EXTEND].validate(_extend_case().replace(**change))
    assert exc.value.field == field


def test_extend_at_the_int32_limit_passes_in_the_extended_tier(impls, backend):
    """Values at the int32 limit are outside vLLM's range (docs/CONTRACT.md §4.2: far below
    2**31): the extended tier, where the function still matches the oracles."""
    case = _extend_case().replace(
        arrays={
            "query_start_loc": np.array([0, 3, INT32_MAX - 6], dtype=np.int32),
            "seq_lens": np.array([10, INT32_MAX - 3], dtype=np.int32),
        },
        scalars={"num_actual_tokens": INT32_MAX - 6, "max_query_len": INT32_MAX - 9, "max_seq_len": INT32_MAX - 3},
    )
    with pytest.raises(ContractViolation, match="at most 2\\*\\*30"):
        TARGETS[EXTEND].validate(case)
    TARGETS[EXTEND].validate(case, "extended")
    assert "at_int32_limit" in TARGETS[EXTEND].extended_features_of(case)
    assert check_case(case, impls, backend.device, domain="extended") is None


# -- create_vllm_config_for_draft_model: what the check reports ----------------------------------


def test_draft_assertion_is_expected(impls, backend):
    """Without a speculative config (the extended tier: vLLM's proposer asserts one first,
    docs/CONTRACT.md §5.2) the function must raise AssertionError."""
    case = _draft_case(speculative_config_present=False)
    assert check_case(case, impls, backend.device, domain="extended") is None

    def returns(cfg):
        return cfg

    def raises_other(cfg):
        raise ValueError("no speculative config")

    for fn, actual in ((returns, "returned VllmConfig"), (raises_other, "ValueError: no speculative config")):
        outcome = _run(case, fn, tier="extended")
        assert outcome.crash is None
        assert [(d.array, d.expected, d.actual) for d in outcome.differences] == [("result", "AssertionError", actual)]


def test_draft_assertion_with_a_config_is_a_crash():
    def always_asserts(cfg):
        raise AssertionError("speculative_config is not set")

    assert _run(_draft_case(), always_asserts).crash.startswith("AssertionError")


def test_draft_every_field_is_compared(impls):
    good = impls[DRAFT]
    case = _draft_case()

    def touches(cfg):
        out = good(cfg)
        return replace(out, cache_config=replace(out.cache_config, block_size=out.cache_config.block_size + 1))

    outcome = _run(case, touches)
    assert [(d.array, d.region) for d in outcome.differences] == [("cache_config.block_size", "unchanged field")]


def test_draft_target_mutation_is_reported(impls):
    good = impls[DRAFT]

    def mutates(cfg):
        out = good(cfg)
        cfg.parallel_config.tensor_parallel_size += 1
        return out

    outcome = _run(_draft_case(), mutates)
    assert {(d.array, d.region) for d in outcome.differences} == {
        ("parallel_config.tensor_parallel_size", "input mutated")
    }


def test_draft_returning_the_target_is_reported():
    def in_place(cfg):
        cfg.quant_config = None
        cfg.model_config = cfg.speculative_config.draft_model_config
        cfg.parallel_config = replace(cfg.speculative_config.draft_parallel_config, rank=cfg.parallel_config.rank)
        return cfg

    got = {(d.array, d.region) for d in _run(_draft_case(), in_place).differences}
    assert ("result", "result") in got
    assert ("quant_config", "input mutated") in got


def test_draft_case_decodes_to_distinct_configs():
    case = _draft_case()
    cfg = build_config(case, importlib.import_module("eaglefuzz.kernels.vllm_types"))
    assert cfg.speculative_config.draft_model_config is not cfg.model_config
    assert cfg.quant_config is not None
    assert cfg.model_config.model.startswith("org/model-")
    with pytest.raises(ContractViolation) as exc:
        TARGETS[DRAFT].validate(case.replace(scalars={"target_model.dtype": 9}))
    assert exc.value.field == "scalars.target_model.dtype"


# -- the stand-ins -----------------------------------------------------------------------------


def test_stand_ins_behave_like_vllm():
    from eaglefuzz.kernels import vllm_types as vt

    cad = vt.CommonAttentionMetadata(
        query_start_loc=torch.zeros(3, dtype=torch.int32),
        query_start_loc_cpu=torch.zeros(3, dtype=torch.int32),
        seq_lens=torch.ones(2, dtype=torch.int32),
        num_reqs=1,
        num_actual_tokens=0,
        max_query_len=0,
        max_seq_len=1,
        block_table_tensor=torch.zeros((2, 1), dtype=torch.int32),
        slot_mapping=torch.zeros(0, dtype=torch.int64),
    )
    assert cad.batch_size() == 2
    new = cad.replace(num_reqs=2)
    assert new is not cad and new.num_reqs == 2 and cad.num_reqs == 1 and new.seq_lens is cad.seq_lens
    cfg = vt.VllmConfig(parallel_config=vt.ParallelConfig(rank=3))
    assert replace(cfg, quant_config=None).parallel_config is cfg.parallel_config
    for name in vt.__all__:
        assert dataclasses.is_dataclass(getattr(vt, name))


# -- vLLM's own classes ------------------------------------------------------------------------

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
NO_VLLM = "vLLM is not installed here (it is not a dependency of eaglefuzz); install it to run these"


def _vllm_metadata_class() -> type:
    for module in ("vllm.v1.attention.backend", "vllm.v1.attention.backends.utils"):
        try:
            cls = getattr(importlib.import_module(module), "CommonAttentionMetadata", None)
        except ImportError:
            continue
        if cls is not None:
            return cls
    pytest.skip("this vLLM has no CommonAttentionMetadata where eaglefuzz looks for it")


@pytest.mark.skipif(not HAVE_VLLM, reason=NO_VLLM)
def test_extend_with_vllm_metadata(impls, backend, scale, fuzz_seed):
    target = ExtendAllQueries(types=SimpleNamespace(CommonAttentionMetadata=_vllm_metadata_class()))

    @settings(max_examples=100)
    @seed(derive_seed(fuzz_seed, "vllm-classes", EXTEND))
    @given(target.strategy(scale))
    def run(case):
        target.validate(case)
        outcome = target.check(case, impls[EXTEND], backend.device)
        assert outcome.ok, (outcome.crash, [d.describe() for d in outcome.differences[:12]])

    run()


@pytest.mark.skipif(not HAVE_VLLM, reason=NO_VLLM)
def test_draft_config_with_vllm_configs():
    pytest.skip(
        "vLLM's ModelConfig and SpeculativeConfig resolve a model from the hub when built and "
        "its VllmConfig validates its fields' types, so the draft-config cases run on the stand-ins only"
    )


def test_targets_take_other_classes(impls):
    """The same check with another metadata class (what the vLLM variant does)."""

    @dataclasses.dataclass
    class OtherMetadata:
        query_start_loc: torch.Tensor
        query_start_loc_cpu: torch.Tensor
        seq_lens: torch.Tensor
        num_reqs: int
        num_actual_tokens: int
        max_query_len: int
        max_seq_len: int
        block_table_tensor: torch.Tensor
        slot_mapping: torch.Tensor
        causal: bool = True
        _seq_lens_cpu: torch.Tensor | None = None
        extra_field: int | None = 5

        def batch_size(self) -> int:
            return self.seq_lens.shape[0]

        def replace(self, **kw):
            return dataclasses.replace(self, **kw)

    target = ExtendAllQueries(types=SimpleNamespace(CommonAttentionMetadata=OtherMetadata))
    outcome = target.check(_extend_case(), impls[EXTEND], "cpu")
    assert outcome.ok, [d.describe() for d in outcome.differences]
    assert isinstance(DraftConfig().types.VllmConfig, type)
