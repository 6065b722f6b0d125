"""``copy_and_expand_eagle_inputs_kernel``: docs/CONTRACT.md §1."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from ..core.case import Case
from ..generation.shrink_steps import shorter
from ..generation.strategies import (
    FLOAT32_EXACT,
    ID16_MAX,
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    MAX_NUM_SEQS,
    POWERS_OF_TWO,
    SPEC_TOKENS,
    Scale,
    Shape,
    cdiv,
    draw_shape,
    int32s,
    int64s_near_limits,
    int_arrays,
    next_power_of_2,
    query_start_loc_from,
    random_shape,
    request_counts,
)
from ..targetkit.base import ContractViolation, EdgesInModule, TritonTarget, require_arrays
from . import copy_and_expand_edges as edges

I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)
SLOT_OUTPUTS = ("out_input_ids", "out_positions", "out_is_rejected_token_mask", "out_is_masked_token_mask")


def positions_from_starts(starts: np.ndarray, lengths: list[int]) -> np.ndarray:
    """Consecutive int64 positions per request, ``start, start+1, ...``, wrapping at the limits."""
    lens = np.asarray(lengths, dtype=np.int64)
    local = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    with np.errstate(over="ignore"):
        return (np.repeat(starts.astype(np.int64), lens) + local).astype(np.int64)


class _Layout:
    """Per-request quantities of the contract table, as int64 arrays (for reports/features)."""

    def __init__(self, case: Case) -> None:
        qsl = case.arrays["query_start_loc"].astype(np.int64)
        self.qs, self.nqs = qsl[:-1], qsl[1:]
        self.qe = case.arrays["query_end_loc"].astype(np.int64)
        self.R = len(self.qe)
        self.P = int(case.scalars["num_padding_slots_per_request"])
        self.shift = bool(case.scalars["shift_input_ids"])
        self.qlen = self.nqs - self.qs
        self.nv = self.qe - self.qs + (0 if self.shift else 1)
        r = np.arange(self.R, dtype=np.int64)
        self.out_start = self.qs + r * (self.P - int(self.shift))
        self.rejected = self.nqs - self.qe - 1
        self.total = self.nv + self.P + self.rejected
        self.max_query_len = int(self.qlen.max()) if self.R else 0
        self.max_tokens = self.max_query_len + self.P - int(self.shift)
        block = case.launch.get("block_size_tokens")
        self.block = min(256, next_power_of_2(self.max_tokens)) if block is None else int(block)
        blocks = case.launch.get("num_blocks")
        self.min_blocks = cdiv(self.max_tokens, self.block)
        self.blocks = self.min_blocks if blocks is None else int(blocks)


class CopyAndExpand(EdgesInModule, TritonTarget):
    name = "copy_and_expand_eagle_inputs_kernel"
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
        "shift_with_p_1": "shift with P = 1 (outside vLLM's production domain, defined by the table)",
        "rejected_tokens": "some request has rejected tokens (qe < nqs - 1)",
        "last_request_rejected": "the last request has rejected tokens: its rejected slots end the output",
        "all_but_one_rejected": "some request rejects all but its first token (qe == qs)",
        "no_valid_slot": "shift mode with nv = 0: the bonus takes the first input's position",
        "multi_block_request": "some request's slots span several token blocks",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "long_request": "a request longer than two 256-token blocks",
        "vllm_launch": "vLLM's own BLOCK_SIZE_TOKENS and num_blocks",
        "custom_block": "a BLOCK_SIZE_TOKENS other than vLLM's",
        "block_of_1": "BLOCK_SIZE_TOKENS = 1",
        "padded_launch": "more token blocks than needed (extra programs write nothing)",
        "clamp_engaged": "the last request's valid region reads input token T-1 (the clamp's edge)",
        "positions_wrap": "p0 + j wraps around the int64 limit",
        "scrambled_positions": "positions are not consecutive within a request (only p0 is read)",
        "int32_extreme_ids": "token ids at the int32 limits",
        "nonzero_padding_id": "padding_token_id != 0",
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

    @property
    def oracles(self) -> Mapping[str, Any]:
        from ...oracles import loops, vectorized

        return {"numpy": vectorized.copy_and_expand_eagle_inputs, "numba": loops.copy_and_expand_eagle_inputs}

    # -- generation -------------------------------------------------------------------

    def strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        return _cases(scale)

    def random_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        extreme = random_shape(rng, self.shapes, scale)
        if extreme is not None:
            return extreme
        R = int(rng.integers(1, scale.max_requests + 1)) if rng.random() < 0.9 else int(rng.integers(1, scale.request_tail + 1))
        cap = int(rng.choice([4, 16, 64, scale.max_query_len]))
        lengths = rng.integers(1, cap + 1, size=R).tolist()
        rejected = [int(rng.integers(0, n)) for n in lengths]
        shift = bool(rng.integers(0, 2))
        P = int(rng.integers(2, 9)) if shift and rng.random() < 0.875 else int(rng.integers(1, 9))
        T = int(sum(lengths))
        p0 = [
            rng.integers(0, 1 << 20, size=R),
            rng.integers(INT64_MIN, INT64_MAX, size=R, endpoint=True),
            INT64_MAX - rng.integers(0, 4096, size=R),
        ][int(rng.integers(0, 3))]
        positions = positions_from_starts(np.asarray(p0, dtype=np.int64), lengths)
        if rng.random() < 0.2:  # only p0 is read: the rest may be anything
            positions = rng.integers(INT64_MIN, INT64_MAX, size=T, endpoint=True)
        token_ids = rng.integers(INT32_MIN, INT32_MAX, size=T, endpoint=True, dtype=np.int32)
        if rng.random() < 0.2:
            token_ids[rng.integers(0, T, size=2)] = [INT32_MIN, INT32_MAX]
        return _build(
            lengths,
            rejected,
            shift=shift,
            P=P,
            token_ids=token_ids,
            positions=positions,
            next_ids=rng.integers(INT32_MIN, INT32_MAX, size=R, endpoint=True, dtype=np.int32),
            padding_id=0 if rng.random() < 0.8 else int(rng.integers(INT32_MIN, INT32_MAX, endpoint=True)),
            parallel_id=int(rng.integers(INT32_MIN, INT32_MAX, endpoint=True)),
            launch=_random_launch(rng, lengths, P, shift, scale),
        )

    # -- contract ---------------------------------------------------------------------

    def validate(self, case: Case, tier: str = "production") -> None:
        if tier == "extended":
            return self.validate_extended(case)
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
        lay = _Layout(case)
        block = case.launch.get("block_size_tokens")
        if block is not None and block not in POWERS_OF_TWO:
            raise ContractViolation("launch.block_size_tokens", "must be null or a power of two from 1 to 256")
        blocks = case.launch.get("num_blocks")
        if blocks is not None and blocks < lay.min_blocks:
            raise ContractViolation("launch.num_blocks", f"must cover every slot: at least cdiv(max_query_len + P - shift, block) = {lay.min_blocks}")

    # -- features ---------------------------------------------------------------------

    def features_of(self, case: Case) -> frozenset[str]:
        lay = _Layout(case)
        ids = np.concatenate([case.arrays["target_token_ids"], case.arrays["next_token_ids"]])
        f = {"shift_on" if lay.shift else "shift_off"}
        f.add("p_is_1" if lay.P == 1 else "p_at_least_2")
        if lay.shift and lay.P == 1:
            f.add("shift_with_p_1")
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
        if case.launch.get("block_size_tokens") is None and case.launch.get("num_blocks") is None:
            f.add("vllm_launch")
        if case.launch.get("block_size_tokens") not in (None, min(256, next_power_of_2(lay.max_tokens))):
            f.add("custom_block")
        if lay.block == 1:
            f.add("block_of_1")
        if lay.blocks > lay.min_blocks:
            f.add("padded_launch")
        if lay.qe[-1] == len(case.arrays["target_token_ids"]) - 1:
            f.add("clamp_engaged")
        pos = case.arrays["target_positions"]
        p0 = pos[lay.qs].astype(object)
        if any(int(p) + int(t) - 1 > INT64_MAX for p, t in zip(p0, lay.total, strict=True)):
            f.add("positions_wrap")
        expect = positions_from_starts(pos[lay.qs], lay.qlen.tolist())
        if not np.array_equal(expect, pos):
            f.add("scrambled_positions")
        if np.any((ids == INT32_MIN) | (ids == INT32_MAX)):
            f.add("int32_extreme_ids")
        if case.scalars["padding_token_id"] != 0:
            f.add("nonzero_padding_id")
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
        lay = _Layout(case)
        return lay.R * lay.blocks

    def output_specs(self, case: Case) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
        lay = _Layout(case)
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
        from ...kernels.launchers import launch_copy_and_expand_eagle_inputs

        lay = _Layout(case)
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
        lay = _Layout(case)
        oracle(**case.arrays, **case.scalars, **outputs, slots_per_request=lay.blocks * lay.block)

    def split_requests(self, case: Case) -> list[dict[str, Any]]:
        return _requests(case)

    def join_requests(self, case: Case, pieces: list[dict[str, Any]]) -> Case:
        return _rebuild(case, pieces)

    def shrink_moves(self, case: Case) -> Iterator[Case]:
        return _moves(case)

    def locate(self, case: Case, array: str, index: int) -> tuple[int | None, str]:
        lay = _Layout(case)
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

    # -- extended tier (docs/CONTRACT.md §1.4): copy_and_expand_edges.py -------------

    edges = edges


def _build(
    lengths: list[int],
    rejected: list[int],
    *,
    shift: bool,
    P: int,
    token_ids: np.ndarray,
    positions: np.ndarray,
    next_ids: np.ndarray,
    padding_id: int,
    parallel_id: int,
    launch: dict[str, int | None],
) -> Case:
    qsl = query_start_loc_from(lengths)
    qel = (qsl[1:] - 1 - np.asarray(rejected, dtype=np.int32)).astype(np.int32)
    return Case(
        kernel=CopyAndExpand.name,
        arrays={
            "target_token_ids": token_ids.astype(np.int32),
            "target_positions": positions.astype(np.int64),
            "next_token_ids": next_ids.astype(np.int32),
            "query_start_loc": qsl,
            "query_end_loc": qel,
        },
        scalars={
            "padding_token_id": int(padding_id),
            "parallel_drafting_token_id": int(parallel_id),
            "total_input_tokens": int(qsl[-1]),
            "num_padding_slots_per_request": int(P),
            "shift_input_ids": bool(shift),
        },
        launch=launch,
    )


def _allowed_blocks(R: int, max_tokens: int, scale: Scale) -> list[int]:
    vllm_block = min(256, next_power_of_2(max_tokens))
    ok = [b for b in POWERS_OF_TWO if R * cdiv(max_tokens, b) <= scale.max_programs]
    return ok or [vllm_block]


@st.composite
def _launches(draw: st.DrawFn, lengths: list[int], P: int, shift: bool, scale: Scale) -> dict[str, int | None]:
    max_tokens = max(lengths) + P - int(shift)
    if not draw(st.booleans()):  # shrinks toward vLLM's own launch
        return {"block_size_tokens": None, "num_blocks": None}
    block = draw(st.sampled_from(_allowed_blocks(len(lengths), max_tokens, scale)))
    need = cdiv(max_tokens, block)
    budget = max(0, scale.max_programs // len(lengths) - need)
    extra = draw(st.integers(0, min(2, budget)))
    return {"block_size_tokens": block, "num_blocks": need + extra if extra else None}


def _random_launch(rng: np.random.Generator, lengths: list[int], P: int, shift: bool, scale: Scale) -> dict[str, int | None]:
    if rng.random() < 0.5:
        return {"block_size_tokens": None, "num_blocks": None}
    max_tokens = max(lengths) + P - int(shift)
    block = int(rng.choice(_allowed_blocks(len(lengths), max_tokens, scale)))
    need = cdiv(max_tokens, block)
    extra = int(rng.integers(0, 3)) if len(lengths) * (need + 2) <= scale.max_programs else 0
    return {"block_size_tokens": block, "num_blocks": need + extra if extra else None}


def padding_slots(shift: bool) -> st.SearchStrategy[int]:
    """P from 1 to 8. With shift, vLLM uses P >= 2: P = 1 is drawn 1 time in 8 and shrinks to 2."""
    return st.sampled_from([2, 3, 4, 5, 6, 7, 8, 1]) if shift else st.integers(1, 8)


@st.composite
def _request(draw: st.DrawFn, cap: int, consecutive: bool) -> dict[str, Any]:
    """One request's own draws, together, so shrinking drops a request with its data."""
    n = draw(st.integers(1, cap))
    if consecutive:
        positions = positions_from_starts(np.array([draw(int64s_near_limits())], dtype=np.int64), [n])
    else:
        positions = draw(int_arrays(np.int64, n, int64s_near_limits()))
    return {
        "tokens": draw(int_arrays(np.int32, n, int32s())),
        "positions": positions,
        "rejected": draw(st.integers(0, n - 1)),
        "next": draw(int32s()),
    }


