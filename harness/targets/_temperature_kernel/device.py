"""``_temperature_kernel`` on the device (docs/CONTRACT.md §28): production batches drawn by its
record and checked there by its record's check (:class:`~...targetkit.device.RecordDevice`),
and production-scale steps whose logits pass ``2**31`` elements (the int32 row offset
``token_idx * logits_stride`` of vLLM up to 0.24, the class of #46560 and #47383)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.device import RecordDevice
from ...targetkit.device_draws import lazy_full, scale_rows, scale_vocab
from ...targetkit.scale import flat_limit
from .layout import NAME, build
from .record import TARGET

TEMPERATURES = np.array([0.7, 1.0, 0.0, 1.3], np.float32)
"""The states of a scale step: two divided (0.7, 1.3), one left (1.0), one greedy (0.0)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production step past ``2**31`` logits (a current model's vocabulary, enough rows):
    every row a request's of one of :data:`TEMPERATURES`, the rows past the limit of random
    logits (the others zeros: a table of 8 GiB and more, sparse), as ``Sampler`` hands them over."""
    V = scale_vocab(rng)
    n = scale_rows(rng, V)
    first = -(-flat_limit() // V)
    x = lazy_full((n, V), np.float32)
    x[first - 1 :] = (rng.standard_normal((n - first + 1, V)) * 3).astype(np.float32)
    rows = rng.integers(0, len(TEMPERATURES), size=n)
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
