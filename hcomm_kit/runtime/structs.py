"""ctypes mirrors of every C struct/union layout in ``acl_runtime.md`` §2.2–§2.4 and
``hcomm.md`` §2.3–§2.5 (LP64), plus Python equivalents of the header-inline initialisers
(``HcclChannelDescInit``, ``ThreadConfigInit``, ``EndpointDescInit``, ``CommLinkInit``,
``HcclKernelLaunchCfgInit``, ``HcclCommConfigInit``) and small builders for launch configs and
binary-load options.

Anonymous C unions/structs are modelled with ``_anonymous_`` so that field access reads like C
(``desc.roceAttr.tc``, ``endpoint.raws``, ``link.linkAttr.linkProtocol``). Every layout listed in
:data:`LAYOUTS` is checked against the emulator's headers by ``tests/test_runtime_layout.py``.
"""

from __future__ import annotations

import ctypes
from ctypes import (
    POINTER, Structure, Union, c_char, c_int, c_int32, c_size_t, c_uint8, c_uint16, c_uint32,
    c_uint64, c_void_p,
)
from typing import Iterable, Iterator

from . import enums

__all__ = [
    # ACL
    "aclrtTimeoutUs", "aclrtLaunchKernelAttrValue", "aclrtLaunchKernelAttr", "aclrtLaunchKernelCfg",
    "aclrtPlaceHolderInfo", "aclrtBinaryLoadOptionValue", "aclrtBinaryLoadOption",
    "aclrtBinaryLoadOptions",
    # HCCL / Hcomm
    "HcclRootInfo", "HcclSendRecvItem", "HcclCommConfig", "CommAbiHeader", "CommMem", "ThreadConfig",
    "CommAddr",
    "EndpointLoc", "EndpointDesc", "HcclChannelDesc", "CommLink", "HcommBatchTransferDesc",
    "HcclKernelFuncInfo", "HcclKernelLaunchCfg", "HcclOpDesc",
    # hcomm-kit emulator extension
    "HcommKitStreamCall",
    # helpers
    "launch_cfg", "cpu_kernel_load_options", "endpoint_desc_init", "channel_desc_init",
    "thread_config_init", "comm_link_init", "kernel_launch_cfg_init", "op_desc_init",
    "hccl_comm_config_init",
    "LAYOUTS", "iter_fields",
]


# =============================================================================================
# ACL runtime (acl/acl_rt.h)
# =============================================================================================
class aclrtTimeoutUs(Structure):
    """Microsecond launch timeout split in two 32-bit halves (8 bytes)."""
    _fields_ = [("timeoutLow", c_uint32), ("timeoutHigh", c_uint32)]


class aclrtLaunchKernelAttrValue(Union):
    """Value of one launch attribute (16 bytes, every member at offset 0)."""
    _fields_ = [
        ("schemMode", c_uint8),
        ("localMemorySize", c_uint32),
        ("dynUBufSize", c_uint32),
        ("engineType", c_int),
        ("blockDimOffset", c_uint32),
        ("isBlockTaskPrefetch", c_uint8),
        ("isDataDump", c_uint8),
        ("timeout", c_uint16),
        ("timeoutUs", aclrtTimeoutUs),
        ("enableProfiling", c_uint8),
        ("rsv", c_uint32 * 4),
    ]


class aclrtLaunchKernelAttr(Structure):
    """``{aclrtLaunchKernelAttrId id; aclrtLaunchKernelAttrValue value;}`` (20 bytes)."""
    _fields_ = [("id", c_int), ("value", aclrtLaunchKernelAttrValue)]


class aclrtLaunchKernelCfg(Structure):
    """``{aclrtLaunchKernelAttr* attrs; size_t numAttrs;}`` (16 bytes)."""
    _fields_ = [("attrs", POINTER(aclrtLaunchKernelAttr)), ("numAttrs", c_size_t)]


class aclrtPlaceHolderInfo(Structure):
    """Offsets (from the host argument blob) of a placeholder's pointer slot and its data."""
    _fields_ = [("addrOffset", c_uint32), ("dataOffset", c_uint32)]


