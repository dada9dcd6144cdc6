"""Host-side device objects: the current device, streams, events and device buffers.

Everything here is a thin owner of one runtime handle (freed on ``close()`` or garbage
collection) so the hot paths of :mod:`hcomm_kit.ops.custom_op` can keep raw pointers and call the
pre-bound ctypes functions directly.

Example::

    dev = Device.current()                 # aclInit + aclrtSetDevice done by hcomm_kit.init()
    buf = DeviceBuffer.empty(1024, "fp32")
    buf.copy_from(np.arange(1024, dtype=np.float32))
    host = buf.numpy()
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError, HcommKitError
from ..runtime import enums

__all__ = ["Device", "Stream", "Event", "DeviceBuffer", "BufferPool", "as_host_array", "host_ptr", "soc_dev_type"]

_H2D = int(enums.MemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE)
_D2H = int(enums.MemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST)
_D2D = int(enums.MemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE)
_MALLOC_HUGE_FIRST = 0  # ACL_MEM_MALLOC_HUGE_FIRST


def soc_dev_type(soc: str) -> int:
    """``OpParam.devType`` for a SoC name: 0 A2 (Ascend910B*), 1 A3 (Ascend910_93), 2 A5 (Ascend950*)."""
    if soc.startswith("Ascend950"):
        return 2
    if soc.startswith("Ascend910_93"):
        return 1
    return 0


def _rt():
    from .. import runtime

    rt = runtime.loaded()
    if rt is None:
        rt = runtime.load()
    return rt


class Device:
    """The device this process uses (one per rank): id, SoC name and product class."""

    _current: "Device | None" = None
    _lock = threading.Lock()

    def __init__(self, rt, device_id: int) -> None:
        self.rt = rt
        self.id = int(device_id)
        self.soc = rt.soc_name() or "Ascend910B"
        self.dev_type = soc_dev_type(self.soc)

    @property
    def is_950(self) -> bool:
        return self.dev_type == 2

    @classmethod
    def open(cls, rt, local_rank: int) -> "Device":
        """``aclInit`` (repeated init is harmless) and ``aclrtSetDevice(local_rank % count)``."""
        with cls._lock:
            if cls._current is not None:
                return cls._current
            rt.checked.aclInit(None)
            n = ctypes.c_uint32(0)
            rt.checked.aclrtGetDeviceCount(ctypes.byref(n))
            dev_id = local_rank % max(1, n.value)
            rt.checked.aclrtSetDevice(dev_id)
            cls._current = cls(rt, dev_id)
            return cls._current

    @classmethod
    def current(cls) -> "Device":
        if cls._current is None:
            raise HcommKitError("no device is open yet: call hcomm_kit.init() first")
        return cls._current

    def __repr__(self) -> str:
        return f"<Device {self.id} {self.soc}>"


class Stream:
    """An ``aclrtStream`` owned by Python (destroyed on :meth:`close`)."""

    def __init__(self, rt=None, handle: int | None = None) -> None:
        self.rt = rt or _rt()
        if handle is None:
            h = ctypes.c_void_p()
            self.rt.checked.aclrtCreateStream(ctypes.byref(h))
            self.handle = h.value
            self._owned = True
        else:
            self.handle = handle
            self._owned = False

    def synchronize(self) -> None:
        self.rt.checked.aclrtSynchronizeStream(self.handle)

    def close(self) -> None:
        if self._owned and self.handle:
            self.rt.acl.aclrtDestroyStream(self.handle)
        self.handle = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<Stream 0x{self.handle or 0:x}>"


class Event:
    """An ``aclrtEvent``: :meth:`record` on a stream, then :meth:`query` / :meth:`synchronize`."""

    def __init__(self, rt=None) -> None:
        self.rt = rt or _rt()
        h = ctypes.c_void_p()
        self.rt.checked.aclrtCreateEvent(ctypes.byref(h))
        self.handle = h.value
        self._status = ctypes.c_int(0)

    def record(self, stream: Stream | int) -> None:
        s = stream.handle if isinstance(stream, Stream) else stream
        self.rt.checked.aclrtRecordEvent(self.handle, s)

    def query(self) -> bool:
        """True when every task before the record has run (``aclrtQueryEventStatus``)."""
        self.rt.checked.aclrtQueryEventStatus(self.handle, ctypes.byref(self._status))
        return self._status.value == int(enums.EventRecordedStatus.ACL_EVENT_RECORDED_STATUS_COMPLETE)

    def synchronize(self) -> None:
        self.rt.checked.aclrtSynchronizeEvent(self.handle)

    def close(self) -> None:
        if self.handle:
            self.rt.acl.aclrtDestroyEvent(self.handle)
        self.handle = None

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass


class DeviceBuffer:
    """Device memory holding ``size`` elements of ``dtype`` (1-D unless ``shape`` says otherwise).

    Attributes:
        ptr: the device address (int).
        nbytes: bytes in use (``size * itemsize``); ``capacity`` >= nbytes is what was allocated.
        dtype: the :class:`~hcomm_kit.base.dtypes.DType` row.
        shape: numpy-style shape.

    Create with :meth:`empty` / :meth:`from_numpy` or ``comm.empty(shape, dtype)``.
    """

    __slots__ = ("rt", "ptr", "capacity", "nbytes", "dtype", "shape", "_owned", "__weakref__")

    def __init__(self, rt, ptr: int, capacity: int, shape: tuple[int, ...], dtype, *, owned: bool = True) -> None:
        self.rt = rt
        self.ptr = ptr
        self.capacity = capacity
        self.dtype = _dtypes.get_dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._owned = owned

    # ---- creation --------------------------------------------------------------------------
    @classmethod
    def empty(cls, shape: "int | tuple[int, ...]", dtype: Any = "fp32", *, rt=None) -> "DeviceBuffer":
        """Allocate uninitialised device memory (``aclrtMalloc``)."""
        rt = rt or _rt()
        shape = (int(shape),) if np.isscalar(shape) else tuple(int(s) for s in shape)
        dt = _dtypes.get_dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        return cls(rt, _malloc(rt, nbytes), max(1, nbytes), shape, dt)

    @classmethod
    def from_numpy(cls, array: Any, dtype: Any = None, *, rt=None) -> "DeviceBuffer":
        """Allocate and fill from a host array (``dtype`` overrides, e.g. ``"bf16"`` for uint16 bits)."""
        arr = as_host_array(array)
        dt = _dtypes.get_dtype(dtype if dtype is not None else arr.dtype)
        buf = cls.empty(arr.shape, dt, rt=rt)
        buf.copy_from(arr)
        return buf

    # ---- state -----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once :meth:`close` has freed (or let go of) the memory."""
        return not self.ptr

    def address(self, what: str = "the device buffer") -> int:
        """The device address, for a call that hands it on; ConfigError naming ``what`` when the
        buffer was closed (its memory is freed: a kernel given its old address would fail late, or
        read memory reused by another allocation)."""
        if not self.ptr:
            raise ConfigError(f"{what} is a closed DeviceBuffer (shape {self.shape}, {self.dtype.name}): close() "
                              "freed its memory; pass a live buffer", key="buffer")
        return self.ptr

    # ---- data movement ---------------------------------------------------------------------
    def copy_from(self, array: Any) -> "DeviceBuffer":
        """Copy a host array (same byte size or smaller) into this buffer (synchronous H2D)."""
        self.address("copy_from: the destination")
        arr = np.ascontiguousarray(as_host_array(array))
        if arr.nbytes > self.capacity:
            raise ConfigError(f"host array of {arr.nbytes} bytes does not fit the device buffer of "
                              f"{self.capacity} bytes", key="array")
        if arr.nbytes:
            self.rt.checked.aclrtMemcpy(self.ptr, self.capacity, host_ptr(arr), arr.nbytes, _H2D)
        return self

    def numpy(self, out: np.ndarray | None = None) -> np.ndarray:
        """Copy to the host (synchronous D2H). bf16 comes back as uint16 bit patterns."""
        if out is None:
            out = np.empty(self.shape, dtype=self.dtype.numpy)
        elif out.nbytes < self.nbytes or not out.flags.c_contiguous:
            raise ConfigError(f"output array must be C-contiguous with >= {self.nbytes} bytes", key="out")
        self.address("numpy(): the source")
        if self.nbytes:
            self.rt.checked.aclrtMemcpy(host_ptr(out), out.nbytes, self.ptr, self.nbytes, _D2H)
        return out

    def fill_zero(self) -> "DeviceBuffer":
        """Set every byte to 0 (synchronous)."""
        self.address("fill_zero(): the buffer")
        if self.nbytes:
            self.rt.checked.aclrtMemset(self.ptr, self.capacity, 0, self.nbytes)
        return self

    @property
    def size(self) -> int:
        """Elements (``nbytes`` over the dtype's size)."""
        return self.nbytes // self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def view(self, shape: "int | tuple[int, ...]", dtype: Any = None) -> "DeviceBuffer":
        """A non-owning view of the same memory with another shape/dtype (must fit)."""
        shape = (int(shape),) if np.isscalar(shape) else tuple(shape)
        v = DeviceBuffer(self.rt, self.address("view(): the buffer"), self.capacity, shape, dtype or self.dtype,
                         owned=False)
        if v.nbytes > self.capacity:
            raise ConfigError(f"view of {v.nbytes} bytes exceeds the buffer's {self.capacity} bytes", key="shape")
        return v

    def close(self) -> None:
        """Free the memory now (also done on garbage collection)."""
        if self._owned and self.ptr:
            self.rt.acl.aclrtFree(self.ptr)
        self.ptr = 0

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<DeviceBuffer 0x{self.ptr:x} shape={self.shape} dtype={self.dtype.name}>"


