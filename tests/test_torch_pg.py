"""The ``hcomm`` torch.distributed backend: every ProcessGroup op against ``gloo`` in the same job.

Each rank count runs in one mpirun job (plugin grouping): ``dist.init_process_group("hcomm")``
(env:// from the MPI launcher's variables, root info through the c10d store) plus a gloo group
over the same ranks; every op runs on both and the results must be equal. Data are small integers
stored in each dtype, so every reduction order gives the same bits and results compare exactly;
dtypes gloo cannot carry (int16, uint16/32/64) are checked against a local torch reference.
Reductions follow CANN's per-API table (hcomm_kit.base.dtypes.HCCL_API_REDUCE): A2 reduces int64 and
uses PRODUCT too (the built-ins compute what the Hcomm primitive cannot); a second job uses the
Ascend950 personality (fp64, uint64); the rest raise an error naming dtype, op and product.
"""

from __future__ import annotations

import datetime
import os
import re
import sys
import zlib

import pytest
import torch
import torch.distributed as dist

from hcomm_kit.core.bootstrap import under_mpi

A950 = {"HCOMM_KIT_SOC": "Ascend950"}
COUNTS = [1, 7, 1000, 65537]
DATA_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
               torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64, torch.bool]
A2_REDUCE = [torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int16, torch.int32, torch.int64]
A950_REDUCE = [torch.float64, torch.int64, torch.uint64, torch.float32, torch.bfloat16]
GLOO_DTYPES = {torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int32,
               torch.int64, torch.bool}
OPS = {"SUM": dist.ReduceOp.SUM, "MAX": dist.ReduceOp.MAX, "MIN": dist.ReduceOp.MIN,
       "PRODUCT": dist.ReduceOp.PRODUCT, "AVG": dist.ReduceOp.AVG}


def data(rank: int, count: int, dtype: torch.dtype, op: str = "SUM", seed: int = 0) -> torch.Tensor:
    """Rank ``rank``'s input: small integers, exact in every dtype for any reduction order."""
    g = torch.Generator().manual_seed(zlib.crc32(f"{rank} {count} {seed} {dtype} {op}".encode()))
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=g).bool()
    if op == "PRODUCT":
        v = torch.randint(1, 3, (count,), generator=g)
    elif not dtype.is_floating_point and not dtype.is_signed:
        v = torch.randint(0, 5, (count,), generator=g)
    else:
        v = torch.randint(-4, 5, (count,), generator=g)
    if op == "AVG" and dtype.is_floating_point:
        v = v * 4  # divisible by 4 ranks: the average is exact too
    return v.to(dtype)


def local_reduce(ins: list[torch.Tensor], op: str) -> torch.Tensor:
    """Reference reduction over ranks (int64 / float64 accumulation, cast back)."""
    acc = torch.stack([x.to(torch.float64 if x.is_floating_point() else torch.int64) for x in ins])
    out = {"SUM": lambda: acc.sum(0), "MAX": lambda: acc.max(0).values, "MIN": lambda: acc.min(0).values,
           "PRODUCT": lambda: acc.prod(0), "AVG": lambda: acc.sum(0) / len(ins)}[op]()
    return out.to(ins[0].dtype)