class aclrtBinaryLoadOptionValue(Union):
    _fields_ = [
        ("isLazyLoad", c_uint32),
        ("magic", c_uint32),
        ("cpuKernelMode", c_int32),
        ("rsv", c_uint32 * 4),
    ]


class aclrtBinaryLoadOption(Structure):
    _fields_ = [("type", c_int), ("value", aclrtBinaryLoadOptionValue)]


class aclrtBinaryLoadOptions(Structure):
    _fields_ = [("options", POINTER(aclrtBinaryLoadOption)), ("numOpt", c_size_t)]


def launch_cfg(
    *,
    timeout_s: int | None = None,
    timeout_us: int | None = None,
    schem_mode: int | None = None,
    engine_type: int | None = None,
    block_dim_offset: int | None = None,
    dyn_ubuf_size: int | None = None,
) -> aclrtLaunchKernelCfg:
    """Build an ``aclrtLaunchKernelCfg`` holding the given attributes.

    The attribute array is kept alive by the returned object (attribute ``_keep``).

    Args:
        timeout_s: ``ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT`` (seconds, uint16, 0 = no limit).
        timeout_us: ``ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US`` (microseconds). Passing both timeouts
            is forwarded as is (the runtime answers 107000).
        schem_mode, engine_type, block_dim_offset, dyn_ubuf_size: the other attributes.

    Returns:
        The config; pass ``ctypes.byref(cfg)`` (or the object itself) to a launch call.

    Example:
        >>> cfg = launch_cfg(timeout_s=1836)
        >>> cfg.numAttrs, cfg.attrs[0].value.timeout
        (1, 1836)
    """
    Id = enums.LaunchKernelAttrId
    items: list[tuple[int, str, object]] = []
    if schem_mode is not None:
        items.append((Id.ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE, "schemMode", schem_mode))
    if dyn_ubuf_size is not None:
        items.append((Id.ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE, "dynUBufSize", dyn_ubuf_size))
    if engine_type is not None:
        items.append((Id.ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE, "engineType", int(engine_type)))
    if block_dim_offset is not None:
        items.append((Id.ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET, "blockDimOffset", block_dim_offset))
    if timeout_s is not None:
        if not 0 <= int(timeout_s) <= 0xFFFF:
            raise ValueError(f"timeout_s={timeout_s} does not fit the uint16 launch attribute (0..65535 s)")
        items.append((Id.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT, "timeout", int(timeout_s)))
    if timeout_us is not None:
        us = int(timeout_us)
        if not 0 <= us < 1 << 64:
            raise ValueError(f"timeout_us={timeout_us} is not a uint64")
        items.append((Id.ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US, "timeoutUs",
                      aclrtTimeoutUs(us & 0xFFFFFFFF, us >> 32)))
    arr = (aclrtLaunchKernelAttr * max(1, len(items)))()
    for i, (attr_id, member, value) in enumerate(items):
        arr[i].id = int(attr_id)
        setattr(arr[i].value, member, value)
    cfg = aclrtLaunchKernelCfg(ctypes.cast(arr, POINTER(aclrtLaunchKernelAttr)) if items else None,
                               len(items))
    cfg._keep = arr  # keep the array alive as long as the cfg
    return cfg


def cpu_kernel_load_options(cpu_kernel_mode: int = 0) -> aclrtBinaryLoadOptions:
    """``aclrtBinaryLoadOptions`` with one ``ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE`` entry.

    Args:
        cpu_kernel_mode: 0 or 1 for ``aclrtBinaryLoadFromFile``, 2 for ``aclrtBinaryLoadFromData``
            (``acl_runtime.md`` §2.5).
    """
    opt = (aclrtBinaryLoadOption * 1)()
    opt[0].type = int(enums.BinaryLoadOptionType.ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE)
    opt[0].value.cpuKernelMode = int(cpu_kernel_mode)
    opts = aclrtBinaryLoadOptions(ctypes.cast(opt, POINTER(aclrtBinaryLoadOption)), 1)
    opts._keep = opt
    return opts


