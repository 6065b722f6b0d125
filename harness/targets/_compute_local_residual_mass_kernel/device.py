"""``_compute_local_residual_mass_kernel`` on the device (docs/CONTRACT.md §32): production batches
drawn by its record and checked there by its record's check
(:class:`~...targetkit.device.RecordDevice`), and production-scale block-verification steps with
the drafter's logits whose target logits pass ``2**31`` elements (the int32 row offset
``logit_idx * target_logits_stride``: the class of #46560 and #47383; this kernel first ships in
vLLM 0.25.0 with its rows in int64), checked on the device against the torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.local_residual_mass_rows`) and confirmed by the NumPy and
Numba oracles on the live request (:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
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
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row, requests_past_limit
from ...targetkit.scale_rows import (
    bonus_rows,
    join_steps,
    minimal_request_rows,
    scale_request_rows,
    splice,
)
from .layout import build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ, "cumulative_log_p": NOT_READ}
"""The greedy requests' statistics before the live request (§30: a zero row's maxima are 0, the
rest never written), and their joint ratios (never written: greedy)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production block-verification step with the drafter's logits just past ``2**31``
    target logits (a current model's vocabulary): greedy requests of 16 drafts, zero rows, up to
    a few rows before the limit, then a random request of 16 drafts drawn and settled as the
    record draws them, 8 to 16 of its rows past the limit."""
    V = scale_vocab(rng)
    step = draw_step(_rng_chooser(rng), B=1, K=16, V=V, method="block", draft=True, min_drafts=16, greedy=(0.0,), same=False,
                     other_width=0.0)
    step, ch = settle_step(step)
    counts = scale_request_rows(rng, first_row(V))[:-1]
    live = join_steps(build(step, ch), sentinel(V))
    return splice(live, counts, FILLS).replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def sentinel(V: int) -> Case:  # noqa: N803
    """A request of two drafts (temperature 1, the drafter's cache zeros) whose second row holds
    a single target logit 1 at its last column, both drafts that token: its residual mass there
    is the target's excess over a flat draft (about ``2e-5`` a block, not 0), so a read of another
    row shows. Scale steps end with it; the minimal step is it alone after the greedy requests."""
    x = np.zeros((3, V), np.float32)
    x[1, V - 1] = 1.0
    dl = np.zeros((1, 16, V), np.float32)  # K = 16: the greedy requests before it hold 16 drafts
    step = Step(x, dl, np.array([0, V - 1, V - 1], np.int32), cumulative([3]), np.arange(3, dtype=np.int64),
                np.zeros(1, np.int64), np.ones(1, np.float32), np.zeros(1, np.int64), 16, "block")
    return build(step, chain(step))


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a residual row past ``2**31`` target logits of ``case``'s
    vocabulary, tables of zeros: greedy requests of 17 rows up to one row before the limit, then
    :func:`sentinel`, its second row the first past the limit."""
    V = case.arrays["target_logits"].shape[1]
    counts = minimal_request_rows(first_row(V) - 1)[:-1]
    return [splice(sentinel(V), counts, FILLS).replace(note="the int32 row offset past 2**31, minimised")]


def live_requests(case: Case) -> list[int]:
    """The requests with a row past the limit, and the one before them."""
    elp = case.arrays["expanded_local_pos"]
    starts = np.flatnonzero(elp == 0)
    return requests_past_limit(starts, np.append(starts[1:], elp.size), case.arrays["target_logits"].shape[1])


class _Device(ScaleRecordDevice):
    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every row's partials: the rows that write within their bounds (the torch oracle on
        their rows as given), the others their sentinel."""
        a, sc, sm = case.arrays, case.scalars, run.small
        n = a["target_logits"].shape[0]
        V, nb = int(sc["vocab_size"]), int(sc["vocab_num_blocks"])
        P = min(nb, int(case.launch.get("PADDED_VOCAB_NUM_BLOCKS") or nb))
        eidx, elp, temp = a["expanded_idx_mapping"], a["expanded_local_pos"].astype(np.int64), a["temperature"]
        ds = a["draft_sampled"].astype(np.int64)
        nxt = np.append(ds[1:n], -1)[:n]
        on = np.flatnonzero((elp != 0) & ~bonus_rows(elp) & (nxt >= 0) & (temp[eidx] != 0))
        device = run.device
        w = torch.zeros((n, nb), dtype=torch.bool, device=device)
        e = torch.zeros((n, nb), dtype=torch.float32, device=device)
        b = torch.zeros((n, nb), dtype=torch.float64, device=device)
        if on.size:
            rows = torch.from_numpy(on).to(device)
            t_lse, t_e = tensor_ops_v2.block_lse(sm["target_local_max"][rows, :P], sm["target_local_sumexp"][rows, :P])
            d_lse, d_e = tensor_ops_v2.block_lse(sm["draft_local_max"][rows, :P], sm["draft_local_sumexp"][rows, :P])
            dr = torch.from_numpy(np.ascontiguousarray(a["draft_logits"][eidx[on], elp[on]])).to(device)
            tr = torch.from_numpy(np.ascontiguousarray(a["target_logits"][on])).to(device)
            e[rows], b[rows] = tensor_ops_v2.local_residual_mass_rows(
                tr, dr, t_lse, t_e, d_lse, d_e, sm["cumulative_log_p"][rows - 1],
                sm["temperature"][sm["expanded_idx_mapping"][rows]], V)
            w[rows] = True
        return run.outs["local_residual_mass"].mismatches(0, n, w, e, b)

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        """:func:`live_requests`' rows."""
        keep = live_requests(case)
        starts = np.flatnonzero(case.arrays["expanded_local_pos"] == 0)
        ends = np.append(starts[1:], case.arrays["expanded_local_pos"].size)
        return keep_requests(case, keep), list(range(int(starts[keep[0]]), int(ends[keep[-1]])))


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
