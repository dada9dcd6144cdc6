"""Every algorithm of the built-in collectives with a choice (allreduce, allgather, reduce_scatter,
broadcast, reduce, scatter), forced, against numpy.

The built-ins run CANN's AICPU algorithms (aicpu_kernels/_common/hk_coll.h, the algorithm table):
each is forced by its CANN name on the shapes it applies to (flat ones on one server, the
multi-level ones on several servers of equal size), with counts that leave tails and counts
smaller than the rank count, several dtypes and reduce ops (A2's int64 and prod are computed by the
kernel itself: the write-reduce algorithms refuse them, naming the alternative), in place, and with
an HCCL buffer smaller than the message (HCCL_BUFFSIZE=1: several loops, a short last one).
Data are small integers, so every reduction order gives the same bits and results compare exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from hcomm_kit.base import dtypes as D
from hcomm_kit.base.errors import ConfigError
from hcomm_kit.ops import reference
from hcomm_kit.ops.algorithms import ALGORITHMS, LEVELS, WRITE_REDUCE

SMALL_BUF = {"HCCL_BUFFSIZE": "1"}
_CHOICE = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "scatter")
FLAT = {coll: [a for a, i in table.items() if a != "auto" and i not in LEVELS]
        for coll, table in ALGORITHMS.items() if coll in _CHOICE}
MULTI = {coll: [a for a, i in table.items() if i in LEVELS] for coll, table in ALGORITHMS.items() if coll in _CHOICE}
# without the rooted sequences (broadcast / reduce / scatter; their three levels:
# test_three_level_algorithms_two_super_pods and the slow 8- and 6-rank jobs, their two-level forms:
# the slow A2:2x4 and A3:2x4 jobs)
_ROOTED = ("broadcast", "reduce", "scatter")
MULTI_QUICK = {coll: [a for a in algos if coll not in _ROOTED or "Parallel" in a] for coll, algos in MULTI.items()}


def data(rank: int, count: int, dtype: str, rop: str = "sum", seed: int = 0) -> np.ndarray:
    """Rank ``rank``'s input: exact in every dtype for any reduction order (prod: {1, 2})."""
    dt = D.get_dtype(dtype)
    rng = np.random.default_rng([rank, count, seed, dt.value])
    v = rng.integers(1, 3, count) if rop == "prod" else rng.integers(-4, 5, count)
    return D.float32_to_bf16_bits(v.astype(np.float32)) if dt.name == "bf16" else v.astype(dt.numpy)


def _refuses(comm, coll: str, algo: str, dtype: str, rop: str) -> bool:
    """A write-reduce algorithm on a product whose primitive cannot reduce the dtype/op."""
    if ALGORITHMS[coll][algo] not in WRITE_REDUCE:
        return False
    return comm.device.soc != "Ascend950" and (dtype == "int64" or rop == "prod")


def _check(comm, coll: str, algos: list[str], counts, cases, inplace: bool = True, roots=None) -> None:
    if coll in ("broadcast", "reduce", "scatter"):
        return _check_rooted(comm, coll, algos, counts, cases, roots)
    n, r = comm.size, comm.rank
    for algo in algos:
        for dtype, rop in cases:
            for count in counts:
                tag = f"{coll} {algo} {dtype} {rop} count {count}"
                if coll == "allgather":
                    ins = [data(k, count, dtype) for k in range(n)]
                    got = comm.all_gather(ins[r], dtype=dtype, algorithm=algo)
                    np.testing.assert_array_equal(got, reference.allgather(ins)[r], err_msg=tag)
                    continue
                per = count * n if coll == "reduce_scatter" else count
                ins = [data(k, per, dtype, rop, seed=1) for k in range(n)]
                call = comm.all_reduce if coll == "allreduce" else comm.reduce_scatter
                want = (reference.reduce(ins, rop, dtype) if coll == "allreduce"
                        else reference.reduce_scatter(ins, rop, dtype)[r])
                if _refuses(comm, coll, algo, dtype, rop):
                    with pytest.raises(ConfigError, match="write-reduce"):
                        call(ins[r], rop, dtype=dtype, algorithm=algo)
                    continue
                np.testing.assert_array_equal(call(ins[r], rop, dtype=dtype, algorithm=algo), want, err_msg=tag)
                if inplace and coll == "allreduce" and count:
                    x = ins[r].copy()
                    comm.all_reduce(x, rop, dtype=dtype, algorithm=algo, out=x)
                    np.testing.assert_array_equal(x, want, err_msg=tag + " in place")


