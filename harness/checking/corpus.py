"""The regression corpus: one case per JSON file under ``corpus/<kernel>/``, named by content.

A file holds one :class:`~..core.case.Case` (schema 2, see ``corpus/README.md``): plain JSON, a
stable key order, two-space indent and one array per line, so it reads and diffs well. Schema
2 adds the case's domain tier (``production`` or ``extended``, :mod:`.domains`); a schema-1
file (no tier) still loads, as a production case. A large array that is mostly one value is
written in schema 2's compact form (its fill and the entries that differ: :func:`compact_form`);
the name does not depend on the form. The name is ``<hash12>.json``: the first 12
hex digits of the SHA-256 of the canonical JSON of ``(schema 1, kernel, arrays, scalars,
launch)``; the note, the finding and the tier are not part of it (the tier follows from the
content), so the same case is stored once whatever was said about it, and the names of
schema-1 files stay valid.

Loading parses JSON and nothing else (no eval, no pickle) and checks every field; any
problem is a :class:`~..core.errors.UserError` whose one line names the file, the field and the
rule broken. A loaded case lies in its tier: its target's ``validate(case, tier)`` has
accepted it; and it is within the cost limits of
:mod:`..core.limits` (file size, array lengths, grid, bytes), so loading a file can never make a
run hang or exhaust memory.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.case import Case
from ..core.errors import UserError
from ..core.lazy import zero_sparse
from ..core.limits import LimitExceeded, Limits, check_file_size, check_shape, current, parse
from ..core.paths import CORPUS_DIR as CORPUS_DIR  # the regression corpus, re-exported
from ..core.paths import findings_corpus

if TYPE_CHECKING:
    from .check import Finding

SCHEMA = 2
"""The schema version this eaglefuzz writes; it reads :data:`SCHEMAS`."""
SCHEMAS = (1, 2)
NAME_SCHEMA = 1
"""The schema version in the canonical JSON that names a file (fixed, so names never change)."""
TIERS = ("production", "extended")

DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
FLOATS = ("float32", "float64")
_RANGES = {name: (int(np.iinfo(dt).min), int(np.iinfo(dt).max)) for name, dt in DTYPES.items()
           if name not in ("bool", *FLOATS)}
NON_FINITE = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}
"""How a float array's non-finite elements are written (JSON has no NaN): as these strings."""

REQUIRED = ("schema", "kernel", "arrays", "scalars", "launch")
REQUIRED_BY_SCHEMA = {1: REQUIRED, 2: ("schema", "kernel", "tier", "arrays", "scalars", "launch")}
OPTIONAL = ("note", "finding")
FIELD_ORDER = ("schema", "kernel", "tier", "note", "arrays", "scalars", "launch", "finding")
FINDING_FIELDS = ("report", "replay", "found_by", "found_at")
ARRAY_FIELDS = ("dtype", "shape", "data")
COMPACT_FIELDS = ("dtype", "shape", "fill", "entries")
"""The compact form of an array (schema 2): a fill value and the entries that differ from it."""
COMPACT_MIN = 128
"""An array of at least this many elements, of which at most :data:`COMPACT_SHARE` differ from
its most common value, is written in the compact form (schema 2); every other array, and every
array of a schema-1 file, as nested ``data`` lists."""
COMPACT_SHARE = 1 / 16


@dataclass(frozen=True)
class Entry:
    """One corpus file: its case, and the finding recorded with it (if any)."""

    case: Case
    finding: Mapping[str, str] = field(default_factory=dict)
    path: Path | None = None
    tier: str = "production"
    """The domain tier the file gives (schema 1: ``production``)."""
    schema: int = SCHEMA
    """The schema version of the file."""


# -- encoding ---------------------------------------------------------------------------


def _encode_array(name: str, arr: Any) -> dict[str, Any]:
    if not isinstance(arr, np.ndarray):
        raise UserError(f"case: arrays.{name}: must be a NumPy array, not {type(arr).__name__}")
    if arr.dtype.name not in DTYPES or arr.dtype != DTYPES[arr.dtype.name]:
        raise UserError(f"case: arrays.{name}: dtype {arr.dtype} is not one of {', '.join(DTYPES)}")
    data = _float_data(arr) if arr.dtype.name in FLOATS else arr.tolist()
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "data": data}


