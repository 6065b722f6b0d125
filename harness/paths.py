"""Where eaglefuzz keeps things on disk; a module of its own so that the command line's
supervising process finds them without importing NumPy, torch or the targets."""

from __future__ import annotations

import os
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
CORPUS_DIR = _CHECKOUT / "corpus" if (_CHECKOUT / "pyproject.toml").is_file() else Path.cwd() / "corpus"
"""The default corpus: the checkout's ``corpus/`` folder (``harness/`` sits next to it); for an
installed (non-editable) eaglefuzz, ``corpus/`` in the working directory."""


def user_cache() -> Path:
    """eaglefuzz's persistent cache: ``$XDG_CACHE_HOME/eaglefuzz`` (``~/.cache/eaglefuzz``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eaglefuzz"
