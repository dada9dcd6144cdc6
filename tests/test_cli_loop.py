"""The operator author's loop: --np checks, readable job output, bench of an operator directory,
debug builds and kernel logs, test runs that stop and clean up, the single-rank note, the docs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hcomm_kit import cli
from hcomm_kit.jobs.output import JobOutput, format_ranks, normalize

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_orchestrator import scaffold  # noqa: E402  (operators built once per machine)


def _hk(*args: str, timeout: float = 300, env: dict | None = None, cwd: str | None = None):
    return subprocess.run([sys.executable, "-m", "hcomm_kit", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=cwd)


# ---- one --np check -------------------------------------------------------------------------------
def test_max_ranks_matches_the_emulator() -> None:
    from hcomm_kit.base.limits import MAX_RANKS

    text = (REPO / "hcomm_kit" / "emu" / "src" / "hccl" / "comm.h").read_text()
    assert int(re.search(r"kMaxRanks\s*=\s*(\d+)", text).group(1)) == MAX_RANKS


@pytest.mark.parametrize("argv", [
    ["run", "anything", "--np", "{n}"], ["bench", "allreduce", "--np", "{n}"], ["launch", "--np", "{n}", "--", "true"],
    ["demo", "--np", "{n}"], ["test", "anything", "--np", "{n}"],
])
@pytest.mark.parametrize("n,why", [(0, "at least 1"), (-1, "at least 1"), (65, "at most 64")])
def test_np_is_checked_before_anything_starts(argv, n, why, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HCOMM_KIT_BACKEND", "emu")

    def no_start(*a, **k):
        raise AssertionError(f"a process was started before --np was checked: {a}")

    monkeypatch.setattr(subprocess, "Popen", no_start)
    monkeypatch.setattr(subprocess, "run", no_start)
    rc = cli.main([a.format(n=n) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err          # one line, a usage error (as argparse's)
    assert f"--np {n}" in err and why in err and "Traceback" not in err


def _no_start(monkeypatch) -> None:
    def no_start(*a, **k):
        raise AssertionError(f"a process was started before the input was checked: {a}")

    monkeypatch.setattr(subprocess, "Popen", no_start)
    monkeypatch.setattr(subprocess, "run", no_start)
    monkeypatch.setattr(subprocess, "call", no_start)


@pytest.mark.parametrize("argv,env,needle", [
    ("run allreduce --np 2 --count 1000000000000", {}, "TiB of memory"),   # was: a numpy traceback per rank
    ("demo --count 1000000000000", {}, "TiB of memory"),
    ("bench allgather --np 2 -e 100G", {}, "-e 100G: 2 rank(s)"),
    ("run allreduce --np 2 --timeout -3", {}, "--timeout -3"),
    ("demo --timeout nan", {}, "--timeout nan"),
    ("launch --np 2 --timeout -3 -- true", {}, "--timeout -3"),
    ("launch --np 2 --timeout 0 -- true", {}, "--timeout 0"),
    ("run allreduce --np 2 -d nonsense", {}, "unknown dtype 'nonsense'"),
    ("run allreduce --np 2 -o xor", {}, "unknown reduce op 'xor'"),
    ("bench allreduce --np 2 --algorithm foo", {}, "--algorithm foo: allreduce: unknown algorithm 'foo'"),
    ("run allreduce --np 2", {"HCCL_BUFFSIZE": "abc"}, "HCCL_BUFFSIZE='abc'"),
    ("bench allreduce --np 2", {"HCCL_BUFFSIZE": "70000"}, "HCCL_BUFFSIZE='70000'"),  # the emulator's maximum
    ("launch --np 2 -- true", {"HCOMM_KIT_CHECK": "maybe"}, "HCOMM_KIT_CHECK='maybe'"),
    ("demo", {"HCOMM_KIT_SPIN_US": "-1"}, "HCOMM_KIT_SPIN_US='-1'"),
    ("test anything --np 2", {"HCCL_EXEC_TIMEOUT": "x"}, "HCCL_EXEC_TIMEOUT='x'"),
    ("launch --np 2 -- true", {"HCCL_ALGO": "allgather=level0:foo"}, "HCCL_ALGO="),
    # the cluster topology and the links taken down, against the product and the job's ranks (they
    # used to start every rank, then fail after ~34 s, or exit 1 with a traceback under launch)
    ("launch --np 32 --topology A2:2x16 -- true", {}, "at most 8 NPUs per server: an A2 server holds 8 (e.g. A2:4x8)"),
    ("run allreduce --np 32 --topology A2:2x16", {}, "at most 8 NPUs per server"),
    ("bench allreduce --np 32", {"HCOMM_KIT_TOPOLOGY": "A2:2x16"}, "HCOMM_KIT_TOPOLOGY='A2:2x16'"),
    ("test anything --np 34", {"HCOMM_KIT_TOPOLOGY": "A3:2x17"}, "at most 16 NPUs per server"),
    ("launch --np 16 --topology A2:2x2x4 -- true", {}, "A2 has no super-pods"),
    ("launch --np 16 --topology A3:2x2x2 -- true", {}, "4 servers x 2 NPUs = 8 ranks, but --np is 16"),
    ("launch --np 8 -- true", {"HCOMM_KIT_TOPOLOGY": "A2:2x8"}, "2 servers x 8 NPUs = 16 ranks, but the job has 8"),
    ("launch --np 2 -- true", {"HCOMM_KIT_LINKS_DOWN": "garbage"}, "HCOMM_KIT_LINKS_DOWN='garbage'"),
    ("run allreduce --np 2", {"HCOMM_KIT_LINKS_DOWN": "garbage"}, "RANK-RANK pairs"),
    ("bench allreduce --np 2", {"HCOMM_KIT_LINKS_DOWN": "0-99"}, "link 0-99 names rank 99, but the job has 2 ranks"),
    ("test anything --np 2", {"HCOMM_KIT_LINKS_DOWN": "0-99"}, "names rank 99"),
    ("launch --np 2 --links-down 0-99 -- true", {}, "names rank 99"),
])
def test_bad_input_is_refused_by_the_launcher(argv, env, needle, capsys, monkeypatch) -> None:
    """One line, exit 2 (a usage error, as argparse's), no traceback, nothing started (no mpirun)."""
    monkeypatch.setenv("HCOMM_KIT_BACKEND", "emu")
    for k in ("HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_LINKS_DOWN", "HCOMM_KIT_SOC", "HCOMM_KIT_DEVICE_COUNT"):
        monkeypatch.setenv(k, "")  # --topology / --links-down export these: restored after the test
        monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _no_start(monkeypatch)
    rc = cli.main(argv.split())
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"hcomm-kit {argv.split()[0]}: error: ") and needle in err, err


