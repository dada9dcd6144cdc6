"""``ProcessGroupHcomm``: the ``hcomm`` torch.distributed backend, a Python ``ProcessGroup``.

``dist.init_process_group("hcomm")`` (or ``dist.new_group(ranks, backend="hcomm")``) calls
:func:`create_process_group` with the group's c10d store, rank, size and timeout. It bootstraps
one HCCL communicator per group through that store (rank 0 publishes the root info with
``store.set``, the others ``store.get`` it), so it works under ``torchrun`` (no MPI) and under
``hcomm-kit launch`` / ``mpirun`` alike.

Every collective maps onto the communicator's built-in collectives (``comm.all_reduce`` & co.,
see :mod:`hcomm_kit.ops.collectives`); tensors are passed by pointer (:mod:`hcomm_kit.torch._tensors`).

Collectives are **asynchronous**, as on a device: the calling thread checks the arguments, registers
the tensors and enqueues the kernel on the group's stream, and returns an :class:`HcommWork` at once;
the kernel runs on the runtime's device threads (on the emulator: threads of this process, which do
not need the GIL) while the caller goes on computing, e.g. FSDP2's prefetching all-gathers.
``work.wait(timeout)`` waits for the kernel, then runs the host-side rest (AVG division, copies out
of temporaries) and releases the tensors. Works finish in issue order; a finished collective is
also completed (its writes visible, its future set) when the next one is issued. ``get_future()``
waits for the collective (no hand-off to a Python thread, which would wait for the GIL on every
call) and returns a completed ``torch.futures.Future`` whose value is the output tensors, or which
holds the error. Each collective runs with the timeout of its options, else the group's, as its
operator timeout: a rank whose peer died or issued another collective fails within that timeout
(at once when the emulator sees the peer exit). After a runtime failure the group refuses
further collectives (the ranks are out of step), as NCCL's watchdog does, and it is torn down
without a closing barrier.
"""

from __future__ import annotations

import atexit
import collections
import datetime
import hashlib
import itertools
import os
import signal
import sys
import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d
from torch.distributed import ReduceOp

from ..base import envs
from ..base.dtypes import hccl_api_reduce_summary, hccl_api_reduces
from ..base.errors import AclError, CollectiveMismatchError, ConfigError, HcclError, ProcessGroupError
from ._tensors import Operands, hk_dtype

__all__ = ["ProcessGroupHcomm", "HcommWork", "create_process_group", "BACKEND_NAME"]

BACKEND_NAME = "hcomm"

_RedOp = ReduceOp.RedOpType
# torch reduce op -> (name in messages, op the kernel applies)
_REDUCE = {
    _RedOp.SUM: ("SUM", "sum"),
    _RedOp.AVG: ("AVG", "sum"),
    _RedOp.PRODUCT: ("PRODUCT", "prod"),
    _RedOp.MIN: ("MIN", "min"),
    _RedOp.MAX: ("MAX", "max"),
    _RedOp.PREMUL_SUM: ("PREMUL_SUM", "sum"),
}

# Failures after which the ranks are out of step: the group refuses further collectives.
_FATAL = (AclError, HcclError, CollectiveMismatchError)
_LIVE: "weakref.WeakSet[ProcessGroupHcomm]" = weakref.WeakSet()
_WORLD: "list[ProcessGroupHcomm | None]" = [None]  # the default group, when it is an hcomm group
_ATEXIT = [False]
_EXIT_ON_ERROR = [False]


def _seconds(timeout: Any) -> float:
    """Seconds of a timedelta / number; 0 or negative (torch's "unset") -> 0."""
    if timeout is None:
        return 0.0
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    else:
        s = float(timeout)
    return s if s > 0 else 0.0


def _local_rank(default: int) -> int:
    """The device index of this process: HCOMM_KIT_LOCAL_RANK / MPI local rank, else torchrun's
    LOCAL_RANK, else ``default``."""
    from ..core.bootstrap import _local_rank as hk_local_rank

    lr = hk_local_rank(-1)
    if lr >= 0:
        return lr
    raw = os.environ.get("LOCAL_RANK", "").strip()
    return int(raw) if raw.isdigit() else default


def _close_all() -> None:
    """At exit: shut every live group down; after an uncaught exception, abort them instead (the
    peers are probably still inside a collective: a closing barrier would only wait for them)."""
    failed = _EXIT_ON_ERROR[0]
    # Newest first, as destroy_process_group does: the same order on every rank of a group.
    for pg in sorted(_LIVE, key=lambda g: g._id, reverse=True):
        try:
            if failed:
                pg.abort()
            else:
                pg.shutdown()
        except Exception:
            pass


def _install_hooks() -> None:
    """Once per process: the atexit shutdown, and an excepthook noting an exit on error."""
    if _ATEXIT[0]:
        return
    _ATEXIT[0] = True
    atexit.register(_close_all)  # runs before hcomm_kit's own close-all (atexit runs in reverse)
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        if not issubclass(exc_type, (KeyboardInterrupt, SystemExit)):
            _EXIT_ON_ERROR[0] = True
        previous(exc_type, exc, tb)

    sys.excepthook = hook
    # A launcher ends the other ranks of a failed job with SIGTERM (mpirun, torchrun): exit through
    # the interpreter (atexit: communicators aborted, the emulator's /dev/shm segments unlinked)
    # instead of dying on the spot and leaving them behind. Only where nobody handles SIGTERM yet.
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
    except (ValueError, OSError):  # not the main thread / no signals here
        pass


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    _EXIT_ON_ERROR[0] = True
    raise SystemExit(128 + signum)


