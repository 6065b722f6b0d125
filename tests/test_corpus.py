"""The regression corpus: replay every stored case, check its coverage, and its file format.

* Replay: one item per file under ``corpus/`` (id ``<kernel>/<hash12>``), checked against the
  implementations under test; a file that does not load fails its item with the one-line error.
* Coverage: per target, the corpus reaches every feature of the target's ``features``.
* Format: ``load_case(save_case(case)) == case`` (Hypothesis), names derive from content, and
  every kind of malformed file is a one-line :class:`UserError` naming the file, field and rule.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from eaglefuzz.harness.checking.check import check_case
from eaglefuzz.harness.checking.corpus import (
    CORPUS_DIR,
    DTYPES,
    case_hash,
    decode,
    discover,
    encode,
    load_case,
    load_entry,
    save_case,
)
from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.core.errors import UserError
from eaglefuzz.harness.generation.strategies import Scale, derive_seed
from eaglefuzz.harness.targetkit.base import TritonTarget
from eaglefuzz.harness.targets import TARGETS, ContractViolation, Target

SMALL = Scale(max_requests=4, request_tail=8, max_query_len=16, max_programs=64)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FILES = sorted(CORPUS_DIR.rglob("*.json"))


def _id(path: Path) -> str:
    return path.relative_to(CORPUS_DIR).with_suffix("").as_posix()


def _required(name: str) -> bool:
    """Targets whose corpus must exist: the Triton kernels (others: checked once they have one)."""
    return isinstance(TARGETS[name], TritonTarget)


# -- replay -----------------------------------------------------------------------------


@pytest.mark.kernel
@pytest.mark.parametrize("path", FILES, ids=[_id(p) for p in FILES])
def test_replay(path, subject, backend, journal):
    """A target the bundled copy lacks is replayed against vLLM's pinned release (``subject``)."""
    try:
        entry = load_entry(path)
    except UserError as exc:
        pytest.fail(str(exc), pytrace=False)
    case = entry.case
    impls = subject(case.kernel)
    finding = check_case(case, impls, backend.device, journal, domain=entry.tier)  # a process death names the case
    if finding is not None:
        pytest.fail(f"{path}: {case.note}\n{finding.report()}", pytrace=False)


# -- coverage and naming ----------------------------------------------------------------


def _corpus_cases(name: str) -> list[Case]:
    """The production-tier cases of ``name``'s corpus (extended-tier ones have edges, not features)."""
    folder = CORPUS_DIR / name
    if not folder.is_dir():
        if _required(name):
            pytest.fail(f"{name} has no corpus: add cases under {folder} (see corpus/README.md)", pytrace=False)
        pytest.skip(f"{name} has no corpus folder yet")
    try:
        return [e.case for e in map(load_entry, discover([folder])) if e.tier == "production"]
    except UserError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_corpus_reaches_every_feature(name):
    target = TARGETS[name]
    reached: set[str] = set()
    for case in _corpus_cases(name):
        assert case.kernel == name, f"a {case.kernel} case is filed under corpus/{name}/"
        reached |= target.features_of(case)
    # production-scale features need tables of 8 GiB: no corpus case replayed on a CPU has them
    missing = sorted(set(target.features) - set(target.scale_features) - reached)
    assert not missing, f"corpus/{name}/ reaches no case with: " + "; ".join(
        f"{f} ({target.features[f]})" for f in missing
    )
    assert reached <= set(target.features), f"features_of returned unknown names: {sorted(reached - set(target.features))}"


