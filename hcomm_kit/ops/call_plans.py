"""Repeated collective calls: a call made again on the same device buffers with the same
arguments (a benchmark's loop, a training step's small collectives) skips the argument processing
its first call did.

* The second call finds the *plan* the first one left (``_plans``, keyed by the buffers and
  arguments: :meth:`CollectiveOps._call`) and launches from it (:meth:`PlannedCalls._run_plan`).
* From the third call on, ``all_reduce`` keeps a :class:`FastPlan` (``_fast``): the collective-call
  check (this call's site) and check, go, launch, done (and for a blocking call the
  synchronization) in one C call, HcommKitStreamCalls, from the operator's cached argument block
  (:meth:`PlannedCalls._run_fast`).
* Where the compiled helper builds (:mod:`hcomm_kit.build.pyext`), ``all_reduce`` first hands the
  call to it (:func:`try_fast`): the same steps in C, without the bytecode and ctypes in between.
  It takes only the steady state (a plan whose argument block already holds this call site) and
  returns None for anything else, which then goes the Python way below.
* A blocking ``all_reduce`` of a small host array (up to 64 KiB) goes through a device pair of its
  own (dtype, shape, op: :meth:`PlannedCalls._small_host`), so the steady state above applies to
  it; the compiled helper also makes the two copies and the result array (:func:`try_fast_host`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError, HcommKitError
from ..build import pyext
from ..core.device import _D2H, _H2D, DeviceBuffer, host_ptr
from . import callsite as _callsite
from .custom_op import CustomOp
from .launch_seq import N_CALLS

__all__ = ["FastPlan", "PlannedCalls", "try_fast", "try_fast_host"]

# A blocking all_reduce of a host array up to this size goes through a device pair of its own
# (dtype, shape, op): the repeated device call's plans then apply (PlannedCalls._small_host).
_SMALL_HOST_BYTES = 64 * 1024
_SMALL_HOST_KEYS = 32  # pairs kept per communicator (at most 4 MiB)
_PLAIN_OPS = frozenset({"sum", "prod", "max", "min"})

_TRY: list = []  # [the compiled try_all_reduce, or None], filled by the first FastPlan
_TRY_HOST: list = []  # [the compiled try_all_reduce_host, or None], filled with _TRY
_HELPER: list = []  # [the compiled module] once loaded (its forget(), see PlannedCalls._keep_fast)


def try_fast() -> Any:
    """The compiled ``try_all_reduce(comm, x, out, op, async_op)`` (None: not built, or no fast plan
    was made yet in this process). It returns None when the call is not its steady state, else
    HcommKitStreamCalls' return code."""
    return _TRY[0] if _TRY else None


def try_fast_host() -> Any:
    """The compiled ``try_all_reduce_host(comm, x, op, out)`` (None: not built, or no fast plan was
    made yet in this process): a blocking ``all_reduce`` of a small host array through its device
    pair (:meth:`PlannedCalls._small_host`). It returns None when the call is not the steady state,
    the result array, the failed call's code (int), or ``(code,)`` when the copy back failed."""
    return _TRY_HOST[0] if _TRY_HOST else None


def _load_try() -> None:
    mod = pyext.fastcall()
    if mod is not None:
        mod.setup(DeviceBuffer, _callsite._INTERNAL, _callsite._SITES, _callsite._OVERRIDE)
        mod.setup_host(np.ndarray, np.empty)
        _HELPER.append(mod)
    _TRY_HOST.append(mod.try_all_reduce_host if mod is not None else None)
    _TRY.append(mod.try_all_reduce if mod is not None else None)


