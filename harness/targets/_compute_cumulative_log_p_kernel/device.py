"""``_compute_cumulative_log_p_kernel`` on the device (docs/CONTRACT.md §31): production batches
drawn by its record and checked there by its record's check
(:class:`~...targetkit.device.RecordDevice`), and production-scale block-verification steps whose
target logits pass ``2**31`` elements (the request's rows counted from ``cu_num_logits`` as
loaded, int32: the class of #46560 and #47383, fixed in vLLM 0.25.0 where this kernel first
ships with its rows in int64), checked on the device against the torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.cumulative_log_p`) and confirmed by the NumPy and Numba
oracles on the live request (:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.base import Outcome
from ...targetkit.device import RecordDevice
from ...targetkit.device_draws import scale_vocab
from ...targetkit.runner_v2_verify import (
    NOT_READ,
    Step,
    _rng_chooser,
    chain,
    cumulative,
    draw_step,
    keep_requests,
    settle_step,
)
from ...targetkit.scale import flat_limit, past_limit
from ...targetkit.scale_rows import (
    DeviceOutput,
    DeviceTable,
    confirm_rows,
    guard_difference,
    join_steps,
    minimal_request_rows,
    scale_request_rows,
    splice,
)
from .layout import NAME, build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ}
"""The greedy requests' statistics before the live request (§30: a zero row's maxima are 0, its
sums never written)."""
SMALL = ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp", "draft_sampled",
         "cu_num_logits", "idx_mapping", "temperature")
"""The case's arrays of a few elements per row (copied to the device whole)."""


def first_row(W: int) -> int:  # noqa: N803
    return -(-flat_limit() // W)


def scale_case(rng: np.random.Generator) -> Case:
    """A production block-verification step just past ``2**31`` target logits (a current
    model's vocabulary): greedy requests of 16 drafts, zero rows, up to a few rows before the
    limit, then a random request of 16 drafts drawn and settled as the record draws them (its
    logits, drafts, the drafter's cache or one-hot drafts, §30's statistics of its rows), 8 to
    16 of its rows past the limit."""
    V = scale_vocab(rng)
    step = draw_step(_rng_chooser(rng), B=1, K=16, V=V, method="block", min_drafts=16, greedy=(0.0,), other_width=0.0,
                     same=False)
    step, ch = settle_step(step)
    live = join_steps(build(step, ch), sentinel(V, step.draft_logits is not None))
    counts = scale_request_rows(rng, first_row(V))[:-1]
    return splice(live, counts, FILLS).replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def sentinel(V: int, with_draft: bool) -> Case:  # noqa: N803
    """A request of one draft (temperature 1) whose row holds a single target logit 1 at its
    last column, the drafted token (the drafter's cache, if any, zeros but a 2 there): its joint
    log ratio is negative (-11.5 one-hot, about -1 with the cache), so a read of another row
    shows. Scale steps end with it; the minimal step is it alone after the greedy requests."""
    x = np.zeros((2, V), np.float32)
    x[0, V - 1] = 1.0
    dl = None
    if with_draft:
        dl = np.zeros((1, 16, V), np.float32)
        dl[0, 0, V - 1] = 2.0
    step = Step(x, dl, np.array([0, V - 1], np.int32), cumulative([2]), np.array([0, 1], np.int64),
                np.zeros(1, np.int64), np.ones(1, np.float32), np.zeros(1, np.int64), 16, "block")
    return build(step, chain(step))


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a random request's draft row past ``2**31`` target logits of
    ``case``'s vocabulary, a table of zeros: greedy requests of 17 rows up to the limit, then
    :func:`sentinel` (one-hot drafts) whose row is the first past it."""
    V = case.arrays["target_logits"].shape[1]
    counts = minimal_request_rows(first_row(V))[:-1]
    return [splice(sentinel(V, False), counts, FILLS).replace(note="the int32 row offset past 2**31, minimised")]


def live_requests(case: Case) -> list[int]:
    """The requests with a row past the limit, and the one before them."""
    cu = case.arrays["cu_num_logits"].astype(np.int64)
    W = case.arrays["target_logits"].shape[1]
    past = [r for r in range(cu.size - 1) if past_limit(int(cu[r + 1] - 1) * W)]
    return list(range(max(0, (past[0] if past else cu.size - 1) - 1), cu.size - 1))


class _Device(RecordDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET
    scale = True

    def scale_case(self, rng: np.random.Generator) -> Case:
        return scale_case(rng)

    def scale_minimal(self, case: Case) -> list[Case]:
        return minimal_scale_cases(case)

    def scale_check(self, impl: Any, case: Case, device: str, confirm: bool) -> tuple[int, int, Outcome | None]:
        """``case`` (a production-scale step) run on ``device`` and checked there against the
        torch oracle: every row's ``cumulative_log_p`` (within its bound; untouched rows their
        sentinel), the guard bands, every input unchanged; with ``confirm``, a difference is
        checked by the NumPy and Numba oracles on :func:`live_requests`."""
        a = case.arrays
        n = a["target_logits"].shape[0]
        tables = {name: DeviceTable(a[name], device) for name in ("target_logits", "draft_logits") if name in a}
        small = {name: torch.from_numpy(np.ascontiguousarray(a[name])).to(device) for name in SMALL if name in a}
        out = DeviceOutput((n,), torch.float32, device)
        views = {name: t.clone() for name, t in small.items()} | {name: t.view for name, t in tables.items()}
        views |= {"cumulative_log_p": out.view, "draft_logits": views.get("draft_logits")}
        TARGET.launch(impl, views, case)
        if device != "cpu":
            torch.cuda.synchronize()
        written = {name: t.guard_writes() for name, t in tables.items()}
        bad = sum(w for w, _ in written.values()) + out.guard_writes() + sum(t.changed() for t in tables.values())
        bad += sum(int((views[name].view(torch.uint8) != t.view(torch.uint8)).sum()) for name, t in small.items())
        dl = tables.get("draft_logits")
        w, e, b = tensor_ops_v2.cumulative_log_p(
            tables["target_logits"].view, small["target_local_max"], small["target_local_sumexp"], small["draft_sampled"],
            None if dl is None else dl.view, small.get("draft_local_max"), small.get("draft_local_sumexp"),
            small["cu_num_logits"], small["idx_mapping"], small["temperature"], int(case.scalars["vocab_num_blocks"]))
        bad += int(out.mismatches(0, n, w, e, b))
        outcome = None
        if confirm and bad:
            keep = live_requests(case)
            restricted = keep_requests(case, keep)
            cu = a["cu_num_logits"].astype(np.int64)
            rows = list(range(int(cu[keep[0]]), int(cu[keep[-1] + 1])))
            actual = {"cumulative_log_p": out.view[rows[0] : rows[-1] + 1].cpu().numpy()}
            outcome = confirm_rows(TARGET, restricted, rows, actual, {"cumulative_log_p": out.sentinel})
            for name, (k, at) in written.items():
                if k:
                    outcome.differences.insert(0, guard_difference(name, k, at, tables[name].poison))
        del tables
        if device != "cpu":
            torch.cuda.empty_cache()
        return bad, n, outcome


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
