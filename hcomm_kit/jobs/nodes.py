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

The flags (:data:`NODE_OPTIONS`, torchrun's names) are defined once here for every command that takes
them (``hcomm-kit launch/run/test/bench``, :func:`hcomm_kit.cli.launch.add_node_arguments`) and for the
pytest plugin (:mod:`hcomm_kit.testing.plugin`). A process that starts several jobs one after another
(the plugin: one job per test file and rank count) keeps one store for all of them
(:class:`NodeSession`); each job's keys carry its own prefix, so a host never meets another host's
previous or next job.
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

__all__ = ["NODE_OPTIONS", "NodeSession", "Nodes", "nodes_from", "parse_endpoint"]

# torchrun's multi-node flags: (flags, argparse/pytest keyword arguments), registered by
# hcomm_kit.cli.launch.add_node_arguments and by the pytest plugin.
NODE_OPTIONS: tuple[tuple[tuple[str, ...], dict], ...] = (
    (("--nnodes",), dict(type=int, default=1, metavar="N", help="number of hosts (default 1)")),
    (("--node-rank",), dict(type=int, default=0, metavar="K",
                            help="this host's index, 0 .. N-1 (node 0 serves the rendezvous; job ranks follow node "
                                 "order)")),
    (("--rdzv-endpoint",), dict(default=None, metavar="HOST:PORT",
                                help="node 0's address and a free TCP port, where the hosts' launchers meet (a c10d "
                                     "TCPStore)")),
)

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


def nodes_from(nnodes: int, node_rank: int, endpoint: str | None, np: int,
               session: "NodeSession | None" = None, prefix: str = "") -> "Nodes | None":
    """The :class:`Nodes` of a multi-host job from the flags' values, or None (one host).

    Raises:
        ConfigError: --node-rank without --nnodes > 1, --nnodes > 1 without --rdzv-endpoint, or a bad value.
    """
    if nnodes == 1 and endpoint is None:
        if node_rank != 0:
            raise ConfigError("--node-rank needs --nnodes > 1", key="--node-rank")
        return None
    if not endpoint:
        raise ConfigError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address and a free port)",
                          key="--rdzv-endpoint")
    return Nodes(nnodes, node_rank, endpoint, np, session=session, prefix=prefix)


class NodeSession:
    """One rendezvous store for several jobs started one after another by this process (node 0 serves
    it for as long as the session lasts). :meth:`close` waits, on node 0, until the other nodes said
    they are done with it (bounded)."""

    def __init__(self, nnodes: int, node_rank: int, endpoint: str, timeout: float | None = None) -> None:
        if nnodes < 1 or not 0 <= node_rank < nnodes:
            raise ConfigError(f"--node-rank {node_rank} is not in [0, --nnodes {nnodes})", key="--node-rank")
        self.nnodes, self.node_rank, self.endpoint = nnodes, node_rank, endpoint
        self.timeout = float(envs.hccl_connect_timeout_s()) if timeout is None else timeout
        self._store = None
        self.jobs = 0  # jobs started so far: the next job's key prefix

    def store(self):
        """The store (made on first use: node 0 serves it, the others connect)."""
        if self._store is None:
            host, port = parse_endpoint(self.endpoint)
            self._store = _store(host, port, self.nnodes, self.node_rank == 0, self.timeout)
        return self._store

    def job(self, np: int) -> "Nodes":
        """The :class:`Nodes` of the session's next job (np ranks on this host)."""
        self.jobs += 1
        return Nodes(self.nnodes, self.node_rank, self.endpoint, np, timeout=self.timeout, session=self,
                     prefix=f"job{self.jobs}/")

    def close(self, wait: float = 60.0) -> None:
        """Done with the store; node 0 keeps serving it until every node is done (at most ``wait`` s)."""
        s = self._store
        if s is None:
            return
        try:
            s.set(f"bye/{self.node_rank}", "1")
            if self.node_rank == 0:
                keys = [f"bye/{k}" for k in range(1, self.nnodes)]
                deadline = time.monotonic() + wait
                while keys and not s.check(keys) and time.monotonic() < deadline:
                    time.sleep(_POLL_S)
        except Exception:  # the others are gone: nothing to wait for
            pass
        self._store = None


