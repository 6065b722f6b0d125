"""The record interface (harness/targetkit/base.py: ``Target``; docs/DESIGN.md, "The record
interface"): every target's record has it, the same way, and a record that drifts fails here.

:func:`interface_problems` lists, one line each, where a record departs from the interface: its
identity (name, model runner, vLLM module and function, section, features, oracles) and their
types; the methods' signatures (those of the base class; ``validate`` and ``tier_of`` defined by
the base class alone, no ``validate_*`` of a record's own); the roles of its folder, found the
one way (``roles.find_role``: no record holds a role as an attribute), each defining what
``roles.ROLES`` says, with the right types; the extended tier's rules exactly where the folder
has ``edges.py``; and a Triton target's launches going through ``kernels/launchers.py``. The
tests below check every target, and that each kind of drift is caught.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

from eaglefuzz.harness.core.case import Case
from eaglefuzz.harness.generation.strategies import Scale, Shape
from eaglefuzz.harness.targetkit import base, roles
from eaglefuzz.harness.targetkit.base import RUNNERS, V2_PACKAGE, Target, TritonTarget, Variant
from eaglefuzz.harness.targetkit.bugs import Mutant
from eaglefuzz.harness.targetkit.cpp_port import CppKernel
from eaglefuzz.harness.targetkit.device import DeviceTarget
from eaglefuzz.harness.targetkit.properties import Audit, HazardDraws, Property
from eaglefuzz.harness.targetkit.pyfunc import PythonFunctionTarget
from eaglefuzz.harness.targets import ROLES, TARGETS, has_role, role

SMALL = Scale(max_requests=3, request_tail=3, max_query_len=6, max_programs=64)

METHODS: dict[type, tuple[str, ...]] = {
    Target: ("validate", "tier_of", "production_rules", "extended_rules", "features_of", "check", "oracle_check",
             "output_tokens", "production_case", "strategy", "random_case", "extreme_cases", "extended_strategy",
             "extended_case", "extended_features_of", "extended_shrink_candidates", "shrink_candidates",
             "split_requests", "join_requests", "shrink_moves", "alike", "programs", "output_bytes", "variant_of"),
    TritonTarget: ("output_specs", "launch", "call_oracle", "locate", "aliases", "settle", "expected"),
}
"""The interface's methods, by the class that declares them: a record's own definition must take
the same parameters."""

FINAL = ("validate", "tier_of", "oracles", "shapes", "extended_features", "folder")
"""Defined by the base class alone: no record overrides them."""

TARGETS_PACKAGE = TARGETS[next(iter(TARGETS))].folder.rpartition(".")[0]


def _params(fn: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


def _identity_problems(t: Target) -> list[str]:
    out = []
    a = {attr: getattr(t, attr, None) for attr in ("name", "kind", "runner", "module", "function", "section",
                                                     "features", "extremes", "scale_features", "oracle_functions",
                                                     "parameters", "variants")}
    checks = {
        "name": isinstance(a["name"], str) and a["name"].isidentifier(),
        "kind": a["kind"] in ("triton kernel", "python function"),
        "runner": a["runner"] in RUNNERS,
        "module": isinstance(a["module"], str) and a["module"].startswith("vllm/") and a["module"].endswith(".py"),
        "function": isinstance(a["function"], str) and a["function"].isidentifier(),
        "section": isinstance(a["section"], int) and not isinstance(a["section"], bool) and a["section"] >= 1,
        "features": isinstance(a["features"], Mapping) and bool(a["features"])
        and all(isinstance(k, str) and isinstance(v, str) for k, v in a["features"].items()),
        "extremes": isinstance(a["extremes"], tuple) and set(a["extremes"]) <= set(a["features"] or ()),
        "scale_features": isinstance(a["scale_features"], tuple)
        and set(a["scale_features"]) <= set(a["features"] or ()) and not set(a["scale_features"]) & set(a["extremes"] or ()),
        "oracle_functions": isinstance(a["oracle_functions"], Mapping) and bool(a["oracle_functions"])
        and all(isinstance(k, str) and isinstance(v, str) for k, v in a["oracle_functions"].items()),
        "parameters": a["parameters"] is None or (isinstance(a["parameters"], tuple)
                                                  and all(isinstance(p, str) for p in a["parameters"])),
        "variants": isinstance(a["variants"], Mapping) and all(isinstance(v, Variant) for v in a["variants"].values()),
    }
    for attr in ("name", "runner", "module", "function", "section", "features", "oracle_functions"):
        if not any(attr in vars(c) for c in type(t).__mro__ if c not in (Target, TritonTarget, PythonFunctionTarget)):
            out.append(f"{attr}: not set by the record")
    out += [f"{attr}: not of the interface's type" for attr, ok in checks.items() if not ok]
    if checks["runner"] and checks["module"] and (a["runner"] == "V2") != a["module"].startswith(V2_PACKAGE):
        out.append(f"runner: {a['runner']} for {a['module']} (V2 exactly for the modules of {V2_PACKAGE})")
    if checks["oracle_functions"]:
        for label, path in a["oracle_functions"].items():
            try:
                if not callable(base.oracle(path)):
                    out.append(f"oracle_functions.{label}: {path} is not callable")
            except (ImportError, AttributeError, ValueError) as exc:
                out.append(f"oracle_functions.{label}: {path} not found in oracles/ ({exc})")
    if t.folder != f"{TARGETS_PACKAGE}.{a['name']}":
        out.append(f"folder: the record lives in {type(t).__module__}, not harness/targets/{a['name']}/record.py")
    return out


def _method_problems(t: Target) -> list[str]:
    out = []
    cls = type(t)
    for owner, names in METHODS.items():
        if not isinstance(t, owner):
            continue
        for name in names:
            if _params(getattr(cls, name)) != _params(getattr(owner, name)):
                out.append(f"{name}: {cls.__name__}{inspect.signature(getattr(cls, name))} is not "
                           f"{owner.__name__}{inspect.signature(getattr(owner, name))}")
    for c in cls.__mro__:
        if c in (Target, TritonTarget, PythonFunctionTarget, object):
            continue
        for attr, value in vars(c).items():
            if attr in FINAL:
                out.append(f"{attr}: defined by {c.__name__}; the base class defines it, for every record")
            elif attr.startswith("validate"):
                out.append(f"{attr}: a validate of {c.__name__}'s own; the tiers' rules are production_rules "
                           "and extended_rules, called through validate(case, tier)")
            elif isinstance(value, ModuleType):
                out.append(f"{attr}: {c.__name__} holds the module {value.__name__}; a role is found one way "
                           "(roles.find_role, the registry's role())")
            elif attr in ("cases", "edges", "tour", "audit", "device", "port", "bugs"):
                out.append(f"{attr}: {c.__name__} names a role as an attribute; a role is found one way "
                           "(roles.find_role, the registry's role())")
    return out


def _fixes_fit(a: Audit) -> bool:
    """Whether ``a.fixes`` are of the interface's types: each keyed by a report that one of the
    audit's properties names as its source, each a non-empty tuple of ``(old, new)`` text edits."""
    sources = {s.strip() for p in a.properties for s in p.source.split(",")}
    return isinstance(a.fixes, Mapping) and all(
        key in sources and isinstance(edits, tuple) and bool(edits)
        and all(isinstance(e, tuple) and len(e) == 2 and all(isinstance(x, str) and x for x in e) for e in edits)
        for key, edits in a.fixes.items())


