"""``eaglefuzz replay --sanitize``: each corpus case replayed under ``compute-sanitizer --tool
memcheck``, an invalid memory access reported as a finding of the case that made it.

A kernel can read or write outside its buffers without changing any output the harness
compares (a read whose value is then discarded, a write past the guard bands into memory
nobody checks). Memcheck sees every such access. Each case runs in its own process under the
sanitizer (``eaglefuzz replay FILE --json --no-isolate``: the case runs in the process the
sanitizer started, with no worker of its own and no warm server, so the sanitizer sees every
launch and waits for no process that outlives the case), so the sanitizer's errors belong to
that case without doubt; ``PYTORCH_NO_CUDA_MEMORY_CACHING=1`` makes every tensor an allocation
of its own, so an access just past one is out of bounds for memcheck too. The sanitizer writes
to a log file of its own; its first error block becomes the report of an ``invalid memory
access`` finding (exit code 1). The case's own verdict (a difference, a crash) is kept when the
sanitizer found nothing. Each sanitized process runs in a process group of its own within a
bound (:func:`process_limit`); one that outlasts it is a ``hang`` of its case, and its whole
group is ended, as it is when the replay is interrupted.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ..checking.costs import time_limit
from ..core.errors import UserError
from ..core.exitcodes import EXIT_USAGE
from ..core.limits import current
from ..reporting.replay_report import print_replay, replay_doc, replay_exit_code
from .cuda_devices import cuda_devices
from .multi import parse_doc

SANITIZER = "compute-sanitizer"
ERROR_EXIT = 99
"""The exit code the sanitizer gives a process in which it found an error."""
KIND = "invalid memory access"
NOT_ERRORS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY", "Target application returned an error")
PREFIX = "========="
REPORT_LINES = 14
"""Lines of the sanitizer's first error block that a finding's report quotes."""
TIMEOUT_SCALE = 20
"""Under the sanitizer kernels run far slower: the cases' time limits are scaled by this much
(unless ``--limits`` or ``--case-timeout`` say otherwise)."""
START_S = 120.0
"""Seconds a sanitized process may take on top of its case's time limit: the sanitizer's own
start, and Python, torch, CUDA and Triton starting under it."""
STOP_GRACE_S = 5.0
"""Seconds a sanitized process group has to leave after SIGTERM before it is killed."""


def process_limit(case: Any, *, scaled: bool) -> float:
    """Seconds the sanitized process of ``case`` may run: :data:`START_S` plus the case's time
    limit (:func:`~..checking.costs.time_limit`, compiled), scaled by :data:`TIMEOUT_SCALE` when
    ``scaled`` (the user set no limit of their own)."""

    lim = current()
    if scaled:
        lim = replace(lim, timeout_scale=lim.timeout_scale * TIMEOUT_SCALE)
    return START_S + time_limit(case, compiled=True, limits=lim)


GONE_S = 2.0
"""Seconds :func:`_end_group` waits, after SIGKILL, for the group's last processes to exit (a
killed process leaves when the kernel next runs it: on a loaded machine, not at once)."""


def _end_group(proc: subprocess.Popen[str]) -> None:
    """End ``proc``'s process group (the sanitizer and everything it started): SIGTERM, then
    SIGKILL after :data:`STOP_GRACE_S`; it returns once no process of the group runs (or after
    :data:`GONE_S` more)."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            if sig == signal.SIGTERM:
                os.killpg(proc.pid, signal.SIGKILL)  # anything of the group still there
            break
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return
    _wait_gone(proc.pid)