def _malloc(rt, nbytes: int) -> int:
    p = ctypes.c_void_p()
    rt.checked.aclrtMalloc(ctypes.byref(p), max(1, int(nbytes)), _MALLOC_HUGE_FIRST)
    return p.value


class BufferPool:
    """Grow-only device scratch buffers reused across calls, one per role (``"in"``, ``"out"``).

    ``get(role, nbytes)`` returns the device pointer of a buffer of at least ``nbytes``; a larger
    request frees the old buffer and allocates the next power of two (at least 4 KiB).
    """

    __slots__ = ("rt", "_ptr", "_cap")

    def __init__(self, rt) -> None:
        self.rt = rt
        self._ptr: dict[str, int] = {}
        self._cap: dict[str, int] = {}

    def get(self, role: str, nbytes: int) -> tuple[int, int]:
        """``(ptr, capacity)`` of the ``role`` buffer with room for ``nbytes``."""
        cap = self._cap.get(role, -1)
        if nbytes <= cap:
            return self._ptr[role], cap
        old = self._ptr.pop(role, 0)
        if old:
            self.rt.acl.aclrtFree(old)
        cap = max(4096, 1 << (max(1, nbytes) - 1).bit_length())
        self._ptr[role] = _malloc(self.rt, cap)
        self._cap[role] = cap
        return self._ptr[role], cap

    def close(self) -> None:
        for p in self._ptr.values():
            if p:
                self.rt.acl.aclrtFree(p)
        self._ptr.clear()
        self._cap.clear()


