"""What a caller of ``_rejection_kernel`` relies on (docs/CONTRACT.md §33).

``num_sampled`` is a count of drafts (``0 .. d_r``), the accepted tokens are the drafts
themselves, a greedy request's are its argmaxes and its correction the argmax of its first
rejected row. Over seeds (``AUDIT.statistics``): the whole verification, the kernels chained as
``rejection_sample`` chains them, leaves the target distribution unchanged (speculative
sampling's guarantee), and the drafter's noise stream never shares a counter with the target's
for any (seed, position) vLLM produces (vLLM #47386's class: the streams shared one, and
verification was no longer unbiased).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...core.case import Case
from ...targetkit.interface import parameters_of
from ...targetkit.properties import (
    Audit,
    NotApplicable,
    Observation,
    Property,
    Statistic,
    nothing_past_num_reqs,
)
from ...targetkit.runner_v2_verify import DRAFT_NOISE_SALT, MAX_K, MAX_MODEL_LEN, step_view
from ...targetkit.scale import flat_limit
from .layout import method_of

STAGES = ("_compute_local_logits_stats_kernel", "_compute_cumulative_log_p_kernel",
          "_compute_local_residual_mass_kernel", "_rejection_kernel", "_resample_kernel", "_insert_resampled_kernel")
"""The kernels ``rejection_sample`` chains (``kernels/launchers.launch_rejection_sample``)."""


def count_is_a_draft_count(case: Case, o: Observation) -> str | None:
    v = step_view(case, "extended", stats=False)
    k = o.out["num_sampled"].astype(np.int64)
    bad = np.flatnonzero((k < 0) | (k > v.d))
    return None if not bad.size else f"request {int(bad[0])}: count {int(k[bad[0]])} of {int(v.d[bad[0]])} drafts"


def accepted_are_the_drafts(case: Case, o: Observation) -> str | None:
    v = step_view(case, "extended", stats=False)
    if method_of(case) == "fly":
        return None  # FLy may keep a deferred rejection's draft inside the accepted prefix
    ds = case.arrays["draft_sampled"].astype(np.int64)
    k = o.out["num_sampled"].astype(np.int64)
    for r in range(len(v.idx)):
        for i in range(int(min(max(k[r], 0), v.d[r]))):
            if int(o.out["sampled"][r, i]) != ds[v.first[r] + i + 1]:
                return f"request {r}, slot {i}: {int(o.out['sampled'][r, i])} accepted, the draft is {ds[v.first[r] + i + 1]}"
    return None


def decided_by_own_rows(case: Case, o: Observation) -> str | None:
    """A request with a draft row whose offset ``j * stride`` lies past ``2**31`` has its own
    verification: §33.1 of that request alone (its rows, the NumPy oracle) gives its count and
    its tokens."""
    from ...targetkit.runner_v2_verify import keep_requests
    from .layout import run_oracle

    a = case.arrays
    W = a["target_logits"].shape[1]
    v = step_view(case, "extended", stats=False)
    for r in range(len(v.idx)):
        if not v.d[r] or int(v.first[r] + v.d[r] - 1) * W < flat_limit():
            continue
        want, _ = run_oracle(keep_requests(case, [r]))
        k = int(want["num_sampled"][0])
        got = int(o.out["num_sampled"][r])
        if got != k or not np.array_equal(o.out["sampled"][r, : k + 1], want["sampled"][0, : k + 1]):
            return (f"request {r} (rows {int(v.first[r])}-{int(v.first[r] + v.d[r])}, offsets past 2**31): count {got}, "
                    f"tokens {o.out['sampled'][r, : k + 1].tolist()}; its own rows give {k}, "
                    f"{want['sampled'][0, : k + 1].tolist()}: a row offset was not computed exactly (an int32 product wraps)")
    return None


INT32_FLAT_INDEX = (
    "production reaches it: a verification step of more than 2**31 / V logits rows (8193 at V = 262144; "
    "max_num_seqs x (1 + num_speculative_tokens) rows reach 16384) has target logits past 2**31 elements "
    "(docs/CONTRACT.md §33.2; vLLM: vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, RejectionSampler._verify)")
"""Why production reaches the ``int32_flat_index`` hazard (README's hazard table)."""

PROPERTIES: tuple[Property, ...] = (
    Property("count_is_a_draft_count", "num_sampled counts accepted drafts: 0 .. the request's drafts",
             count_is_a_draft_count),
    Property("accepted_are_the_drafts", "the tokens before the count are the request's drafts, in order",
             accepted_are_the_drafts),
    Property("nothing_past_the_buffers", "nothing is written outside the outputs", nothing_past_num_reqs),
    Property("decided_by_own_rows", "a request with a row past 2**31 is verified on its own rows", decided_by_own_rows,
             hazard_class="int32_flat_index", source="PR #46560, PR #47383", rests_on=INT32_FLAT_INDEX),
)
"""The properties, in the order the audit reports them."""



# -- statistics --------------------------------------------------------------------------------

ALPHA = 1e-4
"""The distribution test's false-alarm rate (family-wise over its tokens and modes)."""
TRIALS = 384
"""Requests per mode (one launch of the chain each): about 10 s under the interpreter."""
P = np.array([0.5, 0.25, 0.125, 0.125])
"""The target's distribution of the test (its logits ``log P``)."""
Q = np.array([0.125, 0.125, 0.25, 0.5])
"""The drafter's (drafts drawn from it, independently of the kernels' noise)."""


def _binom_two_sided(k: int, n: int, p: float) -> float:
    """The exact two-sided binomial p-value of ``k`` successes in ``n`` (twice the smaller tail)."""
    def pmf(i: int) -> float:
        return math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
                        + (n - i) * math.log1p(-p))
    lo = sum(pmf(i) for i in range(0, k + 1))
    hi = sum(pmf(i) for i in range(k, n + 1))
    return min(1.0, 2 * min(lo, hi))


