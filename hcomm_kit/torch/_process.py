"""Process-wide state of the ``hcomm`` backend: the live groups, the default group, and the exit
hooks that shut them down (or abort them after an uncaught exception or SIGTERM)."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import weakref
from typing import Any

# The ProcessGroupHcomm objects (not imported here: process_group imports this module).
LIVE: "weakref.WeakSet[Any]" = weakref.WeakSet()
WORLD: "list[Any]" = [None]  # the default group, when it is an hcomm group
_ATEXIT = [False]
_EXIT_ON_ERROR = [False]


def local_rank(default: int) -> int:
    """The device index of this process: HCOMM_KIT_LOCAL_RANK / MPI local rank, else torchrun's
    LOCAL_RANK, else ``default``."""
    from ..core.bootstrap import _local_rank as hk_local_rank

    lr = hk_local_rank(-1)
    if lr >= 0:
        return lr
    raw = os.environ.get("LOCAL_RANK", "").strip()
    return int(raw) if raw.isdigit() else default


def _close_all() -> None:
    """At exit: shut every live group down; after an uncaught exception, abort them instead (the
    peers are probably still inside a collective: a closing barrier would only wait for them). A
    closing call check that finds this rank out of step with its peers ends the process with
    status 1 (:func:`hcomm_kit.core.communicator.exit_failed`)."""
    from ..base.errors import CollectiveMismatchError
    from ..core.communicator import exit_failed

    failed = _EXIT_ON_ERROR[0]
    mismatch: CollectiveMismatchError | None = None
    # Newest first, as destroy_process_group does: the same order on every rank of a group.
    for pg in sorted(LIVE, key=lambda g: g._id, reverse=True):
        try:
            if failed:
                pg.abort()
            else:
                pg.shutdown()
        except CollectiveMismatchError as exc:  # its closing call check: the ranks were out of step
            mismatch = mismatch or exc
        except Exception:
            pass
    if mismatch is not None:
        exit_failed(mismatch)


def install_hooks() -> None:
    """Once per process: the atexit shutdown, and an excepthook noting an exit on error."""
    if _ATEXIT[0]:
        return
    _ATEXIT[0] = True
    atexit.register(_close_all)  # runs before hcomm_kit's own close-all (atexit runs in reverse)
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        if not issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
            _EXIT_ON_ERROR[0] = True
        previous(exc_type, exc, tb)

    sys.excepthook = hook
    # A launcher ends the other ranks of a failed job with SIGTERM (mpirun, torchrun): exit through
    # the interpreter (atexit: communicators aborted, the emulator's /dev/shm segments unlinked)
    # instead of dying on the spot and leaving them behind. Only where nobody handles SIGTERM yet.
    from ..core.communicator import exit_on_signal

    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, exit_on_signal) and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
    except (ValueError, OSError):  # not the main thread / no signals here
        pass


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    _EXIT_ON_ERROR[0] = True
    raise SystemExit(128 + signum)
