"""The built-in collectives' aclnn operators (``aclnnHkAllReduce`` ...) from Python.

The built-ins' host library (``op_api/lib/libcust_opapi.so`` beside the emulator library, built
from ``aicpu_kernels/_op_api``) is loaded on first use. Each operator's phase-one parameters are
read from its header (``op_api/include/aclnn_hk_<name>.h``, the one source of their names and
order) and taken from :func:`~hcomm_kit.aclnn.invoke`'s arguments::

    x / selfRef -> x                 out -> out                reduceOp -> reduce_op
    root / dstRank / srcRank -> root                           group -> group
    aclIntArray  recvCounts, sendDisplsOptional, sendCountMatrix, sendRanks, ...
                 -> recv_counts=, send_displs=, send_count_matrix=, send_ranks=, ... (sequences; an
                    ``...Optional`` one may be left out)
    aclTensorList sendTensors / recvTensors -> send_tensors= / recv_tensors= (lists of operands)

A new ``out`` is sized by the collective's rule (:data:`_OUT`); ``aclnnHkBroadcast`` works in
place on a device ``x`` and returns a new array for a host one; ``aclnnHkBatchSendRecv`` returns
the list ``recv_tensors`` (host arrays filled).

Example::

    y = hcomm_kit.aclnn.invoke("HkAllReduce", x, group=comm.name, reduce_op="sum").wait()
"""

from __future__ import annotations

import ctypes
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError
from ..build.builtins import BUILTIN_ACLNN, OP_API_DIR
from ..build.op_api import VENDOR_LIBRARY
from ..core.device import DeviceBuffer, as_host_array
from .meta import MetaApi, TensorDesc, check_status, meta_api
from .operands import DeviceView, _copy_out, _device_operand, _host_operand, _Operand
from .pool import Block, WorkspacePool

__all__ = ["BuiltinOp", "builtin_op", "is_builtin"]

_PROTO = re.compile(r"aclnnStatus\s+aclnn(Hk\w+)GetWorkspaceSize\(\s*(.*?)\);", re.S)
_ROOTS = ("root", "dstRank", "srcRank")


def _reach(counts: Sequence[int], displs: Sequence[int]) -> int:
    return max((int(c) + int(d) for c, d in zip(counts, displs) if c), default=0)


def _packed(counts: Sequence[int]) -> list[int]:
    return [int(v) for v in np.concatenate(([0], np.cumsum(counts, dtype=np.int64)[:-1]))] if len(counts) else []


#: Elements of a new ``out`` of each collective: f(elements of x, ranks, rank, root, int arrays);
#: None: no output on this rank.
_OUT: dict[str, Callable[[int, int, int, int, dict[str, list[int]]], int | None]] = {
    "HkAllReduce": lambda n, size, rank, root, a: n,
    "HkAllGather": lambda n, size, rank, root, a: n * size,
    "HkReduceScatter": lambda n, size, rank, root, a: n // size,
    "HkReduce": lambda n, size, rank, root, a: n,
    "HkScatter": lambda n, size, rank, root, a: n // size,
    "HkAllToAll": lambda n, size, rank, root, a: n,
    "HkGather": lambda n, size, rank, root, a: n * size if rank == root else None,
    "HkAllGatherV": lambda n, size, rank, root, a: _reach(a["recv_counts"],
                                                          a.get("recv_displs") or _packed(a["recv_counts"])),
    "HkReduceScatterV": lambda n, size, rank, root, a: int(a["send_counts"][rank]),
    "HkAllToAllV": lambda n, size, rank, root, a: _reach(a["recv_counts"],
                                                         a.get("recv_displs") or _packed(a["recv_counts"])),
    "HkAllToAllVC": lambda n, size, rank, root, a: sum(int(a["send_count_matrix"][j * size + rank])
                                                       for j in range(size)),
}


_PARTIAL = frozenset({"HkAllGatherV", "HkAllToAllV", "HkAllToAllVC"})  # out written only in part


