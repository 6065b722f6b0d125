"""The ``--kernels`` loader: a vLLM checkout's file as it is, and one-line errors for bad files."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.generation.strategies import Scale
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.bundled import BundledSource
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.targetkit.base import TritonTarget
from eaglefuzz.harness.targets import TARGETS

KERNELS_FILE = Path(__file__).resolve().parents[1] / "kernels" / "spec_decode_utils.py"
OUR_IMPORTS = """\
from dataclasses import replace

import torch
import triton
import triton.language as tl

from .vllm_types import CommonAttentionMetadata, VllmConfig
"""
VLLM_IMPORTS = """\
from dataclasses import replace

import torch

from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.triton_utils import tl, triton
from vllm.utils.math_utils import cdiv
from vllm.v1.attention.backends.utils import CommonAttentionMetadata

logger = init_logger(__name__)


def num_draft_blocks(num_tokens: int, block_size: int) -> int:
    \"\"\"Unrelated helper of the checkout: uses a vLLM import the harness cannot resolve.\"\"\"
    logger.debug("blocks for %d tokens", num_tokens)
    return cdiv(num_tokens, block_size)
"""
SMALL = Scale(max_requests=3, request_tail=3, max_query_len=5)


def vllm_checkout_file(tmp_path: Path) -> Path:
    """``vllm/v1/spec_decode/utils.py`` as a vLLM checkout has it: vLLM's own imports."""
    text = KERNELS_FILE.read_text()
    assert text.count(OUR_IMPORTS) == 1, "kernels/spec_decode_utils.py changed its imports"
    path = tmp_path / "vllm" / "v1" / "spec_decode" / "utils.py"
    path.parent.mkdir(parents=True)
    path.write_text(text.replace(OUR_IMPORTS, VLLM_IMPORTS))
    return path


def one_line_error(path: Path, text: str | None) -> str:
    if text is not None:
        path.write_text(text)
    with pytest.raises(UserError) as info:
        implementations_for(FileSource(path))
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


@pytest.mark.kernel
def test_vllm_checkout_file_loads_as_is(tmp_path, backend, warm_oracles):
    path = vllm_checkout_file(tmp_path)
    impls = implementations_for(FileSource(path))
    bundled = BundledSource().load(None)
    kernels = [n for n, t in TARGETS.items() if isinstance(t, TritonTarget) and n in bundled.funcs]
    assert sorted(kernels) == sorted(
        [
            "copy_and_expand_eagle_inputs_kernel",
            "eagle_prepare_inputs_padded_kernel",
            "eagle_prepare_next_token_padded_kernel",
        ]
    )
    # the file defines every target of the bundled copy under its vLLM name, so every one comes
    # from it (targets of newer vLLM releases are not in it)
    assert {n: impls.origin[n].file for n in impls} == dict.fromkeys(bundled.funcs, str(path.resolve()))
    for name in bundled.funcs:  # the kernels, and the two Python functions the file defines too
        case = TARGETS[name].random_case(np.random.default_rng(0), SMALL)
        finding = check_case(case, impls, backend.device)
        assert finding is None, finding.report()


def test_missing_file(tmp_path):
    message = one_line_error(tmp_path / "absent.py", None)
    assert "no such file" in message


def test_syntax_error_names_the_line(tmp_path):
    message = one_line_error(tmp_path / "broken.py", "import triton\n\ndef f(:\n    pass\n")
    assert re.search(r"\bline 3\b", message), message


def test_file_defining_no_target(tmp_path):
    message = one_line_error(tmp_path / "unrelated.py", "def helper():\n    return 1\n")
    assert "defines none of" in message


def test_file_raising_at_import(tmp_path):
    message = one_line_error(tmp_path / "boom.py", 'raise RuntimeError("boom")\n')
    assert "RuntimeError" in message and "boom" in message


def test_a_utils_file_names_the_rejection_samplers_targets_as_another_files():
    """A copy of vllm/v1/spec_decode/utils.py lacks the rejection sampler's kernels because they
    live in another file of vLLM: the note says which, not that the copy should define them."""
    from eaglefuzz.harness.sources import implementations_for, parse_source

    path = Path(__file__).resolve().parents[1] / "kernels" / "spec_decode_utils.py"
    notes = implementations_for(parse_source(f"file:{path}"), None).notes
    other = [n for n in notes if "vllm/v1/sample/rejection_sampler.py" in n]
    assert len(other) == 1 and other[0].startswith("rejection_greedy_sample_kernel, "), notes
    assert "another file: --kernels that file" in other[0]
    for module in ("input_batch.py", "block_table.py", "spec_decode/rejection_sampler.py",
                   "spec_decode/target_dependent_ar/speculator.py"):  # Model Runner V2's files, a note each
        assert len([n for n in notes if f"vllm/v1/worker/gpu/{module}, another file" in n]) == 1, (module, notes)
    utils = [n for n in notes if "does not define" in n and "copy_and_expand_dflash_inputs_kernel" in n]
    assert len(utils) == 1 and "rejection" not in utils[0], notes
