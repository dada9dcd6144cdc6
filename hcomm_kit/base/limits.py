"""Limits checked on the Python side before anything starts (one place for each).

:data:`MAX_RANKS` mirrors ``kMaxRanks`` of the emulator (``emu/src/hccl/comm.h``; a test checks that
the two agree). :func:`check_np` is the one validation of a rank count used by every command
(``run``, ``bench``, ``test``, ``launch``, ``demo``) and by the pytest plugin's markers.
"""

from __future__ import annotations

from .errors import ConfigError

__all__ = ["MAX_RANKS", "check_np"]

MAX_RANKS = 64  # the emulator's communicators hold at most this many ranks (emu/src/hccl/comm.h kMaxRanks)


def _emulated() -> bool:
    """True unless the CANN backend is asked for (real CANN has its own limits)."""
    from . import envs

    try:
        choice = envs.backend()
    except ConfigError:
        return True  # the bad value is reported where the runtime loads
    if choice == "cann":
        return False
    if choice == "auto":
        return envs.ascend_home_path() is None
    return True


def check_np(np: int, *, what: str = "--np") -> int:
    """Return ``np`` if it is a usable rank count, else raise a one-line :class:`ConfigError`.

    Args:
        np: the rank count asked for.
        what: the option or marker that gave it (named in the message).

    Raises:
        ConfigError: ``np < 1``, or more ranks than the emulator supports.
    """
    if not isinstance(np, int) or isinstance(np, bool):
        raise ConfigError(f"{what} {np!r} is not a whole number of ranks", key=what)
    if np < 1:
        raise ConfigError(f"{what} {np}: the rank count must be at least 1", key=what)
    if np > MAX_RANKS and _emulated():
        raise ConfigError(f"{what} {np}: the emulator supports at most {MAX_RANKS} ranks per job "
                          f"(use 1..{MAX_RANKS})", key=what)
    return np

