"""Production scale: the products of production sizes that pass ``2**31`` (docs/CONTRACT.md §11.2,
§13.2), and where a backend can hold the cases that reach them.

vLLM's rejection sampler reads ``[num_tokens, V]`` probability tables at the flat index
``t*V + v`` and the ``[B, V]`` noise at ``r*V + v``. Nothing in vLLM bounds ``num_tokens * V``
or ``B * V``: a step of ``max_num_seqs x num_speculative_tokens`` draft tokens (1024 x 16) with
a 262144-token vocabulary has tables of ``2**32`` elements. The contract makes those indices
exact; a kernel that computes them in int32 wraps past ``2**31`` (vLLM PR #48055, the class of
#46560 and #47383).

A target's *scale features* (``Target.scale_features``) are production features that only a
case with such a table reaches: at least 8 GiB per table. The production tier holds them on
every backend (the tier never changes with the backend); which backends can *run* them is a
property of the run, named in its report (:func:`unreachable`).
"""

from __future__ import annotations

import os

FLAT_LIMIT = 1 << 31
"""The first flat index an int32 product cannot hold (``2**31``)."""

LIMIT_ENV = "EAGLEFUZZ_FLAT_LIMIT"
"""Tests only: a smaller limit (a power of two) that the scale draws, features and minimal
cases aim past instead of ``2**31``, so that the machinery runs on a CPU with tables of a few
thousand elements (against a kernel that wraps there)."""


def flat_limit() -> int:
    """The flat index the scale cases aim past: ``2**31``, or ``$EAGLEFUZZ_FLAT_LIMIT`` (tests)."""
    return int(os.environ.get(LIMIT_ENV) or FLAT_LIMIT)


def scaled_vocab(V: int) -> int:  # noqa: N803
    """A vocabulary of a scale case: ``V`` itself, shrunk in proportion under a test limit."""
    limit = flat_limit()
    return V if limit == FLAT_LIMIT else max(2, V >> (FLAT_LIMIT.bit_length() - limit.bit_length()) // 2)

SCALE_BYTES = 48 << 30
"""Device memory a scale case of the rejection sampler needs at most (tables of ``2**31`` to
``1.25 * 2**31`` float32 elements, 8-10 GiB each, a guarded copy of each and the oracle's
working set): a GPU with less free memory runs none."""

SCALE_BATCH_BYTES = 96 << 30
"""Device memory a production-scale batch needs at most (:attr:`~.device.DeviceTarget.scale_batches`:
two shared tables of about ``1.06 * 2**31`` float32 elements, each with a guarded copy behind a
band of poison as long as a wrap reaches, and a table's draw): a GPU with less free memory
checks one scale case drawn with NumPy instead."""


FEW_READS_BATCH = 1024
"""Cases per production-scale batch of a kernel that reads a few elements a row
(:attr:`~.device.DeviceTarget.scale_batch_size`): the batch's check of its two shared tables
(every element against its source and the band of poison before it, about 50 GB read, some
12 ms at an H200's bandwidth: benchmarks/RESULTS.md, session 10) against 1024 launches of
0.06-0.11 ms, an eighth of their time where 256 would make it half."""


def batches_fit(device: str) -> bool:
    """Whether ``device`` holds a production-scale batch (:data:`SCALE_BATCH_BYTES` free; the
    CPU under a test's lowered limit always)."""
    return flat_limit() != FLAT_LIMIT if device == "cpu" else free_device_bytes(device) >= SCALE_BATCH_BYTES


SCALE_ENV = "EAGLEFUZZ_SCALE"
"""``0``: device mode draws no scale case (the run says so)."""


def past_limit(index: int) -> bool:
    """Whether an element at flat index ``index`` lies past what int32 holds (:func:`flat_limit`)."""
    return index >= flat_limit()


def unreachable(mode: str, device: str) -> str | None:
    """Why a run in ``mode`` on ``device`` cannot reach the scale features (``None``: it can).

    Only ``--mode device`` draws scale cases (tables of 8 GiB and more are drawn on the GPU);
    it needs a CUDA device with :data:`SCALE_BYTES` free."""
    if flat_limit() != FLAT_LIMIT:  # tests: tables of a few thousand elements
        return None if mode == "device" else f"--mode {mode} draws no scale case"
    if device == "cpu":
        return "the Triton interpreter (CPU) cannot hold tables of 2**31 elements (8 GiB each)"
    if mode != "device":
        return f"--mode {mode} draws no table past 2**31 elements (--mode device on a GPU does)"
    if os.environ.get(SCALE_ENV, "1") == "0":
        return f"{SCALE_ENV}=0"
    free = free_device_bytes(device)
    if free < SCALE_BYTES:
        return f"this GPU has {free / 2**30:.0f} GiB free; a scale case needs {SCALE_BYTES >> 30} GiB"
    return None


def free_device_bytes(device: str) -> int:
    """Free memory of CUDA ``device`` (0 elsewhere)."""
    if device == "cpu":
        return 0
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(free)


def note(name: str, features: tuple[str, ...], why: str) -> str:
    """The run's note for target ``name`` whose scale ``features`` it could not reach."""
    return (f"{name}: scale features not reached on this backend ({why}): {', '.join(features)} "
            "(production all the same: docs/CONTRACT.md §11.2, §13.2)")