def test_run_needs_room_in_dev_shm_for_the_hccl_buffers(capsys, monkeypatch) -> None:
    from hcomm_kit.jobs import preflight

    monkeypatch.setattr(preflight, "shm_free", lambda path="/dev/shm": 1 << 20)
    _no_start(monkeypatch)
    rc = cli.main(["run", "allreduce", "--np", "2", "--count", "1000000"])
    err = capsys.readouterr().err
    assert rc == 2 and "would fill 15.3 MiB of /dev/shm" in err and "has 1.0 MiB free" in err, err


def test_npus_per_server_match_the_emulator() -> None:
    """The launcher's limit of NPUs per server is the emulator's (hccl/topology.cc max_per_server)."""
    from hcomm_kit.base import envs

    text = (REPO / "hcomm_kit" / "emu" / "src" / "hccl" / "topology.cc").read_text()
    m = re.search(r'max_per_server\(const std::string& product\) \{ return product == "(\w+)" \? (\d+) : (\d+); \}',
                  text)
    assert m, "max_per_server changed: update this test and envs.TOPOLOGY_MAX_NPUS"
    special, n_special, n_other = m.group(1), int(m.group(2)), int(m.group(3))
    assert envs.TOPOLOGY_MAX_NPUS == {p: (n_special if p == special else n_other) for p in envs.TOPOLOGY_PRODUCTS}


def test_env_table_ranges_match_the_emulator() -> None:
    """The launcher validates with envs.py's table: its integer ranges are the emulator's (common.cc)."""
    from hcomm_kit.base import envs

    text = (REPO / "hcomm_kit" / "emu" / "src" / "base" / "common.cc").read_text()
    found = re.findall(r'env_u64\("(\w+)", (\d+), (\d+),', text)
    assert len(found) >= 6, found
    for name, lo, hi in found:
        var = envs.VARIABLES[name]
        assert (var.minimum, var.maximum) == (int(lo), int(hi)), name


_HOLD_BACKING_DIR = """
import os, signal, sys
from hcomm_kit.jobs.mpirun import shm_backing_dir
cm = shm_backing_dir()
print(cm.__enter__()["OMPI_MCA_btl_sm_backing_directory"], flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)  # a launcher SIGKILLed mid-job: no cleanup of its own
sys.stdin.read()
"""


