#!/usr/bin/env python3
"""Latency of an 8-byte allreduce on 2 ranks, three ways, from Python (not a timed test).

    python scripts/bench_small_allreduce.py [--runs 3] [--iters 3000]

Starts 2 rank processes per run (bootstrap through HCOMM_KIT_RANK / HCOMM_KIT_ROOT_INFO, no MPI) and
prints, per run, the mean time per call of ``op.launch + op.synchronize`` of the built-in allreduce
operator, ``comm.all_reduce`` on device buffers and ``comm.all_reduce`` on a numpy array; then the
medians over the runs. Runs differ on small VMs (thread placement), so look at the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _worker(iters: int) -> None:
    import numpy as np

    import hcomm_kit

    comm = hcomm_kit.init()
    x = np.full(2, 1.0 + comm.rank, dtype=np.float32)
    d, o = comm.to_device(x), comm.empty(2, "fp32")
    op = comm.builtin_op("allreduce")

    def launch_sync() -> None:
        op.launch(d.ptr, o.ptr, 2, "fp32", algo=0)
        op.synchronize()

    res = {}
    for name, fn in (("launch+sync", launch_sync), ("all_reduce(device)", lambda: comm.all_reduce(d, out=o)),
                     ("all_reduce(numpy)", lambda: comm.all_reduce(x))):
        for _ in range(300):
            fn()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        res[name] = (time.perf_counter() - t0) / iters * 1e6
    assert (o.numpy() == 3.0).all()
    if comm.rank == 0:
        print(json.dumps(res), flush=True)
    comm.close()


def _runs(work: Path, runs_n: int, iters: int) -> list[dict]:
    """runs_n runs of 2 worker processes (root info files in work); their per-call times."""
    runs = []
    for i in range(runs_n):
        envs = [dict(os.environ, HCOMM_KIT_RANK=str(r), HCOMM_KIT_WORLD_SIZE="2",
                     HCOMM_KIT_ROOT_INFO=str(work / f"root{i}")) for r in range(2)]
        procs = [subprocess.Popen([sys.executable, __file__, "--worker", "--iters", str(iters)], env=e,
                                  stdout=subprocess.PIPE, text=True) for e in envs]
        outs = [p.communicate(timeout=600)[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(f"run {i} failed")
        runs.append(json.loads(outs[0].strip().splitlines()[-1]))
        print(f"run {i}: " + "  ".join(f"{k} {v:6.1f} us" for k, v in runs[-1].items()), flush=True)
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3000)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.iters)
        return 0
    with tempfile.TemporaryDirectory(prefix="hcomm_kit_lat_") as tmp:
        runs = _runs(Path(tmp), args.runs, args.iters)
    print("median: " + "  ".join(f"{k} {statistics.median(r[k] for r in runs):6.1f} us" for k in runs[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
