"""IntEnums / IntFlags mirroring the C enums and flag macros of ``acl_runtime.md`` §2.2–§2.6 and
``hcomm.md`` §2.2–§2.5. Values are exact; the layout test compares each member with the header.

Data types live in :mod:`hcomm_kit.base.dtypes` (one dtype table); error codes in
:mod:`hcomm_kit.runtime.codes`.
"""

from __future__ import annotations

from enum import IntEnum, IntFlag

__all__ = [
    # ACL
    "RunMode", "EventStatus", "EventRecordedStatus", "StreamStatus", "CallbackBlockType",
    "MemcpyKind", "MemMallocPolicy", "KernelType", "LaunchKernelAttrId", "EngineType",
    "BinaryLoadOptionType", "BinaryMagic", "StreamFlag", "EventFlag", "NotifyFlag",
    # HCCL / Hcomm
    "HcclResult", "ReduceOp", "TransferType", "HcclCMDType", "CommEngine", "CommProtocol",
    "CommMemType", "ThreadType", "HcclDedicatedThreadType", "CommTopo", "CommAddrType",
    "EndpointLocType", "HcclSendRecvType",
    # magic words / constants
    "CHANNEL_DESC_MAGIC", "THREAD_CONFIG_MAGIC", "COMM_LINK_MAGIC", "LAUNCH_MAGIC", "ABI_VERSION",
    "HCCL_ROOT_INFO_BYTES", "COMM_NAME_MAX_LENGTH", "HCCL_COMM_DEFAULT_BUFFSIZE",
    "NOTIFY_WAIT_TIMEOUT_DEFAULT",
    "C_ENUMS",
]


# ---------------------------------------------------------------------------------------------
# ACL runtime (acl/acl_rt.h)
# ---------------------------------------------------------------------------------------------
class RunMode(IntEnum):
    ACL_DEVICE = 0
    ACL_HOST = 1


class EventStatus(IntEnum):
    ACL_EVENT_STATUS_COMPLETE = 0
    ACL_EVENT_STATUS_NOT_READY = 1
    ACL_EVENT_STATUS_RESERVED = 2


class EventRecordedStatus(IntEnum):
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1


class StreamStatus(IntEnum):
    ACL_STREAM_STATUS_COMPLETE = 0
    ACL_STREAM_STATUS_NOT_READY = 1
    ACL_STREAM_STATUS_RESERVED = 0xFFFF


class CallbackBlockType(IntEnum):
    ACL_CALLBACK_NO_BLOCK = 0
    ACL_CALLBACK_BLOCK = 1


class MemcpyKind(IntEnum):
    ACL_MEMCPY_HOST_TO_HOST = 0
    ACL_MEMCPY_HOST_TO_DEVICE = 1
    ACL_MEMCPY_DEVICE_TO_HOST = 2
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3
    ACL_MEMCPY_DEFAULT = 4
    ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE = 5
    ACL_MEMCPY_INNER_DEVICE_TO_DEVICE = 6
    ACL_MEMCPY_INTER_DEVICE_TO_DEVICE = 7


class MemMallocPolicy(IntEnum):
    ACL_MEM_MALLOC_HUGE_FIRST = 0
    ACL_MEM_MALLOC_HUGE_ONLY = 1
    ACL_MEM_MALLOC_NORMAL_ONLY = 2
    ACL_MEM_MALLOC_HUGE_FIRST_P2P = 3
    ACL_MEM_MALLOC_HUGE_ONLY_P2P = 4
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P = 5
    ACL_MEM_MALLOC_HUGE1G_ONLY = 6
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P = 7
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000
    ACL_MEM_ACCESS_USER_SPACE_READONLY = 0x100000


class KernelType(IntEnum):
    ACL_KERNEL_TYPE_AICORE = 0
    ACL_KERNEL_TYPE_CUBE = 1
    ACL_KERNEL_TYPE_VECTOR = 2
    ACL_KERNEL_TYPE_MIX = 3
    ACL_KERNEL_TYPE_AICPU = 100


class LaunchKernelAttrId(IntEnum):
    ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE = 1
    ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE = 2
    ACL_RT_LAUNCH_KERNEL_ATTR_LOCAL_MEMORY_SIZE = 2  # deprecated alias of DYN_UBUF_SIZE
    ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE = 3
    ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET = 4
    ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH = 5
    ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP = 6
    ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT = 7       # value.timeout, seconds (uint16)
    ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US = 8    # value.timeoutUs, microseconds; not together with 7
    ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING = 9


class EngineType(IntEnum):
    ACL_RT_ENGINE_TYPE_AIC = 0
    ACL_RT_ENGINE_TYPE_AIV = 1


class BinaryLoadOptionType(IntEnum):
    ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD = 1
    ACL_RT_BINARY_LOAD_OPT_MAGIC = 2
    ACL_RT_BINARY_LOAD_OPT_LAZY_MAGIC = 2  # deprecated alias of MAGIC
    ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE = 3


