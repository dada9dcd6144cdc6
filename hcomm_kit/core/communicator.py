"""The communicator host object: :func:`init` bootstraps one HCCL communicator per process (rank),
split / sub-communicators, closing and aborting. Users get it through :func:`hcomm_kit.init`, with
the collectives and custom operators attached by :mod:`hcomm_kit.ops.communicator`.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import math
import os
import signal
import sys
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from ..base import envs
from ..base.errors import BackendError, CollectiveMismatchError, ConfigError, HcommKitError
from ..runtime import codes, enums, structs
from .bootstrap import Bootstrap, detect
from .device import DeviceBuffer, Device, Stream
from ..base.validate import as_color

if TYPE_CHECKING:
    from .topology import Topology

__all__ = ["Communicator", "init"]

_LIVE: "weakref.WeakSet[Communicator]" = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()
_ATEXIT = False
_SEQ = itertools.count()  # creation order of this process's communicators (the same on every rank)
_EXIT_BARRIER_S = 10.0  # at exit, the closing barrier waits at most this long for the other ranks
_STOPPED_BY_SIGNAL = [False]  # SIGTERM / SIGHUP ended the program (exit_on_signal)


def _close_all() -> None:
    # Newest first (a split before its parent): the same order on every rank, so each closing
    # barrier meets the other ranks' (the set's own order differs between processes, and two ranks
    # closing two communicators in opposite orders waited for each other for ever at exit).
    failed: CollectiveMismatchError | None = None
    for c in sorted(list(_LIVE), key=lambda c: c._seq, reverse=True):
        try:
            c._close(barrier=True, barrier_timeout=_EXIT_BARRIER_S)
        except CollectiveMismatchError as exc:
            failed = failed or exc
        except Exception:
            pass
    _ignore_sigterm_from_now_on()
    if failed is not None:
        exit_failed(failed)


def exit_failed(exc: BaseException) -> None:
    """At exit: a communicator's closing call check found the ranks out of step (this rank made
    fewer or other collective calls than its peers, so its results may be wrong). Print ``exc`` and
    end the process with status 1 instead of 0: under MPI by ``MPI_Abort`` (the job ends, as after
    an uncaught exception), else by C ``exit(1)``, which still runs the runtime's own exit handlers
    (the emulator unlinks its /dev/shm segments) but not the rest of Python's finalization. Nothing
    when the program is ending with an uncaught exception already (Ctrl-C included) or was stopped by
    a signal: it fails anyway, and its peers learn of it through the call check."""
    if getattr(sys, "last_value", None) is not None or _STOPPED_BY_SIGNAL[0]:
        return
    try:
        sys.stderr.write(f"hcomm-kit: the program ends with an error: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - closed streams: still end with status 1
        pass
    try:
        mpi = sys.modules.get("mpi4py.MPI")
        if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized() and mpi.COMM_WORLD.Get_size() > 1:
            mpi.COMM_WORLD.Abort(1)
    except Exception:  # noqa: BLE001 - fall back to exit(1)
        pass
    ctypes.CDLL(None).exit(1)


def _exit_through_the_interpreter_on(*signals: int) -> None:
    """A launcher ends the ranks of a failed job with SIGTERM (mpirun, torchrun), a closed terminal
    with SIGHUP: where nobody handles them yet, they raise SystemExit(128 + signal) instead, so the
    process ends through the interpreter (communicators aborted or closed at exit, the emulator's
    /dev/shm segments unlinked) instead of dying on the spot and leaving them behind."""
    try:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in signals:
            if signal.getsignal(sig) is signal.SIG_DFL:
                signal.signal(sig, exit_on_signal)
    except (ValueError, OSError):  # no signals here
        pass


def exit_on_signal(signum: int, frame: Any) -> None:
    """The handler of :func:`_exit_through_the_interpreter_on` (the torch backend replaces it for
    SIGTERM with its own, which also aborts its groups)."""
    _STOPPED_BY_SIGNAL[0] = True
    raise SystemExit(128 + signum)


def _ignore_sigterm_from_now_on() -> None:
    """At exit, once the communicators are closed, only the emulator's unlinking of its /dev/shm
    segments is left (a C atexit handler, after Python's finalization, which resets Python's
    signal handlers). A SIGTERM in that window (a launcher ending the other ranks of a failed job)
    would kill the process with the segments still linked: ignore it from here on, unless the
    program handles SIGTERM itself. An exit that hangs is still ended by the launcher's SIGKILL."""
    try:
        if threading.current_thread() is not threading.main_thread():
            return
        handler = signal.getsignal(signal.SIGTERM)
        if handler is signal.SIG_DFL or getattr(handler, "__module__", "").startswith("hcomm_kit"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    except (ValueError, OSError, TypeError):
        pass


def _apply_soc(soc: str | None, backend: str | None):
    """Set HCOMM_KIT_SOC before the runtime loads; refuse a different SoC once it is loaded."""
    from .. import runtime

    rt = runtime.loaded()
    if soc is not None:
        choices = envs.VARIABLES["HCOMM_KIT_SOC"].choices
        if soc not in choices:
            raise ConfigError(f"unknown soc {soc!r}; accepted: {', '.join(choices)}", key="soc")
        if rt is not None:
            rt.checked.aclInit(None)
            current = rt.soc_name()
            if current and current != soc and not current.startswith(soc):
                raise ConfigError(
                    f"the runtime is already loaded with SoC {current}; cannot switch to {soc} in this process. "
                    f"Set HCOMM_KIT_SOC={soc} before the first hcomm_kit call (or start a new process)",
                    key="soc")
        else:
            os.environ["HCOMM_KIT_SOC"] = soc
    if rt is None:
        rt = runtime.load(backend)
    return rt


_LOCAL_SIZE_VARS = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE")


def _pin_rank(rt, boot) -> None:
    """Emulator: bind every thread of this process to one CPU (HCOMM_KIT_PIN).

    A rank's host thread, stream worker and device-thread executor hand work to each other on
    every call. When the node's ranks nearly fill its CPUs (ranks <= CPUs < 2 x ranks), spinning is
    off (the threads contend) and the OS may spread one rank's threads over several CPUs: each
    hand-off then wakes an idle CPU (tens of microseconds on a VM; 2 ranks on 2 vCPUs: 8-byte
    allreduce 25-55 us instead of ~15). One CPU per rank keeps the hand-offs local while the ranks
    still run in parallel (rank r: the r-th CPU this process may use). Skipped when the process
    is already bound to one CPU (taskset, mpirun binding).
    """
    mode = envs.get("HCOMM_KIT_PIN")
    if mode == "0" or getattr(rt, "backend", None) != "emu" or boot.size <= 1:
        return
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return
    local = boot.size
    for name in _LOCAL_SIZE_VARS:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            local = int(value)
            break
    if len(cpus) < 2 or (mode == "auto" and not local <= len(cpus) < 2 * local):
        return  # already bound to one CPU, or enough CPUs (or too few) for the ranks
    cpu = cpus[boot.local_rank % len(cpus)]
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, {cpu})
        except OSError:
            pass


