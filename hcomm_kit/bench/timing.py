"""The timed loop of ``hcomm-kit bench``: calls enqueued back to back between device events (as
hccl_test), the emulator's checked calls before timing, the time reduced over the ranks, bandwidths."""

from __future__ import annotations

import ctypes

from ..core import world
from ..core.device import Event
from .cases import Collective, _Case



def _elapsed_ms(rt, start: Event, end: Event) -> float:
    ms = ctypes.c_float()
    rt.checked.aclrtEventElapsedTime(ctypes.byref(ms), start.handle, end.handle)
    return float(ms.value)


CHECKED_CALLS = 2  # a doubled record's leftover is consumed (and found) by the next call


def _checker_switch(comm):
    """``set(mode)`` of the emulator's notify checker (HcommKitSetCheck: 0 off, 1 on), or None
    where there is none (CANN)."""
    if comm.rt.backend != "emu":
        return None
    for lib in comm.rt.libs:
        fn = getattr(lib, "HcommKitSetCheck", None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_int32, [ctypes.c_int32]
            return fn
    return None


def _checked_calls(case: _Case, set_check) -> None:
    """:data:`CHECKED_CALLS` calls with the checker on, on every rank at once, then off again (the
    ranks meet before and after, so no rank's checked call overlaps another's unchecked one).
    A finding raises here (the command fails with it); nothing of this is timed."""
    comm = case.comm
    case.x.copy_from(case.inputs[comm.rank])
    _barrier(comm)
    set_check(1)
    try:
        for _ in range(CHECKED_CALLS):
            case.call(async_op=False)
        _barrier(comm)
    finally:
        set_check(0)


def _time_ours(case: _Case, iters: int, warmup: int, blocking: bool = False, over_ranks: bool = True) -> float:
    """Mean time per call (us, max over ranks; this rank's unless ``over_ranks``) between device events
    around the timed loop (``over_ranks=False``: the caller takes the maximum, after it read the
    timing model's figure of the last call: on several hosts the exchange is itself a call).

    As hccl_test: the warm-ups and the timed calls are enqueued back to back on the stream
    (``async_op="stream"``, like ``HcclAllReduce(..., stream)``) and the stream is synchronized once
    at the end. ``blocking``: each call completes before the next is made (the latency a caller
    waiting on every call sees)."""
    comm = case.comm
    mode: bool | str = False if blocking else "stream"
    _barrier(comm)
    for _ in range(warmup):
        case.call(async_op=mode)
    start, end = Event(comm.rt), Event(comm.rt)
    try:
        start.record(comm.stream)
        for _ in range(iters):
            case.call(async_op=mode)
        end.record(comm.stream)
        comm.stream.synchronize()  # raises the first error of an enqueued call
        us = _elapsed_ms(comm.rt, start, end) * 1000.0 / max(1, iters)
    finally:
        start.close()
        end.close()
    return _max_over_ranks(comm, us) if over_ranks else us


def _barrier(comm) -> None:
    world.barrier(comm)


def _max_over_ranks(comm, value: float) -> float:
    return float(world.allreduce(comm, value, "max"))


def _bw(coll: Collective, data_size: int, us: float | None, n: int) -> tuple[float | None, float | None]:
    """(algbw, busbw) in GB/s; (None, None) when the collective has no bandwidth convention."""
    if coll.bus_factor is None:
        return None, None
    if not us or us <= 0:
        return 0.0, 0.0
    alg = data_size / (us * 1e-6) / 1e9
    return alg, alg * coll.bus_factor(n)
