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
           env: Mapping[str, str] | None = None, cwd: str | None = None, verbose: bool = False) -> int:
    """Run ``command`` on ``np`` ranks; return its exit status (124 on timeout).

    The job's output goes through :class:`~hcomm_kit.core.joboutput.JobOutput`: each distinct
    error once with its ranks, Open MPI's failure banners summed up in one line (``verbose``:
    everything as mpirun prints it)."""
    from .bootstrap import under_mpi
    from .joboutput import JobOutput
    from ..mpi import mpirun_argv, shm_backing_dir

    inside = under_mpi()
    output = None if inside else JobOutput(np, tag_output=tag_output, verbose=verbose)
    argv = list(command) if inside else mpirun_argv(np, list(command), env=env, tag_output=True)
    with shm_backing_dir() as shm_env:
        full_env = dict(os.environ, **(env or {}), **({} if inside else {**shm_env, **output.env()}))
        proc = subprocess.Popen(argv, env=full_env, cwd=cwd, start_new_session=True,
                                **(output.popen_kwargs() if output else {}))
        if output:
            output.start(proc)
        rc: int | None = None
        try:
            rc = proc.wait(timeout=timeout)
            return rc
        except subprocess.TimeoutExpired:
            _killpg(proc)
            rc = 124
            print(f"hcomm-kit: the job did not finish within {timeout:g} s; killed all ranks", file=sys.stderr)
            return 124
        except KeyboardInterrupt:
            _killpg(proc)
            rc = 130
            return 130
        finally:
            if output:
                failure = output.finish(rc if rc is not None else 1)
                if failure and rc not in (124, 130):
                    print(f"hcomm-kit: the job failed: {failure}", file=sys.stderr)


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
