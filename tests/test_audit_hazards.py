"""The six hazard classes of issue 22 on vLLM 0.33.0: the audit finds each where the code has
it, with a minimal example, and a fixed variant (the fix vLLM's PR makes, in the code or at the
call site) makes that class clean.

The code under test is the pinned release's (fetched once and cached; the newer targets are
not in the bundled copy). Cases are the research notes' minimal ones; the two Python targets
are also searched by ``audit_target`` at a small scale (eager torch: a fraction of a second).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.audit import BEYOND, PROPERTIES, audit_target, observe
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.strategies import Scale
from eaglefuzz.harness.sources import implementations_for, parse_source
from eaglefuzz.harness.sources import vllm as vsrc
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.targetkit.bugs import V033, Mutant, edit
from eaglefuzz.harness.targets import TARGETS

BC, NSM = "update_num_computed_tokens_for_batch_change", "compute_new_slot_mapping"
ES, DF = "eagle_step_slot_mapping_metadata_kernel", "copy_and_expand_dflash_inputs_kernel"
CE, NT = "copy_and_expand_eagle_inputs_kernel", "eagle_prepare_next_token_padded_kernel"

TINY = Scale(max_requests=3, request_tail=3, max_query_len=4, max_programs=16)
"""The audit searches of this file: a few small cases per tier."""


@pytest.fixture(scope="module")
def release(needs):
    needs.release_files(vsrc.PINNED_RELEASE)
    return implementations_for(parse_source(f"vllm-release:{vsrc.PINNED_RELEASE}"), [BC, NSM, ES, DF, CE, NT])


def _prop(target: str, name: str):
    return next(p for p in PROPERTIES[target] if p.name == name)


def _broken(target: str, name: str, case: Case, impl, device: str) -> str | None:
    return _prop(target, name).check(case, observe(target, case, impl, device))


def _variant(mutants, tmp_path, target: str, name: str, edits) -> object:
    """A fixed variant of the release's ``target``: its source with ``edits``, loaded from a file."""
    path = mutants.write(Mutant(name, target, f"{target} fixed: {name}", tuple(edits), V033), tmp_path)
    return implementations_for(FileSource(path))[target]


# -- stale previous rows (PR #47199): update_num_computed_tokens_for_batch_change -----------


def _guarded_batch_change(num_computed_tokens, num_accepted_tokens, prev_positions, valid_sampled_token_count,
                          prev_num_draft_tokens, cpu_num_computed_tokens):
    """vLLM 0.33.0's function with PR #47199's guard: a previous row at or past the previous
    batch is no row of it (the request takes the CPU value)."""
    n, P = prev_positions.shape[0], valid_sampled_token_count.shape[0]
    in_batch = (prev_positions >= 0) & (prev_positions < P)
    g = torch.where(in_batch, prev_positions, torch.zeros_like(prev_positions))
    valid = valid_sampled_token_count[g.clamp(max=max(P - 1, 0))] if P else torch.zeros_like(cpu_num_computed_tokens)
    participating = in_batch & (prev_num_draft_tokens[g] > 0)
    corrected = num_computed_tokens[g] + valid.int()
    num_computed_tokens[:n].copy_(torch.where(participating, corrected, cpu_num_computed_tokens))
    num_accepted_tokens.copy_(torch.where(participating, valid, num_accepted_tokens))


def test_stale_previous_row_is_a_hazard_with_its_case(release, backend):
    """The stale-row gather raises IndexError eagerly: the audit reports it as the
    call_completes hazard of the beyond tier, shrunk to one request, not as an error skipped."""
    eager = release[BC]._torchdynamo_orig_callable
    result = audit_target(BC, eager, backend.device, scale=TINY, examples=4)
    found = {h.prop.name: h for h in result.hazards}
    h = found["call_completes"]
    assert h.prop.hazard_class == "stale_previous_rows" and h.tier == BEYOND and not h.reachable_in_production
    assert h.detail.startswith("the call raises IndexError: index"), h.detail
    assert "stale_previous_rows" in h.edges or "empty_previous_batch" in h.edges
    assert len(h.case.arrays["prev_positions"]) == 1, h.case
    assert result.errors >= 1 and "call_completes" not in result.holds
    report = h.report()
    assert "it rests on: docs/CONTRACT.md §8.2" in report and "GPUModelRunner._bookkeeping_sync" in report

    fixed = audit_target(BC, _guarded_batch_change, backend.device, scale=TINY, examples=4)
    assert "call_completes" in fixed.holds and fixed.errors == 0


