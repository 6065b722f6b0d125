"""``_rejection_kernel`` on the device (docs/CONTRACT.md §33): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`), and
production-scale standard-verification steps whose target logits pass ``2**31`` elements (the
request's rows counted from ``cu_num_logits`` as loaded, int32, in vLLM up to 0.24.0: the class
of #46560 and #47383; the draft's logit ``target_logits[j, x]`` read at ``logit_idx *
target_logits_stride``), checked on the device against the torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.rejection`) and confirmed by the NumPy and Numba
oracles on the live requests (:mod:`~...targetkit.scale_device`)."""

from __future__ import annotations

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.runner_v2_verify import NOT_READ, STATS_BLOCK, keep_requests
from ...targetkit.scale_device import (
    ScaleRecordDevice,
    ScaleRun,
    live_requests,
    minimal_standard_case,
    standard_scale_case,
)
from .layout import build
from .record import TARGET

FILLS = {"target_local_max": 0.0, "target_local_sumexp": NOT_READ, "draft_local_max": NOT_READ,
         "draft_local_sumexp": NOT_READ, "draft_sampled": 1}
"""The greedy requests before the live ones: zero rows (§30: block maxima 0, sums never
written), every draft token 1 (not the argmax 0: rejected at the first step, the argmax 0 kept)."""


def fill_greedy(case: Case, requests: int) -> Case:
    """``case`` whose first ``requests`` requests are greedy zero rows: §30's block argmaxes of
    their draft rows (each block's first lane), their bonus rows never written (``-1``,
    :data:`NOT_READ`)."""
    a = case.arrays
    cu = a["cu_num_logits"].astype(np.int64)
    nb = a["target_local_argmax"].shape[1]
    rows = int(cu[requests])
    a["target_local_argmax"][:rows] = np.arange(nb, dtype=np.int64) * STATS_BLOCK
    bonus = cu[1 : requests + 1] - 1
    a["target_local_argmax"][bonus] = -1
    a["target_local_max"][bonus] = NOT_READ
    return case


def scale_case(rng: np.random.Generator) -> Case:
    """A production standard-verification step just past ``2**31`` target logits
    (:func:`~...targetkit.scale_device.standard_scale_case`): greedy requests of zero rows up to
    the limit, the sentinel request on the first row past it, a random request of 16 drafts."""
    case, greedy = standard_scale_case(rng, build, FILLS)
    return fill_greedy(case, greedy)


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a random request's draft row past ``2**31`` target logits of
    ``case``'s vocabulary (:func:`~...targetkit.scale_device.minimal_standard_case`)."""
    m, greedy = minimal_standard_case(case.arrays["target_logits"].shape[1], build, FILLS)
    return [fill_greedy(m, greedy)]


class _Device(ScaleRecordDevice):
    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every request's ``sampled`` (the steps visited; the others their sentinel),
        ``num_sampled`` exactly, the two log-sum-exps within their bounds, against
        :func:`~eaglefuzz.oracles.tensor_ops_v2.rejection` (standard and synthetic steps)."""
        sc = case.scalars
        if sc.get("use_block_verification") or sc.get("fly_window_size", 0):
            raise ValueError("a production-scale step of the rejection kernel verifies by the standard method")
        sm, dl = run.small, run.tables.get("draft_logits")
        nb = int(sc["vocab_num_blocks"])
        P = min(nb, int(case.launch.get("PADDED_VOCAB_NUM_BLOCKS") or nb))
        res = tensor_ops_v2.rejection(
            run.tables["target_logits"].view, sm["target_local_argmax"], sm["target_local_max"], sm["target_local_sumexp"],
            sm["draft_sampled"], None if dl is None else dl.view, sm["draft_local_max"], sm["draft_local_sumexp"],
            sm["cu_num_logits"], sm["idx_mapping"], sm["temperature"], sm["seed"], sm["pos"], P,
            int(sc["num_speculative_steps"]), sm.get("synthetic_conditional_rates"), run.outs["num_sampled"].view)
        bad = torch.zeros((), dtype=torch.int64, device=run.device)
        for name, out in run.outs.items():
            w, e, b = res[name]
            bad += out.mismatches(0, w.shape[0], w, e, b)
        return bad

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        keep = live_requests(case)
        return keep_requests(case, keep), keep


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
