"""Fuzz one seeded-bug file in a process of its own and print what was found, as JSON.

    python tests/seeded_bugs/fuzz_one.py FILE SEED EXAMPLES [BACKEND]

``tests/test_seeded_bugs.py`` runs it on a CUDA device: a bug that trips a device-side assert
leaves the CUDA context unusable for the rest of the process, which must not be the test
worker's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eaglefuzz.harness.backend import select_backend
from eaglefuzz.harness.fuzz import fuzz_target
from eaglefuzz.harness.sources import implementations_for
from eaglefuzz.harness.sources.file import FileSource
from eaglefuzz.harness.strategies import CUDA_SCALE, INTERPRETER_SCALE
from eaglefuzz.harness.targets import TARGETS


def main(path: str, seed: int, examples: int, backend: str = "cuda") -> dict:
    b = select_backend(backend)
    impls = implementations_for(FileSource(Path(path)))
    names = sorted(impls)
    stats = fuzz_target(names[0], impls, b.device, CUDA_SCALE if b.compiled else INTERPRETER_SCALE,
                        seed=seed, examples=examples, shrink=False)
    out = {"names": names, "examples": stats.examples, "features": sorted(stats.features), "finding": None}
    if stats.findings:
        f = stats.findings[0]
        out["finding"] = {"kind": f.kind, "origin_file": f.origin.file, "report": f.report(),
                          "features": sorted(TARGETS[names[0]].features_of(f.case))}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *sys.argv[4:5])))