def _wait_gone(group: int) -> None:
    """Until no process of ``group`` is left to signal, at most :data:`GONE_S` seconds (one
    that has exited but is not yet reaped counts as left: the wait then runs out)."""
    end = time.monotonic() + GONE_S
    while time.monotonic() < end:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def run_sanitized(cmd: list[str], env: dict[str, str], limit_s: float) -> tuple[int | None, str, str, float]:
    """Run ``cmd`` in a process group of its own for at most ``limit_s`` seconds: (exit code,
    or ``None`` when it outlasted the limit and its group was ended; stdout; stderr; seconds).
    An interruption ends the group too, then propagates."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit_s)
        return proc.returncode, out, err, time.monotonic() - start
    except subprocess.TimeoutExpired:
        _end_group(proc)
        out, err = proc.communicate()
        return None, out, err, time.monotonic() - start
    except BaseException:
        _end_group(proc)
        raise


def sanitizer_command(log: Path) -> list[str]:
    """The command prefix that runs a process under memcheck, its text into ``log``; a
    :class:`UserError` when compute-sanitizer is not on ``PATH``."""
    exe = shutil.which(SANITIZER)
    if exe is None:
        raise UserError(f"--sanitize: {SANITIZER} is not on PATH (it ships with the CUDA toolkit: add "
                        "its bin/ folder, e.g. /usr/local/cuda/bin, to PATH)")
    return [exe, "--tool", "memcheck", "--print-limit", "20", "--error-exitcode", str(ERROR_EXIT),
            "--log-file", str(log)]


def error_blocks(text: str) -> list[list[str]]:
    """The error blocks of a compute-sanitizer log: each its lines without the ``=========``
    prefix, from its headline (``Invalid __global__ read of size 4 bytes``, ``Program hit
    cudaErrorLaunchFailure ...``) to the next headline. The banner and the summary are not
    errors."""
    blocks: list[list[str]] = []
    for raw in text.splitlines():
        if not raw.startswith(PREFIX):
            continue
        line = raw[len(PREFIX):]
        body = line.strip()
        if not body or body.startswith(NOT_ERRORS):
            continue
        if line[:1].isspace() and not line[1:2].isspace():  # a headline: one space, then text
            blocks.append([body])
        elif blocks:  # a detail line, indented further
            blocks[-1].append(body)
    return blocks


def summary_errors(text: str) -> int:
    """The error count of the log's ``ERROR SUMMARY: N errors`` line (0 without one)."""
    for line in reversed(text.splitlines()):
        if "ERROR SUMMARY:" in line:
            try:
                return int(line.split("ERROR SUMMARY:", 1)[1].split()[0])
            except (IndexError, ValueError):
                return 0
    return 0


def finding_report(file: str, blocks: list[list[str]], errors: int, verdict: str) -> str:
    """The report of an invalid memory access of the case in ``file``: the sanitizer's first
    error block (host frames cut short), how many errors it counted, the replay's verdict."""
    first = blocks[0]
    shown = [ln for ln in first if not ln.startswith("Host Frame")][:REPORT_LINES]
    lines = [f"compute-sanitizer memcheck: {first[0]} while replaying {file}"]
    lines += ["    " + ln for ln in shown[1:]]
    more = max(errors, len(blocks)) - 1
    if more > 0:
        lines.append(f"... and {more} more error(s): " + "; ".join(b[0] for b in blocks[1:4]))
    lines.append(f"the replay's own verdict: {verdict} (the outputs compared are not all the memory a kernel touches)")
    lines.append(f"replay it under the sanitizer: eaglefuzz replay --sanitize {file}")
    return "\n".join(lines)


def hang_record(file: str, kernel: str, size: int, limit_s: float, log: str) -> dict[str, Any]:
    """The record of a case whose sanitized process outlasted ``limit_s`` (its group ended)."""
    blocks = error_blocks(log)
    seen = f"; the sanitizer had logged: {blocks[0][0]}" if blocks else ""
    report = "\n".join([
        f"{kernel} did not finish under compute-sanitizer: replaying {file} ran past its limit of "
        f"{limit_s:g} s (the case's time limit x {TIMEOUT_SCALE} unless --limits/--case-timeout set it, "
        f"plus {START_S:g} s to start) and its processes were ended{seen}",
        f"replay it under the sanitizer: eaglefuzz replay --sanitize {file}",
    ])
    return {"file": file, "kernel": kernel, "status": "failed", "kind": "hang", "report": report,
            "signature": repr((kernel, "hang", "sanitizer")), "size": size}


