"""``ProcessGroupHcomm``: the ``hcomm`` torch.distributed backend, a Python ``ProcessGroup``.

``dist.init_process_group("hcomm")`` (or ``dist.new_group(ranks, backend="hcomm")``) calls
:func:`create_process_group` with the group's c10d store, rank, size and timeout. It bootstraps
one HCCL communicator per group through that store (rank 0 publishes the root info with
``store.set``, the others ``store.get`` it), so it works under ``torchrun`` (no MPI) and under
``hcomm-kit launch`` / ``mpirun`` alike.

Every collective maps onto the communicator's built-in collectives (``comm.all_reduce`` & co.,
see :mod:`hcomm_kit.ops.collectives`); tensors are passed by pointer (:mod:`hcomm_kit.torch._tensors`).
This module holds the group's plumbing (issue order, completion, staging tensors, lifetime); the
collectives themselves are mixins: reductions in :mod:`hcomm_kit.torch._reductions`, broadcast,
gathers, scatter, all-to-all and point-to-point in :mod:`hcomm_kit.torch._movement`.

Collectives are **asynchronous**, as on a device: the calling thread checks the arguments, registers
the tensors and enqueues the kernel on the group's stream, and returns an :class:`HcommWork` at once;
the kernel runs on the runtime's device threads (on the emulator: threads of this process, which do
not need the GIL) while the caller goes on computing, e.g. FSDP2's prefetching all-gathers.
``work.wait(timeout)`` waits for the kernel, then runs the host-side rest (AVG division, copies out
of temporaries) and releases the tensors (:mod:`hcomm_kit.torch.work`). Works finish in issue order; a finished collective is
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

import collections
import hashlib
import itertools
import os
import threading
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

from ..base import envs
from ..base.errors import ConfigError, ProcessGroupError
from . import _process
from ._movement import _DataMovement
from ._options import options, seconds
from ._reductions import _Reductions
from ._tensors import Operands, hk_dtype
from .work import HcommWork, _Stage

__all__ = ["ProcessGroupHcomm", "HcommWork", "create_process_group", "BACKEND_NAME"]

BACKEND_NAME = "hcomm"


class ProcessGroupHcomm(_Reductions, _DataMovement, dist.ProcessGroup):
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

        self._timeout_s = seconds(timeout) or 1800.0
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
        self._aclnn_ops: dict[str, Any] = {}   # operator dir -> its loaded aclnn interface (run_op via="aclnn")
        if comm is None:
            boot = Bootstrap.from_store(store, rank, size, _process.local_rank(rank))
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
        _process.LIVE.add(self)
        _process.install_hooks()

    # ---- identity ----------------------------------------------------------------------------
    def getBackendName(self) -> str:  # noqa: N802 - the C++ virtual's name
        """``"hcomm"``."""
        return BACKEND_NAME

    # Group name and description: kept here (a C++ ProcessGroup keeps them in its backends).
    def getGroupName(self) -> str:  # noqa: N802
        """The group's name, as torch set it."""
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        """Set by torch when it creates the group (named in this backend's messages)."""
        self._group_name = str(name)

    def getGroupDesc(self) -> str:  # noqa: N802
        """The group's description, as torch set it."""
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        """Set by torch when it creates the group."""
        self._group_desc = str(desc)

    def _label(self) -> str:
        return f"{self._group_name or 'pg'}#{self._id}"

    def _product_name(self) -> str:
        from ..ops.custom_op import PRODUCT_OF_DEV_TYPE

        return PRODUCT_OF_DEV_TYPE.get(self.comm.device.dev_type, self.comm.device.soc)

    def __repr__(self) -> str:
        return f"<ProcessGroupHcomm rank {self.rank()}/{self.size()} {self._product} {self.comm.name!r}>"

    # ---- plumbing ----------------------------------------------------------------------------
    def _break(self, exc: BaseException) -> None:
        with self._lock:
            if self._broken is None:
                self._broken = exc

    def _timeout(self, opts: Any) -> float:
        t = seconds(getattr(opts, "timeout", None))
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

    def _args(self, what: str, tensors: Any, opts: Any, opts_type: type,
              field: str | None = None) -> tuple[Any, torch.Tensor, float]:
        """The checked arguments of a one-tensor collective: its options (of ``opts_type``; a bare
        value is taken for ``field``), its CPU tensor, its timeout."""
        opts = options(opts, opts_type, field)
        t = self._one(tensors, what)
        self._check_cpu(what, t)
        return opts, t, self._timeout(opts)

    def _check_blocks(self, what: str, output: torch.Tensor, input: torch.Tensor, whole: str) -> None:
        """Check the CPU tensors of a one-buffer collective: one dtype, and the ``whole`` side
        ("output" of an all-gather, "input" of a reduce-scatter) ``size()`` blocks of the other."""
        self._check_cpu(what, output, input)
        if output.dtype != input.dtype:
            raise TypeError(f"hcomm: {what}: output dtype {output.dtype} != input dtype {input.dtype}")
        big, block = (output, input) if whole == "output" else (input, output)
        if big.numel() != block.numel() * self.size():
            raise ValueError(f"hcomm: {what}: {whole} has {big.numel()} elements, needs "
                             f"{self.size()} x {block.numel()}")

    def _root(self, root: int, what: str) -> int:
        r = int(root)
        if not 0 <= r < self.size():
            raise ValueError(f"hcomm: {what}: root {root} is not a rank of this {self.size()}-rank group")
        return r

    def barrier(self, opts: Any = None) -> HcommWork:
        """Every rank waits until every rank reached the barrier."""
        tmo = self._timeout(opts) if opts is not None else self._timeout_s
        comm = self.comm
        return self._submit("barrier", [], lambda st: comm.barrier(timeout=tmo), drain=True)

    def monitored_barrier(self, *args: Any, **kwargs: Any) -> None:
        """Not supported (gloo only).

        Raises:
            NotImplementedError: always; ``dist.barrier``'s timeout names the collective that did not finish.
        """
        raise NotImplementedError("hcomm: monitored_barrier is not supported (gloo only); use dist.barrier, "
                                  "whose timeout names the collective that did not finish")

    # ---- custom operators ------------------------------------------------------------------------
    def run_op(self, path: "str | os.PathLike[str]", input: torch.Tensor, output: torch.Tensor | None = None, *,
               reduce_op: str | None = None, root: int | None = None, via: str = "load_op",
               **params: Any) -> HcommWork:
        """Run the custom operator directory ``path`` (every rank of the group calls it) on tensors.

        It runs like the group's collectives (in issue order, with the group's timeout) and reads/writes the
        tensors' memory directly. ``output`` defaults to a new tensor sized by the operator's
        ``[io].output`` rule; the Work's future value is ``[output]``.

        Args:
            via: ``"load_op"`` (``comm.load_op``, the launch protocol from Python) or ``"aclnn"``
                (the operator's generated ``aclnn<Name>`` pair, :func:`hcomm_kit.aclnn.invoke`, on the
                group's stream; non-contiguous tensors go as views). Both give the same results.

        Raises:
            ConfigError: dtype / reduce op / parameter not accepted by the operator's op.toml, or an
                unknown ``via``.
        """
        from ..build.opbuild import build_op

        if via not in ("load_op", "aclnn"):
            raise ConfigError(f"hcomm: run_op(via={via!r}): use 'load_op' or 'aclnn'", key="via")
        self._check_cpu("run_op", input, *([output] if output is not None else []))
        spec = build_op(path).spec  # cached; compiles here (caller thread) on first use
        dt = hk_dtype(input.dtype, f"operator {spec.name}")
        if dt.name not in spec.dtypes:
            raise ConfigError(f"operator {spec.name} does not support {input.dtype} ({dt.name}); op.toml "
                              f"[op].dtypes = {list(spec.dtypes)}", key="dtype", path=spec.opdir / "op.toml")
        n = input.numel()
        count = spec.call_count(n, self.size())  # OpParam.count: HCCL's (one block per rank for alltoall & co)
        out_n = spec.output_count(count, self.size(), params.get("recv_counts"))
        if output is None:
            output = torch.empty(out_n, dtype=input.dtype)
        elif output.numel() != out_n or output.dtype != input.dtype:
            raise ValueError(f"hcomm: operator {spec.name}: output needs {out_n} x {input.dtype} "
                             f"([io].output = {spec.output!r}), got {output.numel()} x {output.dtype}")
        comm, tmo, out = self.comm, self._timeout_s, output
        if via == "aclnn":
            return self._run_aclnn(spec, path, input, out, dt, reduce_op, root, params)

        def run(st: _Stage) -> None:
            op = comm.load_op(path)
            x = st.ops.contiguous(input, write=False)
            y = st.ops.contiguous(out, write=True)
            if n:
                st.works.append(op(st.ops.operand(x, dt), st.ops.operand(y, dt), count=count, dtype=dt,
                                   reduce_op=reduce_op, root=root, timeout=tmo, async_op=True, **params))
        return self._submit(f"operator {spec.name}", [output], run)

    def _run_aclnn(self, spec: Any, path: Any, input: torch.Tensor, out: torch.Tensor, dt: Any, reduce_op: Any,
                   root: int | None, params: dict) -> HcommWork:
        """:meth:`run_op` through the operator's aclnn interface (arguments checked before anything is
        enqueued: a refusal of phase one would otherwise fail the group)."""
        from .. import aclnn
        from ..base import dtypes as _dtypes

        rop = None
        if spec.is_reduction:
            rop = _dtypes.get_reduce_op(spec.default_reduce_op(reduce_op)).name
            if rop not in spec.reduce_ops:
                raise ConfigError(f"operator {spec.name} does not support reduce op {rop}; op.toml [op].reduce_ops = "
                                  f"{list(spec.reduce_ops)}", key="reduce_op", path=spec.opdir / "op.toml")
        elif reduce_op is not None:
            raise ConfigError(f"operator {spec.name} is not a reduction (op.toml [op].reduce_ops = []); drop "
                              f"reduce_op={reduce_op!r}", key="reduce_op", path=spec.opdir / "op.toml")
        r = self._root(0 if root is None else root, f"operator {spec.name}")
        key = str(spec.opdir)
        op = self._aclnn_ops.get(key)
        if op is None:
            op = self._aclnn_ops[key] = aclnn.load(path)
        comm = self.comm

        def run(st: _Stage) -> None:
            if input.numel():
                st.works.append(aclnn.invoke(op.name, st.ops.view(input, dt), out=st.ops.view(out, dt), group=comm.name,
                                             ranks=comm.size, reduce_op=rop, root=r, stream=comm.stream, dtype=dt,
                                             **params))
        return self._submit(f"operator {spec.name} (aclnn)", [out], run)

    # ---- lifetime -------------------------------------------------------------------------------
    def _chain(self, op: str, outputs: list, calls: list[Callable[[], HcommWork]]) -> HcommWork:
        """Issue ``calls`` (each returns a Work); one Work completed by the last (errors of any)."""
        works = [c() for c in calls]

        def check() -> None:  # the chained calls finished first (issue order): report the first error
            for w in works:
                if w._exc is not None:
                    raise w._exc
        return self._submit(op, outputs, lambda st: st.after.append(check))

    def _chain_pairs(self, op: str, outputs: list, call: Callable[[Any, Any], HcommWork],
                     outs: Sequence[Any], ins: Sequence[Any]) -> HcommWork:
        """The coalesced form of ``call``: ``call(out, in)`` per pair, one Work (see :meth:`_chain`)."""
        return self._chain(op, outputs, [lambda o=o, i=i: call(o, i) for o, i in zip(outs, ins)])

    def shutdown(self) -> None:
        """Finish the collectives in flight, then close the communicator: collective (a closing
        barrier), unless the group failed or was aborted: then no peer is waited for."""
        if self._closed:
            return
        with self._lock:
            self._closed = True
            _process.LIVE.discard(self)
            if _process.WORLD[0] is self:
                _process.WORLD[0] = None
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


