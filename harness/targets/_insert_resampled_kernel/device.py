"""``_insert_resampled_kernel`` on the device (docs/CONTRACT.md §35): verification steps drawn on
the GPU in batches of 256 (16 of a 151936- or 262144-id vocabulary), as its record's generator
draws them (:func:`~...targetkit.verify_batch.draw_steps` with the record's choices: up to 12
requests of up to 16 drafts, any method a batch, greedy and random requests, the drafter's
cache (never the target's own rows) or one-hot drafts, the plain logits styles, several
1024-wide blocks one batch in two (the last one often a few lanes), whose last block each
random request's top-k masks whole in four cases in ten, either noise path; the tour's 65 to
128 requests and large vocabularies), with §33's ``sampled`` and counts and §34's block winners
and values left by the torch oracles of §30-§34 (:mod:`~...targetkit.verify_chain`, as
``rejection_sample`` hands them over), settled as the record's generator settles them
(:func:`~...targetkit.runner_v2_verify.settle_step`: a request whose §33 test or §34 winner
lands within its window re-keyed, up to eight times, then its drafts made placeholders).
Checked against the batched torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.insert_resampled`:
every count and every inserted token, exactly; ``sampled`` and ``num_sampled`` updated in
place, every other element as given) and compared on the GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...targetkit.device_batch import DeviceBatch, laid_out
from ...targetkit.runner_v2_verify import METHODS, SAMPLE_BLOCK, STYLES, VOCABS
from ...targetkit.step_batch import feature_sets, owners, per_case_any, rows_of
from ...targetkit.verify_batch import MANY_REQUESTS, VerifyBatchDevice, draw_steps
from ...targetkit.verify_chain import (
    batch_requests,
    rejection_batch,
    settle_chain,
)
from .layout import ARRAYS
from .record import TARGET

MASK_LAST = 0.4
"""The share of cases of several 1024-wide blocks whose random rows' last block is masked whole."""


def insert_vocab(rng: np.random.Generator) -> int:
    """The record's vocabulary: one of :data:`~...targetkit.runner_v2_verify.VOCABS`, half the time
    two to six 1024-wide blocks, the last one of 1 to 4 lanes seven times in ten."""
    if rng.random() >= 0.5:
        return int(rng.choice(VOCABS))
    blocks = int(rng.integers(1, 6))
    return SAMPLE_BLOCK * blocks + (int(rng.integers(1, 5)) if rng.random() < 0.7 else int(rng.integers(1, 1001)))


