"""Three-way check of the corpus on a CUDA machine (not a test): compiled vs interpreter vs oracle.

    python benchmarks/three_way.py [PATHS ...] [--vllm-version X.Y.Z] [--output FILE]

Replays the corpus (or PATHS) twice against the same source, compiled (``--backend cuda``)
and under the Triton interpreter (``--backend interpreter``), each against the NumPy and Numba
oracles, and prints one row per target: cases replayed, failures per backend, and the cases
whose verdicts differ between the two backends (a kernel whose compiled code and interpreted
code do not agree, even where the oracle agrees with one of them). Exit status 1 when a case
fails on either backend or the verdicts differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def replay(backend: str, paths: list[str], source: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "replay", *paths, *source, "--backend", backend, "--json"],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.exit(f"three_way: replay --backend {backend} gave no report (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="*", default=[str(ROOT / "corpus")])
    p.add_argument("--vllm-version", metavar="X.Y.Z", help="that release's module instead of the bundled copy")
    p.add_argument("--output", type=Path)
    args = p.parse_args()
    source = ["--vllm-version", args.vllm_version] if args.vllm_version else []
    docs = {b: replay(b, args.paths, source) for b in ("cuda", "interpreter")}

    def failing(doc: dict) -> set[str]:
        return {str(f.get("file", f)) if isinstance(f, dict) else str(f) for f in doc.get("failed", [])}

    bad = {b: failing(d) for b, d in docs.items()}
    differ = bad["cuda"] ^ bad["interpreter"]
    lines = [f"source: {docs['cuda']['source']}",
             "| backend | cases replayed | failing (vs the oracles) | not run |", "| --- | ---: | ---: | ---: |"]
    for b, d in docs.items():
        lines.append(f"| {b} | {d['replayed']} | {len(bad[b])} | {d.get('not_run', 0)} |")
    lines.append(f"\nverdicts that differ between compiled and interpreter: {len(differ)}")
    lines += [f"  {f}" for f in sorted(differ)]
    text = "\n".join(lines)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")
    return 1 if bad["cuda"] or bad["interpreter"] else 0


if __name__ == "__main__":
    sys.exit(main())