def create_process_group(store: Any, rank: int, size: int, timeout: Any, *, group_id: str = "",
                         global_ranks: Sequence[int] = ()) -> ProcessGroupHcomm:
    """The backend creation function of ``"hcomm"`` (c10d store, group rank and size, timeout).

    The default group (``global_ranks`` empty) bootstraps its communicator through ``store``. A
    group of ``dist.new_group(ranks)`` is split off the default group's communicator when that is
    an ``hcomm`` group (``HcclCreateSubCommConfig``: only the members take part, as torch calls
    this on the members only); otherwise it bootstraps through ``store`` too.
    """
    world = _process.WORLD[0]
    if not global_ranks:
        pg = ProcessGroupHcomm(store, rank, size, timeout)
        _process.WORLD[0] = pg
        return pg
    if world is not None and not world._closed and world._broken is None and \
            world.comm.rt.has("HcclCreateSubCommConfig") and max(global_ranks) < world.size():
        sub_id = int.from_bytes(hashlib.blake2b(group_id.encode(), digest_size=8).digest(), "little")
        with world._lock:
            comm = world.comm.sub_comm(list(global_ranks), sub_id)
        return ProcessGroupHcomm(store, rank, size, timeout, comm=comm)
    return ProcessGroupHcomm(store, rank, size, timeout)
