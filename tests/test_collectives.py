"""The built-in collectives (aicpu_kernels/ + hcomm_kit.ops.collectives) against numpy and mpi4py.

Data are small integers stored in each dtype, so every reduction order gives the same bits and
results compare exactly (one test also uses random floats, for run-to-run and cross-rank
bit-identity). Each rank count runs in one mpirun job per environment (plugin grouping):
  * every product: CANN's per-API dtype x reduce-op table (hcomm_kit.base.dtypes.HCCL_API_REDUCE), each
    accepted combination against numpy and each refused one refused (A2 in the quick run, A3 and 950
    too), at small counts and at 1 MiB + 4 bytes with a 1 MB HCCL buffer (A2: int64 and prod are
    computed by the built-ins themselves, the Hcomm primitive cannot);
  * HCCL_BUFFSIZE=1 (MB): messages larger than the HCCL buffer (sliced, tails);
  * the default A2 personality: the product gate, errors, async, in-place, algorithms, HCCL_ALGO.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from hcomm_kit.base import dtypes as D
from hcomm_kit.base.errors import ConfigError, HcommKitError
from hcomm_kit.ops import reference

ALL_DTYPES = [d.name for d in D.DTYPES]
REDUCE_OPS = ["sum", "prod", "max", "min"]
SMALL_COUNTS = [0, 1, 7, 37]
A950 = {"HCOMM_KIT_SOC": "Ascend950"}
SMALL_BUF = {"HCCL_BUFFSIZE": "1"}
NP8 = pytest.param(8, marks=pytest.mark.slow)  # the 8-rank matrices: full suite only
NP4 = pytest.param(4, marks=pytest.mark.slow)  # big matrices: 2 and 3 ranks in the quick run, 1 and 4 in the
NP1 = pytest.param(1, marks=pytest.mark.slow)  # full one too (test_api_forms covers 1 rank in the quick run)
NP3 = pytest.param(3, marks=pytest.mark.slow)  # 3 ranks: the full run (the quick one runs 2, and 3 or 4 for a few)


def data(rank: int, count: int, dtype: str, rop: str = "sum", seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: exact in every dtype for any reduction order (prod: {1, 2})."""
    dt = D.get_dtype(dtype)
    rng = np.random.default_rng([rank, count, seed, dt.value])
    if rop == "prod":
        v = rng.integers(1, 3, count)
    elif dt.numpy.kind == "u" and dt.name != "bf16":
        v = rng.integers(0, 5, count)
    else:
        v = rng.integers(-4, 5, count)
    return D.float32_to_bf16_bits(v.astype(np.float32)) if dt.name == "bf16" else v.astype(dt.numpy)


def all_data(size: int, count: int, dtype: str, rop: str = "sum", seed: int = 0) -> list[np.ndarray]:
    return [data(r, count, dtype, rop, seed) for r in range(size)]


#: The built-ins and the HCCL API whose row of the dtype table they follow.
API_OF = {"allreduce": "HcclAllReduce", "reduce": "HcclReduce", "reduce_scatter": "HcclReduceScatter"}
A3 = {"HCOMM_KIT_SOC": "Ascend910_93"}
NP2_SLOW = pytest.param(2, marks=pytest.mark.slow)


def table(comm, api: str = "HcclAllReduce") -> list[tuple[str, str]]:
    """(dtype, op) pairs CANN's ``api`` accepts on this communicator's product, in table order."""
    ops = D.HCCL_API_REDUCE[api][comm.device.soc]
    return [(d, op) for d in ALL_DTYPES for op in REDUCE_OPS if d in ops.get(op, ())]


def prod_ok(dtype: str, size: int) -> bool:
    """2**size must fit the dtype exactly (else the reference itself overflows)."""
    limit = {"int8": 6, "uint8": 7, "fp16": 10, "bf16": 7}.get(dtype, 14)
    return size <= limit


# ---- CANN's table, per product: every accepted combination right, every other one refused ------
def _reductions_per_table(comm) -> None:
    n, r = comm.size, comm.rank
    for name, api in API_OF.items():
        assert table(comm, api) == table(comm), f"{api} differs from HcclAllReduce: test every API separately"
    accepted = table(comm)
    assert accepted, comm.device.soc
    for dtype, rop in accepted:
        if rop == "prod" and not prod_ok(dtype, n):
            continue
        for count in SMALL_COUNTS:
            ins = all_data(n, count, dtype, rop)
            want = reference.reduce(ins, rop, dtype)
            got = comm.all_reduce(ins[r], rop, dtype=dtype)
            np.testing.assert_array_equal(got, want, err_msg=f"allreduce {dtype} {rop} count {count}")
            root = count % n
            got = comm.reduce(ins[r], root, rop, dtype=dtype)
            if r == root:
                np.testing.assert_array_equal(got, want, err_msg=f"reduce {dtype} {rop} {count} root {root}")
            else:
                assert got is None
            ins = all_data(n, count * n, dtype, rop)
            got = comm.reduce_scatter(ins[r], rop, dtype=dtype)
            np.testing.assert_array_equal(got, reference.reduce_scatter(ins, rop, dtype)[r],
                                          err_msg=f"reduce_scatter {dtype} {rop} count {count}")
    for dtype in ALL_DTYPES:
        for rop in REDUCE_OPS:
            if (dtype, rop) in accepted:
                continue
            x = data(r, 4 * n, dtype)
            for call in (lambda: comm.all_reduce(x, rop, dtype=dtype), lambda: comm.reduce(x, 0, rop, dtype=dtype),
                         lambda: comm.reduce_scatter(x, rop, dtype=dtype)):
                with pytest.raises(ConfigError, match=f"does not reduce {dtype} with {rop} on {comm.device.soc}"):
                    call()


