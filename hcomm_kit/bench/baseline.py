"""The baselines of ``hcomm-kit bench --compare``: the same collective through mpi4py (Open MPI), and,
for a user's operator, the matching built-in collective on the same sizes."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from .cases import Collective, OpTarget, _Case
from .timing import _max_over_ranks, _time_ours

__all__ = ["time_mpi", "time_builtin"]



def time_mpi(case: _Case, iters: int, warmup: int) -> float | None:
    """The same collective through mpi4py (None when MPI cannot do it: no MPI, fp16/bf16...)."""
    comm = case.comm
    mc = comm.mpi_comm
    if mc is None or case.dt.name in ("bf16", "fp16"):
        return None
    from mpi4py import MPI

    ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
    x = case.inputs[comm.rank].copy()
    c = case.mpi_name
    y = np.empty(case.y.size if case.y is not case.x else x.size, dtype=x.dtype)
    root = case.root
    rop = ops.get(case.rop, MPI.SUM)
    n, r = comm.size, comm.rank
    # keyed by the kinds table's MPI call (hcomm_kit.build.kinds.KINDS[...].mpi)
    calls: dict[str, Callable[[], Any]] = {
        "Allreduce": lambda: mc.Allreduce(x, y, rop),
        "Reduce_scatter_block": lambda: mc.Reduce_scatter_block(x, y, rop),
        "Allgather": lambda: mc.Allgather(x, y),
        "Alltoall": lambda: mc.Alltoall(x, y),
        "Bcast": lambda: mc.Bcast(x, root),
        "Reduce": lambda: mc.Reduce(x, y, rop, root),
        "Gather": lambda: mc.Gather(x, y if comm.rank == root else None, root),
        "Scatter": lambda: mc.Scatter(x if comm.rank == root else None, y, root),
        "Sendrecv": lambda: mc.Sendrecv(x, (r + 1) % n, recvbuf=y, source=(r - 1) % n),  # the ring shift
    }
    kw = getattr(case, "call_kw", {})
    if c == "Alltoallv" and "send_counts" in kw:
        sc, rc = np.asarray(kw["send_counts"]), np.asarray(kw["recv_counts"])
        sd, rd = np.concatenate([[0], np.cumsum(sc)[:-1]]), np.concatenate([[0], np.cumsum(rc)[:-1]])
        calls["Alltoallv"] = lambda: mc.Alltoallv([x, (sc, sd)], [y, (rc, rd)])
    if c == "Send/Recv":
        if case.peer is None:
            fn: Callable[[], Any] = lambda: None  # noqa: E731
        elif comm.rank % 2 == 0:
            fn = lambda: mc.Send(x, case.peer)  # noqa: E731
        else:
            fn = lambda: mc.Recv(y, case.peer)  # noqa: E731
    elif c in calls:
        fn = calls[c]
    else:
        return None  # no MPI counterpart (a local copy)
    try:
        mc.Barrier()
        for _ in range(warmup):
            fn()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        us = (time.perf_counter() - t0) * 1e6 / max(1, iters)
    except (MPI.Exception, KeyError, TypeError, ValueError):
        return None
    return _max_over_ranks(comm, us)


def time_builtin(comm, builtin: Collective, target: OpTarget, nbytes: int, dt: Any, rop: str, root: int, fill: str,
                 inplace: bool, algorithm: str | None, iters: int, warmup: int, blocking: bool) -> float:
    """Mean time per call (us, max over ranks) of ``builtin``, the built-in counterpart of the
    operator ``target``, on the same size, data and timing as the operator (``--compare builtin``)."""
    case = _Case(comm, builtin, nbytes, dt, rop, root, fill, inplace, algorithm)  # sized as the operator: same kind
    try:
        return _time_ours(case, iters, warmup, blocking)
    finally:
        case.close()
