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
from ..build.kinds import KINDS
from ..ops import reference

__all__ = ["COLLECTIVES", "COMPARES", "ALIASES", "Collective", "OpTarget", "op_target", "parse_size", "sizes",
           "check_target", "builtin_collective"]


@dataclass(frozen=True)
class Collective:
    """How one collective is sized, timed and checked."""

    name: str
    bus_factor: Callable[[int], float] | None  # busbw = algbw x bus_factor(ranks); None: time only
    split: bool                          # data_size is cut into one block per rank
    reduction: bool = False
    rooted: bool = False
    inplace: bool = False                # supports out = in


def _from_kind(name: str, *, inplace: bool = False) -> Collective:
    """A built-in collective sized and given its bus factor by its kind (:data:`hcomm_kit.build.kinds.KINDS`)."""
    k = KINDS[name]
    return Collective(name, k.bus_factor(), k.split, reduction=k.reduction, rooted=k.rooted, inplace=inplace)


# The built-ins: one per kind (factors and sizing from the kinds table); sendrecv = pairs (0,1), (2,3), ...
COLLECTIVES: dict[str, Collective] = {c.name: c for c in (
    _from_kind("allreduce", inplace=True),
    _from_kind("reduce_scatter"),
    _from_kind("allgather"),
    _from_kind("alltoall"),
    _from_kind("alltoallv"),
    _from_kind("broadcast", inplace=True),
    _from_kind("reduce", inplace=True),
    _from_kind("gather"),
    _from_kind("scatter"),
    _from_kind("sendrecv"),
)}
COMPARES = ("builtin", "mpi")
ALIASES = {"all_reduce": "allreduce", "allreduce": "allreduce", "reducescatter": "reduce_scatter",
           "reduce_scatter": "reduce_scatter", "all_gather": "allgather", "all_to_all": "alltoall",
           "all_to_all_v": "alltoallv",
           "bcast": "broadcast", "send_recv": "sendrecv", "p2p": "sendrecv"}


