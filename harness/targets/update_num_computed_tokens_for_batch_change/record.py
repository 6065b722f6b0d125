"""``update_num_computed_tokens_for_batch_change``: docs/CONTRACT.md §8.

vLLM defines it under ``@torch.compile(dynamic=True, backend="inductor")``; a case says how it
runs (``launch.mode``): ``eager`` calls the undecorated function (``_torchdynamo_orig_callable``,
else ``__wrapped__``), ``compiled`` the function as the source defines it (for an undecorated
implementation both are the same call). Every report names the mode, and the case's features
hold ``eager`` or ``compiled``.

Each tensor is a view into a buffer of poison with 64 elements before it and ``max(64, n)``
after: the updates must land in ``num_computed_tokens[:n]`` and ``num_accepted_tokens`` and
nowhere else. The offset before is the same for every tensor and every case, so that dynamo
does not compile again for a new storage offset; the generators keep compiled cases to one
graph as well (every size >= 2: a size of 1 is a specialization of its own, left to the eager
runs), since one inductor compile takes tens of seconds on a CPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ...core.buffers import GUARD, filled, guard_for, poison, raw
from ...core.case import Case
from ...core.compare import Difference
from ...generation.strategies import (
    FLOAT32_EXACT,
    INT32_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
)
from ...targetkit.base import ContractViolation, Outcome, numpy_and_numba, require_arrays
from ...targetkit.pyfunc import PythonFunctionTarget
from .layout import ARRAYS, INOUT, MAX_COUNT, MAX_DRAFTS, MODES, NAME, Rows


def variants(impl: Any) -> dict[str, Any]:
    """The two ways to run ``impl``: undecorated (eager) and as given (compiled)."""
    orig = getattr(impl, "_torchdynamo_orig_callable", None) or getattr(impl, "__wrapped__", None)
    return {"eager": orig if callable(orig) else impl, "compiled": impl}


class BatchChange(PythonFunctionTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    array_names = tuple(ARRAYS)
    section = 8
    parameters = tuple(ARRAYS)
    features = {
        "eager": "the undecorated function (eager torch)",
        "compiled": "the function as vLLM defines it, under torch.compile",
        "single_request": "one request (n = 1: a specialization of its own when compiled)",
        "several_requests": "more than one request",
        "many_requests": "more than 64 requests",
        "new_request": "a request new to the batch (prev_positions = -1): the CPU value",
        "with_drafts": "a request that had drafts: previous count + valid count",
        "without_drafts": "a request from the previous batch without drafts: the CPU value",
        "reordered": "a request with drafts whose previous row is another row (the batch moved)",
        "overwritten_source": "a request with drafts reads a row that the call also writes (in-place hazard)",
        "smaller_previous_batch": "the previous batch had fewer requests (P < n)",
        "larger_previous_batch": "the previous batch had more requests (P > n)",
        "exact_buffers": "num_computed_tokens is exactly n long (max_num_reqs = n)",
        "longer_buffers": "num_computed_tokens is longer than n (rows past n stay untouched)",
        # production extremes (reached by every default run: see ``shapes``)
        "beyond_1024_requests": "more than 1024 requests (max_num_seqs of 1024 and more)",
        "counts_past_2_24": "a corrected count past 2**24 (max_model_len in the millions)",
        "spec_tokens_15_plus": "a request with 15 or more drafts (num_speculative_tokens >= 15)",
    }
    extremes = ("beyond_1024_requests", "counts_past_2_24", "spec_tokens_15_plus")
    inout = frozenset(INOUT)
    """The arguments the function updates in place (as a kernel's ``inout``)."""

    oracle_functions = numpy_and_numba("update_num_computed_tokens_for_batch_change")

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        """The production tier (docs/CONTRACT.md §8.2): :meth:`extended_rules`'s rules, and what
        vLLM's runner makes: ``-1`` for a new request and distinct previous rows, valid counts
        of the rejection sampler's rows (``1 .. d + 1`` with ``d`` drafts, ``0 .. 1`` without),
        token counts ``0 .. MAX_COUNT``, accepted counts ``>= 1``."""
        self.extended_rules(case)
        a = case.arrays
        prev = a["prev_positions"]
        if np.any(prev < -1):
            raise ContractViolation("arrays.prev_positions", "a new request is -1 (vLLM's prev_req_id_to_index.get(req_id, -1))")
        nonneg = prev[prev >= 0]
        if len(np.unique(nonneg)) < len(nonneg):
            raise ContractViolation("arrays.prev_positions", "two requests cannot have the same previous row")
        P = len(a["valid_sampled_token_count"])
        drafts = a["prev_num_draft_tokens"].astype(np.int64)
        if np.any(drafts < 0) or np.any(drafts > MAX_DRAFTS):
            raise ContractViolation("arrays.prev_num_draft_tokens", f"draft counts must be from 0 to {MAX_DRAFTS}")
        valid, d = a["valid_sampled_token_count"].astype(np.int64), drafts[:P]
        if np.any((d > 0) & ((valid < 1) | (valid > d + 1))) or np.any((d == 0) & (valid > 1)):
            raise ContractViolation("arrays.valid_sampled_token_count",
                                    "a previous row with d drafts has 1 to d + 1 valid tokens (0 or 1 without drafts)")
        if np.any(a["num_accepted_tokens"] < 1) or np.any(a["num_accepted_tokens"] > MAX_DRAFTS + 1):
            raise ContractViolation("arrays.num_accepted_tokens", f"must be from 1 to {MAX_DRAFTS + 1}")
        for name in ("num_computed_tokens", "cpu_num_computed_tokens"):
            if np.any(a[name] < 0) or np.any(a[name] > MAX_COUNT):
                raise ContractViolation(f"arrays.{name}", f"token counts must be from 0 to {MAX_COUNT}")
        t = Rows(case)
        if np.any(t.participating & (t.corrected > MAX_COUNT)):
            raise ContractViolation("arrays.num_computed_tokens", f"a corrected count must stay within {MAX_COUNT}")

    def extended_rules(self, case: Case) -> None:
        """The rules of the extended tier (docs/CONTRACT.md §8.4): every row read is in its
        buffer, counts within int32."""
        a = case.arrays
        require_arrays(a, ARRAYS)
        if case.launch.get("mode") not in MODES:
            raise ContractViolation("launch.mode", "must be eager or compiled")
        n, P, Mx = len(a["prev_positions"]), len(a["valid_sampled_token_count"]), len(a["num_computed_tokens"])
        if n < 1 or P < 1:
            raise ContractViolation("arrays.prev_positions", "needs a request, and a previous batch of at least one")
        for name in ("num_accepted_tokens", "cpu_num_computed_tokens"):
            if len(a[name]) != n:
                raise ContractViolation(f"arrays.{name}", "needs one entry per request (len(prev_positions))")
        if Mx < max(n, P) or len(a["prev_num_draft_tokens"]) != Mx:
            raise ContractViolation(
                "arrays.num_computed_tokens",
                "num_computed_tokens and prev_num_draft_tokens need the same length, at least max(n, len(valid_sampled_token_count))",
            )
        prev = a["prev_positions"]
        if np.any(prev >= P) or np.any(prev < -(1 << 40)):
            raise ContractViolation("arrays.prev_positions", "must be below len(valid_sampled_token_count), and above -2**40")
        if np.any(a["valid_sampled_token_count"] < 0) or np.any(a["num_computed_tokens"] < 0):
            raise ContractViolation("arrays.valid_sampled_token_count", "counts must be >= 0 (num_computed_tokens too)")
        t = Rows(case)
        if np.any(t.participating & (t.corrected > INT32_MAX)):
            raise ContractViolation("arrays.num_computed_tokens", "a corrected count num_computed_tokens[g] + valid must stay within int32")

    def features_of(self, case: Case) -> frozenset[str]:
        t = Rows(case)
        part = t.participating
        idx = np.arange(t.n)
        checks = {
            "eager": case.launch["mode"] == "eager",
            "compiled": case.launch["mode"] == "compiled",
            "single_request": t.n == 1,
            "several_requests": t.n > 1,
            "many_requests": t.n > 64,
            "new_request": np.any(t.prev < 0),
            "with_drafts": part.any(),
            "without_drafts": np.any((t.prev >= 0) & ~part),
            "reordered": np.any(part & (t.prev != idx)),
            "overwritten_source": np.any(part & (t.prev != idx) & (t.prev < t.n)),
            "smaller_previous_batch": t.P < t.n,
            "larger_previous_batch": t.P > t.n,
            "exact_buffers": t.Mx == t.n,
            "longer_buffers": t.Mx > t.n,
            "beyond_1024_requests": t.n > MAX_NUM_SEQS,
            "counts_past_2_24": np.any(part & (t.corrected > FLOAT32_EXACT)),
            "spec_tokens_15_plus": np.any(part & (t.drafts >= SPEC_TOKENS)),
        }
        return frozenset(k for k, v in checks.items() if v)

    # -- extended tier (docs/CONTRACT.md §8.4): edges.py ----------------------------------


    # -- running ----------------------------------------------------------------------

    def expected(self, case: Case) -> dict[str, dict[str, np.ndarray]]:
        """Per oracle, the two updated buffers (from copies of the case's arrays)."""
        out = {}
        for name, oracle in self.oracles.items():
            arrays = {n: case.arrays[n].copy() for n in ARRAYS}
            oracle(**arrays)
            out[name] = {n: arrays[n] for n in INOUT}
        return out

    def oracle_check(self, case: Case) -> list[Difference]:
        return self._disagreements(case, self.expected(case))

    def _disagreements(self, case: Case, exp: Mapping[str, Mapping[str, np.ndarray]]) -> list[Difference]:
        names = list(exp)
        t = Rows(case)
        out: list[Difference] = []
        for other in names[1:]:
            versus = f"{names[0]} oracle vs {other} oracle"
            for n in INOUT:
                out += _diff(n, exp[names[0]][n], exp[other][n], t, versus, region_of=t.region)
        return out

    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        import torch

        exp = self.expected(case)
        outcome = Outcome(oracle_disagreements=self._disagreements(case, exp))
        mode = case.launch["mode"]
        versus = " = ".join(exp) + f" oracle, {mode} run"
        want = exp[next(iter(exp))]
        buffers = {n: _Buffer(case.arrays[n], device) for n in ARRAYS}
        try:
            self.invoke(impl, {n: b.view for n, b in buffers.items()}, mode)
            if device != "cpu":
                torch.cuda.synchronize()
            actual = {n: b.read() for n, b in buffers.items()}
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            return outcome.crashed(exc, device, f" ({mode} run)")
        t = Rows(case)
        for n, b in buffers.items():
            if n in INOUT:
                outcome.differences += _diff(n, b.expected(want[n]), actual[n], t, versus, b.before, b.size, t.region)
            else:
                outcome.differences += _diff(n, b.initial, actual[n], t, f"input as given, {mode} run", b.before, b.size)
        return outcome

    @staticmethod
    def invoke(impl: Any, tensors: Mapping[str, Any], mode: str) -> Any:
        """``impl`` run in ``mode`` (:func:`variants`) on ``tensors``, in vLLM's order (the
        check's call, and the device mode's)."""
        return variants(impl)[mode](*(tensors[n] for n in ARRAYS))

    def output_tokens(self, case: Case) -> int:
        return sum(case.arrays[n].size for n in ARRAYS)

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        a = case.arrays
        t = Rows(case)
        compiled = case.launch["mode"] == "compiled"
        if compiled:
            yield case.replace(launch={"mode": "eager"})
        low = 2 if compiled else 1

        def keep(rows: list[int]) -> Case:
            return case.replace(arrays={n: a[n][rows] for n in ("num_accepted_tokens", "prev_positions", "cpu_num_computed_tokens")})

        every = list(range(t.n))
        if t.n > low:
            if t.n // 2 >= low:
                yield keep(every[: t.n // 2])
                yield keep(every[t.n // 2 :])
            for r in every:
                yield keep(every[:r] + every[r + 1 :])
        if t.Mx > max(t.n, t.P):
            m = max(t.n, t.P)
            yield case.replace(arrays={"num_computed_tokens": a["num_computed_tokens"][:m], "prev_num_draft_tokens": a["prev_num_draft_tokens"][:m]})


class _Buffer:
    """A host array as a device view with GUARD elements of poison before it (always the same
    offset: one compiled graph) and ``guard_for(n)`` after."""

    def __init__(self, content: np.ndarray, device: str) -> None:
        import torch

        self.size = n = content.size
        self.before, self.after = GUARD, guard_for(n)
        self.fill = poison(content.dtype)
        host = filled(content.dtype, (self.before + n + self.after,), self.fill)
        host[self.before : self.before + n] = content
        self.initial = host
        self.full = torch.from_numpy(host.copy()).to(device)
        self.view = self.full[self.before : self.before + n]

    def expected(self, middle: np.ndarray) -> np.ndarray:
        out = self.initial.copy()
        out[self.before : self.before + middle.size] = middle
        return out

    def read(self) -> np.ndarray:
        return self.full.cpu().numpy()


def _diff(
    name: str,
    expected: np.ndarray,
    actual: np.ndarray,
    t: Rows,
    versus: str,
    before: int = 0,
    size: int | None = None,
    region_of: Any = None,
) -> list[Difference]:
    """Every element where ``actual`` is not ``expected``: flat buffers holding ``before``
    guard elements, then the ``size`` elements of the tensor (all of them by default), then
    guard elements; ``region_of(i)`` names the region of element ``i`` of an updated buffer."""
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return [Difference(name, None, f"{expected.dtype} {expected.shape}", f"{actual.dtype} {actual.shape}", None, "dtype/shape", versus)]
    size = len(expected) - before if size is None else size
    out = []
    for flat in np.flatnonzero(raw(expected) != raw(actual)).tolist():
        i = flat - before
        if i < 0:
            where, req = "guard band before the buffer", None
        elif i >= size:
            where, req = "guard band past the buffer", None
        elif region_of is None:
            where, req = "input (must not be written)", None
        else:
            where, req = region_of(i), (i if i < t.n else None)
        out.append(Difference(name, i, expected[flat].item(), actual[flat].item(), req, where, versus))
    return out


TARGET = BatchChange()