def _export_problems(name: str, r: str, module: ModuleType) -> list[str]:
    out = [f"{r}.py: defines no {x}" for x in roles.ROLES[r].exports if not hasattr(module, x)]
    if out:
        return out
    t = TARGETS[name]
    bad = {
        "record": lambda m: m.TARGET is not t,
        "layout": lambda m: m.NAME != name,
        "cases": lambda m: [p for p, _ in _params(m.body)] != ["c", "scale"],
        "tour": lambda m: not isinstance(m.SHAPES, tuple) or not all(isinstance(s, Shape) for s in m.SHAPES),
        "edges": lambda m: not isinstance(m.FEATURES, Mapping) or not all(
            callable(getattr(m, f)) for f in ("strategy", "random_case", "features_of", "shrink_candidates")),
        "audit": lambda m: not isinstance(m.AUDIT, Audit)
        or not all(isinstance(p, Property) for p in m.AUDIT.properties)
        or (m.AUDIT.hazards is not None and not isinstance(m.AUDIT.hazards, HazardDraws))
        or (not isinstance(t, TritonTarget) and m.AUDIT.run is None)
        or not _fixes_fit(m.AUDIT),
        "device": lambda m: not isinstance(m.DEVICE, DeviceTarget) or m.DEVICE.name != name,
        "port": lambda m: not isinstance(m.PORT, CppKernel),
        "bugs": lambda m: not isinstance(m.BUGS, tuple)
        or not all(isinstance(b, Mutant) and b.target == name for b in m.BUGS),
    }[r]
    return [f"{r}.py: {', '.join(roles.ROLES[r].exports)} not of the role's types"] if bad(module) else []