# =============================================================================================
# HCCL / Hcomm
# =============================================================================================
class HcclRootInfo(Structure):
    """``HcclRootInfo`` = ``{ char internal[4108]; }`` (opaque bytes produced by HcclGetRootInfo)."""
    _fields_ = [("internal", c_char * enums.HCCL_ROOT_INFO_BYTES)]


class HcclSendRecvItem(Structure):
    """``HcclSendRecvItem`` of HcclBatchSendRecv: ``{ HcclSendRecvType sendRecvType; void* buf;
    uint64_t count; HcclDataType dataType; uint32_t remoteRank; }`` (LP64 32 bytes)."""
    _fields_ = [("sendRecvType", c_int), ("buf", c_void_p), ("count", c_uint64), ("dataType", c_int),
                ("remoteRank", c_uint32)]


class HcclCommConfig(Structure):
    """``HcclCommConfig`` as in the emulator's ``hccl_types.h`` (``HCCL_COMM_CONFIG_VERSION`` 10, 2240 bytes).

    Not fixed by the spec (it grows by appending); the layout test checks it against the header.
    """
    _fields_ = [
        ("reserved", c_char * 24),            # info header written by HcclCommConfigInit
        ("hcclBufferSize", c_uint32),
        ("hcclDeterministic", c_uint32),
        ("hcclCommName", c_char * 128),
        ("hcclUdi", c_char * 128),
        ("hcclOpExpansionMode", c_uint32),
        ("hcclRdmaTrafficClass", c_uint32),
        ("hcclRdmaServiceLevel", c_uint32),
        ("hcclWorldRankID", c_uint32),
        ("hcclJobID", c_uint64),
        ("aclGraphZeroCopyEnable", c_uint8),
        ("hcclExecTimeOut", c_int32),
        ("hcclAlgo", c_char * 1600),
        ("hcclRetryEnable", c_char * 50),
        ("hcclRetryParams", c_char * 128),
        ("hcclBufferName", c_char * 128),
        ("hcclQos", c_uint32),
        ("hcclSymWinMaxMemSizePerRank", c_uint64),
    ]


class CommAbiHeader(Structure):
    """``{ uint32_t version, magicWord, size, reserved; }`` (16 bytes)."""
    _fields_ = [("version", c_uint32), ("magicWord", c_uint32), ("size", c_uint32), ("reserved", c_uint32)]


class CommMem(Structure):
    """``{ CommMemType type; void* addr; uint64_t size; }`` (24 bytes)."""
    _fields_ = [("type", c_int), ("addr", c_void_p), ("size", c_uint64)]


class ThreadConfig(Structure):
    """``{ CommAbiHeader header; uint16_t notifyNumPerThread; uint8_t reserved[14]; }`` (32 bytes)."""
    _fields_ = [("header", CommAbiHeader), ("notifyNumPerThread", c_uint16), ("reserved", c_uint8 * 14)]


class _CommAddrU(Union):
    _fields_ = [
        ("raws", c_uint8 * 36),
        ("addr", c_uint32),          # struct in_addr (network byte order)
        ("addr6", c_uint8 * 16),     # struct in6_addr
        ("id", c_uint32),
        ("eid", c_uint8 * 16),       # COMM_ADDR_EID_LEN
    ]


class CommAddr(Structure):
    """``{ CommAddrType type; union { raws[36]; in_addr addr; in6_addr addr6; id; eid[16]; }; }`` (40 bytes)."""
    _anonymous_ = ("_u",)
    _fields_ = [("type", c_int), ("_u", _CommAddrU)]


class _EndpointLocDevice(Structure):
    _fields_ = [("devPhyId", c_uint32), ("superDevId", c_uint32), ("serverIdx", c_uint32),
                ("superPodIdx", c_uint32)]


class _EndpointLocHost(Structure):
    _fields_ = [("id", c_uint32)]


class _EndpointLocU(Union):
    _fields_ = [("raws", c_uint8 * 60), ("device", _EndpointLocDevice), ("host", _EndpointLocHost)]