def first_tokens(kernels: Mapping[str, Any], device: str, seed: int, *, draft_logits: bool, n: int = TRIALS) -> np.ndarray:
    """The first token ``rejection_sample`` (the chained kernels) gives each of ``n`` requests
    of one draft drawn from :data:`Q`, the target's logits ``log P``, seeds and positions of
    ``seed``'s generator."""
    import torch

    from ....kernels.launchers import launch_rejection_sample

    rng = np.random.default_rng([seed, 47386, int(draft_logits)])
    V = len(P)
    tl_ = np.tile(np.log(P).astype(np.float32), (2 * n, 1))
    ds = np.zeros(2 * n, np.int32)
    ds[1::2] = rng.choice(V, size=n, p=Q)
    dl = np.tile(np.log(Q).astype(np.float32), (n, 1, 1)) if draft_logits else None
    pos = np.repeat(rng.integers(0, MAX_MODEL_LEN - 2, size=n), 2) + np.tile([0, 1], n)

    def t(x: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)

    out = launch_rejection_sample(
        dict(kernels), target_logits=t(tl_), draft_logits=None if dl is None else t(dl), draft_sampled=t(ds),
        cu_num_logits=t(np.arange(0, 2 * n + 1, 2, dtype=np.int32)), pos=t(pos.astype(np.int64)),
        idx_mapping=t(np.arange(n, dtype=np.int64)), expanded_idx_mapping=t(np.repeat(np.arange(n, dtype=np.int64), 2)),
        expanded_local_pos=t(np.tile(np.array([0, 1], np.int32), n)), temperature=t(np.ones(n, np.float32)),
        seed=t(rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64, endpoint=True)), num_speculative_steps=1)
    return out["sampled"][:, 0].cpu().numpy()


def target_distribution_kept(kernels: Mapping[str, Any], device: str, seed: int) -> str | None:
    """Speculative sampling's guarantee, tested: over :data:`TRIALS` requests per mode (draft
    logits, one-hot drafts), each request's first token is distributed as the target's ``P``
    (exact two-sided binomial per token, Bonferroni over tokens and modes at :data:`ALPHA`)."""
    from .. import TARGETS

    for name, kernel in kernels.items():
        have, want = parameters_of(kernel), TARGETS[name].parameters
        if have is not None and want is not None and list(have) != list(want):
            raise NotApplicable(f"{name} has another interface than the contract's (not chained)")
    tests = 2 * len(P)
    for draft_logits in (True, False):
        tok = first_tokens(kernels, device, seed, draft_logits=draft_logits)
        if np.any((tok < 0) | (tok >= len(P))):
            return f"a first token out of the vocabulary: {int(tok[(tok < 0) | (tok >= len(P))][0])}"
        counts = np.bincount(tok, minlength=len(P))
        for v, (k, p) in enumerate(zip(counts, P, strict=True)):
            pv = _binom_two_sided(int(k), len(tok), float(p))
            if pv * tests < ALPHA:
                mode = "draft logits" if draft_logits else "one-hot drafts"
                return (f"{mode}: token {v} drawn {int(k)} times in {len(tok)} (the target's share {p}: "
                        f"{p * len(tok):.0f} expected; p = {pv:.2e}, below {ALPHA} over {tests} tests)")
    return None


