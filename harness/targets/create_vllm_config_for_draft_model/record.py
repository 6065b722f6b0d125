"""``create_vllm_config_for_draft_model``: docs/CONTRACT.md §5.

A case describes a target ``VllmConfig`` with scalars only: every field of the target's and the
drafter's model and parallel configs (``target_model.*``, ``draft_model.*``,
``target_parallel.*``, ``draft_parallel.*``), the speculative config (``spec.*``), the
quantization config (``quant.*``) and a few other sub-configs. Case scalars are ints, bools
and ``None``, so string-valued config fields are stored as small ints and decoded here: a
model is ``org/model-<id>``, a dtype, quantization method, executor backend, spec method or
device is an index into the tuples below (``None`` where the field may be unset).
``speculative_config_present: false`` leaves ``speculative_config`` unset: the function must
then raise ``AssertionError`` (anything else, returning included, is a difference).

``check`` builds the config objects, turns the target into plain data before and after the
call, and compares the plain data of the result, field by field, with the oracle's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from ....kernels import vllm_types
from ....oracles.python_functions import CHANGED_CONFIG_FIELDS
from ...core.case import Case
from ...core.compare import Difference
from ...generation.strategies import (
    MAX_NUM_SEQS,
    SPEC_TOKENS,
)
from ...targetkit.base import CannotTest, ContractViolation, Outcome
from ...targetkit.pyfunc import (
    CHANGED,
    MUTATED,
    RESULT,
    UNCHANGED,
    PythonFunctionTarget,
)
from . import edges
from .layout import (
    MODEL_FIELDS,
    NAME,
    PARALLEL_FIELDS,
    PRODUCTION_METHOD,
    SAME_AS_TARGET,
    SCALARS,
    SPEC_METHODS,
    decode,
    rule,
    value_ok,
)


def build_config(case: Case, types: Any) -> Any:
    """The target ``VllmConfig`` that ``case`` describes, built from ``types``' classes."""
    s = case.scalars

    def side(prefix: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        return {f: decode(enc, s[f"{prefix}.{f}"]) for f, enc in fields.items()}

    def get(key: str) -> Any:
        return decode(SCALARS[key], s[key])

    target_model = types.ModelConfig(**side("target_model", MODEL_FIELDS))
    target_parallel = types.ParallelConfig(**side("target_parallel", PARALLEL_FIELDS))
    spec = None
    if s["speculative_config_present"]:
        draft_model = types.ModelConfig(**side("draft_model", MODEL_FIELDS))
        draft_parallel = types.ParallelConfig(**side("draft_parallel", PARALLEL_FIELDS))
        spec = types.SpeculativeConfig(
            method=get("spec.method"),
            num_speculative_tokens=get("spec.num_speculative_tokens"),
            model=draft_model.model,
            draft_model_config=draft_model if s.get(edges.KEY, True) else None,
            draft_parallel_config=draft_parallel,
            draft_tensor_parallel_size=draft_parallel.tensor_parallel_size,
            parallel_drafting=get("spec.parallel_drafting"),
            quantization=draft_model.quantization,
        )
    quant = None
    if s["quant_config_present"]:
        quant = types.QuantizationConfig(method=get("quant.method"), weight_bits=get("quant.weight_bits"))
    additional = get("additional_config")
    instance = get("instance_id")
    return types.VllmConfig(
        model_config=target_model,
        cache_config=types.CacheConfig(block_size=get("cache.block_size")),
        parallel_config=target_parallel,
        scheduler_config=types.SchedulerConfig(
            max_num_batched_tokens=get("scheduler.max_num_batched_tokens"),
            max_num_seqs=get("scheduler.max_num_seqs"),
            max_model_len=target_model.max_model_len,
        ),
        device_config=types.DeviceConfig(device=get("device")),
        load_config=types.LoadConfig(),
        speculative_config=spec,
        quant_config=quant,
        compilation_config=types.CompilationConfig(mode=get("compilation.mode")),
        additional_config={} if additional is None else {"tag": additional},
        instance_id="" if instance is None else f"instance-{instance}",
    )


def to_data(value: Any) -> Any:
    """``value`` as plain data: dataclasses and dicts as dicts, sequences as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: to_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_data(v) for v in value]
    return value


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as ``{"a.b.c": leaf}`` (an empty dict is a leaf)."""
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: data}


def _region(path: str) -> str:
    return CHANGED if path.split(".", 1)[0] in _changed_fields() else UNCHANGED


def _changed_fields() -> tuple[str, ...]:

    return CHANGED_CONFIG_FIELDS


def _summary(value: Any) -> Any:
    if isinstance(value, dict):
        text = repr(value)
        return text if len(text) <= 120 else text[:117] + "..."
    return value


