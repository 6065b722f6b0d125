"""``eaglefuzz audit``: the properties, the search over both tiers, the hazards' reachability."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.audit import PROPERTIES, audit_target, observe, size_key
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.exitcodes import EXIT_EDGE, EXIT_OK
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.targets import TARGETS

pytestmark = pytest.mark.kernel

PI, NT, CE = "eagle_prepare_inputs_padded_kernel", "eagle_prepare_next_token_padded_kernel", "copy_and_expand_eagle_inputs_kernel"


@pytest.fixture(scope="module")
def ref():
    return implementations_for(BundledSource())


def _prop(target: str, name: str):
    return next(p for p in PROPERTIES[target] if p.name == name)


def _pi(cu: list[int], valid: list[int], qsl: list[int]) -> Case:
    return Case(PI, {
        "cu_num_draft_tokens": np.array(cu, dtype=np.int32),
        "valid_sampled_tokens_count": np.array(valid, dtype=np.int32),
        "query_start_loc": np.array(qsl, dtype=np.int32),
    }, {"num_reqs": len(cu)}, {"grid_size": None})


def test_properties_name_targets():
    assert set(PROPERTIES) <= set(TARGETS)
    assert {CE, PI, NT, "extend_all_queries_by_N", "create_vllm_config_for_draft_model"} <= set(PROPERTIES)


def test_index_to_sample_property(ref, backend):
    prop = _prop(PI, "index_to_sample_in_request")
    ok = _pi([3], [2], [0, 4])  # production: 3 drafts, one accepted
    assert prop.check(ok, observe(PI, ok, ref[PI], backend.device)) is None
    discarded = _pi([3], [0], [0, 4])  # a discarded request with drafts: rejected = d + 1
    detail = prop.check(discarded, observe(PI, discarded, ref[PI], backend.device))
    assert detail == "token_indices_to_sample[0] = -1, outside request 0's tokens [0, 4)"


class _OverflowsLikeTheInterpreter:
    """A kernel whose launch does what the Triton interpreter's NumPy ops do on an IEEE case
    (a probability over a subnormal one): a float32 division that overflows to inf."""

    def __getitem__(self, grid):  # noqa: ANN001, ANN204
        return lambda *args, **kwargs: np.float32(1.0) / np.float32(1e-45)


def test_the_audit_prints_no_numpy_warning_of_the_kernels_arithmetic(backend):
    """`eaglefuzz audit --vllm-version 0.33.0` printed NumPy's 'RuntimeWarning: overflow
    encountered in divide' from the interpreter: the audit runs a kernel as a check does,
    NumPy's floating-point warnings off (its results are what is looked at)."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        o = observe(PI, _pi([3], [2], [0, 4]), _OverflowsLikeTheInterpreter(), "cpu")
    assert o.error is None, o.error
    assert not [w for w in seen if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in seen]


def test_observe_tells_written_from_untouched(ref, backend):
    """P = 0 with shift: the grid covers max_query_len - 1 slots, so the map's last entry of
    the longest request stays unwritten (docs/CONTRACT.md §1.4)."""
    case = Case(CE, {
        "target_token_ids": np.array([7, 8], dtype=np.int32),
        "target_positions": np.array([0, 1], dtype=np.int64),
        "next_token_ids": np.array([9], dtype=np.int32),
        "query_start_loc": np.array([0, 2], dtype=np.int32),
        "query_end_loc": np.array([1], dtype=np.int32),
    }, {"padding_token_id": 0, "parallel_drafting_token_id": 0, "total_input_tokens": 2,
        "num_padding_slots_per_request": 0, "shift_input_ids": True}, {"block_size_tokens": None, "num_blocks": None})
    o = observe(CE, case, ref[CE], backend.device)
    assert o.error is None and o.written["out_hidden_state_mapping"].tolist() == [True, False]
    assert o.out["out_input_ids"].tolist() == [8] and not any(o.stray.values())
    assert _prop(CE, "hidden_map_injective_in_request").check(case, o) == \
        "out_hidden_state_mapping[1] (request 0) is never written"


def test_audit_of_prepare_inputs_padded(ref, backend, tmp_path):
    result = audit_target(PI, ref[PI], backend.device, examples=10)
    assert result.errors == 0 and set(result.searched) == {"production", "extended"}
    found = {h.prop.name: h for h in result.hazards}
    assert {"index_to_sample_in_request", "rejected_within_drafts"} <= set(found)
    assert "index_matches_rejected" in result.holds
    h = found["index_to_sample_in_request"]
    assert not h.reachable_in_production and h.tier == "extended"
    assert h.case.scalars["num_reqs"] == 1, f"not minimal: {h.case}"
    assert "production can reach it: no" in h.report()
    # the minimal example, copied from its first fence line to its last as printed, runs with python
    lines = h.report().splitlines()
    start = lines.index("# --- minimal example: paste into a file; python runs it and prints the case ---")
    block = "\n".join(lines[start : lines.index("# --- end of minimal example ---", start) + 1])
    script = tmp_path / "example.py"
    script.write_text(block + "\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == h.case.to_python()


def test_a_kept_request_without_a_valid_token_lies_outside_production(ref, backend):
    """A kept request with valid_sampled_tokens_count = 0 (no id below vocab_size) breaks what
    prepare_inputs_padded's contract assumes (>= 1 for a request with drafts); vLLM's rejection
    sampler never emits such a row (§3.2: a row is a valid prefix), so the audit finds it in the
    extended tier only and says production does not reach it."""
    result = audit_target(NT, ref[NT], backend.device, examples=10)
    found = {h.prop.name: h for h in result.hazards}
    h = found["kept_request_has_valid_token"]
    assert not h.reachable_in_production and h.tier == "extended"
    assert h.violating.get("production", 0) == 0 and h.searched["production"] >= 10
    assert size_key(h.case)[0] <= 4, f"not minimal: {h.case}"
    assert "production can reach it: no" in h.report()
    assert "next_token_in_vocab" not in found or not found["next_token_in_vocab"].reachable_in_production


def test_audit_command(capsys, backend):
    be = "cuda" if backend.compiled else "interpreter"
    args = ["audit", "--kernel", PI, "--examples", "5", "--backend", be]
    with pytest.raises(SystemExit) as exc:
        cli.main([*args, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert exc.value.code == EXIT_OK
    hazards = doc["targets"][PI]["hazards"]
    assert hazards and all(not h["reachable_in_production"] for h in hazards)
    with pytest.raises(SystemExit) as exc:
        cli.main([*args, "--strict"])
    out = capsys.readouterr().out
    assert exc.value.code == EXIT_EDGE, out
    assert "hazard: eagle_prepare_inputs_padded_kernel: index_to_sample_in_request" in out
