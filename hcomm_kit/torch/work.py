"""The Work of the ``hcomm`` backend: what one collective leaves in flight, and its handle.

A collective of :class:`~hcomm_kit.torch.process_group.ProcessGroupHcomm` registers its tensors
and enqueues its kernels on a :class:`_Stage`; the :class:`HcommWork` it returns finishes that stage
(waits for the kernels, runs the host steps such as AVG's division, releases the tensors) when
waited on, polled, or when the group finishes its collectives in issue order. The group itself
does the ordering (``_complete``, ``_break``): a Work only knows its own stage, and its group
(typed ``Any`` here, as this module is imported by :mod:`~hcomm_kit.torch.process_group`).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from ..base.errors import AclError, CollectiveMismatchError, HcclError, ProcessGroupError
from ._options import seconds
from ._tensors import Operands

__all__ = ["HcommWork"]

# Failures after which the ranks are out of step: the group refuses further collectives.
_FATAL = (AclError, HcclError, CollectiveMismatchError)


class _Stage:
    """What one collective leaves in flight: its operands (tensors registered with the runtime, kept
    alive), the runtime Works of the kernels it enqueued, and the host steps to run after them."""

    __slots__ = ("ops", "works", "after", "orphans")

    def __init__(self, ops: Operands, orphans: list[Operands]) -> None:
        self.ops = ops
        self.works: list = []                   # hcomm_kit.ops.work.Work of each enqueued kernel
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

    def __init__(self, pg: Any, op: str, seq: int, outputs: list,
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
            t = seconds(timeout)
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
        """True once the work has completed without an error."""
        return self._completed and self._exc is None

    def exception(self) -> BaseException | None:
        """The error the work failed with, or None."""
        return self._exc

    def result(self) -> list:
        """Wait for the work and return its output tensors."""
        self.wait()
        return self._outputs

    def source_rank(self) -> int:
        """The rank a ``recv`` received from (-1 for other works)."""
        return self._source_rank

    def synchronize(self) -> None:
        """Wait for the work (as :meth:`wait`)."""
        self.wait()
