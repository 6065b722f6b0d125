"""Lanes of one GPU through CUDA's Multi-Process Service (``eaglefuzz fuzz --lanes N --mps``).

Without it, the processes of one GPU's lanes time-slice it: a kernel of one lane never runs
beside another lane's, and most of a lane's kernels (the harness's passes over a batch, the
target's launches) fill a small part of the GPU. Under MPS their kernels run at once.

:func:`private_mps` starts a control daemon of the campaign's own (its pipe and log folders in
a temporary folder, so it neither finds nor disturbs another daemon on the host) and quits it
when the campaign ends; the lanes inherit :data:`ENV` and connect to it. MPS shares one fault
among its clients: a CUDA fault in one lane ends every lane's CUDA context. A process that must
fault alone (a production-scale case, a batch's cases drawn again, a crash located, confirmed
or shrunk) runs without :data:`ENV` (:func:`alone`): a context of its own, time-sliced as
without MPS. A lane's crash is a finding only where its case faults alone (the supervisor's
:func:`~..run.supervisor.locate_fault`): otherwise another lane's fault ended its context, and
the lane goes on. So does a lane whose context a fault ends outside any launch (its draw, its
oracle: :func:`shared_fault`), in a new worker. A lane that meets such faults again and again
leaves the daemon (:data:`~..run.supervisor.MPS_PASSES`) and runs on time-sliced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError

CONTROL = "nvidia-cuda-mps-control"
"""CUDA's MPS control program (with the driver's utilities)."""
ENV = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")
"""The variables that make a process a client of a given MPS daemon."""
START_S = 30.0
"""Seconds the daemon may take to start or to quit."""
PROBE_S = 180.0
"""Seconds the probe client (:func:`private_mps`'s ``probe``) may take."""
CUDA_PROBE = ("import torch\n"
              "torch.cuda.init()\n"
              "assert float((torch.ones(4, device='cuda') + 1).sum()) == 8.0\n")
"""A client's first CUDA work: the probe a campaign runs before its lanes."""


def under_mps(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a process with ``environ`` (this one's by default) is a client of a private daemon."""
    env = os.environ if environ is None else environ
    return bool(env.get(ENV[0]))


def shared_fault(exc: BaseException, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``exc``, raised in a process with ``environ`` (this one's by default), is a CUDA
    error of a client of a daemon: the context is unusable, and the fault may be another
    client's (MPS shares it). Without MPS such an error outside a launch is the harness's own."""
    text = str(exc)
    return under_mps(environ) and ("CUDA error" in text or "Triton Error [CUDA]" in text)


def alone(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (this process's by default) without :data:`ENV`: a process started with it
    has a CUDA context of its own, whose fault ends no other."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k not in ENV}


@contextmanager
def private_mps(control: str = CONTROL, probe: Sequence[str] | None = None) -> Iterator[dict[str, str]]:
    """A running MPS control daemon of this campaign's own; yields the variables (:data:`ENV`)
    that make a process its client, and quits it on leaving (the lanes gone first). ``probe``: a
    command run first as its client (its first CUDA work, :data:`CUDA_PROBE`), so that a daemon
    whose clients cannot start stops the campaign before any lane runs. A :class:`UserError`
    when ``control`` is not on ``PATH``, does not start, or the probe fails."""
    exe = shutil.which(control)
    if exe is None:
        raise UserError(f"--mps: {control} is not on PATH (CUDA's Multi-Process Service comes with the NVIDIA driver's "
                        "utilities); install them or leave --mps out")
    with tempfile.TemporaryDirectory(prefix="eaglefuzz-mps-") as d:
        add = {ENV[0]: str(Path(d) / "pipe"), ENV[1]: str(Path(d) / "log")}
        for folder in add.values():
            Path(folder).mkdir()
        env = {**os.environ, **add}
        try:
            r = subprocess.run([exe, "-d"], env=env, capture_output=True, text=True, timeout=START_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise UserError(f"--mps: {control} -d did not start: {exc}") from None
        if r.returncode != 0:
            why = (r.stderr or r.stdout).strip().splitlines()
            raise UserError(f"--mps: {control} -d exited with {r.returncode}" + (f": {why[0]}" if why else ""))
        try:
            if probe is not None:
                _probe(list(probe), env, control)
            yield add
        finally:
            try:
                subprocess.run([exe], input="quit\n", env=env, capture_output=True, text=True, timeout=START_S,
                               check=False)
            except (OSError, subprocess.TimeoutExpired):
                pass


def _probe(cmd: list[str], env: dict[str, str], control: str) -> None:
    """Run ``cmd`` as a client of the daemon; a :class:`UserError` with its last line if it fails."""
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=PROBE_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"--mps: a CUDA process could not start as a client of {control}'s daemon: {exc}") from None
    if r.returncode != 0:
        why = (r.stderr or r.stdout).strip().splitlines()
        raise UserError(f"--mps: a CUDA process could not start as a client of {control}'s daemon"
                        + (f": {why[-1]}" if why else f" (exit code {r.returncode})"))
