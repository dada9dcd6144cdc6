"""``hcomm-kit launch`` under SIGTERM / SIGINT / SIGHUP / ``timeout``: nothing survives (issue 12, item 1).

The ranks are small Python programs (no emulator needed for most cases) that record where they
run (pid, job directory, Open MPI backing directory) and answer the launcher's state-dump request
like the emulator does (``$HCOMM_KIT_JOB_DIR/dump.request`` -> ``rank<R>.state.json``). After each
stop the test checks that the launcher printed one line per running rank with its summary, and
that no process of the job (mpirun, ranks, a rank's own child), no job directory, no Open MPI
backing directory and no emulator segment of a rank is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hcomm_kit.jobs import job as jobmod

RANK = textwrap.dedent('''
    import json, os, signal, subprocess, sys, time
    from pathlib import Path
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    out = Path(sys.argv[1])
    mode = sys.argv[2]
    jd = Path(os.environ["HCOMM_KIT_JOB_DIR"])
    info = {"pid": os.getpid(), "job_dir": str(jd),
            "btl": os.environ.get("OMPI_MCA_btl_sm_backing_directory", ""), "ppid": os.getppid()}
    if mode == "child" and rank == 0:       # a process of its own, in another session
        info["child"] = subprocess.Popen(["sleep", "300"], start_new_session=True).pid
    if mode == "stubborn" and rank == 1:    # a child mpirun does not know, ignoring SIGTERM/SIGINT/SIGHUP:
        ready = out / "stubborn.ready"      # needs the SIGKILL after the grace period
        info["child"] = subprocess.Popen([sys.executable, "-c",
            "import signal, sys, time; [signal.signal(s, signal.SIG_IGN) for s in "
            "(signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]; open(sys.argv[1], 'w').close(); time.sleep(600)",
            str(ready)], start_new_session=True).pid
        while not ready.exists():           # it ignores them from now on (a loaded machine starts it late)
            time.sleep(0.01)
    tmp = out / f".rank{rank}.json.tmp"     # whole or absent: the test reads it as soon as it exists
    tmp.write_text(json.dumps(info))
    os.replace(tmp, out / f"rank{rank}.json")
    while True:                             # "stuck": answer state dumps like the emulator does
        if (jd / "dump.request").exists() and not (jd / f"rank{rank}.state.json").exists():
            tmp = jd / f".rank{rank}.tmp"
            tmp.write_text(json.dumps({"rank": rank, "pid": os.getpid(),
                                       "summary": f"waiting for notify slot {rank + 3} from rank {1 - rank}"}))
            os.replace(tmp, jd / f"rank{rank}.state.json")
        time.sleep(0.02)
''')


def _start(tmp_path: Path, mode: str = "plain", np: int = 2, grace: float = 2.0, wrap: list[str] | None = None,
           timeout: float | None = None) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "ranks"
    out.mkdir()
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    argv = [sys.executable, "-m", "hcomm_kit", "launch", "--np", str(np), "--grace", str(grace)]
    if timeout is not None:
        argv += ["--timeout", str(timeout)]
    argv += ["--", sys.executable, str(script), str(out), mode]
    proc = subprocess.Popen([*(wrap or []), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(list(out.glob("rank*.json"))) < np:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "ranks did not start"
        time.sleep(0.05)
    return proc, out


def _ranks(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


def _assert_nothing_left(ranks: list[dict]) -> None:
    pids = [r["pid"] for r in ranks] + [r["ppid"] for r in ranks] + [r["child"] for r in ranks if "child" in r]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:  # do not leak them into the rest of the suite
        os.kill(p, signal.SIGKILL)
    assert not left, f"processes of the job survived: {left}"
    for r in ranks:
        assert not Path(r["job_dir"]).exists(), r["job_dir"]
        assert not r["btl"] or not Path(r["btl"]).exists(), r["btl"]


@pytest.mark.parametrize("sig,status", [("SIGTERM", 143), ("SIGINT", 130), ("SIGHUP", 129)])
def test_signal_stops_everything_and_reports(tmp_path: Path, sig: str, status: int) -> None:
    proc, out = _start(tmp_path, mode="child" if sig == "SIGTERM" else "plain")
    ranks = _ranks(out)
    proc.send_signal(getattr(signal, sig))
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    assert f"got {sig}; stopping the job (2 of 2 rank(s) still running: 0, 1)" in stderr, stderr
    for r, info in enumerate(ranks):
        assert f"rank {r} (pid {info['pid']}): waiting for notify slot {r + 3} from rank {1 - r}" in stderr, stderr
    assert "job stopped" in stderr
    _assert_nothing_left(ranks)


@pytest.mark.slow
def test_stubborn_rank_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, mode="stubborn", grace=1.5)
    ranks = _ranks(out)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "still running after 1.5 s" in stderr, stderr
    assert time.monotonic() - t0 < 30
    _assert_nothing_left(ranks)


@pytest.mark.slow
def test_second_signal_skips_the_grace_period(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, mode="stubborn", grace=60)
    ranks = _ranks(out)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert time.monotonic() - t0 < 20, "the second Ctrl-C did not cut the 60 s grace period short"
    _assert_nothing_left(ranks)


@pytest.mark.slow
def test_the_same_signal_twice_at_once_is_one_signal(tmp_path: Path) -> None:
    """`timeout` signals its child and then its whole process group: the launcher gets SIGTERM
    twice within microseconds. That is one request to stop (ranks asked for their state, grace
    period kept), not an impatient second one."""
    proc, out = _start(tmp_path)
    ranks = _ranks(out)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)  # the launcher has seen the first one: the second is not merged by the kernel
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "got SIGTERM; stopping the job (2 of 2 rank(s) still running" in stderr, stderr
    assert "waiting for notify slot 3 from rank 1" in stderr and "waiting for notify slot 4 from rank 0" in stderr
    _assert_nothing_left(ranks)


@pytest.mark.slow  # fault injection with real timeouts: full suite only
def test_killed_by_coreutils_timeout(tmp_path: Path) -> None:
    """`timeout 3 hcomm-kit launch ...`: timeout's SIGTERM to the launcher stops the whole job."""
    if subprocess.run(["sh", "-c", "command -v timeout"], capture_output=True).returncode:
        pytest.skip("coreutils timeout not installed")
    proc, out = _start(tmp_path, wrap=["timeout", "-s", "TERM", "4"])
    ranks = _ranks(out)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 124, stderr
    assert "got SIGTERM; stopping the job" in stderr and "waiting for notify slot" in stderr, stderr
    _assert_nothing_left(ranks)


