"""The Numba oracles' entry functions (oracles/entry.py): one compiled specialization whether an
input arrives writeable or read-only, an undeclared write refused at compile time, and every
loop function that Python code calls is an entry."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numba
import numpy as np
import pytest

from eaglefuzz.oracles.entry import entry

ORACLES = Path(__file__).resolve().parent.parent / "oracles"


def _double(out, x):
    for i in range(x.size):
        out[i] = 2 * x[i]


def _writes_its_input(out, x):
    x[0] = 1
    out[0] = x[0]


def _frozen(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


def test_an_entry_compiles_once_for_writeable_and_read_only_inputs():
    double = entry("out")(_double)
    plain = numba.njit(_double)
    x = np.arange(5, dtype=np.int64)
    for f in (double, plain):
        out_a, out_b = np.zeros(5, np.int64), np.zeros(5, np.int64)
        f(out_a, x)
        f(out_b, _frozen(x))
        assert out_a.tolist() == out_b.tolist() == [0, 2, 4, 6, 8]
    assert len(double.compiled.signatures) == 1
    assert len(plain.signatures) == 2  # what an entry saves: Numba types the read-only flag
    assert x.flags.writeable  # the caller's array is left as it was


def test_an_undeclared_write_fails_to_compile():
    bad = entry("out")(_writes_its_input)
    with pytest.raises(numba.core.errors.TypingError, match="readonly"):
        bad(np.zeros(1, np.int64), np.zeros(1, np.int64))


def test_writes_must_name_parameters():
    with pytest.raises(TypeError, match=r"names no parameter \['outs'\]"):
        entry("outs")(_double)


def _loop_functions_python_calls(path: Path) -> dict[str, str]:
    """Each module-level Numba function of ``path`` that a plain Python function names, with
    its decorator."""
    tree = ast.parse(path.read_text())
    jitted, plain = {}, []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            jit = [d for d in decorators if "njit" in d or d.startswith("entry")]
            if jit:
                jitted[node.name] = (jit[0], node)
            else:
                plain.append(node)
    named = {n.id for f in plain for n in ast.walk(f) if isinstance(n, ast.Name) and n.id in jitted}
    return {name: jitted[name][0] for name in named if jitted[name][1].args.args}


SCALARS_ONLY = {"_philox4"}  # no array argument: nothing whose flag could vary
JITTED = sorted(p.name for p in ORACLES.glob("*.py") if re.search(r"^@(numba\.njit|entry)\(", p.read_text(), re.M))


def test_the_scan_finds_the_loop_modules():
    assert JITTED == ["loops.py", "loops_v2.py", "loops_v2_verify.py"]


@pytest.mark.parametrize("module", JITTED)
def test_every_loop_function_python_calls_is_an_entry(module):
    called = _loop_functions_python_calls(ORACLES / module)
    assert called, "no loop function found: the scan reads nothing"
    plain = sorted(name for name, d in called.items() if not d.startswith("entry") and name not in SCALARS_ONLY)
    assert plain == [], f"{module}: loop functions called from Python without @entry: {plain}"
