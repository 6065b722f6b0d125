"""The ``eaglefuzz`` command line: ``fuzz``, ``replay``, ``audit`` and ``list``.

Exit codes: 0 when no output differs, 1 when one does (a report is printed and the case is
written to the corpus), 2 on a usage or input error (one line on stderr, no traceback), 3 on
an internal error of eaglefuzz (with its traceback), 4 when the only findings are edge
divergences (``--domain extended``) or, for ``audit``, hazards, 130 when interrupted with
nothing found.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .errors import UserError
from .exitcodes import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

WORKER_ENV, JOURNAL_ENV = "EAGLEFUZZ_WORKER", "EAGLEFUZZ_JOURNAL"


def _shard(value: str | None) -> tuple[int, int]:
    if value is None:
        return 0, 1
    try:
        k, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise UserError(f"--shard {value}: expected K/N with integers, e.g. 2/8") from None
    if not 1 <= k <= n:
        raise UserError(f"--shard {value}: K must be from 1 to N")
    return k - 1, n


def _targets(names: Sequence[str]) -> list[str] | None:
    """The explicitly named targets (``None``: every target the source defines)."""
    from .sources import did_you_mean
    from .targets import TARGETS

    for n in names:
        if n not in TARGETS:
            raise UserError(f"--kernel {n}: unknown target{did_you_mean(n, list(TARGETS))}; "
                            "`eaglefuzz list` names them")
    return list(dict.fromkeys(names)) or None


def source_options(f: Any) -> Any:
    """The options that choose where the code under test comes from (see :mod:`.sources`)."""
    from .sources import OPTIONS

    for o in reversed(OPTIONS):
        if o.metavar is None:
            f = click.option(o.flag, o.dest, is_flag=True, default=False, help=o.help)(f)
        else:
            f = click.option(o.flag, o.dest, metavar=o.metavar, default=None, help=o.help)(f)
    return click.option("--source", "source", default=None, hidden=True)(f)


def _source(values: dict[str, Any]) -> Any:
    from .sources import source_from_options

    return source_from_options(values)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="eaglefuzz")
def cli() -> None:
    """Differential fuzzing of vLLM's EAGLE speculative-decoding helper kernels."""


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
    default="production",
    show_default=True,
    help="production: the inputs vLLM's call sites produce (and the harness's generated extensions); "
    "extended: also the edges outside it where the reference is defined (differences there are "
    "edge divergences, exit code 4)",
)


@cli.command()
@click.option("--kernel", "kernel_names", multiple=True, metavar="NAME", help="target to fuzz (repeatable; default: every target the source defines)")
@source_options
@click.option("--examples", type=click.IntRange(min=1), default=None, help="examples per target [default: 100 without --time-budget]")
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS", help="stop after this many seconds in all (shared evenly by targets)")
@click.option("--seed", type=int, default=0, show_default=True, help="the same seed and options draw the same cases")
@click.option("--mode", type=click.Choice(["hypothesis", "bulk"]), default="hypothesis", show_default=True, help="hypothesis: shrinking strategies; bulk: large NumPy-drawn batches, shrunk on a finding")
@click.option("--shard", metavar="K/N", default=None, help="run share K of N disjoint campaigns (same seed on every machine)")
@_domain_opt
@click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False), default=None, help="where findings are written [default: corpus/ for production code, ./eaglefuzz-findings otherwise]")
@click.option("--keep-going", is_flag=True, help="continue after a finding (default: stop that target at its first finding)")
@_backend_opt
@_json_opt
@click.option("--progress/--no-progress", default=None, help="progress bar [default: on a terminal; without one, a line every 10 s]")
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run in a child process, so a kernel that kills the process is still reported with its case")
@click.pass_context
def fuzz(ctx: click.Context, kernel_names: tuple[str, ...], examples: int | None,
         time_budget: float | None, seed: int, mode: str, shard: str | None, domain: str,
         corpus_dir: str | None, keep_going: bool, backend: str, as_json: bool,
         progress: bool | None, isolate: bool, **source_values: Any) -> None:
    """Fuzz implementations against the oracles; findings are shrunk, reported and saved."""
    from .campaign import Campaign
    from .sources import findings_dir
    from .supervisor import supervise

    shard_k, shard_n = _shard(shard)
    names = _targets(kernel_names)
    source = _source(source_values)
    if examples is None and time_budget is None:
        examples = 100
    corpus = findings_dir(source, corpus_dir)
    if isolate and not os.environ.get(WORKER_ENV):
        sys.exit(supervise(list(ctx.obj["argv"]), source=source, corpus_dir=corpus, as_json=as_json, backend=backend))
    campaign = Campaign(
        names=names, source=source, backend=backend, seed=seed, mode=mode,
        examples=examples, time_budget=time_budget, shard=(shard_k, shard_n),
        corpus_dir=corpus, keep_going=keep_going,
        progress=sys.stderr.isatty() if progress is None else progress, as_json=as_json,
        journal_dir=Path(os.environ[JOURNAL_ENV]) if os.environ.get(JOURNAL_ENV) else None,
        domain=domain,
    )
    sys.exit(campaign.run())


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@source_options
@_backend_opt
@_json_opt
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run in a child process, so a case that kills the process is still reported")
@click.pass_context
def replay(ctx: click.Context, paths: tuple[str, ...], backend: str, as_json: bool, isolate: bool,
           **source_values: Any) -> None:
    """Replay corpus files or folders (default: the whole corpus) against the implementations."""
    from .corpus import CORPUS_DIR, discover, load_entry
    from .replay import replay_cases
    from .sources import findings_dir
    from .supervisor import supervise

    files = discover([Path(p) for p in paths] or [CORPUS_DIR])
    cases = [(f, load_entry(f)) for f in files]  # validate every file before running any
    cases = [(f, e.case, e.tier) for f, e in cases]
    source = _source(source_values)
    if isolate and not os.environ.get(WORKER_ENV):
        sys.exit(supervise(list(ctx.obj["argv"]), source=source, corpus_dir=findings_dir(source),
                           as_json=as_json, backend=backend, save=False))
    journal_dir = Path(os.environ[JOURNAL_ENV]) if os.environ.get(JOURNAL_ENV) else None
    sys.exit(replay_cases(cases, source, backend=backend, as_json=as_json, journal_dir=journal_dir))


