"""Custom operators: load an operator directory and call it like a function.

``comm.load_op(path)`` reads ``op.toml``, builds the kernel (build cache), loads the op-info JSON
with ``aclrtBinaryLoadFromFile`` (CPU_KERNEL_MODE 1) and looks the kernel up. The first call on a
stream acquires the operator's resources following ``hcomm.md`` §3.7–§3.9 for its handshake
scheme and caches them per (communicator, op tag, stream) (:mod:`hcomm_kit.ops.resources`); every
call then runs §3.11:

    fill OpParam -> ParaUpdate/Finalize the cached args handle (only when the bytes changed)
    record "go" -> aclrtLaunchKernelWithConfig(timeout attr) -> wait "done" -> synchronize

Example::

    op = comm.load_op("ops/my_allreduce")
    y = op(x, reduce_op="sum")                     # numpy in, numpy out
    w = op(x, async_op=True); ...; y = w.wait()    # Work handle
    buf = comm.to_device(x); op(buf, out_buf)      # device buffers, no host copies

That launch sequence is :mod:`hcomm_kit.ops.launch_seq`; the Work of ``async_op=True`` is
:mod:`hcomm_kit.ops.work`; the errors a failed call raises are chosen in
:mod:`hcomm_kit.ops.op_errors`.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..base import envs
from ..base.errors import AclError, CollectiveMismatchError, ConfigError, HcclError, HcommKitError
from ..base.resources import aicpu_kernels_dir
from ..base.validate import as_count, as_rank, check_out_array, check_timeout
from ..build.opmodel import A2A3, A2A3_REDUCE_DTYPES, A2A3_REDUCE_OPS
from ..core.device import _D2H, _H2D, BufferPool, DeviceBuffer, Event, Stream, as_host_array, host_ptr
from ..runtime import enums, structs
from .call_check import CallCheck
from .launch_seq import LaunchSequence
from .op_params import OpParams
from .op_errors import MISMATCH_MARK, op_error
from .resources import Resources, load_function
from .work import Work

__all__ = ["CustomOp", "Work", "PRODUCT_OF_DEV_TYPE"]  # Work: re-exported, the Work of async_op=True

PRODUCT_OF_DEV_TYPE = {0: "Ascend910B", 1: "Ascend910_93", 2: "Ascend950"}
#: The reducing built-ins (directories of aicpu_kernels/) and the HCCL API whose dtype/op rules
#: (hcomm_kit.base.dtypes.HCCL_API_REDUCE) they follow, however they are loaded.
BUILTIN_HCCL_API = {"allreduce": "HcclAllReduce", "reduce": "HcclReduce", "reduce_scatter": "HcclReduceScatter"}
_UINT16_MAX = 0xFFFF
_MAX_TIMEOUT_S = 0xFFFFFFFE                 # uint32 seconds in OpParam / Hcomm waits (~136 years)
_OP_TYPES = {"ring-allreduce": enums.HcclCMDType.HCCL_CMD_ALLREDUCE,
             "mesh-allgather": enums.HcclCMDType.HCCL_CMD_ALLGATHER,
             "p2p": enums.HcclCMDType.HCCL_CMD_SEND}
_KIND_OP_TYPES = {"allreduce": "ALLREDUCE", "reduce": "REDUCE", "broadcast": "BROADCAST", "allgather": "ALLGATHER",
                  "reduce_scatter": "REDUCE_SCATTER", "alltoall": "ALLTOALL", "alltoallv": "ALLTOALLV",
                  "scatter": "SCATTER", "gather": "GATHER", "sendrecv": "SEND"}


def _none() -> None:
    """The result of a reduce / gather on the other ranks than the root."""
    return None


class CustomOp(CallCheck, OpParams, LaunchSequence):
    """A loaded custom operator bound to a communicator. Call it: ``op(input, output=None, ...)``.

    Attributes:
        spec: the :class:`~hcomm_kit.build.opmodel.OpSpec` from op.toml.
        build: the :class:`~hcomm_kit.build.opbuild.BuildResult`.
        name: operator name; ``tag``: the op tag (engine-context key and batch-mode tag).
    """

    def __init__(self, comm, path: "str | os.PathLike[str]", *, debug: bool = False, verbose: bool = False) -> None:
        from ..build.opbuild import build_op

        self.comm = comm
        rt = self.rt = comm.rt
        build = build_op(path, debug=debug, verbose=verbose)
        spec = self.spec = build.spec
        self.build = build
        self.name = spec.name
        product = PRODUCT_OF_DEV_TYPE[comm.device.dev_type]
        if spec.handshake == "acl-notify" and comm.device.is_950:
            raise HcommKitError(
                f"operator {spec.name}: the acl-notify handshake is unsupported on {comm.device.soc} "
                f"(HcommAclrtNotify* does not exist on Ascend950); set handshake = \"thread-notify\" in "
                f"{spec.opdir}/op.toml and run `hcomm-kit new --update {spec.opdir}`")
        if product not in spec.products:
            raise HcommKitError(f"operator {spec.name} does not list {product} in op.toml [op].products "
                                f"{list(spec.products)} (this process runs as {comm.device.soc}, HCOMM_KIT_SOC)")
        try:
            self._fn = load_function(rt, build.json_path, spec.kernel)
        except AclError:
            build = self.build = build_op(path, debug=debug, verbose=verbose, force=True)  # stale cache entry
            self._fn = load_function(rt, build.json_path, spec.kernel)
        self.tag = f"hk_{spec.name}_{build.key[:12]}"[:159]
        self._param_names = {p.name: p for p in spec.params}
        self._dtype_ok = frozenset(spec.dtypes)
        self._reduce_ok = frozenset(spec.reduce_ops)
        kind_type = _KIND_OP_TYPES.get(spec.kind)
        self._op_type = int(_OP_TYPES.get(spec.pattern) or
                            (getattr(enums.HcclCMDType, f"HCCL_CMD_{kind_type}") if kind_type else 0))
        # root: rooted kinds (default 0), custom operators and peer topologies (the peer); no other kind
        self._takes_root = spec.rooted or spec.kind == "custom" or spec.topology == "peer"
        kind = spec.kind_info
        self._blocks = kind.blocks                   # the input holds one block of count per rank
        self._root_only = kind.checked == "root"     # reduce, gather: other ranks get None back
        self._count_fields = spec.count_params()     # alltoallv: send_counts=... -> its [[param]] fields
        # void* fields hold an address in each rank's own memory (a built-in's hierInfo): not compared
        self._rank_local = frozenset(pf.name for pf in spec.params if pf.type == "void*")
        # the unwritten-output check: what the output of the current arguments is, and what to call
        # this operator in the emulator's message (kept alive: its address is in the call arrays)
        self._out_watch: tuple = (0, 0)
        self._out_label = ctypes.c_char_p(f"rank {comm.rank}: operator {spec.name} (kind {spec.kind})".encode())
        self._algo_cache: dict[str, int] = {}
        self._builtin_algorithms: dict[str, int] = {}
        self._builtin_collective: str | None = None
        self._pool = BufferPool(rt)
        self._pending: Work | None = None
        self._free_events: list[Event] = []
        self._res_by_stream: dict[int, Resources] = {}
        self._cfg_by_timeout: dict[int, Any] = {}
        self._dt_cache: dict = {}
        self._rop_cache: dict = {}
        self._sig_cache: dict = {}
        self._status = ctypes.c_int(0)
        # OpParam and its cached args handle (aclrtKernelArgsInitByUserMem: memory we own).
        P = spec.param_struct()
        self._param = p = P()
        self._param_size = ctypes.sizeof(P)
        p.tag = self.tag.encode()
        p.commName = comm.name_bytes
        p.devType = comm.device.dev_type
        p.opType = self._op_type
        hs, ms = ctypes.c_size_t(), ctypes.c_size_t()
        rt.checked.aclrtKernelArgsGetHandleMemSize(self._fn, ctypes.byref(hs))
        rt.checked.aclrtKernelArgsGetMemSize(self._fn, (self._param_size + 7) // 8 * 8, ctypes.byref(ms))
        self._handle_mem = ctypes.create_string_buffer(max(1, hs.value))
        self._args_mem = ctypes.create_string_buffer(max(1, ms.value))
        self._args = ctypes.addressof(self._handle_mem)
        rt.checked.aclrtKernelArgsInitByUserMem(self._fn, self._args, ctypes.addressof(self._args_mem), ms.value)
        ph = ctypes.c_void_p()
        rt.checked.aclrtKernelArgsAppend(self._args, ctypes.byref(p), self._param_size, ctypes.byref(ph))
        rt.checked.aclrtKernelArgsFinalize(self._args)
        self._param_handle = ph.value
        self._param_ref = ctypes.byref(p)
        self._last_key: tuple | None = None
        # Pre-bound raw functions (no attribute lookups on the hot path).
        a, h = rt.acl, rt.hccl
        self._memcpy = a.aclrtMemcpy
        self._launch = a.aclrtLaunchKernelWithConfig
        self._sync = a.aclrtSynchronizeStream
        self._para_update = a.aclrtKernelArgsParaUpdate
        self._finalize = a.aclrtKernelArgsFinalize
        self._record_event = a.aclrtRecordEvent
        self._q_event = a.aclrtQueryEventStatus
        self._sync_event = a.aclrtSynchronizeEvent
        if spec.handshake == "thread-notify":
            self._go = h.HcommThreadNotifyRecordOnThread
            self._done = h.HcommThreadNotifyWaitOnThread
        else:
            self._go = a.aclrtRecordNotify
            self._done = a.aclrtWaitAndResetNotify
        self._thread_notify = spec.handshake == "thread-notify"
        # Emulator: the go / launch / done sequence as one call of a cached argument block
        # (HcommKitStreamCalls), per (stream, timeout); None on CANN.
        self._stream_calls = a.HcommKitStreamCalls if rt.backend == "emu" and rt.has("HcommKitStreamCalls") else None
        self._stream_calls_untyped = rt.untyped("HcommKitStreamCalls") if self._stream_calls is not None else None
        self._calls: dict[tuple[int, int], Any] = {}
        self._failed = ctypes.c_uint32(0)
        self._failed_ref = ctypes.byref(self._failed)
        self._sig_ptrs: dict[tuple, tuple] = {}  # call-check texts as C strings (kept alive)
        self._sync_flags = int(enums.StreamCallsFlag.HCOMM_KIT_SC_SYNC)  # | INLINE for the built-ins (below)
        self._peer_topology = spec.topology == "peer"
        self._product = product
        self._a2a3_gate = bool(spec.reduce_ops) and product in A2A3
        self._hccl_api: str | None = None  # a built-in standing for this HCCL API (set_hccl_api)
        opdir = Path(spec.opdir).resolve() if spec.opdir else None
        builtin = opdir is not None and opdir.parent == aicpu_kernels_dir().resolve()
        if builtin and opdir.name in BUILTIN_HCCL_API:
            self.set_hccl_api(BUILTIN_HCCL_API[opdir.name])
        if builtin:
            # hcomm-kit's own kernels only enqueue tasks and return: a blocking call may run them on
            # the calling thread (no hand-off to the stream's worker and back). A user's kernel
            # always runs on the worker, where its launch timeout can abandon it.
            self._sync_flags |= int(enums.StreamCallsFlag.HCOMM_KIT_SC_INLINE)
        self._default_timeout = envs.hccl_exec_timeout_s()

    # ---- resources ---------------------------------------------------------------------------
    def resources(self, stream: "Stream | int | None" = None) -> Resources:
        """The resources of ``stream`` (default: the communicator's), acquiring them on first use.

        Acquisition is collective when the operator has channels: every rank must make the same
        first call.
        """
        s = self._stream_handle(stream)
        res = self._res_by_stream.get(s)
        if res is None:
            comm = self.comm
            tag = self.tag if s == comm.stream.handle else f"{self.tag}_s{len(self._res_by_stream)}"
            try:
                res = Resources(comm, self.spec, tag, s)
            except (AclError, HcclError) as exc:
                # acquisition is collective: a peer's failed call check aborts it here
                if MISMATCH_MARK in exc.message:
                    raise CollectiveMismatchError(f"operator {self.name} on rank {comm.rank}: {exc.message}") from exc
                raise
            comm._resources[(tag, s)] = res
            self._res_by_stream[s] = res
        return res

    def _stream_handle(self, stream) -> int:
        if stream is None:
            return self.comm.stream.handle
        if isinstance(stream, Stream):
            return stream.handle
        return int(stream)

    def _take_event(self) -> Event:
        """An event for an ``async_op`` call (recycled by :meth:`Work.wait`)."""
        return self._free_events.pop() if self._free_events else Event(self.rt)

    def _cfg(self, timeout: int):
        cfg = self._cfg_by_timeout.get(timeout)
        if cfg is None:
            c = structs.launch_cfg(timeout_s=min(timeout, _UINT16_MAX))
            cfg = self._cfg_by_timeout[timeout] = (c, ctypes.byref(c))
        return cfg[1]

    # ---- argument checking ------------------------------------------------------------------
    def _dtype(self, dtype, fallback) -> "_dtypes.DType":
        key = (dtype, fallback)
        dt = self._dt_cache.get(key)
        if dt is None:
            dt = _dtypes.get_dtype(dtype if dtype is not None else fallback)
            if dt.name not in self._dtype_ok:
                raise ConfigError(f"operator {self.name} does not support dtype {dt.name}; op.toml [op].dtypes = "
                                  f"{list(self.spec.dtypes)}" + (" (pass dtype='bf16' for uint16 bf16 bit patterns)"
                                                                  if dt.name == "uint16" and "bf16" in self._dtype_ok
                                                                  else ""), key="dtype", path=self._toml())
            self._dt_cache[key] = dt
        return dt

    def _reduce(self, reduce_op) -> int:
        v = self._rop_cache.get(reduce_op)
        if v is None:
            if not self._reduce_ok:
                if reduce_op is not None:
                    raise ConfigError(f"operator {self.name} is not a reduction (op.toml [op].reduce_ops = []); "
                                      f"drop reduce_op={reduce_op!r}", key="reduce_op", path=self._toml())
                v = 0
            else:
                rop = _dtypes.get_reduce_op(self.spec.default_reduce_op(reduce_op))
                if rop.name not in self._reduce_ok:
                    raise ConfigError(f"operator {self.name} does not support reduce op {rop.name}; op.toml "
                                      f"[op].reduce_ops = {list(self.spec.reduce_ops)}", key="reduce_op",
                                      path=self._toml())
                v = rop.value
            self._rop_cache[reduce_op] = v
        return v

    def set_hccl_api(self, api: str) -> None:
        """Make this operator (a built-in collective) accept what CANN's HCCL API ``api`` accepts
        on the running product (``hcomm_kit.base.dtypes.HCCL_API_REDUCE``) instead of what the Hcomm
        reduce primitive accepts: the built-ins compute int64 and prod themselves on A2/A3."""
        if api not in _dtypes.HCCL_API_REDUCE:
            raise ConfigError(f"{api!r} is not a reducing HCCL API; known: {', '.join(_dtypes.HCCL_API_REDUCE)}",
                              key="api")
        self._hccl_api = api
        self._a2a3_gate = True  # the API table restricts on every product (950 too)
        self._last_key = None

    @property
    def product(self) -> str:
        """The product this process runs as (``Ascend910B``, ``Ascend910_93``, ``Ascend950``)."""
        return self._product

    @property
    def hccl_api(self) -> str | None:
        """The HCCL API whose dtype / reduce-op rules this operator follows (a built-in), else None."""
        return self._hccl_api

    def check_reduce(self, dtype: Any, reduce_op: Any = None) -> None:
        """Raise the :class:`ConfigError` a call of ``dtype`` x ``reduce_op`` (None: the first listed)
        would raise here before launching: not in op.toml, or not reducible on the running product
        (A2/A3 Hcomm reductions; a built-in: CANN's per-API table). Nothing for a non-reduction."""
        dt = self._dtype(dtype, None)
        rop = self._reduce(reduce_op)
        if self._a2a3_gate and self._reduce_ok:
            self._check_product_reduce(dt.value, rop)

    def _check_product_reduce(self, dt_value: int, rop: int) -> None:
        """Built-ins: CANN's per-API table; others: A2/A3 Hcomm reductions, int8/int16/int32/fp16/fp32/bf16
        x sum/max/min (hcomm.md §3.1)."""
        dt, op = _dtypes.get_dtype(dt_value), _dtypes.get_reduce_op(rop)
        if self._hccl_api is not None:
            try:
                _dtypes.check_hccl_api_reduce(self._hccl_api, self._product, dt, op)
            except ConfigError as exc:
                raise ConfigError(f"operator {self.name}: {exc.reason}", key=exc.key) from None
            return
        if dt.name not in A2A3_REDUCE_DTYPES or op.name not in A2A3_REDUCE_OPS:
            raise ConfigError(f"operator {self.name}: {self.comm.device.soc} cannot reduce {dt.name} with {op.name} "
                              f"(A2/A3 Hcomm reductions: {'/'.join(A2A3_REDUCE_DTYPES)} x "
                              f"{'/'.join(A2A3_REDUCE_OPS)}; Ascend950 supports every dtype and op)",
                              key="reduce_op" if op.name not in A2A3_REDUCE_OPS else "dtype")

    # ---- the call --------------------------------------------------------------------------
    def __call__(self, input: Any, output: Any = None, *, count: int | None = None, dtype: Any = None,
                 reduce_op: Any = None, root: int | None = None, stream: "Stream | int | None" = None,
                 async_op: bool = False, timeout: float | None = None, algorithm: str | None = None,
                 **params: Any) -> Any:
        """Run the operator on this rank (every rank of the communicator must call it).

        Args:
            input: numpy array (copied through a pooled device buffer), :class:`DeviceBuffer`
                (used directly), or an object with DLPack / the buffer protocol.
            output: None (a new numpy array, or a new DeviceBuffer for device input), a numpy array
                to fill, or a DeviceBuffer the kernel writes directly.
            count: ``OpParam.count``, HCCL's count of the kind (default: from ``input``): the
                block per rank where the input holds one block per rank (alltoall, reduce_scatter,
                scatter: ``input`` holds ``count * ranks``), else the input elements to use.
            dtype: element type (default: from ``input``; uint16 data is bf16 only with ``dtype="bf16"``).
            reduce_op: ``"sum"``/``"prod"``/``"max"``/``"min"`` for reductions (default: the first of
                op.toml's ``reduce_ops``).
            root: root rank of rooted kinds (reduce, broadcast, scatter, gather; default 0), also
                accepted by ``custom`` operators and the peer of ``topology = "peer"``; other kinds
                refuse it.
            stream: a :class:`Stream` (default: the communicator's).
            async_op: return a :class:`Work` instead of waiting.
            algorithm: a name of op.toml ``[op].algorithms`` (a built-in's: of
                :data:`hcomm_kit.ops.algorithms.ALGORITHMS`), passed as the ``algo`` parameter.
            timeout: seconds (kernel waits, launch timeout, host wait); default ``HCCL_EXEC_TIMEOUT``;
                0 = no limit.
            **params: the operator's ``[[param]]`` fields (alltoallv: ``send_counts`` and
                ``recv_counts``, one count per rank; the output holds ``sum(recv_counts)``).

        Returns:
            The output (numpy array or DeviceBuffer), or a :class:`Work` when ``async_op``. Its
            size follows the kind (:data:`hcomm_kit.build.kinds.KINDS`): e.g. ``count * ranks``
            for an allgather. A reduce or gather returns None on the other ranks than the root
            (as ``comm.reduce`` / ``comm.gather``): their kernel writes a scratch buffer, ``output``
            stays untouched.

        Raises:
            ConfigError: dtype / reduce op / parameter not accepted by op.toml, bad sizes.
            OpTimeoutError: the operator did not finish within ``timeout`` (names op, rank and what
                each device thread waited for).
            KernelError: the kernel returned non-zero or crashed.
            AclError / HcclError: any other runtime failure (code, name, API, message).
        """
        comm = self.comm
        if comm._closed:
            raise HcommKitError(f"operator {self.name}: the communicator is closed")
        if self._pending is not None:
            self._pending.wait()  # pooled buffers and the args handle are reused
        # ---- input --------------------------------------------------------------------------
        host_out = None
        if type(input) is np.ndarray:
            arr = input if input.flags.c_contiguous else np.ascontiguousarray(input)
            dt = self._dtype(dtype, arr.dtype)
            if arr.itemsize != dt.itemsize:
                raise ConfigError(f"operator {self.name}: input dtype {arr.dtype} does not hold {dt.name} "
                                  f"elements ({arr.itemsize} != {dt.itemsize} bytes)", key="dtype")
            n, elems = self._counts(count, arr.size)
            nbytes = elems * dt.itemsize
            in_ptr = self._pool.get("in", nbytes)[0]
            if nbytes:
                ret = self._memcpy(in_ptr, nbytes, host_ptr(arr), nbytes, _H2D)
                if ret:
                    raise self._error(ret, "aclrtMemcpy", timeout)
            device_in = False
        elif isinstance(input, DeviceBuffer):
            dt = self._dtype(dtype, input.dtype)
            n, elems = self._counts(count, input.capacity // dt.itemsize if count is not None else input.size)
            in_ptr = input.address(f"operator {self.name}: the input")
            device_in = True
        else:
            return self(as_host_array(input), output, count=count, dtype=dtype, reduce_op=reduce_op, root=root,
                        stream=stream, async_op=async_op, timeout=timeout, algorithm=algorithm, **params)
        # ---- output -------------------------------------------------------------------------
        rule = self.spec.output
        size = comm.size
        if root is not None and not self._takes_root:
            raise ConfigError(f"operator {self.name} is a {self.spec.kind} (op.toml [op].kind): it takes no root; "
                              f"drop root={root!r}", key="root", path=self._toml())
        if algorithm is not None or self._count_fields:
            params = self._extra_params(params, algorithm, elems)
        if self._count_fields:
            out_n = int(params[self._count_fields["recv_counts"]].sum())
        elif rule == "count":
            out_n = n
        else:
            out_n = self.spec.output_count(n, size)
        out_nbytes = out_n * dt.itemsize
        r = 0 if root is None else as_rank(root, size)
        finish_none = self._root_only and comm.rank != r
        if finish_none:  # not the root of a reduce / gather: a scratch output, None back (as comm.reduce)
            out_ptr = self._pool.get("out", out_nbytes)[0]
        elif output is None:
            if device_in:
                output = DeviceBuffer.empty(out_n, dt, rt=self.rt)
                out_ptr = output.ptr
            else:
                out_ptr = self._pool.get("out", out_nbytes)[0]
        elif isinstance(output, DeviceBuffer):
            output.address(f"operator {self.name}: the output")
            if output.dtype is not dt and output.dtype.name != dt.name:
                raise ConfigError(f"operator {self.name}: output is a DeviceBuffer of {output.dtype.name}, the result "
                                  f"is {dt.name} (the bytes would be reinterpreted)", key="output")
            if output.capacity < out_nbytes:
                raise ConfigError(f"operator {self.name}: output buffer has {output.capacity} bytes, needs "
                                  f"{out_nbytes} ({out_n} x {dt.name}, [io].output = {rule!r})", key="output")
            out_ptr = output.ptr
        else:
            host_out = output if isinstance(output, np.ndarray) else as_host_array(output)
            check_out_array(host_out, dt.numpy, out_n, dt.name, f"operator {self.name} ([io].output = {rule!r})",
                            "output")
            out_ptr = self._pool.get("out", out_nbytes)[0]
        # ---- OpParam, go, launch, done -------------------------------------------------------
        rop = self._reduce(reduce_op)
        if timeout is not None:
            check_timeout(timeout)
        tmo = self._default_timeout if timeout is None else min(int(-(-timeout // 1)), _MAX_TIMEOUT_S)
        s = self.comm.stream.handle if stream is None else self._stream_handle(stream)
        check = self._check_custom_call(n, dt, rop, r, params) if comm._call_check is not None else None
        finish = _none if finish_none else self._finisher(device_in, output, host_out, out_ptr, out_n, out_nbytes, dt)
        if self._submit(in_ptr, out_ptr, n, dt.value, rop, r, tmo, s, params, timeout, sync=not async_op,
                        check=check):
            return finish()
        return self.complete(finish, stream=s, timeout=timeout, async_op=async_op,
                             keep=input if device_in else None)

    def _counts(self, count: int | None, available: int) -> tuple[int, int]:
        """``(OpParam.count, input elements)`` of a call with ``count=`` (None: from the input's
        ``available`` elements), checked against them."""
        if count is None:
            n = self.spec.call_count(available, self.comm.size) if self._blocks else available
            return n, (n * self.comm.size if self._blocks else n)
        n = as_count(count)
        elems = n * self.comm.size if self._blocks else n
        if elems > available:
            what = f" ({n} x {self.comm.size} ranks: one block per rank)" if self._blocks else ""
            raise ConfigError(f"count={count} needs {elems} input elements{what}, the input holds {available}",
                              key="count")
        return n, elems

    def launch(self, input_ptr: int, output_ptr: int, count: int, dtype: Any, *, reduce_op: Any = None,
               root: int | None = None, stream: "Stream | int | None" = None, timeout: float | None = None,
               algorithm: str | None = None, **params: Any) -> None:
        """Low-level call on device pointers: fill OpParam, record "go", launch, enqueue "done".

        Returns as soon as everything is enqueued on ``stream``; completion is the caller's
        (``aclrtSynchronizeStream``, :meth:`synchronize`, or an event). The caller sizes the
        buffers (no ``[io].output`` rule is applied; ``count`` is ``OpParam.count``). With ``topology = "peer"``, ``root`` names the
        peer, whose channel is acquired on first use (both ends must make such a call).

        Raises:
            ConfigError: dtype / reduce op / root / parameter not accepted.
            AclError / HcclError: the runtime refused a call.
        """
        if self._pending is not None:
            self._pending.wait()
        if algorithm is not None or self._count_fields:
            params = self._extra_params(params, algorithm, None)
        self._enqueue(int(input_ptr), int(output_ptr), as_count(count), dtype, reduce_op, root, stream, timeout, params)

    def _enqueue(self, in_ptr: int, out_ptr: int, count: int, dtype: Any, reduce_op: Any, root: int | None,
                 stream: "Stream | int | None", timeout: float | None, params: dict, sync: bool = False,
                 check: tuple | None = None) -> int:
        """:meth:`launch` after the pending call finished: check, submit; returns the stream handle, or
        ``-1 - handle`` when ``sync`` and the call already synchronized the stream (see :meth:`_submit`).
        ``check``: a call-check token (:meth:`_post_check`) to make first."""
        dtv, rop, r, tmo, s = self._resolve(dtype, reduce_op, root, stream, timeout)
        if self._submit(in_ptr, out_ptr, count, dtv, rop, r, tmo, s, params, timeout, sync=sync, check=check):
            return -1 - s
        return s

    def _resolve(self, dtype: Any, reduce_op: Any, root: int | None, stream: "Stream | int | None",
                 timeout: float | None) -> tuple[int, int, int, int, int]:
        """Check a call's arguments: (dtype value, reduce op value, root, timeout in s, stream handle)."""
        comm = self.comm
        if comm._closed:
            raise HcommKitError(f"operator {self.name}: the communicator is closed")
        dt = dtype if type(dtype) is _dtypes.DType and dtype.name in self._dtype_ok else self._dtype(dtype, None)
        rop = self._reduce(reduce_op)
        r = 0 if root is None else as_rank(root, comm.size)
        if timeout is not None:
            check_timeout(timeout)
        tmo = self._default_timeout if timeout is None else min(int(-(-timeout // 1)), _MAX_TIMEOUT_S)
        s = comm.stream.handle if stream is None else self._stream_handle(stream)
        return dt.value, rop, r, tmo, s

    def complete(self, finish, *, stream: "Stream | int | None" = None, timeout: float | None = None,
                 async_op: bool = False, keep: Any = None) -> Any:
        """After :meth:`launch`: wait and return ``finish()``, or return a :class:`Work` whose
        ``wait()`` does (``async_op``). ``finish`` copies results back (e.g. device -> host);
        ``keep``: what the call was given (a DeviceBuffer input), held by the Work until the call
        finished (the operator holds its pending Work until its next call waits for it)."""
        if not async_op:
            self.synchronize(stream, timeout)
            return finish()
        ev = self._take_event()
        ret = self._record_event(ev.handle, self.comm.stream.handle if stream is None else self._stream_handle(stream))
        if ret:
            self._free_events.append(ev)
            raise self._error(ret, "aclrtRecordEvent", timeout)
        work = Work(self, ev, (finish, self._default_timeout if timeout is None else timeout), keep)
        self._pending = work
        return work

    def synchronize(self, stream: "Stream | int | None" = None, timeout: float | None = None) -> None:
        """Wait for everything enqueued on ``stream`` (default: the communicator's); raise its error."""
        s = self.comm.stream.handle if stream is None else self._stream_handle(stream)
        ret = self._sync(s)
        if ret:
            raise self._error(ret, "aclrtSynchronizeStream", timeout)

    def _finisher(self, device_in, output, host_out, out_ptr, out_n, out_nbytes, dt):
        def finish():
            if device_in or isinstance(output, DeviceBuffer):
                return output
            out = host_out if host_out is not None else np.empty(out_n, dtype=dt.numpy)
            if out_nbytes:
                ret = self._memcpy(host_ptr(out), out_nbytes, out_ptr, out_nbytes, _D2H)
                if ret:
                    raise self._error(ret, "aclrtMemcpy", None)
            return out
        return finish

    # ---- errors ------------------------------------------------------------------------------
    def _error(self, ret: int, api: str, timeout: float | None, *, hccl: bool = False) -> Exception:
        """The exception for a failed call (see :func:`~hcomm_kit.ops.op_errors.op_error`)."""
        return op_error(self, ret, api, timeout, hccl=hccl)

    def _release(self) -> None:
        if self._pending is not None:
            try:
                self._pending.wait()
            except Exception:
                pass
        for ev in self._free_events:
            ev.close()
        self._free_events.clear()
        self._pool.close()
        self._res_by_stream.clear()

    @property
    def last_model_time(self) -> float | None:
        """Modelled Ascend time (us) of this operator's latest call (docs/predicted-time.md): the
        tasks every rank's kernel issued for it, simulated on the product's parameters (the
        communicator's latest operation, see ``comm.last_model_time``; call it before another
        operation runs on the communicator). None where there is no model."""
        return self.comm.last_model_time

    def model_explain(self, all_tasks: bool = False) -> dict[str, Any]:
        """The simulation of :attr:`last_model_time` in full (``comm.model_explain``)."""
        return self.comm.model_explain(all_tasks)

    def __repr__(self) -> str:
        s = self.spec
        return (f"<CustomOp {s.name} kind={s.kind} kernel={s.kernel} pattern={s.pattern} handshake={s.handshake} "
                f"rank {self.comm.rank}/{self.comm.size}>")
