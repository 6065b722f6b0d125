"""The CUDA devices of this host: which there are, which ``--devices`` picks, which an xdist worker gets.

A device is named by what ``CUDA_VISIBLE_DEVICES`` takes (an ordinal or a ``GPU-...`` UUID).
Within a user's ``CUDA_VISIBLE_DEVICES`` list the devices are its entries, in its order, so
``--devices 1`` and xdist worker ``gw1`` map to the list's second entry, never outside it.

``$EAGLEFUZZ_FAKE_DEVICES`` stands in for the hardware (tests on a CPU machine): a count
(``2``: devices ``0`` and ``1``) or a comma-separated list of names; ``0`` (or empty) means no
device. Each fake device runs whatever backend the run chooses (the interpreter on a CPU).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping

from ..core.errors import UserError

FAKE_ENV = "EAGLEFUZZ_FAKE_DEVICES"
"""Stands in for the CUDA devices of the host (tests): a count or a list of names."""
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
XDIST_DEVICES_ENV = "EAGLEFUZZ_XDIST_DEVICES"
"""Set by the xdist controller: the devices its workers share out (read by each worker)."""


def _entries(value: str) -> list[str]:
    return [e.strip() for e in value.split(",") if e.strip()]


def cuda_devices(environ: Mapping[str, str] | None = None) -> list[str]:
    """The CUDA devices this process may use, as ``CUDA_VISIBLE_DEVICES`` names them; empty
    when there is none.

    Counting real devices imports torch and asks the CUDA driver (a process that is to pick
    its own device through ``CUDA_VISIBLE_DEVICES`` must not call this first).
    """
    env = os.environ if environ is None else environ
    fake = env.get(FAKE_ENV)
    if fake is not None:
        fake = fake.strip()
        if fake.isdigit():
            return [str(i) for i in range(int(fake))]
        return _entries(fake)
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    visible = env.get(VISIBLE_ENV)
    if visible is not None:
        return _entries(visible)[:n]
    return [str(i) for i in range(n)]


def pick_devices(spec: str, available: list[str]) -> list[str]:
    """The devices ``--devices spec`` names: ``all``, or ordinals ``0,1,...`` into
    ``available`` (the visible devices, in order). A :class:`UserError` when there is no
    device, or ``spec`` names one that is not there or one twice."""
    if not available:
        raise UserError(f"--devices {spec}: no CUDA device here; run on a GPU host, or drop --devices "
                        "(--shard K/N splits a campaign across machines)")
    if spec.strip() == "all":
        return list(available)
    try:
        ordinals = [int(x) for x in spec.split(",")]
    except ValueError:
        raise UserError(f"--devices {spec}: expected all or ordinals like 0,1") from None
    if len(set(ordinals)) != len(ordinals):
        raise UserError(f"--devices {spec}: a device is named twice")
    for i in ordinals:
        if not 0 <= i < len(available):
            raise UserError(f"--devices {spec}: there is no device {i} ({len(available)} visible: "
                            f"ordinals 0 to {len(available) - 1})")
    return [available[i] for i in ordinals]


def xdist_device(worker: str, devices: list[str]) -> str | None:
    """The device of xdist worker ``worker`` (``gwN``): ``devices[N % k]``; ``None`` with fewer
    than two devices (nothing to share out) or a worker name that is not ``gwN``."""
    if len(devices) < 2 or not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    return devices[int(worker[2:]) % len(devices)]


def pin_xdist_worker(environ: MutableMapping[str, str] | None = None) -> str | None:
    """In an xdist worker, before torch initialises CUDA: restrict the process to its own
    device, ``CUDA_VISIBLE_DEVICES`` set to the one the controller's list
    (:data:`XDIST_DEVICES_ENV`) gives it (:func:`xdist_device`). Where CUDA is initialised in
    this process already, ``torch.cuda.set_device`` picks it instead. Returns what was done
    (one line), or ``None`` when nothing was (not a worker, fewer than two devices)."""

    env = os.environ if environ is None else environ
    worker = env.get("PYTEST_XDIST_WORKER", "")
    devices = _entries(env.get(XDIST_DEVICES_ENV, ""))
    device = xdist_device(worker, devices)
    if device is None:
        return None
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.set_device(devices.index(device))
        return f"torch.cuda.set_device({devices.index(device)})"
    env[VISIBLE_ENV] = device
    return f"{VISIBLE_ENV}={device}"