@pytest.fixture(scope="module")
def groups():
    """(hcomm world group, gloo group over the same ranks); None in the outer pytest process."""
    if not under_mpi():
        yield None
        return
    from mpi4py import MPI  # noqa: F401 - MPI up on every rank: a failing rank's MPI_Abort then ends the job
    import hcomm_kit.torch  # noqa: F401 - registers "hcomm", fills RANK/WORLD_SIZE/MASTER_* from mpirun

    dist.init_process_group("hcomm", timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    yield dist.group.WORLD, gloo
    dist.destroy_process_group()


def both(groups, fn) -> tuple:
    """Run ``fn(group)`` on hcomm and on gloo; return both results."""
    hc, gl = groups
    return fn(hc), fn(gl)


# ---- reductions -------------------------------------------------------------------------------
def _check_reductions(groups, dtypes, ops) -> None:
    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    from hcomm_kit.base.dtypes import hccl_api_reduces

    soc = os.environ.get("HCOMM_KIT_SOC", "Ascend910B")  # the job's product (default A2)
    for k, (dtype, op) in enumerate((d, o) for d in dtypes for o in ops):
        if op == "AVG" and not dtype.is_floating_point:
            continue
        if not hccl_api_reduces("HcclAllReduce", soc, str(dtype), "prod" if op == "PRODUCT" else
                                "sum" if op == "AVG" else op.lower()):
            continue  # CANN's table refuses it here (test_product_limits_name_dtype_and_product)
        if op == "PRODUCT" and n > 4:
            continue
        # two of the four counts per (dtype, op), one of the short pair and one of the long, in
        # turn: every count meets every dtype and op, at half the calls of the full product
        for count in (COUNTS[k % 2], COUNTS[2 + (k // 2) % 2]):
            ins = [data(q, count, dtype, op) for q in range(n)]
            want = local_reduce(ins, op)
            a, b = ins[r].clone(), ins[r].clone()
            dist.all_reduce(a, op=OPS[op], group=hc)
            torch.testing.assert_close(a, want, rtol=0, atol=0, msg=f"allreduce {dtype} {op} {count}")
            if dtype in GLOO_DTYPES:
                dist.all_reduce(b, op=OPS[op], group=gl)
                torch.testing.assert_close(a, b, rtol=0, atol=0, msg=f"vs gloo: allreduce {dtype} {op}")
            if op == "AVG":
                continue  # gloo has no AVG for reduce / reduce_scatter
            root = count % n
            a = ins[r].clone()
            dist.reduce(a, root, op=OPS[op], group=hc)
            if r == root:
                torch.testing.assert_close(a, want, rtol=0, atol=0, msg=f"reduce {dtype} {op} {count}")
            else:
                torch.testing.assert_close(a, ins[r], rtol=0, atol=0, msg="reduce changed a non-root input")
            big = [data(q, count * n, dtype, op, seed=1) for q in range(n)]
            want = local_reduce(big, op)[r * count:(r + 1) * count]
            out = torch.empty(count, dtype=dtype)
            dist.reduce_scatter_tensor(out, big[r], op=OPS[op], group=hc)
            torch.testing.assert_close(out, want, rtol=0, atol=0, msg=f"reduce_scatter {dtype} {op} {count}")
            outs = torch.empty(count, dtype=dtype)
            dist.reduce_scatter(outs, list(big[r].chunk(n)), op=OPS[op], group=hc)
            torch.testing.assert_close(outs, want, rtol=0, atol=0, msg=f"reduce_scatter list {dtype} {op}")


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_reductions_a2_vs_gloo(groups) -> None:
    _check_reductions(groups, A2_REDUCE, ["SUM", "MAX", "MIN", "PRODUCT", "AVG"])


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], env=A950, timeout=240)
def test_reductions_ascend950_every_op(groups) -> None:
    _check_reductions(groups, A950_REDUCE, ["SUM", "MAX", "MIN", "PRODUCT", "AVG"])


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_product_limits_name_dtype_and_product(groups) -> None:
    from hcomm_kit.base.errors import ConfigError

    hc, _ = groups
    for dtype, op in [(torch.float64, "SUM"), (torch.uint64, "MAX"), (torch.uint8, "SUM"), (torch.int16, "PRODUCT")]:
        with pytest.raises(ConfigError) as info:
            dist.all_reduce(torch.ones(4, dtype=dtype), op=OPS[op], group=hc)
        text = str(info.value)
        assert str(dtype) in text and "Ascend910B" in text and op in text and "HcclAllReduce" in text, text
    with pytest.raises(NotImplementedError, match="BAND"):
        dist.all_reduce(torch.ones(4, dtype=torch.int32), op=dist.ReduceOp.BAND, group=hc)
    with pytest.raises(NotImplementedError, match="recv_anysource"):
        dist.recv(torch.empty(4), group=hc)
    with pytest.raises(NotImplementedError, match="monitored_barrier"):
        hc.monitored_barrier()  # dist.monitored_barrier itself refuses every backend but gloo
    with pytest.raises(TypeError, match="complex"):
        hc.broadcast([torch.ones(2, dtype=torch.complex64)])
    dist.barrier(group=hc)  # still usable after refused calls


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_premul_sum_and_coalesced(groups) -> None:
    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    for count in COUNTS:
        x = data(r, count, torch.float32)
        a = x.clone()
        dist.all_reduce(a, op=dist.ReduceOp.PREMUL_SUM(0.25), group=hc)
        b = x * 0.25
        dist.all_reduce(b, group=gl)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        big = data(r, count * n, torch.float32, seed=2)
        out = torch.empty(count)
        dist.reduce_scatter_tensor(out, big, op=dist.ReduceOp.PREMUL_SUM(torch.tensor([0.5])), group=hc)
        ref = torch.empty(count)
        dist.reduce_scatter_tensor(ref, big * 0.5, group=gl)
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
        torch.testing.assert_close(big, data(r, count * n, torch.float32, seed=2), msg="PREMUL_SUM changed the input")
    ts = [data(r, c, dt) for c, dt in [(5, torch.float32), (9, torch.int32), (3, torch.float32)]]
    hc.allreduce_coalesced([t.clone() for t in ts]).wait()
    got = [t.clone() for t in ts]
    hc.allreduce_coalesced(got).wait()
    for t, g in zip(ts, got):
        ref = t.clone()
        dist.all_reduce(ref, group=gl)
        torch.testing.assert_close(g, ref, rtol=0, atol=0)


# ---- data movement ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_data_movement_every_dtype_vs_gloo(groups) -> None:
    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    for dtype in DATA_DTYPES:
        for count in COUNTS:
            ins = [data(q, count, dtype, seed=3) for q in range(n)]
            gl_ok = dtype in GLOO_DTYPES
            root = (count + 1) % n
            # broadcast
            a = ins[r].clone()
            dist.broadcast(a, root, group=hc)
            torch.testing.assert_close(a, ins[root], rtol=0, atol=0, msg=f"broadcast {dtype} {count}")
            # all_gather_into_tensor and all_gather (list)
            out = torch.empty(count * n, dtype=dtype)
            dist.all_gather_into_tensor(out, ins[r], group=hc)
            want = torch.cat(ins)
            torch.testing.assert_close(out, want, rtol=0, atol=0, msg=f"all_gather_into_tensor {dtype} {count}")
            if gl_ok:
                ref = torch.empty(count * n, dtype=dtype)
                dist.all_gather_into_tensor(ref, ins[r], group=gl)
                torch.testing.assert_close(out, ref, rtol=0, atol=0)
            outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, ins[r], group=hc)
            torch.testing.assert_close(torch.cat(outs), want, rtol=0, atol=0, msg=f"all_gather {dtype} {count}")
            # gather / scatter
            g = [torch.empty(count, dtype=dtype) for _ in range(n)] if r == root else None
            dist.gather(ins[r], g, dst=root, group=hc)
            if r == root:
                torch.testing.assert_close(torch.cat(g), want, rtol=0, atol=0, msg=f"gather {dtype} {count}")
            s = torch.empty(count, dtype=dtype)
            blocks = [data(q, count, dtype, seed=4) for q in range(n)]
            dist.scatter(s, blocks if r == root else None, src=root, group=hc)
            torch.testing.assert_close(s, blocks[r], rtol=0, atol=0, msg=f"scatter {dtype} {count}")
            # all_to_all_single, equal blocks
            x = data(r, count * n, dtype, seed=5)
            y = torch.empty_like(x)
            dist.all_to_all_single(y, x, group=hc)
            want = torch.cat([data(q, count * n, dtype, seed=5)[r * count:(r + 1) * count] for q in range(n)])
            torch.testing.assert_close(y, want, rtol=0, atol=0, msg=f"all_to_all_single {dtype} {count}")
            if gl_ok:
                ref = torch.empty_like(x)
                dist.all_to_all_single(ref, x, group=gl)
                torch.testing.assert_close(y, ref, rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_uneven_all_to_all_and_views_vs_gloo(groups) -> None:
    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    # uneven rows: rank i sends (i + j) % 3 rows of 5 elements to rank j (some empty)
    send = [(r + j) % 3 for j in range(n)]
    recv = [(i + r) % 3 for i in range(n)]
    x = data(r, sum(send) * 5, torch.float32, seed=6).view(-1, 5)
    outs = []
    for g in (hc, gl):
        y = torch.full((sum(recv), 5), -1.0)
        dist.all_to_all_single(y, x, recv, send, group=g)
        outs.append(y)
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    # all_to_all with a list of tensors: equal sizes against gloo (gloo needs them equal) ...
    ins = [data(r, 9, torch.int32, seed=7 + j) for j in range(n)]
    res = []
    for g in (hc, gl):
        o = [torch.empty(9, dtype=torch.int32) for _ in range(n)]
        dist.all_to_all(o, ins, group=g)
        res.append(o)
    for a, b in zip(*res):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # ... and different sizes (rank i sends i + j + 1 elements to rank j) against the senders' data
    ins = [data(r, r + j + 1, torch.int32, seed=7) for j in range(n)]
    o = [torch.empty(i + r + 1, dtype=torch.int32) for i in range(n)]
    dist.all_to_all(o, ins, group=hc)
    for i in range(n):
        torch.testing.assert_close(o[i], data(i, i + r + 1, torch.int32, seed=7), rtol=0, atol=0)
    res = []
    # non-contiguous tensors (a transposed view and a strided slice): results land in the view
    base = data(r, 6 * 4, torch.float32, seed=8).view(6, 4)
    for g in (hc, gl):
        t = base.clone().t()
        assert not t.is_contiguous()
        dist.all_reduce(t, group=g)
        res.append(t)
    torch.testing.assert_close(res[-2], res[-1], rtol=0, atol=0)
    strided = torch.zeros(20)
    view = strided[::2]
    dist.broadcast(view, 0, group=hc) if r else dist.broadcast(view.copy_(torch.arange(10.0)), 0, group=hc)
    torch.testing.assert_close(strided[::2], torch.arange(10.0), rtol=0, atol=0)
    torch.testing.assert_close(strided[1::2], torch.zeros(10), rtol=0, atol=0)
    # the staging path (what a runtime without aclrtHostRegister gets): same results
    hc._zero_copy = False
    try:
        from hcomm_kit.torch import registration_stats

        before = registration_stats()
        a, b = data(r, 1001, torch.bfloat16, seed=11), data(r, 1001, torch.bfloat16, seed=11)
        dist.all_reduce(a, group=hc)
        dist.all_reduce(b, group=gl)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        out = torch.empty(n * 1001, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(out, a, group=hc)
        torch.testing.assert_close(out, a.repeat(n), rtol=0, atol=0)
        after = registration_stats()
        assert after["staged"] >= before["staged"] + 3 and after["registered"] == before["registered"], after
    finally:
        hc._zero_copy = True
    # all_gather_into_tensor whose input is this rank's block of the output (FSDP2's layout)
    out = torch.zeros(n * 33)
    mine = out.narrow(0, r * 33, 33)
    mine.copy_(data(r, 33, torch.float32, seed=9))
    dist.all_gather_into_tensor(out, mine, group=hc)
    torch.testing.assert_close(out, torch.cat([data(q, 33, torch.float32, seed=9) for q in range(n)]),
                               rtol=0, atol=0)


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 4], timeout=240)
def test_p2p_barrier_async_and_subgroups(groups) -> None:
    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    # ring of send/recv: even ranks send first, odd ranks receive first
    x = data(r, 1001, torch.bfloat16, seed=10)
    y = torch.empty_like(x)
    nxt, prv = (r + 1) % n, (r - 1) % n
    if r % 2 == 0:
        dist.send(x, nxt, group=hc)
        dist.recv(y, prv, group=hc)
    else:
        dist.recv(y, prv, group=hc)
        dist.send(x, nxt, group=hc)
    torch.testing.assert_close(y, data(prv, 1001, torch.bfloat16, seed=10), rtol=0, atol=0)
    # isend / irecv and Work.source_rank
    if r == 0:
        w = dist.irecv(y, n - 1, group=hc)
        w.wait()
        torch.testing.assert_close(y, data(n - 1, 1001, torch.bfloat16, seed=10), rtol=0, atol=0)
    elif r == n - 1:
        dist.isend(x, 0, group=hc).wait()
    dist.barrier(group=hc)
    # async: the Work's future completes on its own and carries the output tensors; then-chains work
    t = torch.full((1000,), float(r + 1))
    work = dist.all_reduce(t, async_op=True, group=hc)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    assert fut.wait()[0].item() == 2 * n * (n + 1) / 2
    assert work.is_completed() and work.is_success()
    assert work.wait(timeout=datetime.timedelta(seconds=30))
    # many async calls in flight, completed in issue order
    ts = [torch.full((257,), float(i + r)) for i in range(8)]
    works = [dist.all_reduce(t, async_op=True, group=hc) for t in ts]
    torch.futures.wait_all([w.get_future() for w in works])
    for i, t in enumerate(ts):
        assert t[0].item() == n * i + n * (n - 1) / 2
    # subgroups: even and odd ranks (new_group is collective over the world)
    evens, odds = list(range(0, n, 2)), list(range(1, n, 2))
    ge = dist.new_group(evens, backend="hcomm")
    go = dist.new_group(odds, backend="hcomm")
    mine = ge if r % 2 == 0 else go
    ranks = evens if r % 2 == 0 else odds
    t = torch.full((100,), float(r))
    dist.all_reduce(t, group=mine)
    assert t[0].item() == sum(ranks)
    assert dist.get_backend(mine) == "hcomm" and mine.size() == len(ranks)
    # split off the world's communicator by the members only (HcclCreateSubCommConfig), no bootstrap
    assert mine.comm.name.startswith(hc.comm.name + "_sub"), (mine.comm.name, hc.comm.name)
    # the world group still works after subgroups were made
    t = torch.ones(3)
    dist.all_reduce(t, group=hc)
    assert t.tolist() == [float(n)] * 3


@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow)], timeout=240)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_collectives_run_asynchronously_and_wait_honours_its_timeout(groups) -> None:
    """A collective returns once enqueued (the caller computes while it runs, as FSDP2's prefetch
    needs); ``wait(timeout)`` gives up after ``timeout`` with an error naming it, the group then
    refuses further collectives, and its tensors stay held until the group is shut down."""
    import time

    import hcomm_kit
    from hcomm_kit.base.errors import OpTimeoutError, ProcessGroupError
    from hcomm_kit.torch import registration_stats

    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    x = data(r, 4099, torch.float32, seed=3)
    out, want = torch.empty(n * 4099), torch.empty(n * 4099)
    dist.all_gather_into_tensor(out, x, group=hc)  # channels set up: later calls only enqueue
    dist.all_gather_into_tensor(want, x, group=gl)
    out.zero_()
    if r != 0:
        time.sleep(0.5)  # rank 0's all-gather cannot finish before the others join
    t0 = time.monotonic()
    work = dist.all_gather_into_tensor(out, x, group=hc, async_op=True)
    if r == 0:
        assert time.monotonic() - t0 < 0.4 and not work.is_completed()
    work.wait()
    torch.testing.assert_close(out, want, rtol=0, atol=0)

    g = dist.new_group(backend="hcomm")
    t = torch.ones(1000)
    dist.all_reduce(t, group=g)
    if r == 0:
        with hcomm_kit.same_call("late"):  # the same call as the others' below (another line)
            work = dist.all_reduce(t, group=g, async_op=True)
        t0 = time.monotonic()
        with pytest.raises(OpTimeoutError, match=r"within the 0.3 s of Work.wait\(timeout=...\) on rank 0"):
            work.wait(timeout=datetime.timedelta(seconds=0.3))
        assert 0.25 < time.monotonic() - t0 < 5 and work.is_completed() and not work.is_success()
        with pytest.raises(ProcessGroupError, match="failed earlier"):
            dist.all_reduce(torch.ones(3), group=g)
        assert registration_stats()["live"] >= 1  # the in-flight kernel may still use t
    else:
        time.sleep(1.5)  # rank 0's wait(timeout=0.3) expires first
        with hcomm_kit.same_call("late"):
            dist.all_reduce(t, group=g)
    dist.barrier(group=hc)
    assert type(g).__name__ == "ProcessGroupHcomm"  # torch keeps the backend's ProcessGroup itself
    g.abort()
    assert registration_stats()["live"] == 0


