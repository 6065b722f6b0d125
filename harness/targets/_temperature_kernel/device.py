"""``_temperature_kernel`` on the device (docs/CONTRACT.md §28): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`),
and production-scale steps whose logits pass ``2**31`` elements (the int32 row offset
``token_idx * logits_stride`` of vLLM up to 0.24.0, fixed by #46560; #47383 is the same class in
the rejection sampler's kernels), checked on the device a block of rows at a time against the
torch oracle (:func:`~eaglefuzz.oracles.tensor_ops_v2.temperature_rows`) and confirmed by the
NumPy and Numba oracles on the rows past the limit (:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ...core.case import Case
from ...targetkit.device_draws import lazy_full, scale_vocab
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row
from ...targetkit.scale_rows import mismatches
from .layout import build
from .record import TARGET

TEMPERATURES = np.array([0.7, 1.0, 0.0, 1.3], np.float32)
"""The states of a scale step: two divided (0.7, 1.3), one left (1.0), one greedy (0.0)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production step just past ``2**31`` logits (a current model's vocabulary, one to four
    rows past the first row an int32 offset cannot reach: ``max_num_seqs x (1 + K)`` rows of a
    262144-id vocabulary are past it from 8192 rows on): the rows before it zeros of requests at
    T 1 or 0 (one in a hundred divided), the row before the limit and the rows past it random
    logits, divided (0.7 or 1.3) or greedy: a table of 8 GiB, sparse, as ``Sampler`` hands it
    over."""
    V = scale_vocab(rng)
    first = first_row(V)
    n = first + int(rng.integers(1, 5))
    x = lazy_full((n, V), np.float32)
    x[first - 1 :] = (rng.standard_normal((n - first + 1, V)) * 3).astype(np.float32)
    rows = rng.choice([1, 2], size=n)  # the rows before the limit: T 1 or 0 (not written)
    rows[rng.random(n) < 0.01] = 0  # now and then divided (zeros stay zeros)
    rows[first - 1 :] = rng.choice([0, 3, 3, 2], size=n - first + 1)  # the rows past the limit mostly divided
    rows[-1] = rng.choice([0, 3])
    return build(x, rows.tolist(), TEMPERATURES.tolist()).replace(
        note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """One row past ``2**31`` logits of ``case``'s vocabulary, a table of zeros: the rows before
    it left (T 1), that row divided by 0.7 (a single logit 1 at its last column, then the
    case's own last row), simplest first."""
    V = case.arrays["logits"].shape[1]
    first = first_row(V)
    out = []
    for own in (False, True):
        x = lazy_full((first + 1, V), np.float32)
        if own:
            x[first] = case.arrays["logits"][-1]
        else:
            x[first, V - 1] = 1.0
        rows = [1] * first + [0]
        out.append(build(x, rows, TEMPERATURES.tolist()).replace(note="the int32 row offset past 2**31, minimised"))
    return out


def checked_rows(case: Case) -> list[int]:
    """The rows the NumPy and Numba oracles confirm a scale finding on: the row before the
    limit and every row past it."""
    n, V = case.arrays["logits"].shape
    return list(range(max(0, min(first_row(V), n) - 1), n))


class _Device(ScaleRecordDevice):
    tables = ("logits",)
    in_place = ("logits",)
    small = ("expanded_idx_mapping", "temperature")

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """The logits, a block of rows at a time, against the torch oracle on the rows as given
        (every element: divided ones within 2 ulp, the others bit for bit)."""
        table, sm = run.tables["logits"], run.small
        bad = torch.zeros((), dtype=torch.int64, device=run.device)
        t_rows = sm["temperature"][sm["expanded_idx_mapping"]]
        V = case.scalars.get("vocab_size")
        for lo, hi in table.blocks():
            expected, bound = tensor_ops_v2.temperature_rows(table.rows(lo, hi), t_rows[lo:hi], V)
            bad += mismatches(table.view[lo:hi], expected, bound)
            del expected, bound
        return bad

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        rows = checked_rows(case)
        return TARGET.join_requests(case, rows), rows

    def verified(self, case: Case, run: ScaleRun) -> int:
        return TARGET.output_tokens(case)


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
