#!/usr/bin/env python3
"""Benchmark `hcomm-kit new` + `hcomm-kit build` (not a timed test).

Measures, per pattern, on this machine:
  * cold: `new` (render) + `build` (compile + checks) of a fresh operator, emulator library already built;
  * hit:  `build` again (cache hit, in-process; no compiler runs), median of repeats;
  * cli:  `python -m hcomm_kit.cli.build`-equivalent process doing a cache-hit build (startup included).
Targets: cold <= 3 s, hit <= 100 ms. Correctness first: every build is checked by build_op itself.

Usage: python scripts/bench_scaffold.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hcomm_kit.build import emulator as _emulator  # noqa: E402
from hcomm_kit.build.opbuild import build_op  # noqa: E402
from hcomm_kit.build.opspec import PATTERNS  # noqa: E402
from hcomm_kit.scaffold.render import new_op  # noqa: E402

COLD_TARGET_S, HIT_TARGET_MS = 3.0, 100.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20, help="cache-hit repeats (median reported)")
    args = parser.parse_args()
    t = time.perf_counter()
    _emulator.get_library()  # baseline: the emulator library is a prerequisite, not part of the figure
    print(f"emulator library ready in {time.perf_counter() - t:.2f} s (cached after the first run)")
    print(f"{'pattern':16} {'new ms':>8} {'build ms':>9} {'cold s':>7} {'hit ms':>7} {'cli hit ms':>10}")
    ok = True
    stamp = int(time.time() * 1000) % 10**8
    with tempfile.TemporaryDirectory(prefix="hcomm-kit-bench-") as tmp:
        for i, pattern in enumerate(PATTERNS):
            name = f"bench_{pattern.replace('-', '_')}_{stamp}_{i}"  # unique: never in the cache yet
            t0 = time.perf_counter()
            new_op(name, pattern=pattern, directory=tmp)
            t1 = time.perf_counter()
            res = build_op(Path(tmp) / name)
            t2 = time.perf_counter()
            assert not res.cached
            hits = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                assert build_op(Path(tmp) / name).cached
                hits.append((time.perf_counter() - t) * 1000)
            code = ("import sys; from hcomm_kit.build.opbuild import build_op; "
                    "assert build_op(sys.argv[1]).cached")
            clis = []
            for _ in range(5):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", code, str(Path(tmp) / name)], check=True,
                               cwd=Path(__file__).resolve().parents[1])
                clis.append((time.perf_counter() - t) * 1000)
            cold, hit = t2 - t0, statistics.median(hits)
            ok &= cold <= COLD_TARGET_S and hit <= HIT_TARGET_MS
            print(f"{pattern:16} {(t1 - t0) * 1000:8.1f} {(t2 - t1) * 1000:9.1f} {cold:7.2f} {hit:7.1f} "
                  f"{statistics.median(clis):10.1f}")
    print(f"targets: cold <= {COLD_TARGET_S} s, hit <= {HIT_TARGET_MS} ms: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
