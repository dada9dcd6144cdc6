"""Misuse of the Python API is refused with a ConfigError naming the argument (issue 12, item 5).

``out=`` of another dtype, size or layout; non-integer roots and peers; negative, NaN, infinite or
non-numeric timeouts (0 keeps its meaning: no limit); bad ``split`` colours and keys; bad counts.
One in-process 1-rank communicator (the checks run before anything collective), plus the
accepted forms next to each refused one so a check that refuses everything would fail.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import hcomm_kit
from hcomm_kit.base.errors import ConfigError
from hcomm_kit.base.validate import as_color, as_count, as_rank, check_timeout


@pytest.fixture(scope="module")
def comm():
    c = hcomm_kit.init()
    yield c
    c.close()


def refused(match: str, key: str, fn, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError, match=match) as ei:
        fn(*args, **kwargs)
    assert ei.value.key == key, (ei.value.key, str(ei.value))
    return ei.value


# ---- out= ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad,why", [
    (np.empty(10, np.float64), "float64 array"),
    (np.empty(10, np.int32), "int32 array"),
    (np.empty(11, np.float32), r"shape \(11,\)"),
    (np.empty(9, np.float32), r"shape \(9,\)"),
    (np.empty(20, np.float32)[::2], "not C-contiguous"),
])
def test_out_of_another_dtype_size_or_layout(comm, bad: np.ndarray, why: str) -> None:
    x = np.arange(10, dtype=np.float32)
    err = refused("out=", "out", comm.all_reduce, x, out=bad)
    assert "10 fp32 elements" in str(err) and "float32" in str(err)
    assert re.search(why, str(err)), str(err)
    if bad.dtype != np.float32:
        assert "reinterpreted" in str(err)


def test_out_read_only_and_device_dtype(comm) -> None:
    x = np.arange(4, dtype=np.float32)
    ro = np.empty(4, np.float32)
    ro.flags.writeable = False
    refused("read-only", "out", comm.all_reduce, x, out=ro)
    dev = comm.empty(4, "int32")
    refused("DeviceBuffer of int32", "out", comm.all_reduce, comm.to_device(x), out=dev)
    # The accepted forms still work (1 rank: the result is the input).
    out = np.zeros(4, np.float32)
    assert comm.all_reduce(x, out=out) is out
    np.testing.assert_array_equal(out, x)
    good = comm.empty(4, "fp32")
    assert comm.all_reduce(comm.to_device(x), out=good) is good
    np.testing.assert_array_equal(good.numpy(), x)
    # bf16 results go to uint16 arrays (their bit patterns).
    b = np.array([0x3F80, 0x4000], np.uint16)
    assert comm.all_reduce(b, dtype="bf16", out=np.zeros(2, np.uint16)) is not None
    refused("float32 array", "out", comm.all_reduce, b, dtype="bf16", out=np.zeros(2, np.float32))


def test_custom_op_output_checked(comm) -> None:
    op = comm.builtin_op("allreduce")
    x = np.arange(6, dtype=np.int32)
    refused("output=", "output", op, x, np.empty(6, np.float32), reduce_op="sum")
    refused("output=", "output", op, x, np.empty(7, np.int32), reduce_op="sum")
    refused("DeviceBuffer of fp32", "output", op, x, comm.empty(6, "fp32"), reduce_op="sum")
    y = np.zeros(6, np.int32)
    assert op(x, y, reduce_op="sum") is y
    np.testing.assert_array_equal(y, x)
    refused("count=", "count", op, x, count=2.5)
    refused("count=", "count", op, x, count=-1)
    refused("count=", "count", op, x, count="3")


# ---- roots and peers ------------------------------------------------------------------------------
@pytest.mark.parametrize("root,match", [
    ("0", "'0' \\(str\\) is not an integer"),
    (0.5, "0.5 \\(float\\) is not an integer"),
    (0.0, "0.0 \\(float\\) is not an integer"),
    (True, "True \\(bool\\) is not an integer"),
    (None, "None \\(NoneType\\) is not an integer"),
    (1, "not a rank of this 1-rank communicator"),
    (-1, "not a rank of this 1-rank communicator"),
])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_root_must_be_an_int_rank(comm, root, match: str) -> None:
    x = np.ones(3, np.float32)
    for fn in (comm.broadcast, comm.reduce, comm.gather, comm.scatter):
        err = refused(match, "root", fn, x, root)
        assert "pass an int in [0, 1)" in str(err)
    np.testing.assert_array_equal(comm.broadcast(x, np.int64(0)), x)
    np.testing.assert_array_equal(comm.reduce(x, 0), x)


def test_peers_and_custom_op_root(comm) -> None:
    x = np.ones(3, np.float32)
    refused("dst='0'", "dst", comm.send, x, "0")
    refused("src=1.0", "src", comm.recv, x, 1.0)
    refused("not a rank", "dst", comm.send, x, 3)
    op = comm.builtin_op("broadcast")
    refused("root='0'", "root", op, x, root="0")
    refused("root=2", "root", op, x, root=2)


# ---- timeouts -------------------------------------------------------------------------------------
@pytest.mark.parametrize("timeout", [-1, -0.5, math.nan, math.inf, "5", True, [1]])
def test_bad_timeouts(comm, timeout) -> None:
    x = np.ones(2, np.float32)
    err = refused("timeout=", "timeout", comm.all_reduce, x, timeout=timeout)
    assert "0 (no limit)" in str(err) and "finite number of seconds" in str(err)
    refused("timeout=", "timeout", comm.barrier, timeout=timeout)
    refused("timeout=", "timeout", comm.builtin_op("allreduce"), x, timeout=timeout)


def test_good_timeouts_and_work_wait(comm) -> None:
    x = np.ones(2, np.float32)
    for t in (None, 0, 0.25, 30, np.float32(5)):
        np.testing.assert_array_equal(comm.all_reduce(x, timeout=t), x)  # 0 = no limit, still works
    w = comm.all_reduce(x, async_op=True)
    refused("timeout=", "timeout", w.wait, -1)
    refused("timeout=", "timeout", w.wait, math.nan)
    np.testing.assert_array_equal(w.wait(10), x)


# ---- split ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("color,key,match,name", [
    (-5, 0, "color=-5 is not valid", "color"),
    (2**31, 0, "is not valid: MPI colours", "color"),
    (1.5, 0, "color=1.5 \\(float\\) is not an integer", "color"),
    ("a", 0, "color='a'", "color"),
    (0, "x", "key='x'", "key"),
    (0, 2**31, "key=2147483648 is not valid", "key"),
])
def test_split_arguments(comm, color, key, match: str, name: str) -> None:
    refused(match, name, comm.split, color, key)


def test_split_valid(comm) -> None:
    assert comm.split(None) is comm
    sub = comm.split(0, -3)
    try:
        assert sub.size == 1
    finally:
        sub.close()


# ---- the helpers themselves -----------------------------------------------------------------------
def test_validators() -> None:
    assert as_rank(np.int32(2), 4) == 2 and as_count(np.uint64(7)) == 7
    assert as_color(None, np.int16(-4)) == (None, -4) and as_color(3, 0) == (3, 0)
    for t in (None, 0, 1.5, np.float64(2)):
        check_timeout(t)
    with pytest.raises(ConfigError, match="count=5 is out of range"):
        as_count(5, maximum=4)
    with pytest.raises(ConfigError, match="is not an integer"):
        as_rank(np.bool_(True), 2)
