"""How a case of ``_compute_local_logits_stats_kernel`` is built (docs/CONTRACT.md §30.1): a
verification step's target logits, the drafter's cache (or none: one-hot drafts), each logits
row's state row and step (§17's expansion), the temperatures and the vocabulary the kernels see
(``min`` of the two widths)."""

from __future__ import annotations

import numpy as np

from ...core.case import Case
from ...targetkit.runner_v2_verify import Step

NAME = "_compute_local_logits_stats_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


def build(step: Step, vocab_size: int | None = None) -> Case:
    """The statistics stage of ``step`` (``vocab_size``: ``None``, the step's; narrower: the
    extended tier)."""
    arrays = {"target_logits": step.target_logits}
    if step.draft_logits is not None:
        arrays["draft_logits"] = step.draft_logits
    arrays |= {"expanded_idx_mapping": step.expanded_idx_mapping, "expanded_local_pos": step.expanded_local_pos,
               "temperature": step.temperature}
    return Case(NAME, arrays, {"vocab_size": int(step.V if vocab_size is None else vocab_size)}, {})


def requests(elp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first row, rows)`` of each request of a step's ``expanded_local_pos`` (runs from 0)."""
    starts = np.flatnonzero(np.asarray(elp) == 0)
    return starts, np.diff(np.append(starts, len(elp)))


def keep_requests(case: Case, keep: list[int]) -> Case:
    """``case`` with only the requests ``keep`` (their logits rows; the state as it is)."""
    a = case.arrays
    starts, counts = requests(a["expanded_local_pos"])
    rows = np.concatenate([np.arange(starts[r], starts[r] + counts[r]) for r in keep]) if keep else np.zeros(0, np.int64)
    return case.replace(arrays={k: a[k][rows].copy() for k in ("target_logits", "expanded_idx_mapping", "expanded_local_pos")})