class EndpointLoc(Structure):
    """``{ EndpointLocType locType; union { raws[60]; device{...}; host{id}; }; }`` (64 bytes)."""
    _anonymous_ = ("_u",)
    _fields_ = [("locType", c_int), ("_u", _EndpointLocU)]


class _EndpointDescU(Union):
    _fields_ = [("raws", c_uint8 * 52)]


class EndpointDesc(Structure):
    """``{ CommProtocol protocol; CommAddr commAddr; EndpointLoc loc; union { raws[52]; }; }`` (160 bytes)."""
    _anonymous_ = ("_u",)
    _fields_ = [("protocol", c_int), ("commAddr", CommAddr), ("loc", EndpointLoc), ("_u", _EndpointDescU)]


class _RoceAttr(Structure):
    _fields_ = [("queueNum", c_uint32), ("retryCnt", c_uint32), ("retryInterval", c_uint32),
                ("tc", c_uint8), ("sl", c_uint8)]


class _UbMemAttr(Structure):
    _fields_ = [("pathMode", c_uint8)]


class _ChannelDescU(Union):
    _fields_ = [("raws", c_uint8 * 128), ("roceAttr", _RoceAttr), ("ubMemAttr", _UbMemAttr)]


class HcclChannelDesc(Structure):
    """Channel descriptor for ``HcclChannelAcquire`` (496 bytes). Initialise with :func:`channel_desc_init`."""
    _anonymous_ = ("_u",)
    _fields_ = [
        ("header", CommAbiHeader),
        ("remoteRank", c_uint32),
        ("channelProtocol", c_int),
        ("localEndpoint", EndpointDesc),
        ("remoteEndpoint", EndpointDesc),
        ("notifyNum", c_uint32),
        ("memHandles", POINTER(c_void_p)),   # HcclMemHandle*
        ("memHandleNum", c_uint32),
        ("_u", _ChannelDescU),
    ]


class _LinkAttrS(Structure):
    _fields_ = [("linkProtocol", c_int), ("hop", c_uint8)]


class _LinkAttr(Union):
    _anonymous_ = ("_s",)
    _fields_ = [("raws", c_uint8 * 128), ("_s", _LinkAttrS)]


class CommLink(Structure):
    """One link of ``HcclRankGraphGetLinks`` (464 bytes)."""
    _fields_ = [("header", CommAbiHeader), ("srcEndpointDesc", EndpointDesc),
                ("dstEndpointDesc", EndpointDesc), ("linkAttr", _LinkAttr)]


class _BtCopy(Structure):
    _fields_ = [("len", c_uint64), ("dst", c_void_p), ("src", c_void_p)]


class _BtReduce(Structure):
    _fields_ = [("count", c_uint64), ("dst", c_void_p), ("src", c_void_p), ("reduceOp", c_int),
                ("dataType", c_int)]


class _BtNotifyRecord(Structure):
    _fields_ = [("notifyIdx", c_uint32)]


class _BtWriteWithNotify(Structure):
    _fields_ = [("len", c_uint64), ("dst", c_void_p), ("src", c_void_p), ("notifyIdx", c_uint32)]


class _BtWriteReduceWithNotify(Structure):
    _fields_ = [("count", c_uint64), ("dst", c_void_p), ("src", c_void_p), ("reduceOp", c_int),
                ("dataType", c_int), ("notifyIdx", c_uint32)]


class _BtInfo(Union):
    _fields_ = [
        ("raws", c_uint8 * 56),
        ("write", _BtCopy),
        ("read", _BtCopy),
        ("reduce", _BtReduce),
        ("notifyRecord", _BtNotifyRecord),
        ("writeWithNotify", _BtWriteWithNotify),
        ("writeReduceWithNotify", _BtWriteReduceWithNotify),
    ]


class HcommBatchTransferDesc(Structure):
    """One descriptor of ``HcommBatchTransferOnThread`` (64 bytes; ``transferInfo`` at 8)."""
    _fields_ = [("transType", c_int), ("reserved", c_uint8 * 4), ("transferInfo", _BtInfo)]


