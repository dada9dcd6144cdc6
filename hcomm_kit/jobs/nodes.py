"""A job on several hosts, started as torchrun starts a multi-node job: one launcher per host.

On each host::

    hcomm-kit launch --nnodes 2 --node-rank K --rdzv-endpoint HOST:PORT --np 4 -- python prog.py

The launchers meet at the rendezvous endpoint: node 0's serves a c10d ``TCPStore``
(``torch.distributed``, the store torchrun uses) at ``HOST:PORT``, the others connect to it. Through it:

1. every node tells how many ranks it runs; node K's ranks are the job ranks ``offset .. offset+np-1``
   (``offset``: the ranks of nodes ``0 .. K-1``), so rank order is node rank, then local rank;
2. the root info: rank 0 writes it into its job directory (the file bootstrap of
   :mod:`hcomm_kit.core.bootstrap`); node 0's launcher publishes it, every other launcher writes it into
   its own job directory, where its ranks read it. The ranks meet through it (the emulator's rendezvous
   board in rank 0's process) and reach the ranks of other hosts over UCX;
3. every node publishes how its job ended. A launcher whose job still runs when another node's job
   failed, or when the rendezvous stopped answering (node 0's host is gone), stops its job: a host that
   loses its peer fails within seconds.

The ranks get ``HCOMM_KIT_TRANSPORT=multihost``, ``HCOMM_KIT_RANK_OFFSET``, ``HCOMM_KIT_WORLD_SIZE`` and
``HCOMM_KIT_ROOT_INFO``. Only the launchers use the store (torch is imported there, not in the ranks).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from ..base import envs
from ..base.errors import ConfigError, HcommKitError

__all__ = ["Nodes", "parse_endpoint"]

_POLL_S = 0.5  # how often a launcher looks at the other nodes while its job runs
_FAILED_LINGER_S = 3.0  # node 0's store stays up this long after its job failed (the others see it)
_DONE_WAIT_S = 3600.0   # ... and at most this long for the others to end after its job succeeded


def parse_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) -> (host, port).

    Raises:
        ConfigError: not HOST:PORT with a port in 1..65535.
    """
    host, sep, port = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--rdzv-endpoint {text!r} is not HOST:PORT (node 0's address and a free TCP port, "
                          f"e.g. 10.0.0.1:29400)", key="--rdzv-endpoint")
    return host, int(port)


def _store(host: str, port: int, nnodes: int, master: bool, timeout: float):
    try:
        from torch.distributed import TCPStore
    except ImportError as exc:
        raise HcommKitError("a job on several hosts meets through a c10d TCPStore, which needs torch: "
                            "`python -m pip install torch` on every host (the CPU wheel will do)") from exc
    try:
        return TCPStore(host, port, world_size=nnodes, is_master=master, timeout=timedelta(seconds=timeout),
                        wait_for_workers=False)
    except Exception as exc:  # torch raises RuntimeError / DistNetworkError with its own text
        what = "serve" if master else "reach"
        raise HcommKitError(f"cannot {what} the rendezvous at {host}:{port} ({type(exc).__name__}: {exc}); node 0 "
                            f"serves it on that address (its own), the others connect: check the address, that the "
                            f"port is free on node 0 and open between the hosts") from exc


