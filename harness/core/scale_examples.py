"""Which examples of a device run are production-scale cases, and which share of a run holds any.

A run's examples are numbered ``0, 1, 2, ...``; a share of it (a shard, a lane: ``--shard K/N``)
takes every ``N``-th from its offset. Of a target with production-scale cases, the examples ``i``
with ``i % SCALE_EVERY == SCALE_AT`` are such a case, wherever a share that draws them holds
them (:mod:`..checking.device_mode.engine`). Kept apart from the engine, so that the process
that starts the lanes (which imports no torch) can tell which of them holds any.
"""

from __future__ import annotations

import math

SCALE_EVERY, SCALE_AT = 8, 3
"""Examples ``i`` with ``i % SCALE_EVERY == SCALE_AT`` of a target with production-scale cases
are such a case (tables past ``2**31`` elements)."""


def holds_scale_examples(offset: int, step: int) -> bool:
    """Whether the share of examples ``offset, offset + step, ...`` holds any scale example:
    some ``offset + m * step`` is ``SCALE_AT`` modulo ``SCALE_EVERY`` (a share of an even
    ``step`` from an even ``offset`` holds none)."""
    return (offset - SCALE_AT) % math.gcd(step, SCALE_EVERY) == 0
