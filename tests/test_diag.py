"""Diagnosis of buggy operators (issue: hangs, races and misuse explained).

tests/c/diag/ is a small mesh-exchange operator written like CANN's examples, with one kernel entry
per planted bug, and a C host that only checks return codes (aclrtSynchronizeStream with the
default HCCL_EXEC_TIMEOUT of 1836 s). Each bug must end, on every rank, with the right code and a
message that names the rank, thread, task and source line at fault, within seconds, and leave
nothing behind; the correct operator must produce no finding.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cann_style import build_example
from test_emu_comm import _leaked, _reap, _shm_entries

KERNEL = "kernel.cc"  # the source file the reports must point into


@pytest.fixture(scope="module")
def diag_prog(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_example("diag", tmp_path_factory.mktemp("diag"), extra=("-g",))


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("HCCL_EXEC_TIMEOUT", "HCOMM_KIT_CHECK", "HCOMM_KIT_SOC"):
        env.pop(k, None)
    env.update(HCCL_BUFFSIZE="2", HCCL_CONNECT_TIMEOUT="30", **extra)
    return env


def _parse(out: str) -> dict[int, list[dict]]:
    """RESULT lines and MSG blocks per rank, in launch order."""
    res: dict[int, list[dict]] = {}
    msgs = {int(m.group(1)): m.group(2) for m in re.finditer(r"MSG-BEGIN rank=(\d+)\n(.*?)\nMSG-END", out, re.S)}
    for m in re.finditer(r"RESULT rank=(\d+) scenario=(\w+) rc=(-?\d+) secs=([\d.]+)", out):
        r = int(m.group(1))
        res.setdefault(r, []).append({"scenario": m.group(2), "rc": int(m.group(3)), "secs": float(m.group(4)),
                                      "msg": msgs.get(r, "") if int(m.group(3)) else ""})
    return res


def _run_threads(prog: tuple[Path, Path], n: int, scenarios: str, bug: int, **env: str):
    exe, json = prog
    before = _shm_entries()
    proc = subprocess.Popen([str(exe), str(json), "threads", str(n), scenarios, str(bug)], env=_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (rc, out, err), = _reap([proc], 120)
    assert "FATAL" not in out, out + err
    assert _leaked(before, [proc.pid]) == []
    return rc, _parse(out), out, err


def _last(res: dict[int, list[dict]], rank: int) -> dict:
    return res[rank][-1]


def _every_rank_fails_with_the_finding(res: dict[int, list[dict]], n: int, out: str) -> None:
    """The checker's finding fails the operation on every rank: 509001 where the rank's own part of
    it was running, 507057 (remote error) on a rank whose part began after the abort (a fast finder);
    both name the finding."""
    codes = [_last(res, r)["rc"] for r in range(n)]
    assert 509001 in codes and set(codes) <= {509001, 507057}, out
    for r in range(n):
        assert "[hcomm-kit check]" in _last(res, r)["msg"] and _last(res, r)["secs"] < 5, out


@pytest.mark.parametrize("n", [2, 3, 4])
def test_correct_operator_no_finding(diag_prog, n: int) -> None:
    rc, res, out, err = _run_threads(diag_prog, n, "Good,Good,Ring,P2p,Good,Ring,P2p", -1)
    assert rc == 0, out + err
    for r in range(n):
        assert [x["rc"] for x in res[r]] == [0] * 7, out + err
    assert "hcomm-kit check" not in err and "DEADLOCK" not in err, err


@pytest.mark.parametrize("n", [2, 3, 4])
def test_missing_record_is_a_deadlock_named_at_once(diag_prog, n: int) -> None:
    """Rank 1 never writes to rank 2 (mod n): rank 2's wait can never be satisfied. With the default
    1836 s timeout every rank still fails within seconds, naming the wait, its source line and why."""
    rc, res, out, err = _run_threads(diag_prog, n, "Good,Missing", 1)
    victim = 2 % n
    for r in range(n):
        last = _last(res, r)
        assert last["scenario"] == "Missing" and last["rc"] == 107020, out
        assert last["secs"] < 5, out
        assert "DEADLOCK" in last["msg"], last["msg"]
    msg = _last(res, victim)["msg"]
    assert f"rank {victim} thread t0 waits for channel notify slot 0 from rank 1" in msg, msg
    assert f"at {KERNEL}:" in msg, msg
    assert re.search(r"rank 1's part of 'diag_test' #2 \(its use #2 of the channel with rank %d\) "
                     r"(finished without recording it|has queued all its tasks and none of them records it)" % victim,
                     msg), msg
    # C hosts that only check return codes see the report on stderr, once
    assert err.count("DEADLOCK on communicator") == 1, err


@pytest.mark.parametrize("n", [2, 3])
def test_wait_cycle_is_named(diag_prog, n: int) -> None:
    rc, res, out, err = _run_threads(diag_prog, n, "Cycle", -1)
    for r in range(n):
        assert _last(res, r)["rc"] == 107020 and _last(res, r)["secs"] < 5, out
    msg = _last(res, 0)["msg"]
    assert "wait-for cycle:" in msg and "none of them can move" in msg, msg
    for r in range(n):
        assert f"rank {r} thread t0 waits for channel notify slot 1 from rank {(r + 1) % n}" in msg, msg


def test_thread_notify_nobody_records(diag_prog) -> None:
    rc, res, out, err = _run_threads(diag_prog, 2, "ThreadMissing", 0)
    last = _last(res, 0)
    assert last["rc"] == 107020 and last["secs"] < 5, out
    assert "rank 0 thread t0 waits for thread notify slot 1 of thread t0" in last["msg"], last["msg"]
    assert "no thread or stream of rank 0 will record it" in last["msg"], last["msg"]


@pytest.mark.parametrize("n", [2, 3])
def test_doubled_record_is_found(diag_prog, n: int) -> None:
    """Rank 0 records the data notify to rank 1 twice: a lost signal when the flag is still set, or
    (if rank 1 consumed in between) a notify from another call in the next call. Never wrong data."""
    rc, res, out, err = _run_threads(diag_prog, n, "Good,Double,Good,Good", 0)
    codes = [x["rc"] for r in range(n) for x in res[r]]
    assert 509001 in codes, out
    failing = next(x for r in range(n) for x in res[r] if x["rc"] == 509001)
    assert "[hcomm-kit check]" in failing["msg"], failing["msg"]
    assert ("lost notify: rank 0 thread t0" in failing["msg"]
            or "notify from another call" in failing["msg"]), failing["msg"]
    assert f"at {KERNEL}:" in failing["msg"], failing["msg"]
    assert "WRONG" not in out


@pytest.mark.parametrize("n", [2, 3])
def test_unordered_overlapping_write_is_a_race(diag_prog, n: int) -> None:
    rc, res, out, err = _run_threads(diag_prog, n, "Good,Race", 0)
    _every_rank_fails_with_the_finding(res, n, out)
    msg = next(_last(res, r)["msg"] for r in range(n) if _last(res, r)["rc"] == 509001)
    assert "race on rank 1's HCCL buffer bytes [256, 512)" in msg, msg
    assert "no notify orders them" in msg and f"at {KERNEL}:" in msg, msg


@pytest.mark.parametrize("n", [2, 3])
def test_read_of_unwritten_bytes(diag_prog, n: int) -> None:
    """Rank 0 sends the data notify to rank 1 without the data: rank 1 would copy last call's bytes."""
    rc, res, out, err = _run_threads(diag_prog, n, "Good,Stale", 0)
    _every_rank_fails_with_the_finding(res, n, out)
    assert _last(res, 1)["rc"] == 509001, out  # the reading rank finds it itself
    msg = _last(res, 1)["msg"]
    assert "read of unwritten bytes: rank 1 thread t0" in msg, msg
    assert "bytes [0, 256)" in msg and "their last write came before the operation began" in msg, msg