def _element(x: np.generic) -> Any:
    """One element as JSON (a float as :func:`_float_element` writes it)."""
    return _float_element(x) if x.dtype.name in FLOATS else x.item()


def _bits(flat: np.ndarray) -> np.ndarray:
    """The elements' bit patterns (so that ``-0.0`` and ``0.0``, or two NaNs, are told apart
    exactly as their bytes are)."""
    return flat if flat.dtype == np.bool_ else flat.view(np.dtype(f"u{flat.dtype.itemsize}"))


SORT_FREE = 1 << 22
"""Arrays of at least this many elements find their most common value without sorting."""


def _sparse_where(bits: np.ndarray) -> tuple[np.ndarray, int] | None:
    """For an array of at least :data:`SORT_FREE` elements whose most common value (bits) holds
    more than half of them: the indices of the other elements and the index of one holding that
    value; else ``None`` (the caller then sorts). A value held by more than half the elements is the unique most common one, so the
    result is what sorting would give."""
    if bits.size < SORT_FREE:
        return None
    sample = bits[:: bits.size // 4096]
    values, counts = np.unique(sample, return_counts=True)
    candidate = values[int(np.argmax(counts))]
    lazy = zero_sparse(bits) if candidate == 0 else None  # a table of zeros with a few live rows
    if lazy is not None:
        return lazy
    where = np.flatnonzero(bits != candidate)
    return (where, int(np.argmax(bits == candidate))) if 2 * where.size < bits.size else None


def compact_form(arr: np.ndarray) -> dict[str, Any] | None:
    """``arr`` in the compact form (``fill``: its most common value, the smallest bit pattern
    of those equally common; ``entries``: ``[i0, ..., value]`` for every element that is not
    the fill, in index order), or ``None`` when :data:`COMPACT_MIN` and :data:`COMPACT_SHARE`
    say it is written as nested lists."""
    if arr.size < COMPACT_MIN or arr.ndim == 0:
        return None
    flat = np.ascontiguousarray(arr).reshape(-1)
    bits = _bits(flat)
    sparse = _sparse_where(bits)  # a large array: without sorting its billions of elements
    if sparse is None:
        values, first, counts = np.unique(bits, return_index=True, return_counts=True)
        k = int(np.argmax(counts))  # the first of the most common, in bit order
        if arr.size - int(counts[k]) > arr.size * COMPACT_SHARE:
            return None
        fill = flat[first[k]]
        where = np.flatnonzero(bits != values[k])
    else:
        where, fill = sparse[0], flat[sparse[1]]
        if where.size > arr.size * COMPACT_SHARE:
            return None
    index = np.stack(np.unravel_index(where, arr.shape), axis=1).tolist()
    values = _float_elements(flat[where]) if arr.dtype.name in FLOATS else flat[where].tolist()
    entries = [[*i, v] for i, v in zip(index, values, strict=True)]
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "fill": _element(fill), "entries": entries}


def _float_element(x: np.floating) -> float | str:
    """A float element as JSON: the shortest decimal that reads back as the same value of its
    dtype (``-0.0`` kept), or ``"nan"``, ``"inf"``, ``"-inf"`` (a NaN's payload is not kept)."""
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    short = float(str(x))
    return short if np.array(short, dtype=x.dtype).tobytes() == x.tobytes() else float(x)


SHORTEST_UP_TO = 4096
"""Float arrays of at most this many elements are written in their shortest decimals; larger
ones (probability tables) as the exact float64 value of each element, which is much faster."""


def _float_elements(flat: np.ndarray, exact: np.ndarray | None = None) -> list[float | str]:
    """:func:`_float_element` of each element of the 1-D ``flat`` (``exact``: where to write
    the exact float64 value instead of the shortest decimal), at NumPy's speed: NumPy's text of
    a float array is each element's ``str``, and its text-to-float64 conversion is ``float``'s."""
    finite = np.isfinite(flat)
    out = flat.astype(np.float64)  # the exact values
    shortest = finite if exact is None else finite & ~exact
    if shortest.any():
        x = flat[shortest]
        short = x.astype(str).astype(np.float64)
        back = short.astype(flat.dtype)
        out[shortest] = np.where(_bits(back) == _bits(x), short, out[shortest])
    items = out.tolist()
    if not finite.all():
        for text, where in (("nan", np.isnan(flat)), ("inf", flat == np.inf), ("-inf", flat == -np.inf)):
            for i in np.flatnonzero(where).tolist():
                items[i] = text
    return items


