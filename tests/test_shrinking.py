"""Shrinking large findings fast: delta debugging over requests, a time budget, compact reproducers.

No kernel runs here: the check is replaced by a rule on the case, so the tests measure how many
checks the shrinker spends, not how long a kernel takes.
"""

from __future__ import annotations

import numpy as np
import pytest

from eaglefuzz.harness.checking import check
from eaglefuzz.harness.checking.fuzz import shrink_finding
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.compare import Difference
from eaglefuzz.harness.generation.shrink_steps import keep_lists, shorter
from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE
from eaglefuzz.harness.sources import Implementations
from eaglefuzz.harness.sources.base import Origin
from eaglefuzz.harness.targets import TARGETS, Outcome
from eaglefuzz.harness.targets.eagle_prepare_inputs_padded_kernel import layout as pi

PI = "eagle_prepare_inputs_padded_kernel"


def test_keep_lists_drop_halves_first_then_finer_chunks():
    lists = list(keep_lists(10))
    assert lists[:2] == [list(range(5, 10)), list(range(0, 5))]  # drop a half
    assert all(0 < len(k) < 10 for k in lists)
    assert len({tuple(k) for k in lists}) == len(lists)
    singles = {tuple(i for i in range(10) if i != j) for j in range(10)}
    assert singles <= {tuple(k) for k in lists}  # single requests last
    assert lists.index(list(range(1, 10))) > lists.index(list(range(5, 10)))
    assert list(keep_lists(1)) == []


def test_shorter_cuts_the_most_first_and_converges_fast():
    assert shorter(1) == []
    assert shorter(2) == [1]
    cuts = shorter(40000)
    assert cuts[:2] == [1, 20000] and cuts[-1] == 39999 and cuts == sorted(cuts)
    assert len(cuts) < 20
    # a length that must stay above 32767 is reached in a few dozen steps, not thousands
    n, steps = 40000, 0
    while True:
        nxt = next((m for m in shorter(n) if m > 32767), None)
        if nxt is None:
            break
        n, steps = nxt, steps + 1
    assert n == 32768 and steps < 40


def _finding(case: Case) -> check.Finding:
    return check.Finding(case, Outcome(crash="boom"), Origin("test", "-", "-"))


def _big_case(R: int = 150) -> Case:
    rng = np.random.default_rng(9)
    d = rng.integers(0, 9, size=R).tolist()
    valid = [0 if x == 0 else 1 for x in d]
    extra = rng.integers(0, 40, size=R).tolist()
    d[77], valid[77], extra[77] = 7, 3, 33  # the culprit
    return pi.build(d, valid, extra, None)


def _rule(case: Case) -> bool:
    """The 'bug': a request with 7 drafts, 3 of them valid, and at least 20 extra tokens."""
    pieces = TARGETS[PI].split_requests(case)
    return any(p[0] == 7 and p[1] == 3 and p[2] >= 20 for p in pieces)


@pytest.fixture
def fake_check(monkeypatch):
    calls = {"n": 0}

    def fake(case, impls, device, journal=None, domain="production"):  # noqa: ANN001
        calls["n"] += 1
        return _finding(case) if _rule(case) else None

    monkeypatch.setattr(check, "check_case", fake)
    return calls


def test_a_150_request_finding_shrinks_to_its_culprit_in_few_checks(fake_check):
    case = _big_case()
    shrunk = shrink_finding(_finding(case), Implementations({}, {}), "cpu", budget_s=60)
    assert TARGETS[PI].split_requests(shrunk.case) == [(7, 3, 20)]  # one request, shortest extra
    assert not shrunk.shrink
    assert fake_check["n"] < 60, fake_check["n"]


def test_shrinking_stops_at_its_budget_with_the_best_case_so_far(fake_check):
    case = _big_case()
    shrunk = shrink_finding(_finding(case), Implementations({}, {}), "cpu", budget_s=0)
    assert shrunk.case == case
    assert "shrinking stopped at its time budget" in shrunk.shrink
    assert shrunk.shrink in shrunk.report()


def test_large_reproducers_are_compact_and_exact():
    arrays = {
        "zeros": np.zeros(40000, np.int32),
        "range": np.arange(2**63 - 100, 2**63 - 1, dtype=np.int64),
        "ranges": np.concatenate([np.arange(5, 300), np.arange(0, 400)]).astype(np.int64),
        "runs": np.repeat(np.array([7, -1], np.int32), [30, 300]),
        "rows": np.full((1100, 3), -1, np.int32),
        "mask": np.zeros(64, np.bool_),
        "plain": np.array([3, 1, 4, 1, 5], np.int32),
    }
    case = Case(PI, arrays, {"num_reqs": 1}, {})
    src = case.to_python()
    assert len(src) < 2000, src
    assert eval(src, {"np": np, "Case": Case}) == case