def _finder_fails_others_right_or_aborted(res: dict[int, list[dict]], n: int, finder: int, out: str) -> str:
    """The rank that reads the stale bytes fails with 509001; a rank whose part had already ended
    (its own data right) may succeed, any other fails naming the finding. Returns the finder's message."""
    assert _last(res, finder)["rc"] == 509001, out
    for r in range(n):
        last = _last(res, r)
        assert last["rc"] in (0, 509001, 507057) and last["secs"] < 5, out
        assert last["rc"] == 0 or "[hcomm-kit check]" in last["msg"], out
    return _last(res, finder)["msg"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_partly_stale_reads_are_found(diag_prog, n: int) -> None:
    """The scaffold's ring-allreduce and p2p (same code in kernel.cc), correct, then with one element's
    offset planted on rank 1: the final copy reads myBuf + 4 (its last 4 bytes never written), the
    stage is written at stage + 4 (the reader's first 4 bytes last written by the call before). Most
    of each read is fresh; the few stale bytes must still fail the call on every rank, naming them."""
    rc, res, out, err = _run_threads(diag_prog, n, "Ring,Ring,RingShift", 1)
    assert [x["rc"] for x in res[1]][:2] == [0, 0] and "WRONG" not in out, out  # correct ring: right sums, quiet
    msg = _finder_fails_others_right_or_aborted(res, n, 1, out)
    assert "read of unwritten bytes: rank 1 thread t0" in msg and "HcommLocalCopyOnThread" in msg, msg
    assert "reads rank 1's HCCL buffer bytes [4, 260) of which 4 byte(s) nobody wrote in this operation: " \
           "[256, 260) (offset 256, 4 byte(s); never written on this communicator)" in msg, msg
    assert f"at {KERNEL}:" in msg, msg

    rc, res, out, err = _run_threads(diag_prog, n, "P2p,P2pShift", 1)
    assert [x["rc"] for x in res[0]][0] == 0 and "WRONG" not in out, out  # correct shift: right bytes, quiet
    reader = 2 % n
    msg = _finder_fails_others_right_or_aborted(res, n, reader, out)
    assert f"read of unwritten bytes: rank {reader} thread t0" in msg and "HcommReadOnThread" in msg, msg
    assert "reads rank 1's HCCL buffer bytes [0, 256) of which 4 byte(s) nobody wrote in this operation: " \
           "[0, 4) (offset 0, 4 byte(s); their last write came before the operation began)" in msg, msg
    assert f"at {KERNEL}:" in msg, msg


@pytest.mark.parametrize("n", [2, 4])
def test_crash_fails_every_rank_with_the_source_line(diag_prog, n: int) -> None:
    rc, res, out, err = _run_threads(diag_prog, n, "Good,Crash", 1)
    crashed = _last(res, 1)
    assert crashed["rc"] == 507018, out
    assert re.search(rf"crashed with Segmentation fault at \S*{KERNEL}:\d+ in", crashed["msg"]), crashed["msg"]
    for r in range(n):
        if r != 1:
            assert _last(res, r)["rc"] == 507057 and _last(res, r)["secs"] < 5, out
            assert "communicator aborted by rank 1" in _last(res, r)["msg"], out


def test_warn_mode_reports_without_failing(diag_prog) -> None:
    rc, res, out, err = _run_threads(diag_prog, 2, "Good,Race", 0, HCOMM_KIT_CHECK="warn")
    assert [x["rc"] for x in res[0]] == [0, 0], out
    assert "[hcomm-kit check] race on rank 1" in err and "HCOMM_KIT_CHECK=warn" in err, err


def test_checker_off_lets_the_race_pass(diag_prog) -> None:
    rc, res, out, err = _run_threads(diag_prog, 2, "Good,Race", 0, HCOMM_KIT_CHECK="0")
    assert [x["rc"] for x in res[0]] == [0, 0], out
    assert "hcomm-kit check" not in err


def test_under_mpirun_four_ranks(diag_prog, tmp_path: Path) -> None:
    """Ranks as processes (hcomm-kit launch): the report is built from every process's published state."""
    exe, json = diag_prog
    before = _shm_entries()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "4", "--timeout", "100", "--",
                           str(exe), str(json), "mpi", str(tmp_path / "root.bin"), "Good,Missing", "1"],
                          env=_env(), capture_output=True, text=True, timeout=150)
    out = proc.stdout
    res = _parse(re.sub(r"^\[\d+,\d+\]<stdout>: ", "", out, flags=re.M))
    for r in range(4):
        assert _last(res, r)["rc"] == 107020 and _last(res, r)["secs"] < 5, out + proc.stderr
    assert "rank 1's part of 'diag_test' #2" in out, out
    assert _leaked(before, []) == []


