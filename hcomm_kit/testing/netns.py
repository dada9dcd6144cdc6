"""Two hosts on one machine, for the multi-host tests (tests/test_multihost.py) and measurements
(scripts/multihost_bandwidth.py): two Linux network namespaces joined by a veth
pair, and every command run in one of them gets a mount namespace of its own with a private
``/dev/shm`` (a tmpfs) and a host name of its own (a UTS namespace), so nothing can pass between the
"hosts" through shared memory. UCX is held
to TCP (``UCX_TLS=tcp``): its shared-memory transports (CMA works across network namespaces of one
PID namespace) would bypass the veth.

Needs root, ``ip`` (iproute2) and ``unshare`` (util-linux); :func:`unavailable` says what is missing.
The namespaces are made by :class:`TwoHosts` and removed, with everything still running in them, when
it exits; those of a process killed before that are removed by the next :class:`TwoHosts`.

Example::

    with TwoHosts() as hosts:
        a = hosts.popen(0, ["hcomm-kit", "launch", "--nnodes", "2", "--node-rank", "0", ...])
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time

__all__ = ["TwoHosts", "unavailable"]

ADDR = ("169.254.77.1", "169.254.77.2")  # link-local: never routed off the veth


def unavailable() -> str:
    """"" when two hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces; CI runs as root)"
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"needs `{tool}` (iproute2 / util-linux)"
    probe = f"hkp{os.getpid() % 100000}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot make a network namespace: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return ""


class TwoHosts:
    """Hosts 0 and 1: network namespaces ``<tag>a`` / ``<tag>b``, addresses :data:`ADDR`."""

    def __init__(self) -> None:
        self.tag = f"hk{os.getpid()}"  # the whole pid: reclaim() tells a live owner by it
        self.ns = (f"{self.tag}a", f"{self.tag}b")
        self._made: list[str] = []

    def _ip(self, *args: str) -> None:
        r = subprocess.run(["ip", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")

    @staticmethod
    def reclaim() -> list[str]:
        """Remove the namespaces of TwoHosts whose process is gone (killed before its exit removed
        them); returns their names. A namespace of a live process is left alone."""
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        gone = []
        for line in r.stdout.splitlines():
            m = re.fullmatch(r"hk(\d+)[ab]", line.split()[0]) if line.split() else None
            if m is None or os.path.exists(f"/proc/{m.group(1)}"):
                continue
            subprocess.run(["ip", "netns", "del", line.split()[0]], capture_output=True)
            gone.append(line.split()[0])
        return gone

    def __enter__(self) -> "TwoHosts":
        self.reclaim()
        try:
            for ns in self.ns:
                self._ip("netns", "add", ns)
                self._made.append(ns)
            a, b = f"{self.tag}a0", f"{self.tag}b0"
            # made inside the namespaces: a veth that appears in this machine's namespace and then moves
            # away can vanish under a process listing the interfaces at that moment (an mpirun starting
            # there: "The PMIx server's listener thread failed to start")
            self._ip("link", "add", a, "netns", self.ns[0], "type", "veth", "peer", "name", b, "netns", self.ns[1])
            for ns, dev, addr in ((self.ns[0], a, ADDR[0]), (self.ns[1], b, ADDR[1])):
                self._ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
                self._ip("-n", ns, "link", "set", dev, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for ns in self._made:
            self.kill(self.ns.index(ns))
        for ns in self._made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._made.clear()

    def argv(self, host: int, argv: list[str], shm_report: str | None = None) -> list[str]:
        """``argv`` run on host ``host`` (its network namespace, a private /dev/shm). ``shm_report``: a
        file that gets what is left in that /dev/shm once ``argv`` ended (the namespace's tmpfs goes
        with its last process, so leftovers can only be seen from inside)."""
        run = 'exec "$@"' if shm_report is None else f'"$@"; rc=$?; ls -A /dev/shm > {shlex.quote(shm_report)}; exit $rc'
        return ["ip", "netns", "exec", self.ns[host], "unshare", "-m", "-u", "--propagation", "private", "sh", "-c",
                f'mount -t tmpfs -o size=8g tmpfs /dev/shm && hostname {self.hostname(host)} && {run}', "sh", *argv]

    def hostname(self, host: int) -> str:
        """The host name commands on host ``host`` see."""
        return f"{self.tag}-host{host}"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a command on a host: this one's, UCX held to TCP, ranks not bound to a
        CPU each (``HCOMM_KIT_PIN=0``: the two hosts share this machine's CPUs, and each would bind
        its local rank 0 to the same CPU), then ``extra``."""
        return {**os.environ, "UCX_TLS": "tcp", "UCX_WARN_UNUSED_ENV_VARS": "n", "HCOMM_KIT_PIN": "0", **(extra or {})}

    def popen(self, host: int, argv: list[str], env: dict[str, str] | None = None, shm_report: str | None = None,
              **kw) -> subprocess.Popen:
        """Start ``argv`` on host ``host`` (``shm_report``: see :meth:`argv`; ``kw``: subprocess.Popen's)."""
        return subprocess.Popen(self.argv(host, argv, shm_report), env=self.env(env), **kw)

    def pids(self, host: int) -> list[int]:
        """Every process running on host ``host``."""
        r = subprocess.run(["ip", "netns", "pids", self.ns[host]], capture_output=True, text=True)
        return [int(x) for x in r.stdout.split() if x.isdigit()]

    def kill(self, host: int, sig: int = signal.SIGKILL) -> None:
        """Every process of host ``host`` (a host that dies)."""
        for _ in range(50):
            pids = self.pids(host)
            if not pids:
                return
            for p in pids:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
