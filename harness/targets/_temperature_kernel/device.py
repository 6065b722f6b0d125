"""``_temperature_kernel`` on the device (docs/CONTRACT.md §28): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`),
and production-scale steps whose logits pass ``2**31`` elements (the int32 row offset
``token_idx * logits_stride`` of vLLM up to 0.24, the class of #46560 and #47383)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.device import RecordDevice
from ...targetkit.device_draws import lazy_full, scale_vocab
from ...targetkit.scale import flat_limit
from .layout import NAME, build
from .record import TARGET

TEMPERATURES = np.array([0.7, 1.0, 0.0, 1.3], np.float32)
"""The states of a scale step: two divided (0.7, 1.3), one left (1.0), one greedy (0.0)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production step just past ``2**31`` logits (a current model's vocabulary, one to four
    rows past the first row an int32 offset cannot reach): the rows before it zeros of requests
    at T 1 or 0 (now and then divided), the last rows random and divided (0.7 or 1.3): a table
    of 8 GiB, sparse, as ``Sampler`` hands it over."""
    V = scale_vocab(rng)
    first = -(-flat_limit() // V)
    n = first + int(rng.integers(1, 5))
    x = lazy_full((n, V), np.float32)
    x[first - 1 :] = (rng.standard_normal((n - first + 1, V)) * 3).astype(np.float32)
    rows = rng.choice([1, 2], size=n)  # the rows before the limit: T 1 or 0 (not written)
    rows[rng.random(n) < 0.01] = 0  # now and then divided (zeros stay zeros)
    rows[first - 1 :] = rng.choice([0, 3], size=n - first + 1)  # the rows past the limit are divided
    return build(x, rows.tolist(), TEMPERATURES.tolist()).replace(
        note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """One row past ``2**31`` logits of ``case``'s vocabulary: the rows before it left (T 1),
    that row divided by 0.7 (its logits the case's own, or ones), simplest first."""
    V = case.arrays["logits"].shape[1]
    first = -(-flat_limit() // V)
    out = []
    for own in (False, True):
        x = lazy_full((first + 1, V), np.float32)
        x[first] = case.arrays["logits"][min(first, len(case.arrays["logits"]) - 1)] if own else 1.0
        rows = [1] * first + [0]
        out.append(build(x, rows, TEMPERATURES.tolist()).replace(note="the int32 row offset past 2**31, minimised"))
    return out


class _Device(RecordDevice):
    name = NAME
    launch_names = TARGET.launch_names
    record = TARGET
    scale = True

    def scale_case(self, rng: np.random.Generator) -> Case:
        return scale_case(rng)

    def scale_minimal(self, case: Case) -> list[Case]:
        return minimal_scale_cases(case)


DEVICE = _Device()
"""This target's device mode (``--mode device``)."""
