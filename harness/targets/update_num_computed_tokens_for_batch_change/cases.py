"""The production tier of ``update_num_computed_tokens_for_batch_change`` (docs/CONTRACT.md §8.2):
in-contract cases by construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from .layout import MODES, build


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §8.2): eager or compiled (every size >= 2
    compiled: one graph), a small, medium or tail-sized batch, a previous batch as large,
    smaller or larger, requests mapped to distinct previous rows in order or shuffled, some of
    them new (-1), valid counts of the rejection sampler's rows, counts small or long."""
    mode = c.choice(MODES)
    low = 2 if mode == "compiled" else 1
    regime = c.choice(["small"] * 6 + ["medium"] * 3 + ["tail"])
    top = max(low, {"small": 8, "medium": scale.max_requests, "tail": scale.request_tail}[regime])
    n = c.integer(low, top)
    how = c.choice(["same", "smaller", "larger"])
    P = n if how == "same" else c.integer(low, max(low, n)) if how == "smaller" else n + c.integer(1, 8)
    return build(
        n, P, mode,
        extra=c.integer_of([(0, 0), (1, 64)]),
        order=c.choice(["identity", "shuffled"]),
        new_share=c.choice([0.0, 0.2, 0.5, 1.0]),
        values=c.choice(["small", "long"]),
        seed=c.integer(0, (1 << 32) - 1),
    )  # fmt: skip
