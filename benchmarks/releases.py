"""The release matrix (not a test): fuzz every vLLM release's targets, print Markdown tables.

For each release from ``--since`` (0.12.0) to the newest on the package index
(``pip index versions vllm``; or the ``--versions`` given), its files are fetched once
(``~/.cache/eaglefuzz/wheels``: the extracted files only: every target's module, the
spec-decode utils and the rejection sampler, with the files they run with) and
``eaglefuzz fuzz --vllm-version X --examples N --domain production --json`` runs in a child
process (the production tier: each release's contract verdict, as the tables always gave it). One row per
release, one column per target, each cell that target's verdict in that release: clean (its
examples), a finding (its kind, first difference and case file), an interface verdict (the
release's function has other parameters than the contract's: what is missing and extra; not
tested, not a finding) or ``-`` (the release does not define it); a release that cannot be
fetched or loaded gets one verdict. A second table gives each target's parameter lists across
the releases, parsed from the files. Findings go to a temporary folder (or
``$EAGLEFUZZ_RELEASES_FINDINGS``), not ``corpus/``.

    python benchmarks/releases.py [--examples N] [--since X.Y.Z] [--versions X.Y.Z ...]
                                  [--kernel NAME ...] [--jobs J] [--backend B] [--output FILE]
                                  [--results SECTION]

With ``--kernel``, only those targets are fuzzed (a release that defines none of them says so).
``--results SECTION`` writes the tables into ``benchmarks/RESULTS.md`` too.

Exit status: 0 when no release has a finding, 1 when one has (the tables are printed either way).
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
from dataclasses import dataclass, field
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
    """One release: a verdict per target (``verdicts``: target -> cell text), or one verdict
    for the whole release (``whole``: it cannot be fetched or loaded)."""

    version: str
    fetch_s: float
    fuzz_s: float = 0.0
    verdicts: dict[str, str] = field(default_factory=dict)
    whole: str = ""
    finding: bool = False

    @property
    def verdict(self) -> str:
        """The row in one phrase (the progress line)."""
        if self.whole:
            return self.whole
        return "; ".join(f"{n}: {v}" for n, v in self.verdicts.items()) or "no target"


def _value(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def finding_cell(f: dict) -> str:
    """A finding, in a table cell: its kind, its first difference (or its crash) and its case."""
    what = f["kind"]
    if f.get("differences"):
        d = f["differences"][0]
        where = d["array"] if d["index"] is None else f"{d['array']}[{d['index']}]"
        req = "" if d.get("request") is None else f" (request {d['request']})"
        more = f", {f['differences_total'] - 1} more" if f.get("differences_total", 1) > 1 else ""
        what += f": {where}{req} expected {_value(d['expected'])}, actual {_value(d['actual'])}{more}"
    elif f.get("crash") or f.get("hang"):
        what += ": " + " ".join(str(f.get("crash") or f.get("hang")).split())[:120]
    case = f" (case {Path(f['file']).name})" if f.get("file") else ""
    return f"**{what}**{case}"


_INTERFACE = re.compile(r"has another interface than the contract's \((.*?)\): not a bug finding")


def interface_cell(line: str) -> str:
    """An interface verdict (one line of the run), in a table cell: what differs."""
    m = _INTERFACE.search(line)
    return f"interface: {m.group(1)}" if m else f"not tested: {line}"


def verdicts_of(report: dict, kernels: list[str] | None) -> tuple[dict[str, str], bool]:
    """Target -> cell text from a run's JSON document, and whether any target has a finding."""
    variants = {n.split(": ")[0]: n.split("variant '")[1].split("'")[0]
                for n in report["notes"] if "tested as variant '" in n}
    cells: dict[str, tuple[str, bool]] = {}
    for n, t in report["targets"].items():
        if t["findings"]:
            cells[n] = ("; ".join(finding_cell(f) for f in t["findings"][:1]), True)
        else:
            edge = f", {len(t['edge_divergences'])} edge divergence(s)" if t.get("edge_divergences") else ""
            var = f"; variant {variants[n]}" if n in variants else ""
            cells[n] = (f"clean ({t['examples']}{var}{edge})", False)
    for n, line in report.get("untested", {}).items():
        cells[n] = (interface_cell(line), False)
    order = [n for n in (kernels or list(cells)) if n in cells] + [n for n in cells if kernels and n not in kernels]
    return {n: cells[n][0] for n in order}, any(cells[n][1] for n in order)