class BinaryMagic(IntEnum):
    """``ACL_RT_BINARY_MAGIC_ELF_*`` (#defines) for ``aclrtBinaryLoadOptionValue.magic``."""
    ACL_RT_BINARY_MAGIC_ELF_AICORE = 0x43554245
    ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE = 0x41415246
    ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE = 0x41494343


class StreamFlag(IntFlag):
    ACL_STREAM_FAST_LAUNCH = 0x1
    ACL_STREAM_FAST_SYNC = 0x2
    ACL_STREAM_PERSISTENT = 0x4
    ACL_STREAM_HUGE = 0x8
    ACL_STREAM_CPU_SCHEDULE = 0x10
    ACL_STREAM_DEVICE_USE_ONLY = 0x20


class EventFlag(IntFlag):
    ACL_EVENT_SYNC = 0x1
    ACL_EVENT_CAPTURE_STREAM_PROGRESS = 0x2
    ACL_EVENT_TIME_LINE = 0x8
    ACL_EVENT_DEVICE_USE_ONLY = 0x10
    ACL_EVENT_EXTERNAL = 0x20
    ACL_EVENT_IPC = 0x40


class NotifyFlag(IntFlag):
    ACL_NOTIFY_DEFAULT = 0x0
    ACL_NOTIFY_DEVICE_USE_ONLY = 0x1


# ---------------------------------------------------------------------------------------------
# HCCL / Hcomm (hccl/hccl_types.h, hcomm_res_defs.h, hccl/*.h, hcomm_primitives.h)
# ---------------------------------------------------------------------------------------------
class HcclResult(IntEnum):
    HCCL_SUCCESS = 0
    HCCL_E_PARA = 1
    HCCL_E_PTR = 2
    HCCL_E_MEMORY = 3
    HCCL_E_INTERNAL = 4
    HCCL_E_NOT_SUPPORT = 5
    HCCL_E_NOT_FOUND = 6
    HCCL_E_UNAVAIL = 7
    HCCL_E_SYSCALL = 8
    HCCL_E_TIMEOUT = 9
    HCCL_E_OPEN_FILE_FAILURE = 10
    HCCL_E_TCP_CONNECT = 11
    HCCL_E_ROCE_CONNECT = 12
    HCCL_E_TCP_TRANSFER = 13
    HCCL_E_ROCE_TRANSFER = 14
    HCCL_E_RUNTIME = 15
    HCCL_E_DRV = 16
    HCCL_E_PROFILING = 17
    HCCL_E_CCE = 18
    HCCL_E_NETWORK = 19
    HCCL_E_AGAIN = 20
    HCCL_E_REMOTE = 21
    HCCL_E_SUSPENDING = 22
    HCCL_E_OPRETRY_FAIL = 23
    HCCL_E_OOM = 24
    HCCL_E_IN_STATUS = 1041
    HCCL_E_RESERVED = 1042


class ReduceOp(IntEnum):
    """``HcclReduceOp`` and ``HcommReduceOp`` (same numbering)."""
    HCCL_REDUCE_SUM = 0
    HCCL_REDUCE_PROD = 1
    HCCL_REDUCE_MAX = 2
    HCCL_REDUCE_MIN = 3
    HCCL_REDUCE_RESERVED = 255


class TransferType(IntEnum):
    HCOMM_TRANSFER_TYPE_INVALID = -1
    HCOMM_TRANSFER_TYPE_WRITE = 0
    HCOMM_TRANSFER_TYPE_WRITE_REDUCE = 1
    HCOMM_TRANSFER_TYPE_WRITE_WITH_NOTIFY = 2
    HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY = 3
    HCOMM_TRANSFER_TYPE_READ = 4
    HCOMM_TRANSFER_TYPE_READ_REDUCE = 5
    HCOMM_TRANSFER_TYPE_NOTIFY_RECORD = 6


class HcclCMDType(IntEnum):
    HCCL_CMD_INVALID = 0
    HCCL_CMD_BROADCAST = 1
    HCCL_CMD_ALLREDUCE = 2
    HCCL_CMD_REDUCE = 3
    HCCL_CMD_SEND = 4
    HCCL_CMD_RECEIVE = 5
    HCCL_CMD_ALLGATHER = 6
    HCCL_CMD_REDUCE_SCATTER = 7
    HCCL_CMD_ALLTOALLV = 8
    HCCL_CMD_ALLTOALLVC = 9
    HCCL_CMD_ALLTOALL = 10
    HCCL_CMD_GATHER = 11
    HCCL_CMD_SCATTER = 12
    HCCL_CMD_BATCH_SEND_RECV = 13
    HCCL_CMD_BATCH_PUT = 14
    HCCL_CMD_BATCH_GET = 15
    HCCL_CMD_ALLGATHER_V = 16
    HCCL_CMD_REDUCE_SCATTER_V = 17
    HCCL_CMD_BATCH_WRITE = 18
    HCCL_CMD_HALF_ALLTOALLV = 20
    HCCL_CMD_ALL = 21
    HCCL_CMD_FINALIZE = 100
    HCCL_CMD_INTER_GROUP_SYNC = 101
    HCCL_CMD_INIT = 102
    HCCL_CMD_BARRIER = 103
    HCCL_CMD_MAX = 104


