"""What the ``hcomm-kit`` command checks in its own process before it starts anything.

``run``, ``bench``, ``test``, ``launch`` and ``demo`` refuse bad input here, once, in one line
(exit status 2, as argparse's own errors), instead of inside every rank after mpirun started:

* :func:`check_env`: every ``HCOMM_KIT_*`` / ``HCCL_*`` variable of :mod:`hcomm_kit.base.envs` (the one
  table of names, types and ranges), ``HCCL_ALGO``'s syntax included, and :func:`check_topology`:
  the cluster topology and the links taken down against the job's rank count;
* :func:`check_seconds`: ``--timeout`` / ``--grace``;
* :func:`check_names`: dtype, reduce op and algorithm names;
* :func:`check_memory`: what a run of ``count`` elements per rank needs (host memory of every
  rank, the part of each rank's HCCL buffer it fills in ``/dev/shm``) against what the machine has.

:func:`usage_errors` turns the :class:`~hcomm_kit.base.errors.ConfigError` of these checks into a
:class:`~hcomm_kit.base.errors.UsageError`.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import Iterator

from ..base.errors import ConfigError, UsageError

__all__ = ["usage_errors", "check_env", "check_topology", "check_seconds", "check_names", "check_op_algorithm", "host_bytes_per_rank",
           "check_memory", "available_memory", "shm_free"]

_PREFIXES = ("HCOMM_KIT_", "HCCL_")


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """Inside: a :class:`ConfigError` leaves as a :class:`UsageError` (exit 2, nothing started)."""
    try:
        yield
    except ConfigError as exc:
        raise UsageError.of(exc) from None


def check_env(np: int | None = None) -> None:
    """Validate every set ``HCOMM_KIT_*`` / ``HCCL_*`` variable of :data:`hcomm_kit.base.envs.VARIABLES`,
    and the cluster topology a job of ``np`` ranks would get (:func:`check_topology`).

    Raises:
        ConfigError: the first bad value, naming the variable, the value and what is accepted.
    """
    from ..base import envs

    for name in envs.VARIABLES:
        if name.startswith(_PREFIXES):
            envs.get(name)
    algo = envs.hccl_algo()
    if algo and envs.backend() == "emu":
        from ..ops.selector import check_hccl_algo

        check_hccl_algo(algo)  # as every rank's communicator creation will (the emulator's parser)
    check_topology(np)


def check_topology(np: int | None) -> None:
    """``HCOMM_KIT_TOPOLOGY`` (or ``--topology``) and ``HCOMM_KIT_LINKS_DOWN`` (``--links-down``), as
    every rank's communicator creation would refuse them: the syntax, at most the NPUs a server of
    the product holds, as many ranks as the job's ``np`` (None: not known here), links between ranks
    that exist.

    Raises:
        ConfigError: naming the variable, its value and what is accepted.
    """
    from ..base import envs

    topo = envs.topology()  # syntax and NPUs per server
    ranks = np
    if topo is not None:
        product, servers, npus = topo
        if np is not None and servers * npus != np:
            raise ConfigError(f"HCOMM_KIT_TOPOLOGY={envs.get('HCOMM_KIT_TOPOLOGY')}: {servers} servers x {npus} NPUs = "
                              f"{servers * npus} ranks, but the job has {np} (--np); make them agree",
                              key="HCOMM_KIT_TOPOLOGY")
        ranks = servers * npus
    down = envs.links_down()  # syntax
    if ranks is not None:
        for a, b in down:
            if b >= ranks:
                raise ConfigError(f"HCOMM_KIT_LINKS_DOWN={envs.get('HCOMM_KIT_LINKS_DOWN')}: link {a}-{b} names rank "
                                  f"{b}, but the job has {ranks} ranks (0-{ranks - 1}); name links between its "
                                  f"ranks, or unset HCOMM_KIT_LINKS_DOWN", key="HCOMM_KIT_LINKS_DOWN")


def check_seconds(value: float | None, flag: str, *, zero_ok: bool = False) -> None:
    """``--timeout`` / ``--grace``: None (no limit), else finite seconds > 0 (>= 0 with ``zero_ok``)."""
    if value is None:
        return
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise ConfigError(f"{flag} {value:g}: pass a finite number of seconds {'>=' if zero_ok else '>'} 0", key=flag)


def check_names(*, dtype: str | None = None, reduce_op: str | None = None, algorithm: str | None = None,
                collective: str | None = None) -> None:
    """Known dtype / reduce op names (:mod:`hcomm_kit.base.dtypes`), and an algorithm of ``collective``."""
    from ..base import dtypes

    if dtype is not None:
        try:
            dtypes.get_dtype(dtype)
        except ConfigError as exc:
            raise ConfigError(str(exc), key="-d") from None
    if reduce_op is not None:
        try:
            dtypes.get_reduce_op(reduce_op)
        except ConfigError as exc:
            raise ConfigError(str(exc), key="-o") from None
    if algorithm is not None and collective is not None:
        from ..ops.algorithms import ALGORITHMS, resolve

        if collective in ALGORITHMS:
            try:
                resolve(collective, algorithm)
            except ConfigError as exc:
                raise ConfigError(f"--algorithm {algorithm}: {exc}", key="--algorithm") from None


def check_op_algorithm(opdir: str, spec, name: str) -> None:
    """``--algorithm NAME`` of an operator: one of op.toml's ``[op].algorithms``, or for a built-in's
    directory in ``aicpu_kernels/`` (which lists none) one of its algorithms (:func:`check_names`)."""
    from pathlib import Path

    from ..base.resources import aicpu_kernels_dir

    d = Path(opdir).resolve()
    if not spec.algorithms and d.parent == aicpu_kernels_dir().resolve():
        check_names(algorithm=name, collective=d.name)
        return
    spec.algorithm_value(name)  # raises, naming op.toml's list


def host_bytes_per_rank(count: int, itemsize: int, np: int) -> int:
    """Host memory one rank of ``run`` / ``bench`` / ``demo`` uses for ``count`` elements per rank.

    Each rank makes the inputs of every rank (its numpy reference: ``np`` arrays, each generated
    from 8-byte integers), its device input and output and the expected result; a reduction's
    reference accumulates rank after rank in 8-byte elements (two wide arrays, not a stack of
    every rank's). Peak RSS of a rank of ``run allreduce`` measured in bytes per element: fp32
    38, 43, 60, 80 at 1, 2, 4, 8 ranks; fp64 87, 128 at 4, 8; int8 41 at 4. This model gives
    62, 68, 80, 104; 96, 136; 68.
    """
    wide = max(8, itemsize)
    return count * (np * (itemsize + 2) + 4 * wide + 24)


def available_memory() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None where unknown)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def shm_free(path: str = "/dev/shm") -> int | None:
    """Free bytes of the shared-memory file system (None where there is none)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _size(n: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def check_memory(count: int, itemsize: int, np: int, what: str = "--count", given: str | None = None) -> None:
    """Refuse a run whose ``count`` elements per rank (``itemsize`` bytes each) cannot fit.

    Needs: :func:`host_bytes_per_rank` x ``np`` plus what the HCCL buffers hold in ``/dev/shm``
    (each rank's buffer is ``HCCL_BUFFSIZE`` MB, filled up to the bytes a rank's output can hold,
    count x itemsize x ranks) against ``MemAvailable``; the HCCL buffers alone against the free
    space of ``/dev/shm``.

    ``what`` / ``given``: the option and its value as written (default: the count).

    Raises:
        ConfigError: with both figures and the limit.
    """
    from ..base import envs

    given = f"{what} {count if given is None else given}"

    buff = envs.hccl_buffsize_mb() << 20
    shm_need = np * min(buff, count * itemsize * np)
    host = np * host_bytes_per_rank(count, itemsize, np)
    avail = available_memory()
    if avail is not None and host + shm_need > avail:
        raise ConfigError(f"{given}: {np} rank(s) of {count} x {itemsize}-byte elements need about "
                          f"{_size(host + shm_need)} of memory (inputs, outputs and numpy references of every "
                          f"rank, HCCL buffers), but {_size(avail)} is available; use a smaller {what}",
                          key=what)
    free = shm_free()
    if free is not None and shm_need > free:
        raise ConfigError(f"{given}: the {np} ranks' HCCL buffers would fill {_size(shm_need)} of /dev/shm "
                          f"(HCCL_BUFFSIZE={buff >> 20} MB each), but /dev/shm has {_size(free)} free; "
                          f"use a smaller {what} or HCCL_BUFFSIZE", key=what)
