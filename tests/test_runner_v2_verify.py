"""Model Runner V2's verification (docs/CONTRACT.md §28-§35): its oracles and vLLM 0.33.0's kernels.

* The counter-based noise against published known answers: MurmurHash3_x86_32 values (from the
  ``mmh3`` package) and Random123's Philox4x32-10 test vectors; the uniforms and the Gumbel
  noise worked out by hand; and vLLM's own ``@triton.jit`` helpers (``murmur3_hash32``,
  ``murmur3_uniform32/64``, ``tl_rand32``, ``spec_step_seed``) give the oracles' bits.
* Hand-worked examples of every kernel, checked against both oracles and vLLM 0.33.0's kernels
  (release wheel, Triton interpreter, launched as vLLM's wrappers launch them).
* Random batches: each kernel of the chain against both oracles (integer outputs exactly, floats
  within the contract's bounds, no window met for these seeds), the two oracles against each
  other, and the chained kernels against the plain reference of speculative sampling.
* Windows: a decision outside its window is never left to the run; a choice outside the
  window's options is refused.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from eaglefuzz.oracles import loops_v2_verify, speculative_reference, vectorized_v2_verify
from eaglefuzz.oracles.settlement import Settlement

ORACLES = [vectorized_v2_verify, loops_v2_verify]
IDS = ["numpy", "numba"]
GUMBEL = "vllm/v1/worker/gpu/sample/gumbel.py"
UTILS = "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py"
SI, SF = -4242, -4242.5  # sentinels (those of kernels/launchers.py)
METHODS = {
    "standard": {},
    "block": {"use_block_verification": True},
    "fp64": {"use_fp64": True},
    "synthetic": {"synthetic_conditional_rates": np.array([0.9, 0.4, 0.7], np.float32)},
    "fly": {"fly_window_size": 1},
}


# -- the noise ------------------------------------------------------------------------------

# MurmurHash3_x86_32 (mmh3.hash(bytes, domain, signed=False)) of the 16 bytes
# <lo32(seed), hi32(seed), lo32(pos), offset>: computed with the mmh3 package, not with eaglefuzz.
MURMUR3_KNOWN = [
    ((0, 0, 0, 0), 0x8134CDF8),
    ((1, 2, 3, 0), 0x23B53F91),
    ((-1, 10, 5, 0), 0xB0BF8996),
    ((2**40 + 5, 1 << 30, 262143, 0), 0x7C5420A9),
    ((-7, 2**33 + 12, 1023, 0x9E3779B9), 0x30B400B4),
    ((123456789, 5000, 0, 0x9E3779B9), 0x76263309),
]

# Random123's known-answer tests of Philox4x32-10: (counter, key) -> the four output words.
PHILOX_KNOWN = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]  # fmt: skip


@pytest.mark.parametrize("oracles", ORACLES, ids=IDS)
def test_murmur3_is_murmurhash3_x86_32(oracles):
    for (seed, pos, off, domain), want in MURMUR3_KNOWN:
        got = oracles.murmur3_hash32(np.int64(seed), np.int64(pos), np.int64(off), domain)
        assert int(got) == want, (seed, pos, off, domain)


@pytest.mark.parametrize("oracles", ORACLES, ids=IDS)
def test_philox_known_answers_and_tl_rand(oracles):
    for counter, key, want in PHILOX_KNOWN:
        assert tuple(int(w) for w in oracles.philox4x32_10(counter, key)) == want
    # tl.rand(0, 0): the first word 0x6627E8D5 is a positive int32, converted to float32 and
    # scaled by float32(4.6566127342e-10)
    want = np.float32(np.float32(0x6627E8D5) * np.float32(4.6566127342e-10))
    assert oracles.philox_rand32(np.int64(0), np.int64(0)).tobytes() == np.float32(want).tobytes()


@pytest.mark.parametrize("oracles", ORACLES, ids=IDS)
def test_uniforms_by_hand(oracles):
    # h32(1, 2, 3) = 0x23B53F91: hi16 = 0x23B5, lo16 = 0x3F91
    exact = Fraction(0x23B5, 2**16) + Fraction(2 * 0x3F91 + 1, 2**33)
    u = oracles.murmur3_uniform32(np.int64(1), np.int64(2), np.int64(3))
    assert float(u) == float(np.float32(float(exact)))  # float(exact) is exact: 49 bits
    # the float64 uniform: ((h32(.., 0x9E3779B9) << 32) | h32(.., 0)) >> 11, + 0.5, * 2**-53
    lo = int(oracles.murmur3_hash32(np.int64(-7), np.int64(2**33 + 12), np.int64(1023), 0))
    r53 = ((0x30B400B4 << 32) | lo) >> 11
    want = float(np.float64(r53) + 0.5) * 2.0**-53
    assert float(oracles.murmur3_uniform64(np.int64(-7), np.int64(2**33 + 12), np.int64(1023))) == want


def test_gumbel_noise_by_hand():
    # u = 0.5: L = log(1 - 0.5), n = -log(log 2); u = 0.1: L = the series -sum 0.1**k / k (k <= 8)
    series = -sum(Fraction(1, 10) ** k / k for k in range(1, 9))
    for u, want in ((0.5, -np.log(np.log(2.0))), (0.1, -np.log(-float(series)))):
        n, bound = vectorized_v2_verify.gumbel_noise32(np.float32(u))
        assert abs(float(n) - want) < 1e-7 and float(bound) == 2.0**-19 + 2.0**-20 * abs(float(n))
    n64, _ = vectorized_v2_verify.gumbel_noise64(0.25)
    assert float(n64) == pytest.approx(-np.log(np.log(4.0)), abs=1e-15)


# -- vLLM 0.33.0's modules ------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_verify(needs, backend) -> dict[str, Any]:
    """vLLM 0.33.0's ``sample/gumbel.py`` and ``rejection_sampler_utils.py`` from its wheel."""
    if backend.device != "cpu":
        pytest.skip("the tests' tensors are CPU tensors: run under the Triton interpreter")
    from eaglefuzz.harness.sources import vllm as vsrc
    from eaglefuzz.harness.sources.vllm_shims import load_module

    root = needs.release_files(vsrc.PINNED_RELEASE)
    return {m: load_module(root, f"v2verify_{k}", m)[0] for k, m in enumerate((GUMBEL, UTILS))}


