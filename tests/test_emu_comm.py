"""HCCL host control plane of the emulator (comm.cc): communicators over threads and processes.

C programs in tests/c are compiled against the public headers and libhcomm_emu.so:
* test_comm_threads.cc: one std::thread per rank (CANN's testcase/main.cc shape): bootstrap,
  barrier, threads, channels, HCCL buffers, engine contexts, rank table, HcclCommInitAll;
* test_comm_procs.cc: one process per rank, root info passed through a file; also used to
  SIGKILL a rank in the middle of a barrier.
"""

from __future__ import annotations

import fcntl
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hcomm_kit.build import emulator as _emulator

TESTS_C = Path(__file__).resolve().parent / "c"
SHM = Path("/dev/shm")
SHM_PREFIX = f"hcomm_kit.{os.getuid()}."


def _build(src: Path, out: Path) -> Path:
    cmd = ["g++", "-std=c++17", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread", str(src),
           *shlex.split(_emulator.cflags()), *shlex.split(_emulator.libs()), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"{shlex.join(cmd)}\n{res.stdout}{res.stderr}"
    return out


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("comm_bin")
    return {name: _build(TESTS_C / f"{name}.cc", d / name) for name in ("test_comm_threads", "test_comm_procs")}


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("HCOMM_KIT_SOC", None)
    env["HCCL_BUFFSIZE"] = "4"          # MB: keeps HcclGetHcclBufferCleared cheap
    env["HCCL_CONNECT_TIMEOUT"] = "30"
    env.update(extra)
    return env


def _shm_entries() -> set[str]:
    return {p.name for p in SHM.iterdir() if p.name.startswith(SHM_PREFIX)} if SHM.is_dir() else set()


def _unlocked(name: str) -> bool:
    """True if nobody holds a lock on the segment (its creators are gone)."""
    try:
        fd = os.open(SHM / name, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _leaked(before: set[str], pids: list[int]) -> list[str]:
    """Segments left behind by this test: its processes' device blocks and HCCL buffers, and any
    job segment that appeared meanwhile and has no living holder. (Other test sessions may run
    concurrently on the machine: their live segments are locked by their owners.)"""
    mine = []
    for name in _shm_entries() - before:
        rest = name[len(SHM_PREFIX):]
        if any(rest.startswith((f"d{pid}.", f"buf.{pid}.")) for pid in pids):
            mine.append(name)
        elif rest.startswith(("job.", "buf.")) and _unlocked(name):
            mine.append(name)
    return sorted(mine)


@pytest.mark.parametrize("nranks,soc", [(2, ""), (3, ""), (4, ""), (8, ""), (2, "Ascend950"), (3, "Ascend910_93")])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_comm_threads(programs: dict[str, Path], tmp_path: Path, nranks: int, soc: str) -> None:
    before = _shm_entries()
    table = tmp_path / "rank_table.json"
    env = _env(HCOMM_KIT_SOC=soc) if soc else _env()
    proc = subprocess.Popen([str(programs["test_comm_threads"]), str(nranks), str(table)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (rc, out, err), = _reap([proc], 120)
    assert rc == 0, f"exit {rc}\n{out}\n{err}"
    assert f"PASS {nranks} ranks" in out
    assert _leaked(before, [proc.pid]) == []


def _spawn(prog: Path, n: int, rootfile: Path, mode: str, env: dict[str, str]) -> list[subprocess.Popen]:
    return [subprocess.Popen([str(prog), str(r), str(n), str(rootfile), mode], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for r in range(n)]


def _reap(procs: list[subprocess.Popen], timeout: float) -> list[tuple[int, str, str]]:
    out = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, o, e))
    return out


@pytest.mark.parametrize("nranks", [2, 4])
def test_comm_processes(programs: dict[str, Path], tmp_path: Path, nranks: int) -> None:
    before = _shm_entries()
    procs = _spawn(programs["test_comm_procs"], nranks, tmp_path / "root.bin", "ok", _env())
    results = _reap(procs, 60)
    for r, (rc, out, err) in enumerate(results):
        assert rc == 0, f"rank {r} exit {rc}\n{out}\n{err}"
        assert out.startswith(f"OK {r} hcomm_kit_")
    names = {out.split()[2] for _, out, _ in results}
    assert len(names) == 1  # one communicator name on every rank
    assert _leaked(before, [p.pid for p in procs]) == []


def test_missing_rank_times_out(programs: dict[str, Path], tmp_path: Path) -> None:
    """Only rank 0 of 2 shows up: HCCL_E_TIMEOUT naming rank 1 after HCCL_CONNECT_TIMEOUT, no leftovers."""
    before = _shm_entries()
    t0 = time.monotonic()
    proc = subprocess.Popen([str(programs["test_comm_procs"]), "0", "2", str(tmp_path / "root.bin"), "ok"],
                            env=_env(HCCL_CONNECT_TIMEOUT="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (rc, _out, err), = _reap([proc], 30)
    assert rc == 1
    assert "rc=9" in err and "ranks 1 never arrived" in err, err
    assert time.monotonic() - t0 < 10
    assert _leaked(before, [proc.pid]) == []


def test_peer_death_during_barrier(programs: dict[str, Path], tmp_path: Path) -> None:
    """SIGKILL one rank while the others sit in HcclBarrier: they fail within ~2 s, nothing hangs or leaks."""
    n = 3
    before = _shm_entries()
    # A long exec/connect timeout: the failure must come from the liveness check, not a timeout.
    procs = _spawn(programs["test_comm_procs"], n, tmp_path / "root.bin", "die",
                   _env(HCCL_EXEC_TIMEOUT="600", HCCL_CONNECT_TIMEOUT="600"))
    try:
        for r, p in enumerate(procs):
            line = p.stdout.readline()
            assert line.startswith(f"READY {r}"), f"rank {r}: {line!r} {p.stderr.read() if p.poll() is not None else ''}"
        time.sleep(0.3)  # the survivors are now inside a barrier
        victim = procs[-1]
        t0 = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        survivors = _reap(procs[:-1], 15)
        elapsed = time.monotonic() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for r, (rc, out, err) in enumerate(survivors):
        assert rc == 0, f"rank {r} exit {rc}\n{out}\n{err}"
        assert "ERR 507057" in out and "died" in out, out
        assert f"pid {victim.pid}" in out, out
    assert elapsed < 3.0, f"survivors needed {elapsed:.2f} s to notice the dead rank"
    assert _leaked(before, [p.pid for p in procs]) == []


def test_crashed_bootstrap_leaves_nothing_behind(programs: dict[str, Path], tmp_path: Path) -> None:
    """Rank 0 of a 2-rank job is SIGKILLed while waiting for rank 1: its job segment (and buffer)
    stay behind, unlocked. A new run with the same root info replaces them and leaves nothing."""
    rootfile = tmp_path / "root.bin"
    before = _shm_entries()
    env = _env()
    lone = subprocess.Popen([str(programs["test_comm_procs"]), "0", "2", str(rootfile), "ok"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not rootfile.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        job = rootfile.read_bytes()[8:48].split(b"\0")[0].decode()
        job_seg = SHM / f"{SHM_PREFIX}job.{job}"
        while not job_seg.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert job_seg.exists()
    finally:
        lone.kill()
        lone.wait()
    assert job_seg.exists()  # the crash left it linked
    procs = _spawn(programs["test_comm_procs"], 2, rootfile, "ok", env)
    for r, (rc, out, err) in enumerate(_reap(procs, 60)):
        assert rc == 0, f"rank {r} exit {rc}\n{out}\n{err}"
    assert not job_seg.exists()
    assert _leaked(before, [lone.pid] + [p.pid for p in procs]) == []
