"""The seeded bugs: each a one-edit mutant of a production function of vLLM's spec-decode utils.

Each target's own are in its folder (``harness/targets/<name>/bugs.py``, :data:`MUTANTS` collects
them); the bugs of the harness's fault handling (:data:`CRASH_MUTANTS`, :data:`SANITIZER_MUTANTS`)
are here. A mutant names its target, states its bug, and lists its edits as ``(old, new)`` text
replacements; each ``old`` occurs exactly once in the target's current source. :func:`write`
applies them to the function as its module holds it today and writes an altered copy that
``--kernels`` loads, so the bugs follow the production code as it changes (a mutant whose
``old`` text is gone fails loudly instead of testing stale code). The module is the bundled
copy ``kernels/spec_decode_utils.py`` unless the mutant names a vLLM release
(``module="vllm-release:0.33.0"``), for targets the bundled copy lacks.

    python tests/seeded_bugs/mutants.py OUTDIR    # write every mutant as OUTDIR/<name>.py
    eaglefuzz fuzz --kernels OUTDIR/ce_positions_shifted.py
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from eaglefuzz.harness.targetkit.bugs import BUNDLED, Mutant
from eaglefuzz.harness.targetkit.bugs import edit as _edit
from eaglefuzz.harness.targets import TARGETS, has_role, role

PRODUCTION = Path(__file__).resolve().parents[2] / "kernels" / "spec_decode_utils.py"

HEADER = '''"""{bug}

Seeded bug {name}: ``{target}`` from {module} with one change,
written by tests/seeded_bugs/mutants.py. tests/test_seeded_bugs.py checks the fuzzer finds it.
"""

from dataclasses import replace

import torch
import triton
import triton.language as tl

from eaglefuzz.kernels.triton_helpers_v2 import _load_ptr  # Model Runner V2's block-table kernels call it
from eaglefuzz.kernels.vllm_types import CommonAttentionMetadata, VllmConfig, current_platform
from eaglefuzz.harness.sources.interpreter_compat import tldevice as _tldevice

tldevice = _tldevice()  # vllm.triton_utils' libdevice (Model Runner V2's verification calls tldevice.log1p)
PADDING_SLOT_ID = -1


'''


class ModuleUnavailable(LookupError):
    """The module a mutant edits cannot be had here (a release's file not cached, and the package
    index cannot be reached)."""


# Release modules already on this machine (read, never copied into the repository).
LOCAL_RELEASE_FILES = {"0.33.0": Path("/tmp/wheels/v033/vllm/v1/spec_decode/utils.py")}


SPEC_DECODE = "vllm/v1/spec_decode/utils.py"


def release_module_file(version: str, vllm_module: str = SPEC_DECODE) -> Path:
    """vLLM ``version``'s ``vllm_module`` (a target's ``Target.module``): through the vLLM
    release source when eaglefuzz has it (``harness.sources.vllm.release_module_file``), else a
    local copy."""
    try:
        from eaglefuzz.harness.sources.vllm import release_module_file as from_source
        from eaglefuzz.harness.sources.wheels import FetchFailed
    except ImportError:
        from_source = None
    if from_source is not None:
        try:
            return Path(from_source(version, vllm_module))
        except FetchFailed as exc:  # anything else is a real error
            if not exc.offline:
                raise
            raise ModuleUnavailable(f"vLLM {version}'s module: {exc}") from None
    path = LOCAL_RELEASE_FILES.get(version) if vllm_module == SPEC_DECODE else None
    if path is None or not path.is_file():
        raise ModuleUnavailable(f"vLLM {version}'s {vllm_module} is not on this machine")
    return path


def module_file(module: str, target: str | None = None) -> Path:
    """The file a mutant's ``module`` names (for a release: the module of ``target``)."""
    if module == BUNDLED:
        return PRODUCTION
    kind, _, version = module.partition(":")
    if kind != "vllm-release" or not version:
        raise ValueError(f"unknown mutant module {module!r} (bundled or vllm-release:X.Y.Z)")
    return release_module_file(version, TARGETS[target].module if target else SPEC_DECODE)


def module_description(module: str, target: str | None = None) -> str:
    if module == BUNDLED:
        return "kernels/spec_decode_utils.py"
    return f"vLLM {module.partition(':')[2]}'s {TARGETS[target].module if target else SPEC_DECODE}"


WITH_HELPERS = ("vllm/v1/worker/gpu/sample/gumbel.py", "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py")
"""Modules whose kernels call ``@triton.jit`` helpers and ``tl.constexpr`` globals of their own
file and of the vLLM files they import (Model Runner V2's verification: the murmur3 noise,
``gumbel_block_argmax``, ``_DRAFT_NOISE_SALT``): a mutant of one of their targets is the
function with every helper and global it reaches (:func:`jit_closure`), so that it loads as a
``--kernels`` file and an edit may change a helper (the draft stream's salt)."""


def production_source(target: str, module: str = BUNDLED) -> str:
    """The source of ``target``'s function (decorators included) as ``module``'s file has it;
    for a module of :data:`WITH_HELPERS`, after the helpers and globals it reaches."""
    path = module_file(module, target)
    if module != BUNDLED and TARGETS[target].module in WITH_HELPERS:
        root = Path(str(path)[: -len(TARGETS[target].module)])
        return jit_closure(root, TARGETS[target].module, TARGETS[target].function)
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    function = TARGETS[target].function
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            return "".join(lines[start : node.end_lineno])
    raise LookupError(f"{target} is not in {path}")


