"""``_resample_kernel`` on the device (docs/CONTRACT.md §34): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`), and
production-scale steps whose target logits pass ``2**31`` elements (the request's rows counted
from ``cu_num_logits`` as loaded, int32, in vLLM up to 0.24.0: the class of #46560 and #47383;
the drawn row read at ``resample_token_idx * target_logits_stride``), checked on the device
against the torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.resample_rows`, every block's
winner and value) and confirmed by the NumPy and Numba oracles on the live requests
(:mod:`~...targetkit.scale_device`)."""

from __future__ import annotations

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.runner_v2_verify import SAMPLE_BLOCK, keep_requests
from ...targetkit.scale_device import (
    ScaleRecordDevice,
    ScaleRun,
    live_requests,
    minimal_standard_case,
    standard_scale_case,
)
from ...targetkit.scale_rows import ROW_BLOCK
from .layout import build
from .record import TARGET

FILLS = {"draft_sampled": 1}
"""The greedy requests before the live ones: zero rows, every draft token 1 (not the argmax 0:
§33 rejects it at the first step, so ``rejected_step`` 0 and nothing drawn), their
log-sum-exps §33's (0: a greedy request's)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production standard-verification step just past ``2**31`` target logits
    (:func:`~...targetkit.scale_device.standard_scale_case`): greedy requests of zero rows up to
    the limit (nothing drawn), the sentinel request (its rejected row, the first past the limit,
    drawn), a random request of 16 drafts (its rejected or bonus row drawn), either noise path."""
    return standard_scale_case(rng, build, FILLS)[0]


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a drawn row past ``2**31`` target logits of ``case``'s vocabulary
    (:func:`~...targetkit.scale_device.minimal_standard_case`)."""
    return [minimal_standard_case(case.arrays["target_logits"].shape[1], build, FILLS)[0]]


class _Device(ScaleRecordDevice):
    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every request's winners and values per 1024-wide block: a request that draws (random,
        or at its bonus) within :func:`~eaglefuzz.oracles.tensor_ops_v2.resample_rows`'s
        candidates and bounds, the others their sentinel; its rows gathered from the case as
        given, a block of requests at a time."""
        a, sc = case.arrays, case.scalars
        V = int(sc["vocab_size"])
        cu = a["cu_num_logits"].astype(np.int64)
        k = a["rejected_step"].astype(np.int64)
        j = cu[:-1] + k
        s = a["expanded_idx_mapping"][j]
        temp = a["temperature"][s]
        bonus = j == cu[1:] - 1
        draws = ~((temp == 0) & ~bonus)
        la, lm = run.outs["resampled_local_argmax"], run.outs["resampled_local_max"]
        bad = torch.zeros((), dtype=torch.int64, device=run.device)
        rest = torch.from_numpy(~draws).to(run.device)
        for out in (la, lm):
            bits = out.view.view(torch.int64 if out.view.element_size() == 8 else torch.int32)
            bad += (bits[rest] != out.sentinel).sum()
        r_all = np.flatnonzero(draws)
        dl = a.get("draft_logits")
        clp = a.get("cumulative_log_p")
        step = max(1, ROW_BLOCK // max(1, a["target_logits"].shape[1]))
        ds = a["draft_sampled"].astype(np.int64)
        for q in range(0, r_all.size, step):
            r = r_all[q : q + step]
            y = np.where(bonus[r], -1, ds[np.minimum(j[r] + 1, ds.size - 1)])
            draft = None
            if dl is not None:
                draft = dl[s[r], np.minimum(k[r], dl.shape[1] - 1)]
            ltau = None
            if sc.get("use_block_verification"):
                ltau = np.where(k[r] > 0, clp[np.maximum(j[r] - 1, 0)], 0).astype(np.float32)
            res = tensor_ops_v2.resample_rows(*(None if x is None else torch.from_numpy(np.ascontiguousarray(x)).to(run.device)
                                                for x in (a["target_logits"][j[r]], draft, y,
                                                          a["target_rejected_logsumexp"][r], a["draft_rejected_logsumexp"][r],
                                                          ltau, temp[r], a["seed"][s[r]], a["pos"][j[r]])),
                                              V, bool(sc.get("use_fp64")), SAMPLE_BLOCK)  # fmt: skip
            rows = torch.from_numpy(r).to(run.device)
            bad += tensor_ops_v2.gumbel_mismatches(res, la.view[rows], lm.view[rows], SAMPLE_BLOCK)
            del res
        return bad

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        keep = live_requests(case)
        return keep_requests(case, keep), keep


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