@dataclass
class Nodes:
    """One launcher's view of a multi-host job.

    Attributes:
        nnodes, node_rank: the number of hosts and this one's index (0 serves the rendezvous).
        endpoint: ``HOST:PORT`` of the rendezvous (node 0's address).
        np: ranks on this host.
        timeout: seconds to wait for the other nodes (default ``HCCL_CONNECT_TIMEOUT``).
    """

    nnodes: int
    node_rank: int
    endpoint: str
    np: int
    timeout: float | None = None
    offset: int = 0
    world: int = 0
    hosts: list[str] = field(default_factory=list)
    _store: object = None
    _relay: threading.Thread | None = None
    _relay_error: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise ConfigError(f"--nnodes {self.nnodes} must be at least 1", key="--nnodes")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank} is not in [0, --nnodes {self.nnodes})", key="--node-rank")
        parse_endpoint(self.endpoint)
        if self.timeout is None:
            self.timeout = float(envs.hccl_connect_timeout_s())

    # ---- meeting -------------------------------------------------------------------------------
    def join(self) -> None:
        """Meet the other launchers: sets ``offset``, ``world`` and ``hosts`` (blocks up to ``timeout``)."""
        host, port = parse_endpoint(self.endpoint)
        self._store = s = _store(host, port, self.nnodes, self.node_rank == 0, self.timeout)
        me = os.uname().nodename
        s.set(f"node/{self.node_rank}", f"{self.np} {me}")
        keys = [f"node/{k}" for k in range(self.nnodes)]
        try:
            s.wait(keys, timedelta(seconds=self.timeout))
        except Exception as exc:
            missing = [k for k in keys if not s.check([k])]
            raise HcommKitError(f"node {self.node_rank}: {', '.join(missing)} did not join the rendezvous at "
                                f"{self.endpoint} within {self.timeout:g} s (start `hcomm-kit launch --nnodes "
                                f"{self.nnodes} --node-rank K --rdzv-endpoint {self.endpoint}` on every host)") from exc
        counts = []
        for k in range(self.nnodes):
            n, _, name = s.get(f"node/{k}").decode().partition(" ")
            counts.append(int(n))
            self.hosts.append(name)
        self.offset, self.world = sum(counts[:self.node_rank]), sum(counts)

    def rank_env(self, root_info: Path) -> dict[str, str]:
        """The environment of this host's ranks (a torch program's ``env://`` too: MASTER_ADDR is node
        0's, where its rank 0 runs, MASTER_PORT the next port after the rendezvous's)."""
        host, port = parse_endpoint(self.endpoint)
        env = {"HCOMM_KIT_TRANSPORT": "multihost", "HCOMM_KIT_RANK_OFFSET": str(self.offset),
               "HCOMM_KIT_WORLD_SIZE": str(self.world), "HCOMM_KIT_ROOT_INFO": str(root_info)}
        if "MASTER_ADDR" not in os.environ:
            env["MASTER_ADDR"] = host
        if "MASTER_PORT" not in os.environ:
            env["MASTER_PORT"] = str(port + 1 if port < 65535 else port - 1)
        return env

    def relay_root_info(self, path: Path) -> None:
        """Carries the root info from rank 0's job directory to every host's (a thread; returns at once)."""
        def run() -> None:
            from ..build.cache import atomic_write_bytes

            try:
                if self.node_rank == 0:
                    deadline = time.monotonic() + self.timeout
                    while not path.is_file():
                        if time.monotonic() > deadline:
                            return  # the ranks say why (rank 0 never created its communicator)
                        time.sleep(0.01)
                    self._store.set("root_info", path.read_bytes())
                else:
                    self._store.wait(["root_info"], timedelta(seconds=self.timeout))
                    atomic_write_bytes(path, self._store.get("root_info"))
            except Exception as exc:  # the job stops through the watch below; keep why
                self._relay_error.append(exc)

        self._relay = threading.Thread(target=run, name="hcomm-kit-root-info-relay", daemon=True)
        self._relay.start()

    # ---- while the job runs ----------------------------------------------------------------------
    def watch(self) -> str | None:
        """Why this host's job must stop because of another node (None: it may go on)."""
        s = self._store
        try:
            for k in range(self.nnodes):
                if k == self.node_rank or not s.check([f"end/{k}"]):
                    continue
                status = int(s.get(f"end/{k}"))
                if status != 0:
                    return (f"node {k} (host {self.hosts[k]}, job ranks from {self._offset_of(k)}) ended with "
                            f"status {status}")
        except Exception as exc:
            return f"the rendezvous at {self.endpoint} stopped answering (node 0's host lost?): {exc}"
        return None

    def _offset_of(self, k: int) -> int:
        counts = [int(self._store.get(f"node/{i}").decode().split()[0]) for i in range(k)]
        return sum(counts)

    def finish(self, status: int) -> None:
        """Publish how this host's job ended. Node 0 serves the store: after a success it waits for the
        others to end (they watch the store while they run); after a failure a few seconds, for them to
        see it (a lost host never answers)."""
        s = self._store
        if s is None:
            return
        try:
            s.set(f"end/{self.node_rank}", str(status))
            if self.node_rank == 0:
                deadline = time.monotonic() + (_FAILED_LINGER_S if status else _DONE_WAIT_S)
                others = [f"end/{k}" for k in range(1, self.nnodes)]
                while others and time.monotonic() < deadline and not s.check(others):
                    if status == 0 and self.watch():  # another node failed meanwhile: it saw no failure here
                        break
                    time.sleep(_POLL_S)
        except Exception:
            pass
