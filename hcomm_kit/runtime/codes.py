"""THE error-code table: every ACL, ACL runtime, aclnn and HCCL return code, number -> name.

One source of truth for names and short meanings (``acl_runtime.md`` §2.7, ``hcomm.md`` §2.3).
The layout test compares every number here with the C headers the emulator ships.

Example::

    >>> from hcomm_kit.runtime import codes
    >>> codes.acl_name(507018)
    'ACL_ERROR_RT_AICPU_EXCEPTION'
    >>> codes.ACL_ERROR_INVALID_PARAM
    100000
    >>> codes.hccl_name(9)
    'HCCL_E_TIMEOUT'
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

__all__ = [
    "ACL_CODES",
    "ACL_RT_CODES",
    "ACLNN_CODES",
    "HCCL_CODES",
    "ACL_ALIASES",
    "acl_name",
    "hccl_name",
    "acl_meaning",
    "hccl_meaning",
    "acl_code",
    "hccl_code",
]


def _table(prefix: str, text: str) -> dict[int, str]:
    """Parse ``"100000 INVALID_PARAM, 100001 UNINITIALIZE, ..."``; a name containing ``ACL_`` is kept whole."""
    out: dict[int, str] = {}
    for item in text.replace("\n", " ").split(","):
        item = item.strip()
        if not item:
            continue
        num, name = item.split()
        out[int(num)] = name if name.startswith(("ACL_", "HCCL_")) else prefix + name
    return out


# ---- ACL layer: acl_base_rt.h (acl_runtime.md §2.7.1) ------------------------------------------
_ACL = _table("ACL_ERROR_", """
0 ACL_SUCCESS,
100000 INVALID_PARAM, 100001 UNINITIALIZE, 100002 REPEAT_INITIALIZE, 100003 INVALID_FILE,
100004 WRITE_FILE, 100005 INVALID_FILE_SIZE, 100006 PARSE_FILE, 100007 FILE_MISSING_ATTR,
100008 FILE_ATTR_INVALID, 100009 INVALID_DUMP_CONFIG, 100010 INVALID_PROFILING_CONFIG,
100011 INVALID_MODEL_ID, 100012 DESERIALIZE_MODEL, 100013 PARSE_MODEL, 100014 READ_MODEL_FAILURE,
100015 MODEL_SIZE_INVALID, 100016 MODEL_MISSING_ATTR, 100017 MODEL_INPUT_NOT_MATCH,
100018 MODEL_OUTPUT_NOT_MATCH, 100019 MODEL_NOT_DYNAMIC, 100020 OP_TYPE_NOT_MATCH,
100021 OP_INPUT_NOT_MATCH, 100022 OP_OUTPUT_NOT_MATCH, 100023 OP_ATTR_NOT_MATCH, 100024 OP_NOT_FOUND,
100025 OP_LOAD_FAILED, 100026 UNSUPPORTED_DATA_TYPE, 100027 FORMAT_NOT_MATCH,
100028 BIN_SELECTOR_NOT_REGISTERED, 100029 KERNEL_NOT_FOUND, 100030 BIN_SELECTOR_ALREADY_REGISTERED,
100031 KERNEL_ALREADY_REGISTERED, 100032 INVALID_QUEUE_ID, 100033 REPEAT_SUBSCRIBE,
100034 STREAM_NOT_SUBSCRIBE, 100035 THREAD_NOT_SUBSCRIBE, 100036 WAIT_CALLBACK_TIMEOUT,
100037 REPEAT_FINALIZE, 100038 NOT_STATIC_AIPP, 100039 COMPILING_STUB_MODE, 100040 GROUP_NOT_SET,
100041 GROUP_NOT_CREATE, 100042 PROF_ALREADY_RUN, 100043 PROF_NOT_RUN, 100044 DUMP_ALREADY_RUN,
100045 DUMP_NOT_RUN,
148046 PROF_REPEAT_SUBSCRIBE, 148047 PROF_API_CONFLICT, 148048 INVALID_MAX_OPQUEUE_NUM_CONFIG,
148049 INVALID_OPP_PATH, 148050 OP_UNSUPPORTED_DYNAMIC, 148051 RELATIVE_RESOURCE_NOT_CLEARED,
148052 UNSUPPORTED_JPEG, 148053 INVALID_BUNDLE_MODEL_ID,
200000 BAD_ALLOC, 200001 API_NOT_SUPPORT, 200002 INVALID_DEVICE, 200003 MEMORY_ADDRESS_UNALIGNED,
200004 RESOURCE_NOT_MATCH, 200005 INVALID_RESOURCE_HANDLE, 200006 FEATURE_UNSUPPORTED,
200007 PROF_MODULES_UNSUPPORTED,
300000 STORAGE_OVER_LIMIT,
500000 INTERNAL_ERROR, 500001 FAILURE, 500002 GE_FAILURE, 500003 RT_FAILURE, 500004 DRV_FAILURE,
500005 PROFILING_FAILURE
""")

# ---- Runtime layer: error_codes/rt_error_codes.h (acl_runtime.md §2.7.2) ----------------------
_ACL_RT = _table("ACL_ERROR_RT_", """
107000 PARAM_INVALID, 107001 INVALID_DEVICEID, 107002 CONTEXT_NULL, 107003 STREAM_CONTEXT,
107004 MODEL_CONTEXT, 107005 STREAM_MODEL, 107006 EVENT_TIMESTAMP_INVALID,
107007 EVENT_TIMESTAMP_REVERSAL, 107008 ADDR_UNALIGNED, 107009 FILE_OPEN, 107010 FILE_WRITE,
107011 STREAM_SUBSCRIBE, 107012 THREAD_SUBSCRIBE, 107013 GROUP_NOT_SET, 107014 GROUP_NOT_CREATE,
107015 STREAM_NO_CB_REG, 107016 INVALID_MEMORY_TYPE, 107017 INVALID_HANDLE, 107018 INVALID_MALLOC_TYPE,
107019 WAIT_TIMEOUT, 107020 TASK_TIMEOUT, 107021 SYSPARAMOPT_NOT_SET, 107022 DEVICE_TASK_ABORT,
107023 STREAM_ABORT,
107024 CAPTURE_DEPENDENCY, 107025 STREAM_UNJOINED, 107026 MODEL_CAPTURED, 107027 STREAM_CAPTURED,
107028 EVENT_CAPTURED, 107029 STREAM_NOT_CAPTURED, 107030 CAPTURE_MODE_NOT_SUPPORT,
107031 STREAM_CAPTURE_IMPLICIT, 107032 ACL_ERROR_STREAM_CAPTURE_CONFLICT,
107033 ACL_ERROR_STREAM_TASK_GROUP_STATUS, 107034 ACL_ERROR_STREAM_TASK_GROUP_INTR,
107035 TASK_ABORT_STOP, 107036 STREAM_CAPTURE_UNMATCHED, 107037 MODEL_RUNNING,
107038 STREAM_CAPTURE_WRONG_THREAD, 107039 INSUFFICIENT_INPUT_ARRAY, 107040 MODEL_UPDATE_FAILED,
107041 CAPTURE_MODE_BLOCK_ASYNC, 107042 SYMBOL_NOT_FOUND, 107043 INVALID_SYMBOL,
107044 INVALID_DEVICE_FUNCTION, 107045 SUB_ACLGRAPH_IS_CAPTURING,
207000 FEATURE_NOT_SUPPORT, 207001 MEMORY_ALLOCATION, 207002 MEMORY_FREE, 207003 AICORE_OVER_FLOW,
207004 NO_DEVICE, 207005 RESOURCE_ALLOC_FAIL, 207006 NO_PERMISSION, 207007 NO_EVENT_RESOURCE,
207008 NO_STREAM_RESOURCE, 207009 NO_NOTIFY_RESOURCE, 207010 NO_MODEL_RESOURCE,
207011 NO_CDQ_RESOURCE, 207012 OVER_LIMIT, 207013 QUEUE_EMPTY, 207014 QUEUE_FULL,
207015 REPEATED_INIT, 207016 AIVEC_OVER_FLOW, 207017 OVER_FLOW, 207018 DEVICE_OOM,
207019 FEATURE_NOT_SUPPORT_UPDATE_OP, 207020 TIMEOUT, 207021 LINK_TYPE_NOT_SUPPORTED,
507000 INTERNAL_ERROR, 507001 TS_ERROR, 507002 STREAM_TASK_FULL, 507003 STREAM_TASK_EMPTY,
507004 STREAM_NOT_COMPLETE, 507005 END_OF_SEQUENCE, 507006 EVENT_NOT_COMPLETE,
507007 CONTEXT_RELEASE_ERROR, 507008 SOC_VERSION, 507009 TASK_TYPE_NOT_SUPPORT,
507010 LOST_HEARTBEAT, 507011 MODEL_EXECUTE, 507012 REPORT_TIMEOUT, 507013 SYS_DMA,
507014 AICORE_TIMEOUT, 507015 AICORE_EXCEPTION, 507016 AICORE_TRAP_EXCEPTION, 507017 AICPU_TIMEOUT,
507018 AICPU_EXCEPTION, 507019 AICPU_DATADUMP_RSP_ERR, 507020 AICPU_MODEL_RSP_ERR,
507021 PROFILING_ERROR, 507022 IPC_ERROR, 507023 MODEL_ABORT_NORMAL, 507024 KERNEL_UNREGISTERING,
507025 RINGBUFFER_NOT_INIT, 507026 RINGBUFFER_NO_DATA, 507027 KERNEL_LOOKUP, 507028 KERNEL_DUPLICATE,
507029 DEBUG_REGISTER_FAIL, 507030 DEBUG_UNREGISTER_FAIL, 507031 LABEL_CONTEXT,
507032 PROGRAM_USE_OUT, 507033 DEV_SETUP_ERROR, 507034 VECTOR_CORE_TIMEOUT,
507035 VECTOR_CORE_EXCEPTION, 507036 VECTOR_CORE_TRAP_EXCEPTION, 507037 CDQ_BATCH_ABNORMAL,
507038 DIE_MODE_CHANGE_ERROR, 507039 DIE_SET_ERROR, 507040 INVALID_DIEID, 507041 DIE_MODE_NOT_SET,
507042 AICORE_TRAP_READ_OVERFLOW, 507043 AICORE_TRAP_WRITE_OVERFLOW,
507044 VECTOR_CORE_TRAP_READ_OVERFLOW, 507045 VECTOR_CORE_TRAP_WRITE_OVERFLOW,
507046 STREAM_SYNC_TIMEOUT, 507047 EVENT_SYNC_TIMEOUT, 507048 FFTS_PLUS_TIMEOUT,
507049 FFTS_PLUS_EXCEPTION, 507050 FFTS_PLUS_TRAP_EXCEPTION, 507051 SEND_MSG, 507052 COPY_DATA,
507053 DEVICE_MEM_ERROR, 507054 HBM_MULTI_BIT_ECC_ERROR, 507055 SUSPECT_DEVICE_MEM_ERROR,
507056 LINK_ERROR, 507057 SUSPECT_REMOTE_ERROR,
507899 DRV_INTERNAL_ERROR, 507900 AICPU_INTERNAL_ERROR, 507901 SOCKET_CLOSE,
507902 AICPU_INFO_LOAD_RSP_ERR, 507903 STREAM_CAPTURE_INVALIDATED, 507904 COMM_OP_RETRY_FAIL,
507905 ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT, 507906 ACL_ERROR_SNAPSHOT_LOCK_FAILED,
507907 ACL_ERROR_SNAPSHOT_UNLOCK_FAILED, 507908 ACL_ERROR_SNAPSHOT_BACKUP_FAILED,
507909 ACL_ERROR_SNAPSHOT_RESTORE_FAILED, 507910 ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
507911 ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, 507912 ACL_ERROR_SNAPSHOT_CALLBACK_FAILED,
507913 ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED, 507914 L3_PORT_ERROR, 507915 CCU_TIMEOUT,
507916 CCU_EXCEPTION
""")

# ---- aclnn status (acl_runtime.md §2.7.4) ------------------------------------------------------
# (and CANN's "aclnn Return Codes" page, tables 1 and 2; the emulator's aclnn/aclnn_base.h)
_ACLNN = {0: "ACLNN_SUCCESS", 161001: "ACLNN_ERR_PARAM_NULLPTR", 161002: "ACLNN_ERR_PARAM_INVALID",
          361001: "ACLNN_ERR_RUNTIME_ERROR", 561000: "ACLNN_ERR_INNER", 561001: "ACLNN_ERR_INNER_INFERSHAPE_ERROR",
          561002: "ACLNN_ERR_INNER_TILING_ERROR", 561003: "ACLNN_ERR_INNER_FIND_KERNEL_ERROR",
          561101: "ACLNN_ERR_INNER_CREATE_EXECUTOR", 561102: "ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR",
          561103: "ACLNN_ERR_INNER_NULLPTR"}

# ---- HcclResult: hccl/hccl_types.h (hcomm.md §2.3) ---------------------------------------------
_HCCL = _table("HCCL_E_", """
0 HCCL_SUCCESS, 1 PARA, 2 PTR, 3 MEMORY, 4 INTERNAL, 5 NOT_SUPPORT, 6 NOT_FOUND, 7 UNAVAIL,
8 SYSCALL, 9 TIMEOUT, 10 OPEN_FILE_FAILURE, 11 TCP_CONNECT, 12 ROCE_CONNECT, 13 TCP_TRANSFER,
14 ROCE_TRANSFER, 15 RUNTIME, 16 DRV, 17 PROFILING, 18 CCE, 19 NETWORK, 20 AGAIN, 21 REMOTE,
22 SUSPENDING, 23 OPRETRY_FAIL, 24 OOM, 1041 IN_STATUS, 1042 RESERVED
""")

#: Second names of a number (header aliases), name -> number.
ACL_ALIASES: Mapping[str, int] = MappingProxyType({"ACL_ERROR_NONE": 0, "ACL_RT_SUCCESS": 0})

ACL_CODES: Mapping[int, str] = MappingProxyType(_ACL)
ACL_RT_CODES: Mapping[int, str] = MappingProxyType(_ACL_RT)
ACLNN_CODES: Mapping[int, str] = MappingProxyType(_ACLNN)
HCCL_CODES: Mapping[int, str] = MappingProxyType(_HCCL)

#: hcomm-kit emulator extension codes (hcomm_kit/emu_ext.h): never returned by CANN.
HCOMM_KIT_ERROR_CHECK = 509001   # the notify checker's finding (HCOMM_KIT_CHECK)
HCOMM_KIT_CODES: Mapping[int, str] = MappingProxyType({HCOMM_KIT_ERROR_CHECK: "HCOMM_KIT_ERROR_CHECK"})
#: HcommKitCommAbortReason's value for a communicator aborted by the collective-call check
#: (HCOMM_KIT_ABORT_MISMATCH; 0: not aborted).
HCOMM_KIT_ABORT_MISMATCH = 7

_ACL_ALL: dict[int, str] = {**_ACL, **_ACL_RT, **HCOMM_KIT_CODES}
_ACL_BY_NAME: dict[str, int] = {**{v: k for k, v in _ACL_ALL.items()}, **ACL_ALIASES}
_HCCL_BY_NAME: dict[str, int] = {v: k for k, v in _HCCL.items()}

# Short meanings (DOC-ERR, hccl_types.h comments); used in messages when the runtime has none.
_ACL_MEANING: dict[int, str] = {
    0: "success",
    100000: "invalid parameter (NULL pointer, zero size, bad enum value)",
    100001: "ACL is not initialised: call aclInit first",
    100002: "aclInit called again (harmless, reference counted)",
    100037: "aclFinalize called again",
    107000: "invalid value detected inside the runtime",
    107012: "no stream is subscribed to this thread (aclrtSubscribeReport)",
    107017: "invalid handle",
    107019: "a wait timed out; the caller may retry",
    107020: "a task timed out; check the task orchestration or raise the timeout",
    200000: "memory allocation failed",
    207000: "feature not supported, or call made in the wrong order",
    207018: "device out of memory",
    207020: "driver timeout",
    500000: "internal error",
    507012: "no report arrived from the task scheduler in time (aclrtProcessReport)",
    507014: "AI Core task timed out",
    507015: "AI Core task raised an exception",
    507017: "AI CPU kernel exceeded its launch timeout",
    507018: "AI CPU kernel failed (non-zero return value or crash)",
    507034: "Vector Core task timed out",
    507046: "the stream still had unfinished tasks when the timeout expired",
    507047: "the event had still not completed when the timeout expired",
    507900: "AI CPU internal error",
    509001: "hcomm-kit's notify checker found a protocol bug in the operator (HCOMM_KIT_CHECK)",
}
_HCCL_MEANING: dict[int, str] = {
    0: "success", 1: "parameter error", 2: "empty pointer", 3: "memory error", 4: "internal error",
    5: "feature not supported", 6: "resource not found", 7: "resource unavailable",
    8: "system call failed", 9: "timeout", 10: "open file failed", 11: "TCP connect failed",
    12: "RoCE connect failed", 13: "TCP transfer failed", 14: "RoCE transfer failed",
    15: "runtime API call failed", 16: "driver API call failed", 17: "profiling API call failed",
    18: "CCE API call failed", 19: "network API call failed", 20: "try again", 21: "error CQE",
    22: "communicator suspending", 23: "op retry constraint", 24: "out of memory",
    1041: "the error information is in the status", 1042: "reserved",
}


def acl_name(code: int) -> str:
    """Symbolic name of an ACL / ACL runtime / aclnn code, or ``'ACL_ERROR_UNKNOWN(<code>)'``."""
    name = _ACL_ALL.get(code) or _ACLNN.get(code)
    return name if name is not None else f"ACL_ERROR_UNKNOWN({code})"


def hccl_name(code: int) -> str:
    """Symbolic name of an ``HcclResult``, or ``'HCCL_E_UNKNOWN(<code>)'``."""
    name = _HCCL.get(code)
    return name if name is not None else f"HCCL_E_UNKNOWN({code})"


def acl_meaning(code: int) -> str:
    """One-line meaning of an ACL code (empty when none is recorded)."""
    return _ACL_MEANING.get(code, "")


def hccl_meaning(code: int) -> str:
    """One-line meaning of an ``HcclResult`` (empty when none is recorded)."""
    return _HCCL_MEANING.get(code, "")


def acl_code(name: str) -> int:
    """Number of a symbolic ACL code name. Raises KeyError for an unknown name."""
    return _ACL_BY_NAME[name]


def hccl_code(name: str) -> int:
    """Number of a symbolic ``HcclResult`` name. Raises KeyError for an unknown name."""
    return _HCCL_BY_NAME[name]


# Module-level constants: codes.ACL_ERROR_INVALID_PARAM == 100000, codes.HCCL_E_TIMEOUT == 9, ...
globals().update(_ACL_BY_NAME)
globals().update({v: k for k, v in _ACLNN.items()})
globals().update(_HCCL_BY_NAME)
