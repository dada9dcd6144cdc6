"""Collective benchmarks in the hccl_test / nccl-tests conventions (``hcomm-kit bench``).

Runs on every rank (under mpirun). For each message size: ``-w`` warm-up calls, ``-n`` timed calls
bracketed by device events (``aclrtEventElapsedTime``), the time reduced across ranks (max), then
one checked call on exact-by-construction data compared with the numpy reference of
:mod:`hcomm_kit.ops.reference`. Optionally, in the same job on the same ranks, sizes and dtype:
the same collective through mpi4py (Open MPI, ``--compare mpi``) and, for a user's operator, the
matching built-in collective (``--compare builtin``).

A user's operator directory is measured like a built-in: op.toml's pattern and ``[io].output``
say which collective it is (ring-allreduce / a reduction with output ``count`` -> allreduce
sizes and bandwidth factors, output ``count*ranks`` -> allgather, ``count/ranks`` -> reduce_scatter,
p2p -> a ring shift with factor 1, empty -> a local copy: time only), ``--busbw-factor`` overrides
the factor. See ``spec/bench.md`` for the conventions.
"""

from __future__ import annotations

import ctypes
import json
import math
import re
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..base import dtypes as _dtypes
from ..base import envs
from ..core.device import DeviceBuffer, Event
from ..base.errors import ConfigError
from ..ops import reference

__all__ = ["COLLECTIVES", "Collective", "OpTarget", "op_target", "parse_size", "sizes", "run_bench", "format_header",
           "format_row", "COMPARES"]


@dataclass(frozen=True)
class Collective:
    """How one collective is sized, timed and checked."""

    name: str
    bus_factor: Callable[[int], float] | None  # busbw = algbw x bus_factor(ranks); None: time only
    split: bool                          # data_size is cut into one block per rank
    reduction: bool = False
    rooted: bool = False
    inplace: bool = False                # supports out = in


def _ring(n: int) -> float:
    return (n - 1) / n


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    Collective("allreduce", lambda n: 2 * (n - 1) / n, False, reduction=True, inplace=True),
    Collective("reduce_scatter", _ring, True, reduction=True),
    Collective("allgather", _ring, True),
    Collective("alltoall", _ring, True),
    Collective("broadcast", lambda n: 1.0, False, rooted=True, inplace=True),
    Collective("reduce", lambda n: 1.0, False, reduction=True, rooted=True, inplace=True),
    Collective("gather", _ring, True, rooted=True),
    Collective("scatter", _ring, True, rooted=True),
    Collective("sendrecv", lambda n: 1.0, False),
)}
COMPARES = ("builtin", "mpi")
ALIASES = {"all_reduce": "allreduce", "allreduce": "allreduce", "reducescatter": "reduce_scatter",
           "reduce_scatter": "reduce_scatter", "all_gather": "allgather", "all_to_all": "alltoall",
           "bcast": "broadcast", "send_recv": "sendrecv", "p2p": "sendrecv"}


@dataclass(frozen=True)
class OpTarget:
    """A user's operator as a benchmark target: how it is sized, what it is compared with.

    Attributes:
        opdir: the operator directory.
        spec: its op.toml.
        kind: the numpy reference (:func:`hcomm_kit.jobs.runner.reference_kind`): allreduce,
            allgather, reduce_scatter, shift (p2p), copy (empty) or none.
        coll: sizing and bandwidth factor (named after the operator).
        builtin: the matching built-in collective (None: there is none).
        note: how the factor was chosen (printed in the header).
    """

    opdir: str
    spec: Any
    kind: str
    coll: Collective
    builtin: str | None
    note: str


# reference kind -> (bench collective whose sizing and factor apply, matching built-in, what it is)
_KIND_AS = {
    "allreduce": ("allreduce", "allreduce", "an allreduce"),
    "allgather": ("allgather", "allgather", "an allgather"),
    "reduce_scatter": ("reduce_scatter", "reduce_scatter", "a reduce-scatter"),
    "shift": ("sendrecv", "shift", "a ring shift (rank r sends to r+1)"),
}


