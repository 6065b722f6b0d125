"""``_resample_kernel`` on the device (docs/CONTRACT.md §34): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`), and
production-scale steps whose target logits pass ``2**31`` elements (the request's rows counted
from ``cu_num_logits`` as loaded, int32, in vLLM up to 0.24.0: the class of #46560 and #47383;
the drawn row read at ``resample_token_idx * target_logits_stride``), checked on the device
against the torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.resample_rows`, every block's
winner and value) and confirmed by the NumPy and Numba oracles on the live requests
(:mod:`~...targetkit.scale_device`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.device_draws import scale_vocab
from ...targetkit.runner_v2_verify import (
    SAMPLE_BLOCK,
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
    standard_sentinel,
)
from ...targetkit.scale_rows import ROW_BLOCK, join_steps, minimal_request_rows, splice
from .layout import build
from .record import TARGET

FILLS = {"draft_sampled": 1}
"""The greedy requests before the live ones: zero rows, every draft token 1 (not the argmax 0:
§33 rejects it at the first step, so ``rejected_step`` 0 and nothing drawn), their
log-sum-exps §33's (0: a greedy request's)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production standard-verification step just past ``2**31`` target logits (a current
    model's vocabulary, either noise path): greedy requests of 16 drafts, zero rows, up to the
    limit (nothing drawn), then the sentinel request of
    :func:`~...targetkit.scale_device.standard_sentinel` (its rejected row, the first past the
    limit, drawn), then a random request of 16 drafts drawn and settled as the record draws it
    (its rejected or bonus row drawn): 19 rows past the limit."""
    V = scale_vocab(rng)
    step = draw_step(_rng_chooser(rng), B=1, K=16, V=V, method="standard", min_drafts=16, greedy=(0.0,),
                     other_width=0.0, same=False)  # fmt: skip
    step, ch = settle_step(step)
    s = replace(standard_sentinel(V, step.draft_logits is not None), use_fp64=step.use_fp64)
    live = join_steps(build(s, chain(s)), build(step, ch))
    counts = minimal_request_rows(first_row(V))[:-1]
    return splice(live, counts, FILLS).replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest step with a drawn row past ``2**31`` target logits of ``case``'s vocabulary,
    a table of zeros: greedy requests of 17 rows up to the limit, then the sentinel request
    (one-hot drafts) whose rejected row is the first past it."""
    V = case.arrays["target_logits"].shape[1]
    counts = minimal_request_rows(first_row(V))[:-1]
    s = standard_sentinel(V, False)
    return [splice(build(s, chain(s)), counts, FILLS).replace(note="the int32 row offset past 2**31, minimised")]


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