def verdicts_from_errors(lines: list[str]) -> dict[str, str] | None:
    """Target -> cell text from the error lines of a run that had nothing else to test (each
    an interface verdict), or ``None`` when they are something else."""
    found = [re.search(r"(\w+) has another interface", e) for e in lines]
    if not lines or not all(found) or not all(_INTERFACE.search(e) for e in lines):
        return None
    return {m.group(1): interface_cell(e) for m, e in zip(found, lines, strict=True) if m}


def run_release(version: str, examples: int, backend: str, findings: Path, kernels: list[str] | None = None) -> Row:
    """Fetch (timed alone), then fuzz one release in a child process and give each target
    its verdict: clean, a finding (its first difference and its case), or the interface
    verdict (what differs from the contract's parameters)."""
    from eaglefuzz.harness.core.errors import UserError
    from eaglefuzz.harness.sources.vllm import release_files

    start = time.monotonic()
    try:
        release_files(version)
    except UserError as exc:
        return Row(version, time.monotonic() - start, whole=f"cannot fetch: {exc}")
    fetch_s = time.monotonic() - start
    if kernels:  # only those the release defines (naming an absent one is a usage error)
        kernels = [k for k in kernels if defines(version, k)]
        if not kernels:
            return Row(version, fetch_s, whole="defines none of the targets asked for")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "eaglefuzz.harness.cli", "fuzz", "--vllm-version", version,
         "--examples", str(examples), "--domain", "production", "--backend", backend, "--json", "--no-progress",
         "--corpus", str(findings / version), *(a for k in kernels or () for a in ("--kernel", k))],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False,
    )
    fuzz_s = time.monotonic() - start
    err = [ln.removeprefix("eaglefuzz: error: ") for ln in proc.stderr.splitlines() if ln.startswith("eaglefuzz: error:")]
    report = None
    if proc.stdout.strip():
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            report = None
    if isinstance(report, dict) and "targets" in report:  # exit 0, 1, 2 (a target untested) or 4
        cells, found = verdicts_of(report, kernels)
        return Row(version, fetch_s, fuzz_s, cells, finding=found)
    cells = verdicts_from_errors(err) if proc.returncode == 2 else None
    if cells:  # nothing else to test: the run's error lines are the verdicts
        return Row(version, fetch_s, fuzz_s, cells)
    if proc.returncode == 2 and err:
        return Row(version, fetch_s, fuzz_s, whole=f"cannot load: {err[-1]}")
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return Row(version, fetch_s, fuzz_s, whole=f"error (exit {proc.returncode}): {tail}")


def defines(version: str, name: str) -> bool:
    """Whether vLLM ``version``'s module of target ``name`` defines its function (the file is
    parsed, not run)."""
    from eaglefuzz.harness.core.errors import UserError
    from eaglefuzz.harness.sources.vllm import release_module_file
    from eaglefuzz.harness.targets import TARGETS

    if name not in TARGETS:
        return False
    try:
        text = release_module_file(version, TARGETS[name].module).read_text()
    except UserError:
        return False
    return re.search(rf"^def {re.escape(TARGETS[name].function)}\b", text, re.M) is not None


def signatures(versions: list[str], kernels: list[str] | None) -> dict[str, list[tuple[list[str], tuple[str, ...]]]]:
    """Per target (``kernels``, else every target), the releases of each parameter list its
    function has (from the files, parsed, not run), oldest first: ``[(releases, params)]``."""
    import ast

    from eaglefuzz.harness.core.errors import UserError
    from eaglefuzz.harness.sources.vllm import release_module_file
    from eaglefuzz.harness.targets import TARGETS

    out: dict[str, list[tuple[list[str], tuple[str, ...]]]] = {}
    for name in kernels or list(TARGETS):
        groups: list[tuple[list[str], tuple[str, ...]]] = []
        for v in versions:
            try:
                tree = ast.parse(release_module_file(v, TARGETS[name].module).read_text())
            except UserError:
                continue
            node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == TARGETS[name].function),
                        None)
            if node is None:
                continue
            params = tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs))
            if groups and groups[-1][1] == params:
                groups[-1][0].append(v)
            else:
                groups.append(([v], params))
        out[name] = groups
    return out