class CommEngine(IntEnum):
    COMM_ENGINE_RESERVED = -1
    COMM_ENGINE_CPU = 0
    COMM_ENGINE_CPU_TS = 1
    COMM_ENGINE_AICPU = 2
    COMM_ENGINE_AICPU_TS = 3
    COMM_ENGINE_AIV = 4
    COMM_ENGINE_CCU = 5


class CommProtocol(IntEnum):
    COMM_PROTOCOL_RESERVED = -1
    COMM_PROTOCOL_HCCS = 0
    COMM_PROTOCOL_ROCE = 1
    COMM_PROTOCOL_PCIE = 2
    COMM_PROTOCOL_SIO = 3
    COMM_PROTOCOL_UB_CTP = 4
    COMM_PROTOCOL_UBC_CTP = 4  # alias
    COMM_PROTOCOL_UBC_TP = 5
    COMM_PROTOCOL_UB_MEM = 6
    COMM_PROTOCOL_UBOE = 7
    COMM_PROTOCOL_HCCS_ONLY = 8
    COMM_PROTOCOL_UB_RTP = 9
    COMM_PROTOCOL_UBG = 9      # alias


class CommMemType(IntEnum):
    COMM_MEM_TYPE_INVALID = -1
    COMM_MEM_TYPE_DEVICE = 0
    COMM_MEM_TYPE_HOST = 1


class ThreadType(IntEnum):
    THREAD_TYPE_INVALID = -1
    THREAD_TYPE_TS = 0


class HcclDedicatedThreadType(IntEnum):
    HCCL_DED_THREAD_TYPE_INVALID = -1
    HCCL_DED_THREAD_TYPE_AICPU_LAUNCH = 0
    HCCL_DED_THREAD_TYPE_AICPU_LAUNCH_GE = 1
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_OPBASE = 2
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_ACLGRAPH = 3
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_GE = 4
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_DEVICE = 5


class CommTopo(IntEnum):
    COMM_TOPO_RESERVED = -1
    COMM_TOPO_CLOS = 0
    COMM_TOPO_1DMESH = 1
    COMM_TOPO_910_93 = 2
    COMM_TOPO_310P = 3
    COMM_TOPO_A2AXSERVER = 4
    COMM_TOPO_CUSTOM = 5


class CommAddrType(IntEnum):
    COMM_ADDR_TYPE_RESERVED = -1
    COMM_ADDR_TYPE_IP_V4 = 0
    COMM_ADDR_TYPE_IP_V6 = 1
    COMM_ADDR_TYPE_ID = 2
    COMM_ADDR_TYPE_EID = 3


class EndpointLocType(IntEnum):
    ENDPOINT_LOC_TYPE_RESERVED = -1
    ENDPOINT_LOC_TYPE_DEVICE = 0
    ENDPOINT_LOC_TYPE_HOST = 1


class HcclSendRecvType(IntEnum):
    HCCL_SEND = 0
    HCCL_RECV = 1
    HCCL_SEND_RECV_RESERVED = 2


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
C_ENUMS: tuple[tuple[type, str], ...] = (
    (RunMode, "acl/acl_rt.h"), (EventStatus, "acl/acl_rt.h"), (EventRecordedStatus, "acl/acl_rt.h"),
    (StreamStatus, "acl/acl_rt.h"), (CallbackBlockType, "acl/acl_rt.h"), (MemcpyKind, "acl/acl_rt.h"),
    (MemMallocPolicy, "acl/acl_rt.h"), (KernelType, "acl/acl_rt.h"), (LaunchKernelAttrId, "acl/acl_rt.h"),
    (EngineType, "acl/acl_rt.h"), (BinaryLoadOptionType, "acl/acl_rt.h"), (BinaryMagic, "acl/acl_rt.h"),
    (StreamFlag, "acl/acl_rt.h"), (EventFlag, "acl/acl_rt.h"), (NotifyFlag, "acl/acl_rt.h"),
    (HcclResult, "hccl/hccl_types.h"), (HcclCMDType, "hccl/hccl_types.h"),
    (HcclSendRecvType, "hccl/hccl_types.h"), (ReduceOp, "hccl/hccl_types.h"),
    (TransferType, "hccl/hcomm_primitives.h"),
    (CommEngine, "hcomm_res_defs.h"), (CommProtocol, "hcomm_res_defs.h"),
    (CommMemType, "hcomm_res_defs.h"), (CommAddrType, "hcomm_res_defs.h"),
    (EndpointLocType, "hcomm_res_defs.h"), (ThreadType, "hccl/hccl_res.h"),
    (HcclDedicatedThreadType, "hccl/hccl_res.h"), (CommTopo, "hccl/hccl_rank_graph.h"),
)
