"""The production tier of ``create_vllm_config_for_draft_model`` (docs/CONTRACT.md §5.2): in-contract
cases by construction, for the Hypothesis and the bulk driver.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from ...core.case import Case
from .layout import NAME, OTHER_SCALARS, SIDES


def _random_value(rng: np.random.Generator, enc: Any) -> Any:
    if isinstance(enc, tuple) and enc[0] == "optional":
        return None if rng.random() < 0.4 else _random_value(rng, enc[1])
    if enc == "bool":
        return bool(rng.random() < 0.5)
    if isinstance(enc, tuple):
        return int(rng.integers(0, len(enc)))
    if enc == "size":
        return int(rng.choice([1, 2, 4, 8, int(rng.integers(1, 1 << 16))]))
    return int(rng.choice([0, 1, int(rng.integers(0, 1 << 16)), int(rng.integers(0, 1 << 31))]))


def _values(enc: Any) -> st.SearchStrategy[Any]:
    if isinstance(enc, tuple) and enc[0] == "optional":
        return st.none() | _values(enc[1])
    if enc == "bool":
        return st.booleans()
    if isinstance(enc, tuple):
        return st.integers(0, len(enc) - 1)
    if enc == "size":
        return st.sampled_from([1, 2, 4, 8]) | st.integers(1, 1 << 16)
    return st.integers(0, 7) | st.integers(0, (1 << 31) - 1)


def _differing(enc: Any, other: Any) -> st.SearchStrategy[Any]:
    """Values of ``enc`` other than ``other``."""
    if enc == "bool":
        return st.just(not other)
    if isinstance(enc, tuple) and enc[0] != "optional":
        return st.sampled_from([i for i in range(len(enc)) if i != other])
    if isinstance(enc, tuple) and isinstance(enc[1], tuple):
        return st.sampled_from([v for v in (None, *range(len(enc[1]))) if v != other])
    if isinstance(enc, tuple):
        return _values(enc).filter(lambda v: v != other)
    return _values(enc).filter(lambda v: v != other)


def random_plain(rng: np.random.Generator) -> Case:
    """A random case (bulk mode), draft fields differing from the target's 7 times in 10."""
    differ = bool(rng.random() < 0.7)
    scalars: dict[str, Any] = {}
    for side, fields in SIDES.items():
        twin = "target" + side[5:] if side.startswith("draft") else None
        for f, enc in fields.items():
            key = f"{side}.{f}"
            v = _random_value(rng, enc)
            if twin is not None and differ:
                while v == scalars[f"{twin}.{f}"]:
                    v = _random_value(rng, enc)
            scalars[key] = v
    for key, enc in OTHER_SCALARS.items():
        scalars[key] = _random_value(rng, enc)
    scalars["speculative_config_present"] = bool(rng.random() < 0.85)
    return Case(NAME, {}, scalars)


@st.composite
def _cases(draw: st.DrawFn) -> Case:
    # sampled_from shrinks toward its first entry: toward a present speculative config and
    # draft configs that differ from the target's in every field (what exposes most bugs).
    present = draw(st.sampled_from([True, True, True, False]))
    differ = draw(st.sampled_from([True, False]))
    scalars: dict[str, Any] = {}
    for side, fields in SIDES.items():
        twin = "target" + side[5:] if side.startswith("draft") else None
        for f, enc in fields.items():
            if twin is not None and differ:
                scalars[f"{side}.{f}"] = draw(_differing(enc, scalars[f"{twin}.{f}"]))
            elif twin is not None:  # equal to the target's or not, field by field (same_rank)
                scalars[f"{side}.{f}"] = draw(_values(enc) | st.just(scalars[f"{twin}.{f}"]))
            else:
                scalars[f"{side}.{f}"] = draw(_values(enc))
    for key, enc in OTHER_SCALARS.items():
        scalars[key] = draw(_values(enc))
    scalars["speculative_config_present"] = present
    scalars["quant_config_present"] = draw(st.sampled_from([True, False]))
    return Case(NAME, {}, scalars)
