"""Cluster topology of the emulator's communicators (hccl/topology.cc, hccl/rank_graph.cc).

tests/c/test_topology.cc (one thread per rank) queries every rank-graph function against the
topology it was given through HCOMM_KIT_TOPOLOGY, takes a link down with HCOMM_KIT_LINKS_DOWN
and acquires a channel over it, and reads the topology JSON (HcommKitCommTopology).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from hcomm_kit.build import emulator as _emulator

TESTS_C = Path(__file__).resolve().parent / "c"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("topo_bin") / "test_topology"
    cmd = ["g++", "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread", str(TESTS_C / "test_topology.cc"),
           *shlex.split(_emulator.cflags()), *shlex.split(_emulator.libs()), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{shlex.join(cmd)}\n{res.stdout}{res.stderr}"
    return out


def _run(program: Path, args: list[int], soc: str, topology: str, down: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(HCOMM_KIT_SOC=soc, HCOMM_KIT_TOPOLOGY=topology, HCOMM_KIT_LINKS_DOWN=down, HCCL_BUFFSIZE="4",
               HCCL_CONNECT_TIMEOUT="30", HCOMM_KIT_DEVICE_COUNT=str(max(8, args[0])))
    return subprocess.run([str(program), *map(str, args)], env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("soc,topology,args,down", [
    ("Ascend910B", "A2:2x4", [8, 2, 4, 0, 1], "0-1"),
    ("Ascend910_93", "A3:2x8", [16, 2, 8, 3, 12], "3-12"),
    ("Ascend910B", "A2:1x8", [8, 1, 8], ""),
    ("Ascend910B", "A2:2x4", [6, 2, 4], ""),   # 6 ranks for 2 x 4: every rank's init fails naming both
])
def test_rank_graph(program: Path, soc: str, topology: str, args: list[int], down: str) -> None:
    res = _run(program, args, soc, topology, down)
    assert res.returncode == 0 and "PASS" in res.stdout, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"


def test_rank_table_with_super_pods(program: Path, tmp_path: Path) -> None:
    """A CANN A3 rank table: server_list entries are servers, super_pod_list groups them: three
    layers, UB inside a super-pod, RoCE between super-pods."""
    env = dict(os.environ, HCOMM_KIT_SOC="Ascend910_93", HCCL_BUFFSIZE="4", HCCL_CONNECT_TIMEOUT="30")
    env.pop("HCOMM_KIT_TOPOLOGY", None)
    env.pop("HCOMM_KIT_LINKS_DOWN", None)
    res = subprocess.run([str(program), "table", str(tmp_path / "rank_table.json")], env=env, capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0 and "PASS" in res.stdout, f"exit {res.returncode}\n{res.stdout}\n{res.stderr}"


@pytest.mark.parametrize("soc,topology,want", [
    ("Ascend910B", "A2:1x16", "an A2 server holds at most 8 NPUs"),
    ("Ascend910B", "A3:1x16", "is an A3 topology but the SoC is Ascend910B"),
    ("Ascend910B", "A2:2y8", "is not PRODUCT:SERVERSxNPUS"),
])
def test_bad_topology(program: Path, soc: str, topology: str, want: str) -> None:
    res = _run(program, [16, 1, 16], soc, topology)
    assert res.returncode == 1
    assert want in res.stderr, res.stderr


def test_bad_links_down(program: Path) -> None:
    res = _run(program, [8, 1, 8], "Ascend910B", "A2:1x8", "0-9")
    assert res.returncode == 1
    assert "HCOMM_KIT_LINKS_DOWN='0-9': entry '0-9' names rank 9, but the communicator has 8 ranks" in res.stderr


_VIEW = """
import hcomm_kit
comm = hcomm_kit.init()
t = comm.topology
assert t.product == "A2" and t.source == "HCOMM_KIT_TOPOLOGY=A2:2x2", t
assert t.servers == ((0, 1), (2, 3)) and t.links_down == ((0, 1),), t
assert t.link_type(0, 1) == "HCCS" and t.link(0, 1) is None and t.link(0, 2) == "RoCE" and t.link(2, 3) == "HCCS"
print("VIEW-OK", comm.rank, flush=True)
comm.close()
"""


def test_python_view_through_the_launcher(tmp_path: Path) -> None:
    """--topology / --links-down reach every rank; comm.topology reads the emulator's answer."""
    script = tmp_path / "view.py"
    script.write_text(_VIEW)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("HCOMM_KIT_SOC", None)
    res = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "4", "--topology", "A2:2x2",
                          "--links-down", "1-0", "--", sys.executable, str(script)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("VIEW-OK") == 4, res.stdout + res.stderr


