"""``eagle_prepare_next_token_padded_kernel`` on the device (docs/CONTRACT.md §3): the
rejection sampler's rows (accepted drafts, one recovered or bonus id, all vocabulary ids, then
``-1``) for up to 1024 requests (a quarter up to 4096), rows of up to 64 columns in the sampler's fresh buffer
(``stride = S``), vocabularies from 1 id to the int32 limit ``2**31 - 1`` (the tour's
``int32_limits``), ids from the whole vocabulary or its top, vocabulary backup ids, discarded
requests: the production preconditions of §3.2, as the fuzz and bulk modes draw them. Checked
on the host: the case is drawn and its expected outputs computed there in NumPy, only the
launch runs on the device.

Not drawn, as §3.2 leaves them to the extended tier (§3.4): rows wider than ``S`` (the
sampler's buffer is fresh, ``stride(0) = S``) and ids at or past ``vocab_size`` (every id of a
row is a vocabulary id)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ....oracles import vectorized
from ...generation.strategies import ID16_MAX, INT32_MAX, MAX_NUM_SEQS, SPEC_TOKENS, next_power_of_2
from ...targetkit.device import DeviceCase, DeviceTarget
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


def _vocab(rng: np.random.Generator) -> int:
    """A vocabulary size of §3.2 (``1 <= vocab_size <= 2**31 - 1``): vLLM's common ones mostly,
    the int32 limit :data:`INT32_VOCAB` of the time, any other :data:`ANY_VOCAB` of it."""
    u = rng.random()
    if u < INT32_VOCAB:
        return INT32_MAX
    if u < INT32_VOCAB + ANY_VOCAB:
        return int(rng.integers(1, 3)) if rng.random() < 0.25 else int(rng.integers(1, INT32_MAX))
    return int(VOCABS[rng.integers(len(VOCABS))])


def _ids(rng: np.random.Generator, shape: tuple[int, ...], vocab: int) -> np.ndarray:
    """Vocabulary ids (``0 <= id < vocab``, int32) from the whole vocabulary, or, for the int32
    limit and :data:`TOP_IDS` of the other cases, each half the time from its last three."""
    ids = rng.integers(0, vocab, size=shape, dtype=np.int32)
    if vocab == INT32_MAX or rng.random() < TOP_IDS:
        top = rng.random(shape) < 0.5
        ids[top] = rng.integers(max(0, vocab - 3), vocab, size=int(top.sum()), dtype=np.int32)
    return ids


class NextTokenDevice(DeviceTarget):
    name = "eagle_prepare_next_token_padded_kernel"
    launch_names = TARGET.launch_names
    checked_on = "host"  # a few thousand elements: launches, not work, would cost the time
    oracle_name = "NumPy oracle (oracles/vectorized.py)"
    host_batch_size = 256  # cases of a few thousand elements: the batch's copy, views and comparison amortised

    def draw(self, rng: np.random.Generator, gen: torch.Generator, device: str, max_requests: int = MAX_REQUESTS) -> DeviceCase:
        top = max_requests if rng.random() < 0.75 else 4 * max_requests  # a quarter past max_num_seqs = 1024
        R = int(rng.integers(1, top + 1))
        S = int(rng.integers(1, 17)) if rng.random() < 0.8 else int(rng.integers(17, 65))
        extra = int(rng.integers(0, 9))
        vocab = _vocab(rng)
        ids = _ids(rng, (R, S), vocab)
        kept = rng.integers(1, S + 1, size=(R, 1))
        np.putmask(ids, np.arange(S) >= kept, -1)
        inputs = {
            "sampled_token_ids": ids,
            "discard_request_mask": rng.random(R + extra) < (0.0, 0.1, 1.0)[rng.integers(3)],
            "backup_next_token_ids": rng.integers(0, vocab, size=R + extra, dtype=np.int32),
        }
        outputs = {"next_token_ids": (torch.int32, R), "valid_sampled_tokens_count": (torch.int32, R)}
        return DeviceCase(inputs, outputs, {"vocab_size": vocab, "num_sampled_tokens_per_req": S, "num_reqs": R})

    def oracle(self, dc: DeviceCase) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        R, S = dc.scalars["num_reqs"], dc.scalars["num_sampled_tokens_per_req"]
        out = {n: np.empty(R, dtype=np.int32) for n in dc.outputs}
        vectorized.eagle_prepare_next_token_padded(  # §3: writes [:num_reqs]; vLLM's block covers S
            **dc.inputs, **out, vocab_size=dc.scalars["vocab_size"], num_sampled_tokens_per_req=S,
            num_reqs=R, block_size_tokens=S,
        )
        index = np.arange(R)
        return {n: (index, v) for n, v in out.items()}

    def oracle_many(self, dcs: list[DeviceCase]) -> list[dict[str, tuple[np.ndarray, np.ndarray]]]:
        """The NumPy oracle once per vocabulary and width class (``S`` up to a power of two) over
        the concatenation of that group's requests, split back per case: a request's writes depend
        on its own row, discard flag and backup id alone, and a row widened with ``-1`` columns
        to the group's widest ``S`` (the oracle's block that width) has the same valid columns
        (``-1`` is never valid), so the same count and last valid id. Each case gets
        :meth:`oracle`'s writes on it, element for element, bit for bit, in the same order."""
        groups: dict[tuple[int, int], list[int]] = {}
        for k, dc in enumerate(dcs):
            s = dc.scalars
            groups.setdefault((s["vocab_size"], next_power_of_2(s["num_sampled_tokens_per_req"])), []).append(k)
        out: list[dict[str, tuple[np.ndarray, np.ndarray]]] = [{} for _ in dcs]
        for (vocab, _), ks in groups.items():
            R = np.array([dcs[k].scalars["num_reqs"] for k in ks], dtype=np.int64)
            width = max(dcs[k].scalars["num_sampled_tokens_per_req"] for k in ks)
            first = np.cumsum(R) - R
            rows = np.full((int(R.sum()), width), -1, dtype=np.int32)
            for k, f, r in zip(ks, first.tolist(), R.tolist(), strict=True):
                a = dcs[k].inputs["sampled_token_ids"][:r, : dcs[k].scalars["num_sampled_tokens_per_req"]]
                rows[f : f + r, : a.shape[1]] = a
            n = rows.shape[0]
            res = {name: np.empty(n, dtype=np.int32) for name in dcs[ks[0]].outputs}
            vectorized.eagle_prepare_next_token_padded(
                sampled_token_ids=rows,
                discard_request_mask=np.concatenate([dcs[k].inputs["discard_request_mask"][:r] for k, r in zip(ks, R.tolist(), strict=True)]),
                backup_next_token_ids=np.concatenate([dcs[k].inputs["backup_next_token_ids"][:r] for k, r in zip(ks, R.tolist(), strict=True)]),
                **res, vocab_size=vocab, num_sampled_tokens_per_req=width, num_reqs=n, block_size_tokens=width,
            )
            index = np.arange(int(R.max()))
            for k, f, r in zip(ks, first.tolist(), R.tolist(), strict=True):
                out[k] = {name: (index[:r], v[f : f + r]) for name, v in res.items()}
        return out

    def host_features(self, dc: DeviceCase, writes: dict[str, tuple[np.ndarray, np.ndarray]]) -> frozenset[str]:
        """The record's ``features_of`` of a drawn case (its launch fields ``null``: vLLM's block
        ``next_power_of_2(S)``), from the oracle's ``writes`` instead of the record's passes over
        every column: a kept request's valid count (valid: ``id != -1 and id < vocab_size``, as
        both define it) and next token (its last valid id, where it has one); the columns read
        only where a feature needs them (past column 16, ``-1`` counts of ``S >= 16`` rows, a
        last column of ``-1``, the ``2**31 - 2`` id; each skipped where the counts decide it)."""
        a, s = dc.inputs, dc.scalars
        R, S, vocab = s["num_reqs"], s["num_sampled_tokens_per_req"], s["vocab_size"]
        ids = a["sampled_token_ids"][:, :S]
        disc = a["discard_request_mask"][:R]
        kept = ~disc
        discarded = int(np.count_nonzero(disc))
        count = writes["valid_sampled_tokens_count"][1][kept]  # the oracle's rows 0 .. R-1, in order
        tail = kept & (ids[:, -1] == -1)
        suffix = bool((count[tail[kept]] > 0).any()) or bool((ids[tail] != -1).any())
        late = ids[:, 16:]
        checks = {
            "discard_none": discarded == 0,
            "discard_all": discarded == R,
            "discard_some": 0 < discarded < R,
            "full_row": bool((count == S).any()),
            "several_valid_columns": bool((count >= 2).any()),
            "block_past_stride": next_power_of_2(S) > a["sampled_token_ids"].shape[1],
            "minus_one_suffix": suffix,
            "single_column": S == 1,
            "overallocated_buffers": len(a["discard_request_mask"]) > R,
            "several_requests": R > 1,
            "many_requests": R > 64,
            "beyond_1024_requests": R > MAX_NUM_SEQS,
            "spec_tokens_15_plus": S >= SPEC_TOKENS + 1,
            "valid_past_column_16": S > 16 and (bool((count > 16).any())  # 17 valid columns: one past column 15
                                                or bool((kept & ((late != -1) & (late.astype(np.int64) < vocab)).any(axis=1)).any())),
            "many_rejected": S >= 16 and bool((count <= S - 16).any())  # a valid id is not -1: rows of fewer -1 left out
                             and bool((np.count_nonzero(ids[np.flatnonzero(kept)[count <= S - 16]] == -1, axis=1) >= 16).any()),
            "vocab_256k": vocab >= 256000,
            "id_near_int32_max": bool(ids.size) and int(ids.max()) >= INT32_MAX - 1 and bool((ids[kept] == INT32_MAX - 1).any()),
            "ids_past_65535": bool(((writes["next_token_ids"][1][kept] > ID16_MAX) & (count > 0)).any()),
        }
        return frozenset(k for k, v in checks.items() if v)

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
