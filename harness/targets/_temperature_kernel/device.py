"""``_temperature_kernel`` on the device (docs/CONTRACT.md §28): production steps drawn on the
GPU in batches of 256 (fewer where their logits would pass :data:`ELEMENTS`), as its record's
generator draws them (``cases.body`` at the device scale: ``B`` requests of a few or up to 1024,
1 to 5 logits rows each over their distinct state rows, up to 4 state rows more, temperatures of
``cases.TEMPERATURES``, model logits of a vocabulary of ``VOCABS`` or, one batch in ten, of more
than one 8192-wide block; a batch in ten one of its tour's shapes: one to three sparse rows of a
151936- or 262144-id vocabulary, or hundreds of rows of 8 ids over up to 80 state rows of any
temperature), checked against the batched torch oracle
(:func:`~eaglefuzz.oracles.tensor_ops_v2.temperature_rows`, every case's rows in one call: the
divided rows' quotients within their 2 ulp, every other element of the table as given, bit for
bit) and compared on the GPU, every logit of every case and the guard bands between them; and
production-scale steps whose logits pass ``2**31`` elements (the int32 row offset
``token_idx * logits_stride`` of vLLM up to 0.24.0, fixed by #46560; #47383 is the same class
in the rejection sampler's kernels), checked on the device a block of rows at a time against
the same torch oracle and confirmed by the NumPy and Numba oracles on the rows past the limit
(:mod:`~...targetkit.scale_rows`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ....oracles import tensor_ops_v2
from ....oracles.host_copy import host_to
from ...core.case import Case
from ...targetkit.device import DeviceCase, DeviceTarget
from ...targetkit.device_batch import DeviceBatch
from ...targetkit.device_draws import lazy_full, scale_vocab
from ...targetkit.runner_v2_verify import LARGE_VOCABS, STATS_BLOCK, VOCABS
from ...targetkit.scale import past_limit
from ...targetkit.scale_device import ScaleRecordDevice, ScaleRun, first_row
from ...targetkit.scale_rows import mismatches
from ...targetkit.scale_steps import kept_epoch
from ...targetkit.step_batch import (
    MAX_REQUESTS,
    Rows,
    _rows,
    feature_sets,
    owners,
    per_case_any,
    rows_of,
    state_rows,
    uniform,
)
from ...targetkit.verify_batch import KINDS, SHAPES, VerifyBatchDevice, _ends
from . import cases
from .layout import build
from .record import TARGET

TEMPERATURES = np.array([0.7, 1.0, 0.0, 1.3], np.float32)
"""The states of a scale step: two divided (0.7, 1.3), one left (1.0), one greedy (0.0)."""


def scale_case(rng: np.random.Generator) -> Case:
    """A production step just past ``2**31`` logits (a current model's vocabulary, one to four
    rows past the first row an int32 offset cannot reach: ``max_num_seqs x (1 + K)`` rows of a
    262144-id vocabulary are past it from 8192 rows on): the rows before it zeros of requests at
    T 1 or 0 (one in a hundred divided), the row before the limit and the rows past it random
    logits, divided (0.7 or 1.3) or greedy: a table of 8 GiB, sparse, as ``Sampler`` hands it
    over."""
    V = scale_vocab(rng)
    first = first_row(V)
    n = first + int(rng.integers(1, 5))
    x = lazy_full((n, V), np.float32)
    x[first - 1 :] = (rng.standard_normal((n - first + 1, V)) * 3).astype(np.float32)
    rows = rng.choice([1, 2], size=n)  # the rows before the limit: T 1 or 0 (not written)
    rows[rng.random(n) < 0.01] = 0  # now and then divided (zeros stay zeros)
    rows[first - 1 :] = rng.choice([0, 3, 3, 2], size=n - first + 1)  # the rows past the limit mostly divided
    rows[-1] = rng.choice([0, 3])
    return build(x, rows.tolist(), TEMPERATURES.tolist()).replace(
        note="a production-scale step (eaglefuzz fuzz --mode device)")


def minimal_scale_cases(case: Case) -> list[Case]:
    """:func:`minimal_scale_cases_of` ``case``'s vocabulary, then with ``case``'s own last row."""
    return minimal_scale_cases_of(case.arrays["logits"].shape[1], case.arrays["logits"][-1])


def minimal_scale_cases_of(V: int, own: np.ndarray | None = None) -> list[Case]:  # noqa: N803
    """One row past ``2**31`` logits of vocabulary ``V``, a table of zeros: the rows before it
    left (T 1), that row divided by 0.7 (a single logit 1 at its last column; then, given, the
    row ``own``), simplest first."""
    first = first_row(V)
    out = []
    for mine in (False, True) if own is not None else (False,):
        x = lazy_full((first + 1, V), np.float32)
        if mine:
            x[first] = own
        else:
            x[first, V - 1] = 1.0
        rows = [1] * first + [0]
        out.append(build(x, rows, TEMPERATURES.tolist()).replace(note="the int32 row offset past 2**31, minimised"))
    return out


def checked_rows(case: Case) -> list[int]:
    """The rows the NumPy and Numba oracles confirm a scale finding on: the row before the
    limit and every row past it."""
    n, V = case.arrays["logits"].shape
    return list(range(max(0, min(first_row(V), n) - 1), n))


ELEMENTS = 1 << 27
"""Logits a batch holds at most (its cases up to the one that would pass it, at least one):
half a GiB of float32, a few GiB with the buffers and the oracle's values and bounds."""


