"""What the rejection sampler's device targets draw (docs/CONTRACT.md §10-§13, production
domain): a step's draft counts on the host, its probability tables and noise on the device.

Sizes and modes come from a NumPy generator (host), contents from a torch generator on the
device, so one seed makes one case on any device of one kind. The tables are softmax rows of
random logits, as ``target_logits.softmax(dim=-1, dtype=torch.float32)`` makes them: peaked or
flat by the logits' scale, sparse by masking entries to ``-inf`` (top-k, top-p, bad words),
the largest entry of a row always kept.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ...oracles.host_copy import host_to
from ..core.lazy import lazy_full, written_runs
from .scale import flat_limit, scaled_vocab

MAX_VOCAB = 262144
"""The largest vocabulary of current models."""
MAX_TABLE = 1 << 29
"""Elements of one ``[N, V]`` table at most in an ordinary device case (2 GiB of float32, drawn
dense); the production-scale cases past ``2**31`` elements are :func:`scale_step`'s."""
SCALE_TABLE = 5 << 29
"""Elements of one table (or noise) of a production-scale case at most: ``1.25 * 2**31`` (10 GiB
of float32), just past the flat index an int32 holds (docs/CONTRACT.md §11.2, §13.2)."""
SCALE_VOCABS = (262144, 256000, 201088, 152064, 151936, 128256)
"""Vocabularies of the production-scale cases: Gemma 3, Gemma 2, gpt-oss, Qwen 2.5, Qwen 3, Llama 3."""
CPU_VOCAB = 512
"""The largest vocabulary drawn on the CPU (the interpreter: tests only)."""


@dataclass(frozen=True)
class Step:
    """A step's requests: draft counts ``d`` (int64, ``0 <= d_r <= L``), ``L = max(d)``
    (vLLM's ``max_spec_len``), the vocabulary ``V``."""

    d: np.ndarray
    L: int  # noqa: N815 - the contract's names
    V: int  # noqa: N815

    @property
    def B(self) -> int:  # noqa: N802
        return int(self.d.size)

    @property
    def N(self) -> int:  # noqa: N802
        return int(self.d.sum())

    @property
    def cu(self) -> np.ndarray:
        """``np.cumsum(d)`` as int32 (``_calc_spec_decode_metadata``)."""
        return np.cumsum(self.d).astype(np.int32)

    def tokens_of(self) -> np.ndarray:
        """Each draft token's request."""
        return np.repeat(np.arange(self.B), self.d)


def draw_vocab(rng: np.random.Generator, on_cpu: bool) -> int:
    """A vocabulary log-uniform up to 262144 (:data:`CPU_VOCAB` on the CPU), the largest in one
    draw of ten."""
    V = int(np.exp(rng.uniform(np.log(2), np.log((CPU_VOCAB if on_cpu else MAX_VOCAB) + 1))))
    return (CPU_VOCAB if on_cpu else MAX_VOCAB) if rng.random() < 0.1 else V