def _role_problems(t: Target) -> list[str]:
    out = []
    for r, spec in roles.ROLES.items():
        present = has_role(t.name, r) if t.name in TARGETS else False
        if spec.required and not present:
            out.append(f"{r}.py: missing (every target has it)")
        if present and t is TARGETS.get(t.name):
            out += _export_problems(t.name, r, role(t.name, r))
    edges = has_role(t.name, "edges") if t.name in TARGETS else False
    own_rules = type(t).extended_rules is not Target.extended_rules
    if edges != own_rules:
        out.append("extended_rules: " + ("edges.py without extended_rules of the record's own" if edges
                                         else "extended_rules without an edges.py (no extended tier to draw)"))
    return out


class _Launches:
    """A kernel that records where it is launched from: the file of the frame that indexes it."""

    def __init__(self, parameters: tuple[str, ...] | None) -> None:
        self.parameters = list(parameters) if parameters is not None else None
        self.callers: list[str] = []

    def __getitem__(self, grid: Any) -> Any:
        self.callers.append(sys._getframe(1).f_code.co_filename)
        return lambda *args, **kwargs: None


def _launch_problems(t: Target) -> list[str]:
    if not isinstance(t, TritonTarget):
        return []
    out = []
    try:
        case = t.random_case(np.random.default_rng(0), SMALL)
    except LookupError as exc:
        return [f"launch: no case to launch ({exc})"]
    launchers = str(Path("kernels", "launchers.py"))
    for iname, params, lacks in [("the contract", t.parameters, ())] + [
            (f"variant {n!r}", v.parameters, v.lacks) for n, v in t.variants.items()]:
        views = {n: torch.from_numpy(np.ascontiguousarray(a).copy()) for n, a in case.arrays.items()}
        alias = t.aliases(case)
        for n, (dt, shape) in t.output_specs(case).items():
            if n not in lacks and n not in alias:
                views[n] = torch.zeros(shape, dtype=getattr(torch, np.dtype(dt).name))
        views |= {o: views[i] for o, i in alias.items()}
        kernel = _Launches(params)
        t.launch(kernel, views, case)
        if not kernel.callers:
            out.append(f"launch ({iname}): never launches the kernel")
        out += [f"launch ({iname}): launched from {c}, not from a launcher of kernels/launchers.py"
                for c in kernel.callers if not c.endswith(launchers)]
    return out


def interface_problems(t: Target) -> list[str]:
    """Every way record ``t`` departs from the record interface, one line each (none: it has it)."""
    return _identity_problems(t) + _method_problems(t) + _role_problems(t) + _launch_problems(t)


@pytest.mark.parametrize("name", list(TARGETS))
def test_every_record_has_the_interface(name):
    problems = interface_problems(TARGETS[name])
    assert not problems, f"{name}:\n  " + "\n  ".join(problems)


def test_roles_are_the_registrys_and_targets_are_distinct():
    assert ROLES == tuple(roles.ROLES)
    assert len({(t.module, t.function) for t in TARGETS.values()}) == len(TARGETS)
    for t in TARGETS.values():  # docs/ADDING_A_TARGET.md: the name is the function's, unless shared
        assert t.name == base.target_name(t.module, t.function, [u.function for u in TARGETS.values()]), t.name


V2_SAME_NAME = (
    ("input_batch_prepare_prefill_inputs_kernel", "vllm/v1/worker/gpu/input_batch.py"),
    ("target_dependent_ar_prepare_prefill_inputs_kernel", "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"),
)


