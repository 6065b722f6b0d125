"""``compute_new_slot_mapping``: docs/CONTRACT.md §7.

A case holds the metadata's arrays (``query_start_loc``, ``block_table``, ``seq_lens``, the old
``slot_mapping``), the function's tensors (``new_positions``, ``is_rejected_token_mask``) and
its scalars (``block_size``, ``num_new_tokens``, ``max_model_len``). ``check`` builds a
``CommonAttentionMetadata`` on the run's device (``query_start_loc_cpu`` on the CPU), calls the
function with vLLM's keywords, and compares the result (a tensor: type, device, dtype, shape,
every element) with the oracles; then checks that no input was modified, ``cad`` included.
With ``launch.views`` the tensors are views into longer buffers filled with poison around them
(vLLM passes ``self.positions[:n]`` and rows ``[:R]`` of its persistent block table).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.buffers import Guarded, poison, raw
from ...core.case import Case
from ...core.compare import Difference
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    query_start_loc_from,
)
from ...targetkit.base import ContractViolation, Outcome, numpy_and_numba, require_arrays
from ...targetkit.block_tables import MAX_BLOCK_SIZE, MAX_POSITION, max_block_id
from ...targetkit.pyfunc import (
    MUTATED,
    RESULT,
    PythonFunctionTarget,
    describe,
    diff_value,
    field_names,
    snapshot,
)
from .layout import NAME, Tokens, is_vllm_layout

if TYPE_CHECKING:  # imported where a case runs: a process that only reads cases never loads torch
    import torch

I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)


ARRAYS = {
    "query_start_loc": (I32, 1),
    "block_table": (I32, 2),
    "seq_lens": (I32, 1),
    "slot_mapping": (I64, 1),
    "new_positions": (I64, 1),
    "is_rejected_token_mask": (BOOL, 1),
}


SCALARS = ("block_size", "num_new_tokens", "max_model_len")


TENSORS = ("new_positions", "is_rejected_token_mask")
"""The function's own tensor arguments (the rest of ``ARRAYS`` lives in ``cad``)."""


