"""The production tier of ``eagle_prepare_inputs_padded_kernel`` (docs/CONTRACT.md §2.2): in-contract
cases by construction, for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale, request_count_ranges
from .layout import build


def _request(c: Chooser, max_d: int) -> tuple[int, int, int]:
    """One request: ``d`` drafts, its valid count (0 or 1 without drafts: a discarded request
    or a prefill; 1 to ``d + 1`` with them) and the tokens beyond ``d + 1`` it holds."""
    d = c.integer(0, max_d)
    valid = c.integer(0, 1) if d == 0 else c.integer(1, d + 1)
    extra = c.integer_of([(0, 3), (0, 300)])
    return d, valid, extra


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §2.2): up to 16 drafts per request, any
    number accepted, prefills and decodes, vLLM's grid (``num_reqs`` programs)."""
    R = c.integer_of(request_count_ranges(scale))
    max_d = c.integer(0, 16)
    reqs = c.repeat(R, lambda c: _request(c, max_d))
    drafts, valid, extra = (list(x) for x in zip(*reqs, strict=True))
    return build(drafts, valid, extra, None)
