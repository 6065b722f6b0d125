"""The vLLM 0.33 step targets (docs/CONTRACT.md §6 to §8) without vLLM: small ports written from
the contract, correct and broken, show what the checks see (in-place ``seq_lens``, the aliased
``positions`` buffer, input mutation, dtypes) and that ``validate`` names the rule broken.

vLLM's own functions are fuzzed by tests/test_differential.py and their seeded bugs run by
tests/test_seeded_bugs.py when a source defines them (e.g. ``--kernels`` on vLLM 0.33's
``vllm/v1/spec_decode/utils.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.strategies import Scale, derive_seed
from eaglefuzz.harness.targets import TARGETS, ContractViolation

STEP = "eagle_step_slot_mapping_metadata_kernel"
NSM = "compute_new_slot_mapping"
SMALL = Scale(max_requests=6, request_tail=12, max_query_len=12, max_programs=64)


# -- 6. a port of the step kernel behind kernel[grid](...) ------------------------------------


class StepPort:
    """``kernel[grid](...)`` over torch, written from section 6; ``bug`` breaks one thing."""

    parameters = TARGETS[STEP].parameters

    def __init__(self, bug: str | None = None) -> None:
        self.bug = bug

    def __getitem__(self, grid):
        def run(positions, block_table, block_table_stride, seq_lens, out_pos, out_slot, *,
                block_size, max_model_len, n_blocks_per_req, PAD_ID, batch_size):  # fmt: skip
            B, bs, M = batch_size, block_size, max_model_len
            flat = block_table.as_strided((B * block_table_stride,), (1,))
            p = positions[:B] + 1
            exceeds = p >= M
            clamped = torch.where(exceeds, 0, p)
            col = torch.clamp(clamped // bs, max=n_blocks_per_req - 1)
            block = flat[torch.arange(B) * block_table_stride + col].long()
            out_pos[:B] = clamped
            if self.bug == "alias_unsafe":  # re-reads positions after writing the output
                exceeds = positions[:B] + 1 >= M
            out_slot[:B] = torch.where(exceeds, PAD_ID, block * bs + clamped % bs)
            if self.bug != "seq_lens_untouched":
                seq = torch.where(exceeds, 1, torch.clamp(seq_lens[:B] + 1, max=M))
                seq_lens[:B] = seq.int()
            out_slot[B : grid[0]] = PAD_ID

        return run


def step_case(aliased: bool, ib: int | None = 3) -> Case:
    return Case(
        STEP,
        {
            "positions": np.array([2, 9], dtype=np.int64),
            "block_table": np.array([[5, 6, 7, 0], [8, 9, 10, 0]], dtype=np.int32),
            "seq_lens": np.array([3, 10], dtype=np.int32),
        },
        {"block_size": 4, "max_model_len": 10, "n_blocks_per_req": 3},
        {"input_batch_size": ib, "aliased_positions": aliased},
    )


@pytest.mark.parametrize("aliased", [False, True])
def test_step_port_passes(aliased):
    target = TARGETS[STEP]
    assert target.check(step_case(aliased), StepPort(), "cpu").ok
    rng = np.random.default_rng(derive_seed(0, "step-port"))
    for _ in range(15):
        case = target.random_case(rng, SMALL)
        outcome = target.check(case, StepPort(), "cpu")
        assert outcome.ok, (case, outcome)


def test_step_aliasing_bug_shows_only_on_the_aliased_launch():
    target = TARGETS[STEP]
    assert target.check(step_case(False), StepPort("alias_unsafe"), "cpu").ok
    outcome = target.check(step_case(True), StepPort("alias_unsafe"), "cpu")
    # request 1 is parked, but the buffer now holds its position 0: it looks in range again
    assert sorted((d.array, d.index, d.expected) for d in outcome.differences) == [
        ("out_slot_mapping", 1, -1),
        ("seq_lens", 1, 1),
    ]


def test_step_seq_lens_is_checked_in_place():
    outcome = TARGETS[STEP].check(step_case(True), StepPort("seq_lens_untouched"), "cpu")
    assert sorted((d.array, d.index, d.expected, d.actual) for d in outcome.differences) == [
        ("seq_lens", 0, 4, 3),
        ("seq_lens", 1, 1, 10),
    ]
    assert all(d.region.startswith("request") for d in outcome.differences)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scalars": {"n_blocks_per_req": 5}}, "scalars.n_blocks_per_req"),
        ({"launch": {"input_batch_size": 1}}, "launch.input_batch_size"),
        ({"arrays": {"positions": np.array([-1, 3], dtype=np.int64)}}, "arrays.positions"),
        ({"arrays": {"block_table": np.array([[2**30, 0, 0, 0], [1, 1, 1, 1]], dtype=np.int32)}}, "arrays.block_table"),
        ({"arrays": {"seq_lens": np.array([3], dtype=np.int32)}}, "arrays.seq_lens"),
    ],
)
def test_step_contract_limits(change, field):
    with pytest.raises(ContractViolation) as info:
        TARGETS[STEP].validate(step_case(False).replace(**change))
    assert info.value.field == field


# -- 7. a port of compute_new_slot_mapping -----------------------------------------------------


def new_slot_mapping_port(bug: str | None = None):
    def port(cad, new_positions, is_rejected_token_mask, block_size, num_new_tokens, max_model_len):
        qsl = cad.query_start_loc.long()
        R, nb = cad.block_table_tensor.shape
        counts = qsl[1:] - qsl[:-1] + num_new_tokens
        owner = torch.repeat_interleave(torch.arange(R), counts)
        q = new_positions.clamp_(max=max_model_len - 1) if bug == "clamp_" else new_positions.clamp(max=max_model_len - 1)
        block = cad.block_table_tensor.reshape(-1)[owner * nb + q // block_size]
        slot = block * block_size + q % block_size
        slot = slot.int() if bug == "int32" else slot
        return slot.masked_fill(is_rejected_token_mask | (new_positions >= max_model_len), -1)

    return port


def nsm_case(views: bool) -> Case:
    return Case(
        NSM,
        {
            "query_start_loc": np.array([0, 2, 3], dtype=np.int32),
            "block_table": np.array([[10, 11, 12, 13], [20, 21, 22, 23]], dtype=np.int32),
            "seq_lens": np.array([7, 15], dtype=np.int32),
            "slot_mapping": np.array([1, 2, 3], dtype=np.int64),
            "new_positions": np.array([6, 7, 8, 0, 14, 15, 16], dtype=np.int64),
            "is_rejected_token_mask": np.array([0, 0, 0, 1, 0, 0, 0], dtype=bool),
        },
        {"block_size": 4, "num_new_tokens": 2, "max_model_len": 16},
        {"views": views},
    )


@pytest.mark.parametrize("views", [False, True])
def test_new_slot_mapping_port_passes(views):
    target = TARGETS[NSM]
    assert target.expected(nsm_case(views))["numpy"].tolist() == [11 * 4 + 2, 11 * 4 + 3, 12 * 4, -1, 23 * 4 + 2, 23 * 4 + 3, -1]
    assert target.check(nsm_case(views), new_slot_mapping_port(), "cpu").ok
    rng = np.random.default_rng(derive_seed(0, "nsm-port"))
    for _ in range(15):
        case = target.random_case(rng, SMALL)
        outcome = target.check(case, new_slot_mapping_port(), "cpu")
        assert outcome.ok, (case, outcome)


def test_new_slot_mapping_in_place_clamp_is_reported():
    outcome = TARGETS[NSM].check(nsm_case(True), new_slot_mapping_port("clamp_"), "cpu")
    mutated = [d for d in outcome.differences if d.region.startswith("input mutated")]
    assert [(d.array, d.index, d.expected, d.actual) for d in mutated] == [("new_positions", 6, 16, 15)]
    # position 16 now looks in range: its slot is looked up instead of PADDING_SLOT_ID
    assert any(d.array == "result" and d.index == 6 and d.request == 1 for d in outcome.differences)


def test_new_slot_mapping_dtype_is_reported():
    outcome = TARGETS[NSM].check(nsm_case(False), new_slot_mapping_port("int32"), "cpu")
    assert [(d.array, d.expected, d.actual) for d in outcome.differences] == [("result", "int64", "int32")]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scalars": {"max_model_len": 17}}, "arrays.block_table"),
        ({"arrays": {"new_positions": np.arange(6, dtype=np.int64)}}, "arrays.new_positions"),
        ({"arrays": {"query_start_loc": np.array([0, 3, 2], dtype=np.int32)}}, "arrays.query_start_loc"),
        ({"launch": {"views": None}}, "launch.views"),
    ],
)
def test_new_slot_mapping_contract_limits(change, field):
    with pytest.raises(ContractViolation) as info:
        TARGETS[NSM].validate(nsm_case(False).replace(**change))
    assert info.value.field == field


# -- 8. ports of update_num_computed_tokens_for_batch_change -----------------------------------

BC = "update_num_computed_tokens_for_batch_change"


def batch_change_port(bug: str | None = None):
    def port(num_computed_tokens, num_accepted_tokens, prev_positions, valid_sampled_token_count,
             prev_num_draft_tokens, cpu_num_computed_tokens):  # fmt: skip
        n = prev_positions.shape[0]
        if bug == "in_place_loop":  # reads rows that earlier iterations already wrote
            for i in range(n):
                g = max(int(prev_positions[i]), 0)
                if prev_positions[i] >= 0 and prev_num_draft_tokens[g] > 0:
                    num_computed_tokens[i] = num_computed_tokens[g] + valid_sampled_token_count[g]
                    num_accepted_tokens[i] = valid_sampled_token_count[g]
                else:
                    num_computed_tokens[i] = cpu_num_computed_tokens[i]
            return
        g = prev_positions.clamp(min=0)
        valid = valid_sampled_token_count[g]
        part = (prev_positions >= 0) & (prev_num_draft_tokens[g] > 0)
        new = torch.where(part, num_computed_tokens[g] + valid, cpu_num_computed_tokens)
        rows = num_computed_tokens if bug == "all_rows" else num_computed_tokens[:n]
        rows[:n].copy_(new)
        if bug == "all_rows":
            rows[n:] = 0
        num_accepted_tokens.copy_(torch.where(part, valid, num_accepted_tokens))

    return port


def bc_case(mode: str = "eager") -> Case:
    # request 0 was row 2 (drafts: corrected), request 1 is new, request 2 was row 0 (no drafts)
    return Case(
        BC,
        {
            "num_computed_tokens": np.array([10, 20, 30, 40], dtype=np.int32),
            "num_accepted_tokens": np.array([1, 1, 5], dtype=np.int32),
            "prev_positions": np.array([2, -1, 0], dtype=np.int64),
            "valid_sampled_token_count": np.array([1, 2, 3], dtype=np.int32),
            "prev_num_draft_tokens": np.array([0, 2, 2, 0], dtype=np.int32),
            "cpu_num_computed_tokens": np.array([33, 7, 11], dtype=np.int32),
        },
        launch={"mode": mode},
    )


def test_batch_change_oracle_example():
    exp = TARGETS[BC].expected(bc_case())
    for oracle in exp.values():
        assert oracle["num_computed_tokens"].tolist() == [33, 7, 11, 40]  # row 2 (30) + 3; CPU; CPU
        assert oracle["num_accepted_tokens"].tolist() == [3, 1, 5]


@pytest.mark.parametrize("mode", ["eager", "compiled"])
def test_batch_change_port_passes(mode):
    target = TARGETS[BC]
    assert target.check(bc_case(mode), batch_change_port(), "cpu").ok
    rng = np.random.default_rng(derive_seed(0, "bc-port"))
    for _ in range(15):
        case = target.random_case(rng, SMALL)
        outcome = target.check(case, batch_change_port(), "cpu")
        assert outcome.ok, (case, outcome)


def test_batch_change_in_place_hazard_is_caught():
    # request 1 reads row 0, which request 0 writes first in a naive loop: 22 + 1 instead of 10 + 1
    case = bc_case().replace(arrays={"prev_positions": np.array([1, 0, 2], dtype=np.int64),
                                     "prev_num_draft_tokens": np.array([2, 2, 0, 0], dtype=np.int32)})  # fmt: skip
    assert "overwritten_source" in TARGETS[BC].features_of(case)
    outcome = TARGETS[BC].check(case, batch_change_port("in_place_loop"), "cpu")
    assert [(d.array, d.index, d.expected, d.actual) for d in outcome.differences] == [("num_computed_tokens", 1, 11, 23)]
    assert outcome.differences[0].versus.endswith("eager run")


def test_batch_change_rows_past_n_must_stay():
    outcome = TARGETS[BC].check(bc_case(), batch_change_port("all_rows"), "cpu")
    assert [(d.array, d.index, d.region) for d in outcome.differences] == [("num_computed_tokens", 3, "past num_reqs (untouched)")]


def test_batch_change_runs_eager_and_compiled_variants():
    """``eager`` runs the undecorated function, ``compiled`` the object as given. (A stand-in for
    torch.compile's wrapper keeps this fast: importing dynamo alone takes seconds; the real
    compiled path runs against vLLM's function in test_differential and test_seeded_bugs.)"""
    from eaglefuzz.harness.targets.update_num_computed_tokens_for_batch_change.record import (
        variants,
    )

    calls = []

    def plain(*args):
        calls.append("eager")
        return batch_change_port()(*args)

    def wrapper(*args):
        calls.append("compiled")
        return plain(*args)

    wrapper._torchdynamo_orig_callable = plain  # what torch.compile's wrapper carries
    assert variants(wrapper) == {"eager": plain, "compiled": wrapper}
    assert variants(plain) == {"eager": plain, "compiled": plain}
    assert TARGETS[BC].check(bc_case("eager"), wrapper, "cpu").ok
    assert calls == ["eager"]
    assert TARGETS[BC].check(bc_case("compiled"), wrapper, "cpu").ok
    assert calls == ["eager", "compiled", "eager"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"launch": {"mode": "jit"}}, "launch.mode"),
        ({"arrays": {"prev_positions": np.array([2, -1, 3], dtype=np.int64)}}, "arrays.prev_positions"),
        ({"arrays": {"cpu_num_computed_tokens": np.array([1, 2], dtype=np.int32)}}, "arrays.cpu_num_computed_tokens"),
        ({"arrays": {"num_computed_tokens": np.array([10, 20, 2**31 - 2, 0], dtype=np.int32)}}, "arrays.num_computed_tokens"),
    ],
)
def test_batch_change_contract_limits(change, field):
    with pytest.raises(ContractViolation) as info:
        TARGETS[BC].validate(bc_case().replace(**change))
    assert info.value.field == field