def _noise_fingerprints(kernel: Any, device: str, seeds: np.ndarray, pos: np.ndarray, col: int | None) -> np.ndarray:
    """The noise the sampling kernel gives each (seed, pos) at offsets 0..3 (float32 ``[n, 4]``):
    four rows per key, each with one finite lane of logit 0 (so the block's value is its noise);
    ``col``: the drafter's call (its logits cache at that column: the salted stream where the
    kernel has one), else the target's. The arguments are bound by name, so that the older
    interfaces of vLLM's releases (a ``processed_logits`` cache, no ``IS_DRAFTING``) are called
    as their ``gumbel_sample`` called them; a kernel without any cache has no drafter's call."""
    import torch

    names = parameters_of(kernel) or []
    cache_names = {"logits_cache_ptr", "processed_logits_ptr"}
    if col is not None and not cache_names & set(names):
        raise NotApplicable("this _gumbel_sample_kernel has no drafter's call (no logits cache)")
    n, L = len(seeds), 4
    x = np.full((n * L, L), -np.inf, np.float32)
    x[np.arange(n * L), np.tile(np.arange(L), n)] = 0.0

    def t(a: np.ndarray) -> Any:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device)

    rows = t(np.repeat(np.arange(n, dtype=np.int64), L))
    la, lm = torch.zeros((n * L, 1), dtype=torch.int64, device=device), torch.zeros((n * L, 1), device=device)
    xs = t(x)
    cache = None if col is None else torch.zeros((n, MAX_K, L), device=device)
    col_t = None if col is None else torch.tensor(col, dtype=torch.int64, device=device)
    given = {
        "local_argmax_ptr": la, "local_argmax_stride": 1, "local_max_ptr": lm, "local_max_stride": 1,
        "logits_cache_ptr": cache, "logits_cache_stride_0": cache.stride(0) if cache is not None else 0,
        "logits_cache_stride_1": cache.stride(1) if cache is not None else 0,
        "logits_cache_stride": cache.stride(0) if cache is not None else 0, "logits_cache_col_ptr": col_t,
        "logits_cache_source_ptr": xs if cache is not None else None, "logits_cache_source_stride": L,
        "processed_logits_ptr": cache, "processed_logits_stride": cache.stride(0) if cache is not None else 0,
        "processed_logits_col_ptr": col_t, "logits_ptr": xs, "logits_stride": L, "expanded_idx_mapping_ptr": rows,
        "idx_mapping_ptr": rows, "seeds_ptr": t(seeds.astype(np.int64)), "pos_ptr": t(np.repeat(pos.astype(np.int64), L)),
        "temp_ptr": t(np.ones(n, np.float32)), "vocab_size": L, "BLOCK_SIZE": 1024, "IS_DRAFTING": col is not None,
        "APPLY_TEMPERATURE": col is not None, "USE_FP64": False, "PER_TOKEN_COL": False,
    }  # fmt: skip
    missing = [p for p in names if p not in given]
    if missing:
        raise NotApplicable(f"_gumbel_sample_kernel has parameters this check cannot give: {', '.join(missing)}")
    kernel[(n * L, 1)](**{p: given[p] for p in names})
    return lm.cpu().numpy().reshape(n, L)


