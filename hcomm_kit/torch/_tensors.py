"""torch tensors as operands of the hcomm-kit collectives, without copies where the layout allows.

A contiguous CPU tensor is handed to the kernel **by pointer**: the tensor's storage is registered
with the runtime as device-accessible host memory (``aclrtHostRegister(..., MAPPED)``) for the
duration of one collective, and a non-owning :class:`~hcomm_kit.core.device.DeviceBuffer` view of
the returned device address is passed to ``comm.all_reduce`` & co., so the kernel reads and writes
the tensor's own memory. Registration is per storage and reference counted (views of one storage,
e.g. FSDP's all-gather input inside its output, share one registration) and process-wide (several
process groups may use the same storage at once).

When the runtime cannot register the memory (a CANN without ``aclrtHostRegister``, a range it
refuses), the tensor goes through the collectives' staging path instead: a numpy view of the
tensor, copied into pooled device buffers and back (one copy each way).

A non-contiguous tensor is copied to a contiguous temporary and, for outputs, copied back; for an
operator run through its aclnn interface (:meth:`Operands.view`) it is passed as the view it is
(shape, strides, storage offset over its registered storage) and the operator stages it.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import torch

from ..base import dtypes as _dtypes
from ..core.device import DeviceBuffer

__all__ = ["hk_dtype", "Operands", "registration_stats"]

# torch dtype -> (hcomm-kit dtype name, torch dtype of the numpy view used by the staging path).
_DTYPES: dict[torch.dtype, tuple[str, torch.dtype]] = {
    torch.int8: ("int8", torch.int8),
    torch.int16: ("int16", torch.int16),
    torch.int32: ("int32", torch.int32),
    torch.int64: ("int64", torch.int64),
    torch.uint8: ("uint8", torch.uint8),
    torch.uint16: ("uint16", torch.uint16),
    torch.uint32: ("uint32", torch.uint32),
    torch.uint64: ("uint64", torch.uint64),
    torch.float16: ("fp16", torch.float16),
    torch.bfloat16: ("bf16", torch.uint16),   # numpy has no bfloat16: uint16 bit patterns
    torch.float32: ("fp32", torch.float32),
    torch.float64: ("fp64", torch.float64),
    torch.bool: ("uint8", torch.uint8),       # data movement only (reductions refuse bool)
}
_MAPPED = 0  # ACL_HOST_REGISTER_MAPPED


def hk_dtype(dtype: torch.dtype, what: str) -> "_dtypes.DType":
    """The hcomm-kit dtype row of a torch dtype.

    Raises:
        TypeError: a dtype the collectives cannot carry (names it and lists the supported ones).
    """
    row = _DTYPES.get(dtype)
    if row is None:
        names = ", ".join(str(d).replace("torch.", "") for d in _DTYPES)
        raise TypeError(f"hcomm: {what} does not support tensors of {dtype}; supported dtypes: {names}")
    return _dtypes.get_dtype(row[0])


class _Registry:
    """Process-wide, reference-counted host registrations: storage base -> [device base, bytes, refs]."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: dict[int, list[int]] = {}
        self.registered = 0      # storages registered (statistics for tests and benchmarks)
        self.staged = 0          # tensors that fell back to staging copies
        self.disabled_reason = ""

    def acquire(self, rt: Any, base: int, nbytes: int) -> int | None:
        """Device address of ``[base, base + nbytes)``, registering it on first use; None if refused."""
        with self._lock:
            entry = self._live.get(base)
            if entry is not None:
                if entry[1] >= nbytes:
                    entry[2] += 1
                    return entry[0]
                return None  # the same base with a larger size while in use: not a storage we know
            if self.disabled_reason or not rt.has("aclrtHostRegister"):
                self.disabled_reason = self.disabled_reason or "the runtime has no aclrtHostRegister"
                return None
            dev = ctypes.c_void_p()
            ret = rt.acl.aclrtHostRegister(base, nbytes, _MAPPED, ctypes.byref(dev))
            if ret != 0 or not dev.value:
                rt.recent_error_message()  # consume the message: this is handled by staging
                return None
            self._live[base] = [dev.value, nbytes, 1]
            self.registered += 1
            return dev.value

    def release(self, rt: Any, base: int) -> None:
        with self._lock:
            entry = self._live.get(base)
            if entry is None:
                return
            entry[2] -= 1
            if entry[2] == 0:
                del self._live[base]
                if rt.acl.aclrtHostUnregister(base) != 0:
                    rt.recent_error_message()

    def live(self) -> int:
        with self._lock:
            return len(self._live)


