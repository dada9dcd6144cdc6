"""The operands of an aclnn call: how numpy arrays, torch tensors, device buffers and views of
them become ``aclTensor`` views over device memory (staged through pooled blocks) and come back.

Shared by the operators' invoker (:mod:`.invoker`) and the built-in collectives (:mod:`.builtin`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..base.errors import ConfigError
from ..core.device import _D2H, _H2D, DeviceBuffer, Stream, host_ptr
from .pool import Block, WorkspacePool, stream_pool

__all__ = ["DeviceView"]

_SPAN_FACTOR = 4              # a host view spanning more than 4x its bytes is staged compacted


@dataclass(frozen=True)
class DeviceView:
    """A view of device memory for :func:`invoke`: ``shape`` with ``strides`` (elements; None =
    C-contiguous) starting ``offset`` elements into ``buffer``.

    Example: column 1 of a ``[n, 2]`` DeviceBuffer ``m``: ``DeviceView(m, (n,), (2,), 1)``.
    """

    buffer: DeviceBuffer
    shape: Sequence[int]
    strides: Sequence[int] | None = None
    offset: int = 0


class _Operand:
    """One tensor of a call: the aclTensor's view over device memory, and how a host array gets
    there and back."""

    __slots__ = ("ptr", "shape", "strides", "offset", "storage", "host", "span", "block")

    def __init__(self) -> None:
        self.ptr, self.shape, self.strides, self.offset, self.storage = 0, (), None, 0, None
        self.host: np.ndarray | None = None  # the host array this operand stages (None: device memory)
        self.span = 0                        # bytes of the host array's span staged
        self.block: Block | None = None


def _span(a: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """(bytes spanned, element strides) of a host view that can be staged as it is (non-negative
    strides in whole elements, not much sparser than its elements); None: compact it instead."""
    item = a.itemsize
    if a.size == 0 or any(st < 0 or st % item for st in a.strides):
        return None
    strides = tuple(st // item for st in a.strides)
    span = (1 + sum((n - 1) * st for n, st in zip(a.shape, strides))) * item
    return (span, strides) if span <= _SPAN_FACTOR * a.nbytes + 4096 else None


def _host_operand(rt, pool: WorkspacePool, a: np.ndarray, *, read: bool, blocks: list[Block]) -> _Operand:
    """Stage host array ``a`` (any view) into a pooled block: its span as it is, with the view's
    strides in the aclTensor (copied in when ``read``), or a compact copy when the view cannot be."""
    o = _Operand()
    o.host, o.shape = a, a.shape
    if a.flags.c_contiguous or _span(a) is None:
        o.span = a.nbytes
        src = np.ascontiguousarray(a) if read else None
    else:
        o.span, o.strides = _span(a)
        src = None
    b = pool.acquire(o.span)
    if b is not None:
        blocks.append(b)
    o.block, o.ptr = b, (b.ptr if b else 0)
    o.storage = (o.span // a.itemsize,)
    if read and o.span:
        if src is not None:
            rt.checked.aclrtMemcpy(o.ptr, b.capacity, host_ptr(src), o.span, _H2D)
        else:  # the bytes the view spans, from its first element
            rt.checked.aclrtMemcpy(o.ptr, b.capacity, a.__array_interface__["data"][0], o.span, _H2D)
    return o


def _copy_out(rt, o: _Operand) -> None:
    """After the call: the result's elements from the device block into the host array (a view)."""
    a = o.host
    if not o.span:
        return
    if o.strides is None and a.flags.c_contiguous:
        rt.checked.aclrtMemcpy(host_ptr(a), o.span, o.ptr, o.span, _D2H)
        return
    tmp = np.empty(o.span // a.itemsize, dtype=a.dtype)
    rt.checked.aclrtMemcpy(host_ptr(tmp), o.span, o.ptr, o.span, _D2H)
    if o.strides is None:  # staged compacted
        a[...] = tmp.reshape(a.shape)
    else:
        a[...] = np.lib.stride_tricks.as_strided(tmp, a.shape, a.strides)


def _device_operand(x: "DeviceBuffer | DeviceView", dt) -> _Operand:
    o = _Operand()
    buf = x.buffer if isinstance(x, DeviceView) else x
    o.ptr = buf.address("an aclnn operand")
    o.storage = (buf.nbytes // dt.itemsize,) if isinstance(x, DeviceView) else None
    if isinstance(x, DeviceView):
        o.shape = tuple(int(v) for v in x.shape)
        o.strides = None if x.strides is None else tuple(int(v) for v in x.strides)
        o.offset = int(x.offset)
    else:
        o.shape = buf.shape
    return o


def _stream_handle(stream: "Stream | int | None", rt) -> int:
    if stream is None:
        return stream_pool(rt).get(0).handle
    return stream.handle if isinstance(stream, Stream) else int(stream)


def _check_out(a: np.ndarray, dt, nelems: int, api: str) -> None:
    """A host ``out``: ``nelems`` elements of the call's dtype, writable (any view)."""
    if a.dtype == np.dtype(dt.numpy) and a.size == nelems and a.flags.writeable:
        return
    raise ConfigError(f"{api} out: needs a writable array of {nelems} {dt.name} elements (numpy dtype "
                      f"{np.dtype(dt.numpy)}), got {a.size} x {a.dtype}{'' if a.flags.writeable else ', read-only'}",
                      key="out")


