"""The tour of ``_gumbel_sample_kernel``'s production extremes (docs/CONTRACT.md §29.2): a large
vocabulary (token ids, the noise's offsets, past 131072) and positions of a long context (the
noise's counter past 65535)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import RngChooser
from ...generation.strategies import Scale, Shape
from ...targetkit.runner_v2_verify import MAX_MODEL_LEN
from .cases import clear_windows, draw
from .layout import MODES, build


def _large_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    """A random row of a 151936- or 262144-id vocabulary, flat but for a few dozen
    logits (some in the last blocks): the target's sampling or the drafter's."""
    V = int(rng.choice([151936, 262144]))
    T = 1
    logits = np.zeros((T, V), np.float32)
    for t in range(T):
        at = np.append(rng.integers(0, V, size=24), rng.integers(V - 2048, V, size=8))
        logits[t, at] = (rng.standard_normal(at.size) * 2 + 4).astype(np.float32)
    mode = str(rng.choice(["target", "drafter"]))
    seeds = rng.integers(-(2**62), 2**62, size=T + 1)
    temp = np.full(T + 1, np.float32(rng.choice([0.8, 1.0, 1.5])), np.float32)
    pos = rng.integers(0, 5000, size=T)
    if mode == "target":
        case = build(logits, np.arange(T), pos, seeds, temp, mode, fp64=bool(rng.integers(0, 2)))
    else:
        cache = np.zeros((T + 1, 2, V), np.float32)
        case = build(logits, rng.permutation(T + 1)[:T], pos, seeds, temp, mode, cache=cache, col=1)
    return clear_windows(case)


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Rows at positions past 65535 (a context of up to a million tokens), any mode."""
    case = draw(RngChooser(rng), int(rng.integers(1, 9)), int(rng.choice([37, 1000, 1500])),
                str(rng.choice(MODES)), max_pos=MAX_MODEL_LEN)
    pos = case.arrays["pos"].copy()
    pos[0] = rng.integers(1 << 16, MAX_MODEL_LEN)
    return clear_windows(case.replace(arrays={"pos": pos}))


SHAPES = (Shape("long_context", 16, _long_context), Shape("large_vocab", 256, _large_vocab))
