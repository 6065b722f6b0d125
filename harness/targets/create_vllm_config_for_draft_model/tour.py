"""The tour of ``create_vllm_config_for_draft_model``'s production extremes (docs/CONTRACT.md §5.2):
a large deployment's config, checked by every default run.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...generation.choosers import RngChooser
from ...generation.strategies import (
    SPEC_TOKENS,
    Scale,
    Shape,
)
from . import cases


def _production_extremes(rng: np.random.Generator, scale: Scale) -> Case:
    """A large deployment: max_num_seqs 1024+, 64k+ batched tokens, 15+ speculative tokens,
    max_model_len in the millions."""
    case = cases.body(RngChooser(rng), scale)
    length = int(rng.integers(1 << 20, 10_000_001))
    return case.replace(scalars={
        "speculative_config_present": True,
        "scheduler.max_num_seqs": int(rng.choice([1024, 2048, 4096])) + int(rng.integers(0, 2)),
        "scheduler.max_num_batched_tokens": int(rng.choice([1 << 16, 1 << 17, 1 << 18])),
        "spec.num_speculative_tokens": int(rng.integers(SPEC_TOKENS, 33)),
        "target_model.max_model_len": length,
        "draft_model.max_model_len": length if rng.random() < 0.5 else int(rng.integers(1 << 20, 10_000_001)),
    })


SHAPES = (Shape("production_extremes", 1, _production_extremes),)
