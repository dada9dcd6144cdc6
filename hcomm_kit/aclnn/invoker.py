"""Call an operator's aclnn two-phase interface from Python (ctypes), as frameworks call CANN's.

:func:`load` builds an operator directory (kernel + aclnn host library, :mod:`hcomm_kit.build.aclnnbuild`)
and registers it under its aclnn name; :func:`invoke` then runs::

    aclCreateTensor(x), aclCreateTensor(out)
    aclnn<Name>GetWorkspaceSize(x, [reduceOp,] root, [params...], group, out, &size, &executor)
    workspace = pool.acquire(size)                      # per-device pool, reused
    aclnn<Name>(workspace, size, executor, stream)       # asynchronous
    -> Work: wait() synchronizes, copies a host output back, returns the pool's memory

Inputs: numpy arrays (and anything :func:`~hcomm_kit.core.device.as_host_array` takes: torch CPU
tensors, DLPack, the buffer protocol) are staged through pooled device blocks; a
:class:`~hcomm_kit.core.device.DeviceBuffer` is used in place.

Example::

    comm = hcomm_kit.init()
    hcomm_kit.aclnn.load("ops/ring_sum")
    y = hcomm_kit.aclnn.invoke("RingSum", x, group=comm.name, reduce_op="sum").wait()
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import AclError, ConfigError
from ..base.validate import check_out_array
from ..build.aclnnbuild import AclnnBuild, build_aclnn
from ..build.opspec import PARAM_TYPES, OpSpec
from ..core.device import DeviceBuffer, Event, Stream, as_host_array, host_ptr
from ..runtime import codes
from .meta import MetaApi, TensorDesc, check_status, meta_api
from .pool import Block, WorkspacePool, stream_pool, workspace_pool

__all__ = ["AclnnOp", "Work", "load", "invoke", "get_op", "registered"]

_H2D, _D2H = 1, 2
_REGISTRY: dict[str, "AclnnOp"] = {}
_REG_LOCK = threading.Lock()


def _rt():
    from .. import runtime

    return runtime.loaded() or runtime.load()


class AclnnOp:
    """An operator's aclnn pair, loaded from its host library with declared argtypes/restype.

    Attributes:
        name: ``RingSum``; ``api``: ``aclnnRingSum``; ``spec``: its op.toml; ``build``: the paths.
    """

    def __init__(self, spec: OpSpec, built: AclnnBuild, rt=None) -> None:
        self.spec, self.build = spec, built
        self.rt = rt or _rt()
        self.meta: MetaApi = meta_api(self.rt)
        self.api = built.api
        self.name = built.api[len("aclnn"):]
        self.lib = ctypes.CDLL(str(built.library))
        p1 = getattr(self.lib, f"{self.api}GetWorkspaceSize")
        argtypes: list[Any] = [ctypes.c_void_p]
        if spec.is_reduction:
            argtypes.append(ctypes.c_int64)
        argtypes.append(ctypes.c_int64)
        for pf in spec.params:
            ct = PARAM_TYPES[pf.type]
            argtypes.append(ctypes.c_void_p if pf.array else ct)
        argtypes += [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_void_p)]
        p1.argtypes, p1.restype = argtypes, ctypes.c_int32
        p2 = getattr(self.lib, self.api)
        p2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        p2.restype = ctypes.c_int32
        self._phase1, self._phase2 = p1, p2

    def output_count(self, count: int, ranks: int) -> int:
        """Elements of ``out`` for ``count`` input elements on ``ranks`` ranks (the kind's rules:
        ``OpParam.count`` is one block per rank where the input holds one, then [io].output)."""
        return self.spec.output_count(self.spec.call_count(count, ranks), ranks)

    def get_workspace_size(self, x: TensorDesc, out: TensorDesc, *, group: str, reduce_op: Any = None,
                           root: int = 0, **params: Any) -> tuple[int, int]:
        """Phase one: ``(workspace bytes, executor handle)``. Raises :class:`AclError` (ACLNN code)."""
        args: list[Any] = [x.handle]
        if self.spec.is_reduction:
            args.append(_dtypes.get_reduce_op("sum" if reduce_op is None else reduce_op).value)
        args.append(int(root))
        keep = []
        unknown = set(params) - {p.name for p in self.spec.params}
        if unknown:
            raise ConfigError(f"operator {self.spec.name} has no parameter(s) {', '.join(sorted(unknown))} "
                              f"(op.toml [[param]]: {', '.join(p.name for p in self.spec.params) or 'none'})",
                              key="params")
        for pf in self.spec.params:
            v = params.get(pf.name, 0)
            if pf.array:
                ct = PARAM_TYPES[pf.type] * pf.array
                vals = list(v) if v is not None and not isinstance(v, int) else [v or 0] * pf.array
                arr = ct(*vals[: pf.array])
                keep.append(arr)
                args.append(ctypes.addressof(arr))
            else:
                args.append(v)
        size, ex = ctypes.c_uint64(0), ctypes.c_void_p()
        args += [group.encode(), out.handle, ctypes.byref(size), ctypes.byref(ex)]
        check_status(self.rt, self._phase1(*args), f"{self.api}GetWorkspaceSize")
        return size.value, ex.value

    def run(self, workspace: int, size: int, executor: int, stream: int) -> None:
        """Phase two (asynchronous on ``stream``)."""
        check_status(self.rt, self._phase2(workspace or None, size, executor, stream), self.api)

    def __repr__(self) -> str:
        return f"<AclnnOp {self.api} {self.build.library}>"


def load(opdir: "str | os.PathLike[str]", *, debug: bool = False, verbose: bool = False) -> AclnnOp:
    """Build (cached) and register the aclnn interface of an operator directory; returns it."""
    from ..build.opbuild import build_op

    res = build_op(opdir, "emu", debug, verbose)
    built = build_aclnn(res.spec, res.json_path, verbose=verbose)
    op = AclnnOp(res.spec, built)
    with _REG_LOCK:
        _REGISTRY[op.name] = op
        _REGISTRY[op.api] = op
    return op


def registered() -> list[str]:
    """aclnn names of the loaded operators (``RingSum``, ...)."""
    return sorted(k for k in _REGISTRY if not k.startswith("aclnn"))


def get_op(name: str) -> AclnnOp:
    """The loaded operator called ``name`` (``RingSum`` or ``aclnnRingSum``)."""
    op = _REGISTRY.get(name)
    if op is None:
        known = ", ".join(registered()) or "none"
        raise ConfigError(f"no aclnn operator {name!r} is loaded (loaded: {known}); load it first: "
                          f"hcomm_kit.aclnn.load('<operator dir>')", key="name")
    return op


class Work:
    """Handle of one :func:`invoke`: :meth:`wait` returns the output; :meth:`is_completed` polls."""

    def __init__(self, op: AclnnOp, event: Event, finish, cleanup) -> None:
        self._op, self._event, self._finish, self._cleanup = op, event, finish, cleanup
        self._done, self._result, self._error = False, None, None

    def is_completed(self) -> bool:
        return self._done or self._event.query()

    def wait(self) -> Any:
        """Wait for the operator, raise its error, return the output."""
        if not self._done:
            self._done = True
            rt = self._op.rt
            try:
                ret = rt.acl.aclrtSynchronizeEvent(self._event.handle)
                if ret:
                    raise AclError(ret, codes.acl_name(ret), f"{self._op.api} (aclrtSynchronizeEvent)",
                                   rt.recent_error_message())
                self._result = self._finish()
            except BaseException as exc:
                self._error = exc
            finally:
                self._cleanup()
                self._event.close()
        if self._error is not None:
            raise self._error
        return self._result


def _stream_handle(stream: "Stream | int | None", rt) -> int:
    if stream is None:
        return stream_pool(rt).get(0).handle
    return stream.handle if isinstance(stream, Stream) else int(stream)


def invoke(name: str, x: Any, out: Any = None, *, group: Any, reduce_op: Any = None, root: int = 0,
           stream: "Stream | int | None" = None, ranks: int | None = None, dtype: Any = None,
           **params: Any) -> Work:
    """Run an aclnn operator on this rank (every rank of ``group`` makes the call).

    Args:
        name: ``"RingSum"`` (or ``"aclnnRingSum"``), loaded with :func:`load`.
        x: numpy array / torch CPU tensor / array-like (staged), or a :class:`DeviceBuffer`.
        out: None (a new numpy array, or a new DeviceBuffer for a DeviceBuffer ``x``), a numpy
            array to fill, or a DeviceBuffer.
        group: the communicator's name (``comm.name``, HcclGetCommName), or the communicator.
        reduce_op: ``"sum"`` (default) / ``"prod"`` / ``"max"`` / ``"min"`` (reductions).
        root: root rank / peer (operators that take one).
        stream: a :class:`Stream` or handle; default the device's pooled stream 0.
        ranks: ranks of ``group`` (sizes a new ``out``; default: the communicator of this
            process called ``group``, or 1).
        dtype: element type (default: from ``x``; ``"bf16"`` for uint16 bit patterns).
        **params: the operator's op.toml ``[[param]]`` fields.

    Returns:
        A :class:`Work`; ``wait()`` gives the output.

    Raises:
        AclError: phase one or two refused (code ``ACLNN_ERR_*``, the runtime's message).
    """
    op = get_op(name)
    rt = op.rt
    if not isinstance(group, str) and hasattr(group, "name"):  # a Communicator
        ranks = group.size if ranks is None else ranks
        group = group.name
    pool: WorkspacePool = workspace_pool(rt)
    blocks: list[Block] = []
    tensors: list[TensorDesc] = []

    def cleanup() -> None:
        for t in tensors:
            t.close()
        for b in blocks:
            pool.release(b)

    try:
        if isinstance(x, DeviceBuffer):
            dt = _dtypes.get_dtype(dtype if dtype is not None else x.dtype)
            shape, x_ptr, host_x = x.shape, x.ptr, None
        else:
            host_x = as_host_array(x)
            dt = _dtypes.get_dtype(dtype if dtype is not None else host_x.dtype)
            if host_x.dtype.itemsize != dt.itemsize:
                raise ConfigError(f"x holds {host_x.dtype} elements, not {dt.name}", key="dtype")
            host_x = np.ascontiguousarray(host_x)
            shape = host_x.shape
            b = pool.acquire(host_x.nbytes)
            blocks.append(b) if b else None
            x_ptr = b.ptr if b else 0
            if host_x.nbytes:
                rt.checked.aclrtMemcpy(x_ptr, b.capacity, host_ptr(host_x), host_x.nbytes, _H2D)
        n = int(np.prod(shape, dtype=np.int64))
        if ranks is None:
            ranks = _group_size(group)
        out_n = op.output_count(n, ranks)
        host_out = None
        if out is None:
            if host_x is None:
                out = DeviceBuffer.empty(out_n, dt, rt=rt)
            else:
                host_out = np.empty(shape if out_n == n else out_n, dtype=dt.numpy)  # x's shape when as many
        elif not isinstance(out, DeviceBuffer):
            host_out = out if isinstance(out, np.ndarray) else as_host_array(out)
            check_out_array(host_out, dt.numpy, out_n, dt.name, f"{op.api} out", "out")
        if host_out is not None:
            b = pool.acquire(host_out.nbytes)
            blocks.append(b) if b else None
            out_ptr, out_shape = (b.ptr if b else 0), host_out.shape
        else:
            out_ptr, out_shape = out.ptr, out.shape
        tx = TensorDesc(op.meta, x_ptr, shape, dt)
        tensors.append(tx)
        ty = TensorDesc(op.meta, out_ptr, out_shape, dt)
        tensors.append(ty)
        size, ex = op.get_workspace_size(tx, ty, group=group, reduce_op=reduce_op, root=root, **params)
        ws = pool.acquire(size)
        if ws is not None:
            blocks.append(ws)
        s = _stream_handle(stream, rt)
        op.run(ws.ptr if ws else 0, size, ex, s)
        ev = Event(rt)
        ev.record(s)
    except BaseException:
        cleanup()
        raise

    def finish() -> Any:
        if host_out is None:
            return out
        nbytes = host_out.nbytes
        if nbytes:
            rt.checked.aclrtMemcpy(host_ptr(host_out), nbytes, out_ptr, nbytes, _D2H)
        return host_out

    return Work(op, ev, finish, cleanup)


def _group_size(group: str) -> int:
    """Ranks of the live communicator of this process called ``group`` (1 if none is known)."""
    from ..core import communicator as _core_comm

    for c in list(_core_comm._LIVE):
        if not c.closed and c.name == group:
            return c.size
    return 1
