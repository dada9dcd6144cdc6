"""The handle of an ``async_op=True`` call of a custom operator: :class:`Work`.

The call enqueued the kernel and recorded an event after it; :meth:`Work.wait` synchronizes on that
event (with ``timeout``: aclrtSynchronizeEventWithTimeout), then runs the call's finisher (copy the
output back to the host) and hands the event back to the operator for reuse.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..base.errors import OpTimeoutError
from ..base.validate import check_timeout
from ..core.device import Event
from ..runtime import codes

__all__ = ["Work"]

_EVENT_SYNC_TIMEOUT = 507047                # aclrtSynchronizeEventWithTimeout expired


class Work:
    """Handle of an ``async_op=True`` call: :meth:`wait` returns the output, :meth:`is_completed` polls."""

    __slots__ = ("_op", "_event", "_finish", "_result", "_done", "_error")

    def __init__(self, op: Any, event: Event, finish: tuple) -> None:
        # op: the CustomOp (its module imports this one); finish: (output function, call timeout)
        self._op, self._event, self._finish = op, event, finish
        self._result: Any = None
        self._done = False
        self._error: BaseException | None = None

    @property
    def model_time(self) -> float | None:
        """Modelled Ascend time (us) of this call (docs/predicted-time.md): waits for the call,
        then simulates the tasks every rank's kernel issued for it. It is the communicator's
        latest operation, so ask before enqueueing another one on it. None where there is no
        model (CANN backend, one rank, ``HCOMM_KIT_MODEL=0``)."""
        self.wait()
        return self._op.comm.last_model_time

    def is_completed(self) -> bool:
        """True when the operator has finished (successfully or not); never blocks."""
        if self._done:
            return True
        ret = self._op._q_event(self._event.handle, ctypes.byref(self._op._status))
        if ret:
            return True  # an error: wait() raises it
        return self._op._status.value == 1

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the operator finished; return its output (numpy array or DeviceBuffer).

        Raises:
            OpTimeoutError, KernelError, AclError, HcclError: as the synchronous call would.
        """
        check_timeout(timeout)
        if not self._done:
            self._done = True
            op = self._op
            if op._pending is self:
                op._pending = None
            try:
                if timeout is None:
                    ret = op._sync_event(self._event.handle)
                    api = "aclrtSynchronizeEvent"
                else:
                    ret = op.rt.acl.aclrtSynchronizeEventWithTimeout(self._event.handle, int(timeout * 1000))
                    api = "aclrtSynchronizeEventWithTimeout"
                if ret == _EVENT_SYNC_TIMEOUT:
                    op.rt.recent_error_message()  # consumed: the message below says it better
                    rank = op.comm.rank
                    raise OpTimeoutError(ret, codes.acl_name(ret), api,
                                         f"operator {op.name} did not finish within the {timeout:.3g} s of "
                                         f"Work.wait(timeout=...) on rank {rank}; it may still be running",
                                         op=op.name, rank=rank, timeout=float(timeout))
                if ret:
                    raise op._error(ret, api, self._finish[1])
                self._result = self._finish[0]()
            except BaseException as exc:
                self._error = exc
            finally:
                if self._error is None:
                    op._free_events.append(self._event)  # reused: no event is created per call
                else:
                    self._event.close()
        if self._error is not None:
            raise self._error
        return self._result
