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


def unwritable(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (``None``: they can). Missing folders are
    created to find out, and removed again: nothing is left behind."""
    import tempfile

    folder = Path(folder).absolute()
    missing: list[Path] = []
    p = folder
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    if not p.is_dir():
        return f"{p} is a file, not a folder"
    made: list[Path] = []
    try:
        for d in reversed(missing):
            try:
                d.mkdir()
            except OSError as exc:
                return f"cannot create {d}: {exc.strerror or exc}"
            made.append(d)
        try:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".eaglefuzz-probe-")
        except OSError as exc:
            return f"cannot write in {folder}: {exc.strerror or exc}"
        os.close(fd)
        os.unlink(probe)
        return None
    finally:
        for d in reversed(made):
            try:
                d.rmdir()
            except OSError:
                pass
