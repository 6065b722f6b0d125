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
2**31; ``validate`` rejects a case whose results would wrap. Cases whose results come within
2**16 of the limit (feature ``near_int32_limit``) are generated on purpose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from hypothesis import strategies as st

from ..core.case import Case
from ..core.compare import Difference
from ..generation.shrink_steps import shorter
from ..generation.strategies import (
    FLOAT32_EXACT,
    INT16_MAX,
    INT32_MAX,
    INT32_MIN,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    Scale,
    Shape,
    draw_shape,
    query_lengths,
    query_start_loc_from,
    random_shape,
)
from ..targetkit.base import ContractViolation, EdgesInModule, Outcome, require_arrays
from ..targetkit.pyfunc import (
    CHANGED,
    MUTATED,
    RESULT,
    UNCHANGED,
    PythonFunctionTarget,
    StandInGap,
    TensorValue,
    diff_value,
    field_names,
    snapshot,
)
from . import extend_all_queries_edges as edges

if TYPE_CHECKING:  # imported where a case runs: a process that only reads cases never loads torch
    import torch

I32, I64 = np.dtype(np.int32), np.dtype(np.int64)
MAX_BATCH = 512
SLOT_CAP = 256
"""Longest slot mapping a case stores: the function only passes it through, so its length is
free; capping it keeps cases (and their reproducers) small."""
NEAR_LIMIT = 1 << 16

ARRAYS = {
    "query_start_loc": (I32, 1),
    "seq_lens": (I32, 1),
    "block_table": (I32, 2),
    "slot_mapping": (I64, 1),
    "new_slot_mapping": (I64, 1),
    "arange": (I32, 1),
}
INT_SCALARS = ("N", "num_reqs", "num_actual_tokens", "max_query_len", "max_seq_len")
BOOL_SCALARS = ("causal", "optional_fields", "device_copies_on_device")

ALIASES = {"_seq_lens_cpu": "seq_lens_cpu", "_num_computed_tokens_cpu": "num_computed_tokens_cpu"}
"""vLLM's newer field names for the CPU caches -> ours."""


def _tensor(x: np.ndarray, device: str) -> torch.Tensor:
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
        "query_start_loc": _tensor(qsl, dev),
        "query_start_loc_cpu": _tensor(a.get("query_start_loc_cpu", qsl), "cpu"),
        "seq_lens": _tensor(seq, dev),
        "num_reqs": s["num_reqs"],
        "num_actual_tokens": s["num_actual_tokens"],
        "max_query_len": s["max_query_len"],
        "max_seq_len": s["max_seq_len"],
        "block_table_tensor": _tensor(a["block_table"], dev),
        "slot_mapping": _tensor(a["slot_mapping"], dev),
        "causal": s["causal"],
    }
    if s["optional_fields"]:
        computed = (seq.astype(np.int64) - np.diff(qsl.astype(np.int64))).astype(np.int32)
        values.update(
            logits_indices_padded=_tensor((qsl[1:].astype(np.int64) - 1).astype(np.int32), dev),
            num_logits_indices=len(seq),
            encoder_seq_lens=_tensor(seq, dev),
            encoder_seq_lens_cpu=seq.copy(),
            dcp_local_seq_lens=_tensor(seq, dev),
            dcp_local_seq_lens_cpu=_tensor(seq, "cpu"),
            seq_lens_cpu=_tensor(seq, "cpu"),
            num_computed_tokens_cpu=_tensor(computed, "cpu"),
        )
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = ALIASES.get(f.name, f.name)
        if f.init and key in values:
            kwargs[f.name] = values[key]
    return cls(**kwargs)