@pytest.mark.mpi(np=[2], timeout=240)
def test_rank_branches_pass_and_a_skipped_collective_fails_naming_the_users_lines(groups) -> None:
    """Ranks making one collective from different lines (rank-0 branches of a training script) get
    gloo's results; a rank that skips a torch.distributed collective and goes on fails on both ranks
    once their calls differ (here at its next call, a barrier), naming this file's lines of the call
    it skipped (the first frames outside torch and hcomm-kit), never a silent sum of the wrong tensors."""
    hc, gl = groups
    r = dist.get_rank()
    g = dist.new_group(backend="hcomm")
    t, ref = torch.full((10,), float(r + 1)), torch.full((10,), float(r + 1))
    for group, x in ((g, t), (gl, ref)):
        if r == 0:
            dist.all_reduce(x, group=group)
            dist.broadcast(x, 0, group=group)
        else:
            dist.all_reduce(x, group=group)
            dist.broadcast(x, 0, group=group)
    torch.testing.assert_close(t, ref, rtol=0, atol=0)
    line = sys._getframe().f_lineno + 3
    with pytest.raises(Exception) as info:
        if r != 1:
            dist.all_reduce(torch.ones(100), group=g)
        dist.all_reduce(torch.full((100,), 2.0), group=g)
        dist.barrier(group=g)
    text = str(info.value)
    assert "with the same arguments from different lines" in text and "a rank skipped a call" in text, text
    assert re.search(rf"rank 0: all_reduce\(count=100, dtype=fp32, op=sum\) at \S*test_torch_pg\.py:{line}\b", text)
    assert re.search(rf"rank 1: all_reduce\(count=100, dtype=fp32, op=sum\) at \S*test_torch_pg\.py:{line + 1}\b",
                     text)
    g.abort()


