"""Public name of :class:`~.core.case.Case` (``from eaglefuzz.harness.case import Case``): the
reproducers eaglefuzz prints and the corpus files it writes import it from here."""

from .core.case import Case

__all__ = ["Case"]