@pytest.mark.parametrize("argv,needle", [
    ("launch --np 4 --topology A2:2x4 -- true", "describes 2 servers x 4 NPUs = 8 ranks, but --np is 4"),
    ("launch --np 8 --topology B7:2x4 -- true", "HCOMM_KIT_TOPOLOGY='B7:2x4'"),
    ("launch --np 8 --links-down 0-x -- true", "HCOMM_KIT_LINKS_DOWN='0-x'"),
])
def test_bad_flags_are_refused(argv: str, needle: str, capsys, monkeypatch) -> None:
    from hcomm_kit import cli

    monkeypatch.setenv("HCOMM_KIT_BACKEND", "emu")
    for name in ("HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_LINKS_DOWN", "HCOMM_KIT_SOC", "HCOMM_KIT_DEVICE_COUNT"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored after the test

    def no_start(*a, **k):
        raise AssertionError(f"a process was started: {a}")

    monkeypatch.setattr(subprocess, "Popen", no_start)
    rc = cli.main(argv.split())
    err = capsys.readouterr().err
    assert rc == 2 and needle in err, err


def _run_cli(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), HCOMM_KIT_LOG="info", **env)
    for name in ("HCOMM_KIT_SOC", "HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_LINKS_DOWN", "HCCL_ALGO"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, "-m", "hcomm_kit", *argv], env=full, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow  # four jobs of 2-8 ranks: full suite only
def test_selection_and_tuner_plugin(tmp_path: Path) -> None:
    """The cost model picks per topology (A2:2x4, 1 MiB: the ring, RoCE ports shared by the
    one-shot's remote reads); CANN's tuner plugin interface changes the choice (a plugin that
    prefers the ring on one server, where the model picks the one-shot mesh); a downed link
    leaves the built-ins no algorithm and says so."""
    from hcomm_kit.build import emulator

    res = _run_cli(["run", "allreduce", "--np", "8", "--topology", "A2:2x4", "--count", "262144"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert "AicpuAllReduceSoleRing 0.000133 s -> AicpuAllReduceSoleRing" in res.stdout + res.stderr

    plugin = tmp_path / "prefer_ring.so"
    cmd = ["gcc", "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{emulator.get_include()}",
           str(TESTS_C / "tuner" / "prefer_ring.c"), "-o", str(plugin)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    base = _run_cli(["run", "allreduce", "--np", "2"])
    trace = tmp_path / "trace.json"
    tuned = _run_cli(["run", "allreduce", "--np", "2"], HCCL_TUNER_PLUGIN=str(plugin), HCOMM_KIT_TRACE=str(trace))
    assert base.returncode == 0 and tuned.returncode == 0, base.stderr + tuned.stderr
    assert "-> AicpuAllReduceSoleMeshoneshot\n" in base.stdout + base.stderr
    out = tuned.stdout + tuned.stderr
    assert "AicpuAllReduceSoleMeshoneshot -1 s (cost model" in out
    assert "-> AicpuAllReduceSoleRing (tuner plugin matched)" in out
    assert "prefer_ring init: nRanks=2 nServers=1 nNpusPerServer=2 nPods=0 nSuperPods=0" in out
    text = trace.read_text()
    assert text.count('"name":"algorithm selection"') >= 2  # one per rank (and call)
    assert '"chosen":"AicpuAllReduceSoleRing","tuner_matched":1' in text

    down = _run_cli(["run", "allreduce", "--np", "4", "--links-down", "0-1"])
    assert down.returncode != 0
    assert "allreduce: no algorithm of the built-in can run on this topology" in down.stdout + down.stderr
    assert "mesh needs the 0-1 link, which is down; ring needs the 0-1 link, which is down" in down.stdout + down.stderr


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "allreduce_route"


@pytest.mark.slow  # an 8-rank operator test run (its generated tests): full suite only
def test_routed_allreduce_example() -> None:
    """The contest task: an allreduce on an 8-rank A2 mesh whose 0-1 link is down passes its
    generated tests, routing 0<->1 through rank 2; the built-in cannot run there at all."""
    res = _run_cli(["test", str(EXAMPLE), "--np", "8", "--topology", "A2:1x8", "--links-down", "0-1", "--",
                    "-k", "fp32 or int32"])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "passed" in res.stdout and "failed" not in res.stdout
    builtin = _run_cli(["run", "allreduce", "--np", "8", "--topology", "A2:1x8", "--links-down", "0-1"])
    assert builtin.returncode != 0 and "needs the 0-1 link, which is down" in builtin.stdout + builtin.stderr


def test_mpi_marker_topology_argument() -> None:
    """@pytest.mark.mpi(topology=..., links_down=...) becomes the job's environment."""
    from hcomm_kit.testing.items import _item_env

    class Item:
        def get_closest_marker(self, name):
            return pytest.mark.mpi(np=8, topology="A3:2x8", links_down="0-1", env={"X": "1"}).mark

    env = dict(_item_env(Item()))
    assert env == {"X": "1", "HCOMM_KIT_TOPOLOGY": "A3:2x8", "HCOMM_KIT_SOC": "Ascend910_93",
                   "HCOMM_KIT_DEVICE_COUNT": "16", "HCOMM_KIT_LINKS_DOWN": "0-1"}


@pytest.mark.slow  # 32 ranks on a 2-core machine
@pytest.mark.parametrize("op", ["allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast"])
def test_builtins_on_two_servers_of_16(op: str) -> None:
    """2 servers x 16 (32 ranks): the built-ins stay correct (RoCE between the servers)."""
    res = _run_cli(["run", op, "--np", "32", "--topology", "A3:2x16", "--count", "4096"])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "success |      0" in res.stdout, res.stdout[-3000:]
