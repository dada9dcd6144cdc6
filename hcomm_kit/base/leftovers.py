"""What processes of hcomm-kit that died left in /dev/shm, found and removed.

Every such entry is flocked by its creator for its whole life (the kernel drops the lock when the
process dies, even by SIGKILL), so one whose lock can be taken has no owner:

* the emulator's segments (``hcomm_kit.<uid>.*``: device control blocks, HCCL buffers, job
  segments), which the emulator also reclaims when a process first opens a device;
* the Open MPI backing directories of ``hcomm-kit`` launchers (``hcomm_kit_mpi_<pid>_*``,
  :func:`hcomm_kit.jobs.mpirun.shm_backing_dir`), holding Open MPI's ``sm_segment.*`` files, left
  when a launcher was SIGKILLed: removed by the next launcher, by the next process that creates a
  communicator, and by ``hcomm-kit doctor``, which says what it removed.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import sys
import time
from typing import Callable

__all__ = ["BACKING_PREFIX", "pid_alive", "reclaim_unlocked", "reclaim_shm", "reclaim_backing_dirs", "reclaim_all"]

#: Name prefix of a launcher's Open MPI backing directory: ``hcomm_kit_mpi_<launcher pid>_<random>``.
BACKING_PREFIX = "hcomm_kit_mpi_"
_BACKING_NAME = re.compile(rf"^{BACKING_PREFIX}(\d+)_")


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie of ours is reaped here)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass  # not our child
    except OSError:
        pass
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return not sys.platform.startswith("linux")
    return stat[stat.rfind(")") + 2:].split()[:1] != ["Z"]


def reclaim_shm(shm_dir: str = "/dev/shm", min_age: float = 2.0) -> list[str]:
    """Remove the emulator's shared-memory segments (``hcomm_kit.<uid>.*``) whose owner is dead.

    A segment's creator holds a flock on it for its whole life (the kernel drops it when the
    process dies, even by SIGKILL), so a segment whose lock can be taken has no owner: the same
    rule the emulator applies at start-up. Names still being created (``.tmp``) must also be
    ``min_age`` seconds old. Segments of live processes, of other jobs included, are untouched.
    """
    prefix = f"hcomm_kit.{os.getuid()}."
    now = time.time()
    return reclaim_unlocked(shm_dir, lambda name: name.startswith(prefix),
                            lambda name, st: name.endswith(".tmp") and now - st.st_mtime < min_age, os.unlink)


def reclaim_unlocked(base: str, wanted: Callable[[str], bool], skip: Callable[[str, os.stat_result], bool],
                     remove: Callable[[str], None], *, directory: bool = False) -> list[str]:
    """Remove the entries of ``base`` whose owner is dead: their creator holds a flock on them for
    its whole life, so one whose lock can be taken has none.

    Args:
        base: the directory to look in.
        wanted: which names to consider.
        skip: ``skip(name, stat)``: leave this one alone (too young, another user's...).
        remove: removes one path (an OSError leaves it, unnamed in the result).
        directory: the entries are directories (opened with O_DIRECTORY to take their lock).

    Returns:
        The names removed.
    """
    removed: list[str] = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | (os.O_DIRECTORY if directory else 0)
    for name in names:
        if not wanted(name):
            continue
        path = os.path.join(base, name)
        try:
            fd = os.open(path, flags)
        except OSError:
            continue
        try:
            if skip(name, os.fstat(fd)):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its owner lives (for a directory: or a child holding the lock)
            try:
                remove(path)
                removed.append(name)
            except OSError:
                pass
        finally:
            os.close(fd)
    return removed


def reclaim_backing_dirs(base: str = "/dev/shm", min_age: float = 2.0) -> list[str]:
    """Remove this user's ``hcomm_kit_mpi_<pid>_*`` directories whose launcher is dead.

    Dead = its flock can be taken and its pid no longer exists; directories younger than
    ``min_age`` seconds (being created) and other users' are left alone. Returns the names removed.
    """
    uid, now = os.getuid(), time.time()

    def skip(name: str, st: os.stat_result) -> bool:  # another user's, being created, or its launcher lives
        pid = int(_BACKING_NAME.match(name).group(1))
        return st.st_uid != uid or now - st.st_mtime < min_age or pid_alive(pid)

    return reclaim_unlocked(base, lambda name: _BACKING_NAME.match(name) is not None, skip,
                            lambda path: shutil.rmtree(path, ignore_errors=True), directory=True)


def reclaim_all(shm_dir: str = "/dev/shm") -> list[str]:
    """Both kinds of leftovers (:func:`reclaim_shm`, :func:`reclaim_backing_dirs`): the names removed."""
    if not os.path.isdir(shm_dir):
        return []
    return reclaim_shm(shm_dir) + reclaim_backing_dirs(shm_dir)