class HcclKernelFuncInfo(Structure):
    """``hccl_launch.h``: kernel .so / entry names and the argument blob (528 bytes)."""
    _fields_ = [("kernelSoName", c_char * 256), ("kernelFuncName", c_char * 256), ("args", c_void_p),
                ("argSize", c_uint32)]


class HcclKernelLaunchCfg(Structure):
    """``hccl_launch.h``: ``{ CommAbiHeader header; uint64_t timeOut; uint8_t reserved[104]; }`` (128 bytes)."""
    _fields_ = [("header", CommAbiHeader), ("timeOut", c_uint64), ("reserved", c_uint8 * 104)]


class _OpDescU(Union):
    # HcclOpP2pDesc (48 bytes, holds pointers) is opaque here: only its size and alignment matter.
    _fields_ = [("raws", c_uint8 * 76), ("_p2p", c_uint64 * 6)]


class HcclOpDesc(Structure):
    """``hccl_launch.h`` operator descriptor (360 bytes; union at 280)."""
    _anonymous_ = ("_u",)
    _fields_ = [("header", CommAbiHeader), ("opDescType", c_uint32), ("opName", c_char * 256),
                ("_u", _OpDescU)]


# ---- header-inline initialisers ------------------------------------------------------------
def _as_array(objs, cls):
    """Accept one instance, a ctypes array or a sequence of instances; yield the instances."""
    if isinstance(objs, cls):
        return (objs,)
    return objs


def endpoint_desc_init(endpoints: EndpointDesc | Iterable[EndpointDesc]) -> None:
    """Python ``EndpointDescInit``: fill with 0xFF, then protocol/addr type/loc type = RESERVED (-1)."""
    for ep in _as_array(endpoints, EndpointDesc):
        ctypes.memset(ctypes.addressof(ep), 0xFF, ctypes.sizeof(EndpointDesc))
        ep.protocol = int(enums.CommProtocol.COMM_PROTOCOL_RESERVED)
        ep.commAddr.type = int(enums.CommAddrType.COMM_ADDR_TYPE_RESERVED)
        ep.loc.locType = int(enums.EndpointLocType.ENDPOINT_LOC_TYPE_RESERVED)


def channel_desc_init(descs: HcclChannelDesc | Iterable[HcclChannelDesc]) -> None:
    """Python equivalent of the inline ``HcclChannelDescInit`` (``hcomm.md`` §2.5).

    Fills each descriptor with 0xFF bytes, then sets the ABI header (version 1, magic
    0x0f0f0f0f, size 496, reserved 0), ``remoteRank = ~0``, ``channelProtocol = RESERVED``,
    ``notifyNum = 0``, ``memHandles = NULL``, ``memHandleNum = 0`` and initialises both endpoints.

    Example:
        >>> descs = (HcclChannelDesc * 2)()
        >>> channel_desc_init(descs)
        >>> hex(descs[1].header.magicWord), descs[1].remoteRank
        ('0xf0f0f0f', 4294967295)
    """
    for d in _as_array(descs, HcclChannelDesc):
        ctypes.memset(ctypes.addressof(d), 0xFF, ctypes.sizeof(HcclChannelDesc))
        d.header.version = enums.ABI_VERSION
        d.header.magicWord = enums.CHANNEL_DESC_MAGIC
        d.header.size = ctypes.sizeof(HcclChannelDesc)
        d.header.reserved = 0
        d.remoteRank = 0xFFFFFFFF
        d.channelProtocol = int(enums.CommProtocol.COMM_PROTOCOL_RESERVED)
        d.notifyNum = 0
        d.memHandles = None
        d.memHandleNum = 0
        endpoint_desc_init(d.localEndpoint)
        endpoint_desc_init(d.remoteEndpoint)


