"""Argument checks shared by the Python API (collectives, custom operators, communicators).

Each check either returns the normalised value or raises :class:`~hcomm_kit.base.errors.ConfigError`
naming the argument, what was given and what is accepted. They are cheap on the hot path: the
common case (``None``, a plain ``int`` / ``float``, an array of the right dtype) is decided with
``type(...) is`` tests before anything slower.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .errors import ConfigError

__all__ = ["check_timeout", "as_rank", "as_count", "as_color", "check_out_array", "describe_array"]

_INF = math.inf
_INT32_MAX = 2**31 - 1


def check_timeout(timeout: Any, what: str = "timeout") -> None:
    """Accept None (the default, ``HCCL_EXEC_TIMEOUT``), 0 (no limit) or finite seconds > 0.

    Raises:
        ConfigError: negative, NaN or infinite values, booleans and non-numbers.
    """
    if timeout is None:
        return
    t = type(timeout)
    if (t is int or t is float) and 0 <= timeout < _INF:
        return
    if isinstance(timeout, numbers.Real) and t is not bool and 0 <= timeout < _INF:
        return  # numpy scalars, fractions
    raise ConfigError(f"{what}={timeout!r} is not valid: pass None (the default, HCCL_EXEC_TIMEOUT), 0 (no limit) "
                      f"or a finite number of seconds > 0", key=what)


def _as_int(value: Any, what: str, accepted: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return int(value)
    raise ConfigError(f"{what}={value!r} ({type(value).__name__}) is not an integer: pass {accepted}", key=what)


def as_rank(value: Any, size: int, what: str = "root") -> int:
    """A rank of a ``size``-rank communicator: an int (or numpy integer) in ``[0, size)``."""
    r = value if type(value) is int else _as_int(value, what, f"an int in [0, {size})")
    if not 0 <= r < size:
        raise ConfigError(f"{what}={value!r} is not a rank of this {size}-rank communicator: pass an int in "
                          f"[0, {size})", key=what)
    return r


def as_count(value: Any, what: str = "count", maximum: int | None = None) -> int:
    """An element count: an int >= 0 (and <= ``maximum`` when given)."""
    accepted = "an int >= 0" + (f" and <= {maximum}" if maximum is not None else "")
    n = value if type(value) is int else _as_int(value, what, accepted)
    if n < 0 or (maximum is not None and n > maximum):
        raise ConfigError(f"{what}={value!r} is out of range: pass {accepted}", key=what)
    return n


def as_color(color: Any, key: Any) -> tuple[int | None, int]:
    """``split`` arguments: colour None (this rank joins no communicator) or an int in ``[0, 2**31)``;
    key an int in ``[-2**31, 2**31)``."""
    c = None
    if color is not None:
        c = _as_int(color, "color", "None (this rank joins no new communicator) or an int in [0, 2**31)")
        if not 0 <= c <= _INT32_MAX:
            raise ConfigError(f"color={color!r} is not valid: MPI colours are ints in [0, 2**31) "
                              f"(ranks with the same colour form one communicator), or None to join none",
                              key="color")
    k = _as_int(key, "key", "an int in [-2**31, 2**31) (orders the ranks of the new communicator)")
    if not -_INT32_MAX - 1 <= k <= _INT32_MAX:
        raise ConfigError(f"key={key!r} is not valid: pass an int in [-2**31, 2**31)", key="key")
    return c, k


def describe_array(a: np.ndarray) -> str:
    """``"float64 array of shape (4,)"`` plus ``", not C-contiguous"`` / ``", read-only"``."""
    text = f"{a.dtype} array of shape {tuple(a.shape)}"
    if not a.flags.c_contiguous:
        text += ", not C-contiguous"
    if not a.flags.writeable:
        text += ", read-only"
    return text


def check_out_array(out: np.ndarray, dtype: np.dtype, nelems: int, dtype_name: str, where: str,
                    what: str = "out") -> None:
    """A host output array must be exactly ``nelems`` elements of ``dtype``, C-contiguous and writable.

    Raises:
        ConfigError: naming ``what`` (``out`` / ``output``), what was given and what is accepted.
    """
    f = out.flags
    if out.dtype == dtype and out.size == nelems and f.c_contiguous and f.writeable:
        return
    raise ConfigError(f"{where}: {what}= must be a writable C-contiguous array of {nelems} {dtype_name} elements "
                      f"(numpy dtype {np.dtype(dtype)}); got a {describe_array(out)}"
                      + (" (the bytes would be reinterpreted)" if out.dtype != dtype else ""), key=what)
