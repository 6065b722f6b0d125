"""The ``eaglefuzz`` command line: ``fuzz``, ``replay`` and ``list``.

Exit codes: 0 when no output differs, 1 when one does (a report is printed and the case is
written to the corpus), 2 on a usage or input error (one line on stderr, no traceback), 3 on
an internal error of eaglefuzz (with its traceback), 130 when interrupted with nothing found.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .errors import UserError
from .exitcodes import EXIT_FINDINGS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

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


def _targets(names: Sequence[str]) -> list[str]:
    from .targets import TARGETS

    for n in names:
        if n not in TARGETS:
            raise UserError(f"--kernel {n}: unknown; choose from {', '.join(TARGETS)}")
    return list(dict.fromkeys(names)) or list(TARGETS)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="eaglefuzz")
def cli() -> None:
    """Differential fuzzing of vLLM's EAGLE speculative-decoding helper kernels."""


_kernels_opt = click.option(
    "--kernels",
    "kernels_path",
    metavar="PATH",
    help="Python file defining implementations under their vLLM names; the rest come from kernels/.",
)
_backend_opt = click.option(
    "--backend",
    type=click.Choice(["auto", "cuda", "interpreter"]),
    default="auto",
    show_default=True,
    help="compiled on CUDA, or the Triton interpreter on the CPU (auto: CUDA when present)",
)
_json_opt = click.option("--json", "as_json", is_flag=True, help="print one JSON document instead of text")


@cli.command()
@click.option("--kernel", "kernel_names", multiple=True, metavar="NAME", help="target to fuzz (repeatable; default: all)")
@_kernels_opt
@click.option("--examples", type=click.IntRange(min=1), default=None, help="examples per target [default: 100 without --time-budget]")
@click.option("--time-budget", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS", help="stop after this many seconds in all (shared evenly by targets)")
@click.option("--seed", type=int, default=0, show_default=True, help="the same seed and options draw the same cases")
@click.option("--mode", type=click.Choice(["hypothesis", "bulk"]), default="hypothesis", show_default=True, help="hypothesis: shrinking strategies; bulk: large NumPy-drawn batches, shrunk on a finding")
@click.option("--shard", metavar="K/N", default=None, help="run share K of N disjoint campaigns (same seed on every machine)")
@click.option("--corpus", "corpus_dir", type=click.Path(file_okay=False), default=None, help="where findings are written [default: the checkout's corpus/]")
@click.option("--keep-going", is_flag=True, help="continue after a finding (default: stop that target at its first finding)")
@_backend_opt
@_json_opt
@click.option("--progress/--no-progress", default=None, help="progress bar [default: on a terminal]")
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run in a child process, so a kernel that kills the process is still reported with its case")
@click.pass_context
def fuzz(ctx: click.Context, kernel_names: tuple[str, ...], kernels_path: str | None, examples: int | None,
         time_budget: float | None, seed: int, mode: str, shard: str | None, corpus_dir: str | None,
         keep_going: bool, backend: str, as_json: bool, progress: bool | None, isolate: bool) -> None:
    """Fuzz kernels against the oracles; findings are shrunk, reported and saved to the corpus."""
    from .campaign import Campaign
    from .supervisor import supervise

    shard_k, shard_n = _shard(shard)
    names = _targets(kernel_names)
    if kernels_path is not None and not Path(kernels_path).is_file():
        raise UserError(f"--kernels {kernels_path}: no such file")
    if examples is None and time_budget is None:
        examples = 100
    if isolate and not os.environ.get(WORKER_ENV):
        sys.exit(supervise(list(ctx.obj["argv"]), kernels_path=kernels_path,
                           corpus_dir=Path(corpus_dir) if corpus_dir else None, as_json=as_json, backend=backend))
    campaign = Campaign(
        names=names, kernels_path=kernels_path, backend=backend, seed=seed, mode=mode,
        examples=examples, time_budget=time_budget, shard=(shard_k, shard_n),
        corpus_dir=Path(corpus_dir) if corpus_dir else None, keep_going=keep_going,
        progress=sys.stderr.isatty() if progress is None else progress, as_json=as_json,
        journal_dir=Path(os.environ[JOURNAL_ENV]) if os.environ.get(JOURNAL_ENV) else None,
    )
    sys.exit(campaign.run())


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@_kernels_opt
@_backend_opt
@_json_opt
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="run in a child process, so a case that kills the process is still reported")
@click.pass_context
def replay(ctx: click.Context, paths: tuple[str, ...], kernels_path: str | None, backend: str, as_json: bool,
           isolate: bool) -> None:
    """Replay corpus files or folders (default: the whole corpus) against the kernels."""
    from .backend import select_backend
    from .check import check_case
    from .corpus import CORPUS_DIR, discover, load_case
    from .impls import load_implementations
    from .journal import Journal
    from .supervisor import supervise
    from .targets import TARGETS

    files = discover([Path(p) for p in paths] or [CORPUS_DIR])
    cases = [(f, load_case(f)) for f in files]  # validate every file before running any
    if kernels_path is not None and not Path(kernels_path).is_file():
        raise UserError(f"--kernels {kernels_path}: no such file")
    if isolate and not os.environ.get(WORKER_ENV):
        sys.exit(supervise(list(ctx.obj["argv"]), kernels_path=kernels_path, corpus_dir=None, as_json=as_json,
                           backend=backend, save=False))
    b = select_backend(backend)
    impls = load_implementations(kernels_path, TARGETS)
    journal = Journal(Path(os.environ[JOURNAL_ENV])) if os.environ.get(JOURNAL_ENV) else None
    failed: list[dict[str, Any]] = []
    for f, case in cases:
        finding = check_case(case, impls, b.device, journal)
        if finding is not None:
            failed.append({"file": str(f), "kernel": case.kernel, "kind": finding.kind, "report": finding.report()})
            if not as_json:
                click.echo(f"FAIL {f}\n{finding.report()}\n")
        elif not as_json:
            click.echo(f"ok   {f}")
    if as_json:
        click.echo(json.dumps({"backend": b.name, "replayed": len(cases), "failed": failed}, indent=2))
    else:
        click.echo(f"{len(cases) - len(failed)} passed, {len(failed)} failed")
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


@cli.command(name="_shrink-crash", hidden=True)
@click.argument("case_file", type=click.Path(exists=True, dir_okay=False))
@_kernels_opt
@_backend_opt
def shrink_crash_worker(case_file: str, kernels_path: str | None, backend: str) -> None:
    """Worker of the crash shrinker: run the case's smaller variants until one kills us."""
    from .backend import select_backend
    from .check import check_case
    from .corpus import load_case
    from .impls import load_implementations
    from .journal import Journal
    from .targets import TARGETS, ContractViolation

    case = load_case(case_file)
    b = select_backend(backend)
    impls = load_implementations(kernels_path, TARGETS)
    journal = Journal(Path(os.environ[JOURNAL_ENV])) if os.environ.get(JOURNAL_ENV) else None
    target = TARGETS[case.kernel]
    for candidate in target.shrink_candidates(case):
        try:
            target.validate(candidate)
        except ContractViolation:
            continue
        check_case(candidate, impls, b.device, journal)  # a crash ends this process here
    sys.exit(EXIT_OK)


@cli.command(name="list")
def list_targets() -> None:
    """List the targets and the semantic features each one tracks."""
    from .targets import TARGETS

    for name, t in TARGETS.items():
        click.echo(f"{name} ({t.kind})")
        for f, doc in t.features.items():
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