# -- block-table columns past a request's blocks (PR #54296) --------------------------------


def _nsm(table: list[list[int]], qsl: list[int], positions: list[int], N: int, bs: int, M: int) -> Case:
    return Case(NSM, {
        "query_start_loc": np.array(qsl, dtype=np.int32), "block_table": np.array(table, dtype=np.int32),
        "seq_lens": np.diff(np.array(qsl, dtype=np.int32)).astype(np.int32),
        "slot_mapping": np.zeros(qsl[-1], dtype=np.int64), "new_positions": np.array(positions, dtype=np.int64),
        "is_rejected_token_mask": np.zeros(len(positions), dtype=bool),
    }, {"block_size": bs, "num_new_tokens": N, "max_model_len": M}, {"views": False})


def _masked_slot_mapping(cad, new_positions, is_rejected_token_mask, block_size, num_new_tokens, max_model_len):
    """vLLM 0.33.0's function with PR #54296's guard: a column past the row is PADDING_SLOT_ID."""
    batch_size, nb = cad.block_table_tensor.shape
    req = torch.repeat_interleave(torch.arange(batch_size, device=new_positions.device), cad.naive_query_lens() + num_new_tokens,
                                  output_size=len(new_positions))
    q = torch.clamp(new_positions, max=max_model_len - 1)
    col = q // block_size
    inside = col < nb
    idx = req * nb + torch.where(inside, col, torch.zeros_like(col))
    slots = cad.block_table_tensor.view(-1)[idx] * block_size + q % block_size
    return slots.masked_fill_(~inside | (new_positions >= max_model_len) | is_rejected_token_mask, -1)


def test_block_columns_past_row(release, backend):
    """A table narrower than max_model_len needs: request 0 writes request 1's block, and past
    the last row the lookup raises; the search finds the raise in the beyond tier."""
    case = _nsm([[10], [20]], [0, 1, 2], [2, 3, 0, 1], N=1, bs=2, M=4)
    assert observe(NSM, case, release[NSM], backend.device).result.tolist() == [40, 41, 40, 41]
    assert "block 20 is not request 0's block of that column" in _broken(NSM, "slot_in_own_row", case, release[NSM], backend.device)
    result = audit_target(NSM, release[NSM], backend.device, scale=TINY, examples=4)
    h = {h.prop.name: h for h in result.hazards}["call_completes"]
    assert h.tier == BEYOND and "IndexError" in h.detail and not h.reachable_in_production
    assert h.case.arrays["block_table"].shape[0] == 1, h.case

    assert _broken(NSM, "slot_in_own_row", case, _masked_slot_mapping, backend.device) is None
    fixed = audit_target(NSM, _masked_slot_mapping, backend.device, scale=TINY, examples=4)
    assert {"call_completes", "slot_in_own_row"} <= set(fixed.holds)


def _step(positions, seqs, table, bs, M, allocated=None) -> Case:
    arrays = {"positions": np.array(positions, dtype=np.int64), "block_table": np.array(table, dtype=np.int32),
              "seq_lens": np.array(seqs, dtype=np.int32)}
    if allocated is not None:
        arrays["num_allocated_blocks"] = np.array(allocated, dtype=np.int32)
    return Case(ES, arrays, {"block_size": bs, "max_model_len": M, "n_blocks_per_req": len(table[0])},
                {"input_batch_size": None, "aliased_positions": False})


@pytest.mark.kernel
def test_step_slot_past_the_allocation(release, backend):
    """The step kernel clamps the column to the row, never past it, but a column past the
    request's allocation holds a stale block: extended tier, not production (lookahead K)."""
    stale = _step([15], [16], [[7, 99, 99, 99]], 16, 64, allocated=[1])
    assert TARGETS[ES].tier_of(stale, "extended") == "extended"
    detail = _broken(ES, "slot_in_allocated_block", stale, release[ES], backend.device)
    assert detail == "request 0 owns block columns [0, 1) but its step slot 1584 lies in column 1, block 99: a stale column's block"
    covered = _step([15], [16], [[7, 99, 99, 99]], 16, 64, allocated=[2])  # vLLM's lookahead allocates column 1
    assert TARGETS[ES].tier_of(covered) == "production"
    assert _broken(ES, "slot_in_allocated_block", covered, release[ES], backend.device) is None