def _snake(name: str) -> str:
    """``recvDisplsOptional`` -> ``recv_displs``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name.removesuffix("Optional")).lower()


@dataclass(frozen=True)
class _Param:
    kind: str      # "tensor", "list", "ints", "int", "str"
    name: str      # as in the header
    optional: bool


def _kind(ctype: str) -> str:
    if "aclTensorList" in ctype:
        return "list"
    if "aclTensor" in ctype:
        return "tensor"
    if "aclIntArray" in ctype:
        return "ints"
    if "char" in ctype:
        return "str"
    if "int64_t" in ctype:
        return "int"
    raise ConfigError(f"an aclnnHk header declares a parameter of type {ctype!r} the invoker does not know",
                      key="name")


def _signatures(include: Path) -> dict[str, list[_Param]]:
    """Phase one's parameters (workspaceSize and executor left out) of every aclnnHk header."""
    sigs: dict[str, list[_Param]] = {}
    for h in sorted(include.glob("aclnn_hk_*.h")):
        for m in _PROTO.finditer(h.read_text()):
            params = []
            for arg in m.group(2).split(","):
                ctype, name = re.match(r"^\s*(.*?)\s*(\w+)\s*$", arg, re.S).groups()  # type: ignore[union-attr]
                if name not in ("workspaceSize", "executor"):
                    params.append(_Param(_kind(ctype), name, name.endswith("Optional")))
            sigs[m.group(1)] = params
    return sigs


class BuiltinOp:
    """A built-in collective's aclnn pair (``aclnnHkAllReduce`` ...) with declared argtypes.

    Attributes:
        name: ``HkAllReduce``; ``api``: ``aclnnHkAllReduce``; ``params``: phase one's parameters
        (from the header); ``library``: the built-ins' ``libcust_opapi.so``.
    """

    def __init__(self, name: str, rt) -> None:
        self.rt, self.name, self.api = rt, name, f"aclnn{name}"
        self.meta: MetaApi = meta_api(rt)
        root = Path(rt.library_paths[0]).parent / OP_API_DIR
        self.library = root / "lib" / VENDOR_LIBRARY
        if not self.library.is_file():
            raise ConfigError(f"{self.api}: the built-ins' aclnn package is not beside the runtime library "
                              f"({self.library} is missing); the emulator builds it with itself (hcomm-kit config "
                              "--op-api)", key="name")
        sigs = _signatures(root / "include")
        if name not in sigs:
            raise ConfigError(f"{self.api} is not declared in {root / 'include'}", key="name")
        self.params = sigs[name]
        self.lib = ctypes.CDLL(str(self.library))
        ct = {"tensor": ctypes.c_void_p, "list": ctypes.c_void_p, "ints": ctypes.c_void_p, "int": ctypes.c_int64,
              "str": ctypes.c_char_p}
        p1 = getattr(self.lib, f"{self.api}GetWorkspaceSize")
        p1.argtypes = [*(ct[p.kind] for p in self.params), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_void_p)]
        p1.restype = ctypes.c_int32
        p2 = getattr(self.lib, self.api)
        p2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        p2.restype = ctypes.c_int32
        self._phase1, self._phase2 = p1, p2

    def keywords(self) -> list[str]:
        """The keyword arguments of :func:`invoke` this collective takes beyond x / out / group."""
        names = []
        for p in self.params:
            if p.kind in ("ints", "list"):
                names.append(_snake(p.name))
            elif p.name == "reduceOp":
                names.append("reduce_op")
            elif p.name in _ROOTS:
                names.append("root")
        return names

    def run(self, workspace: int, size: int, executor: int, stream: int) -> None:
        """Phase two (asynchronous on ``stream``)."""
        check_status(self.rt, self._phase2(workspace or None, size, executor, stream), self.api)

    def __repr__(self) -> str:
        return f"<BuiltinOp {self.api} {self.library}>"


_OPS: dict[tuple[int, str], BuiltinOp] = {}
_LOCK = threading.Lock()


def is_builtin(name: str) -> bool:
    """``HkAllReduce`` / ``aclnnHkAllReduce`` names a built-in collective's aclnn operator."""
    return name.removeprefix("aclnn") in BUILTIN_ACLNN


def builtin_op(name: str, rt) -> BuiltinOp:
    """The (cached) :class:`BuiltinOp` called ``name`` (``HkAllReduce`` or ``aclnnHkAllReduce``)."""
    name = name.removeprefix("aclnn")
    with _LOCK:
        op = _OPS.get((id(rt), name))
        if op is None or op.rt is not rt:
            op = _OPS[(id(rt), name)] = BuiltinOp(name, rt)
    return op