@pytest.mark.slow
def test_launch_timeout_option_reports_ranks(tmp_path: Path) -> None:
    proc, out = _start(tmp_path, timeout=4)
    ranks = _ranks(out)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 124, stderr
    assert "the job did not finish within 4 s" in stderr and "rank 1 (pid" in stderr, stderr
    _assert_nothing_left(ranks)


EMU_RANK = textwrap.dedent('''
    import os, sys, time
    from pathlib import Path
    import hcomm_kit
    c = hcomm_kit.init()
    Path(sys.argv[1], f"rank{c.rank}.json").write_text(
        '{"pid": %d, "ppid": %d, "job_dir": "%s", "btl": "%s"}' % (os.getpid(), os.getppid(),
        os.environ["HCOMM_KIT_JOB_DIR"], os.environ.get("OMPI_MCA_btl_sm_backing_directory", "")))
    if c.rank == 0:
        c.barrier(timeout=0)        # waits for rank 1 forever
    time.sleep(600)
''')


@pytest.mark.slow
def test_emulator_ranks_leave_no_shared_memory(tmp_path: Path) -> None:
    """Ranks killed inside a collective leave no /dev/shm/hcomm_kit.* segment behind."""
    out = tmp_path / "ranks"
    out.mkdir()
    script = tmp_path / "emu_rank.py"
    script.write_text(EMU_RANK)
    proc = subprocess.Popen([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--grace", "2", "--",
                             sys.executable, str(script), str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(list(out.glob("rank*.json"))) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.0)  # rank 0 is inside the barrier now
    ranks = _ranks(out)
    mine = [f"d{r['pid']}." for r in ranks]
    assert any(any(m in n for m in mine) for n in os.listdir("/dev/shm")), "the ranks created their segments"
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "rank 0 (pid" in stderr and "rank 1 (pid" in stderr, stderr
    _assert_nothing_left(ranks)
    left = [n for n in os.listdir("/dev/shm") if any(m in n for m in mine)]
    assert not left, f"segments of the killed ranks are left: {left}"


# ---- the job helpers --------------------------------------------------------------------------------
def test_request_rank_states_and_describe(tmp_path: Path) -> None:
    jd = tmp_path
    (jd / "rank0.state.json").write_text('{"rank": 0, "pid": 1, "summary": "stale answer"}')
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f'''
        import json, os, time
        from pathlib import Path
        jd = Path({str(jd)!r})
        while not (jd / "dump.request").exists():
            time.sleep(0.01)
        (jd / "rank1.state.json").write_text(json.dumps({{"rank": 1, "pid": os.getpid(),
                                                         "summary": "in HcommChannelNotifyWait\\nmore"}}))
        (jd / "rank2.state.json").write_text("{{not json")
        time.sleep(30)
    ''')])
    try:
        t0 = time.monotonic()
        states = jobmod.request_rank_states(jd, nranks=3, wait=1.0)
        assert 0.9 < time.monotonic() - t0 < 5  # waited for the missing ranks, not longer
        assert set(states) == {1} and states[1]["pid"] == proc.pid  # the stale answer was removed first
        procs = jobmod.job_processes([proc.pid])
        procs[proc.pid].rank = 2
        lines = jobmod.describe_ranks(3, states, procs)
        assert lines[0] == "rank 0: not running (already exited or not started)"
        assert lines[1] == f"rank 1 (pid {proc.pid}): in HcommChannelNotifyWait"
        assert lines[2].startswith(f"rank 2 (pid {proc.pid}): still running `{sys.executable} -c") and "state S" in lines[2]
    finally:
        proc.kill()
        proc.wait()


