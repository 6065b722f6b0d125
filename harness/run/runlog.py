"""The record of one run, unit by unit (a fuzzed target, a replayed file), kept on disk.

A worker under a supervisor writes ``meta.json`` (what the run tests, for its report),
``plan.json`` (its units, in order), ``current`` (the unit in progress) and one line of
``units.jsonl`` per finished unit. When a case kills or hangs the worker, the supervisor
records that unit's fault finding and starts a new worker, which skips every unit already
recorded; the report at the end covers every unit of every worker. Without a directory the
record lives in memory (a run in one process).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class RunLog:
    """A run's meta, plan and per-unit records; in ``directory`` when given."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = None if directory is None else Path(directory)
        self._meta: dict[str, Any] | None = None
        self._plan: list[str] = []
        self._records: dict[str, dict[str, Any]] = {}
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)

    def _write(self, name: str, text: str) -> None:
        assert self.directory is not None
        tmp = self.directory / f".{name}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.directory / name)

    def _read(self, name: str) -> Any:
        if self.directory is None:
            return None
        try:
            return json.loads((self.directory / name).read_text())
        except (OSError, ValueError):
            return None

    def set_meta(self, meta: dict[str, Any]) -> None:
        """What the run is: its options, source, backend, and each target's origin."""
        self._meta = meta
        if self.directory is not None:
            self._write("meta.json", json.dumps(meta))

    def meta(self) -> dict[str, Any] | None:
        return self._read("meta.json") if self.directory is not None else self._meta

    def set_plan(self, units: list[str]) -> None:
        """The run's units, in the order its report lists them."""
        self._plan = list(units)
        if self.directory is not None:
            self._write("plan.json", json.dumps(self._plan))

    def plan(self) -> list[str]:
        if self.directory is None:
            return list(self._plan)
        return self._read("plan.json") or []

    def begin(self, unit: str) -> None:
        """``unit`` is in progress (a fault from now on is this unit's)."""
        if self.directory is not None:
            self._write("current", json.dumps(unit))

    def current(self) -> str | None:
        return self._read("current")

    def add(self, unit: str, record: dict[str, Any]) -> None:
        """``unit`` is done: ``record`` is what its report says (one JSON line, appended)."""
        self._records[unit] = record
        if self.directory is not None:
            with open(self.directory / "units.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps({"unit": unit, "record": record}) + "\n")

    def records(self) -> dict[str, dict[str, Any]]:
        """Unit -> record, of every worker of the run (a line cut short by a kill is skipped)."""
        if self.directory is None:
            return dict(self._records)
        out: dict[str, dict[str, Any]] = {}
        try:
            lines = (self.directory / "units.jsonl").read_text(encoding="utf-8").splitlines()
        except OSError:
            return out
        for line in lines:
            try:
                doc = json.loads(line)
                out[doc["unit"]] = doc["record"]
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def ordered(self) -> list[tuple[str, dict[str, Any]]]:
        """The records in plan order (units outside the plan last)."""
        recs = self.records()
        plan = self.plan()
        return [(u, recs[u]) for u in plan if u in recs] + [(u, r) for u, r in recs.items() if u not in plan]

    def mark_reported(self) -> None:
        """The worker printed the run's report (a supervisor must not print it again)."""
        if self.directory is not None:
            self._write("reported", "1")

    def reported(self) -> bool:
        return self._read("reported") == 1

    def remaining(self) -> list[str]:
        """Units of the plan without a record."""
        recs = self.records()
        return [u for u in self.plan() if u not in recs]