@pytest.mark.mpi(np=[NP1, 2, NP3, NP4, NP8], env=A950, timeout=600)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_reductions_every_dtype_and_op(comm) -> None:
    _reductions_per_table(comm)


@pytest.mark.mpi(np=[2, NP3, NP4], timeout=600)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_reductions_per_table_a2(comm) -> None:
    """A2 (default): int64 and prod, which HcommLocalReduceOnThread refuses, computed by the built-ins."""
    _reductions_per_table(comm)


@pytest.mark.mpi(np=[NP2_SLOW, NP3], env=A3, timeout=600)
def test_reductions_per_table_a3(comm) -> None:
    _reductions_per_table(comm)


@pytest.mark.mpi(np=[NP1, 2, NP3, NP4, NP8], env=A950, timeout=600)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_data_movement_every_dtype(comm) -> None:
    n, r = comm.size, comm.rank
    for dtype in ALL_DTYPES:
        for count in SMALL_COUNTS:
            ins = all_data(n, count, dtype)
            np.testing.assert_array_equal(comm.all_gather(ins[r], dtype=dtype), reference.allgather(ins)[r])
            root = (count + 1) % n
            np.testing.assert_array_equal(comm.broadcast(ins[r], root, dtype=dtype), ins[root])
            got = comm.gather(ins[r], root, dtype=dtype)
            if r == root:
                np.testing.assert_array_equal(got, reference.gather(ins, root)[root])
            else:
                assert got is None
            blocks = all_data(n, count * n, dtype, seed=1)
            np.testing.assert_array_equal(comm.all_to_all(blocks[r], dtype=dtype), reference.alltoall(blocks)[r])
            np.testing.assert_array_equal(comm.scatter(blocks[r], root, dtype=dtype),
                                          reference.scatter(blocks, root)[r])


# ---- a staged reduction's drain ends only on its own copy -----------------------------------------
@pytest.mark.mpi(np=[2, NP3], env={**SMALL_BUF, "HCOMM_KIT_FAULT_COPY_RESTORE_US": "1000"}, timeout=120)
def test_staged_drain_is_not_ended_by_a_late_store(comm, mpi_np) -> None:
    """A2 int64 / prod reductions are combined in the kernel after HkDrain, which waits for a token
    the thread copies last. With every small copy storing its bytes again 1 ms later (as glibc's
    8-byte memmove stores twice), a drain that shared its flag word with the previous one ended at
    that late store, before its own Read ran: slices of the result silently lacked a rank's data."""
    n, r = comm.size, comm.rank
    count = 2 * 65520 + 17  # two 1 MB-buffer slices and a tail
    for rop, dtype in (("sum", "int64"), ("prod", "fp32")):
        ins = all_data(n, count, dtype, rop, seed=5)
        want = reference.reduce(ins, rop, dtype)
        np.testing.assert_array_equal(comm.all_reduce(ins[r], rop, dtype=dtype), want)
        got = comm.reduce(ins[r], n - 1, rop, dtype=dtype)
        if r == n - 1:
            np.testing.assert_array_equal(got, want)