def _line_of(marker: str) -> int:
    """Line number of the planted bug marked `marker` in the test operator's kernel."""
    src = (Path(__file__).parent / "c" / "diag" / KERNEL).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(src) if marker in line)


def test_spinning_kernel_is_named_in_the_first_progress_line(diag_prog) -> None:
    """Rank 1's kernel spins in its own code while rank 0 waits for it. That is no provable deadlock
    (the kernel may still return): the job ends at the kernel's launch timeout (HCCL_EXEC_TIMEOUT,
    3 s here), and meanwhile the very first progress line names the culprit: its rank, kernel and
    source line (sampled program counter of its worker, -g build), not a host "in a synchronize call"."""
    rc, res, out, err = _run_threads(diag_prog, 2, "Spin", 1, HCOMM_KIT_PROGRESS_SECONDS="1", HCCL_EXEC_TIMEOUT="3")
    progress = [ln for ln in err.splitlines() if re.search(r"\[hcomm-kit\] rank \d (thread|stream|kernel)", ln)]
    assert progress, err
    first = progress[0]
    assert "rank 1 kernel DgSpin (launch #" in first and "is running kernel code, issued no task for" in first, err
    assert f"at {KERNEL}:{_line_of('BUG: spins')} in " in first, err
    assert "its launch timeout (3 s) ends it in" in first, err
    # it ends at the launch timeout, as docs/diagnosis.md says (not within the deadlock detector's second)
    assert _last(res, 1)["rc"] != 0 and 2.5 < _last(res, 1)["secs"] < 20, out
    assert "DEADLOCK" not in err, err


