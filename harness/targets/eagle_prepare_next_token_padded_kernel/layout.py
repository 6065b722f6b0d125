"""How a case of ``eagle_prepare_next_token_padded_kernel`` is built (docs/CONTRACT.md §3.1): the
sampled rows, the discard mask, the backup ids; and a case cut down to some of its requests.
"""

from __future__ import annotations

import numpy as np

from ...core.case import Case

NAME = "eagle_prepare_next_token_padded_kernel"
"""The target's name (its registry key, folder and vLLM name)."""


I32, BOOL = np.dtype(np.int32), np.dtype(np.bool_)


MAX_SAMPLED = 33
MAX_SPEC_LEN = 128
"""vLLM's ``MAX_SPEC_LEN``: the rejection sampler takes at most this many drafts per request, so the
production tier's ``S = max_spec_len + 1`` is at most 129 (docs/CONTRACT.md §3.2)."""
MAX_EXTENDED_S = 256
"""The extended tier's largest ``S``: vLLM's block ``next_power_of_2(S)`` grows with ``S``, and Triton
refuses a block past ``2**20`` elements on every backend (docs/CONTRACT.md §3.4)."""


def build(
    rows: np.ndarray,
    discard: np.ndarray,
    backup: np.ndarray,
    vocab: int,
    S: int,
    block: int | None,
    grid: int | None,
) -> Case:
    return Case(
        kernel=NAME,
        arrays={
            "sampled_token_ids": rows.astype(np.int32),
            "discard_request_mask": discard.astype(np.bool_),
            "backup_next_token_ids": backup.astype(np.int32),
        },
        scalars={"vocab_size": int(vocab), "num_sampled_tokens_per_req": int(S), "num_reqs": int(rows.shape[0])},
        launch={"block_size_tokens": block, "grid_size": grid},
    )


def subset(
    case: Case,
    keep: list[int],
    *,
    rows: np.ndarray | None = None,
    S: int | None = None,
    tail: bool = True,
    block: int | None | str = "same",
    grid: int | None | str = "same",
) -> Case:
    """``case`` with only the requests ``keep`` (a padded grid and over-allocated buffers keep
    their padding), optionally other rows, S, block or grid."""
    a, s = case.arrays, case.scalars
    R = s["num_reqs"]
    rows = a["sampled_token_ids"] if rows is None else rows
    disc, backup = a["discard_request_mask"], a["backup_next_token_ids"]
    extra_disc, extra_backup = (disc[R:], backup[R:]) if tail else (disc[:0], backup[:0])
    block = case.launch.get("block_size_tokens") if block == "same" else block
    grid = case.launch.get("grid_size") if grid == "same" else grid
    return build(
        rows[keep],
        np.concatenate([disc[keep], extra_disc]),
        np.concatenate([backup[keep], extra_backup]),
        s["vocab_size"], s["num_sampled_tokens_per_req"] if S is None else S, block,
        None if grid is None else len(keep) + (grid - R),
    )
