"""``_compute_cumulative_log_p_kernel`` on the device (docs/CONTRACT.md §31): production batches
drawn by its record and checked there by its record's check
(:class:`~...targetkit.device.RecordDevice`), and production-scale block-verification steps whose
target logits pass ``2**31`` elements (the request's rows counted from ``cu_num_logits`` as
loaded, int32: the class of #46560 and #47383, fixed in vLLM 0.25.0 where this kernel first
ships with its rows in int64), checked on the device against the torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.cumulative_log_p`) and confirmed by the NumPy and Numba
oracles on the live request (:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.device_draws import scale_vocab
from ...targetkit.runner_v2_verify import (
    NOT_READ,
    _rng_chooser,
    chain,
    draw_step,
    keep_requests,
    settle_step,
)
from ...targetkit.scale_device import (
    ScaleRecordDevice,
    ScaleRun,
    first_row,
    live_requests,
    sentinel_step,
)
from ...targetkit.scale_rows import join_steps, minimal_request_rows, scale_request_rows, splice
from .layout import build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ}
"""The greedy requests' statistics before the live request (§30: a zero row's maxima are 0, its
sums never written)."""


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
    """:func:`~...targetkit.scale_device.sentinel_step` by block verification (the drafter's
    cache, if any, a 2 at the drafted token): its joint log ratio is negative (-11.5 one-hot,
    about -1 with the cache), so a read of another row shows. Scale steps end with it; the
    minimal step is it alone after the greedy requests."""
    step = sentinel_step(V, with_draft, 2.0, "block")
    return build(step, chain(step))


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a random request's draft row past ``2**31`` target logits of
    ``case``'s vocabulary, a table of zeros: greedy requests of 17 rows up to the limit, then
    :func:`sentinel` (one-hot drafts) whose row is the first past it."""
    V = case.arrays["target_logits"].shape[1]
    counts = minimal_request_rows(first_row(V))[:-1]
    return [splice(sentinel(V, False), counts, FILLS).replace(note="the int32 row offset past 2**31, minimised")]


class _Device(ScaleRecordDevice):
    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every row's ``cumulative_log_p`` against the torch oracle (within its bound; untouched
        rows their sentinel)."""
        sm, dl = run.small, run.tables.get("draft_logits")
        out = run.outs["cumulative_log_p"]
        w, e, b = tensor_ops_v2.cumulative_log_p(
            run.tables["target_logits"].view, sm["target_local_max"], sm["target_local_sumexp"], sm["draft_sampled"],
            None if dl is None else dl.view, sm.get("draft_local_max"), sm.get("draft_local_sumexp"), sm["cu_num_logits"],
            sm["idx_mapping"], sm["temperature"], int(case.scalars["vocab_num_blocks"]))
        return out.mismatches(0, out.n, w, e, b)

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        """:func:`live_requests`' rows."""
        keep = live_requests(case)
        cu = case.arrays["cu_num_logits"].astype(np.int64)
        return keep_requests(case, keep), list(range(int(cu[keep[0]]), int(cu[keep[-1] + 1])))


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