@st.composite
def _cases(draw: st.DrawFn, scale: Scale) -> Case:
    extreme = draw(draw_shape(SHAPES, scale))
    if extreme is not None:
        return extreme
    shift = draw(st.booleans())
    P = draw(padding_slots(shift))
    R = draw(request_counts(scale))
    cap = draw(st.sampled_from(sorted({4, 16, 64, scale.max_query_len})))
    consecutive = draw(st.booleans())
    reqs = draw(st.lists(_request(cap, consecutive), min_size=R, max_size=R))
    lengths = [len(q["tokens"]) for q in reqs]
    return _build(
        lengths,
        [q["rejected"] for q in reqs],
        shift=shift,
        P=P,
        token_ids=np.concatenate([q["tokens"] for q in reqs]),
        positions=np.concatenate([q["positions"] for q in reqs]),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=draw(st.just(0) | int32s()),
        parallel_id=draw(int32s()),
        launch=draw(_launches(lengths, P, shift, scale)),
    )


TARGET = CopyAndExpand()


def _requests(case: Case) -> list[dict[str, Any]]:
    """The case split per request: its tokens, positions, rejected count and next token."""
    qsl = case.arrays["query_start_loc"].astype(np.int64)
    qel = case.arrays["query_end_loc"].astype(np.int64)
    out = []
    for r in range(len(qel)):
        lo, hi = int(qsl[r]), int(qsl[r + 1])
        out.append(
            {
                "tokens": case.arrays["target_token_ids"][lo:hi],
                "positions": case.arrays["target_positions"][lo:hi],
                "rejected": int(hi - qel[r] - 1),
                "next": case.arrays["next_token_ids"][r],
            }
        )
    return out


