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
:class:`~hcomm_kit.core.device.DeviceBuffer` (or a :class:`DeviceView` of one) is used in place.
Views are passed as views: a strided or offset array (``x[::2]``, ``m[:, 1]``, ``m.T``, torch views)
becomes an ``aclTensor`` with its shape, strides and offset over the bytes it spans (staged as
they are), and the operator's library stages it for the kernel (the workspace phase one sizes).
An ``out=`` view gets exactly its elements written.

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
from ..base.errors import AclError, ConfigError, OpTimeoutError
from ..base.validate import check_timeout
from ..build.aclnnbuild import AclnnBuild, build_aclnn
from ..build.opspec import PARAM_TYPES, OpSpec
from ..core.device import DeviceBuffer, Event, Stream, as_host_array
from ..runtime import codes
from .builtin import BuiltinOp, Call, builtin_op, is_builtin
from .meta import MetaApi, TensorDesc, check_status, meta_api
from .operands import DeviceView, _check_out, _copy_out, _device_operand, _host_operand, _stream_handle
from .pool import Block, WorkspacePool, workspace_pool

__all__ = ["AclnnOp", "Work", "DeviceView", "load", "invoke", "get_op", "registered"]

_EVENT_SYNC_TIMEOUT = 507047  # aclrtSynchronizeEventWithTimeout expired
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
    """Handle of one :func:`invoke`: :meth:`wait` returns the output; :meth:`is_completed` polls.

    It holds the call's input and output (device buffers and views included) until the operator
    has finished, so a temporary passed to :func:`invoke` (``invoke(name, comm.to_device(x), ...)``)
    is not freed while the kernel still reads it.
    """

    def __init__(self, op: AclnnOp, event: Event, finish, cleanup, keep: tuple = ()) -> None:
        self._op, self._event, self._finish, self._cleanup = op, event, finish, cleanup
        self._done, self._result, self._error = False, None, None
        self._keep = keep  # the operands, released once the operator has finished

    def is_completed(self) -> bool:
        """True once the operator has finished (or :meth:`wait` has returned)."""
        return self._done or self._event.query()

    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the operator (at most ``timeout`` seconds), raise its error, return the output.

        Raises:
            OpTimeoutError: not finished within ``timeout`` (the operator may still be running:
                its memory stays with it until the process ends).
            AclError: the operator failed (the ACL code and the runtime's message).
        """
        check_timeout(timeout)
        if not self._done:
            self._done = True
            rt = self._op.rt
            timed_out = False
            try:
                if timeout is None:
                    ret, api = rt.acl.aclrtSynchronizeEvent(self._event.handle), "aclrtSynchronizeEvent"
                else:
                    api = "aclrtSynchronizeEventWithTimeout"
                    ret = rt.acl.aclrtSynchronizeEventWithTimeout(self._event.handle, max(1, int(timeout * 1000)))
                if ret == _EVENT_SYNC_TIMEOUT:
                    rt.recent_error_message()  # consumed: the message below says it better
                    timed_out = True
                    raise OpTimeoutError(ret, codes.acl_name(ret), api,
                                         f"{self._op.api} did not finish within the {timeout:.3g} s of "
                                         f"Work.wait(timeout=...); it may still be running",
                                         op=self._op.api, timeout=float(timeout))
                if ret:
                    raise AclError(ret, codes.acl_name(ret), f"{self._op.api} ({api})", rt.recent_error_message())
                self._result = self._finish()
            except BaseException as exc:
                self._error = exc
            finally:
                if not timed_out:  # a running operator keeps its workspace, staging blocks and operands
                    self._cleanup()
                    self._event.close()
                    self._keep = ()
        if self._error is not None:
            raise self._error
        return self._result


def invoke(name: str, x: Any, out: Any = None, *, group: Any, reduce_op: Any = None, root: int = 0,
           stream: "Stream | int | None" = None, ranks: int | None = None, dtype: Any = None,
           **params: Any) -> Work:
    """Run an aclnn operator on this rank (every rank of ``group`` makes the call).

    A built-in collective's operator (``"HkAllReduce"`` ..., :mod:`.builtin`) needs no :func:`load`;
    its count tables and tensor lists are keyword arguments (``recv_counts=`` ...).

    Args:
        name: ``"RingSum"`` (or ``"aclnnRingSum"``), loaded with :func:`load`, or a built-in
            collective's ``"HkAllReduce"``, ``"HkAllGatherV"``, ... (``hcomm_kit.build.builtins.BUILTIN_ACLNN``).
        x: numpy array / torch CPU tensor / array-like, any view (staged), or a
            :class:`DeviceBuffer` / :class:`DeviceView` (used in place).
        out: None (a new numpy array shaped like ``x`` or by ``[io].output``, or a new DeviceBuffer
            for device input), a numpy array or torch tensor to fill (any view: only its
            elements are written), or a DeviceBuffer / DeviceView.
        group: the communicator's name (``comm.name``, HcclGetCommName), or the communicator.
        reduce_op: ``"sum"`` (default) / ``"prod"`` / ``"max"`` / ``"min"`` (reductions).
        root: root rank / peer (operators that take one).
        stream: a :class:`Stream` or handle; default the device's pooled stream 0.
        ranks: ranks of ``group`` (sizes a new ``out``; default: the communicator of this
            process called ``group``, or 1).
        dtype: element type (default: from ``x``; ``"bf16"`` for uint16 bit patterns).
        **params: the operator's op.toml ``[[param]]`` fields; a built-in's count tables and lists
            (``recv_counts``, ``send_displs``, ``send_count_matrix``, ``send_tensors``, ...).

    Returns:
        A :class:`Work`; ``wait()`` gives the output.

    Raises:
        AclError: phase one or two refused (code ``ACLNN_ERR_*``, the runtime's message).
        ConfigError: an ``out`` of the wrong dtype / size, or read-only.
    """
    if is_builtin(name) and name not in _REGISTRY:
        return _invoke_builtin(builtin_op(name, _rt()), x, out, group=group, reduce_op=reduce_op, root=root,
                               stream=stream, ranks=ranks, dtype=dtype, params=params)
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
        on_device = isinstance(x, (DeviceBuffer, DeviceView))
        if on_device:
            buf = x.buffer if isinstance(x, DeviceView) else x
            dt = _dtypes.get_dtype(dtype if dtype is not None else buf.dtype)
            xo = _device_operand(x, dt)
        else:
            host_x = as_host_array(x)
            dt = _dtypes.get_dtype(dtype if dtype is not None else host_x.dtype)
            if host_x.dtype.itemsize != dt.itemsize:
                raise ConfigError(f"x holds {host_x.dtype} elements, not {dt.name}", key="dtype")
            xo = _host_operand(rt, pool, host_x, read=True, blocks=blocks)
        n = int(np.prod(xo.shape, dtype=np.int64))
        if ranks is None:
            ranks = _group_size(group)
        out_n = op.output_count(n, ranks)
        result: Any = out
        if out is None:
            if on_device:
                out = result = DeviceBuffer.empty(out_n, dt, rt=rt)
            else:
                out = result = np.empty(xo.shape if out_n == n else out_n, dtype=dt.numpy)  # x's shape when as many
        if isinstance(out, (DeviceBuffer, DeviceView)):
            yo = _device_operand(out, dt)
        else:
            host_out = out if isinstance(out, np.ndarray) else as_host_array(out)
            _check_out(host_out, dt, out_n, op.api)
            yo = _host_operand(rt, pool, host_out, read=False, blocks=blocks)
        for o in (xo, yo):
            tensors.append(TensorDesc(op.meta, o.ptr, o.shape, dt, strides=o.strides, offset=o.offset,
                                      storage=o.storage))
        size, ex = op.get_workspace_size(tensors[0], tensors[1], group=group, reduce_op=reduce_op, root=root,
                                         **params)
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
        if yo.host is not None:
            _copy_out(rt, yo)
        return result

    return Work(op, ev, finish, cleanup, keep=(x, out))


def _invoke_builtin(op: BuiltinOp, x: Any, out: Any, *, group: Any, reduce_op: Any, root: int,
                    stream: "Stream | int | None", ranks: int | None, dtype: Any, params: dict[str, Any]) -> Work:
    """:func:`invoke` of a built-in collective (:class:`~hcomm_kit.aclnn.builtin.Call`)."""
    rt = op.rt
    name, size, rank = _group_info(group)
    pool: WorkspacePool = workspace_pool(rt)
    blocks: list[Block] = []

    def cleanup() -> None:
        for b in blocks:
            pool.release(b)

    try:
        call = Call(op, x, out, group=name, size=size if ranks is None else ranks, rank=rank, reduce_op=reduce_op,
                    root=root, dtype=dtype, params=params, pool=pool, blocks=blocks)
        ws = pool.acquire(call.workspace_size)
        if ws is not None:
            blocks.append(ws)
        s = _stream_handle(stream, rt)
        op.run(ws.ptr if ws else 0, call.workspace_size, call.executor, s)
        ev = Event(rt)
        ev.record(s)
    except BaseException:
        cleanup()
        raise
    return Work(op, ev, call.finish, cleanup, keep=(x, out, params))  # type: ignore[arg-type]


def _group_info(group: Any) -> tuple[str, int, int]:
    """(name, ranks, this rank) of ``group``: a communicator, or the name of a live one of this
    process (ranks 1, rank 0 if none is known)."""
    if not isinstance(group, str) and hasattr(group, "name"):
        return group.name, group.size, group.rank
    from ..core import communicator as _core_comm

    for c in list(_core_comm._LIVE):
        if not c.closed and c.name == group:
            return group, c.size, c.rank
    return group, 1, 0


def _group_size(group: str) -> int:
    """Ranks of the live communicator of this process called ``group`` (1 if none is known)."""
    return _group_info(group)[1]