def _definitions(root: Path, module: str) -> tuple[str, dict[str, ast.stmt], dict[str, tuple[str, str]]]:
    """A vLLM file's text, its top-level ``@triton.jit`` functions and constant assignments by
    name, and the names it imports from other ``vllm`` files (name -> (file, name there))."""
    text = (root / module).read_text()
    defs: dict[str, ast.stmt] = {}
    imports: dict[str, tuple[str, str]] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            defs[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defs[node.targets[0].id] = node
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vllm."):
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module.replace(".", "/") + ".py", alias.name)
    return text, defs, imports


def jit_closure(root: Path, module: str, function: str) -> str:
    """``function`` of vLLM's ``module`` (under ``root``) after every ``@triton.jit`` helper and
    constant global it reaches, in its file or in the vLLM files its file imports them from,
    dependencies first. A name that resolves to neither (``torch``, a placeholder) is left to
    the mutant's header; a constant whose value is no constant expression is left out."""
    from eaglefuzz.harness.sources.file import _is_constant

    files: dict[str, tuple[str, dict[str, ast.stmt], dict[str, tuple[str, str]]]] = {}
    order: list[str] = []
    done: set[tuple[str, str]] = set()

    def visit(mod: str, name: str) -> None:
        if (mod, name) in done or not (root / mod).is_file():
            return
        done.add((mod, name))
        if mod not in files:
            files[mod] = _definitions(root, mod)
        text, defs, imports = files[mod]
        node = defs.get(name)
        if node is None:
            if name in imports:
                visit(*imports[name])
            return
        if isinstance(node, ast.Assign) and not _is_constant(node):
            return
        for used in sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {name}):
            if used in defs or used in imports:
                visit(mod, used)
        lines = text.splitlines(keepends=True)
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        chunk = "".join(lines[start : node.end_lineno])
        if chunk not in order:
            order.append(chunk)

    visit(module, function)
    if not order:
        raise LookupError(f"{function} is not in {root / module}")
    return "\n\n".join(order) + "\n"


def mutate(m: Mutant) -> str:
    """The buggy source of ``m.target``."""
    src = production_source(m.target, m.module)
    for old, new in m.edits:
        if src.count(old) != 1:
            raise ValueError(f"mutant {m.name}: the text to replace occurs {src.count(old)} times in {m.target}:\n{old}")
        src = src.replace(old, new, 1)
    return src


def write(m: Mutant, directory: Path) -> Path:
    """Write ``m`` as ``directory/<name>.py``, loadable with ``--kernels``; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{m.name}.py"
    header = HEADER.format(bug=m.bug, name=m.name, target=m.target, module=module_description(m.module, m.target))
    path.write_text(header + mutate(m))
    return path


# -- bugs that need production-sized inputs (issue 9): each names the extreme it needs --------


# -- eagle_step, compute_new_slot_mapping, update_num_computed_tokens_for_batch_change
# (docs/CONTRACT.md §6-§8): mutants of vLLM 0.33's module (V033 above), newer than the bundled copy.


MUTANTS: tuple[Mutant, ...] = tuple(
    m for name in TARGETS if has_role(name, "bugs") for m in role(name, "bugs").BUGS
)
"""Every target's seeded bugs (its folder's ``bugs.py``), in the targets' order: a view."""

CRASH_MUTANTS: tuple[Mutant, ...] = (
    # Kills the process (a store in unmapped memory under the interpreter; an illegal address,
    # a sticky CUDA error, compiled), so it cannot run inside the test process:
    # tests/test_crash.py runs it through the CLI's supervisor and through pytest-xdist.
    Mutant(
        "crash_wild_write_prepare_inputs",
        "eagle_prepare_inputs_padded_kernel",
        "prepare_inputs_padded: a wild store 2**40 elements past the buffer when a request has more than two drafts",
        (
            _edit(
                """\
    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)
""",
                """\
    tl.store(num_rejected_tokens_gpu_ptr + req_idx, num_rejected_tokens)
    if num_draft_tokens > 2:
        tl.store(num_rejected_tokens_gpu_ptr + req_idx + (1 << 40), num_rejected_tokens)
""",
            ),
        ),
        crash=True,
    ),
)

SANITIZER_MUTANTS: tuple[Mutant, ...] = (
    # Reads out of bounds without changing any output: the differential check passes (CPU and
    # GPU alike); only `eaglefuzz replay --sanitize` (compute-sanitizer memcheck) reports it.
    # benchmarks/gpu_sanitize.sh is the proof on a GPU.
    Mutant(
        "oob_read_copy_expand_unmasked",
        "copy_and_expand_eagle_inputs_kernel",
        "copy_and_expand: the input-token load lost its clamp and its mask, so the lanes past a request's "
        "valid tokens read past it (the last request's past the end of target_token_ids, up to "
        "BLOCK_SIZE_TOKENS elements); tl.where discards what they read, so every output stays right",
        (
            _edit(
                "    in_idx_clamped = tl.minimum(in_idx, total_input_tokens - 1)\n",
                "    in_idx_clamped = in_idx\n",
            ),
            _edit(
                "        target_token_ids_ptr + in_idx_clamped, mask=is_valid_region & in_bounds, other=0\n",
                "        target_token_ids_ptr + in_idx_clamped\n",
            ),
        ),
    ),
)

BY_NAME = {m.name: m for m in MUTANTS + CRASH_MUTANTS + SANITIZER_MUTANTS}


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "seeded_bugs_out")
    for m in MUTANTS + CRASH_MUTANTS + SANITIZER_MUTANTS:
        try:
            print(write(m, out))
        except ModuleUnavailable as exc:
            print(f"{m.name}: skipped ({exc})")
