"""The crash journal: the case in flight, on disk, so a process that dies still reports it.

Under the Triton interpreter a wild store lands in the Python process's own heap and can kill
it ("free(): invalid pointer"); compiled, an illegal address poisons the CUDA context. Before
each check the case is written to ``<dir>/<owner>-<pid>.json`` and removed after it. A file
left behind by a process that is gone names the case that killed it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .case import Case


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (dead, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


class Journal:
    """One process's journal file in ``directory``; ``owner`` names the process (xdist worker)."""

    def __init__(self, directory: Path, owner: str = "main") -> None:
        self.directory = Path(directory)
        self.path = self.directory / f"{owner}-{os.getpid()}.json"

    @contextmanager
    def running(self, case: Case) -> Iterator[None]:
        """Record ``case`` as in flight while the body runs."""
        from .corpus import encode

        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(encode(case))
        os.replace(tmp, self.path)
        try:
            yield
        finally:
            self.path.unlink(missing_ok=True)


def orphans(directory: Path) -> list[tuple[Path, Case | None, str]]:
    """Journal files whose process is gone: ``(file, case or None, why the case is None)``."""
    from .corpus import decode
    from .errors import UserError

    out: list[tuple[Path, Case | None, str]] = []
    d = Path(directory)
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        try:
            pid = int(f.stem.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            continue
        if _alive(pid) and pid != os.getpid():
            continue
        try:
            out.append((f, decode(f.read_text(), str(f), contract=False).case, ""))
        except (OSError, UserError) as exc:
            out.append((f, None, str(exc)))
    return out
