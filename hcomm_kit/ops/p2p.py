"""Point-to-point calls of a communicator (``comm.send`` / ``comm.recv``), matched per peer and
direction.

A rank's sends to a peer pair with that peer's receives from it, in order, whatever else either
rank posts in between (MPI's, NCCL's and gloo's rule): every rank may post its receives before its
sends (64 ``irecv`` then 64 ``isend``, as OSU's osu_bibw), or a batch of ``isend`` to the next rank
and ``irecv`` from the previous one (a ring). The emulator checks each transfer's two ends when
they are posted (``HcommKitP2PCheck``: count and dtype), before anything moves.

``async_op=True`` calls are posted, not started: they start together, as one batch of the built-in
``batch_send_recv`` operator (the kernel of ``HcclBatchSendRecv``, which moves what a batch
exchanges with each peer on a device thread of its own, so the order of its items does not
matter), when the program waits for one of them (``Work.wait`` / ``is_completed``), makes a
blocking point-to-point call (which joins the batch and waits for it), or closes the communicator.
The channels to every peer of a batch are set up together, so a ring's first batch cannot wait on
itself. A wait returns when its whole batch finished. Collectives do not start the posted calls:
a collective made between posting and waiting runs first.

``async_op="stream"`` (or ``stream=``) enqueues at once on the stream, as ``HcclSend`` / ``HcclRecv``
do: calls run in the order they were made (so two ranks that both receive first wait for each
other, and the emulator reports that deadlock).
"""

from __future__ import annotations

from typing import Any

from ..base import dtypes as _dtypes
from ..base.errors import AclError, CollectiveMismatchError, ConfigError, HcclError
from ..base.validate import check_out_array, check_timeout
from ..core.device import _D2H, DeviceBuffer, as_host_array, host_ptr
from . import callsite as _callsite
from .op_errors import MISMATCH_MARK

__all__ = ["P2PQueue", "P2PWork"]

_MAX_ITEMS = 256          # items of one batch_send_recv launch (its op.toml [[param]] arrays)
_POOL_BYTES = 64 << 20    # staging buffers of host arrays kept for reuse at most


class P2PWork:
    """Handle of an ``async_op=True`` send or receive: :meth:`wait` returns its result (None for a
    send, the output for a receive), :meth:`is_completed` polls. Both start the posted calls first."""

    __slots__ = ("_queue", "_batch", "_finish", "_result", "_done", "_error")

    def __init__(self, queue: "P2PQueue", finish: Any) -> None:
        self._queue = queue
        self._batch: Any = None           # the ops.work.Work of the batch that carries this call
        self._finish = finish             # () -> result, after the batch finished
        self._result: Any = None
        self._done = False
        self._error: BaseException | None = None

    @property
    def started(self) -> bool:
        """True once the call was launched (or failed); never starts it."""
        return self._batch is not None or self._done

    def start(self) -> None:
        """Start the posted calls of the communicator (this one among them), without waiting."""
        if not self.started:
            self._queue.flush()

    def is_completed(self) -> bool:
        """True when the call finished (successfully or not); starts the posted calls, never waits."""
        self.start()
        return self._done or self._batch.is_completed()

    def wait(self, timeout: float | None = None) -> Any:
        """Start the posted calls if needed, wait until this one's batch finished, return the result.

        Args:
            timeout: at most this many seconds (None: the call's operator timeout).

        Raises:
            OpTimeoutError, KernelError, RemoteError, AclError, HcclError: as a blocking call would.
        """
        check_timeout(timeout)
        self.start()
        if not self._done:
            self._done = True
            try:
                self._batch.wait(timeout)
                self._result = self._finish()
            except BaseException as exc:  # noqa: BLE001 - kept and raised by every wait
                self._error = exc
            finally:
                self._finish = None
        if self._error is not None:
            raise self._error
        return self._result

    def _fail(self, exc: BaseException) -> None:
        self._done, self._error, self._finish = True, exc, None


class _Item:
    __slots__ = ("recv", "peer", "dt", "count", "ptr", "timeout", "work", "release", "hold")

    def __init__(self, recv: bool, peer: int, dt: "_dtypes.DType", count: int, ptr: int, timeout: float | None,
                 work: P2PWork, release: Any, hold: Any) -> None:
        self.recv, self.peer, self.dt, self.count, self.ptr = recv, peer, dt, count, ptr
        self.timeout, self.work, self.release = timeout, work, release
        self.hold = hold  # the DeviceBuffer the kernel reads or writes: alive until the batch finished