def _rebuild(case: Case, reqs: list[dict[str, Any]], **overrides: Any) -> Case:
    """``case`` rebuilt from per-request pieces; an explicit grid too small for it is dropped."""
    s = {**case.scalars, **overrides.get("scalars", {})}
    lengths = [len(q["tokens"]) for q in reqs]
    new = _build(
        lengths,
        [min(q["rejected"], n - 1) for q, n in zip(reqs, lengths, strict=True)],
        shift=s["shift_input_ids"],
        P=s["num_padding_slots_per_request"],
        token_ids=np.concatenate([q["tokens"] for q in reqs]).astype(np.int32),
        positions=np.concatenate([q["positions"] for q in reqs]).astype(np.int64),
        next_ids=np.array([q["next"] for q in reqs], dtype=np.int32),
        padding_id=s["padding_token_id"],
        parallel_id=s["parallel_drafting_token_id"],
        launch=dict(overrides.get("launch", case.launch)),
    )
    blocks = new.launch.get("num_blocks")
    if blocks is not None and blocks < _Layout(new).min_blocks:
        new = new.replace(launch={"num_blocks": None})
    return new


def _moves(case: Case) -> Iterator[Case]:
    """Shrink moves other than dropping requests: whole-case simplifications first (each one
    check, and what makes a large reproducer readable), then per-request shortening."""
    reqs = _requests(case)
    s = case.scalars
    if case.launch.get("block_size_tokens") is not None or case.launch.get("num_blocks") is not None:
        yield _rebuild(case, reqs, launch={"block_size_tokens": None, "num_blocks": None})
    if case.launch.get("num_blocks") is not None:
        yield case.replace(launch={"num_blocks": None})
    if sum(1 for q in reqs if q["rejected"]) > 1:
        yield _rebuild(case, [{**q, "rejected": 0} for q in reqs])
    tokens = np.concatenate([q["tokens"] for q in reqs])
    T = len(tokens)  # = total_input_tokens in the production tier
    for plain in (np.zeros(T, np.int32), np.ones(T, np.int32), np.arange(1, T + 1, dtype=np.int32)):
        if np.array_equal(tokens, plain):
            break  # as plain as the ones before it allow
        yield _rebuild(case, _with_tokens(reqs, plain, [0 if plain[0] == 0 else 1] * len(reqs)))
    for starts in (np.zeros(len(reqs), np.int64), np.array([q["positions"][0] if len(q["positions"]) else 0 for q in reqs], np.int64)):
        consecutive = [{**q, "positions": positions_from_starts(starts[r : r + 1], [len(q["positions"])])}
                       for r, q in enumerate(reqs)]
        if any(not np.array_equal(q["positions"], c["positions"]) for q, c in zip(reqs, consecutive, strict=True)):
            yield _rebuild(case, consecutive)
    simple_p = 2 if s["shift_input_ids"] else 1
    for name, simple in (("shift_input_ids", False), ("padding_token_id", 0), ("parallel_drafting_token_id", 0)):
        if s[name] != simple:
            yield _rebuild(case, reqs, scalars={name: simple})
    for p in shorter(s["num_padding_slots_per_request"]):
        if p >= simple_p:
            yield _rebuild(case, reqs, scalars={"num_padding_slots_per_request": p})
    for r, q in enumerate(reqs):
        n = len(q["tokens"])
        for new_n in shorter(n):
            short = {**q, "tokens": q["tokens"][:new_n], "positions": q["positions"][:new_n]}
            yield _rebuild(case, reqs[:r] + [short] + reqs[r + 1 :])
        if q["rejected"]:
            yield _rebuild(case, reqs[:r] + [{**q, "rejected": 0}] + reqs[r + 1 :])