def _edge_ints(rng: np.random.Generator, n: int, lo: int, hi: int) -> np.ndarray:
    """``n`` integers of ``[lo, hi]``, each an end (either) one time in 32 (``RngChooser``'s
    ``array``)."""
    x = rng.integers(lo, hi, size=n, endpoint=True)
    edge = rng.integers(0, 32, size=n) == 0
    return np.where(edge, np.where(rng.integers(0, 2, size=n) == 1, hi, lo), x)


def _kind(rng: np.random.Generator) -> str:
    """An ordinary batch, or a tour's shape one batch in ten (half each), as the record's
    generator draws a shape for a case (:func:`~...generation.strategies.random_shape`)."""
    if rng.random() >= SHAPES:
        return "ordinary"
    return KINDS[int(rng.integers(0, len(KINDS)))]


def _ordinary(rng: np.random.Generator, gen: torch.Generator, k: int, device: str, max_requests: int
              ) -> tuple[np.ndarray, np.ndarray, int, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """``cases.body``, ``k`` times over one vocabulary (cut to :data:`ELEMENTS`): per case ``B``
    of ``(1, 8)`` or ``(1, max_requests)``, ``R = B + (0..4)``, its requests' state rows the
    first ``B`` of a permutation of ``R``, each request 1 to 5 rows; per state row a
    temperature of ``cases.TEMPERATURES``; the logits a spread of 4."""
    V = int(rng.choice(VOCABS)) if rng.random() >= 0.1 else STATS_BLOCK + int(_ends(rng, np.array(1), np.array(300)))
    wide = rng.integers(0, 2, size=k) == 1
    B = _ends(rng, np.ones(k, np.int64), np.where(wide, max_requests, 8)).astype(np.int64)
    R = B + _ends(rng, np.zeros(k, np.int64), np.full(k, 4)).astype(np.int64)
    per = _edge_ints(rng, int(B.sum()), 1, 5)
    n = np.add.reduceat(per, np.cumsum(B) - B) if per.size else np.zeros(k, np.int64)
    keep = max(1, int(np.searchsorted(np.cumsum(n * V), ELEMENTS, side="right")))
    if keep < k:
        B, R, n, per = B[:keep], R[:keep], n[:keep], per[: int(B[:keep].sum())]
    req = _rows(B, R, device)
    s = state_rows(req, gen)
    eidx = torch.repeat_interleave(s, host_to(per, device), output_size=int(n.sum()))
    temps = host_to(np.asarray(cases.TEMPERATURES, dtype=np.float32), device)
    temperature = temps[torch.randint(0, len(cases.TEMPERATURES), (int(R.sum()),), generator=gen, device=device)]
    logits = torch.randn((int(n.sum()), V), generator=gen, device=device) * 4
    return n, R, V, eidx, temperature, logits


def _large_vocab(rng: np.random.Generator, gen: torch.Generator, k: int, device: str
                 ) -> tuple[np.ndarray, np.ndarray, int, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """The tour's ``large_vocab``, ``k`` times (as many as :data:`ELEMENTS` holds of three rows
    each) over one 151936- or 262144-id vocabulary: per case 1 to 3 rows of state rows of ``[0,
    1, 0.6 or 1.7]``, the last row's the third; each row zeros but for 40 logits anywhere and 8
    in its last 8192 columns."""
    V = int(rng.choice(LARGE_VOCABS))
    k = max(1, min(k, ELEMENTS // (3 * V)))
    n = rng.integers(1, 4, size=k).astype(np.int64)
    R = np.full(k, 3, np.int64)
    eidx = torch.randint(0, 3, (int(n.sum()),), generator=gen, device=device)
    eidx[host_to(np.cumsum(n) - 1, device)] = 2
    temperature = host_to(np.tile(np.asarray([0.0, 1.0, 0.0], dtype=np.float32), k), device)
    temperature[2::3] = host_to(rng.choice([0.6, 1.7], size=k).astype(np.float32), device)
    N = int(n.sum())
    at = torch.cat([torch.randint(0, V, (N, 40), generator=gen, device=device),
                    torch.randint(V - STATS_BLOCK, V, (N, 8), generator=gen, device=device)], 1)
    logits = torch.zeros((N, V), dtype=torch.float32, device=device)
    logits.scatter_(1, at, torch.randn(at.shape, generator=gen, device=device) * 4)
    return n, R, V, eidx, temperature, logits


def _many_rows(rng: np.random.Generator, gen: torch.Generator, k: int, device: str
               ) -> tuple[np.ndarray, np.ndarray, int, torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """The tour's ``many_rows``, ``k`` times: per case 257 to 399 rows of 8 ids, each of any of
    64 to 79 state rows, temperatures uniform in ``[0.1, 3)``."""
    n = rng.integers(257, 400, size=k).astype(np.int64)
    R = rng.integers(64, 80, size=k).astype(np.int64)
    rows = _rows(n, R, device)
    eidx = uniform(gen, torch.zeros(rows.n, dtype=torch.int64, device=device), rows.per_row(R - 1))
    u = torch.rand(int(R.sum()), generator=gen, device=device, dtype=torch.float64)
    temperature = (0.1 + u * 2.9).to(torch.float32)
    logits = torch.randn((rows.n, 8), generator=gen, device=device) * 4
    return n, R, 8, eidx, temperature, logits


def _rows_of(b: DeviceBatch) -> tuple[Rows, torch.Tensor, torch.Tensor, int]:
    """A batch's rows (over their cases' state rows), each row's state row within its case and
    temperature, and the batch's vocabulary."""
    dev = b.cat["expanded_idx_mapping"].device.type
    rows = rows_of(b.lengths, "expanded_idx_mapping", "temperature", dev)
    eidx = b.cat["expanded_idx_mapping"].long()
    V = b.extra["scale"].V if "scale" in b.extra else b.shapes["logits"][0][1]
    return rows, eidx, b.cat["temperature"][rows.state_base + eidx], V


SLOT = 4
"""Rows of a scale batch's table each case divides at most: its own, after the earlier cases'."""
SCALE_CASES = 256
"""Cases a scale batch holds at most (its table has a slot of rows for each)."""
DIVIDED = (0.7, 1.3, 0.05, 2.0)
"""The temperatures a scale case divides its own rows by (``cases.TEMPERATURES`` but 0 and 1)."""


@dataclass
class ScaleTable:
    """A scale epoch's logits: ``[F + SLOT * SCALE_CASES, V]``, zeros up to row ``F`` (the first
    row an int32 offset cannot reach), then random logits (a spread of 3), a slot of
    :data:`SLOT` rows for each case of a batch."""

    V: int
    F: int
    table: torch.Tensor


def scale_table(seed: int, device: str) -> ScaleTable:
    """The scale epoch ``seed``'s table (its vocabulary drawn first: ``scale_batch_vocab``)."""
    rng = np.random.default_rng(seed)
    V = scale_vocab(rng)
    gen = torch.Generator(device=device).manual_seed(seed)
    F = first_row(V)
    table = torch.zeros((F + SLOT * SCALE_CASES, V), dtype=torch.float32, device=device)
    table[F:] = torch.randn((SLOT * SCALE_CASES, V), generator=gen, device=device) * 3
    return ScaleTable(V, F, table)


class _Device(VerifyBatchDevice, ScaleRecordDevice):
    kinds = KINDS
    tables = ("logits",)
    in_place = ("logits",)
    small = ("expanded_idx_mapping", "temperature")

    scale_batches = True

    def scale_minimal_of(self, V: int) -> list[Case]:  # noqa: N803
        return minimal_scale_cases_of(V)

    def _scale_table(self, seed: int, device: str) -> ScaleTable:
        """The scale epoch ``seed``'s table (kept for the next batch of the epoch)."""
        return kept_epoch(self, seed, device, scale_table)

    def _scale_batch(self, seeds: tuple[int, int], device: str, k: int) -> DeviceBatch:
        """Up to ``k`` production steps past ``2**31`` logits (:data:`SCALE_CASES` at most) over
        the epoch's table, updated in place: case ``j`` reads its first ``F + SLOT j + t_j``
        rows, divides its own 1 to :data:`SLOT` rows (of slot ``j``, past the limit: states of
        ``[T_a, 1, 0, T_b]``, mostly divided, its first divided; ``T_a``, ``T_b`` of
        :data:`DIVIDED`) and leaves the rows before them (the zeros, the earlier cases' slots,
        as they left them) at T 1 or 0, as ``scale_case``'s rows before the limit: every
        case's writes land on rows of its own."""
        ep = self._scale_table(seeds[0], device)
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        k = max(1, min(k, SCALE_CASES))
        t = rng.integers(1, SLOT + 1, size=k)
        own_from = ep.F + SLOT * np.arange(k)
        n = own_from + t
        N = int(n.sum())
        rows = _rows(n.astype(np.int64), np.full(k, 4, np.int64), device)
        own = rows.local >= host_to(own_from, device)[rows.cid]
        before = torch.where(torch.rand(N, generator=gen, device=device) < 0.5, 1, 2)  # T 1 or 0: not written
        mine = host_to(np.asarray([0, 3, 3, 2], dtype=np.int64), device)[torch.randint(0, 4, (N,), generator=gen, device=device)]
        first_own = rows.local == host_to(own_from, device)[rows.cid]
        mine = torch.where(first_own, torch.where(torch.rand(N, generator=gen, device=device) < 0.5, 0, 3), mine)
        eidx = torch.where(own, mine, before).to(torch.int64)
        ends = rng.choice(DIVIDED, size=(k, 2))
        temperature = host_to(np.stack([ends[:, 0], np.ones(k), np.zeros(k), ends[:, 1]], 1).astype(np.float32).reshape(-1),
                              device)
        t_row = temperature[rows.state_base + eidx]
        divided = ((t_row != 0) & (t_row != 1)).long()
        written = torch.zeros(k, dtype=torch.int64, device=device).index_add_(0, rows.cid, divided) * ep.V
        m = n.tolist()
        return DeviceBatch({"expanded_idx_mapping": eidx, "temperature": temperature},
                           {"expanded_idx_mapping": m, "temperature": [4] * k},
                           {"expanded_idx_mapping": [(x,) for x in m], "temperature": [(4,)] * k},
                           {"logits": ep.table}, {"logits": m}, {}, [{} for _ in m], {"scale": ep},
                           counted=written.tolist())

    def draw_batch(self, seeds: tuple[int, int], device: str, k: int, max_requests: int = MAX_REQUESTS,
                   share: float = 1.0, kind: str | None = None, scale: bool = False) -> DeviceBatch:
        """``k`` steps of one vocabulary (fewer where their logits pass :data:`ELEMENTS`, or of
        a large vocabulary), an ordinary batch or one of the tour's (``kind``: ``"ordinary"``
        or one of :data:`~...targetkit.verify_batch.KINDS`; ``None``: drawn); the logits the
        kernel updates in place, no output of its own. With ``scale``, production-scale steps
        over the scale epoch ``seeds[0]``'s table (:meth:`_scale_batch`)."""
        if scale:
            return self._scale_batch(seeds, device, k)
        rng = np.random.default_rng(seeds[1])
        gen = torch.Generator(device=device).manual_seed(seeds[1])
        drawn = _kind(rng)
        kind = drawn if kind is None else kind
        if kind == "large_vocab":
            n, R, V, eidx, temperature, logits = _large_vocab(rng, gen, k, device)
        elif kind == "many_rows":
            n, R, V, eidx, temperature, logits = _many_rows(rng, gen, k, device)
        else:
            n, R, V, eidx, temperature, logits = _ordinary(rng, gen, k, device, max(1, max_requests))
        m, r = n.tolist(), R.tolist()
        cat = {"logits": logits.reshape(-1), "expanded_idx_mapping": eidx.to(torch.int64), "temperature": temperature}
        lengths = {"logits": [x * V for x in m], "expanded_idx_mapping": m, "temperature": r}
        shapes = {"logits": [(x, V) for x in m], "expanded_idx_mapping": [(x,) for x in m], "temperature": [(x,) for x in r]}
        return DeviceBatch(cat, lengths, shapes, {}, {}, {}, [{} for _ in m], inout=("logits",))

    def oracle_batch(self, b: DeviceBatch) -> dict[str, tuple[Any, ...]]:
        """Every case's rows in one call of the torch oracle: the divided rows' logits (flat,
        over the cases' tables), their quotients and bounds; every other logit stays as drawn."""
        rows, _, t, V = _rows_of(b)
        divided = torch.nonzero((t != 0) & (t != 1)).flatten()
        at = divided
        if "scale" in b.extra:  # the shared table's rows: each case's own (distinct), in the table's coordinates
            at = rows.local[divided]
        x = b.cat["logits"].view(-1, V) if "logits" in b.cat else b.shared["logits"]
        expected, bound = tensor_ops_v2.temperature_rows(x[at], t[divided])
        index = (at[:, None] * V + torch.arange(V, device=x.device)).reshape(-1)
        return {"logits": (index, expected.reshape(-1), bound.reshape(-1))}

    def to_case(self, dc: DeviceCase) -> Case:
        """As drawn, launched as ``apply_temperature`` launches it (vLLM's block: no launch field,
        as the record's cases)."""
        c = DeviceTarget.to_case(self, dc)
        return Case(c.kernel, c.arrays, c.scalars, {}, c.note)


    def batch_features(self, b: DeviceBatch, writes: dict | None = None) -> list[frozenset[str]]:
        """The record's features of each case (``features_of``), from the batch's arrays on the
        device: one copy to the host for the rows' flags, one for the state rows named."""
        rows, eidx, t, V = _rows_of(b)
        k = len(b)
        on = per_case_any(rows, {"greedy_row": t == 0, "unit_temperature": t == 1, "scaled_row": (t != 0) & (t != 1),
                                 "low_temperature": (t > 0) & (t < 0.1)})
        R = np.asarray(b.lengths["temperature"], dtype=np.int64)
        n = np.asarray(b.lengths["expanded_idx_mapping"], dtype=np.int64)
        named = torch.zeros(int(R.sum()), dtype=torch.int64, device=t.device)
        named[rows.state_base + eidx] = 1
        distinct = torch.zeros(k, dtype=torch.int64, device=t.device).index_add_(
            0, owners(R, t.device.type), named).cpu().numpy()
        full = {"shared_state_row": distinct < n, "untouched_state_rows": distinct < R,
                "several_blocks": np.full(k, V > STATS_BLOCK), "many_rows": n > 256,
                "vocab_past_131072": np.full(k, V > 1 << 17),
                "row_offset_past_2_31": np.asarray([past_limit(int(m - 1) * V) for m in n], dtype=bool)}
        return feature_sets(on | full, k)

    def expect(self, case: Case, run: ScaleRun) -> torch.Tensor:
        """The logits, a block of rows at a time, against the torch oracle on the rows as given
        (every element: divided ones within 2 ulp, the others bit for bit)."""
        table, sm = run.tables["logits"], run.small
        bad = torch.zeros((), dtype=torch.int64, device=run.device)
        t_rows = sm["temperature"][sm["expanded_idx_mapping"]]
        V = case.scalars.get("vocab_size")
        for lo, hi in table.blocks():
            expected, bound = tensor_ops_v2.temperature_rows(table.rows(lo, hi), t_rows[lo:hi], V)
            bad += mismatches(table.view[lo:hi], expected, bound)
            del expected, bound
        return bad

    def confirm_on(self, case: Case) -> tuple[Case, list[int]]:
        rows = checked_rows(case)
        return TARGET.join_requests(case, rows), rows

    def verified(self, case: Case, run: ScaleRun) -> int:
        return TARGET.output_tokens(case)


DEVICE = _Device(TARGET, scale_case, minimal_scale_cases)
"""This target's device mode (``--mode device``)."""