def test_stray_record_is_named_in_the_deadlock_report(diag_prog) -> None:
    """4 ranks, a ring step: rank 1 records the data notify to rank 3 instead of rank 2. Rank 2's
    wait can never be satisfied (a deadlock, reported at once); the report also names the record
    nobody consumes, with its rank, thread, slot, peer and source line, as the likely cause."""
    rc, res, out, err = _run_threads(diag_prog, 4, "Good,Stray", 1)
    assert _last(res, 2)["rc"] == 107020 and _last(res, 2)["secs"] < 5, out  # the others' part is done
    msg = _last(res, 2)["msg"]
    assert "likely cause(s): notifies recorded that no wait consumes" in msg, msg
    line = _line_of("BUG (on bugRank): wrong peer")
    assert re.search(rf"rank 1 thread t0 set channel notify slot 0 of rank 3 \(HcommChannelNotifyRecordOnThread at "
                     rf"{KERNEL}:{line}, task \d+ of \d+; op 'diag_test' #2\), [\d.]+ s ago, and (no wait of rank 3 "
                     rf"consumes it|rank 3 destroyed its communicator without consuming it)", msg), msg
    assert err.count("DEADLOCK on communicator") == 1, err


@pytest.mark.slow  # waits out a real (launcher) timeout
def test_spinning_kernel_is_named_in_the_state_dump(diag_prog, tmp_path: Path) -> None:
    """Ranks as processes: `hcomm-kit launch --timeout` asks every rank for its state; rank 1 names
    its own spinning kernel with the source line, rank 0 names rank 1's as what it waits on."""
    exe, json = diag_prog
    before = _shm_entries()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--timeout", "4", "--",
                           str(exe), str(json), "mpi", str(tmp_path / "root.bin"), "Spin", "1"],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 124, proc.stdout + proc.stderr
    line = _line_of("BUG: spins")
    dump = {int(m.group(1)): m.group(2) for m in re.finditer(r"^  rank (\d) \(pid \d+\): (.*)$", proc.stderr, re.M)}
    assert re.search(rf"rank 1: kernel DgSpin \(launch #\d+.*\) is running kernel code, issued no task for [\d.]+ s, "
                     rf"at {KERNEL}:{line} in ", dump.get(1, "")), proc.stderr
    assert "waits for channel notify slot 0 from rank 1" in dump.get(0, ""), proc.stderr
    assert "rank 1 kernel DgSpin" in dump.get(0, ""), proc.stderr
    assert _leaked(before, []) == []