def diff_data(
    expected: Any, actual: Any, *, versus: str, region: str | None = None, path: str = ""
) -> list[Difference]:
    """Leaf-by-leaf differences of two plain-data trees.

    A key missing on one side, or a sub-config on one side where the other has a plain value,
    is one difference at that path. ``region``: the region of every difference (default: by
    the top-level field, changed or unchanged).
    """
    where = region if region is not None else _region(path)
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[Difference] = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                w = region if region is not None else _region(sub)
                out.append(Difference(sub, None, _summary(expected[key]), "(missing)", None, w, versus))
            elif key not in expected:
                w = region if region is not None else _region(sub)
                out.append(Difference(sub, None, "(absent)", _summary(actual[key]), None, w, versus))
            else:
                out += diff_data(expected[key], actual[key], versus=versus, region=region, path=sub)
        return out
    if type(expected) is not type(actual) or expected != actual:
        return [Difference(path or "result", None, _summary(expected), _summary(actual), None, where, versus)]
    return []


class DraftConfig(PythonFunctionTarget):
    name = NAME
    runner = "V1"
    module = "vllm/v1/spec_decode/utils.py"
    function = NAME
    section = 5
    parameters = ("target_model_vllm_config",)
    features = {
        "quantized_target": "the target has a quant_config (the drafter's must be None)",
        "unquantized_target": "the target has no quant_config",
        "all_fields_differ": "every field of the draft model and parallel configs that vLLM lets differ (all but "
                             "tensor_parallel_size) differs from the target's",
        "some_fields_equal": "some draft model or parallel field equals the target's",
        "same_rank": "the draft parallel config's rank already equals the target's",
        "quantized_draft_model": "the draft model config names a quantization method",
        "additional_config_set": "additional_config is not empty",
        "parallel_drafting": "spec.parallel_drafting is set",
        # production extremes (reached by every default run: see ``shapes``)
        "max_num_seqs_1024_plus": "scheduler.max_num_seqs of 1024 or more",
        "batched_tokens_64k_plus": "scheduler.max_num_batched_tokens of 65536 or more",
        "spec_tokens_15_plus": "spec.num_speculative_tokens of 15 or more",
        "max_model_len_millions": "a max_model_len of a million tokens or more",
    }
    extremes = ("max_num_seqs_1024_plus", "batched_tokens_64k_plus", "spec_tokens_15_plus", "max_model_len_millions")

    oracle_functions = {"plain-data": "python_functions.draft_vllm_config"}

    # -- contract ---------------------------------------------------------------------

    def production_rules(self, case: Case) -> None:
        self._field_rules(case)
        s = case.scalars
        if not s["speculative_config_present"]:
            raise ContractViolation("scalars.speculative_config_present", "must be true (the proposer asserts a "
                                    "speculative config before it loads the draft)")
        if decode(SCALARS["spec.method"], s["spec.method"]) != PRODUCTION_METHOD:
            raise ContractViolation("scalars.spec.method", f"must be {SPEC_METHODS.index(PRODUCTION_METHOD)} "
                                    f"({PRODUCTION_METHOD}: only DraftModelProposer calls the function)")
        for f in SAME_AS_TARGET:
            if s[f"draft_parallel.{f}"] != s[f"target_parallel.{f}"]:
                raise ContractViolation(f"scalars.draft_parallel.{f}", f"must equal target_parallel.{f} "
                                        "(DraftModelProposer refuses another drafter tensor-parallel size)")

    def _field_rules(self, case: Case) -> None:
        """Every field present, of its encoding, and no other (both tiers)."""
        if case.arrays:
            raise ContractViolation(f"arrays.{next(iter(case.arrays))}", "this function takes no arrays")
        for key, enc in SCALARS.items():
            if key not in case.scalars:
                raise ContractViolation(f"scalars.{key}", "is required")
            if not value_ok(enc, case.scalars[key]):
                raise ContractViolation(f"scalars.{key}", rule(enc))
        extra = sorted(set(case.scalars) - set(SCALARS))
        if extra:
            raise ContractViolation(f"scalars.{extra[0]}", "is not a field of this target's cases")

    # -- features ---------------------------------------------------------------------

    def features_of(self, case: Case) -> frozenset[str]:
        s = case.scalars
        if not s["speculative_config_present"]:  # the extended tier (edges.py)
            return frozenset()
        f = {"quantized_target" if s["quant_config_present"] else "unquantized_target"}
        pairs = [(f"target_{k}.{n}", f"draft_{k}.{n}") for k, fields in (("model", MODEL_FIELDS), ("parallel", PARALLEL_FIELDS))
                 for n in fields if not (k == "parallel" and n in SAME_AS_TARGET)]
        f.add("all_fields_differ" if all(s[t] != s[d] for t, d in pairs) else "some_fields_equal")
        if s["target_parallel.rank"] == s["draft_parallel.rank"]:
            f.add("same_rank")
        if s["draft_model.quantization"] is not None:
            f.add("quantized_draft_model")
        if s["additional_config"] is not None:
            f.add("additional_config_set")
        if s["spec.parallel_drafting"]:
            f.add("parallel_drafting")
        if s["scheduler.max_num_seqs"] >= MAX_NUM_SEQS:
            f.add("max_num_seqs_1024_plus")
        if s["scheduler.max_num_batched_tokens"] >= 1 << 16:
            f.add("batched_tokens_64k_plus")
        if s["spec.num_speculative_tokens"] >= SPEC_TOKENS:
            f.add("spec_tokens_15_plus")
        if max(s["target_model.max_model_len"], s["draft_model.max_model_len"]) >= 1 << 20:
            f.add("max_model_len_millions")
        return frozenset(f)

    # -- execution --------------------------------------------------------------------

    def _expected(self, target_data: Any) -> dict[str, Any] | None:
        """The oracle's result for ``target_data``; ``None`` when it must assert."""
        try:
            return self.oracles["plain-data"](target_data)
        except AssertionError:
            return None

    def oracle_check(self, case: Case) -> list[Difference]:

        expected = self._expected(to_data(build_config(case, vllm_types)))
        direct = _direct(case)
        versus = "plain-data oracle vs case scalars"
        if expected is None or direct is None:
            if (expected is None) != (direct is None):
                return [Difference("result", None, direct is None, expected is None, None, "asserts", versus)]
            return []
        flat = flatten(expected)
        return [
            Difference(path, None, value, flat.get(path, "(missing)"), None, _region(path), versus)
            for path, value in direct.items()
            if path not in flat or type(flat[path]) is not type(value) or flat[path] != value
        ]

    def check(self, case: Case, impl: Any, device: str) -> Outcome:
        outcome = Outcome(oracle_disagreements=self.oracle_check(case))
        cfg = build_config(case, self.types)
        before = to_data(cfg)
        expected = self._expected(before)
        versus = "plain-data oracle"
        d = outcome.differences
        try:
            result = self.call(impl, cfg)
        except AssertionError as exc:
            if expected is not None:
                outcome.crash = f"AssertionError: {' '.join(str(exc).split())[:500]}"
                return outcome
        except CannotTest:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the code under test is a finding
            message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
            if expected is not None:
                outcome.crash = message
                return outcome
            d.append(Difference("result", None, "AssertionError", message, None, f"{RESULT} (exception)", versus))
        else:
            if expected is None:
                d.append(
                    Difference("result", None, "AssertionError", f"returned {type(result).__name__}", None, f"{RESULT} (exception)", versus)
                )
            elif type(result) is not type(cfg):
                d.append(Difference("result", None, type(cfg).__name__, type(result).__name__, None, f"{RESULT} (type)", versus))
            else:
                if result is cfg:
                    d.append(Difference("result", None, "a new object", "the input object", None, RESULT, versus))
                d += diff_data(expected, to_data(result), versus=versus)
        d += diff_data(before, to_data(cfg), versus="input as given", region=MUTATED)
        return outcome

    def output_tokens(self, case: Case) -> int:

        leaves = len(flatten(to_data(build_config(case, vllm_types))))
        return 2 * leaves if case.scalars["speculative_config_present"] else leaves + 1

    def shrink_candidates(self, case: Case) -> Iterator[Case]:
        s = case.scalars
        for key, plain in (("additional_config", None), ("instance_id", None), ("spec.parallel_drafting", False)):
            if s[key] != plain:
                yield case.replace(scalars={key: plain})

    # -- extended tier (docs/CONTRACT.md §5.4): edges.py ------------------------------

    def extended_rules(self, case: Case) -> None:
        edges.validate(case, self._field_rules)


def _direct(case: Case) -> dict[str, Any] | None:
    """The changed fields straight from the case's scalars: the second computation."""
    s = case.scalars
    if not s["speculative_config_present"]:
        return None
    out: dict[str, Any] = {"quant_config": None}
    for f, enc in MODEL_FIELDS.items():
        out[f"model_config.{f}"] = decode(enc, s[f"draft_model.{f}"])
    if not s.get(edges.KEY, True):
        out = {k: v for k, v in out.items() if not k.startswith("model_config.")} | {"model_config": None}
    for f, enc in PARALLEL_FIELDS.items():
        out[f"parallel_config.{f}"] = decode(enc, s[f"draft_parallel.{f}" if f != "rank" else "target_parallel.rank"])
    out["cache_config.block_size"] = s["cache.block_size"]
    out["speculative_config.num_speculative_tokens"] = s["spec.num_speculative_tokens"]
    return out


TARGET = DraftConfig()