_REGISTRY = _Registry()


def registration_stats() -> dict[str, int]:
    """Counters of the zero-copy path: storages registered, tensors staged, registrations live now."""
    return {"registered": _REGISTRY.registered, "staged": _REGISTRY.staged, "live": _REGISTRY.live()}


class Operands:
    """Turns the tensors of one collective into operands; a context manager that releases them.

    ``operand(t)`` returns a DeviceBuffer on the tensor's own memory (registered) or a numpy view
    of it (staged by the collectives). ``contiguous(t, write=...)`` handles non-contiguous tensors
    (a temporary that is copied back into ``t`` on a clean exit when ``write``).
    """

    def __init__(self, rt: Any, zero_copy: bool = True) -> None:
        self.rt = rt
        self.zero_copy = zero_copy
        self._held: list[int] = []
        self._writeback: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._keep: list[torch.Tensor] = []  # operands (temporaries too) alive until the kernel finished

    def __enter__(self) -> "Operands":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                for dst, src in self._writeback:
                    dst.copy_(src)
        finally:
            for base in self._held:
                _REGISTRY.release(self.rt, base)
            self._held.clear()
            self._writeback.clear()
            self._keep.clear()

    def contiguous(self, t: torch.Tensor, *, write: bool) -> torch.Tensor:
        """``t`` itself when contiguous, else a contiguous copy (copied back into ``t`` if ``write``)."""
        if t.is_contiguous():
            return t
        tmp = t.contiguous()
        if write:
            self._writeback.append((t, tmp))
        return tmp

    def view(self, t: torch.Tensor, dt: "_dtypes.DType") -> Any:
        """``t`` as the view it is, for :func:`hcomm_kit.aclnn.invoke`: a DeviceView over its registered
        storage with its shape, strides and storage offset, or a (strided) numpy view to stage."""
        from ..aclnn.operands import DeviceView

        self._keep.append(t)
        if self.zero_copy and t.numel():
            storage = t.untyped_storage()
            base = storage.data_ptr()
            dev = _REGISTRY.acquire(self.rt, base, storage.nbytes())
            if dev is not None:
                self._held.append(base)
                elems = storage.nbytes() // t.element_size()
                buf = DeviceBuffer(self.rt, dev, storage.nbytes(), (elems,), dt, owned=False)
                return DeviceView(buf, tuple(t.shape), tuple(t.stride()), t.storage_offset())
        if t.numel():
            _REGISTRY.staged += 1
        view_dtype = _DTYPES[t.dtype][1]
        d = t.detach()
        return (d.view(view_dtype) if view_dtype != t.dtype else d).numpy()

    def operand(self, t: torch.Tensor, dt: "_dtypes.DType") -> Any:
        """A DeviceBuffer on ``t``'s memory, or a numpy view for the staging path (``t`` contiguous)."""
        n = t.numel()
        self._keep.append(t)
        if self.zero_copy and n:
            storage = t.untyped_storage()
            base = storage.data_ptr()
            dev = _REGISTRY.acquire(self.rt, base, storage.nbytes())
            if dev is not None:
                self._held.append(base)
                ptr = dev + (t.data_ptr() - base)
                return DeviceBuffer(self.rt, ptr, n * dt.itemsize, (n,), dt, owned=False)
        if n:
            _REGISTRY.staged += 1
        view_dtype = _DTYPES[t.dtype][1]
        flat = t.detach().reshape(-1)
        return (flat.view(view_dtype) if view_dtype != t.dtype else flat).numpy()