def _record(file: str, kernel: str, size: int, code: int, doc: dict[str, Any] | None, log: str,
            stderr: str = "") -> dict[str, Any]:
    """One file's record (as :func:`~..reporting.replay_report.replay_doc` takes them) from its sanitized run: an
    error in the sanitizer's log first; else the replay's own verdict; a process that ended
    without its report (killed by a signal, an internal error) is a ``crash`` of its case."""
    blocks, errors = error_blocks(log), summary_errors(log)
    failed = (doc or {}).get("failed", [])
    if blocks or errors or code == ERROR_EXIT:
        blocks = blocks or [[f"{errors or 'an'} error(s) reported (exit code {code}), no error block in its log"]]
        verdict = f"{failed[0]['kind']}" if failed else ("passed" if doc and doc.get("replayed") else "no verdict")
        headline = " ".join(w for w in blocks[0][0].split() if not w.startswith("0x"))
        return {"file": file, "kernel": kernel, "status": "failed", "kind": KIND,
                "report": finding_report(file, blocks, errors, verdict),
                "signature": repr((kernel, KIND, headline)), "size": size}
    if failed:
        f = failed[0]
        return {"file": file, "kernel": kernel, "status": "failed", "kind": f["kind"], "report": f["report"],
                "signature": repr((kernel, f["kind"], file)), "size": size}
    if doc is not None and doc.get("not_replayed"):
        return {"file": file, "kernel": kernel, "status": "skipped"}
    if doc is None:
        how = f"was killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        tail = [ln for ln in stderr.strip().splitlines() if ln.strip()][-REPORT_LINES:]
        report = "\n".join([f"{kernel} failed to run: under compute-sanitizer the replay of {file} {how} "
                             "without its report", *("    " + ln for ln in tail),
                             f"replay it under the sanitizer: eaglefuzz replay --sanitize {file}"])
        return {"file": file, "kernel": kernel, "status": "failed", "kind": "crash", "report": report,
                "signature": repr((kernel, "crash", how)), "size": size}
    return {"file": file, "kernel": kernel, "status": "ok"}


def sanitize_replay(
    cases: Sequence[tuple[Path, Any, str]],
    source: Any,
    *,
    backend: str,
    as_json: bool,
    limit_args: list[str],
) -> int:
    """Replay each of ``cases`` (file, case, tier) in its own process under memcheck; print
    ``ok``/``FAIL`` per file and the report (:func:`~..reporting.replay_report.print_replay`); the exit code.

    A :class:`UserError` when compute-sanitizer is missing, there is no CUDA device, or the
    backend is the interpreter (no CUDA code runs there: the sanitizer would see nothing).
    ``limit_args``: the ``--limits``/``--case-timeout`` options the user gave (else the time
    limits are scaled by :data:`TIMEOUT_SCALE`); they are in force in this process already
    (``EAGLEFUZZ_LIMITS``), which the sanitized processes inherit.
    """

    if backend == "interpreter":
        raise UserError("--sanitize: --backend interpreter runs no CUDA code; compute-sanitizer checks GPU kernels")
    if not cuda_devices():
        raise UserError("--sanitize: no CUDA device here; compute-sanitizer checks kernels running on a GPU")
    records: list[dict[str, Any]] = []
    meta: dict[str, Any] | None = None
    # Every tensor its own allocation, and no guard bands around the arrays: memcheck sees an
    # access just past an array only where nothing of ours lies there. No warm server: the
    # sanitizer waits for every process it started, and a server outlives the command.
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "EAGLEFUZZ_GUARD_BANDS": "0",
           "EAGLEFUZZ_WARM": "0"}
    stopped = False
    with tempfile.TemporaryDirectory(prefix="eaglefuzz-sanitize-") as d:
        try:
            for i, (f, case, _tier) in enumerate(cases):
                log = Path(d) / f"{i}.log"
                cmd = [*sanitizer_command(log), sys.executable, "-m", "eaglefuzz.harness.cli", "replay", str(f),
                       "--source", source.spec, "--backend", backend, "--json", "--no-isolate"]
                limit_s = process_limit(case, scaled=not limit_args)
                code, out, err, _ = run_sanitized(cmd, env, limit_s)
                doc = parse_doc(out)
                if code == EXIT_USAGE and doc is None:
                    sys.stderr.write(err)
                    return EXIT_USAGE
                if doc is not None and meta is None and "backend" in doc:
                    meta = {k: doc[k] for k in ("backend", "source", "implementations")}
                text = log.read_text(errors="replace") if log.is_file() else ""
                size = len(case.to_python())
                r = (hang_record(str(f), case.kernel, size, limit_s, text) if code is None
                     else _record(str(f), case.kernel, size, code, doc, text, err))
                records.append(r)
                if not as_json and r["status"] != "skipped":
                    click.echo(f"ok   {f}" if r["status"] == "ok" else f"FAIL {f}")
        except KeyboardInterrupt:
            stopped = True
    meta = meta or {"backend": backend, "source": source.describe(), "implementations": {}}
    doc = replay_doc(meta, records, stopped, planned=len(cases))
    doc["sanitizer"] = "compute-sanitizer --tool memcheck, one process per case"
    print_replay(doc, as_json=as_json)
    sys.stdout.flush()
    return replay_exit_code(doc, None) if not stopped else replay_exit_code(doc, 2)