def op_target(opdir: str, busbw_factor: float | None = None) -> OpTarget:
    """Describe the operator in ``opdir`` as a benchmark target (see the module docstring)."""
    from ..jobs.runner import reference_kind
    from ..build.opspec import load_opspec

    spec = load_opspec(opdir)
    kind = reference_kind(spec)
    as_name, builtin, what = _KIND_AS.get(kind, (None, None, None))
    base = COLLECTIVES[as_name] if as_name else None
    split = bool(base.split) if base else False
    if busbw_factor is not None:
        factor: Callable[[int], float] | None = lambda n, f=float(busbw_factor): f  # noqa: E731
        note = f"busbw factor {busbw_factor:g} (--busbw-factor)"
    elif base is not None:
        factor = base.bus_factor
        note = f"pattern {spec.pattern}, output {spec.output!r}: {what}, busbw factor of {as_name}"
    else:
        factor = None
        note = (f"pattern {spec.pattern}: no bandwidth convention, time only (--busbw-factor F sets one)")
    coll = Collective(spec.name, factor, split, reduction=spec.is_reduction, rooted=False,
                      inplace=bool(getattr(spec, "inplace", False)))
    return OpTarget(str(opdir), spec, kind, coll, builtin, note)


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# Largest integer every value up to which the dtype holds exactly.
_EXACT_FLOAT = {"fp16": 2 ** 11, "bf16": 2 ** 8, "fp32": 2 ** 24, "fp64": 2 ** 53}


