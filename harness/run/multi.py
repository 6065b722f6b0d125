"""One campaign as several shards at once: one process per GPU (``--devices``), ``N`` per GPU
(``--lanes N``), or one Ray task per shard (``--ray``, :mod:`.ray_shards`), merged into one
report.

Lanes: a device run launches each case from Python (vLLM's launchers), so one process keeps a
GPU busy a fraction of the time; ``N`` processes on one GPU launch ``N`` streams of cases at
once (the GPU time-slices between them; with ``--mps`` their kernels run at once,
:mod:`~..core.mps`). Lane 1 of each GPU alone draws production-scale cases
(tables of tens of GB each, a process of their own), and each lane's producer processes are its
share of the host's cores (:func:`~..checking.device_mode.producers.default_workers`).

Each shard is the ordinary ``eaglefuzz fuzz`` with ``--shard i/n`` and the same seed and
options (a supervised run of its own: crashes and hangs are handled per shard), run with
``--json`` into the one corpus; this module starts them, prefixes their progress lines with
the shard's name, and merges their documents. With ``--shard K/N`` given too, share K of N
is split further: its ``m`` shards are ``K + i*N`` of ``N*m`` (``i < m``), whose union is
exactly share K/N, so ``--devices`` runs on N machines still cover disjoint shares.

``--examples`` and ``--time-budget`` apply to each shard, as with ``--shard`` on separate
machines: ``m`` shards check ``m`` times the examples. In the merged report a target's counts
are summed, its seconds are the longest shard's (so ex/s is the rate of all shards together),
its features are the union, and each finding names its shard and device (or Ray node).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ..core.errors import UserError
from ..core.interrupts import SIGNALS
from ..core.mps import CUDA_PROBE, private_mps
from ..core.scale_examples import holds_scale_examples
from .cuda_devices import cuda_devices, pick_devices
from .lifeline import lifeline
from .ray_shards import run_on_ray
from .shards import ShardRun, child_args, merge, parse_doc, report, sub_shards


def _pump(stream: Any, label: str, tail: list[str]) -> None:
    for line in iter(stream.readline, ""):
        tail.append(line.rstrip("\n"))
        del tail[:-20]
        sys.stderr.write(f"[{label}] {line}")
        sys.stderr.flush()
    stream.close()


def lane_numbers(shards: list[str], lanes: int) -> list[int]:
    """Each shard's lane on its device (1-based; ``lanes`` shards in a row a device). Lane 1
    alone draws production-scale cases (their tables take tens of GB of the device), so lane 1
    is the device's first shard whose share holds any
    (:func:`~..core.scale_examples.holds_scale_examples`; with an even number of lanes the
    first share holds none), the others following it in turn; a device none of whose shares
    holds one keeps their order."""
    out: list[int] = []
    for g in range(0, len(shards), lanes):
        group = [_share(s) for s in shards[g : g + lanes]]
        first = next((j for j, (k, n) in enumerate(group) if holds_scale_examples(k, n)), 0)
        out += [(j - first) % len(group) + 1 for j in range(len(group))]
    return out


def _share(shard: str) -> tuple[int, int]:
    """``--shard K/N``'s share, 0-based: ``(K - 1, N)``."""
    k, n = shard.split("/")
    return int(k) - 1, int(n)