class FastPlan:
    """A repeated blocking or stream-ordered call on the same device buffers, run with one C call
    (HcommKitStreamCalls from the operator's cached argument block) and no argument processing:
    see :meth:`PlannedCalls._run_fast`. Made by the call after the one that left the plan."""

    __slots__ = ("op", "plan", "fn", "args4", "args3", "cargs", "c0", "shadow", "sig", "where", "text", "last_key")

    def __init__(self, op: CustomOp, plan: tuple, async_op: bool | str) -> None:
        s, tmo = plan[6][4], plan[6][3]
        calls = op._calls[(s, tmo)]
        self.op, self.plan = op, plan
        flags = op._sync_flags if async_op is False else 0
        # HcommKitStreamCalls(stream, calls, n, flags, &failed) without per-call argument conversion
        self.fn = op._stream_calls_untyped
        stream = ctypes.c_void_p(s)
        self.args4 = (stream, calls[1], N_CALLS, flags, op._failed_ref)
        self.args3 = (stream, calls[2], N_CALLS - 1, flags, op._failed_ref)
        # the same as addresses, for the compiled helper (see try_fast)
        self.cargs = (ctypes.cast(self.fn, ctypes.c_void_p).value, s, ctypes.addressof(calls[0][0]),
                      ctypes.addressof(calls[0][1]), flags, ctypes.addressof(op._failed))
        if not _TRY:
            _load_try()
        self.c0, self.shadow = calls[3], calls[4]
        self.sig = plan[5]  # the call check's description (None: no check)
        self.where: str | None = None  # the call site last posted, and its C text (c_char_p, address)
        self.text: tuple = (None, 0)
        self.last_key = op._last_key  # OpParam holds this plan's arguments while op._last_key is this