def _float_data(arr: np.ndarray) -> Any:
    """A float array's ``data``: nested lists of :func:`_float_element`, but for each sub-array
    (the array, its rows, their rows...) of more than :data:`SHORTEST_UP_TO` elements, all
    finite, whose elements are written as their exact float64 values."""
    if arr.size > SHORTEST_UP_TO and np.isfinite(arr).all():
        return arr.astype(np.float64).tolist()
    if arr.ndim == 0:
        return _float_element(arr[()])
    flat = np.ascontiguousarray(arr).reshape(-1)
    exact = np.zeros(flat.size, dtype=bool)
    finite = np.isfinite(flat)
    for d in range(1, arr.ndim):  # the sub-arrays of depth d: math.prod(arr.shape[:d]) of them
        size = math.prod(arr.shape[d:])
        if size > SHORTEST_UP_TO:
            whole = finite.reshape(-1, size).all(axis=1)
            exact |= np.repeat(whole, size)
    items = _float_elements(flat, exact)
    if arr.ndim == 1:
        return items
    nested = np.empty(flat.size, dtype=object)
    nested[:] = items
    return nested.reshape(arr.shape).tolist()


def _plain(value: Any) -> Any:
    """A scalar as a plain JSON value (NumPy scalars become Python ones)."""
    if isinstance(value, np.generic):
        return value.item()
    return value


DIGEST_FROM = 1 << 22
"""Arrays of at least this many elements (production-scale tables: billions; the default cost
limit of a corpus file's arrays is this) are named by the SHA-256 of their bytes, not by their
data as text (which would be tens of gigabytes)."""


class TooLarge(OSError):
    """A case that cannot be stored: an array of :data:`DIGEST_FROM` elements or more that is
    not mostly one value (its file would hold billions of numbers)."""


_DIGESTS: dict[int, tuple[Any, tuple[Any, ...], str]] = {}
"""SHA-256 of large arrays already hashed: ``id(array) -> (weak reference, layout, digest)``.
A production-scale finding's case is named several times (saved, its path looked up, reported)
and each hash reads gigabytes; an array of a case is not written after the case is made."""


