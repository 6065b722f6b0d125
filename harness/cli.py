"""The ``eaglefuzz`` command line: ``fuzz``, ``replay``, ``audit`` and ``list``.

Exit codes (:mod:`.core.exitcodes`): 0 when no output differs; 1 on a finding in the production
tier (an output differs, a case crashed, or a case hung past its time limit: a report is
printed and the case is written to the corpus); 2 on a usage or input error, a corpus case over
the cost limits included (one line on stderr, no traceback), and, with no finding in the
production tier, when a target could not be tested (its interface verdict); 3 on an internal error of
eaglefuzz (with its traceback); 4 when the only findings are edge divergences (``fuzz`` checks
the extended tier after the production tier unless ``--domain production``; replayed
extended-tier cases; ``audit --strict``: hazards in the extended tier only); 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP) when interrupted with nothing found (what
was found is kept; an interruption is never a finding).
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .core.clock import mark_start
from .core.errors import UserError
from .core.exitcodes import (
    EXIT_DEVICE_LOST,
    EXIT_EDGE,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    interrupted,
)
from .core.interrupts import received
from .core.limits import configure
from .core.paths import default_corpora, unwritable, user_cache
from .run import warm_servers as warm
from .run.lifeline import arm
from .run.supervisor import (
    JOURNAL_ENV,
    REPORT_ENV,
    WORKER_ENV,
    case_tier,
    fault_candidates,
    supervise,
)
from .sources import (
    OPTIONS,
    PARAM_HELP,
    did_you_mean,
    findings_dir,
    implementations_for,
    source_from_options,
)
from .sources.vllm import module_definitions

_LOADED = time.time()
"""When this module was imported: a process run as ``eaglefuzz`` started about then."""


def _shard(value: str | None, option: str = "--shard") -> tuple[int, int]:
    if value is None:
        return 0, 1
    try:
        k, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise UserError(f"{option} {value}: expected K/N with integers, e.g. 2/8") from None
    if not 1 <= k <= n:
        raise UserError(f"{option} {value}: K must be from 1 to N")
    return k - 1, n


def _targets(names: Sequence[str]) -> list[str] | None:
    """The explicitly named targets (``None``: every target the source defines)."""
    from .targets import TARGETS

    for n in names:
        if n not in TARGETS:
            raise UserError(f"--kernel {n}: unknown target{did_you_mean(n, list(TARGETS))}; "
                            "`eaglefuzz list` names them")
    return list(dict.fromkeys(names)) or None


def source_options(f: Any) -> Any:
    """The options that choose where the code under test comes from (see :mod:`.sources`)."""

    f = click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help=PARAM_HELP)(f)
    for o in reversed(OPTIONS):
        if o.metavar is None:
            f = click.option(o.flag, o.dest, is_flag=True, default=False, help=o.help)(f)
        else:
            f = click.option(o.flag, o.dest, metavar=o.metavar, default=None, help=o.help)(f)
    return click.option("--source", "source", default=None, hidden=True)(f)


def _source(values: dict[str, Any]) -> Any:

    return source_from_options(values)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="eaglefuzz")
def cli() -> None:
    """Differential fuzzing of vLLM's EAGLE speculative-decoding helper kernels.

    \b
    Warm servers: after a fuzz or replay command a process of about 400 MB (torch
    and the oracles imported) stays in the background, so that the next command
    starts its workers in a fraction of a second. It leaves after 15 idle minutes
    ($EAGLEFUZZ_WARM_IDLE seconds). Stop this installation's now: eaglefuzz
    stop-servers (--all: every installation's). Start none: EAGLEFUZZ_WARM=0
    """


_backend_opt = click.option(
    "--backend",
    type=click.Choice(["auto", "cuda", "interpreter"]),
    default="auto",
    show_default=True,
    help="compiled on CUDA, or the Triton interpreter on the CPU (auto: CUDA when present)",
)
_json_opt = click.option("--json", "as_json", is_flag=True, help="print one JSON document instead of text")
_domain_opt = click.option(
    "--domain",
    type=click.Choice(["production", "extended"]),
    default=None,
    help="extended (the default): the production tier first (the inputs vLLM's call sites produce; a "
    "difference is a contract violation, exit code 1), then the extended tier's edges, where the "
    "reference is still defined (a difference there is an edge divergence, exit code 4 when nothing "
    "else is found); production: the production tier alone (--mode device draws production only)",
)


def _limit_options(f: Any) -> Any:
    """``--case-timeout`` and ``--limits``: how long a case may run, and what it may cost."""
    f = click.option("--limits", "limits_spec", metavar="NAME=N,...", default=None,
                     help="raise (or lower) the cost limits of a case: grid, interpreter_programs, "
                          "array_elements, case_bytes, file_bytes, case_timeout, timeout_scale "
                          "[env EAGLEFUZZ_LIMITS]")(f)
    return click.option("--case-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
                        metavar="SECONDS",
                        help="time limit of every case (default: computed from its size and the "
                             "backend, 30 s and up); a case past it is a hang finding")(f)


def _needs_isolation(isolate: bool, case_timeout: float | None, limits_spec: str | None) -> None:
    """A time limit needs a supervising process to enforce it: with ``--no-isolate`` (one
    process, no time limit) ``--case-timeout`` and the time limits of ``--limits`` are refused."""
    if isolate:
        return
    if case_timeout is not None:
        raise UserError(f"--case-timeout {case_timeout:g} and --no-isolate: a time limit needs the "
                        "supervising process (leave out --no-isolate)")
    timed = [p.split("=", 1)[0].strip() for p in (limits_spec or "").split(",")
             if p.split("=", 1)[0].strip() in ("case_timeout", "timeout_scale")]
    if timed:
        raise UserError(f"--limits {timed[0]}=... and --no-isolate: a time limit needs the supervising "
                        "process (leave out --no-isolate)")


def _apply_limits(limits_spec: str | None, case_timeout: float | None) -> None:

    configure(limits_spec, case_timeout=case_timeout)


@cli.command()
@click.option("--kernel", "kernel_names", multiple=True, metavar="NAME", help="target to fuzz (repeatable; default: every target the source defines)")
@source_options
@click.option("--examples", type=click.IntRange(min=1), default=None, help="examples per target and tier [default: 100 without --time-budget]")
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS", help="stop after this many seconds in all (shared evenly by targets and tiers)")
@click.option("--seed", type=int, default=0, show_default=True, help="the same seed and options draw the same cases")
@click.option("--mode", type=click.Choice(["hypothesis", "bulk", "device"]), default="hypothesis", show_default=True,
              help="hypothesis: shrinking strategies; bulk: large NumPy-drawn batches, shrunk on a finding; "
                   "device (CUDA only): production-scale batches drawn, checked and compared on the GPU, "
                   "findings confirmed by the NumPy/Numba oracles (other targets: bulk)")
@click.option("--shard", metavar="K/N", default=None, help="run share K of N disjoint campaigns (same seed on every machine)")
@click.option("--devices", metavar="all|0,1,...", default=None,
              help="one shard per GPU of this host, at once, into one corpus and one report (with "
                   "--shard K/N: share K split across the GPUs)")
@click.option("--lanes", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="N shards per GPU, at once (with --devices: on each; else on the first visible GPU), into "
                   "one corpus and one report: a device run's rate is bound by the process that launches, "
                   "so N processes verify more per second; one lane per GPU draws production-scale cases")
@click.option("--mps", is_flag=True,
              help="with --lanes N: the lanes of a GPU are clients of a CUDA Multi-Process Service daemon of "
                   "the campaign's own, so their kernels run at once instead of time-slicing the GPU (a fault "
                   "of one lane reaches every lane: a crash is a finding only where its case faults alone)")
@click.option("--lane", "lane", metavar="K/N", default=None, hidden=True,
              help="set by --lanes in each shard: this process is lane K of its GPU's N")
@click.option("--ray", "ray_address", metavar="ADDRESS", default=None,
              help="one Ray task per shard (--shards N): local (a local Ray instance), auto (the "
                   "running cluster) or a cluster address; needs pip install 'eaglefuzz[ray]'")
@click.option("--shards", type=click.IntRange(min=1), default=None, metavar="N",
              help="with --ray: how many shards (tasks)")
@_domain_opt
@click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False), default=None, help="where findings are written [default: corpus/ for production code, ./eaglefuzz-findings otherwise]")
@click.option("--keep-going", is_flag=True, help="continue after a finding (default: stop that target at its first finding)")
@_backend_opt
@_json_opt
@click.option("--progress/--no-progress", default=None, help="progress bar [default: on a terminal; without one, a line every 10 s]")
@_limit_options
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run in a child process, so a kernel that kills the process or hangs is still "
                   "reported with its case (in-process: no time limit)")
@click.pass_context
def fuzz(ctx: click.Context, kernel_names: tuple[str, ...], examples: int | None,
         time_budget: float | None, seed: int, mode: str, shard: str | None, devices: str | None,
         lanes: int, mps: bool, lane: str | None, ray_address: str | None, shards: int | None, domain: str | None,
         corpus_dir: str | None, keep_going: bool, backend: str, as_json: bool,
         progress: bool | None, isolate: bool, case_timeout: float | None, limits_spec: str | None,
         **source_values: Any) -> None:
    """Fuzz implementations against the oracles; findings are shrunk, reported and saved.

    Each target's production tier is checked first (a difference is a contract violation: exit
    code 1), then its extended tier's edges (a difference is an edge divergence: exit code 4
    when nothing else is found); --domain production checks the production tier alone.
    """

    if examples is not None and time_budget is not None:
        raise UserError(f"--examples {examples} and --time-budget {time_budget:g}: give one (examples per "
                        "target, or seconds in all)")
    _needs_isolation(isolate, case_timeout, limits_spec)
    if progress and (devices is not None or ray_address is not None or lanes > 1):
        raise UserError("--progress: not with --devices, --lanes or --ray (the shards' progress lines are shown)")
    _apply_limits(limits_spec, case_timeout)
    shard_k, shard_n = _shard(shard)
    source = _source(source_values)
    if examples is None and time_budget is None:
        examples = 100
    corpus = findings_dir(source, corpus_dir)
    why = unwritable(corpus)
    if why is not None:  # before any example runs: a finding must never be lost for want of a folder
        what = f"--corpus {corpus_dir}" if corpus_dir is not None else f"the findings folder {corpus}"
        raise UserError(f"{what}: findings cannot be written there ({why}); give --corpus DIR, a folder you can write")
    lane_k, lane_n = _shard(lane, "--lane")
    if mps and lanes < 2:
        raise UserError(f"--mps: only with --lanes N, N of 2 or more (--lanes {lanes}: one process a GPU has nothing "
                        "to run beside)")
    if ((devices, ray_address, shards) != (None, None, None) or lanes > 1) and not os.environ.get(WORKER_ENV):
        from .run.multi import fuzz_in_shards

        _targets(kernel_names)  # a wrong name: one line here, not one per shard
        sys.exit(fuzz_in_shards(list(ctx.obj["argv"]), devices=devices, lanes=lanes, mps=mps, ray_address=ray_address,
                                shards=shards, shard=(shard_k, shard_n), corpus=corpus, backend=backend,
                                as_json=as_json))
    if isolate and not os.environ.get(WORKER_ENV):
        # Start-up cost: the supervising process imports neither torch nor the targets; the
        # worker checks the target names (one line, exit 2) and does everything else. Where the
        # registry is loaded already (eaglefuzz called in-process), the names are checked here.
        if "eaglefuzz.harness.targets" in sys.modules:
            _targets(kernel_names)

        sys.exit(supervise(list(ctx.obj["argv"]), source=source, corpus_dir=corpus, as_json=as_json, backend=backend))
    from .run.campaign import Campaign

    names = _targets(kernel_names)
    campaign = Campaign(
        names=names, source=source, backend=backend, seed=seed, mode=mode,
        examples=examples, time_budget=time_budget, shard=(shard_k, shard_n), lane=(lane_k, lane_n),
        corpus_dir=corpus, keep_going=keep_going,
        progress=sys.stderr.isatty() if progress is None else progress, as_json=as_json,
        journal_dir=Path(os.environ[JOURNAL_ENV]) if os.environ.get(JOURNAL_ENV) else None,
        domain=domain,
        report=os.environ.get(REPORT_ENV) != "0",
    )
    sys.exit(campaign.run())


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@source_options
@_backend_opt
@_json_opt
@_limit_options
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run in a child process, so a case that kills the process or hangs is still "
                   "reported (in-process: no time limit)")
@click.option("--sanitize", is_flag=True,
              help="replay each case in its own process under compute-sanitizer --tool memcheck; an "
                   "invalid memory access is a finding of its case (needs a CUDA GPU and "
                   "compute-sanitizer on PATH)")
@click.pass_context
def replay(ctx: click.Context, paths: tuple[str, ...], backend: str, as_json: bool, isolate: bool,
           sanitize: bool, case_timeout: float | None, limits_spec: str | None, **source_values: Any) -> None:
    """Replay corpus files or folders (default: the whole corpus) against the implementations."""
    from .checking.corpus import discover, load_entry
    from .run.replaying import replay_cases

    if sanitize and not isolate:
        raise UserError("--sanitize and --no-isolate: --sanitize runs every case in a process of its own")
    if not sanitize:
        _needs_isolation(isolate, case_timeout, limits_spec)
    _apply_limits(limits_spec, case_timeout)
    files = discover([Path(p) for p in paths] or default_corpora())
    cases = [(f, load_entry(f)) for f in files]  # validate every file before running any
    cases = [(f, e.case, e.tier) for f, e in cases]
    source = _source(source_values)
    if sanitize:
        from .run.sanitize import sanitize_replay

        limit_args = [*(["--limits", limits_spec] if limits_spec else []),
                      *(["--case-timeout", str(case_timeout)] if case_timeout else [])]
        sys.exit(sanitize_replay(cases, source, backend=backend, as_json=as_json, limit_args=limit_args))
    if isolate and not os.environ.get(WORKER_ENV):
        sys.exit(supervise(list(ctx.obj["argv"]), source=source, corpus_dir=findings_dir(source),
                           as_json=as_json, backend=backend, save=False))
    journal_dir = Path(os.environ[JOURNAL_ENV]) if os.environ.get(JOURNAL_ENV) else None
    sys.exit(replay_cases(cases, source, backend=backend, as_json=as_json, journal_dir=journal_dir,
                          report=os.environ.get(REPORT_ENV) != "0"))


@cli.command()
@click.option("--kernel", "kernel_names", multiple=True, metavar="NAME", help="target to audit (repeatable; default: every target the source defines)")
@source_options
@click.option("--examples", type=click.IntRange(min=1), default=60, show_default=True, help="examples per target and tier (cases of the production tier, and of the extended tier)")
@click.option("--seed", type=int, default=0, show_default=True, help="the same seed and options draw the same cases")
@click.option("--strict", is_flag=True, help="exit 1 when a hazard is reachable in the production tier, 4 when hazards lie in the extended tier only")
@_backend_opt
@_json_opt
def audit(kernel_names: tuple[str, ...], examples: int, seed: int, strict: bool, backend: str, as_json: bool,
          **source_values: Any) -> None:
    """Search both domain tiers for inputs that break what a caller relies on; report each hazard."""
    from .checking.audit import audit as run_audit

    names = _targets(kernel_names)
    source = _source(source_values)
    from .sources.triton_backend import select_backend  # NumPy, Triton's patches: not at start-up

    b = select_backend(backend)
    impls = implementations_for(source, names, allow_none=True)
    if not impls.funcs and not any(_has_statistics(n) for n in impls.untested):
        from .targetkit.interface import InterfaceMismatch

        raise InterfaceMismatch("\n".join(impls.untested.values()))
    results = run_audit(list(impls.funcs), impls, b.device, examples=examples, seed=seed,
                        on_progress=_audit_progress())
    hazards = [h for r in results for h in r.hazards]
    stat_failed = [x for r in results for x in r.statistics_failed]
    unaudited = [n for n in impls.funcs if n not in {r.target for r in results}]
    if as_json:

        click.echo(json.dumps({
            "source": source.describe(), "backend": b.name, "seed": seed, "examples": examples,
            "targets": {r.target: {"searched": r.searched, "errors": r.errors, "holds": r.holds,
                                   "hazards": [h.to_json() for h in r.hazards],
                                   "statistics_failed": r.statistics_failed,
                                   "statistics_skipped": r.statistics_skipped} for r in results},
            "no_properties": unaudited,
            "untested": dict(impls.untested),
        }, indent=2))
    else:
        click.echo(f"eaglefuzz audit of {source.describe()} ({b.name}), seed {seed}, {examples} examples per tier")
        for r in results:
            tiers = ", ".join(f"{t} {n}" for t, n in r.searched.items())
            short = [t for t, n in r.searched.items() if n < examples]
            why = (f" (the {' and '.join(short)} strategy gave no more distinct cases)" if short else "")
            if not r.searched:
                click.echo(f"\n## {r.target}: another interface than the contract's: its statistics only")
            else:
                click.echo(f"\n## {r.target}: {tiers} examples{why}" + (f", {r.errors} raised" if r.errors else ""))
            for h in r.hazards:
                click.echo(h.report())
            for line in r.statistics_failed:
                click.echo(line)
            for line in r.statistics_skipped:
                click.echo(f"not checked: {line}")
            if r.holds:
                click.echo(f"holds on every example: {', '.join(r.holds)}")
        if unaudited:
            click.echo(f"\nnot audited (no properties yet): {', '.join(unaudited)}")
        for line in impls.untested.values():
            click.echo(f"not audited: {line}")
        reach = sum(h.reachable_in_production for h in hazards)
        click.echo(f"\n{len(hazards) + len(stat_failed)} hazard(s), {reach + len(stat_failed)} reachable in the "
                   "production tier")
    if strict and (stat_failed or any(h.reachable_in_production for h in hazards)):
        sys.exit(EXIT_FINDINGS)
    if impls.untested:
        sys.exit(EXIT_USAGE)
    if strict and hazards:
        sys.exit(EXIT_EDGE)
    sys.exit(EXIT_OK)


def _has_statistics(name: str) -> bool:
    from .checking.audit import audit_of

    a = audit_of(name)
    return a is not None and bool(a.statistics)


def _audit_progress() -> Any:
    """A progress line on stderr every ``$EAGLEFUZZ_PROGRESS_EVERY`` seconds (10; 0: every
    example), as ``fuzz`` prints without a terminal: an audit runs for minutes."""
    import time

    from .reporting.fuzz_report import plural
    from .run.campaign import progress_every

    every, start = progress_every(), time.monotonic()
    last: list[Any] = [start, None]

    def on_progress(target: str, checked: int) -> None:
        now = time.monotonic()
        if now - last[0] >= every and (target, checked) != last[1]:
            last[:] = [now, (target, checked)]
            click.echo(f"eaglefuzz audit: {target}: {plural(checked, 'example')}, {now - start:.0f} s", err=True)

    return on_progress


@cli.command(name="_shrink-fault", hidden=True)
@click.argument("case_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--skip", type=click.IntRange(min=0), default=0)
@source_options
@_backend_opt
def shrink_fault_worker(case_file: str, skip: int, backend: str, **source_values: Any) -> None:
    """Worker of the fault shrinker: run the case's smaller variants (from the ``skip``-th)
    until one kills us or runs past its time limit (the supervisor watches the journal)."""
    from .checking.check import check_case, warm_oracles
    from .checking.corpus import decode
    from .run.journal import Journal

    case = decode(Path(case_file).read_text(), case_file, contract=False).case
    from .sources.triton_backend import select_backend  # NumPy, Triton's patches: not at start-up

    b = select_backend(backend)
    impls = implementations_for(_source(source_values), [case.kernel])
    journal = Journal(Path(os.environ[JOURNAL_ENV])) if os.environ.get(JOURNAL_ENV) else None
    warm_oracles([case.kernel])
    tier = case_tier(case)  # an extended-tier case shrinks within the extended tier
    for candidate in fault_candidates(case)[skip:]:
        check_case(candidate, impls, b.device, journal, domain=tier)  # a crash ends this process here
    sys.exit(EXIT_OK)


@cli.command(name="_locate-fault", hidden=True)
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@source_options
@_backend_opt
def locate_fault_worker(folder: str, backend: str, **source_values: Any) -> None:
    """Worker of :func:`~.run.supervisor.locate_fault`: the cases of ``folder`` (a device
    batch's, in launch order) checked one at a time, until one kills us or runs past its time
    limit (the supervisor watches the journal); exits 0 when none does."""
    from .checking.check import check_case, warm_oracles
    from .checking.corpus import decode
    from .run.journal import Journal

    cases = [decode(f.read_text(), str(f), contract=False).case for f in sorted(Path(folder).glob("*.json"))]
    from .sources.triton_backend import select_backend  # NumPy, Triton's patches: not at start-up

    b = select_backend(backend)
    kernels = sorted({c.kernel for c in cases})
    impls = implementations_for(_source(source_values), kernels)
    journal = Journal(Path(os.environ[JOURNAL_ENV])) if os.environ.get(JOURNAL_ENV) else None
    warm_oracles(kernels)
    for case in cases:
        check_case(case, impls, b.device, journal, domain=case_tier(case))  # a crash ends this process here
    sys.exit(EXIT_OK)


@cli.command(name="stop-servers")
@click.option("--all", "everything", is_flag=True,
              help="stop the servers of every eaglefuzz installation of this user (another virtual "
                   "environment's, another checkout's), not only this one's")
def stop_servers(everything: bool) -> None:
    """Stop the warm servers left by this installation's commands (see `eaglefuzz --help`)."""

    try:
        r = warm.stop_servers(everything=everything)
    except OSError as exc:
        raise UserError(f"the warm servers' folder: {exc}") from None
    line = f"stopped {len(r.pids)} warm server(s)" + ("" if everything else " of this installation")
    if r.pids:
        line += f" ({r.rss_mb} MB)"
    line += f" in {r.folder}"
    if r.others:
        line += (f"; left {len(r.others)} server(s) of other eaglefuzz installations running (another "
                 "environment's commands may use them; --all stops them too)")
    if r.finishing:
        line += (f"; {len(r.finishing)} of them take no more work and leave once the command "
                 "they serve ends")
    if r.removed:
        line += f"; removed {r.removed} stale file(s)"
    click.echo(line)


@cli.command(name="list")
@source_options
@_json_opt
def list_targets(as_json: bool, **source_values: Any) -> None:
    """List the targets, the features each one tracks, what the source defines, and the
    capability matrix (what each target has: tiers, tour, audit, device mode, port, seeded
    bugs, corpus)."""
    from .reporting import capabilities
    from .sources.bundled import BundledSource
    from .targets import TARGETS

    source = _source(source_values)
    if isinstance(source, BundledSource):  # read from its file: no torch or Triton to import (seconds)
        bundled = source.defined()
        origins, untested = {n: source.origin(n) for n in bundled}, {}
    else:
        impls = implementations_for(source)
        origins, untested = impls.origin, impls.untested
    rows = capabilities.matrix()
    module_files = getattr(source, "module_files", None)
    paths = list(module_files()) if module_files is not None else []

    def where(name: str) -> str:
        return (origins[name].describe() if name in origins else untested[name] if name in untested
                else f"not defined by {source.describe()}")

    def targets_in(path: Path) -> dict[str, str]:
        """Function -> the target that tests it, of the vLLM module ``path`` is."""
        return {t.function: n for n, t in TARGETS.items() if path.as_posix().endswith("/" + t.module)}

    def mark(d: Any, tested: dict[str, str]) -> str:
        return "target" if d.name in tested else "private helper" if d.private else "no target"

    if as_json:
        doc = {
            "source": source.describe(),
            "targets": {name: {"kind": t.kind, "runner": t.runner, "module": t.module, "function": t.function,
                               "implementation": where(name), "features": dict(t.features),
                               "extended_features": dict(t.extended_features)} for name, t in TARGETS.items()},
            "modules": {str(path): [{"name": d.name, "kind": d.kind, "line": d.line, "role": mark(d, tested),
                                     **({"target": tested[d.name]} if d.name in tested else {})}
                                    for d in module_definitions(path)]
                        for path in paths for tested in [targets_in(path)]},
            "capabilities": capabilities.to_json(rows),
        }
        click.echo(json.dumps(doc, indent=2))
        return
    click.echo(f"source: {source.describe()}")
    for name, t in TARGETS.items():
        click.echo(f"{name} ({t.kind}, model runner {t.runner}): {where(name)}")
        line = _stand_ins_line(name, None if isinstance(source, BundledSource) else impls.funcs.get(name))
        if line and t.kind == "python function":
            click.echo(f"    {line}")
        for f, doc_line in t.features.items():
            click.echo(f"    {f:24s} {doc_line}")
        if t.extended_features:
            click.echo("  edges of the extended tier (--domain extended):")
            for f, doc_line in t.extended_features.items():
                click.echo(f"    {f:24s} {doc_line}")
    for path in paths:
        click.echo(f"\nwhat {path} defines (every top-level function):")
        tested = targets_in(path)
        for d in module_definitions(path):
            m = mark(d, tested).replace("no target", "NO TARGET")
            if d.name in tested and tested[d.name] != d.name:
                m += f" {tested[d.name]}"
            click.echo(f"  {d.name:48s} {d.kind:18s} line {d.line:<5d} {m}")
    click.echo()
    capabilities.print_matrix(rows, sys.stdout)


def _stand_ins_line(name: str, impl: Any) -> str | None:
    """``stand-ins model: <Class> fields ...`` for the vLLM classes a Python function takes or
    returns (from the annotations of ``impl``, else of the bundled copy's function, read from
    its file without importing it): what kernels/vllm_types.py models."""
    import ast

    from ..kernels import vllm_types  # the stand-ins (no torch): for `list` only
    from .sources.bundled import PATH
    from .targets import TARGETS

    if callable(impl):
        try:
            named = {getattr(a, "__name__", str(a)).split(".")[-1].strip("'\"")
                     for a in inspect.get_annotations(impl).values()}
        except (TypeError, ValueError):
            named = set()
    else:
        tree = ast.parse(PATH.read_text(), filename=str(PATH))
        fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == TARGETS[name].function), None)
        notes = [] if fn is None else [a.annotation for a in fn.args.args] + [fn.returns]
        named = {ast.unparse(a).split(".")[-1].strip("'\"") for a in notes if a is not None}
    classes = [getattr(vllm_types, n) for n in vllm_types.__all__ if n in named]
    if not classes:
        return None
    parts = []
    for cls in classes:
        fields = [f.name for f in dataclasses.fields(cls)]
        nested = sorted({n for f in dataclasses.fields(cls) for n in vllm_types.__all__
                         if n != cls.__name__ and n in str(f.type)})
        extra = f"; nested stand-ins {', '.join(nested)}" if nested else ""
        parts.append(f"{cls.__name__} fields {', '.join(fields)}{extra}")
    return f"stand-ins model (kernels/vllm_types.py): {' | '.join(parts)}"


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr and exit code 2.

    Run as the process's entry point (no ``argv``: the ``eaglefuzz`` script, ``python -m``),
    it leaves without the interpreter's teardown (see :func:`fast_exit`).
    """
    if argv is None:
        use_numba_cache()
        try:
            with mark_start(_LOADED):  # --time-budget counts from here (its workers inherit it)
                _main(sys.argv[1:])
        except SystemExit as exc:
            fast_exit(exc.code)
    with mark_start(time.time()):
        _main(list(argv) if argv is not None else sys.argv[1:])


def use_numba_cache() -> None:
    """Keep the Numba oracles compiled across runs in ``~/.cache/eaglefuzz/numba`` (unless
    ``NUMBA_CACHE_DIR`` says otherwise): a run then loads them instead of compiling them,
    also where the installed package's own folder is read-only."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return

    path = user_cache() / "numba"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    if os.access(path, os.W_OK):
        os.environ["NUMBA_CACHE_DIR"] = str(path)


