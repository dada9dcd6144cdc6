"""The resources of a custom operator on one (communicator, op tag, stream), and its kernel lookup.

The first call of an operator on a stream acquires what its handshake scheme needs, following
``hcomm.md`` §3.7–§3.9: threads (and, for ``thread-notify``, the CPU thread exported to the AICPU
engine) or two notifies, the channels of its topology, and the engine context (AlgResourceCtx, in
device memory) the kernel reads. :class:`~hcomm_kit.ops.custom_op.CustomOp` caches one
:class:`Resources` per stream. Kernel binaries are loaded once per process (:func:`load_function`).
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

from ..base import envs
from ..base.errors import ConfigError
from ..core.device import _H2D
from ..runtime import enums, structs

__all__ = ["Resources", "load_function", "links_text", "links_down_setting"]


def links_text(topo, pairs) -> str:
    """``"HCCS link between rank 0 and rank 1"``, or ``"links 0-1 (HCCS), 2-5 (RoCE)"`` for several
    links ``(a, b)`` of ``topo``."""
    if len(pairs) == 1:
        (a, b), = pairs
        return f"{topo.link_type(a, b)} link between rank {a} and rank {b}"
    return "links " + ", ".join(f"{a}-{b} ({topo.link_type(a, b)})" for a, b in pairs)


def links_down_setting() -> str:
    """How the links were taken down, for messages: ``HCOMM_KIT_LINKS_DOWN=0-1``."""
    return f"HCOMM_KIT_LINKS_DOWN={envs.get('HCOMM_KIT_LINKS_DOWN') or ''}"

CPU_TS = int(enums.CommEngine.COMM_ENGINE_CPU_TS)
AICPU_TS = int(enums.CommEngine.COMM_ENGINE_AICPU_TS)

# Loaded binaries are per process (the device of this process): json path -> (binHandle, {kernel: func}).
_BINARIES: dict[str, tuple[int, dict[str, int]]] = {}
_BIN_LOCK = threading.Lock()


def load_function(rt, json_path: Path, kernel: str) -> int:
    key = str(json_path)
    with _BIN_LOCK:
        entry = _BINARIES.get(key)
        if entry is None:
            opts = structs.cpu_kernel_load_options(1)
            h = ctypes.c_void_p()
            rt.checked.aclrtBinaryLoadFromFile(key.encode(), ctypes.byref(opts), ctypes.byref(h))
            entry = (h.value, {})
            _BINARIES[key] = entry
        fn = entry[1].get(kernel)
        if fn is None:
            f = ctypes.c_void_p()
            rt.checked.aclrtBinaryGetFunction(entry[0], kernel.encode(), ctypes.byref(f))
            fn = entry[1][kernel] = f.value
        return fn


class Resources:
    """Threads, notifies, channels, buffers and the engine context of one (comm, op tag, stream)."""

    def __init__(self, comm, spec, tag: str, stream: int) -> None:
        rt = comm.rt
        hc = rt.checked
        self.rt, self.comm, self.tag = rt, comm, tag
        self.notifies: list[int] = []
        self.ctx_ptr = 0
        comm_h = comm.handle
        rank, size = comm.rank, comm.size
        # Peers behind a downed link (HCOMM_KIT_LINKS_DOWN) get no channel: their channels[] entry
        # keeps handle 0 (remoteRank still names the peer) and the operator routes around them (the
        # rank graph reports no link). A ring is laid out around them (ring_order = "avoid-down"), or
        # every rank refuses the call here, before acquiring anything, naming the link (a ring in
        # rank order across it).
        down_links = self._links_down()
        peers = spec.channel_peers(rank, size, down_links)
        rings = spec.ring_layout(size, down_links)
        ctx = spec.resctx_struct()()
        nthreads = spec.thread_count(size)
        slots = spec.thread_notify_slots
        threads = (ctypes.c_uint64 * nthreads)()
        self.cpu_thread = 0
        self.aicpu_on_cpu = 0
        if spec.handshake == "thread-notify":
            cpu, cpu_on_ai, ai_on_cpu = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
            hc.HcclThreadAcquireWithStream(comm_h, CPU_TS, stream, 1, ctypes.byref(cpu))
            hc.HcclThreadExportToCommEngine(comm_h, 1, ctypes.byref(cpu), AICPU_TS, ctypes.byref(cpu_on_ai))
            hc.HcclThreadAcquire(comm_h, AICPU_TS, nthreads, slots, threads)
            hc.HcclThreadExportToCommEngine(comm_h, 1, threads, CPU_TS, ctypes.byref(ai_on_cpu))
            self.cpu_thread, self.aicpu_on_cpu = cpu.value, ai_on_cpu.value
            ctx.cpuThreadOnAicpu = cpu_on_ai.value
        else:
            for i in range(2):
                n, nid = ctypes.c_void_p(), ctypes.c_uint32()
                hc.aclrtCreateNotify(ctypes.byref(n), int(enums.NotifyFlag.ACL_NOTIFY_DEFAULT))
                self.notifies.append(n.value)
                hc.aclrtGetNotifyId(n.value, ctypes.byref(nid))
                ctx.notifyIds[i] = nid.value
            hc.HcclThreadAcquire(comm_h, AICPU_TS, nthreads, slots, threads)
        ctx.aicpuThread = threads[0]
        ctypes.memmove(ctx.threads, threads, ctypes.sizeof(threads))
        ctx.rank, ctx.rankSize = rank, size
        ctx.threadNum = nthreads
        ctx.channelNum = spec.channel_num(size, down_links)
        if spec.topology == "ring":
            self._fill_rings(ctx, spec, rings)
        if spec.link_map:
            down_set = set(down_links)
            for a in range(size):
                ctx.linkUp[a] = sum(1 << b for b in range(size) if b != a and (min(a, b), max(a, b)) not in down_set)
        ctx.notifyNumPerThread = slots
        buf, bsize = ctypes.c_void_p(), ctypes.c_uint64()
        hc.HcclGetHcclBuffer(comm_h, ctypes.byref(buf), ctypes.byref(bsize))
        ctx.localBuffer.addr, ctx.localBuffer.size = buf.value, bsize.value
        self.hccl_buffer_size = bsize.value
        self.ctx = ctx  # host copy of the engine context (op.resources(...).ctx)
        down = {b if a == rank else a for a, b in down_links if rank in (a, b)}
        for i, p in peers:
            ctx.channels[i].remoteRank = p
        self.acquire_channels([(i, p) for i, p in peers if p not in down], spec.channel_notifies)
        # Engine context: device memory the kernel reads through OpParam.resCtx.
        p, psize = ctypes.c_void_p(), ctypes.c_uint64()
        tag_b = tag.encode()
        if rt.hccl.HcclEngineCtxGet(comm_h, tag_b, AICPU_TS, ctypes.byref(p), ctypes.byref(psize)) != 0 \
                or psize.value < ctypes.sizeof(ctx):
            rt.recent_error_message()  # clear the expected "not found" text
            if p.value:
                rt.hccl.HcclEngineCtxDestroy(comm_h, tag_b, AICPU_TS)
            hc.HcclEngineCtxCreate(comm_h, tag_b, AICPU_TS, ctypes.sizeof(ctx), ctypes.byref(p))
        self.ctx_ptr = p.value
        self.push_ctx()

    def push_ctx(self) -> None:
        """Copy the host copy of AlgResourceCtx to the engine context (device memory)."""
        ctx = self.ctx
        self.rt.checked.aclrtMemcpy(self.ctx_ptr, ctypes.sizeof(ctx), ctypes.byref(ctx), ctypes.sizeof(ctx), _H2D)

    def _links_down(self) -> tuple[tuple[int, int], ...]:
        """The links taken down in this communicator (the emulator's topology; none on CANN)."""
        comm = self.comm
        if not hasattr(comm, "topology"):
            return ()
        return tuple(comm.topology.links_down)

    def _fill_rings(self, ctx, spec, rings: list[tuple[int, ...]]) -> None:
        """``AlgResourceCtx.ringNum``, ``ringOrder`` and ``rings[]`` of a ring topology."""
        from ..build.rings import RING_ORDERS

        me = self.comm.rank
        ctx.ringNum = len(rings)
        ctx.ringOrder = RING_ORDERS.index(spec.ring_order)
        for k, ring in enumerate(rings):
            info, pos, n = ctx.rings[k], ring.index(me), len(ring)
            info.pos, info.prev, info.next = pos, ring[pos - 1], ring[(pos + 1) % n]
            for i, r in enumerate(ring):
                info.order[i] = r

    def acquire_channels(self, peers: list[tuple[int, int]], notifies: int) -> None:
        """Acquire channels ``[(index in channels[], peer rank), ...]`` and fill their ChannelInfo.

        Collective between this rank and each listed peer (HcclChannelAcquire).
        """
        if not peers:
            return
        comm, hc = self.comm, self.rt.checked
        ctx = self.ctx
        proto = (enums.CommProtocol.COMM_PROTOCOL_UB_CTP if comm.device.is_950
                 else enums.CommProtocol.COMM_PROTOCOL_HCCS)
        descs = (structs.HcclChannelDesc * len(peers))()
        structs.channel_desc_init(descs)
        topo = comm.topology if hasattr(comm, "topology") else None
        for d, (_, peer) in zip(descs, peers):
            d.remoteRank = peer
            # a peer on another server (another super-pod) is reached over RoCE
            remote = topo is not None and topo.link_type(comm.rank, peer) == "RoCE"
            d.channelProtocol = int(enums.CommProtocol.COMM_PROTOCOL_ROCE if remote else proto)
            d.notifyNum = notifies
        handles = (ctypes.c_uint64 * len(peers))()
        hc.HcclChannelAcquire(comm.handle, AICPU_TS, descs, len(peers), handles)
        for (idx, peer), h in zip(peers, handles):
            ch = ctx.channels[idx]
            ch.remoteRank, ch.notifyNum, ch.handle = peer, notifies, h
            rb, rs = ctypes.c_void_p(), ctypes.c_uint64()
            hc.HcclChannelGetHcclBuffer(comm.handle, h, ctypes.byref(rb), ctypes.byref(rs))
            ch.remoteBuffer.addr, ch.remoteBuffer.size = rb.value, rs.value

    def ensure_peer(self, peer: int, notifies: int) -> None:
        """``peer`` topology: acquire the channel to ``peer`` on first use and publish it."""
        if peer != self.comm.rank and not self.ctx.channels[peer].handle:
            topo = getattr(self.comm, "topology", None)
            pair = (min(peer, self.comm.rank), max(peer, self.comm.rank))
            if topo is not None and pair in topo.links_down:  # both ends see it: both fail at once
                raise ConfigError(f"rank {self.comm.rank}: the channel to rank {peer} needs the "
                                  f"{links_text(topo, [pair])}, which is down ({links_down_setting()})",
                                  key="root")
            self.acquire_channels([(peer, peer)], notifies)
            self.push_ctx()

    def close(self) -> None:
        rt = self.rt
        for n in self.notifies:
            rt.acl.aclrtDestroyNotify(n)
        self.notifies = []
        if self.ctx_ptr and self.comm.handle:
            rt.hccl.HcclEngineCtxDestroy(self.comm.handle, self.tag.encode(), AICPU_TS)
        self.ctx_ptr = 0
