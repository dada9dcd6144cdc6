"""The host orchestrator: communicator, device buffers, CustomOp on 1..4 ranks, errors.

Multi-rank tests use the hcomm_kit.testing plugin (@pytest.mark.mpi): all of them with the same
rank count run in one mpirun job. Operators are scaffolded from the templates once per test
session into a directory under pytest's base temp (keyed by the template contents) that the
session's mpirun jobs share; their kernels are compiled once per machine (build cache).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
NP3_SLOW = pytest.param(3, marks=pytest.mark.slow)  # 2 and 4 ranks in the quick run
PATTERNS = ("empty", "p2p", "ring-allreduce", "mesh-allgather")
HANDSHAKES = ("thread-notify", "acl-notify")
OPS_DIR_ENV = "HCOMM_KIT_TEST_OPS_DIR"  # set by tests/conftest.py: where scaffold() puts the operators

HANG_EXEC_OP = """\
#include "exec_op.h"
#include "hang_log.h"

namespace ops_hang {

/* Deliberately broken: waits on slot 1 of the main thread, which nobody records. */
HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(resCtx.aicpuThread, 1, param.notifyTimeout));
    return HCCL_SUCCESS;
}

}  // namespace ops_hang
"""


def _ops_root() -> Path:
    h = hashlib.sha256()
    for p in sorted((REPO / "templates").rglob("*")):
        if p.is_file():
            h.update(p.name.encode())
            h.update(p.read_bytes())
    # Under the session's pytest base temp (tests/conftest.py exports it to the mpirun jobs, whose ranks
    # share it): pytest removes old ones; the compiled kernels stay in the build cache (path-independent).
    base = os.environ.get(OPS_DIR_ENV)
    return (Path(base) if base else Path(tempfile.gettempdir())) / f"hcomm_kit_test_ops_{h.hexdigest()[:12]}"


def scaffold(pattern: str, handshake: str = "thread-notify", name: str | None = None, exec_op: str | None = None,
             notifies: int | None = None, toml_edit: tuple[tuple[str, str], ...] = ()) -> Path:
    """Scaffold + build an operator once per test session (the session's ranks share it).
    ``toml_edit``: (old, new) text replacements in its op.toml (then re-rendered)."""
    from filelock import FileLock

    from hcomm_kit.build.opbuild import build_op
    from hcomm_kit.scaffold.render import new_op, update_op

    name = name or f"t_{pattern.replace('-', '_')}_{handshake.split('-')[0]}"
    root = _ops_root()
    root.mkdir(parents=True, exist_ok=True)
    opdir = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (opdir / ".built").exists():
            new_op(name, pattern=pattern, handshake=handshake, directory=root, force=True)
            edits = tuple(toml_edit) + ((("notifies_per_thread = 0", f"notifies_per_thread = {notifies}"),)
                                        if notifies is not None else ())
            if edits:
                toml = opdir / "op.toml"
                text = toml.read_text()
                for old, new in edits:
                    assert old in text, (old, text)
                    text = text.replace(old, new)
                toml.write_text(text)
                update_op(opdir)
            if exec_op is not None:
                (opdir / "op_kernel_aicpu" / "exec_op.cc").write_text(exec_op)
            build_op(opdir)
            (opdir / ".built").write_text("ok")
    return opdir


def make_input(rank: int, count: int, dtype: str) -> np.ndarray:
    from hcomm_kit.jobs.runner import make_input as mk

    return mk(rank, count, dtype)


def expected(pattern: str, rank: int, size: int, count: int, dtype: str, reduce_op: str = "sum") -> np.ndarray:
    from hcomm_kit.ops import reference

    ins = [make_input(r, count, dtype) for r in range(size)]
    if pattern == "ring-allreduce":
        return reference.allreduce(ins, reduce_op, dtype)[rank]
    if pattern == "mesh-allgather":
        return reference.allgather(ins)[rank]
    if pattern == "p2p":
        return ins[(rank - 1) % size]
    return ins[rank]


# ---- single process ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def comm1():
    import hcomm_kit

    with hcomm_kit.init() as c:
        yield c


def test_init_single_process(comm1) -> None:
    assert (comm1.rank, comm1.size) == (0, 1)
    assert comm1.name and comm1.stream.handle
    comm1.barrier()
    assert "rank 0/1" in repr(comm1)


def test_close_and_context_manager() -> None:
    import hcomm_kit
    from hcomm_kit.base.errors import HcommKitError

    with hcomm_kit.init() as c:
        assert not c.closed
    assert c.closed
    c.close()  # idempotent
    with pytest.raises(HcommKitError, match="closed"):
        c.empty(4)


def test_device_buffer_roundtrip(comm1) -> None:
    x = np.arange(100, dtype=np.int16)
    buf = comm1.to_device(x)
    assert buf.shape == (100,) and buf.dtype.name == "int16" and buf.nbytes == 200
    np.testing.assert_array_equal(buf.numpy(), x)
    z = comm1.empty((2, 3), "fp32").fill_zero()
    np.testing.assert_array_equal(z.numpy(), np.zeros((2, 3), np.float32))
    assert buf.view(50, "int32").nbytes == 200


def test_closed_device_buffer_is_refused_before_any_launch(comm1) -> None:
    """A closed buffer's old address never reaches a kernel or a copy: each use names it (before,
    the kernel failed late with "src is NULL"), also after the repeated-call plans were made for it."""
    from hcomm_kit.base.errors import ConfigError

    x, y = comm1.to_device(np.arange(8, dtype=np.float32)), comm1.empty(8, "fp32")
    for _ in range(4):  # the plans of a repeated call (and the compiled helper's memo) exist now
        comm1.all_reduce(x, out=y)
    ring = comm1.load_op(scaffold("ring-allreduce"))
    x.close()
    assert x.closed and not y.closed
    closed = r"closed DeviceBuffer \(shape \(8,\), fp32\)"
    for call, who in [(lambda: comm1.all_reduce(x, out=y), "allreduce: the input"),
                      (lambda: comm1.all_reduce(y, out=x), "allreduce: out="),
                      (lambda: comm1.broadcast(x, root=0), "the input"),
                      (lambda: ring(x), "the input"), (lambda: ring(y, x), "the output"),
                      (x.numpy, "numpy"), (lambda: x.copy_from(np.ones(8, np.float32)), "copy_from"),
                      (x.fill_zero, "fill_zero"), (lambda: x.view(4), "view")]:
        with pytest.raises(ConfigError, match=closed) as info:
            call()
        assert who in str(info.value), info.value
    np.testing.assert_array_equal(comm1.all_reduce(y, out=y).numpy(), np.arange(8, dtype=np.float32))


def test_op_single_rank_and_argument_errors(comm1) -> None:
    from hcomm_kit.base.errors import ConfigError

    op = comm1.load_op(scaffold("ring-allreduce"))
    assert comm1.load_op(scaffold("ring-allreduce")) is op
    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(op(x), x)
    with pytest.raises(ConfigError, match="does not support dtype fp64"):
        op(x.astype(np.float64))
    with pytest.raises(ConfigError, match="does not support reduce op prod"):
        op(x, reduce_op="prod")
    with pytest.raises(ConfigError, match="no parameter 'alpha'"):
        op(x, alpha=1)
    with pytest.raises(ConfigError, match="output= must be a writable C-contiguous array of 10 fp32"):
        op(x, np.empty(3, np.float32))
    with pytest.raises(ConfigError, match="bf16"):
        op(x.view(np.uint16))
    ag = comm1.load_op(scaffold("mesh-allgather"))
    with pytest.raises(ConfigError, match="not a reduction"):
        ag(x, reduce_op="sum")


def test_soc_cannot_change_after_load(comm1) -> None:
    import hcomm_kit
    from hcomm_kit.base.errors import ConfigError

    other = "Ascend910_93" if comm1.soc.startswith("Ascend950") else "Ascend950"
    with pytest.raises(ConfigError, match="already loaded with SoC"):
        hcomm_kit.init(soc=other)


def test_timeout_names_op_rank_and_waits() -> None:
    """A kernel waiting on a slot nobody records -> OpTimeoutError with the emulator's account."""
    import hcomm_kit
    from hcomm_kit.base.errors import OpTimeoutError

    opdir = scaffold("empty", name="hang", exec_op=HANG_EXEC_OP, notifies=1)
    with hcomm_kit.init() as c:
        op = c.load_op(opdir)
        t0 = time.monotonic()
        with pytest.raises(OpTimeoutError) as info:
            op(np.ones(4, np.float32), timeout=1)
        assert time.monotonic() - t0 < 10
    err = info.value
    assert isinstance(err, TimeoutError) and err.op == "hang" and err.rank == 0 and err.timeout == 1
    assert "slot 1" in str(err) and "hang" in str(err)