@dataclass
class Nodes:
    """One launcher's view of a multi-host job.

    Attributes:
        nnodes, node_rank: the number of hosts and this one's index (0 serves the rendezvous).
        endpoint: ``HOST:PORT`` of the rendezvous (node 0's address).
        np: ranks on this host.
        timeout: seconds to wait for the other nodes (default ``HCCL_CONNECT_TIMEOUT``).
        session: the :class:`NodeSession` whose store this job uses (None: a store of its own).
        prefix: this job's key prefix in a session's store.
    """

    nnodes: int
    node_rank: int
    endpoint: str
    np: int
    timeout: float | None = None
    session: "NodeSession | None" = None
    prefix: str = ""
    offset: int = 0
    world: int = 0
    hosts: list[str] = field(default_factory=list)
    _store: object = None
    _relay: threading.Thread | None = None
    _relay_error: list = field(default_factory=list)
    _relay_stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.nnodes < 1:
            raise ConfigError(f"--nnodes {self.nnodes} must be at least 1", key="--nnodes")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank} is not in [0, --nnodes {self.nnodes})", key="--node-rank")
        parse_endpoint(self.endpoint)
        if self.timeout is None:
            self.timeout = float(envs.hccl_connect_timeout_s())

    def _k(self, key: str) -> str:
        return self.prefix + key

    # ---- meeting -------------------------------------------------------------------------------
    def start(self, root_info: Path) -> dict[str, str]:
        """Meet the other launchers (:meth:`join`), start relaying the root info through
        ``root_info`` (:meth:`relay_root_info`) and return the ranks' environment (:meth:`rank_env`).
        While the job runs, :meth:`watch` says whether it must stop; :meth:`finish` ends it. The one
        sequence of ``hcomm-kit launch`` (:func:`hcomm_kit.jobs.launch.launch`) and of the pytest
        plugin's jobs."""
        self.join()
        env = self.rank_env(root_info)
        self.relay_root_info(root_info)
        return env

    def join(self) -> None:
        """Meet the other launchers: sets ``offset``, ``world`` and ``hosts`` (blocks up to ``timeout``)."""
        if self.session is not None:
            self._store = s = self.session.store()
        else:
            host, port = parse_endpoint(self.endpoint)
            self._store = s = _store(host, port, self.nnodes, self.node_rank == 0, self.timeout)
        me = os.uname().nodename
        s.set(self._k(f"node/{self.node_rank}"), f"{self.np} {me}")
        keys = [self._k(f"node/{k}") for k in range(self.nnodes)]
        try:
            s.wait(keys, timedelta(seconds=self.timeout))
        except Exception as exc:
            missing = [k[len(self.prefix):] for k in keys if not s.check([k])]
            raise HcommKitError(f"node {self.node_rank}: {', '.join(missing)} did not join the rendezvous at "
                                f"{self.endpoint} within {self.timeout:g} s (start `hcomm-kit launch --nnodes "
                                f"{self.nnodes} --node-rank K --rdzv-endpoint {self.endpoint}` on every host)") from exc
        counts = []
        for k in range(self.nnodes):
            n, _, name = s.get(self._k(f"node/{k}")).decode().partition(" ")
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

            # Polled, never a blocking wait: the store's client serves one request at a time, and
            # the launcher's watch (another node failed: stop this job) must get through at once.
            key = self._k("root_info")
            deadline = time.monotonic() + self.timeout
            try:
                while not self._relay_stop.is_set() and time.monotonic() < deadline:
                    if self.node_rank == 0:
                        if path.is_file():
                            self._store.set(key, path.read_bytes())
                            return
                    elif self._store.check([key]):
                        atomic_write_bytes(path, self._store.get(key))
                        return
                    time.sleep(0.01 if self.node_rank == 0 else 0.05)
                # past the deadline the ranks say why (rank 0 never created its communicator)
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
                if k == self.node_rank or not s.check([self._k(f"end/{k}")]):
                    continue
                status, _, why = s.get(self._k(f"end/{k}")).decode().partition(" ")
                if int(status) != 0:
                    return (f"node {k} (host {self.hosts[k]}, job ranks from {self._offset_of(k)}) ended with "
                            f"status {status}{': ' + why if why else ''}")
        except Exception as exc:
            return f"the rendezvous at {self.endpoint} stopped answering (node 0's host lost?): {exc}"
        return None

    def _offset_of(self, k: int) -> int:
        counts = [int(self._store.get(self._k(f"node/{i}")).decode().split()[0]) for i in range(k)]
        return sum(counts)

    def finish(self, status: int, why: str = "") -> None:
        """Publish how this host's job ended (``why``: its first error, one line, for the other hosts'
        message). Node 0 serves the store: after a success it waits for the others to end (they watch
        the store while they run); after a failure a few seconds, for them to see it (a lost host never
        answers)."""
        self._relay_stop.set()
        s = self._store
        if s is None:
            return
        try:
            line = " ".join(str(why).split())[:300]
            s.set(self._k(f"end/{self.node_rank}"), f"{status} {line}" if status and line else str(status))
            if self.node_rank == 0:
                deadline = time.monotonic() + (_FAILED_LINGER_S if status else _DONE_WAIT_S)
                others = [self._k(f"end/{k}") for k in range(1, self.nnodes)]
                while others and time.monotonic() < deadline and not s.check(others):
                    if status == 0 and self.watch():  # another node failed meanwhile: it saw no failure here
                        break
                    time.sleep(_POLL_S)
        except Exception:
            pass