class ExtendAllQueries(EdgesInModule, PythonFunctionTarget):
    name = "extend_all_queries_by_N"
    parameters = (
        "common_attn_metadata",
        "N",
        "arange",
        "new_slot_mapping",
    )
    features = {
        "empty_batch": "no request at all (query_start_loc = [0])",
        "one_request": "a single request",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "large_batch": "more than 256 requests",
        "n_zero": "N = 0 (nothing added; outside vLLM's use, defined by the contract)",
        "n_one": "N = 1",
        "n_several": "2 <= N <= 64",
        "n_large": "N > 64",
        "padded_batch": "num_reqs < len(seq_lens): batch_size() is not num_reqs",
        "empty_query": "some request has no query token (query_start_loc repeats)",
        "exact_arange": "arange exactly len(query_start_loc) long",
        "long_arange": "arange longer than needed (vLLM's persistent buffer)",
        "near_int32_limit": "some extended int32 value within 2**16 of INT32_MAX",
        "at_int32_limit": "some extended int32 value equal to INT32_MAX",
        "large_values": "token counts above 2**20",
        "upper_bound_maxima": "max_query_len / max_seq_len above the true maxima (upper bounds)",
        "optional_fields": "the optional fields (CPU caches, encoder, DCP, logits) are set",
        "non_causal": "causal = False",
        "device_copies_on_cpu": "the 'device' copies live on the CPU",
        "slot_mapping_resized": "new_slot_mapping is not as long as the old slot mapping",
        "padding_slots": "new_slot_mapping holds padding slots (-1)",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "offsets_past_32767": "query_start_loc past 32767 (max_num_batched_tokens of 32k and more)",
        "seq_lens_past_2_24": "an extended seq_len past 2**24 (long-context max_model_len)",
        "spec_tokens_15_plus": "N >= 15 (num_speculative_tokens >= 15)",
    }
    extremes = ("beyond_1024_requests", "offsets_past_32767", "seq_lens_past_2_24", "spec_tokens_15_plus",
                "at_int32_limit")

    @property
    def oracles(self) -> Mapping[str, Any]:
        from ...oracles import python_functions as pf

        return {"numpy": pf.extend_all_queries_by_n, "loops": pf.extend_all_queries_by_n_loops}

    # -- generation -------------------------------------------------------------------

    def strategy(self, scale: Scale) -> st.SearchStrategy[Case]:
        return _cases(scale)

    def random_case(self, rng: np.random.Generator, scale: Scale) -> Case:
        extreme = random_shape(rng, self.shapes, scale)
        if extreme is not None:
            return extreme
        R = int(rng.choice([rng.integers(0, 9), rng.integers(0, scale.max_requests + 1), rng.integers(0, MAX_BATCH + 1)]))
        regime = str(rng.choice(["small", "large", "near_limit"], p=[0.6, 0.2, 0.2]))
        if regime == "large":
            lengths = rng.integers(0, 1 << 20, size=R, endpoint=True).tolist()
            context = rng.integers(0, 1 << 24, size=R, endpoint=True).tolist()
            N = int(rng.integers(0, 1 << 16, endpoint=True))
        else:
            cap = int(rng.choice([4, 16, 64, scale.max_query_len]))
            lengths = rng.integers(0, cap, size=R, endpoint=True).tolist()
            context = rng.integers(0, 4096, size=R, endpoint=True).tolist()
            N = int(rng.choice([rng.integers(0, 9), rng.integers(0, 65), rng.integers(0, 1 << 16, endpoint=True)]))
        seq = [q + c for q, c in zip(lengths, context, strict=True)]
        if regime == "near_limit" and R:
            r = int(rng.integers(0, R))
            slack = [0 if rng.random() < 0.3 else int(rng.integers(1, 4097)) for _ in range(2)]
            lengths[r] += max(0, INT32_MAX - slack[0] - R * N - sum(lengths))
            seq[int(rng.integers(0, R))] = INT32_MAX - N - slack[1]
        pick = rng.random(5)
        return _build(
            lengths,
            seq,
            N=N,
            num_reqs=R if pick[0] < 0.7 else int(rng.integers(0, R + 1)),
            token_pad=0 if pick[1] < 0.6 else int(rng.integers(1, 65)),
            query_len_pad=0 if pick[2] < 0.7 else int(rng.integers(1, 17)),
            seq_len_pad=0 if pick[3] < 0.7 else int(rng.integers(1, 17)),
            arange_extra=0 if pick[4] < 0.2 else int(rng.integers(1, 65)),
            width=int(rng.integers(1, 9)),
            seed=int(rng.integers(0, 1 << 32)),
            causal=bool(rng.random() < 0.8),
            optional_fields=bool(rng.random() < 0.5),
            on_device=bool(rng.random() < 0.8),
        )

    # -- contract ---------------------------------------------------------------------

    def validate(self, case: Case, tier: str = "production") -> None:
        if tier == "extended":
            return self.validate_extended(case)
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

    # -- features ---------------------------------------------------------------------

    def features_of(self, case: Case) -> frozenset[str]:
        a, s = case.arrays, case.scalars
        qsl, seq = a["query_start_loc"].astype(np.int64), a["seq_lens"].astype(np.int64)
        B, N = len(seq), s["N"]
        f = set()
        f.add("empty_batch" if B == 0 else "one_request" if B == 1 else "several_requests")
        if B > 64:
            f.add("many_requests")
        if B > 256:
            f.add("large_batch")
        f.add("n_zero" if N == 0 else "n_one" if N == 1 else "n_several" if N <= 64 else "n_large")
        if s["num_reqs"] < B:
            f.add("padded_batch")
        if np.any(np.diff(qsl) == 0):
            f.add("empty_query")
        f.add("exact_arange" if len(a["arange"]) == B + 1 else "long_arange")
        top = max(int((qsl + np.arange(B + 1) * N).max()), int(seq.max()) + N if B else 0)
        if top >= INT32_MAX - NEAR_LIMIT:
            f.add("near_int32_limit")
        if top == INT32_MAX:
            f.add("at_int32_limit")
        if int(qsl[-1]) > 1 << 20 or (B and int(seq.max()) > 1 << 20):
            f.add("large_values")
        qlen = np.diff(qsl)
        if s["max_query_len"] > (int(qlen.max()) if B else 0) or s["max_seq_len"] > (int(seq.max()) if B else 0):
            f.add("upper_bound_maxima")
        if s["optional_fields"]:
            f.add("optional_fields")
        if not s["causal"]:
            f.add("non_causal")
        if not s["device_copies_on_device"]:
            f.add("device_copies_on_cpu")
        if len(a["new_slot_mapping"]) != len(a["slot_mapping"]):
            f.add("slot_mapping_resized")
        if np.any(a["new_slot_mapping"] == -1):
            f.add("padding_slots")
        if B > MAX_NUM_SEQS:
            f.add("beyond_1024_requests")
        if int(qsl[-1]) + B * N > INT16_MAX:
            f.add("offsets_past_32767")
        if B and int(seq.max()) + N > FLOAT32_EXACT:
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
        arange = _tensor(case.arrays["arange"], dev)
        new_slot_mapping = _tensor(case.arrays["new_slot_mapping"], dev)
        names = field_names(cad)
        refs = {n: getattr(cad, n) for n in names}
        before = {n: snapshot(v) for n, v in refs.items()}
        args_before = {"arange": snapshot(arange), "new_slot_mapping": snapshot(new_slot_mapping)}
        try:
            result = self.call(impl, cad, case.scalars["N"], arange, new_slot_mapping)
            if dev != "cpu":
                torch.cuda.synchronize()
        except StandInGap:
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
            for keep in [0, *shorter(B)]:
                qsl = a["query_start_loc"][: keep + 1]
                yield case.replace(
                    arrays={
                        "query_start_loc": qsl,
                        "seq_lens": a["seq_lens"][:keep],
                        "block_table": a["block_table"][:keep],
                    },
                    scalars={"num_reqs": min(s["num_reqs"], keep)},
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

    # -- extended tier (docs/CONTRACT.md §4.4): extend_all_queries_edges.py ----------

    edges = edges
    edge_dtypes = ARRAYS


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


def _slots(rng: np.random.Generator, n: int) -> np.ndarray:
    out = rng.integers(0, 1 << 40, size=n, dtype=np.int64)
    out[rng.random(n) < 0.1] = -1
    return out


def _build(
    lengths: list[int],
    seq: list[int],
    *,
    N: int,
    num_reqs: int,
    token_pad: int,
    query_len_pad: int,
    seq_len_pad: int,
    arange_extra: int,
    width: int,
    seed: int,
    causal: bool,
    optional_fields: bool,
    on_device: bool,
) -> Case:
    R = len(lengths)
    qsl = query_start_loc_from(lengths) if R else np.zeros(1, dtype=np.int32)
    tokens = int(qsl[-1]) + token_pad
    rng = np.random.default_rng(seed)
    return Case(
        kernel=ExtendAllQueries.name,
        arrays={
            "query_start_loc": qsl,
            "seq_lens": np.asarray(seq, dtype=np.int64).astype(np.int32).reshape(R),
            "block_table": rng.integers(INT32_MIN, INT32_MAX, size=(R, width), endpoint=True, dtype=np.int32),
            "slot_mapping": _slots(rng, min(tokens, SLOT_CAP)),
            "new_slot_mapping": _slots(rng, min(tokens + R * N, SLOT_CAP)),
            "arange": np.arange(R + 1 + arange_extra, dtype=np.int32),
        },
        scalars={
            "N": int(N),
            "num_reqs": int(num_reqs),
            "num_actual_tokens": tokens,
            "max_query_len": max(lengths, default=0) + query_len_pad,
            "max_seq_len": max(seq, default=0) + seq_len_pad,
            "causal": bool(causal),
            "optional_fields": bool(optional_fields),
            "device_copies_on_device": bool(on_device),
        },
    )


def _batch_sizes(scale: Scale) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(0, 8), st.integers(0, scale.max_requests), st.integers(0, MAX_BATCH))


