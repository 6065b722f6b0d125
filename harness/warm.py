"""The warm server's process: ``python -m eaglefuzz.harness.warm SOCKET``.

:func:`~.run.warm_servers.start_server` starts it in the background; it imports what every
worker needs once (:func:`preload`) and then forks each command's worker from itself, which
runs the command line (:func:`run_command`) as ``python -m eaglefuzz.harness.cli ARGV`` would.
The machinery (keys, sockets, the serving loop, ``stop-servers``) is :mod:`.run.warm_servers`;
this module only joins it to the command line, which sits above it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .cli import _main, fast_exit, use_numba_cache
from .run.warm_servers import IDLE_ENV, IDLE_S, can_fork, serve


def preload() -> None:
    """What every worker imports before its first case, Triton and the code under test aside;
    the oracles' compiled code loaded. Nothing here may touch CUDA."""
    # Should anything ask torch whether CUDA is there, NVML answers: asking the CUDA runtime
    # would initialise CUDA here, and no forked worker could use it after that.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    use_numba_cache()
    import torch  # noqa: F401 - the harness imports it only where a case runs

    from .checking import check
    from .run import campaign, replaying  # noqa: F401 - what the commands' workers run
    from .targets import TARGETS

    check.warm_oracles(sorted(TARGETS))
    if not can_fork():
        raise RuntimeError("the warm server imported Triton or started CUDA: it cannot fork workers")


def run_command(argv: list[str]) -> None:
    """Run the command line in a forked worker; leave the process with its exit status."""
    try:
        _main(argv)
    except SystemExit as exc:
        fast_exit(exc.code)


if __name__ == "__main__":
    serve(Path(sys.argv[1]), float(os.environ.get(IDLE_ENV, IDLE_S)), preload=preload, run=run_command)
    os._exit(0)  # its files are gone: no seconds of tearing down torch and Numba's objects