def test_backing_dir_of_a_sigkilled_launcher_is_reclaimed() -> None:
    from hcomm_kit.jobs.mpirun import shm_backing_dir

    def start(mode: str):
        p = subprocess.Popen([sys.executable, "-c", _HOLD_BACKING_DIR, mode], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        return p, Path(p.stdout.readline().strip())

    dead, stale = start("kill")
    live, busy = start("hold")
    try:
        assert dead.wait(timeout=30) == -9 and stale.is_dir() and busy.is_dir()
        old = time.time() - 60  # past the age under which a directory counts as being created
        os.utime(stale, (old, old))
        os.utime(busy, (old, old))
        with shm_backing_dir() as env:  # the next launch
            mine = Path(env["OMPI_MCA_btl_sm_backing_directory"])
            assert not stale.exists() and busy.is_dir() and mine.is_dir()
        assert not mine.exists()
    finally:
        live.communicate("", timeout=30)
        import shutil

        shutil.rmtree(stale, ignore_errors=True)
    assert not busy.exists()  # its owner removed it on exit


def test_mpi_marker_rank_counts_are_checked() -> None:
    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.testing.items import _marker_nps

    class M:
        args, kwargs = (), {"np": [2, 100]}

    with pytest.raises(ConfigError, match="at most 64"):
        _marker_nps(M())


# ---- job output -------------------------------------------------------------------------------------
ABORT_BANNER = """\
[1,1]<stderr>: --------------------------------------------------------------------------
[1,1]<stderr>: MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
[1,1]<stderr>:   Proc: [[47536,1],1]
[1,1]<stderr>:   Errorcode: 1
[1,1]<stderr>: --------------------------------------------------------------------------
[warn] Epoll MOD(1) on fd 19 failed. Old events were 6; read change was 0 (none); write change was 2 (del); close change was 0 (none): Bad file descriptor
--------------------------------------------------------------------------
prterun has exited due to process rank 1 with PID 10979 on node vm calling
"abort". This may have caused other processes in the application to be
terminated by signals sent by prterun (as reported here).
--------------------------------------------------------------------------"""


def _feed(lines: list[str], **kw) -> tuple[str, str, str | None]:
    import io

    out, err = io.StringIO(), io.StringIO()
    job = JobOutput(kw.pop("np", 4), out=out, err=err, progress=False, **kw)
    for ln in lines:
        job.feed(ln)
    summary = job.finish(1)
    return out.getvalue(), err.getvalue(), summary


def test_job_output_groups_errors_and_hides_banners() -> None:
    err_lines = []
    for r in range(4):
        err_lines += [f"[1,{r}]<stderr>: hcomm-kit: error: kernel K on rank {r}/4 failed: returned 1",
                      f"[1,{r}]<stderr>: stream = 0x{7000 + r:x}abcdef"]
    lines = ["[1,0]<stdout>: table row", *err_lines, *ABORT_BANNER.splitlines()]
    out, err, summary = _feed(lines)
    assert out == "table row\n"
    assert err.count("hcomm-kit: error:") == 1 and "[ranks 0-3] hcomm-kit: error: kernel K on rank N/4" in err
    assert len(err.splitlines()) == 2, err
    _, err2, _ = _feed(["[1,2]<stderr>: only rank 2 says this", "[1,0]<stderr>: rank 0 says that"])
    assert "[rank 2] only rank 2 says this" in err2 and "[rank 0] rank 0 says that" in err2
    assert "MPI_ABORT" not in err and "Epoll" not in err and "prterun" not in err
    assert summary == "rank 1 called MPI_Abort (-v shows mpirun's messages)"
    # -v: everything as mpirun printed it
    _, err_v, summary_v = _feed(lines, verbose=True)
    assert "MPI_ABORT was invoked" in err_v and "Epoll" in err_v and err_v.count("hcomm-kit: error:") == 4
    assert "-v shows" not in summary_v
    # launch's tags: kept, with the rank list
    _, err_t, _ = _feed(err_lines, tag_output=True)
    assert "[1,0-3]<stderr>: hcomm-kit: error:" in err_t


def test_job_output_prints_a_hang_report_once() -> None:
    """A deadlock report is the finder's stderr and every rank's error message (4 ranks: 5 copies,
    which differ in their rank numbers): the job shows it once; later copies keep their headline."""
    head = ("[hcomm-kit] DEADLOCK on communicator hcomm_kit_0d45 (4 ranks), found by rank 2: the waits below can "
            "never be satisfied, so they fail now instead of after HCCL_EXEC_TIMEOUT=1836 s (stuck for 0.4 s)")
    body = ["  root cause(s):",
            "    rank 2 thread t0 waits for channel notify slot 1 from rank 1 (... at exec_op.cc:152 ...)",
            "  likely cause(s): notifies recorded that no wait consumes (a record to the wrong peer or slot?):",
            "    rank 1 thread t0 set channel notify slot 1 of rank 0 (... at exec_op.cc:150 ...)",
            "  state of every rank:", *[f"    rank {r} (pid {100 + r}, device {r}): host blocked" for r in range(4)]]
    lines = [f"[1,2]<stderr>: [hcomm-kit emu ERROR pid 102] {head}", *[f"[1,2]<stderr>: {b}" for b in body]]
    for r in range(4):
        lines += [f"[1,{r}]<stderr>: hcomm-kit: error: operator x can never finish on rank {r}: the emulator found a "
                  f"deadlock (report below)",
                  f"[1,{r}]<stderr>: aclrtSynchronizeStream: rank {r}: communicator aborted by rank 2: {head}",
                  *[f"[1,{r}]<stderr>: {b}" for b in body]]
    _, err, _ = _feed(lines)
    assert err.count("state of every rank") == 1 and err.count("likely cause(s)") == 1, err
    assert "DEADLOCK on communicator hcomm_kit_0d45 (report above)" in err, err
    assert "[ranks 0,1,3] hcomm-kit: error: operator x can never finish" in err, err  # the rest grouped
    assert len(err.splitlines()) == len(body) + 1 + 4, err


def test_job_output_merges_lines_that_differ_only_in_the_rank_number() -> None:
    _, err, _ = _feed([f"[1,{r}]<stderr>: [hcomm-kit emu INFO pid {100 + r}] rank {r} launched kernel K"
                       for r in range(4)])
    # one line for the four ranks, each rank's own number as N, the pids listed: never rank 0's text for all
    assert "[ranks 0-3] [hcomm-kit emu INFO pid {100,101,102,103}] rank N launched kernel K" in err, err
    assert "rank 0 launched" not in err
    # a number that is not the rank's own differs otherwise: never merged
    _, err, _ = _feed([f"[1,{r}]<stderr>: rank {r} sends 4096 bytes to peer {(r + 1) % 4}" for r in range(4)])
    assert all(f"[rank {r}] rank {r} sends 4096 bytes to peer {(r + 1) % 4}" in err for r in range(4)), err
    _, err, _ = _feed(["[1,0]<stderr>: RSS 1154668 KB", "[1,1]<stderr>: RSS 1154700 KB"])
    assert "[rank 0] RSS 1154668 KB" in err and "[rank 1] RSS 1154700 KB" in err, err


_AFTERMATH = ["[vm:01234] PMIX ERROR: PMIX_ERR_UNREACH in file server/pmix_server.c at line 3225",
              "[1,1]<stderr>: [vm:01236] *** Process received signal; Abort is in progress"]


def test_job_output_drops_openmpi_aftermath_of_a_reported_failure() -> None:
    _, err, summary = _feed(["[1,0]<stderr>: hcomm-kit: error: boom", *_AFTERMATH, *ABORT_BANNER.splitlines()])
    assert "boom" in err and "PMIX" not in err and "Abort is in progress" not in err, err
    assert summary == "rank 1 called MPI_Abort (-v shows mpirun's messages)"
    # no cause shown: the lines are all there is, so they are shown
    _, err, _ = _feed(list(_AFTERMATH))
    assert "PMIX_ERR_UNREACH" in err and "Abort is in progress" in err, err
    _, err_v, _ = _feed(["[1,0]<stderr>: hcomm-kit: error: boom", *_AFTERMATH], verbose=True)
    assert "PMIX_ERR_UNREACH" in err_v


def test_job_output_helpers() -> None:
    assert format_ranks([3, 0, 1, 2, 7, 9, 10]) == "0-3,7,9,10"
    assert normalize(["rank 3 at 0xdeadbeef, pid 1234567"], 3) == normalize(["rank 5 at 0xfeed, pid 7654321"], 5)
    assert normalize(["rank 3"], 3) != normalize(["rank 4"], 3)
    _, err, summary = _feed(["--------------------------------------------------------------------------",
                             "prterun detected that one or more processes exited with non-zero status,",
                             "thus causing the job to be terminated. The first process to do so was:", "",
                             "   Process name: [prterun-vm-19416@1,3]", "   Exit code:    2",
                             "--------------------------------------------------------------------------"])
    assert err == "" and summary.startswith("rank 3 exited with status 2")
    # an unknown banner is shown
    _, err, _ = _feed(["-" * 74, "There are not enough slots available", "-" * 74])
    assert "not enough slots" in err


def test_launch_shows_one_copy_of_an_error() -> None:
    code = "import hcomm_kit; c = hcomm_kit.init(); c.barrier()\nraise ValueError('same on every rank')"
    p = _hk("launch", "--np", "3", "--no-tag-output", "--timeout", "100", "--", sys.executable, "-c", code,
            timeout=150)
    assert p.returncode != 0
    err = p.stderr
    assert err.count("ValueError: same on every rank") == 1, err
    assert re.search(r"\[ranks? [0-9,-]+\] Traceback", err), err
    assert "MPI_ABORT" not in err and "prterun" not in err and "hcomm-kit: the job failed:" in err
    assert len(err.splitlines()) <= 8, err


# ---- bench of an operator directory ----------------------------------------------------------------------
@pytest.mark.slow  # full run only: over the quick run's budget
def test_bench_operator_dir_compare_json_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows_file, png = tmp_path / "rows.jsonl", tmp_path / "bw.png"
    p = _hk("bench", str(scaffold("ring-allreduce")), "--np", "3", "-b", "1K", "-e", "64K", "-f", "8", "-n", "3",
            "-w", "1", "-d", "int32", "-o", "max", "--compare", "builtin,mpi", "--json", str(rows_file),
            "--plot", str(png))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "operator t_ring_allreduce_thread" in p.stdout and "kind allreduce: busbw factor 2(n-1)/n" in p.stdout
    assert ("builtin_time(us) | builtin_busbw(GB/s) | vs_builtin | builtin_model(us) | vs_builtin_model | "
            "builtin_formula(us) | mpi_time(us)") in p.stdout
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert [r["size"] for r in rows] == [1024, 8192, 65536]
    for r in rows:
        assert r["check"] == "success" and r["wrong"] == 0 and r["kind"] == "allreduce"
        assert r["busbw"] == pytest.approx(r["algbw"] * 2 * 2 / 3)
        assert r["builtin"] == "allreduce" and r["builtin_time_us"] > 0 and r["mpi_time_us"] > 0
        assert r["vs_builtin"] == pytest.approx(r["builtin_time_us"] / r["time_us"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.parametrize("pattern,kind,builtin,factor", [
    ("empty", "custom", None, None), ("p2p", "sendrecv", "shift", 1.0),
    ("mesh-allgather", "allgather", "allgather", 2 / 3),
])
def test_bench_every_pattern(tmp_path: Path, pattern, kind, builtin, factor) -> None:
    rows_file = tmp_path / "rows.jsonl"
    p = _hk("bench", str(scaffold(pattern)), "--np", "3", "-b", "96", "-e", "12K", "-f", "8", "-n", "2", "-w", "1",
            "--compare", "builtin", "--compare", "mpi", "--json", str(rows_file))
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(rows) == 3 and all(r["check"] == "success" and r["kind"] == kind for r in rows)
    for r in rows:
        assert r.get("builtin") == builtin
        if factor is None:
            assert r["busbw"] is None and "time only" in p.stdout and r["mpi_time_us"] is None
        else:
            assert r["busbw"] == pytest.approx(r["algbw"] * factor) and r["builtin_time_us"] > 0
            assert r["mpi_time_us"] > 0


def test_bench_checks_calls_with_the_checker_before_timing() -> None:
    """A doubled record (which `run` rejects) fails the bench with the checker's finding, though
    the timed calls run with the checker off."""
    from test_diag_py import _buggy_op

    env = {k: v for k, v in os.environ.items() if k != "HCOMM_KIT_CHECK"}  # bench's default
    p = subprocess.run([sys.executable, "-m", "hcomm_kit", "bench", str(_buggy_op("double")), "--np", "2",
                        "-b", "16K", "-e", "16K", "-n", "3", "-w", "1"], capture_output=True, text=True,
                       timeout=240, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "[hcomm-kit check]" in p.stderr and "exec_op.cc:" in p.stderr, p.stderr
    assert "checker on for 2 untimed calls per size, off while timing" in p.stdout
    assert "success" not in p.stdout


@pytest.mark.slow  # full run only: over the quick run's budget
def test_demo_reports_the_emulator_build_apart_from_the_first_operator(capsys, monkeypatch) -> None:
    """A cold emulator build (made slow here) is the emulator's own line, not the first operator's time."""
    from hcomm_kit.build import emulator as _emulator
    from hcomm_kit.jobs import launch as launch_mod

    real, slow = _emulator.get_library, [True]

    def cold_once(*a, **k):
        if slow:
            slow.clear()
            time.sleep(6.0)
        return real(*a, **k)

    monkeypatch.setattr(_emulator, "get_library", cold_once)
    monkeypatch.setattr(launch_mod, "launch", lambda *a, **k: 3)  # no mpirun: the steps before it are timed
    assert cli.main(["demo", "--np", "2", "--count", "64"]) == 3
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("[demo] ")]
    assert lines[0].startswith("[demo] emulator") and float(re.search(r"\(([\d.]+) s\)", lines[0]).group(1)) >= 6.0
    ops = [ln for ln in lines if "scaffolded + built" in ln]
    # an operator's time that held the emulator's build would be >= 6 s; a compile alone is well below
    assert len(ops) == 2 and float(re.search(r", ([\d.]+) s\)", ops[0]).group(1)) < 6.0, out


def test_trace_summary_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """`hcomm-kit trace summary FILE | head`: no BrokenPipeError traceback, status 128 + SIGPIPE."""
    events = [{"ph": "X", "pid": r, "tid": t, "name": "task", "ts": float(i), "dur": 1.0}
              for r in range(64) for t in range(8) for i in range(4)]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    r, w = os.pipe()
    os.close(r)  # the reader (head) is gone before the first line is written
    try:
        p = subprocess.run([sys.executable, "-m", "hcomm_kit", "trace", "summary", str(trace)], stdout=w,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.stderr == "" and p.returncode == 141, p.stderr


def test_bench_operator_argument_errors() -> None:
    ring = str(scaffold("ring-allreduce"))
    p = _hk("bench", ring, "--np", "2", "-o", "prod")
    assert p.returncode == 2 and "does not support reduce op prod" in p.stderr and p.stderr.count("\n") == 1
    p = _hk("bench", ring, "--np", "2", "--algorithm", "ring")
    assert p.returncode == 2 and "lists no algorithms (op.toml [op].algorithms" in p.stderr  # issue 22
    p = _hk("bench", "allreduce", "--np", "2", "--compare", "builtin")
    assert p.returncode == 2 and "--compare builtin is for your own operators" in p.stderr
    p = _hk("bench", "allreduce", "--np", "2", "-n", "0")
    assert p.returncode == 2 and "at least 1 timed iteration" in p.stderr
    p = _hk("bench", "allreduce", "--np", "2", "-r", "2")
    assert p.returncode == 2 and "-r 2 is not a rank of a 2-rank job" in p.stderr


def test_plot_title_names_what_was_measured() -> None:
    from hcomm_kit.bench.sweep import plot_title

    title = plot_title([{"collective": "allgather", "ranks": 4, "dtype": "bf16", "op": None, "root": None,
                         "backend": "emu", "soc": "Ascend910B"}])
    assert "allgather" in title and "4 ranks" in title and "bf16" in title and "emulator" in title


# ---- run: --iters 0, --json, --debug -------------------------------------------------------------------------
def test_run_iters_0_and_json(tmp_path: Path, monkeypatch, capsys) -> None:
    from hcomm_kit.core import communicator

    monkeypatch.setenv("HCOMM_KIT_QUIET", "0")
    monkeypatch.setattr(communicator, "_NOTED", False)
    out = tmp_path / "rows.jsonl"
    rc = cli.main(["run", str(scaffold("mesh-allgather")), "allgather", "--np", "1", "--iters", "0",
                   "--count", "33", "--json", str(out)])
    text = capsys.readouterr()
    assert rc == 0, text.out + text.err
    assert "no MPI launcher" not in text.err  # --np 1 was asked for: no single-rank note
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["op"] == "t_mesh_allgather_thread" and rows[0]["us_per_call"] is None and rows[0]["ok"] is True
    assert rows[1]["collective"] == "allgather" and rows[1]["builtin"] is True and rows[1]["check"] == "success"
    assert re.search(r"t_mesh_allgather_thread .* 33 +0 +- +- +OK", text.out), text.out  # time, model: none


def test_run_debug_shows_kernel_logs_once_per_distinct_line() -> None:
    p = _hk("run", str(scaffold("ring-allreduce")), "--np", "2", "--count", "100", "--iters", "0", "--debug")
    assert p.returncode == 0, p.stdout + p.stderr
    assert " OK" in p.stdout
    entry = [ln for ln in p.stderr.splitlines() if "[INFO] [t_ring_allreduce_thread]" in ln and "entry" in ln]
    assert entry and entry[0].startswith("[ranks 0,1] "), p.stderr   # the same log of both ranks: once
    assert "MPI_ABORT" not in p.stderr


def test_debug_env_loads_the_debug_build(monkeypatch) -> None:
    import hcomm_kit

    opdir = scaffold("ring-allreduce")
    with hcomm_kit.init() as c:
        release = c.load_op(opdir)
        monkeypatch.setenv("HCOMM_KIT_DEBUG", "1")
        debug = c.load_op(opdir)
        assert debug is not release and debug.build.key != release.build.key
        assert c.load_op(opdir, debug=False) is release


# ---- test: --np N, first failure stops, logs ---------------------------------------------------------------
BROKEN = """\
    if (param.count > 1000) {
        OP_LOG_ERROR("count %llu is too big for this kernel", static_cast<unsigned long long>(param.count));
        return HCCL_E_PARA;
    }
    if (param.count == 0) {"""


@pytest.mark.slow  # several mpirun jobs, one failing: full suite only
def test_test_command_np_override_and_first_failure(tmp_path: Path) -> None:
    from hcomm_kit.scaffold.render import new_op

    res = new_op("brk", pattern="ring-allreduce", directory=tmp_path)
    exec_op = res.opdir / "op_kernel_aicpu" / "exec_op.cc"
    exec_op.write_text(exec_op.read_text().replace("    if (param.count == 0) {", BROKEN, 1))
    # --np 1 is not in the markers' [2, 3, 4]: the tests run at 1 rank anyway
    ok = _hk("test", str(res.opdir), "--np", "1", "--", "-k", "-7-int32-sum or -61-fp32-max")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "2 passed" in ok.stdout and "np1: 2 passed" in ok.stdout
    tmp = tmp_path / "tmp"  # $TMPDIR of the run: its failed job's logs land here, not in the machine's /tmp
    tmp.mkdir()
    t0 = time.monotonic()
    # CI=true: pytest prints whole failure messages in its short summary there (the failure must stay one line)
    bad = _hk("test", str(res.opdir), "--", "-k", "int32 and sum", env={"TMPDIR": str(tmp), "CI": "true"})
    took = time.monotonic() - t0
    out = bad.stdout + bad.stderr
    assert bad.returncode == 1, out
    assert out.count("count 1031 is too big for this kernel") == 1     # the kernel's own log, once
    summary = [ln for ln in out.splitlines() if ln.startswith("FAILED ")]
    # both ranks' kernels fail; a rank that fails second may first learn of the other's failure (the
    # communicator aborted, naming that rank's kernel): either way the line names the kernel's error
    assert len(summary) == 1 and "on 2 ranks: failed on rank" in summary[0] and (
        "KernelError" in summary[0] or "AICPU kernel HcclBrkAicpuKernel returned 1" in summary[0]), out
    assert re.search(r"failed on ranks? [0-9,-]+ \(call\)", out), out
    assert "MPI_ABORT" not in out and "prterun" not in out and "Epoll" not in out
    assert re.search(r"np2: 1 failed, \d+ passed(, \d+ not run)?; np3: 8 not run; np4: 8 not run \(stopped at the "
                     r"first failure", out), out
    assert len(out.splitlines()) < 45, out
    assert took < 150  # generous: a failing run used to take 200 s
    new = list((tmp / "hcomm_kit_logs").iterdir())
    assert len(new) == 1 and new[0].name.startswith("np2-") and (new[0] / "FAILED").is_file() and str(new[0]) in out


def test_logdirs_pruned_to_the_last_ten(tmp_path: Path, monkeypatch) -> None:
    from hcomm_kit.testing import runner as plugin

    monkeypatch.setattr(plugin, "_logs_root", lambda: tmp_path)

    class Cfg:
        _hk_failed_logs: list = []

        @staticmethod
        def getoption(name, default=None):
            return False

    class It:
        nodeid = "t"

    passed = plugin._new_logdir(2)
    plugin._settle_logdir(Cfg, passed, [It], {"t": ("passed", "")}, 0)
    assert not passed.exists()
    dirs = []
    for i in range(12):
        d = plugin._new_logdir(3)
        plugin._settle_logdir(Cfg, d, [It], {"t": ("failed", "x")}, 1)
        os.utime(d, (1000 + i, 1000 + i))
        dirs.append(d)
    plugin._settle_logdir(Cfg, plugin._new_logdir(3), [It], {"t": ("failed", "x")}, 1)
    left = sorted(p for p in tmp_path.iterdir())
    assert len(left) == 10 and dirs[0] not in left and dirs[-1] in left


def test_combine_groups_failures_by_rank() -> None:
    from hcomm_kit.testing.results import _combine

    def rec(rank, text):
        return [{"nodeid": "t", "when": "call", "outcome": "failed", "text": text},
                {"nodeid": "t", "when": "teardown", "outcome": "passed"}]

    per_rank = {r: rec(r, f"E AssertionError on rank {r}: 3 != 4") for r in range(3)}
    per_rank[3] = rec(3, "E KernelError: timeout")
    outcome, text = _combine("t", per_rank)
    assert outcome == "failed"
    assert text.count("AssertionError") == 1 and text.startswith("ranks 0-2 (call):") and "rank 3 (call):" in text


def test_combine_shows_a_log_line_of_every_rank_once_when_their_errors_differ() -> None:
    from hcomm_kit.testing.results import _combine

    def rec(rank, text, err):
        cap = f"\n--- captured stderr call ---\n[ERROR] exec_op.cc:99: count 1031 is too big (pid {4000 + rank})\n{err}"
        return [{"nodeid": "t", "when": "call", "outcome": "failed", "text": text, "captured": cap},
                {"nodeid": "t", "when": "teardown", "outcome": "passed"}]

    per_rank = {0: rec(0, "E KernelError: returned 1", "kernel returned 1"),
                1: rec(1, "E KernelError: peer rank 0 failed", "peer failed"),
                2: rec(2, "E KernelError: peer rank 0 failed", "peer failed")}
    outcome, text = _combine("t", per_rank)
    assert outcome == "failed" and text.count("count 1031 is too big") == 1, text
    assert text.count("--- captured stderr call ---") == 2 and "\npeer failed" in text and "kernel returned 1" in text
    per_rank[1][0]["captured"] = per_rank[1][0]["captured"].replace("\npeer failed", "")
    per_rank.pop(2)
    text = _combine("t", per_rank)[1]
    assert text.count("--- captured stderr call ---") == 1 and text.rstrip().endswith("peer rank 0 failed"), text


# ---- the single-rank note, dtype aliases, docs ---------------------------------------------------------------
def test_single_rank_note_once_and_quiet() -> None:
    code = "import hcomm_kit; a = hcomm_kit.init(); b = hcomm_kit.init(); b.close(); a.close()"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HCOMM_KIT_QUIET": ""})
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("running as a single rank") == 1 and "hcomm-kit launch --np N" in p.stderr
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "HCOMM_KIT_QUIET": "1"})
    assert p.returncode == 0 and "single rank" not in p.stderr


def test_dtype_aliases_listed_once(tmp_path: Path) -> None:
    from hcomm_kit.build.opspec import parse_opspec
    from hcomm_kit.scaffold.render import new_op, update_op

    spec = parse_opspec('[op]\nname = "x"\ndtypes = ["float32", "fp32", "int8"]\nreduce_ops = ["sum", "add"]\n')
    assert spec.dtypes == ("fp32", "int8") and spec.reduce_ops == ("sum",)
    res = new_op("dup", pattern="ring-allreduce", directory=tmp_path)
    toml = res.opdir / "op.toml"
    toml.write_text(re.sub(r"dtypes = \[.*\]", 'dtypes = ["float32", "fp32"]', toml.read_text()))
    update_op(res.opdir)
    assert 'DTYPES = ["fp32"]' in (res.opdir / "tests" / "test_dup.py").read_text()


def test_generated_files_cite_the_shipped_guide(tmp_path: Path) -> None:
    from hcomm_kit.base.resources import docs_dir
    from hcomm_kit.scaffold.render import new_op

    guide = (docs_dir() / "hcomm.md").read_text()
    sections = set(re.findall(r"^## (\d+)\.", guide, re.M))
    for pattern in ("p2p", "mesh-allgather", "ring-allreduce"):
        res = new_op(f"g_{pattern.replace('-', '_')}", pattern=pattern, directory=tmp_path)
        for path in res.opdir.rglob("*"):
            if path.is_file() and path.suffix in (".cc", ".h", ".md", ".txt", ".py"):
                text = path.read_text()
                assert "hcomm.md" not in text, path
                for cited in re.findall(r"Hcomm guide ((?:§\d+(?:, )?)+)", text):
                    assert set(re.findall(r"§(\d+)", cited)) <= sections, (path, cited)
    p = _hk("docs", "hcomm")
    assert p.returncode == 0 and p.stdout.startswith("# Hcomm for operator authors")
