"""``copy_and_expand_dflash_inputs_kernel`` (vLLM 0.33): docs/CONTRACT.md §9.

One target, two variants: ``has_num_rejected`` off (vLLM passes the null pointer ``0`` for
``num_rejected_tokens_ptr``; the case has no such array) and on (an int32 count per request).
Cases are built in :mod:`.layout` and drawn in :mod:`.cases`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.strategies import (
    FLOAT32_EXACT,
    ID16_MAX,
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    MAX_NUM_SEQS,
    POWERS_OF_TWO,
    SPEC_TOKENS,
)
from ...targetkit.base import ContractViolation, TritonTarget, numpy_and_numba, require_arrays
from .layout import (
    MAX_BLOCK_SIZE,
    MAX_POSITION,
    MAX_SPARE,
    MAX_SPEC_TOKENS,
    NAME,
    Layout,
    block_row,
    rebuild,
    requests_of,
    settings_of,
)

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)


CONTEXT_OUTPUTS = ("out_context_positions", "out_context_slot_mapping")


QUERY_OUTPUTS = ("out_input_ids", "out_query_positions", "out_query_slot_mapping")


def _repeats(lay: Layout) -> np.ndarray:
    """Per context token (but a request's first): whether its position repeats the previous one."""
    inside = np.arange(lay.T) - np.repeat(lay.qs, lay.qlen) > 0
    return inside & (np.diff(lay.positions, prepend=-1) == 0)


class CopyAndExpandDflash(TritonTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 9
    parameters = (
        "next_token_ids_ptr",
        "target_positions_ptr",
        "out_input_ids_ptr",
        "out_context_positions_ptr",
        "out_query_positions_ptr",
        "out_context_slot_mapping_ptr",
        "out_query_slot_mapping_ptr",
        "out_token_indices_ptr",
        "block_table_ptr",
        "block_table_stride",
        "query_start_loc_ptr",
        "num_rejected_tokens_ptr",
        "parallel_drafting_token_id",
        "block_size",
        "num_query_per_req",
        "num_speculative_tokens",
        "total_input_tokens",
        "BLOCK_SIZE",
        "HAS_NUM_REJECTED",
    )
    inputs = {
        "next_token_ids": I32,
        "target_positions": I64,
        "block_table": I32,
        "query_start_loc": I32,
    }
    optional_inputs = {"num_rejected_tokens": I32}
    scalar_names = (
        "parallel_drafting_token_id",
        "block_size",
        "num_query_per_req",
        "num_speculative_tokens",
        "total_input_tokens",
        "has_num_rejected",
    )
    launch_names = ("triton_block_size", "max_tokens_per_req", "buffer_spare")
    features = {
        "has_num_rejected_off": "variant off: num_rejected_tokens_ptr is the null 0 (no drafts verified this step)",
        "has_num_rejected_on": "variant on: a rejected count per request (the padded drafter batch)",
        "some_rejected": "variant on, some request has rejected tokens: its query continues before its context ends",
        "all_but_one_rejected": "variant on, a request of several tokens rejects all but its first",
        "last_request_rejected": "variant on, the last request has rejected tokens",
        "no_spec_tokens": "K = 0: one query slot (the bonus) per request, no token index",
        "one_spec_token": "K = 1",
        "many_spec_tokens": "K >= 8",
        "query_len_16": "Q = 16 (K = 15, DFlash's usual; Q specialised as a multiple of 16)",
        "one_token_request": "a request with a single context token",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "long_request": "a request longer than two 256-token blocks",
        "multi_block_request": "some request's context and query slots span several token blocks",
        "query_straddles_blocks": "some request's query slots straddle a token-block boundary",
        "vllm_launch": "vLLM's own triton_block_size and max_tokens_per_req",
        "query_crosses_kv_block": "a request's query positions span two KV blocks",
        "kv_block_size_1": "block_size = 1",
        "kv_block_size_odd": "block_size not a power of two (hybrid models)",
        "stride_1": "block_table_stride = 1 (specialised as the constant 1)",
        "stride_multiple_of_16": "block_table_stride a multiple of 16 (specialised as divisible by 16)",
        "total_tokens_specialised": "total_input_tokens 1 or a multiple of 16 (Triton specialises it)",
        "spare_buffers": "the persistent output buffers are longer than what is written",
        "mrope_positions": "a request whose positions repeat (an M-RoPE target's temporal coordinates: image patches)",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "offsets_past_32767": "query_start_loc past 32767 (max_num_batched_tokens of 32k and more)",
        "query_slots_past_32767": "R * Q past 32767 (query-buffer indices r*Q + q beyond int16)",
        "prefill_thousands": "a request of 2048 tokens or more (a long prefill)",
        "spec_tokens_15_plus": "K >= 15 (num_speculative_tokens of 15 and more)",
        "ids_past_65535": "a next-token or mask id from 65536 to 2**18 (vocabularies of 256k ids)",
        "positions_past_2_24": "a context position past 2**24 that the block table reaches unclamped (max_model_len in the millions)",
        "block_id_past_int16": "a non-negative block id read past 32767 (KV caches of more than 32k blocks)",
        "slot_near_int32_limit": "a slot within 2**16 below 2**31 (the largest KV caches)",
    }
    extremes = ("beyond_1024_requests", "offsets_past_32767", "query_slots_past_32767", "prefill_thousands",
                "spec_tokens_15_plus", "ids_past_65535", "positions_past_2_24", "block_id_past_int16",
                "slot_near_int32_limit")

    oracle_functions = numpy_and_numba("copy_and_expand_dflash_inputs")

    # -- generation -------------------------------------------------------------------

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        return shrink(case)

    def alike(self, case: Case, k: int) -> Case:
        return alike(case, k)

    # -- contract ---------------------------------------------------------------------

    def extended_rules(self, case: Case) -> None:
        """The extended tier's rules (docs/CONTRACT.md §9.4)."""
        a, s, launch = case.arrays, case.scalars, case.launch
        dtypes = {**self.inputs, **self.optional_inputs}
        require_arrays(a, dtypes | {"block_table": (dtypes["block_table"], 2)}, optional=self.optional_inputs)
        extra = sorted(set(a) - set(self.inputs) - set(self.optional_inputs))
        if extra:
            raise ContractViolation(f"arrays.{extra[0]}", "is not an input of this kernel")
        for name in self.scalar_names:
            if name not in s:
                raise ContractViolation(f"scalars.{name}", "is required")
        qsl = a["query_start_loc"].astype(np.int64)
        R, T = len(qsl) - 1, len(a["target_positions"])
        if R < 1 or qsl[0] != 0:
            raise ContractViolation("arrays.query_start_loc", "needs at least one request and must start at 0")
        if np.any(np.diff(qsl) < 1):
            raise ContractViolation("arrays.query_start_loc", "must increase strictly (every request has >= 1 token)")
        if qsl[-1] != T:
            raise ContractViolation("arrays.query_start_loc", "last entry must equal len(target_positions)")
        if s["total_input_tokens"] != T:
            raise ContractViolation("scalars.total_input_tokens", "must equal len(target_positions)")
        pos = a["target_positions"]
        if np.any(pos < 0) or np.any(pos > MAX_POSITION):
            raise ContractViolation("arrays.target_positions", "must lie in [0, 2**62]")
        if len(a["next_token_ids"]) != R:
            raise ContractViolation("arrays.next_token_ids", "must have one entry per request")
        table = a["block_table"]
        if table.shape[0] != R or not 1 <= table.shape[1] <= 1 << 20:
            raise ContractViolation("arrays.block_table", "must have one row per request and 1 to 2**20 columns")
        has = s["has_num_rejected"]
        if not isinstance(has, bool):
            raise ContractViolation("scalars.has_num_rejected", "must be true or false")
        if has != ("num_rejected_tokens" in a):
            raise ContractViolation("arrays.num_rejected_tokens", "is present exactly when has_num_rejected is true")
        if has:
            rej = a["num_rejected_tokens"].astype(np.int64)
            if len(rej) != R:
                raise ContractViolation("arrays.num_rejected_tokens", "must have one entry per request")
            if np.any(rej < 0) or np.any(rej > np.diff(qsl) - 1):
                raise ContractViolation("arrays.num_rejected_tokens", "must satisfy 0 <= rejected <= qlen - 1")
        _int_in(s, "num_speculative_tokens", 0, MAX_SPEC_TOKENS)
        if s["num_query_per_req"] != s["num_speculative_tokens"] + 1:
            raise ContractViolation("scalars.num_query_per_req", "must equal num_speculative_tokens + 1")
        _int_in(s, "block_size", 1, MAX_BLOCK_SIZE)
        _int_in(s, "parallel_drafting_token_id", INT32_MIN, INT32_MAX)
        block = launch.get("triton_block_size")
        if block is not None and block not in POWERS_OF_TWO:
            raise ContractViolation("launch.triton_block_size", "must be null or a power of two from 1 to 256")
        max_tokens = launch.get("max_tokens_per_req")
        need = int(np.diff(qsl).max()) + s["num_query_per_req"]
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < need):
            raise ContractViolation("launch.max_tokens_per_req", f"must be null or cover every slot: at least max_query_len + Q = {need}")
        _int_in(launch, "buffer_spare", 0, MAX_SPARE, section="launch", nullable=True)
        if "lookahead_tokens" in s:
            _int_in(s, "lookahead_tokens", 0, s["num_speculative_tokens"] + 1)

    def production_rules(self, case: Case) -> None:
        """The production tier (docs/CONTRACT.md §9.2): :meth:`extended_rules`'s rules, and what
        DFlash's first pass hands the kernel: positions that never decrease within a request
        (consecutive for a text target), every query position inside the table (the drafter
        gate: the block clamp never engages), vLLM's block sizes, block ids >= 0 with slots
        within int32, vocabulary ids >= 0, vLLM's launch, and (when the case gives it) the
        allocation's lookahead ``K + 1``."""
        self.extended_rules(case)
        lay = Layout(case)
        s, launch = case.scalars, case.launch
        inside = np.arange(lay.T) - np.repeat(lay.qs, lay.qlen) > 0
        if np.any(np.diff(lay.positions, prepend=0)[inside] < 0):
            raise ContractViolation("arrays.target_positions", "never decrease within a request (token indices, or M-RoPE temporal coordinates)")
        if np.any(lay.query_positions > lay.W * lay.bs - 1) or np.any(lay.positions > lay.W * lay.bs - 1):
            raise ContractViolation("arrays.target_positions", "every query position p_last + 1 + q must lie in the table (vLLM's drafter gate)")
        if not (lay.bs & (lay.bs - 1) == 0 or lay.bs % 16 == 0):
            raise ContractViolation("scalars.block_size", "must be a power of two or a multiple of 16")
        table = case.arrays["block_table"].astype(np.int64)
        if np.any(table < 0) or np.any(table * lay.bs + lay.bs - 1 > INT32_MAX):
            raise ContractViolation("arrays.block_table", "block ids must be >= 0 with slots within int32")
        ids = np.append(case.arrays["next_token_ids"].astype(np.int64), s["parallel_drafting_token_id"])
        if np.any(ids < 0):
            raise ContractViolation("arrays.next_token_ids", "token ids (and the mask id) are vocabulary ids >= 0")
        if launch.get("triton_block_size") is not None or launch.get("max_tokens_per_req") is not None:
            raise ContractViolation("launch.triton_block_size", "vLLM's launch: triton_block_size and max_tokens_per_req null")
        if "lookahead_tokens" in s and s["lookahead_tokens"] != lay.K + 1:
            raise ContractViolation("scalars.lookahead_tokens", "vLLM allocates K + 1 lookahead slots for DFlash (num_lookahead_tokens)")


    # -- features ---------------------------------------------------------------------

    def features_of(self, case: Case) -> frozenset[str]:
        lay = Layout(case)
        s, launch = case.scalars, case.launch
        has = s["has_num_rejected"]
        rej = lay.rejected
        qpos = lay.query_positions
        ctx_blocks = lay.blocks_of(lay.positions)
        q_blocks = lay.blocks_of(qpos)
        ids = np.append(case.arrays["next_token_ids"].astype(np.int64), s["parallel_drafting_token_id"])
        first_query_block = lay.qlen // lay.block
        last_query_block = (lay.qlen + lay.Q - 1) // lay.block
        checks = {
            "has_num_rejected_off": not has,
            "has_num_rejected_on": has,
            "some_rejected": has and bool(np.any(rej > 0)),
            "all_but_one_rejected": has and bool(np.any((lay.qlen > 1) & (rej == lay.qlen - 1))),
            "last_request_rejected": has and rej[-1] > 0,
            "no_spec_tokens": lay.K == 0,
            "one_spec_token": lay.K == 1,
            "many_spec_tokens": lay.K >= 8,
            "query_len_16": lay.Q == 16,
            "one_token_request": bool(np.any(lay.qlen == 1)),
            "several_requests": lay.R > 1,
            "many_requests": lay.R > 64,
            "long_request": lay.max_query_len > 512,
            "multi_block_request": bool(np.any(lay.qlen + lay.Q > lay.block)),
            "query_straddles_blocks": bool(np.any(first_query_block != last_query_block)),
            "vllm_launch": launch.get("triton_block_size") is None and launch.get("max_tokens_per_req") is None,
            "query_crosses_kv_block": bool(np.any(q_blocks[:, 0] != q_blocks[:, -1])),
            "kv_block_size_1": lay.bs == 1,
            "kv_block_size_odd": lay.bs & (lay.bs - 1) != 0,
            "stride_1": lay.W == 1,
            "stride_multiple_of_16": lay.W % 16 == 0,
            "total_tokens_specialised": lay.T == 1 or lay.T % 16 == 0,
            "spare_buffers": lay.spare > 0,
            "mrope_positions": bool(np.any(_repeats(lay))),
            "beyond_1024_requests": lay.R > MAX_NUM_SEQS,
            "offsets_past_32767": lay.T > INT16_MAX,
            "query_slots_past_32767": lay.R * lay.Q > INT16_MAX,
            "prefill_thousands": lay.max_query_len >= 2048,
            "spec_tokens_15_plus": lay.K >= SPEC_TOKENS,
            "ids_past_65535": bool(np.any((ids > ID16_MAX) & (ids <= 1 << 18))),
            "positions_past_2_24": bool(np.any((lay.positions > FLOAT32_EXACT) & (ctx_blocks <= lay.W - 1))),
            "block_id_past_int16": bool(np.any(lay.read_block_ids > INT16_MAX)),
            "slot_near_int32_limit": bool(np.any((lay.slots > INT32_MAX - (1 << 16)) & (lay.slots <= INT32_MAX))),
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- execution --------------------------------------------------------------------

    grid_field = "launch.max_tokens_per_req"

    def programs(self, case: Case) -> int:
        lay = Layout(case)
        return lay.R * lay.blocks

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        lay = Layout(case)
        n_query = lay.R * lay.Q + lay.spare
        n_context = lay.T + lay.spare
        return {
            "out_input_ids": (I32, (n_query,)),
            "out_context_positions": (I64, (n_context,)),
            "out_query_positions": (I64, (n_query,)),
            "out_context_slot_mapping": (I64, (n_context,)),
            "out_query_slot_mapping": (I64, (n_query,)),
            "out_token_indices": (I32, (lay.R * lay.K,)),
        }

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ....kernels.launchers import launch_copy_and_expand_dflash_inputs

        s, launch = case.scalars, case.launch
        t = dict(tensors)
        t.setdefault("num_rejected_tokens", None)
        launch_copy_and_expand_dflash_inputs(
            kernel,
            **t,
            parallel_drafting_token_id=s["parallel_drafting_token_id"],
            block_size=s["block_size"],
            num_speculative_tokens=s["num_speculative_tokens"],
            total_input_tokens=s["total_input_tokens"],
            max_query_len=Layout(case).max_query_len,
            max_tokens_per_req=launch.get("max_tokens_per_req"),
            triton_block_size=launch.get("triton_block_size"),
        )

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> None:
        s = case.scalars
        oracle(
            **case.arrays,
            block_table_stride=case.arrays["block_table"].shape[1],
            **{n: s[n] for n in self.scalar_names if n != "has_num_rejected"},
            **outputs,
        )

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        lay = Layout(case)
        if array in CONTEXT_OUTPUTS:
            if index >= lay.T:
                return None, "spare past the context (must stay untouched)"
            r = int(np.searchsorted(lay.qs, index, side="right")) - 1
            j = index - int(lay.qs[r])
            valid = j < lay.qlen[r] - lay.rejected[r]
            return r, f"context slot j={j} ({'accepted' if valid else 'rejected'} token)"
        if array in QUERY_OUTPUTS:
            if index >= lay.R * lay.Q:
                return None, "spare past the queries (must stay untouched)"
            r, q = divmod(index, lay.Q)
            return r, f"query slot q={q} ({'bonus' if q == 0 else 'mask token'})"
        if array == "out_token_indices":
            r, k = divmod(index, lay.K)
            return r, f"token index of mask token q={k + 1}"
        return None, array


def _int_in(d: Mapping[str, Any], name: str, lo: int, hi: int, *, section: str = "scalars", nullable: bool = False) -> None:
    v = d.get(name)
    if nullable and v is None:
        return
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise ContractViolation(f"{section}.{name}", f"must be {'null or ' if nullable else ''}an int from {lo} to {hi}")


def alike(case: Case, k: int) -> Case:
    """``case`` with every request like request ``k`` (:meth:`Target.alike`)."""
    reqs = requests_of(case)
    if len(reqs) < 2 or not -len(reqs) <= k < len(reqs):
        return case
    return rebuild(case, [reqs[k]] * len(reqs))


def shrink(case: Case) -> Iterator[Case]:
    """Smaller variants of ``case``: drop requests, shorten one, then simplify values and launch."""
    reqs = requests_of(case)
    R = len(reqs)
    if R > 1:
        yield rebuild(case, reqs[: R // 2])
        yield rebuild(case, reqs[R // 2 :])
        for r in range(R):
            yield rebuild(case, reqs[:r] + reqs[r + 1 :])
    for r, q in enumerate(reqs):
        n = len(q["positions"])
        for new_n in sorted({1, n // 2, n - 1} - {0, n}):
            yield rebuild(case, reqs[:r] + [{**q, "positions": q["positions"][:new_n]}] + reqs[r + 1 :])
        if q["rejected"]:
            yield rebuild(case, reqs[:r] + [{**q, "rejected": 0}] + reqs[r + 1 :])
    s = settings_of(case)
    if any(v is not None for v in s["launch"].values()):
        yield rebuild(case, reqs, launch={})
    for name, simple in (("has_num_rejected", False), ("K", 1), ("block_size", 16), ("mask_id", 0)):
        if s[name] != simple:
            yield rebuild(case, reqs, **{name: simple})
    width = len(reqs[0]["row"])
    plain_rows = [{**q, "row": block_row(r * width, 1, width)} for r, q in enumerate(reqs)]
    if any(not np.array_equal(q["row"], p["row"]) for q, p in zip(reqs, plain_rows, strict=True)):
        yield rebuild(case, plain_rows)
    plain = [{**q, "positions": np.arange(len(q["positions"]), dtype=np.int64), "next": 0} for q in reqs]
    if any(not np.array_equal(q["positions"], p["positions"]) or q["next"] for q, p in zip(reqs, plain, strict=True)):
        yield rebuild(case, plain)


TARGET = CopyAndExpandDflash()