def test_two_targets_of_one_function_name_in_two_modules(monkeypatch):
    """Model Runner V2 defines ``_prepare_prefill_inputs_kernel`` in two files: two targets, each
    named for its file (:func:`~eaglefuzz.harness.targetkit.base.target_name`), each given its
    own module's function by a vLLM source, each named so in the reports."""
    from eaglefuzz.harness.sources import vllm as vsrc

    function = "_prepare_prefill_inputs_kernel"
    functions = [t.function for t in TARGETS.values()] + [function, function]
    modules, funcs = {}, {}
    for name, module in V2_SAME_NAME:
        assert base.target_name(module, function, functions) == name
        record = _drifted(PI, name=name, runner="V2", module=module, function=function)
        monkeypatch.setitem(TARGETS, name, record)
        modules[module] = ModuleType(module)
        funcs[name] = lambda *a, _name=name: _name
        setattr(modules[module], function, funcs[name])
    loaded = vsrc._Loaded(modules, (), {}, Path("/nonexistent"))
    impls = vsrc._implementations(vsrc.VllmReleaseSource("0.33.0"), loaded, [n for n, _ in V2_SAME_NAME])
    for name, module in V2_SAME_NAME:
        assert impls.funcs[name] is funcs[name]
        assert impls.origin[name].describe() == f"{module}::{function} (vLLM 0.33.0 release wheel)"


PREFILL_FUNCTION = "_prepare_prefill_inputs_kernel"
INPUT_BATCH_PARAMS = "input_ids_ptr, next_prefill_tokens_ptr, next_prefill_tokens_stride, num_lookahead, " \
    "idx_mapping_ptr, query_start_loc_ptr, all_token_ids_ptr, all_token_ids_stride, prefill_lens_ptr, " \
    "num_computed_tokens_ptr, BLOCK_SIZE, LOOKAHEAD_BLOCK"


@pytest.mark.parametrize(("file", "text", "taken_for", "why"), [
    ("mine.py", f"def {PREFILL_FUNCTION}({INPUT_BATCH_PARAMS}):\n    pass\n", V2_SAME_NAME[0][0],
     "its parameters are the contract's of docs/CONTRACT.md §14.3"),
    ("fork/input_batch.py", f"def {PREFILL_FUNCTION}({INPUT_BATCH_PARAMS}, EXTRA):\n    pass\n", V2_SAME_NAME[0][0],
     "the file is named like vLLM's vllm/v1/worker/gpu/input_batch.py"),
    ("target_dependent_ar/speculator.py", f"def {PREFILL_FUNCTION}(x):\n    pass\n", V2_SAME_NAME[1][0],
     "the file is named like vLLM's vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"),
    ("fork.py", f"def {PREFILL_FUNCTION}(x):\n    pass\n\n\ndef _update_draft_inputs_kernel(x):\n    pass\n",
     V2_SAME_NAME[1][0], "it defines other target functions of vLLM's "
     "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py"),
    ("standalone_ar/speculator.py", f"def {PREFILL_FUNCTION}(x):\n    pass\n", None, "is tested as neither"),
])
def test_a_users_file_is_taken_for_one_of_two_same_named_targets(tmp_path, file, text, taken_for, why):
    """``--kernels FILE`` defining ``_prepare_prefill_inputs_kernel`` (both V2 modules define it) is
    taken for one target: by its parameters (§14.3, §25.3), else the file's name, else its other
    functions; else for neither. The run's notes say which and why."""
    from eaglefuzz.harness.sources.file import FileSource

    path = tmp_path / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    impls = FileSource(path).load()
    names = {n for n in impls.funcs if TARGETS[n].function == PREFILL_FUNCTION}
    assert names == ({taken_for} if taken_for else set()), impls.notes
    (note,) = [n for n in impls.notes if PREFILL_FUNCTION in n]
    assert why in note and (taken_for is None or f"tested as {taken_for} " in note), note


def test_the_matrix_and_list_show_the_runner():
    from click.testing import CliRunner

    from eaglefuzz.harness.cli import cli
    from eaglefuzz.harness.reporting import capabilities

    assert [r.runner for r in capabilities.matrix()] == [t.runner for t in TARGETS.values()]
    out = CliRunner().invoke(cli, ["list"], catch_exceptions=False).output
    for name, t in TARGETS.items():
        assert f"{name} ({t.kind}, model runner {t.runner}): " in out


# -- drift: each kind of departure is caught -------------------------------------------------------

