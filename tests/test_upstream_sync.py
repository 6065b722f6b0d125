"""kernels/spec_decode_utils.py holds vLLM's functions unchanged: compared with shared/upstream/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ROOT / "kernels" / "spec_decode_utils.py"
UPSTREAM = ROOT.parent / "shared" / "upstream" / "vllm_v1_spec_decode_utils.txt"


def _functions(source: str) -> dict[str, str]:
    tree = ast.parse(source)
    return {n.name: ast.dump(n, include_attributes=False) for n in tree.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.skipif(not UPSTREAM.is_file(), reason=f"the upstream module text is not at {UPSTREAM}")
def test_kernels_match_upstream_text():
    # The page's first line is a heading, not Python.
    upstream = _functions(UPSTREAM.read_text().split("\n", 1)[1])
    ours = _functions(OURS.read_text())
    assert set(upstream) == set(ours)
    for name, dump in upstream.items():
        assert ours[name] == dump, f"{name} in kernels/spec_decode_utils.py differs from the upstream text"
