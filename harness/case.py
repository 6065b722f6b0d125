"""Public name of :class:`~.core.case.Case` (``from eaglefuzz.harness.case import Case``): the
reproducers eaglefuzz prints and the corpus files it writes import it from here; a reproducer of
a large array that is mostly one value imports :func:`~.core.case.sparse` too."""

from .core.case import Case, sparse

__all__ = ["Case", "sparse"]