def _dflash(positions, qsl, table, K, bs, lookahead=None) -> Case:
    scalars = {"parallel_drafting_token_id": 0, "block_size": bs, "num_query_per_req": K + 1,
               "num_speculative_tokens": K, "total_input_tokens": qsl[-1], "has_num_rejected": False}
    if lookahead is not None:
        scalars["lookahead_tokens"] = lookahead
    return Case(DF, {"next_token_ids": np.zeros(len(qsl) - 1, dtype=np.int32),
                     "target_positions": np.array(positions, dtype=np.int64),
                     "block_table": np.array(table, dtype=np.int32), "query_start_loc": np.array(qsl, dtype=np.int32)},
                scalars, {"triton_block_size": None, "max_tokens_per_req": None, "buffer_spare": None})


@pytest.mark.kernel
def test_dflash_query_past_the_allocation(release, backend):
    """PR #42971 / #43733: with lookahead K (not K + 1) the bonus query at position 16 lands
    in block 3, which the request does not own; vLLM's K + 1 allocates it."""
    short = _dflash([15], [0, 1], [[7, 3]], K=0, bs=16, lookahead=0)
    assert TARGETS[DF].tier_of(short, "extended") == "extended"
    detail = _broken(DF, "query_slots_in_allocation", short, release[DF], backend.device)
    assert detail.startswith("request 0 owns block columns [0, 1) (lookahead 0), but query slot 0 writes KV slot 48"), detail
    fixed = _dflash([15], [0, 1], [[7, 3]], K=0, bs=16, lookahead=1)
    assert TARGETS[DF].tier_of(fixed) == "production"
    assert _broken(DF, "query_slots_in_allocation", fixed, release[DF], backend.device) is None


# -- positions that are not token indices (M-RoPE, issue #54498) ------------------------------

_SLOT_FROM_SEQ_LEN = (  # issue #54498's fix (PR #54716): the slot of the appended token, seq_lens
    edit("    block_number = clamped_position // block_size\n",
         "    slot_position = tl.where(exceeds_max, 0, tl.load(seq_lens_ptr + req_idx).to(tl.int64))\n"
         "    block_number = slot_position // block_size\n"),
    edit("    slot_id = block_id * block_size + (clamped_position % block_size)\n",
         "    slot_id = block_id * block_size + (slot_position % block_size)\n"),
)


@pytest.mark.kernel
def test_mrope_positions_in_the_step_kernel(release, backend, mutants, tmp_path):
    """An M-RoPE target's temporal coordinate 0 for the token of index 2: the step slot is 81,
    the appended token's is 82. Production reaches it (a production-tier case); taking the slot
    from seq_lens makes the class clean."""
    case = _step([0], [2], [[5, 6]], 16, 32)
    assert TARGETS[ES].tier_of(case) == "production" and "mrope_positions" in TARGETS[ES].features_of(case)
    detail = _broken(ES, "slot_of_appended_token", case, release[ES], backend.device)
    assert detail.endswith("gets slot 81, but the token it appends has index seq_lens = 2 (slot 82): positions are not token indices")
    fixed = _variant(mutants, tmp_path, ES, "slot_from_seq_lens", _SLOT_FROM_SEQ_LEN)
    assert _broken(ES, "slot_of_appended_token", case, fixed, backend.device) is None
    result = audit_target(ES, fixed, backend.device, scale=TINY, examples=3)
    assert "slot_of_appended_token" in result.holds


@pytest.mark.kernel
def test_mrope_positions_in_dflash(release, backend):
    """Two image patches of one temporal coordinate share a KV slot (production: an M-RoPE
    target); token indices give each its own."""
    patches = _dflash([0, 0], [0, 2], [[7]], K=0, bs=16)
    assert TARGETS[DF].tier_of(patches) == "production"
    detail = _broken(DF, "context_slots_distinct", patches, release[DF], backend.device)
    assert detail.startswith("request 0: context tokens 0 and 1 both get KV slot 112"), detail
    tokens = _dflash([0, 1], [0, 2], [[7]], K=0, bs=16)
    assert _broken(DF, "context_slots_distinct", tokens, release[DF], backend.device) is None


# -- copy_and_expand's out_idx unbounded (review of PR #32887) -------------------------------


