"""Where eaglefuzz keeps things on disk; a module of its own so that the command line's
supervising process finds them without importing NumPy, torch or the targets.

The regression corpus is read from where eaglefuzz's code lies; findings are written where the
user can write:

* In a checkout (``harness/`` beside ``pyproject.toml``; an editable install too) both are the
  checkout's ``corpus/``: findings about production code join the regression corpus.
* In an installed wheel the corpus is the package data ``eaglefuzz/corpus/`` (a copy of the
  checkout's, read-only: never written), and findings about production code are saved to
  ``corpus/`` in the working directory. ``replay`` and the ready suite (``pytest --kernels``)
  replay the regression corpus and that folder, when it exists.

Findings about other code go to ``./eaglefuzz-findings`` in both (``sources.findings_dir``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
"""The checkout, or the installed package's folder (``site-packages/eaglefuzz``)."""
CHECKOUT = (_ROOT / "pyproject.toml").is_file()
"""Whether this eaglefuzz runs from a checkout (else from an installed wheel)."""
CORPUS_DIR = _ROOT / "corpus"
"""The regression corpus: the checkout's ``corpus/``, or the installed ``eaglefuzz/corpus/``."""


def findings_corpus() -> Path:
    """Where findings about production code are saved: :data:`CORPUS_DIR` in a checkout,
    ``./corpus`` (in the working directory) when installed."""
    return CORPUS_DIR if CHECKOUT else Path.cwd() / "corpus"


def default_corpora() -> list[Path]:
    """What is replayed when no case is named: the regression corpus, and the findings saved
    beside it (:func:`findings_corpus`) where that is another folder that exists."""
    saved = findings_corpus()
    return [CORPUS_DIR, *([saved] if saved != CORPUS_DIR and saved.is_dir() else [])]


def user_cache() -> Path:
    """eaglefuzz's persistent cache: ``$XDG_CACHE_HOME/eaglefuzz`` (``~/.cache/eaglefuzz``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eaglefuzz"


def unwritable(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (``None``: they can), found without creating
    or removing anything, so that runs started at once in one folder (a CI matrix, ``xargs -P``,
    several terminals) never stand in each other's way: a probe file (a unique name, removed at
    once) is made in ``folder`` when it exists, else in its nearest existing parent, where the
    missing folders would be created (the run creates them when it saves its first finding)."""

    folder = Path(folder).absolute()
    p = folder
    while not p.exists() and p != p.parent:
        p = p.parent
    if not p.is_dir():
        return f"{p} is a file, not a folder"
    try:
        fd, probe = tempfile.mkstemp(dir=p, prefix=".eaglefuzz-probe-")
    except OSError as exc:
        what = f"cannot write in {p}" if p == folder else f"cannot create {folder} (in {p})"
        return f"{what}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None
