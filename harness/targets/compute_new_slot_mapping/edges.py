"""The extended tier of ``compute_new_slot_mapping``: docs/CONTRACT.md §7.4, and the hazard
draws past it.

Extended tier: inputs vLLM's caller does not make where every lookup stays in the table (§7.1
defines them): an empty batch, ``N = 0``, empty queries, positions not in section 1's layout
(scattered, rejected ones other than 0) and live positions at or past ``max_model_len`` (the
mask and the clamp engage).

Hazard draws (``eaglefuzz audit`` only): a block table narrower than ``max_model_len`` needs
(``nb * bs < M``, PR #54296's class): the flat index ``r*nb + q // bs`` runs into the next
request's row, and past the last row it raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import Scale, cdiv
from ...targetkit.block_tables import BLOCK_SIZES
from .layout import Tokens, build, is_vllm_layout

FEATURES = {
    "empty_batch": "no request at all (R = 0: an empty result)",
    "n_zero": "num_new_tokens = 0 (outside vLLM's use, defined by the contract)",
    "empty_query": "a request with no query token (qlen = 0: only its N new tokens)",
    "scattered_positions": "positions not in vLLM's layout (any per token)",
    "past_max": "an unrejected token at or past max_model_len (PADDING_SLOT_ID)",
    "rejected_past_max": "a rejected token whose position is past max_model_len",
}

HAZARDS = {
    "block_columns_past_row": "a table narrower than max_model_len needs (PR #54296's class): a lookup "
                              "past the row's last column reads the next request's row (or past the table)",
}
"""Hazard draws past the extended tier, by class (the audit's ``beyond`` tier)."""


def features_of(case: Case) -> frozenset[str]:
    t = Tokens(case)
    lens = np.diff(case.arrays["query_start_loc"].astype(np.int64))
    checks = {
        "empty_batch": t.R == 0,
        "n_zero": t.N == 0,
        "empty_query": np.any(lens == 0),
        "scattered_positions": not is_vllm_layout(t),
        "past_max": np.any(~t.rejected & t.past),
        "rejected_past_max": np.any(t.rejected & t.past),
    }
    return frozenset(k for k, ok in checks.items() if ok)


def _body(c: Chooser, scale: Scale) -> Case:
    R = 0 if c.chance(0.1) else c.integer(1, max(1, min(8, scale.max_requests)))
    cap = c.choice([4, 16, scale.max_query_len])
    lengths = c.array_of(np.int64, R, [(0, cap), (1, cap)]).tolist()
    return build(
        lengths, c.choice([0, 1, 2, 3, 7]), c.choice(BLOCK_SIZES),
        nb=c.integer(1, 16), fit=c.choice(["exact", "fits"]), layout=c.choice(["vllm", "scattered"]),
        ids=c.choice(["small", "any"]), seed=c.integer(0, (1 << 32) - 1), views=c.boolean(),
        p0_near_end=c.boolean(), production=False,
    )  # fmt: skip


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(_body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """Positions of the rejected tokens set to 0."""
    a = case.arrays
    rej = a["is_rejected_token_mask"]
    if np.any(a["new_positions"][rej] != 0):
        pos = a["new_positions"].copy()
        pos[rej] = 0
        yield case.replace(arrays={"new_positions": pos})


# -- hazard draws (the audit's beyond tier) -----------------------------------------------


def hazards_of(case: Case) -> frozenset[str]:
    a, s = case.arrays, case.scalars
    return frozenset({"block_columns_past_row"} if a["block_table"].shape[1] * s["block_size"] < s["max_model_len"] else ())


def _hazard_body(c: Chooser, scale: Scale) -> Case:
    R = c.integer(1, 4)
    bs = c.choice([1, 2, 4, 16])
    lengths = c.array_of(np.int64, R, [(1, 8)]).tolist()
    case = build(lengths, c.integer(1, 3), bs, nb=c.integer(1, 4), fit="exact", layout="vllm", ids="small",
                 seed=c.integer(0, (1 << 32) - 1), views=False, p0_near_end=True)
    a, M = case.arrays, case.scalars["max_model_len"]
    nb = a["block_table"].shape[1]
    narrow = c.integer(1, nb) if nb > 1 else 1  # the table keeps nb - narrow columns (at least one)
    keep = max(1, nb - narrow)
    if keep * bs >= M:  # one column short of M still: shrink M's table by one column
        keep = max(1, cdiv(M, bs) - 1)
    if keep * bs >= M:
        return case  # M fits one column: no narrower table (a production case, passed over)
    table = (np.arange(R * keep, dtype=np.int64).reshape(R, keep) * 7 + 3).astype(np.int32)  # distinct ids
    arrays = {"block_table": table}
    if R > 1 and c.boolean():  # the last request starts at 0: only earlier ones run into a next row
        pos, rej = a["new_positions"].copy(), a["is_rejected_token_mask"]
        n = lengths[-1] + case.scalars["num_new_tokens"]
        live = np.flatnonzero(~rej[len(pos) - n :]) + len(pos) - n
        pos[live] = np.arange(len(live))
        arrays["new_positions"] = pos
    return case.replace(arrays=arrays)


def hazard_case(rng: np.random.Generator, scale: Scale) -> Case:
    return _hazard_body(RngChooser(rng), scale)


def hazard_strategy(scale: Scale) -> Any:
    return as_strategy(_hazard_body, scale)
