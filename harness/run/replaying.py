"""``eaglefuzz replay`` in a worker: corpus cases checked against a source, one record per
file; the report (:mod:`..reporting.replay_report`) groups them by distinct finding."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ..checking.check import check_case, warm_compiled, warm_oracles
from ..checking.costs import LimitExceeded, check_cost
from ..core import interrupts
from ..core.case import Case
from ..core.errors import UserError
from ..reporting.replay_report import failed_record, print_replay, replay_doc, replay_exit_code
from ..sources import implementations_for
from ..sources.triton_backend import select_backend
from ..targetkit.base import CannotTest
from .journal import Journal
from .runlog import RunLog


def replay_cases(
    cases: Sequence[tuple[Path, Case] | tuple[Path, Case, str]],
    source: Any,
    *,
    backend: str,
    as_json: bool,
    journal_dir: Path | None = None,
    report: bool = True,
) -> int:
    """Check every case against ``source``; print ``ok``/``FAIL`` per file (text) and one
    report per group of identical findings; the exit code.

    A case may come with its corpus tier (``(path, case, tier)``): an extended-tier case is
    checked in the extended domain, and a failure there is an edge divergence (exit code 4 when
    every failure is one).

    Every case's cost on the chosen backend is checked before any runs (a
    :class:`~..core.errors.UserError` naming the file, the field and the limit). A signal stops the
    replay: what was replayed is reported. With ``journal_dir`` (under a supervisor), files
    already recorded there by an earlier worker are skipped and each file's result is recorded.
    """

    with interrupts.interruptible():
        return _replay(cases, source, backend=backend, as_json=as_json, journal_dir=journal_dir, report=report)


def elsewhere(source: Any, kernels: list[str]) -> dict[str, str]:
    """Target -> what replays its cases, for each of ``kernels`` (targets ``source`` does not
    define): the bundled copy, or the pinned vLLM release (``""``: neither)."""
    from ..sources import PINNED_RELEASE
    from ..sources.bundled import BundledSource

    bundled = set(BundledSource().defined()) if kernels else set()
    out = {}
    for k in kernels:
        if k in bundled and source.spec != "bundled":
            out[k] = "the bundled copy replays them (replay without a source option)"
        elif source.spec != f"vllm-release:{PINNED_RELEASE}":
            out[k] = f"--vllm-version {PINNED_RELEASE} replays them"
        else:
            out[k] = ""
    return out


def _replay(
    cases: Sequence[tuple[Path, Case] | tuple[Path, Case, str]],
    source: Any,
    *,
    backend: str,
    as_json: bool,
    journal_dir: Path | None,
    report: bool,
) -> int:


    b = select_backend(backend)
    impls = implementations_for(source)
    tiers = {str(c[0]): (c[2] if len(c) > 2 else "production") for c in cases}
    cases = [(c[0], c[1]) for c in cases]
    for f, case in cases:
        if case.kernel in impls:
            try:
                check_cost(case, interpreter=not b.compiled)
            except LimitExceeded as exc:
                raise UserError(f"{f}: {exc.field}: {exc.rule}") from None
    journal = Journal(journal_dir) if journal_dir else None
    log = RunLog(journal_dir / "run" if journal_dir else None)
    meta = {
        "command": "replay", "backend": b.name, "source": source.describe(),
        "implementations": {n: impls.origin[n].describe() for n in impls},
        "origins": {n: asdict(impls.origin[n]) for n in impls},
        "untested": dict(impls.untested),
        "elsewhere": elsewhere(source, sorted({c.kernel for _, c in cases if c.kernel not in impls})),
    }
    log.set_meta(meta)
    log.set_plan([str(f) for f, _ in cases])
    finished = log.records()
    pending = sorted({c.kernel for f, c in cases if c.kernel in impls and str(f) not in finished})
    warm_oracles(pending)
    warm_compiled(impls, pending, b.device)
    stopped = False
    try:
        for f, case in cases:
            unit = str(f)
            if unit in finished:
                continue
            log.begin(unit)
            if case.kernel not in impls or case.kernel in meta["untested"]:
                log.add(unit, {"file": unit, "kernel": case.kernel, "status": "skipped"})
                continue
            try:
                finding = check_case(case, impls, b.device, journal, domain=tiers[unit])
            except CannotTest as exc:  # its verdict; its other cases are not replayed, the others are
                meta["untested"][case.kernel] = str(exc)
                log.set_meta(meta)
                log.add(unit, {"file": unit, "kernel": case.kernel, "status": "skipped"})
                continue
            if finding is None:
                log.add(unit, {"file": unit, "kernel": case.kernel, "status": "ok"})
            else:
                log.add(unit, failed_record(unit, finding))
            if not as_json:
                click.echo(f"ok   {f}" if finding is None else f"FAIL {f}")
    except KeyboardInterrupt:
        stopped = True
        interrupts.hold()
    doc = replay_doc(meta, [r for _, r in log.ordered()], stopped, planned=len(cases))
    if report:
        print_replay(doc, as_json=as_json)
        sys.stdout.flush()
        log.mark_reported()
    return replay_exit_code(doc, interrupts.received())