class _Stage:
    """What one collective leaves in flight: its operands (tensors registered with the runtime, kept
    alive), the runtime Works of the kernels it enqueued, and the host steps to run after them."""

    __slots__ = ("ops", "works", "after", "orphans")

    def __init__(self, ops: Operands, orphans: list[Operands]) -> None:
        self.ops = ops
        self.works: list = []                   # hcomm_kit.ops.op.Work of each enqueued kernel
        self.after: list[Callable[[], None]] = []
        self.orphans = orphans                  # the group's: operands of kernels that may still run

    def done(self) -> bool:
        """True when every kernel finished (or failed); never blocks."""
        return all(w.is_completed() for w in self.works)

    def finish(self, deadline: float | None) -> None:
        """Wait for the kernels (until ``deadline``, ``time.monotonic()`` seconds; None: their own
        operator timeout), run the host steps, release the operands (written back only on success).
        When a wait fails (timed out, peer gone), a kernel may still read or write the tensors: they
        stay registered and referenced until the group is shut down (after its stream drained)."""
        ok = waited = False
        try:
            for w in self.works:
                w.wait(None if deadline is None else max(deadline - time.monotonic(), 0.001))
            waited = True
            for step in self.after:
                step()
            ok = True
        finally:
            self.works.clear()
            self.after.clear()
            if waited:
                self.ops.__exit__(None if ok else RuntimeError, None, None)
            else:
                self.orphans.append(self.ops)

    def abandon(self) -> None:
        """After a failure while enqueueing: wait for what was enqueued, release without writing back
        (or keep the operands until shutdown when a wait failed, as :meth:`finish` does)."""
        clean = True
        for w in self.works:
            try:
                w.wait()
            except Exception:  # noqa: BLE001 - the enqueue error is the one reported
                clean = False
        self.works.clear()
        if clean:
            self.ops.__exit__(RuntimeError, None, None)
        else:
            self.orphans.append(self.ops)


class HcommWork(dist.Work):
    """Handle of one collective of :class:`ProcessGroupHcomm` (in flight when returned).

    ``wait(timeout)`` waits for it (and the group's earlier collectives) and raises its error;
    ``get_future()`` returns a ``torch.futures.Future`` completed with the list of output tensors
    (as gloo's), or holding the collective's error; ``is_completed()`` polls.
    """

    def __init__(self, pg: "ProcessGroupHcomm", op: str, seq: int, outputs: list,
                 stage: _Stage | None = None) -> None:
        super().__init__()
        self._pg = pg
        self.op, self.seq = op, seq
        self._outputs = outputs
        self._stage = stage
        self._future: torch.futures.Future = torch.futures.Future()
        self._completed = False
        self._exc: BaseException | None = None
        self._source_rank = -1

    def _run_finish(self, deadline: float | None) -> None:
        """Finish the collective (its kernels, host steps, operands) and complete the Work/Future."""
        st, self._stage = self._stage, None
        try:
            if st is not None:
                st.finish(deadline)
        except BaseException as exc:  # noqa: BLE001 - handed to the Work / Future
            self._fail(exc)
        else:
            self._finish(None)

    def _fail(self, exc: BaseException) -> None:
        """Complete with ``exc``; a runtime failure or an interruption also fails the group (the
        ranks are out of step). SystemExit / KeyboardInterrupt go on after that."""
        if isinstance(exc, _FATAL) or not isinstance(exc, Exception):
            self._pg._break(exc)
        self._finish(exc)
        if not isinstance(exc, Exception):
            raise exc

    def _finish(self, exc: BaseException | None) -> None:
        if exc is not None and not isinstance(exc, Exception):  # SystemExit / KeyboardInterrupt while waiting
            exc = ProcessGroupError(f"hcomm: {self.op} was interrupted ({type(exc).__name__}) before it finished",
                                    op=self.op, rank=self._pg.rank())
        self._exc = exc
        self._completed = True
        if exc is None:
            self._future.set_result(self._outputs)  # runs the future's callbacks, on this thread
        else:
            self._future.set_exception(exc)  # torch futures take Exceptions only

    # ---- the Work API ------------------------------------------------------------------------
    def wait(self, timeout: Any = None) -> bool:
        """Wait until the collective finished (the group's earlier ones first); return True or raise
        its error.

        Args:
            timeout: at most this long (timedelta or seconds; None / 0: the collective's own
                operator timeout, the group's or its options'). A wait that expires fails the
                collective and the group (the ranks are then out of step), as NCCL's does.

        Raises:
            OpTimeoutError: the collective did not finish in time (names op and rank).
            ProcessGroupError, AclError, HcclError: another failure (the group is then unusable).
        """
        if not self._completed:
            t = _seconds(timeout)
            self._pg._complete(self, time.monotonic() + t if t else None)
        if self._exc is not None:
            raise self._exc
        return True

    def get_future(self) -> torch.futures.Future:
        """The collective's future, completed (this waits for the collective)."""
        if not self._completed:
            try:
                self.wait()
            except Exception:  # noqa: BLE001 - the error is set on the future
                pass
        return self._future

    def is_completed(self) -> bool:
        """True when the collective finished (its results are then in place); never blocks."""
        if not self._completed and (self._stage is None or self._stage.done()):
            self._pg._complete(self, None)  # its kernels are done: only host steps left
        return self._completed

    def is_success(self) -> bool:
        return self._completed and self._exc is None

    def exception(self) -> BaseException | None:
        return self._exc

    def result(self) -> list:
        self.wait()
        return self._outputs

    def source_rank(self) -> int:
        return self._source_rank

    def synchronize(self) -> None:
        self.wait()


