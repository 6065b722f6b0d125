"""The extended tier of ``_compute_slot_mappings_kernel``: docs/CONTRACT.md §22.4.

Any ``PAD_ID``, block sizes that are not powers of two, interleaves that do not divide the block
size (§22.1's formula as it stands), and two batch rows naming one state row. Positions stay
``>= 0``, every block read inside its row, every slot id inside int32. The oracles compute §22.1
on them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ...core.case import Case
from ...generation.choosers import Chooser, RngChooser, as_strategy
from ...generation.strategies import INT32_MAX, Scale
from ...targetkit.base import ContractViolation
from ...targetkit.runner_v2 import BOOL, I32, I64, check_batch, need, need_int, npow2
from .layout import build, groups, table

FEATURES = {
    "any_pad_id": "a PAD_ID other than vLLM's -1",
    "odd_block_size": "a block size that is not a power of two",
    "interleave_not_dividing": "a CP_INTERLEAVE that does not divide a block size",
    "shared_state_row": "two batch rows naming one state row",
}


def reads(case: Case) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Per group: the state rows and table columns its real, local tokens read (§22.1)."""
    a = case.arrays
    s = a["idx_mapping"]
    q = a["query_start_loc"].astype(np.int64)
    owner = np.repeat(np.arange(len(s)), np.diff(q))
    p = a["positions"][q[0] : q[-1]].astype(np.int64)
    CP, IL, rank = (case.scalars[k] for k in ("CP_SIZE", "CP_INTERLEAVE", "cp_rank"))
    out = []
    for g in range(groups(case)):
        bs = int(a["block_sizes"][g])
        if CP > 1 and a["dcp_sharded"][g]:
            V = bs * CP
            vo = p % V
            lp = (p // V) * bs + (vo // (IL * CP)) * IL + vo % IL
            local = (vo // IL) % CP == rank
        else:
            lp, local = p, np.ones(p.size, dtype=bool)
        col = lp // bs if a["slot_mapping_enabled"][g] else np.zeros(p.size, np.int64)
        read = local & (s[owner] >= 0)
        out.append((g, s[owner][read], col[read]))
    return out


def check(case: Case, *, distinct: bool) -> int:
    """The rules both tiers share (see the record); the number of groups."""
    a = case.arrays
    sizes = need(a, "block_sizes", I32, ndim=1)
    G = sizes.shape[0]
    if not 1 <= G <= 8:
        raise ContractViolation("arrays.block_sizes", "must have 1 to 8 groups")
    R = need(a, table(0), I32, ndim=2).shape[0]
    batch = check_batch(case, R, masked=True, distinct=distinct, min_qlen=0 if not distinct else 1)
    pos = need(a, "positions", I64, ndim=1, at_least=batch.tokens)
    need(a, "slot_mapping_enabled", BOOL, (G,))
    need(a, "dcp_sharded", BOOL, (G,))
    if np.any(sizes < 1) or np.any(pos[: batch.tokens] < 0) or np.any(pos[: batch.tokens] > INT32_MAX):
        raise ContractViolation("arrays.positions", "positions must be in [0, 2**31), block sizes >= 1")
    CP = need_int(case.scalars, "CP_SIZE", 1, 64)
    need_int(case.scalars, "cp_rank", 0, CP - 1)
    need_int(case.scalars, "CP_INTERLEAVE", 1, 1 << 10)
    need_int(case.scalars, "max_num_tokens", batch.tokens, 1 << 22)
    for g, rows, cols in reads(case):
        t = need(a, table(g), I32, ndim=2)
        if t.shape[0] != R or np.any(cols >= t.shape[1]):
            raise ContractViolation(f"arrays.{table(g)}", "every table has max_num_reqs rows, wide enough for every position")
        slots = t[rows, cols].astype(np.int64) * int(sizes[g]) + int(sizes[g]) - 1
        if np.any(t < 0) or np.any(slots > INT32_MAX):
            raise ContractViolation(f"arrays.{table(g)}", "block ids must be >= 0, slot ids inside int32")
    return G


def validate(case: Case) -> None:
    check(case, distinct=False)
    pad = case.launch.get("PAD_ID")
    if pad is not None and not isinstance(pad, int):
        raise ContractViolation("launch.PAD_ID", "must be null or an int")


def features_of(case: Case) -> frozenset[str]:
    a = case.arrays
    s = a["idx_mapping"][a["idx_mapping"] >= 0]
    IL = case.scalars["CP_INTERLEAVE"]
    checks = {"any_pad_id": case.launch.get("PAD_ID") not in (None, -1),
              "odd_block_size": any(npow2(int(x)) != int(x) for x in a["block_sizes"]),
              "interleave_not_dividing": case.scalars["CP_SIZE"] > 1 and any(int(x) % IL for x in a["block_sizes"]),
              "shared_state_row": len(np.unique(s)) < len(s)}
    return frozenset(k for k, v in checks.items() if v)


def body(c: Chooser, scale: Scale) -> Case:
    """Up to 6 rows of up to 4 state rows (shared now and then), odd block sizes and
    interleaves, any PAD_ID."""
    B, R = c.integer(1, 6), c.integer(1, 4)
    rows = c.array(np.int64, B, -1, R - 1)
    G = c.integer(1, 2)
    sizes = [c.choice([3, 5, 6, 16]) for _ in range(G)]
    CP = c.choice([1, 2, 3])
    IL = c.integer(1, 4)
    sharded = [c.boolean() for _ in range(G)]
    M = 40
    widths = [-(-M // s) + 1 for s in sizes]
    tables = [c.array(np.int64, R * w, 0, 999).reshape(R, w) for w in widths]
    qlens = [int(x) for x in c.array(np.int64, B, 0, 5)]
    pos = c.array(np.int64, int(sum(qlens)), 0, M - 1)
    return build(rows, qlens, pos, tables, sizes, [c.boolean() for _ in range(G)], sharded,
                 int(sum(qlens)) + c.integer(0, 6), (CP, c.integer(0, CP - 1), IL), c.choice([None, -1, 0, 7, -(2**40)]))


def random_case(rng: np.random.Generator, scale: Scale) -> Case:
    return body(RngChooser(rng), scale)


def strategy(scale: Scale) -> Any:
    return as_strategy(body, scale)


def shrink_candidates(case: Case) -> Iterator[Case]:
    """The first row alone (its tokens only)."""
    if case.scalars["num_reqs"] > 1:
        q = case.arrays["query_start_loc"]
        yield case.replace(arrays={"idx_mapping": case.arrays["idx_mapping"][:1], "query_start_loc": q[:2].copy()},
                           scalars={"num_reqs": 1, "max_num_tokens": max(int(q[1]), 1)})
