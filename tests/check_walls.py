"""The two walls: ``oracles/`` never imports ``kernels/`` or triton; ``kernels/`` never imports
``harness/`` or ``oracles/``. Runs as a script (tox lint) and as a test (tests/test_walls.py).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WALLS = {
    "oracles": ("kernels", "triton", "harness"),
    "kernels": ("harness", "oracles"),
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if node.level]
    return out


def violations() -> list[str]:
    """Every import that crosses a wall, as ``file:line: module``."""
    found = []
    for folder, banned in WALLS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, mod in _imports(path):
                parts = mod.replace("eaglefuzz.", "").lstrip(".").split(".")
                relative_up = mod.startswith("..")
                names = set(parts) if (relative_up or mod.startswith("eaglefuzz")) else {parts[0]}
                hit = names & set(banned)
                if hit:
                    found.append(f"{path.relative_to(ROOT)}:{line}: imports {mod} ({folder}/ must not import {', '.join(sorted(hit))})")
    return found


if __name__ == "__main__":
    v = violations()
    print("\n".join(v) or "import walls hold")
    sys.exit(1 if v else 0)