def thread_config_init(configs: ThreadConfig | Iterable[ThreadConfig]) -> None:
    """Python ``ThreadConfigInit``: zero each entry, version 1, magic 0x0f0f0f2f, size 32."""
    for c in _as_array(configs, ThreadConfig):
        ctypes.memset(ctypes.addressof(c), 0, ctypes.sizeof(ThreadConfig))
        c.header.version = enums.ABI_VERSION
        c.header.magicWord = enums.THREAD_CONFIG_MAGIC
        c.header.size = ctypes.sizeof(ThreadConfig)


def comm_link_init(links: CommLink | Iterable[CommLink]) -> None:
    """Python ``CommLinkInit``: 0xFF fill, header (1, 0x0f0e0f0f, 464), endpoints reset, protocol RESERVED, hop 1."""
    for link in _as_array(links, CommLink):
        ctypes.memset(ctypes.addressof(link), 0xFF, ctypes.sizeof(CommLink))
        link.header.version = enums.ABI_VERSION
        link.header.magicWord = enums.COMM_LINK_MAGIC
        link.header.size = ctypes.sizeof(CommLink)
        link.header.reserved = 0
        endpoint_desc_init(link.srcEndpointDesc)
        endpoint_desc_init(link.dstEndpointDesc)
        link.linkAttr.linkProtocol = int(enums.CommProtocol.COMM_PROTOCOL_RESERVED)
        link.linkAttr.hop = 1


def kernel_launch_cfg_init(cfg: HcclKernelLaunchCfg, timeout_s: int | None = None) -> HcclKernelLaunchCfg:
    """Python ``HcclKernelLaunchCfgInit``: 0xFF fill, header (1, 0x0f0f0f0f, 128); then ``timeOut`` if given."""
    ctypes.memset(ctypes.addressof(cfg), 0xFF, ctypes.sizeof(HcclKernelLaunchCfg))
    cfg.header.version = enums.ABI_VERSION
    cfg.header.magicWord = enums.LAUNCH_MAGIC
    cfg.header.size = ctypes.sizeof(HcclKernelLaunchCfg)
    cfg.header.reserved = 0
    if timeout_s is not None:
        cfg.timeOut = int(timeout_s)
    return cfg


def op_desc_init(desc: HcclOpDesc) -> HcclOpDesc:
    """Python ``HcclOpDescInit``: 0xFF fill, header (1, 0x0f0f0f0f, 360)."""
    ctypes.memset(ctypes.addressof(desc), 0xFF, ctypes.sizeof(HcclOpDesc))
    desc.header.version = enums.ABI_VERSION
    desc.header.magicWord = enums.LAUNCH_MAGIC
    desc.header.size = ctypes.sizeof(HcclOpDesc)
    desc.header.reserved = 0
    return desc


_HCCL_COMM_CONFIG_MAGIC = 0xF0F0F0F0
_HCCL_COMM_CONFIG_VERSION = 10
_NOT_SET = 0xFFFFFFFF


class _CommConfigInfo(Structure):
    _fields_ = [("size", c_size_t), ("magicWord", c_uint32), ("version", c_uint32), ("reserved", c_uint64)]


def hccl_comm_config_init(config: HcclCommConfig) -> HcclCommConfig:
    """Python ``HcclCommConfigInit``: info header (size, magic 0xf0f0f0f0, version 10), fields "not set"."""
    ctypes.memset(ctypes.addressof(config), 0, ctypes.sizeof(HcclCommConfig))
    info = _CommConfigInfo.from_buffer(config)
    info.size = ctypes.sizeof(HcclCommConfig)
    info.magicWord = _HCCL_COMM_CONFIG_MAGIC
    info.version = _HCCL_COMM_CONFIG_VERSION
    config.hcclBufferSize = _NOT_SET
    config.hcclDeterministic = _NOT_SET
    config.hcclRdmaTrafficClass = _NOT_SET
    config.hcclRdmaServiceLevel = _NOT_SET
    config.hcclWorldRankID = 0
    config.hcclJobID = 0
    config.hcclExecTimeOut = -1
    config.hcclQos = _NOT_SET
    config.hcclSymWinMaxMemSizePerRank = 16  # HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE
    return config


