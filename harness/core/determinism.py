"""The same seed draws the same cases in any process, on any machine.

Hypothesis (6.131 and later) mixes into its draws the constants it finds in the source of
the "local" modules loaded so far, parsed within a time limit. Which modules are loaded
differs between a CLI run, a pytest worker that ran other tests first, an editable and an
installed eaglefuzz, and a user's ``--kernels`` file; and the time limit depends on the load of
the machine. So the same seed could draw other cases. :func:`pin_generation` makes Hypothesis
draw from its own built-in constants only, which are the same everywhere.
"""

from __future__ import annotations


def pin_generation() -> bool:
    """Stop Hypothesis from drawing the constants of loaded modules; ``True`` when done, ``False``
    on a Hypothesis that has no such feature (nothing to pin)."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError:
        return False
    if not hasattr(providers, "_get_local_constants"):
        return False
    none = Constants()
    providers._get_local_constants = lambda: none  # noqa: SLF001 - no public switch exists
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    inner = getattr(cache, "cache", cache)  # an LRUCache over a (thread-local) OrderedDict
    if hasattr(inner, "clear"):
        inner.clear()  # entries cached before the pin may hold local constants
    return True