def fast_exit(code: object) -> None:
    """Leave the process with ``code`` (as ``sys.exit`` takes it) without the interpreter's
    teardown: exit handlers run and output is flushed, but the seconds that finalizing torch,
    Triton and Numba's objects take are skipped (``$EAGLEFUZZ_SLOW_EXIT`` keeps them)."""
    if os.environ.get("EAGLEFUZZ_SLOW_EXIT"):
        sys.exit(code)

    if code is None:
        status = EXIT_OK
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)


def _main(args: list[str]) -> None:
    if os.environ.get(WORKER_ENV) or os.environ.get("EAGLEFUZZ_LIFELINE_FD"):  # a worker, or a shard (.multi)

        arm()  # a worker dies with its parent: no orphan after kill -9 of eaglefuzz
    try:
        cli.main(args=args, prog_name="eaglefuzz", standalone_mode=False, obj={"argv": args})
        sys.exit(EXIT_OK)
    except UserError as exc:
        for line in str(exc).splitlines() or [""]:  # one line; an interface verdict per target
            click.echo(f"eaglefuzz: error: {line}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"eaglefuzz: error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(EXIT_USAGE)
    except (click.exceptions.Abort, KeyboardInterrupt):

        click.echo("eaglefuzz: interrupted", err=True)
        sys.exit(interrupted(received()))
    except Exception as exc:  # a bug of eaglefuzz itself: the traceback is the useful report
        from .core.mps import shared_fault

        if shared_fault(exc):  # under --mps: maybe another lane's fault; the supervisor starts a new worker
            click.echo("eaglefuzz: the device became unusable outside any launch, under --mps (another lane's fault "
                       f"ends every lane's CUDA context): {type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
                       err=True)
            sys.exit(EXIT_DEVICE_LOST)
        traceback.print_exc()
        click.echo("eaglefuzz: internal error (a bug of eaglefuzz, not of the kernel): traceback above", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