@pytest.mark.mpi(np=[2], timeout=240)
def test_smoke_zero_copy_allreduce_allgather_vs_gloo(groups) -> None:
    """The quick run's torch test: contiguous tensors are passed by pointer (registered with
    aclrtHostRegister, never staged), results equal gloo's."""
    from hcomm_kit.torch import registration_stats

    hc, gl = groups
    r, n = dist.get_rank(), dist.get_world_size()
    before = registration_stats()
    t, ref = data(r, 1 << 16, torch.float32), data(r, 1 << 16, torch.float32)
    dist.all_reduce(t, group=hc)
    dist.all_reduce(ref, group=gl)
    torch.testing.assert_close(t, ref, rtol=0, atol=0)
    out, want = torch.empty(n << 16), torch.empty(n << 16)
    dist.all_gather_into_tensor(out, t, group=hc)
    dist.all_gather_into_tensor(want, t, group=gl)
    torch.testing.assert_close(out, want, rtol=0, atol=0)
    after = registration_stats()
    assert after["registered"] >= before["registered"] + 2 and after["staged"] == before["staged"], after
    assert after["live"] == 0  # every registration is released when the collective ends
    # The list forms stage through reused tensors: two in flight at once never share one.
    xs = [data(r, 4097, torch.float32, seed=s) for s in range(3)]
    got = [[torch.empty(4097) for _ in range(n)] for _ in xs]
    works = [dist.all_gather(g_, x_, group=hc, async_op=True) for g_, x_ in zip(got, xs)]
    for w in works:
        w.wait()
    dist.all_gather(got[0], xs[0], group=hc)  # a staging tensor of the calls above, reused
    for g_, x_ in zip(got, xs):
        want_ = [torch.empty(4097) for _ in range(n)]
        dist.all_gather(want_, x_, group=gl)
        for a, b in zip(g_, want_):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    # int64 SUM (DDP counters, metrics) on A2, which CANN's HcclAllReduce accepts: the built-in
    # computes it (HcommLocalReduceOnThread cannot); values wrap like torch's int64 arithmetic.
    big = torch.tensor([2**62, -(2**62), 2**63 - 1, 12345], dtype=torch.int64) + r
    a, b = big.clone(), big.clone()
    dist.all_reduce(a, group=hc)
    dist.all_reduce(b, group=gl)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(a, torch.stack([big - r + q for q in range(n)]).sum(0), rtol=0, atol=0)


