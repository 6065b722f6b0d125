"""The tour of ``_get_num_sampled_and_rejected_kernel``'s production extremes (docs/CONTRACT.md
§18.2): a few rows of a long context, cheap (one program per row)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import INT16_MAX, Scale, Shape
from ...targetkit.runner_v2 import MAX_MODEL_LEN
from .layout import build


def _long_context(rng: np.random.Generator, scale: Scale) -> Case:
    """Up to 8 rows with sequences past 32767 (a 131072-token context): one still prefilling a
    prompt past 32767 tokens, one at the end of such a prompt, the others decoding with up to
    16 drafts, some rejected."""
    B = int(rng.integers(3, 9))
    R = B + int(rng.integers(0, 8))
    rows = rng.permutation(R)[:B]
    nl = rng.integers(1, 18, size=B)
    ns = np.array([int(rng.integers(1, n + 1)) for n in nl])
    seq = rng.integers(INT16_MAX + 1, MAX_MODEL_LEN - 16, size=B)
    prompt = np.array([int(rng.integers(1, s)) for s in seq])
    prompt[0] = seq[0] + int(rng.integers(1, 4096))  # chunked: its prompt is past 32767 too
    prompt[1] = seq[1]
    prompts = rng.integers(1, 4096, size=R)
    prompts[rows] = prompt
    return build(rows, nl, ns, seq, prompts)


SHAPES = (Shape("long_context", 8, _long_context),)
