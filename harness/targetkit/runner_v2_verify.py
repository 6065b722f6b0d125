"""What the targets of Model Runner V2's verification share (docs/CONTRACT.md §28-§35).

The eight kernels of ``sample/gumbel.py`` (§28-§29: the target's and the drafter's sampling)
and ``spec_decode/rejection_sampler_utils.py`` (§30-§35: ``rejection_sample``'s chain) work on
one *verification step*: ``B`` requests of ``d_r`` drafts each, ``d_r + 1`` logits rows per
request, a target vocabulary and (with ``draft_sample_method = "probabilistic"``) the drafter's
cached logits. :class:`Step` is that step, :func:`draw_step` draws one as vLLM makes them (the
generators of every folder build on it), and :func:`chain` runs the NumPy oracles of the whole
chain on it, so that each kernel's case holds its inputs as the kernels before it leave them.

Their oracles (``oracles/vectorized_v2_verify.py``, ``oracles/loops_v2_verify.py``) return a
``Settlement``: the bound of every float they write and the *windows* they meet, decisions within
the contract's error bound of the functions on each side. The comparison of
:class:`~.base.TritonTarget` compares within those bounds and gives each window the run's
outcome (:meth:`~.base.TritonTarget.decided`); a case that meets a window is the extended tier's
(:meth:`VerifyTarget.production_rules`), and the production generators re-key a request whose
decision lands in one (:func:`settle_step`): a new seed, as a new request would have.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.case import Case
from ..core.errors import ContractViolation
from ..generation.choosers import Chooser
from .base import EXTENDED, PRODUCTION, Tier
from .runner_v2 import I32, I64, V2Target, cumulative

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

GUMBEL = "vllm/v1/worker/gpu/sample/gumbel.py"
UTILS = "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py"
"""The vLLM modules of §28-§29 and §30-§35 (``Target.module``)."""

STATS_BLOCK = 8192
"""``rejection_sample``'s vocabulary block of §30 and §32 (and ``apply_temperature``'s)."""
SAMPLE_BLOCK = 1024
"""The vocabulary block of the Gumbel draws (§29, §34)."""
MAX_K = 16
"""The most speculative steps the generators draw (``num_speculative_tokens``)."""
MAX_MODEL_LEN = 1 << 20
"""A long context's ``max_model_len`` (positions stay below it; vLLM's are far below ``2**30``)."""
DRAFT_NOISE_SALT = 1 << 30
"""``_DRAFT_NOISE_SALT``: a drafting row's noise position is its position plus this."""
METHODS = ("standard", "synthetic", "block", "fly")
"""``RejectionSampler``'s methods (``rejection_sample_method``; ``probabilistic`` drafts have
draft logits, the others one-hot)."""
VOCABS = (8, 37, 128, 1000, 1500, 2500)
"""Vocabulary widths of ordinary cases (small: a case costs its 1024- and 8192-lane programs
under the interpreter); the tours reach the production widths (more than one 8192-wide block,
151936 and 262144 ids)."""
NOT_READ = np.float32(np.nan)
"""What the generators put where the contract reads nothing (a draft step past a request's
drafts, a greedy row's sums, a bonus row's statistics): vLLM's ``new_empty`` leaves garbage
there, and a kernel that reads it turns NaN into a difference."""


def verify_oracles(function: str) -> dict[str, str]:
    """:attr:`~.base.Target.oracle_functions` of a verification kernel: ``function`` of
    ``oracles/vectorized_v2_verify.py`` (NumPy) and ``oracles/loops_v2_verify.py`` (Numba)."""
    return {"numpy": f"vectorized_v2_verify.{function}", "numba": f"loops_v2_verify.{function}"}


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