def test_env_bootstrap_two_processes(tmp_path) -> None:
    """Non-MPI launcher: HCOMM_KIT_RANK / WORLD_SIZE / ROOT_INFO file."""
    opdir = scaffold("ring-allreduce")
    code = ("import numpy as np, hcomm_kit; c = hcomm_kit.init(); op = c.load_op(%r); "
            "y = op(np.full(5, c.rank + 1, np.int32)); assert (y == 3).all(), y; print('ok', c.rank, c.size)") % str(opdir)
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, HCOMM_KIT_RANK=str(r), HCOMM_KIT_WORLD_SIZE="2",
                                       HCOMM_KIT_ROOT_INFO=str(tmp_path / "root"))) for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert "ok 1 2" in outs[1]


def test_ascend950_personality(tmp_path) -> None:
    """Thread-notify runs on Ascend950 (2 ranks); acl-notify is refused with a clear error."""
    env = dict(os.environ, HCOMM_KIT_SOC="Ascend950")
    ok = subprocess.run([sys.executable, "-m", "hcomm_kit", "run", str(scaffold("mesh-allgather")), "--np", "2",
                         "--count", "33", "--iters", "2"], env=env, capture_output=True, text=True, timeout=180)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK" in ok.stdout
    code = "import hcomm_kit; c = hcomm_kit.init(); c.load_op(%r)" % str(scaffold("mesh-allgather", "acl-notify"))
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0
    assert "acl-notify handshake is unsupported on Ascend950" in bad.stderr


