"""Public name of :func:`~.checking.check.assert_case` (``from eaglefuzz.harness.check import
assert_case``): the reproducers eaglefuzz prints and the corpus files it writes call it."""

from .checking.check import DifferenceFound, assert_case

__all__ = ["DifferenceFound", "assert_case"]
