"""``copy_and_expand_eagle_inputs_kernel``: docs/CONTRACT.md §1."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.shrink_steps import shorter
from ...generation.strategies import (
    FLOAT32_EXACT,
    ID16_MAX,
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
)
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba, require_arrays
from . import edges
from .layout import (
    BOOL,
    I32,
    I64,
    MAX_MODEL_LEN,
    NAME,
    SLOT_OUTPUTS,
    Layout,
    positions_from_starts,
    rebuild,
    requests_of,
)


class CopyAndExpand(TritonTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 1
    parameters = (
        "target_token_ids_ptr",
        "target_positions_ptr",
        "next_token_ids_ptr",
        "out_input_ids_ptr",
        "out_positions_ptr",
        "out_is_rejected_token_mask_ptr",
        "out_is_masked_token_mask_ptr",
        "out_new_token_indices_ptr",
        "out_hidden_state_mapping_ptr",
        "query_start_loc_ptr",
        "query_end_loc_ptr",
        "padding_token_id",
        "parallel_drafting_token_id",
        "total_input_tokens",
        "num_padding_slots_per_request",
        "shift_input_ids",
        "BLOCK_SIZE_TOKENS",
    )
    inputs = {
        "target_token_ids": I32,
        "target_positions": I64,
        "next_token_ids": I32,
        "query_start_loc": I32,
        "query_end_loc": I32,
    }
    scalar_names = (
        "padding_token_id",
        "parallel_drafting_token_id",
        "total_input_tokens",
        "num_padding_slots_per_request",
        "shift_input_ids",
    )
    launch_names = ("block_size_tokens", "num_blocks")
    features = {
        "shift_off": "shift_input_ids = False (draft model)",
        "shift_on": "shift_input_ids = True (parallel-drafting EAGLE)",
        "p_is_1": "one padding slot per request (P = 1): no parallel-drafting slot",
        "p_at_least_2": "parallel-drafting slots present (P >= 2)",
        "rejected_tokens": "some request has rejected tokens (qe < nqs - 1)",
        "last_request_rejected": "the last request has rejected tokens: its rejected slots end the output",
        "all_but_one_rejected": "some request rejects all but its first token (qe == qs)",
        "no_valid_slot": "shift mode with nv = 0: the bonus takes the first input's position",
        "multi_block_request": "some request's slots span several token blocks",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "long_request": "a request longer than two 256-token blocks",
        "clamp_engaged": "the last request's valid region reads input token T-1 (the clamp's edge)",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "starts_past_32767": "a request starting past token 32767 (max_num_batched_tokens of 32k and more)",
        "prefill_thousands": "a request of 2048 tokens or more (a long prefill)",
        "spec_tokens_15_plus": "P >= 15 (parallel drafting with num_speculative_tokens >= 15)",
        "many_rejected": "a request with 16 or more rejected tokens",
        "rp_past_32767": "r * P past 32767 for some request (R * P in the tens of thousands)",
        "ids_past_65535": "a copied token id above 65535 (vocabularies of 256k ids)",
        "positions_past_2_24": "a first position of 2**24 or more (long-context max_model_len)",
    }
    extremes = ("beyond_1024_requests", "starts_past_32767", "prefill_thousands", "spec_tokens_15_plus",
                "many_rejected", "rp_past_32767", "ids_past_65535", "positions_past_2_24")

    oracle_functions = numpy_and_numba("copy_and_expand_eagle_inputs")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        a, s = case.arrays, case.scalars
        require_arrays(a, self.inputs)
        for name in self.scalar_names:
            if name not in s:
                raise ContractViolation(f"scalars.{name}", "is required")
        qsl, qel = a["query_start_loc"].astype(np.int64), a["query_end_loc"].astype(np.int64)
        R, T = len(qel), len(a["target_token_ids"])
        if R < 1:
            raise ContractViolation("arrays.query_end_loc", "needs at least one request")
        if len(qsl) != R + 1:
            raise ContractViolation("arrays.query_start_loc", "must have len(query_end_loc) + 1 entries")
        if qsl[0] != 0:
            raise ContractViolation("arrays.query_start_loc", "must start at 0")
        if np.any(np.diff(qsl) < 1):
            raise ContractViolation("arrays.query_start_loc", "must increase strictly (every request has >= 1 token)")
        if qsl[-1] != T or len(a["target_positions"]) != T:
            raise ContractViolation("arrays.query_start_loc", "last entry must equal len(target_token_ids) == len(target_positions)")
        if len(a["next_token_ids"]) != R:
            raise ContractViolation("arrays.next_token_ids", "must have one entry per request")
        if np.any(qel < qsl[:-1]) or np.any(qel > qsl[1:] - 1):
            raise ContractViolation("arrays.query_end_loc", "must satisfy query_start_loc[r] <= query_end_loc[r] <= query_start_loc[r+1] - 1")
        if s["total_input_tokens"] != T:
            raise ContractViolation("scalars.total_input_tokens", "must equal len(target_token_ids)")
        P = s["num_padding_slots_per_request"]
        if not isinstance(P, int) or isinstance(P, bool) or not 1 <= P <= 64:
            raise ContractViolation("scalars.num_padding_slots_per_request", "must be an int from 1 to 64")
        if not isinstance(s["shift_input_ids"], bool):
            raise ContractViolation("scalars.shift_input_ids", "must be true or false")
        for name in ("padding_token_id", "parallel_drafting_token_id"):
            v = s[name]
            if not isinstance(v, int) or isinstance(v, bool) or not INT32_MIN <= v <= INT32_MAX:
                raise ContractViolation(f"scalars.{name}", "must be an int32")
        if s["shift_input_ids"] and P < 2:
            raise ContractViolation("scalars.num_padding_slots_per_request", "must be >= 2 with shift_input_ids (vLLM runs the kernel only when P - shift >= 1; shift with P = 1 is the extended tier)")
        if s["padding_token_id"] != 0:
            raise ContractViolation("scalars.padding_token_id", "must be 0, the literal at vLLM's call site (other values are the extended tier)")
        if s["parallel_drafting_token_id"] < 0:
            raise ContractViolation("scalars.parallel_drafting_token_id", "must be a vocabulary id >= 0 (negative ids are the extended tier)")
        for name in ("target_token_ids", "next_token_ids"):
            if np.any(a[name] < 0):
                raise ContractViolation(f"arrays.{name}", "must hold vocabulary ids >= 0 (negative ids are the extended tier)")
        lay = Layout(case)
        pos = a["target_positions"]
        if not np.array_equal(pos, positions_from_starts(pos[lay.qs], lay.qlen.tolist())):
            raise ContractViolation("arrays.target_positions", "must be consecutive within each request (token indices; others are the extended tier)")
        p0 = pos[lay.qs].astype(np.int64)
        if np.any(p0 < 0) or np.any(p0 > MAX_MODEL_LEN - lay.total):
            raise ContractViolation("arrays.target_positions", "every written position p0 + j must lie in [0, max_model_len = 2**31) (others are the extended tier)")
        if case.launch.get("block_size_tokens") not in (None, lay.vllm_block) or case.launch.get("num_blocks") not in (None, lay.min_blocks):
            raise ContractViolation("launch", "must be vLLM's launch: block_size_tokens and num_blocks null, or vLLM's values (other launches are the extended tier)")

    # -- features ---------------------------------------------------------------------

    def features_of(self, case: Case) -> frozenset[str]:
        lay = Layout(case)
        f = {"shift_on" if lay.shift else "shift_off"}
        f.add("p_is_1" if lay.P == 1 else "p_at_least_2")
        if np.any(lay.rejected > 0):
            f.add("rejected_tokens")
        if lay.rejected[-1] > 0:
            f.add("last_request_rejected")
        if np.any((lay.qe == lay.qs) & (lay.qlen > 1)):
            f.add("all_but_one_rejected")
        if lay.shift and np.any(lay.nv == 0):
            f.add("no_valid_slot")
        if np.any(lay.total > lay.block):
            f.add("multi_block_request")
        if lay.R > 1:
            f.add("several_requests")
        if lay.R > 64:
            f.add("many_requests")
        if lay.max_query_len > 512:
            f.add("long_request")
        if lay.qe[-1] == len(case.arrays["target_token_ids"]) - 1:
            f.add("clamp_engaged")
        pos = case.arrays["target_positions"]
        if lay.R > MAX_NUM_SEQS:
            f.add("beyond_1024_requests")
        if np.any(lay.qs > INT16_MAX):
            f.add("starts_past_32767")
        if lay.max_query_len >= 2048:
            f.add("prefill_thousands")
        if lay.P >= SPEC_TOKENS:
            f.add("spec_tokens_15_plus")
        if np.any(lay.rejected >= 16):
            f.add("many_rejected")
        if (lay.R - 1) * lay.P > INT16_MAX:
            f.add("rp_past_32767")
        valid = np.repeat(np.arange(lay.R), lay.qlen)  # request of each input token
        local = np.arange(len(valid)) - lay.qs[valid]
        read = (local >= int(lay.shift)) & (local < lay.nv[valid] + int(lay.shift))
        if np.any(case.arrays["target_token_ids"][read] > ID16_MAX) or np.any(case.arrays["next_token_ids"] > ID16_MAX):
            f.add("ids_past_65535")
        if np.any(pos[lay.qs] >= FLOAT32_EXACT):
            f.add("positions_past_2_24")
        return frozenset(f)

    # -- execution --------------------------------------------------------------------

    grid_field = "launch.num_blocks"

    def programs(self, case: Case) -> int:
        lay = Layout(case)
        return lay.R * lay.blocks

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        lay = Layout(case)
        T = len(case.arrays["target_token_ids"])
        n_out = max(int(lay.out_start[-1] + lay.total[-1]), int((lay.out_start + np.maximum(lay.total, 0)).max()), 0)
        pos_dtype = case.arrays["target_positions"].dtype
        return {
            "out_input_ids": (I32, (n_out,)),
            "out_positions": (pos_dtype, (n_out,)),
            "out_is_rejected_token_mask": (BOOL, (n_out,)),
            "out_is_masked_token_mask": (BOOL, (n_out,)),
            "out_new_token_indices": (I32, (lay.R * lay.P,)),
            "out_hidden_state_mapping": (I32, (T,)),
        }

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ....kernels.launchers import launch_copy_and_expand_eagle_inputs

        lay = Layout(case)
        s = case.scalars
        launch_copy_and_expand_eagle_inputs(
            kernel,
            **tensors,
            padding_token_id=s["padding_token_id"],
            parallel_drafting_token_id=s["parallel_drafting_token_id"],
            num_padding_slots_per_request=s["num_padding_slots_per_request"],
            shift_input_ids=s["shift_input_ids"],
            total_input_tokens=s["total_input_tokens"],
            max_query_len=lay.max_query_len,
            block_size_tokens=case.launch.get("block_size_tokens"),
            num_blocks=case.launch.get("num_blocks"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        lay = Layout(case)
        oracle(**case.arrays, **case.scalars, **outputs, slots_per_request=lay.blocks * lay.block)

    def split_requests(self, case: Case) -> list[dict[str, Any]]:
        return requests_of(case)

    def join_requests(self, case: Case, pieces: list[dict[str, Any]]) -> Case:
        return rebuild(case, pieces)

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        return _moves(case)

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        lay = Layout(case)
        if array in SLOT_OUTPUTS:
            r = int(np.searchsorted(lay.out_start, index, side="right")) - 1
            if r < 0 or index >= lay.out_start[r] + lay.total[r]:
                return None, "past the last request (must stay untouched)"
            j = index - int(lay.out_start[r])
            nv, P = int(lay.nv[r]), lay.P
            if j >= nv + P:
                region = "rejected"
            elif j > nv:
                region = "parallel"
            elif j == nv:
                region = "bonus"
            else:
                region = "valid"
            return r, f"{region} slot j={j}"
        if array == "out_new_token_indices":
            r, k = divmod(index, lay.P)
            return r, f"new-token index k={k} ({'bonus' if k == 0 else 'parallel'})"
        if array == "out_hidden_state_mapping":
            r = int(np.searchsorted(lay.qs, index, side="right")) - 1
            j = index - int(lay.qs[r])
            if not lay.shift:
                return r, f"hidden-state map j={j} (must stay untouched without shift)"
            return r, f"hidden-state map j={j}"
        return None, array

    # -- extended tier (docs/CONTRACT.md §1.4): edges.py ------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(self.inputs))


def _moves(case: Case) -> Iterator[Case]:
    """Shrink moves other than dropping requests: whole-case simplifications first (each one
    check, and what makes a large reproducer readable), then per-request shortening."""
    reqs = requests_of(case)
    s = case.scalars
    if case.launch.get("block_size_tokens") is not None or case.launch.get("num_blocks") is not None:
        yield rebuild(case, reqs, launch={"block_size_tokens": None, "num_blocks": None})
    if case.launch.get("num_blocks") is not None:
        yield case.replace(launch={"num_blocks": None})
    if sum(1 for q in reqs if q["rejected"]) > 1:
        yield rebuild(case, [{**q, "rejected": 0} for q in reqs])
    tokens = np.concatenate([q["tokens"] for q in reqs])
    T = len(tokens)  # = total_input_tokens in the production tier
    for plain in (np.zeros(T, np.int32), np.ones(T, np.int32), np.arange(1, T + 1, dtype=np.int32)):
        if np.array_equal(tokens, plain):
            break  # as plain as the ones before it allow
        yield rebuild(case, _with_tokens(reqs, plain, [0 if plain[0] == 0 else 1] * len(reqs)))
    for starts in (np.zeros(len(reqs), np.int64), np.array([q["positions"][0] if len(q["positions"]) else 0 for q in reqs], np.int64)):
        consecutive = [{**q, "positions": positions_from_starts(starts[r : r + 1], [len(q["positions"])])}
                       for r, q in enumerate(reqs)]
        if any(not np.array_equal(q["positions"], c["positions"]) for q, c in zip(reqs, consecutive, strict=True)):
            yield rebuild(case, consecutive)
    simple_p = 2 if s["shift_input_ids"] else 1
    for name, simple in (("shift_input_ids", False), ("padding_token_id", 0), ("parallel_drafting_token_id", 0)):
        if s[name] != simple:
            yield rebuild(case, reqs, scalars={name: simple})
    for p in shorter(s["num_padding_slots_per_request"]):
        if p >= simple_p:
            yield rebuild(case, reqs, scalars={"num_padding_slots_per_request": p})
    for r, q in enumerate(reqs):
        n = len(q["tokens"])
        for new_n in shorter(n):
            short = {**q, "tokens": q["tokens"][:new_n], "positions": q["positions"][:new_n]}
            yield rebuild(case, reqs[:r] + [short] + reqs[r + 1 :])
        if q["rejected"]:
            yield rebuild(case, reqs[:r] + [{**q, "rejected": 0}] + reqs[r + 1 :])


def _with_tokens(reqs: list[dict[str, Any]], tokens: np.ndarray, nexts: list[int]) -> list[dict[str, Any]]:
    out, lo = [], 0
    for q, nxt in zip(reqs, nexts, strict=True):
        n = len(q["tokens"])
        out.append({**q, "tokens": tokens[lo : lo + n], "next": nxt})
        lo += n
    return out


TARGET = CopyAndExpand()
