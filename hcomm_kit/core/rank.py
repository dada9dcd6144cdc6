"""The rank side of a launched job: an uncaught exception on one rank aborts the whole job, and a
rank dies with its launcher (so no rank outlives a job whose launcher was killed).

The launcher side (job directory, state dumps, stopping processes) is :mod:`hcomm_kit.jobs.job`.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from ..base import envs

__all__ = ["install_abort_hook", "die_with_parent", "prctl", "ENV_ABORT_HOOK"]

ENV_ABORT_HOOK = "HCOMM_KIT_ABORT_ON_ERROR"   # "0" disables the abort hook in launched Python programs
_PR_SET_PDEATHSIG = 1


def prctl(option: int, arg: int) -> int:
    """Linux ``prctl(option, arg)``; -1 elsewhere or when it cannot be called."""
    if not sys.platform.startswith("linux"):
        return -1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, arg, 0, 0, 0))
    except (OSError, AttributeError):
        return -1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Linux: deliver ``sig`` to this process when its parent dies (PR_SET_PDEATHSIG)."""
    prctl(_PR_SET_PDEATHSIG, int(sig))


def install_abort_hook() -> None:
    """Print the traceback of an uncaught exception, then ``MPI.COMM_WORLD.Abort(1)`` (MPI runs only).

    In a job started by ``hcomm-kit launch`` (``HCOMM_KIT_JOB_DIR`` set) the rank also dies with
    its parent (mpirun's daemon), so no rank outlives a job whose launcher was killed.
    """
    if envs.job_dir() is not None:
        die_with_parent(signal.SIGKILL)
    if os.environ.get(ENV_ABORT_HOOK, "1") == "0":
        return
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        if issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
            return
        try:
            sys.stderr.flush()
            sys.stdout.flush()
            mpi = sys.modules.get("mpi4py.MPI")
            if mpi is not None and mpi.COMM_WORLD.Get_size() > 1:
                mpi.COMM_WORLD.Abort(1)
        except Exception:
            os._exit(1)

    if getattr(sys.excepthook, "_hcomm_kit", False):
        return
    hook._hcomm_kit = True  # type: ignore[attr-defined]
    sys.excepthook = hook
