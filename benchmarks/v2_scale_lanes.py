"""Model Runner V2's verification at production scale on a large GPU (issue 31 point 5).

    python benchmarks/v2_scale_lanes.py [--version 0.33.0] [--example 3] [--jobs 2] [--kernel NAME ...]

For each target with production-scale cases (``DeviceTarget.scale``) and its seeded scale bug
(``Mutant.scale``: the int32 row offset of vLLM up to 0.24.0, #46560's and #47383's class), the
scale lane (:mod:`eaglefuzz.harness.checking.device_mode.scale_lane`) runs example ``--example``'s
scale case (a table past ``2**31`` elements) on the release's kernel (it must pass) and on the
seeded bug (it must fail, confirmed by the NumPy and Numba oracles on the rows past the limit),
``--jobs`` targets at a time. One JSON line per run: target, source, elements not as expected,
elements verified, confirmation, the first differences, seconds. Needs the release's files
(``EAGLEFUZZ_WHEELS`` offline) and a GPU with about 48 GiB free per job.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from eaglefuzz.harness.checking.device_mode import device_targets
    from eaglefuzz.harness.checking.device_mode.scale_lane import ScaleLane
    from tests.seeded_bugs import mutants

    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="0.33.0")
    ap.add_argument("--example", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--kernel", action="append")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    bugs = {m.target: m for m in mutants.MUTANTS if m.scale}
    names = [n for n in (a.kernel or sorted(bugs)) if device_targets()[n].scale]
    tmp = Path(tempfile.mkdtemp())

    def run(name: str, spec: str, label: str) -> dict:
        lane = ScaleLane(name, spec, a.device, a.seed)
        try:
            v = lane.run(a.example, confirm=True)
        finally:
            lane.close()
        diffs = [] if v.outcome is None else [d.describe() for d in (v.outcome.differences or v.outcome.oracle_disagreements)[:2]]
        return {"target": name, "source": label, "bad": v.bad, "tokens": v.tokens, "crash": v.crash, "hang": v.hang,
                "confirmed": v.confirmed, "finding": v.outcome is not None and not v.outcome.ok, "differences": diffs,
                "features": v.features, "seconds": round(v.seconds, 1)}

    def both(name: str) -> list[dict]:
        out = [run(name, f"vllm-release:{a.version}", f"vLLM {a.version}")]
        m = bugs[name]
        path = mutants.write(m, tmp)
        out.append(run(name, f"file:{path}", m.name))
        for r in out:
            print(json.dumps(r), flush=True)
        return out

    t0 = time.monotonic()
    with ThreadPoolExecutor(a.jobs) as pool:
        results = [r for rs in pool.map(both, names) for r in rs]
    ok = all((r["source"].startswith("vLLM") and not r["bad"] and not r["crash"]) or
             (not r["source"].startswith("vLLM") and (r["finding"] or r["crash"])) for r in results)
    print(json.dumps({"targets": names, "ok": ok, "seconds": round(time.monotonic() - t0, 1)}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