@st.composite
def _cases(draw: st.DrawFn, scale: Scale) -> Case:
    extreme = draw(draw_shape(SHAPES, scale))
    if extreme is not None:
        return extreme
    R = draw(_batch_sizes(scale))
    regime = draw(st.sampled_from(["small", "large", "near_limit"]))
    if regime == "large":
        lengths = draw(st.lists(st.integers(0, 1 << 20), min_size=R, max_size=R))
        context = draw(st.lists(st.integers(0, 1 << 24), min_size=R, max_size=R))
        N = draw(st.integers(0, 1 << 16))
    else:
        lengths = draw(query_lengths(R, scale, min_len=0)) if R else []
        context = draw(st.lists(st.integers(0, 4096), min_size=R, max_size=R))
        N = draw(st.one_of(st.integers(0, 8), st.integers(0, 64), st.integers(0, 1 << 16)))
    seq = [q + c for q, c in zip(lengths, context, strict=True)]
    if regime == "near_limit" and R:
        # Stretch one request so that the last extended start lands just below INT32_MAX (the
        # extended starts never decrease, so none passes it), and put one seq_len there too.
        slack = draw(st.integers(0, 4096))
        r = draw(st.integers(0, R - 1))
        lengths[r] += max(0, INT32_MAX - slack - R * N - sum(lengths))
        seq[draw(st.integers(0, R - 1))] = INT32_MAX - N - draw(st.integers(0, 4096))
    return _build(
        lengths,
        seq,
        N=N,
        num_reqs=draw(st.just(R) | st.integers(0, R)),
        token_pad=draw(st.just(0) | st.integers(1, 64)),
        query_len_pad=draw(st.just(0) | st.integers(1, 16)),
        seq_len_pad=draw(st.just(0) | st.integers(1, 16)),
        arange_extra=draw(st.integers(0, 64)),
        width=draw(st.integers(1, 8)),
        seed=draw(st.integers(0, (1 << 32) - 1)),
        causal=draw(st.sampled_from([True, False])),
        optional_fields=draw(st.booleans()),
        on_device=draw(st.sampled_from([True, False])),
    )


