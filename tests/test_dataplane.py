"""Hcomm device data plane (hcomm.md §3.1-§3.4, §1.6-§1.8, §4) on the emulator.

tests/c/dataplane/ holds one kernel .so with an entry per scenario (loaded from its op-info JSON,
cpuKernelMode 0) and a C++ host program that runs every scenario on one communicator, with ranks
as std::threads of one process or as processes (root info through a file, or under mpirun). Each
rank checks its data byte-exactly against a host reference and the return codes of every call
against a per-product table (main.cc: gate_table, reduce_allowed). Scenarios:

* host:      HcommLocalCopyOnThread on the CPU_TS stream thread; host-only / NBI calls and
             device-only calls (HcommAcquireComm) from the host -> HCCL_E_NOT_SUPPORT;
* gates:     NBI / host-only variants on the AICPU path, task-cache calls, WriteReduceWithNotify,
             ChannelFence / ChannelDrain, BatchTransfer per protocol and type, HcommAclrtNotify*,
             AcquireComm / ReleaseComm, both timeout setters, argument checks (HCCL_E_PTR / _PARA);
* local:     LocalCopy + LocalReduce on a fan-out / fan-in of device threads (thread notifies,
             explicit and default-timeout waits);
* reduce:    LocalReduce, WriteReduce, ReadReduce over every dtype x op value (allowed ones
             against the host reference, fp16/bf16 computed in float and rounded to nearest even;
             refused ones must return HCCL_E_PARA and leave memory untouched);
* write:     mesh, one device thread per peer: Write, WriteWithNotify, Read, WriteReduce (A2/A3) or
             WriteReduceWithNotify (950), ReadReduce, channel notifies;
* notify:    binary flags: two records before a wait merge (thread and channel slots);
* batch:     nothing moves before HcommBatchModeEnd (local copy and the peer's buffer checked
             while the batch is open), Start/End pairing, NULL / "" temporary batches, eager mode
             (950 runs it, A2/A3 refuse);
* xfer:      HcommBatchTransferOnThread (A2/A3: WRITE+READ over RoCE then ChannelDrain; 950: all
             seven descriptor types) and ChannelFence ordering (950);
* aclnotify: the older ACL-notify handshake (A2/A3);
* oob:       an out-of-bounds remote write fails the kernel; aclGetRecentErrMsg names the rank,
             the channel's peer, the offset and the length;
* timeout_thread / timeout_channel: a wait with a 1 s timeout (thread slot via
             HcommSetNotifyWaitTimeOut + the default-timeout variant, after two merged records;
             channel slot with an explicit timeout) fails the stream with 107020 naming rank,
             device thread, slot / peer and op tag; the communicator is then aborted everywhere;
* die:       a process rank is SIGKILLed while the others' device threads wait on it.

Every run also checks that it left no /dev/shm segment behind.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from test_emu_comm import _leaked, _reap, _shm_entries

SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")
SCENARIOS = "host,gates,local,reduce,write,notify,batch,xfer,aclnotify,oob"


@pytest.fixture(scope="module")
def dataplane(example_build) -> tuple[Path, Path]:
    return example_build("dataplane")


def _env(json: Path, soc: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HCOMM_KIT_KERNEL_PATH=str(json.parent), HCOMM_KIT_SOC=soc, HCOMM_KIT_DEVICE_COUNT="8",
               HCCL_BUFFSIZE="4", HCCL_CONNECT_TIMEOUT="30", HCCL_EXEC_TIMEOUT="120")
    env.update(extra)
    return env


def _report(out: str, err: str) -> str:
    """stdout plus the end of stderr (the emulator logs every refused call of the gate checks there)."""
    return f"--- stdout\n{out}\n--- stderr (tail)\n{err[-6000:]}"


def _check_scenarios(out: str, scenarios: str) -> None:
    for s in scenarios.split(","):
        assert f"scenario {s} ok" in out, f"scenario {s} did not finish\n{out}"


# Quick run: every SoC at 2 ranks, 3 and 4 ranks on one SoC each; the full suite: every pair, and 8 ranks.
_THREADS = [pytest.param(r, s, marks=() if (r, s) in ((2, "Ascend910_93"), (3, "Ascend910B"), (4, "Ascend950")) else
                         pytest.mark.slow) for r in (2, 3, 4, 8) for s in SOCS]  # each product once in the quick run


@pytest.mark.parametrize("ranks,soc", _THREADS)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_dataplane_threads(dataplane: tuple[Path, Path], ranks: int, soc: str) -> None:
    exe, json = dataplane
    scenarios = SCENARIOS + ",timeout_thread"
    before = _shm_entries()
    proc = subprocess.Popen([str(exe), str(json), "threads", str(ranks), scenarios], env=_env(json, soc),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    (rc, out, err), = _reap([proc], 90)
    assert rc == 0, _report(out, err)
    assert f"PASS: {ranks} ranks as threads, {soc}" in out, _report(out, err)
    _check_scenarios(out, scenarios)
    assert "rank 0: timeout_thread: 1.0" in out  # the failed wait took ~1 s
    assert _leaked(before, [proc.pid]) == []


class _Rank:
    """One rank process; its output goes to files (the emulator logs every refused call of the gate
    checks to stderr: pipes read one process at a time would fill up and stall the others)."""

    def __init__(self, argv: list[str], env: dict[str, str], out: Path) -> None:
        self.out_path, self.err_path = out.with_suffix(".out"), out.with_suffix(".err")
        with open(self.out_path, "w") as o, open(self.err_path, "w") as e:
            self.proc = subprocess.Popen(argv, env=env, stdout=o, stderr=e)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> tuple[str, str]:
        return self.out_path.read_text(), self.err_path.read_text()


def _spawn(exe: Path, json: Path, n: int, tmp: Path, scenarios: str, env: dict[str, str]) -> list[_Rank]:
    return [_Rank([str(exe), str(json), "proc", str(r), str(n), str(tmp / "root.bin"), scenarios], env, tmp / f"rank{r}")
            for r in range(n)]


def _wait(ranks: list[_Rank], timeout: float) -> list[tuple[int, str, str]]:
    deadline = time.monotonic() + timeout
    try:
        for r in ranks:
            r.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        for r in ranks:
            if r.proc.poll() is None:
                r.proc.kill()
                r.proc.wait()
    return [(r.proc.returncode, *r.output()) for r in ranks]


@pytest.mark.parametrize("ranks,soc", [(2, "Ascend950"), pytest.param(3, "Ascend910B", marks=pytest.mark.slow),
                                       pytest.param(4, "Ascend910_93", marks=pytest.mark.slow),
                                       pytest.param(8, "Ascend950", marks=pytest.mark.slow)])
def test_dataplane_processes(dataplane: tuple[Path, Path], tmp_path: Path, ranks: int, soc: str) -> None:
    exe, json = dataplane
    scenarios = SCENARIOS + ",timeout_channel"
    before = _shm_entries()
    procs = _spawn(exe, json, ranks, tmp_path, scenarios, _env(json, soc))
    results = _wait(procs, 90)
    for r, (rc, out, err) in enumerate(results):
        assert rc == 0, f"rank {r} exit {rc}\n" + _report(out, err)
        assert f"OK rank {r} pid {procs[r].pid}" in out
    _check_scenarios(results[0][1], scenarios)
    assert "waiting for channel notify slot 3 from rank 1 (op tag 'dp_timeout_channel')" in results[0][1]
    assert _leaked(before, [p.pid for p in procs]) == []


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun not installed")
def test_dataplane_under_mpirun(dataplane: tuple[Path, Path], tmp_path: Path) -> None:
    """The same program started by `hcomm-kit launch` (ranks from OMPI_COMM_WORLD_RANK/SIZE)."""
    exe, json = dataplane
    n = 3
    before = _shm_entries()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", str(n), "--timeout", "90", "--",
                           str(exe), str(json), "mpi", str(tmp_path / "root.bin"), SCENARIOS],
                          env=_env(json, "Ascend910B"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, _report(proc.stdout, proc.stderr)
    pids = [int(m.group(2)) for m in re.finditer(r"OK rank (\d+) pid (\d+)", proc.stdout)]
    assert len(pids) == n, proc.stdout
    _check_scenarios(proc.stdout, SCENARIOS)
    assert _leaked(before, pids) == []


def test_dataplane_peer_death(dataplane: tuple[Path, Path], tmp_path: Path) -> None:
    """SIGKILL the last rank while the others' device threads wait on a channel notify from it
    (no timeout, HCCL_EXEC_TIMEOUT 600): their streams fail with 507057 (remote error) within
    about a second, naming the dead rank; nothing hangs or leaks."""
    exe, json = dataplane
    n = 3
    before = _shm_entries()
    procs = _spawn(exe, json, n, tmp_path, "die", _env(json, "Ascend910B", HCCL_EXEC_TIMEOUT="600"))
    try:
        deadline = time.monotonic() + 60
        for r, p in enumerate(procs):
            while f"READY {r}" not in p.output()[0]:
                assert p.proc.poll() is None and time.monotonic() < deadline, f"rank {r} never got ready\n" + _report(*p.output())
                time.sleep(0.02)
        time.sleep(0.3)  # the survivors' kernels now wait on the victim
        victim = procs[-1]
        t0 = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait(timeout=10)
        survivors = _wait(procs[:-1], 15)
        elapsed = time.monotonic() - t0
    finally:
        for p in procs:
            if p.proc.poll() is None:
                p.proc.kill()
    for r, (rc, out, err) in enumerate(survivors):
        assert rc == 0, f"rank {r} exit {rc}\n" + _report(out, err)
        assert "ERR 507057" in out, out
        assert f"peer rank {n - 1} died while this device thread waited for channel notify slot 3" in out, out
    assert elapsed < 2.0, f"survivors needed {elapsed:.2f} s to notice the dead rank"
    assert _leaked(before, [p.pid for p in procs]) == []