def run_on_devices(argv: Sequence[str], shards: list[str], devices: list[str], corpus: Path,
                   lanes: int = 1, env: dict[str, str] | None = None) -> list[ShardRun]:
    """Run shard ``shards[i]`` on ``devices[i]`` (``CUDA_VISIBLE_DEVICES`` set to it), all at
    once; their runs, in order. ``lanes`` > 1: ``devices`` names each device ``lanes`` times in
    a row, and each shard is a lane of its device (``--lane``, :func:`lane_numbers`: lane 1
    alone draws production-scale cases, whose tables take tens of GB of the device). An
    interrupting signal to this process is forwarded to each shard once (each stops and reports
    what it found). ``env``: variables every shard gets (an MPS daemon's, :mod:`~..core.mps`)."""

    procs: list[subprocess.Popen[str]] = []
    tails: list[list[str]] = [[] for _ in shards]
    outs: list[list[str]] = [[] for _ in shards]
    threads: list[threading.Thread] = []
    received: list[int] = []
    lines: list[Any] = []
    number = lane_numbers(shards, lanes) if lanes > 1 else [1] * len(shards)
    old = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in SIGNALS}
    try:
        for i, (shard, device) in enumerate(zip(shards, devices, strict=True)):
            # Its own session, so a Ctrl-C reaches it once (forwarded below), and a lifeline, so
            # it dies with this process even after kill -9 (:mod:`.lifeline`).
            line = lifeline()
            lines.append(line)
            shard_env = {**os.environ, **(env or {}), "CUDA_VISIBLE_DEVICES": device, **line.env}
            lane = ["--lane", f"{number[i]}/{lanes}"] if lanes > 1 else []
            p = subprocess.Popen([sys.executable, "-m", "eaglefuzz.harness.cli", *child_args(argv, shard, corpus), *lane],
                                 env=shard_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, pass_fds=line.pass_fds)
            line.spawned()
            procs.append(p)
            label = f"shard {shard} device {device}" + (f" lane {number[i]}/{lanes}" if lanes > 1 else "")
            threads.append(threading.Thread(target=_pump, args=(p.stderr, label, tails[i]), daemon=True))
            threads.append(threading.Thread(target=lambda p=p, o=outs[i]: o.append(p.stdout.read()), daemon=True))
        for t in threads:
            t.start()
        forwarded = 0
        while any(p.poll() is None for p in procs):
            if len(received) > forwarded:
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGKILL if forwarded else received[forwarded])
                forwarded = len(received)
            threading.Event().wait(0.2)
        for t in threads:
            t.join()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for s, h in old.items():
            signal.signal(s, h)
        for line in lines:
            line.close()
    where = [f"device {d}" + (f", lane {number[i]}/{lanes}" if lanes > 1 else "") for i, d in enumerate(devices)]
    return [ShardRun(s, w, p.returncode, parse_doc("".join(o)), t)
            for s, w, p, o, t in zip(shards, where, procs, outs, tails, strict=True)]


def fuzz_in_shards(
    argv: Sequence[str],
    *,
    devices: str | None,
    ray_address: str | None,
    shards: int | None,
    lanes: int = 1,
    mps: bool = False,
    shard: tuple[int, int],
    corpus: Path,
    backend: str,
    as_json: bool,
) -> int:
    """``eaglefuzz fuzz --devices ...``, ``--lanes N`` or ``--ray ADDRESS --shards N``: the shards
    run, their reports merged and printed; the exit code. ``mps``: the lanes are clients of an
    MPS daemon of this campaign's own (:func:`~..core.mps.private_mps`). Bad combinations are a
    :class:`UserError`."""
    if devices is not None and ray_address is not None:
        raise UserError("--devices and --ray: choose one (Ray hands each task its own GPU)")
    if lanes > 1 and ray_address is not None:
        raise UserError(f"--lanes {lanes} and --ray: choose one (Ray hands each task its own GPU; "
                        "--shards N sets how many tasks)")
    if ray_address is not None:
        if shards is None:
            raise UserError(f"--ray {ray_address}: give --shards N (how many Ray tasks)")
        names = sub_shards(shard, shards)
        runs = run_on_ray(ray_address, argv, names, corpus=corpus.resolve(), backend=backend)
        return report(merge(runs, shard), runs, as_json=as_json)
    if shards is not None:
        raise UserError("--shards: only with --ray (--devices runs one shard per device; --shard K/N picks one share)")

    available = cuda_devices()
    if devices is None and lanes > 1:
        if not available:
            raise UserError(f"--lanes {lanes}: no CUDA device here; run on a GPU host, or drop --lanes")
        chosen = available[:1]
    else:
        chosen = pick_devices(devices or "all", available)
    names = sub_shards(shard, len(chosen) * lanes)
    with private_mps(probe=[sys.executable, "-c", CUDA_PROBE]) if mps else nullcontext({}) as env:
        runs = run_on_devices(argv, names, [d for d in chosen for _ in range(lanes)], corpus.resolve(), lanes=lanes,
                              env=env)
    return report(merge(runs, shard), runs, as_json=as_json)