def _noise_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(seed_ptr, pos_ptr, off_ptr, h_ptr, u32_ptr, u64_ptr, r_ptr, ss_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        seed = tl.load(seed_ptr)
        pos = tl.load(pos_ptr)
        off = tl.load(off_ptr + i)
        tl.store(h_ptr + i, _G.murmur3_hash32(seed, pos, off).to(tl.int64))
        tl.store(u32_ptr + i, _G.murmur3_uniform32(seed, pos, off))
        tl.store(u64_ptr + i, _G.murmur3_uniform64(seed, pos, off))
        tl.store(r_ptr + i, _G.tl_rand32(seed, pos + off, includes_zero=False))
        tl.store(ss_ptr + i, _G.spec_step_seed(seed, off))

    return kernel


_G: Any = None


@pytest.mark.kernel
def test_vllm_noise_helpers_give_the_oracles_bits(vllm_verify):
    """vLLM's own jit helpers, called from a test kernel under the interpreter, on keys with
    negative and large seeds and positions past 2**32."""
    import torch

    global _G
    _G = vllm_verify[GUMBEL]
    kernel = _noise_kernel()
    rng = np.random.default_rng(3)
    for seed, pos in ((-1, 7), (2**62 + 3, 2**33 + 5), (12345, 1 << 30), (-(2**63), 0)):
        off = rng.integers(0, 2**18, 16).astype(np.int64)
        out = [torch.zeros(16, dtype=d) for d in (torch.int64, torch.float32, torch.float64, torch.float32, torch.int64)]
        kernel[(1,)](torch.tensor([seed]), torch.tensor([pos]), torch.from_numpy(off), *out, N=16)
        h, u32, u64, r, ss = (t.numpy() for t in out)
        for o in ORACLES:
            assert np.array_equal(h & 0xFFFFFFFF, o.murmur3_hash32(np.int64(seed), np.int64(pos), off).astype(np.int64))
            assert u32.tobytes() == o.murmur3_uniform32(np.int64(seed), np.int64(pos), off).tobytes()
            assert u64.tobytes() == o.murmur3_uniform64(np.int64(seed), np.int64(pos), off).tobytes()
        assert r.tobytes() == vectorized_v2_verify.tl_rand32(np.int64(seed), np.int64(pos) + off).tobytes()
        assert np.array_equal(ss, vectorized_v2_verify.spec_step_seed(np.int64(seed), off))


# -- running a kernel and both oracles --------------------------------------------------------


def _t(v: Any) -> Any:
    import torch

    return torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v


def _check(name: str, got: np.ndarray, want: np.ndarray, bound: np.ndarray | None) -> None:
    """Integers equal; floats equal where the oracle wrote nothing (the sentinel) or within the
    bound (``bound`` None: exact)."""
    assert got.dtype == want.dtype and got.shape == want.shape, name
    if got.dtype.kind in "iu" or bound is None:
        assert np.array_equal(got, want, equal_nan=True), f"{name}:\n{got}\n{want}"
        return
    with np.errstate(invalid="ignore"):
        d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    ok = (got == want) | (d <= bound) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), f"{name}: {got[~ok]} vs {want[~ok]} (bound {bound[~ok]})"


def _run_all(oracle: str, launcher: str, module: str | None, vllm: dict | None, args: dict, outputs: list[str],
             extra: dict | None = None) -> dict[str, Settlement]:  # fmt: skip
    """Run ``oracle`` of both oracle modules (and the kernel, when ``vllm`` is given) on copies
    of ``args``; every output must agree with the NumPy oracle's (floats within its bounds), no
    window met; return the settlements."""
    results = {}
    for mod, name in zip(ORACLES, IDS, strict=True):
        a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        st = getattr(mod, oracle)(**a)
        assert not st.windows, f"{name}: window met: {st.windows}"
        results[name] = (a, st)
    ref, st = results["numpy"]
    for k in outputs:
        _check(f"numba {k}", results["numba"][0][k], ref[k], st.bounds.get(k, np.zeros(1)) + 1e-9 * np.abs(ref[k]) if k in st.bounds else None)
    if vllm is not None:
        from eaglefuzz.kernels import launchers as lv

        kname = {"temperature": "_temperature_kernel", "gumbel_sample": "_gumbel_sample_kernel"}.get(oracle, f"_{oracle}_kernel")
        kernel = getattr(vllm[module], kname)
        t = {k: _t(v) for k, v in args.items() if k != "choices"}
        getattr(lv, launcher)(kernel, **t, **(extra or {}))
        for k in outputs:
            _check(f"vLLM {k}", t[k].numpy(), ref[k], st.bounds.get(k))
    return {k: v[1] for k, v in results.items()}


# -- hand-worked examples ---------------------------------------------------------------------


def _i64(*v):
    return np.array(v, dtype=np.int64)


def _f32(*v):
    return np.array(v, dtype=np.float32)