def init(comm: Any = None, *, backend: str | None = None, soc: str | None = None,
         bootstrap: Bootstrap | None = None, pin: bool | None = None,
         cls: "type[Communicator] | None" = None) -> "Communicator":
    """Create the communicator of this process, an instance of ``cls`` (default: :class:`Communicator`).

    The public :func:`hcomm_kit.init` is :func:`hcomm_kit.ops.communicator.init`, which passes the
    communicator class with the collectives and custom operators attached; its docstring describes
    the other arguments, the result and the errors (written once, there).
    """
    rt = _apply_soc(soc, backend)
    boot = bootstrap if bootstrap is not None else detect(comm)
    if boot.kind == "single":
        _note_single_rank()
    if pin is not False:
        _pin_rank(rt, boot)
    if boot.mpi_comm is not None and boot.size > 1:
        from .rank import install_abort_hook

        install_abort_hook()  # an exception on one rank aborts the job instead of hanging the others
    return (cls or Communicator)._create(rt, boot)


_NOTED = False


def expect_single_rank() -> None:
    """The caller asked for one rank (e.g. ``hcomm-kit run --np 1``): :func:`init` says nothing about it."""
    global _NOTED
    _NOTED = True


def _note_single_rank() -> None:
    """Say once per process, on stderr, that no launcher was found (HCOMM_KIT_QUIET=1 hides it)."""
    global _NOTED
    if _NOTED or envs.quiet():
        return
    _NOTED = True
    import sys

    prog = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else "your_script.py"
    sys.stderr.write(f"hcomm-kit: no MPI launcher found: running as a single rank (rank 0 of 1). Start N ranks with "
                     f"`hcomm-kit launch --np N -- python {prog} ...` (HCOMM_KIT_QUIET=1 hides this note)\n")
    sys.stderr.flush()


