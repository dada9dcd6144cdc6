"""IntEnums / IntFlags mirroring the C enums and flag macros of ``acl_runtime.md`` §2.2–§2.6 and
``hcomm.md`` §2.2–§2.5. Values are exact; the layout test compares each member with the header.

Each is declared from the C declaration's names and values by :func:`_c_enum` (numbered as C
numbers them), which also records the header that declares it in :data:`C_ENUMS`.

Data types live in :mod:`hcomm_kit.base.dtypes` (one dtype table); error codes in
:mod:`hcomm_kit.runtime.codes`.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Any

__all__ = [
    # ACL
    "RunMode", "EventStatus", "EventRecordedStatus", "StreamStatus", "CallbackBlockType",
    "MemcpyKind", "MemMallocPolicy", "KernelType", "LaunchKernelAttrId", "EngineType",
    "BinaryLoadOptionType", "BinaryMagic", "StreamFlag", "EventFlag", "NotifyFlag",
    # HCCL / Hcomm
    "HcclResult", "ReduceOp", "TransferType", "HcclCMDType", "CommEngine", "CommProtocol",
    "CommMemType", "ThreadType", "HcclDedicatedThreadType", "CommTopo", "CommAddrType",
    "EndpointLocType", "HcclSendRecvType",
    # hcomm-kit emulator extension
    "StreamCallKind", "StreamCallsFlag",
    # magic words / constants
    "CHANNEL_DESC_MAGIC", "THREAD_CONFIG_MAGIC", "COMM_LINK_MAGIC", "LAUNCH_MAGIC", "ABI_VERSION",
    "HCCL_ROOT_INFO_BYTES", "COMM_NAME_MAX_LENGTH", "HCCL_COMM_DEFAULT_BUFFSIZE",
    "NOTIFY_WAIT_TIMEOUT_DEFAULT",
    "C_ENUMS",
]


_DECLARED: list[tuple[type, str]] = []


def _c_enum(name: str, header: str, prefix: str, members: str, *, flag: bool = False, doc: str | None = None) -> Any:
    """An IntEnum (``flag``: IntFlag) ``name`` mirroring a C enum (or flag macros) of ``header``.

    Args:
        name: the Python class name.
        header: the header declaring it, relative to the include directory (for :data:`C_ENUMS`).
        prefix: the common start of the C names, left out of ``members``.
        members: the C names without ``prefix`` in declaration order, numbered as C numbers them:
            ``NAME`` is the previous value + 1 (the first: 0), ``NAME=VALUE`` sets it (a value taken
            before makes an alias); ``#`` starts a comment.
        flag: an IntFlag (the C side is a set of bit macros).
        doc: the class docstring.

    Returns:
        The class, also recorded in :data:`C_ENUMS` with ``header``.
    """
    pairs: list[tuple[str, int]] = []
    value = -1
    for line in members.splitlines():
        for token in line.split("#", 1)[0].split():
            key, eq, raw = token.partition("=")
            value = int(raw, 0) if eq else value + 1
            pairs.append((prefix + key, value))
    cls = (IntFlag if flag else IntEnum)(name, pairs, module=__name__, qualname=name)
    if doc:
        cls.__doc__ = doc
    _DECLARED.append((cls, header))
    return cls


# ---------------------------------------------------------------------------------------------
# ACL runtime (acl/acl_rt.h)
# ---------------------------------------------------------------------------------------------
_ACL_RT = "acl/acl_rt.h"
RunMode = _c_enum("RunMode", _ACL_RT, "ACL_", "DEVICE HOST")
EventStatus = _c_enum("EventStatus", _ACL_RT, "ACL_EVENT_STATUS_", "COMPLETE NOT_READY RESERVED")
EventRecordedStatus = _c_enum("EventRecordedStatus", _ACL_RT, "ACL_EVENT_RECORDED_STATUS_", "NOT_READY COMPLETE")
StreamStatus = _c_enum("StreamStatus", _ACL_RT, "ACL_STREAM_STATUS_", "COMPLETE NOT_READY RESERVED=0xFFFF")
CallbackBlockType = _c_enum("CallbackBlockType", _ACL_RT, "ACL_CALLBACK_", "NO_BLOCK BLOCK")
MemcpyKind = _c_enum("MemcpyKind", _ACL_RT, "ACL_MEMCPY_", """
    HOST_TO_HOST HOST_TO_DEVICE DEVICE_TO_HOST DEVICE_TO_DEVICE DEFAULT HOST_TO_BUF_TO_DEVICE
    INNER_DEVICE_TO_DEVICE INTER_DEVICE_TO_DEVICE""")
MemMallocPolicy = _c_enum("MemMallocPolicy", _ACL_RT, "ACL_MEM_", """
    MALLOC_HUGE_FIRST MALLOC_HUGE_ONLY MALLOC_NORMAL_ONLY MALLOC_HUGE_FIRST_P2P MALLOC_HUGE_ONLY_P2P
    MALLOC_NORMAL_ONLY_P2P MALLOC_HUGE1G_ONLY MALLOC_HUGE1G_ONLY_P2P
    TYPE_LOW_BAND_WIDTH=0x0100 TYPE_HIGH_BAND_WIDTH=0x1000 ACCESS_USER_SPACE_READONLY=0x100000""")
KernelType = _c_enum("KernelType", _ACL_RT, "ACL_KERNEL_TYPE_", "AICORE CUBE VECTOR MIX AICPU=100")
LaunchKernelAttrId = _c_enum("LaunchKernelAttrId", _ACL_RT, "ACL_RT_LAUNCH_KERNEL_ATTR_", """
    SCHEM_MODE=1 DYN_UBUF_SIZE
    LOCAL_MEMORY_SIZE=2     # deprecated alias of DYN_UBUF_SIZE
    ENGINE_TYPE BLOCKDIM_OFFSET BLOCK_TASK_PREFETCH DATA_DUMP
    TIMEOUT                 # value.timeout, seconds (uint16)
    TIMEOUT_US              # value.timeoutUs, microseconds; not together with TIMEOUT
    ENABLE_PROFILING""")
EngineType = _c_enum("EngineType", _ACL_RT, "ACL_RT_ENGINE_TYPE_", "AIC AIV")
BinaryLoadOptionType = _c_enum("BinaryLoadOptionType", _ACL_RT, "ACL_RT_BINARY_LOAD_OPT_", """
    LAZY_LOAD=1 MAGIC
    LAZY_MAGIC=2            # deprecated alias of MAGIC
    CPU_KERNEL_MODE""")
BinaryMagic = _c_enum("BinaryMagic", _ACL_RT, "ACL_RT_BINARY_MAGIC_ELF_",
                      "AICORE=0x43554245 VECTOR_CORE=0x41415246 CUBE_CORE=0x41494343",
                      doc="``ACL_RT_BINARY_MAGIC_ELF_*`` (#defines) for ``aclrtBinaryLoadOptionValue.magic``.")
StreamFlag = _c_enum("StreamFlag", _ACL_RT, "ACL_STREAM_", """
    FAST_LAUNCH=0x1 FAST_SYNC=0x2 PERSISTENT=0x4 HUGE=0x8 CPU_SCHEDULE=0x10 DEVICE_USE_ONLY=0x20""", flag=True)
EventFlag = _c_enum("EventFlag", _ACL_RT, "ACL_EVENT_", """
    SYNC=0x1 CAPTURE_STREAM_PROGRESS=0x2 TIME_LINE=0x8 DEVICE_USE_ONLY=0x10 EXTERNAL=0x20 IPC=0x40""", flag=True)
NotifyFlag = _c_enum("NotifyFlag", _ACL_RT, "ACL_NOTIFY_", "DEFAULT=0x0 DEVICE_USE_ONLY=0x1", flag=True)


# ---------------------------------------------------------------------------------------------
# HCCL / Hcomm (hccl/hccl_types.h, hcomm_res_defs.h, hccl/*.h, hcomm_primitives.h)
# ---------------------------------------------------------------------------------------------
_HCCL_TYPES = "hccl/hccl_types.h"
_RES_DEFS = "hcomm_res_defs.h"
_HCCL_RES = "hccl/hccl_res.h"
HcclResult = _c_enum("HcclResult", _HCCL_TYPES, "HCCL_", """
    SUCCESS E_PARA E_PTR E_MEMORY E_INTERNAL E_NOT_SUPPORT E_NOT_FOUND E_UNAVAIL E_SYSCALL E_TIMEOUT
    E_OPEN_FILE_FAILURE E_TCP_CONNECT E_ROCE_CONNECT E_TCP_TRANSFER E_ROCE_TRANSFER E_RUNTIME E_DRV
    E_PROFILING E_CCE E_NETWORK E_AGAIN E_REMOTE E_SUSPENDING E_OPRETRY_FAIL E_OOM
    E_IN_STATUS=1041 E_RESERVED""")
ReduceOp = _c_enum("ReduceOp", _HCCL_TYPES, "HCCL_REDUCE_", "SUM PROD MAX MIN RESERVED=255",
                   doc="``HcclReduceOp`` and ``HcommReduceOp`` (same numbering).")
TransferType = _c_enum("TransferType", "hccl/hcomm_primitives.h", "HCOMM_TRANSFER_TYPE_", """
    INVALID=-1 WRITE WRITE_REDUCE WRITE_WITH_NOTIFY WRITE_REDUCE_WITH_NOTIFY READ READ_REDUCE NOTIFY_RECORD""")
HcclCMDType = _c_enum("HcclCMDType", _HCCL_TYPES, "HCCL_CMD_", """
    INVALID BROADCAST ALLREDUCE REDUCE SEND RECEIVE ALLGATHER REDUCE_SCATTER ALLTOALLV ALLTOALLVC ALLTOALL
    GATHER SCATTER BATCH_SEND_RECV BATCH_PUT BATCH_GET ALLGATHER_V REDUCE_SCATTER_V BATCH_WRITE
    HALF_ALLTOALLV=20 ALL
    FINALIZE=100 INTER_GROUP_SYNC INIT BARRIER MAX""")
CommEngine = _c_enum("CommEngine", _RES_DEFS, "COMM_ENGINE_", "RESERVED=-1 CPU CPU_TS AICPU AICPU_TS AIV CCU")
CommProtocol = _c_enum("CommProtocol", _RES_DEFS, "COMM_PROTOCOL_", """
    RESERVED=-1 HCCS ROCE PCIE SIO UB_CTP
    UBC_CTP=4               # alias
    UBC_TP UB_MEM UBOE HCCS_ONLY UB_RTP
    UBG=9                   # alias""")
