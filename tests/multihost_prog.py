"""The rank program of the multi-host tests (tests/test_multihost.py): every built-in collective at
non-power-of-two counts against numpy, the modelled time of one call, then an optional failure.

Run by `hcomm-kit launch --nnodes 2 ...` on each host; prints ``MH-OK <rank> <size> <model_us>`` when
every check passed. Arguments: ``--die RANK`` makes that rank SIGKILL itself after the checks (the
others then wait in a barrier, which must fail naming it), ``--hang RANK`` makes it sleep instead (the
test kills its host), ``--big`` adds 64 MiB all-reduces between device buffers and prints their times, ``--mismatch`` a
collective call that differs between the hosts (``MH-MISMATCH <rank> <seconds> <error>``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

import hcomm_kit
from hcomm_kit.ops import reference


def data(rank: int, count: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed * 1000 + rank)
    return rng.integers(-50, 50, size=count).astype(dtype)


def check_builtins(comm) -> float:
    """Every built-in collective on comm against numpy; returns the modelled time (us) of a 4096-float
    all-reduce."""
    n, r = comm.size, comm.rank
    for seed, (count, dtype) in enumerate([(1001, np.float32), (37, np.int32)]):
        ins = [data(k, count, dtype, seed) for k in range(n)]
        x = ins[r]
        for op in ("sum", "max"):
            np.testing.assert_array_equal(comm.all_reduce(x, op), reference.reduce(ins, op), err_msg=f"allreduce {op}")
        np.testing.assert_array_equal(comm.all_gather(x), np.concatenate(ins), err_msg="allgather")
        rs_ins = [np.tile(a, n) for a in ins]
        np.testing.assert_array_equal(comm.reduce_scatter(rs_ins[r]), reference.reduce_scatter(rs_ins)[r],
                                      err_msg="reduce_scatter")
        root = n - 1
        np.testing.assert_array_equal(comm.broadcast(x, root=root), ins[root], err_msg="broadcast")
        got = comm.reduce(x, root=root)
        if r == root:
            np.testing.assert_array_equal(got, reference.reduce(ins), err_msg="reduce")
        got = comm.gather(x, root=0)
        if r == 0:
            np.testing.assert_array_equal(np.asarray(got).reshape(-1), np.concatenate(ins), err_msg="gather")
        sc = comm.scatter(rs_ins[0] if r == 0 else None, root=0, count=count, dtype=dtype)
        np.testing.assert_array_equal(sc, reference.scatter(rs_ins, 0)[r], err_msg="scatter")
        np.testing.assert_array_equal(comm.all_to_all(rs_ins[r]), reference.alltoall(rs_ins)[r], err_msg="alltoall")
        peer = r ^ 1
        if peer < n:
            out = np.empty_like(x)
            if r % 2 == 0:
                comm.send(x, peer)
                comm.recv(out, peer)
            else:
                comm.recv(out, peer)
                comm.send(x, peer)
            np.testing.assert_array_equal(out, ins[peer], err_msg="send/recv")
    comm.barrier()
    comm.all_reduce(np.ones(4096, np.float32))
    return comm.last_model_time


def big_allreduce(comm, iters: int = 5) -> list[float]:
    """Seconds of each of ``iters`` 64 MiB float32 all-reduces between device buffers (as hccl_test
    times them: no host copies), after a warm-up; the result checked against numpy."""
    from hcomm_kit.core.device import DeviceBuffer

    n = comm.size
    x = np.full(16 << 20, comm.rank + 1, np.float32)  # 64 MiB
    dx = DeviceBuffer.from_numpy(x, rt=comm.rt)
    dy = DeviceBuffer.empty(x.shape, "fp32", rt=comm.rt)
    comm.all_reduce(dx, out=dy)
    times = []
    for _ in range(iters):
        comm.barrier()
        t0 = time.perf_counter()
        comm.all_reduce(dx, out=dy)
        times.append(time.perf_counter() - t0)
    np.testing.assert_array_equal(dy.numpy(), np.full_like(x, n * (n + 1) // 2))
    dx.close()
    dy.close()
    return times


def mismatch(comm) -> None:
    """Calls that differ between hosts only (each host's ranks agree among themselves): the check that
    compares calls across hosts must fail every rank's call, within seconds."""
    sub = comm.split(0)
    last_host = sub.rank >= sub.size - int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    x = np.ones(64, np.float32)
    t0 = time.monotonic()
    try:
        sub.all_gather(x) if last_host else sub.all_reduce(x)
        print(f"MH-NOMISMATCH {comm.rank}", flush=True)
    except Exception as exc:  # the mismatch, naming both calls
        print(f"MH-MISMATCH {comm.rank} {time.monotonic() - t0:.1f} {exc}".replace("\n", " | "), flush=True)
    sub.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--die", type=int, default=-1)
    ap.add_argument("--big", type=int, nargs="?", const=5, default=0, metavar="CALLS",
                    help="also CALLS (default 5) timed 64 MiB all-reduces")
    ap.add_argument("--hang", type=int, default=-1, help="that rank sleeps instead of the last barrier")
    ap.add_argument("--mark", default=None, help="--hang: the sleeping rank creates this file first")
    ap.add_argument("--mismatch", action="store_true",
                    help="on a sub-communicator of every rank, the ranks of the last host call all_gather where the "
                         "others call all_reduce: every rank's call must fail naming the mismatch")
    ap.add_argument("--fail-init", type=int, default=-1, help="that rank fails before it creates its communicator")
    args = ap.parse_args()
    me = int(os.environ.get("HCOMM_KIT_RANK_OFFSET", "0")) + int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    if me == args.fail_init:
        raise RuntimeError(f"rank {me} was told to fail before creating its communicator")
    comm = hcomm_kit.init()
    n, r = comm.size, comm.rank
    model = check_builtins(comm)
    if args.big:
        print(f"MH-BIG {r} {' '.join(f'{t:.6f}' for t in big_allreduce(comm, args.big))}", flush=True)
    print(f"MH-OK {r} {n} {model:.3f}", flush=True)
    if args.mismatch:
        mismatch(comm)
    if args.die >= 0 or args.hang >= 0:
        comm.barrier()  # every rank is done with the checks (the model reads the others' logs)
        if r == args.die:
            time.sleep(1.0)  # the others have left the barrier above (the last to leave may lag) and wait in the next
            os.kill(os.getpid(), signal.SIGKILL)
        if r == args.hang:  # its host is killed meanwhile
            if args.mark:
                open(args.mark, "w").close()
            time.sleep(3600)
        t0 = time.monotonic()
        try:
            comm.barrier()
        except Exception as exc:  # must name the dead rank
            print(f"MH-FAILED {r} {time.monotonic() - t0:.1f} {type(exc).__name__}: {exc}".replace("\n", " | "),
                  flush=True)
            return 3
        print(f"MH-NOFAIL {r}", flush=True)
        return 4
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