def test_file_names_derive_from_content():
    assert CORPUS_DIR == Path(__file__).resolve().parent.parent / "corpus"
    for path in FILES:
        try:
            entry = load_entry(path)
        except UserError as exc:
            pytest.fail(str(exc), pytrace=False)
        assert path.parent.name == entry.case.kernel, f"{path}: filed under the wrong kernel"
        assert path.stem == case_hash(entry.case), f"{path}: its name is not the hash of its content"
        assert path.read_text(encoding="utf-8") == encode(
            entry.case, entry.finding or None, tier=entry.tier, schema=entry.schema
        ), f"{path}: not in the canonical layout of its schema (rewrite it with save_case)"
        assert entry.schema == 1 or entry.tier == TARGETS[entry.case.kernel].tier_of(entry.case, "extended"), (
            f"{path}: tier {entry.tier} is not the case's own"
        )


# -- round trip -------------------------------------------------------------------------


def _roundtrip(case: Case) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = save_case(case, d)
        assert path == Path(d) / case.kernel / f"{case_hash(case)}.json"
        back = load_case(path)
        assert back == case
        assert back.note == case.note
        again = save_case(case.replace(note=case.note + " (again)"), d)
        assert again == path
        assert sorted(p.name for p in Path(d).rglob("*")) == sorted([case.kernel, path.name]), "one file, no leftovers"
        assert load_case(path).note == case.note, "an existing file is kept as it is"


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_round_trip_of_target_cases(name, fuzz_seed):
    @seed(derive_seed(fuzz_seed, "corpus-round-trip", name))
    @given(TARGETS[name].strategy(SMALL), st.text(max_size=30))
    def run(case, note):
        _roundtrip(case.replace(note=note))

    run()


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_round_trip_with_a_finding(name, tmp_path):
    case = TARGETS[name].random_case(np.random.default_rng(7), SMALL)
    finding = {"report": "line 1\nline 2 \u2014 \"quoted\"", "replay": "eaglefuzz replay x.json",
               "found_by": "test", "found_at": "2025-01-01T00:00:00+00:00"}
    path = save_case(case, tmp_path, finding=finding)
    entry = load_entry(path)
    assert entry.case == case and dict(entry.finding) == finding and entry.path == path


def _elements(dtype: np.dtype) -> st.SearchStrategy[Any]:
    if dtype == np.bool_:
        return st.booleans()
    if dtype.kind == "f":  # NaN round-trips as a NaN, but a case holding one never equals itself
        return st.floats(width=dtype.itemsize * 8, allow_nan=False)
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    edges = sorted({v for v in (lo, lo + 1, -1, 0, 1, hi - 1, hi) if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


@st.composite
def _arrays(draw: st.DrawFn) -> np.ndarray:
    dtype = DTYPES[draw(st.sampled_from(sorted(DTYPES)))]
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=6))
    return draw(hnp.arrays(dtype, shape, elements=_elements(dtype)))


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(),
    st.text(max_size=10),
    st.floats(allow_nan=False, allow_infinity=False),
)


@seed(20250101)
@given(
    st.dictionaries(st.text(min_size=1, max_size=12), _arrays(), max_size=4),
    st.dictionaries(st.text(min_size=1, max_size=12), _SCALARS, max_size=4),
    st.dictionaries(st.text(min_size=1, max_size=12), _SCALARS, max_size=3),
    st.text(max_size=20),
)
def test_format_round_trip_any_arrays(arrays, scalars, launch, note):
    """Format level (no contract): every dtype, 0-d to 2-D, empty arrays, the integer limits."""
    case = Case(sorted(TARGETS)[0], arrays, scalars, launch, note)
    text = encode(case)
    back = decode(text, "mem.json", contract=False).case
    assert back == case and back.note == note
    assert all(back.arrays[n].shape == a.shape for n, a in arrays.items())
    assert json.loads(text)["schema"] == 2 and json.loads(text)["tier"] == "production"
    old = encode(case, schema=1)  # a schema-1 file of the same case loads alike
    assert "tier" not in json.loads(old) and decode(old, "old.json", contract=False).case == case


