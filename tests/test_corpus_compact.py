"""The corpus's compact array form (corpus/README.md): a fill value and the entries that differ.

Written for large arrays that are mostly one value (a vocabulary-wide probability table with a
few non-zero ids), read back bit for bit, named by content whatever the form; a malformed one is
one line naming the file, the field and the rule (exit 2 from the command line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eaglefuzz.harness import cli
from eaglefuzz.harness.checking.corpus import (
    COMPACT_MIN,
    CORPUS_DIR,
    canonical_json,
    case_hash,
    compact_form,
    encode,
    load_case,
    save_case,
)
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.errors import UserError

ONE_HOT = CORPUS_DIR / "rejection_random_sample_kernel" / "69a38db4927d.json"
"""A real case in the compact form: two one-hot rows of 262144 probabilities."""


def test_a_mostly_constant_array_is_written_compact_and_reads_back_bit_for_bit(tmp_path: Path) -> None:
    case = load_case(ONE_HOT)
    target = np.zeros((1, 262144), np.float32)
    target[0, 7], target[0, 40000], target[0, 262143] = -0.0, np.float32(1e-40), np.float32(0.25)
    target[0, 5] = np.nan
    case = case.replace(arrays={**case.arrays, "target_probs": target})
    text = encode(case)
    spec = json.loads(text)["arrays"]["target_probs"]
    assert spec == {"dtype": "float32", "shape": [1, 262144], "fill": 0.0,
                    "entries": [[0, 5, "nan"], [0, 7, -0.0], [0, 40000, 1e-40], [0, 262143, 0.25]]}
    assert len(text) < 2000
    back = load_case(save_case(case, tmp_path))
    assert back.arrays["target_probs"].tobytes() == target.tobytes()
    # the name is the content's: the same as the nested lists' (the form is not hashed)
    assert "entries" not in canonical_json(case) and case_hash(back) == case_hash(case)


def test_which_arrays_are_compact() -> None:
    assert compact_form(np.zeros(COMPACT_MIN - 1, np.int32)) is None  # too small
    mostly = np.full(COMPACT_MIN, 3, np.int32)
    mostly[: COMPACT_MIN // 16] = 4
    assert compact_form(mostly)["fill"] == 3  # 1/16 differ: compact
    mostly[COMPACT_MIN // 16] = 4
    assert compact_form(mostly) is None  # more than 1/16 differ
    tied = np.zeros(COMPACT_MIN, np.float32)
    tied[: COMPACT_MIN // 2] = -0.0  # equally common: the smaller bit pattern (+0.0) is the fill
    assert compact_form(np.concatenate([tied, np.zeros(COMPACT_MIN * 15, np.float32)]))["fill"] == 0.0


def _doc() -> dict[str, Any]:
    return json.loads(ONE_HOT.read_text())


def _with(array: dict[str, Any]) -> dict[str, Any]:
    doc = _doc()
    doc["arrays"]["target_probs"] = array
    return doc


GOOD = {"dtype": "float32", "shape": [1, 262144], "fill": 0.0, "entries": [[0, 188496, 1.0]]}

MALFORMED = {
    # kind: (the target_probs array, the field named, rule fragments)
    "fill_missing": ({k: v for k, v in GOOD.items() if k != "fill"}, "arrays.target_probs.fill", ["missing field"]),
    "entries_missing": ({k: v for k, v in GOOD.items() if k != "entries"}, "arrays.target_probs.entries",
                        ["missing field", "fill and entries"]),
    "data_and_fill": ({**GOOD, "data": []}, "arrays.target_probs.entries", ["unknown field"]),
    "extra_field": ({**GOOD, "order": "C"}, "arrays.target_probs.order", ["unknown field", "fill and entries"]),
    "fill_not_element": ({**GOOD, "fill": [0.0]}, "arrays.target_probs.fill", ["one element of float32"]),
    "fill_wrong_type": ({**GOOD, "dtype": "int32", "fill": 0.5, "entries": []}, "arrays.target_probs.fill",
                        ["integers only"]),
    "entries_not_list": ({**GOOD, "entries": {"0": 1.0}}, "arrays.target_probs.entries", ["must be a list"]),
    "entry_short": ({**GOOD, "entries": [[188496, 1.0]]}, "arrays.target_probs.entries[0]",
                    ["[i0, i1, value]", "2 indices"]),
    "index_past_shape": ({**GOOD, "entries": [[0, 262144, 1.0]]}, "arrays.target_probs.entries[0][1]",
                         ["index 262144", "0..262143"]),
    "index_negative": ({**GOOD, "entries": [[-1, 0, 1.0]]}, "arrays.target_probs.entries[0][0]", ["index -1"]),
    "index_float": ({**GOOD, "entries": [[0, 2.0, 1.0]]}, "arrays.target_probs.entries[0][1]", ["not an integer"]),
    "value_bad": ({**GOOD, "entries": [[0, 1, "one"]]}, "arrays.target_probs.entries[0][2]",
                  ["numbers and \"nan\""]),
    "int_out_of_range": ({"dtype": "int32", "shape": [1, 262144], "fill": 0, "entries": [[0, 1, 2**31]]},
                         "arrays.target_probs.entries[0][2]", ["out of range for int32"]),
    "duplicate_index": ({**GOOD, "entries": [[0, 5, 1.0], [0, 5, 2.0]]}, "arrays.target_probs.entries[1]",
                        ["increasing index order", "each index once"]),
    "unsorted": ({**GOOD, "entries": [[0, 9, 1.0], [0, 5, 2.0]]}, "arrays.target_probs.entries[1]",
                 ["increasing index order"]),
    "zero_d": ({"dtype": "float32", "shape": [], "fill": 0.0, "entries": []}, "arrays.target_probs.fill",
               ["0-d array"]),
    "huge_shape": ({**GOOD, "shape": [1 << 20, 1 << 20]}, "arrays.target_probs", []),
    "contract": ({**GOOD, "shape": [1, 5], "entries": []}, "arrays.target_probs", ["shape"]),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_compact_array_is_one_line(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    array, field, rule = MALFORMED[kind]
    path = tmp_path / "case.json"
    path.write_text(json.dumps(_with(array), indent=2))
    with pytest.raises(UserError) as info:
        load_case(path)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"{path}: {field}"), msg
    for r in rule:
        assert r in msg, f"rule {r!r} not in: {msg}"
    if kind == "index_past_shape":  # the command line: the same line, exit 2, no traceback
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            cli.main(["replay", str(path), "--no-isolate"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err == f"eaglefuzz: error: {msg}\n"


def test_the_good_compact_array_loads(tmp_path: Path) -> None:
    path = tmp_path / "case.json"
    path.write_text(json.dumps(_with(GOOD)))
    probs = load_case(path).arrays["target_probs"]
    assert probs.dtype == np.float32 and probs.shape == (1, 262144)
    assert np.flatnonzero(probs).tolist() == [188496] and probs[0, 188496] == 1.0


def test_a_schema_1_file_keeps_its_nested_lists() -> None:
    case = Case("rejection_random_sample_kernel", load_case(ONE_HOT).arrays, {"max_spec_len": 1, "vocab_size": 262144}, {})
    assert '"fill"' not in encode(case, schema=1) and '"fill"' in encode(case)