def test_long_arrays_of_alike_requests_print_as_ranges_and_tiles():
    """Requests that are alike make arrays with a step (``query_start_loc`` of 3-token requests),
    a repeated pattern (their positions) or rows alike (a block table): each is one short
    expression, and evaluates to the array exactly."""
    arrays = {
        "stepped": np.arange(0, 3 * 1100 + 1, 3, dtype=np.int32),
        "down": np.arange(2**62, 2**62 - 5 * 2000, -5, dtype=np.int64),
        "pattern": np.tile(np.array([7, 8, 9], np.int64), 1100),
        "long_pattern": np.tile(np.arange(100, 120, dtype=np.int64), 60),
        "rows": np.tile(np.array([3, 1, 4, 1, 5], np.int32), (1100, 1)),
        "masks": np.tile(np.array([True, False]), 600),
        "near_limit": np.arange(2**63 - 1 - 3 * 40, 2**63 - 1, 3, dtype=np.int64),
    }
    case = Case(PI, arrays, {"num_reqs": 1}, {})
    src = case.to_python()
    assert len(src.splitlines()) <= 15 and max(map(len, src.splitlines())) < 120, src
    assert eval(src, {"np": np, "Case": Case}) == case


class _NumPy126:
    """NumPy as a reproducer may use it: only names that NumPy 1.26 (``numpy>=1.26`` is allowed)
    and 2.x both have. ``np.bool`` (NumPy 2 only) and a bare ``nan`` are what a pasted
    reproducer must never need."""

    NAMES = ("array", "zeros", "full", "arange", "tile", "repeat", "concatenate", "nan", "inf", "bool_", "uint8",
             "int32", "int64", "float32", "float64")

    def __getattr__(self, name: str):  # noqa: ANN204
        if name not in self.NAMES:
            raise AttributeError(f"module 'numpy' has no attribute '{name}' (NumPy 1.26)")
        return getattr(np, name)


def test_reproducers_run_on_numpy_1_26_and_keep_every_float_bit():
    """Bool arrays, NaN, infinities and -0.0, short and long (compact forms, a vocabulary-wide
    table of a few entries too): the source text uses NumPy's names of 1.26 and 2.x alike and
    rebuilds every array bit for bit (a NaN is a NaN)."""
    f32 = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 0.1], np.float32)
    arrays = {
        "mask": np.array([True, False, True]),
        "masks": np.tile(np.array([True, False]), 40),
        "all_false": np.zeros(64, np.bool_),
        "floats": f32,
        "nan_row": np.full(64, np.nan, np.float32),
        "signed_zeros": np.array([0.0] * 30 + [-0.0], np.float64),
        "tiled": np.tile(f32, 10),
        "table": np.zeros((2, 262144), np.float32),  # a probability table, a few entries set
    }
    arrays["table"][0, 5], arrays["table"][1, 100000], arrays["table"][1, 7] = 0.25, np.nan, -0.0
    src = Case(PI, arrays, {"num_reqs": 1}, {}).to_python()
    assert len(src) < 2000, f"a reproducer of {len(src)} characters"  # the table was 2 MB of 0.0
    got = eval(src, {"np": _NumPy126(), "Case": Case})
    for name, a in arrays.items():
        b = got.arrays[name]
        assert b.dtype == a.dtype and b.shape == a.shape, name
        bits = np.dtype(f"u{a.itemsize}")
        same = a.view(bits) == b.view(bits) if a.dtype.kind == "f" else a == b
        assert np.all(same | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else same), (name, a, b)


MANY = [n for n, t in TARGETS.items() if any(s.name == "many_requests" for s in t.shapes)]


@pytest.mark.parametrize("name", MANY)
def test_a_bug_that_needs_1025_requests_reads_in_a_few_lines_after_one_check(name, monkeypatch):
    """A bug that only more than 1024 requests show (a grid capped at max_num_seqs): no request
    can be dropped, and a check of such a batch under the interpreter costs seconds (up to
    18 s for copy_and_expand), so the first check must already make the case readable: every
    request alike, every array one value or a range, a reproducer of at most 30 short lines."""
    target = TARGETS[name]
    shape = next(s for s in target.shapes if s.name == "many_requests")
    case = shape.build(np.random.default_rng(1), INTERPRETER_SCALE)

    def needs_many(c: Case) -> check.Finding | None:
        if "beyond_1024_requests" not in TARGETS[c.kernel].features_of(c):
            return None
        diff = Difference("out", 1024, 1, 2, 1024, "per-request output", "numpy = numba oracle")
        return check.Finding(c, Outcome(differences=[diff]), Origin("test", "-", "-"))

    monkeypatch.setattr(check, "check_case", lambda c, *a, **k: needs_many(c))
    shrunk = shrink_finding(needs_many(case), Implementations({}, {}), "cpu", budget_s=1e9, max_checks=1)
    lines = shrunk.reproducer().splitlines()
    assert "beyond_1024_requests" in target.features_of(shrunk.case)
    assert len(lines) <= 30 and max(map(len, lines)) <= 200, shrunk.reproducer()
    assert eval(shrunk.case.to_python(), {"np": np, "Case": Case}) == shrunk.case


