"""One campaign as several shards at once: one process per GPU (``--devices``), or one Ray task
per shard (``--ray``, :mod:`.ray_shards`), merged into one report.

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
from pathlib import Path
from typing import Any

from ..core.errors import UserError
from ..core.interrupts import SIGNALS
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


def run_on_devices(argv: Sequence[str], shards: list[str], devices: list[str], corpus: Path) -> list[ShardRun]:
    """Run shard ``shards[i]`` on ``devices[i]`` (``CUDA_VISIBLE_DEVICES`` set to it), all at
    once; their runs, in order. An interrupting signal to this process is forwarded to each
    shard once (each stops and reports what it found)."""

    procs: list[subprocess.Popen[str]] = []
    tails: list[list[str]] = [[] for _ in shards]
    outs: list[list[str]] = [[] for _ in shards]
    threads: list[threading.Thread] = []
    received: list[int] = []
    lines: list[Any] = []
    old = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in SIGNALS}
    try:
        for i, (shard, device) in enumerate(zip(shards, devices, strict=True)):
            # Its own session, so a Ctrl-C reaches it once (forwarded below), and a lifeline, so
            # it dies with this process even after kill -9 (:mod:`.lifeline`).
            line = lifeline()
            lines.append(line)
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": device, **line.env}
            p = subprocess.Popen([sys.executable, "-m", "eaglefuzz.harness.cli", *child_args(argv, shard, corpus)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, pass_fds=line.pass_fds)
            line.spawned()
            procs.append(p)
            label = f"shard {shard} device {device}"
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
    return [ShardRun(s, f"device {d}", p.returncode, parse_doc("".join(o)), t)
            for s, d, p, o, t in zip(shards, devices, procs, outs, tails, strict=True)]


def fuzz_in_shards(
    argv: Sequence[str],
    *,
    devices: str | None,
    ray_address: str | None,
    shards: int | None,
    shard: tuple[int, int],
    corpus: Path,
    backend: str,
    as_json: bool,
) -> int:
    """``eaglefuzz fuzz --devices ...`` or ``--ray ADDRESS --shards N``: the shards run, their
    reports merged and printed; the exit code. Bad combinations are a :class:`UserError`."""
    if devices is not None and ray_address is not None:
        raise UserError("--devices and --ray: choose one (Ray hands each task its own GPU)")
    if ray_address is not None:
        if shards is None:
            raise UserError(f"--ray {ray_address}: give --shards N (how many Ray tasks)")
        names = sub_shards(shard, shards)
        runs = run_on_ray(ray_address, argv, names, corpus=corpus.resolve(), backend=backend)
        return report(merge(runs, shard), runs, as_json=as_json)
    if shards is not None:
        raise UserError("--shards: only with --ray (--devices runs one shard per device; --shard K/N picks one share)")

    chosen = pick_devices(devices or "all", cuda_devices())
    names = sub_shards(shard, len(chosen))
    runs = run_on_devices(argv, names, chosen, corpus.resolve())
    return report(merge(runs, shard), runs, as_json=as_json)