def _dtype_of(a: Any, dtype: Any) -> "_dtypes.DType":
    if dtype is not None:
        return _dtypes.get_dtype(dtype)
    if isinstance(a, (DeviceBuffer, DeviceView)):
        return _dtypes.get_dtype((a.buffer if isinstance(a, DeviceView) else a).dtype)
    return _dtypes.get_dtype(as_host_array(a).dtype)


def _writable(a: np.ndarray, dt, what: str, api: str) -> np.ndarray:
    if a.dtype != np.dtype(dt.numpy) or not a.flags.writeable:
        raise ConfigError(f"{api} {what}: needs a writable array of {dt.name} elements (numpy dtype "
                          f"{np.dtype(dt.numpy)}), got {a.dtype}{'' if a.flags.writeable else ', read-only'}", key=what)
    return a


class Call:
    """One call's phase one: the operands staged, the aclTensors, arrays and lists built, then
    ``aclnn<Name>GetWorkspaceSize`` run. ``finish()`` copies host outputs back and returns the
    result; ``close()`` frees the meta objects (the pooled blocks are the caller's ``blocks``)."""

    def __init__(self, op: BuiltinOp, x: Any, out: Any, *, group: str, size: int, rank: int, reduce_op: Any,
                 root: int, dtype: Any, params: dict[str, Any], pool: WorkspacePool, blocks: list[Block]) -> None:
        self.op, self.rt = op, op.rt
        self._tensors: list[TensorDesc] = []
        self._arrays: list[int] = []
        self._lists: list[int] = []
        self._outs: list[_Operand] = []   # host operands copied back by finish()
        self.result: Any = None
        api = op.api
        unknown = set(params) - set(op.keywords())
        if unknown:
            raise ConfigError(f"{api} takes no argument(s) {', '.join(sorted(unknown))} (it takes "
                              f"{', '.join(op.keywords()) or 'x, out, group only'})", key="params")
        ints = {k: [int(v) for v in np.asarray(params[k], dtype=np.int64).ravel()]
                for p in op.params if p.kind == "ints" and (k := _snake(p.name)) in params and params[k] is not None}
        names = {p.name for p in op.params}
        src = x if x is not None else out
        if src is None and ("x" in names or "selfRef" in names or "out" in names):
            raise ConfigError(f"{api}: pass x (or out=, which also gives the dtype)", key="x")
        dt = _dtype_of(src, dtype) if src is not None else None
        args: list[Any] = []
        n = 0
        for p in op.params:
            if p.name in ("x", "selfRef"):
                if p.name == "selfRef":
                    x = self._in_place(x, out, dt, api)
                if x is None:
                    args.append(None)
                    continue
                o = self._operand(x, dt, read=True, pool=pool, blocks=blocks)
                if p.name == "selfRef" and o.host is not None:
                    self._outs.append(o)
                n = int(np.prod(o.shape, dtype=np.int64))
                args.append(self._tensor(o, dt))
            elif p.name == "out":
                if out is None and x is not None:
                    try:
                        n_out = _OUT[op.name](n, size, rank, root, ints)
                    except (KeyError, IndexError):  # a table missing or short: phase one says which
                        n_out = 0
                    if n_out is not None:
                        shape = tuple(self._x_shape) if n_out == n else (n_out,)
                        out = (DeviceBuffer.empty(n_out, dt, rt=self.rt)
                               if isinstance(x, (DeviceBuffer, DeviceView)) else np.empty(shape, dtype=dt.numpy))
                elif out is None:
                    raise ConfigError(f"{api}: pass out= (the array received into)", key="out")
                if out is None or (op.name == "HkGather" and rank != root):
                    args.append(None)
                    continue
                self.result = out
                # a V collective leaves the gaps between its blocks alone: a host out goes in too
                o = self._operand(out, dt, read=op.name in _PARTIAL, pool=pool, blocks=blocks, out=True)
                if o.host is not None:
                    self._outs.append(o)
                args.append(self._tensor(o, dt))
            elif p.kind == "list":
                args.append(self._list(params.get(_snake(p.name)), dtype, read=p.name.startswith("send"), pool=pool,
                                       blocks=blocks))
            elif p.kind == "ints":
                vals = ints.get(_snake(p.name))
                args.append(None if vals is None else self._ints(vals))
            elif p.name == "reduceOp":
                args.append(_dtypes.get_reduce_op("sum" if reduce_op is None else reduce_op).value)
            elif p.name in _ROOTS:
                args.append(int(root))
            elif p.name == "group":
                args.append(group.encode())
        if op.name == "HkBatchSendRecv":
            self.result = list(params.get("recv_tensors") or [])
        size_, ex = ctypes.c_uint64(0), ctypes.c_void_p()
        try:
            check_status(self.rt, op._phase1(*args, ctypes.byref(size_), ctypes.byref(ex)), f"{api}GetWorkspaceSize")
        finally:
            self._free_inputs()
        self.workspace_size, self.executor = size_.value, ex.value

    _x_shape: tuple[int, ...] = ()

    def _in_place(self, x: Any, out: Any, dt, api: str) -> Any:
        """Broadcast's selfRef: a device x itself; a host x copied into ``out`` or a new array."""
        if isinstance(x, (DeviceBuffer, DeviceView)):
            if out is not None:
                raise ConfigError(f"{api} runs in place on a device x: pass no out=", key="out")
            self.result = x
            return x
        host = as_host_array(x)
        if out is None:
            res = np.array(host, dtype=dt.numpy, copy=True)
        else:
            res = _writable(out if isinstance(out, np.ndarray) else as_host_array(out), dt, "out", api)
            res[...] = host.reshape(res.shape) if host.size == res.size else host
        self.result = res
        return res

    def _operand(self, a: Any, dt, *, read: bool, pool: WorkspacePool, blocks: list[Block],
                 out: bool = False) -> _Operand:
        if isinstance(a, (DeviceBuffer, DeviceView)):
            o = _device_operand(a, dt)
        else:
            host = as_host_array(a)
            if out or not read:
                _writable(host, dt, "out", self.op.api)
            elif host.dtype.itemsize != dt.itemsize:
                raise ConfigError(f"{self.op.api}: x holds {host.dtype} elements, not {dt.name}", key="dtype")
            o = _host_operand(self.rt, pool, host, read=read, blocks=blocks)
        if read and not out and not self._x_shape:
            self._x_shape = tuple(o.shape)
        return o

    def _tensor(self, o: _Operand, dt) -> int:
        t = TensorDesc(self.op.meta, o.ptr, o.shape, dt, strides=o.strides, offset=o.offset, storage=o.storage)
        self._tensors.append(t)
        return t.handle

    def _ints(self, vals: list[int]) -> int:
        arr = (ctypes.c_int64 * max(len(vals), 1))(*vals)
        h = self.op.meta.aclCreateIntArray(arr, len(vals))
        if not h:
            check_status(self.rt, 161002, "aclCreateIntArray")
        self._arrays.append(h)
        return h

    def _list(self, items: Any, dtype: Any, *, read: bool, pool: WorkspacePool, blocks: list[Block]) -> int | None:
        if items is None:
            return None
        handles = []
        for a in items:
            dt = _dtype_of(a, dtype)
            o = self._operand(a, dt, read=read, pool=pool, blocks=blocks)
            if not read and o.host is not None:
                self._outs.append(o)
            t = TensorDesc(self.op.meta, o.ptr, o.shape, dt, strides=o.strides, offset=o.offset, storage=o.storage)
            handles.append(t)
        arr = (ctypes.c_void_p * max(len(handles), 1))(*[t.handle for t in handles])
        h = self.op.meta.aclCreateTensorList(arr, len(handles))
        if not h:
            for t in handles:
                t.close()
            check_status(self.rt, 161002, "aclCreateTensorList")
        for t in handles:  # the list owns them now
            t.handle = 0
        self._lists.append(h)
        return h

    def _free_inputs(self) -> None:
        """After phase one: the executor holds what it needs of the meta objects."""
        for t in self._tensors:
            t.close()
        for h in self._arrays:
            self.op.meta.aclDestroyIntArray(h)
        for h in self._lists:
            self.op.meta.aclDestroyTensorList(h)
        self._tensors, self._arrays, self._lists = [], [], []

    def finish(self) -> Any:
        """After the call completed: host outputs copied back; the result."""
        for o in self._outs:
            _copy_out(self.rt, o)
        return self.result
