"""The import contracts of ``pyproject.toml`` (``[tool.importlinter]``), checked by import-linter
on the checkout's real import graph; ``tox -e lint`` runs this file, tests/test_walls.py too.

The folders ``harness/``, ``kernels/`` and ``oracles/`` are the subpackages ``eaglefuzz.harness``,
``eaglefuzz.kernels`` and ``eaglefuzz.oracles`` only through setup.py's ``package_dir`` and
``eaglefuzz/__init__.py``'s ``__path__``; grimp (import-linter's graph builder) walks a package's
own folder. So the contracts are checked on a staging tree: a temporary ``eaglefuzz/`` holding
``eaglefuzz/__init__.py`` and links to the three folders, first on ``sys.path`` of a fresh
interpreter. Relative imports, absolute ``eaglefuzz.`` ones and those inside functions all count.

    python tests/lint_imports.py [CHECKOUT]    # exit code 0 when every contract is kept
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("harness", "kernels", "oracles")

_RUN = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename=sys.argv[2], no_cache=True, no_logo=True))"
)


def stage(checkout: Path, into: Path) -> Path:
    """A package folder ``into/eaglefuzz`` whose subpackages are ``checkout``'s folders; the
    folder to put on ``sys.path``."""
    package = into / "eaglefuzz"
    package.mkdir(parents=True)
    shutil.copy(checkout / "eaglefuzz" / "__init__.py", package / "__init__.py")
    for part in PARTS:
        try:
            os.symlink(checkout / part, package / part, target_is_directory=True)
        except OSError:  # no symbolic links here: a copy shows grimp the same imports
            shutil.copytree(checkout / part, package / part, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def lint(checkout: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run import-linter on ``checkout`` with its ``pyproject.toml``; the finished process
    (return code 0: every contract kept; its output names each contract and what broke it)."""
    with tempfile.TemporaryDirectory(prefix="eaglefuzz-lint-") as tmp:
        path = stage(checkout, Path(tmp))
        return subprocess.run([sys.executable, "-c", _RUN, str(path), str(checkout / "pyproject.toml")],
                              capture_output=True, text=True, cwd=tmp)


if __name__ == "__main__":
    done = lint(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)