PI = "eagle_prepare_inputs_padded_kernel"
EXPAND = "expand_kernel"


def _drifted(target: str, **members: Any) -> Target:
    """Target ``target``'s record with ``members`` changed, still in its folder's module (so that
    only the change departs from the interface)."""
    cls = type(TARGETS[target])
    drift = type(cls.__name__, (cls,), {"__module__": cls.__module__, **members})
    return drift()


def test_a_validate_of_a_records_own_is_caught():
    def validate(self: Any, case: Case) -> None:  # the old one-argument form
        self.production_rules(case)

    def validate_wide(self: Any, case: Case) -> None:
        pass

    problems = interface_problems(_drifted(PI, validate=validate, validate_wide=validate_wide))
    assert any(p.startswith("validate: ") for p in problems), problems
    assert any(p.startswith("validate_wide: a validate of") for p in problems), problems


def test_another_signature_is_caught():
    def production_rules(self: Any, case: Case, tier: str = "production") -> None:
        pass

    problems = interface_problems(_drifted(PI, production_rules=production_rules))
    assert any(p.startswith("production_rules: ") for p in problems), problems


def test_a_role_held_as_an_attribute_is_caught():
    edges = role(PI, "edges")
    problems = interface_problems(_drifted(PI, edges=edges, shapes=()))
    assert any(p.startswith("edges: ") and "holds the module" in p for p in problems), problems
    assert any(p.startswith("shapes: ") for p in problems), problems


def test_an_oracles_property_of_a_records_own_is_caught():
    problems = interface_problems(_drifted(PI, oracles=property(lambda self: {})))
    assert any(p.startswith("oracles: defined by") for p in problems), problems


def test_identity_drift_is_caught():
    problems = interface_problems(_drifted(PI, runner="V3", function="not an identifier",
                                           oracle_functions={"numpy": "vectorized.no_such_oracle"}))
    assert "runner: not of the interface's type" in problems, problems
    assert "function: not of the interface's type" in problems, problems
    assert any(p.startswith("oracle_functions.numpy: vectorized.no_such_oracle not found") for p in problems), problems
    v2 = interface_problems(_drifted(PI, runner="V2"))
    assert any(p.startswith("runner: V2 for vllm/v1/spec_decode/utils.py") for p in v2), v2


def test_extended_rules_without_edges_and_edges_without_rules_are_caught():
    problems = interface_problems(_drifted(PI, extended_rules=Target.extended_rules))
    assert "extended_rules: edges.py without extended_rules of the record's own" in problems, problems


def test_an_inline_launch_is_caught():
    def launch(self: Any, kernel: Any, tensors: Mapping[str, Any], case: Case) -> None:
        x = tensors["input"]
        kernel[(x.shape[0],)](tensors["output"], x, tensors["cu_num_tokens"], case.scalars["replace_from"],
                              case.scalars["replace_to"], MAX_NUM_TOKENS=128)

    problems = interface_problems(_drifted(EXPAND, launch=launch))
    assert any(p.startswith("launch (the contract): launched from") and p.endswith(
        "not from a launcher of kernels/launchers.py") for p in problems), problems


def test_a_record_outside_its_folder_is_caught():
    cls = type(TARGETS[PI])
    stray = type("Stray", (cls,), {"__module__": __name__})()
    problems = interface_problems(stray)
    assert any(p.startswith("folder: ") for p in problems), problems
    assert stray.shapes == () and stray.extended_features == {}  # found the one way: nothing there


def test_scale_features_outside_the_features_are_caught():
    problems = interface_problems(_drifted(PI, scale_features=("no_such_feature",)))
    assert "scale_features: not of the interface's type" in problems, problems


def test_a_fix_of_no_propertys_report_is_caught():
    """``AUDIT.fixes`` (vLLM's fixes as text edits of a release) are keyed by a report one of the
    audit's properties names; a fix of another report, or no edits, departs from the interface."""
    a = role("rejection_random_sample_kernel", "audit").AUDIT
    assert a.fixes["PR #48055"] and _fixes_fit(a)
    assert not _fixes_fit(Audit(a.properties, fixes={"PR #1": a.fixes["PR #48055"]}))
    assert not _fixes_fit(Audit(a.properties, fixes={"PR #48055": ()}))
