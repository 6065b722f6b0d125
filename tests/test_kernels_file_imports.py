"""A user's file (``--kernels``) whose kernels call ``@triton.jit`` helpers of another vLLM module
(Model Runner V2's verification calls ``tl_rand32`` and ``gumbel_block_argmax`` of
``vllm/v1/worker/gpu/sample/gumbel.py``): in a checkout the helpers come from the file's siblings;
a file alone gets a "could not be tested" verdict naming the helper, never a crash finding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from eaglefuzz.harness.sources import file as fsrc
from eaglefuzz.harness.targetkit.base import cannot_test

NOISE = '''\
import triton
import triton.language as tl

SALT = tl.constexpr(5)


@triton.jit
def _plus_salt(x):
    return x + SALT


@triton.jit
def _temperature_kernel(x_ptr):  # named like a target: the file under test defines targets, not its imports
    tl.store(x_ptr, 0)
'''

MINE = '''\
import torch

from vllm.triton_utils import tl, triton
from vllm.v1.worker.gpu.sample.noise import _plus_salt


@triton.jit
def my_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, _plus_salt(tl.load(x_ptr + offs, mask=m)), mask=m)
'''


def _tree(root: Path, salt: int = 5) -> Path:
    (root / "vllm/v1/worker/gpu/sample").mkdir(parents=True)
    (root / "vllm/v1/worker/gpu/spec_decode").mkdir(parents=True)
    (root / "vllm/v1/worker/gpu/sample/noise.py").write_text(NOISE.replace("(5)", f"({salt})"))
    mine = root / "vllm/v1/worker/gpu/spec_decode/mine.py"
    mine.write_text(MINE)
    return mine


def _launch(module) -> torch.Tensor:  # noqa: ANN001
    x = torch.arange(4, dtype=torch.int32)
    out = torch.zeros(4, dtype=torch.int32)
    module.my_kernel[(1,)](x, out, 4, BLOCK=4)
    return out


@pytest.fixture(autouse=True)
def _interpreter(backend) -> None:  # noqa: ANN001
    if backend.device != "cpu":
        pytest.skip("CPU tensors: run under the Triton interpreter")


@pytest.mark.parametrize("salt", [5, 7])
def test_a_checkout_file_calls_the_helpers_of_its_sibling_modules(tmp_path, salt):
    mine = _tree(tmp_path, salt)
    module = fsrc._import_or_extract(mine, ["my_kernel", "_temperature_kernel"])
    assert module.__name__.endswith("_extracted")
    assert _launch(module).tolist() == [salt, salt + 1, salt + 2, salt + 3]  # the sibling's own constant
    assert not hasattr(module, "_temperature_kernel")  # a sibling's target-named kernel is not the file's


def test_a_file_alone_is_a_could_not_be_tested_verdict_naming_the_helper(tmp_path):
    alone = tmp_path / "alone" / "mine.py"
    alone.parent.mkdir()
    shutil.copy(_tree(tmp_path / "tree"), alone)
    module = fsrc._import_or_extract(alone, ["my_kernel"])
    with pytest.raises(Exception) as info:
        _launch(module)
    why = cannot_test(info.value)
    assert why is not None and "_plus_salt" in why and "could not be tested" in why and "not a bug finding" in why
    assert cannot_test(RuntimeError("name 'nothing_unresolved' is not defined")) is None