_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def host_ptr(arr: np.ndarray) -> int:
    """Address of a C-contiguous array's first byte (hot path: a writable buffer export costs a
    third of ``__array_interface__``, which builds a dict on every access)."""
    try:
        return _addressof(_from_buffer(arr))
    except (TypeError, ValueError, BufferError):  # read-only or empty
        return arr.__array_interface__["data"][0]


def as_host_array(obj: Any) -> np.ndarray:
    """A numpy view of ``obj``: ndarray as is, else DLPack (CPU), ``__array__``, or the buffer protocol.

    Raises:
        ConfigError: the object is none of those (with what is accepted).
    """
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__"):
        try:
            return np.from_dlpack(obj)
        except (TypeError, RuntimeError, BufferError, ValueError):
            pass  # e.g. a device tensor or unsupported dtype: try the other protocols
    if hasattr(obj, "__array__") or hasattr(obj, "__array_interface__"):
        return np.asarray(obj)
    try:
        return np.asarray(memoryview(obj))
    except TypeError:
        raise ConfigError(f"cannot use an object of type {type(obj).__name__} as operator data: pass a numpy "
                          f"array, a DeviceBuffer (comm.empty / DeviceBuffer.from_numpy), or an object with "
                          f"DLPack (__dlpack__) or the buffer protocol", key="input") from None