@cli.command()
@click.option("--kernel", "kernel_names", multiple=True, metavar="NAME", help="target to audit (repeatable; default: every target the source defines)")
@source_options
@click.option("--examples", type=click.IntRange(min=1), default=60, show_default=True, help="examples drawn per target and tier")
@click.option("--seed", type=int, default=0, show_default=True, help="the same seed and options draw the same cases")
@click.option("--strict", is_flag=True, help="exit 1 when a hazard is reachable in the production tier, 4 when hazards lie in the extended tier only")
@_backend_opt
@_json_opt
def audit(kernel_names: tuple[str, ...], examples: int, seed: int, strict: bool, backend: str, as_json: bool,
          **source_values: Any) -> None:
    """Search both domain tiers for inputs that break what a caller relies on; report each hazard."""
    from .audit import audit as run_audit
    from .backend import select_backend
    from .exitcodes import EXIT_EDGE, EXIT_FINDINGS
    from .sources import implementations_for

    names = _targets(kernel_names)
    source = _source(source_values)
    b = select_backend(backend)
    impls = implementations_for(source, names)
    results = run_audit(list(impls.funcs), impls, b.device, examples=examples, seed=seed)
    hazards = [h for r in results for h in r.hazards]
    if as_json:
        import json

        click.echo(json.dumps({
            "source": source.describe(), "backend": b.name, "seed": seed, "examples": examples,
            "targets": {r.target: {"searched": r.searched, "errors": r.errors, "holds": r.holds,
                                   "hazards": [h.to_json() for h in r.hazards]} for r in results},
        }, indent=2))
    else:
        click.echo(f"eaglefuzz audit of {source.describe()} ({b.name}), seed {seed}, {examples} examples per tier")
        for r in results:
            tiers = ", ".join(f"{n} {t}" for t, n in sorted(r.searched.items()))
            click.echo(f"\n## {r.target}: {tiers} examples" + (f", {r.errors} raised" if r.errors else ""))
            for h in r.hazards:
                click.echo(h.report())
            if r.holds:
                click.echo(f"holds on every example: {', '.join(r.holds)}")
        reach = sum(h.reachable_in_production for h in hazards)
        click.echo(f"\n{len(hazards)} hazard(s), {reach} reachable in the production tier")
    if strict and hazards:
        sys.exit(EXIT_FINDINGS if any(h.reachable_in_production for h in hazards) else EXIT_EDGE)
    sys.exit(EXIT_OK)


@cli.command(name="_shrink-crash", hidden=True)
@click.argument("case_file", type=click.Path(exists=True, dir_okay=False))
@source_options
@_backend_opt
def shrink_crash_worker(case_file: str, backend: str, **source_values: Any) -> None:
    """Worker of the crash shrinker: run the case's smaller variants until one kills us."""
    from .backend import select_backend
    from .check import check_case
    from .corpus import load_entry
    from .domains import shrink_moves
    from .journal import Journal
    from .sources import implementations_for
    from .targets import TARGETS, ContractViolation

    entry = load_entry(case_file)
    case, tier = entry.case, entry.tier  # an edge case shrinks within the extended tier
    b = select_backend(backend)
    impls = implementations_for(_source(source_values), [case.kernel])
    journal = Journal(Path(os.environ[JOURNAL_ENV])) if os.environ.get(JOURNAL_ENV) else None
    target = TARGETS[case.kernel]
    for candidate in shrink_moves(target, case, tier):
        try:
            target.tier_of(candidate, tier)
        except ContractViolation:
            continue
        check_case(candidate, impls, b.device, journal, domain=tier)  # a crash ends this process here
    sys.exit(EXIT_OK)


@cli.command(name="list")
@source_options
def list_targets(**source_values: Any) -> None:
    """List the targets, the features each one tracks, and what the source defines."""
    from .sources import implementations_for
    from .targets import TARGETS

    source = _source(source_values)
    impls = implementations_for(source)
    click.echo(f"source: {source.describe()}")
    for name, t in TARGETS.items():
        where = impls.origin[name].describe() if name in impls else f"not defined by {source.describe()}"
        click.echo(f"{name} ({t.kind}): {where}")
        for f, doc in t.features.items():
            click.echo(f"    {f:24s} {doc}")
        if t.extended_features:
            click.echo("  edges of the extended tier (--domain extended):")
            for f, doc in t.extended_features.items():
                click.echo(f"    {f:24s} {doc}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr and exit code 2."""
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        cli.main(args=args, prog_name="eaglefuzz", standalone_mode=False, obj={"argv": args})
        sys.exit(EXIT_OK)
    except UserError as exc:
        click.echo(f"eaglefuzz: error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"eaglefuzz: error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.Abort:
        click.echo("eaglefuzz: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Exception:  # a bug of eaglefuzz itself: the traceback is the useful report
        import traceback

        traceback.print_exc()
        click.echo("eaglefuzz: internal error (a bug of eaglefuzz, not of the kernel): traceback above", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
