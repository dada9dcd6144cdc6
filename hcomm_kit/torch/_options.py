"""Arguments of the ``hcomm`` backend's collectives: c10d options objects and timeouts."""

from __future__ import annotations

import datetime
from typing import Any

from torch.distributed import ReduceOp

_RedOp = ReduceOp.RedOpType


def seconds(timeout: Any) -> float:
    """Seconds of a timedelta / number; 0 or negative (torch's "unset") -> 0."""
    if timeout is None:
        return 0.0
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    else:
        s = float(timeout)
    return s if s > 0 else 0.0


def options(opts: Any, cls: type, field: str | None = None) -> Any:
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

