"""Diagnosis through the Python API: mismatched collective calls, planted bugs in scaffolded
operators, a rank killed mid-operation, progress lines, per-rank logs and JSON reports, the
launcher's state dump on timeout, and the merged trace."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from test_emu_comm import _shm_entries
from test_orchestrator import scaffold

NP3_SLOW = pytest.param(3, marks=pytest.mark.slow)  # 2 (and 4) ranks in the quick run, 3 in the full one

# ---- collective mismatch (every rank fails, before data moves, naming each rank's call) -----------


def _expect_mismatch(c, fn, *needles: str, within: float = 5) -> None:
    from hcomm_kit.base.errors import CollectiveMismatchError

    t0 = time.monotonic()
    with pytest.raises(CollectiveMismatchError) as info:
        fn()
    assert time.monotonic() - t0 < within
    text = str(info.value)
    for n in needles:
        assert n in text, text


@pytest.mark.mpi(np=[2, NP3_SLOW, pytest.param(4, marks=pytest.mark.slow)], timeout=120)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_mismatched_count(comm) -> None:
    c = comm.split(0)
    x = np.ones(100 if c.rank == 1 else 200, np.float32)
    _expect_mismatch(c, lambda: c.all_reduce(x), "rank 1: all_reduce(count=100, dtype=fp32, op=sum)",
                     "all_reduce(count=200, dtype=fp32, op=sum)")
    c.close()
    # async_op=True: a rank whose kernel was enqueued before the mismatch was found fails at wait()
    # (the stream's error reaches the event it waits on), never with its input left as the "result"
    c = comm.split(0)
    c.all_reduce(x[:50])  # channels set up: the next call only enqueues
    if c.rank == 1:
        time.sleep(0.2)  # the others' kernels are enqueued before rank 1 posts its call
    _expect_mismatch(c, lambda: c.all_reduce(x, async_op=True).wait(), "all_reduce(count=100, dtype=fp32, op=sum)",
                     "all_reduce(count=200, dtype=fp32, op=sum)")
    c.close()


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_mismatched_dtype_and_reduce_op(comm) -> None:
    c = comm.split(0)
    x = np.ones(64, np.int32 if c.rank == 0 else np.float32)
    _expect_mismatch(c, lambda: c.all_reduce(x), "dtype=int32", "dtype=fp32")
    c.close()
    c = comm.split(0)
    _expect_mismatch(c, lambda: c.all_reduce(np.ones(64, np.float32), "max" if c.rank == 0 else "sum"),
                     "op=max", "op=sum")
    c.close()


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
def test_mismatched_collectives_and_roots(comm) -> None:
    c = comm.split(0)
    x = np.arange(12, dtype=np.float32)
    _expect_mismatch(c, lambda: c.all_gather(x) if c.rank == 0 else c.all_reduce(x), "all_gather(", "all_reduce(")
    c.close()
    c = comm.split(0)
    _expect_mismatch(c, lambda: c.broadcast(x, root=0 if c.rank == 0 else 1), "root=0", "root=1")
    c.close()


@pytest.mark.mpi(np=[2, pytest.param(4, marks=pytest.mark.slow)], timeout=120)
def test_custom_operator_where_the_others_call_all_reduce(comm) -> None:
    """A custom operator (a ring: channels to two peers) called on every rank but the last, which
    calls all_reduce (a mesh at 4 ranks: it waits in its channel set-up for a rank the ring never
    connects to): a mismatch naming both calls on every rank, on first calls too (the calls are
    compared before the set-up), never a deadlock report."""
    x = np.arange(12, dtype=np.float32)
    op_dir = scaffold("ring-allreduce")
    for warm in (False, True):
        c = comm.split(0)
        op = c.load_op(op_dir)
        if warm:
            np.testing.assert_array_equal(op(x), x * c.size)
            c.all_reduce(x, algorithm="mesh")
        _expect_mismatch(c, lambda: op(x) if c.rank < c.size - 1 else c.all_reduce(x, algorithm="mesh"),
                         f"{op.name}[{op.tag}](dtype=fp32, reduce_op=sum, count=12, root=0)",
                         f"rank {c.size - 1}: all_reduce(count=12, dtype=fp32, op=sum, algorithm=",
                         within=15)  # a first call: the operator's resources are set up too
        c.close()


@pytest.mark.mpi(np=[2], timeout=120)
def test_call_interrupted_after_its_check_fails_the_peers_at_once(comm) -> None:
    """A rank interrupted between its call's check and its launch (Ctrl-C or SIGTERM during a first
    call's channel set-up) aborts the communicator: the peers fail at once naming it, instead of
    waiting for its part until a timeout."""
    c = comm.split(0)
    x = np.ones(64, np.float32)
    if c.rank == 1:
        op = c.builtin_op("allreduce")

        def interrupted(*args, **kwargs):
            raise KeyboardInterrupt

        op.resources = interrupted  # the first call's set-up, after the call was checked
        with pytest.raises(KeyboardInterrupt):
            c.all_reduce(x)
    else:
        t0 = time.monotonic()
        with pytest.raises(Exception, match=r"rank 1: its call to allreduce was checked but never made "
                                            r"\(KeyboardInterrupt"):
            c.all_reduce(x)
        assert time.monotonic() - t0 < 15
    c.abort()


@pytest.mark.mpi(np=[2], timeout=120)
def test_mismatched_send_recv(comm) -> None:
    c = comm.split(0)
    if c.rank == 0:
        _expect_mismatch(c, lambda: c.send(np.ones(10, np.float32), 1), "send(count=10, dtype=fp32) to rank 1")
    else:
        _expect_mismatch(c, lambda: c.recv(np.empty(20, np.float32), 0), "recv(count=20, dtype=fp32) from rank 0")
    c.close()


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
def test_matching_calls_pass_and_close_is_checked(comm) -> None:
    c = comm.split(0)
    for n in (1, 7, 1000):
        y = c.all_reduce(np.full(n, c.rank + 1, np.int32))
        assert (y == sum(range(1, c.size + 1))).all()
    comm.mpi_comm.Barrier()  # every rank is done with the calls above (the abort below ends them all)
    if c.rank == 0:
        # rank 0 closes while the others still call all_reduce: its close() fails too
        _expect_mismatch(c, c.close, "rank 0: close()")
    else:
        _expect_mismatch(c, lambda: c.all_reduce(np.ones(8, np.float32)), "rank 0: close()")
        c.close()


def _skipping_program(c, skip: int):
    """The reported program: rank ``skip`` skips the first of two all_reduce calls that have the
    same arguments. Without call sites every rank's call #1 matched: the others' ones met the
    skipper's twos (5.0 at 4 ranks, not 3.0) and the skipper's second call got nothing, silently."""
    if c.rank != skip:
        c.all_reduce(np.ones(1000, np.float32))
    return c.all_reduce(np.full(1000, 2, np.float32))


@pytest.mark.mpi(np=[2, NP3_SLOW, pytest.param(4, marks=pytest.mark.slow)], timeout=120)
def test_skipped_call_fails_on_every_rank_naming_both_call_sites(comm) -> None:
    """The skipper's call #1 meets the others' (the same arguments from another line: no error by
    itself), but the ranks' calls then differ (the others' second all_reduce against the skipper's
    close(), or its next call): every rank fails there, and the message names both lines of call #1."""
    from hcomm_kit.base.errors import CollectiveMismatchError

    skip = (comm.size - 2 + comm.size // 4) % comm.size  # rank 0 at 2 ranks, 1 at 3, 3 at 4 (the last)
    first = _skipping_program.__code__.co_firstlineno + 5  # the lines of the two calls
    call = "all_reduce(count=1000, dtype=fp32, op=sum) at "
    others = [r for r in range(comm.size) if r != skip]
    group = ("ranks " if len(others) > 1 else "rank ") + ", ".join(map(str, others))
    for ending in ("close", "barrier"):
        c = comm.split(0)
        t0 = time.monotonic()
        with pytest.raises(CollectiveMismatchError) as info:
            _skipping_program(c, skip)
            assert c.rank == skip  # the others' second call fails
            c.close() if ending == "close" else c.barrier()
        assert time.monotonic() - t0 < 15  # within seconds, not after a timeout (loaded machines)
        text = str(info.value)
        m2 = re.search(r"call #2: the ranks do not make the same call \((.*?); ranks not listed", text)
        m1 = re.search(r"the ranks made call #1 \((.*?)\) with the same arguments from different lines: a rank "
                       r"skipped a call", text)
        assert m1 and m2, text
        assert re.search(rf"(^|; ){group}: {re.escape(call)}\S*test_diag_py\.py:{first + 1}(;|$)", m2[1]), text
        assert re.search(rf"(^|; )rank {skip}: {ending}\(", m2[1]), text
        assert re.search(rf"(^|; ){group}: {re.escape(call)}\S*test_diag_py\.py:{first}(;|$)", m1[1]), text
        assert re.search(rf"(^|; )rank {skip}: {re.escape(call)}\S*test_diag_py\.py:{first + 1}(;|$)", m1[1]), text
        c.close()
    # the skipped call labelled with same_call: a rank that skips the block still fails, naming it
    import hcomm_kit

    c = comm.split(0)
    with pytest.raises(CollectiveMismatchError, match=r"same_call\('step'\)"):
        if c.rank != skip:
            with hcomm_kit.same_call("step"):
                c.all_reduce(np.ones(1000, np.float32))
        c.all_reduce(np.full(1000, 2, np.float32))
        c.close()
    c.close()


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
def test_same_call_from_different_lines_on_purpose_stays_quiet(comm) -> None:
    """Ranks that make one collective from different lines need nothing; they may still say so
    (same_call, with or without a label) or turn sites off (HCOMM_KIT_CALL_CHECK=loose, read when a
    communicator is made); the results are the reductions numpy computes. Arguments are still
    compared inside same_call."""
    import hcomm_kit

    c = comm.split(0)
    xs = [np.arange(16, dtype=np.float32) * (r + 1) for r in range(c.size)]
    want = np.sum(xs, axis=0)
    # without same_call: a difference in call site alone is no error (rank branches, as in
    # training scripts around broadcast, barrier and logging)
    for _ in range(3):
        if c.rank == 0:
            y = c.all_reduce(xs[0])
            b = c.broadcast(xs[0][:5], root=0)
            c.barrier()
        else:
            y = c.all_reduce(xs[c.rank])
            b = c.broadcast(np.zeros(5, np.float32), root=0)
            c.barrier()
        np.testing.assert_array_equal(y, want)
        np.testing.assert_array_equal(b, xs[0][:5])
    for label in (None, "bcast"):
        with hcomm_kit.same_call(label):
            if c.rank == 0:
                y = c.all_reduce(xs[0])
            else:
                y = c.all_reduce(xs[c.rank])
        np.testing.assert_array_equal(y, want)
    with hcomm_kit.same_call():
        _expect_mismatch(c, lambda: c.all_reduce(xs[0][: 8 if c.rank == 0 else 16]), "count=8", "count=16")
    c.close()
    os.environ["HCOMM_KIT_CALL_CHECK"] = "loose"
    try:
        c = comm.split(0)
    finally:
        del os.environ["HCOMM_KIT_CALL_CHECK"]
    if c.rank == 0:
        y = c.all_reduce(xs[0])
    else:
        y = c.all_reduce(xs[c.rank])
    np.testing.assert_array_equal(y, want)
    c.close()


def test_call_site_is_the_first_frame_outside_hcomm_kit() -> None:
    """callsite.site(): the user's file:line through hcomm-kit's own frames; a label or nothing
    under same_call; a bad label is refused naming it."""
    from hcomm_kit.ops import callsite
    from hcomm_kit.base.errors import ConfigError

    def api():  # stands for a public method: site() names the caller of its caller
        return callsite.site()

    line = sys._getframe().f_lineno + 1
    assert api().endswith(f"test_diag_py.py:{line}")
    with callsite.same_call():
        assert api() == ""
        with callsite.same_call("x"):
            assert api() == "same_call('x')"
        assert api() == ""
    assert api().endswith(f"test_diag_py.py:{sys._getframe().f_lineno}")
    # hcomm-kit's frames are skipped: through a function compiled as if it were in the package
    ns: dict = {}
    exec(compile("def inner(f):\n    return f()\n", callsite.__file__, "exec"), ns)
    line = sys._getframe().f_lineno + 1
    assert ns["inner"](api).endswith(f"test_diag_py.py:{line}")
    for bad in ("", "a @ b", 5):
        with pytest.raises(ConfigError, match="same_call: name="):
            with callsite.same_call(bad):  # type: ignore[arg-type]
                pass


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
def test_send_recv_ring_posted_async_works_and_blocking_sends_first_fail_fast(comm) -> None:
    """Every rank posts a send to the next and a receive from the previous, then waits (a batched
    ring, or osu_bibw's receives posted before sends): sends and receives match per peer and
    direction, the posted calls start together, so it works at any rank count. Every rank making a
    *blocking* send first cannot work (a send waits for its receiver): every rank fails within
    seconds naming the cycle (at 3 ranks the hosts block in HcclChannelAcquire, each waiting for
    the next), never after HCCL_CONNECT_TIMEOUT or HCCL_EXEC_TIMEOUT."""
    c = comm.split(0)
    r, n = c.rank, c.size
    for count in (1, 7, 3001):
        x, y = np.full(count, r, np.float32), np.empty(count, np.float32)
        sends = [c.send(x + k, (r + 1) % n, async_op=True) for k in range(3)]
        ys = [np.empty(count, np.float32) for _ in range(3)]
        recvs = [c.recv(ys[k], (r - 1) % n, async_op=True) for k in range(3)]
        for w in recvs[::-1] + sends:
            w.wait()
        for k in range(3):
            np.testing.assert_array_equal(ys[k], np.full(count, (r - 1) % n + k, np.float32))
        # receives posted before sends on every rank, blocking send last
        w = c.recv(y, (r - 1) % n, async_op=True)
        assert c.send(x, (r + 1) % n) is None
        assert w.wait() is y
        np.testing.assert_array_equal(y, np.full(count, (r - 1) % n, np.float32))
    c.close()
    c = comm.split(0)
    x, y = np.full(64, r, np.float32), np.empty(64, np.float32)
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        c.send(x, (r + 1) % n)
        c.recv(y, (r - 1) % n)
    assert time.monotonic() - t0 < 10
    text = str(info.value)
    assert "DEADLOCK" in text and "can never be satisfied" in text, text
    if n > 2:
        assert "wait-for cycle" in text, text
        assert "is blocked in HcclChannelAcquire" in text and "makes its end only after its own call returns" in text
    c.abort()


# ---- planted bugs in a scaffolded operator (p2p ring shift), through the Python API ---------------

_STAGE = "OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage, input + offset, len));"
_ACK = "OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, toNext.handle, ACK));"
_BUGS = {
    # rank 1 never tells next that its slice is staged: next waits forever
    "missing": (_ACK, "if (rank != 1) {\n            " + _ACK + "\n        }"),
    # rank 1 tells next twice
    "double": (_ACK, _ACK + "\n        if (rank == 1) {\n            " + _ACK + "\n        }"),
    # rank 1 says "staged" without staging: next reads last call's bytes
    "stale": (_STAGE, "if (rank != 1) {\n            " + _STAGE + "\n        }"),
}


def _buggy_op(kind: str) -> Path:
    base = scaffold("p2p", name="dg_base")
    text = (base / "op_kernel_aicpu" / "exec_op.cc").read_text()
    old, new = _BUGS[kind]
    assert old in text
    body = text.replace(old, new, 1).replace("dg_base", f"dg_{kind}").replace("DG_BASE", f"DG_{kind.upper()}")
    return scaffold("p2p", name=f"dg_{kind}", exec_op=body)


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
def test_planted_bugs_through_python(comm) -> None:
    from hcomm_kit.base.errors import CheckError, DeadlockError, RemoteError

    # A checker finding fails the operation with CheckError (509001) where the rank's part was running,
    # or RemoteError (507057, "communicator aborted by rank R: <the finding>") where it began after the
    # abort (a fast finder): both name the finding and its source line.
    found = (CheckError, RemoteError)
    for kind, exc, needle in (("missing", DeadlockError, "DEADLOCK"), ("double", found, "[hcomm-kit check]"),
                              ("stale", found, "read of unwritten bytes")):
        c = comm.split(0)
        op = c.load_op(_buggy_op(kind))
        x = np.arange(4096, dtype=np.float32) + c.rank
        y = None
        t0 = time.monotonic()
        try:
            for _ in range(3):  # "stale" needs an earlier call; "double" may show one call later
                y = op(x)
            raise AssertionError(f"{kind}: no error, output {y[:4]}")
        except exc as e:
            assert time.monotonic() - t0 < 10, kind
            text = str(e)
            assert needle in text, text
            assert "exec_op.cc:" in text, text  # the source line of the call at fault
            kinds = comm.mpi_comm.allgather(type(e).__name__)
            assert kind == "missing" or "CheckError" in kinds, kinds  # the finder's own error
        c.close()


@pytest.mark.mpi(np=[2, 3], timeout=60)
def test_call_after_another_ranks_abort_is_remote_error(comm) -> None:
    """A call made after another rank's failure aborted the communicator (its finding, its death)
    fails with RemoteError naming that rank and its reason, whichever step sees the abort first:
    the call check of a collective or of an operator (HCCL_E_REMOTE), or the launch (ACL 507057)."""
    from hcomm_kit.base.errors import RemoteError

    c = comm.split(0)
    x = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(c.all_reduce(x), x * c.size)  # channels and resources set up
    op = c.load_op(_buggy_op("missing"))  # any operator: only its call check runs
    comm.mpi_comm.barrier()
    if c.rank == 1:
        assert c.rt.hccl.HcommKitCommAbort(c.handle, b"the test gave up") == 0
    comm.mpi_comm.barrier()
    for call in (lambda: c.all_reduce(x), lambda: op(x)):
        with pytest.raises(RemoteError) as info:
            call()
        e = info.value
        assert "aborted by rank 1" in str(e) and "the test gave up" in str(e), str(e)
    c.abort()


_SHIFTS = {
    # every rank's final copy reads one element too far: the slice's last element was never written
    "ring-allreduce": ("HcommLocalCopyOnThread(thread, output + done * unitSize, myBuf, sliceBytes)",
                       "HcommLocalCopyOnThread(thread, output + done * unitSize, myBuf + unitSize, sliceBytes)"),
    # every rank stages one element too far: next reads one element that nobody staged
    "p2p": ("HcommLocalCopyOnThread(thread, stage, input + offset, len)",
            "HcommLocalCopyOnThread(thread, stage + unitSize, input + offset, len)"),
}


def _shifted_op(pattern: str) -> Path:
    base = scaffold(pattern)  # the correct operator, built (and tested) by test_orchestrator too
    name = "dg_shift_" + pattern.split("-")[0]
    text = (base / "op_kernel_aicpu" / "exec_op.cc").read_text()
    old, new = _SHIFTS[pattern]
    assert old in text
    body = text.replace(old, new, 1).replace(base.name, name).replace(base.name.upper(), name.upper())
    return scaffold(pattern, name=name, exec_op=body)


@pytest.mark.mpi(np=[2, NP3_SLOW, pytest.param(4, marks=pytest.mark.slow)], timeout=120)
def test_partly_stale_read_through_python(comm) -> None:
    """Issue 18: a scaffolded operator reading one element off (most of the read fresh, 4 bytes
    not written in this call) fails its first call with the finding, never returns the shifted data."""
    from hcomm_kit.base.errors import CheckError, RemoteError

    for pattern, api in (("ring-allreduce", "HcommLocalCopyOnThread"), ("p2p", "HcommReadOnThread")):
        c = comm.split(0)
        op = c.load_op(_shifted_op(pattern))
        x = np.arange(4096, dtype=np.float32) + c.rank
        with pytest.raises((CheckError, RemoteError)) as info:
            y = op(x)
            raise AssertionError(f"{pattern}: no error, output {y[:4]}")
        text = str(info.value)
        assert "read of unwritten bytes" in text and "of which 4 byte(s) nobody wrote in this operation" in text, text
        assert api in text and "exec_op.cc:" in text, text
        kinds = comm.mpi_comm.allgather(type(info.value).__name__)
        assert "CheckError" in kinds, kinds
        c.close()


# ---- a rank stopped by the OS: no verdict from its old snapshot -------------------------------------


@pytest.mark.mpi(np=[2, NP3_SLOW], timeout=120)
def test_stopped_rank_is_no_deadlock(comm) -> None:
    """Rank 1 waits inside an all_reduce for rank 0 and is then stopped (SIGSTOP, as a process the
    OS does not run for a while) before rank 0 calls. Rank 1's last published snapshot still shows
    the wait with its notify unset, but rank 0 records it right after; rank 0 then waits for rank 1.
    The hang monitor must not call that a deadlock from the stopped rank's old snapshot (it did
    once in a loaded full run: a false DEADLOCK in the built-in reduce): once resumed, both ranks
    finish with the right sum."""
    import threading

    pids = comm.mpi_comm.allgather(os.getpid())
    x = np.full(8, comm.rank + 1.0, np.float32)
    want = np.full(8, comm.size * (comm.size + 1) / 2, np.float32)
    np.testing.assert_array_equal(comm.all_reduce(x), want)  # warm: channels, plans
    comm.mpi_comm.Barrier()
    resume = threading.Timer(0.45, lambda: [os.kill(pid, signal.SIGCONT) for pid in pids[1:]])
    if comm.rank == 0:
        time.sleep(0.3)  # the others wait inside the all_reduce for rank 0, and have published it
        for pid in pids[1:]:
            os.kill(pid, signal.SIGSTOP)
        resume.start()
    try:
        got = comm.all_reduce(x)
    finally:
        if resume.is_alive():
            resume.join()
    np.testing.assert_array_equal(got, want)


# ---- a rank killed mid-operation (ranks as processes, no MPI) ---------------------------------------

_KILL = """
import os, signal, sys, time
import numpy as np
import hcomm_kit
from hcomm_kit.base.errors import HcommKitError
c = hcomm_kit.init()
x, op = np.ones(1 << 16, sys.argv[1]), sys.argv[2]
c.all_reduce(x, op)
if c.rank == 3:
    time.sleep(1.0)          # the others are inside the next all_reduce, waiting for rank 3
    os.kill(os.getpid(), signal.SIGKILL)
t0 = time.monotonic()
try:
    c.all_reduce(x, op)
    print("NO-ERROR")
except HcommKitError as e:
    print("ERR", round(time.monotonic() - t0, 2), type(e).__name__, str(e).replace(chr(10), " | ")[:600])
sys.stdout.flush()
os._exit(0)
"""


@pytest.mark.parametrize("dtype,op,error", [
    ("float32", "sum", "RemoteError"),
    # A2 (the default product) reduces int64 / prod in the kernel (HkDrain: it waits until its
    # thread's tasks ran, then reduces on the CPU): it waited out HCCL_EXEC_TIMEOUT (1836 s) when a
    # peer died, since the dropped tasks never wrote the flag it polls
    pytest.param("int64", "prod", "KernelError", marks=pytest.mark.slow),
])
def test_sigkill_of_one_of_four_ranks(tmp_path: Path, dtype: str, op: str, error: str) -> None:
    before = _shm_entries()
    env = dict(os.environ, HCOMM_KIT_WORLD_SIZE="4", HCOMM_KIT_ROOT_INFO=str(tmp_path / "root"))
    env.pop("HCCL_EXEC_TIMEOUT", None)
    env.pop("HCOMM_KIT_SOC", None)
    procs = [subprocess.Popen([sys.executable, "-c", _KILL, dtype, op], env=dict(env, HCOMM_KIT_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert procs[3].returncode == -signal.SIGKILL
    for r in range(3):
        out = outs[r][0]
        m = re.search(r"ERR ([\d.]+) (\w+) (.*)", out)
        assert m, outs[r]
        assert float(m.group(1)) < 3.5, out      # 1 s of rank 3's sleep + < 2 s to notice
        assert m.group(2) == error and "rank 3" in m.group(3) and "died" in m.group(3), out
    leftover = [n for n in _shm_entries() - before if any(f".{p.pid}." in n for p in procs)]
    assert leftover == []


# ---- a long (not certain) wait: progress lines ----------------------------------------------------

_SLOW = """
import time, numpy as np, hcomm_kit
c = hcomm_kit.init()
c.all_reduce(np.ones(8, np.float32))  # channels are set up
if c.rank == 1:
    time.sleep(3.5)   # outside hcomm-kit: rank 0's wait is long, not certain to hang
y = c.all_reduce(np.full(8, c.rank + 1, np.float32))
print("OK", y[0])
c.close()
"""


@pytest.mark.slow  # fault injection with real timeouts: full suite only
def test_progress_lines_for_long_waits(tmp_path: Path) -> None:
    env = dict(os.environ, HCOMM_KIT_WORLD_SIZE="2", HCOMM_KIT_ROOT_INFO=str(tmp_path / "root"),
               HCOMM_KIT_PROGRESS_SECONDS="1")
    procs = [subprocess.Popen([sys.executable, "-c", _SLOW], env=dict(env, HCOMM_KIT_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert "OK 3.0" in outs[0][0] and "OK 3.0" in outs[1][0]
    err = outs[0][1]
    assert re.search(r"rank 0 thread t\d+ has waited [12] s for channel notify slot \d+ from rank 1", err), err
    assert "rank 1 (pid" in err and "not in an hcomm-kit call" in err, err
    assert "DEADLOCK" not in err


# ---- per-rank logs and the JSON report --------------------------------------------------------------

@pytest.mark.mpi(np=[2], timeout=120, env={"HCOMM_KIT_LOG_DIR": "${HCOMM_KIT_MPI_RESULTS}/logdir"})
@pytest.mark.slow  # full run only: over the quick run's budget
def test_log_dir_and_json_report(comm) -> None:
    from hcomm_kit.base import envs
    from hcomm_kit.base.errors import DeadlockError

    d = envs.get("HCOMM_KIT_LOG_DIR")  # in the job's own directory (removed with it), not a fixed /tmp path
    assert isinstance(d, Path) and d.parent == envs.get("HCOMM_KIT_MPI_RESULTS"), d
    c = comm.split(0)
    op = c.load_op(_buggy_op("missing"))
    with pytest.raises(DeadlockError):
        op(np.ones(64, np.float32))
    c.close()
    comm.mpi_comm.Barrier() if comm.mpi_comm is not None else None
    log = (d / f"rank{comm.rank}.log").read_text()
    assert "launch kernel HcclDgMissingAicpuKernel" in log, log[-3000:]
    # the operator's probe for its engine context (HcclEngineCtxGet, then Create) is not a failure
    # (this process's lines only: the file is appended to by every run that uses this directory)
    mine = [line for line in log.splitlines() if f" pid {os.getpid()} " in line]
    assert mine and not [line for line in mine if "HcclEngineCtxGet" in line], log[-3000:]
    assert "DEADLOCK" in log or "communicator aborted" in log, log[-3000:]
    reports = list(d.glob("deadlock-*.json"))
    assert reports, list(d.iterdir())
    rep = json.loads(reports[0].read_text())
    assert rep["kind"] == "deadlock" and rep["ranks"] == 2
    stuck = [w for w in rep["waits"] if w["stuck"]]
    assert stuck and any("exec_op.cc:" in w["detail"] for w in stuck), rep
    assert len(rep["rank_states"]) == 2


# ---- the launcher's dump when its own timeout ends a job ---------------------------------------------

_HANG = """
import time, numpy as np, hcomm_kit
c = hcomm_kit.init()
c.all_reduce(np.ones(8, np.float32))
if c.rank == 1:
    time.sleep(300)   # never calls: rank 0 waits (not certain: rank 1's host could still call)
c.all_reduce(np.ones(8, np.float32))
"""


@pytest.mark.slow  # fault injection with real timeouts: full suite only
def test_launch_timeout_prints_every_rank_state(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(_HANG)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--timeout", "8", "--grace", "2",
                           "--", sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 124, out
    assert time.monotonic() - t0 < 40, out
    assert re.search(r"rank 0 \(pid \d+\): communicator \S+ rank 0: thread t\d+ waits for channel notify slot", out), out
    assert re.search(r"rank 1 \(pid \d+\): .*(idle|not in an hcomm-kit call|nothing queued)", out), out


# ---- the merged trace --------------------------------------------------------------------------------

def test_trace_structure(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    env = dict(os.environ, HCOMM_KIT_TRACE=str(trace))
    run = subprocess.run([sys.executable, "-m", "hcomm_kit", "run", "allreduce", "--np", "2", "--count", "1000",
                          "--iters", "2"], env=env, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(trace.read_text())
    ev = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {0: "rank 0", 1: "rank 1"}
    tracks = {(e["pid"], e["args"]["name"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert (0, "thread t0") in tracks and (1, "thread t0") in tracks, tracks
    cats = {e.get("cat") for e in ev if e["ph"] == "X"}
    assert {"copy", "notify", "wait", "kernel"} <= cats, cats
    assert any(e["ph"] == "i" and e["cat"] == "launch" for e in ev)
    for e in ev:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] > 0
    starts = {e["id"]: e for e in ev if e["ph"] == "s"}
    ends = {e["id"]: e for e in ev if e["ph"] == "f"}
    assert starts and set(starts) == set(ends)
    # channel notifies cross ranks: some arrows go from one rank to the other
    assert any(starts[i]["pid"] != ends[i]["pid"] for i in starts)
    assert all(ends[i]["ts"] >= starts[i]["ts"] for i in starts)
    assert not list(tmp_path.glob("trace.json.part.*"))
    summ = subprocess.run([sys.executable, "-m", "hcomm_kit", "trace", "summary", str(trace)], capture_output=True,
                          text=True, timeout=60)
    assert summ.returncode == 0 and re.search(r"^\s+1\s+thread t0\s+\d+", summ.stdout, re.M), summ.stdout


# ---- output an operator never wrote (the unwritten-output check) -----------------------------------


def _direct_reduce_renamed(name: str, root_writes: bool = True) -> str:
    """The direct-reduce pattern's exec_op.cc for an operator called ``name``; root_writes=False: the
    root reduces into its HCCL buffer and never writes its output (the planted bug)."""
    base = scaffold("direct-reduce")
    text = (base / "op_kernel_aicpu" / "exec_op.cc").read_text()
    text = text.replace(base.name, name).replace(base.name.upper(), name.upper())
    if not root_writes:
        assert text.count("output + offset") == 2, text
        text = text.replace("output + offset", "myBuf")  # BUG: the root's result never reaches its output
    return text


@pytest.mark.mpi(np=[2, 4], timeout=240)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_output_the_operator_never_wrote_fails_the_call(comm) -> None:
    """Output an operator never wrote came back as data (exit 0): a reduce whose root never writes
    its output returned 4075 of 4096 elements wrong there; a (correct) reduce kernel declared
    kind = "allreduce" returned garbage on the other ranks. Now the call fails on the rank whose
    output its kind defines, naming the rank, the operator and the unwritten byte ranges; the
    ranks with nothing to write (a reduce's non-roots) and a correct call are left alone."""
    from hcomm_kit.base.errors import CheckError

    x = np.arange(4096, dtype=np.float32) + comm.rank
    want = np.sum([np.arange(4096, dtype=np.float32) + r for r in range(comm.size)], axis=0)
    name = "t_reduce_no_root_write"
    bad = comm.load_op(scaffold("direct-reduce", name=name, exec_op=_direct_reduce_renamed(name, False)))
    def call(op, **kw):  # every rank from this line (the call check compares call sites)
        try:
            return op(x, **kw), None
        except CheckError as exc:
            return None, str(exc)

    for root in sorted({0, comm.size - 1}):
        y, msg = call(bad, root=root)
        if comm.rank == root:
            assert msg is not None, y
            assert f"unwritten output: rank {root}: operator {name} (kind reduce)" in msg, msg
            assert "16384 of its 16384 output bytes were not written" in msg and "[0, 16384)" in msg, msg
        else:
            assert y is None and msg is None, msg
    # a correct reduce kernel declared an allreduce: its kind says every rank gets the result
    name = "t_reduce_as_allreduce"
    op = comm.load_op(scaffold("direct-reduce", name=name, exec_op=_direct_reduce_renamed(name),
                               toml_edit=(('kind = "reduce"', 'kind = "allreduce"'),)))
    y, msg = call(op)
    if comm.rank == 0:  # the kernel's root (OpParam.root = 0) writes its output
        np.testing.assert_array_equal(y, want)
    else:
        assert msg is not None and f"rank {comm.rank}: operator {name} (kind allreduce): 16384 of" in msg, msg
    # HCOMM_KIT_CHECK=warn (HcommKitSetCheck(2)): reported on stderr, the call returns
    from hcomm_kit.bench.timing import _checker_switch

    set_check = _checker_switch(comm)
    set_check(2)
    try:
        y, msg = call(op)
    finally:
        set_check(1)
    assert msg is None
