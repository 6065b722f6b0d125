"""``eagle_prepare_next_token_padded_kernel`` on the device (docs/CONTRACT.md §3): the
rejection sampler's rows (accepted drafts, one recovered or bonus id, all vocabulary ids, then
``-1``) for up to 1024 requests (a quarter up to 4096), rows of up to 64 columns in the sampler's fresh buffer
(``stride = S``), vocabularies from 1 id to the int32 limit ``2**31 - 1`` (the tour's
``int32_limits``), ids from the whole vocabulary or its top, vocabulary backup ids, discarded
requests: the production preconditions of §3.2, as the fuzz and bulk modes draw them. Drawn
on the device 256 cases a batch (each case's sizes, vocabulary and modes on the host, its ids,
kept columns, discard flags and backup ids on the device), checked against the batched torch
oracle (:func:`~eaglefuzz.oracles.tensor_ops.eagle_prepare_next_token_padded`) and compared on
the device, every element of both outputs and every guard band.

Not drawn, as §3.2 leaves them to the extended tier (§3.4): rows wider than ``S`` (the
sampler's buffer is fresh, ``stride(0) = S``) and ids at or past ``vocab_size`` (every id of a
row is a vocabulary id)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops
from ....oracles.host_copy import host_to
from ...generation.strategies import ID16_MAX, INT32_MAX, MAX_NUM_SEQS, SPEC_TOKENS
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.step_batch import segment_counts
from .record import TARGET

MAX_REQUESTS = 1024
VOCABS = (32000, 128256, 151936, 262144)
INT32_VOCAB = 1 / 8
"""The share of cases of the largest vocabulary §3.2 allows, ``2**31 - 1`` ids (the tour's
``int32_limits``, which every fuzz run checks: ``vocab_size + 1`` wraps there), each id half
the time one of its last three (the largest, ``2**31 - 2``: ``id_near_int32_max``)."""
ANY_VOCAB = 1 / 8
"""The share of cases of any other vocabulary from 1 id to ``2**31 - 1`` (the body's), one or
two ids a quarter of them."""
TOP_IDS = 1 / 4
"""The share of the other cases whose ids are each half the time one of the vocabulary's last
three (the body's second range: ``vocab_size - 1`` the largest valid id)."""


def _vocabs(rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` vocabulary sizes of §3.2 (``1 <= vocab_size <= 2**31 - 1``): vLLM's common ones
    mostly, the int32 limit :data:`INT32_VOCAB` of the time, any other :data:`ANY_VOCAB` of it
    (one or two ids a quarter of those)."""
    u = rng.random(k)
    tiny = rng.integers(1, 3, size=k)
    wide = rng.integers(1, INT32_MAX, size=k)
    common = np.asarray(VOCABS, dtype=np.int64)[rng.integers(0, len(VOCABS), size=k)]
    other = np.where(rng.random(k) < 0.25, tiny, wide)
    return np.where(u < INT32_VOCAB, INT32_MAX, np.where(u < INT32_VOCAB + ANY_VOCAB, other, common)).astype(np.int64)


def _below(gen: torch.Generator, hi: torch.Tensor) -> torch.Tensor:
    """Per element an integer in ``[0, hi)`` (``hi >= 1``, int64, up to ``2**31 - 1``), uniform
    to float64's precision (53 bits)."""
    u = torch.rand(hi.shape, generator=gen, device=hi.device, dtype=torch.float64)
    return torch.minimum((u * hi).long(), hi - 1)


class NextTokenDevice(DeviceTarget):
    name = "eagle_prepare_next_token_padded_kernel"
    launch_names = TARGET.launch_names
    record = TARGET
    checked_on = "device"
    oracle_name = "torch oracle (oracles/tensor_ops.py)"
    batch = 256
    """Cases per batch on a GPU: a case holds some 18k elements (at most 4096 rows of 64 ids), a
    batch some 4.5M, its draw, oracle, buffers and features a few dozen torch operations."""

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0) -> DeviceBatch:
        """``k`` cases: per case ``R`` (up to ``max_requests``, a quarter up to four times it),
        ``S`` (1-16, a fifth 17-64), 0-8 spare buffer entries, a vocabulary (:func:`_vocabs`),
        ids from the whole vocabulary or (the int32 limit's and :data:`TOP_IDS` of the others)
        each half the time from its last three, and a discard rate (none, a tenth, all); per
        row its kept columns (1 to ``S``, ``-1`` after them), per buffer entry its discard flag
        and backup id (a vocabulary id). ``share`` (a table epoch's) is not used: no tables."""
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        top = np.where(rng.random(k) < 0.75, max_requests, 4 * max_requests)
        R = rng.integers(1, top + 1)
        S = np.where(rng.random(k) < 0.8, rng.integers(1, 17, size=k), rng.integers(17, 65, size=k))
        extra = rng.integers(0, 9, size=k)
        V = _vocabs(rng, k)
        top_ids = (V == INT32_MAX) | (rng.random(k) < TOP_IDS)
        rate = np.asarray([0.0, 0.1, 1.0])[rng.integers(0, 3, size=k)]
        L = R + extra
        n, cells, slots = int(R.sum()), int((R * S).sum()), int(L.sum())
        per_case = host_to(np.stack([S, V, top_ids]).astype(np.int64), device)  # one copy
        cell_case = torch.repeat_interleave(torch.arange(k, device=device), host_to(R * S, device),
                                            output_size=cells)
        row_case = torch.repeat_interleave(torch.arange(k, device=device), host_to(R, device), output_size=n)
        slot_case = torch.repeat_interleave(torch.arange(k, device=device), host_to(L, device),
                                            output_size=slots)
        s_cell, v_cell, top_cell = per_case[0, cell_case], per_case[1, cell_case], per_case[2, cell_case]
        first_cell = host_to(np.cumsum(R * S) - R * S, device)[cell_case]
        within = torch.arange(cells, device=device) - first_cell
        col, row = within % s_cell, host_to(np.cumsum(R) - R, device)[cell_case] + within // s_cell
        ids = _below(gen, v_cell)
        lo = (v_cell - 3).clamp(min=0)
        near = (top_cell == 1) & (torch.rand(cells, generator=gen, device=device) < 0.5)
        ids = torch.where(near, lo + _below(gen, v_cell - lo), ids)
        kept = 1 + _below(gen, per_case[0, row_case])
        ids = torch.where(col >= kept[row], -1, ids).to(torch.int32)
        discard = torch.rand(slots, generator=gen, device=device, dtype=torch.float64) < host_to(rate, device)[slot_case]
        backup = _below(gen, per_case[1, slot_case]).to(torch.int32)
        Rl, Ll = R.tolist(), L.tolist()
        cat = {"sampled_token_ids": ids, "discard_request_mask": discard, "backup_next_token_ids": backup}
        lengths = {"sampled_token_ids": (R * S).tolist(), "discard_request_mask": Ll, "backup_next_token_ids": Ll}
        shapes = {"sampled_token_ids": [(r, int(w)) for r, w in zip(Rl, S, strict=True)],
                  "discard_request_mask": [(x,) for x in Ll], "backup_next_token_ids": [(x,) for x in Ll]}
        outputs = {"next_token_ids": (torch.int32, Rl), "valid_sampled_tokens_count": (torch.int32, Rl)}
        scalars = [{"vocab_size": int(v), "num_sampled_tokens_per_req": int(w), "num_reqs": r}
                   for v, w, r in zip(V, S, Rl, strict=True)]
        return DeviceBatch(cat, lengths, shapes, {}, {}, outputs, scalars, {"R": R, "S": S, "V": V, "L": L})

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        seeds = (int(rng.integers(0, 2**62)), int(rng.integers(0, 2**62)))
        return self.draw_batch(seeds, device, 1, max_requests).case(0)

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        z = b.extra
        return tensor_ops.eagle_prepare_next_token_padded(
            **b.cat, vocab_size=z["V"], num_sampled_tokens_per_req=z["S"], num_reqs=z["R"], buffer_lengths=z["L"])

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        s = dc.scalars
        return tensor_ops.eagle_prepare_next_token_padded(
            **dc.inputs, vocab_size=[s["vocab_size"]], num_sampled_tokens_per_req=[s["num_sampled_tokens_per_req"]],
            num_reqs=[s["num_reqs"]], buffer_lengths=[dc.inputs["discard_request_mask"].numel()])

    batch_decides = frozenset(TARGET.features)

    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """Every feature of the record's ``features_of``: the sizes' from the host, the rows'
        (kept requests' valid counts, last valid columns and ids, ``-1`` counts, the
        ``2**31 - 2`` id) from flat passes over the batch's ids (running counts read at each
        row's end, no padded rows) and one copy of per-case counts."""
        z, k = b.extra, len(b)
        R, S, V, L = z["R"], z["S"], z["V"], z["L"]
        ids = b.cat["sampled_token_ids"].reshape(-1)
        rows = tensor_ops.next_token_rows(ids, R, S, V, L)
        start, end, s_row, buf_at, count, last_at = rows
        minus = tensor_ops.running_count(ids == -1, start, end)[0]
        near = tensor_ops.running_count(ids == INT32_MAX - 1, start, end)[0]
        disc = b.cat["discard_request_mask"][buf_at]
        kept = ~disc
        flags = torch.stack([
            disc,
            kept & (count == s_row),
            kept & (count >= 2),
            kept & (minus < s_row) & (ids[end - 1] == -1),
            kept & (count > 0) & (last_at - start >= 16),
            kept & (minus >= 16),
            kept & (near > 0),
            kept & (count > 0) & (ids[last_at.clamp(max=ids.numel() - 1)] > ID16_MAX),
        ])
        sums = segment_counts(flags, R).T.cpu().numpy()
        on = {"discard_none": sums[:, 0] == 0, "discard_all": sums[:, 0] == R, "discard_some": (sums[:, 0] > 0) & (sums[:, 0] < R),
              "full_row": sums[:, 1] > 0, "several_valid_columns": sums[:, 2] > 0, "minus_one_suffix": sums[:, 3] > 0,
              "valid_past_column_16": sums[:, 4] > 0, "many_rejected": sums[:, 5] > 0, "id_near_int32_max": sums[:, 6] > 0,
              "ids_past_65535": sums[:, 7] > 0,
              "block_past_stride": (S & (S - 1)) != 0, "single_column": S == 1,
              "overallocated_buffers": L > R, "several_requests": R > 1, "many_requests": R > 64,
              "beyond_1024_requests": R > MAX_NUM_SEQS, "spec_tokens_15_plus": S >= SPEC_TOKENS + 1,
              "vocab_256k": V >= 256000}
        return [frozenset(f for f, v in on.items() if v[j]) for j in range(k)]

    def launch(self, impl: Any, views: dict[str, torch.Tensor], dc: DeviceCase) -> None:
        from ....kernels.launchers import launch_eagle_prepare_next_token_padded

        ids, S = views["sampled_token_ids"], dc.scalars["num_sampled_tokens_per_req"]
        launch_eagle_prepare_next_token_padded(  # a drawn case's rows are S wide: sliced only where wider
            impl, sampled_token_ids=ids if ids.shape[1] == S else ids[:, :S],
            discard_request_mask=views["discard_request_mask"], backup_next_token_ids=views["backup_next_token_ids"],
            next_token_ids=views["next_token_ids"], valid_sampled_tokens_count=views["valid_sampled_tokens_count"],
            vocab_size=dc.scalars["vocab_size"], num_reqs=dc.scalars["num_reqs"])


DEVICE = NextTokenDevice()
"""This target's device mode (``--mode device``)."""
