"""Bytes a device batch's checking moves per output token, stage by stage (not a test; no GPU needed).

    python benchmarks/device_bytes.py NAME [NAME ...] [--cases K] [--batches N] [--top T] [--json FILE]

A device campaign's verifier is bound, at four lanes on one GPU, by the device's memory traffic
for the targets whose cases are large (benchmarks/RESULTS.md, session 24): this counts that
traffic on the CPU, where a lever that cuts passes over the tokens can be weighed before any
device time is spent. Per target: ``--batches`` batches (seed 0, batch ``i`` as the campaign
draws it, :func:`~eaglefuzz.harness.checking.device_mode.engine.batch_of`) of ``--cases`` cases
(the GPU's batch by default) at the GPU's sizes, each drawn, checked by the batched oracle, placed
in its guarded buffers and compared, as :func:`~eaglefuzz.harness.checking.device_mode.batch_run.check_batch`
does, the launches left out (their traffic is the kernel's: the figures are the harness's alone).

How bytes are counted (a ``TorchDispatchMode`` sees every torch operation):

- an operation that makes a view, or an empty tensor, moves nothing;
- an in-place indexed update (``index_add_``, ``index_put_``, ``scatter_``, ...) moves its index and
  values, and as many elements of the tensor it updates, read and written;
- any other operation reads each distinct tensor it is given and writes its result, whole;
- the placement kernels (which run as torch indexing on the CPU) count what their Triton launch
  reads and writes on a GPU: a copied segment read and written once, a check's span and sources read;
- unless ``EAGLEFUZZ_FUSED_NOISE=0``, the sampling oracles' lane noise counts what its two compiled
  kernels move on a GPU (:mod:`~eaglefuzz.harness.targetkit.fused`): each row's seed and position and
  the lane ids read, the uniform written and read, the noise and its bound written;
- unless ``EAGLEFUZZ_FUSED_SLOTS=0``, the oracle parts compiled whole (``fused.SLOTS``: the slots of
  ``copy_and_expand_eagle_inputs_kernel``, ``fused.CONTEXT``: the context slots of
  ``copy_and_expand_dflash_inputs_kernel``) count what their compiled kernel moves on a GPU: the
  per-request tables read once, and per slot what it reads and writes (:data:`PIECE_BYTES`).

A GPU moves these bytes in its own time; the counts do not say how fast, only how many passes.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VIEWS = frozenset({"view", "_unsafe_view", "slice", "select", "split_with_sizes", "split", "as_strided", "alias", "t",
                   "expand", "unsqueeze", "squeeze", "reshape", "_reshape_alias", "permute", "detach", "lift_fresh",
                   "unbind", "narrow", "empty", "empty_like", "empty_strided", "transpose", "unfold", "diagonal"})
"""Operations that move no element (views, and new tensors left uninitialised)."""

INDEXED = frozenset({"index_add_", "index_put_", "index_copy_", "index_fill_", "scatter_", "scatter_add_",
                     "scatter_reduce_", "masked_fill_", "_index_put_impl_", "put_"})
"""In-place updates that touch only the elements their index names."""

STAGES = ("draw", "oracle", "buffers", "compare")


def _nbytes(t) -> int:  # noqa: ANN001
    return t.numel() * t.element_size()


def op_bytes(name: str, args: tuple, kwargs: dict, out: object) -> int:
    """Bytes one torch operation ``name`` (its overload packet's name) moves, by the rules of the
    module docstring."""
    import torch
    from torch.utils._pytree import tree_flatten

    if name in VIEWS:
        return 0
    given = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    if name in INDEXED and given:
        rest = given[1:]
        if name == "masked_fill_":  # the mask read, the masked elements written
            return _nbytes(rest[0]) + int(rest[0].sum()) * given[0].element_size() if rest else 0
        touched = max((t.numel() for t in rest), default=0)
        return sum(map(_nbytes, rest)) + 2 * touched * given[0].element_size()
    seen: dict[tuple[int, int], int] = {}
    for t in given:
        seen[(t.untyped_storage().data_ptr(), t.storage_offset())] = _nbytes(t)
    made = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    return sum(seen.values()) + sum(map(_nbytes, made))


def _placement_bytes() -> dict[str, Callable[..., int]]:
    """What each placement function's Triton launch reads and writes on a GPU."""

    def copy(dst, src, table, longest, launch=None) -> int:  # noqa: ANN001
        return 2 * int(table.view(3, -1)[2].sum()) * dst.element_size() + _nbytes(table)

    def masked(expected, full, mask, bits, table, longest, launch=None) -> int:  # noqa: ANN001
        n = int(table.view(3, -1)[2].sum())
        return n * (mask.element_size() + bits.element_size() * (1 + (expected is not None) + (full is not None)))

    def check(full, src, mask, table, longest, sentinel, count, launch=None) -> int:  # noqa: ANN001
        t = table.view(4, -1)
        n = int(t[2].sum())
        return (int((t[1] + t[2] - t[3]).sum()) * full.element_size() + n * src.element_size()
                + (n * mask.element_size() if mask is not None else 0))

    def writes(expected, full, index, bits, bounds, shift, launch=None) -> int:  # noqa: ANN001
        return index.numel() * (index.element_size() + bits.element_size() * (2 + (full is not None)))

    return {"copy_segments": copy, "place_masked": masked, "check_segments": check, "place_writes": writes}


def noise_bytes(seed, pos, lanes, use_fp64: bool) -> int:  # noqa: ANN001
    """What the fused lane noise's two kernels read and write on a GPU for rows ``seed``, ``pos``
    and ``lanes``: the uniform (float64 or float32) written once and read once, the noise and its
    bound (float64) written."""
    cells = seed.numel() * lanes.numel()
    return _nbytes(seed) + _nbytes(pos) + _nbytes(lanes) + cells * (2 * (8 if use_fp64 else 4) + 16)


def slots_bytes(table, ids, ends, target_token_ids, total: int) -> int:  # noqa: ANN001
    """What the compiled slots of ``copy_and_expand_eagle_inputs_kernel``'s oracle read and write
    on a GPU for ``total`` slots: the per-request tables read once; per slot an input id read (at
    most), its place and position (int64), its id (int32) and its two masks written."""
    return _nbytes(table) + _nbytes(ids) + _nbytes(ends) + total * (target_token_ids.element_size() + 8 + 8 + 4 + 1 + 1)


def context_bytes(per_request, ends, positions, block_table, total: int) -> int:  # noqa: ANN001
    """What the compiled context slots of ``copy_and_expand_dflash_inputs_kernel``'s oracle read
    and write on a GPU for ``total`` tokens: the per-request table read once; per token its
    position and a block id read, its place and slot (int64) written."""
    return _nbytes(per_request) + _nbytes(ends) + total * (positions.element_size() + block_table.element_size() + 8 + 8)


PIECE_BYTES = {"SLOTS": slots_bytes, "CONTEXT": context_bytes}
"""Per compiled oracle part of :mod:`~eaglefuzz.harness.targetkit.fused` (its name there: ``fused.SLOTS``,
``fused.CONTEXT``), the bytes its one kernel moves."""


def count(name: str, cases: int | None, batches: int) -> dict:
    """``name``'s bytes per stage and per operation over ``batches`` batches of ``cases`` cases, and
    their output tokens."""
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.engine import batch_of
    from eaglefuzz.harness.targetkit import fused, placement
    from eaglefuzz.harness.targetkit.device_batch import BatchArenas
    from eaglefuzz.oracles import tensor_ops_v2

    dt = device_targets()[name]
    if not dt.batch:
        raise ValueError(f"{name} is not checked in device batches (its cases are laid out on the host)")
    where = ["draw"]
    moved: collections.Counter = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            moved[where[0], func.overloadpacket.__name__] += op_bytes(func.overloadpacket.__name__, args, kwargs or {}, out)
            return out

    def counted(fn: Callable, rule: Callable) -> Callable:
        def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
            moved[where[0], f"{fn.__name__} (placement kernel)"] += rule(*a, **k)
            with _disable_current_modes():
                return fn(*a, **k)
        return run

    def fused_noise(seed, pos, lanes, use_fp64):  # noqa: ANN001, ANN202
        moved[where[0], "lane noise (fused kernels)"] += noise_bytes(seed, pos, lanes, use_fp64)
        with _disable_current_modes():
            return tensor_ops_v2.lane_noise(seed, pos, lanes, use_fp64)

    rule_of = {getattr(fused, n): rule for n, rule in PIECE_BYTES.items()}

    def fused_piece(piece, device):  # noqa: ANN001, ANN202
        if not fused.switched_on(piece.switch, piece.default):
            return piece.plain
        rule = rule_of[piece]

        def run(*args):  # noqa: ANN002, ANN202
            moved[where[0], f"{piece.name} (fused kernel)"] += rule(*args)
            with _disable_current_modes():
                return piece.plain(*args)
        return run

    saved = {n: getattr(placement, n) for n in _placement_bytes()}
    rules: dict = _placement_bytes()
    swapped = {"lane_noise_on": lambda device: fused_noise, "piece_on": fused_piece}
    if fused.fused_noise_on():
        saved["lane_noise_on"] = fused.lane_noise_on
        rules["lane_noise_on"] = None
    saved["piece_on"] = fused.piece_on
    rules["piece_on"] = None
    holders = [(m, n) for m in list(sys.modules.values()) for n in saved if getattr(m, n, None) is saved[n]]
    try:  # every module that imported a placement function calls the counted one (a draw's copy too)
        for m, n in holders:
            setattr(m, n, counted(saved[n], rules[n]) if rules[n] else swapped[n])
        tokens = 0
        k = cases or dt.batch
        with Count():
            for i in range(batches):
                where[0] = "draw"
                batch = batch_of(dt, 0, i, k, "cpu", None)
                where[0] = "oracle"
                writes = dt.oracle_batch(batch)
                where[0] = "buffers"
                arenas = BatchArenas(batch, writes, "cpu", {})
                where[0] = "compare"
                arenas.mismatch()
                tokens += sum(batch.tokens(j) for j in range(len(batch)))
    finally:
        for m, n in holders:
            setattr(m, n, saved[n])
    per_stage = {s: sum(v for (st, _), v in moved.items() if st == s) for s in STAGES}
    return {"target": name, "cases": k, "batches": batches, "tokens": tokens, "bytes": sum(per_stage.values()),
            "per_stage": per_stage, "per_op": {f"{s} {op}": v for (s, op), v in moved.most_common()}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--cases", type=int, help="cases per batch (the GPU's batch by default)")
    p.add_argument("--batches", type=int, default=1, help="batches per target (1)")
    p.add_argument("--top", type=int, default=12, help="operations listed per target (12)")
    p.add_argument("--json", type=Path, help="also append one JSON line per target here")
    args = p.parse_args()
    from eaglefuzz.harness.checking.device_mode import device_targets

    unknown = sorted(set(args.names) - set(device_targets()))
    if unknown:
        p.error(f"no device target named {', '.join(unknown)}")
    unbatched = [n for n in args.names if not device_targets()[n].batch]
    if unbatched:
        p.error(f"{', '.join(unbatched)}: not checked in device batches (its cases are laid out on the host)")
    if (args.cases is not None and args.cases < 1) or args.batches < 1:
        p.error("--cases and --batches: a whole number, 1 or more")
    import torch

    torch.set_num_threads(2)
    for name in args.names:
        row = count(name, args.cases, args.batches)
        per = max(row["tokens"], 1)
        print(f"{name}: {row['batches']} batch(es) of {row['cases']} cases, {row['tokens']:,} output tokens, "
              f"{row['bytes'] / per:,.1f} bytes per output token")
        for s in STAGES:
            print(f"  {s:8} {row['per_stage'][s] / per:8.1f}")
        for op, v in list(row["per_op"].items())[: args.top]:
            print(f"    {v / per:8.1f}  {op}")
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