def test_alike_requests_are_never_checked_twice(fake_check):
    """Dropping any one of many alike requests makes the same case: it is checked once."""
    case = pi.build([7] * 40, [3] * 40, [25] * 40, None)
    shrunk = shrink_finding(_finding(case), Implementations({}, {}), "cpu", budget_s=60)
    assert TARGETS[PI].split_requests(shrunk.case) == [(7, 3, 20)]
    assert fake_check["n"] < 25, fake_check["n"]


def test_the_interpreter_is_sped_up(backend):
    if backend.compiled:
        pytest.skip("compiled: the interpreter is not used")
    from triton.runtime import interpreter

    assert interpreter.interpreter_builder.options.sanitize_overflow is False
    assert getattr(interpreter._get_np_dtype, "_eaglefuzz_memo", False)
    assert getattr(interpreter._patch_lang, "_eaglefuzz_memo", False)


def test_hypothesis_stops_shrinking_once_its_share_of_the_budget_is_spent(monkeypatch):
    """Hypothesis's shrinker redraws every candidate from the strategy; past its share of the
    budget it must stop at once, not go on drawing candidates it no longer checks."""
    from eaglefuzz.harness.checking import fuzz
    from eaglefuzz.harness.generation.strategies import INTERPRETER_SCALE

    draws = {"n": 0}
    real = fuzz.strategy_for

    def counted(target, tier, scale):  # noqa: ANN001, ANN202
        def count(case):  # noqa: ANN001, ANN202
            draws["n"] += 1
            return case

        return real(target, tier, scale).map(count)

    monkeypatch.setattr(fuzz, "strategy_for", counted)
    monkeypatch.setattr(fuzz, "check_case", lambda case, *a, **k: _finding(case))  # every case fails
    monkeypatch.setattr(fuzz, "shrink_finding", lambda finding, *a, **k: finding)  # ours: not the point
    found = fuzz.hypothesis_chunk(PI, Implementations({}, {}), "cpu", INTERPRETER_SCALE, seed=0,
                                  max_examples=50, shrink_budget=0.0)
    assert found is not None and found.case.kernel == PI
    assert draws["n"] <= 3, draws["n"]


STATEFUL = [n for n, t in TARGETS.items() if getattr(t, "state_index", ())]


@pytest.mark.parametrize("name", STATEFUL)
def test_idle_state_rows_are_dropped_and_the_outputs_stay_the_same(name):
    """A Model Runner V2 kernel's case names a few of a deployment's state rows; the shrink move
    drops the others (a reproducer without them) and renumbers the rows named, in order: the
    case stays in the production tier and its oracles expect the same outputs. Cases where every
    state row is named get no such move."""
    from eaglefuzz.harness.targetkit.runner_v2 import compact_states

    target = TARGETS[name]
    seen = 0
    for seed in range(40):
        case = target.random_case(np.random.default_rng(seed), INTERPRETER_SCALE)
        small = compact_states(case, target.state_index, target.per_state)
        if small is None:
            continue
        seen += 1
        target.production_rules(small)
        state = next(n for n in target.per_state if n in case.arrays)
        assert small.arrays[state].shape[0] < case.arrays[state].shape[0]
        assert compact_states(small, target.state_index, target.per_state) is None
        assert any(m.arrays.keys() == small.arrays.keys()
                   and all(np.array_equal(m.arrays[n], small.arrays[n], equal_nan=m.arrays[n].dtype.kind == "f")
                           for n in small.arrays)
                   for m in target.shrink_moves(case))
        before, after = target.expectation(case), target.expectation(small)
        for oracle, outs in before.results.items():
            for out, buf in outs.items():
                if out in target.per_state:  # an input the case also holds: cut with the states
                    continue
                assert np.array_equal(buf, after.results[oracle][out], equal_nan=True), (name, seed, out)
    assert seen, f"{name}: no drawn case has idle state rows"


def test_whole_case_value_changes_keep_arrays_c_contiguous():
    """A value change of a 2-D array (every row like row ``k``: a broadcast) is a C-contiguous
    array, as every oracle requires; in 'K' order its copy kept the broadcast's axis order, and
    the shrinking of a finding of ``_update_draft_inputs_kernel`` (hidden states ``[B, H]``)
    raised inside the oracles."""
    from eaglefuzz.harness.checking.shrinking import value_changes

    hidden = np.arange(12, dtype=np.float32).reshape(3, 4)
    case = Case("_update_draft_inputs_kernel", {"hidden_states": hidden}, {}, {})
    made = 0
    for change in value_changes(TARGETS[case.kernel], case, 1):
        for alt in change:
            try:
                other = alt(case)
            except Exception:  # noqa: BLE001, S112 - a change another array's absence refuses
                continue
            a = other.arrays["hidden_states"]
            assert a.flags.c_contiguous and a.shape == (3, 4) and a.dtype == np.float32
            made += 1
    assert made