class NewSlotMapping(PythonFunctionTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    array_names = tuple(ARRAYS)
    section = 7
    parameters = (
        "cad",
        "new_positions",
        "is_rejected_token_mask",
        "block_size",
        "num_new_tokens",
        "max_model_len",
    )
    features = {
        "single_request": "one request",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "n_one": "num_new_tokens = 1 (draft model)",
        "n_several": "num_new_tokens >= 2 (parallel drafting)",
        "vllm_layout": "positions as section 1 writes them: consecutive per request, 0 on rejected slots",
        "rejected_tokens": "some token is rejected (PADDING_SLOT_ID)",
        "last_position": "an unrejected token at position M - 1",
        "block_start": "an unrejected token at the first slot of a block (p % bs == 0, p > 0)",
        "request_spans_blocks": "a request whose unrejected tokens lie in two or more blocks",
        "last_column": "a lookup in the table's last column",
        "wide_table": "a table wider than max_model_len needs (vLLM aligns it to 128 tokens)",
        "block_size_one": "block_size = 1",
        "odd_block_size": "a block size that is not a power of two",
        "slot_near_int32_limit": "a slot id within 2**16 of the int32 limit",
        "views": "the tensors are views into longer buffers (as vLLM passes them)",
        "own_tensors": "the tensors are tensors of their own",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "offsets_past_32767": "query_start_loc past 32767 (max_num_batched_tokens of 32k and more)",
        "prefill_thousands": "a request of 2048 tokens or more (a long prefill)",
        "spec_tokens_15_plus": "num_new_tokens >= 15 (parallel drafting with num_speculative_tokens >= 15)",
        "positions_past_2_24": "an unrejected token in range past 2**24 (max_model_len in the millions)",
        "block_id_past_int16": "a block id looked up past 32767 (KV caches of more than 32k blocks)",
    }
    extremes = ("beyond_1024_requests", "offsets_past_32767", "prefill_thousands", "spec_tokens_15_plus",
                "positions_past_2_24", "block_id_past_int16", "slot_near_int32_limit")

    oracle_functions = numpy_and_numba("compute_new_slot_mapping")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        """The production tier (docs/CONTRACT.md §7.2): :meth:`extended_rules`'s rules, at least
        one request of at least one token, ``N >= 1``, positions in section 1's layout and every
        live position below max_model_len (vLLM's drafter gate)."""
        self.extended_rules(case)
        a, s = case.arrays, case.scalars
        R = a["block_table"].shape[0]
        if R < 1:
            raise ContractViolation("arrays.block_table", "needs at least one request")
        if s["num_new_tokens"] < 1:
            raise ContractViolation("scalars.num_new_tokens", "must be >= 1 (vLLM's net_num_new_slots_per_request)")
        if np.any(np.diff(a["query_start_loc"].astype(np.int64)) < 1):
            raise ContractViolation("arrays.query_start_loc", "every request has at least one token")
        t = Tokens(case)
        if not is_vllm_layout(t):
            raise ContractViolation("arrays.new_positions", "must be in section 1's layout: consecutive per request, 0 on the rejected tail")
        if np.any(~t.rejected & t.past):
            raise ContractViolation("arrays.new_positions", "every unrejected position is below max_model_len (vLLM's drafter gate)")

    def extended_rules(self, case: Case) -> None:
        """The extended tier's rules (docs/CONTRACT.md §7.4)."""
        a, s = case.arrays, case.scalars
        require_arrays(a, ARRAYS)
        for name in SCALARS:
            v = s.get(name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ContractViolation(f"scalars.{name}", "must be an int")
        if not isinstance(case.launch.get("views"), bool):
            raise ContractViolation("launch.views", "must be true or false")
        R, nb = a["block_table"].shape
        bs, N, M = s["block_size"], s["num_new_tokens"], s["max_model_len"]
        if not 1 <= bs <= MAX_BLOCK_SIZE:
            raise ContractViolation("scalars.block_size", f"must be from 1 to {MAX_BLOCK_SIZE}")
        if not 0 <= N <= 64:
            raise ContractViolation("scalars.num_new_tokens", "must be from 0 to 64")
        if not 1 <= M <= INT32_MAX:
            raise ContractViolation("scalars.max_model_len", "must be from 1 to 2**31 - 1")
        if nb < 1 or nb * bs < M:
            raise ContractViolation("arrays.block_table", "needs n_blocks * block_size >= max_model_len (vLLM's table width)")
        qsl = a["query_start_loc"].astype(np.int64)
        if len(qsl) != R + 1 or qsl[0] != 0 or np.any(np.diff(qsl) < 0):
            raise ContractViolation("arrays.query_start_loc", "must have one entry per block-table row plus one, start at 0, never decrease")
        if len(a["seq_lens"]) != R:
            raise ContractViolation("arrays.seq_lens", "needs one entry per request")
        L = int(qsl[-1]) + R * N
        if len(a["new_positions"]) != L or len(a["is_rejected_token_mask"]) != L:
            raise ContractViolation("arrays.new_positions", "new_positions and is_rejected_token_mask need sum(qlen + num_new_tokens) entries")
        pos = a["new_positions"]
        if np.any(pos < 0) or np.any(pos > MAX_POSITION):
            raise ContractViolation("arrays.new_positions", "must be from 0 to 2**40")
        if np.any(a["block_table"] < 0) or np.any(a["block_table"].astype(np.int64) > max_block_id(bs)):
            raise ContractViolation("arrays.block_table", "block ids must be >= 0 with slots within int32")

    def features_of(self, case: Case) -> frozenset[str]:
        t = Tokens(case)
        lens = np.diff(case.arrays["query_start_loc"].astype(np.int64))
        vllm = is_vllm_layout(t)
        slots = _slots(case, t)
        spans = False
        if t.live.any():
            lo = np.full(t.R, np.iinfo(np.int64).max)
            hi = np.full(t.R, -1)
            np.minimum.at(lo, t.owner[t.live], t.col[t.live])
            np.maximum.at(hi, t.owner[t.live], t.col[t.live])
            spans = bool(np.any(hi > lo))
        checks = {
            "single_request": t.R == 1,
            "several_requests": t.R > 1,
            "many_requests": t.R > 64,
            "n_one": t.N == 1,
            "n_several": t.N >= 2,
            "vllm_layout": t.R > 0 and vllm,
            "rejected_tokens": t.rejected.any(),
            "last_position": np.any(t.live & (t.pos == t.M - 1)),
            "block_start": np.any(t.live & (t.pos > 0) & (t.pos % t.bs == 0)),
            "request_spans_blocks": spans,
            "last_column": np.any(t.col == t.nb - 1),
            "wide_table": t.nb * t.bs - t.M >= t.bs,
            "block_size_one": t.bs == 1,
            "odd_block_size": t.bs & (t.bs - 1) != 0,
            "slot_near_int32_limit": np.any(t.live & (slots > INT32_MAX - (1 << 16))),
            "beyond_1024_requests": t.R > MAX_NUM_SEQS,
            "offsets_past_32767": int(case.arrays["query_start_loc"][-1]) > INT16_MAX,
            "prefill_thousands": int(lens.max(initial=0)) >= 2048,
            "spec_tokens_15_plus": t.N >= SPEC_TOKENS,
            "positions_past_2_24": np.any(t.live & (t.pos > FLOAT32_EXACT)),
            "block_id_past_int16": np.any(t.live & (slots // t.bs > INT16_MAX)),
            "views": bool(case.launch["views"]),
            "own_tensors": not case.launch["views"],
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- extended tier (docs/CONTRACT.md §7.4): edges.py ----------------------------------


    # -- running ----------------------------------------------------------------------

    def expected(self, case: Case) -> dict[str, np.ndarray]:
        """Per oracle, the result it computes from copies of the case's arrays."""
        a, s = case.arrays, case.scalars
        return {
            name: oracle(
                query_start_loc=a["query_start_loc"].copy(),
                block_table=a["block_table"].copy(),
                new_positions=a["new_positions"].copy(),
                is_rejected_token_mask=a["is_rejected_token_mask"].copy(),
                block_size=s["block_size"],
                num_new_tokens=s["num_new_tokens"],
                max_model_len=s["max_model_len"],
            )
            for name, oracle in self.oracles.items()
        }

    def oracle_check(self, case: Case) -> list[Difference]:
        return self._disagreements(case, self.expected(case))

    def _disagreements(self, case: Case, exp: Mapping[str, np.ndarray]) -> list[Difference]:
        names = list(exp)
        out: list[Difference] = []
        for other in names[1:]:
            out += self._diff(case, exp[names[0]], exp[other], f"{names[0]} oracle vs {other} oracle")
        return out

    def _diff(self, case: Case, expected: np.ndarray, actual: np.ndarray, versus: str) -> list[Difference]:
        if expected.dtype != actual.dtype:
            return [Difference("result", None, str(expected.dtype), str(actual.dtype), None, f"{RESULT} (dtype)", versus)]
        if expected.shape != actual.shape:
            return [Difference("result", None, expected.shape, actual.shape, None, f"{RESULT} (shape)", versus)]
        t = Tokens(case)
        return [
            Difference("result", i, expected[i].item(), actual[i].item(), int(t.owner[i]), _region(t, i), versus)
            for i in np.flatnonzero(expected != actual).tolist()
        ]

    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        import torch

        exp = self.expected(case)
        outcome = Outcome(oracle_disagreements=self._disagreements(case, exp))
        versus = " = ".join(exp) + " oracle"
        want = exp[next(iter(exp))]
        a, s = case.arrays, case.scalars
        views = bool(case.launch["views"])
        guarded = {n: Guarded(a[n].dtype, a[n].shape, device, poison(a[n].dtype), content=a[n]) for n in ARRAYS} if views else {}

        def tensor(name: str) -> torch.Tensor:
            return guarded[name].view if views else torch.from_numpy(a[name].copy()).to(device)

        cad = build_metadata(case, tensor, self.types.CommonAttentionMetadata)
        args = {n: tensor(n) for n in TENSORS}
        names = field_names(cad)
        refs = {n: getattr(cad, n) for n in names}
        before = {n: snapshot(v) for n, v in refs.items()} | {n: snapshot(v) for n, v in args.items()}
        try:
            result = self.invoke(impl, cad, args, s)
            if device != "cpu":
                torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            return outcome.crashed(exc, device)
        if not isinstance(result, torch.Tensor):
            outcome.differences.append(Difference("result", None, "a tensor", describe(result), None, f"{RESULT} (type)", versus))
        elif result.device.type != torch.device(device).type:
            outcome.differences.append(
                Difference("result", None, torch.device(device).type, result.device.type, None, f"{RESULT} (device)", versus)
            )
        else:
            outcome.differences += self._diff(case, want, result.detach().cpu().numpy(), versus)
        for n in names:
            now = getattr(cad, n)
            if isinstance(refs[n], torch.Tensor) and now is not refs[n]:
                outcome.differences.append(
                    Difference(n, None, "the same object", "another object", None, f"{MUTATED} (rebound)", "input as given")
                )
        for n in refs:
            outcome.differences += diff_value(n, before[n], getattr(cad, n), region=MUTATED, versus="input as given")
        for n, v in args.items():
            outcome.differences += diff_value(n, before[n], v, region=MUTATED, versus="input as given")
        for n, g in guarded.items():  # nothing written around the views either
            for i in np.flatnonzero(raw(g.read()) != raw(g.initial)).tolist():
                if not g.guard <= i < g.guard + a[n].size:
                    outcome.differences.append(
                        Difference(n, i - g.guard, "untouched", "written", None, "guard band around the view", "input as given")
                    )
        return outcome

    @staticmethod
    def invoke(impl: Any, cad: Any, tensors: Mapping[str, Any], scalars: Mapping[str, int]) -> Any:
        """``impl`` called as vLLM calls it (keywords): ``cad``, the function's own tensors of
        ``tensors`` and the case's ``scalars`` (the check's call, and the device mode's)."""
        return impl(
            cad=cad, **{n: tensors[n] for n in TENSORS}, block_size=scalars["block_size"],
            num_new_tokens=scalars["num_new_tokens"], max_model_len=scalars["max_model_len"],
        )  # fmt: skip

    def output_tokens(self, case: Case) -> int:
        a = case.arrays
        return len(a["new_positions"]) + sum(a[n].size for n in ARRAYS)

    def alike(self, case: Case, k: int) -> Case:
        R = case.arrays["block_table"].shape[0]
        return case if R < 2 or not -R <= k < R else _keep(case, [k % R] * R)

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        a = case.arrays
        R = a["block_table"].shape[0]

        def keep(rows: list[int]) -> Case:
            return _keep(case, rows)

        every = list(range(R))
        if R > 1:
            yield keep(every[: R // 2])
            yield keep(every[R // 2 :])
            for r in every:
                yield keep(every[:r] + every[r + 1 :])
        if case.launch["views"]:
            yield case.replace(launch={"views": False})
        small = a["block_table"] % 1000
        if not np.array_equal(small, a["block_table"]):
            yield case.replace(arrays={"block_table": small.astype(np.int32)})
        if a["is_rejected_token_mask"].any():
            yield case.replace(arrays={"is_rejected_token_mask": np.zeros_like(a["is_rejected_token_mask"])})


def _keep(case: Case, rows: list[int]) -> Case:
    """``case`` with the requests ``rows`` (in that order; one may repeat)."""
    a = case.arrays
    t = Tokens(case)
    starts = np.concatenate([[0], np.cumsum(t.counts)])
    tok = np.concatenate([np.arange(starts[r], starts[r + 1]) for r in rows]) if rows else np.zeros(0, np.int64)
    lens = [int(t.qlen[r]) for r in rows]
    old = a["slot_mapping"]
    return case.replace(arrays={
        "query_start_loc": query_start_loc_from(lens) if rows else np.zeros(1, np.int32),
        "block_table": a["block_table"][rows],
        "seq_lens": a["seq_lens"][rows],
        "slot_mapping": old[: sum(lens)] if len(old) >= sum(lens) else np.resize(old, sum(lens)),
        "new_positions": a["new_positions"][tok],
        "is_rejected_token_mask": a["is_rejected_token_mask"][tok],
    })  # fmt: skip


def build_metadata(case: Case, tensor: Any, cls: type) -> Any:
    """The ``CommonAttentionMetadata`` (of class ``cls``, any dataclass with vLLM's field names)
    that ``case`` describes; ``tensor(name)`` makes the device tensor of an array. Fields the
    case has no value for keep their defaults."""
    a = case.arrays
    return metadata(tensor, a["query_start_loc"], len(a["seq_lens"]), int(a["seq_lens"].max(initial=0)), cls)


def metadata(tensor: Any, qsl: np.ndarray, num_reqs: int, max_seq_len: int, cls: type) -> Any:
    """The ``CommonAttentionMetadata`` of :func:`build_metadata` from what the host knows of a
    case: ``tensor(name)`` its device tensors, ``qsl`` its ``query_start_loc`` (host), its
    requests (``len(seq_lens)``) and the largest of its ``seq_lens``."""
    import torch

    values: dict[str, Any] = {
        "query_start_loc": tensor("query_start_loc"),
        "query_start_loc_cpu": torch.from_numpy(qsl.copy()),
        "seq_lens": tensor("seq_lens"),
        "num_reqs": num_reqs,
        "num_actual_tokens": int(qsl[-1]),
        "max_query_len": int(np.diff(qsl.astype(np.int64)).max(initial=0)),
        "max_seq_len": max_seq_len,
        "block_table_tensor": tensor("block_table"),
        "slot_mapping": tensor("slot_mapping"),
        "causal": True,
    }
    kwargs = {f.name: values[f.name] for f in dataclasses.fields(cls) if f.init and f.name in values}
    return cls(**kwargs)


def _region(t: Tokens, i: int) -> str:
    if t.rejected[i]:
        return "rejected token"
    if t.past[i]:
        return f"token at position {int(t.pos[i])} >= max_model_len"
    return f"token at position {int(t.pos[i])}, block column {int(t.col[i])}"


def _slots(case: Case, t: Tokens) -> np.ndarray:
    flat = case.arrays["block_table"].reshape(-1).astype(np.int64)
    q = np.minimum(t.pos, t.M - 1)
    return flat[t.owner * t.nb + q // t.bs] * t.bs + q % t.bs if t.owner.size else np.zeros(0, np.int64)


TARGET = NewSlotMapping()
