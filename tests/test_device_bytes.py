"""``benchmarks/device_bytes.py``: the bytes a device batch's checking moves, counted on the CPU."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "device_bytes.py"
_spec = importlib.util.spec_from_file_location("eaglefuzz_device_bytes", SCRIPT)
device_bytes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(device_bytes)


def test_each_kind_of_operation_moves_what_the_rules_say():
    """A view nothing; an elementwise add both operands and its result (an operand given twice
    once); an in-place indexed update its index, its values and as many elements read and written."""
    a, b = torch.zeros(10, dtype=torch.int64), torch.ones(10, dtype=torch.int64)
    assert device_bytes.op_bytes("view", (a, [5, 2]), {}, a.view(5, 2)) == 0
    assert device_bytes.op_bytes("empty_like", (a,), {}, torch.empty_like(a)) == 0
    assert device_bytes.op_bytes("add", (a, b), {}, a + b) == 3 * 80
    assert device_bytes.op_bytes("add", (a, a), {}, a + a) == 2 * 80
    dest, index, values = torch.zeros(1000, dtype=torch.int32), torch.tensor([1, 5, 9]), torch.ones(3, dtype=torch.int32)
    assert device_bytes.op_bytes("index_add_", (dest, 0, index, values), {}, dest) == 24 + 12 + 2 * 3 * 4
    mask = torch.zeros(1000, dtype=torch.bool)
    mask[:7] = True
    assert device_bytes.op_bytes("masked_fill_", (dest, mask, 3), {}, dest) == 1000 + 7 * 4


def test_a_target_s_batch_is_counted_stage_by_stage_and_the_placement_functions_come_back():
    from eaglefuzz.harness.targetkit import device_batch, placement

    before = {n: getattr(placement, n) for n in ("copy_segments", "place_writes", "check_segments", "place_masked")}
    row = device_bytes.count("_prepare_pos_seq_lens_kernel", 2, 1)
    assert row["tokens"] > 0 and all(row["per_stage"][s] > 0 for s in device_bytes.STAGES)
    assert row["bytes"] == sum(row["per_stage"].values()) == sum(row["per_op"].values())
    assert row["per_op"]["buffers place_writes (placement kernel)"] > 0  # counted as its launch, not as torch indexing
    assert all(getattr(placement, n) is f for n, f in before.items())
    assert device_batch.place_writes is before["place_writes"]


def test_a_name_that_is_no_device_target_or_not_batched_is_one_line():
    for name, said in (("no_such_kernel", "no device target named no_such_kernel"),
                       ("eagle_prepare_inputs_padded_kernel", "eagle_prepare_inputs_padded_kernel: not checked in device batches")):
        done = subprocess.run([sys.executable, str(SCRIPT), name], capture_output=True, text=True, check=False)
        assert done.returncode == 2 and said in done.stderr
        assert "Traceback" not in done.stderr


def test_the_fused_noise_is_counted_as_its_two_kernels_and_comes_back(monkeypatch):
    """With the fused noise on (its default), a Gumbel batch's lane noise is counted as its two compiled
    kernels move it on a GPU (each lane's uniform written and read, its noise and bound written),
    none of the plain function's hashing passes; ``lane_noise_on`` is the harness's again
    afterwards. Switched off, the plain function's passes are counted."""
    from eaglefuzz.harness.targetkit import fused
    from eaglefuzz.harness.targets._gumbel_sample_kernel import device as gumbel_device

    seed, pos, lanes = torch.zeros(3, dtype=torch.int64), torch.zeros(3, dtype=torch.int64), torch.arange(2048)
    assert device_bytes.noise_bytes(seed, pos, lanes, False) == 24 + 24 + 2048 * 8 + 3 * 2048 * (2 * 4 + 16)
    assert device_bytes.noise_bytes(seed, pos, lanes, True) == 24 + 24 + 2048 * 8 + 3 * 2048 * (2 * 8 + 16)
    monkeypatch.setenv(fused.SWITCH, "0")
    plain = device_bytes.count("_gumbel_sample_kernel", 2, 1)
    assert "draw lane noise (fused kernels)" not in plain["per_op"] and plain["per_op"]["draw __rshift__"] > 0
    monkeypatch.delenv(fused.SWITCH)  # on by default
    row = device_bytes.count("_gumbel_sample_kernel", 2, 1)
    assert row["per_op"]["draw lane noise (fused kernels)"] > 0
    assert row["bytes"] < plain["bytes"] / 2
    assert not {"draw __rshift__", "draw bitwise_right_shift_", "draw log_"} & set(row["per_op"])  # the hash's shifts, the noise's logs
    assert gumbel_device.lane_noise_on is fused.lane_noise_on