def _with_tokens(reqs: list[dict[str, Any]], tokens: np.ndarray, nexts: list[int]) -> list[dict[str, Any]]:
    out, lo = [], 0
    for q, nxt in zip(reqs, nexts, strict=True):
        n = len(q["tokens"])
        out.append({**q, "tokens": tokens[lo : lo + n], "next": nxt})
        lo += n
    return out


# -- production extremes: cheap-but-large shapes ---------------------------------------------


def _shape_case(
    rng: np.random.Generator,
    lengths: list[int],
    rejected: list[int],
    *,
    shift: bool,
    P: int,
    p0: np.ndarray,
) -> Case:
    """A case of the given request layout with random ids (half of them past 65535) and
    consecutive positions from ``p0``, launched as vLLM launches it."""
    T, R = int(sum(lengths)), len(lengths)
    return _build(
        lengths,
        rejected,
        shift=shift,
        P=P,
        token_ids=rng.integers(INT32_MIN, INT32_MAX, size=T, endpoint=True, dtype=np.int32),
        positions=positions_from_starts(p0.astype(np.int64), lengths),
        next_ids=rng.integers(0, INT32_MAX, size=R, endpoint=True, dtype=np.int32),
        padding_id=0,
        parallel_id=int(rng.integers(0, 1 << 18)),
        launch={"block_size_tokens": None, "num_blocks": None},
    )