def _digest(arr: np.ndarray) -> str:
    import weakref

    if not arr.flags.c_contiguous:
        layout = None
    else:  # where it lies, and a sample of its elements (a write after the hash is not expected, but seen)
        flat = arr.reshape(-1)
        layout = (arr.__array_interface__["data"][0], arr.shape, arr.dtype.str,
                  hashlib.sha256(flat[:: max(1, flat.size // 4096)].tobytes() + flat[-1:].tobytes()).hexdigest())
    known = _DIGESTS.get(id(arr)) if layout is not None else None
    if known is not None and known[0]() is arr and known[1] == layout:
        return known[2]
    flat = np.ascontiguousarray(arr).reshape(-1)
    digest = hashlib.sha256()
    for i in range(0, flat.size, DIGEST_FROM):
        digest.update(flat[i : i + DIGEST_FROM].tobytes())
    key = id(arr)
    try:
        if layout is not None:
            _DIGESTS[key] = (weakref.ref(arr, lambda _, k=key: _DIGESTS.pop(k, None)), layout, digest.hexdigest())
    except TypeError:  # an array type without weak references: not kept
        pass
    return digest.hexdigest()


def _name_array(name: str, arr: np.ndarray) -> dict[str, Any]:
    if isinstance(arr, np.ndarray) and arr.size >= DIGEST_FROM:
        return {"dtype": arr.dtype.name, "shape": list(arr.shape), "sha256": _digest(arr)}
    return _encode_array(name, arr)


def _payload(case: Case) -> dict[str, Any]:
    """The content that names a case: everything but the note, the finding and the tier."""
    return {
        "schema": NAME_SCHEMA,
        "kernel": case.kernel,
        "arrays": {n: _name_array(n, case.arrays[n]) for n in sorted(case.arrays)},
        "scalars": {k: _plain(case.scalars[k]) for k in sorted(case.scalars)},
        "launch": {k: _plain(case.launch[k]) for k in sorted(case.launch)},
    }


def canonical_json(case: Case) -> str:
    """The canonical text whose hash names ``case``: sorted keys, no spaces, ASCII only."""
    return json.dumps(_payload(case), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def case_hash(case: Case) -> str:
    """First 12 hex digits of the SHA-256 of :func:`canonical_json`."""
    return hashlib.sha256(canonical_json(case).encode("ascii")).hexdigest()[:12]


def case_path(case: Case, root: Path | str | None = None) -> Path:
    """Where ``case`` is stored under ``root`` (default :func:`~..core.paths.findings_corpus`):
    ``<root>/<kernel>/<hash12>.json``."""
    return Path(findings_corpus() if root is None else root) / case.kernel / f"{case_hash(case)}.json"


def _line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _object(d: Mapping[str, Any], indent: str) -> str:
    if not d:
        return "{}"
    inner = indent + "  "
    items = [f"{inner}{_line(k)}: {_line(v)}" for k, v in d.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def tier_of(case: Case) -> str:
    """The domain tier of ``case`` (``production`` when it lies in neither: loading says why)."""
    from ..targets import TARGETS

    try:
        return TARGETS[case.kernel].tier_of(case, "extended")
    except Exception:  # noqa: BLE001 - outside every tier: decode() reports the rule broken
        return "production"


def encode(
    case: Case, finding: Mapping[str, str] | None = None, *, tier: str | None = None, schema: int = SCHEMA
) -> str:
    """The text of ``case``'s corpus file, ending in a newline.

    Schema 2 (the default) records ``tier`` (by default the case's own, :func:`tier_of`);
    ``schema=1`` gives the layout of a schema-1 file (no tier).
    """
    doc: dict[str, Any] = {"schema": schema, "kernel": case.kernel}
    if schema >= 2:
        doc["tier"] = tier if tier is not None else tier_of(case)
    doc["note"] = case.note
    arrays = {}
    for n in sorted(case.arrays):
        a = case.arrays[n]
        arrays[n] = compact_form(a) if schema >= 2 and isinstance(a, np.ndarray) else None
        if arrays[n] is None:
            if isinstance(a, np.ndarray) and a.size >= DIGEST_FROM:
                raise TooLarge(f"arrays.{n}: {a.size} elements, not mostly one value: too large to store as text")
            arrays[n] = _encode_array(n, a)
    doc.update(arrays=arrays, scalars={k: _plain(case.scalars[k]) for k in sorted(case.scalars)},
               launch={k: _plain(case.launch[k]) for k in sorted(case.launch)})
    if finding:
        doc["finding"] = {k: finding[k] for k in FINDING_FIELDS if k in finding}
        doc["finding"].update({k: v for k, v in finding.items() if k not in FINDING_FIELDS})
    parts = []
    for key in FIELD_ORDER:
        if key not in doc:
            continue
        value = doc[key]
        text = _object(value, "  ") if isinstance(value, dict) else _line(value)
        parts.append(f"  {_line(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def finding_record(finding: Any, *, found_by: str | None = None, replay: str | None = None) -> dict[str, str]:
    """The ``finding`` field for a :class:`~.check.Finding`: its report, origin and time."""
    rec = {"report": finding.report()}
    if replay is not None:
        rec["replay"] = replay
    rec["found_by"] = found_by if found_by is not None else f"eaglefuzz ({finding.origin})"
    rec["found_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return rec


def save_case(case: Case, root: Path | str | None = None, *, finding: Any = None) -> Path:
    """Store ``case`` as ``<root>/<kernel>/<hash12>.json`` (default root
    :func:`~..core.paths.findings_corpus`) and return that path.

    ``finding``: ``None``, a mapping of the ``finding`` fields, or a :class:`~.check.Finding`
    (see :func:`finding_record`). The case must load back (format and contract are checked
    before anything is written). The write is atomic (a temporary file in the same folder,
    fsync, rename); a file already there is kept as it is, note and finding included.
    """
    if finding is not None and not isinstance(finding, Mapping):
        finding = finding_record(finding)
    path = case_path(case, root)
    text = encode(case, finding)
    from .costs import limits_needed

    try:  # a production-scale case loads with the limits its replay command gives
        need = limits_needed(case)
    except Exception:  # noqa: BLE001 - a case outside its contract: decode() says which rule it breaks
        need = None
    decode(text, str(path), limits=parse(need, current()) if need else None)  # what we write must load
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable; not every platform can open a folder
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return path


# -- decoding ---------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object"}.get(
        type(value), type(value).__name__
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise _Duplicate(k)
        d[k] = v
    return d


class _Duplicate(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _check_scalar(src: str, where: str, value: Any) -> None:
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float) and math.isfinite(value):
        return
    raise UserError(f"{src}: {where}: must be an integer, true/false, null or a string, not {_kind(value)}")


def _check_elements(src: str, where: str, dtype: str, flat: list[Any], base: str) -> None:
    """``flat``: one innermost list; ``base``: the index prefix of its elements."""
    kinds = set(map(type, flat))  # the rules hold for most arrays: checked at C speed first
    if dtype == "bool":
        if kinds <= {bool}:
            return
        i = next(i for i, x in enumerate(flat) if type(x) is not bool)
        raise UserError(f"{src}: {where}.data{base}[{i}]: a bool array holds true/false only, not {_line(flat[i])}")
    if dtype in FLOATS:
        if kinds <= {int, float} or (kinds <= {int, float, str} and
                                      {x for x in flat if type(x) is str} <= NON_FINITE.keys()):
            for i, x in enumerate(flat if int in kinds else ()):
                try:
                    float(x)
                except OverflowError:
                    raise UserError(f"{src}: {where}.data{base}[{i}]: an integer past float64's range "
                                    f"({len(str(abs(x)))} digits); write \"inf\" or \"-inf\"") from None
            return
        bad = next((i for i, x in enumerate(flat)
                    if not (type(x) in (int, float) or (isinstance(x, str) and x in NON_FINITE))), None)
        if bad is None:
            return
        raise UserError(f"{src}: {where}.data{base}[{bad}]: a {dtype} array holds numbers and "
                        f"\"nan\", \"inf\", \"-inf\" only, not {_line(flat[bad])}")
    lo, hi = _RANGES[dtype]
    if kinds <= {int}:
        if not flat or (lo <= min(flat) and max(flat) <= hi):
            return
        i = next(i for i, x in enumerate(flat) if not lo <= x <= hi)
        raise UserError(f"{src}: {where}.data{base}[{i}]: {flat[i]} is out of range for {dtype} ({lo} to {hi})")
    i = next(i for i, x in enumerate(flat) if type(x) is not int)
    raise UserError(f"{src}: {where}.data{base}[{i}]: an {dtype} array holds integers only, not {_line(flat[i])}")


def _check_data(src: str, where: str, dtype: str, data: Any, shape: list[int], base: str = "") -> None:
    if not shape:  # a 0-d array: one element
        _check_elements(src, where, dtype, [data], base)
        return
    if not isinstance(data, list):
        raise UserError(
            f"{src}: {where}.data{base}: shape mismatch: expected a list of {shape[0]}, found {_kind(data)}"
        )
    if len(data) != shape[0]:
        raise UserError(
            f"{src}: {where}.data{base}: shape mismatch: {len(data)} entries where the shape says {shape[0]}"
        )
    if len(shape) == 1:
        if list in set(map(type, data)):
            lists = next(i for i, x in enumerate(data) if isinstance(x, list))
            raise UserError(f"{src}: {where}.data{base}[{lists}]: shape mismatch: a list where the shape says an element")
        _check_elements(src, where, dtype, data, base)
        return
    for i, row in enumerate(data):
        _check_data(src, where, dtype, row, shape[1:], f"{base}[{i}]")


def _decode_compact(src: str, where: str, dtype: str, shape: list[int], spec: dict[str, Any]) -> np.ndarray:
    """The array of a compact form (fill and entries), every field checked."""
    fill, entries = spec["fill"], spec["entries"]
    _check_elements_at(src, f"{where}.fill", dtype, fill)
    if not shape:
        raise UserError(f"{src}: {where}.fill: a 0-d array (shape []) is written with data, not fill and entries")
    if not isinstance(entries, list):
        raise UserError(f"{src}: {where}.entries: must be a list of [index..., value] items, not {_kind(entries)}")
    size = math.prod(shape)
    if len(entries) > size:
        raise UserError(f"{src}: {where}.entries: {len(entries)} entries for {size} elements")
    n = len(shape)
    flat_index = np.empty(len(entries), dtype=np.int64)
    values: list[Any] = []
    for k, item in enumerate(entries):
        at = f"{where}.entries[{k}]"
        if not isinstance(item, list) or len(item) != n + 1:
            raise UserError(f"{src}: {at}: must be [{', '.join(f'i{d}' for d in range(n))}, value] "
                            f"({n} indices for shape {_line(shape)}, then the value), not {_line(item)}")
        for d in range(n):
            i = item[d]
            if type(i) is not int or not 0 <= i < shape[d]:
                raise UserError(f"{src}: {at}[{d}]: index {_line(i)} is not an integer in 0..{shape[d] - 1} "
                                f"(shape[{d}] = {shape[d]})")
        _check_elements_at(src, f"{at}[{n}]", dtype, item[n])
        flat_index[k] = int(np.ravel_multi_index(tuple(item[:n]), shape))
        values.append(item[n])
        if k and flat_index[k] <= flat_index[k - 1]:
            raise UserError(f"{src}: {at}: entries must be in increasing index order (row-major), each "
                            f"index once: {_line(item[:n])} follows {_line(entries[k - 1][:n])}")
    value = _value_of(dtype, fill)
    zero = np.array(value, dtype=DTYPES[dtype]).tobytes() == bytes(DTYPES[dtype].itemsize)
    out = np.zeros(size, dtype=DTYPES[dtype]) if zero else np.full(size, value, dtype=DTYPES[dtype])  # zeros: lazy pages
    if values:
        with np.errstate(over="ignore"):
            out[flat_index] = np.array([_value_of(dtype, v) for v in values], dtype=DTYPES[dtype])
    return out.reshape(shape)


def _value_of(dtype: str, x: Any) -> Any:
    """A checked JSON element as the value NumPy stores (a float's ``"nan"``, ``"inf"`` strings
    read back)."""
    if dtype in FLOATS:
        return NON_FINITE[x] if isinstance(x, str) else float(x)
    return x


def _check_elements_at(src: str, at: str, dtype: str, x: Any) -> None:
    """One element of ``dtype`` at field ``at`` (the rules of :func:`_check_elements`)."""
    if isinstance(x, list | dict):
        raise UserError(f"{src}: {at}: must be one element of {dtype}, not {_kind(x)}")
    try:
        _check_elements("", "", dtype, [x], "")
    except UserError as exc:  # the same rule, named at this field (": .data[0]: RULE")
        rule = str(exc).split(": ", 2)[2]
        raise UserError(f"{src}: {at}: {rule}") from None


def _decode_array(src: str, name: str, spec: Any, limits: Limits | None = None) -> np.ndarray:
    where = f"arrays.{name}"
    if not isinstance(spec, dict):
        raise UserError(f"{src}: {where}: must be an object with dtype, shape and data, not {_kind(spec)}")
    if "data" not in spec and ("fill" in spec or "entries" in spec):
        return _decode_compact_spec(src, name, spec, limits)
    for key in ARRAY_FIELDS:
        if key not in spec:
            raise UserError(f"{src}: {where}.{key}: missing field (an array needs dtype, shape and data)")
    extra = sorted(set(spec) - set(ARRAY_FIELDS))
    if extra:
        raise UserError(f"{src}: {where}.{extra[0]}: unknown field (an array has dtype, shape and data, or "
                        "dtype, shape, fill and entries)")
    dtype, shape, data = spec["dtype"], spec["shape"], spec["data"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise UserError(f"{src}: {where}.dtype: {_line(dtype)} is not an allowed dtype ({', '.join(DTYPES)})")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise UserError(f"{src}: {where}.shape: must be a list of non-negative integers, not {_line(shape)}")
    try:
        check_shape(name, shape, limits)  # before reading the data: a huge shape is refused cheaply
    except LimitExceeded as exc:
        raise UserError(f"{src}: {exc.field}: {exc.rule}") from None
    _check_data(src, where, dtype, data, shape)
    if dtype in FLOATS:  # each element as float() reads it ("nan", "inf", "-inf" included), then rounded
        with np.errstate(over="ignore"):  # a number past float32's range reads as inf, as in NumPy
            return np.array(data, dtype=np.float64).astype(DTYPES[dtype]).reshape(shape)
    return np.array(data, dtype=DTYPES[dtype]).reshape(shape)


def _decode_compact_spec(src: str, name: str, spec: dict[str, Any], limits: Limits | None = None) -> np.ndarray:
    where = f"arrays.{name}"
    for key in COMPACT_FIELDS:
        if key not in spec:
            raise UserError(f"{src}: {where}.{key}: missing field (an array in the compact form needs dtype, "
                            "shape, fill and entries)")
    extra = sorted(set(spec) - set(COMPACT_FIELDS))
    if extra:
        raise UserError(f"{src}: {where}.{extra[0]}: unknown field (an array in the compact form has dtype, "
                        "shape, fill and entries only)")
    dtype, shape = spec["dtype"], spec["shape"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise UserError(f"{src}: {where}.dtype: {_line(dtype)} is not an allowed dtype ({', '.join(DTYPES)})")
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise UserError(f"{src}: {where}.shape: must be a list of non-negative integers, not {_line(shape)}")
    try:
        check_shape(name, shape, limits)
    except LimitExceeded as exc:
        raise UserError(f"{src}: {exc.field}: {exc.rule}") from None
    return _decode_compact(src, where, dtype, shape, spec)


def _check_section(src: str, name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{src}: {name}: must be an object, not {_kind(value)}")
    for k, v in value.items():
        _check_scalar(src, f"{name}.{k}", v)
    return value


def decode(text: str, source: str, *, contract: bool = True, limits: Limits | None = None) -> Entry:
    """Parse and check the text of a corpus file; ``source`` names it in error messages.

    ``contract=False`` skips the target's ``validate`` (format checks only); ``limits``: the cost
    limits to check it against (default: those in force).
    """
    # Imported here: the command line's supervising process imports this module, not the
    # targets (Hypothesis, NumPy's strategies) nor torch.
    from ..targets import TARGETS, ContractViolation
    from .costs import check_cost

    src = source
    try:
        doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"{src}: line {exc.lineno} column {exc.colno}: malformed JSON: {exc.msg}") from None
    except _Duplicate as exc:
        raise UserError(f"{src}: {exc.key}: malformed JSON: duplicate key {exc.key!r}") from None
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{src}: (document): malformed JSON: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(doc, dict):
        raise UserError(f"{src}: (top level): must be a JSON object, not {_kind(doc)}")
    reads = " and ".join(map(str, SCHEMAS))
    if "schema" not in doc:
        raise UserError(f"{src}: schema: missing field (this eaglefuzz reads schemas {reads})")
    if type(doc["schema"]) is not int or doc["schema"] not in SCHEMAS:
        raise UserError(
            f"{src}: schema: unknown schema version {_line(doc['schema'])} (this eaglefuzz reads schemas {reads})"
        )
    schema = doc["schema"]
    required = REQUIRED_BY_SCHEMA[schema]
    extra = [k for k in doc if k not in required + OPTIONAL]
    if extra:
        raise UserError(
            f"{src}: {extra[0]}: unknown top-level field in schema {schema} "
            f"(allowed: {', '.join(required + OPTIONAL)})"
        )
    for key in required:
        if key not in doc:
            raise UserError(f"{src}: {key}: missing field (required in schema {schema}: {', '.join(required)})")
    tier = doc.get("tier", "production")
    if tier not in TIERS:
        raise UserError(f"{src}: tier: {_line(tier)} is not a tier (one of {', '.join(TIERS)})")
    kernel = doc["kernel"]
    if not isinstance(kernel, str) or kernel not in TARGETS:
        raise UserError(f"{src}: kernel: unknown kernel {_line(kernel)} (known: {', '.join(sorted(TARGETS))})")
    note = doc.get("note", "")
    if not isinstance(note, str):
        raise UserError(f"{src}: note: must be a string, not {_kind(note)}")
    arrays_doc = doc["arrays"]
    if not isinstance(arrays_doc, dict):
        raise UserError(f"{src}: arrays: must be an object (name -> array), not {_kind(arrays_doc)}")
    arrays = {name: _decode_array(src, name, spec, limits) for name, spec in arrays_doc.items()}
    scalars = _check_section(src, "scalars", doc["scalars"])
    launch = _check_section(src, "launch", doc["launch"])
    finding = doc.get("finding", {})
    if not isinstance(finding, dict):
        raise UserError(f"{src}: finding: must be an object, not {_kind(finding)}")
    for k, v in finding.items():
        if k not in FINDING_FIELDS:
            raise UserError(f"{src}: finding.{k}: unknown field (allowed: {', '.join(FINDING_FIELDS)})")
        if not isinstance(v, str):
            raise UserError(f"{src}: finding.{k}: must be a string, not {_kind(v)}")
    case = TARGETS[kernel].in_order(Case(kernel, arrays, scalars, launch, note))  # the signature's order, not the file's
    if contract:
        target = TARGETS[kernel]
        try:
            target.validate(case, "extended" if tier == "extended" else "production")
            check_cost(case, limits)  # what running it would cost, before anything runs
        except ContractViolation as exc:
            where = " (extended tier)" if tier == "extended" else ""
            raise UserError(f"{src}: {exc.field}: {exc.rule}{where}") from None
        except (TypeError, ValueError, KeyError, IndexError, OverflowError) as exc:
            raise UserError(
                f"{src}: (case): outside {kernel}'s contract (its check raised "
                f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
            ) from None
    return Entry(case, finding, None, tier, schema)


def load_entry(path: Path | str) -> Entry:
    """Load one corpus file: its case (checked against the format and the contract) and finding."""
    p = Path(path)
    try:
        check_file_size(p.stat().st_size)
        raw = p.read_bytes()
    except OSError as exc:
        raise UserError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except LimitExceeded as exc:
        raise UserError(f"{p}: {exc.field}: {exc.rule}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{p}: byte {exc.start}: malformed JSON: not UTF-8 text") from None
    entry = decode(text, str(p))
    return Entry(entry.case, entry.finding, p, entry.tier, entry.schema)


def load_case(path: Path | str) -> Case:
    """The case stored in ``path``; any problem is a one-line :class:`UserError`."""
    return load_entry(path).case


def discover(paths: Iterable[Path | str]) -> list[Path]:
    """Corpus files named by ``paths``: files as given, folders searched for ``*.json``.

    Folders are searched recursively and their files sorted; a path given twice is listed
    once. A missing path, a file not ending in ``.json`` or a folder without any is an error.
    """
    out: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        p = Path(given)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.json") if f.is_file())
            if not found:
                raise UserError(f"{p}: no cases: the folder holds no *.json file")
        elif p.is_file():
            if p.suffix != ".json":
                raise UserError(f"{p}: not a corpus file: corpus files end in .json")
            found = [p]
        elif p.exists():
            raise UserError(f"{p}: not a file or folder")
        else:
            raise UserError(f"{p}: does not exist")
        for f in found:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def save_finding(finding: Finding, root: Path | str) -> Path:
    """Write ``finding``'s case under ``root`` with its report and the commands that replay it.

    ``root`` is the regression corpus for production code, a findings folder otherwise (see
    :func:`~..sources.findings_dir`).
    """
    path = case_path(finding.case, root)
    commands = finding.replay_commands(path)
    found_by = "eaglefuzz " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    record = {"report": finding.report(saved=path), "replay": commands[0], "found_by": found_by,
              "found_at": datetime.now(UTC).isoformat(timespec="seconds")}  # finding_record's fields, one report
    return save_case(finding.case, root, finding=record)