class _Device(VerifyBatchDevice):
    name = TARGET.name
    launch_names = TARGET.launch_names
    record = TARGET

    kinds = MANY_REQUESTS

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = 12,
                   share: float = 1.0, kind: str | None = None) -> DeviceBatch:
        """``k`` verification steps (fewer of a large vocabulary) as the record's body draws
        them, settled, with §33's and §34's outputs; ``sampled`` and ``num_sampled`` updated in
        place."""
        rng = np.random.default_rng(seeds)
        method = str(rng.choice(METHODS))  # the batch's, before its steps
        st = draw_steps(seeds, device, k, max_requests, kind, vocab=insert_vocab, method=method, same=False,
                        other_width=0.2, tour=MANY_REQUESTS, styles=STYLES,
                        tour_choices={"large_vocab": {"greedy": (0.0, 0.3)}})
        k = len(st.K)
        rnb = -(-st.V // SAMPLE_BLOCK)
        if rnb > 1 and st.kind == "ordinary":  # the last block masked whole in a random request's rows
            lo = (rnb - 1) * SAMPLE_BLOCK
            tl = st.target_logits
            case = host_to(rng.random(k) < MASK_LAST, tl.device)[st.rows.cid]
            rnd = st.temperature[st.req.state_base[torch.cumsum((st.elp == 0).long(), 0) - 1] + st.eidx] != 0
            rows = case & rnd & torch.isfinite(tl[:, :lo]).any(1)
            tl[rows, lo:] = float("-inf")
        rb = rejection_batch(st)
        res, r34 = settle_chain(rb, st)  # §33 and §34 of the steps as settled
        B, K, n = st.req.B.tolist(), st.K.tolist(), st.n.tolist()
        dt = torch.float64 if st.use_fp64 else torch.float32
        sampled = res["sampled"]  # [B, K + 1] of the batch's most drafts: each case's [B, K + 1], flat
        flat = sampled[torch.arange(sampled.shape[1], device=sampled.device) <= res["K"][:, None]]
        draws = r34["draws"][:, None]
        arrays = {"sampled": (flat, [(x, kk + 1) for x, kk in zip(B, K, strict=True)]),
                  "num_sampled": (res["num_sampled"], [(x,) for x in B]),
                  "resampled_local_argmax": (torch.where(draws, r34["argmax"], -1).reshape(-1), [(x, rnb) for x in B]),
                  "resampled_local_max": (torch.where(draws, r34["max"], float("nan")).to(dt).reshape(-1),
                                          [(x, rnb) for x in B]),
                  "cu_num_logits": (rb.cat["cu_num_logits"], [(x + 1,) for x in B]),
                  "expanded_idx_mapping": (st.eidx, [(m,) for m in n]),
                  "temperature": (st.temperature, [(r,) for r in st.req.R.tolist()])}
        cat, lengths, shapes = laid_out(arrays, ARRAYS)
        return DeviceBatch(cat, lengths, shapes, {}, {}, {}, [{"resample_num_blocks": rnb} for _ in range(k)],
                           host=[{"shapes": {}} for _ in range(k)], inout=("sampled", "num_sampled"))

    def _requests(self, b: DeviceBatch) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The batch's requests, per request the slot base of its ``sampled`` row, its count,
        whether its token is drawn, and its winning block's token (the greatest value, NaN as
        ``-inf``, the first of equals)."""
        q = batch_requests(b, "expanded_idx_mapping")
        a = b.cat
        dev = q.cu.device
        B = np.asarray(b.lengths["num_sampled"], dtype=np.int64)
        rcid = owners(B, dev.type)
        width = host_to([x[1] for x in b.shapes["sampled"]], dev)[rcid]
        sizes = np.asarray(b.lengths["sampled"], dtype=np.int64)
        local = torch.arange(int(B.sum()), device=dev) - host_to(np.cumsum(B) - B, dev)[rcid]
        base = host_to(np.cumsum(sizes) - sizes, dev)[rcid] + local * width
        ns = a["num_sampled"].long()
        nb = int(b.scalars[0]["resample_num_blocks"])
        token = tensor_ops_v2.insert_resampled_rows(
            a["resampled_local_argmax"].view(-1, b.shapes["resampled_local_argmax"][0][1])[:, :nb],
            a["resampled_local_max"].view(-1, b.shapes["resampled_local_max"][0][1])[:, :nb])
        j = q.cu[:-1] + ns
        drawn = ~((a["temperature"][q.state] == 0) & (j != q.cu[1:] - 1))
        return q, base, ns, drawn, token

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every request of every case at once: a drawn request's winner at ``sampled[r,
        num_sampled[r]]`` (flat over the cases' ``[B, K + 1]``), every count one more."""
        _, base, ns, drawn, token = self._requests(b)
        r = torch.nonzero(drawn).flatten()
        return {"sampled": (base[r] + ns[r], token[r]),
                "num_sampled": (torch.arange(ns.numel(), device=ns.device), (ns + 1).to(torch.int32))}


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays."""
        q, _, ns, drawn, _ = self._requests(b)
        a = b.cat
        dev = q.cu.device
        k = len(b)
        nb = int(b.scalars[0]["resample_num_blocks"])
        m = a["resampled_local_max"].view(-1, b.shapes["resampled_local_max"][0][1])[:, :nb].to(torch.float64)
        m = torch.where(torch.isnan(m), float("-inf"), m)
        win = m.argmax(1) if nb else torch.zeros_like(ns)
        d = q.d
        first = q.cu[:-1]
        R = np.asarray(b.lengths["temperature"], dtype=np.int64)
        B = np.asarray(b.lengths["num_sampled"], dtype=np.int64)
        sbase = host_to(np.cumsum(R) - R, dev)[owners(B, dev.type)]
        at = a["expanded_idx_mapping"].long()[(first + ns.clamp(min=0)).clamp(max=max(q.req.numel() - 1, 0))] + sbase
        greedy = ~drawn | (a["temperature"][at] == 0)
        rnd = drawn & ~greedy
        reqs = rows_of(b.lengths, "num_sampled", None, dev.type)
        fp64 = a["resampled_local_max"].dtype == torch.float64
        on = per_case_any(reqs, {"random_draw": rnd, "greedy_bonus": drawn & greedy, "greedy_skipped": ~drawn,
                                 "no_drafts": d == 0, "later_block_wins": drawn & (win > 0),
                                 "inf_block": drawn & torch.isneginf(m).any(1), "finite": drawn & torch.isfinite(m).any(1)})
        masked = on.pop("inf_block") & on.pop("finite")
        full = {"masked_block": masked, "fp64_values": on["random_draw"] & fp64, "several_blocks": np.full(k, nb > 1),
                "vocab_past_131072": np.full(k, nb > 128), "many_requests": B > 64}
        return feature_sets(on | full, k)


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