def test_reclaim_shm_only_takes_dead_owners(tmp_path: Path) -> None:
    import fcntl

    d = tmp_path
    uid = os.getuid()
    live = d / f"hcomm_kit.{uid}.dlive.0.aa"
    dead = d / f"hcomm_kit.{uid}.ddead.0.bb"
    young_tmp = d / f"hcomm_kit.{uid}.j.cc.tmp"
    other = d / "hcomm_kit_mpi_xyz"
    for p in (live, dead, young_tmp, other):
        p.write_bytes(b"x")
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)     # a live owner holds its lock (from another descriptor)
    try:
        removed = jobmod.reclaim_shm(str(d), min_age=60)
    finally:
        os.close(fd)
    assert removed == [dead.name]
    assert live.exists() and young_tmp.exists() and other.exists() and not dead.exists()


# ---- what a dead launcher or a rank stopped by a signal leaves ------------------------------------
def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_doctor_removes_and_names_what_dead_processes_left(tmp_path: Path) -> None:
    """A SIGKILLed launcher's Open MPI backing directory (with Open MPI's segments in it) and a dead
    rank's emulator segment are removed by ``hcomm-kit doctor``, which names them; those of live
    processes (and of a launcher still starting) stay."""
    import fcntl

    from hcomm_kit.cli.doctor import leftovers

    uid, dead = os.getuid(), _dead_pid()
    gone = tmp_path / f"hcomm_kit_mpi_{dead}_abc"
    gone.mkdir()
    (gone / "sm_segment.vm.0.d6330001.0").write_bytes(b"\0" * 4096)
    live = tmp_path / f"hcomm_kit_mpi_{os.getpid()}_def"  # this process is alive
    live.mkdir()
    segment = tmp_path / f"hcomm_kit.{uid}.d{dead}.0.1234"
    segment.write_bytes(b"x")
    held = tmp_path / f"hcomm_kit.{uid}.d{os.getpid()}.1.5678"
    held.write_bytes(b"x")
    old = time.time() - 60
    for p in (gone, live, segment, held):
        os.utime(p, (old, old))
    fd = os.open(held, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # its owner lives
    try:
        line = leftovers(str(tmp_path))
        assert line.startswith(f"removed 2 left in {tmp_path} by processes that died: "), line
        assert gone.name in line and segment.name in line, line
        assert not gone.exists() and not segment.exists() and live.exists() and held.exists()
        assert leftovers(str(tmp_path)) == f"none in {tmp_path}"
    finally:
        os.close(fd)


def test_next_communicator_removes_a_dead_launchers_backing_directory() -> None:
    """The next process that creates a communicator (not only the next launcher) removes what a
    SIGKILLed launcher left: its Open MPI backing directory in /dev/shm."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    left = Path("/dev/shm") / f"hcomm_kit_mpi_{_dead_pid()}_relpy{os.getpid()}"
    left.mkdir()
    (left / "sm_segment.vm.0.d1.0").write_bytes(b"\0" * 4096)
    old = time.time() - 60
    os.utime(left, (old, old))
    try:
        subprocess.run([sys.executable, "-c", "import hcomm_kit; hcomm_kit.init().close()"], check=True,
                       timeout=300, env={**os.environ, "HCOMM_KIT_RANK": "0", "HCOMM_KIT_WORLD_SIZE": "1"})
        assert not left.exists()
    finally:
        import shutil

        shutil.rmtree(left, ignore_errors=True)


SIGINT_RANK = textwrap.dedent('''
    import os, sys, numpy as np, hcomm_kit
    comm = hcomm_kit.init()
    print(f"pid {os.getpid()}", flush=True)
    x = np.ones(4096, np.float32)
    while True:
        comm.all_reduce(x)
''')


@pytest.mark.parametrize("sig,status", [("SIGINT", -signal.SIGINT), ("SIGTERM", 143)])
def test_rank_stopped_by_a_signal_removes_its_segments(tmp_path: Path, sig: str, status: int) -> None:
    """A rank ended by SIGINT (KeyboardInterrupt: the interpreter then kills itself with SIGINT, so
    no C exit handler runs; torchrun forwards Ctrl-C this way) or SIGTERM (mpirun / torchrun ending
    a job: it exits through the interpreter) unlinks its emulator segments as it exits, not after
    its launcher's 30 s or at the next job's start."""
    script = tmp_path / "sigint_rank.py"
    script.write_text(SIGINT_RANK)
    env = {**os.environ, "HCOMM_KIT_WORLD_SIZE": "2", "HCOMM_KIT_ROOT_INFO": str(tmp_path / "root.info")}
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env={**env, "HCOMM_KIT_RANK": str(r)}, start_new_session=True)
             for r in range(2)]
    try:
        pids = []
        for p in procs:
            line = p.stdout.readline()
            assert line.startswith("pid "), line + p.stdout.read()
            pids.append(int(line.split()[1]))
        mine = [f".d{pid}." for pid in pids]
        assert all(any(m in n for n in os.listdir("/dev/shm")) for m in mine), "the ranks created their segments"
        time.sleep(0.5)
        procs[1].send_signal(getattr(signal, sig))
        for p in procs:
            p.wait(timeout=60)
            left = [n for n in os.listdir("/dev/shm") if f".d{p.pid}." in n]  # at once, before anyone reclaims
            assert not left, f"segments of rank pid {p.pid} (exit {p.returncode}) are left: {left}"
        assert procs[1].returncode == status, procs[1].stdout.read()
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