def signature_table(sigs: dict[str, list[tuple[list[str], tuple[str, ...]]]]) -> str:
    """The parameter lists of each target across the releases, and how each differs from the
    contract's (``Target.parameters``)."""
    from eaglefuzz.harness.targets import TARGETS

    lines = ["| target | releases | parameters against the contract's |", "| --- | --- | --- |"]
    for name, groups in sigs.items():
        expected = list(TARGETS[name].parameters or ())
        for vs, params in groups:
            span = vs[0] if len(vs) == 1 else f"{vs[0]} to {vs[-1]} ({len(vs)})"
            missing = [p for p in expected if p not in params]
            extra = [p for p in params if p not in expected]
            if not expected or list(params) == expected:
                diff = "the contract's"
            elif missing or extra:
                diff = "; ".join(filter(None, ["missing " + ", ".join(missing) if missing else "",
                                               "extra " + ", ".join(extra) if extra else ""]))
            else:
                diff = "the contract's names in another order"
            lines.append(f"| {name} | {span} | {diff} |")
    return "\n".join(lines)


def table(rows: list[Row], examples: int, backend: str, kernels: list[str] | None = None) -> str:
    """One row per release, one column per target: its verdict there (``-``: not defined)."""
    from eaglefuzz.harness.targets import TARGETS

    seen = {n for r in rows for n in r.verdicts}
    names = [n for n in (kernels or list(TARGETS)) if n in seen] or list(kernels or ())
    lines = [
        f"verdicts: {examples} examples per target, backend {backend}; `-`: the release does not define it",
        "",
        "| release | " + " | ".join(names) + " | fetch s | fuzz s |",
        "| --- | " + " | ".join("---" for _ in names) + " | ---: | ---: |",
    ]
    for r in rows:
        cells = [r.whole] + [""] * (len(names) - 1) if r.whole else [r.verdicts.get(n, "-") for n in names]
        cells = [c.replace("|", "/") for c in cells]
        lines.append(f"| {r.version} | " + " | ".join(cells) + f" | {r.fetch_s:.1f} | {r.fuzz_s:.1f} |")
    return "\n".join(lines)


RESULTS = ROOT / "benchmarks" / "RESULTS.md"


def write_results(text: str, section: str, path: Path = RESULTS) -> None:
    """Put ``text`` between the markers ``<!-- releases:SECTION -->`` and
    ``<!-- /releases:SECTION -->`` of ``path`` (replacing what was there), or append a section
    with them at its end."""
    begin, end = f"<!-- releases:{section} -->", f"<!-- /releases:{section} -->"
    doc = path.read_text() if path.exists() else ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in doc and end in doc.split(begin, 1)[1]:
        head, rest = doc.split(begin, 1)
        doc = head + block + rest.split(end, 1)[1]
    else:
        doc = doc.rstrip() + f"\n\n### The release matrix: {section}\n\n{block}\n"
    path.write_text(doc)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=20, help="examples per target (default 20)")
    p.add_argument("--since", default="0.12.0", help="the oldest release (default 0.12.0)")
    p.add_argument("--versions", nargs="+", metavar="X.Y.Z", help="these releases instead of the index's")
    p.add_argument("--kernel", nargs="+", metavar="NAME", help="only these targets (default: every target)")
    p.add_argument("--jobs", type=int, default=1, help="releases fuzzed at once (default 1)")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "interpreter"])
    p.add_argument("--output", type=Path, help="also write the tables to this file")
    p.add_argument("--results", metavar="SECTION",
                   help="also write the tables into benchmarks/RESULTS.md, between its markers "
                        "<!-- releases:SECTION --> and <!-- /releases:SECTION --> (a new section at "
                        "its end if it has none)")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.targets import TARGETS

    unknown = [k for k in args.kernel or () if k not in TARGETS]
    if unknown:
        sys.exit(f"releases: --kernel {unknown[0]}: unknown target (known: {', '.join(TARGETS)})")
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
    fetched = [r.version for r in rows if not r.whole.startswith("cannot fetch")]
    text = table(rows, args.examples, args.backend, args.kernel)
    text += f"\n\n{len(rows)} releases in {time.monotonic() - start:.0f} s\n"
    text += "\nThe parameters of each target's function in those releases (parsed from the files):\n\n"
    text += signature_table(signatures(fetched, args.kernel)) + "\n"
    print(text)
    if args.output:
        args.output.write_text(text)
    if args.results:
        write_results(text, args.results)
    return 1 if any(r.finding for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