def _shape(rng: np.random.Generator, lengths: list[int], seq: list[int], N: int) -> Case:
    R = len(lengths)
    return _build(
        lengths, seq, N=N, num_reqs=R, token_pad=0, query_len_pad=0, seq_len_pad=0,
        arange_extra=int(rng.integers(0, 65)), width=int(rng.integers(1, 9)), seed=int(rng.integers(0, 1 << 32)),
        causal=True, optional_fields=bool(rng.random() < 0.5), on_device=True,
    )


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1300 decode-sized requests, N = 15-32."""
    R = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 277))
    lengths = rng.integers(1, 17, size=R).tolist()
    seq = [q + int(c) for q, c in zip(lengths, rng.integers(0, 1 << 16, size=R), strict=True)]
    return _shape(rng, lengths, seq, int(rng.integers(SPEC_TOKENS, 33)))


def _huge_offsets(rng: np.random.Generator, scale: Scale) -> Case:
    """A few long prefills (offsets past 32767) with contexts past 2**24, N = 15-64."""
    R = int(rng.integers(2, 9))
    lengths = rng.integers(INT16_MAX // 2, 1 << 16, size=R).tolist()
    seq = [q + int(c) for q, c in zip(lengths, rng.integers(FLOAT32_EXACT, 1 << 26, size=R), strict=True)]
    return _shape(rng, lengths, seq, int(rng.integers(SPEC_TOKENS, 65)))


def _int32_limits(rng: np.random.Generator, scale: Scale) -> Case:
    """Extended values exactly at INT32_MAX: the last start and one seq_len."""
    R = int(rng.integers(1, 9))
    N = int(rng.integers(SPEC_TOKENS, 65))
    lengths = rng.integers(0, 64, size=R).tolist()
    lengths[int(rng.integers(0, R))] += INT32_MAX - R * N - sum(lengths)
    seq = [q + int(c) for q, c in zip(lengths, rng.integers(0, 4096, size=R), strict=True)]
    seq = [min(x, INT32_MAX - N) for x in seq]
    seq[int(rng.integers(0, R))] = INT32_MAX - N
    return _shape(rng, lengths, seq, N)


SHAPES = (
    Shape("int32_limits", 1, _int32_limits),
    Shape("huge_offsets", 1, _huge_offsets),
    Shape("many_requests", 1, _many_requests),
)
ExtendAllQueries.shapes = SHAPES

TARGET = ExtendAllQueries()
