"""The production tier of ``create_vllm_config_for_draft_model`` (docs/CONTRACT.md §5.2): in-contract
cases by construction, one body for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

from ...core.case import Case
from ...generation.choosers import Chooser
from ...generation.strategies import Scale
from .layout import NAME, OTHER_SCALARS, PRODUCTION_METHOD, SAME_AS_TARGET, SIDES, SPEC_METHODS


def _value(c: Chooser, enc: Any) -> Any:
    """A value of a field encoded as ``enc`` (see :mod:`.layout`): small ones first."""
    if isinstance(enc, tuple) and enc[0] == "optional":
        return c.optional(lambda c: _value(c, enc[1]))
    if enc == "bool":
        return c.boolean()
    if isinstance(enc, tuple):
        return c.integer(0, len(enc) - 1)
    if enc == "size":
        return c.integer(1, 1 << 16) if c.boolean() else c.choice([1, 2, 4, 8])
    return c.integer_of([(0, 7), (0, (1 << 31) - 1)])


def _differing(c: Chooser, enc: Any, other: Any) -> Any:
    """A value of ``enc`` other than ``other``."""
    if enc == "bool":
        return not other
    if isinstance(enc, tuple) and enc[0] != "optional":
        return c.choice([i for i in range(len(enc)) if i != other])
    if isinstance(enc, tuple) and isinstance(enc[1], tuple):
        return c.choice([v for v in (None, *range(len(enc[1]))) if v != other])
    for _ in range(8):
        v = _value(c, enc)
        if v != other:
            return v
    return _next_to(enc, other)


def _next_to(enc: Any, other: Any) -> Any:
    """A value of ``enc`` (an int or a size, perhaps optional) other than ``other``, next to it."""
    if isinstance(enc, tuple):  # ("optional", "int" | "size")
        return None if other is not None else _next_to(enc[1], None)
    low, high = (1, 1 << 16) if enc == "size" else (0, (1 << 31) - 1)
    if other is None:
        return low
    return other + 1 if other < high else other - 1


def body(c: Chooser, scale: Scale) -> Case:
    """An ordinary production case (docs/CONTRACT.md §5.2), as ``DraftModelProposer`` hands it
    over: a target config with a speculative config of the ``draft_model`` method, the drafter's
    tensor-parallel size the target's, and the drafter's other fields differing from the target's
    in every field or, field by field, equal to them or not."""
    # choice() shrinks toward its first entry: toward draft configs that differ from the
    # target's in every field vLLM lets differ (what exposes most bugs).
    differ = c.choice([True, False])
    scalars: dict[str, Any] = {}
    for side, fields in SIDES.items():
        twin = "target" + side[5:] if side.startswith("draft") else None
        for f, enc in fields.items():
            if twin is not None and f in SAME_AS_TARGET:
                scalars[f"{side}.{f}"] = scalars[f"{twin}.{f}"]
            elif twin is not None and differ:
                scalars[f"{side}.{f}"] = _differing(c, enc, scalars[f"{twin}.{f}"])
            elif twin is not None:  # equal to the target's or not, field by field (same_rank)
                scalars[f"{side}.{f}"] = scalars[f"{twin}.{f}"] if c.boolean() else _value(c, enc)
            else:
                scalars[f"{side}.{f}"] = _value(c, enc)
    for key, enc in OTHER_SCALARS.items():
        scalars[key] = _value(c, enc)
    scalars["speculative_config_present"] = True
    scalars["spec.method"] = SPEC_METHODS.index(PRODUCTION_METHOD)
    scalars["quant_config_present"] = c.choice([True, False])
    return Case(NAME, {}, scalars)