@dataclass(frozen=True)
class OpTarget:
    """A user's operator as a benchmark target: how it is sized, what it is compared with.

    Attributes:
        opdir: the operator directory.
        spec: its op.toml.
        kind: its kind (op.toml ``kind``; :data:`hcomm_kit.build.kinds.KINDS`).
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


def op_target(opdir: str, busbw_factor: float | None = None) -> OpTarget:
    """Describe the operator in ``opdir`` as a benchmark target: its kind gives the sizing, the bus
    bandwidth factor and the built-in of ``--compare builtin``."""
    from ..build.opspec import load_opspec

    spec = load_opspec(opdir)
    kind = spec.kind_info
    builtin = kind.builtin if kind.builtin in COLLECTIVES or kind.builtin == "shift" else None
    if busbw_factor is not None:
        factor: Callable[[int], float] | None = lambda n, f=float(busbw_factor): f  # noqa: E731
        note = f"busbw factor {busbw_factor:g} (--busbw-factor)"
    elif kind.bus:
        factor = kind.bus_factor()
        note = f"kind {kind.name}: busbw factor {kind.bus}"
    else:
        factor = None
        note = f"kind {kind.name}: no bandwidth convention, time only (--busbw-factor F sets one)"
    coll = Collective(spec.name, factor, kind.split, reduction=spec.is_reduction, rooted=spec.rooted,
                      inplace=bool(getattr(spec, "inplace", False)))
    return OpTarget(str(opdir), spec, kind.name, coll, builtin, note)


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
    return reference.accumulate((reference.to_float(x, dt.name) for x in inputs), rop)


class _Case:
    """One (collective, size) on this rank: device buffers, the call, and its expected output.

    ``coll.name`` is a built-in collective of :data:`COLLECTIVES` or ``"shift"`` (the built-in
    counterpart of a p2p operator: ``all_to_all_v`` sending everything to the next rank)."""

    kind = ""         # kind of a user's operator (see _OpCase)
    _v_counts: bool | None = None  # per-rank counts (alltoallv); None: by the collective's name
    mpi_name = ""     # the MPI call of --compare mpi (the kind's; "Send/Recv": pairs of the built-in sendrecv)

    def __init__(self, comm, coll: Collective, nbytes: int, dt: "_dtypes.DType", rop: str, root: int, fill: str,
                 inplace: bool, algorithm: str | None, *, gathers: bool | None = None) -> None:
        n, item = comm.size, dt.itemsize
        self.comm, self.coll, self.dt, self.rop, self.root = comm, coll, dt, rop, root
        self.algorithm = algorithm
        self.mpi_name = "Send/Recv" if coll.name == "sendrecv" else KINDS[coll.name].mpi if coll.name in KINDS else ""
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
        self.counts = None  # alltoallv: row i = what rank i sends to each rank
        if self._v_counts or (self._v_counts is None and coll.name == "alltoallv"):
            from ..ops.expect import alltoallv_counts

            self.counts = alltoallv_counts(n, count_in)
            self.call_kw = {"send_counts": self.counts[comm.rank], "recv_counts": self.counts[:, comm.rank]}
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
            self.mpi_name = "Sendrecv"

    def _out_count(self, count_in: int) -> int:
        n = self.comm.size
        if self.counts is not None:
            return int(self.counts[:, self.comm.rank].sum())
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
        if c == "alltoallv":
            return comm.all_to_all_v(x, self.call_kw["send_counts"], self.call_kw["recv_counts"], out=y, **kw)
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
        if c == "alltoallv":
            return reference.alltoallv(ins, self.counts)[r], True
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
    """One size of a user's operator: sized by its kind (:class:`OpTarget`), called through
    :class:`~hcomm_kit.ops.custom_op.CustomOp` (``launch`` = enqueue only, as ``async_op="stream"``),
    checked against its reference (:func:`hcomm_kit.ops.expect.expected_outputs`) on the ranks its
    kind checks, on an output filled with a poison byte first."""

    def __init__(self, comm, target: OpTarget, op, nbytes: int, dt: "_dtypes.DType", rop: str | None,
                 root: int | None, fill: str, inplace: bool, algorithm: str | None = None) -> None:
        self.op, self.kind, self.target = op, target.kind, target
        self.op_root = root
        self.op_algorithm = algorithm
        spec = target.spec
        self._v_counts = spec.kind == "alltoallv"
        super().__init__(comm, target.coll, nbytes, dt, rop or "sum", root or 0, fill, inplace, None,
                         gathers=spec.kind_info.input == "count")  # split kinds: allgather, gather
        self.mpi_name = KINDS[target.kind].mpi or ""
        self.op_rop = rop
        # OpParam.count: HCCL's count (the block where the input holds one block per rank)
        self.count = spec.call_count(self.count_in, comm.size)
        if self.counts is None:
            self.call_kw: dict[str, Any] = {}
        self.ref_kw = {"send_counts": self.counts} if self.counts is not None else {}

    def _out_count(self, count_in: int) -> int:
        if self.counts is not None:
            return int(self.counts[:, self.comm.rank].sum())
        spec = self.target.spec
        return spec.output_count(spec.call_count(count_in, self.comm.size), self.comm.size)

    def call(self, async_op: bool | str = True):
        if async_op == "stream":
            return self.op.launch(self.x.ptr, self.y.ptr, self.count, self.dt.name, reduce_op=self.op_rop,
                                  root=self.op_root, algorithm=self.op_algorithm, **self.call_kw)
        return self.op(self.x, self.y, count=self.count, dtype=self.dt.name, reduce_op=self.op_rop,
                       root=self.op_root, async_op=bool(async_op), algorithm=self.op_algorithm, **self.call_kw)

    def check(self) -> tuple[int, tuple | None, bool]:
        if self.y is not self.x:  # a kernel that leaves its output (or part of it) unwritten fails
            from ..jobs.runner import POISON_BYTE

            self.y.copy_from(np.full(self.y.size * self.dt.itemsize, POISON_BYTE, np.uint8).view(self.dt.numpy))
        return super().check()

    def expected(self) -> tuple[np.ndarray | None, bool]:
        from ..ops.expect import expected_outputs

        ins, dt = self.inputs, self.dt
        ok = _exact(dt, _wide_reduce(ins, dt, self.op_rop)) if self.op_rop and self.target.spec.kind != "custom" \
            else True
        exps = expected_outputs(self.target.spec, ins, dtype=dt.name, reduce_op=self.op_rop,
                                root=self.op_root or 0, params=self.ref_kw)
        if exps is None:
            return None, False  # no reference: NULL
        return exps[self.comm.rank], ok


def check_target(target: OpTarget, dtype: str, op: str | None) -> None:
    """Refuse a dtype / reduce op the operator does not list in op.toml (before anything starts);
    ``op`` None: the operator's first listed."""
    spec = target.spec
    dt = _dtypes.get_dtype(dtype).name
    rop = _dtypes.get_reduce_op(spec.default_reduce_op(op) or "sum").name
    if dt not in spec.dtypes:
        raise ConfigError(f"operator {spec.name} does not support dtype {dt}; op.toml [op].dtypes = "
                          f"{list(spec.dtypes)}", key="-d", path=Path(target.opdir) / "op.toml")
    if target.coll.reduction and rop not in spec.reduce_ops:
        raise ConfigError(f"operator {spec.name} does not support reduce op {rop}; op.toml [op].reduce_ops = "
                          f"{list(spec.reduce_ops)}", key="-o", path=Path(target.opdir) / "op.toml")


_SHIFT = Collective("shift", lambda n: 1.0, False)  # built-in counterpart of a p2p operator (all_to_all_v)


def builtin_collective(collective: str) -> str | None:
    """The built-in collective of ``collective``: a name of :data:`COLLECTIVES` (or an alias), or a
    directory of ``aicpu_kernels/`` named by its op.toml kind (send_recv, a ``custom`` kind: by its
    name); None for anything else (an operator directory, an unknown name)."""
    from ..base.resources import aicpu_kernels_dir

    p = Path(str(collective))
    if (p / "op.toml").is_file():
        if p.resolve().parent != aicpu_kernels_dir().resolve():
            return None
        from ..build.opspec import load_opspec

        kind = load_opspec(p).kind_info
        name = kind.builtin if kind.builtin in COLLECTIVES else ALIASES.get(p.name, p.name)
        return name if name in COLLECTIVES else None
    name = ALIASES.get(collective, collective)
    return name if name in COLLECTIVES else None


def _target(collective: str, busbw_factor: float | None) -> OpTarget | None:
    """None for a built-in collective (a name, or its directory in aicpu_kernels/: by its kind), else
    the operator."""
    p = Path(str(collective))
    is_dir = (p / "op.toml").is_file()
    if builtin_collective(collective) is not None:
        if busbw_factor is not None:
            raise ConfigError("--busbw-factor is for your own operators (built-ins use nccl-tests' factors)",
                              key="--busbw-factor")
        return None
    if is_dir:
        return op_target(str(p.resolve()), busbw_factor)
    raise ConfigError(f"unknown collective {collective!r}: neither a built-in collective "
                      f"({', '.join(sorted(COLLECTIVES))}) nor an operator directory (with op.toml)",
                      key="COLLECTIVE")
