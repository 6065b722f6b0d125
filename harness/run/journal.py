"""The crash journal: the case in flight, on disk, so a process that dies still reports it.

Under the Triton interpreter a wild store lands in the Python process's own heap and can kill
it ("free(): invalid pointer"); compiled, an illegal address poisons the CUDA context. Before
each check the case is written to ``<dir>/<owner>-<pid>.json`` and removed after it. A file
left behind by a process that is gone names the case that killed it.

With a time limit, ``<owner>-<pid>.clock`` holds ``{"seq": n, "limit": seconds}`` while the
case runs (written after the case, removed before it): a supervisor that sees the same
``seq`` for longer than ``limit`` seconds kills the process and reports a hang.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core.case import Case
from ..core.errors import UserError
from .lifeline import alive


class Journal:
    """One process's journal file in ``directory``; ``owner`` names the process (xdist worker)."""

    def __init__(self, directory: Path, owner: str = "main") -> None:
        self.directory = Path(directory)
        self.path = self.directory / f"{owner}-{os.getpid()}.json"
        self.clock = self.path.with_suffix(".clock")
        self.seq = 0
        """How many cases ran with a time limit (the ``seq`` of the last one)."""

    @contextmanager
    def running(self, case: Case, limit: float | None = None) -> Iterator[None]:
        """Record ``case`` as in flight while the body runs; with ``limit``, its time limit
        in seconds (enforced by whoever watches the journal)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(_journal_text(case))
        os.replace(tmp, self.path)
        if limit is not None:
            self.seq += 1
            tmp.write_text(json.dumps({"seq": self.seq, "limit": limit}))
            os.replace(tmp, self.clock)
        try:
            yield
        finally:
            self.clock.unlink(missing_ok=True)
            self.path.unlink(missing_ok=True)

    def abandon(self, case: Case, message: str, suspects: Sequence[Case] = ()) -> None:
        """This process is about to exit on purpose while running ``case``: leave the journal
        (and why) for whoever reports dead processes' cases. ``suspects``: the cases that may
        have caused it, in the order they ran (a device batch: a CUDA fault surfaces at a later
        call than the launch that made it), ``case`` among them; whoever reports it runs them
        one at a time to find the one (:func:`~.supervisor.locate_fault`)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path.write_text(_journal_text(case))
        self.path.with_suffix(".why").write_text(message)
        if suspects:
            self.path.with_suffix(".suspects").write_text(json.dumps([_journal_text(c) for c in suspects]))


def _journal_text(case: Case) -> str:
    """``case`` as a corpus file's text; a case too large to store as text (random arrays of
    ``2**22`` elements and more: a device-mode batch) as a document that names its target and
    why, which a reader reports as a journal it cannot read (the target, not the case)."""
    from ..checking.corpus import TooLarge, encode

    try:
        return encode(case)
    except TooLarge as exc:
        return json.dumps({"kernel": case.kernel, "unreadable": f"too large to journal: {exc}"}) + "\n"


@dataclass(frozen=True)
class Orphan:
    """A journal left by a process that is gone: the case it was running (``None`` with
    ``error`` when the file cannot be read) and, when it exited on purpose, ``message``."""

    file: Path
    case: Case | None
    error: str = ""
    message: str = ""
    suspects: tuple[Case, ...] = ()
    """The cases the process named as those that may have caused its end (a device batch's), in
    the order they ran; empty when the journal's case is the one."""

    @property
    def seq(self) -> int | None:
        """The ``seq`` of its clock (which timed case of the process it was), if any."""
        clock = read_clock(self.file.with_suffix(".clock"))
        return None if clock is None else clock[0]

    def remove(self) -> None:
        self.file.unlink(missing_ok=True)
        self.file.with_suffix(".why").unlink(missing_ok=True)
        self.file.with_suffix(".clock").unlink(missing_ok=True)
        self.file.with_suffix(".suspects").unlink(missing_ok=True)


def read_clock(path: Path) -> tuple[int, float] | None:
    """``(seq, limit)`` of a journal's clock file; ``None`` when there is none (or it is being
    replaced)."""
    try:
        doc = json.loads(Path(path).read_text())
        return int(doc["seq"]), float(doc["limit"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def orphans(directory: Path) -> list[Orphan]:
    """The journals in ``directory`` whose process is gone."""
    from ..checking.corpus import decode

    out: list[Orphan] = []
    d = Path(directory)
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        try:
            pid = int(f.stem.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            continue
        if alive(pid) and pid != os.getpid():
            continue
        why = f.with_suffix(".why")
        message = why.read_text() if why.is_file() else ""
        try:
            out.append(Orphan(f, decode(f.read_text(), str(f), contract=False).case, message=message,
                              suspects=_suspects(f.with_suffix(".suspects"))))
        except (OSError, UserError) as exc:
            out.append(Orphan(f, None, error=str(exc), message=message))
    return out


def _suspects(path: Path) -> tuple[Case, ...]:
    """The cases of a journal's ``.suspects`` file (none when there is none; a suspect that
    cannot be read back, too large to journal, is left out)."""
    from ..checking.corpus import decode

    if not path.is_file():
        return ()
    out = []
    for k, text in enumerate(json.loads(path.read_text())):
        try:
            out.append(decode(text, f"{path} [{k}]", contract=False).case)
        except UserError:
            continue
    return tuple(out)
