"""The division window of rejection_random_sample_kernel (docs/CONTRACT.md §11.2-§11.4).

Compiled, Triton divides ``p / q`` within 2 ulps, not correctly rounded, so a uniform within a
few float32 steps of the quotient may be decided either way. The production tier never puts a
uniform there (in every mode), the extended tier does, and on a compiled backend the check
accepts either decision there and nothing else.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.strategies import Scale
from eaglefuzz.harness.sources.adapters import grid_kernel
from eaglefuzz.harness.targetkit.base import ContractViolation
from eaglefuzz.harness.targets import TARGETS
from eaglefuzz.harness.targets.rejection_random_sample_kernel import device as rr_device
from eaglefuzz.harness.targets.rejection_random_sample_kernel import edges
from eaglefuzz.harness.targets.rejection_random_sample_kernel.layout import (
    build,
    clear_window,
    drafted,
    in_window,
    window_bounds,
)

NAME = "rejection_random_sample_kernel"
T = TARGETS[NAME]
SCALE = Scale()


def _window_count(case: Case) -> int:
    t, p, q = drafted(case.arrays, case.scalars["vocab_size"])
    return int(np.count_nonzero(in_window(case.arrays["uniform_probs"][t], p, q)))


def test_window_bounds_of_a_quotient_of_one():
    lo, hi, defined = window_bounds(np.array([0.3], np.float32), np.array([0.3], np.float32))
    assert defined.tolist() == [True]
    assert lo[0] == np.float64(1 - 3 * 2.0**-24) and hi[0] == np.float64(1 + 3 * 2.0**-23)
    u = np.array([1 - 3 * 2.0**-24, 1 - 2.0**-53, 1.0, 0.5])
    assert in_window(u, np.full(4, 0.3, np.float32), np.full(4, 0.3, np.float32)).tolist() == [False, True, True, False]
    # q = 0 rejects on every backend, an infinite quotient accepts on every one: no window
    assert not window_bounds(np.array([0.5, 1.0], np.float32), np.array([0.0, 1e-45], np.float32))[2].any()


def test_production_never_draws_the_window_and_the_edges_do():
    rng = np.random.default_rng(7)
    cases = [T.random_case(rng, SCALE) for _ in range(150)] + [s.build(rng, SCALE) for s in T.shapes for _ in range(2)]
    assert sum("draft_probs" in c.arrays for c in cases) > 50
    assert [_window_count(c) for c in cases if _window_count(c)] == []
    for c in cases:
        T.validate(c)
    # the same draws with the window left in (the extended tier's build): many uniforms in it
    windowed = [build([4, 3], 4, V=16, seed=s, relation="equal", boundary=1.0, window=True) for s in range(10)]
    assert sum(map(bool, map(_window_count, windowed))) >= 8
    one = next(c for c in windowed if _window_count(c))
    with pytest.raises(ContractViolation, match=r"^arrays\.uniform_probs: must not lie within 3 float32 steps"):
        T.validate(one)
    assert T.tier_of(one, "extended") == "extended"
    drawn = [edges.random_case(rng, SCALE) for _ in range(60)]
    assert sum("division_window" in edges.features_of(c) for c in drawn) >= 5


def test_a_uniform_that_falls_in_the_window_is_moved_to_its_lower_end():
    case = build([2], 2, V=2, seed=3, relation="equal", boundary=1.0, window=True)
    a = dict(case.arrays, uniform_probs=np.array([1 - 2.0**-53, 0.25]), draft_token_ids=np.array([0, 1], np.int32))
    moved = clear_window(a, 2)
    p, q = a["target_probs"][0, 0], a["draft_probs"][0, 0]
    assert moved[0] == max(window_bounds(np.array([p]), np.array([q]))[0][0], 0.0) and moved[1] == 0.25


def test_the_device_draws_stay_out_of_the_window():
    import torch

    target = rr_device.DEVICE
    rng, gen = np.random.default_rng(1), torch.Generator().manual_seed(1)
    seen = 0
    for _ in range(6):
        dc = target.draw(rng, gen, "cpu", max_requests=8)
        a = {n: v.numpy() for n, v in dc.inputs.items()}
        if "draft_probs" not in a:
            continue
        seen += 1
        V = dc.scalars["vocab_size"]
        a["target_probs"], a["draft_probs"] = a["target_probs"].reshape(-1, V), a["draft_probs"].reshape(-1, V)
        t, p, q = drafted(a, V)
        assert not in_window(a["uniform_probs"][t], p, q).any()
    assert seen
    # and the device's own clearing moves a uniform on the quotient out of the window
    tp = torch.full((1, 2), 0.3)
    u = rr_device.clear_window(torch.tensor([1 - 2.0**-53], dtype=torch.float64), torch.tensor([0], dtype=torch.int32),
                               tp, tp.clone(), 2)
    assert u.item() == 1 - 3 * 2.0**-24


def _one_draft(u: float) -> Case:
    tp = np.array([[0.3, 0.7]], np.float32)
    return Case(kernel=NAME, arrays={
        "cu_num_draft_tokens": np.array([1], np.int32), "draft_token_ids": np.array([0], np.int32),
        "target_probs": tp, "draft_probs": tp.copy(), "bonus_token_ids": np.array([[1]], np.int32),
        "recovered_token_ids": np.array([1], np.int32), "uniform_probs": np.array([u]),
        "is_greedy": np.array([False]),
    }, scalars={"max_spec_len": 1, "vocab_size": 2}, launch={})  # fmt: skip


def _port(steps_down: int, reject_all: bool = False):
    """A kernel whose division is ``steps_down`` float32 steps below the correctly rounded one
    (as a compiled division within 2 ulps may be); ``reject_all``: a real bug."""

    @grid_kernel(numpy=True)
    def rejection_random_sample_kernel(output_token_ids, cu_num_draft_tokens, draft_token_ids, draft_probs,
                                       target_probs, bonus_token_ids, recovered_token_ids, uniform_probs, is_greedy,
                                       max_spec_len, vocab_size, synthetic_conditional_rates, NO_DRAFT_PROBS,
                                       SYNTHETIC_MODE):  # noqa: N803
        start = 0
        for r, end in enumerate(cu_num_draft_tokens.tolist()):
            rejected = False
            for j in range(end - start):
                t = start + j
                did = int(draft_token_ids[t])
                quot = np.float32(target_probs[t, did]) / np.float32(draft_probs[t, did])
                for _ in range(steps_down):
                    quot = np.nextafter(quot, np.float32(0))
                ok = not reject_all and np.float64(quot) >= uniform_probs[t]
                output_token_ids[r, j] = did if ok else recovered_token_ids[t]
                if not ok:
                    rejected = True
                    break
            if not rejected:
                output_token_ids[r, end - start] = bonus_token_ids[r, 0]
            start = end

    return rejection_random_sample_kernel


class _Compiled(type(T)):
    """The target as a compiled backend checks it (settle as on CUDA), runnable on the CPU."""

    def settle(self, case, written, fills, device):
        return super().settle(case, written, fills, "cuda")


def test_a_compiled_check_takes_either_decision_in_the_window_and_nothing_else():
    case = _one_draft(1 - 2.0**-53)  # IEEE: 1.0 >= u, accepted; one float32 step lower: rejected
    skewed = _port(1)
    assert T.check(case, skewed, "cpu").differences, "the exact check must see the skewed division"
    assert T.check(case, _port(0), "cpu").ok
    compiled = _Compiled()
    assert compiled.check(case, skewed, "cpu").ok
    assert compiled.check(case, _port(0), "cpu").ok
    # outside the window every decision stays fixed: a rejection at u = 0.5 is a difference
    assert compiled.check(_one_draft(0.5), _port(0, reject_all=True), "cpu").differences
    assert compiled.check(_one_draft(0.5), _port(1), "cpu").ok
    # and on the CPU (the interpreter, the C++ port) nothing is settled
    fills, exp = T.expected(case)
    assert T.settle(case, {"output_token_ids": np.zeros(2, np.int32)}, fills, "cpu") is None
