#!/usr/bin/env python3
"""Cost of the unwritten-output check: a blocking 8-byte ``all_reduce`` on device buffers (the notify
checker on, as by default), with the check and without it, in alternating rounds of one job.

    hcomm-kit launch --np 2 -- python scripts/bench_output_check.py [ITERS]

Without it means: the call's HcommKitStreamCalls array carries an empty output entry (what a call
with no defined output sends), so everything else is the same. Rank 0 prints the mean time per call
of every round (max over the ranks) and the median of each side; on a loaded machine compare the
medians and look at the spread of the rounds.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
from mpi4py import MPI

import hcomm_kit
from hcomm_kit.ops import launch_seq


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    comm = hcomm_kit.init()
    x = comm.to_device(np.full(2, 1.0 + comm.rank, np.float32))
    out = comm.empty(2, "fp32")
    watched = launch_seq.LaunchSequence._watched_output

    def unwatched(self, *args):  # the output entry of a call that defines none
        return (0, 0)

    def use(check: bool) -> None:
        launch_seq.LaunchSequence._watched_output = watched if check else unwatched
        comm.builtin_op("allreduce")._last_key = None  # the next call refills OpParam and the entry
        comm._drop_fast()
        for _ in range(300):
            comm.all_reduce(x, out=out)

    rounds: dict[bool, list[float]] = {True: [], False: []}
    for r in range(6):
        for check in (True, False) if r % 2 == 0 else (False, True):
            use(check)
            comm.mpi_comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                comm.all_reduce(x, out=out)
            us = (time.perf_counter() - t0) * 1e6 / iters
            rounds[check].append(comm.mpi_comm.allreduce(us, op=MPI.MAX))
    want = float(sum(range(1, comm.size + 1)))
    assert (out.numpy() == want).all(), out.numpy()
    if comm.rank == 0:
        for check, name in ((True, "with the check"), (False, "without")):
            vals = " ".join(f"{v:.1f}" for v in rounds[check])
            print(f"{name:15s} us/call: {vals}   median {statistics.median(rounds[check]):.2f}")
    comm.close()


if __name__ == "__main__":
    main()