def draw_step(rng: np.random.Generator, max_requests: int, on_cpu: bool, tables: bool, vocab: int | None = None) -> Step:
    """Up to ``max_requests`` requests (a quarter of the steps up to four times as many), up to
    16 drafts each (``num_speculative_tokens``), some requests without drafts (prefills);
    the vocabulary ``vocab``, else :func:`draw_vocab`'s. With ``tables``, the
    requests are cut until ``(N + B) * V`` fits :data:`MAX_TABLE` (``16 * V`` always does)."""
    top = max_requests if rng.random() < 0.75 else 4 * max_requests
    B = int(np.exp(rng.uniform(0, np.log(top + 1))))
    K = int(rng.integers(1, 17))
    d = rng.integers(0, K + 1, size=B)
    d[rng.random(B) < rng.choice([0.0, 0.1, 0.5])] = 0
    V = draw_vocab(rng, on_cpu) if vocab is None else vocab
    if tables:  # the [N, V] tables and the [B, V] noise each within MAX_TABLE elements
        while d.size > 1 and (int(d.sum()) + d.size) * V > MAX_TABLE:
            d = d[: d.size // 2]
    return Step(d.astype(np.int64), int(d.max()) if d.size else 0, V)


def softmax_table(rng: np.random.Generator, gen: torch.Generator, rows: int, V: int, device: str) -> torch.Tensor:  # noqa: N803
    """A float32 ``[rows, V]`` table of softmax rows: logits of a scale from flat (0.01) to
    peaked (20), a share of them masked to ``-inf`` (each row's largest kept)."""
    logits = torch.randn((rows, V), generator=gen, device=device) * float(rng.choice([0.01, 1.0, 5.0, 20.0]))
    sparsity = float(rng.choice([0.0, 0.0, 0.5, 0.99]))
    if sparsity and rows and V:
        drop = torch.rand((rows, V), generator=gen, device=device) < sparsity
        drop &= logits < logits.amax(dim=1, keepdim=True)
        logits.masked_fill_(drop, float("-inf"))
    return logits.softmax(dim=-1, dtype=torch.float32)


SUPPORTS = (1, 8, 64, 512)
"""Positions a row of :func:`topk_table` may hold (vLLM's ``top_k``; top-p keeps a few to
hundreds)."""
STRIDES = (262147, 524309, 1048583, 2097169)
"""Primes past :data:`MAX_VOCAB`: a stride ``s`` prime to every ``V``, so ``a + j * s mod V``
for ``j < k <= V`` are ``k`` distinct positions."""


def topk_table(rng: np.random.Generator, gen: torch.Generator, rows: int, V: int,  # noqa: N803
               device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A float32 ``[rows, V]`` table of softmax rows after top-k (vLLM's sampler masks the
    others to ``-inf``: probability 0), and the positions each row keeps (int64 ``[rows, k]``,
    distinct, ascending; ``k`` of :data:`SUPPORTS`, at most ``V``): ``a_r + j * s_r mod V``, of
    a random start and stride of :data:`STRIDES`. The kept logits are of a scale from flat
    (0.01) to peaked (20)."""
    k = min(int(rng.choice(SUPPORTS)), V)
    start = torch.randint(0, V, (rows, 1), generator=gen, device=device)
    stride = host_to(STRIDES, device)[torch.randint(0, len(STRIDES), (rows, 1), generator=gen, device=device)]
    support = ((start + torch.arange(k, device=device) * stride) % V).sort(dim=1).values
    kept = torch.randn((rows, k), generator=gen, device=device) * float(rng.choice([0.01, 1.0, 5.0, 20.0]))
    table = torch.zeros((rows, V), dtype=torch.float32, device=device)
    return table.scatter_(1, support, kept.softmax(dim=-1, dtype=torch.float32)), support


def sample_from(table: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One id per row of ``table`` drawn from it (the exponential race: ``argmax p / e``),
    int32; ids of positive probability."""
    if table.numel() == 0:
        return torch.zeros(table.shape[0], dtype=torch.int32, device=table.device)
    e = torch.empty_like(table).exponential_(generator=gen).clamp_(min=float(np.finfo(np.float32).tiny))
    return torch.argmax(table / e, dim=1).to(torch.int32)


def pad_mask(rng: np.random.Generator, step: Step) -> np.ndarray:
    """Which of ``step``'s draft tokens are ``-1``: a suffix of some requests' drafts
    (grammar-invalid or padded drafts, docs/CONTRACT.md §10.2), in one step in four."""
    if rng.random() >= 0.25 or step.N == 0:
        return np.zeros(step.N, dtype=bool)
    k = np.minimum(rng.integers(0, step.d + 1), step.d) * (rng.random(step.B) < 0.3)
    start = np.cumsum(step.d) - step.d
    j = np.arange(step.N) - np.repeat(start, step.d)
    return j >= np.repeat(step.d - k, step.d)


def pad_drafts(rng: np.random.Generator, ids: torch.Tensor, step: Step) -> torch.Tensor:
    """``ids`` with :func:`pad_mask`'s draft tokens replaced by ``-1``."""
    pad = pad_mask(rng, step)
    if not pad.any():
        return ids
    return torch.where(host_to(pad, ids.device), torch.full_like(ids, -1), ids)


def greedy_mask(rng: np.random.Generator, B: int) -> np.ndarray:  # noqa: N803
    """``temperature == 0`` of a mixed batch: every request greedy, none, or a share."""
    share = float(rng.choice([0.0, 0.5, 0.9, 1.0]))
    return rng.random(B) < share


def synthetic_rates(rng: np.random.Generator, K: int) -> np.ndarray:  # noqa: N803
    """``synthetic_conditional_rates``: ``K`` float32 rates in ``[0, 1]`` (conditional rates of
    non-increasing unconditional ones), ``0`` and ``1`` among them."""
    r = rng.random(max(K, 1)).astype(np.float32)
    edge = rng.random(r.size) < 0.2
    r[edge] = rng.choice(np.array([0.0, 1.0], dtype=np.float32), size=int(edge.sum()))
    return r


def scale_vocab(rng: np.random.Generator) -> int:
    """The vocabulary of a production-scale case: one of :data:`SCALE_VOCABS`."""
    return scaled_vocab(int(rng.choice(SCALE_VOCABS)))


def scale_rows(rng: np.random.Generator, V: int) -> int:  # noqa: N803
    """Rows of a production-scale ``[rows, V]`` array: past ``2**31 / V`` (the first row whose
    flat index an int32 cannot hold), by up to :data:`SCALE_TABLE` elements in all."""
    limit = flat_limit()
    first = (limit + V - 1) // V
    return first + int(rng.integers(1, max(2, SCALE_TABLE * limit // (1 << 31) // V - first + 1)))


def scale_counts(rng: np.random.Generator, N: int) -> np.ndarray:  # noqa: N803
    """Draft counts (int64, each ``<= 16``, some ``0``: prefills) that add up to ``N``."""
    K = int(rng.integers(8, 17))
    d = np.full(-(-N // K), K, dtype=np.int64)
    d[-1] = N - K * (d.size - 1)
    zeros = np.flatnonzero(rng.random(d.size) < 0.05)
    return np.insert(d, zeros, 0)


UPLOAD_BLOCK = 1 << 26
"""Elements copied to the device at once from a host array (256 MiB of float32)."""


def upload(a: np.ndarray, out: torch.Tensor) -> torch.Tensor:
    """``out`` (a device tensor of ``a``'s size and dtype) holding host array ``a``: of an array
    of :func:`lazy_full`, only the elements :func:`written_runs` names cross to the device (the
    rest is zeroed there: seconds less for a table of gigabytes with a few live rows); of any
    other, every element, a block at a time. Returns ``out``."""
    src = np.ascontiguousarray(a).reshape(-1)
    flat = out.view(-1)  # a view: the writes land in out
    runs = written_runs(a)
    if runs is None:
        runs = [(0, src.size)]
    else:
        flat.zero_()
    with warnings.catch_warnings():  # a sealed (read-only) array: only read here
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        for lo, hi in runs:
            for s in range(lo, hi, UPLOAD_BLOCK):
                t = min(hi, s + UPLOAD_BLOCK)
                flat[s:t].copy_(torch.from_numpy(src[s:t]))
    return out


def to_device(a: np.ndarray, device: str) -> torch.Tensor:
    """Host array ``a`` as a new tensor on ``device`` (:func:`upload`)."""
    return upload(a, torch.empty(a.shape, dtype=torch.from_numpy(np.empty(0, a.dtype)).dtype, device=device))


def sparse_rows(rng: np.random.Generator, rows: int, V: int, k: int,  # noqa: N803
                ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A float32 ``[rows, V]`` table of softmax rows with ``k`` tokens each (the others masked
    to ``-inf`` by top-k: probability 0; ``ids`` when given, else drawn), and those tokens,
    ``[rows, k]``. The zeros are never written (their pages stay the system's zero page), so a
    10 GiB table costs its entries."""
    table = lazy_full((rows, V), np.float32)
    if ids is None:
        ids = rng.integers(0, V, size=(rows, k))  # a repeated id keeps its last probability
    logits = rng.standard_normal((rows, k)) * float(rng.choice([0.1, 1.0, 5.0]))
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    table[np.repeat(np.arange(rows), k), ids.reshape(-1)] = p.reshape(-1)
    return table, ids


def sparse_noise(rng: np.random.Generator, rows: int, V: int, dtype: type, k: int,  # noqa: N803
                 at: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``inv_q = 1 / q`` of ``[rows, V]`` as a production-scale case draws it: ``1`` (``q = 1``)
    but for ``k`` random entries per row and the entries ``at`` (rows, columns: the tokens a
    request's table rows hold, so that the race among them is decided by the noise as in a
    dense draw) of ``1 / Exp(1)``. The pages of the ones are written once."""
    inv_q = lazy_full((rows, V), dtype, 1.0)
    r = np.repeat(np.arange(rows), k)
    c = rng.integers(0, V, size=rows * k)
    if at is not None:
        r, c = np.concatenate([r, at[0]]), np.concatenate([c, at[1]])
    q = np.maximum(rng.exponential(size=r.size), float(np.finfo(dtype).tiny))
    inv_q[r, c] = (1.0 / q).astype(dtype)
    return inv_q


@dataclass(frozen=True)
class Steps:
    """``k`` steps drawn together: the draft counts ``d`` of all their requests concatenated
    (int64) and each step's request count ``B``; one vocabulary ``V``."""

    d: np.ndarray
    B: np.ndarray  # noqa: N815 - the contract's names
    V: int  # noqa: N815

    @property
    def N(self) -> np.ndarray:  # noqa: N802
        """Each step's draft tokens."""
        return np.add.reduceat(self.d, self.first) if self.d.size else np.zeros(self.B.size, dtype=np.int64)

    @property
    def L(self) -> np.ndarray:  # noqa: N802
        """Each step's ``max_spec_len`` (``max(d)``)."""
        return np.maximum.reduceat(self.d, self.first) if self.d.size else np.zeros(self.B.size, dtype=np.int64)

    @property
    def first(self) -> np.ndarray:
        """Each step's first request in :attr:`d`."""
        return np.cumsum(self.B) - self.B

    @property
    def cu(self) -> np.ndarray:
        """Each step's ``np.cumsum(d)`` as int32, concatenated."""
        c = np.cumsum(self.d)
        return (c - np.repeat(c[self.first] - self.d[self.first], self.B)).astype(np.int32)

    def rows(self) -> np.ndarray:
        """Each draft token's index in its step (its row of the step's tables), concatenated."""
        N = self.N
        return np.arange(int(N.sum())) - np.repeat(np.cumsum(N) - N, N)


def draw_steps(rng: np.random.Generator, k: int, max_requests: int, on_cpu: bool, V: int, max_rows: int,  # noqa: N803
               tables: bool = True) -> Steps:
    """``k`` steps of :func:`draw_step`'s distribution at once, the vocabulary ``V``; with
    ``tables`` (:func:`draw_step`'s), each cut (its requests halved) until it has at most
    ``max_rows`` draft tokens and requests too (without, never cut: no table to fit)."""
    top = np.where(rng.random(k) < 0.75, max_requests, 4 * max_requests)
    B = np.exp(rng.uniform(0, np.log(top + 1))).astype(np.int64)
    K = rng.integers(1, 17, size=k)
    d = (rng.random(int(B.sum())) * np.repeat(K + 1, B)).astype(np.int64)  # uniform on 0..K (integers with an array high is 3x slower)
    d[rng.random(d.size) < np.repeat(rng.choice([0.0, 0.1, 0.5], size=k), B)] = 0
    first = np.cumsum(B) - B
    c = np.concatenate([[0], np.cumsum(d)])
    size = B.copy()
    for _ in range(64 if tables else 0):  # halve as draw_step does, all steps at once
        n = c[first + size] - c[first]
        cut = (size > 1) & (((n + size) * V > MAX_TABLE) | (n > max_rows) | (size > max_rows))
        if not cut.any():
            break
        size = np.where(cut, size // 2, size)
    keep = (np.arange(d.size) - np.repeat(first, B)) < np.repeat(size, B)
    return Steps(d[keep].astype(np.int64), size, V)


def scale_steps(rng: np.random.Generator, k: int, V: int, rows: int) -> Steps:  # noqa: N803
    """``k`` production steps past ``2**31`` table elements at once, each over the first rows of
    shared tables of ``rows`` rows of vocabulary ``V`` (:func:`scale_batch_rows`): each step's
    draft tokens ``N`` past the first row an int32 offset cannot reach and within ``rows``,
    in requests of ``K`` drafts (8 to 16 a step, the last request the remainder), one in twenty
    preceded by a prefill without drafts (:func:`scale_counts`' steps, drawn together)."""
    first = -(-flat_limit() // V)
    N = rng.integers(first + 1, max(first + 1, rows), size=k, endpoint=True)
    K = rng.integers(8, 17, size=k)
    m = -(-N // K)  # requests of K drafts, the last the remainder
    d = np.repeat(K, m)
    d[np.cumsum(m) - 1] = N - K * (m - 1)
    zero = rng.random(d.size) < 0.05  # a prefill before this request
    before = np.cumsum(zero)
    out = np.zeros(d.size + int(before[-1]) if d.size else 0, dtype=np.int64)
    out[np.arange(d.size) + before] = d
    B = m + np.add.reduceat(zero, np.cumsum(m) - m) if d.size else m
    return Steps(out, B.astype(np.int64), V)


def scale_request_steps(rng: np.random.Generator, k: int, V: int, requests: int) -> Steps:  # noqa: N803
    """``k`` production steps past ``2**31`` elements in their requests' rows (``[B, V]``
    noise, a row per request) at once, each of ``B`` requests past the first row an int32
    offset cannot reach and within ``requests``: prefills without drafts but for the last one
    to eight requests and four more anywhere, of 1 to 16 drafts each (:func:`scale_counts`'s
    kind: every request is a row of the noise, however few drafts the step has)."""
    first = -(-flat_limit() // V)
    B = rng.integers(first + 1, max(first + 1, requests), size=k, endpoint=True)
    d = np.zeros(int(B.sum()), dtype=np.int64)
    end = np.cumsum(B)
    for s in range(k):
        tail = int(rng.integers(1, 9))
        d[end[s] - tail : end[s]] = rng.integers(1, 17, size=tail)
        d[end[s] - B[s] + rng.integers(0, B[s], size=4)] = rng.integers(1, 17, size=4)
    return Steps(d, B.astype(np.int64), V)


SCALE_REQUEST_TOKENS = 256
"""Draft tokens a step of :func:`scale_request_steps` has at most (12 requests of 16 drafts),
rounded up: the rows of its tables."""


def scale_batch_rows(V: int) -> int:  # noqa: N803
    """Rows of a production-scale batch's shared ``[rows, V]`` tables: past the first row an
    int32 offset cannot reach by a sixteenth (at least 16 rows), about ``1.06 * 2**31``
    elements (8.5 GiB of float32)."""
    first = -(-flat_limit() // V)
    return first + max(16, first // 16)


def pad_from(rng: np.random.Generator, s: Steps) -> np.ndarray:
    """:func:`pad_mask` of each of ``s``'s steps at once, as each request's first ``-1`` draft:
    its drafts ``j >= pad_from[r]`` are ``-1`` (``d_r`` where none is)."""
    some = np.flatnonzero(np.repeat(rng.random(s.B.size) < 0.25, s.B))  # the requests of the steps that pad
    out = s.d.copy()
    d = s.d[some]
    out[some] -= np.minimum((rng.random(some.size) * (d + 1)).astype(np.int64), d) * (rng.random(some.size) < 0.3)
    return out


def token_index(s: Steps, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """On ``device``, for every draft token of ``s``'s steps (concatenated): its request (in
    ``s.d``), its index in the request, and its index in its step (its row of the tables)."""
    d = host_to(s.d, device)
    n = int(s.d.sum())
    req = torch.repeat_interleave(torch.arange(s.d.size, device=device), d, output_size=n)
    first = torch.cumsum(d, 0) - d
    at = torch.arange(n, device=device)
    step_first = host_to(np.repeat(np.cumsum(s.B) - s.B, s.B), device)  # each request's step's first request
    return req, at - first[req], at - first[step_first][req]


def greedy_masks(rng: np.random.Generator, s: Steps, share: float = 1.0) -> np.ndarray:
    """:func:`greedy_mask` of each step at once (every request greedy, none, or a share), in a
    share ``share`` of the steps (none in the others), concatenated."""
    p = rng.choice([0.0, 0.5, 0.9, 1.0], size=s.B.size) * (rng.random(s.B.size) < share)
    return rng.random(int(s.B.sum())) < np.repeat(p, s.B)