def test_int64_limits_are_stored_exactly():
    arr = np.array([INT64_MIN, INT64_MIN + 1, -1, 0, INT64_MAX - 1, INT64_MAX], dtype=np.int64)
    case = Case(sorted(TARGETS)[0], {"p": arr, "q": arr.reshape(2, 3), "b": np.array([[True], [False]])})
    text = encode(case)
    assert '"data": [-9223372036854775808, -9223372036854775807, -1, 0, 9223372036854775806, 9223372036854775807]' in text
    assert '"data": [[true], [false]]' in text
    back = decode(text, "mem.json", contract=False).case
    assert back.arrays["p"].dtype == np.int64 and back.arrays["p"].tolist() == arr.tolist()
    assert back.arrays["q"].tolist() == arr.reshape(2, 3).tolist()


def test_name_ignores_note_and_key_order():
    name = sorted(TARGETS)[0]
    a = Case(name, {"x": np.array([1], dtype=np.int32), "y": np.array([2], dtype=np.int64)}, {"s": 1, "t": None})
    b = Case(name, {"y": np.array([2], dtype=np.int64), "x": np.array([1], dtype=np.int32)}, {"t": None, "s": 1}, {}, "other note")
    assert case_hash(a) == case_hash(b)
    assert case_hash(a) != case_hash(a.replace(arrays={"x": np.array([1], dtype=np.int64)}))
    assert case_hash(a) != case_hash(a.replace(scalars={"s": True}))


def test_save_refuses_a_case_outside_the_contract(tmp_path):
    name = next(n for n in sorted(TARGETS) if _required(n))
    case = TARGETS[name].random_case(np.random.default_rng(3), SMALL)
    dropped = sorted(case.arrays)[0]
    bad = Case(case.kernel, {k: v for k, v in case.arrays.items() if k != dropped}, case.scalars, case.launch)
    with pytest.raises(UserError, match=f"arrays.{dropped}"):
        save_case(bad, tmp_path)
    assert not list(tmp_path.rglob("*")), "nothing written"


# -- malformed files --------------------------------------------------------------------


class _Fake(Target):
    """A target for format tests: ``ids`` (int32) and ``mask`` (bool), ``n == len(ids)``."""

    name = "fake_kernel_for_corpus_tests"
    kind = "test double"
    features = {"any": "any case"}

    def production_rules(self, case):
        if "ids" not in case.arrays:
            raise ContractViolation("arrays.ids", "is required")
        if case.scalars.get("n") != len(case.arrays["ids"]):
            raise ContractViolation("scalars.n", "must equal len(arrays.ids)")
        if case.scalars.get("n") == 99:
            raise TypeError("unexpected")

    def features_of(self, case):
        return frozenset({"any"})

    def strategy(self, scale):
        raise NotImplementedError

    def random_case(self, rng, scale):
        raise NotImplementedError

    def check(self, case, impl, device):
        raise NotImplementedError

    def oracle_check(self, case):
        raise NotImplementedError

    def output_tokens(self, case):
        return 0


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setitem(TARGETS, _Fake.name, _Fake())
    return _Fake.name


def _good_doc(kernel: str) -> dict[str, Any]:
    case = Case(
        kernel,
        {"ids": np.array([1, 2, 3], dtype=np.int32), "mask": np.array([True, False], dtype=np.bool_),
         "wide": np.array([INT64_MIN, INT64_MAX], dtype=np.int64),
         "probs": np.array([0.5, -np.inf, np.nan], dtype=np.float32)},
        {"n": 3},
        {"grid": None},
        "a good case",
    )
    return json.loads(encode(case))


def _load_error(path: Path, field: str, *rule: str) -> str:
    with pytest.raises(UserError) as info:
        load_case(path)
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}: "), msg
    assert field in msg, f"field {field!r} not named in: {msg}"
    for r in rule:
        assert r in msg, f"rule {r!r} not mentioned in: {msg}"
    return msg


