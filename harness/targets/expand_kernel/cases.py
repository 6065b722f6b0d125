"""The production tier of ``expand_kernel`` (docs/CONTRACT.md §12.2, with §12.4's generated
inputs): in-contract cases by construction, one body for the Hypothesis and the bulk driver."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from .layout import USES, build


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary case: mostly vLLM's three uses with ``MAX_NUM_TOKENS = 128`` and an output
    of exactly ``cu[B-1]``; now and then any float32/int32/int64 data, other replace values,
    another power-of-two ``MAX_NUM_TOKENS`` (rows longer than it) or a longer output."""
    regime = c.choice(["small"] * 6 + ["medium"] * 3 + ["tail"])
    top = {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime]
    B = c.integer(1, max(1, top))
    K = c.integer_of([(1, 4), (0, 16), (0, 128)])
    counts = [int(x) for x in c.array(np.int64, B, 0, K)]
    vllm = c.chance(0.6)
    use = c.choice(USES) if vllm else c.choice([*USES, "any_float", "any_int32", "any_int64"])
    M = None if vllm or c.chance(0.5) else 2 ** c.integer(0, 10)
    extra = 0 if vllm or c.chance(0.5) else c.integer(1, 64)
    return build(counts, use=use, seed=c.integer(0, (1 << 32) - 1), M=M, extra=extra,
                 V=c.choice([1000, 32000, 151936, 262144]))  # fmt: skip
