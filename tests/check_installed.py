"""eaglefuzz as a built wheel installs it: run by ``tox -e installed`` (CI runs it) in an
environment holding the wheel, never the checkout.

    python -I tests/check_installed.py

``-I``: neither this script's folder nor ``PYTHONPATH`` is on ``sys.path``, and the commands run
without ``PYTHONPATH``, in a fresh folder outside the checkout (pytest would take a checkout
around its working directory, or around a ``--kernels`` file, for its configuration). It checks
that eaglefuzz and every one of its modules (``harness/checking/device_mode/`` included: ``--mode device``)
import from the environment's site-packages; that the regression corpus is the wheel's copy and
findings would land in the working directory (``harness/core/paths.py``); then runs, as a user would,
``eaglefuzz list``, a short ``eaglefuzz fuzz``, ``eaglefuzz replay`` of one corpus file and of
the default corpus, and ``pytest --kernels FILE`` with a seeded bug (caught by the ready suite
and by the corpus it replays); nothing may be written into the installed package. Exit 0 when
all holds, else 1 with the failing step and its output.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SITE = Path(sysconfig.get_paths()["purelib"]).resolve()
PI = "eagle_prepare_inputs_padded_kernel"
BUG = "pi_rejected_missing_plus_one"
"""A seeded bug of :data:`PI` that every case with drafts shows (tests/seeded_bugs/README.md)."""


class Failed(Exception):
    """A check that does not hold; its message says what was seen."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Failed(what)