class ProcessGroupHcomm(dist.ProcessGroup):
    """The ``hcomm`` backend: torch.distributed collectives on an hcomm-kit communicator.

    Attributes:
        comm: the :class:`~hcomm_kit.ops.communicator.Communicator` of this group.

    Create it through ``dist.init_process_group("hcomm")`` / ``dist.new_group(..., backend="hcomm")``
    (see :func:`create_process_group`).
    """

    _seq_counter = itertools.count()

    def __init__(self, store: Any, rank: int, size: int, timeout: Any = None, *, zero_copy: bool = True,
                 comm: Any = None) -> None:
        super().__init__(rank, size)
        from ..core.bootstrap import Bootstrap
        from ..ops.communicator import init

        self._timeout_s = _seconds(timeout) or 1800.0
        self._zero_copy = zero_copy
        self._broken: BaseException | None = None
        self._closed = False
        self._seq = 0
        self._lock = threading.RLock()          # one collective at a time (a future callback may issue more)
        self._inflight: collections.deque[HcommWork] = collections.deque()  # issued, not finished: in order
        self._orphans: list[Operands] = []      # operands of failed waits, released at shutdown
        # Staging tensors of the list forms, reused: a fresh 64 MiB tensor costs ~0.2 s of page
        # faults here, ten times the collective. (numel, dtype) -> free tensors, oldest first.
        self._scratch_free: collections.OrderedDict[tuple[int, torch.dtype], list[torch.Tensor]] = \
            collections.OrderedDict()
        self._scratch_bytes = 0
        self._device_set = threading.local()    # the runtime's current device is per thread
        self._id = next(ProcessGroupHcomm._seq_counter)
        self._group_name = ""
        self._group_desc = ""
        if comm is None:
            boot = Bootstrap.from_store(store, rank, size, _local_rank(rank))
            # No CPU pinning unless HCOMM_KIT_PIN=1: a rank's torch compute would share the one CPU
            # with the emulator's threads (2 ranks on 2 CPUs: DDP steps ~1.6x, FSDP2 ~2.6x slower pinned).
            comm = init(bootstrap=boot, pin=None if envs.get("HCOMM_KIT_PIN") == "1" else False)
        self.comm = comm
        # The first collective sets up channels: a late peer fails it within the group's timeout
        # (as gloo), never later than HCCL_CONNECT_TIMEOUT.
        comm.set_connect_timeout(min(self._timeout_s, envs.hccl_connect_timeout_s()))
        if self.comm.rank != rank or self.comm.size != size:
            raise ProcessGroupError(f"hcomm: the communicator says rank {self.comm.rank}/{self.comm.size}, "
                                    f"torch.distributed says {rank}/{size}")
        self._product = self._product_name()
        self._device_set.done = True
        _LIVE.add(self)
        _install_hooks()

    # ---- identity ----------------------------------------------------------------------------
    def getBackendName(self) -> str:  # noqa: N802 - the C++ virtual's name
        return BACKEND_NAME

    # Group name and description: kept here (a C++ ProcessGroup keeps them in its backends).
    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = str(name)

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = str(desc)

    def _label(self) -> str:
        return f"{self._group_name or 'pg'}#{self._id}"

    def _product_name(self) -> str:
        from ..ops.op import PRODUCT_OF_DEV_TYPE

        return PRODUCT_OF_DEV_TYPE.get(self.comm.device.dev_type, self.comm.device.soc)

    def __repr__(self) -> str:
        return f"<ProcessGroupHcomm rank {self.rank()}/{self.size()} {self._product} {self.comm.name!r}>"

    # ---- plumbing ----------------------------------------------------------------------------
    def _break(self, exc: BaseException) -> None:
        with self._lock:
            if self._broken is None:
                self._broken = exc

    def _timeout(self, opts: Any) -> float:
        t = _seconds(getattr(opts, "timeout", None))
        return t if t else self._timeout_s

    def _submit(self, op: str, outputs: list, fn: Callable[[_Stage], None], *, drain: bool = False) -> HcommWork:
        """Issue the collective: ``fn(stage)`` registers its operands and enqueues its kernels
        (``async_op=True``) on ``stage``; return its Work, in flight. ``drain``: finish the group's
        earlier collectives first (for calls that complete in ``fn``, e.g. the barrier)."""
        if self._closed:
            raise ProcessGroupError(f"hcomm: {op} on a process group that was shut down", op=op)
        with self._lock:
            if drain:
                self._complete(None, None)
            self._reap()
            if self._broken is not None:
                raise ProcessGroupError(f"hcomm: {op} refused: group {self._label()} failed earlier: "
                                        f"{self._broken}", op=op, rank=self.rank())
            if not getattr(self._device_set, "done", False):
                self.comm.rt.checked.aclrtSetDevice(self.comm.device.id)  # a new thread: bind it to the device
                self._device_set.done = True
            self._seq += 1
            st = _Stage(Operands(self.comm.rt, self._zero_copy), self._orphans)
            work = HcommWork(self, op, self._seq, outputs, st)
            try:
                fn(st)
            except BaseException as exc:  # noqa: BLE001 - handed to the Work / Future
                work._stage = None
                st.abandon()
                work._fail(exc)
            else:
                self._inflight.append(work)
                self._reap()
        return work

    def _reap(self) -> None:
        """Finish the in-flight collectives at the front whose kernels are done (never blocks)."""
        q = self._inflight
        while q and (q[0]._stage is None or q[0]._stage.done()):
            q.popleft()._run_finish(None)

    def _complete(self, upto: HcommWork | None, deadline: float | None) -> None:
        """Finish the in-flight collectives in issue order, up to ``upto`` (None: all of them),
        waiting until ``deadline`` (``time.monotonic()``; None: each one's operator timeout)."""
        with self._lock:
            q = self._inflight
            while q and (upto is None or not upto._completed):
                q.popleft()._run_finish(deadline)

    def _reduce_op(self, op: Any, dtype: torch.dtype, what: str) -> tuple[str, str, Any]:
        """(torch name, kernel op, PREMUL_SUM factor or None); checks the product's limits."""
        if isinstance(op, ReduceOp):
            kind = op.op
        elif isinstance(op, _RedOp):
            kind = op
        else:
            raise TypeError(f"hcomm: {what}: {op!r} is not a torch.distributed.ReduceOp")
        entry = _REDUCE.get(kind)
        if entry is None:
            raise NotImplementedError(f"hcomm: {what} with ReduceOp.{kind.name} is not supported (HCCL reduces "
                                      f"with SUM, PRODUCT, MIN, MAX; AVG and PREMUL_SUM are built on SUM)")
        name, kernel_op = entry
        factor = op.factor if kind == _RedOp.PREMUL_SUM else None
        if dtype == torch.bool:
            raise TypeError(f"hcomm: {what} with ReduceOp.{name} cannot reduce torch.bool tensors; "
                            f"cast to torch.uint8 / torch.int32")
        dt = hk_dtype(dtype, what)
        api = ("HcclAllReduce" if what.startswith("allreduce") else
               "HcclReduceScatter" if what.startswith("reduce_scatter") else "HcclReduce")
        if not hccl_api_reduces(api, self._product, dt, kernel_op):
            raise ConfigError(
                f"hcomm: {what} with ReduceOp.{name} on {dtype} ({dt.name}): CANN's {api} does not reduce {dt.name} "
                f"with {kernel_op} on {self._product} (it accepts {hccl_api_reduce_summary(api, self._product)}); "
                f"cast the tensor", key="dtype")
        if kind == _RedOp.PREMUL_SUM and not dt.is_float:
            raise TypeError(f"hcomm: {what} with ReduceOp.PREMUL_SUM needs a floating-point tensor, got {dtype}")
        return name, kernel_op, factor

    def _finish_reduce(self, name: str, out: torch.Tensor) -> None:
        """AVG: the SUM divided by the rank count (floats in their dtype, integers toward zero)."""
        if name != "AVG":
            return
        n = self.size()
        if out.is_floating_point():
            out.div_(n)
        else:
            out.copy_(torch.div(out, n, rounding_mode="trunc"))

    @staticmethod
    def _premul(x: torch.Tensor, factor: Any) -> torch.Tensor:
        f = factor.to(dtype=x.dtype, device=x.device) if isinstance(factor, torch.Tensor) else factor
        return x * f

    _SCRATCH_MAX_BYTES = 512 << 20  # kept for reuse at most; more is freed

    def _scratch(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """A 1-D staging tensor of ``numel`` x ``dtype``: a free one of an earlier call, else new."""
        with self._lock:
            free = self._scratch_free.get((numel, dtype))
            if free:
                t = free.pop()
                self._scratch_bytes -= t.numel() * t.element_size()
                return t
        return torch.empty(numel, dtype=dtype)

    def _release_scratch(self, t: torch.Tensor) -> None:
        """Give ``t`` back for reuse (only once its collective finished: never while a kernel may
        still use it), dropping the oldest kept tensors beyond :attr:`_SCRATCH_MAX_BYTES`."""
        size = t.numel() * t.element_size()
        if size > self._SCRATCH_MAX_BYTES:
            return
        with self._lock:
            key = (t.numel(), t.dtype)
            self._scratch_free.setdefault(key, []).append(t)
            self._scratch_free.move_to_end(key)
            self._scratch_bytes += size
            while self._scratch_bytes > self._SCRATCH_MAX_BYTES:
                old_key, old = next(iter(self._scratch_free.items()))
                dropped = old.pop(0)
                self._scratch_bytes -= dropped.numel() * dropped.element_size()
                if not old:
                    del self._scratch_free[old_key]

    @staticmethod
    def _split_into(flat: torch.Tensor, outs: Sequence[torch.Tensor]) -> None:
        """Copy consecutive blocks of ``flat`` into ``outs`` (each of its own size and shape)."""
        off = 0
        for t in outs:
            t.detach().copy_(flat[off:off + t.numel()].view_as(t))
            off += t.numel()

    @staticmethod
    def _one(tensors: Any, what: str) -> torch.Tensor:
        if isinstance(tensors, torch.Tensor):
            return tensors
        if len(tensors) != 1:
            raise ValueError(f"hcomm: {what} takes one tensor per call (one device per process), got {len(tensors)}")
        return tensors[0]

    @staticmethod
    def _check_cpu(what: str, *tensors: torch.Tensor) -> None:
        for t in tensors:
            if t.device.type != "cpu":
                raise ValueError(f"hcomm: {what}: tensor on {t.device}; the hcomm backend takes CPU tensors "
                                 f"(register it for 'cpu', e.g. backend='cpu:hcomm')")

    def _root(self, root: int, what: str) -> int:
        r = int(root)
        if not 0 <= r < self.size():
            raise ValueError(f"hcomm: {what}: root {root} is not a rank of this {self.size()}-rank group")
        return r

    # ---- allreduce ---------------------------------------------------------------------------
    def allreduce(self, tensors: Any, opts: Any = None) -> HcommWork:
        """Element-wise reduction over the ranks, in place (``opts.reduceOp``: SUM, AVG, MAX, MIN,
        PRODUCT, PREMUL_SUM)."""
        opts = _opts(opts, _c10d.AllreduceOptions, "reduceOp")
        t = self._one(tensors, "allreduce")
        self._check_cpu("allreduce", t)
        name, kop, factor = self._reduce_op(opts.reduceOp, t.dtype, "allreduce")
        dt = hk_dtype(t.dtype, "allreduce")
        tmo = self._timeout(opts)
        comm = self.comm

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(t, write=True)
            if factor is not None:
                x.mul_(factor.to(x.dtype) if isinstance(factor, torch.Tensor) else factor)
            if x.numel():
                b = o.operand(x, dt)
                st.works.append(comm.all_reduce(b, kop, out=b, dtype=dt, timeout=tmo, async_op=True))
            st.after.append(lambda: self._finish_reduce(name, x))
        return self._submit("allreduce", [t], run)

    def allreduce_coalesced(self, tensors: Sequence[torch.Tensor], opts: Any = None) -> HcommWork:
        """Allreduce of several tensors as one flat buffer per dtype."""
        opts = _opts(opts, _c10d.AllreduceCoalescedOptions, "reduceOp")
        tensors = list(tensors)
        self._check_cpu("allreduce_coalesced", *tensors)
        checked = {t.dtype: self._reduce_op(opts.reduceOp, t.dtype, "allreduce_coalesced") for t in tensors}
        tmo = self._timeout(opts)
        comm = self.comm

        def unflatten(name: str, flat: torch.Tensor, group: list[torch.Tensor]) -> None:
            self._finish_reduce(name, flat)
            self._split_into(flat, group)

        def run(st: _Stage) -> None:
            for dtype, (name, kop, factor) in checked.items():
                group = [t for t in tensors if t.dtype == dtype]
                flat = torch.cat([t.detach().reshape(-1) for t in group]) if group else None
                if flat is None or not flat.numel():
                    continue
                if factor is not None:
                    flat.mul_(factor.to(flat.dtype) if isinstance(factor, torch.Tensor) else factor)
                dt = hk_dtype(dtype, "allreduce_coalesced")
                b = st.ops.operand(flat, dt)
                st.works.append(comm.all_reduce(b, kop, out=b, dtype=dt, timeout=tmo, async_op=True))
                st.after.append(lambda name=name, flat=flat, group=group: unflatten(name, flat, group))
        return self._submit("allreduce_coalesced", tensors, run)

    # ---- broadcast / reduce ------------------------------------------------------------------
    def broadcast(self, tensors: Any, opts: Any = None) -> HcommWork:
        """Every rank gets the root's tensor (``opts.rootRank``), in place."""
        opts = _opts(opts, _c10d.BroadcastOptions, "rootRank")
        t = self._one(tensors, "broadcast")
        self._check_cpu("broadcast", t)
        root = self._root(opts.rootRank, "broadcast")
        dt = hk_dtype(t.dtype, "broadcast")
        tmo = self._timeout(opts)
        comm = self.comm

        def run(st: _Stage) -> None:
            x = st.ops.contiguous(t, write=True)
            if x.numel():
                b = st.ops.operand(x, dt)
                st.works.append(comm.broadcast(b, root, out=b, dtype=dt, timeout=tmo, async_op=True))
        return self._submit("broadcast", [t], run)

    def reduce(self, tensors: Any, opts: Any = None) -> HcommWork:
        """The root (``opts.rootRank``) gets the reduction in place; other ranks' tensors are unchanged."""
        opts = _opts(opts, _c10d.ReduceOptions, "reduceOp")
        t = self._one(tensors, "reduce")
        self._check_cpu("reduce", t)
        root = self._root(opts.rootRank, "reduce")
        name, kop, factor = self._reduce_op(opts.reduceOp, t.dtype, "reduce")
        dt = hk_dtype(t.dtype, "reduce")
        tmo = self._timeout(opts)
        comm = self.comm
        mine = self.rank() == root

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(t, write=mine)
            src = self._premul(x, factor) if factor is not None else x
            if x.numel():
                if mine:
                    b = o.operand(src, dt)
                    out = o.operand(x, dt) if src is not x else b
                    st.works.append(comm.reduce(b, root, kop, out=out, dtype=dt, timeout=tmo, async_op=True))
                else:
                    st.works.append(comm.reduce(o.operand(src, dt), root, kop, dtype=dt, timeout=tmo,
                                                async_op=True))
            if mine:
                st.after.append(lambda: self._finish_reduce(name, x))
        return self._submit("reduce", [t], run)

    # ---- gathers ------------------------------------------------------------------------------
    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> HcommWork:
        """``output`` (``size`` x ``input.numel()`` elements) gets every rank's ``input`` in rank order."""
        opts = _opts(opts, _c10d.AllgatherOptions)
        self._check_cpu("all_gather_single", output, input)
        if output.dtype != input.dtype:
            raise TypeError(f"hcomm: all_gather_single: output dtype {output.dtype} != input dtype {input.dtype}")
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"hcomm: all_gather_single: output has {output.numel()} elements, needs "
                             f"{self.size()} x {input.numel()}")
        dt = hk_dtype(input.dtype, "all_gather_single")
        tmo = self._timeout(opts)
        comm = self.comm

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(input, write=False)
            y = o.contiguous(output, write=True)
            if x.numel():
                st.works.append(comm.all_gather(o.operand(x, dt), out=o.operand(y, dt), dtype=dt, timeout=tmo,
                                                async_op=True))
        return self._submit("all_gather_single", [output], run)

    _allgather_base = all_gather_single

    def allgather(self, output_tensors: Sequence[Sequence[torch.Tensor]], input_tensors: Any,
                  opts: Any = None) -> HcommWork:
        """``output_tensors[0][r]`` gets rank r's tensor (all of the input's size)."""
        opts = _opts(opts, _c10d.AllgatherOptions)
        inp = self._one(input_tensors, "allgather")
        outs = list(output_tensors[0]) if output_tensors and not isinstance(output_tensors[0], torch.Tensor) \
            else list(output_tensors)
        self._check_cpu("allgather", inp, *outs)
        if len(outs) != self.size():
            raise ValueError(f"hcomm: allgather needs {self.size()} output tensors, got {len(outs)}")
        for o_ in outs:
            if o_.numel() != inp.numel() or o_.dtype != inp.dtype:
                raise ValueError(f"hcomm: allgather: every output must match the input ({inp.numel()} x "
                                 f"{inp.dtype}), got {o_.numel()} x {o_.dtype}")
        dt = hk_dtype(inp.dtype, "allgather")
        tmo = self._timeout(opts)
        comm = self.comm
        n = inp.numel()

        def run(st: _Stage) -> None:
            if not n:
                return
            flat = self._scratch(n * self.size(), inp.dtype)
            x = st.ops.contiguous(inp, write=False)
            st.works.append(comm.all_gather(st.ops.operand(x, dt), out=st.ops.operand(flat, dt), dtype=dt,
                                            timeout=tmo, async_op=True))
            st.after.append(lambda: self._split_into(flat, outs))
            st.after.append(lambda: self._release_scratch(flat))
        return self._submit("allgather", [outs], run)

    def allgather_coalesced(self, output_lists: Sequence[Sequence[torch.Tensor]],
                            input_list: Sequence[torch.Tensor], opts: Any = None) -> HcommWork:
        """One :meth:`allgather` per input tensor, completed together."""
        return self._chain("allgather_coalesced", [list(x) for x in output_lists],
                           [lambda o=o, i=i: self.allgather([o], [i], opts) for o, i in zip(output_lists, input_list)])

    def all_gather_single_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                                    opts: Any = None) -> HcommWork:
        """One :meth:`all_gather_single` per pair, completed together."""
        return self._chain("all_gather_single_coalesced", list(outputs),
                           [lambda o=o, i=i: self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)])

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def _rooted(self, name: str, opts: Any, opts_type: Any, tensor_arg: Any,
                lists: Sequence[Sequence[torch.Tensor]], what: str) -> tuple[torch.Tensor, int, bool,
                                                                              list[torch.Tensor], Any, Any]:
        """The checked arguments of gather / scatter: this rank's tensor, the root, whether this rank
        is the root, the root's ``size()`` tensors of as many elements (empty elsewhere), dtype, timeout."""
        opts = _opts(opts, opts_type, "rootRank")
        t = self._one(tensor_arg, name)
        root = self._root(opts.rootRank, name)
        mine = self.rank() == root
        many = list(lists[0]) if mine else []
        self._check_cpu(name, t, *many)
        if mine and (len(many) != self.size() or any(x.numel() != t.numel() for x in many)):
            raise ValueError(f"hcomm: {name}: the root needs {self.size()} {what} of {t.numel()} elements")
        return t, root, mine, many, hk_dtype(t.dtype, name), self._timeout(opts)

    def gather(self, output_tensors: Sequence[Sequence[torch.Tensor]], input_tensors: Any,
               opts: Any = None) -> HcommWork:
        """The root's ``output_tensors[0][r]`` gets rank r's tensor; other ranks pass no outputs."""
        inp, root, mine, outs, dt, tmo = self._rooted("gather", opts, _c10d.GatherOptions, input_tensors,
                                                      output_tensors, "outputs")
        comm = self.comm
        n = inp.numel()

        def run(st: _Stage) -> None:
            if not n:
                return
            o = st.ops
            x = o.operand(o.contiguous(inp, write=False), dt)
            if mine:
                flat = torch.empty(n * self.size(), dtype=inp.dtype)
                st.works.append(comm.gather(x, root, out=o.operand(flat, dt), dtype=dt, timeout=tmo, async_op=True))
                st.after.append(lambda: self._split_into(flat, outs))
            else:
                st.works.append(comm.gather(x, root, dtype=dt, timeout=tmo, async_op=True))
        return self._submit("gather", [outs] if mine else [], run)

    # ---- scatters -----------------------------------------------------------------------------
    def scatter(self, output_tensors: Any, input_tensors: Sequence[Sequence[torch.Tensor]],
                opts: Any = None) -> HcommWork:
        """Rank r's output gets the root's ``input_tensors[0][r]``; other ranks pass no inputs."""
        out, root, mine, ins, dt, tmo = self._rooted("scatter", opts, _c10d.ScatterOptions, output_tensors,
                                                     input_tensors, "inputs")
        comm = self.comm
        n = out.numel()

        def run(st: _Stage) -> None:
            if not n:
                return
            o = st.ops
            y = o.operand(o.contiguous(out, write=True), dt)
            if mine:
                flat = torch.cat([i.detach().reshape(-1) for i in ins])
                st.works.append(comm.scatter(o.operand(flat, dt), root, out=y, dtype=dt, timeout=tmo, async_op=True))
            else:
                st.works.append(comm.scatter(None, root, out=y, count=n, dtype=dt, timeout=tmo, async_op=True))
        return self._submit("scatter", [out], run)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None, *,
                              _scratch: torch.Tensor | None = None) -> HcommWork:
        """Reduce ``input`` (``size`` blocks of ``output.numel()``) over the ranks; rank r gets block r.
        (``_scratch``: ``input`` is a staging tensor of :meth:`_scratch`, given back when done.)"""
        opts = _opts(opts, _c10d.ReduceScatterOptions, "reduceOp")
        self._check_cpu("reduce_scatter_single", output, input)
        if output.dtype != input.dtype:
            raise TypeError(f"hcomm: reduce_scatter_single: output dtype {output.dtype} != input dtype {input.dtype}")
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"hcomm: reduce_scatter_single: input has {input.numel()} elements, needs "
                             f"{self.size()} x {output.numel()}")
        name, kop, factor = self._reduce_op(opts.reduceOp, input.dtype, "reduce_scatter_single")
        dt = hk_dtype(input.dtype, "reduce_scatter_single")
        tmo = self._timeout(opts)
        comm = self.comm

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(input, write=False)
            if factor is not None:
                x = self._premul(x, factor)
            y = o.contiguous(output, write=True)
            if y.numel():
                st.works.append(comm.reduce_scatter(o.operand(x, dt), kop, out=o.operand(y, dt), dtype=dt,
                                                    timeout=tmo, async_op=True))
            st.after.append(lambda: self._finish_reduce(name, y))
            if _scratch is not None:
                st.after.append(lambda: self._release_scratch(_scratch))
        return self._submit("reduce_scatter_single", [output], run)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, output_tensors: Any, input_tensors: Sequence[Sequence[torch.Tensor]],
                       opts: Any = None) -> HcommWork:
        """Rank r's output gets the reduction over the ranks of their ``input_tensors[0][r]``."""
        out = self._one(output_tensors, "reduce_scatter")
        ins = list(input_tensors[0]) if input_tensors and not isinstance(input_tensors[0], torch.Tensor) \
            else list(input_tensors)
        if len(ins) != self.size() or any(i.numel() != out.numel() or i.dtype != out.dtype for i in ins):
            raise ValueError(f"hcomm: reduce_scatter needs {self.size()} inputs of {out.numel()} x {out.dtype}")
        flat = self._scratch(out.numel() * len(ins), out.dtype)
        torch.cat([i.detach().reshape(-1) for i in ins], out=flat)
        return self.reduce_scatter_single(out, flat, opts, _scratch=flat)

    def reduce_scatter_single_coalesced(self, outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                                        opts: Any = None) -> HcommWork:
        """One :meth:`reduce_scatter_single` per pair, completed together."""
        return self._chain("reduce_scatter_single_coalesced", list(outputs),
                           [lambda o=o, i=i: self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)])

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ---- all-to-all ---------------------------------------------------------------------------
    def all_to_all_single(self, output: torch.Tensor, input: torch.Tensor, output_split_sizes: Sequence[int],
                          input_split_sizes: Sequence[int], opts: Any = None) -> HcommWork:
        """Rows ``input_split_sizes[j]`` of ``input`` go to rank j; ``output`` gets rank i's rows at
        ``output_split_sizes[i]`` (empty split lists: equal blocks)."""
        run = self._a2a("all_to_all_single", output, input, output_split_sizes, input_split_sizes, opts)
        return self._submit("all_to_all_single", [output], run)

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors: Sequence[torch.Tensor], input_tensors: Sequence[torch.Tensor],
                 opts: Any = None) -> HcommWork:
        """``input_tensors[j]`` goes to rank j; ``output_tensors[i]`` comes from rank i (sizes may differ)."""
        outs, ins = list(output_tensors), list(input_tensors)
        size = self.size()
        if len(outs) != size or len(ins) != size:
            raise ValueError(f"hcomm: alltoall needs {size} input and {size} output tensors")
        dtypes = {t.dtype for t in outs + ins}
        if len(dtypes) != 1:
            raise TypeError(f"hcomm: alltoall: all tensors need one dtype, got {sorted(map(str, dtypes))}")
        self._check_cpu("alltoall", *outs, *ins)
        flat_in = torch.cat([t.detach().reshape(-1) for t in ins])
        flat_out = torch.empty(sum(t.numel() for t in outs), dtype=dtypes.pop())
        run = self._a2a("alltoall", flat_out, flat_in, [t.numel() for t in outs], [t.numel() for t in ins], opts)

        def run_and_copy(st: _Stage) -> None:
            run(st)
            st.after.append(lambda: self._split_into(flat_out, outs))
        return self._submit("alltoall", outs, run_and_copy)

    def _a2a(self, what: str, output: torch.Tensor, input: torch.Tensor, output_split_sizes: Sequence[int],
             input_split_sizes: Sequence[int], opts: Any) -> Callable[[], None]:
        """Check an all-to-all (rows split by the split sizes) and return the function running it."""
        opts = _opts(opts, _c10d.AllToAllOptions)
        self._check_cpu(what, output, input)
        if output.dtype != input.dtype:
            raise TypeError(f"hcomm: {what}: output dtype {output.dtype} != input dtype {input.dtype}")
        size = self.size()
        dt = hk_dtype(input.dtype, what)
        tmo = self._timeout(opts)
        comm = self.comm
        in_row = input[0].numel() if input.dim() and input.shape[0] else 0
        out_row = output[0].numel() if output.dim() and output.shape[0] else 0
        in_splits, out_splits = list(input_split_sizes or ()), list(output_split_sizes or ())
        if not in_splits and not out_splits:
            if input.numel() % size or output.numel() != input.numel():
                raise ValueError(f"hcomm: {what}: {input.numel()} input / {output.numel()} output "
                                 f"elements do not split into {size} equal blocks")
            send = recv = None
        else:
            send = [s * in_row for s in (in_splits or [input.shape[0] // size] * size)]
            recv = [s * out_row for s in (out_splits or [output.shape[0] // size] * size)]
            if len(send) != size or len(recv) != size:
                raise ValueError(f"hcomm: {what}: split sizes need {size} entries each")
            if sum(send) != input.numel() or sum(recv) != output.numel():
                raise ValueError(f"hcomm: {what}: splits {in_splits}/{out_splits} do not cover the "
                                 f"input ({input.shape[0]} rows) / output ({output.shape[0]} rows)")

        def run(st: _Stage) -> None:
            o = st.ops
            x = o.contiguous(input, write=False)
            y = o.contiguous(output, write=True)
            if send is None:
                if x.numel():
                    st.works.append(comm.all_to_all(o.operand(x, dt), out=o.operand(y, dt), dtype=dt, timeout=tmo,
                                                    async_op=True))
            else:
                st.works.append(comm.all_to_all_v(o.operand(x, dt) if x.numel() else np.empty(0, dt.numpy), send,
                                                  recv, out=o.operand(y, dt) if y.numel() else np.empty(0, dt.numpy),
                                                  dtype=dt, timeout=tmo, async_op=True))
        return run

    # ---- point to point, barrier --------------------------------------------------------------
    def send(self, tensors: Any, dst: int, tag: int = 0) -> HcommWork:
        """Send to group rank ``dst`` (which calls :meth:`recv`); ``tag`` is not used: pairs match in order."""
        t = self._one(tensors, "send")
        self._check_cpu("send", t)
        dt = hk_dtype(t.dtype, "send")
        peer = self._root(dst, "send")
        comm, tmo = self.comm, self._timeout_s

        def run(st: _Stage) -> None:
            x = st.ops.contiguous(t, write=False)
            if x.numel():
                st.works.append(comm.send(st.ops.operand(x, dt), peer, dtype=dt, timeout=tmo, async_op=True))
        return self._submit("send", [t], run)

    def recv(self, tensors: Any, src: int, tag: int = 0) -> HcommWork:
        """Receive from group rank ``src`` into the tensor (sized like the sent one)."""
        t = self._one(tensors, "recv")
        self._check_cpu("recv", t)
        dt = hk_dtype(t.dtype, "recv")
        peer = self._root(src, "recv")
        comm, tmo = self.comm, self._timeout_s

        def run(st: _Stage) -> None:
            y = st.ops.contiguous(t, write=True)
            if y.numel():
                st.works.append(comm.recv(st.ops.operand(y, dt), peer, dtype=dt, timeout=tmo, async_op=True))
        work = self._submit("recv", [t], run)
        work._source_rank = peer
        return work

    def recv_anysource(self, tensors: Any, tag: int = 0) -> HcommWork:
        raise NotImplementedError("hcomm: recv_anysource (dist.recv without src) is not supported: HCCL "
                                  "point-to-point needs the peer; pass src=")

    def barrier(self, opts: Any = None) -> HcommWork:
        """Every rank waits until every rank reached the barrier."""
        tmo = self._timeout(opts) if opts is not None else self._timeout_s
        comm = self.comm
        return self._submit("barrier", [], lambda st: comm.barrier(timeout=tmo), drain=True)

    def monitored_barrier(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("hcomm: monitored_barrier is not supported (gloo only); use dist.barrier, "
                                  "whose timeout names the collective that did not finish")

    # ---- custom operators ------------------------------------------------------------------------
    def run_op(self, path: "str | os.PathLike[str]", input: torch.Tensor, output: torch.Tensor | None = None, *,
               reduce_op: str | None = None, root: int | None = None, **params: Any) -> HcommWork:
        """Run the custom operator directory ``path`` (every rank of the group calls it) on tensors.

        It runs like the group's collectives (in issue order, with the group's timeout) and reads/writes the
        tensors' memory directly. ``output`` defaults to a new tensor sized by the operator's
        ``[io].output`` rule; the Work's future value is ``[output]``.

        Raises:
            ConfigError: dtype / reduce op / parameter not accepted by the operator's op.toml.
        """
        from ..build.opbuild import build_op

        self._check_cpu("run_op", input, *([output] if output is not None else []))
        spec = build_op(path).spec  # cached; compiles here (caller thread) on first use
        dt = hk_dtype(input.dtype, f"operator {spec.name}")
        if dt.name not in spec.dtypes:
            raise ConfigError(f"operator {spec.name} does not support {input.dtype} ({dt.name}); op.toml "
                              f"[op].dtypes = {list(spec.dtypes)}", key="dtype", path=spec.opdir / "op.toml")
        n = input.numel()
        out_n = spec.output_count(n, self.size())
        if output is None:
            output = torch.empty(out_n, dtype=input.dtype)
        elif output.numel() != out_n or output.dtype != input.dtype:
            raise ValueError(f"hcomm: operator {spec.name}: output needs {out_n} x {input.dtype} "
                             f"([io].output = {spec.output!r}), got {output.numel()} x {output.dtype}")
        comm, tmo, out = self.comm, self._timeout_s, output

        def run(st: _Stage) -> None:
            op = comm.load_op(path)
            x = st.ops.contiguous(input, write=False)
            y = st.ops.contiguous(out, write=True)
            if n:
                st.works.append(op(st.ops.operand(x, dt), st.ops.operand(y, dt), count=n, dtype=dt,
                                   reduce_op=reduce_op, root=root, timeout=tmo, async_op=True, **params))
        return self._submit(f"operator {spec.name}", [output], run)

    # ---- lifetime -------------------------------------------------------------------------------
    def _chain(self, op: str, outputs: list, calls: list[Callable[[], HcommWork]]) -> HcommWork:
        """Issue ``calls`` (each returns a Work); one Work completed by the last (errors of any)."""
        works = [c() for c in calls]

        def check() -> None:  # the chained calls finished first (issue order): report the first error
            for w in works:
                if w._exc is not None:
                    raise w._exc
        return self._submit(op, outputs, lambda st: st.after.append(check))

    def shutdown(self) -> None:
        """Finish the collectives in flight, then close the communicator: collective (a closing
        barrier), unless the group failed or was aborted: then no peer is waited for."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            _LIVE.discard(self)
            if _WORLD[0] is self:
                _WORLD[0] = None
            self._complete(None, None)  # their errors stay on their Works; the stream is drained anyway
            try:
                if self._broken is not None:
                    self.comm.abort()  # the peers are gone or out of step: no closing barrier
                else:
                    self.comm.close()
            finally:  # the stream is drained: no kernel uses the orphaned operands any more
                for ops in self._orphans:
                    ops.__exit__(RuntimeError, None, None)
                self._orphans.clear()

    def abort(self) -> None:
        """Mark the group failed and destroy its communicator without waiting for the peers."""
        self._break(ProcessGroupError("hcomm: the process group was aborted"))
        self.shutdown()

    # Python callers (dist.*) reach these; the C++ side only knows the overridden virtuals.
    def _start_coalescing(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("hcomm: coalescing (dist._coalescing_manager, batch_isend_irecv with "
                                  "coalescing) is not supported; issue the collectives one by one")

    _end_coalescing = _start_coalescing


def _opts(opts: Any, cls: type, field: str | None = None) -> Any:
    """An options object of ``cls``; a bare ReduceOp / root int is accepted for ``field``."""
    if opts is None:
        return cls()
    if isinstance(opts, cls):
        return opts
    if field is not None and isinstance(opts, (ReduceOp, _RedOp, int)):
        o = cls()
        setattr(o, field, opts if not isinstance(opts, _RedOp) else ReduceOp(opts))
        return o
    return opts


def create_process_group(store: Any, rank: int, size: int, timeout: Any, *, group_id: str = "",
                         global_ranks: Sequence[int] = ()) -> ProcessGroupHcomm:
    """The backend creation function of ``"hcomm"`` (c10d store, group rank and size, timeout).

    The default group (``global_ranks`` empty) bootstraps its communicator through ``store``. A
    group of ``dist.new_group(ranks)`` is split off the default group's communicator when that is
    an ``hcomm`` group (``HcclCreateSubCommConfig``: only the members take part, as torch calls
    this on the members only); otherwise it bootstraps through ``store`` too.
    """
    world = _WORLD[0]
    if not global_ranks:
        pg = ProcessGroupHcomm(store, rank, size, timeout)
        _WORLD[0] = pg
        return pg
    if world is not None and not world._closed and world._broken is None and \
            world.comm.rt.has("HcclCreateSubCommConfig") and max(global_ranks) < world.size():
        sub_id = int.from_bytes(hashlib.blake2b(group_id.encode(), digest_size=8).digest(), "little")
        with world._lock:
            comm = world.comm.sub_comm(list(global_ranks), sub_id)
        return ProcessGroupHcomm(store, rank, size, timeout, comm=comm)
    return ProcessGroupHcomm(store, rank, size, timeout)