def _contract_noise(seeds: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The contract's float32 noise at offsets 0..3 of keys (seed, pos): ``[n, 4]``."""
    from ....oracles import vectorized_v2_verify as o

    u = o.murmur3_uniform32(seeds.astype(np.int64)[:, None], pos.astype(np.int64)[:, None], np.arange(4)[None, :])
    return o.gumbel_noise32(u)[0].astype(np.float32)


def _matches(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Per key: the kernel's noise at the four offsets is ``want``'s (within the float32 noise
    bound of docs/CONTRACT.md, "Exactness")."""
    return np.all(np.abs(got.astype(np.float64) - want) <= 2.0**-18 * (1 + np.abs(want)), axis=1)


def noise_streams_disjoint(kernels: Mapping[str, Any], device: str, seed: int) -> str | None:
    """#47386's class, exactly over the production ranges: the drafter's stream (its call of
    ``_gumbel_sample_kernel`` with a logits cache, draft steps 0, 1 and 15) and the target's (the
    same kernel without; §34 draws with the same key) never share a counter for a seed and
    positions below ``max_model_len`` (``2**20``).

    The kernel's noise is read at keys of the production extremes and at random (seeds at the
    int64 limits, positions 0 and ``2**20 - 1``), four offsets each. The target's must be the
    contract's murmur3 noise of ``(seed, pos)`` for the rest (else the release draws another generator's
    noise: only the same-key check applies). The drafter's must differ from the target's at the
    same key (any generator), and its counter is identified among ``(seed or seed ^ col << 32, pos or pos + 2**30)``: salted,
    its positions lie in ``[2**30, 2**30 + 2**20)`` and the target's in ``[0, 2**20)`` (checked
    as intervals of the low position word), so no counter is shared; unsalted with the request's
    own seed, it is the target's counter at the same position (shared); no candidate: not shown."""
    from ....oracles import vectorized_v2_verify as o

    if not MAX_MODEL_LEN <= DRAFT_NOISE_SALT or DRAFT_NOISE_SALT + MAX_MODEL_LEN > 1 << 32:
        return f"the counter formula overlaps: positions [0, {MAX_MODEL_LEN}) and [{DRAFT_NOISE_SALT}, ...)"
    rng = np.random.default_rng([seed, 47386])
    seeds = np.array([-(2**63), -1, 0, 1, 2**63 - 1, *rng.integers(-(2**63), 2**63 - 1, size=3, endpoint=True)],
                     np.int64)  # fmt: skip
    positions = np.array([0, 1, 0xFFFF, 0x10000, MAX_MODEL_LEN - 1, *rng.integers(0, MAX_MODEL_LEN, size=3)], np.int64)
    s, p = (a.ravel() for a in np.meshgrid(seeds, positions, indexing="ij"))
    kernel = kernels["_gumbel_sample_kernel"]
    target = _noise_fingerprints(kernel, device, s, p, None)
    drafts = {col: _noise_fingerprints(kernel, device, s, p, col) for col in (0, 1, MAX_K - 1)}
    for col, draft in drafts.items():  # whatever the generator: the same noise at the same key is shared
        same = np.flatnonzero(np.all(draft == target, axis=1))
        if same.size:
            i = int(same[0])
            return (f"draft step {col}: the drafter's noise at (seed {int(s[i])}, position {int(p[i])}) is the "
                    "target's at the same key (the streams share a counter)")
    if not _matches(target, _contract_noise(s, p)).all():
        raise NotApplicable("the target's noise is not the contract's murmur3 noise (another generator): no "
                            "shared key at the same position, other counters cannot be read")
    for col, draft in drafts.items():
        mixed = o.spec_step_seed(s, np.int64(col)).astype(np.int64)
        known = np.zeros(len(s), bool)
        for sd, salted in ((mixed, True), (s, True), (mixed, False), (s, False)):
            hit = ~known & _matches(draft, _contract_noise(sd, p + DRAFT_NOISE_SALT if salted else p))
            if hit.any() and not salted and np.any(sd[hit] == s[hit]):
                i = int(np.flatnonzero(hit & (sd == s))[0])
                return (f"draft step {col}: the drafter's counter at (seed {int(s[i])}, position {int(p[i])}) is the "
                        "target's (unsalted: the streams share a counter)")
            known |= hit
        if not known.all():
            i = int(np.flatnonzero(~known)[0])
            return (f"draft step {col}: the drafter's noise at (seed {int(s[i])}, position {int(p[i])}) is no known "
                    "counter of the contract's form: disjointness is not shown")
    return None


STATISTICS: tuple[Statistic, ...] = (
    Statistic("target_distribution_kept", f"verification leaves the target distribution unchanged: each request's "
              f"first token is distributed as the target's (false alarms at most {ALPHA})",
              target_distribution_kept, STAGES, "verification biased", "vLLM #47386"),
    Statistic("noise_streams_disjoint", "the drafter's and the target's noise never share a counter for a seed and "
              "positions below max_model_len", noise_streams_disjoint, ("_gumbel_sample_kernel",),
              "shared noise stream", "vLLM #47386"),
)

AUDIT = Audit(PROPERTIES, statistics=STATISTICS)
"""This folder's audit role (:class:`~...targetkit.properties.Audit`)."""
