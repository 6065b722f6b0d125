"""``extend_all_queries_by_N``: docs/CONTRACT.md §4.

A case holds the metadata's arrays (``query_start_loc`` gives both copies, device and CPU),
the function's other arguments (``arange``, ``new_slot_mapping``, ``N``) and the metadata's
scalars. ``check`` builds a ``CommonAttentionMetadata`` (device copies on the run's device
unless ``device_copies_on_device`` is false, CPU copies on the CPU), calls the function, and
compares every field of the result: the changed ones with the oracles (values, dtype, device),
the others with the input as it was; then checks that the input and the arguments were left
alone.

In-contract values never overflow int32: torch adds ``N`` to the int32 ``seq_lens`` and
``i*N`` to the int32 ``query_start_loc`` in int32, and vLLM's token counts stay far below
2**31: the production tier keeps every extended value at most 2**30 (``PRODUCTION_LIMIT``).
Values near and at the int32 limit, and results that wrap, are the extended tier (edges.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.case import Case
from ...core.compare import Difference
from ...generation.shrink_steps import shorter
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
)
from ...targetkit.base import CannotTest, ContractViolation, Outcome, require_arrays
from ...targetkit.pyfunc import (
    CHANGED,
    MUTATED,
    RESULT,
    UNCHANGED,
    PythonFunctionTarget,
    TensorValue,
    diff_value,
    field_names,
    snapshot,
)
from . import edges
from .layout import (
    ALIASES,
    ARRAYS,
    BOOL_SCALARS,
    INT_SCALARS,
    NAME,
    PRODUCTION_LIMIT,
    SLOT_ID_LIMIT,
)

if TYPE_CHECKING:  # imported where a case runs: a process that only reads cases never loads torch
    import torch


def tensor(x: np.ndarray, device: str) -> torch.Tensor:
    import torch

    return torch.from_numpy(np.array(x, copy=True)).to(device)


def build_metadata(case: Case, device: str, cls: type) -> Any:
    """The ``CommonAttentionMetadata`` (of class ``cls``) that ``case`` describes.

    Works for any dataclass with vLLM's field names: fields the case has no value for keep
    their defaults.
    """
    a, s = case.arrays, case.scalars
    dev = device if s["device_copies_on_device"] else "cpu"
    qsl, seq = a["query_start_loc"], a["seq_lens"]
    values: dict[str, Any] = {
        "query_start_loc": tensor(qsl, dev),
        "query_start_loc_cpu": tensor(a.get("query_start_loc_cpu", qsl), "cpu"),
        "seq_lens": tensor(seq, dev),
        "num_reqs": s["num_reqs"],
        "num_actual_tokens": s["num_actual_tokens"],
        "max_query_len": s["max_query_len"],
        "max_seq_len": s["max_seq_len"],
        "block_table_tensor": tensor(a["block_table"], dev),
        "slot_mapping": tensor(a["slot_mapping"], dev),
        "causal": s["causal"],
    }
    if s["optional_fields"]:
        computed = (seq.astype(np.int64) - np.diff(qsl.astype(np.int64))).astype(np.int32)
        values.update(
            logits_indices_padded=tensor((qsl[1:].astype(np.int64) - 1).astype(np.int32), dev),
            num_logits_indices=len(seq),
            encoder_seq_lens=tensor(seq, dev),
            encoder_seq_lens_cpu=seq.copy(),
            dcp_local_seq_lens=tensor(seq, dev),
            dcp_local_seq_lens_cpu=tensor(seq, "cpu"),
            seq_lens_cpu=tensor(seq, "cpu"),
            num_computed_tokens_cpu=tensor(computed, "cpu"),
        )
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = ALIASES.get(f.name, f.name)
        if f.init and key in values:
            kwargs[f.name] = values[key]
    return cls(**kwargs)


class ExtendAllQueries(PythonFunctionTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 4
    parameters = (
        "common_attn_metadata",
        "N",
        "arange",
        "new_slot_mapping",
    )
    array_names = ("query_start_loc", "seq_lens", "block_table", "slot_mapping", "arange", "new_slot_mapping")
    """The metadata's arrays, then the function's own, in its signature's order."""
    features = {
        "one_request": "a single request",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "large_batch": "more than 256 requests",
        "n_one": "N = 1",
        "n_several": "2 <= N <= 64",
        "n_large": "N > 64",
        "exact_arange": "arange exactly len(query_start_loc) long",
        "long_arange": "arange longer than needed (vLLM's persistent buffer)",
        "large_values": "token counts above 2**20",
        "upper_bound_max_seq_len": "max_seq_len above the longest sequence (an upper bound, as vLLM allows)",
        "optional_fields": "the optional fields (CPU caches, encoder, DCP, logits) are set",
        "slot_mapping_resized": "new_slot_mapping is not as long as the old slot mapping",
        "padding_slots": "new_slot_mapping holds padding slots (-1)",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "offsets_past_32767": "query_start_loc past 32767 (max_num_batched_tokens of 32k and more)",
        "seq_lens_past_2_24": "an extended seq_len past 2**24 (long-context max_model_len)",
        "spec_tokens_15_plus": "N >= 15 (num_speculative_tokens >= 15)",
    }
    extremes = ("beyond_1024_requests", "offsets_past_32767", "seq_lens_past_2_24", "spec_tokens_15_plus")

    oracle_functions = {"numpy": "python_functions.extend_all_queries_by_n",
                        "loops": "python_functions.extend_all_queries_by_n_loops"}

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        a, s = case.arrays, case.scalars
        if set(a) - set(ARRAYS):
            raise ContractViolation(f"arrays.{sorted(set(a) - set(ARRAYS))[0]}", "is not an input of this target (production tier)")
        require_arrays(a, ARRAYS)
        for name in INT_SCALARS:
            v = s.get(name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ContractViolation(f"scalars.{name}", "must be a non-negative int")
        for name in BOOL_SCALARS:
            if not isinstance(s.get(name), bool):
                raise ContractViolation(f"scalars.{name}", "must be true or false")
        qsl, seq = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
        B = len(seq)
        if len(qsl) != B + 1:
            raise ContractViolation("arrays.query_start_loc", "must have len(seq_lens) + 1 entries")
        if qsl[0] != 0 or np.any(np.diff(qsl) < 0):
            raise ContractViolation("arrays.query_start_loc", "must start at 0 and never decrease")
        if np.any(seq < 0):
            raise ContractViolation("arrays.seq_lens", "must be non-negative")
        if a["block_table"].shape[0] != B:
            raise ContractViolation("arrays.block_table", "must have one row per request (len(seq_lens))")
        arange = a["arange"]
        if len(arange) < B + 1 or not np.array_equal(arange, np.arange(len(arange), dtype=np.int32)):
            raise ContractViolation("arrays.arange", "must be 0, 1, 2, ... and at least len(query_start_loc) long")
        if s["num_reqs"] > B:
            raise ContractViolation("scalars.num_reqs", "must be at most len(seq_lens)")
        N = s["N"]
        if int((qsl + np.arange(B + 1, dtype=np.int64) * N).max()) > INT32_MAX:
            raise ContractViolation("scalars.N", "query_start_loc[i] + i*N must fit in int32 (torch would wrap)")
        if B and int(seq.max()) + N > INT32_MAX:
            raise ContractViolation("scalars.N", "seq_lens + N must fit in int32 (torch would wrap)")
        self._validate_vllm(case)

    def _validate_vllm(self, case: Case) -> None:
        """What vLLM's call site hands the function beyond the types (docs/CONTRACT.md §4.2):
        the drafter's unpadded metadata of a non-empty batch, ``N >= 1``, values far below 2**31,
        vLLM's block and slot ids."""
        a, s = case.arrays, case.scalars
        qsl, seq = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
        B, N, qlen = len(seq), s["N"], np.diff(qsl)
        if B == 0:
            raise ContractViolation("arrays.seq_lens", "must hold at least one request (vLLM drafts for a non-empty batch)")
        if np.any(qlen < 1):
            raise ContractViolation("arrays.query_start_loc", "must be strictly increasing (every query has a token)")
        if np.any(seq < qlen):
            raise ContractViolation("arrays.seq_lens", "must be at least each request's query length")
        if N < 1:
            raise ContractViolation("scalars.N", "must be at least 1 (P - s of a drafter with extra input slots)")
        if s["num_reqs"] != B:
            raise ContractViolation("scalars.num_reqs", "must equal len(seq_lens) (the drafter's metadata is unpadded)")
        if s["num_actual_tokens"] != int(qsl[-1]):
            raise ContractViolation("scalars.num_actual_tokens", "must equal query_start_loc[-1] (unpadded metadata)")
        if s["max_query_len"] != int(qlen.max()):
            raise ContractViolation("scalars.max_query_len", "must be the longest query (vLLM computes it exactly)")
        if s["max_seq_len"] < int(seq.max()):
            raise ContractViolation("scalars.max_seq_len", "must be at least the longest sequence (an upper bound)")
        top = max(int((qsl + np.arange(B + 1, dtype=np.int64) * N).max()), int(seq.max()) + N)
        if top > PRODUCTION_LIMIT:
            raise ContractViolation("scalars.N", f"every value after extension must be at most 2**30, is {top} "
                                    "(vLLM's token counts are far below 2**31; near the int32 limit is the extended tier)")
        if not s["causal"]:
            raise ContractViolation("scalars.causal", "must be true (the drafter's metadata is causal)")
        if not s["device_copies_on_device"]:
            raise ContractViolation("scalars.device_copies_on_device", "must be true (vLLM's tensors are on the device)")
        if np.any(a["block_table"] < 0):
            raise ContractViolation("arrays.block_table", "must hold block ids >= 0")
        for name in ("slot_mapping", "new_slot_mapping"):
            v = a[name]
            if np.any((v < -1) | (v >= SLOT_ID_LIMIT)):
                raise ContractViolation(f"arrays.{name}", "must hold slot ids below 2**31, or -1 (PADDING_SLOT_ID)")

    # -- features ---------------------------------------------------------------------

    def features_of(self, case: Case) -> frozenset[str]:
        a, s = case.arrays, case.scalars
        qsl, seq = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
        B, N = len(seq), s["N"]
        smax = int(seq.max()) if B else 0  # an extended-tier case may have no request
        f = set()
        if B:
            f.add("one_request" if B == 1 else "several_requests")
        if B > 64:
            f.add("many_requests")
        if B > 256:
            f.add("large_batch")
        if N >= 1:
            f.add("n_one" if N == 1 else "n_several" if N <= 64 else "n_large")
        f.add("exact_arange" if len(a["arange"]) == B + 1 else "long_arange")
        if int(qsl[-1]) > 1 << 20 or smax > 1 << 20:
            f.add("large_values")
        if s["max_seq_len"] > smax:
            f.add("upper_bound_max_seq_len")
        if s["optional_fields"]:
            f.add("optional_fields")
        if len(a["new_slot_mapping"]) != len(a["slot_mapping"]):
            f.add("slot_mapping_resized")
        if np.any(a["new_slot_mapping"] == -1):
            f.add("padding_slots")
        if B > MAX_NUM_SEQS:
            f.add("beyond_1024_requests")
        if int(qsl[-1]) + B * N > INT16_MAX:
            f.add("offsets_past_32767")
        if B and smax + N > FLOAT32_EXACT:
            f.add("seq_lens_past_2_24")
        if N >= SPEC_TOKENS:
            f.add("spec_tokens_15_plus")
        return frozenset(f)

    # -- execution --------------------------------------------------------------------

    def expected(self, case: Case) -> dict[str, dict[str, Any]]:
        """Oracle name -> changed field -> value (arrays for tensors, ints for the counts)."""
        a, s = case.arrays, case.scalars
        args = dict(
            query_start_loc=a["query_start_loc"].copy(),
            seq_lens=a["seq_lens"].copy(),
            num_actual_tokens=s["num_actual_tokens"],
            max_query_len=s["max_query_len"],
            max_seq_len=s["max_seq_len"],
            n=s["N"],
            new_slot_mapping=a["new_slot_mapping"].copy(),
            arange=a["arange"].copy(),
            query_start_loc_cpu=a["query_start_loc_cpu"].copy() if "query_start_loc_cpu" in a else None,
        )
        return {name: oracle(**args) for name, oracle in self.oracles.items()}

    def oracle_check(self, case: Case) -> list[Difference]:
        return _disagreements(self.expected(case))

    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        import torch

        exp = self.expected(case)
        outcome = Outcome(oracle_disagreements=_disagreements(exp))
        versus = " = ".join(exp) + " oracle"
        changed = exp[next(iter(exp))]
        dev = torch.device(device if case.scalars["device_copies_on_device"] else "cpu").type

        cls = self.types.CommonAttentionMetadata
        cad = build_metadata(case, device, cls)
        arange = tensor(case.arrays["arange"], dev)
        new_slot_mapping = tensor(case.arrays["new_slot_mapping"], dev)
        names = field_names(cad)
        refs = {n: getattr(cad, n) for n in names}
        before = {n: snapshot(v) for n, v in refs.items()}
        args_before = {"arange": snapshot(arange), "new_slot_mapping": snapshot(new_slot_mapping)}
        try:
            result = self.call(impl, cad, case.scalars["N"], arange, new_slot_mapping)
            if dev != "cpu":
                torch.cuda.synchronize()
        except CannotTest:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            return outcome.crashed(exc, dev)
        outcome.differences += self._compare(cad, result, changed, dev, versus, before)
        for n in names:
            now = getattr(cad, n)
            if isinstance(refs[n], torch.Tensor | np.ndarray) and now is not refs[n]:
                outcome.differences.append(
                    Difference(n, None, "the same object", "another object", None, f"{MUTATED} (rebound)", "input as given")
                )
            outcome.differences += diff_value(n, before[n], now, region=MUTATED, versus="input as given")
        for n, t in (("arange", arange), ("new_slot_mapping", new_slot_mapping)):
            outcome.differences += diff_value(n, args_before[n], t, region=MUTATED, versus="input as given")
        return outcome

    def _compare(
        self, cad: Any, result: Any, changed: Mapping[str, Any], dev: str, versus: str, before: Mapping[str, Any]
    ) -> list[Difference]:
        """The result's fields against the oracle (changed ones) and the input as given (the rest)."""
        cls = type(cad)
        if type(result) is not cls:
            return [Difference("result", None, cls.__name__, type(result).__name__, None, f"{RESULT} (type)", versus)]
        d = []
        if result is cad:
            d.append(Difference("result", None, "a new object", "the input object", None, RESULT, versus))
        want = {
            "query_start_loc": TensorValue(changed["query_start_loc"], dev),
            "query_start_loc_cpu": TensorValue(changed["query_start_loc_cpu"], "cpu"),
            "seq_lens": TensorValue(changed["seq_lens"], dev),
            "num_actual_tokens": changed["num_actual_tokens"],
            "max_query_len": changed["max_query_len"],
            "max_seq_len": changed["max_seq_len"],
            "slot_mapping": TensorValue(changed["slot_mapping"], dev),
        }
        for n in field_names(result):
            actual = getattr(result, n)
            if n in want:
                d += diff_value(n, want[n], actual, region=CHANGED, versus=versus, per_request=n in _PER_REQUEST)
            else:
                d += diff_value(n, before[n], actual, region=UNCHANGED, versus="input as given")
        return d

    def output_tokens(self, case: Case) -> int:
        a = case.arrays
        B = len(a["seq_lens"])
        changed = 2 * (B + 1) + B + len(a["new_slot_mapping"]) + 3
        unchanged = a["block_table"].size + len(a["slot_mapping"]) + 2 + (7 * B + 1 if case.scalars["optional_fields"] else 0)
        return changed + unchanged

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        a, s = case.arrays, case.scalars
        B = len(a["seq_lens"])
        if B:
            qsl0, seq0 = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
            query_pad = s["max_query_len"] - int(np.diff(qsl0).max())
            seq_pad = s["max_seq_len"] - int(seq0.max())
            for keep in [0, *shorter(B)]:
                qsl = a["query_start_loc"][: keep + 1]
                # the counts and maxima follow the requests kept (their padding, if any, stays)
                yield case.replace(
                    arrays={
                        "query_start_loc": qsl,
                        "seq_lens": a["seq_lens"][:keep],
                        "block_table": a["block_table"][:keep],
                    },
                    scalars={
                        "num_reqs": min(s["num_reqs"], keep),
                        "num_actual_tokens": s["num_actual_tokens"] - int(qsl0[-1]) + int(qsl[-1]),
                        "max_query_len": max(0, (int(np.diff(qsl0[: keep + 1]).max()) if keep else 0) + query_pad),
                        "max_seq_len": max(0, (int(seq0[:keep].max()) if keep else 0) + seq_pad),
                    },
                )
        if B and np.any(np.diff(a["query_start_loc"].astype(np.int64)) != 1):
            # one token per query (a decode batch): query_start_loc reads as an arange
            qsl0 = a["query_start_loc"].astype(np.int64)
            qsl = np.arange(B + 1, dtype=np.int32)
            yield case.replace(
                arrays={"query_start_loc": qsl, "seq_lens": np.maximum(a["seq_lens"], 1).astype(np.int32)},
                scalars={"num_actual_tokens": s["num_actual_tokens"] - int(qsl0[-1]) + B,
                         "max_query_len": s["max_query_len"] - int(np.diff(qsl0).max()) + 1,
                         "max_seq_len": max(s["max_seq_len"], 1)},
            )
        for n in sorted({0, 1, s["N"] // 2} - {s["N"]}):
            yield case.replace(scalars={"N": n})
        if len(a["arange"]) > B + 1:
            yield case.replace(arrays={"arange": a["arange"][: B + 1]})
        for name in ("slot_mapping", "new_slot_mapping"):
            if len(a[name]) > 1:
                yield case.replace(arrays={name: a[name][:1]})
        for name, plain in (("optional_fields", False), ("device_copies_on_device", True), ("causal", True)):
            if s[name] != plain:
                yield case.replace(scalars={name: plain})

    def alike(self, case: Case, k: int) -> Case:
        """``case`` with every request like request ``k`` (its query and sequence length and its
        block-table row); the token count and the maxima follow, their padding kept."""
        a, s = case.arrays, case.scalars
        B = len(a["seq_lens"])
        if B < 2 or not -B <= k < B or "query_start_loc_cpu" in a:
            return case
        qsl0, seq0 = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
        lens = np.diff(qsl0)
        L, S = int(lens[k]), int(seq0[k])
        return case.replace(
            arrays={
                "query_start_loc": (np.arange(B + 1, dtype=np.int64) * L).astype(np.int32),
                "seq_lens": np.full(B, S, dtype=np.int32),
                "block_table": np.broadcast_to(a["block_table"][k], a["block_table"].shape).copy(),
            },
            scalars={
                "num_actual_tokens": max(0, s["num_actual_tokens"] - int(qsl0[-1]) + B * L),
                "max_query_len": max(0, s["max_query_len"] - int(lens.max()) + L),
                "max_seq_len": max(0, s["max_seq_len"] - int(seq0.max()) + S),
            },
        )

    # -- extended tier (docs/CONTRACT.md §4.4): edges.py ----------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, dict(ARRAYS))


_PER_REQUEST = frozenset({"query_start_loc", "query_start_loc_cpu", "seq_lens"})


def _disagreements(exp: Mapping[str, Mapping[str, Any]]) -> list[Difference]:
    names = list(exp)
    out: list[Difference] = []
    for other in names[1:]:
        for field, value in exp[names[0]].items():
            out += diff_value(
                field,
                value,
                exp[other][field],
                region=CHANGED,
                versus=f"{names[0]} oracle vs {other} oracle",
                per_request=field in _PER_REQUEST,
            )
    return out


TARGET = ExtendAllQueries()
