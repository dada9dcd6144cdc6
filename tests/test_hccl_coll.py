"""HCCL's collective C API (``HcclAllReduce`` ... ``HcclBatchSendRecv``, include/hccl/hccl.h) on the
emulator, from a C++ program written like CANN's 01/02 examples (tests/c/hccl_coll/main.cc:
aclrtSetDevice, HcclCommInitRootInfo, asynchronous calls on a stream, no Python at run time),
with ranks as threads of one process (one per device, like the examples) and as processes under
mpirun. Every output byte is checked against numpy (tests/hccl_capi.py), at 2, 3, 4 and 8 ranks
on every product, with a 1 MB HCCL buffer so that large messages are sliced. The program also
checks the API's argument checks and return codes (CANN's) on every rank. Nothing may leak in
/dev/shm.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import hccl_capi
from test_emu_comm import _leaked, _shm_entries

SOCS = ("Ascend910B", "Ascend910_93", "Ascend950")
QUICK_THREADS = {(4, "Ascend910B")}
QUICK_MPI = {(3, "Ascend950")}


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hccl_capi.build(tmp_path_factory.mktemp("hccl_coll"))


def _marks(ranks: int, soc: str, quick: set) -> list:
    return [] if (ranks, soc) in quick else [pytest.mark.slow]


def _params(quick: set) -> list:
    return [pytest.param(n, soc, marks=_marks(n, soc, quick), id=f"{n}-{soc}") for n in (2, 3, 4, 8) for soc in SOCS]


@pytest.mark.parametrize("ranks,soc", _params(QUICK_THREADS))
@pytest.mark.slow  # full run only: over the quick run's budget
def test_collectives_ranks_as_threads(exe: Path, tmp_path: Path, ranks: int, soc: str) -> None:
    before = _shm_entries()
    proc = subprocess.Popen([str(exe), "threads", str(tmp_path)], env=hccl_capi.env(ranks, soc),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    out = stdout + stderr[-6000:]
    assert proc.returncode == 0, out
    assert len(re.findall(r"^OK rank \d+", stdout, re.M)) == ranks, out
    cases = hccl_capi.check_outputs(tmp_path, ranks, soc)
    assert cases >= (90 if soc == "Ascend950" else 75)
    assert _leaked(before, [proc.pid]) == []


@pytest.mark.parametrize("topology,ranks,soc", [("A2:2x2", 4, "Ascend910B"),
                                                 pytest.param("A3:3x2", 6, "Ascend910_93", marks=pytest.mark.slow)])
def test_collectives_on_several_servers(exe: Path, tmp_path: Path, topology: str, ranks: int, soc: str) -> None:
    """The C API on servers of several ranks: CANN's selector picks the two-level algorithms
    (ParallelMeshNHR ...), whose kernels read the layout of servers the C API gives them
    (OpParam.hierInfo; it was null, and those calls failed)."""
    proc = subprocess.run([str(exe), "threads", str(tmp_path)], env=hccl_capi.env(ranks, soc, HCOMM_KIT_TOPOLOGY=topology),
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr[-6000:]
    assert proc.returncode == 0, out
    assert len(re.findall(r"^OK rank \d+", proc.stdout, re.M)) == ranks, out
    assert hccl_capi.check_outputs(tmp_path, ranks, soc) >= 75


@pytest.mark.parametrize("ranks,soc", _params(QUICK_MPI))
def test_collectives_ranks_as_mpi_processes(exe: Path, tmp_path: Path, ranks: int, soc: str) -> None:
    before = _shm_entries()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", str(ranks), "--timeout", "240", "--",
                           str(exe), "mpi", str(tmp_path)], env=hccl_capi.env(ranks, soc), capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr[-6000:]
    assert proc.returncode == 0, out
    assert len(re.findall(r"OK rank \d+", proc.stdout)) == ranks, out
    hccl_capi.check_outputs(tmp_path, ranks, soc)
    assert _leaked(before, []) == []


@pytest.mark.slow
def test_batch_of_300_items_takes_two_launches(exe: Path, tmp_path: Path) -> None:
    """HcclBatchSendRecv with 300 items (150 sends to the next rank, 150 receives from the
    previous one, interleaved): more than the 256 items of one built-in launch."""
    proc = subprocess.run([str(exe), "threads", str(tmp_path), "batchmany"], env=hccl_capi.env(3, "Ascend910_93"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert hccl_capi.check_outputs(tmp_path, 3, "Ascend910_93") == 1


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("mode", ["address", "thread"])
def test_collectives_under_sanitizers(tmp_path: Path, mode: str) -> None:
    """The whole program at 3 ranks (threads) against the ASan+UBSan / TSan builds of the emulator:
    correct data and no sanitizer report (suppressions of tests/test_sanitizers.py only)."""
    spec = importlib.util.spec_from_file_location("_san", Path(__file__).with_name("test_sanitizers.py"))
    san = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(san)  # type: ignore[union-attr]
    exe = hccl_capi.build(tmp_path, mode)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([str(exe), "threads", str(out)], env=hccl_capi.env(3, "Ascend910B", **san._env(mode, tmp_path)),
                          capture_output=True, text=True, timeout=1200)
    text = proc.stdout + proc.stderr
    reports = san.SANITIZER_ERROR_RE.findall(text)
    assert not reports, f"{len(reports)} sanitizer report(s) under {mode}:\n{san.report_text(text)}"
    assert proc.returncode == 0, text[-20000:]
    hccl_capi.check_outputs(out, 3, "Ascend910B")


@pytest.mark.parametrize("case", ["mismatch", "mismatch0"])
def test_mismatched_c_calls_fail_every_rank_naming_both(exe: Path, tmp_path: Path, case: str) -> None:
    """A C program whose rank 1 passes another count (16, or 0: CANN returns at once for 0) to the
    same HcclAllReduce fails that call on every rank, naming both calls, instead of reducing
    mismatched buffers or waiting out the timeout; nothing leaks."""
    before = _shm_entries()
    env = {**hccl_capi.env(3, "Ascend910B"), "HCCL_EXEC_TIMEOUT": "60"}
    proc = subprocess.Popen([str(exe), "threads", str(tmp_path), case], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    out = stdout + stderr[-4000:]
    print(out)
    assert proc.returncode == 0, out
    lines = re.findall(r"^MISMATCH rank (\d+) call (-?\d+) sync (-?\d+) next (-?\d+) msg (.*)$", stdout, re.M)
    assert sorted(int(r) for r, *_ in lines) == [0, 1, 2], out
    other = "count=0" if case == "mismatch0" else "count=16"
    named = 0
    for rank, call, sync, nxt, msg in lines:
        # every rank's call fails; rank 1's empty call ("mismatch0") may return before the others look
        assert int(call) != 0 or int(sync) != 0 or (case == "mismatch0" and rank == "1"), out
        assert int(nxt) != 0, out  # the communicator is aborted: every later call fails
        named += "collective mismatch" in msg and "HcclAllReduce(count=8, dtype=fp32, op=sum)" in msg and other in msg
    assert named >= 1, out  # the rank that found it names both calls (the others may name the abort)
    assert _leaked(before, [proc.pid]) == []



@pytest.mark.parametrize("case", ["links_allreduce", "links_batch", "links_acquire"])
def test_calls_over_a_downed_link_fail_every_rank_at_once(exe: Path, tmp_path: Path, case: str) -> None:
    """With the 0-1 link down (HCOMM_KIT_TOPOLOGY=A2:1x4): an allreduce (its algorithm needs every
    pair's link), a batch send/recv ring (ranks 0 and 1 exchange over the link, ranks 2 and 3 only
    with them and each other) and a host acquiring channels to every peer fail on every rank within
    seconds, naming the link and HCOMM_KIT_LINKS_DOWN. They failed at once on ranks 0 and 1 only;
    the others waited in HcclChannelAcquire for HCCL_CONNECT_TIMEOUT (here 60 s) or, in the batch,
    for peers that had left (HCCL_EXEC_TIMEOUT)."""
    before = _shm_entries()
    env = {**hccl_capi.env(4, "Ascend910B"), "HCOMM_KIT_TOPOLOGY": "A2:1x4", "HCOMM_KIT_LINKS_DOWN": "0-1"}
    proc = subprocess.Popen([str(exe), "threads", str(tmp_path), case], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=100)
    finally:
        proc.kill()
    out = stdout + stderr[-4000:]
    assert proc.returncode == 0, out
    lines = re.findall(r"^LINKS rank (\d+) call (-?\d+) sync (-?\d+) secs ([\d.]+) msg (.*)$", stdout, re.M)
    assert sorted(int(r) for r, *_ in lines) == [0, 1, 2, 3], out
    for rank, call, sync, secs, msg in lines:
        assert int(call) != 0 or int(sync) != 0, out
        assert float(secs) < 10, out
        assert ("link between rank" in msg or "link 0-1" in msg) and "HCOMM_KIT_LINKS_DOWN=0-1" in msg, out
        if rank in ("0", "1") or case == "links_allreduce":
            assert int(call) == 19, out  # HCCL_E_NETWORK, from the call itself
    assert _leaked(before, [proc.pid]) == []