_UNCLOSED = """
import numpy as np, hcomm_kit
c = hcomm_kit.init()
subs = [c.split(k % 2) for k in range(5)] + [c.split(0).split(c.rank)]  # made in the same order everywhere
for s in subs:
    s.all_reduce(np.ones(4, np.float32))
print("rank", c.rank, "done", flush=True)
"""


@pytest.mark.slow  # a job of its own (7 s): the full run
def test_unclosed_communicators_close_at_exit_in_the_same_order_on_every_rank(tmp_path: Path) -> None:
    """Communicators left open are closed at exit, newest first on every rank: each close's barrier
    meets the other ranks' (in the order of a set, two ranks once closed two communicators in
    opposite orders and waited for each other at exit for ever)."""
    script = tmp_path / "unclosed.py"
    script.write_text(_UNCLOSED)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "3", "--timeout", "120", "--",
                           sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("done") == 3 and "closing without them" not in proc.stderr, proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 60, "the exit waited out a closing barrier"


# ---- multi-rank (one mpirun job per rank count) -------------------------------------------------
@pytest.mark.mpi(np=[pytest.param(2, marks=pytest.mark.slow), 3, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_init_split_close(comm, mpi_np) -> None:
    assert comm.size == mpi_np and 0 <= comm.rank < mpi_np
    comm.barrier()
    sub = comm.split(comm.rank % 2, key=-comm.rank)
    assert sub.size == len(range(comm.rank % 2, mpi_np, 2))
    assert sub.rank == sub.size - 1 - comm.rank // 2      # key = -rank reverses the order
    assert sub.name != comm.name
    sub.barrier()
    sub.close()
    assert sub.closed and not comm.closed


@pytest.mark.mpi(np=[2, 3, pytest.param(4, marks=pytest.mark.slow)])  # 4 ranks: the full run
@pytest.mark.parametrize("handshake", HANDSHAKES)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_patterns(comm, pattern: str, handshake: str) -> None:
    op = comm.load_op(scaffold(pattern, handshake))
    for count, dtype in ((1, "fp32"), (7, "int8"), (1031, "bf16"), (4099, "fp16")):
        if dtype not in op.spec.dtypes:
            continue
        out = op(make_input(comm.rank, count, dtype), dtype=dtype)
        np.testing.assert_array_equal(out, expected(pattern, comm.rank, comm.size, count, dtype))


@pytest.mark.mpi(np=[2, NP3_SLOW])
def test_reduce_ops_async_and_device_buffers(comm) -> None:
    op = comm.load_op(scaffold("ring-allreduce"))
    x = make_input(comm.rank, 61, "int32")
    for rop in op.spec.reduce_ops:
        np.testing.assert_array_equal(op(x, reduce_op=rop), expected("ring-allreduce", comm.rank, comm.size, 61,
                                                                     "int32", rop))
    work = op(x, async_op=True)
    out = work.wait()
    assert work.is_completed()
    np.testing.assert_array_equal(out, expected("ring-allreduce", comm.rank, comm.size, 61, "int32"))
    dev_in, dev_out = comm.to_device(x), comm.empty(61, "int32")
    assert op(dev_in, dev_out) is dev_out
    np.testing.assert_array_equal(dev_out.numpy(), out)
    host = np.empty(61, np.int32)
    assert op(x, host) is host and (host == out).all()
    w2 = op(x, async_op=True)
    op(x)  # waits for w2 first: pooled buffers are reused
    assert w2.is_completed()


@pytest.mark.mpi(np=[2, NP3_SLOW], env={"HCCL_BUFFSIZE": "1"})
@pytest.mark.parametrize("pattern", ["ring-allreduce", "mesh-allgather"])
def test_larger_than_hccl_buffer(comm, pattern: str) -> None:
    """HCCL_BUFFSIZE=1 (MB) for the job: the kernels slice through the buffer; a prime count."""
    op = comm.load_op(scaffold(pattern))
    count = 300007  # 1.2 MB of fp32
    out = op(make_input(comm.rank, count, "fp32"))
    assert op.resources().hccl_buffer_size == 1 << 20
    np.testing.assert_array_equal(out, expected(pattern, comm.rank, comm.size, count, "fp32"))
