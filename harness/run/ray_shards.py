"""``eaglefuzz fuzz --ray ADDRESS --shards N``: one Ray task per shard, beyond one host.

Each task runs the ordinary campaign of its shard (``eaglefuzz fuzz ... --shard i/N --json``,
supervised in its own processes on the node Ray picks) and returns its exit code, its JSON
document and its stderr's last lines; :mod:`.multi` merges them into one report. A task asks
for one GPU when the run is compiled (``--backend cuda``, or ``auto`` on a cluster with GPUs;
Ray then sets its ``CUDA_VISIBLE_DEVICES``) and none under the interpreter.

Findings are saved by the tasks themselves, with the ordinary save (atomic, named by content),
into the corpus folder given as an absolute path: on a cluster it must be a filesystem that
every node shares (NFS, a mounted bucket). Every node needs eaglefuzz importable by the Python
Ray runs; the driver's ``PYTHONPATH`` and ``EAGLEFUZZ_*`` variables travel with the tasks.

Ray is an optional dependency (``pip install 'eaglefuzz[ray]'``); only this module imports it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.clock import STARTED_ENV
from ..core.errors import UserError
from .shards import ShardRun, child_args, parse_doc


def run_shard(args: list[str], cwd: str) -> dict[str, Any]:
    """The body of one Ray task: ``eaglefuzz args`` in a subprocess; its exit code, stdout,
    stderr's last lines and where it ran (host, ``CUDA_VISIBLE_DEVICES``)."""
    env = {k: v for k, v in os.environ.items() if k != STARTED_ENV}  # its budget counts from here
    proc = subprocess.run([sys.executable, "-m", "eaglefuzz.harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd if os.path.isdir(cwd) else None, check=False, env=env)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = socket.gethostname() + (f" GPU {gpu}" if gpu else "")
    return {"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr.splitlines()[-20:], "where": where}


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--ray: Ray is not installed; install the extra: pip install 'eaglefuzz[ray]'") from None
    return ray


def _gpus_per_task(ray: Any, backend: str) -> int:
    if backend == "cuda":
        return 1
    if backend == "interpreter":
        return 0
    return 1 if ray.cluster_resources().get("GPU", 0) > 0 else 0


def run_on_ray(address: str, argv: Sequence[str], shards: list[str], *, corpus: Path, backend: str) -> list[Any]:
    """Run shard ``shards[i]`` as Ray task ``i`` on the cluster at ``address`` (``local``: a
    new local instance; ``auto``: the running cluster, as Ray's own ``address="auto"``); the
    runs (:class:`~.shards.ShardRun`), in order. Ray's own log lines stay out of the report."""
    ray = _import_ray()
    # a task may wait for a GPU: its --time-budget counts from its own start, not the command's
    env = {k: v for k, v in os.environ.items()
           if (k == "PYTHONPATH" or k.startswith("EAGLEFUZZ_")) and k != STARTED_ENV}
    try:
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR", runtime_env={"env_vars": env})
    except ConnectionError as exc:
        raise UserError(f"--ray {address}: cannot reach a Ray cluster there: {' '.join(str(exc).split())[:200]}") from None
    try:
        gpus = _gpus_per_task(ray, backend)
        task = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(run_shard)
        print(f"eaglefuzz: {len(shards)} Ray task(s) on {address}, {gpus} GPU each", file=sys.stderr, flush=True)
        refs = [task.remote(child_args(argv, s, corpus), os.getcwd()) for s in shards]
        try:
            results = ray.get(refs)
        except KeyboardInterrupt:
            for r in refs:
                ray.cancel(r, force=True)
            raise
    finally:
        ray.shutdown()
    runs = []
    for s, r in zip(shards, results, strict=True):
        for line in r["stderr"]:
            print(f"[shard {s} on {r['where']}] {line}", file=sys.stderr)
        runs.append(ShardRun(s, r["where"], r["code"], parse_doc(r["stdout"]), r["stderr"]))
    return runs