CommMemType = _c_enum("CommMemType", _RES_DEFS, "COMM_MEM_TYPE_", "INVALID=-1 DEVICE HOST")
ThreadType = _c_enum("ThreadType", _HCCL_RES, "THREAD_TYPE_", "INVALID=-1 TS")
HcclDedicatedThreadType = _c_enum("HcclDedicatedThreadType", _HCCL_RES, "HCCL_DED_THREAD_TYPE_", """
    INVALID=-1 AICPU_LAUNCH AICPU_LAUNCH_GE AICPU_ORDER_LAUNCH_OPBASE AICPU_ORDER_LAUNCH_ACLGRAPH
    AICPU_ORDER_LAUNCH_GE AICPU_ORDER_LAUNCH_DEVICE""")
CommTopo = _c_enum("CommTopo", "hccl/hccl_rank_graph.h", "COMM_TOPO_", """
    RESERVED=-1 CLOS 1DMESH 910_93 310P A2AXSERVER CUSTOM""")
CommAddrType = _c_enum("CommAddrType", _RES_DEFS, "COMM_ADDR_TYPE_", "RESERVED=-1 IP_V4 IP_V6 ID EID")
EndpointLocType = _c_enum("EndpointLocType", _RES_DEFS, "ENDPOINT_LOC_TYPE_", "RESERVED=-1 DEVICE HOST")
HcclSendRecvType = _c_enum("HcclSendRecvType", _HCCL_TYPES, "HCCL_", "SEND RECV SEND_RECV_RESERVED")

