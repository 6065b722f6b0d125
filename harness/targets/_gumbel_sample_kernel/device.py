"""``_gumbel_sample_kernel`` on the device (docs/CONTRACT.md §29): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`), and
production-scale steps whose logits pass ``2**31`` elements (the int32 row offset ``token_idx *
logits_stride`` of vLLM up to 0.24.0, fixed by #46560), checked on the device a block of rows at
a time against the torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.gumbel_sample_rows`: the
murmur3 noise bit for bit, each block's candidates) and confirmed by the NumPy and Numba oracles
on the rows past the limit (:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.device_draws import lazy_full, scale_vocab
from ...targetkit.runner_v2_verify import MAX_MODEL_LEN, SAMPLE_BLOCK
from ...targetkit.scale import past_limit
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row
from ...targetkit.scale_rows import minimal_request_rows, scale_request_rows
from .layout import build, keep_rows, windows
from .record import TARGET

NAME = "_gumbel_sample_kernel"
SMALL = ("expanded_idx_mapping", "seeds", "pos", "temperature")
"""The case's arrays of a few elements per row or state row (copied to the device whole)."""


def _case(counts: list[int], V: int, temperature: np.ndarray, seeds: np.ndarray, pos: np.ndarray,  # noqa: N803
          fp64: bool) -> Case:  # fmt: skip
    """The target's sampling (``Sampler._sample_random``) of requests of ``counts`` rows (state
    rows ``0 .. B-1``), zero logits (the caller writes the live rows)."""
    rows = np.repeat(np.arange(len(counts)), counts)
    return build(lazy_full((int(sum(counts)), V), np.float32), rows.tolist(), pos.tolist(), seeds.tolist(),
                 temperature.tolist(), "target", fp64=fp64)


def scale_case(rng: np.random.Generator) -> Case:
    """A production sampling step just past ``2**31`` logits (a current model's vocabulary,
    ``max_num_seqs x (1 + K)`` rows): greedy requests of 16 drafts and their bonus row, zero
    logits, up to a few rows before the limit, then a request of 17 rows across it, random
    (temperature 0.7, 1 or 1.3: the noise of its seed and positions, float64 in one step in
    four) or greedy, its rows random logits (top-k masked now and then); any int64 seeds. A
    step whose live rows meet a window (a margin within the noise's bound) is re-keyed."""
    V = scale_vocab(rng)
    counts = scale_request_rows(rng, first_row(V))
    B = len(counts)
    temperature = np.zeros(B, np.float32)
    temperature[-1] = rng.choice([0.7, 1.0, 1.3, 1.0, 0.0])
    seeds = rng.integers(-(2**63), 2**63 - 1, size=B, dtype=np.int64, endpoint=True)
    p0 = rng.integers(0, MAX_MODEL_LEN - 64, size=B)
    pos = np.concatenate([p0[r] + np.arange(c) for r, c in enumerate(counts)]).astype(np.int64)
    case = _case(counts, V, temperature, seeds, pos, bool(rng.random() < 0.25))
    x = (rng.standard_normal((counts[-1], V)) * 3).astype(np.float32)
    if temperature[-1] and rng.random() < 0.3:  # top-k: all but k logits of each row masked (processed logits)
        keep = int(rng.integers(1, min(64, V) + 1))
        np.put_along_axis(x, np.argsort(x, axis=1)[:, : V - keep], -np.inf, axis=1)
    live = list(range(int(sum(counts[:-1])), int(sum(counts))))
    case.arrays["logits"][live[0] :] = x
    for _ in range(8):  # production meets no window: a new key for a request that does
        if not windows(keep_rows(case, live)):
            break
        case.arrays["seeds"][-1] = rng.integers(-(2**63), 2**63 - 1, dtype=np.int64, endpoint=True)
    return case.replace(note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """The smallest steps with a row past ``2**31`` logits of ``case``'s vocabulary, a table of
    zeros: greedy requests of 17 rows up to the limit, then one row past it holding a single
    logit 1 at its last column, greedy, then random (temperature 1, seed 0, position 0)."""
    V = case.arrays["logits"].shape[1]
    counts = [*minimal_request_rows(first_row(V))[:-1], 1]
    B = len(counts)
    out = []
    for t in (0.0, 1.0):
        temperature = np.zeros(B, np.float32)
        temperature[-1] = t
        m = _case(counts, V, temperature, np.zeros(B, np.int64), np.zeros(int(sum(counts)), np.int64), False)
        m.arrays["logits"][first_row(V), V - 1] = 1.0
        out.append(m.replace(note="the int32 row offset past 2**31, minimised"))
    return out


def checked_rows(case: Case) -> list[int]:
    """The rows the NumPy and Numba oracles confirm a scale finding on: the row before the
    limit and every row past it."""
    n, V = case.arrays["logits"].shape
    return list(range(max(0, min(first_row(V), n) - 1), n))


class _Device(ScaleRecordDevice):
    tables = ("logits",)
    small = SMALL

    def reached(self, case: Case) -> frozenset[str]:
        """The scale feature alone at production scale (the others look at every row)."""
        n, W = case.arrays["logits"].shape
        if past_limit((n - 1) * W):
            return frozenset({"row_offset_past_2_31"})
        return TARGET.features_of(case)

    def checks_at_scale(self, case: Case) -> bool:
        """The target's sampling (no cache): the drafter's goes through the record's check."""
        return "logits_cache" not in case.arrays

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """Every block's winner and maximum, a block of rows at a time, against the torch oracle
        (the target's sampling without a cache)."""
        sc, sm = case.scalars, run.small
        if "logits_cache" in case.arrays:
            raise ValueError("a production-scale case of the Gumbel kernel samples the target's logits (no cache)")
        V = case.arrays["logits"].shape[1]
        table, outs = run.tables["logits"], run.outs
        count = torch.zeros((), dtype=torch.int64, device=run.device)
        for lo, hi in table.blocks():
            res = tensor_ops_v2.gumbel_sample_rows(
                table.rows(lo, hi), sm["expanded_idx_mapping"][lo:hi], sm["seeds"], sm["pos"][lo:hi], sm["temperature"],
                bool(sc.get("apply_temperature")), bool(sc.get("is_drafting")), bool(sc.get("use_fp64")), V, SAMPLE_BLOCK)
            count += tensor_ops_v2.gumbel_mismatches(res, outs["local_argmax"].view[lo:hi], outs["local_max"].view[lo:hi],
                                                     SAMPLE_BLOCK)
            del res
        return count

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        rows = checked_rows(case)
        return keep_rows(case, rows), rows


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
