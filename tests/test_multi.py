"""Several GPUs: --devices (one shard per device, merged report), xdist workers pinned to a GPU.

On a CPU machine ``$EAGLEFUZZ_FAKE_DEVICES`` stands in for the GPUs: each "device" runs the
interpreter. --ray's own test is tests/test_ray.py (``tox -e ray``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.corpus import load_entry
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.run.cuda_devices import (
    FAKE_ENV,
    XDIST_DEVICES_ENV,
    cuda_devices,
    pick_devices,
    pin_xdist_worker,
    xdist_device,
)
from eaglefuzz.harness.run.shards import ShardRun, child_args, merge, merged_exit_code, sub_shards

ROOT = Path(__file__).resolve().parent.parent
BUG = "pi_cu_read_as_exclusive"  # a seeded bug (tests/seeded_bugs/mutants.py), found within a few examples
PI = "eagle_prepare_inputs_padded_kernel"


def test_sub_shards_cover_the_share_disjointly():
    chunks = range(240)
    for k, n, m in [(0, 1, 2), (0, 1, 4), (1, 3, 2), (2, 3, 3)]:
        parts = []
        for s in sub_shards((k, n), m):
            kk, nn = (int(x) for x in s.split("/"))
            assert 1 <= kk <= nn
            parts.append({c for c in chunks if c % nn == kk - 1})
        assert sum(len(p) for p in parts) == len(set().union(*parts))  # disjoint
        assert set().union(*parts) == {c for c in chunks if c % n == k}  # exactly share k of n


def test_child_args_replace_what_the_parent_handles(tmp_path):
    argv = ["fuzz", "--devices", "all", "--lanes", "2", "--json", "--corpus=x", "--shard", "1/2", "--progress", "--seed", "3"]
    assert child_args(argv, "3/4", tmp_path) == [
        "fuzz", "--seed", "3", "--shard", "3/4", "--json", "--no-progress", "--corpus", str(tmp_path)]


def test_device_enumeration_and_choice(monkeypatch):
    assert cuda_devices({FAKE_ENV: "3"}) == ["0", "1", "2"]
    assert cuda_devices({FAKE_ENV: "GPU-a,GPU-b"}) == ["GPU-a", "GPU-b"]
    assert cuda_devices({FAKE_ENV: "0"}) == []
    assert pick_devices("all", ["4", "6"]) == ["4", "6"]
    assert pick_devices("1", ["4", "6"]) == ["6"]  # ordinals within the user's CUDA_VISIBLE_DEVICES list
    for spec, avail, words in [("all", [], "no CUDA device here"), ("2", ["0", "1"], "no device 2"),
                               ("0,0", ["0", "1"], "twice"), ("x", ["0"], "ordinals")]:
        with pytest.raises(UserError, match=words):
            pick_devices(spec, avail)


class _FakeTorch:
    """Stands for torch in ``sys.modules``: whether CUDA is initialised here, and the device set."""

    def __init__(self, initialized: bool) -> None:
        self.picked: list[int] = []
        self.cuda = SimpleNamespace(is_initialized=lambda: initialized, set_device=self.picked.append)


def test_xdist_workers_get_their_own_gpu(monkeypatch):
    assert [xdist_device(f"gw{i}", ["4", "6"]) for i in range(4)] == ["4", "6", "4", "6"]
    assert xdist_device("gw1", ["4"]) is None  # one device: nothing to share out
    # Not the test process's own torch: on a GPU machine an earlier test may have initialised CUDA.
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(initialized=False))
    env = {"PYTEST_XDIST_WORKER": "gw3", XDIST_DEVICES_ENV: "4,5,6"}
    assert pin_xdist_worker(env) == "CUDA_VISIBLE_DEVICES=4" and env["CUDA_VISIBLE_DEVICES"] == "4"
    assert pin_xdist_worker({"PYTEST_XDIST_WORKER": "gw0"}) is None
    late = _FakeTorch(initialized=True)  # CUDA already up: the variable would come too late
    monkeypatch.setitem(sys.modules, "torch", late)
    env = {"PYTEST_XDIST_WORKER": "gw4", XDIST_DEVICES_ENV: "4,5,6"}
    assert pin_xdist_worker(env) == "torch.cuda.set_device(1)" and late.picked == [1]
    assert "CUDA_VISIBLE_DEVICES" not in env


def _doc(examples: int, features: list[str], missed: list[str], findings: list[dict]) -> dict:
    return {"seed": 0, "mode": "hypothesis", "backend": "interpreter", "source": "s", "notes": [], "shard": "1/2",
            "domain": "production", "interrupted": False,
            "targets": {PI: {"implementation": "i", "examples": examples, "tokens_verified": 10 * examples,
                             "seconds": examples / 2, "features_reached": features, "features_missed": missed,
                             "findings": findings, "edge_divergences": []}}}


def test_merge_sums_counts_and_names_each_findings_shard():
    f = {"kind": "difference", "tier": "production", "file": "c.json", "report": "r"}
    runs = [ShardRun("1/2", "device 0", 0, _doc(4, ["a"], ["b", "c"], [])),
            ShardRun("2/2", "device 1", 1, _doc(6, ["b"], ["a", "c"], [f]))]
    doc = merge(runs, (0, 1))
    t = doc["targets"][PI]
    assert (t["examples"], t["tokens_verified"], t["seconds"]) == (10, 100, 3.0)
    assert t["features_reached"] == ["a", "b"] and t["features_missed"] == ["c"]
    assert t["findings"] == [dict(f, shard="2/2", where="device 1")]
    assert [(s["shard"], s["where"], s["examples"], s["findings"]) for s in doc["shards"]] == [
        ("1/2", "device 0", 4, 0), ("2/2", "device 1", 6, 1)]
    assert merged_exit_code(doc, runs) == 1
    runs.append(ShardRun("3/3", "device 2", 2, None, ["eaglefuzz: error: --kernel x: unknown target"]))
    assert merged_exit_code(merge(runs, (0, 1)), runs) == 2


def test_merge_keeps_a_device_runs_stages_cross_checks_and_scale_cases():
    """Device-mode shards (--devices, --lanes): the merged target keeps its device entry (the
    text report would otherwise say the target has no device generator), the lanes' stages,
    cross-checks and scale cases summed (and the scale examples that did not fit in the GPU's
    free memory, said in the report); a lane that skipped scale cases does not hide one that
    ran them."""
    docs = [_doc(4, ["a"], ["b"], []), _doc(6, ["b"], ["a"], [])]
    for d, (cc, scale, skipped, oom) in zip(docs, [(2, 1, None, 0), (3, 0, "no time", 2)], strict=True):
        d["mode"] = "device"
        d["targets"][PI]["device"] = {"stage_seconds": {"draw": 1.0, "kernel": 0.5}, "cross_checked": cc,
                                      "warmup_seconds": cc / 2, "scale_cases": scale,
                                      **({"scale_skipped": skipped} if skipped else {}),
                                      **({"oom_retries": oom} if oom else {}),
                                      **({"scale_unfit": 3} if scale else {})}
    runs = [ShardRun("1/2", "device 0, lane 1/2", 0, docs[0]), ShardRun("2/2", "device 0, lane 2/2", 0, docs[1])]
    dev = merge(runs, (0, 1))["targets"][PI]["device"]
    assert dev == {"stage_seconds": {"draw": 2.0, "kernel": 1.0}, "cross_checked": 5, "warmup_seconds": 1.5,
                   "scale_cases": 1, "oom_retries": 2, "scale_unfit": 3}
    docs[0]["targets"][PI]["device"]["scale_cases"] = 0
    assert merge(runs, (0, 1))["targets"][PI]["device"]["scale_skipped"] == "no time"
    from io import StringIO

    from eaglefuzz.harness.reporting.fuzz_report import print_fuzz

    out = StringIO()
    print_fuzz(merge(runs, (0, 1)), out=out)
    assert f"device: {PI}: seconds per stage" in out.getvalue() and "no device generator" not in out.getvalue()
    assert "; 2 batches drawn and checked again after the GPU ran out of memory (fewer --lanes" in out.getvalue()
    assert ("; 3 production-scale examples not checked: they did not fit in the GPU's free memory (other --lanes"
            in out.getvalue())


def test_a_device_target_whose_worker_was_killed_is_not_said_to_lack_a_device_generator():
    """A device-mode target whose case killed the worker has no device entry (its counts are
    lost): the report says that, not that the target has no device generator."""
    from io import StringIO

    from eaglefuzz.harness.reporting.fuzz_report import print_fuzz

    doc = dict(_doc(0, [], [], []), mode="device")
    doc["targets"][PI]["fault"] = "crash"
    out = StringIO()
    print_fuzz(doc, out=out)
    assert "killed the worker" in out.getvalue() and "no device generator" not in out.getvalue()
    del doc["targets"][PI]["fault"]
    out = StringIO()
    print_fuzz(doc, out=out)
    assert f"device: {PI} has no device generator" in out.getvalue()


def test_lanes_run_several_shards_on_one_device(monkeypatch, tmp_path):
    """--lanes N: N shards on the first visible device (with --devices: on each), disjoint
    shares, each told its lane (lane 1 alone draws production-scale cases)."""
    from eaglefuzz.harness.run import multi

    seen = []

    def fake(argv, shards, devices, corpus, lanes=1, env=None):  # noqa: ANN001, ANN202
        assert env == {}  # no MPS daemon without --mps (tests/test_mps.py)
        seen.append((shards, devices, lanes))
        return [ShardRun(s, "x", 0, None, []) for s in shards]

    monkeypatch.setattr(multi, "run_on_devices", fake)
    monkeypatch.setenv(FAKE_ENV, "2")
    common = {"ray_address": None, "shards": None, "corpus": tmp_path, "backend": "auto", "as_json": True}
    multi.fuzz_in_shards(["fuzz"], devices=None, lanes=3, shard=(0, 1), **common)
    multi.fuzz_in_shards(["fuzz"], devices="all", lanes=2, shard=(1, 2), **common)
    assert seen == [(["1/3", "2/3", "3/3"], ["0", "0", "0"], 3),
                    (["2/8", "4/8", "6/8", "8/8"], ["0", "0", "1", "1"], 2)]


@pytest.mark.parametrize("parent", [(0, 1), (1, 2)])
@pytest.mark.parametrize("devices", [1, 2, 3])
@pytest.mark.parametrize("lanes", [2, 3, 4, 5, 8])
def test_lane_1_of_each_device_is_a_share_that_holds_scale_examples(parent, devices, lanes):
    """The lane that draws production-scale cases (lane 1 of its device) is one whose share
    holds scale examples (every SCALE_EVERY-th from SCALE_AT), wherever a lane of that device
    holds any: with the lanes numbered in order, lane 1 of an even number of lanes took every
    N-th example from an even one, none of them a scale example, and no lane drew any."""
    from eaglefuzz.harness.core.scale_examples import SCALE_AT, SCALE_EVERY, holds_scale_examples
    from eaglefuzz.harness.run.multi import lane_numbers
    from eaglefuzz.harness.run.shards import sub_shards

    for k in range(8):
        for n in range(1, 17):
            assert holds_scale_examples(k, n) == any((k + m * n) % SCALE_EVERY == SCALE_AT for m in range(SCALE_EVERY))
    shards = sub_shards(parent, devices * lanes)
    number = lane_numbers(shards, lanes)
    held = [holds_scale_examples(int(s.split("/")[0]) - 1, int(s.split("/")[1])) for s in shards]
    for d in range(devices):
        mine = range(d * lanes, (d + 1) * lanes)
        assert sorted(number[i] for i in mine) == list(range(1, lanes + 1))
        first = next(i for i in mine if number[i] == 1)
        assert held[first] == any(held[i] for i in mine)
    if lanes % 2 == 0 and parent == (0, 1):
        assert not held[0] and any(held)  # the order's lane 1 would have drawn none
    assert lane_numbers(["1/2", "2/2"], 2) == [2, 1] and lane_numbers(["1/3", "2/3", "3/3"], 3) == [1, 2, 3]


def test_a_lane_past_the_first_draws_no_scale_case(tmp_path):
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.run.campaign import Campaign

    def campaign(lane: tuple[int, int]) -> Campaign:
        c = Campaign(names=None, source=None, backend="auto", seed=0, mode="device", examples=None, time_budget=60.0,
                     shard=(0, 1), corpus_dir=tmp_path, keep_going=False, progress=False, as_json=True, lane=lane)
        c.scale_why = None
        return c

    run = dict.fromkeys(device_targets(), None)
    names = list(run)
    assert campaign((0, 4))._scale_first(names, run, 100.0) == {n for n in names if device_targets()[n].scale} != set()
    assert campaign((1, 4))._scale_first(names, run, 100.0) == set()


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["fuzz", "--devices", "all"], {FAKE_ENV: "0"}, "--devices all: no CUDA device here"),
        (["fuzz", "--lanes", "2"], {FAKE_ENV: "0"}, "--lanes 2: no CUDA device here"),
        (["fuzz", "--lanes", "2", "--ray", "local", "--shards", "2"], {FAKE_ENV: "2"}, "--lanes 2 and --ray: choose one"),
        (["fuzz", "--lanes", "0"], {FAKE_ENV: "2"}, "--lanes"),
        (["fuzz", "--lanes", "2", "--progress"], {FAKE_ENV: "2"}, "--progress: not with --devices, --lanes"),
        (["fuzz", "--devices", "all", "--ray", "local", "--shards", "2"], {FAKE_ENV: "2"}, "choose one"),
        (["fuzz", "--shards", "2"], {FAKE_ENV: "2"}, "--shards: only with --ray"),
        (["fuzz", "--ray", "local"], {}, "--shards N"),
        (["fuzz", "--ray", "local", "--shards", "2"], {}, "eaglefuzz[ray]"),
    ],
)
def test_usage_errors_of_several_shards(capsys, monkeypatch, args, env, words):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed (import ray raises ImportError)
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and words in err, err


@pytest.mark.kernel
def test_devices_run_one_shard_per_device_into_one_corpus(tmp_path, seeded_bugs_dir):
    bug = seeded_bugs_dir / f"{BUG}.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT), FAKE_ENV: "2", "EAGLEFUZZ_SHRINK_BUDGET": "3"}
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--devices", "all", "--kernels", str(bug),
         "--kernel", PI, "--examples", "6", "--corpus", str(tmp_path), "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert [(s["shard"], s["where"]) for s in doc["shards"]] == [("1/2", "device 0"), ("2/2", "device 1")]
    findings = doc["targets"][PI]["findings"]
    assert findings and {f["where"] for f in findings} <= {"device 0", "device 1"}
    for f in findings:
        assert load_entry(f["file"]).case.kernel == PI and Path(f["file"]).parent.parent == tmp_path


def test_a_ray_tasks_budget_counts_from_its_own_start(monkeypatch):
    """A Ray task may wait for a GPU long after the command started: its shard's
    ``--time-budget`` counts from the task's start (the command's start is not passed on)."""
    import subprocess

    from eaglefuzz.harness.core.clock import STARTED_ENV
    from eaglefuzz.harness.run import ray_shards

    seen = {}

    def fake_run(cmd, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(kw["env"])
        return subprocess.CompletedProcess(cmd, 0, "{}", "")

    monkeypatch.setenv(STARTED_ENV, "1000.0")
    monkeypatch.setattr(ray_shards.subprocess, "run", fake_run)
    ray_shards.run_shard(["fuzz", "--time-budget", "60"], ".")
    assert seen and STARTED_ENV not in seen
