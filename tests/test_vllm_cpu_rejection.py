"""vLLM's CPU C++ port of the rejection sampler's kernels (vllm-cpu 0.32.0) under the harness.

The four adapters (each target folder's ``port.py``) launch the ops the way
``vllm/utils/cpu_triton_utils.py`` does. The port parts from docs/CONTRACT.md §10-§13 in the
ways :data:`DEFECTS` lists, each shown on a minimal case with what the port writes; everywhere
else it must agree with the contract (:func:`agreeing` moves a case off those defects, nothing
more), and there an adapter that drops a copy-back, swaps two arguments or never calls the op
must be caught. The port tests are skipped, with the reason, where the wheel cannot be fetched
or does not fit this machine (see tests/test_vllm_cpu.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from eaglefuzz.harness.checking.fuzz import bulk_fuzz_target
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.errors import ContractViolation
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE, derive_seed
from eaglefuzz.harness.sources import Implementations, Origin
from eaglefuzz.harness.sources import vllm_cpu_adapters as A
from eaglefuzz.harness.targetkit.draft_rows import Rows
from eaglefuzz.harness.targets import TARGETS, has_role

VERSION = "0.32.0"
GREEDY, RANDOM = "rejection_greedy_sample_kernel", "rejection_random_sample_kernel"
EXPAND, RECOVERED = "expand_kernel", "sample_recovered_tokens_kernel"
NAMES = [GREEDY, RANDOM, EXPAND, RECOVERED]
EXAMPLES = 16

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")


@pytest.fixture(scope="module")
def port(needs) -> str:
    return needs.vllm_cpu_port(VERSION)


def impls_of(name: str, kernel: object) -> Implementations:
    return Implementations({name: kernel}, {name: Origin(f"vllm-cpu {VERSION}", "test adapter", name)})


def test_every_rejection_op_is_registered(port):
    assert {A.OPS[n] for n in NAMES} == {
        "rejection_greedy_sample_kernel_impl", "rejection_random_sample_kernel_impl",
        "expand_kernel_impl", "sample_recovered_tokens_kernel_impl",
    }
    assert not set(NAMES) & set(A.missing_ops())
    # the Triton kernels' parameters less the synthetic inputs, the grid's and the constexprs
    arity = {GREEDY: 7, RANDOM: 12, EXPAND: 5, RECOVERED: 8}
    assert {n: len(A.op(n).default._schema.arguments) for n in NAMES} == arity


# -- where the port agrees with the contract ----------------------------------------------


def agreeing(name: str, case: Case) -> Case:
    """``case`` moved off the port's known defects (:data:`DEFECTS`), nothing else changed:
    no synthetic mode; argmaxes inside int32; no negative draft in the random kernel, uniforms
    that float32 holds, a positive uniform where the draft probability is not; float32 noise;
    int64 expand data (the only dtype the expand adapter writes back) with rows of at most
    ``MAX_NUM_TOKENS``."""
    a = dict(case.arrays)
    if name in (GREEDY, RANDOM):
        a.pop("synthetic_conditional_rates", None)
    if name == GREEDY and a["target_argmax"].dtype == np.int64:
        a["target_argmax"] = a["target_argmax"].astype(np.int32).astype(np.int64)
    if name == RANDOM:
        a["draft_token_ids"] = np.maximum(a["draft_token_ids"], 0)
        u = a["uniform_probs"].astype(np.float32)
        if "draft_probs" in a:
            V = case.scalars["vocab_size"]
            t = np.arange(a["draft_token_ids"].size)
            q = a["draft_probs"].reshape(-1)[np.minimum(t * V + a["draft_token_ids"], a["draft_probs"].size - 1)]
            u = np.where(~(q > 0) & (u <= 0), np.float32(1e-45), u)
        a["uniform_probs"] = u.astype(a["uniform_probs"].dtype)
    if name == RECOVERED:
        a["inv_q"] = a["inv_q"].astype(np.float32)
    launch = dict(case.launch)
    if name == EXPAND:
        x = a["input"]
        a["input"] = (np.nan_to_num(x).clip(-(2.0**62), 2.0**62) if x.dtype == np.float32 else x).astype(np.int64)
        rows = Rows.of(a["cu_num_tokens"])
        if rows.d.size and rows.d.max() > (launch.get("max_num_tokens") or 128):
            launch["max_num_tokens"] = 1024 if rows.d.max() <= 1024 else None
    return Case(case.kernel, a, dict(case.scalars), launch, case.note)


def agreeing_cases(name: str, seed: int, n: int = EXAMPLES) -> list[Case]:
    """``n`` production cases of ``name`` (the bulk driver's), moved by :func:`agreeing`;
    those the move takes out of the production tier or past ``MAX_NUM_TOKENS`` are replaced."""
    target = TARGETS[name]
    rng = np.random.default_rng(derive_seed(seed, name, "port-agreement"))
    out: list[Case] = []
    while len(out) < n:
        case = agreeing(name, target.random_case(rng, INTERPRETER_SCALE))
        try:
            target.validate(case)
        except ContractViolation:
            continue
        if name == EXPAND and Rows.of(case.arrays["cu_num_tokens"]).d.max(initial=0) > (
                case.launch.get("max_num_tokens") or 128):
            continue
        out.append(case)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_port_agrees_with_the_contract_off_its_defects(port, name, fuzz_seed, warm_oracles):
    target = TARGETS[name]
    for case in agreeing_cases(name, fuzz_seed):
        outcome = target.check(case, A.ADAPTERS[name], "cpu")
        assert outcome.ok, (outcome.crash, outcome.differences[:3], case)


# -- wrong adapters must be caught on those cases ------------------------------------------


def _greedy_no_copy_back(out, cu, draft, argmax, bonus, is_greedy, max_spec_len, *_, **__):
    A.op(GREEDY)(A.as_int64(out), A.as_int64(cu), A.as_int64(draft), A.as_int64(argmax), A.as_int64(bonus),
                 is_greedy, max_spec_len)


def _greedy_is_greedy_dropped(out, cu, draft, argmax, bonus, is_greedy, *args, **kw):
    A.ADAPTERS[GREEDY].adapter(out, cu, draft, argmax, bonus, None, *args, **kw)


def _greedy_draft_argmax_swapped(out, cu, draft, argmax, *args, **kw):
    A.ADAPTERS[GREEDY].adapter(out, cu, argmax, draft, *args, **kw)


def _random_no_copy_back(out, *args, **kw):
    A.ADAPTERS[RANDOM].adapter(A.as_int64(out), *args, **kw)


def _random_tables_swapped(out, cu, draft, draft_probs, target_probs, *args, **kw):
    if draft_probs is None:
        return A.ADAPTERS[RANDOM].adapter(out, cu, draft, draft_probs, target_probs, *args, **kw)
    return A.ADAPTERS[RANDOM].adapter(out, cu, draft, target_probs, draft_probs, *args, **kw)


def _random_greedy_rows_inverted(out, cu, draft, dp, tp, bonus, rec, u, is_greedy, *args, **kw):
    A.ADAPTERS[RANDOM].adapter(out, cu, draft, dp, tp, bonus, rec, u, ~is_greedy, *args, **kw)


def _recovered_no_copy_back(out, *args, **kw):
    A.ADAPTERS[RECOVERED].adapter(A.as_int64(out), *args, **kw)


def _recovered_tables_swapped(out, cu, draft, draft_probs, target_probs, *args, **kw):
    if draft_probs is None:
        return A.ADAPTERS[RECOVERED].adapter(out, cu, draft, draft_probs, target_probs, *args, **kw)
    return A.ADAPTERS[RECOVERED].adapter(out, cu, draft, target_probs, draft_probs, *args, **kw)


def _recovered_noise_of_request_zero(out, cu, draft, dp, tp, inv_q, *args, **kw):
    A.ADAPTERS[RECOVERED].adapter(out, cu, draft, dp, tp, inv_q[:1].expand_as(inv_q).contiguous(), *args, **kw)


def _expand_replace_swapped(out, x, cu, replace_from, replace_to, *args, **kw):
    A.ADAPTERS[EXPAND].adapter(out, x, cu, replace_to, replace_from, *args, **kw)


def _expand_counts_shifted(out, x, cu, *args, **kw):
    A.ADAPTERS[EXPAND].adapter(out, x, torch.cat([cu[:1] * 0, cu[:-1]]), *args, **kw)


def _op_never_called(*args, **kw):
    """Any target: the conversions happen, the op does not run."""


WRONG: dict[str, tuple[str, Callable[..., None]]] = {
    "greedy_no_copy_back": (GREEDY, _greedy_no_copy_back),
    "greedy_is_greedy_dropped": (GREEDY, _greedy_is_greedy_dropped),
    "greedy_draft_argmax_swapped": (GREEDY, _greedy_draft_argmax_swapped),
    "random_no_copy_back": (RANDOM, _random_no_copy_back),
    "random_tables_swapped": (RANDOM, _random_tables_swapped),
    "random_greedy_rows_inverted": (RANDOM, _random_greedy_rows_inverted),
    "recovered_no_copy_back": (RECOVERED, _recovered_no_copy_back),
    "recovered_tables_swapped": (RECOVERED, _recovered_tables_swapped),
    "recovered_noise_of_request_zero": (RECOVERED, _recovered_noise_of_request_zero),
    "expand_replace_swapped": (EXPAND, _expand_replace_swapped),
    "expand_counts_shifted": (EXPAND, _expand_counts_shifted),
    **{f"op_never_called_{n}": (n, _op_never_called) for n in NAMES},
}


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_wrong_adapter_is_caught(port, wrong, fuzz_seed, warm_oracles):
    name, fn = WRONG[wrong]
    kernel = A.CppKernel(name, fn)
    target = TARGETS[name]
    assert any(not target.check(case, kernel, "cpu").ok for case in agreeing_cases(name, fuzz_seed)), wrong


# -- the port's defects, each on a minimal case ---------------------------------------------


def i32(*v: int) -> np.ndarray:
    return np.array(v, dtype=np.int32)


def f32(*v: float) -> np.ndarray:
    return np.array(v, dtype=np.float32)


def _random_case(drafts, target, draft, u, *, V, rec=(7, 7), bonus=9, rates=None) -> Case:  # noqa: ANN001
    n = len(drafts)
    arrays = {
        "cu_num_draft_tokens": i32(n), "draft_token_ids": i32(*drafts),
        "target_probs": np.asarray(target, dtype=np.float32).reshape(n, V),
        "bonus_token_ids": i32(bonus).reshape(1, 1), "recovered_token_ids": i32(*rec[:n]),
        "uniform_probs": np.array(u, dtype=np.float64), "is_greedy": np.array([False]),
    }
    if draft is not None:
        arrays["draft_probs"] = np.asarray(draft, dtype=np.float32).reshape(n, V)
    if rates is not None:
        arrays["synthetic_conditional_rates"] = rates
    return Case(kernel=RANDOM, arrays=arrays, scalars={"max_spec_len": n, "vocab_size": V}, launch={})


def _greedy_case(drafts, argmax, *, synthetic=False) -> Case:  # noqa: ANN001
    n = len(drafts)
    arrays = {"cu_num_draft_tokens": i32(n), "draft_token_ids": i32(*drafts),
              "target_argmax": np.array(argmax, dtype=np.int64), "bonus_token_ids": i32(9).reshape(1, 1)}
    if synthetic:
        arrays |= {"uniform_probs": np.zeros(n), "synthetic_conditional_rates": f32(*[1.0] * n)}
    return Case(kernel=GREEDY, arrays=arrays, scalars={"max_spec_len": n}, launch={})


def _recovered_case(n, L, target, inv_q, *, V, draft=None) -> Case:  # noqa: ANN001
    arrays = {"cu_num_draft_tokens": i32(n), "draft_token_ids": i32(*[-1] * n),
              "target_probs": np.asarray(target, dtype=np.float32).reshape(n, max(V, 1))[:, :V].copy(),
              "inv_q": np.asarray(inv_q).reshape(1, max(V, 1))[:, :V].copy()}
    if draft is not None:
        arrays["draft_probs"] = np.asarray(draft, dtype=np.float32).reshape(n, V)
    return Case(kernel=RECOVERED, arrays=arrays, scalars={"max_spec_len": L, "vocab_size": V}, launch={"block_size": None})


def _expand_case(x, counts, max_num_tokens=None) -> Case:  # noqa: ANN001
    cu = np.cumsum(counts).astype(np.int32)
    return Case(kernel=EXPAND, arrays={"input": x, "cu_num_tokens": cu},
                scalars={"replace_from": 0, "replace_to": 1, "num_tokens": int(cu[-1])},
                launch={"max_num_tokens": max_num_tokens})


DEFECTS: dict[str, tuple[Case, dict[str, list], str]] = {
    # case, what the port writes (untouched output elements hold -1), where in the domain
    "random_minus_one_draft_accepted": (
        # t=1's -1 draft: the port reads element t*V - 1 (row 0's last: 0.2 / 0.2 >= 0.5) and
        # accepts it, writing -1 and the bonus; the contract rejects it (recovered id 7)
        _random_case([1, -1], [0.1, 0.6, 0.1, 0.2] * 2, [0.2, 0.5, 0.1, 0.2] * 2, [0.5, 0.5], V=4),
        {"output_token_ids": [[1, -1, 9]]}, "production",
    ),
    "random_uniform_rounded_to_float32": (
        # u = the float64 just above p = 0.5: rejected; rounded to float32 it is 0.5: accepted
        _random_case([2], [0.0, 0.0, 0.5, 0.5], None, [np.nextafter(0.5, 1.0)], V=4),
        {"output_token_ids": [[2, 9]]}, "production",
    ),
    "random_zero_draft_prob_accepted_at_u_zero": (
        # q = 0 rejects in the contract; the port takes the ratio as 0, accepted by u = 0
        _random_case([1], [0.5, 0.5], [1.0, 0.0], [0.0], V=2),
        {"output_token_ids": [[1, 9]]}, "harness",
    ),
    "random_synthetic_mode_refused": (
        _random_case([1], [0.5, 0.5], None, [0.0], V=2, rates=f32(1.0)), {}, "production",
    ),
    "greedy_synthetic_mode_refused": (_greedy_case([3], [3], synthetic=True), {}, "production"),
    "greedy_argmax_compared_in_int64": (
        # int32(5 + 2**32) = 5 equals the draft: accepted, then the bonus; the port compares int64
        _greedy_case([5], [5 + 2**32]), {"output_token_ids": [[5, -1]]}, "harness",
    ),
    "recovered_fp64_noise_rounded_to_float32": (
        # USE_FP64_GUMBEL: 0.5 * (1 + 2**-40) > 0.5 in float64 (token 1); in float32 a tie (token 0)
        _recovered_case(1, 1, [0.5, 0.5], np.array([1.0, 1.0 + 2.0**-40]), V=2),
        {"output_token_ids": [0]}, "production",
    ),
    "recovered_positions_past_max_spec_len": (
        _recovered_case(2, 1, [0.1, 0.9, 0.9, 0.1], f32(1.0, 1.0), V=2),
        {"output_token_ids": [1, 0]}, "extended",
    ),
    "recovered_empty_vocabulary": (_recovered_case(1, 1, [0.0], f32(1.0), V=0), {"output_token_ids": [0]}, "extended"),
    "expand_float32_output_never_written": (
        _expand_case(f32(0.0, 0.7), [1, 2]), {"output": [-1.0, -1.0, -1.0]}, "production",
    ),
    "expand_int32_output_never_written": (
        _expand_case(i32(0, 5), [1, 2]), {"output": [-1, -1, -1]}, "production",
    ),
    "expand_rows_past_max_num_tokens": (
        _expand_case(np.array([5], dtype=np.int64), [3], max_num_tokens=2), {"output": [5, 5, 5]}, "harness",
    ),
}


def _port_writes(name: str, case: Case) -> dict[str, list]:
    """The port's outputs on ``case``, from buffers of ``-1``."""
    target = TARGETS[name]
    outs = {n: torch.full(shape, -1, dtype=getattr(torch, np.dtype(dt).name)) for n, (dt, shape) in
            target.output_specs(case).items()}
    target.launch(A.ADAPTERS[name], {n: torch.from_numpy(a) for n, a in case.arrays.items()} | outs, case)
    return {n: t.tolist() for n, t in outs.items()}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_port_defect(port, defect, warm_oracles):
    """Each defect: the check reports it, and the port writes what the table says."""
    case, writes, tier = DEFECTS[defect]
    name = case.kernel
    target = TARGETS[name]
    if tier != "extended":
        target.validate(case)
    elif has_role(name, "edges"):
        target.validate(case, "extended")  # (until the target has its extended tier, the oracles alone define it)
    outcome = target.check(case, A.ADAPTERS[name], "cpu")
    assert not outcome.ok and not outcome.oracle_disagreements
    if not writes:
        assert outcome.crash.startswith("AssertionError: Synthetic acceptance not supported with CPU sampling")
        return
    assert outcome.differences and outcome.crash is None
    assert _port_writes(name, case) == writes


@pytest.mark.parametrize("name", [RANDOM, EXPAND])
def test_fuzzing_finds_the_production_defects(port, name, fuzz_seed, warm_oracles):
    """A short default run of the port (``eaglefuzz fuzz --vllm-cpu``) reports them."""
    stats = bulk_fuzz_target(name, impls_of(name, A.ADAPTERS[name]), "cpu", INTERPRETER_SCALE,
                             seed=fuzz_seed, examples=40, shrink=False)
    assert stats.findings and stats.findings[0].outcome.differences