# ---- larger than the HCCL buffer (1 MB): slicing and tails --------------------------------------
@pytest.mark.mpi(np=[2, NP3, NP4, NP8], env=SMALL_BUF, timeout=300)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_larger_than_hccl_buffer(comm, mpi_np) -> None:
    n, r = comm.size, comm.rank
    sizes = [(1 << 20) + 4, 5 * (1 << 19) + 12] if mpi_np <= 4 else [(1 << 20) + 4]
    for dtype in ("fp32", "int8", "bf16"):
        item = D.get_dtype(dtype).itemsize
        for nbytes in sizes:
            count = nbytes // item
            ins = all_data(n, count, dtype)
            np.testing.assert_array_equal(comm.all_reduce(ins[r], dtype=dtype), reference.reduce(ins, "sum", dtype))
            np.testing.assert_array_equal(comm.all_reduce(ins[r], "max", dtype=dtype, algorithm="mesh"),
                                          reference.reduce(ins, "max", dtype))
            np.testing.assert_array_equal(comm.broadcast(ins[r], n - 1, dtype=dtype), ins[n - 1])
            got = comm.reduce(ins[r], 0, dtype=dtype)
            if r == 0:
                np.testing.assert_array_equal(got, reference.reduce(ins, "sum", dtype))
            per = max(1, count // n)
            blocks = all_data(n, per * n, dtype, seed=2)
            np.testing.assert_array_equal(comm.reduce_scatter(blocks[r], dtype=dtype),
                                          reference.reduce_scatter(blocks, "sum", dtype)[r])
            np.testing.assert_array_equal(comm.all_to_all(blocks[r], dtype=dtype), reference.alltoall(blocks)[r])
            np.testing.assert_array_equal(comm.scatter(blocks[r], 1 % n, dtype=dtype),
                                          reference.scatter(blocks, 1 % n)[r])
            small = all_data(n, per, dtype, seed=3)
            np.testing.assert_array_equal(comm.all_gather(small[r], dtype=dtype), reference.allgather(small)[r])
            if dtype == "int8":  # A2 staged reductions (the primitive refuses int64 / prod), sliced
                for sdt, srop in (("int64", "sum"), ("int64", "min"), ("fp32", "prod")):
                    big = all_data(n, per * n, sdt, srop, seed=4)
                    want = reference.reduce(big, srop, sdt)
                    np.testing.assert_array_equal(comm.all_reduce(big[r], srop, dtype=sdt), want)
                    got = comm.reduce(big[r], n - 1, srop, dtype=sdt)
                    if r == n - 1:
                        np.testing.assert_array_equal(got, want)
                    np.testing.assert_array_equal(comm.reduce_scatter(big[r], srop, dtype=sdt),
                                                  reference.reduce_scatter(big, srop, sdt)[r])
            got = comm.gather(small[r], n - 1, dtype=dtype)
            if r == n - 1:
                np.testing.assert_array_equal(got, reference.gather(small, n - 1)[r])


# ---- against mpi4py, algorithms, bit-identity, back-to-back mixing ------------------------------
@pytest.mark.mpi(np=[NP1, 2, NP3, NP4, NP8], env={**A950, **SMALL_BUF}, timeout=600)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_every_dtype_and_op_past_the_hccl_buffer(comm) -> None:
    """1 MiB + 4 bytes per rank (rounded up to whole elements) with a 1 MB HCCL buffer: every
    collective x dtype x reduce op runs sliced, with a tail. At 8 ranks one dtype per element size
    (the slicing depends on the size and the rank count; every dtype runs at 1-4 ranks)."""
    n, r = comm.size, comm.rank
    accepted = table(comm)
    for dtype in ALL_DTYPES if n < 8 else ("int8", "bf16", "fp32", "int64"):
        item = D.get_dtype(dtype).itemsize
        count = -(-((1 << 20) + 4) // item)
        for rop in REDUCE_OPS:
            if (dtype, rop) not in accepted or rop == "prod" and not prod_ok(dtype, n):
                continue
            ins = all_data(n, count, dtype, rop)
            want = reference.reduce(ins, rop, dtype)
            np.testing.assert_array_equal(comm.all_reduce(ins[r], rop, dtype=dtype), want,
                                          err_msg=f"allreduce {dtype} {rop}")
            got = comm.reduce(ins[r], n - 1, rop, dtype=dtype)
            if r == n - 1:
                np.testing.assert_array_equal(got, want, err_msg=f"reduce {dtype} {rop}")
            per = -(-count // n)
            blocks = all_data(n, per * n, dtype, rop, seed=1)
            np.testing.assert_array_equal(comm.reduce_scatter(blocks[r], rop, dtype=dtype),
                                          reference.reduce_scatter(blocks, rop, dtype)[r],
                                          err_msg=f"reduce_scatter {dtype} {rop}")
        ins = all_data(n, count, dtype, seed=2)
        np.testing.assert_array_equal(comm.all_gather(ins[r], dtype=dtype), reference.allgather(ins)[r])
        np.testing.assert_array_equal(comm.broadcast(ins[r], n // 2, dtype=dtype), ins[n // 2])
        got = comm.gather(ins[r], 0, dtype=dtype)
        if r == 0:
            np.testing.assert_array_equal(got, reference.gather(ins, 0)[0])
        per = -(-count // n)
        blocks = all_data(n, per * n, dtype, seed=3)
        np.testing.assert_array_equal(comm.all_to_all(blocks[r], dtype=dtype), reference.alltoall(blocks)[r])
        np.testing.assert_array_equal(comm.scatter(blocks[r], n - 1, dtype=dtype),
                                      reference.scatter(blocks, n - 1)[r])


@pytest.mark.mpi(np=[2, NP3, NP4, NP8], env=A950)
def test_against_mpi4py(comm) -> None:
    from mpi4py import MPI

    mc = comm.mpi_comm
    n, r = comm.size, comm.rank
    for dtype in ("int32", "fp32", "fp64", "int8"):
        for count in (1, 7, 1000, 65537):
            x = data(r, count, dtype)
            ref = np.empty_like(x)
            mc.Allreduce(x, ref, MPI.SUM)
            for algo in ("AicpuAllReduceSoleMeshTwoShot", "AicpuAllReduceSoleNHR", "mesh"):
                np.testing.assert_array_equal(comm.all_reduce(x, algorithm=algo), ref, err_msg=f"{algo} {count}")
            ref = np.empty(count * n, x.dtype)
            mc.Allgather(x, ref)
            for algo in ("AicpuAllGatherSoleNHR", "mesh"):
                np.testing.assert_array_equal(comm.all_gather(x, algorithm=algo), ref)
            xb = data(r, count * n, dtype, seed=5)
            ref = np.empty(count, x.dtype)
            mc.Reduce_scatter_block(xb, ref, MPI.SUM)
            for algo in ("AicpuReduceScatterSoleMeshChunk", "AicpuReduceScatterSoleNHR", "mesh"):
                np.testing.assert_array_equal(comm.reduce_scatter(xb, algorithm=algo), ref)
            ref = np.empty_like(xb)
            mc.Alltoall(xb, ref)
            np.testing.assert_array_equal(comm.all_to_all(xb, algorithm="AicpuAllToAllSoleMesh"), ref)
            ref = x.copy()
            mc.Bcast(ref, root=n - 1)
            np.testing.assert_array_equal(comm.broadcast(x, n - 1), ref)


@pytest.mark.mpi(np=[2, NP3, NP4], env=A950)
def test_bit_identical_across_ranks_and_runs(comm) -> None:
    mc = comm.mpi_comm
    rng = np.random.default_rng(comm.rank)
    for dtype in (np.float32, np.float16, np.float64):
        for count in (5, 4099, 300001):
            x = rng.standard_normal(count).astype(dtype)
            for algo in ("AicpuAllReduceSoleMeshOneShot", "AicpuAllReduceSoleMeshTwoShot",
                         "AicpuAllReduceSoleMeshChunkTwoShot", "AicpuAllReduceSoleNHR"):
                a = comm.all_reduce(x, algorithm=algo)
                b = comm.all_reduce(x, algorithm=algo)
                assert a.tobytes() == b.tobytes(), f"{algo} {dtype.__name__} {count}: differs run to run"
                digests = mc.allgather(hashlib.sha256(a.tobytes()).hexdigest())
                assert len(set(digests)) == 1, f"{algo} {dtype.__name__} {count}: ranks disagree"
                ref = np.sum(np.stack(mc.allgather(x)).astype(np.float64), axis=0)
                np.testing.assert_allclose(a.astype(np.float64), ref, rtol=2e-2 if dtype == np.float16 else 1e-5,
                                           atol=5e-2 if dtype == np.float16 else 1e-5)


@pytest.mark.mpi(np=[2, NP3, NP4])
def test_back_to_back_mixed_collectives(comm) -> None:
    """Built-ins share channels, notify slots and the HCCL buffer: interleave them with random sizes."""
    n, r = comm.size, comm.rank
    rng = np.random.default_rng(1234)  # same sequence on every rank
    for it in range(40):
        count = int(rng.choice([0, 1, 3, 17, 1000, 70001]))
        root = int(rng.integers(0, n))
        kind = int(rng.integers(0, 8))
        ins = all_data(n, count, "int32", seed=it)
        if kind == 0:
            np.testing.assert_array_equal(comm.all_reduce(ins[r]), reference.reduce(ins, "sum"))
        elif kind == 1:
            np.testing.assert_array_equal(comm.all_gather(ins[r]), reference.allgather(ins)[r])
        elif kind == 2:
            blocks = all_data(n, count * n, "int32", seed=it)
            np.testing.assert_array_equal(comm.reduce_scatter(blocks[r]), reference.reduce_scatter(blocks)[r])
        elif kind == 3:
            np.testing.assert_array_equal(comm.broadcast(ins[r], root), ins[root])
        elif kind == 4:
            blocks = all_data(n, count * n, "int32", seed=it)
            np.testing.assert_array_equal(comm.all_to_all(blocks[r]), reference.alltoall(blocks)[r])
        elif kind == 5:
            got = comm.reduce(ins[r], root, "max")
            if r == root:
                np.testing.assert_array_equal(got, reference.reduce(ins, "max"))
        elif kind == 6:
            comm.barrier()
        else:
            got = comm.gather(ins[r], root)
            if r == root:
                np.testing.assert_array_equal(got, reference.gather(ins, root)[root])


# ---- API: out=, in place, device buffers, async, avg, alltoallv, send/recv ---------------------
@pytest.mark.mpi(np=[1, 2, NP3, NP4])
def test_api_forms(comm) -> None:
    n, r = comm.size, comm.rank
    ins = all_data(n, 11, "int32")
    want = reference.reduce(ins, "sum")
    x = ins[r].copy()
    assert comm.all_reduce(x, out=x) is x                      # in place (host)
    np.testing.assert_array_equal(x, want)
    out = np.empty(11, np.int32)
    assert comm.all_reduce(ins[r], out=out) is out
    np.testing.assert_array_equal(out, want)
    d = comm.to_device(ins[r])
    assert comm.all_reduce(d, out=d) is d                      # in place (device)
    np.testing.assert_array_equal(d.numpy(), want)
    y = comm.all_reduce(comm.to_device(ins[r]))                # device in -> new device buffer out
    np.testing.assert_array_equal(y.numpy(), want)
    w = comm.all_reduce(ins[r], async_op=True)
    np.testing.assert_array_equal(w.wait(), want)
    assert w.is_completed()
    w1 = comm.all_gather(ins[r], async_op=True)
    w2 = comm.all_reduce(ins[r], "max", async_op=True)
    np.testing.assert_array_equal(w2.wait(), reference.reduce(ins, "max"))
    np.testing.assert_array_equal(w1.wait(), reference.allgather(ins)[r])
    # 2-D shapes: all_gather concatenates along axis 0, reduce_scatter splits it.
    m = np.arange(6 * n, dtype=np.float32).reshape(n * 2, 3) + r
    assert comm.all_gather(m).shape == (2 * n * n, 3)
    assert comm.reduce_scatter(m).shape == (2, 3)
    # avg = sum then divide (floats in the dtype; integers toward zero)
    f = (np.arange(5, dtype=np.float32) + r)
    np.testing.assert_allclose(comm.all_reduce(f, "avg"), np.arange(5) + (n - 1) / 2)
    i = np.array([-7 - r, 7 + r], dtype=np.int32)
    s = sum(-7 - k for k in range(n)), sum(7 + k for k in range(n))
    np.testing.assert_array_equal(comm.all_reduce(i, "avg"), [int(s[0] / n), int(s[1] / n)])
    b = D.float32_to_bf16_bits(np.array([1.0 + r, 3.0], np.float32))
    got = D.bf16_bits_to_float32(comm.all_reduce(b, "avg", dtype="bf16"))
    np.testing.assert_allclose(got, [1.0 + (n - 1) / 2, 3.0], rtol=1e-2)
    for _ in range(5):
        assert comm.barrier() is None                           # back to back must not hang


@pytest.mark.mpi(np=[1, 2, NP3, 4])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_stream_ordered_calls(comm) -> None:
    """async_op="stream": calls queue back to back on the stream (as the HCCL C API), one sync at the end.
    As with the C API, the inputs must stay alive until then (kept in ``keep``)."""
    n, r = comm.size, comm.rank
    rng = np.random.default_rng(7)  # same sequence on every rank
    outs, wants, keep = [], [], []
    for it in range(30):
        count = int(rng.choice([0, 1, 7, 1000, 1 << 16]))
        kind = int(rng.integers(0, 5))
        root = int(rng.integers(0, n))
        if kind == 0:
            ins = all_data(n, count, "fp32", seed=it)
            x = comm.to_device(ins[r])
            y = comm.all_reduce(x, "max", async_op="stream")
            want = reference.reduce(ins, "max")
        elif kind == 1:
            ins = all_data(n, count, "int16", seed=it)
            x = comm.to_device(ins[r])
            y = comm.all_gather(x, async_op="stream")
            want = reference.allgather(ins)[r]
        elif kind == 2:
            ins = all_data(n, count * n, "int32", seed=it)
            x = comm.to_device(ins[r])
            y = comm.reduce_scatter(x, async_op="stream")
            want = reference.reduce_scatter(ins, "sum")[r]
        elif kind == 3:
            ins = all_data(n, count, "bf16", seed=it)
            x = comm.to_device(ins[r])
            assert comm.broadcast(x, root, out=x, async_op="stream") is x     # in place
            y, want = x, ins[root]
        else:
            ins = all_data(n, count * n, "int8", seed=it)
            x, out = comm.to_device(ins[r]), comm.empty(count * n, "int8")
            assert comm.all_to_all(x, out=out, async_op="stream") is out
            y, want = out, reference.alltoall(ins)[r]
        outs.append(y)
        wants.append(want)
        keep.append(x)
    comm.stream.synchronize()
    for it, (y, want) in enumerate(zip(outs, wants)):
        np.testing.assert_array_equal(y.numpy()[: want.size], want, err_msg=f"call {it}")
    x = np.ones(3, np.float32)
    with pytest.raises(ConfigError, match="async_op='stream'.*DeviceBuffer"):
        comm.all_reduce(x, async_op="stream")                   # host input: needs a wait
    with pytest.raises(ConfigError, match="async_op='stream'"):
        comm.all_reduce(comm.to_device(x), out=np.empty(3, np.float32), async_op="stream")
    with pytest.raises(ConfigError, match="async_op='stream'.*avg"):
        comm.all_reduce(comm.to_device(x), "avg", async_op="stream")
    with pytest.raises(ConfigError, match="async_op='later'"):
        comm.all_reduce(x, async_op="later")
    np.testing.assert_array_equal(comm.all_reduce(x), np.full(3, n, np.float32))  # still usable


@pytest.mark.mpi(np=[2, NP3, 4])
def test_repeated_calls_on_device_buffers(comm) -> None:
    """A call repeated on the same device buffers runs a cached plan (ops/collectives.py): new
    contents every time, other reduce ops and roots, in place, stream-ordered and blocking calls
    interleaved, and a buffer freed and allocated again (maybe at the same address) all give the
    reference results."""
    n, r = comm.size, comm.rank
    x, y = comm.empty(1000, "fp32"), comm.empty(1000, "fp32")
    for it in range(6):
        ins = all_data(n, 1000, "fp32", seed=100 + it)
        x.copy_from(ins[r])
        op = ("sum", "max", "min")[it % 3]
        assert comm.all_reduce(x, op, out=y) is y
        np.testing.assert_array_equal(y.numpy(), reference.reduce(ins, op), err_msg=f"call {it} ({op})")
        root = it % n
        assert comm.broadcast(x, root, out=y) is y
        np.testing.assert_array_equal(y.numpy(), ins[root], err_msg=f"broadcast {it}")
    ins = all_data(n, 1000, "fp32", seed=200)
    x.copy_from(ins[r])
    for _ in range(3):
        comm.all_reduce(x, out=y, async_op="stream")
    comm.stream.synchronize()
    np.testing.assert_array_equal(y.numpy(), reference.reduce(ins, "sum"))
    assert comm.all_reduce(x, out=x) is x                                  # in place
    np.testing.assert_array_equal(x.numpy(), reference.reduce(ins, "sum"))
    y.close()
    y = comm.empty(1000, "int32")                                          # the same size, another dtype
    xi = comm.to_device(np.full(1000, r + 1, np.int32))
    assert comm.all_reduce(xi, out=y) is y
    np.testing.assert_array_equal(y.numpy(), np.full(1000, n * (n + 1) // 2, np.int32))


def _repeat_from(c, x, y, line: int):
    """The same all_reduce from two lines of the program."""
    if line == 0:
        return c.all_reduce(x, out=y)
    return c.all_reduce(x, out=y)


# the two lines of _repeat_from, as a call-site history names them (in either order)
_L0 = _repeat_from.__code__.co_firstlineno + 3
_REPEAT_SITES = (rf"(?=.*with the same arguments from different lines)(?=.*test_collectives\.py:{_L0}\b)"
                 rf"(?=.*test_collectives\.py:{_L0 + 1}\b)")


def _at_one_line(c, x, y, op: str):
    """An all_reduce of ``op`` from one line of the program."""
    return c.all_reduce(x, op, out=y)


@pytest.mark.mpi(np=[2, NP3, 4], timeout=120)
def test_repeated_all_reduce_one_c_call(comm) -> None:
    """From its third call on, a repeated all_reduce on the same device buffers is one C call
    (ops/call_plans.py, compiled where it builds): new contents every call, reduce ops alternating on the same
    buffers (the operator's arguments change in between), stream-ordered and blocking calls, an odd
    size; and the call check still compares call sites: ranks that reach the warmed-up call from
    different lines fail on every rank."""
    from hcomm_kit.base.errors import CollectiveMismatchError
    from hcomm_kit.build import pyext

    compiled = pyext.fastcall()  # the compiled steady state (call_plans.try_fast); it builds here
    # wherever this interpreter has its headers it must build (without them, Python does the work)
    assert compiled is not None or pyext.headers() is None, pyext.why_no_fastcall()
    handled = compiled.handled() if compiled else 0
    c = comm.split(0)
    n, r = c.size, c.rank
    x, y = c.empty(37, "fp32"), c.empty(37, "fp32")
    for it in range(10):
        ins = all_data(n, 37, "fp32", seed=300 + it)
        x.copy_from(ins[r])
        op = ("sum", "max")[it % 2] if it < 6 else "min"
        assert c.all_reduce(x, op, out=y) is y
        np.testing.assert_array_equal(y.numpy(), reference.reduce(ins, op), err_msg=f"call {it} ({op})")
    ins = all_data(n, 37, "fp32", seed=400)
    x.copy_from(ins[r])
    for _ in range(4):
        assert c.all_reduce(x, "max", out=y, async_op="stream") is y
    c.stream.synchronize()
    np.testing.assert_array_equal(y.numpy(), reference.reduce(ins, "max"))
    for _ in range(3):
        _repeat_from(c, x, y, 0)
    assert compiled is None or compiled.handled() > handled  # the warmed-up calls above went through it
    # The compiled helper remembers the plan of its last call: other buffers from the same line get
    # their own plan, and a buffer freed and made again is looked up again.
    x2, y2 = c.empty(37, "fp32"), c.empty(37, "fp32")
    for it in range(4):
        for a, b in ((x, y), (x2, y2), (x2, y2), (x2, y2)):
            ins = all_data(n, 37, "fp32", seed=500 + it)
            a.copy_from(ins[r])
            _at_one_line(c, a, b, "sum")
            np.testing.assert_array_equal(b.numpy(), reference.reduce(ins, "sum"), err_msg=f"round {it}")
        x2.close()
        y2.close()
        x2, y2 = c.empty(37, "fp32"), c.empty(37, "fp32")
    # ranks reaching the warmed-up call from different lines: no error by itself, but the compiled
    # path posts the call site as Python does: once the calls differ, both lines are named
    ins = all_data(n, 37, "fp32", seed=600)
    x.copy_from(ins[r])
    assert _repeat_from(c, x, y, r % 2) is y
    np.testing.assert_array_equal(y.numpy(), reference.reduce(ins, "sum"))
    with pytest.raises(CollectiveMismatchError, match=_REPEAT_SITES):
        c.barrier() if r == 0 else c.all_reduce(x, out=y)
    c.close()
    # A mismatch met by a call in the compiled steady state (rank 0: its fourth max from this line)
    # is raised as from Python: the other ranks call min there.
    c = comm.split(0)
    x, y = c.empty(37, "fp32"), c.empty(37, "fp32")
    for _ in range(3):
        _at_one_line(c, x, y, "max")
    before = compiled.handled() if compiled else 0
    with pytest.raises(CollectiveMismatchError, match="op=max.*op=min|op=min.*op=max"):
        _at_one_line(c, x, y, "max" if r == 0 else "min")
    assert r != 0 or compiled is None or compiled.handled() == before + 1
    c.close()


@pytest.mark.mpi(np=[2, 3])
def test_repeated_all_reduce_without_a_user_frame(comm) -> None:
    """A repeated all_reduce made where every frame is library code (hcomm-kit, the standard library:
    here a thread whose target lives in the package, as in `hcomm-kit bench --latency`) has no call
    site (""): the compiled steady state still takes it, and the results are right."""
    import threading

    from hcomm_kit.base.resources import package_dir
    from hcomm_kit.build import pyext

    compiled = pyext.fastcall()
    assert compiled is not None or pyext.headers() is None, pyext.why_no_fastcall()
    src = ("def loop(c, x, y, calls, out):\n"
           "    for _ in range(calls):\n"
           "        c.all_reduce(x, out=y)\n"
           "    out.append(y.numpy())\n")
    ns: dict = {}
    exec(compile(src, str(package_dir() / "_no_user_frame.py"), "exec"), ns)
    c = comm.split(0)
    n, r = c.size, c.rank
    ins = all_data(n, 37, "fp32", seed=800)
    x, y = c.to_device(ins[r]), c.empty(37, "fp32")
    got: list = []
    before = compiled.handled() if compiled else 0
    t = threading.Thread(target=ns["loop"], args=(c, x, y, 12, got))
    t.start()
    t.join(120)
    assert not t.is_alive() and len(got) == 1
    np.testing.assert_array_equal(got[0], reference.reduce(ins, "sum"))
    assert compiled is None or compiled.handled() - before >= 9  # all but the first calls
    c.close()


def _host_loop(c, x, op: str, out=None):
    """A blocking all_reduce of a host array from one line of the program."""
    return c.all_reduce(x, op, out=out)


@pytest.mark.mpi(np=[2, NP3, NP4])
def test_repeated_all_reduce_of_small_host_arrays(comm) -> None:
    """A blocking all_reduce of a small host array goes through a device pair of its own (dtype,
    shape, op: PlannedCalls._small_host), so its repeated calls run the device call's plans: new
    contents every call give new result arrays (an earlier result is never written again), shapes,
    dtypes and ops alternate, an input that is not C-contiguous, a 0-d array, avg and a large array
    take the general way, and the call check still names a skipped call."""
    from hcomm_kit.base.errors import CollectiveMismatchError
    from hcomm_kit.build import pyext

    c = comm.split(0)
    n, r = c.size, c.rank
    kept = []
    for it in range(12):
        dt, shape, op = (("fp32", (7,), "sum"), ("int32", (3, 5), "max"), ("fp16", (2,), "min"),
                         ("int64", (9,), "sum"))[it % 4]
        count = int(np.prod(shape))
        ins = all_data(n, count, dt, op, seed=900 + it)
        want = reference.reduce(ins, op, dt).reshape(shape)
        got = _host_loop(c, ins[r].reshape(shape), op)
        assert got.shape == shape and got.dtype == want.dtype, (got.shape, got.dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"call {it} ({dt} {op})")
        kept.append((got, want.copy()))
    for it, (got, want) in enumerate(kept):  # results are the caller's: later calls leave them alone
        np.testing.assert_array_equal(got, want, err_msg=f"result of call {it}")
    ins = all_data(n, 40, "fp32", seed=950)
    np.testing.assert_array_equal(_host_loop(c, ins[r][::2], "sum"), reference.reduce([a[::2] for a in ins], "sum"))
    np.testing.assert_array_equal(_host_loop(c, np.array(r + 1.0, np.float32), "sum"),
                                  np.array(n * (n + 1) / 2, np.float32))
    np.testing.assert_array_equal(_host_loop(c, np.full(4, r + 1.0, np.float32), "avg"),
                                  np.full(4, (n + 1) / 2, np.float32))
    big = all_data(n, 40000, "fp32", seed=960)  # 160 KB: the general way
    np.testing.assert_array_equal(_host_loop(c, big[r], "sum"), reference.reduce(big, "sum"))
    compiled = pyext.fastcall()
    before = (compiled.handled(), compiled.handled_host()) if compiled else (0, 0)
    x = np.full(7, r + 1.0, np.float32)
    for _ in range(5):
        np.testing.assert_array_equal(_repeat_from(c, x, None, 0), np.full(7, n * (n + 1) / 2, np.float32))
    if compiled is not None:  # the device call's steady state, the copies too in C from the third call on
        assert compiled.handled() - before[0] >= 3 and compiled.handled_host() - before[1] >= 2
    # out=: an array of the same shape and dtype is filled (in place with out=x); others go the general way
    y = np.zeros((3, 5), np.int32)
    before = compiled.handled_host() if compiled else 0
    for it in range(6):
        ins = all_data(n, 15, "int32", "sum", seed=970 + it)
        assert _host_loop(c, ins[r].reshape(3, 5), "sum", y) is y
        np.testing.assert_array_equal(y, reference.reduce(ins, "sum", "int32").reshape(3, 5), err_msg=f"out= {it}")
    for it in range(6):
        ins = all_data(n, 15, "int32", "max", seed=980 + it)
        z = ins[r].reshape(3, 5).copy()
        assert _host_loop(c, z, "max", z) is z
        np.testing.assert_array_equal(z, reference.reduce(ins, "max", "int32").reshape(3, 5), err_msg=f"out=x {it}")
    # the compiled path takes a call once the device call's plan holds its site (from a new key's
    # fourth call on; a switch of op on the same operator goes through Python once)
    assert compiled is None or compiled.handled_host() - before >= 6
    w = np.zeros((5, 3), np.int32)  # another shape of the same size: the general way checks it
    assert _host_loop(c, np.ones((3, 5), np.int32), "sum", w) is w and (w == n).all()
    with pytest.raises(ConfigError):
        _host_loop(c, np.ones((3, 5), np.int32), "sum", np.zeros(15, np.float32))
    with pytest.raises(ConfigError, match="C-contiguous"):
        _host_loop(c, np.ones(15, np.int32), "sum", np.zeros(30, np.int32)[::2])
    assert (_repeat_from(c, np.ones(15, np.int32), None, r % 2) == n).all()  # other lines: no error by itself
    with pytest.raises(CollectiveMismatchError, match=_REPEAT_SITES):
        c.barrier() if r == 0 else _repeat_from(c, np.ones(15, np.int32), None, 0)
    c.close()
    # a mismatch met in the compiled steady state (rank 0: its fourth max from this line) raises as
    # from Python; the other ranks call min there
    c = comm.split(0)
    for _ in range(3):
        _host_loop(c, x, "max")
    with pytest.raises(CollectiveMismatchError, match="op=max.*op=min|op=min.*op=max"):
        _host_loop(c, x, "max" if r == 0 else "min")
    c.close()
    with pytest.raises(HcommKitError, match="closed"):
        c.all_reduce(x)


@pytest.mark.mpi(np=[2, NP3, 4])
def test_alltoallv_and_send_recv(comm) -> None:
    n, r = comm.size, comm.rank
    rng = np.random.default_rng(99)
    for it in range(6):
        counts = rng.integers(0, 40 if it < 5 else 300000, size=(n, n))
        if it == 0:
            counts[:, 0] = 0                                   # zero-length blocks
        ins = [data(i, int(counts[i].sum()), "fp32", seed=it) for i in range(n)]
        want = reference.alltoallv(ins, counts)[r]
        got = comm.all_to_all_v(ins[r], counts[r], counts[:, r], algorithm="AicpuAllToAllVSoleMesh")
        np.testing.assert_array_equal(got, want)
        got = comm.all_to_all_v(ins[r], counts[r])              # recv counts exchanged
        np.testing.assert_array_equal(got, want)
    # send/recv in a ring: even ranks send first (no deadlock for any n)
    for count in (0, 1, 7, 300007):
        x = data(r, count, "int16")
        dst, src = (r + 1) % n, (r - 1) % n
        buf = np.empty(count, np.int16)
        if r % 2 == 0:
            comm.send(x, dst)
            comm.recv(buf, src)
        else:
            comm.recv(buf, src)
            comm.send(x, dst)
        np.testing.assert_array_equal(buf, data(src, count, "int16"))


@pytest.mark.mpi(np=[NP3, 4])
def test_sub_comm_members_only(comm) -> None:
    """HcclCreateSubCommConfig through comm.sub_comm: only the members call it (the others go on
    with other work), ranks in the given order; bad rank lists get HCCL_E_PARA naming the value."""
    import ctypes

    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.runtime import structs

    import hcomm_kit

    members = list(range(1, comm.size))[::-1]          # every rank but 0, in reverse order
    if comm.rank == 0:
        with hcomm_kit.same_call("first"):  # the same call as the members' below (another line)
            np.testing.assert_array_equal(comm.all_reduce(np.ones(3, np.int32)), np.full(3, comm.size))
        with pytest.raises(ConfigError, match=r"ranks \[1\] do not include this rank \(0\)"):
            comm.sub_comm([1], 5)
        return
    # the members' first collective on the world meets rank 0's all_reduce above
    with hcomm_kit.same_call("first"):
        comm.all_reduce(np.ones(3, np.int32))
    sub = comm.sub_comm(members, 11)
    try:
        assert (sub.rank, sub.size) == (members.index(comm.rank), len(members))
        y = sub.all_gather(np.full(4, comm.rank, np.int64))
        np.testing.assert_array_equal(y, np.repeat(np.array(members, np.int64), 4))
    finally:
        sub.close()
    cfg = structs.hccl_comm_config_init(structs.HcclCommConfig())
    parent, out = ctypes.c_void_p(comm.handle), ctypes.c_void_p()
    fn = comm.rt.hccl.HcclCreateSubCommConfig
    for ids, idx, needle in (([comm.rank, comm.rank], 0, "appears twice"),
                             ([comm.rank, comm.size], 0, f"rankIds[1] = {comm.size} is not a rank"),
                             ([0, comm.rank], 0, f"rankIds[subCommRankId = 0] = 0, but this is rank {comm.rank}"),
                             ([comm.rank], 1, "subCommRankId 1 is not below rankNum 1")):
        arr = (ctypes.c_uint32 * len(ids))(*ids)
        assert fn(ctypes.byref(parent), len(ids), arr, 3, idx, ctypes.byref(cfg), ctypes.byref(out)) == 1  # HCCL_E_PARA
        assert needle in comm.rt.recent_error_message()
    assert fn(ctypes.byref(parent), 0, arr, 3, 0, ctypes.byref(cfg), ctypes.byref(out)) == 1
    assert fn(ctypes.byref(parent), 1, arr, 3, 0, None, ctypes.byref(out)) == 2  # HCCL_E_PTR


@pytest.mark.mpi(np=[2])
def test_errors_and_product_gate(comm) -> None:
    x = np.arange(4, dtype=np.int64)
    with pytest.raises(ConfigError, match="HcclAllReduce does not reduce uint64 with sum on Ascend910B"):
        comm.all_reduce(x.astype(np.uint64))                    # A2: CANN's table has no uint64
    with pytest.raises(ConfigError, match="HcclAllReduce does not reduce int16 with prod on Ascend910B"):
        comm.all_reduce(x.astype(np.int16), "prod")
    np.testing.assert_array_equal(comm.all_gather(x), np.concatenate([x, x]))   # data movement: any dtype
    with pytest.raises(ConfigError, match="root=5"):
        comm.broadcast(x, 5)
    with pytest.raises(ConfigError, match="equal blocks"):
        comm.reduce_scatter(np.arange(3, dtype=np.float32))
    with pytest.raises(ConfigError, match="itself"):
        comm.send(x, comm.rank)
    with pytest.raises(ConfigError, match="unknown algorithm"):
        comm.all_reduce(x.astype(np.float32), algorithm="tree")
    with pytest.raises(ConfigError, match="unknown reduce op"):
        comm.all_reduce(x.astype(np.float32), "xor")
    # the communicator still works after refused calls
    np.testing.assert_array_equal(comm.all_reduce(np.ones(3, np.float32)), np.full(3, 2.0, np.float32))


@pytest.mark.mpi(np=[2, NP3], env={"HCCL_ALGO": "allreduce=level0:NA;level1:nhr/allgather=level0:fullmesh"})
def test_hccl_algo_override(comm) -> None:
    """HCCL_ALGO in CANN's documented form, read when the communicator was created: level1:nhr keeps
    CANN's NHR algorithms (CANN's own choice on one server, the one-shot mesh, is not one: the first
    with a kernel runs); fullmesh keeps CANN's mesh algorithms, among which CANN's own choice stays;
    an op it does not name gets CANN's choice."""
    ins = all_data(comm.size, 1000, "fp32")
    np.testing.assert_array_equal(comm.all_reduce(ins[comm.rank]), reference.reduce(ins, "sum"))
    sel = comm.last_selection
    assert (sel.name, sel.cann, sel.how) == ("AicpuAllReduceSoleNHR", "AicpuAllReduceSoleMeshOneShot",
                                             "HCCL_ALGO level1:NHR"), sel
    np.testing.assert_array_equal(comm.all_gather(ins[comm.rank]), np.concatenate(ins))
    sel = comm.last_selection
    assert sel.name == "AicpuAllGatherSoleMesh" and sel.how == "auto (HCCL_ALGO level1:fullmesh keeps it)", sel
    comm.all_to_all(np.zeros(comm.size * 4, np.float32))
    assert comm.last_selection.how == "auto", comm.last_selection


def test_algorithm_ids_match_kernel_header() -> None:
    """hcomm_kit.ops.algorithms.ALGORITHMS mirrors the algorithm table of aicpu_kernels/_common/hk_coll.h
    (collective, CANN name, HK_ALGO_* id) and its HK_ALGO_* values; every alias names an algorithm."""
    import re

    from hcomm_kit.ops.algorithms import ALGORITHMS, ALIASES, canonical
    from hcomm_kit.base.resources import aicpu_kernels_dir

    text = (aicpu_kernels_dir() / "_common" / "hk_coll.h").read_text()
    ids = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (HK_ALGO_\w+) (\d+)u", text)}
    rows = re.findall(r"^ \*   (\w+) +(Aicpu\w+) +(HK_ALGO_\w+)$", text, re.M)
    assert len(rows) >= 31, rows
    for coll, name, const in rows:
        assert ALGORITHMS[coll][name] == ids[const], (coll, name)
    for coll in set(ALGORITHMS) - {"gather", "send_recv"}:  # the table lists every one of theirs
        assert {n for n in ALGORITHMS[coll] if n != "auto"} == {n for c, n, _ in rows if c == coll}, coll
    assert ids["HK_ALGO_AUTO"] == 0 and all(t["auto"] == 0 for t in ALGORITHMS.values())
    for coll, aliases in ALIASES.items():
        for alias, target in aliases.items():
            assert target in ALGORITHMS[coll] and canonical(coll, alias) == target, (coll, alias)
            assert canonical(coll, target.lower()) == target