def _wide(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens of 15-32 with parallel drafting (P = K): a few requests of 17-48
    tokens, one with 16+ rejected tokens, positions in the tens of millions."""
    R = int(rng.integers(2, 7))
    lengths = rng.integers(17, 49, size=R).tolist()
    rejected = [int(rng.integers(0, n)) for n in lengths]
    many = int(rng.integers(0, R))
    rejected[many] = int(rng.integers(16, lengths[many]))
    p0 = rng.integers(FLOAT32_EXACT, INT32_MAX, size=R)
    return _shape_case(rng, lengths, rejected, shift=bool(rng.integers(0, 2)), P=int(rng.integers(SPEC_TOKENS, 33)), p0=p0)


def _long_prefill(rng: np.random.Generator, scale: Scale) -> Case:
    """A prefill of 2050-6000 tokens beside a few short requests, positions near the int64 limit."""
    R = int(rng.integers(1, 4))
    lengths = rng.integers(1, 64, size=R).tolist()
    lengths[int(rng.integers(0, R))] = int(rng.integers(2050, 6001))
    rejected = [int(rng.integers(0, min(n, 8))) for n in lengths]
    shift = bool(rng.integers(0, 2))
    p0 = INT64_MAX - rng.integers(0, 8192, size=R)
    return _shape_case(rng, lengths, rejected, shift=shift, P=int(rng.integers(2 if shift else 1, 5)), p0=p0)


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """32k+ tokens in one block per request: 130-180 requests of up to 256 slots, the last
    ones starting past token 32767."""
    shift = bool(rng.integers(0, 2))
    P = int(rng.integers(2 if shift else 1, 5))
    top = 256 - P + int(shift)
    lengths: list[int] = []
    while sum(lengths) <= INT16_MAX + 2 * top:
        lengths.append(int(rng.integers(top // 2, top + 1)))
    rejected = [int(rng.integers(0, min(n, 16))) for n in lengths]
    return _shape_case(rng, lengths, rejected, shift=shift, P=P, p0=rng.integers(0, 1 << 20, size=len(lengths)))


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1100 requests of 1-2 tokens with P = 32-40 (r * P past 32767)."""
    R = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 77))
    lengths = rng.integers(1, 3, size=R).tolist()
    rejected = [int(rng.integers(0, n)) for n in lengths]
    P = int(rng.integers(32, 41))
    p0 = rng.integers(0, 1 << 24, size=R)
    return _shape_case(rng, lengths, rejected, shift=bool(rng.integers(0, 2)), P=P, p0=p0)


SHAPES = (
    Shape("wide", 8, _wide),
    Shape("long_prefill", 72, _long_prefill),
    Shape("huge_offsets", 180, _huge_offsets),
    Shape("many_requests", MAX_NUM_SEQS + 76, _many_requests),
)
CopyAndExpand.shapes = SHAPES