# ---- layout registry -----------------------------------------------------------------------
#: (ctypes class, C type name, header that declares it, optional). Optional layouts are checked
#: only when the header defines them compatibly (their layout is not fixed by the spec).
# =============================================================================================
# hcomm-kit emulator extension (hcomm_kit/emu_ext.h)
# =============================================================================================
class HcommKitStreamCall(Structure):
    """One call of ``HcommKitStreamCalls`` (kind: :class:`.enums.StreamCallKind`; 32 bytes)."""
    _fields_ = [("kind", c_uint32), ("u32", c_uint32), ("a", c_uint64), ("b", c_uint64), ("c", c_uint64)]


LAYOUTS: tuple[tuple[type, str, str, bool], ...] = (
    (aclrtTimeoutUs, "aclrtTimeoutUs", "acl/acl_rt.h", False),
    (aclrtLaunchKernelAttrValue, "aclrtLaunchKernelAttrValue", "acl/acl_rt.h", False),
    (aclrtLaunchKernelAttr, "aclrtLaunchKernelAttr", "acl/acl_rt.h", False),
    (aclrtLaunchKernelCfg, "aclrtLaunchKernelCfg", "acl/acl_rt.h", False),
    (aclrtPlaceHolderInfo, "aclrtPlaceHolderInfo", "acl/acl_rt.h", False),
    (aclrtBinaryLoadOptionValue, "aclrtBinaryLoadOptionValue", "acl/acl_rt.h", False),
    (aclrtBinaryLoadOption, "aclrtBinaryLoadOption", "acl/acl_rt.h", False),
    (aclrtBinaryLoadOptions, "aclrtBinaryLoadOptions", "acl/acl_rt.h", False),
    (HcclRootInfo, "HcclRootInfo", "hccl/hccl_types.h", False),
    (HcclSendRecvItem, "HcclSendRecvItem", "hccl/hccl_types.h", False),
    (CommAbiHeader, "CommAbiHeader", "hcomm_res_defs.h", False),
    (CommMem, "CommMem", "hcomm_res_defs.h", False),
    (CommAddr, "CommAddr", "hcomm_res_defs.h", False),
    (EndpointLoc, "EndpointLoc", "hcomm_res_defs.h", False),
    (EndpointDesc, "EndpointDesc", "hcomm_res_defs.h", False),
    (ThreadConfig, "ThreadConfig", "hccl/hccl_res.h", False),
    (HcclChannelDesc, "HcclChannelDesc", "hccl/hccl_channel.h", False),
    (CommLink, "CommLink", "hccl/hccl_rank_graph.h", False),
    (HcommBatchTransferDesc, "HcommBatchTransferDesc", "hccl/hcomm_primitives.h", False),
    (HcclKernelFuncInfo, "HcclKernelFuncInfo", "hccl/hccl_launch.h", False),
    (HcclKernelLaunchCfg, "HcclKernelLaunchCfg", "hccl/hccl_launch.h", False),
    (HcclOpDesc, "HcclOpDesc", "hccl/hccl_launch.h", False),
    (HcclCommConfig, "HcclCommConfig", "hccl/hccl_types.h", True),
    (HcommKitStreamCall, "HcommKitStreamCall", "hcomm_kit/emu_ext.h", False),
)


def iter_fields(cls: type, prefix: str = "", base: int = 0) -> Iterator[tuple[str, int, int]]:
    """Yield ``(C member path, offset, size)`` for every member of a mirrored layout, recursively.

    Anonymous members contribute their children without a path component (as in C); members
    whose name starts with ``_`` and that are not anonymous (opaque padding) are skipped.
    """
    anonymous = set(getattr(cls, "_anonymous_", ()))
    for name, ftype, *_ in cls._fields_:
        off = base + getattr(cls, name).offset
        if name in anonymous:
            yield from iter_fields(ftype, prefix, off)
            continue
        if name.startswith("_"):
            continue
        path = prefix + name
        yield path, off, ctypes.sizeof(ftype)
        if isinstance(ftype, type) and issubclass(ftype, (Structure, Union)):
            yield from iter_fields(ftype, path + ".", off)
