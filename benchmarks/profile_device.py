"""Where a device campaign's host time goes (not a test): cProfile of a steady-state run.

    python benchmarks/profile_device.py NAME [SECONDS]
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from eaglefuzz.harness.checking.device_mode.engine import device_fuzz_target
    from eaglefuzz.harness.sources import implementations_for, parse_source, vllm

    name, seconds = sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    impls = implementations_for(parse_source(f"vllm-release:{vllm.PINNED_RELEASE}"), [name])
    device_fuzz_target(name, impls, "cuda", seed=1, examples=600, shrink=False)
    prof = cProfile.Profile()
    prof.enable()
    s = device_fuzz_target(name, impls, "cuda", seed=0, examples=None, time_budget=seconds, shrink=False)
    prof.disable()
    print(f"{s.examples} examples, {s.tokens / s.seconds / 1e6:.1f} M tokens/s")
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    pstats.Stats(prof).sort_stats("cumtime").print_stats(40)


if __name__ == "__main__":
    main()