def _check_rooted(comm, coll: str, algos: list[str], counts, cases, roots=None) -> None:
    """broadcast / reduce / scatter from ``roots`` (default: the first, the last and a middle rank);
    broadcast and scatter take the cases whose op is ``sum`` (their op does not matter)."""
    n, r = comm.size, comm.rank
    for algo in algos:
        for dtype, rop in cases:
            if coll != "reduce" and rop != "sum":
                continue
            for count in counts:
                for root in sorted(roots or {0, n - 1, n // 2}):
                    tag = f"{coll} {algo} {dtype} {rop} count {count} root {root}"
                    if coll == "broadcast":
                        ins = [data(k, count, dtype, seed=2) for k in range(n)]
                        got = comm.broadcast(ins[r], root, dtype=dtype, algorithm=algo)
                        np.testing.assert_array_equal(got, ins[root], err_msg=tag)
                    elif coll == "scatter":
                        ins = [data(k, count * n, dtype, seed=3) for k in range(n)]
                        got = comm.scatter(ins[r], root, dtype=dtype, algorithm=algo)
                        np.testing.assert_array_equal(got, reference.scatter(ins, root)[r], err_msg=tag)
                    else:
                        ins = [data(k, count, dtype, rop, seed=4) for k in range(n)]
                        if _refuses(comm, coll, algo, dtype, rop):
                            with pytest.raises(ConfigError, match="write-reduce"):
                                comm.reduce(ins[r], root, rop, dtype=dtype, algorithm=algo)
                            continue
                        got = comm.reduce(ins[r], root, rop, dtype=dtype, algorithm=algo)
                        if r == root:
                            np.testing.assert_array_equal(got, reference.reduce(ins, rop, dtype), err_msg=tag)
                        else:
                            assert got is None


CASES = [("fp32", "sum"), ("int8", "max"), ("bf16", "min"), ("int64", "sum"), ("fp32", "prod")]


@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow),
                    pytest.param(8, marks=pytest.mark.slow)], timeout=600)
def test_flat_algorithms_forced(comm) -> None:
    n = comm.size
    counts = [1, n - 1, 7, 1000 + 3, 65536 + 5]
    for coll, algos in FLAT.items():
        _check(comm, coll, algos, [c for c in counts if c], CASES)


@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow)], env=SMALL_BUF, timeout=600)
def test_flat_algorithms_past_the_hccl_buffer(comm) -> None:
    """1 MB HCCL buffer: every algorithm loops; the counts leave a short last loop."""
    for coll, algos in FLAT.items():
        count = (300_000 if coll == "allreduce" else 120_000) + 13
        _check(comm, coll, algos, [count], [("fp32", "sum"), ("int64", "min")], inplace=False)


@pytest.mark.mpi(np=[4], topology="A2:2x2", timeout=600)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_two_level_algorithms_forced_a2(comm) -> None:
    counts = [1, 3, 7, 1000 + 3, 65536 + 5]
    for coll, algos in MULTI_QUICK.items():
        _check(comm, coll, algos, counts, CASES)
    for coll, algos in FLAT.items():  # the flat ones across servers too
        _check(comm, coll, algos, [5, 1003], [("fp32", "sum")])


@pytest.mark.mpi(np=[6], topology="A2:3x2", env=SMALL_BUF, timeout=600)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_two_level_algorithms_three_servers_small_buffer(comm) -> None:
    for coll, algos in MULTI_QUICK.items():
        count = (300_000 if coll == "allreduce" else 60_000) + 13
        _check(comm, coll, algos, [5, count], [("fp32", "sum"), ("int64", "max")], inplace=False)


