"""Small job-wide exchanges between the ranks of a communicator (a barrier, a maximum, a rank's value
for all, every rank's value on one): what the bench, ``hcomm-kit run`` and the test plugin need
around the collectives they measure or check.

A job under one mpirun has an MPI world (``comm.mpi_comm``): the exchanges go through it, untouched by
the emulator. A job on several hosts has none (each host's ranks are their own mpirun job, see
:mod:`hcomm_kit.jobs.nodes`): they go through the communicator itself, as an all-gather of each
rank's value (pickled), so any picklable value works and every rank gets the same answer. Every
rank of the communicator must make the same calls in the same order (as with MPI).
"""

from __future__ import annotations

import pickle
from typing import Any, Callable

import numpy as np

__all__ = ["job_wide", "barrier", "allreduce", "bcast", "gather", "allgather"]

_OPS: dict[str, Callable[[list], Any]] = {"max": max, "min": min, "sum": sum}


def job_wide(comm) -> bool:
    """True when the ranks exchange through ``comm`` (several ranks, no MPI world)."""
    return comm.mpi_comm is None and comm.size > 1


def barrier(comm) -> None:
    """Every rank of ``comm`` arrives before any leaves."""
    if comm.mpi_comm is not None and comm.size > 1:
        comm.mpi_comm.Barrier()
    elif comm.size > 1:
        comm.barrier()


def allgather(comm, value: Any) -> list:
    """Every rank's ``value``, in rank order, on every rank."""
    if comm.size == 1:
        return [value]
    if comm.mpi_comm is not None:
        return list(comm.mpi_comm.allgather(value))
    raw = np.frombuffer(pickle.dumps(value), np.uint8)
    sizes = comm.all_gather(np.array([raw.size], np.int64))
    width = int(sizes.max())
    padded = np.zeros(width, np.uint8)
    padded[:raw.size] = raw
    rows = comm.all_gather(padded).reshape(comm.size, width)
    return [pickle.loads(rows[r, :int(sizes[r])].tobytes()) for r in range(comm.size)]


def allreduce(comm, value: Any, op: str = "sum") -> Any:
    """``op`` ("sum", "max", "min") of every rank's ``value`` (numbers), on every rank."""
    if op not in _OPS:
        raise ValueError(f"op {op!r}: one of {', '.join(_OPS)}")
    if comm.mpi_comm is not None and comm.size > 1:
        from mpi4py import MPI

        return comm.mpi_comm.allreduce(value, op=getattr(MPI, op.upper()))
    return _OPS[op](allgather(comm, value))


def bcast(comm, value: Any, root: int = 0) -> Any:
    """Rank ``root``'s ``value`` on every rank."""
    if comm.mpi_comm is not None and comm.size > 1:
        return comm.mpi_comm.bcast(value, root=root)
    return allgather(comm, value if comm.rank == root else None)[root]


def gather(comm, value: Any, root: int = 0) -> list | None:
    """Every rank's ``value`` on rank ``root`` (rank order), None on the others."""
    if comm.mpi_comm is not None and comm.size > 1:
        return comm.mpi_comm.gather(value, root=root)
    every = allgather(comm, value)
    return every if comm.rank == root else None
