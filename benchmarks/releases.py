"""The release matrix (not a test): fuzz every vLLM release's module, print a Markdown table.

For each release from ``--since`` (0.12.0) to the newest on the package index
(``pip index versions vllm``; or the ``--versions`` given), its files are fetched once
(``~/.cache/eaglefuzz/wheels``: the extracted files only) and
``eaglefuzz fuzz --vllm-version X --examples N --json`` runs in a child process. One row per
release: the targets the module defines, the verdict (clean / finding / interface mismatch /
cannot load, with the reason) and the times. Findings go to a temporary folder, not ``corpus/``.

    python benchmarks/releases.py [--examples N] [--since X.Y.Z] [--versions X.Y.Z ...]
                                  [--kernel NAME ...] [--jobs J] [--backend B] [--output FILE]

With ``--kernel``, only those targets are fuzzed (a release that defines none of them says so).

Exit status: 0 when no release has a finding, 1 when one has (a table is printed either way).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def index_versions(since: str) -> list[str]:
    """Final releases of vLLM on the package index from ``since`` on, oldest first."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "vllm", "--disable-pip-version-check"],
        capture_output=True, text=True, check=False,
    )
    m = re.search(r"Available versions: (.*)", out.stdout)
    if not m:
        sys.exit(f"releases: pip index versions vllm gave no list: {(out.stderr or out.stdout).strip()[-300:]}")
    versions = [v.strip() for v in m.group(1).split(",")]
    final = [v for v in versions if re.fullmatch(r"\d+(\.\d+)+", v)]
    return sorted((v for v in final if _key(v) >= _key(since)), key=_key)


@dataclass
class Row:
    version: str
    fetch_s: float
    targets: str
    verdict: str
    fuzz_s: float
    finding: bool = False


def run_release(version: str, examples: int, backend: str, findings: Path, kernels: list[str] | None = None) -> Row:
    """Fetch (timed alone), then fuzz one release in a child process and classify the result."""
    from eaglefuzz.harness.core.errors import UserError
    from eaglefuzz.harness.sources.vllm import release_files

    start = time.monotonic()
    try:
        release_files(version)
    except UserError as exc:
        return Row(version, time.monotonic() - start, "-", f"cannot fetch: {exc}", 0.0)
    fetch_s = time.monotonic() - start
    if kernels:  # only those the release defines (naming an absent one is a usage error)
        from eaglefuzz.harness.core.errors import UserError as NoModule
        from eaglefuzz.harness.sources.vllm import release_module_file
        from eaglefuzz.harness.targets import TARGETS

        def defines(k: str) -> bool:  # in its target's own module (the rejection sampler's, the spec-decode one)
            try:
                text = release_module_file(version, TARGETS[k].module).read_text()
            except NoModule:
                return False
            return re.search(rf"^def {re.escape(k)}\b", text, re.M) is not None

        kernels = [k for k in kernels if k in TARGETS and defines(k)]
        if not kernels:
            return Row(version, fetch_s, "-", "defines none of the targets asked for", 0.0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--vllm-version", version,
         "--examples", str(examples), "--backend", backend, "--json", "--no-progress",
         "--corpus", str(findings / version), *(a for k in kernels or () for a in ("--kernel", k))],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )
    fuzz_s = time.monotonic() - start
    err = [ln.removeprefix("eaglefuzz: error: ") for ln in proc.stderr.splitlines() if ln.startswith("eaglefuzz: error:")]
    if proc.returncode in (0, 1):
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            return Row(version, fetch_s, "?", f"no report (exit {proc.returncode})", fuzz_s)
        names = list(report["targets"])
        variants = [n.split(": ")[0] for n in report["notes"] if "tested as variant" in n]
        targets = ", ".join(f"{n} (variant)" if n in variants else n for n in names)
        found = {n: len(t["findings"]) for n, t in report["targets"].items() if t["findings"]}
        if found:
            kinds = "; ".join(f"{n}: {t['findings'][0]['kind']}" for n, t in report["targets"].items() if t["findings"])
            return Row(version, fetch_s, targets, f"**finding** ({kinds}; saved in {findings / version})", fuzz_s, True)
        n_ex = sum(t["examples"] for t in report["targets"].values())
        return Row(version, fetch_s, targets, f"clean ({n_ex} examples)", fuzz_s)
    if proc.returncode == 2 and err:
        what = "interface mismatch" if "another interface" in err[-1] else "cannot load"
        return Row(version, fetch_s, "-", f"{what}: {err[-1]}", fuzz_s)
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return Row(version, fetch_s, "-", f"error (exit {proc.returncode}): {tail}", fuzz_s)


def table(rows: list[Row], examples: int, backend: str) -> str:
    lines = [
        f"| release | targets found | verdict ({examples} examples per target, {backend}) | fetch s | fuzz s |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r.version} | {r.targets} | {r.verdict.replace('|', '/')} | {r.fetch_s:.1f} | {r.fuzz_s:.1f} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=20, help="examples per target (default 20)")
    p.add_argument("--since", default="0.12.0", help="the oldest release (default 0.12.0)")
    p.add_argument("--versions", nargs="+", metavar="X.Y.Z", help="these releases instead of the index's")
    p.add_argument("--kernel", nargs="+", metavar="NAME", help="only these targets (default: every target)")
    p.add_argument("--jobs", type=int, default=1, help="releases fuzzed at once (default 1)")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    p.add_argument("--output", type=Path, help="also write the table to this file")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    versions = args.versions or index_versions(args.since)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eaglefuzz-releases-") as tmp:
        findings = Path(os.environ.get("EAGLEFUZZ_RELEASES_FINDINGS", tmp))
        def one(version: str) -> Row:
            row = run_release(version, args.examples, args.backend, findings, args.kernel)
            print(f"releases: {version}: {row.verdict} ({row.fetch_s + row.fuzz_s:.0f} s)", file=sys.stderr, flush=True)
            return row

        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            rows = list(pool.map(one, versions))
        if any(r.finding for r in rows) and "EAGLEFUZZ_RELEASES_FINDINGS" not in os.environ:
            print("(findings were saved in a temporary folder; set EAGLEFUZZ_RELEASES_FINDINGS to keep them)",
                  file=sys.stderr)
    text = table(rows, args.examples, args.backend)
    text += f"\n\n{len(rows)} releases in {time.monotonic() - start:.0f} s\n"
    print(text)
    if args.output:
        args.output.write_text(text)
    return 1 if any(r.finding for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