@pytest.mark.kernel
def test_temperature_by_hand(vllm_verify):
    logits = np.array([[1, -3, 0.5, 7], [1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    args = dict(logits=logits, expanded_idx_mapping=_i64(2, 0, 1), temperature=_f32(1.0, 0.0, 2.0))
    _run_all("temperature", "launch_temperature", GUMBEL, vllm_verify, args, ["logits"])
    a = dict(args, logits=logits.copy())
    vectorized_v2_verify.temperature(**a)
    assert a["logits"].tolist() == [[0.5, -1.5, 0.25, 3.5], [1, 2, 3, 4], [5, 6, 7, 8]]


@pytest.mark.kernel
def test_gumbel_sample_by_hand(vllm_verify):
    """Row 0 greedy (ties: the first), row 1 random with one finite logit (noise cannot move
    it), row 2 padded (-1: greedy, no cache write); the drafter's cache gets rows 0 and 1."""
    V = 1500  # two blocks of 1024
    logits = np.full((3, V), -np.inf, np.float32)
    logits[0, [3, 7, 1100]] = [5.0, 9.0, 9.0]
    logits[1, 1200] = 0.25
    logits[2, :] = 1.0
    cache = np.full((4, 2, V), -7.0, np.float32)
    args = dict(local_argmax=np.full((3, 2), SI, np.int64), local_max=np.full((3, 2), SF, np.float32), logits=logits,
                expanded_idx_mapping=_i64(1, 3, -1), seeds=_i64(11, 22, 33, 44), pos=_i64(5, 6, 7),
                temperature=_f32(0.5, 0.0, 1.0, 0.7), apply_temperature=True, is_drafting=True,
                logits_cache=cache, logits_cache_col=np.array(1, np.int64))  # fmt: skip
    st = _run_all("gumbel_sample", "launch_gumbel_sample", GUMBEL, vllm_verify, args,
                  ["local_argmax", "local_max", "logits_cache"])["numpy"]  # fmt: skip
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    vectorized_v2_verify.gumbel_sample(**a)
    assert a["local_argmax"][0].tolist() == [7, 1100]  # greedy: the 9.0 of each block
    assert a["local_max"][0].tolist() == [9.0, 9.0] and st.bounds["local_max"][0].tolist() == [0.0, 0.0]
    assert a["local_argmax"][1, 1] == 1200 and a["local_max"][1, 0] == -np.inf
    assert a["local_argmax"][2].tolist() == [0, 1024]  # padded row: greedy over ones, the first lanes
    assert np.array_equal(a["logits_cache"][1, 1], logits[0]) and np.array_equal(a["logits_cache"][3, 1], logits[1])
    assert (a["logits_cache"][:, 0] == -7).all() and (a["logits_cache"][[0, 2]] == -7).all()


def _stats_args(has_draft: bool) -> dict:
    """Request 0 (state 2, greedy): rows 0-1; request 1 (state 0, temperature 0.5): rows 2-4."""
    tl_ = np.full((5, 10), -np.inf, np.float32)
    tl_[0, [2, 5]] = 4.0
    tl_[2, [0, 1]] = [0.0, np.log(3.0)]
    tl_[3, 9] = 1.0
    tl_[[1, 4], :] = 0.0
    dl = np.zeros((3, 2, 10), np.float32)
    dl[0, 0, :2] = [1.0, 2.0]
    return dict(target_local_argmax=np.full((5, 1), SI, np.int64), target_local_max=np.full((5, 1), SF, np.float32),
                target_local_sumexp=np.full((5, 1), SF, np.float32), draft_local_max=np.full((5, 1), SF, np.float32),
                draft_local_sumexp=np.full((5, 1), SF, np.float32), target_logits=tl_,
                draft_logits=dl if has_draft else None, expanded_idx_mapping=_i64(2, 2, 0, 0, 0),
                expanded_local_pos=np.array([0, 1, 0, 1, 2], np.int32), temperature=_f32(0.5, 1.0, 0.0))  # fmt: skip


@pytest.mark.kernel
@pytest.mark.parametrize("has_draft", [True, False], ids=["draft-logits", "one-hot"])
def test_local_logits_stats_by_hand(vllm_verify, has_draft):
    args = _stats_args(has_draft)
    outs = ["target_local_argmax", "target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp"]
    _run_all("compute_local_logits_stats", "launch_compute_local_logits_stats", UTILS, vllm_verify, args, outs)
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    st = vectorized_v2_verify.compute_local_logits_stats(**a)
    assert a["target_local_argmax"][:, 0].tolist() == [2, SI, SI, SI, SI]  # greedy row 0; bonus rows 1, 4
    assert a["target_local_max"][:, 0].tolist() == [4.0, SF, np.float32(np.log(3.0)), 1.0, SF]
    assert a["target_local_sumexp"][2, 0] == pytest.approx(4 / 3, rel=1e-6) and a["target_local_sumexp"][3, 0] == 1
    assert st.bounds["target_local_sumexp"][2, 0] > 0
    if has_draft:  # row 2: draft step 0 of state 0 over temperature 0.5: [2, 4, 0, ...]
        assert a["draft_local_max"][2, 0] == 4.0
        assert a["draft_local_sumexp"][2, 0] == pytest.approx(np.exp(-2) + 1 + 8 * np.exp(-4), rel=1e-6)
    else:
        assert (a["draft_local_max"] == SF).all()


@pytest.mark.kernel
def test_cumulative_log_p_and_residual_by_hand(vllm_verify):
    """Target rows uniform over two tokens (log p = -log 2), one-hot drafts: log p_i falls by
    log 2 per real draft, a -1 draft carries it; then with draft logits equal to the target's
    (log q = log p) it stays 0 and the residual mass is 0."""
    tl_ = np.full((4, 4), -np.inf, np.float32)
    tl_[:, :2] = 0.0
    stats = dict(target_local_max=np.zeros((4, 1), np.float32), target_local_sumexp=np.full((4, 1), 2.0, np.float32))
    base = dict(target_logits=tl_, draft_sampled=np.array([9, 1, -1, 0], np.int32), cu_num_logits=np.array([0, 4], np.int32),
                idx_mapping=_i64(0), temperature=_f32(1.0), vocab_num_blocks=1, **stats)  # fmt: skip
    args = dict(base, cumulative_log_p=np.full(4, SF, np.float32), draft_logits=None, draft_local_max=np.zeros((4, 1), np.float32),
                draft_local_sumexp=np.zeros((4, 1), np.float32))  # fmt: skip
    _run_all("compute_cumulative_log_p", "launch_compute_cumulative_log_p", UTILS, vllm_verify, args, ["cumulative_log_p"])
    a = dict(args, cumulative_log_p=args["cumulative_log_p"].copy())
    vectorized_v2_verify.compute_cumulative_log_p(**a)
    l2 = np.log(2.0)
    assert a["cumulative_log_p"][:3] == pytest.approx([-l2, -l2, -2 * l2], abs=1e-6) and a["cumulative_log_p"][3] == SF
    dl = np.zeros((1, 3, 4), np.float32)
    dl[0, :, 2:] = -np.inf
    args = dict(base, cumulative_log_p=np.zeros(4, np.float32), draft_logits=dl, draft_local_max=np.zeros((4, 1), np.float32),
                draft_local_sumexp=np.full((4, 1), 2.0, np.float32))  # fmt: skip
    args.update(local_residual_mass=np.full((4, 1), SF, np.float32), expanded_idx_mapping=_i64(0, 0, 0, 0),
                expanded_local_pos=np.array([0, 1, 2, 3], np.int32))  # fmt: skip
    args.pop("cu_num_logits"), args.pop("idx_mapping")
    _run_all("compute_local_residual_mass", "launch_compute_local_residual_mass", UTILS, vllm_verify, args,
             ["local_residual_mass"])  # fmt: skip
    a = dict(args, local_residual_mass=args["local_residual_mass"].copy())
    vectorized_v2_verify.compute_local_residual_mass(**a)
    # row 1 (step 1, next draft -1): skipped; row 2: next draft 0, p = 1, M_b = M_s: 0; rows 0, 3: skipped
    assert a["local_residual_mass"][:, 0].tolist() == [SF, SF, 0.0, SF]


def _rejection_args(**over) -> dict:
    """Two requests. r0 (state 1, greedy): drafts 3, 5 against target argmaxes 3, 4. r1 (state 0,
    random, one-hot drafts): draft 2 has probability 1 (accepted for every u), draft 1 has
    target logit -inf (rejected)."""
    tl_ = np.full((6, 8), -np.inf, np.float32)
    tl_[0, 3] = tl_[1, 4] = tl_[2, 0] = 1.0
    tl_[3, 2] = 0.0
    tl_[4, [0, 6]] = [0.0, 1.0]
    tl_[5, 5] = 2.0
    ds = np.array([0, 3, 5, 7, 2, 1], np.int32)  # row j's draft is ds[j + 1]
    tmax = np.max(tl_, axis=1, keepdims=True).astype(np.float32)
    tsum = np.sum(np.exp(tl_ - tmax), axis=1, keepdims=True).astype(np.float32)
    args = dict(sampled=np.full((2, 4), SI, np.int64), num_sampled=np.full(2, SI, np.int32),
                target_rejected_logsumexp=np.full(2, SF, np.float32), draft_rejected_logsumexp=np.full(2, SF, np.float32),
                target_logits=tl_, target_local_argmax=np.argmax(tl_, axis=1)[:, None].astype(np.int64),
                target_local_max=tmax, target_local_sumexp=tsum, draft_sampled=ds, draft_logits=None,
                draft_local_max=np.zeros((6, 1), np.float32), draft_local_sumexp=np.zeros((6, 1), np.float32),
                cu_num_logits=np.array([0, 3, 6], np.int32), idx_mapping=_i64(1, 0), temperature=_f32(1.0, 0.0),
                seed=_i64(-5, 77), pos=_i64(10, 11, 12, 40, 41, 42), vocab_num_blocks=1)  # fmt: skip
    args.update(over)
    return args


@pytest.mark.kernel
def test_rejection_by_hand(vllm_verify):
    args = _rejection_args()
    outs = ["sampled", "num_sampled", "target_rejected_logsumexp", "draft_rejected_logsumexp"]
    _run_all("rejection", "launch_rejection", UTILS, vllm_verify, args, outs)
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    vectorized_v2_verify.rejection(**a)
    # r0: 3 == argmax 3 accepted, 5 != argmax 4 rejected -> [3, 4]; r1: 2 accepted, 1 rejected
    assert a["sampled"].tolist() == [[3, 4, SI, SI], [2, 1, SI, SI]] and a["num_sampled"].tolist() == [1, 1]
    assert a["target_rejected_logsumexp"][0] == 0.0  # greedy: never set
    assert a["target_rejected_logsumexp"][1] == pytest.approx(np.log(1 + np.e), abs=1e-6)  # row 4's lse


@pytest.mark.kernel
def test_resample_and_insert_by_hand(vllm_verify):
    """After test_rejection_by_hand's verification: r0 (greedy, not at its bonus) draws
    nothing; r1's rejected draft 1 at row 4 leaves tokens 0 and 6, and a target logit of 1 vs 0
    with the noise of its key decides: with one-hot drafts the residual is the target less the
    draft, so the draw is the Gumbel-max of {0: 0.0, 6: 1.0}. The insert then writes it."""
    a = _rejection_args()
    vectorized_v2_verify.rejection(**a)
    args = dict(resampled_local_argmax=np.full((2, 1), SI, np.int64), resampled_local_max=np.full((2, 1), SF, np.float32),
                target_logits=a["target_logits"], target_rejected_logsumexp=a["target_rejected_logsumexp"],
                draft_logits=None, draft_rejected_logsumexp=a["draft_rejected_logsumexp"],
                rejected_step=a["num_sampled"], cu_num_logits=a["cu_num_logits"],
                expanded_idx_mapping=_i64(1, 1, 1, 0, 0, 0), draft_sampled=a["draft_sampled"],
                temperature=a["temperature"], seed=a["seed"], pos=a["pos"])  # fmt: skip
    _run_all("resample", "launch_resample", UTILS, vllm_verify, args, ["resampled_local_argmax", "resampled_local_max"])
    r = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    vectorized_v2_verify.resample(**r)
    n, _ = vectorized_v2_verify.gumbel_noise32(vectorized_v2_verify.murmur3_uniform32(np.int64(-5), np.int64(41), _i64(0, 6)))
    assert r["resampled_local_argmax"][:, 0].tolist() == [SI, [0, 6][int(np.argmax([0.0 + n[0], 1.0 + n[1]]))]]
    ins = dict(sampled=a["sampled"].copy(), num_sampled=a["num_sampled"].copy(),
               resampled_local_argmax=r["resampled_local_argmax"], resampled_local_max=r["resampled_local_max"],
               cu_num_logits=a["cu_num_logits"], expanded_idx_mapping=args["expanded_idx_mapping"],
               temperature=a["temperature"], resample_num_blocks=1)  # fmt: skip
    _run_all("insert_resampled", "launch_insert_resampled", UTILS, vllm_verify, ins, ["sampled", "num_sampled"])
    out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ins.items()}
    vectorized_v2_verify.insert_resampled(**out)
    assert out["num_sampled"].tolist() == [2, 2]
    assert out["sampled"].tolist() == [[3, 4, SI, SI], [2, int(r["resampled_local_argmax"][1, 0]), SI, SI]]


@pytest.mark.parametrize("oracles", ORACLES, ids=IDS)
def test_insert_takes_the_first_greatest_block_nan_as_minus_inf(oracles):
    ins = dict(sampled=np.full((1, 3), SI, np.int64), num_sampled=np.array([0], np.int32),
               resampled_local_argmax=_i64(10, 20, 30, 40)[None], resampled_local_max=_f32(np.nan, 5, 5, 1)[None],
               cu_num_logits=np.array([0, 1], np.int32), expanded_idx_mapping=_i64(0), temperature=_f32(1.0),
               resample_num_blocks=4)  # fmt: skip
    oracles.insert_resampled(**ins)
    assert ins["sampled"].tolist() == [[20, SI, SI]] and ins["num_sampled"].tolist() == [1]


# -- random batches -----------------------------------------------------------------------------


def _batch(rng: np.random.Generator, V: int, has_draft: bool, same: bool = False, R: int = 4, K: int = 3) -> dict:
    """A verification step as RejectionSampler hands it over: requests with 0..K drafts (some
    -1 placeholders), greedy and random rows, drafts often the target's argmax."""
    nd = rng.integers(0, K + 1, size=R)
    nl = nd + 1
    cu = np.concatenate([[0], np.cumsum(nl)]).astype(np.int32)
    n, MR = int(cu[-1]), R + 2
    idx = rng.permutation(MR)[:R].astype(np.int64)
    eidx = np.repeat(idx, nl)
    elp = np.concatenate([np.arange(k) for k in nl]).astype(np.int32)
    temp = rng.choice([0.5, 1.0, 1.3], size=MR).astype(np.float32)
    temp[idx[rng.random(R) < 0.3]] = 0
    tl_ = (rng.standard_normal((n, V)) * 3).astype(np.float32)
    tl_[rng.random((n, V)) < 0.05] = -np.inf
    tl_[:, 0] = np.maximum(tl_[:, 0], 0)  # a finite logit in every row
    dl = (rng.standard_normal((MR, K, V)) * 3).astype(np.float32) if has_draft else None
    ds = rng.integers(0, V, size=n).astype(np.int32)
    for j in range(n - 1):
        if rng.random() < 0.5:
            ds[j + 1] = int(np.argmax(tl_[j]))
        if same and has_draft and elp[j + 1] > 0:
            dl[eidx[j], elp[j]] = tl_[j] * (temp[eidx[j]] or 1)
    ds[(rng.random(n) < 0.1) & (elp > 0)] = -1
    return dict(target_logits=tl_, draft_logits=dl, draft_sampled=ds, cu_num_logits=cu,
                pos=(rng.integers(0, 5000, size=R).repeat(nl) + elp).astype(np.int64), idx_mapping=idx,
                expanded_idx_mapping=eidx, expanded_local_pos=elp, temperature=temp,
                seed=rng.integers(-(2**63), 2**63 - 1, size=MR, dtype=np.int64), num_speculative_steps=K)  # fmt: skip


def _fly_entropy(rng, n):
    return rng.choice([0.1, 0.3, 1.0], size=n).astype(np.float32)


@pytest.mark.kernel
@pytest.mark.parametrize("has_draft", [True, False], ids=["draft-logits", "one-hot"])
@pytest.mark.parametrize("method", sorted(METHODS))
def test_each_kernel_of_the_chain_agrees_with_both_oracles(vllm_verify, method, has_draft):
    """vLLM 0.33.0's six kernels chained as rejection_sample chains them; each stage's outputs
    against both oracles run on the stage's inputs (the kernels' own intermediates)."""
    from eaglefuzz.kernels import launchers as lv

    rng = np.random.default_rng(sum(map(ord, method)) + has_draft)
    kernels = {n: getattr(vllm_verify[UTILS], n) for n in dir(vllm_verify[UTILS]) if n.endswith("_kernel")}
    opts = METHODS[method]
    for V in (37, 1500):
        c = _batch(rng, V, has_draft)
        fe = _fly_entropy(rng, len(c["draft_sampled"])) if method == "fly" else None
        b = lv.launch_rejection_sample(kernels, **{k: _t(v) for k, v in c.items()}, **{k: _t(v) for k, v in opts.items()},
                                       fly_entropy=_t(fe))  # fmt: skip
        A = {k: v.numpy() for k, v in b.items()}
        nb = A["target_local_max"].shape[1]
        fresh = {k: np.full_like(A[k], SI if A[k].dtype.kind == "i" else SF)
                 for k in ("target_local_argmax", "target_local_max", "target_local_sumexp", "draft_local_max",
                           "draft_local_sumexp")}  # fmt: skip
        common = dict(target_logits=c["target_logits"], draft_logits=c["draft_logits"], temperature=c["temperature"])
        for mod in ORACLES:
            got = {k: v.copy() for k, v in fresh.items()}
            st = mod.compute_local_logits_stats(**got, **common, expanded_idx_mapping=c["expanded_idx_mapping"],
                                                expanded_local_pos=c["expanded_local_pos"], vocab_size=V)  # fmt: skip
            for k in got:
                _check(f"{mod.__name__} {k}", A[k], got[k], st.bounds.get(k))
        stats = {k: A[k] for k in ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")}
        clp = rm = None
        if method == "block":
            for mod in ORACLES:
                got = np.full_like(A["cumulative_log_p"], SF)
                st = mod.compute_cumulative_log_p(cumulative_log_p=got, draft_sampled=c["draft_sampled"],
                                                  cu_num_logits=c["cu_num_logits"], idx_mapping=c["idx_mapping"],
                                                  vocab_num_blocks=nb, **common, **stats)  # fmt: skip
                _check("cumulative_log_p", A["cumulative_log_p"], got, st.bounds["cumulative_log_p"])
            clp = A["cumulative_log_p"]
            if has_draft:
                for mod in ORACLES:
                    got = np.full_like(A["local_residual_mass"], SF)
                    st = mod.compute_local_residual_mass(
                        local_residual_mass=got, cumulative_log_p=clp, draft_sampled=c["draft_sampled"],
                        expanded_idx_mapping=c["expanded_idx_mapping"], expanded_local_pos=c["expanded_local_pos"],
                        vocab_num_blocks=nb, vocab_size=V, **common, **stats)  # fmt: skip
                    _check("local_residual_mass", A["local_residual_mass"], got, st.bounds["local_residual_mass"])
                rm = A["local_residual_mass"]
        B = len(c["idx_mapping"])
        for mod in ORACLES:
            out = dict(sampled=np.full((B, 4), SI, np.int64), num_sampled=np.full(B, SI, np.int32),
                       target_rejected_logsumexp=np.full(B, SF, np.float32),
                       draft_rejected_logsumexp=np.full(B, SF, np.float32))  # fmt: skip
            st = mod.rejection(**out, target_local_argmax=A["target_local_argmax"], draft_sampled=c["draft_sampled"],
                               cu_num_logits=c["cu_num_logits"], idx_mapping=c["idx_mapping"], seed=c["seed"],
                               pos=c["pos"], vocab_num_blocks=nb, cumulative_log_p=clp, local_residual_mass=rm,
                               fly_entropy=fe, use_block_verification=method == "block",
                               synthetic_conditional_rates=opts.get("synthetic_conditional_rates"),
                               fly_window_size=opts.get("fly_window_size", 0), **common, **stats)  # fmt: skip
            assert not st.windows
            _check("num_sampled", A["num_sampled_before_insert"], out["num_sampled"], None)
            for k in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
                _check(k, A[k], out[k], st.bounds[k])
            inserted = A["sampled"].copy()  # but the slot §35 writes, checked below
            d = np.diff(c["cu_num_logits"]) - 1
            k = out["num_sampled"]
            for r in np.flatnonzero((c["temperature"][c["idx_mapping"]] != 0) | (k == d)):
                inserted[r, k[r]] = out["sampled"][r, k[r]]
            _check("sampled before the insert", inserted, out["sampled"], None)
        for mod in ORACLES:
            out = dict(resampled_local_argmax=np.full_like(A["resampled_local_argmax"], SI),
                       resampled_local_max=np.full_like(A["resampled_local_max"], SF))  # fmt: skip
            st = mod.resample(**out, target_rejected_logsumexp=A["target_rejected_logsumexp"],
                              draft_rejected_logsumexp=A["draft_rejected_logsumexp"],
                              rejected_step=A["num_sampled_before_insert"], cu_num_logits=c["cu_num_logits"],
                              expanded_idx_mapping=c["expanded_idx_mapping"], draft_sampled=c["draft_sampled"],
                              seed=c["seed"], pos=c["pos"], cumulative_log_p=clp, use_fp64=method == "fp64",
                              use_block_verification=method == "block", vocab_size=V, target_logits=c["target_logits"],
                              draft_logits=c["draft_logits"], temperature=c["temperature"])  # fmt: skip
            assert not st.windows
            _check("resampled_local_argmax", A["resampled_local_argmax"], out["resampled_local_argmax"], None)
            _check("resampled_local_max", A["resampled_local_max"], out["resampled_local_max"], st.bounds["resampled_local_max"])
            ins = dict(sampled=A["sampled"].copy(), num_sampled=A["num_sampled_before_insert"].copy())
            mid = {k: v.copy() for k, v in ins.items()}
            mod.insert_resampled(sampled=mid["sampled"], num_sampled=mid["num_sampled"],
                                 resampled_local_argmax=A["resampled_local_argmax"],
                                 resampled_local_max=A["resampled_local_max"], cu_num_logits=c["cu_num_logits"],
                                 expanded_idx_mapping=c["expanded_idx_mapping"], temperature=c["temperature"],
                                 resample_num_blocks=A["resampled_local_argmax"].shape[1])  # fmt: skip
            _check("num_sampled", A["num_sampled"], mid["num_sampled"], None)
            _check("sampled", A["sampled"], mid["sampled"], None)


@pytest.mark.kernel
@pytest.mark.parametrize("method", sorted(METHODS))
def test_the_chain_gives_the_plain_reference_tokens(vllm_verify, method):
    """End to end: the tokens and counts of the chained kernels are the plain reference's, on
    batches with and without draft logits, some with the draft equal to the target."""
    from eaglefuzz.kernels import launchers as lv

    rng = np.random.default_rng(sum(map(ord, method)))
    kernels = {n: getattr(vllm_verify[UTILS], n) for n in dir(vllm_verify[UTILS]) if n.endswith("_kernel")}
    opts = METHODS[method]
    for k in range(3):
        c = _batch(rng, int(rng.integers(20, 1500)), has_draft=k != 1, same=k == 2)
        fe = _fly_entropy(rng, len(c["draft_sampled"])) if method == "fly" else None
        b = lv.launch_rejection_sample(kernels, **{k: _t(v) for k, v in c.items()}, **{k: _t(v) for k, v in opts.items()},
                                       fly_entropy=_t(fe))  # fmt: skip
        ns, sm = b["num_sampled"].numpy(), b["sampled"].numpy()
        args = {k: v for k, v in c.items() if k not in ("expanded_idx_mapping", "expanded_local_pos")}
        sampled, num, st = speculative_reference.verify(**args, **opts, fly_entropy=fe)
        assert not [w for w in st.windows if k != 2], st.windows  # windows only where draft == target
        if st.windows:  # the run decided them: follow it, then everything else must agree
            choices = {w.key: (bool(ns[w.key[1]] - 1 > w.key[3]) if w.kind == "accept" else int(sm[w.key[1], ns[w.key[1]] - 1]))
                       for w in st.windows}  # fmt: skip
            sampled, num, st = speculative_reference.verify(**args, **opts, fly_entropy=fe, choices=choices)
        assert num.tolist() == ns.tolist()
        for r in range(len(ns)):
            assert sampled[r, : ns[r]].tolist() == sm[r, : ns[r]].tolist(), (method, k, r)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_the_oracles_agree_on_larger_batches(method):
    """Both oracles, every kernel of the chain on the NumPy oracle's intermediates, on batches
    too large for the interpreter: equal integers, equal windows, floats within 1e-9 of each
    other (their float64 sums differ in order only)."""
    rng = np.random.default_rng(7 + sum(map(ord, method)))
    opts = METHODS[method]
    for has_draft in (True, False):
        c = _batch(rng, int(rng.integers(2000, 20000)), has_draft, R=24)
        n, V = c["target_logits"].shape
        nb = -(-V // 8192)
        outs = [{k: np.full((n, nb), SI if k == "target_local_argmax" else SF, np.int64 if k == "target_local_argmax" else np.float32)
                 for k in ("target_local_argmax", "target_local_max", "target_local_sumexp", "draft_local_max",
                           "draft_local_sumexp")} for _ in ORACLES]  # fmt: skip
        common = dict(target_logits=c["target_logits"], draft_logits=c["draft_logits"], temperature=c["temperature"])
        for o, mod in zip(outs, ORACLES, strict=True):
            mod.compute_local_logits_stats(**o, **common, expanded_idx_mapping=c["expanded_idx_mapping"],
                                           expanded_local_pos=c["expanded_local_pos"])  # fmt: skip
        for k in outs[0]:
            np.testing.assert_allclose(outs[1][k], outs[0][k], rtol=1e-6)
        stats = {k: outs[0][k] for k in ("target_local_max", "target_local_sumexp", "draft_local_max", "draft_local_sumexp")}
        B = len(c["idx_mapping"])
        res = []
        for mod in ORACLES:
            out = dict(sampled=np.full((B, 4), SI, np.int64), num_sampled=np.full(B, SI, np.int32),
                       target_rejected_logsumexp=np.full(B, SF, np.float32), draft_rejected_logsumexp=np.full(B, SF, np.float32))
            clp = rm = None
            if method == "block":
                clp = np.full(n, SF, np.float32)
                mod.compute_cumulative_log_p(cumulative_log_p=clp, draft_sampled=c["draft_sampled"],
                                             cu_num_logits=c["cu_num_logits"], idx_mapping=c["idx_mapping"],
                                             vocab_num_blocks=nb, **common, **stats)  # fmt: skip
                if has_draft:
                    rm = np.full((n, nb), SF, np.float32)
                    mod.compute_local_residual_mass(local_residual_mass=rm, cumulative_log_p=clp, draft_sampled=c["draft_sampled"],
                                                    expanded_idx_mapping=c["expanded_idx_mapping"],
                                                    expanded_local_pos=c["expanded_local_pos"], vocab_num_blocks=nb,
                                                    **common, **stats)  # fmt: skip
            st = mod.rejection(**out, target_local_argmax=outs[0]["target_local_argmax"], draft_sampled=c["draft_sampled"],
                               cu_num_logits=c["cu_num_logits"], idx_mapping=c["idx_mapping"], seed=c["seed"], pos=c["pos"],
                               vocab_num_blocks=nb, cumulative_log_p=clp, local_residual_mass=rm,
                               fly_entropy=_fly_entropy(np.random.default_rng(1), n) if method == "fly" else None,
                               use_block_verification=method == "block",
                               synthetic_conditional_rates=opts.get("synthetic_conditional_rates"),
                               fly_window_size=opts.get("fly_window_size", 0), **common, **stats)  # fmt: skip
            rl = dict(resampled_local_argmax=np.full((B, -(-V // 1024)), SI, np.int64),
                      resampled_local_max=np.full((B, -(-V // 1024)), SF, np.float64 if method == "fp64" else np.float32))
            st2 = mod.resample(**rl, target_rejected_logsumexp=out["target_rejected_logsumexp"],
                               draft_rejected_logsumexp=out["draft_rejected_logsumexp"], rejected_step=out["num_sampled"],
                               cu_num_logits=c["cu_num_logits"], expanded_idx_mapping=c["expanded_idx_mapping"],
                               draft_sampled=c["draft_sampled"], seed=c["seed"], pos=c["pos"], cumulative_log_p=clp,
                               use_fp64=method == "fp64", use_block_verification=method == "block", **common)  # fmt: skip
            res.append((out, st, rl, st2, clp, rm))
        (o0, s0, r0, q0, c0, m0), (o1, s1, r1, q1, c1, m1) = res
        for k in ("sampled", "num_sampled"):
            assert np.array_equal(o0[k], o1[k]), k
        assert [(w.key, w.chosen) for w in s0.windows] == [(w.key, w.chosen) for w in s1.windows]
        assert np.array_equal(r0["resampled_local_argmax"], r1["resampled_local_argmax"])
        assert [w.key for w in q0.windows] == [w.key for w in q1.windows]
        np.testing.assert_allclose(r1["resampled_local_max"], r0["resampled_local_max"], rtol=1e-9)
        for k in ("target_rejected_logsumexp", "draft_rejected_logsumexp"):
            np.testing.assert_allclose(o1[k], o0[k], rtol=1e-6)
        if c0 is not None:
            np.testing.assert_allclose(c1, c0, rtol=1e-6, atol=1e-7)


# -- windows ------------------------------------------------------------------------------------


def _tied_block(gap: float) -> dict:
    """A random row whose lanes 3 and 9 have Gumbel values ``gap`` apart (the rest -inf)."""
    seed, pos = np.int64(99), np.int64(17)
    n, _ = vectorized_v2_verify.gumbel_noise32(vectorized_v2_verify.murmur3_uniform32(seed, pos, _i64(3, 9)))
    logits = np.full((1, 16), -np.inf, np.float32)
    logits[0, 3] = np.float32(10.0 - n[0])
    logits[0, 9] = np.float32(np.float64(logits[0, 3]) + n[0] - n[1] + gap)
    return dict(local_argmax=np.full((1, 1), SI, np.int64), local_max=np.full((1, 1), SF, np.float32), logits=logits,
                expanded_idx_mapping=_i64(0), seeds=np.array([seed]), pos=np.array([pos]), temperature=_f32(1.0),
                apply_temperature=False, is_drafting=False)  # fmt: skip


@pytest.mark.parametrize("oracles", ORACLES, ids=IDS)
def test_a_decision_outside_its_window_is_never_left_to_the_run(oracles):
    """Lanes whose values are within their bounds: a window of exactly those two, the run's
    choice followed, any other refused. Moved apart by 4x the bound: settled, and a choice for
    it is not followed (the winner is the contract's)."""
    args = _tied_block(0.0)
    st = oracles.gumbel_sample(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()})
    assert [(w.kind, w.key, w.options) for w in st.windows] == [("argmax", ("row", 0, "block", 0), (3, 9))]
    for pick in (3, 9):
        a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        oracles.gumbel_sample(**a, choices={("row", 0, "block", 0): pick})
        assert a["local_argmax"][0, 0] == pick
    with pytest.raises(ValueError, match="outside the contract's window"):
        oracles.gumbel_sample(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()},
                              choices={("row", 0, "block", 0): 4})  # fmt: skip
    bound = float(st.bounds["local_max"][0, 0])
    far = _tied_block(4 * bound)
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in far.items()}
    st = oracles.gumbel_sample(**a, choices={("row", 0, "block", 0): 3})
    assert not st.windows and a["local_argmax"][0, 0] == 9


@pytest.mark.parametrize("oracles", ORACLES, ids=IDS)
def test_an_acceptance_near_its_margin_is_a_window_and_far_from_it_is_exact(oracles):
    """One random request, one one-hot draft: accepted iff log p(x) > log u. With p(x) = u
    (the uniform of the request's key) the test is a window; with p(x) = u * (1 +- 1e-3) it is
    settled either way, and a choice does not move it."""
    u = float(vectorized_v2_verify.tl_rand32(np.int64(5), np.int64(3)))
    for factor, window, accepted in ((1.0, True, None), (1.001, False, True), (0.999, False, False)):
        p = u * factor
        tl_ = np.array([[np.log(p), np.log1p(-p)], [0.0, 0.0]], np.float32)
        args = _rejection_args(
            sampled=np.full((1, 2), SI, np.int64), num_sampled=np.full(1, SI, np.int32),
            target_rejected_logsumexp=np.full(1, SF, np.float32), draft_rejected_logsumexp=np.full(1, SF, np.float32),
            target_logits=tl_, target_local_argmax=np.zeros((2, 1), np.int64), target_local_max=np.max(tl_, 1, keepdims=True),
            target_local_sumexp=np.sum(np.exp(tl_ - np.max(tl_, 1, keepdims=True)), 1, keepdims=True).astype(np.float32),
            draft_sampled=np.array([7, 0], np.int32), draft_local_max=np.zeros((2, 1), np.float32),
            draft_local_sumexp=np.zeros((2, 1), np.float32), cu_num_logits=np.array([0, 2], np.int32), idx_mapping=_i64(0),
            temperature=_f32(1.0), seed=_i64(5), pos=_i64(3, 4))  # fmt: skip
        for choice in (False, True):
            a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
            st = oracles.rejection(**a, choices={("req", 0, "step", 0): choice})
            assert bool(st.windows) == window
            assert a["num_sampled"][0] == int(choice if window else accepted)
