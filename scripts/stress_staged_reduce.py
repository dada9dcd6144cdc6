#!/usr/bin/env python3
"""Stress the built-ins' staged reduction (A2: int64 sum/min are reduced in the kernel, HkDrain)
on 8 ranks with a 1 MiB HCCL buffer, checking every result against numpy (not a timed test).

    HCCL_BUFFSIZE=1 hcomm-kit launch --np 8 -- python scripts/stress_staged_reduce.py [REPS]

Load the machine meanwhile (e.g. two `yes > /dev/null`): that is how a drain that ended before its
thread's Read had run showed up (a rank's result missed one rank's contribution for a whole slice,
about 1 run in 7 of 30 repetitions). Prints a line per wrong result and exits 1 if there was any.
"""

from __future__ import annotations

import sys

import numpy as np

import hcomm_kit


def _data(rank: int, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([rank, count, seed, 9])
    return rng.integers(-4, 5, count).astype(np.int64)


def main() -> int:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    comm = hcomm_kit.init()
    n, r = comm.size, comm.rank
    count = 131072 * n  # 8 MiB of int64 on 8 ranks: many slices of the 1 MiB buffer
    bad = 0
    for it in range(reps):
        for rop in ("sum", "min"):
            ins = [_data(q, count, it) for q in range(n)]
            want = np.sum(ins, axis=0) if rop == "sum" else np.min(ins, axis=0)
            for name, got, checked in (("all_reduce", comm.all_reduce(ins[r], rop, dtype="int64"), True),
                                       ("reduce", comm.reduce(ins[r], n - 1, rop, dtype="int64"), r == n - 1)):
                if checked and not np.array_equal(got, want):
                    wrong = np.nonzero(got != want)[0]
                    print(f"rank {r} repetition {it} {name} {rop}: {len(wrong)} wrong elements from {wrong[0]}",
                          flush=True)
                    bad += 1
    comm.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
