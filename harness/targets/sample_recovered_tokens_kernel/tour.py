"""The tour of production extremes of ``sample_recovered_tokens_kernel`` (docs/CONTRACT.md
§13): cheap-but-large shapes, cheapest first. A program costs its tiles (``V / 8192``); the
grid is ``B x max_spec_len``."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.strategies import MAX_NUM_SEQS, Scale, Shape
from ...targetkit.draft_rows import MAX_VOCAB
from .layout import build, tile_tie


def _tile_tie(rng: np.random.Generator, scale: Scale) -> Case:
    """vLLM's 8192-token tiles with the largest score on both sides of a tile boundary: one
    request of 1 or 2 drafts over 16385-24576 ids."""
    n = int(rng.integers(1, 3))
    return tile_tie([n], n, V=int(rng.integers(2 * 8192 + 1, 3 * 8192 + 1)), seed=int(rng.integers(0, 1 << 32)),
                    fp64=bool(rng.random() < 0.3))  # fmt: skip


def _big_vocab(rng: np.random.Generator, scale: Scale) -> Case:
    """Gemma 3's vocabulary (32 tiles): one request of 1 to 3 drafts, sparse rows (winners
    anywhere, most past 32767; zeros elsewhere keep the case's file small)."""
    n = int(rng.integers(1, 4))
    return build([n], n, V=MAX_VOCAB, seed=int(rng.integers(0, 1 << 32)), target_kind="sparse",
                 draft_kind=None if rng.random() < 0.5 else "sparse", fp64=bool(rng.random() < 0.3))  # fmt: skip


def _sixteen_drafts(rng: np.random.Generator, scale: Scale) -> Case:
    """num_speculative_tokens = 16: up to 3 requests, one of 16 drafts, the others ragged."""
    B = int(rng.integers(1, 4))
    counts = [int(x) for x in rng.integers(0, 17, size=B)]
    counts[int(rng.integers(0, B))] = 16
    return build(counts, 16, V=int(rng.choice([100, 1000])), seed=int(rng.integers(0, 1 << 32)),
                 target_kind=str(rng.choice(["peaked", "random", "tied"])),
                 draft_kind=None if rng.random() < 0.5 else "random", fp64=bool(rng.random() < 0.3))  # fmt: skip


def _many_requests(rng: np.random.Generator, scale: Scale) -> Case:
    """max_num_seqs and more: 1025-1088 requests of one draft each, a small vocabulary."""
    B = int(rng.integers(MAX_NUM_SEQS + 1, MAX_NUM_SEQS + 65))
    return build([1] * B, 1, V=int(rng.choice([16, 64])), seed=int(rng.integers(0, 1 << 32)),
                 target_kind=str(rng.choice(["random", "tied", "sparse"])),
                 draft_kind=None if rng.random() < 0.5 else "random", fp64=bool(rng.random() < 0.3))  # fmt: skip


SHAPES = (
    Shape("tile_tie", 2, _tile_tie),
    Shape("big_vocab", 3, _big_vocab),
    Shape("sixteen_drafts", 48, _sixteen_drafts),
    Shape("many_requests", MAX_NUM_SEQS + 64, _many_requests),
)