class P2PQueue:
    """The point-to-point calls of one communicator that were posted and have not started yet."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.items: list[_Item] = []
        self._free: dict[int, list[DeviceBuffer]] = {}   # staging buffers by byte size, for reuse
        self._free_bytes = 0
        self._texts: dict = {}                          # (recv, peer, count, dtype) -> (posted, expected)
        self._check = getattr(comm.rt.hccl, "HcommKitP2PCheck", None) \
            if comm.rt.backend == "emu" and comm.rt.has("HcommKitP2PCheck") else None

    # ---- posting ---------------------------------------------------------------------------------
    def post(self, recv: bool, peer: int, data: Any, dtype: Any, timeout: float | None, async_op: bool) -> Any:
        """Check and post one send (``data``: what to send) or receive (``data``: where to receive).

        Returns a :class:`P2PWork` (``async_op``), else waits: None for a send, the output for a
        receive."""
        comm = self.comm
        comm._check_open()
        if timeout is not None:
            check_timeout(timeout)
        if recv:
            if data is None:
                raise ConfigError("recv: pass out= (an array or DeviceBuffer sized like the sent data)", key="out")
            dev = isinstance(data, DeviceBuffer)
            host = None if dev else as_host_array(data)
            dt = _dtypes.get_dtype(dtype if dtype is not None else (data.dtype if dev else host.dtype))
            if dev:
                data.address("recv: out=")
                if data.dtype.name != dt.name:
                    raise ConfigError(f"recv: out= is a DeviceBuffer of {data.dtype.name}, dtype={dt.name} was asked "
                                      f"(the bytes would be reinterpreted)", key="out")
                count = data.nbytes // dt.itemsize
            else:
                check_out_array(host, dt.numpy, host.size, dt.name, "recv")
                count = host.size
        else:
            dev = isinstance(data, DeviceBuffer)
            host = None if dev else comm._host(data)
            dt = comm._dtype(data, dtype)
            if dev:
                data.address("send: the input")
                count = data.nbytes // dt.itemsize
            else:
                if host.itemsize != dt.itemsize:
                    raise ConfigError(f"send: input dtype {host.dtype} does not hold {dt.name} elements "
                                      f"({host.itemsize} != {dt.itemsize} bytes)", key="dtype")
                count = host.size
        self._check_transfer(recv, peer, count, dt)
        nbytes = count * dt.itemsize
        release = None
        hold: Any = data if dev else None
        if dev:
            ptr = data.ptr
            finish = (lambda: data) if recv else (lambda: None)
        elif nbytes == 0:
            ptr = 0
            finish = (lambda: host) if recv else (lambda: None)
        else:
            buf = hold = self._take(nbytes)
            ptr = buf.ptr
            release = lambda b=buf: self._give(b)  # noqa: E731
            if recv:
                def finish(buf=buf, host=host, nbytes=nbytes):
                    ret = comm.rt.acl.aclrtMemcpy(host_ptr(host), nbytes, buf.ptr, nbytes, _D2H)
                    if ret:
                        comm.rt.check_acl(ret, "aclrtMemcpy")
                    return host
            else:
                buf.copy_from(host)  # taken now: the caller may reuse its array at once
                finish = lambda: None  # noqa: E731
        work = P2PWork(self, _released(finish, release))
        self.items.append(_Item(recv, peer, dt, count, ptr, timeout, work, release, hold))
        if async_op:
            return work
        return work.wait()

    def _check_transfer(self, recv: bool, peer: int, count: int, dt: "_dtypes.DType") -> None:
        """The emulator's check of this end of the transfer against the peer's end (raises on a mismatch)."""
        comm = self.comm
        if self._check is None:
            return
        key = (recv, peer, count, dt.value)
        texts = self._texts.get(key)
        if texts is None:
            what = f"(count={count}, dtype={dt.name})"
            texts = ((f"recv{what} from rank {peer}", f"send{what} to rank {comm.rank}") if recv else
                     (f"send{what} to rank {peer}", f"recv{what} from rank {comm.rank}"))
            if len(self._texts) >= 256:
                self._texts.clear()
            self._texts[key] = texts
        where = _callsite.site(2) if comm._call_sites else ""
        mine = texts[0] + _callsite.SEPARATOR + where if where else texts[0]
        buf = comm._check_buf
        if self._check(comm.handle, peer, int(recv), mine.encode(), texts[1].encode(), buf, len(buf)):
            text = buf.value.decode(errors="replace") or comm.rt.recent_error_message()
            raise CollectiveMismatchError(f"rank {comm.rank}: {text}",
                                          call=f"{texts[0]} at {where}" if where else texts[0])

    # ---- starting ---------------------------------------------------------------------------------
    def flush(self) -> None:
        """Start every posted call as one batch on the communicator's stream (never waits for it)."""
        items, self.items = self.items, []
        if not items:
            return
        try:
            batch = self._launch(items)
        except BaseException as exc:  # noqa: BLE001 - every call of the batch fails with it
            for it in items:
                if it.release is not None:
                    it.release()
                it.work._fail(exc)
            raise
        for it in items:
            it.work._batch = batch

    def _launch(self, items: list[_Item]) -> Any:
        """Launch ``items`` (batch_send_recv, 256 items per launch) and return the batch's Work."""
        comm = self.comm
        moving = [it for it in items if it.count]
        op = comm.builtin_op("batch_send_recv")
        timeouts = [it.timeout for it in items if it.timeout is not None]
        tmo = min(timeouts) if timeouts else None
        if not moving:
            return _Done()
        s = comm.stream.handle
        res = op._res_by_stream.get(s) or op.resources(s)
        # every peer's channel at once: set up one at a time, a ring of ranks would wait on itself
        missing = sorted({it.peer for it in moving if not res.ctx.channels[it.peer].handle})
        if missing:
            try:
                res.acquire_channels([(p, p) for p in missing], op.spec.channel_notifies)
            except (AclError, HcclError) as exc:  # a peer's failed call check lands here
                if MISMATCH_MARK in exc.message:
                    raise CollectiveMismatchError(f"rank {comm.rank}: {exc.message}") from exc
                raise
            res.push_ctx()
        for first in range(0, len(moving), _MAX_ITEMS):
            part = moving[first:first + _MAX_ITEMS]
            op.launch(0, 0, 0, part[0].dt, root=part[0].peer, stream=s, timeout=tmo, itemNum=len(part),
                      itemType=[int(it.recv) for it in part], itemRank=[it.peer for it in part],
                      itemDataType=[it.dt.value for it in part], itemCount=[it.count for it in part],
                      itemBuf=[it.ptr for it in part])
        # the batch's Work (held by the operator until its next launch waits for it) keeps every
        # buffer alive until the kernel finished, also those of calls nobody waits for
        return op.complete(lambda: None, stream=s, timeout=tmo, async_op=True, keep=[it.hold for it in moving])

    def finish(self, timeout: float | None) -> None:
        """Closing: start what is posted and wait for it (at most ``timeout`` seconds each)."""
        items = list(self.items)
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - closing: the calls' waits raise it
            pass
        for it in items:
            try:
                it.work.wait(timeout)
            except Exception:  # noqa: BLE001 - closing: nobody waits for these any more
                pass

    def drop(self) -> None:
        """Aborting: the posted calls fail without starting."""
        from ..base.errors import HcommKitError

        items, self.items = self.items, []
        for it in items:
            if it.release is not None:
                it.release()
            it.work._fail(HcommKitError(f"rank {self.comm.rank}: the communicator {self.comm.name} was aborted before "
                                        f"this point-to-point call started"))

    # ---- staging buffers of host arrays -------------------------------------------------------------
    def _take(self, nbytes: int) -> DeviceBuffer:
        free = self._free.get(nbytes)
        if free:
            self._free_bytes -= nbytes
            return free.pop()
        return DeviceBuffer.empty(nbytes, "int8", rt=self.comm.rt)

    def _give(self, buf: DeviceBuffer) -> None:
        if self._free_bytes + buf.nbytes > _POOL_BYTES or self.comm._closed:
            buf.close()
            return
        self._free.setdefault(buf.nbytes, []).append(buf)
        self._free_bytes += buf.nbytes

    def close(self) -> None:
        """Free the staging buffers (the communicator is closing)."""
        for bufs in self._free.values():
            for b in bufs:
                b.close()
        self._free.clear()
        self._free_bytes = 0


class _Done:
    """The Work of a batch with nothing to move (every item has count 0)."""

    def is_completed(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> None:
        return None


def _released(finish: Any, release: Any) -> Any:
    """``finish``, then give the staging buffer back (also when ``finish`` raises)."""
    if release is None:
        return finish

    def run():
        try:
            return finish()
        finally:
            release()
    return run
