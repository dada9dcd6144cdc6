"""What ``hcomm-kit bench`` measures: the collectives (sizing and bus bandwidth factors), a user's
operator as a target, message sizes, and one (collective, size) case per size on this rank with its
exact-by-construction data, its call and its expected output (the numpy references of
:mod:`hcomm_kit.ops.reference`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError
from ..core.device import DeviceBuffer
from ..ops import reference

__all__ = ["COLLECTIVES", "COMPARES", "ALIASES", "Collective", "OpTarget", "op_target", "parse_size", "sizes",
           "check_target"]


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
