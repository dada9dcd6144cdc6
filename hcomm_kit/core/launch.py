"""Run commands on N ranks: the shared helper of ``hcomm-kit launch/run/test``.

:func:`launch` re-executes a command under ``mpirun`` (``hcomm_kit.mpi.mpirun_argv``) unless
this process already runs under MPI, in which case it runs the command directly.
:func:`install_abort_hook` makes an uncaught Python exception on one rank print its traceback
and abort every rank (``MPI.COMM_WORLD.Abort(1)``), so no rank hangs in a collective.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Mapping, Sequence

__all__ = ["launch", "install_abort_hook", "ENV_ABORT_HOOK"]

ENV_ABORT_HOOK = "HCOMM_KIT_ABORT_ON_ERROR"   # "0" disables the abort hook in launched Python programs


def launch(command: Sequence[str], np: int, *, timeout: float | None = None, tag_output: bool = True,
           env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
    """Run ``command`` on ``np`` ranks; return its exit status (124 on timeout)."""
    from .bootstrap import under_mpi
    from ..mpi import mpirun_argv, shm_backing_dir

    inside = under_mpi()
    argv = list(command) if inside else mpirun_argv(np, list(command), env=env, tag_output=tag_output)
    with shm_backing_dir() as shm_env:
        full_env = dict(os.environ, **(env or {}), **({} if inside else shm_env))
        proc = subprocess.Popen(argv, env=full_env, cwd=cwd, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(proc)
            print(f"hcomm-kit: the job did not finish within {timeout:g} s; killed all ranks", file=sys.stderr)
            return 124
        except KeyboardInterrupt:
            _killpg(proc)
            return 130


def _killpg(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


def install_abort_hook() -> None:
    """Print the traceback of an uncaught exception, then ``MPI.COMM_WORLD.Abort(1)`` (MPI runs only)."""
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
