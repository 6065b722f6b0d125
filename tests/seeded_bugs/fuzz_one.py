"""Hunt one seeded bug: fuzz its file, then replay the finding's case on production and on it.

    python tests/seeded_bugs/fuzz_one.py hunt FILE PRODUCTION SEED EXAMPLES [--probe-from S] [--domain D] [--backend B]
    python tests/seeded_bugs/fuzz_one.py replay FILE PRODUCTION CASE_FILE [--backend B]

``FILE`` is the mutant (a ``--kernels`` file defining one target), ``PRODUCTION`` the source
spec of the code it mutates (``bundled``, ``vllm-release:X.Y.Z``); each command prints one
JSON object. ``tests/test_seeded_bugs.py`` calls :func:`hunt` in its own process on the CPU and
runs this script on a CUDA device, where a bug that trips a device-side assert leaves the CUDA
context unusable for the rest of the process, which must not be the test worker's. What
cannot run after such a crash is left to a fresh process: a finding whose crash was fatal comes
back unreplayed (``replay`` replays it), a probe case whose crash was fatal comes back as where
to resume the probe (``--probe-from``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eaglefuzz.harness.sources.triton_backend import select_backend
from eaglefuzz.harness.checking.check import Finding, check_case
from eaglefuzz.harness.checking.corpus import decode, encode
from eaglefuzz.harness.checking.fuzz import fuzz_target
from eaglefuzz.harness.sources import Implementations, implementations_for, parse_source
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.generation.strategies import CUDA_SCALE, INTERPRETER_SCALE, Scale
from eaglefuzz.harness.targets import TARGETS

PROBE = Scale(max_requests=2, request_tail=2, max_query_len=4)
PROBE_CASES = 10
"""A crash bug must run on an ordinary case: one of these many small cases (NumPy seeds 0, 1,
...), drawn at :data:`PROBE`'s size, in order."""

NO_PROBE = -1
"""``--probe-from`` of a mutant that declares no crash: it is not probed."""


def summary(f: Finding | None) -> dict[str, Any] | None:
    """What a test needs of a finding (``None`` when the case passed)."""
    if f is None:
        return None
    return {"kind": f.kind, "crash": f.outcome.crash, "fatal": f.fatal, "report": f.report(), "origin_file": f.origin.file,
            "features": sorted(TARGETS[f.case.kernel].features_of(f.case))}


def probe(impls: Implementations, name: str, device: str, start: int = 0) -> dict[str, Any]:
    """Run the small probe cases from seed ``start`` on ``impls`` until one runs without a crash
    (a difference counts as running): ``{"ran": seed}``; ``{"fatal": seed, ...}`` when a crash
    left the device unusable first (resume at ``seed + 1`` in a fresh process), ``{"ran": None,
    "crashes": [...]}`` when every case crashed."""
    crashes = []
    for seed in range(start, PROBE_CASES):
        case = TARGETS[name].random_case(np.random.default_rng(seed), PROBE)
        f = check_case(case, impls, device)
        if f is None or not f.outcome.crash:
            return {"ran": seed}
        if f.fatal:
            return {"fatal": seed, "crash": f.outcome.crash}
        crashes.append(f"seed {seed}: {f.outcome.crash}")
    return {"ran": None, "crashes": crashes}


def replay(case_text: str, mutant: Implementations, production: Implementations, device: str) -> dict[str, Any]:
    """Check the case of ``case_text`` (a corpus file's text) on production, then on the mutant
    (last: its crash may leave the device unusable): each ``None`` (passes) or a summary. The
    case may lie in either tier (an extended-tier bug's finding is an edge divergence)."""
    case = decode(case_text, "the finding's case").case
    on_production = check_case(case, production, device, domain="extended")
    if on_production is not None and on_production.fatal:
        return {"production": summary(on_production), "mutant": None, "mutant_skipped": True}
    return {"production": summary(on_production), "mutant": summary(check_case(case, mutant, device, domain="extended"))}


def hunt(path: Path, production_spec: str, seed: int, examples: int, device: str, scale: Scale,
         probe_from: int = NO_PROBE, domain: str = "production") -> dict[str, Any]:
    """Fuzz the mutant at ``path`` on ``device`` for up to ``examples`` (no shrinking) of the
    tier ``domain`` (``production``, or ``extended``: the edges a default run searches after its
    production tier), up to its first finding, and replay it: ``{"names", "examples",
    "features", "finding", "case", "replay", "probe"}``.

    With ``probe_from >= 0`` (a mutant that declares its bug a crash), :func:`probe` runs first;
    a fatal probe case ends the hunt there. ``replay`` is ``None`` when the finding left the
    device unusable (replay ``case`` in a fresh process).
    """
    impls = implementations_for(FileSource(Path(path)))
    names = sorted(impls)
    out: dict[str, Any] = {"names": names, "examples": 0, "features": [], "finding": None, "case": None,
                           "replay": None, "probe": None}
    if probe_from >= 0:
        out["probe"] = probe(impls, names[0], device, probe_from)
        if "fatal" in out["probe"]:
            return out
    # a bug of the extended tier is one production cases do not show (its finding must be an edge
    # divergence): its hunt is the search of the edges that a default run makes after its
    # production tier, the same cases, without paying for the production tier first
    stats = fuzz_target(names[0], impls, device, scale, seed=seed, examples=examples, shrink=False, tiers=(domain,))
    out.update(examples=stats.examples, features=sorted(stats.features))
    if stats.findings:
        f = stats.findings[0]
        out.update(finding=summary(f), case=encode(f.case))
        if not f.fatal:
            production = implementations_for(parse_source(production_spec), names[:1])
            out["replay"] = replay(out["case"], impls, production, device)
    return out


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="fuzz_one.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    h = commands.add_parser("hunt", help="fuzz FILE, replay its finding on PRODUCTION and on FILE")
    r = commands.add_parser("replay", help="replay CASE_FILE (a corpus file) on PRODUCTION and on FILE")
    for c in (h, r):
        c.add_argument("file", type=Path)
        c.add_argument("production", help="source spec of the code FILE mutates (bundled, vllm-release:X.Y.Z)")
    h.add_argument("seed", type=int)
    h.add_argument("examples", type=int)
    h.add_argument("--probe-from", type=int, default=NO_PROBE, help="probe a crash bug from this seed first")
    h.add_argument("--domain", default="production", choices=("production", "extended"))
    r.add_argument("case_file", type=Path)
    for c in (h, r):
        c.add_argument("--backend", default="cuda")
    a = parser.parse_args(argv)
    b = select_backend(a.backend)
    if a.command == "hunt":
        scale = CUDA_SCALE if b.compiled else INTERPRETER_SCALE
        return hunt(a.file, a.production, a.seed, a.examples, b.device, scale, a.probe_from, a.domain)
    impls = implementations_for(FileSource(a.file))
    production = implementations_for(parse_source(a.production), sorted(impls)[:1])
    return replay(a.case_file.read_text(), impls, production, b.device)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
