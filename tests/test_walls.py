"""The import contracts (pyproject.toml's ``[tool.importlinter]``, run by tests/lint_imports.py and
``tox -e lint``): they hold on the checkout, and they reject an import circle, a breach of each
wall, an upward import across harness/'s layers and one target folder importing another."""

import importlib.util
import shutil
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lint_imports", Path(__file__).with_name("lint_imports.py"))
lint_imports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lint_imports)
ROOT = lint_imports.ROOT


def test_import_contracts_hold(needs):
    needs.import_linter()
    done = lint_imports.lint()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "KEPT" in done.stdout


def status(output: str, contract: str) -> str:
    """``KEPT`` or ``BROKEN``: what import-linter's summary says of the contract named ``contract``."""
    summary = " ".join(output.split()).split("Contracts:", 1)[0]
    after = summary[summary.index(contract) + len(contract):]
    kept, broken = after.find(" KEPT"), after.find(" BROKEN")
    return "BROKEN" if broken != -1 and (kept == -1 or broken < kept) else "KEPT"


def test_lint_rejects_a_circle_a_wall_breach_an_upward_import_and_a_folder_importing_another(tmp_path, needs):
    needs.import_linter()
    for part in ("eaglefuzz", *lint_imports.PARTS):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    assert lint_imports.lint(tmp_path).returncode == 0  # the copy keeps them all
    (tmp_path / "harness" / "core" / "ping.py").write_text("from . import pong\n")
    (tmp_path / "harness" / "core" / "pong.py").write_text("from . import ping\n")
    (tmp_path / "oracles" / "bad.py").write_text("from ..kernels import spec_decode_utils\nimport triton\n")
    (tmp_path / "harness" / "generation" / "upward.py").write_text("from ..checking import check\n")
    record = tmp_path / "harness" / "targets" / "compute_new_slot_mapping" / "record.py"
    record.write_text(record.read_text() + "\nfrom ..eagle_step_slot_mapping_metadata_kernel import layout\n")
    done = lint_imports.lint(tmp_path)
    assert done.returncode != 0
    for contract in ("no import circles", "wall: oracles/ never imports kernels/, harness/ or triton",
                     "harness/ over kernels/ and oracles/", "harness/ in layers",
                     "the target folders are independent of each other"):
        assert status(done.stdout, contract) == "BROKEN", (contract, done.stdout)
    assert status(done.stdout, "wall: kernels/ never imports harness/ or oracles/") == "KEPT"
    out = " ".join(done.stdout.split())
    assert "No cycles are allowed in eaglefuzz.harness.core." in out and ".pong -> .ping" in out
    assert "eaglefuzz.oracles.bad -> eaglefuzz.kernels.spec_decode_utils (l.1)" in out
    assert "eaglefuzz.oracles.bad -> triton (l.2)" in out
    assert "eaglefuzz.harness.generation.upward -> eaglefuzz.harness.checking.check" in out
    assert ("eaglefuzz.harness.targets.compute_new_slot_mapping.record -> "
            "eaglefuzz.harness.targets.eagle_step_slot_mapping_metadata_kernel.layout") in out