def parse_size(text: str) -> int:
    """``"64M"`` -> 67108864 (K/M/G are powers of 1024, as hccl_test; a trailing B is allowed)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([KMG]?)B?\s*", str(text), re.IGNORECASE)
    if m is None:
        raise ConfigError(f"bad size {text!r}: expected a number with an optional K/M/G suffix (e.g. 64M)",
                          key="size")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def sizes(begin: int, end: int, factor: float | None, step: int | None) -> list[int]:
    """The sizes of a sweep: ``-f`` multiplies (wins over ``-i``), ``-i`` adds (default (e-b)/10)."""
    if end < begin:
        raise ConfigError(f"-e {end} is smaller than -b {begin}", key="-e")
    if begin == end:
        return [begin]
    out = []
    if factor is not None:
        if factor <= 1:
            raise ConfigError(f"-f {factor} must be > 1", key="-f")
        s = max(begin, 1) if begin == 0 else begin
        if begin == 0:
            out.append(0)
        while s <= end:
            out.append(int(s))
            s = s * factor
        return out
    inc = step if step else max(1, (end - begin) // 10)
    return list(range(begin, end + 1, inc))


def _rank_data(rank: int, count: int, dt: "_dtypes.DType", rop: str, fill: str) -> np.ndarray:
    """Exact-by-construction data of ``rank``: small integers stored in the dtype (prod: {1, 2})."""
    if fill == "const":
        vals = np.full(count, 2, dtype=np.int64)
    else:
        rng = np.random.default_rng(7919 * rank + 104729 + count)
        if rop == "prod":
            vals = rng.integers(1, 3, count)
        elif dt.numpy.kind == "u" and dt.name != "bf16":
            vals = rng.integers(0, 4, count)
        else:
            vals = rng.integers(-3, 4, count)
    if dt.name == "bf16":
        return _dtypes.float32_to_bf16_bits(vals.astype(np.float32))
    return vals.astype(dt.numpy)


def _exact(dt: "_dtypes.DType", wide: np.ndarray) -> bool:
    """Can the dtype hold every value of ``wide`` (the reference computed in int64/float64)?"""
    if wide.size == 0:
        return True
    lo, hi = float(wide.min()), float(wide.max())
    if dt.name in _EXACT_FLOAT:
        return max(abs(lo), abs(hi)) <= _EXACT_FLOAT[dt.name]
    info = np.iinfo(dt.numpy)
    return info.min <= lo and hi <= info.max


def _wide_reduce(inputs: list[np.ndarray], dt: "_dtypes.DType", rop: str) -> np.ndarray:
    wide = np.stack([reference.to_float(x, dt.name) for x in inputs])
    return {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}[rop](wide, axis=0)


class _Case:
    """One (collective, size) on this rank: device buffers, the call, and its expected output.

    ``coll.name`` is a built-in collective of :data:`COLLECTIVES` or ``"shift"`` (the built-in
    counterpart of a p2p operator: ``all_to_all_v`` sending everything to the next rank)."""

    kind = ""         # reference of a user's operator (see _OpCase)
    mpi_name = ""     # the mpi4py call of --compare mpi (default: coll.name)

    def __init__(self, comm, coll: Collective, nbytes: int, dt: "_dtypes.DType", rop: str, root: int, fill: str,
                 inplace: bool, algorithm: str | None, *, gathers: bool | None = None) -> None:
        n, item = comm.size, dt.itemsize
        self.comm, self.coll, self.dt, self.rop, self.root = comm, coll, dt, rop, root
        self.algorithm = algorithm
        gathers = coll.name in ("allgather", "gather") if gathers is None else gathers
        if coll.split:
            self.block = nbytes // (n * item)
            self.rounded = self.block * n * item != nbytes
            count_in = self.block * n if not gathers else self.block
        else:
            self.block = nbytes // item
            self.rounded = self.block * item != nbytes
            count_in = self.block
        self.count_in = count_in
        self.data_size = (self.block * n if coll.split else self.block) * item
        self.inputs = [_rank_data(r, count_in, dt, rop, fill) for r in range(n)]
        mine = self.inputs[comm.rank]
        self.x = DeviceBuffer.from_numpy(mine, dt, rt=comm.rt)
        out_n = self._out_count(count_in)
        self.inplace = inplace and coll.inplace
        self.y = self.x if self.inplace else DeviceBuffer.empty(max(out_n, 0), dt, rt=comm.rt)
        self.peer = None
        if coll.name == "sendrecv":
            # Ranks pair up (0,1), (2,3), ...; an odd last rank sits out.
            partner = comm.rank ^ 1
            self.peer = partner if partner < n else None
        if coll.name == "shift":
            self.send_counts = np.zeros(n, np.int64)
            self.recv_counts = np.zeros(n, np.int64)
            self.send_counts[(comm.rank + 1) % n] += count_in
            self.recv_counts[(comm.rank - 1) % n] += count_in
            self.mpi_name = "shift"

    def _out_count(self, count_in: int) -> int:
        n = self.comm.size
        return {"allgather": self.block * n, "gather": self.block * n, "reduce_scatter": self.block,
                "scatter": self.block}.get(self.coll.name, count_in)

    def call(self, async_op: bool | str = True):
        c, comm, x, y = self.coll.name, self.comm, self.x, self.y
        kw: dict[str, Any] = {"async_op": async_op}
        if self.algorithm:
            kw["algorithm"] = self.algorithm
        if c == "allreduce":
            return comm.all_reduce(x, self.rop, out=y, **kw)
        if c == "reduce_scatter":
            return comm.reduce_scatter(x, self.rop, out=y, **kw)
        if c == "allgather":
            return comm.all_gather(x, out=y, **kw)
        if c == "alltoall":
            return comm.all_to_all(x, out=y, **kw)
        if c == "broadcast":
            return comm.broadcast(x, self.root, out=y, **kw)
        if c == "reduce":
            return comm.reduce(x, self.root, self.rop, out=y, **kw)
        if c == "gather":
            return comm.gather(x, self.root, out=y, **kw)
        if c == "scatter":
            return comm.scatter(x, self.root, out=y, **kw)
        if c == "shift":
            return comm.all_to_all_v(x, self.send_counts, self.recv_counts, out=y, **kw)
        kw.pop("algorithm", None)
        if self.peer is None:
            return None
        if comm.rank % 2 == 0:
            return comm.send(x, self.peer, **kw)
        return comm.recv(y, self.peer, **kw)

    def expected(self) -> tuple[np.ndarray | None, bool]:
        """(this rank's expected output or None when it has none, whether the dtype holds it)."""
        c, r, n, dt = self.coll.name, self.comm.rank, self.comm.size, self.dt
        ins = self.inputs
        if c in ("allreduce", "reduce", "reduce_scatter"):
            wide = _wide_reduce(ins, dt, self.rop)
            ok = _exact(dt, wide)
            if c == "reduce" and r != self.root:
                return None, ok
            full = reference.reduce(ins, self.rop, dt.name)
            return (np.split(full, n)[r] if c == "reduce_scatter" else full), ok
        if c == "allgather":
            return reference.allgather(ins)[r], True
        if c == "alltoall":
            return reference.alltoall(ins)[r], True
        if c == "broadcast":
            return reference.broadcast(ins, self.root)[r], True
        if c == "gather":
            return reference.gather(ins, self.root)[r], True
        if c == "scatter":
            return reference.scatter(ins, self.root)[r], True
        if c == "shift":
            return ins[(r - 1) % n], True
        if self.peer is None or r % 2 == 0:
            return None, True
        return ins[self.peer], True

    def check(self) -> tuple[int, tuple | None, bool]:
        """Run once on fresh buffers; (#wrong, first mismatch (rank, index, expected, actual), holdable)."""
        self.x.copy_from(self.inputs[self.comm.rank])
        self.call(async_op=False)
        exp, ok = self.expected()
        if exp is None or not ok:
            return 0, None, ok
        got = self.y.numpy()[: exp.size]
        bad = np.flatnonzero(got != exp)
        first = None
        if bad.size:
            i = int(bad[0])
            first = (self.comm.rank, i, exp[i].item(), got[i].item())
        return int(bad.size), first, ok

    def close(self) -> None:
        if self.y is not self.x:
            self.y.close()
        self.x.close()


class _OpCase(_Case):
    """One size of a user's operator: sized like the collective it is (:class:`OpTarget`), called
    through :class:`~hcomm_kit.ops.custom_op.CustomOp` (``launch`` = enqueue only, as ``async_op="stream"``)."""

    def __init__(self, comm, target: OpTarget, op, nbytes: int, dt: "_dtypes.DType", rop: str, root: int | None,
                 fill: str, inplace: bool) -> None:
        self.op, self.kind, self.target = op, target.kind, target
        self.mpi_name = {"shift": "shift"}.get(target.kind, target.builtin or "")
        super().__init__(comm, target.coll, nbytes, dt, rop, root or 0, fill, inplace, None,
                         gathers=target.kind == "allgather")
        self.op_root = root

    def _out_count(self, count_in: int) -> int:
        rule = self.target.spec.output
        if rule == "count":
            return count_in
        if rule == "count*ranks":
            return count_in * self.comm.size
        return self.target.spec.output_count(count_in, self.comm.size)

    def call(self, async_op: bool | str = True):
        rop = self.rop if self.coll.reduction else None
        if async_op == "stream":
            return self.op.launch(self.x.ptr, self.y.ptr, self.count_in, self.dt.name, reduce_op=rop,
                                  root=self.op_root)
        return self.op(self.x, self.y, count=self.count_in, dtype=self.dt.name, reduce_op=rop, root=self.op_root,
                       async_op=bool(async_op))

    def expected(self) -> tuple[np.ndarray | None, bool]:
        r, n, dt, ins, kind = self.comm.rank, self.comm.size, self.dt, self.inputs, self.kind
        if kind in ("allreduce", "reduce_scatter"):
            ok = _exact(dt, _wide_reduce(ins, dt, self.rop))
            full = reference.reduce(ins, self.rop, dt.name)
            return (np.split(full, n)[r] if kind == "reduce_scatter" else full), ok
        if kind == "allgather":
            return reference.allgather(ins)[r], True
        if kind == "shift":
            return ins[(r - 1) % n], True
        if kind == "copy":
            return ins[r], True
        return None, False  # no reference: NULL


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


def _time_ours(case: _Case, iters: int, warmup: int, blocking: bool = False) -> float:
    """Mean time per call (us, max over ranks) between device events around the timed loop.

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
    return _max_over_ranks(comm, us)


def _mpi():
    from mpi4py import MPI

    return MPI


def _barrier(comm) -> None:
    if comm.mpi_comm is not None and comm.size > 1:
        comm.mpi_comm.Barrier()


def _max_over_ranks(comm, value: float) -> float:
    if comm.mpi_comm is not None and comm.size > 1:
        return float(comm.mpi_comm.allreduce(value, op=_mpi().MAX))
    return value


def _time_mpi(case: _Case, iters: int, warmup: int) -> float | None:
    """The same collective through mpi4py (None when MPI cannot do it: no MPI, fp16/bf16...)."""
    comm = case.comm
    mc = comm.mpi_comm
    if mc is None or case.dt.name in ("bf16", "fp16"):
        return None
    from mpi4py import MPI

    ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
    x = case.inputs[comm.rank].copy()
    c = case.mpi_name or case.coll.name
    y = np.empty(case.y.size if case.y is not case.x else x.size, dtype=x.dtype)
    root = case.root
    rop = ops.get(case.rop, MPI.SUM)
    calls: dict[str, Callable[[], Any]] = {
        "allreduce": lambda: mc.Allreduce(x, y, rop),
        "reduce_scatter": lambda: mc.Reduce_scatter_block(x, y, rop),
        "allgather": lambda: mc.Allgather(x, y),
        "alltoall": lambda: mc.Alltoall(x, y),
        "broadcast": lambda: mc.Bcast(x, root),
        "reduce": lambda: mc.Reduce(x, y, rop, root),
        "gather": lambda: mc.Gather(x, y if comm.rank == root else None, root),
        "scatter": lambda: mc.Scatter(x if comm.rank == root else None, y, root),
    }
    if c == "shift":
        n, r = comm.size, comm.rank
        calls["shift"] = lambda: mc.Sendrecv(x, (r + 1) % n, recvbuf=y, source=(r - 1) % n)
    if c == "sendrecv":
        if case.peer is None:
            fn: Callable[[], Any] = lambda: None  # noqa: E731
        elif comm.rank % 2 == 0:
            fn = lambda: mc.Send(x, case.peer)  # noqa: E731
        else:
            fn = lambda: mc.Recv(y, case.peer)  # noqa: E731
    elif c in calls:
        fn = calls[c]
    else:
        return None  # no MPI counterpart (a local copy)
    try:
        mc.Barrier()
        for _ in range(warmup):
            fn()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        us = (time.perf_counter() - t0) * 1e6 / max(1, iters)
    except (MPI.Exception, KeyError, TypeError, ValueError):
        return None
    return _max_over_ranks(comm, us)


def _bw(coll: Collective, data_size: int, us: float | None, n: int) -> tuple[float | None, float | None]:
    """(algbw, busbw) in GB/s; (None, None) when the collective has no bandwidth convention."""
    if coll.bus_factor is None:
        return None, None
    if not us or us <= 0:
        return 0.0, 0.0
    alg = data_size / (us * 1e-6) / 1e9
    return alg, alg * coll.bus_factor(n)


def run_bench(comm, collective: str, size_list: list[int], *, dtype: str = "fp32", op: str = "sum", root: int = 0,
              iters: int = 20, warmup: int = 5, check: int = 1, fill: str = "rand", inplace: bool = False,
              algorithm: str | None = None, baseline: str | None = None, blocking: bool = False,
              compare: tuple[str, ...] | list[str] = (), busbw_factor: float | None = None,
              out=None, checked_first: bool = False) -> list[dict[str, Any]]:
    """Run the sweep on this rank; rank 0 prints the table. Returns the rows (every rank).

    Args:
        collective: a built-in collective (``allreduce``, ...) or a user's operator directory.
        compare: ``"mpi"`` (the same through mpi4py; ``baseline="mpi"`` is the same) and, for an
            operator, ``"builtin"`` (the matching built-in collective): time, busbw and a ``vs_``
            ratio (their time / ours: > 1 means ours is faster) per row.
        busbw_factor: an operator's bus bandwidth factor (default: from its pattern / output rule).
        checked_first: emulator: before each size is timed, :data:`CHECKED_CALLS` calls run with the
            notify checker on (a finding raises its :class:`~hcomm_kit.base.errors.CheckError`), then
            the checker is off for the timed and the numpy-checked calls (``hcomm-kit bench``
            when ``HCOMM_KIT_CHECK`` is unset).

    Calls are enqueued back to back and timed between device events, as hccl_test does;
    ``blocking`` waits for each call instead (see :func:`_time_ours`)."""
    from ..base import progress

    out = out if out is not None else _CurrentStdout()
    compare = tuple(dict.fromkeys([*compare, *([baseline] if baseline else [])]))
    for c in compare:
        if c not in COMPARES:
            raise ConfigError(f"--compare {c!r}: choose from {', '.join(COMPARES)}", key="--compare")
    target = _target(collective, busbw_factor)
    coll = target.coll if target else COLLECTIVES[ALIASES.get(collective, collective)]
    name = coll.name
    if target is None and "builtin" in compare:
        raise ConfigError(f"--compare builtin is for your own operators; {name} is a built-in collective",
                          key="--compare")
    dt = _dtypes.get_dtype(dtype)
    rop = _dtypes.get_reduce_op(op).name
    if not 0 <= root < comm.size:
        raise ConfigError(f"-r {root} is not a rank of this {comm.size}-rank job", key="-r")
    if name == "sendrecv" and comm.size < 2:
        raise ConfigError("sendrecv needs at least 2 ranks", key="--np")
    custom = None
    if target is not None:
        check_target(target, dt.name, rop)
        custom = comm.load_op(target.opdir)
    builtin = None
    if "builtin" in compare:
        if target.builtin is None:
            builtin = None
        else:
            builtin = _SHIFT if target.builtin == "shift" else COLLECTIVES[target.builtin]
    set_check = _checker_switch(comm) if checked_first else None
    if set_check is not None:
        set_check(0)  # until the first checked calls: nothing is timed with the checker on
    lead = comm.rank == 0
    if lead:
        print(format_header(comm, coll, dt.name, rop if coll.reduction else None, root if coll.rooted else None,
                            iters, warmup, inplace and coll.inplace, algorithm, compare, blocking, target=target,
                            checked_first=set_check is not None),
              file=out, flush=True)
        if "builtin" in compare and builtin is None:
            print(f"# --compare builtin: no built-in counterpart of pattern {target.spec.pattern}", file=out)
    rows = []
    total_wrong = 0
    with progress.Progress(f"bench {name}", total=len(size_list), rank=comm.rank) as bar:
        for nbytes in size_list:
            if target is not None:
                case: _Case = _OpCase(comm, target, custom, nbytes, dt, rop, root if root else None, fill, inplace)
            else:
                case = _Case(comm, coll, nbytes, dt, rop, root, fill, inplace, algorithm)
            if case.rounded and lead:
                print(f"# warning: {nbytes} bytes rounded to {case.data_size} "
                      f"({'a multiple of ranks x ' if coll.split else ''}{dt.itemsize}-byte elements)", file=out)
            if set_check is not None:
                _checked_calls(case, set_check)
            us = _time_ours(case, iters, warmup, blocking)
            wrong, first, holdable = case.check() if check else (0, None, True)
            if comm.mpi_comm is not None and comm.size > 1:
                wrong = int(comm.mpi_comm.allreduce(wrong))
                firsts = comm.mpi_comm.gather(first, root=0)
                first = next((f for f in (firsts or []) if f), None)
                holdable = bool(comm.mpi_comm.allreduce(int(holdable), op=_mpi().MIN))
            alg, bus = _bw(coll, case.data_size, us, comm.size)
            status = "NULL" if not check or not holdable else ("success" if wrong == 0 else "failed")
            row = {"collective": name, "algorithm": algorithm or "auto", "ranks": comm.size, "dtype": dt.name,
                   "op": rop if coll.reduction else None, "root": root if coll.rooted else None,
                   "size": case.data_size, "time_us": us, "algbw": alg, "busbw": bus, "check": status,
                   "wrong": wrong if holdable else None, "inplace": case.inplace, "backend": _backend(comm),
                   "soc": comm.soc, "host": socket.gethostname(), "blocking": blocking}
            if target is not None:
                row.update(operator=target.opdir, pattern=target.spec.pattern, reference=target.kind)
            if "builtin" in compare:
                b_us = b_bus = None
                if builtin is not None:
                    bcase = _Case(comm, builtin, nbytes, dt, rop, root, fill, inplace, algorithm,
                                  gathers=target.kind == "allgather")
                    try:
                        b_us = _time_ours(bcase, iters, warmup, blocking)
                    finally:
                        bcase.close()
                    _, b_bus = _bw(coll, case.data_size, b_us, comm.size)
                row.update(builtin=target.builtin, builtin_time_us=b_us, builtin_busbw=b_bus,
                           vs_builtin=(b_us / us) if b_us and us else None)
            if "mpi" in compare:
                mpi_us = _time_mpi(case, iters, warmup)
                _, mbus = _bw(coll, case.data_size, mpi_us, comm.size)
                row.update(mpi_time_us=mpi_us, mpi_busbw=mbus if mpi_us else None,
                           vs_mpi=(mpi_us / us) if mpi_us and us else None)
            if status == "failed":
                total_wrong += wrong
            rows.append(row)
            if lead:
                print(format_row(row, compare), file=out, flush=True)
                if check == 2 and first is not None:
                    print(f"#   first wrong element: rank {first[0]}, index {first[1]}, expected {first[2]}, "
                          f"got {first[3]}", file=out, flush=True)
            case.close()
            bar.advance(detail=f"{case.data_size} B")
    if lead:
        buses = [r["busbw"] for r in rows if r["busbw"] is not None]
        print(f"# Out of bounds values : {total_wrong} {'OK' if total_wrong == 0 else 'FAILED'}", file=out)
        print(f"# Avg bus bandwidth    : {sum(buses) / len(buses):.4f}" if buses else
              "# Avg bus bandwidth    : N/A (time only)", file=out, flush=True)
    return rows


def check_target(target: OpTarget, dtype: str, op: str) -> None:
    """Refuse a dtype / reduce op the operator does not list in op.toml (before anything starts)."""
    dt = _dtypes.get_dtype(dtype).name
    rop = _dtypes.get_reduce_op(op).name
    spec = target.spec
    if dt not in spec.dtypes:
        raise ConfigError(f"operator {spec.name} does not support dtype {dt}; op.toml [op].dtypes = "
                          f"{list(spec.dtypes)}", key="-d", path=Path(target.opdir) / "op.toml")
    if target.coll.reduction and rop not in spec.reduce_ops:
        raise ConfigError(f"operator {spec.name} does not support reduce op {rop}; op.toml [op].reduce_ops = "
                          f"{list(spec.reduce_ops)}", key="-o", path=Path(target.opdir) / "op.toml")


class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is at the time (a progress bar redirects it to print above)."""

    @staticmethod
    def write(text: str) -> int:
        return sys.stdout.write(text)

    @staticmethod
    def flush() -> None:
        sys.stdout.flush()


_SHIFT = Collective("shift", lambda n: 1.0, False)  # built-in counterpart of a p2p operator (all_to_all_v)


def _target(collective: str, busbw_factor: float | None) -> OpTarget | None:
    """None for a built-in collective name (or its directory in aicpu_kernels/), else the operator."""
    from ..base.resources import aicpu_kernels_dir

    p = Path(str(collective))
    is_dir = (p / "op.toml").is_file()
    if is_dir and p.resolve().parent == aicpu_kernels_dir().resolve():
        alias = ALIASES.get(p.name, p.name)
        if alias in COLLECTIVES:
            if busbw_factor is not None:
                raise ConfigError("--busbw-factor is for your own operators (built-ins use nccl-tests' factors)",
                                  key="--busbw-factor")
            return None
    if is_dir:
        return op_target(str(p.resolve()), busbw_factor)
    name = ALIASES.get(collective, collective)
    if name not in COLLECTIVES:
        raise ConfigError(f"unknown collective {collective!r}: neither a built-in collective "
                          f"({', '.join(sorted(COLLECTIVES))}) nor an operator directory (with op.toml)",
                          key="COLLECTIVE")
    if busbw_factor is not None:
        raise ConfigError("--busbw-factor is for your own operators (built-ins use nccl-tests' factors)",
                          key="--busbw-factor")
    return None


def _backend(comm) -> str:
    return comm.rt.backend


_COLS = ("data_size(Bytes)", "aveg_time(us)", "alg_bandwidth(GB/s)", "bus_bandwidth(GB/s)", "check_result", "#wrong")


def _compares(compare: "tuple[str, ...] | list[str] | str | None") -> tuple[str, ...]:
    if not compare:
        return ()
    return (compare,) if isinstance(compare, str) else tuple(compare)


def format_header(comm, coll: Collective, dtype: str, op: str | None, root: int | None, iters: int, warmup: int,
                  inplace: bool, algorithm: str | None, compare: "tuple[str, ...] | str | None" = (),
                  blocking: bool = False, *, target: OpTarget | None = None, checked_first: bool = False) -> str:
    """The header: what ran where, and the column names (hccl_test's first)."""
    backend = _backend(comm)
    compare = _compares(compare)
    subject = f"operator {coll.name} ({target.opdir})" if target else coll.name
    what = (f"# hcomm-kit bench {subject}: {comm.size} ranks, dtype {dtype}"
            + (f", op {op}" if op else "") + (f", root {root}" if root is not None else "")
            + ("" if target else f", algorithm {algorithm or 'auto'}")
            + f", {'in-place' if inplace else 'out-of-place'}"
            + f", {iters} iterations after {warmup} warm-ups"
            + (", each call waited for (--blocking)" if blocking else ", calls enqueued back to back (hccl_test)"))
    lines = [what,
             f"# backend {backend}, soc {comm.soc}"
             + (" -- EMULATOR: CPU timings of the emulator on this host, not Ascend hardware figures; notify "
                + (f"checker on for {CHECKED_CALLS} untimed calls per size, off while timing" if checked_first else
                   f"checker {'off' if envs.check_mode() == '0' else 'ON (HCOMM_KIT_CHECK): slower'}")
                if backend == "emu" else "")]
    if target is not None:
        lines.append(f"# {target.note}; checked against "
                     + ({"none": "nothing (no numpy reference for this operator)"}.get(target.kind,
                                                                                     f"the numpy {target.kind} reference"))
                     + (f"; compared with the built-in {'all_to_all_v (ring shift)' if target.builtin == 'shift' else target.builtin}"
                        if "builtin" in compare and target.builtin else ""))
    lines.append("# data_size = bytes taking part per rank (hccl_test); algbw = S/time, busbw = algbw x factor "
                 "(nccl-tests, GB = 1e9 bytes); time = mean per call, max over ranks (device events)")
    cols = list(_COLS)
    if "builtin" in compare:
        cols += ["builtin_time(us)", "builtin_busbw(GB/s)", "vs_builtin"]
    if "mpi" in compare:
        cols += ["mpi_time(us)", "mpi_busbw(GB/s)", "vs_mpi"]
    if compare:
        lines.append("# vs_X = X's time / ours (> 1: ours is faster)")
    lines.append(" | ".join(cols))
    return "\n".join(lines)


def _cell(v: float | None, width: int, fmt: str) -> str:
    return f"{v:>{width}{fmt}}" if v is not None and v == v else f"{'N/A' if v is None else 'NULL':>{width}s}"


def format_row(row: dict[str, Any], compare: "tuple[str, ...] | str | None" = ()) -> str:
    """One table row in the header's column order."""
    compare = _compares(compare)
    wrong = "NULL" if row["wrong"] is None else str(row["wrong"])
    cells = [f"{row['size']:>16d}", f"{row['time_us']:>13.2f}", _cell(row["algbw"], 19, ".4f"),
             _cell(row["busbw"], 19, ".4f"), f"{row['check']:>12s}", f"{wrong:>6s}"]
    for c, w1, w2 in (("builtin", 16, 19), ("mpi", 12, 15)):
        if c in compare:
            t, b, v = row.get(f"{c}_time_us"), row.get(f"{c}_busbw"), row.get(f"vs_{c}")
            w3 = max(6, len("vs_" + c))
            # N/A: there is no counterpart (or no bandwidth convention); NULL: it could not be measured.
            none = "N/A" if (c == "builtin" and not row.get("builtin")) or row.get("reference") == "copy" else "NULL"
            cells += [f"{t:>{w1}.2f}" if t else f"{none:>{w1}s}",
                      f"{b:>{w2}.4f}" if b else f"{none if row['busbw'] is not None else 'N/A':>{w2}s}",
                      f"{v:>{w3}.2f}" if v else f"{none:>{w3}s}"]
    return " | ".join(cells)


def write_json(rows: list[dict[str, Any]], path: str) -> None:
    """One JSON object per line."""
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def plot_title(rows: list[dict[str, Any]]) -> str:
    """What was measured, for the figure: collective, ranks, dtype, op, backend."""
    if not rows:
        return "hcomm-kit bench (no rows)"
    r = rows[0]
    what = f"{'operator ' if r.get('operator') else ''}{r.get('collective', '?')}: {r.get('ranks', '?')} ranks"
    for key, fmt in (("dtype", "{}"), ("op", "{}"), ("root", "root {}")):
        if r.get(key) is not None:
            what += ", " + fmt.format(r[key])
    where = f"{r.get('backend', '')} {r.get('soc', '')}".strip()
    if r.get("backend") == "emu":
        where += " (emulator CPU timings)"
    return f"hcomm-kit bench {what} -- {where}"


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """busbw and time against size, one line per series (ours, the built-in and MPI when measured)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'hcomm-kit[plot]' (or pip install matplotlib)",
                          key="--plot") from None

    def ys(key: str) -> list[float]:
        return [math.nan if r.get(key) is None else r[key] for r in rows]

    xs = [max(r["size"], 1) for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.3))
    label = f"{rows[0]['collective']} (hcomm-kit, {rows[0]['backend']})" if rows else "hcomm-kit"
    ax1.plot(xs, ys("busbw"), marker="o", label=label)
    ax2.plot(xs, ys("time_us"), marker="o", label=label)
    series = (("builtin", f"built-in {rows[0].get('builtin')}" if rows else "built-in", "^"),
              ("mpi", "Open MPI (mpi4py)", "s"))
    for key, name, marker in series:
        if rows and f"{key}_time_us" in rows[0]:
            ax1.plot(xs, ys(f"{key}_busbw"), marker=marker, label=name)
            ax2.plot(xs, ys(f"{key}_time_us"), marker=marker, label=name)
    if rows and rows[0].get("busbw") is None:
        ax1.text(0.5, 0.5, "no bandwidth convention:\ntime only (--busbw-factor)", ha="center", va="center",
                 transform=ax1.transAxes)
    for ax, yl in ((ax1, "bus bandwidth (GB/s)"), (ax2, "time per call (us)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("data size per rank (bytes)")
        ax.set_ylabel(yl)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    ax2.set_yscale("log")
    fig.suptitle(plot_title(rows), fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