# hcomm-kit emulator extension (hcomm_kit/emu_ext.h): HcommKitStreamCalls.
# (full names: the prefix alone would read as an environment variable to tests/test_foundation.py)
StreamCallKind = _c_enum("StreamCallKind", "hcomm_kit/emu_ext.h", "", """
    HCOMM_KIT_SC_LAUNCH=1 HCOMM_KIT_SC_THREAD_RECORD HCOMM_KIT_SC_THREAD_WAIT HCOMM_KIT_SC_NOTIFY_RECORD
    HCOMM_KIT_SC_NOTIFY_WAIT HCOMM_KIT_SC_CALL_CHECK HCOMM_KIT_SC_OUTPUT""")
StreamCallsFlag = _c_enum("StreamCallsFlag", "hcomm_kit/emu_ext.h", "", "HCOMM_KIT_SC_SYNC=1 HCOMM_KIT_SC_INLINE=2",
                          flag=True)


# Magic words and versions of the ABI-headed structs (hcomm.md §2.4-§2.5).
ABI_VERSION = 1
CHANNEL_DESC_MAGIC = 0x0F0F0F0F     # HcclChannelDesc (HCCL_CHANNEL_MAGIC_WORD)
THREAD_CONFIG_MAGIC = 0x0F0F0F2F    # ThreadConfig
COMM_LINK_MAGIC = 0x0F0E0F0F        # CommLink (COMM_LINK_MAGIC_WORD)
LAUNCH_MAGIC = 0x0F0F0F0F           # HcclKernelLaunchCfg / HcclOpDesc
HCCL_ROOT_INFO_BYTES = 4108
COMM_NAME_MAX_LENGTH = 128
HCCL_COMM_DEFAULT_BUFFSIZE = 200    # MB
NOTIFY_WAIT_TIMEOUT_DEFAULT = 1836  # seconds

#: Every enum/flag class mirrored from a C header, with the header (relative to the include
#: directory) that declares it. Used by the layout test.
C_ENUMS: tuple[tuple[type, str], ...] = tuple(_DECLARED)
