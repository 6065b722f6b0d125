"""Two trees' device throughput on the same card, in one call (not a test): a change's effect on
the verifier's own rate, not only on its ratio. Needs a CUDA device.

    python benchmarks/ab_device.py --base DIR [--kernel NAME ...] [--rounds 2] [--json FILE]
                                   [--base-env NAME=VALUE ...] [--env NAME=VALUE ...]
                                   [device_throughput.py's options: --quick --lanes 4 --seconds S ...]

``DIR`` is another checkout (for example ``git worktree add /tmp/base main~3``, or a
``git archive`` of it), or this one (``--base .``) with another environment: ``--base-env`` and
``--env`` set a variable for the base's runs and for this tree's (repeatable; the lanes inherit
them), so that a switch is weighed on one tree, for example ``--base . --base-env
EAGLEFUZZ_FUSED_NOISE=0 --env EAGLEFUZZ_FUSED_NOISE=1``. Per target, ``benchmarks/device_throughput.py`` of each tree, each
with its own checkout on ``PYTHONPATH``, in ``--rounds`` rounds of alternating order (base,
this tree, then this tree, base, ...): each tree runs first as often as the other (the first
run of a call meets Triton's compilations and the kernel alone's noise). One line per target:
the verifier's rate (output tokens verified per second) and the ratio to its kernel alone of
each tree, the median over its rounds, and the change of the verifier's rate. The kernel-alone
figure is host-bound and moved by up to 1.35x between two runs on one H100: compare the
verifier's rate before believing a ratio. A tree before c6a7609 times its kernel alone on a
sample of up to 16 of the batches checked (3.3x and 8x the figure of all of them, for
sample_recovered and gumbel on one H100), a later one on all of them: across that change
only the verifier's rates compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_tree(tree: Path, name: str, rest: list[str], extra: dict[str, str] | None = None) -> dict:
    """``device_throughput.py --kernel name`` of ``tree`` (its checkout on ``PYTHONPATH``, the
    variables ``extra`` set): its JSON line."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x.jsonl"
        env = dict(os.environ, **(extra or {}),
                   PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run([sys.executable, str(tree / "benchmarks" / "device_throughput.py"), "--kernel", name,
                               "--json", str(out), *rest], cwd=tree, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode or not out.is_file():
            sys.exit(f"{tree}: device_throughput.py --kernel {name} failed (exit {done.returncode}):\n"
                     + "\n".join(done.stderr.splitlines()[-15:]))
        return json.loads(out.read_text().splitlines()[-1])


def _variables(p: argparse.ArgumentParser, option: str, items: list[str]) -> dict[str, str]:
    """``option``'s ``NAME=VALUE`` items as a mapping; one that is not (no ``=``, or a name that is
    no environment variable's) is one line, exit 2."""
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            p.error(f"{option} {item}: NAME=VALUE, NAME an environment variable's name")
        out[name] = value
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True, help="the other checkout")
    p.add_argument("--kernel", nargs="+", metavar="NAME", required=True, help="the targets")
    p.add_argument("--rounds", type=int, default=2, help="runs of each tree per target, in alternating order")
    p.add_argument("--json", type=Path, help="also append one JSON line per target here")
    p.add_argument("--base-env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable of the base's runs (repeatable)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable of this tree's runs (repeatable)")
    args, rest = p.parse_known_args()
    envs = {"base": _variables(p, "--base-env", args.base_env), "tree": _variables(p, "--env", args.env)}
    base = args.base.resolve()
    if not (base / "benchmarks" / "device_throughput.py").is_file():
        p.error(f"--base {args.base}: no benchmarks/device_throughput.py there (not a checkout of eaglefuzz)")
    if args.rounds < 1:
        p.error("--rounds N: N is at least 1")
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.checking.device_mode import device_targets

    unknown = [n for n in args.kernel if n not in device_targets()]
    if unknown:
        p.error(f"--kernel {' '.join(unknown)}: not a device target (no device.py in its folder: see the device column of eaglefuzz list)")
    if envs["base"] or envs["tree"]:
        print(f"base: {base} {envs['base'] or ''}; this tree: {ROOT} {envs['tree'] or ''}")
    print("| target | base verified/s | this tree verified/s | change | base ratio | this tree ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in args.kernel:
        runs: dict[str, list[dict]] = {"base": [], "tree": []}
        for r in range(args.rounds):
            for key in (("base", "tree") if r % 2 == 0 else ("tree", "base")):
                runs[key].append(run_tree(base if key == "base" else ROOT, name, rest, envs[key]))
        rate = {k: statistics.median(x["tokens"] / x["seconds"] for x in v) for k, v in runs.items()}
        ratio = {k: statistics.median(x["ratio"] for x in v) if all(x["ratio"] is not None for x in v) else None
                 for k, v in runs.items()}
        cell = {k: "n/a" if v is None else f"{v:.3f}" for k, v in ratio.items()}
        print(f"| {name} | {rate['base'] / 1e6:,.1f} M | {rate['tree'] / 1e6:,.1f} M | "
              f"{100 * (rate['tree'] / rate['base'] - 1):+.0f}% | {cell['base']} | {cell['tree']} |", flush=True)
        if args.json:
            with args.json.open("a") as f:
                f.write(json.dumps({"target": name, "base": runs["base"], "tree": runs["tree"], "env": envs}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