def step(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A named step: prints ``ok NAME (seconds)``, or fails naming itself."""
    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        def run(*args: object) -> None:
            t = time.monotonic()
            try:
                fn(*args)
            except Failed as exc:
                raise Failed(f"{name}: {exc}") from None
            print(f"ok   {name} ({time.monotonic() - t:.1f} s)", flush=True)
        return run
    return wrap


def command(args: list[str], expect: int = 0, **env: str) -> str:
    """Run ``args`` (a script of this environment's ``bin/``) in the working directory, with
    ``env`` added to the environment; its standard output, once it exited with ``expect``."""
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **env}
    try:
        proc = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired as exc:
        raise Failed(f"{' '.join(args)}: still running after {exc.timeout} s") from None
    if proc.returncode != expect:
        raise Failed(f"{' '.join(args)}: exit {proc.returncode}, expected {expect}\n"
                     f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    return proc.stdout


def package_files(root: Path) -> dict[str, int]:
    """Every file of the installed package but bytecode, with its modification time."""
    return {str(f.relative_to(root)): f.stat().st_mtime_ns for f in sorted(root.rglob("*"))
            if f.is_file() and "__pycache__" not in f.parts}


@step("eaglefuzz and every module of it import from site-packages, harness/checking/device_mode/ included")
def installed_modules() -> None:
    import eaglefuzz

    check(Path(eaglefuzz.__file__).resolve().is_relative_to(SITE),
          f"eaglefuzz imported from {eaglefuzz.__file__}, not from {SITE}")
    check([Path(p).resolve() for p in eaglefuzz.__path__] == [SITE / "eaglefuzz"],
          f"eaglefuzz.__path__ is {eaglefuzz.__path__}: it reaches past the installed package")
    others = [p for p in sys.path if Path(p or ".").resolve() != SITE and (Path(p or ".") / "eaglefuzz").exists()]
    check(not others, f"another eaglefuzz is importable from {others}")
    root = SITE / "eaglefuzz"
    names = []
    for f in sorted(root.rglob("*.py")):
        parts = ("eaglefuzz", *f.relative_to(root).with_suffix("").parts)
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    check("eaglefuzz.harness.checking.device_mode.engine" in names, "the installed package has no harness/checking/device_mode/")
    for name in names:
        module = importlib.import_module(name)
        check(Path(module.__file__).resolve().is_relative_to(root), f"{name} imported from {module.__file__}")


@step("the regression corpus is the wheel's copy of the checkout's; findings go to ./corpus, replayed too")
def installed_corpus(work: Path) -> None:
    from eaglefuzz.harness.core import paths
    from eaglefuzz.harness.sources import findings_dir
    from eaglefuzz.harness.sources.bundled import BundledSource

    check(not paths.CHECKOUT, "harness/core/paths.py takes the installed package for a checkout")
    check(paths.CORPUS_DIR == SITE / "eaglefuzz" / "corpus", f"CORPUS_DIR is {paths.CORPUS_DIR}")
    installed = sorted(str(f.relative_to(paths.CORPUS_DIR)) for f in paths.CORPUS_DIR.rglob("*.json"))
    checkout = sorted(str(f.relative_to(CHECKOUT / "corpus")) for f in (CHECKOUT / "corpus").rglob("*.json"))
    check(installed == checkout, f"the installed corpus holds {len(installed)} files, the checkout's {len(checkout)}")
    check(findings_dir(BundledSource()) == work / "corpus", f"production findings go to {findings_dir(BundledSource())}")
    check(paths.default_corpora() == [paths.CORPUS_DIR], f"default corpora: {paths.default_corpora()}")
    (work / "corpus").mkdir()
    check(paths.default_corpora() == [paths.CORPUS_DIR, work / "corpus"], f"default corpora: {paths.default_corpora()}")
    (work / "corpus").rmdir()


@step("eaglefuzz list")
def list_targets() -> None:
    from eaglefuzz.harness.targets import TARGETS

    out = command(["eaglefuzz", "list"])
    check(all(name in out for name in TARGETS), f"eaglefuzz list does not name every target:\n{out}")
    caps = json.loads(command(["eaglefuzz", "list", "--json"]))["capabilities"]["targets"]
    check(all(caps[name]["corpus"] > 0 and caps[name]["bugs"] > 0 for name in TARGETS),
          f"the installed capability matrix misses the corpus or the seeded bugs: {caps}")


@step(f"eaglefuzz fuzz --kernel {PI} --examples 5")
def fuzz() -> None:
    doc = json.loads(command(["eaglefuzz", "fuzz", "--kernel", PI, "--examples", "5", "--no-progress", "--json"]))
    t = doc["targets"][PI]
    # a default run searches both tiers, 5 examples each (production first)
    check(t["examples"] == 10 and t["tiers_searched"] == ["production", "extended"]
          and not t["findings"], f"fuzz: {t}")


@step("eaglefuzz replay of one corpus file, and of the default corpus (no path)")
def replay() -> None:
    from eaglefuzz.harness.core.paths import CORPUS_DIR

    files = sorted((CORPUS_DIR / PI).glob("*.json"))
    doc = json.loads(command(["eaglefuzz", "replay", str(files[0]), "--json"]))
    check(doc["replayed"] == 1 and not doc["failed"], f"replay {files[0]}: {doc}")
    # The default corpus, against a user's file that defines one target (a port: not a bug), so
    # that only that target's cases run: every case of the wheel's corpus is found.
    port = Path("port_prepare_inputs_numpy.py")
    shutil.copy(CHECKOUT / "tests" / "seeded_bugs" / port, port)
    doc = json.loads(command(["eaglefuzz", "replay", "--kernels", str(port), "--json"]))
    found = doc["replayed"] + sum(doc["not_replayed"].values())
    check(doc["replayed"] == len(files) and not doc["failed"], f"replay --kernels {port}: {doc}")
    check(found == len(list(CORPUS_DIR.rglob("*.json"))), f"replay found {found} cases: {doc}")


@step(f"pytest --kernels {BUG}.py catches the bug (the ready suite and the wheel's corpus)")
def pytest_kernels(work: Path) -> None:
    from eaglefuzz.harness.core.paths import CORPUS_DIR

    spec = importlib.util.spec_from_file_location("eaglefuzz_seeded_mutants", CHECKOUT / "tests" / "seeded_bugs" / "mutants.py")
    mutants = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mutants)
    bug = mutants.write(mutants.BY_NAME[BUG], work / "bugs")
    # quick: no Hypothesis shrinking (the point is the installed plugin, not the search)
    out = command(["pytest", "--kernels", str(bug.relative_to(work)), "-p", "no:cacheprovider", "-q"], expect=1,
                  EAGLEFUZZ_PROFILE="quick")
    cases = len(list((CORPUS_DIR / PI).glob("*.json")))
    failed = {line.split(" - ")[0].rpartition("::")[2] for line in out.splitlines() if line.startswith("FAILED ")}
    check({f"test_fuzz[{PI}-production-0]", f"test_fuzz[{PI}-production-1]"} <= failed,
          f"the ready suite's fuzzing did not catch {BUG}:\n{out[-4000:]}")
    summary = out.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in (p.split()[:2] for p in summary.split(" in ")[0].split(", "))}
    check(counts.get("failed", 0) + counts.get("passed", 0) == 4 + cases and "error" not in counts,
          f"expected 4 fuzzing items (2 per tier) and {cases} corpus items: {summary}")
    check(any((work / "eaglefuzz-findings" / PI).glob("*.json")), "no finding saved to ./eaglefuzz-findings")


def stop_warm_servers(folder: Path) -> None:
    from eaglefuzz.harness.run import warm_servers as warm

    for lock in folder.glob("*.lock"):
        pid = warm.server_pid(lock.with_suffix(".sock"))
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="eaglefuzz-installed-")).resolve()
    # the commands' warm servers, stopped at the end (a short path: a socket's, as tests/conftest.py)
    warm_dir = Path(tempfile.mkdtemp(prefix="efwi", dir="/tmp")) / "w"
    os.environ["EAGLEFUZZ_WARM_DIR"] = str(warm_dir)
    os.chdir(work)
    site_before = package_files(SITE / "eaglefuzz")
    try:
        installed_modules()
        installed_corpus(work)
        list_targets()
        fuzz()
        replay()
        pytest_kernels(work)
        check(package_files(SITE / "eaglefuzz") == site_before, "files of the installed package changed")
        check(not (work / "corpus").exists(), "a production finding was saved to ./corpus")
    except Failed as exc:
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    finally:
        stop_warm_servers(warm_dir)
        os.chdir(CHECKOUT)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(warm_dir.parent, ignore_errors=True)
    print(f"eaglefuzz {SITE / 'eaglefuzz'} works as installed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
