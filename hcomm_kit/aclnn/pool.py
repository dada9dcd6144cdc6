"""Per-device memory and stream pools of the aclnn invoker.

:class:`WorkspacePool` hands out device blocks (workspaces, staging of host arrays): sizes are
rounded up to a power of two of at least :data:`MIN_BLOCK` bytes and start on an
:data:`ALIGN`-byte boundary (allocated with that much slack), a released block is
reused by the next request it fits, nothing is freed until :meth:`WorkspacePool.close`.
``pool.size`` is the device memory it holds, ``pool.in_use`` what is handed out.
"""

from __future__ import annotations

import ctypes
import threading

from ..core.device import Stream, _malloc

__all__ = ["ALIGN", "MIN_BLOCK", "Block", "WorkspacePool", "StreamPool", "workspace_pool", "stream_pool", "close_pools"]

ALIGN = 512       # bytes; CANN's workspace alignment for aclnn operators
MIN_BLOCK = 4096  # bytes


class Block:
    """A device block of ``capacity`` bytes at ``ptr`` (handed out by a pool until released)."""

    __slots__ = ("ptr", "capacity", "raw")

    def __init__(self, raw: int, capacity: int) -> None:
        self.raw = raw                                  # what aclrtMalloc returned (freed at close)
        self.ptr = (raw + ALIGN - 1) // ALIGN * ALIGN   # ALIGN-aligned start
        self.capacity = capacity

    def __repr__(self) -> str:
        return f"<Block 0x{self.ptr:x} {self.capacity} B>"


class WorkspacePool:
    """Device memory blocks of one device, reused across calls (thread-safe)."""

    def __init__(self, rt, device_id: int) -> None:
        self.rt, self.device_id = rt, device_id
        self._free: list[Block] = []
        self._all: list[Block] = []
        self._lock = threading.Lock()
        self.in_use = 0
        self.allocations = 0  # aclrtMalloc calls made (tests: no growth once warm)

    @property
    def size(self) -> int:
        """Bytes of device memory the pool holds (free and handed out)."""
        return sum(b.capacity for b in self._all)

    def acquire(self, nbytes: int) -> Block | None:
        """A block of at least ``nbytes`` (None for 0 bytes)."""
        if nbytes <= 0:
            return None
        with self._lock:
            fits = [b for b in self._free if b.capacity >= nbytes]
            if fits:
                b = min(fits, key=lambda x: x.capacity)
                self._free.remove(b)
            else:
                cap = max(MIN_BLOCK, 1 << (int(nbytes) - 1).bit_length())
                b = Block(_malloc(self.rt, cap + ALIGN), cap)  # room to align the start
                self._all.append(b)
                self.allocations += 1
            self.in_use += b.capacity
            return b

    def release(self, block: Block | None) -> None:
        """Give a block back (after the work that used it has completed)."""
        if block is None:
            return
        with self._lock:
            self.in_use -= block.capacity
            self._free.append(block)

    def close(self) -> None:
        """Free every block (call when no work using them is pending)."""
        with self._lock:
            for b in self._all:
                self.rt.acl.aclrtFree(ctypes.c_void_p(b.raw))
            self._all.clear()
            self._free.clear()
            self.in_use = 0

    def __repr__(self) -> str:
        return f"<WorkspacePool device {self.device_id}: {self.size} B, {self.in_use} B in use>"


class StreamPool:
    """Streams of one device created on first use: ``get(i)`` is the i-th (independent calls on
    different streams overlap)."""

    def __init__(self, rt) -> None:
        self.rt = rt
        self._streams: list[Stream] = []
        self._lock = threading.Lock()

    def get(self, index: int = 0) -> Stream:
        """The pool's stream ``index`` of this device (created on first use; 0 is the default of ``invoke``)."""
        with self._lock:
            while len(self._streams) <= index:
                self._streams.append(Stream(self.rt))
            return self._streams[index]

    def close(self) -> None:
        """Destroy every stream of the pool (when no work on them is pending)."""
        with self._lock:
            for s in self._streams:
                s.close()
            self._streams.clear()


_POOLS: dict[tuple[int, int], WorkspacePool] = {}
_STREAMS: dict[tuple[int, int], StreamPool] = {}


def _device_id(rt) -> int:
    d = ctypes.c_int32(0)
    rt.checked.aclrtGetDevice(ctypes.byref(d))
    return d.value


def workspace_pool(rt) -> WorkspacePool:
    """The workspace pool of the calling thread's current device."""
    key = (id(rt), _device_id(rt))
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS[key] = WorkspacePool(rt, key[1])
    return pool


def stream_pool(rt) -> StreamPool:
    """The stream pool of the calling thread's current device."""
    key = (id(rt), _device_id(rt))
    pool = _STREAMS.get(key)
    if pool is None:
        pool = _STREAMS[key] = StreamPool(rt)
    return pool


def close_pools() -> None:
    """Free every pool's memory and streams (before closing the communicator / aclFinalize)."""
    for p in list(_POOLS.values()):
        p.close()
    _POOLS.clear()
    for s in list(_STREAMS.values()):
        s.close()
    _STREAMS.clear()
