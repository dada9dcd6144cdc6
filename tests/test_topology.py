"""Cluster topology of the emulator's communicators (hccl/topology.cc, hccl/rank_graph.cc).

tests/c/test_topology.cc (one thread per rank) queries every rank-graph function against the
topology it was given through HCOMM_KIT_TOPOLOGY, takes a link down with HCOMM_KIT_LINKS_DOWN
and acquires a channel over it, and reads the topology JSON (HcommKitCommTopology).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hcomm_kit.base.errors import ConfigError
from hcomm_kit.build import emulator as _emulator
from hcomm_kit.ops import reference

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
    ("Ascend910B", "A2:2x2x4", "A2 has no super-pods (PODSxSERVERSxNPUS is for A3 and 950); use A2:4x4"),
])
def test_bad_topology(program: Path, soc: str, topology: str, want: str) -> None:
    res = _run(program, [16, 1, 16], soc, topology)
    assert res.returncode == 1
    assert want in res.stderr, res.stderr


def test_super_pod_spec() -> None:
    """PRODUCT:PODSxSERVERSxNPUS: servers in all and NPUs per server (the launchers' rank count);
    A2 has no super-pods, and the per-server limit holds as in the two-number form."""
    from hcomm_kit.base import envs
    from hcomm_kit.base.errors import ConfigError

    assert envs.parse_topology("A3:2x2x8") == ("A3", 4, 8)
    assert envs.parse_topology("950:3x1x2") == ("950", 3, 2)
    for bad, why in (("A2:2x2x4", "A2 has no super-pods"), ("A3:2x2x2x2", "nor PRODUCT:PODSxSERVERSxNPUS"),
                     ("A3:2x0x8", "is not PRODUCT:SERVERSxNPUS"), ("A3:2x2x17", "at most 16 NPUs per server")):
        with pytest.raises(ConfigError, match=re.escape(why)):
            envs.parse_topology(bad)


def test_bad_links_down(program: Path) -> None:
    res = _run(program, [8, 1, 8], "Ascend910B", "A2:1x8", "0-9")
    assert res.returncode == 1
    assert "HCOMM_KIT_LINKS_DOWN='0-9': entry '0-9' names rank 9, but the communicator has 8 ranks" in res.stderr


_VIEW = """
import os

import numpy as np

import hcomm_kit
from hcomm_kit.base.errors import ConfigError
from hcomm_kit.ops import reference

comm = hcomm_kit.init()
t = comm.topology
assert t.product == "A2" and t.source == "HCOMM_KIT_TOPOLOGY=A2:2x2", t
assert t.servers == ((0, 1), (2, 3)) and t.links_down == ((0, 3),), t
assert t.link_type(0, 3) == "RoCE" and t.link(0, 3) is None and t.link(0, 2) == "RoCE" and t.link(0, 1) == "HCCS"
print("VIEW-OK", comm.rank, flush=True)

# A link down: CANN's choice here (NHR over every rank) needs it, so the collective fails on every
# rank at once, naming it.
for call in (lambda: comm.all_reduce(np.ones(8, np.float32)), lambda: comm.all_gather(np.ones(8, np.float32))):
    try:
        call()
        raise AssertionError("a collective ran over a downed link")
    except ConfigError as exc:
        assert "SoleNHR needs the RoCE link 0-3 (NHR over every rank), which is down (HCOMM_KIT_LINKS_DOWN=3-0)" in str(
            exc), exc

# The two-level algorithms: 0-3 joins local indices 0 and 1 of the two servers, which they do not use;
# forced, element sizes 1, 2 and 8 and A2's staged int64 prod; counts with empty chunks, odd, past
# the 1 MB HCCL buffer.
assert os.environ["HCCL_BUFFSIZE"] == "1"
r, n = comm.rank, comm.size


def data(q, count, dtype, op="sum"):
    v = np.random.default_rng([q, count]).integers(1, 3, count) if op == "prod" else (np.arange(count) * 7 + q) % 9 - 4
    return hcomm_kit.base.dtypes.float32_to_bf16_bits(v.astype(np.float32)) if dtype == "bf16" else v.astype(dtype)


for count in (0, 1, 37, 300001):
    for dtype, op, algo in (("float32", "sum", "hierarchical"), ("int8", "max", "hierarchical"),
                            ("bf16", "min", "hierarchical"), ("int64", "prod", "hierarchical")):
        ins = [data(q, count, dtype, op) for q in range(n)]
        got = comm.all_reduce(ins[r], op, dtype="bf16" if dtype == "bf16" else None, algorithm=algo)
        assert np.array_equal(got, reference.reduce(ins, op, "bf16" if dtype == "bf16" else dtype)), (count, dtype, op)
    for dtype, algo in (("float32", "hierarchical"), ("int64", "hierarchical")):
        ins = [data(q, count, dtype) for q in range(n)]
        assert np.array_equal(comm.all_gather(ins[r], algorithm=algo), np.concatenate(ins)), (count, dtype)
sub = comm.sub_comm([0, 2, 1, 3], 11)  # servers (0, 2) and (1, 3): interleaved ranks, output in rank order
assert sub.topology.servers == ((0, 2), (1, 3)), sub.topology
ins = [np.arange(1001, dtype=np.int32) * 10 + q for q in range(n)]
assert np.array_equal(sub.all_gather(ins[sub.rank], algorithm="hierarchical"), np.concatenate(ins))
assert np.array_equal(sub.all_reduce(ins[sub.rank], "max", algorithm="hierarchical"), ins[3])
sub.close()
if r < 3:  # servers of 2 and 1 ranks: refused before anything is launched
    odd = comm.sub_comm([0, 1, 2], 12)
    try:
        odd.all_gather(np.ones(4, np.float32), algorithm="hierarchical")
        raise AssertionError("servers of 2 and 1 ranks ran the hierarchical algorithm")
    except ConfigError as exc:
        assert "different numbers of ranks (server 0: 2, server 1: 1)" in str(exc), exc
    odd.close()
print("TWO-LEVEL-OK", r, flush=True)
comm.close()
"""


@pytest.mark.slow  # full run only: over the quick run's budget
def test_python_view_and_two_level_through_the_launcher(tmp_path: Path) -> None:
    """--topology / --links-down reach every rank; comm.topology reads the emulator's answer; CANN's
    choice fails there naming the downed link; the two-level algorithms run around it against numpy
    (forced, on interleaved servers, refused on servers of different sizes)."""
    script = tmp_path / "view.py"
    script.write_text(_VIEW)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]), HCCL_BUFFSIZE="1")
    env.pop("HCOMM_KIT_SOC", None)
    res = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "4", "--topology", "A2:2x2",
                          "--links-down", "3-0", "--", sys.executable, str(script)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("VIEW-OK") == 4, res.stdout + res.stderr
    assert res.stdout.count("TWO-LEVEL-OK") == 4, res.stdout + res.stderr


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




def test_mpi_marker_topology_argument() -> None:
    """@pytest.mark.mpi(topology=..., links_down=...) becomes the job's environment."""
    from hcomm_kit.testing.items import _item_env

    class Item:
        def get_closest_marker(self, name):
            return pytest.mark.mpi(np=8, topology="A3:2x8", links_down="0-1", env={"X": "1"}).mark

    env = dict(_item_env(Item()))
    assert env == {"X": "1", "HCOMM_KIT_TOPOLOGY": "A3:2x8", "HCOMM_KIT_SOC": "Ascend910_93",
                   "HCOMM_KIT_DEVICE_COUNT": "16", "HCOMM_KIT_LINKS_DOWN": "0-1"}


@pytest.mark.slow  # 32 ranks on a 2-core machine: one job checks the five collectives
def test_builtins_on_two_servers_of_16() -> None:
    """2 servers x 16 (32 ranks): the built-ins stay correct (RoCE between the servers)."""
    ops = ["allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast"]
    res = _run_cli(["run", *ops, "--np", "32", "--topology", "A3:2x16", "--count", "4096", "--iters", "0"])
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    tables = {m.group(1): m.group(2) for m in re.finditer(r"# hcomm-kit bench (\w+):(.*?)(?=# hcomm-kit bench |\Z)",
                                                         res.stdout, re.S)}
    assert sorted(tables) == sorted(ops), res.stdout[-3000:]
    for op in ops:
        assert "success |      0" in tables[op], (op, tables[op])


# ---- the two-level (hierarchical) built-ins -----------------------------------------------------
def _topo(servers: tuple[tuple[int, ...], ...], down: tuple[tuple[int, int], ...] = ()):
    from hcomm_kit.core.topology import Topology

    return Topology(product="A2", source="test", servers=servers, pods=tuple((i,) for i in range(len(servers))),
                    links_down=down)


def _two_level_check(comm, counts: list[int], big: int) -> None:
    """Forced two-level allreduce (CANN's dtype x op table of this product, prod where 2**ranks
    fits) and allgather (every dtype) against numpy; the auto choice for `big` elements."""
    from test_collectives import ALL_DTYPES, all_data, prod_ok

    from hcomm_kit.base import dtypes as D

    n, r = comm.size, comm.rank
    accepted = D.HCCL_API_REDUCE["HcclAllReduce"][comm.device.soc]
    pairs = [(d, op) for d in ALL_DTYPES for op in ("sum", "prod", "max", "min") if d in accepted.get(op, ())
             and (op != "prod" or prod_ok(d, n))]
    for dtype, op in pairs:
        for count in counts:
            ins = all_data(n, count, dtype, op)
            got = comm.all_reduce(ins[r], op, dtype=dtype, algorithm="hierarchical")
            np.testing.assert_array_equal(got, reference.reduce(ins, op, dtype),
                                          err_msg=f"hierarchical allreduce {dtype} {op} count {count}")
    for dtype in ALL_DTYPES:
        for count in counts:
            ins = all_data(n, count, dtype)
            got = comm.all_gather(ins[r], dtype=dtype, algorithm="hierarchical")
            np.testing.assert_array_equal(got, np.concatenate(ins), err_msg=f"hierarchical allgather {dtype} {count}")
    # auto: CANN's choice across servers (all_reduce_auto_selector.cc:458, all_gather_auto_selector.cc:345)
    ins = all_data(n, big, "fp32")
    np.testing.assert_array_equal(comm.all_reduce(ins[r]), reference.reduce(ins, "sum", "fp32"))
    assert comm.last_selection.cann == "AicpuAllReduceSoleNHR", comm.last_selection
    ins = all_data(n, 32768, "fp32")
    np.testing.assert_array_equal(comm.all_gather(ins[r]), np.concatenate(ins))
    assert comm.last_selection.cann == "AicpuAllGatherSoleNHR", comm.last_selection


# counts: empty, fewer elements than ranks per server (empty chunks), odd, and past the 1 MB HCCL
# buffer (several slices, a short last one)
_COUNTS = [0, 1, 3, 37, 300001]


@pytest.mark.slow  # the quick run has test_python_view_and_two_level_through_the_launcher
@pytest.mark.mpi(np=4, topology="A2:2x2", env={"HCCL_BUFFSIZE": "1"}, timeout=600)
def test_two_level_a2_two_servers_of_two(comm) -> None:
    """Also the degenerate layouts, forced: one server of two ranks (level 0 only) and two
    servers of one rank (level 1 only); the selector offers neither."""
    _two_level_check(comm, _COUNTS, 300001)
    for ranks, servers, sub_id in (([0, 1], ((0, 1),), 21), ([1, 3], ((0,), (1,)), 22)):
        if comm.rank not in ranks:
            continue
        sub = comm.sub_comm(ranks, sub_id)
        assert sub.topology.servers == servers
        for count in (1, 300001):
            ins = [np.arange(count, dtype=np.int64) % 11 - q for q in range(2)]
            np.testing.assert_array_equal(sub.all_reduce(ins[sub.rank], "min", algorithm="hierarchical"),
                                          reference.reduce(ins, "min", "int64"))
            np.testing.assert_array_equal(sub.all_gather(ins[sub.rank], algorithm="hierarchical"),
                                          np.concatenate(ins))
        sub.close()


@pytest.mark.slow
@pytest.mark.mpi(np=6, topology="A3:2x3", env={"HCCL_BUFFSIZE": "1"}, timeout=900)
def test_two_level_a3_two_servers_of_three(comm) -> None:
    _two_level_check(comm, _COUNTS, 300001)


@pytest.mark.slow
@pytest.mark.mpi(np=6, topology="950:3x2", env={"HCCL_BUFFSIZE": "1"}, timeout=900)
def test_two_level_950_three_servers(comm) -> None:
    _two_level_check(comm, _COUNTS, 300001)


@pytest.mark.slow
@pytest.mark.mpi(np=8, topology="A2:2x4", env={"HCCL_BUFFSIZE": "1"}, timeout=1200)
def test_two_level_a2_two_servers_of_four(comm) -> None:
    _two_level_check(comm, _COUNTS, 300001)
