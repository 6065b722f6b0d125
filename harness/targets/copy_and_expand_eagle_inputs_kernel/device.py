"""``copy_and_expand_eagle_inputs_kernel`` on the device (docs/CONTRACT.md §1): production
batches of up to 4096 requests, mostly decodes of ``K + 1`` tokens with some prefills of
thousands, drawn on the GPU, within the production preconditions of §1.2 as the fuzz and bulk
modes draw them (vocabulary ids, consecutive positions below ``max_model_len``, padding id 0,
vLLM's launch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...generation.strategies import (
    FLOAT32_EXACT,
    ID16_MAX,
    INT16_MAX,
    MAX_NUM_SEQS,
    SPEC_TOKENS,
    next_power_of_2,
    query_start_loc_from,
)
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.fused import SLOTS, piece_on
from ...targetkit.step_batch import segment_counts
from .layout import MAX_MODEL_LEN
from .record import TARGET

MAX_REQUESTS = 4096
MAX_TOKENS = 1 << 20
"""Tokens of one batch at most (vLLM's ``max_num_batched_tokens`` is 8k to 64k, and more on
servers tuned for throughput)."""
LONG_CONTEXT = MAX_MODEL_LEN - (1 << 14)
"""The largest first position drawn (exclusive): every written position ``p0 + j`` (``j`` below a
request's ``qlen + P - s <= 8192 + 16`` slots) stays below ``max_model_len = 2**31``, the
production tier's largest (docs/CONTRACT.md §1.2; the body draws ``p0`` up to it)."""
HIGHS = (1 << 12, 1 << 21, 10_000_000, LONG_CONTEXT)
"""The first positions' ranges a case draws from (one each, at random)."""
VOCAB_IDS = (0, 2**31 - 1)
"""Token ids of the production tier (docs/CONTRACT.md §1.2): vocabulary ids, >= 0 (the bound is
``randint``'s exclusive high)."""


BATCH = 256
"""Cases per batch on a GPU (:meth:`CopyAndExpandDevice.draw_batch`): a case averages some 10**5
tokens (50 us of the kernel's; a batch some 800 MiB of inputs and outputs), a batch's draw,
oracle, buffers and features under three hundred torch operations whatever its size, about one
a case."""


@dataclass(frozen=True)
class _Sizes:
    """What the host draws of a case (:meth:`CopyAndExpandDevice.draw`): request lengths and
    rejected counts, the modes, the first positions' range, the parallel-drafting id."""

    lengths: np.ndarray
    rejected: np.ndarray
    shift: bool
    P: int  # noqa: N815 - the contract's name
    high: int
    parallel: int

    @property
    def qsl(self) -> np.ndarray:
        return query_start_loc_from(self.lengths.tolist())

    @property
    def qel(self) -> np.ndarray:
        return (self.qsl[1:] - 1 - self.rejected).astype(np.int32)

    def outputs(self) -> dict[str, tuple[torch.dtype, int]]:
        R, T = len(self.lengths), int(self.lengths.sum())
        n_out = T + R * (self.P - int(self.shift))
        return {
            "out_input_ids": (torch.int32, n_out),
            "out_positions": (torch.int64, n_out),
            "out_is_rejected_token_mask": (torch.bool, n_out),
            "out_is_masked_token_mask": (torch.bool, n_out),
            "out_new_token_indices": (torch.int32, R * self.P),
            "out_hidden_state_mapping": (torch.int32, T),
        }

    def scalars(self) -> dict[str, Any]:
        return {
            "padding_token_id": 0,
            "parallel_drafting_token_id": self.parallel,
            "total_input_tokens": int(self.lengths.sum()),
            "num_padding_slots_per_request": self.P,
            "shift_input_ids": self.shift,
        }


def _sizes(rng: np.random.Generator, max_requests: int) -> _Sizes:
    """A case's sizes and modes: up to ``max_requests`` requests (log-uniform), mostly decodes of
    up to ``K + 1`` tokens, a share of prefills of 16 to 8192 tokens (64 on a small scale),
    at most :data:`MAX_TOKENS` tokens; rejected tokens, shift mode and ``P`` as vLLM's call
    sites make them; the first positions below 4096, 2**21, 10**7 or :data:`LONG_CONTEXT` (the
    body's whole range: ``positions_past_2_24``)."""
    R = int(np.exp(rng.uniform(0, np.log(max_requests + 1))))
    K = int(rng.integers(1, 16))
    lengths = rng.integers(1, K + 2, size=R)
    prefills = rng.random(R) < rng.choice([0.0, 0.01, 0.05, 0.3])
    lengths[prefills] = rng.integers(16, 8193 if max_requests == MAX_REQUESTS else 64, size=int(prefills.sum()))
    while lengths.sum() > MAX_TOKENS:  # a batch fits max_num_batched_tokens
        lengths = lengths[: max(1, len(lengths) // 2)]
    rejected = (rng.random(len(lengths)) * lengths).astype(np.int64)
    shift = bool(rng.integers(0, 2))
    P = int(rng.integers(2, 17)) if shift else int(rng.choice([1, int(rng.integers(1, 17))]))
    high = int(rng.choice(HIGHS))
    return _Sizes(lengths, rejected, shift, P, high, int(rng.integers(0, 1 << 18)))


@dataclass(frozen=True)
class _Batch:
    """What the host draws of ``k`` cases at once (:func:`_batch_sizes`): every request's
    length and rejected count, concatenated case after case, and per case its request count
    ``R``, its modes and the parallel-drafting id, its first positions' range."""

    lengths: np.ndarray
    rejected: np.ndarray
    R: np.ndarray  # noqa: N815 - the contract's names
    shift: np.ndarray
    P: np.ndarray  # noqa: N815
    high: np.ndarray
    parallel: np.ndarray

    @property
    def first(self) -> np.ndarray:
        """Each case's first request."""
        return np.cumsum(self.R) - self.R

    @property
    def T(self) -> np.ndarray:  # noqa: N802
        """Each case's input tokens."""
        return np.add.reduceat(self.lengths, self.first)

    def qsl(self) -> np.ndarray:
        """Each case's ``query_start_loc`` (``R + 1`` entries from 0), concatenated (int32)."""
        c = np.cumsum(self.lengths)
        ends = c - np.repeat(c[self.first] - self.lengths[self.first], self.R)  # each request's end in its case
        return np.insert(ends, self.first, 0).astype(np.int32)

    def features(self) -> list[frozenset[str]]:
        """The record's ``features_of`` of each case that its sizes and modes decide (every one
        but the ids' and the positions'), vectorised over the cases."""
        qlen, rej, first, R = self.lengths, self.rejected, self.first, self.R
        P, s = self.P, self.shift.astype(np.int64)
        last = first + R - 1
        case = np.repeat(np.arange(R.size), R)

        def any_of(x: np.ndarray) -> np.ndarray:
            return np.add.reduceat(x.astype(np.int64), first) > 0

        mql = np.maximum.reduceat(qlen, first)
        block = np.minimum(256, [next_power_of_2(int(x)) for x in mql + P - s])
        qs_last = self.T - qlen[last]  # the last request starts last
        cols = {
            "shift_on": s == 1, "shift_off": s == 0, "p_is_1": P == 1, "p_at_least_2": P >= 2,
            "rejected_tokens": any_of(rej > 0), "last_request_rejected": rej[last] > 0,
            "all_but_one_rejected": any_of((rej == qlen - 1) & (qlen > 1)),
            "no_valid_slot": (s == 1) & any_of(qlen - rej - s[case] == 0),
            "multi_block_request": any_of(qlen - s[case] + P[case] > block[case]),
            "several_requests": R > 1, "many_requests": R > 64, "long_request": mql > 512,
            "clamp_engaged": rej[last] == 0, "beyond_1024_requests": R > MAX_NUM_SEQS,
            "starts_past_32767": qs_last > INT16_MAX, "prefill_thousands": mql >= 2048,
            "spec_tokens_15_plus": P >= SPEC_TOKENS, "many_rejected": any_of(rej >= 16),
            "rp_past_32767": (R - 1) * P > INT16_MAX,
        }
        keys = np.stack(list(cols.values()), 1)
        sets: dict[bytes, frozenset[str]] = {}
        out = []
        for row in keys:
            key = row.tobytes()
            if key not in sets:
                sets[key] = frozenset(n for n, on in zip(cols, row, strict=True) if on)
            out.append(sets[key])
        return out


def _batch_sizes(rng: np.random.Generator, k: int, max_requests: int) -> _Batch:
    """:func:`_sizes` of ``k`` cases drawn at once (the same distribution, vectorised)."""
    R = np.exp(rng.uniform(0, np.log(max_requests + 1), size=k)).astype(np.int64)
    K = rng.integers(1, 16, size=k)
    lengths = rng.integers(1, np.repeat(K + 2, R))
    prefills = rng.random(lengths.size) < np.repeat(rng.choice([0.0, 0.01, 0.05, 0.3], size=k), R)
    lengths[prefills] = rng.integers(16, 8193 if max_requests == MAX_REQUESTS else 64, size=int(prefills.sum()))
    first = np.cumsum(R) - R
    c = np.concatenate([[0], np.cumsum(lengths)])
    size = R.copy()
    while True:  # each case fits max_num_batched_tokens: its requests halved as _sizes does
        cut = (size > 1) & (c[first + size] - c[first] > MAX_TOKENS)
        if not cut.any():
            break
        size = np.where(cut, np.maximum(1, size // 2), size)
    keep = (np.arange(lengths.size) - np.repeat(first, R)) < np.repeat(size, R)
    lengths = lengths[keep]
    rejected = (rng.random(lengths.size) * lengths).astype(np.int64)
    shift = rng.integers(0, 2, size=k).astype(bool)
    P = np.where(shift, rng.integers(2, 17, size=k), np.where(rng.random(k) < 0.5, 1, rng.integers(1, 17, size=k)))
    high = rng.choice(HIGHS, size=k)
    return _Batch(lengths, rejected, size, shift, P, high, rng.integers(0, 1 << 18, size=k))


class CopyAndExpandDevice(DeviceTarget):
    name = "copy_and_expand_eagle_inputs_kernel"
    launch_names = TARGET.launch_names

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        z = _sizes(rng, max_requests)
        T = int(z.lengths.sum())
        lens = host_to(z.lengths, device)
        p0 = torch.randint(0, z.high, (len(z.lengths),), generator=gen, device=device)
        local = torch.arange(T, device=device) - torch.repeat_interleave(torch.cumsum(lens, 0) - lens, lens, output_size=T)
        inputs = {
            "target_token_ids": torch.randint(*VOCAB_IDS, (T,), generator=gen, device=device, dtype=torch.int32),
            "target_positions": torch.repeat_interleave(p0, lens, output_size=T) + local,
            "next_token_ids": torch.randint(*VOCAB_IDS, (len(z.lengths),), generator=gen, device=device, dtype=torch.int32),
            "query_start_loc": host_to(z.qsl, device),
            "query_end_loc": host_to(z.qel, device),
        }
        return DeviceCase(inputs, z.outputs(), z.scalars(), {"max_query_len": int(z.lengths.max())})

    batch = BATCH

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` cases of :meth:`draw`'s distribution drawn together: their sizes on the host
        (``seeds[1]``, all cases at once; no shared tables), their ids and positions on the
        device in one draw for all of them, each input the cases' arrays concatenated."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        z = _batch_sizes(rng, k, max_requests)
        R, T = z.R.tolist(), z.T.tolist()
        n, nr = sum(T), sum(R)
        qsl = z.qsl()
        qel = (np.delete(qsl, z.first + np.arange(k)) - 1 - z.rejected).astype(np.int32)  # qsl[r + 1] - 1 - rejected
        host = host_to(np.stack([z.lengths, np.repeat(z.high, z.R)]), device)
        lens_t, high = host[0], host[1]
        starts = torch.cumsum(lens_t, 0) - lens_t
        p0 = torch.randint(0, 1 << 62, (nr,), generator=gen, device=device) % high
        small = host_to(np.concatenate([qsl, qel]), device)
        cat = {
            "target_token_ids": torch.randint(*VOCAB_IDS, (n,), generator=gen, device=device, dtype=torch.int32),
            "target_positions": torch.repeat_interleave(p0 - starts, lens_t, output_size=n) + torch.arange(n, device=device),
            "next_token_ids": torch.randint(*VOCAB_IDS, (nr,), generator=gen, device=device, dtype=torch.int32),
            "query_start_loc": small[: nr + k],
            "query_end_loc": small[nr + k :],
        }
        lengths = {"target_token_ids": T, "target_positions": T, "next_token_ids": R,
                   "query_start_loc": [r + 1 for r in R], "query_end_loc": R}
        slots = (z.T + z.R * (z.P - z.shift)).tolist()
        outputs = {"out_input_ids": (torch.int32, slots), "out_positions": (torch.int64, slots),
                   "out_is_rejected_token_mask": (torch.bool, slots), "out_is_masked_token_mask": (torch.bool, slots),
                   "out_new_token_indices": (torch.int32, (z.R * z.P).tolist()), "out_hidden_state_mapping": (torch.int32, T)}
        scalars = [{"padding_token_id": 0, "parallel_drafting_token_id": int(par), "total_input_tokens": int(t),
                    "num_padding_slots_per_request": int(p), "shift_input_ids": bool(sh)}
                   for par, t, p, sh in zip(z.parallel, T, z.P, z.shift, strict=True)]
        mql = np.maximum.reduceat(z.lengths, z.first).tolist()
        return DeviceBatch(cat, lengths, {n_: [(x,) for x in v] for n_, v in lengths.items()}, {}, {}, outputs,
                           scalars, {"sizes": z, "R": R, "T": T}, host=[{"max_query_len": int(m)} for m in mql])

    batch_decides = frozenset(TARGET.features)

    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """From each case's sizes and modes, and (``writes``: the batched oracle's) the ids it
        copies and its first positions: ``features_of``'s ids are the next-token ids and the
        ids the valid slots read, so a case whose next-token ids pass 65535 has the feature
        (one reduction over the requests); only the cases whose next-token ids do not have
        their copied ids looked at (their slots, contiguous in the writes, in one gather and
        one running count). One copy back, two when some case's next-token ids stay below."""
        out = b.extra["sizes"].features()
        if writes is None or not len(b):
            return out
        dev = b.cat["query_start_loc"].device
        R = np.asarray(b.extra["R"])
        of_req = host_to(np.repeat(np.arange(len(b)), R), dev)
        first = host_to(np.concatenate([[0], np.cumsum(b.extra["T"])[:-1]]), dev)
        qs = b.cat["query_start_loc"][host_to(np.arange(R.sum()) + np.repeat(np.arange(len(b)), R), dev)].long()
        per = torch.zeros((2, len(b)), dtype=torch.int64, device=dev)
        per[0].index_add_(0, of_req, (b.cat["next_token_ids"] > ID16_MAX).long())
        per[1].index_add_(0, of_req, (b.cat["target_positions"][first[of_req] + qs] >= FLOAT32_EXACT).long())
        ids_past, positions_past = (per > 0).cpu().numpy()
        if not ids_past.all():  # the ids the valid slots copied: each case's slots are contiguous in the writes
            cases = np.flatnonzero(~ids_past)
            sizes = np.asarray(b.outputs["out_input_ids"][1], dtype=np.int64)
            start = (np.cumsum(sizes) - sizes)[cases]
            sizes = sizes[cases]
            at = host_to(np.repeat(start - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum())), dev)
            copied = ~writes["out_is_masked_token_mask"][1][at] & ~writes["out_is_rejected_token_mask"][1][at]
            hit = segment_counts((copied & (writes["out_input_ids"][1][at] > ID16_MAX))[None], sizes)[0]
            ids_past[cases] = hit.cpu().numpy() > 0  # these cases' slots at once: one more copy back
        return [f | {n for n, on in (("ids_past_65535", ids_past[c]), ("positions_past_2_24", positions_past[c])) if on}
                for c, f in enumerate(out)]

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        per_case = {n: [sc[n] for sc in b.scalars] for n in b.scalars[0]}
        return tensor_ops.copy_and_expand_eagle_inputs(**b.cat, **per_case, tokens=b.extra["T"], requests=b.extra["R"],
                                                       slots=piece_on(SLOTS, b.cat["query_start_loc"].device))

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        return tensor_ops.copy_and_expand_eagle_inputs(**dc.inputs, **dc.scalars, tokens=dc.scalars["total_input_tokens"])

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ....kernels.launchers import launch_copy_and_expand_eagle_inputs

        launch_copy_and_expand_eagle_inputs(impl, **views, **dc.scalars, max_query_len=dc.host["max_query_len"])


DEVICE = CopyAndExpandDevice()
"""This target's device mode (``--mode device``)."""