class Communicator:
    """One HCCL communicator of this rank.

    Attributes:
        rank, size: this rank and the rank count.
        name: the communicator name (``HcclGetCommName``).
        handle: the ``HcclComm`` pointer (int).
        stream: the default :class:`~hcomm_kit.core.device.Stream` of its operators.
        device: the :class:`~hcomm_kit.core.device.Device`.
        mpi_comm: the mpi4py communicator it was bootstrapped from (or None).

    This is the host object alone; the operators layer (:mod:`hcomm_kit.ops.communicator`)
    subclasses it with the built-in collectives and ``load_op``, and releases its operators
    through :meth:`_release_operators` when the communicator closes.
    """

    def __init__(self) -> None:  # use init() / split()
        raise TypeError("use hcomm_kit.init() or Communicator.split()")

    @classmethod
    def _create(cls, rt, boot: Bootstrap) -> "Communicator":
        self = cls._blank(rt, boot)

        def make_root() -> bytes:
            info = structs.HcclRootInfo()
            rt.checked.HcclGetRootInfo(ctypes.byref(info))
            return bytes(ctypes.string_at(ctypes.addressof(info), ctypes.sizeof(info)))

        try:
            raw = boot.exchange(make_root)
        except BaseException:
            if boot.mpi_comm is not None and boot.size > 1:
                _abort_mpi(boot.mpi_comm)
            raise
        info = structs.HcclRootInfo.from_buffer_copy(raw)
        h = ctypes.c_void_p()
        rt.checked.HcclCommInitRootInfo(boot.size, ctypes.byref(info), boot.rank, ctypes.byref(h))
        self._attach(h.value)
        if boot.mpi_comm is not None and boot.size > 1:
            boot.mpi_comm.Barrier()  # every rank is attached before any of them can use (or destroy) it
        return self

    @classmethod
    def _blank(cls, rt, boot: Bootstrap) -> "Communicator":
        """A communicator object without a handle yet (see :meth:`_attach`)."""
        self = object.__new__(cls)
        self.rt = rt
        self.device = Device.open(rt, boot.local_rank)
        self._boot = boot
        self.mpi_comm = boot.mpi_comm
        self.handle = None
        # Collective-call check (emulator extension HcommKitCallCheck; None on CANN): see CustomOp.check_call.
        self._call_check = rt.hccl.HcommKitCallCheck if rt.backend == "emu" and rt.has("HcommKitCallCheck") else None
        self._check_buf = ctypes.create_string_buffer(2048)
        self._call_sites = envs.call_check() == "strict"  # compare call sites (hcomm_kit.ops.callsite)
        self._closed = False
        return self

    def _attach(self, handle: int) -> None:
        """Take ``handle`` (a new HcclComm): rank, size, name, stream; registered for close at exit."""
        global _ATEXIT
        rt = self.rt
        self.handle = handle
        r, n = ctypes.c_uint32(), ctypes.c_uint32()
        rt.checked.HcclGetRankId(self.handle, ctypes.byref(r))
        rt.checked.HcclGetRankSize(self.handle, ctypes.byref(n))
        self.rank, self.size = r.value, n.value
        name = ctypes.create_string_buffer(enums.COMM_NAME_MAX_LENGTH)
        rt.checked.HcclGetCommName(self.handle, name)
        self.name = name.value.decode()
        self.name_bytes = name.value
        self.stream = Stream(rt)
        with _LIVE_LOCK:
            self._seq = next(_SEQ)
            _LIVE.add(self)
            if not _ATEXIT:
                atexit.register(_close_all)  # runs before mpi4py's MPI_Finalize (registered earlier)
                _ATEXIT = True
                # the first communicator of this process: what dead launchers left goes now (their
                # Open MPI backing directories; the emulator reclaims its own segments)
                from ..base.leftovers import reclaim_backing_dirs

                reclaim_backing_dirs()
                _exit_through_the_interpreter_on(signal.SIGTERM, signal.SIGHUP)

    # ---- properties ------------------------------------------------------------------------
    @property
    def soc(self) -> str:
        """The product the device emulates or is (``Ascend910B``, ``Ascend910_93``, ``Ascend950``)."""
        return self.device.soc

    @property
    def topology(self) -> "Topology":
        """The cluster topology of this communicator (servers, link type per pair, links down).

        On the CANN backend (no HcommKitCommTopology) one server holding every rank.
        """
        from .topology import Topology

        self._check_open()
        rt = self.rt
        if rt.backend != "emu" or not rt.has("HcommKitCommTopology"):
            return Topology.single_server(self.size)
        buf = ctypes.create_string_buffer(1 << 16)
        n = rt.checked.HcommKitCommTopology(self.handle, buf, len(buf))
        if n < 0:
            rt.check_hccl(-n, "HcommKitCommTopology")
        return Topology.from_json(buf.value.decode())

    # ---- the timing model (docs/predicted-time.md) -----------------------------------------
    @property
    def last_model_time(self) -> float | None:
        """Modelled Ascend time (us) of the latest operation this rank ran on this communicator
        (built-in collective or custom operator): the task graph its kernel issued on every rank,
        simulated on the product's parameters (``hcomm_kit/emu/src/model/params``). Waits until
        every rank taking part has finished that call (``HCOMM_KIT_MODEL_WAIT`` s): the ranks its
        tasks dealt with, every rank for a collective, the partners for point-to-point calls. None
        on the CANN backend, on one rank (no Hcomm tasks) and with ``HCOMM_KIT_MODEL=0``."""
        self._check_open()
        rt = self.rt
        if rt.backend != "emu" or not rt.has("HcommKitModelLastTime") or self.size < 2:
            return None
        from ..base import envs

        if not envs.model_enabled():
            return None
        us = ctypes.c_double()
        rt.checked.HcommKitModelLastTime(self.handle, ctypes.byref(us))
        return us.value

    def model_explain(self, all_tasks: bool = False) -> dict[str, Any]:
        """The simulation of :attr:`last_model_time` in full: ``time_us``, ``product``, ``op``,
        ``ranks``, ``critical_path`` (the tasks, ranks and links that made up the time: ``rank``,
        ``thread``, ``task``, ``bytes``, ``peer``, ``link``, ``issue_us``, ``start_us``, ``end_us``,
        ``why``), ``notes`` and, with ``all_tasks``, ``all`` (every task)."""
        import json

        self._check_open()
        rt = self.rt
        if rt.backend != "emu" or not rt.has("HcommKitModelExplain"):
            raise HcommKitError("the timing model needs the emulator backend")
        size = 1 << 20
        while True:
            buf = ctypes.create_string_buffer(size)
            n = rt.checked.HcommKitModelExplain(self.handle, int(all_tasks), buf, len(buf))
            if n < 0:
                rt.check_hccl(-n, "HcommKitModelExplain")
            if n < size:
                return json.loads(buf.value.decode())
            size = n + 1

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or :meth:`abort`."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise HcommKitError("this communicator is closed")

    # ---- operators and buffers -------------------------------------------------------------
    def empty(self, shape: "int | tuple[int, ...]", dtype: Any = "fp32") -> DeviceBuffer:
        """Uninitialised device memory of ``shape`` elements of ``dtype``."""
        self._check_open()
        return DeviceBuffer.empty(shape, dtype, rt=self.rt)

    def to_device(self, array: Any, dtype: Any = None) -> DeviceBuffer:
        """A new device buffer holding a copy of a host array."""
        self._check_open()
        return DeviceBuffer.from_numpy(array, dtype, rt=self.rt)

    def new_stream(self) -> Stream:
        """A new stream (pass it as ``op(..., stream=s)``)."""
        return Stream(self.rt)

    def set_connect_timeout(self, seconds: float) -> bool:
        """Wait at most ``seconds`` for the peers when channels are set up (a collective's first call).

        The default is ``HCCL_CONNECT_TIMEOUT``; a late or missing peer then fails the call with
        HCCL_E_TIMEOUT naming the ranks. Emulator only (CANN reads ``HCCL_CONNECT_TIMEOUT`` alone):
        returns False where it cannot be set.

        Raises:
            ValueError: ``seconds`` is not in (0, 86400].
        """
        if not 0 < seconds <= 86400:
            raise ValueError(f"connect timeout {seconds!r} s: expected more than 0 and at most 86400")
        self._check_open()
        rt = self.rt
        if rt.backend != "emu" or not rt.has("HcommKitCommSetConnectTimeout"):
            return False
        rt.checked.HcommKitCommSetConnectTimeout(self.handle, max(1, math.ceil(seconds)))
        return True

    def split(self, color: int | None, key: int = 0) -> "Communicator | None":
        """A new communicator of the ranks with the same ``color``, ordered by ``key`` (collective).

        Through mpi4py's ``Split`` when the communicator has an MPI world; without one (ranks on
        several hosts) every rank's color and key are exchanged over this communicator and each
        group is made with :meth:`sub_comm`. ``color=None`` (``MPI.UNDEFINED``) returns None on this
        rank. ``color`` must be None or an int in ``[0, 2**31)`` and ``key`` an int (ConfigError
        otherwise).
        """
        self._check_open()
        color, key = as_color(color, key)
        if self.mpi_comm is None:
            if self.size == 1:
                return self if color is None else type(self)._create(self.rt, Bootstrap(0, 1, self._boot.local_rank))
            from . import world

            every = world.allgather(self, (color, key))
            self._splits = getattr(self, "_splits", 0) + 1
            if color is None:
                return None
            ranks = sorted((r for r in range(self.size) if every[r][0] == color), key=lambda r: (every[r][1], r))
            # an id of the group unique among this communicator's sub-communicators: the split's number and the color
            return self.sub_comm(ranks, (1 << 62) | (self._splits << 31) | color)
        from mpi4py import MPI

        sub = self.mpi_comm.Split(MPI.UNDEFINED if color is None else color, key)
        if sub == MPI.COMM_NULL:
            return None
        boot = Bootstrap(sub.Get_rank(), sub.Get_size(), self._boot.local_rank, mpi_comm=sub)
        return type(self)._create(self.rt, boot)

    def sub_comm(self, ranks: "list[int]", sub_id: int) -> "Communicator":
        """A communicator of this one's ``ranks`` (in that order), created by those ranks only
        (``HcclCreateSubCommConfig``; no bootstrap, no call from the other ranks).

        Args:
            ranks: the member ranks of this communicator; this rank must be one of them.
            sub_id: an id of the new communicator, the same on every member (unique among the
                sub-communicators of this one that exist at the same time).

        Raises:
            ConfigError: ``ranks`` without this rank, with duplicates or out of range.
            BackendError: the runtime has no ``HcclCreateSubCommConfig``.
        """
        self._check_open()
        ids = [int(r) for r in ranks]
        if self.rank not in ids:
            raise ConfigError(f"sub_comm: ranks {ids} do not include this rank ({self.rank})", key="ranks")
        if len(set(ids)) != len(ids) or any(not 0 <= r < self.size for r in ids):
            raise ConfigError(f"sub_comm: ranks {ids} must be distinct ranks of this {self.size}-rank communicator",
                              key="ranks")
        if not self.rt.has("HcclCreateSubCommConfig"):
            raise BackendError(f"the {self.rt.backend} runtime has no HcclCreateSubCommConfig")
        if not 0 <= int(sub_id) < 1 << 64:
            raise ConfigError(f"sub_comm: sub_id {sub_id} is not a 64-bit unsigned integer", key="sub_id")
        arr = (ctypes.c_uint32 * len(ids))(*ids)
        cfg = structs.HcclCommConfig()
        structs.hccl_comm_config_init(cfg)
        parent = ctypes.c_void_p(self.handle)
        h = ctypes.c_void_p()
        self.rt.checked.HcclCreateSubCommConfig(ctypes.byref(parent), len(ids), arr, int(sub_id), ids.index(self.rank),
                                                ctypes.byref(cfg), ctypes.byref(h))
        sub = type(self)._blank(self.rt, Bootstrap(ids.index(self.rank), len(ids), self._boot.local_rank))
        sub._attach(h.value)
        return sub

    # ---- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Wait for pending work, release operator resources and destroy the communicator.

        Collective: every rank of the communicator calls it (the ranks meet at a barrier first).
        Called while an exception propagates (a ``finally:`` or ``except`` block), it does not raise
        the call mismatch its close makes with peers still in their calls: that exception is the
        cause to see.
        """
        unwinding = sys.exc_info()[1] is not None
        # unwinding: the peers may be waiting elsewhere (an MPI call, a collective this rank left);
        # they learn of this close from the call check, and the closing barrier would wait for them
        self._close(barrier=not unwinding, mismatch_error=not unwinding)

    def abort(self) -> None:
        """Destroy the communicator without waiting for the other ranks (not collective).

        For a communicator whose peers failed or are out of step (e.g. after a collective timed
        out): no closing barrier, so it returns even when peers are gone.
        """
        self._close(barrier=False)

    def _close(self, barrier: bool, barrier_timeout: float | None = None, mismatch_error: bool = True) -> None:
        if self._closed:
            return
        self._finish_pending(not barrier, _EXIT_BARRIER_S if barrier_timeout is None else barrier_timeout)
        self._closed = True
        mismatch = None
        try:
            if self.stream.handle:
                self.rt.acl.aclrtSynchronizeStream(self.stream.handle)
            checked = self._call_check is not None and self.size > 1 and self.handle
            aborted_before = checked and self._abort_reason()[0] != 0
            if checked:
                # a peer still making collective calls learns that this rank closed instead
                self._call_check(self.handle, -1, b"close()", b"close()", self._check_buf, len(self._check_buf))
            if barrier:
                self._closing_barrier(envs.hccl_connect_timeout_s() if barrier_timeout is None else barrier_timeout)
            if barrier and checked and not aborted_before:
                # This close() was the call at which the ranks' calls differed (the peers made more
                # or other collective calls): fail it, whoever found it, after the closing barrier
                # (the peers compare their calls with this one before they reach theirs).
                kind, why = self._abort_reason()
                if kind == codes.HCOMM_KIT_ABORT_MISMATCH:
                    mismatch = why
        finally:
            self._release_operators()
            if self.handle:
                self.rt.acl  # noqa: B018 - keep rt alive
                self.rt.hccl.HcclCommDestroy(self.handle)
                self.handle = None
            self.stream.close()
            with _LIVE_LOCK:
                _LIVE.discard(self)
        if mismatch is not None and mismatch_error:
            raise CollectiveMismatchError(f"rank {self.rank}: close() of communicator {self.name}: {mismatch}",
                                          call="close()")

    def _abandon_call(self, what: str, exc: BaseException) -> None:
        """This rank posted a call to the call check and will not make it (``exc`` ended it in
        between): abort the communicator on every rank, naming it, so that no peer waits for this
        rank's part (emulator only; a no-op when it is aborted already)."""
        if not self.handle or not self.rt.has("HcommKitCommAbort"):
            return
        try:
            self.rt.hccl.HcommKitCommAbort(self.handle, f"its call to {what} was checked but never made "
                                                        f"({type(exc).__name__}: {exc})"[:1000].encode())
        except Exception:  # noqa: BLE001 - the original error is the one raised
            pass

    def _abort_reason(self) -> tuple[int, str]:
        """(HCOMM_KIT_ABORT_MISMATCH & co. kind, text) of the emulator's abort of this communicator; (0, "")
        when it was not aborted (or on CANN)."""
        if not self.handle or not self.rt.has("HcommKitCommAbortReason"):
            return 0, ""
        buf = ctypes.create_string_buffer(4096)
        kind = int(self.rt.checked.HcommKitCommAbortReason(self.handle, buf, len(buf)))
        return kind, buf.value.decode(errors="replace")

    def _finish_pending(self, abort: bool, timeout: float) -> None:
        """Before closing: start and wait for the calls posted and not started yet (at most
        ``timeout`` seconds each), or drop them (``abort``); the operators layer overrides it. Must
        not raise."""

    def _release_operators(self) -> None:
        """Release what operators hold on this communicator (before it is destroyed); the
        operators layer overrides it. Must not raise."""

    def _closing_barrier(self, timeout: float) -> None:
        """close() is collective: no rank destroys its end while a peer may still use it. Waits at
        most ``timeout`` seconds for the others (then says so on stderr and closes without them)."""
        if self.size == 1 or not self.handle:
            return
        try:
            if self.mpi_comm is not None:
                req = self.mpi_comm.Ibarrier()
                deadline, pause = time.monotonic() + timeout, 0.0
                while not req.Test():
                    if time.monotonic() > deadline:
                        sys.stderr.write(f"hcomm-kit: rank {self.rank}: close() of communicator {self.name}: the "
                                         f"other ranks did not reach their close() within {timeout:g} s; closing "
                                         f"without them\n")
                        return
                    time.sleep(pause)
                    pause = min(1e-3, pause * 2 or 1e-5)
            elif self.rt.hccl.HcclBarrier(self.handle, self.stream.handle) == 0:
                self.rt.acl.aclrtSynchronizeStream(self.stream.handle)
        except Exception:  # a dead peer: nothing to wait for
            pass

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        # Left by an exception: close as close() does (the peers learn that this rank closed), but
        # the exception that ended the block is the one to see, not the call mismatch this close
        # makes with peers still in their calls.
        if exc_type is None:
            self.close()
        else:
            self._close(barrier=False, mismatch_error=False)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"rank {self.rank}/{self.size}"
        return f"<Communicator {self.name!r} {state} {self.device.soc} ({self._boot.kind})>"


def _abort_mpi(mpi_comm) -> None:
    try:
        import sys
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        mpi_comm.Abort(1)
    except Exception:
        pass