def test_launcher_env_from_open_mpi() -> None:
    """env:// variables for ranks of mpirun / hcomm-kit launch; never overrides what is set."""
    from hcomm_kit.torch._env import launcher_env

    ompi = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "PMIX_NAMESPACE": "prterun-host-123@1"}
    env = launcher_env(ompi)
    assert env["RANK"] == "3" and env["WORLD_SIZE"] == "4" and env["LOCAL_RANK"] == "1"
    assert env["LOCAL_WORLD_SIZE"] == "4" and env["MASTER_ADDR"] == "127.0.0.1"
    assert 20000 <= int(env["MASTER_PORT"]) < 30000
    assert launcher_env({**ompi, "PMIX_NAMESPACE": "prterun-host-123@1"})["MASTER_PORT"] == env["MASTER_PORT"]
    assert launcher_env({**ompi, "PMIX_NAMESPACE": "prterun-host-456@1"})["MASTER_PORT"] != env["MASTER_PORT"]
    # set variables win; a multi-node job (local size < world size) gets no MASTER_ADDR guess
    kept = launcher_env({**ompi, "MASTER_PORT": "1234", "LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert "MASTER_PORT" not in kept and "LOCAL_RANK" not in kept and "MASTER_ADDR" not in kept
    assert launcher_env({**ompi, "RANK": "0", "WORLD_SIZE": "4"}) == {}  # torchrun's
    assert launcher_env({}) == {}  # not under a launcher


@pytest.mark.slow
@pytest.mark.mpi(np=[2], timeout=240)
def test_first_collective_fails_within_the_group_timeout_for_a_late_rank(groups) -> None:
    """The first collective of a group sets up its channels: a rank that is late by more than the
    group's timeout fails it within that timeout (as gloo does), not after HCCL_CONNECT_TIMEOUT."""
    import time

    from hcomm_kit.base.errors import HcommKitError

    hc, _ = groups
    r = dist.get_rank()
    g = dist.new_group(backend="hcomm", timeout=datetime.timedelta(seconds=2))
    t0 = time.monotonic()
    if r == 0:
        with pytest.raises(HcommKitError, match=r"rank\(s\) 1 .*within the communicator's connect timeout of 2 s"):
            dist.all_reduce(torch.ones(10), group=g)
        assert time.monotonic() - t0 < 8  # HCCL_CONNECT_TIMEOUT is 120 s
    else:
        time.sleep(5)
        with pytest.raises(HcommKitError):  # rank 0 gave up: this rank fails too, never hangs
            dist.all_reduce(torch.ones(10), group=g)
        assert time.monotonic() - t0 < 15
    dist.barrier(group=hc)
    g.abort()
