"""One call of an operator on a stream: fill ``OpParam`` (the kernel's argument block is updated only
when its bytes change), then record "go", launch the kernel with its timeout config and wait
"done" (``hcomm.md`` §3.11). On the emulator the four steps (and the collective-call check before
them, and for a blocking call the synchronization) are one C call, ``HcommKitStreamCalls``, from
an argument array cached per (stream, timeout). Mixed into :class:`~hcomm_kit.ops.custom_op.CustomOp`.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..base import dtypes as _dtypes
from ..base.errors import AclError, CollectiveMismatchError, HcclError
from ..runtime import enums, structs
from .op_errors import MISMATCH_MARK
from .resources import Resources

__all__ = ["LaunchSequence", "N_CALLS"]

#: Entries of the cached HcommKitStreamCalls array: call check, go, launch, done, output (the
#: unwritten-output check); a call without a check starts at the second.
N_CALLS = 5


class LaunchSequence:
    """The launch side of :class:`~hcomm_kit.ops.custom_op.CustomOp` (its attributes below, set by
    its constructor)."""

    name: str
    spec: Any
    comm: Any
    rt: Any
    _res_by_stream: dict[int, Resources]
    _cfg_by_timeout: dict[int, Any]
    _peer_topology: Any
    _param_names: dict
    _last_key: Any
    _a2a3_gate: bool
    _builtin_collective: str | None
    _param: Any
    _stream_calls: Any
    _calls: dict
    _failed: ctypes.c_uint32
    _failed_ref: Any
    _sync_flags: int
    _thread_notify: bool
    _out_watch: tuple
    _out_label: Any

    def _set_up(self, res: Any, s: int, r: int) -> Any:
        """The stream's resources (made on its first call) and, for a peer topology, the channel to
        peer ``r``; a collective-call mismatch found while setting up is raised as such."""
        if res is None:
            res = self.resources(s)
        if self._peer_topology:
            try:
                res.ensure_peer(r, self.spec.channel_notifies)
            except (AclError, HcclError) as exc:  # collective with the peer: its failed call check lands here
                if MISMATCH_MARK in exc.message:
                    raise CollectiveMismatchError(f"operator {self.name} on rank {self.comm.rank}: {exc.message}") from exc
                raise
        return res

    def _refuse_before_posting(self, dt_value: int, rop: int, params: dict) -> None:
        """What the product cannot reduce (the A2/A3 gate) and, for a built-in's directory, what its
        algorithm cannot reduce: ConfigError before the call is posted (the communicator stays usable)."""
        if self._a2a3_gate:
            self._check_product_reduce(dt_value, rop)
        if self._builtin_collective is not None and params:
            self._check_builtin_algorithm(params.get("algo", 0), dt_value, rop)

    def _submit(self, in_ptr: int, out_ptr: int, n: int, dt_value: int, rop: int, r: int, tmo: int, s: int,
                params: dict, timeout, sync: bool = False, check: tuple | None = None) -> bool:
        """Fill OpParam (args updated only when its bytes change), record "go", launch, wait "done".

        ``sync``: the caller waits for the call; on the emulator the stream is then synchronized here
        too (one call; the built-ins run on this thread when the stream is idle) and True returned.
        False: only enqueued, the caller synchronizes. ``check``: the call check to make before
        anything is enqueued (:meth:`_post_check`)."""
        res = self._res_by_stream.get(s)
        if check is not None and (res is None or (self._peer_topology and r != self.comm.rank
                                                  and not res.ctx.channels[r].handle)):
            # The first call on this stream (with this peer) sets up channels, which waits for the
            # peers: compare the calls first, so that ranks making different calls fail naming
            # them instead of waiting for each other's set-up. Refused arguments are refused before
            # the call is posted (the communicator stays usable).
            if params and not self._param_names.keys() >= params.keys():
                self._check_params(params)  # raises
            self._refuse_before_posting(dt_value, rop, params)
            if res is None and self.spec.topology == "ring":  # a ring across a downed link: refused alike everywhere
                topo = getattr(self.comm, "topology", None)
                self.spec.ring_layout(self.comm.size, tuple(topo.links_down) if topo is not None else ())
            self._check_now(check)
            check = None
            try:
                res = self._set_up(res, s, r)
            except BaseException as exc:
                # posted, never made (a failed set-up, Ctrl-C, SIGTERM): the peers must not wait for it.
                # Once launched, the call is made: its own errors (a checker finding) are its own.
                self.comm._abandon_call(f"{self.name}", exc)
                raise
        res = self._set_up(res, s, r)
        if params:
            # Hot path (e.g. algo=0 on every call): plain int values key by value, in call order
            # (another order only costs a redundant update); anything else (arrays) by repr.
            if not self._param_names.keys() >= params.keys():
                self._check_params(params)  # raises
            pkey = tuple(params.items())
            for _, v in pkey:
                if type(v) is not int:
                    pkey = tuple(sorted((k, repr(v)) for k, v in params.items()))
                    break
        else:
            pkey = ()
        key = (in_ptr, out_ptr, n, dt_value, rop, r, tmo, s, pkey)
        if key != self._last_key:
            self._refuse_before_posting(dt_value, rop, params)
            p = self._param
            p.inputPtr, p.outputPtr, p.count = in_ptr, out_ptr, n
            p.dataType, p.reduceOp, p.root, p.notifyTimeout = dt_value, rop, r, tmo
            p.cpuThread, p.aicpuThreadOnCpu, p.resCtx = res.cpu_thread, res.aicpu_on_cpu, res.ctx_ptr
            if self._param_names:
                self._set_params(params)
            ret = self._para_update(self._args, self._param_handle, self._param_ref, self._param_size)
            if ret:
                raise self._error(ret, "aclrtKernelArgsParaUpdate", timeout)
            ret = self._finalize(self._args)
            if ret:
                raise self._error(ret, "aclrtKernelArgsFinalize", timeout)
            self._out_watch = self._watched_output(in_ptr, out_ptr, n, dt_value, r, params)
            self._last_key = key
        # ---- go, launch, done ---------------------------------------------------------------
        if self._stream_calls is not None:
            calls = self._calls.get((s, tmo)) or self._build_calls(res, s, tmo)
            if calls[5][0] is not self._out_watch:  # the output of these arguments (unwritten-output check)
                out = calls[0][4]
                calls[5][0] = self._out_watch
                out.a, out.b = self._out_watch
            if check is None:
                ret = self._stream_calls(s, calls[2], N_CALLS - 1, self._sync_flags if sync else 0, self._failed_ref)
            else:
                c0, shadow = calls[3], calls[4]  # the check entry, and what it holds (Python ints: cheap to compare)
                b, c, u32 = check[0][1], check[1][1] if check[1] is not None else 0, check[2] & 0xFFFFFFFF
                if shadow[0] != b:
                    c0.b = shadow[0] = b
                if shadow[1] != c or shadow[2] != u32:
                    c0.c, c0.u32 = c, u32
                    shadow[1], shadow[2] = c, u32
                ret = self._stream_calls(s, calls[1], N_CALLS, self._sync_flags if sync else 0, self._failed_ref)
            if ret:
                raise self._calls_error(ret, timeout, check)
            return sync
        self._check_now(check)
        if self._thread_notify:
            ret = self._go(res.cpu_thread, res.aicpu_on_cpu, 0)
            if ret:
                raise self._error(ret, "HcommThreadNotifyRecordOnThread", timeout, hccl=True)
        else:
            ret = self._go(res.notifies[0], s)
            if ret:
                raise self._error(ret, "aclrtRecordNotify", timeout)
        ret = self._launch(self._fn, 1, s, self._cfg(tmo), self._args, None)
        if ret:
            raise self._error(ret, "aclrtLaunchKernelWithConfig", timeout)
        if self._thread_notify:
            ret = self._done(res.cpu_thread, 0, tmo)
            if ret:
                raise self._error(ret, "HcommThreadNotifyWaitOnThread", timeout, hccl=True)
        else:
            ret = self._done(res.notifies[1], s, tmo)
            if ret:
                raise self._error(ret, "aclrtWaitAndResetNotify", timeout)
        return False

    def _watched_output(self, in_ptr: int, out_ptr: int, n: int, dt_value: int, r: int, params: dict) -> tuple:
        """``(address, bytes)`` of the output a call with these arguments must write in full on this
        rank (the emulator's unwritten-output check, with the notify checker): what the operator's
        kind defines here, ``(0, 0)`` where it defines none (a reduce's or gather's other ranks, a
        ``custom`` kind) or the output starts as the input (in place)."""
        spec, comm = self.spec, self.comm
        if not out_ptr or spec.kind == "custom" or not spec.kind_info.checks_rank(comm.rank, r):
            return (0, 0)
        if self._count_fields:
            out_n = int(sum(int(c) for c in params[self._count_fields["recv_counts"]]))
        elif spec.output == "count":
            out_n = n
        else:
            out_n = spec.output_count(n, comm.size)
        unit = _dtypes.get_dtype(dt_value).itemsize
        out_bytes = out_n * unit
        in_bytes = (n * comm.size if self._blocks else n) * unit
        if in_ptr < out_ptr + out_bytes and out_ptr < in_ptr + in_bytes:
            return (0, 0)
        return (out_ptr, out_bytes)

    def _build_calls(self, res: Resources, s: int, tmo: int) -> tuple:
        """The call check / go / launch / done / output calls of (stream, timeout) for
        HcommKitStreamCalls (cached): (the array, a pointer to all five, a pointer to the last four,
        the check entry, its signature, expected and peer fields as last set, [the output entry's
        (address, bytes) as last set])."""
        K = enums.StreamCallKind
        arr = (structs.HcommKitStreamCall * N_CALLS)()
        arr[0].kind, arr[0].a = int(K.HCOMM_KIT_SC_CALL_CHECK), self.comm.handle or 0
        launch = arr[2]
        launch.kind, launch.u32, launch.a, launch.b = int(K.HCOMM_KIT_SC_LAUNCH), 1, self._fn, self._args
        self._cfg(tmo)  # the launch config of this timeout, kept alive by the operator
        launch.c = ctypes.addressof(self._cfg_by_timeout[tmo][0])
        go, done = arr[1], arr[3]
        if self._thread_notify:
            go.kind, go.a, go.b, go.u32 = int(K.HCOMM_KIT_SC_THREAD_RECORD), res.cpu_thread, res.aicpu_on_cpu, 0
            done.kind, done.a, done.u32, done.b = int(K.HCOMM_KIT_SC_THREAD_WAIT), res.cpu_thread, 0, tmo
        else:
            go.kind, go.a = int(K.HCOMM_KIT_SC_NOTIFY_RECORD), res.notifies[0]
            done.kind, done.a, done.u32 = int(K.HCOMM_KIT_SC_NOTIFY_WAIT), res.notifies[1], tmo
        out = arr[4]
        out.kind, out.c = int(K.HCOMM_KIT_SC_OUTPUT), ctypes.cast(self._out_label, ctypes.c_void_p).value
        out.a, out.b = self._out_watch
        if len(self._calls) >= 16:
            self._calls.clear()
        entry = self._calls[(s, tmo)] = (arr, ctypes.pointer(arr[0]), ctypes.pointer(arr[1]), arr[0], [0, 0, 0],
                                         [self._out_watch])
        return entry

    def _calls_error(self, ret: int, timeout, check: tuple | None) -> Exception:
        """The exception of a failed HcommKitStreamCalls: named after the call that failed."""
        i = self._failed.value - (check is not None)
        if i < 0:  # the call check (or the arguments of the sequence itself)
            return self._check_error(check, ret, self.rt.recent_error_message() or "", timeout)
        if i == 1:
            return self._error(ret, "aclrtLaunchKernelWithConfig", timeout)
        if i >= 3:
            return self._error(ret, "aclrtSynchronizeStream", timeout)
        if self._thread_notify:
            return self._error(ret, "HcommThreadNotifyRecordOnThread" if i == 0 else "HcommThreadNotifyWaitOnThread",
                               timeout, hccl=True)
        return self._error(ret, "aclrtRecordNotify" if i == 0 else "aclrtWaitAndResetNotify", timeout)