class PlannedCalls:
    """Launching repeated calls from their plans, and small host arrays' device pairs; mixed into
    :class:`~hcomm_kit.ops.collectives.CollectiveOps`."""

    _closed: bool
    _call_sites: bool
    _fast: dict
    _host_stage: dict
    rt: Any

    def _keep_fast(self, key: tuple, plan: FastPlan) -> None:
        """Keep ``plan`` as the :class:`FastPlan` of ``key`` (at most 256 per communicator)."""
        if len(self._fast) >= 256:
            self._fast.clear()
        self._fast[key] = plan
        self._fast_changed()

    def _drop_fast(self) -> None:
        """Drop every :class:`FastPlan` of this communicator."""
        self._fast.clear()
        self._fast_changed()

    @staticmethod
    def _fast_changed() -> None:
        # the compiled helper remembers the plan of its last call: it must look the plans up again
        if _HELPER:
            _HELPER[0].forget()

    def _run_plan(self, plan: tuple, out: Any, async_op: bool | str) -> Any:
        """A repeated call (see :meth:`_call`): call check, launch, and for a blocking call the wait."""
        op, in_ptr, out_ptr, count, params, sig, (dtv, rop, r, tmo, s) = plan
        if self._closed:
            raise HcommKitError(f"operator {op.name}: the communicator is closed")
        if async_op is False and op._pending is not None:
            op._pending.wait()
        check = op._post_check(sig) if sig is not None else None
        if not op._submit(in_ptr, out_ptr, count, dtv, rop, r, tmo, s, params, None, sync=async_op is False,
                          check=check) and async_op is False:
            op.synchronize(s, None)
        return out

    def _run_fast(self, p: FastPlan, out: Any, async_op: bool | str) -> Any:
        """A repeated call from its :class:`FastPlan`: the call check (this call's site), then
        check, go, launch, done (and for a blocking call the synchronization) in one C call. Falls
        back to :meth:`_run_plan` when another call changed the operator's arguments since."""
        op = p.op
        if self._closed or op._last_key is not p.last_key or (async_op is False and op._pending is not None):
            res = self._run_plan(p.plan, out, async_op)
            p.last_key = op._last_key
            return res
        sig = p.sig
        if sig is not None:
            where = _callsite.site() if self._call_sites else ""
            if where is not p.where:
                p.where, p.text = where, op._site_text(sig, where)  # kept alive here (op._sig_ptrs may be cleared)
            c0, shadow, addr = p.c0, p.shadow, p.text[1]
            if shadow[0] != addr:
                c0.b = shadow[0] = addr
            if shadow[1] != 0 or shadow[2] != 0xFFFFFFFF:  # a collective: expected = signature, peer -1
                c0.c, c0.u32 = 0, 0xFFFFFFFF
                shadow[1], shadow[2] = 0, 0xFFFFFFFF
            ret = p.fn(*p.args4)
        else:
            ret = p.fn(*p.args3)
        if ret:
            self._fast_failed(p, ret)
        return out

    @staticmethod
    def _fast_failed(p: FastPlan, ret: int) -> None:
        """Raise the error of a failed call from the fast plan ``p`` (HcommKitStreamCalls' ``ret``)."""
        sig = p.sig
        token = (None, None, -1, sig, p.where) if sig is not None else None
        raise p.op._calls_error(ret, None, token)

    def _small_host(self, x: np.ndarray, op: str) -> tuple | None:
        """The device pair (input, output, bytes, ``aclrtMemcpy``'s address for the compiled helper)
        that a blocking ``all_reduce`` of the small host array ``x`` goes through, made on its first
        call; None when ``x`` takes the general way (large, empty, not C-contiguous, a dtype the
        kernels do not take as is, ``avg``). A repeated call then costs the device call's steady
        state plus two copies."""
        nbytes = x.nbytes
        if not 0 < nbytes <= _SMALL_HOST_BYTES or op not in _PLAIN_OPS or not x.flags.c_contiguous or self._closed:
            return None
        try:
            dt = _dtypes.get_dtype(x.dtype)
        except ConfigError:
            return None  # the general way raises the error
        if np.dtype(dt.numpy) != x.dtype:
            return None
        if len(self._host_stage) >= _SMALL_HOST_KEYS:
            self._drop_host_stage()
        memcpy = ctypes.cast(self.rt.acl.aclrtMemcpy, ctypes.c_void_p).value  # for the compiled helper
        pair = (DeviceBuffer.empty(x.shape, dt, rt=self.rt), DeviceBuffer.empty(x.shape, dt, rt=self.rt), nbytes,
                memcpy)
        self._host_stage[(x.dtype, x.shape, op)] = pair
        return pair

    def _small_host_call(self, x: np.ndarray, op: str, out: np.ndarray | None, compiled_res: Any) -> Any:
        """The blocking ``all_reduce`` of the small host array ``x`` through its device pair, driven
        from Python (or the error of the compiled helper's failed call, ``compiled_res``); None
        when it takes the general way. ``out``: None (a new array) or an array of x's shape and
        dtype, C-contiguous and writable (``out=x`` is in place), else the general way."""
        pair = self._host_stage.get((x.dtype, x.shape, op))
        if compiled_res is not None:
            self._host_failed(pair, op, compiled_res)
        if out is not None and not (out.shape == x.shape and out.dtype == x.dtype and out.flags.c_contiguous
                                    and out.flags.writeable):
            return None
        if pair is None:
            pair = self._small_host(x, op)
        if pair is None or not x.flags.c_contiguous:
            return None
        din, dout, nbytes, _ = pair
        self.rt.checked.aclrtMemcpy(din.ptr, nbytes, host_ptr(x), nbytes, _H2D)
        self.all_reduce(din, op, out=dout)
        res = out if out is not None else np.empty(x.shape, x.dtype)
        self.rt.checked.aclrtMemcpy(host_ptr(res), nbytes, dout.ptr, nbytes, _D2H)
        return res

    def _drop_host_stage(self) -> None:
        """Free the device pairs of :meth:`_small_host`."""
        for din, dout, _, _ in self._host_stage.values():
            din.close()
            dout.close()
        self._host_stage.clear()

    def _host_failed(self, pair: tuple, op: str, res: Any) -> None:
        """Raise the error of a failed call of the compiled host path (``try_fast_host``'s ``res``:
        the collective's code, or ``(code,)`` of the copy back), as the device call raises it."""
        din, dout = pair[0], pair[1]
        if type(res) is tuple:
            self.rt.check_acl(res[0], "aclrtMemcpy")  # the copy of the result to the host
        key = (din.ptr, din.capacity, din.dtype.value, din.shape, dout.ptr, dout.capacity, dout.dtype.value, op, False)
        self._fast_failed(self._fast[key], res)
