"""The int32 flat-index wrap of vLLM's rejection sampler, end to end on a large GPU (issue 28).

    python benchmarks/scale_wrap.py OUTDIR [--examples N] [--deadline S] [--version 0.33.0]

1. ``eaglefuzz fuzz --vllm-version V --mode device`` on ``rejection_random_sample_kernel`` and
   ``sample_recovered_tokens_kernel``: the production-scale cases (tables past 2**31 elements)
   run in their scale lane; each kernel's wrap is reported, minimised and saved to OUTDIR/corpus.
2. Each saved finding replayed (``eaglefuzz replay FILE --vllm-version V --limits ...``: it
   fails) and its reproducer run with python (it fails).
3. The fixed variant (vLLM PR #48055's int64 promotion, the folders' ``AUDIT.fixes["PR #48055"]`` edits
   applied to the release's text now; tests/seeded_bugs/mutants.py writes it): the replay and
   the reproducer pass on it.

Every command, its exit code and seconds go to OUTDIR/summary.json; logs to OUTDIR/*.log.
Needs a GPU with about 48 GiB free and the release's files (``EAGLEFUZZ_WHEELS`` offline).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("rejection_random_sample_kernel", "sample_recovered_tokens_kernel")


END = [float("inf")]
"""When the script must be done (``--deadline``): later steps are skipped, and say so."""


def run(cmd: list[str], log: Path, timeout: float) -> dict[str, object]:
    t0 = time.monotonic()
    timeout = min(timeout, END[0] - t0)
    if timeout < 20:
        entry = {"command": " ".join(cmd), "skipped": "past --deadline"}
        print(json.dumps(entry), flush=True)
        return entry
    with log.open("w") as f:
        try:
            code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    entry = {"command": " ".join(cmd), "exit": code, "seconds": round(time.monotonic() - t0, 1), "log": log.name}
    print(json.dumps(entry), flush=True)
    return entry


def reproducer(report: str) -> str:
    begin = report.index("# --- reproducer")
    return report[report.index("\n", begin) + 1 : report.index("# --- end of reproducer ---")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--examples", type=int, default=4, help="per target (example 3 is the first scale case)")
    ap.add_argument("--deadline", type=float, default=3600.0, help="seconds for the whole script")
    ap.add_argument("--version", default="0.33.0")
    a = ap.parse_args()
    END[0] = time.monotonic() + a.deadline
    out: Path = a.out
    out.mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus"
    cli = [sys.executable, "-m", "eaglefuzz.harness.cli"]
    summary: dict[str, object] = {"steps": []}
    steps: list = summary["steps"]  # type: ignore[assignment]
    kernels = [x for t in TARGETS for x in ("--kernel", t)]
    steps.append(run([*cli, "fuzz", "--vllm-version", a.version, "--mode", "device", *kernels, "--corpus", str(corpus),
                      "--examples", str(a.examples), "--no-progress"], out / "fuzz.log", 3600))
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.checking.audit import audit_of
    from eaglefuzz.harness.targetkit.bugs import Mutant
    from tests.seeded_bugs import mutants

    for target in TARGETS:
        fixed = mutants.write(Mutant(f"{target}_pr48055", target, "vLLM PR #48055: int64 row offsets",
                                     audit_of(target).fixes["PR #48055"], f"vllm-release:{a.version}"), out / "fixed")
        for f in sorted((corpus / target).glob("*.json")):
            doc = json.loads(f.read_text())
            replay = doc.get("finding", {}).get("replay", "")
            limits = re.search(r"--limits (\S+)", replay)
            lim = ["--limits", limits.group(1)] if limits else []
            steps.append(run([*cli, "replay", str(f), "--vllm-version", a.version, *lim], out / f"replay-{f.stem}.log", 900))
            steps.append(run([*cli, "replay", str(f), "--kernels", str(fixed), *lim], out / f"fixed-{f.stem}.log", 900))
            (out / "summary.json").write_text(json.dumps(summary, indent=1))
            report = doc.get("finding", {}).get("report", "")
            if "# --- reproducer" in report:
                text = reproducer(report)
                (out / f"repro-{f.stem}.py").write_text(text)
                steps.append(run([sys.executable, str(out / f"repro-{f.stem}.py")], out / f"repro-{f.stem}.log", 900))
                fixed_text = re.sub(r"source='[^']*'", f"source='file:{fixed}'", text)
                (out / f"repro-fixed-{f.stem}.py").write_text(fixed_text)
                steps.append(run([sys.executable, str(out / f"repro-fixed-{f.stem}.py")],
                                 out / f"repro-fixed-{f.stem}.log", 900))
            summary.setdefault("findings", []).append({"file": str(f), "kind": doc.get("finding", {}).get("report", "")[:200],
                                                       "reproducer_lines": len(reproducer(report).splitlines())
                                                       if "# --- reproducer" in report else None})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