# -- the verification step -----------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One verification step as ``RejectionSampler._verify`` hands it to ``rejection_sample``.

    ``target_logits`` float32 ``[n, Vt]`` (processed: divided by the temperature); ``draft_logits``
    float32 ``[R, K, Vd]`` (the drafter's cache, pre-temperature; ``None``: one-hot drafts);
    ``draft_sampled`` int32 ``[n]`` (row ``j``'s draft at ``j + 1``; ``-1`` a placeholder or a
    draft a grammar refused); ``cu_num_logits`` int32 ``[B + 1]``; ``pos`` int64 ``[n]``;
    ``idx_mapping`` int64 ``[B]`` distinct state rows; ``temperature`` float32, ``seed`` int64
    ``[R]``; ``method`` one of :data:`METHODS` with its ``rates`` (synthetic, float32 ``[K]``),
    ``fly_window``, ``fly_threshold`` and ``fly_entropy`` (float32 ``[n]``); ``use_fp64``."""

    target_logits: np.ndarray
    draft_logits: np.ndarray | None
    draft_sampled: np.ndarray
    cu_num_logits: np.ndarray
    pos: np.ndarray
    idx_mapping: np.ndarray
    temperature: np.ndarray
    seed: np.ndarray
    K: int
    method: str = "standard"
    rates: np.ndarray | None = None
    fly_window: int = 0
    fly_threshold: float = 0.3
    fly_entropy: np.ndarray | None = None
    use_fp64: bool = False

    @property
    def B(self) -> int:  # noqa: N802
        return len(self.idx_mapping)

    @property
    def n(self) -> int:
        return int(self.target_logits.shape[0])

    @property
    def V(self) -> int:  # noqa: N802
        """The vocabulary the kernels see: ``min(Vt, Vd)``."""
        vt = int(self.target_logits.shape[1])
        return vt if self.draft_logits is None else min(vt, int(self.draft_logits.shape[2]))

    @property
    def nb(self) -> int:
        return cdiv(self.V, STATS_BLOCK)

    @property
    def rnb(self) -> int:
        return cdiv(self.V, SAMPLE_BLOCK)

    @property
    def counts(self) -> np.ndarray:
        """Logits rows per request (``d_r + 1``)."""
        return np.diff(self.cu_num_logits.astype(np.int64))

    @property
    def expanded_idx_mapping(self) -> np.ndarray:
        return np.repeat(self.idx_mapping, self.counts).astype(np.int64)

    @property
    def expanded_local_pos(self) -> np.ndarray:
        return np.concatenate([np.arange(k) for k in self.counts]).astype(np.int32) if self.B else np.zeros(0, np.int32)

    @property
    def block(self) -> bool:
        return self.method == "block"

    def greedy(self) -> np.ndarray:
        """Per request: greedy (temperature 0)."""
        return self.temperature[self.idx_mapping] == 0


def blocks_vocab(c: Chooser) -> int:
    """A vocabulary of two or three 8192-wide blocks (:data:`STATS_BLOCK`): with three, a
    reduction over a row's blocks (the global maximum, log-sum-exp or argmax of §31-§34) reads
    a padded one, its block count rounded up to a power of two."""
    return STATS_BLOCK * c.integer(1, 2) + c.integer(1, 2000)


def padded_blocks(V: int) -> bool:  # noqa: N803
    """Whether a row of ``V`` logits has a block count (of :data:`STATS_BLOCK`) past 2 and not a
    power of two: the reduction over its blocks reads padded ones."""
    nb = -(-V // STATS_BLOCK)
    return nb > 2 and nb & (nb - 1) != 0


STYLES = ("gauss", "flat", "peaked", "ints")
"""The logits styles a step draws from by default (:func:`_logit_rows`)."""
WITH_LOGPROBS = (*STYLES, "logprobs")
"""The styles with log-probabilities too (every logit below 0): the verification kernels whose
padded lanes a positive logit would hide draw these."""


def _logit_rows(rng: np.random.Generator, n: int, V: int, style: str) -> np.ndarray:  # noqa: N803
    """``n`` rows of ``V`` float32 logits: ``gauss`` (spread 3), ``flat`` (spread 0.3: close
    probabilities), ``peaked`` (one token far ahead), ``ints`` (integers: ties), ``logprobs``
    (log-probabilities of spread-3 logits: every logit below 0, as in a block of a vocabulary's
    rare tokens, where a padded lane read as 0 would win)."""
    if style == "ints":
        return rng.integers(-4, 5, size=(n, V)).astype(np.float32)
    if style == "logprobs":
        x = rng.standard_normal((n, V)) * 3.0
        x -= x.max(axis=1, keepdims=True) if V else 0.0
        return (x - np.log(np.exp(x).sum(axis=1, keepdims=True))).astype(np.float32)
    spread = {"gauss": 3.0, "flat": 0.3, "peaked": 2.0}[style]
    x = (rng.standard_normal((n, V)) * spread).astype(np.float32)
    if style == "peaked" and V:
        x[np.arange(n), rng.integers(0, V, size=n)] += np.float32(12.0)
    return x


def _bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16's 8 significant bits (the drafter's head dtype), as float32."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).astype(np.uint32)
    return np.where(np.isfinite(x), r.view(np.float32), x).astype(np.float32)


def draw_step(c: Chooser, *, B: int, K: int | None = None, V: int | None = None, method: str | None = None,  # noqa: N803
              draft: bool | None = None, max_pos: int = 5000, style: str | None = None, styles: tuple[str, ...] = STYLES, min_drafts: int = 0,
              greedy: tuple[float, ...] = (0.0, 0.3, 1.0), same: bool = True, other_width: float = 0.2
              ) -> Step:  # fmt: skip
    """A verification step of ``B`` requests as vLLM makes it (docs/CONTRACT.md §30.2-§33.2):
    ``K`` speculative steps (each request ``0..K`` drafts), greedy and random requests, the
    target's processed logits (``-inf`` where top-k/top-p masked, at least one finite per row),
    the drafter's cache of bfloat16 logits (a narrower draft vocabulary now and then), drafts
    the target's argmax half the time, ``-1`` drafts a grammar refused, positions of a context,
    any int64 seeds (``greedy``: the shares of greedy requests a batch is drawn with); ``same``:
    the drafter may be the target (ratios of 1: block verification's denominators and the
    residuals' lanes then lie within their windows, the extended tier's for §33-§34);
    ``other_width``: the chance of a draft vocabulary narrower or wider than the target's;
    ``method`` (else drawn), synthetic rates, FLy's window, threshold and
    entropies, both noise paths. Sizes and modes from ``c``, float contents from a NumPy
    generator seeded by ``c`` (so Hypothesis shrinks the seed)."""
    K = c.integer_of([(1, 4), (1, MAX_K)]) if K is None else K
    method = c.choice(METHODS) if method is None else method
    draft = c.chance(0.6) if draft is None else draft
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    R = B + c.integer_of([(0, 0), (0, 6)])
    idx = rng.permutation(R)[:B].astype(np.int64)
    nd = np.asarray(c.array(np.int64, B, min(min_drafts, K), K))
    nl = nd + 1
    cu = cumulative(nl.tolist())
    n = int(cu[-1])
    Vt = c.choice(VOCABS) if V is None else V
    Vd = Vt
    if draft and Vt > 8 and c.chance(other_width):  # a draft vocabulary narrower or wider than the target's
        Vd = Vt + c.choice([-1, 1]) * c.integer(1, min(64, Vt // 2))
    Vk = min(Vt, Vd)
    style = c.choice(list(styles)) if style is None else style
    temp = np.where(rng.random(R) < 0.5, rng.choice([0.3, 0.7, 1.0, 1.3], size=R), 1.0).astype(np.float32)
    greedy_share = c.choice(list(greedy))
    temp[idx[rng.random(B) < greedy_share]] = 0
    tl_ = _logit_rows(rng, n, Vt, style)
    if c.chance(0.4):  # top-k / top-p masks of random rows (processed logits), a finite token kept
        masked = rng.random((n, Vt)) < rng.choice([0.3, 0.9])
        keep = rng.integers(0, Vk, size=n)
        masked[np.arange(n), keep] = False
        rows = np.repeat(temp[idx] != 0, nl)
        tl_[masked & rows[:, None]] = -np.inf
    dl = None
    if draft:
        dl = np.full((R, K, Vd), NOT_READ, dtype=np.float32)
        for r in range(B):
            if nd[r]:
                base = tl_[cu[r] : cu[r] + nd[r], :Vd]
                if Vd > Vt:  # a wider draft vocabulary: columns past the target's are never read
                    base = np.concatenate([base, _logit_rows(rng, int(nd[r]), Vd - Vt, "gauss")], axis=1)
                mode = rng.choice(["near", "other", "same"], p=[0.5, 0.35, 0.15]) if same else rng.choice(["near", "other"])
                T = temp[idx[r]] if temp[idx[r]] else 1.0
                fin = np.where(np.isfinite(base), base, np.float32(-30.0))
                if mode == "same":  # the drafter is the target: ratios of 1
                    rows = fin * np.float32(T)
                elif mode == "near":
                    rows = (fin + rng.standard_normal(fin.shape).astype(np.float32) * 0.5) * np.float32(T)
                else:
                    rows = _logit_rows(rng, int(nd[r]), Vd, "gauss")
                dl[idx[r], : nd[r]] = _bf16(rows)
    ds = rng.integers(0, Vk, size=n).astype(np.int32)
    for j in range(n - 1):
        r = int(np.searchsorted(cu, j, side="right") - 1)
        if j + 1 < cu[r + 1] and rng.random() < 0.5:  # the draft is the target's favourite
            ds[j + 1] = int(np.argmax(np.where(np.isfinite(tl_[j, :Vk]), tl_[j, :Vk], -np.inf)))
    elp = np.concatenate([np.arange(k) for k in nl]) if B else np.zeros(0, np.int64)
    if c.chance(0.3):  # drafts a grammar refused, or placeholders of a step starting in the prefill
        ds[(rng.random(n) < 0.25) & (elp > 0)] = -1
    p0 = rng.integers(0, max_pos, size=B)
    pos = (np.repeat(p0, nl) + elp).astype(np.int64)
    seed = rng.integers(-(2**63), 2**63 - 1, size=R, dtype=np.int64, endpoint=True)
    rates = entropy = None
    window = 0
    threshold = 0.3
    if method == "synthetic":
        rates = rng.choice([0.0, 0.35, 0.8, 1.0], size=K).astype(np.float32)
    if method == "fly":
        window = c.integer(1, max(1, K))
        threshold = float(c.choice([0.3, 0.0, 1.0]))
        entropy = rng.choice(np.array([0.0, 0.1, 0.3, 1.0, 2.5], np.float32), size=n).astype(np.float32)
    fp64 = c.chance(0.25)
    return Step(tl_, dl, ds, cu, pos, idx, temp, seed, int(K), method, rates, window, threshold, entropy, fp64)


# -- the chain -----------------------------------------------------------------------------------


STATS = ("target_local_argmax", "target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")
"""§30's outputs (the statistics §31-§33 read)."""


@dataclass
class Chain:
    """The NumPy oracles of §30-§35 run on a :class:`Step`, as ``rejection_sample`` chains the
    kernels: every intermediate (``arrays``: the statistics, ``cumulative_log_p``,
    ``local_residual_mass``, §33's outputs, ``num_sampled_before`` (§33's count), §34's
    draws, the final ``sampled`` and ``num_sampled``), and the windows each stage met."""

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    windows: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def met(self) -> bool:
        return any(self.windows.values())


def chain(step: Step) -> Chain:
    """Run §30-§35's NumPy oracles on ``step`` (intermediates start as vLLM's ``new_empty``
    would leave them: :data:`NOT_READ`, or ``-1`` for integers)."""
    from ...oracles import vectorized_v2_verify as o

    n, V, nb, rnb, B = step.n, step.V, step.nb, step.rnb, step.B
    a: dict[str, np.ndarray] = {k: np.full((n, nb), -1 if k == "target_local_argmax" else NOT_READ,
                                           dtype=I64 if k == "target_local_argmax" else F32) for k in STATS}  # fmt: skip
    out = Chain(a)
    common = dict(target_logits=step.target_logits, temperature=step.temperature)
    out.windows["stats"] = o.compute_local_logits_stats(
        **{k: a[k] for k in STATS}, draft_logits=step.draft_logits, expanded_idx_mapping=step.expanded_idx_mapping,
        expanded_local_pos=step.expanded_local_pos, vocab_size=V, **common).windows  # fmt: skip
    stats = {k: a[k] for k in STATS[1:]}
    clp = rm = None
    if step.block:
        clp = a["cumulative_log_p"] = np.full(n, NOT_READ, dtype=F32)
        o.compute_cumulative_log_p(cumulative_log_p=clp, draft_sampled=step.draft_sampled, draft_logits=step.draft_logits,
                                   cu_num_logits=step.cu_num_logits, idx_mapping=step.idx_mapping,
                                   vocab_num_blocks=nb, **stats, **common)  # fmt: skip
        if step.draft_logits is not None:
            rm = a["local_residual_mass"] = np.full((n, nb), NOT_READ, dtype=F32)
            o.compute_local_residual_mass(
                local_residual_mass=rm, cumulative_log_p=clp, draft_logits=step.draft_logits,
                draft_sampled=step.draft_sampled, expanded_idx_mapping=step.expanded_idx_mapping,
                expanded_local_pos=step.expanded_local_pos, vocab_num_blocks=nb, vocab_size=V, **stats, **common)  # fmt: skip
    a["sampled"] = np.full((B, step.K + 1), -1, dtype=I64)
    a["num_sampled"] = np.full(B, -1, dtype=I32)
    a["target_rejected_logsumexp"] = np.full(B, NOT_READ, dtype=F32)
    a["draft_rejected_logsumexp"] = np.full(B, NOT_READ, dtype=F32)
    out.windows["rejection"] = o.rejection(
        sampled=a["sampled"], num_sampled=a["num_sampled"], target_rejected_logsumexp=a["target_rejected_logsumexp"],
        draft_rejected_logsumexp=a["draft_rejected_logsumexp"], target_local_argmax=a["target_local_argmax"],
        draft_sampled=step.draft_sampled, draft_logits=step.draft_logits, cu_num_logits=step.cu_num_logits,
        idx_mapping=step.idx_mapping, seed=step.seed, pos=step.pos, vocab_num_blocks=nb,
        synthetic_conditional_rates=step.rates, cumulative_log_p=clp, local_residual_mass=rm,
        fly_entropy=step.fly_entropy, fly_entropy_threshold=step.fly_threshold, use_block_verification=step.block,
        fly_window_size=step.fly_window, **stats, **common).windows  # fmt: skip
    a["num_sampled_before"] = a["num_sampled"].copy()
    a["sampled_before"] = a["sampled"].copy()
    a["resampled_local_argmax"] = np.full((B, rnb), -1, dtype=I64)
    a["resampled_local_max"] = np.full((B, rnb), NOT_READ, dtype=F64 if step.use_fp64 else F32)
    out.windows["resample"] = o.resample(
        resampled_local_argmax=a["resampled_local_argmax"], resampled_local_max=a["resampled_local_max"],
        target_rejected_logsumexp=a["target_rejected_logsumexp"], draft_logits=step.draft_logits,
        draft_rejected_logsumexp=a["draft_rejected_logsumexp"], rejected_step=a["num_sampled"],
        cu_num_logits=step.cu_num_logits, expanded_idx_mapping=step.expanded_idx_mapping,
        draft_sampled=step.draft_sampled, seed=step.seed, pos=step.pos, cumulative_log_p=clp,
        use_fp64=step.use_fp64, use_block_verification=step.block, vocab_size=V, **common).windows  # fmt: skip
    o.insert_resampled(sampled=a["sampled"], num_sampled=a["num_sampled"],
                       resampled_local_argmax=a["resampled_local_argmax"],
                       resampled_local_max=a["resampled_local_max"], cu_num_logits=step.cu_num_logits,
                       expanded_idx_mapping=step.expanded_idx_mapping, temperature=step.temperature,
                       resample_num_blocks=rnb)  # fmt: skip
    return out


RE_KEY = np.uint64(0x9E3779B97F4A7C15)
"""What a request's seed is XOR-ed with, times the attempt, when its decision lands in a window."""


def settle_step(step: Step, attempts: int = 8) -> tuple[Step, Chain]:
    """``step`` with every request whose verification meets a window re-keyed (its seed XOR-ed
    with :data:`RE_KEY` times the attempt: a new request's noise), and the chain of the result:
    production steps meet no window (a decision within the contract's error bound is the
    extended tier's). After ``attempts``, a request still in a window (one no key moves: block
    verification's denominator at 0) gets placeholder drafts (``-1``: nothing of it verified);
    the chain says what is left."""
    for k in range(1, attempts + 1):
        ch = chain(step)
        reqs = sorted({int(w.key[1]) for ws in ch.windows.values() for w in ws if w.key[:1] == ("req",)})
        if not ch.met:
            return step, ch
        seed = step.seed.copy()
        rows = step.idx_mapping[reqs] if reqs else step.idx_mapping
        with np.errstate(over="ignore"):  # the key's multiple wraps, as intended
            seed[rows] = (seed[rows].view(np.uint64) ^ (RE_KEY * np.uint64(k))).view(np.int64)
        step = replace(step, seed=seed)
    ch = chain(step)
    reqs = sorted({int(w.key[1]) for ws in ch.windows.values() for w in ws if w.key[:1] == ("req",)})
    if reqs:  # a window no key moves (block verification's denominator D = R + 1 - p at 0: p = 1, R = 0):
        ds = step.draft_sampled.copy()  # those requests' drafts become placeholders (-1: nothing verified)
        for r in reqs:
            ds[int(step.cu_num_logits[r]) + 1 : int(step.cu_num_logits[r + 1])] = -1
        step = replace(step, draft_sampled=ds)
        ch = chain(step)
    return step, ch


# -- the record base -----------------------------------------------------------------------------


class VerifyTarget(V2Target):
    """A kernel of Model Runner V2's verification: launched through its launcher of
    ``kernels/launchers.py`` (given only the case's fields it takes: a case may carry a shape,
    ``num_speculative_steps``, that only the outputs need), checked against its two oracles
    within their bounds, its windows given the run's outcome. The production tier is the
    record's :meth:`rules` and no window met (a decision within its error bound is the
    extended tier's, docs/CONTRACT.md N.4)."""

    def launch(self, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        from ...kernels import launchers

        fn = getattr(launchers, self.launcher)
        takes = _parameters(fn)
        given = {k: v for k, v in {**case.scalars, **case.launch}.items() if v is not None}
        args = {**self.arguments(tensors, case), **given}
        fn(kernel, **{k: v for k, v in args.items() if k in takes})

    def call_oracle(self, oracle: Any, case: Case, outputs: Mapping[str, np.ndarray]) -> Any:
        takes = _parameters(oracle)
        kwargs = {**self.arguments({**case.arrays, **outputs}, case), **case.scalars, **self.resolved(case)}
        return oracle(**{k: v for k, v in kwargs.items() if k in takes})

    # -- tiers ----------------------------------------------------------------------------------

    def rules(self, case: Case, tier: Tier) -> None:
        """The record's rules of ``tier`` (``"production"``: N.2, ``"extended"``: N.4) but the
        windows: raise :class:`ContractViolation`."""
        raise NotImplementedError

    def production_rules(self, case: Case) -> None:
        self.rules(case, PRODUCTION)
        met = self.windows_of(case)
        if met:
            w = met[0]
            raise ContractViolation("case", f"a decision within its error window ({w.kind} at {w.key}; "
                                    f"docs/CONTRACT.md §{self.section}.4: the extended tier)")

    def extended_rules(self, case: Case) -> None:
        self.rules(case, EXTENDED)

    def windows_of(self, case: Case) -> list[Any]:
        """The windows the first oracle meets on ``case`` (run on fresh outputs)."""
        from ..core.buffers import filled

        specs = self.output_specs(case)
        outs = {n: filled(dt, shape, 0) for n, (dt, shape) in specs.items()}
        arrays = {n: a.copy() if n in self.inout else a for n, a in case.arrays.items()}
        oracle = next(iter(self.oracles.values()))
        st = self.call_oracle(oracle, case.replace(arrays=arrays), outs)
        return list(getattr(st, "windows", None) or [])

    def programs(self, case: Case) -> int:
        return int(case.scalars.get("num_reqs", 1))


def _parameters(fn: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(fn).parameters)


# -- rules shared by the chain's kernels ---------------------------------------------------------


def need(a: Mapping[str, np.ndarray], name: str, dtype: np.dtype, ndim: int, shape: tuple[int | None, ...] | None = None
         ) -> np.ndarray:  # fmt: skip
    """``a[name]`` of ``dtype`` with ``ndim`` dimensions (and ``shape``, ``None`` for any size
    along an axis); else a :class:`ContractViolation`."""
    x = a.get(name)
    if x is None:
        raise ContractViolation(f"arrays.{name}", "is required")
    if x.dtype != dtype or x.ndim != ndim:
        raise ContractViolation(f"arrays.{name}", f"must be a {ndim}-D {dtype} array")
    if shape is not None and any(want is not None and got != want for got, want in zip(x.shape, shape, strict=True)):
        raise ContractViolation(f"arrays.{name}", f"must be of shape {[s if s is not None else '*' for s in shape]}")
    return x


def check_requests(a: Mapping[str, np.ndarray], K: int, R: int) -> tuple[np.ndarray, np.ndarray]:
    """``cu_num_logits`` int32 ``[B + 1]`` from 0, each request ``1 .. K + 1`` rows; and
    ``idx_mapping`` int64 ``[B]`` of distinct state rows in ``[0, R)``: ``(counts, idx)``."""
    cu = need(a, "cu_num_logits", I32, 1).astype(np.int64)
    nl = np.diff(cu)
    if len(cu) < 2 or cu[0] != 0 or np.any(nl < 1) or np.any(nl > K + 1):
        raise ContractViolation("arrays.cu_num_logits", f"must start at 0, each request 1 to K + 1 = {K + 1} rows")
    idx = need(a, "idx_mapping", I64, 1, (len(nl),))
    if np.any(idx < 0) or np.any(idx >= R) or len(np.unique(idx)) != len(idx):
        raise ContractViolation("arrays.idx_mapping", f"must name distinct state rows in [0, {R})")
    return nl, idx


def check_expanded(a: Mapping[str, np.ndarray], counts: np.ndarray, idx: np.ndarray) -> None:
    """``expanded_idx_mapping`` and ``expanded_local_pos`` as §17 makes them from the requests."""
    eidx = need(a, "expanded_idx_mapping", I64, 1)
    elp = need(a, "expanded_local_pos", I32, 1)
    if not np.array_equal(eidx, np.repeat(idx, counts)):
        raise ContractViolation("arrays.expanded_idx_mapping", "must repeat each request's state row over its rows (§17)")
    if not np.array_equal(elp.astype(np.int64), np.concatenate([np.arange(k) for k in counts])):
        raise ContractViolation("arrays.expanded_local_pos", "must count 0 .. d_r over each request's rows (§17)")


def check_temperature(a: Mapping[str, np.ndarray], tier: Tier) -> np.ndarray:
    """``temperature`` float32 ``[R]``: ``>= 0`` and finite (the extended tier: any finite)."""
    t = need(a, "temperature", F32, 1)
    if not np.all(np.isfinite(t)) or (tier == PRODUCTION and np.any(t < 0)):
        raise ContractViolation("arrays.temperature", "must be finite" + (" and >= 0" if tier == PRODUCTION else ""))
    return t


def check_logits(x: np.ndarray, name: str, rows: np.ndarray, V: int, tier: Tier, *, masked: bool) -> None:  # noqa: N803
    """``x[rows, :V]`` finite, or ``-inf`` where masked (``masked``: a random row keeps at least
    one finite logit); the extended tier: ``+-inf`` anywhere, no NaN."""
    rows = np.asarray(rows)
    step = max(1, CHECK_BLOCK // max(1, V))  # a production-scale table (8 GiB) a block of rows at a time
    for k in range(0, len(rows), step):
        v = x[rows[k : k + step], :V]
        if np.isnan(v).any():
            raise ContractViolation(f"arrays.{name}", "must hold no NaN where it is read")
        if tier == EXTENDED:
            continue
        if np.isposinf(v).any() or (not masked and np.isneginf(v).any()):
            raise ContractViolation(f"arrays.{name}", "must be finite where read" + (" or -inf (masked)" if masked else ""))
        if masked and len(v) and np.any(np.all(np.isneginf(v), axis=1)):
            raise ContractViolation(f"arrays.{name}", "a row must keep a finite logit (top-k keeps one)")


CHECK_BLOCK = 1 << 24
"""Elements of a table the rules look at at once."""


def features_of_step(a: Mapping[str, np.ndarray], K: int) -> dict[str, bool]:
    """Features every chain kernel's case has in common: its requests, drafts and vocabulary."""
    cu = a["cu_num_logits"].astype(np.int64)
    nl = np.diff(cu)
    idx = a["idx_mapping"]
    t = a["temperature"][idx]
    greedy, rnd = t == 0, t != 0
    return {
        "greedy_request": bool(greedy.any()),
        "random_request": bool(rnd.any()),
        "no_drafts": bool(np.any(nl == 1)),
        "all_steps_drafted": bool(np.any(nl == K + 1)),
        "many_requests": len(nl) > 64,
    }


def request_of_row(cu: np.ndarray, row: int) -> int | None:
    """The request whose logits rows hold ``row``."""
    cu = cu.astype(np.int64)
    if row < 0 or row >= cu[-1]:
        return None
    return int(np.searchsorted(cu, row, side="right") - 1)


def with_step(case: Case, **changes: Any) -> Case:
    """``case`` with some arrays or scalars replaced."""
    arrays = {**case.arrays, **{k: v for k, v in changes.items() if isinstance(v, np.ndarray)}}
    scalars = {**case.scalars, **{k: v for k, v in changes.items() if not isinstance(v, np.ndarray)}}
    return case.replace(arrays=arrays, scalars=scalars)


# -- the tours' steps ------------------------------------------------------------------------------


LARGE_VOCABS = (151936, 262144)
"""Qwen's and Gemma's vocabularies: 19 and 32 blocks of 8192, 149 and 256 of 1024, ids past 2**17."""


def sparse_step(step: Step, rng: np.random.Generator, peaks: int = 24) -> Step:
    """``step`` with its logits made compact: a random row ``-inf`` but for ``peaks`` tokens (a
    top-k of that size), a greedy row and the drafter's rows flat but for a few peaks; the draft
    the target's favourite half the time (as :func:`draw_step` makes it)."""
    V = step.V
    n, Vt = step.target_logits.shape
    rows_greedy = np.repeat(step.greedy(), step.counts)
    tl_ = np.zeros((n, Vt), np.float32)
    tl_[~rows_greedy] = -np.inf
    for j in range(n):
        at = np.unique(np.append(rng.integers(0, V, size=peaks), rng.integers(max(0, V - 4096), V, size=4)))
        tl_[j, at] = (rng.standard_normal(at.size) * 2 + 3).astype(np.float32)
    dl = None
    if step.draft_logits is not None:
        dl = np.zeros(step.draft_logits.shape, np.float32)  # unread steps 0, not NaN: one fill (a compact corpus file)
        cu = step.cu_num_logits
        for r, s in enumerate(step.idx_mapping):
            d = int(cu[r + 1] - cu[r] - 1)
            for i in range(d):
                dl[s, i] = 0.0
                at = np.nonzero(np.isfinite(tl_[cu[r] + i, :V]) & (tl_[cu[r] + i, :V] != 0))[0]
                dl[s, i, at] = _bf16(tl_[cu[r] + i, at] + rng.standard_normal(at.size).astype(np.float32))
    ds = step.draft_sampled.copy()
    for j in range(n - 1):
        if ds[j + 1] >= 0:
            fin = np.flatnonzero(np.isfinite(tl_[j, :V]) & (tl_[j, :V] != 0))
            ds[j + 1] = int(fin[np.argmax(tl_[j, fin])]) if rng.random() < 0.5 else int(rng.choice(fin))
    return replace(step, target_logits=tl_, draft_logits=dl, draft_sampled=ds)


def large_vocab_step(rng: np.random.Generator, *, method: str | None = None, draft: bool | None = None,
                     greedy: tuple[float, ...] = (0.0, 0.3, 1.0)) -> Step:
    """One or two requests of up to 3 drafts over a 151936- or 262144-id vocabulary (compact
    logits: :func:`sparse_step`)."""
    c = _rng_chooser(rng)
    step = draw_step(c, B=int(rng.integers(1, 3)), K=3, V=int(rng.choice(LARGE_VOCABS)), method=method, draft=draft,
                     greedy=greedy, same=False)  # fmt: skip
    idx = step.idx_mapping  # the requests' own state rows only: the drafter's cache at most 2 x 3 x 262144
    step = replace(step, idx_mapping=np.arange(step.B, dtype=np.int64), temperature=step.temperature[idx],
                   seed=step.seed[idx], draft_logits=None if step.draft_logits is None else step.draft_logits[idx])
    return sparse_step(step, rng)


def many_requests_step(rng: np.random.Generator, *, method: str | None = None, draft: bool | None = None,
                       greedy: tuple[float, ...] = (0.0, 0.3, 1.0)) -> Step:
    """65 to 128 requests of up to 2 drafts over a small vocabulary (vLLM's max_num_seqs)."""
    return draw_step(_rng_chooser(rng), B=int(rng.integers(65, 129)), K=2, V=int(rng.choice([8, 37])), method=method,
                     draft=draft, greedy=greedy, same=False)  # fmt: skip


def long_context_step(rng: np.random.Generator, *, method: str | None = None, draft: bool | None = None,
                      greedy: tuple[float, ...] = (0.0, 0.3, 1.0)) -> Step:
    """Four to eight requests of 2 drafts and more at positions past 65535 (a long context: the
    noise's counters), every one."""
    step = draw_step(_rng_chooser(rng), B=int(rng.integers(4, 9)), V=int(rng.choice([37, 1000])), method=method,
                     draft=draft, max_pos=MAX_MODEL_LEN - (1 << 16) - MAX_K - 1, greedy=greedy, same=False,
                     min_drafts=2)  # fmt: skip
    return replace(step, pos=step.pos + (1 << 16))


def _rng_chooser(rng: np.random.Generator) -> Chooser:
    from ..generation.choosers import RngChooser

    return RngChooser(rng)


# -- production rules of the chain's inputs ---------------------------------------------------------


def rows_of(cu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first row, d_r)`` of each request."""
    cu = cu.astype(np.int64)
    return cu[:-1], np.diff(cu) - 1


def check_stats(a: Mapping[str, np.ndarray], eidx: np.ndarray, elp: np.ndarray, rows: np.ndarray, V: int,  # noqa: N803
                greedy_rows: np.ndarray | None = None) -> None:  # fmt: skip
    """The statistics at logits ``rows`` (a random request's non-bonus rows: those §31-§33 read)
    are §30's of the case's logits (its rows' state rows ``eidx`` and steps ``elp``): maxima
    exact, sums within §30.1's bounds (recomputed by its NumPy oracle); and at ``greedy_rows``
    the block argmaxes and maxima, exactly. Else a :class:`ContractViolation`."""
    from ...oracles import vectorized_v2_verify as o

    g = np.zeros(0, np.int64) if greedy_rows is None else np.asarray(greedy_rows, np.int64)
    if not len(rows) and not len(g):
        return
    nb = cdiv(V, STATS_BLOCK)
    dl = a.get("draft_logits")
    # §30's oracle on the rows looked at alone (a production-scale step: thousands of rows of
    # 262144 logits), each followed by a copy of it in a greedy state row of its own (a row
    # the oracle reads as drafted, not as its request's bonus row)
    sel = np.unique(np.concatenate([np.asarray(rows, np.int64), g]))
    pick = {int(j): 2 * i for i, j in enumerate(sel)}
    x = np.repeat(np.asarray(a["target_logits"])[sel], 2, axis=0)
    t = np.append(a["temperature"], np.float32(0))
    e2 = np.repeat(np.asarray(eidx, np.int64)[sel], 2)
    e2[1::2] = len(t) - 1
    l2 = np.repeat(np.asarray(elp, np.int64)[sel], 2)
    l2[1::2] = 1
    outs = {k: np.full((len(x), nb), -1 if k == "target_local_argmax" else np.nan,
                       dtype=I64 if k == "target_local_argmax" else F32) for k in STATS}  # fmt: skip
    st = o.compute_local_logits_stats(**outs, target_logits=x, draft_logits=dl, expanded_idx_mapping=e2,
                                      expanded_local_pos=l2.astype(np.int32), temperature=t, vocab_size=V)
    gi = np.array([pick[int(j)] for j in g], np.int64)
    ri = np.array([pick[int(j)] for j in rows], np.int64)
    for k in ("target_local_argmax", "target_local_max"):
        if len(g) and not np.array_equal(a[k][g, :nb], outs[k][gi]):
            j = int(g[np.flatnonzero(np.any(a[k][g, :nb] != outs[k][gi], axis=1))[0]])
            raise ContractViolation(f"arrays.{k}", f"must be §30's greedy statistics of row {j} (its block argmaxes "
                                    "and maxima, exactly)")
    for k in STATS[1:]:
        if k.startswith("draft") and dl is None:
            continue
        got = a[k][rows, :nb].astype(np.float64)
        want = outs[k][ri].astype(np.float64)
        tol = st.bounds[k][ri] + 1e-30
        with np.errstate(invalid="ignore"):
            ok = (got == want) | (np.abs(got - want) <= tol)
        if not ok.all():
            i, b = (int(x[0]) for x in np.nonzero(~ok))
            raise ContractViolation(f"arrays.{k}", f"must be §30's statistics of its row (row {int(rows[i])}, block "
                                    f"{b}: {got[i, b]!r}, §30 gives {want[i, b]!r} within {float(tol[i, b]):.3g})")


# -- the chain's cases ------------------------------------------------------------------------------


ROW_ARRAYS = ("target_logits", "draft_sampled", "pos", "expanded_idx_mapping", "expanded_local_pos", *STATS,
              "cumulative_log_p", "local_residual_mass", "fly_entropy")
"""Arrays of a chain kernel's case with a row per logits row."""
REQUEST_ARRAYS = ("idx_mapping", "rejected_step", "target_rejected_logsumexp", "draft_rejected_logsumexp", "sampled",
                  "num_sampled", "resampled_local_argmax", "resampled_local_max")
"""Arrays with a row per request."""


def chain_arrays(step: Step, ch: Chain, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``names`` of a chain kernel's case, as ``rejection_sample`` hands them to it:
    the step's inputs and the intermediates the kernels before it left (``rejected_step``: §33's
    count; ``sampled``/``num_sampled`` of §35's case: §33's, before the insert). An optional
    one the step lacks (no draft logits, no rates) is left out."""
    s = {"target_logits": step.target_logits, "draft_logits": step.draft_logits, "draft_sampled": step.draft_sampled,
         "cu_num_logits": step.cu_num_logits, "idx_mapping": step.idx_mapping, "pos": step.pos, "seed": step.seed,
         "expanded_idx_mapping": step.expanded_idx_mapping, "expanded_local_pos": step.expanded_local_pos,
         "temperature": step.temperature, "synthetic_conditional_rates": step.rates, "fly_entropy": step.fly_entropy,
         "rejected_step": ch.arrays["num_sampled_before"], "sampled": ch.arrays["sampled_before"],
         "num_sampled": ch.arrays["num_sampled_before"]}  # fmt: skip
    out = {}
    for n in names:
        v = s[n] if n in s else ch.arrays.get(n)
        if v is not None:
            out[n] = np.array(v, copy=True)
    return out


def keep_requests(case: Case, keep: list[int]) -> Case:
    """A chain kernel's ``case`` with only the requests ``keep`` (their logits rows and their
    rows of per-request arrays; the state rows' arrays as they are)."""
    a = case.arrays
    if "cu_num_logits" in a:
        cu = a["cu_num_logits"].astype(np.int64)
    else:  # the rows' own mapping: requests are the runs of expanded_local_pos from 0
        cu = np.append(np.flatnonzero(a["expanded_local_pos"] == 0), len(a["expanded_local_pos"]))
    rows = np.concatenate([np.arange(cu[r], cu[r + 1]) for r in keep]).astype(np.int64) if keep else np.zeros(0, np.int64)
    new = {k: a[k][rows].copy() for k in ROW_ARRAYS if k in a}  # row j's draft, at j + 1, is its request's
    new |= {k: a[k][list(keep)].copy() for k in REQUEST_ARRAYS if k in a}
    if "cu_num_logits" in a:
        new["cu_num_logits"] = cumulative(np.diff(cu)[list(keep)].tolist())
    return case.replace(arrays=new)


def request_count(case: Case) -> int:
    """The requests of a chain kernel's case."""
    a = case.arrays
    if "cu_num_logits" in a:
        return len(a["cu_num_logits"]) - 1
    return int(np.sum(a["expanded_local_pos"] == 0))


def check_clp(a: Mapping[str, np.ndarray], view: StepView, rows: np.ndarray) -> None:
    """``cumulative_log_p`` at logits ``rows`` is §31's of the case's step (within §31.1's bound)."""
    from ...oracles import vectorized_v2_verify as o

    if not len(rows):
        return
    want = np.full(view.n, np.nan, np.float32)
    cu = cumulative((view.d + 1).tolist())
    if "target_local_max" not in a:  # a case without §30's statistics (§34's): §30's oracle makes them
        stats = {k: np.full((view.n, view.nb), -1 if k == "target_local_argmax" else np.nan,
                            dtype=I64 if k == "target_local_argmax" else F32) for k in STATS}  # fmt: skip
        o.compute_local_logits_stats(**stats, target_logits=a["target_logits"], draft_logits=a.get("draft_logits"),
                                     expanded_idx_mapping=view.eidx, expanded_local_pos=view.elp.astype(np.int32),
                                     temperature=a["temperature"], vocab_size=view.V)  # fmt: skip
        a = {**a, **stats}
    st = o.compute_cumulative_log_p(
        cumulative_log_p=want, target_logits=a["target_logits"], target_local_max=a["target_local_max"],
        target_local_sumexp=a["target_local_sumexp"], draft_sampled=a["draft_sampled"], draft_logits=a.get("draft_logits"),
        draft_local_max=a["draft_local_max"], draft_local_sumexp=a["draft_local_sumexp"], cu_num_logits=cu,
        idx_mapping=view.idx, temperature=a["temperature"], vocab_num_blocks=view.nb)  # fmt: skip
    got = a["cumulative_log_p"][rows].astype(np.float64)
    w = want[rows].astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = (got == w) | (np.abs(got - w) <= st.bounds["cumulative_log_p"][rows])
    if not ok.all():
        j = int(rows[np.flatnonzero(~ok)[0]])
        raise ContractViolation("arrays.cumulative_log_p", f"must be §31's joint log ratio (row {j}: "
                                f"{float(a['cumulative_log_p'][j])!r}, §31 gives {float(want[j])!r})")


def block_lse(m: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``M + log(sum_b s_b exp(m_b - M))`` per row of block statistics (float64; ``-inf`` for a
    row without a finite maximum)."""
    m = np.asarray(m, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        M = np.max(m, axis=1)
        tot = np.sum(np.where(np.isfinite(m), np.asarray(s, np.float64) * np.exp(m - M[:, None]), 0.0), axis=1)
        return np.where(np.isfinite(M), M + np.log(tot), -np.inf)


def draft_log_probs(a: Mapping[str, np.ndarray], rows: np.ndarray, steps: np.ndarray, s: np.ndarray,
                    tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``(lp_t, lp_d)`` of ``tokens`` at logits ``rows`` (steps ``steps`` of state rows ``s``) from
    the case's statistics, float64 (``lp_d = 0`` without draft logits): what §31-§33 compare."""
    t = a["temperature"][s].astype(np.float64)
    lt = a["target_logits"][rows, tokens].astype(np.float64) - block_lse(a["target_local_max"][rows], a["target_local_sumexp"][rows])
    if "draft_logits" not in a:
        return lt, np.zeros(len(rows))
    q = a["draft_logits"][s, steps, tokens].astype(np.float64) / t
    return lt, q - block_lse(a["draft_local_max"][rows], a["draft_local_sumexp"][rows])


@dataclass(frozen=True)
class StepView:
    """A chain kernel's case read as a verification step (the rules' and features' view):
    per request its first row, drafts and state row; per row its request, step and state row;
    the vocabulary the kernels see; which rows are drafts of random requests."""

    first: np.ndarray
    d: np.ndarray
    idx: np.ndarray
    row_req: np.ndarray
    elp: np.ndarray
    eidx: np.ndarray
    V: int
    nb: int
    temperature: np.ndarray

    @property
    def n(self) -> int:
        return len(self.row_req)

    @property
    def greedy(self) -> np.ndarray:
        """Per request."""
        return self.temperature[self.idx] == 0

    @property
    def draft_rows(self) -> np.ndarray:
        """Per row: a draft row (not the request's bonus)."""
        return self.elp < self.d[self.row_req]

    @property
    def random_draft_rows(self) -> np.ndarray:
        return self.draft_rows & ~self.greedy[self.row_req]


def step_view(case: Case, tier: Tier, *, stats: bool = True) -> StepView:
    """Check a chain kernel's case's step (§31.2-§33.2; the extended tier §31.4-§33.4) and read
    it: ``cu_num_logits`` and ``idx_mapping`` (distinct state rows of ``temperature``),
    ``target_logits`` ``[n, Vt]``, ``draft_logits`` ``[R, K, Vd]`` (at least every request's
    drafts), ``draft_sampled`` ``[n]`` (drafts ``-1`` or in ``[0, V)``), the statistics ``[n, NB]``
    and ``vocab_num_blocks = NB`` where the case has them; logits finite where read (``-inf``
    where a random row is masked); in production the statistics §30's (``stats``)."""
    a = case.arrays
    t = check_temperature(a, tier)
    tl_ = need(a, "target_logits", F32, 2)
    n, Vt = tl_.shape
    dl = a.get("draft_logits")
    K = MAX_K
    widths = [Vt]
    if dl is not None:
        need(a, "draft_logits", F32, 3)
        if dl.shape[0] != len(t):
            raise ContractViolation("arrays.draft_logits", "must have max_num_reqs rows")
        K, widths = dl.shape[1], [Vt, dl.shape[2]]
    if "cu_num_logits" in a:
        cu = need(a, "cu_num_logits", I32, 1).astype(np.int64)
        if len(cu) >= 2 and dl is None:
            K = max(K, int(np.diff(cu).max()) - 1)
        if "idx_mapping" in a:
            counts, idx = check_requests(a, K, len(t))
        else:  # §34's: each row's state row, a request's repeated over its rows
            nl = np.diff(cu)
            if len(cu) < 2 or cu[0] != 0 or np.any(nl < 1) or np.any(nl > K + 1):
                raise ContractViolation("arrays.cu_num_logits", f"must start at 0, each request 1 to K + 1 = {K + 1} rows")
            eidx_ = need(a, "expanded_idx_mapping", I64, 1, (n,))
            counts, idx = nl, eidx_[cu[:-1]] if cu[-1] == n else eidx_[:0]
            if cu[-1] != n or np.any(np.repeat(idx, counts) != eidx_) or np.any(idx < 0) or np.any(idx >= len(t)) \
                    or len(np.unique(idx)) != len(idx):  # fmt: skip
                raise ContractViolation("arrays.expanded_idx_mapping", "must repeat each request's own state row over "
                                        "its rows")
    else:  # the rows' own mapping (§17's): requests are the runs of expanded_local_pos from 0
        elp_ = need(a, "expanded_local_pos", I32, 1, (n,)).astype(np.int64)
        eidx_ = need(a, "expanded_idx_mapping", I64, 1, (n,))
        if n < 1 or elp_[0] != 0 or np.any((np.diff(elp_) != 1) & (elp_[1:] != 0)):
            raise ContractViolation("arrays.expanded_local_pos", "must count 0 .. d_r over each request's rows (§17)")
        starts = np.flatnonzero(elp_ == 0)
        counts = np.diff(np.append(starts, n))
        idx = eidx_[starts]
        if np.any(np.repeat(idx, counts) != eidx_) or np.any(idx < 0) or np.any(idx >= len(t)) or len(np.unique(idx)) != len(idx):
            raise ContractViolation("arrays.expanded_idx_mapping", "must repeat each request's own state row over its rows")
        if np.any(counts - 1 > K):
            raise ContractViolation("arrays.draft_logits", "must hold every request's drafts (K steps)")
        cu = np.append(0, np.cumsum(counts))
    if cu[-1] != n:
        raise ContractViolation("arrays.cu_num_logits", f"must end at the logits' rows ({n})")
    V = min(widths)
    nb = cdiv(V, STATS_BLOCK)
    row_req = np.repeat(np.arange(len(counts)), counts)
    elp = np.concatenate([np.arange(k) for k in counts]).astype(np.int64)
    view = StepView(cu[:-1], counts - 1, idx.astype(np.int64), row_req, elp, idx[row_req].astype(np.int64), V, nb, t)
    if "vocab_num_blocks" in case.scalars and case.scalars["vocab_num_blocks"] != nb:
        raise ContractViolation("scalars.vocab_num_blocks", f"must be cdiv(V, 8192) = {nb}")
    pad = case.launch.get("PADDED_VOCAB_NUM_BLOCKS")
    if pad is not None and (tier == PRODUCTION or not isinstance(pad, int) or pad < 1 or pad & (pad - 1)):
        raise ContractViolation("launch.PADDED_VOCAB_NUM_BLOCKS", "is vLLM's (null)" + (
            "" if tier == PRODUCTION else ", or a power of two"))
    for k in STATS:
        if k in a:
            need(a, k, I64 if k == "target_local_argmax" else F32, 2, (n, None))
            if a[k].shape[1] < nb:
                raise ContractViolation(f"arrays.{k}", f"must have vocab_num_blocks = {nb} columns")
    if "draft_sampled" in a:
        ds = need(a, "draft_sampled", I32, 1, (n,)).astype(np.int64)
        drafts = ds[np.flatnonzero(view.draft_rows) + 1]
        if np.any(drafts < -1) or np.any(drafts >= V) or np.any(ds < -1) or np.any(ds >= Vt):
            raise ContractViolation("arrays.draft_sampled", f"drafts must be -1 or token ids in [0, {V})")
    greedy_rows = view.greedy[row_req]
    check_logits(tl_, "target_logits", np.flatnonzero(greedy_rows), V, tier, masked=False)
    check_logits(tl_, "target_logits", np.flatnonzero(~greedy_rows), V, tier, masked=True)
    rd = np.flatnonzero(view.random_draft_rows)
    if dl is not None:
        check_logits(dl[view.eidx[rd], elp[rd]], "draft_logits", np.arange(len(rd)), V, tier, masked=False)
    if stats and tier == PRODUCTION and "target_local_max" in a:
        check_stats(a, view.eidx, elp, rd, V)
    return view