@pytest.mark.slow
@pytest.mark.mpi(np=[8], topology="A2:2x4", timeout=900)
def test_two_level_algorithms_forced_a2_two_servers_of_four(comm) -> None:
    for coll, algos in MULTI.items():
        _check(comm, coll, algos, [1, 7, 1000 + 3, 65536 + 5], CASES)


@pytest.mark.slow
@pytest.mark.mpi(np=[8], topology="A3:2x4", timeout=900)
def test_two_level_algorithms_forced_a3(comm) -> None:
    for coll, algos in MULTI.items():
        _check(comm, coll, algos, [3, 1000 + 3], [("fp32", "sum"), ("int64", "sum"), ("fp16", "prod")])


def _rank_table_comm(comm, pods: int, servers: int, npus: int):
    """A communicator of the same processes from a CANN A3 rank table: ``pods`` super-pods of
    ``servers`` servers of ``npus`` NPUs (ranks in that order), so that the three-level algorithms
    see a second and a third level."""
    import ctypes
    import json
    import os
    import tempfile

    assert comm.size == pods * servers * npus
    table = {"status": "completed", "version": "1.0", "server_count": str(pods * servers),
             "server_list": [{"server_id": f"node_{s}", "device": [
                 {"device_id": str(s * npus + d), "super_device_id": str(s * npus + d), "rank_id": str(s * npus + d)}
                 for d in range(npus)]} for s in range(pods * servers)],
             "super_pod_list": [{"super_pod_id": str(p), "server_list": [
                 {"server_id": f"node_{p * servers + s}"} for s in range(servers)]} for p in range(pods)]}
    path = comm.mpi_comm.bcast(tempfile.mkdtemp(prefix="hk_table_") if comm.rank == 0 else None, root=0)
    file = os.path.join(path, "rank_table.json")
    if comm.rank == 0:
        with open(file, "w") as f:
            json.dump(table, f)
    comm.mpi_comm.Barrier()
    sub = type(comm)._blank(comm.rt, comm._boot)
    h = ctypes.c_void_p()
    comm.rt.checked.HcclCommInitClusterInfo(file.encode(), comm.rank, ctypes.byref(h))
    sub._attach(h.value)
    comm.mpi_comm.Barrier()
    if comm.rank == 0:
        os.remove(file)
        os.rmdir(path)
    return sub


THREE = {coll: [a for a, i in table.items() if LEVELS.get(i) == 3] for coll, table in ALGORITHMS.items()
         if coll in _CHOICE}


@pytest.mark.mpi(np=[4], topology="A3:2x2x1", timeout=600)
def test_three_level_algorithms_two_super_pods(comm) -> None:
    """Two super-pods of two servers of one NPU (HCOMM_KIT_TOPOLOGY=A3:2x2x1): the NHR levels between
    servers and between super-pods (the mesh one inside a server has a rank alone; 8 ranks fill all
    three: slow)."""
    assert len(comm.topology.pods) == 2 and len(comm.topology.servers) == 4
    for coll, algos in THREE.items():
        _check(comm, coll, algos, [1, 7, 1000 + 3], [("fp32", "sum"), ("int64", "max")])


@pytest.mark.slow
@pytest.mark.mpi(np=[8], env={"HCOMM_KIT_SOC": "Ascend910_93", **SMALL_BUF}, timeout=900)
def test_three_level_algorithms_super_pods_of_two_servers(comm) -> None:
    """2 super-pods x 2 servers x 2 NPUs: a mesh in each server, NHR between the servers of a
    super-pod, NHR between super-pods; a 1 MB HCCL buffer so that the levels loop."""
    sub = _rank_table_comm(comm, 2, 2, 2)
    try:
        # the rooted sequences: the test below (three levels, in this job) and the slow A2:2x4 / A3:2x4 ones
        for coll, algos in MULTI_QUICK.items():
            _check(sub, coll, algos, [1, 7, 1000 + 3, 300_000 + 13], CASES[:4], inplace=False)
    finally:
        sub.close()