def _ce(caller_buffer_len: int | None) -> Case:
    launch = {"block_size_tokens": None, "num_blocks": None}
    if caller_buffer_len is not None:
        launch["caller_buffer_len"] = caller_buffer_len
    return Case(CE, {"target_token_ids": np.array([3], dtype=np.int32), "target_positions": np.array([0], dtype=np.int64),
                     "next_token_ids": np.array([4], dtype=np.int32), "query_start_loc": np.array([0, 1], dtype=np.int32),
                     "query_end_loc": np.array([0], dtype=np.int32)},
                {"padding_token_id": 0, "parallel_drafting_token_id": 0, "total_input_tokens": 1,
                 "num_padding_slots_per_request": 1, "shift_input_ids": False}, launch)


@pytest.mark.kernel
def test_copy_and_expand_stores_past_a_short_buffer(release, backend):
    """One token and its bonus slot into a one-entry buffer: the bonus lands past it (a guard
    band). The scheduler's budget gives the buffer both entries, and then nothing strays."""
    detail = _broken(CE, "stores_within_caller_buffer", _ce(1), release[CE], backend.device)
    assert detail == "out_input_ids: a store lands past the caller's 1-entry buffer (no bound on out_idx)"
    assert _broken(CE, "stores_within_caller_buffer", _ce(2), release[CE], backend.device) is None


# -- a backup next token of -1 (PR #38556) ---------------------------------------------------


def _nt(backup: int) -> Case:
    return Case(NT, {"sampled_token_ids": np.array([[5]], dtype=np.int32),
                     "discard_request_mask": np.array([True]), "backup_next_token_ids": np.array([backup], dtype=np.int32)},
                {"vocab_size": 10, "num_sampled_tokens_per_req": 1, "num_reqs": 1},
                {"block_size_tokens": None, "grid_size": None})


@pytest.mark.kernel
def test_backup_token_of_minus_one(release, backend):
    """A discarded request whose backup is the async placeholder -1 gets next token -1; with
    PR #38556's backup (a token of the prompt) it gets that token."""
    detail = _broken(NT, "backup_next_token_in_vocab", _nt(-1), release[NT], backend.device)
    assert detail.startswith("next_token_ids[0] = -1 (request 0 is discarded: its backup token)"), detail
    assert _broken(NT, "backup_next_token_in_vocab", _nt(7), release[NT], backend.device) is None


def test_audit_command_on_the_release(needs, capsys, backend, warm_oracles):
    """``eaglefuzz audit --vllm-version 0.33.0`` lists a hazard with its class, its minimal
    example and the precondition it rests on."""
    needs.release_files(vsrc.PINNED_RELEASE)
    be = "cuda" if backend.compiled else "interpreter"
    with pytest.raises(SystemExit):
        cli.main(["audit", "--vllm-version", vsrc.PINNED_RELEASE, "--kernel", NSM, "--examples", "3",
                  "--backend", be, "--json"])
    doc = json.loads(capsys.readouterr().out)
    hazards = {h["property"]: h for h in doc["targets"][NSM]["hazards"]}
    h = hazards["call_completes"]
    assert h["hazard_class"] == "block_columns_past_row" and h["tier"] == BEYOND and not h["reachable_in_production"]
    assert "get_block_table_width" in h["rests_on"] and "Case(" in h["example"]


def test_an_out_of_range_draw_of_a_torch_function_runs_on_the_cpu():
    """A beyond-tier draw of a torch function (one that gathers out of range on purpose) runs
    on the CPU even when the audit runs on a GPU: there the gather is a device-side assert that
    leaves the CUDA context unusable, and every later example and target would "raise" too.
    Production and extended cases, and every case of a Triton kernel, stay on the device."""
    from eaglefuzz.harness.checking.audit import _draw, _tier, observe_device

    for name in (BC, NSM):
        target = TARGETS[name]
        cases = _draw(name, "hazard", TINY, 12, 0) + _draw(name, "production", TINY, 4, 0)
        tiers = {_tier(target, c) for c in cases}
        assert BEYOND in tiers and "production" in tiers, tiers
        for case in cases:
            want = "cpu" if _tier(target, case) == BEYOND else "cuda:0"
            assert observe_device(target, case, "cuda:0") == want, (name, _tier(target, case))
            assert observe_device(target, case, "cpu") == "cpu"
    kernel = TARGETS["copy_and_expand_dflash_inputs_kernel"]
    for tier in ("production", "extended"):
        for case in _draw(kernel.name, tier, TINY, 4, 0):
            assert observe_device(kernel, case, "cuda:0") == "cuda:0"