def _set(path: str, value: Any) -> Callable[[dict], None]:
    keys = path.split("/")

    def mutate(doc: dict) -> None:
        d = doc
        for k in keys[:-1]:
            d = d[int(k)] if isinstance(d, list) else d[k]
        if value is _DELETE:
            del d[keys[-1]]
        elif isinstance(d, list):
            d[int(keys[-1])] = value
        else:
            d[keys[-1]] = value

    return mutate


_DELETE = object()

MALFORMED = {
    # kind: (mutation of a good document, field named, rule fragments)
    "schema_missing": (_set("schema", _DELETE), "schema", ["missing field"]),
    "schema_unknown": (_set("schema", 3), "schema", ["unknown schema version 3"]),
    "tier_unknown": (_set("tier", "beyond"), "tier", ["is not a tier", "production, extended"]),
    "tier_missing": (_set("tier", _DELETE), "tier", ["missing field", "schema 2"]),
    "tier_in_schema_1": (_set("schema", 1), "tier", ["unknown top-level field in schema 1"]),
    "schema_not_int": (_set("schema", "1"), "schema", ["unknown schema version"]),
    "kernel_unknown": (_set("kernel", "no_such_kernel"), "kernel", ["unknown kernel", *sorted(TARGETS)]),
    "field_missing": (_set("launch", _DELETE), "launch", ["missing field"]),
    "field_extra": (_set("comment", "hi"), "comment", ["unknown top-level field"]),
    "note_not_string": (_set("note", 3), "note", ["must be a string"]),
    "arrays_not_object": (_set("arrays", []), "arrays", ["must be an object"]),
    "array_key_missing": (_set("arrays/ids/shape", _DELETE), "arrays.ids.shape", ["missing field"]),
    "array_key_extra": (_set("arrays/ids/order", "C"), "arrays.ids.order", ["unknown field"]),
    "dtype_unknown": (_set("arrays/ids/dtype", "float16"), "arrays.ids.dtype", ["not an allowed dtype", "int32"]),
    "shape_not_list": (_set("arrays/ids/shape", 3), "arrays.ids.shape", ["non-negative integers"]),
    "shape_mismatch_length": (_set("arrays/ids/shape", [4]), "arrays.ids.data", ["shape mismatch"]),
    "shape_mismatch_rank": (_set("arrays/ids/shape", [3, 1]), "arrays.ids.data[0]", ["shape mismatch"]),
    "shape_mismatch_nested": (_set("arrays/ids/data/1", [2]), "arrays.ids.data[1]", ["shape mismatch"]),
    "element_float": (_set("arrays/ids/data/1", 2.5), "arrays.ids.data[1]", ["integers only"]),
    "element_integral_float": (_set("arrays/ids/data/2", 3.0), "arrays.ids.data[2]", ["integers only"]),
    "element_string": (_set("arrays/ids/data/0", "1"), "arrays.ids.data[0]", ["integers only"]),
    "element_bool_in_int": (_set("arrays/ids/data/0", True), "arrays.ids.data[0]", ["integers only"]),
    "element_int_in_bool": (_set("arrays/mask/data/1", 0), "arrays.mask.data[1]", ["true/false only"]),
    "int32_above_range": (_set("arrays/ids/data/2", 2**31), "arrays.ids.data[2]", ["out of range for int32"]),
    "int32_below_range": (_set("arrays/ids/data/0", -(2**31) - 1), "arrays.ids.data[0]", ["out of range for int32"]),
    "int64_above_range": (_set("arrays/wide/data/1", 2**63), "arrays.wide.data[1]", ["out of range for int64"]),
    "int64_below_range": (_set("arrays/wide/data/0", -(2**63) - 1), "arrays.wide.data[0]", ["out of range for int64"]),
    "float_element_string": (_set("arrays/probs/data/2", "NaN"), "arrays.probs.data[2]", ['"nan", "inf", "-inf" only']),
    "float_element_bool": (_set("arrays/probs/data/0", True), "arrays.probs.data[0]", ["numbers and"]),
    "float_element_list": (_set("arrays/probs/data/1", [1.0]), "arrays.probs.data[1]", ["shape mismatch"]),
    "float_int_past_float64": (_set("arrays/probs/data/0", 10**400), "arrays.probs.data[0]",
                               ["past float64's range", '"inf"']),
    "scalar_list": (_set("scalars/n", [3]), "scalars.n", ["must be an integer"]),
    "launch_object": (_set("launch/grid", {"x": 1}), "launch.grid", ["must be an integer"]),
    "finding_unknown_key": (_set("finding", {"blame": "x"}), "finding.blame", ["unknown field"]),
    "finding_not_string": (_set("finding", {"report": 1}), "finding.report", ["must be a string"]),
    "contract_violation": (_set("scalars/n", 4), "scalars.n", ["must equal len(arrays.ids)"]),
    "contract_missing_array": (_set("arrays/ids", _DELETE), "arrays.ids", ["is required"]),
    "contract_check_crashes": (_set("scalars/n", 99), "(case)", ["outside", "TypeError"]),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_file(kind, fake, tmp_path):
    mutate, field, rule = MALFORMED[kind]
    doc = _good_doc(fake)
    if kind == "contract_check_crashes":
        doc["arrays"]["ids"] = {"dtype": "int32", "shape": [99], "data": list(range(99))}
    mutate(doc)
    path = tmp_path / "case.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    _load_error(path, field, *rule)


def test_good_document_loads(fake, tmp_path):
    path = tmp_path / "case.json"
    path.write_text(json.dumps(_good_doc(fake)), encoding="utf-8")
    case = load_case(path)
    assert case.arrays["wide"].tolist() == [INT64_MIN, INT64_MAX] and case.note == "a good case"
    assert case.arrays["probs"].tobytes() == np.array([0.5, -np.inf, np.nan], np.float32).tobytes()


def test_a_float_element_reads_as_float_reads_it_then_rounds_to_the_dtype(fake, tmp_path):
    doc = _good_doc(fake)
    doc["arrays"]["probs"] = {"dtype": "float32", "shape": [2, 3],
                              "data": [[3, 2**24 + 1, 1e39], ["-inf", -(2**70), 2**1023]]}
    path = tmp_path / "case.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    got = load_case(path).arrays["probs"]
    want = np.array([[3.0, 2.0**24, np.inf], [-np.inf, -(2.0**70), np.inf]], np.float32)
    assert got.dtype == np.float32 and got.shape == (2, 3) and got.tobytes() == want.tobytes()


@pytest.mark.parametrize(
    "text, field, rule",
    [
        ('{"schema": 1,\n  "kernel": }', "line 2 column 13", "malformed JSON"),
        ('{"schema": 1, "schema": 1}', "schema", "duplicate key"),
        ('{"schema": NaN}', "(document)", "NaN"),
        ("", "line 1 column 1", "malformed JSON"),
        ("[1, 2]", "(top level)", "must be a JSON object"),
        ('"case"', "(top level)", "must be a JSON object"),
    ],
    ids=["syntax", "duplicate_key", "nan", "empty", "list", "string"],
)
def test_malformed_json(text, field, rule, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    _load_error(path, field, rule)


def test_not_utf8(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"note": "\xff"}')
    _load_error(path, "byte", "not UTF-8")


def test_real_contract_violation_names_the_field(tmp_path):
    """A seed file with one required array removed: the target's own rule comes through."""
    source = next(p for p in FILES if _required(p.parent.name))
    doc = json.loads(source.read_text(encoding="utf-8"))
    dropped = sorted(doc["arrays"])[0]
    del doc["arrays"][dropped]
    path = tmp_path / "case.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _load_error(path, f"arrays.{dropped}", "required")


NT = "eagle_prepare_next_token_padded_kernel"


def _wide_rows(tier: str, S: int) -> dict[str, Any]:
    """A corpus document of NT: one request of S sampled ids (the first valid, the rest -1),
    in the compact form, of ``tier``."""
    return {
        "schema": 2, "kernel": NT, "tier": tier,
        "arrays": {
            "backup_next_token_ids": {"dtype": "int32", "shape": [1], "data": [5]},
            "discard_request_mask": {"dtype": "bool", "shape": [1], "data": [False]},
            "sampled_token_ids": {"dtype": "int32", "shape": [1, S], "fill": -1, "entries": [[0, 0, 7]]},
        },
        "scalars": {"num_reqs": 1, "num_sampled_tokens_per_req": S, "vocab_size": 32000},
        "launch": {"block_size_tokens": None, "grid_size": None},
    }


@pytest.mark.parametrize("tier", ["production", "extended"])
def test_a_case_no_backend_can_launch_lies_in_no_tier(tier, tmp_path, capsys):
    """``num_sampled_tokens_per_req = 3000000`` asks vLLM's launch for a block of 2**22 lanes,
    which Triton refuses on every backend: replayed, it was a production contract violation
    (a crash). vLLM's sampler takes at most 128 drafts (S <= 129); the extended tier goes to
    S = 256: the file is one line naming the field, exit 2, and nothing runs."""
    from eaglefuzz.harness import cli

    for S, ok in ((129, True), (256, tier == "extended"), (3000000, False)):
        path = tmp_path / f"{tier}-{S}.json"
        path.write_text(json.dumps(_wide_rows(tier, S)), encoding="utf-8")
        if ok:
            assert load_entry(path).tier == tier
            continue
        with pytest.raises(SystemExit) as exc:
            cli.main(["replay", str(path), "--no-isolate"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1, err
        assert f"{path}: scalars.num_sampled_tokens_per_req: must be from " in err, err


def test_a_scalar_out_of_range_is_named_before_the_arrays_it_sizes(tmp_path):
    """``num_reqs = -3`` was reported against ``arrays.sampled_token_ids`` (whose rows did not
    match it): the rule broken is the scalar's."""
    doc = _wide_rows("production", 2)
    doc["scalars"]["num_reqs"] = -3
    path = tmp_path / "case.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    _load_error(path, "scalars.num_reqs", ">= 1")


# -- discover ---------------------------------------------------------------------------


def test_discover_files_and_folders(tmp_path):
    (tmp_path / "k" / "sub").mkdir(parents=True)
    for rel in ("k/b.json", "k/a.json", "k/sub/c.json", "k/notes.txt", "k/.a.tmp"):
        (tmp_path / rel).write_text("{}")
    found = discover([tmp_path / "k", tmp_path / "k" / "a.json"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["k/a.json", "k/b.json", "k/sub/c.json"]


@pytest.mark.parametrize(
    "make, rule",
    [
        (lambda d: d / "missing.json", "does not exist"),
        (lambda d: (d / "case.txt").write_text("{}") and d / "case.txt", "end in .json"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "no cases"),
    ],
    ids=["missing", "not_json", "empty_folder"],
)
def test_discover_errors(make, rule, tmp_path):
    path = make(tmp_path)
    with pytest.raises(UserError) as info:
        discover([path])
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and rule in msg, msg


def test_a_large_arrays_name_is_hashed_once_and_follows_its_bytes():
    """A production-scale case is named several times (saved, looked up, reported): its large
    arrays' SHA-256 is kept for the array, and a write to the array after that is still seen."""
    from eaglefuzz.harness.checking import corpus
    from eaglefuzz.harness.core.case import Case

    a = np.zeros(corpus.DIGEST_FROM, dtype=np.float32)
    case = Case("rejection_random_sample_kernel", {"target_probs": a}, {}, {})
    first = corpus.case_hash(case)
    assert id(a) in corpus._DIGESTS and corpus.case_hash(case) == first
    a[-1] = 1
    assert corpus.case_hash(case) != first
    assert corpus.case_hash(Case(case.kernel, {"target_probs": np.zeros_like(a)}, {}, {})) == first