ROOTED3 = {coll: algos for coll, algos in THREE.items() if coll in _ROOTED}
# broadcast / scatter: dtypes of 1, 2, 4 and 8 bytes; reduce: the ops on dtypes HcclReduce takes on A3
# (int64 and prod reduced by the kernel itself)
ROOTED_CASES = {"broadcast": [("int8", "sum"), ("bf16", "sum"), ("fp32", "sum"), ("fp64", "sum")],
                "reduce": [("fp32", "sum"), ("int8", "max"), ("bf16", "min"), ("int64", "sum"), ("int32", "prod"),
                           ("fp16", "prod")]}
ROOTED_CASES["scatter"] = ROOTED_CASES["broadcast"]


@pytest.mark.slow
@pytest.mark.mpi(np=[8], env={"HCOMM_KIT_SOC": "Ascend910_93", **SMALL_BUF}, timeout=900)
def test_three_level_rooted_algorithms_every_root_position(comm) -> None:
    """2 super-pods x 2 servers x 2 NPUs, the three-level broadcast / reduce / scatter (CANN's
    ...SequenceMesh1dNHRNHR, ...SequenceMesh1DNHRNHR, ...SequenceMeshConcurNHRNHR) from a root in
    the first server, in the middle of the first super-pod (its second server, local index 1), in
    the last super-pod's first server and its last rank; counts of one element, below the rank
    count, odd, and past the 1 MB HCCL buffer (several loops, a short last one)."""
    sub = _rank_table_comm(comm, 2, 2, 2)
    try:
        for coll, algos in ROOTED3.items():
            counts = [1, 5, 1000 + 3, {"broadcast": 300_000, "reduce": 300_000, "scatter": 100_000}[coll] + 13]
            _check(sub, coll, algos, counts, ROOTED_CASES[coll], roots=(0, 3, 5, 7))
        # unforced: the algorithm CANN's selector picks on three levels (broadcast_auto_selector.cc:208,
        # reduce_auto_selector.cc:294, scatter_auto_selector.cc:169)
        n, r, count = sub.size, sub.rank, 1000 + 3
        ins = [data(k, count, "fp32", seed=5) for k in range(n)]
        np.testing.assert_array_equal(sub.broadcast(ins[r], 2, dtype="fp32"), ins[2])
        assert sub.last_selection.name == "AicpuBroadcastSequenceMesh1dNHRNHR", sub.last_selection
        got = sub.reduce(ins[r], 6, "sum", dtype="fp32")
        assert sub.last_selection.name == "AicpuReduceSequenceMesh1DNHRNHR", sub.last_selection
        if r == 6:
            np.testing.assert_array_equal(got, reference.reduce(ins, "sum", "fp32"))
        blocks = [data(k, count * n, "fp32", seed=6) for k in range(n)]
        np.testing.assert_array_equal(sub.scatter(blocks[r], 1, dtype="fp32"), reference.scatter(blocks, 1)[r])
        assert sub.last_selection.name == "AicpuScatterSequenceMeshConcurNHRNHR", sub.last_selection
    finally:
        sub.close()


@pytest.mark.slow
@pytest.mark.mpi(np=[6], env={"HCOMM_KIT_SOC": "Ascend910_93"}, timeout=900)
def test_three_level_algorithms_uneven_super_pods(comm) -> None:
    """Six ranks two ways: 3 super-pods of one server of 2 NPUs (no level between servers: CANN's
    skipLevel1) and 2 super-pods of 3 servers of one NPU (a mesh of one, NHR over three servers);
    the three-level broadcast / reduce / scatter, roots in each super-pod."""
    for pods, servers, npus in ((3, 1, 2), (2, 3, 1)):
        sub = _rank_table_comm(comm, pods, servers, npus)
        try:
            assert len(sub.topology.pods) == pods
            for coll, algos in ROOTED3.items():
                _check(sub, coll, algos, [1, 4, 1000 + 3, 65536 + 5], ROOTED_CASES[coll][1::2], roots=(0, 2, 3, 5))
        finally:
            sub.close()
