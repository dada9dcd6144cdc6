// Compile-only check of the emulator's public headers (hcomm-kit).
// Every layout below is taken from /work/shared/spec/acl_runtime.md and hcomm.md.
//   g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I hcomm_kit/emu/include tests/c/header_check.cc
#include <cstddef>
#include <cstdint>

#include <securec.h>
#include <acl/acl.h>
#include <acl/acl_base.h>
#include <acl/acl_base_rt.h>
#include <acl/acl_base_mdl.h>
#include <acl/acl_rt.h>
#include <acl/error_codes/rt_error_codes.h>
#include <acl/error_codes/ge_error_codes.h>
#include <hcomm_res_defs.h>
#include <hccl/hcomm_res_defs.h>
#include <hcomm/hcomm_res_defs.h>
#include <hccl/hccl_types.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hccl_rank_graph.h>
#include <hccl/hccl_launch.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl.h>
#include <hccl/hcomm_primitives.h>
#include <hcomm/hcomm_primitives.h>

#include <type_traits>

#define CHECK_SIZE(T, n) static_assert(sizeof(T) == (n), "sizeof(" #T ") != " #n)
#define CHECK_ALIGN(T, n) static_assert(alignof(T) == (n), "alignof(" #T ") != " #n)
#define CHECK_OFF(T, m, n) static_assert(offsetof(T, m) == (n), "offsetof(" #T ", " #m ") != " #n)
// LAYOUT(T, size, (member, offset)...): sizeof(T) and the offset of every listed member, each its own
// static_assert (a failure names the member). HC_EACH applies CHECK_OFF to each pair, re-expanded by HC_EVAL
// (up to 64 pairs).
#define LAYOUT(T, n, ...) CHECK_SIZE(T, n); HC_EVAL(HC_EACH(T, __VA_ARGS__)) static_assert(true, "")
#define HC_EACH(T, pair, ...) HC_OFF_ARGS((T, HC_UNPACK pair)) __VA_OPT__(HC_EACH_AGAIN HC_PARENS(T, __VA_ARGS__))
#define HC_EACH_AGAIN() HC_EACH
#define HC_PARENS ()
#define HC_UNPACK(m, n) m, n
#define HC_OFF_ARGS(args) HC_OFF args
#define HC_OFF(T, m, n) CHECK_OFF(T, m, n);
#define HC_EVAL(...) HC_EVAL4(HC_EVAL4(HC_EVAL4(HC_EVAL4(__VA_ARGS__))))
#define HC_EVAL4(...) HC_EVAL3(HC_EVAL3(HC_EVAL3(HC_EVAL3(__VA_ARGS__))))
#define HC_EVAL3(...) HC_EVAL2(HC_EVAL2(HC_EVAL2(HC_EVAL2(__VA_ARGS__))))
#define HC_EVAL2(...) __VA_ARGS__

// ---------------------------------------------------------------- ACL (§1.5, §2)
static_assert(std::is_same<aclError, int>::value, "aclError is int");
CHECK_SIZE(aclrtStream, 8);
CHECK_SIZE(aclrtMemcpyKind, 4);
CHECK_SIZE(aclrtMemMallocPolicy, 4);
CHECK_SIZE(aclrtLaunchKernelAttrId, 4);
CHECK_SIZE(aclrtBinaryLoadOptionType, 4);

LAYOUT(aclrtTimeoutUs, 8, (timeoutLow, 0), (timeoutHigh, 4));
CHECK_ALIGN(aclrtTimeoutUs, 4);

LAYOUT(aclrtLaunchKernelAttrValue, 16, (schemMode, 0), (localMemorySize, 0), (dynUBufSize, 0), (engineType, 0),
       (blockDimOffset, 0), (isBlockTaskPrefetch, 0), (isDataDump, 0), (timeout, 0), (timeoutUs, 0),
       (enableProfiling, 0), (rsv, 0));
CHECK_ALIGN(aclrtLaunchKernelAttrValue, 4);

LAYOUT(aclrtLaunchKernelAttr, 20, (id, 0), (value, 4));
CHECK_ALIGN(aclrtLaunchKernelAttr, 4);

LAYOUT(aclrtLaunchKernelCfg, 16, (attrs, 0), (numAttrs, 8));
CHECK_ALIGN(aclrtLaunchKernelCfg, 8);

LAYOUT(aclrtPlaceHolderInfo, 8, (addrOffset, 0), (dataOffset, 4));

LAYOUT(aclrtBinaryLoadOptionValue, 16, (isLazyLoad, 0), (magic, 0), (cpuKernelMode, 0), (rsv, 0));
LAYOUT(aclrtBinaryLoadOption, 20, (type, 0), (value, 4));
LAYOUT(aclrtBinaryLoadOptions, 16, (options, 0), (numOpt, 8));

static_assert(ACL_MAJOR_VERSION == 1 && ACL_MINOR_VERSION == 17 && ACL_PATCH_VERSION == 0, "ACL version");
static_assert(ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT == 7 && ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US == 8, "attr ids");
static_assert(ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING == 9, "attr id 9");
static_assert(ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE == 3 && ACL_RT_BINARY_LOAD_OPT_MAGIC == 2, "load opts");
static_assert(ACL_HOST == 1 && ACL_DEVICE == 0, "run mode");
static_assert(ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE == 5 && ACL_MEMCPY_INTER_DEVICE_TO_DEVICE == 7, "memcpy kinds");
static_assert(ACL_MEM_MALLOC_HUGE1G_ONLY_P2P == 7 && ACL_MEM_ACCESS_USER_SPACE_READONLY == 0x100000, "policies");
static_assert(ACL_STREAM_STATUS_RESERVED == 0xFFFF, "stream status");
static_assert(ACL_EVENT_RECORDED_STATUS_COMPLETE == 1, "event status");
static_assert(ACL_KERNEL_TYPE_AICPU == 100 && ACL_FUNC_ATTR_KERNEL_TYPE == 1, "kernel type");
static_assert(ACL_STREAM_DEVICE_USE_ONLY == 0x20 && ACL_EVENT_IPC == 0x40 && ACL_NOTIFY_DEVICE_USE_ONLY == 0x1,
              "flags");
static_assert(ACL_RT_BINARY_MAGIC_ELF_AICORE == 0x43554245U, "magic");

// error codes (§2.7)
static_assert(ACL_SUCCESS == 0 && ACL_ERROR_NONE == 0, "success");
static_assert(ACL_ERROR_INVALID_PARAM == 100000 && ACL_ERROR_UNINITIALIZE == 100001, "1000xx");
static_assert(ACL_ERROR_REPEAT_INITIALIZE == 100002 && ACL_ERROR_REPEAT_FINALIZE == 100037, "1000xx");
static_assert(ACL_ERROR_DUMP_NOT_RUN == 100045 && ACL_ERROR_INVALID_BUNDLE_MODEL_ID == 148053, "1xxxxx");
static_assert(ACL_ERROR_PROF_MODULES_UNSUPPORTED == 200007 && ACL_ERROR_STORAGE_OVER_LIMIT == 300000, "2/3");
static_assert(ACL_ERROR_PROFILING_FAILURE == 500005, "5000xx");
static_assert(ACL_RT_SUCCESS == 0, "rt success");
static_assert(ACL_ERROR_RT_PARAM_INVALID == 107000 && ACL_ERROR_RT_THREAD_SUBSCRIBE == 107012, "1070xx");
static_assert(ACL_ERROR_RT_INVALID_HANDLE == 107017 && ACL_ERROR_RT_TASK_TIMEOUT == 107020, "1070xx");
static_assert(ACL_ERROR_STREAM_CAPTURE_CONFLICT == 107032 && ACL_ERROR_STREAM_TASK_GROUP_INTR == 107034, "odd");
static_assert(ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING == 107045, "107045");
static_assert(ACL_ERROR_RT_FEATURE_NOT_SUPPORT == 207000 && ACL_ERROR_RT_TIMEOUT == 207020, "2070xx");
static_assert(ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED == 207021, "207021");
static_assert(ACL_ERROR_RT_REPORT_TIMEOUT == 507012 && ACL_ERROR_RT_AICORE_TIMEOUT == 507014, "5070xx");
static_assert(ACL_ERROR_RT_AICPU_TIMEOUT == 507017 && ACL_ERROR_RT_AICPU_EXCEPTION == 507018, "5070xx");
static_assert(ACL_ERROR_RT_VECTOR_CORE_TIMEOUT == 507034 && ACL_ERROR_RT_CDQ_BATCH_ABNORMAL == 507037, "5070xx");
static_assert(ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW == 507045, "507045");
static_assert(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT == 507046 && ACL_ERROR_RT_EVENT_SYNC_TIMEOUT == 507047, "sync");
static_assert(ACL_ERROR_RT_SUSPECT_REMOTE_ERROR == 507057 && ACL_ERROR_RT_DRV_INTERNAL_ERROR == 507899, "5078");
static_assert(ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR == 507902 && ACL_ERROR_RT_COMM_OP_RETRY_FAIL == 507904, "5079");
static_assert(ACL_ERROR_SNAPSHOT_LOCK_TIMEOUT == 507905 && ACL_ERROR_HOST_MEMORY_NOT_REGISTERED == 507911, "odd");
static_assert(ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED == 507913 && ACL_ERROR_RT_CCU_EXCEPTION == 507916, "end");

// exact prototypes (a mismatch fails to compile)
static aclError (*const p_init)(const char *) = aclInit;
static aclError (*const p_fin_ref)(uint64_t *) = aclFinalizeReference;
static const char *(*const p_errmsg)() = aclGetRecentErrMsg;
static const char *(*const p_soc)() = aclrtGetSocName;
static aclError (*const p_launch_cfg)(aclrtFuncHandle, uint32_t, aclrtStream, aclrtLaunchKernelCfg *,
                                      aclrtArgsHandle, void *) = aclrtLaunchKernelWithConfig;
static aclError (*const p_host_args)(aclrtFuncHandle, uint32_t, aclrtStream, aclrtLaunchKernelCfg *, void *, size_t,
                                     aclrtPlaceHolderInfo *, size_t) = aclrtLaunchKernelWithHostArgs;
static aclError (*const p_args_array)(void *, uint32_t, aclrtStream, aclrtLaunchKernelCfg *, void **) =
    aclrtLaunchKernelWithArgsArray;
static aclError (*const p_reg_cpu)(const aclrtBinHandle, const char *, const char *, aclrtFuncHandle *) =
    aclrtRegisterCpuFunc;
static aclError (*const p_load_data)(const void *, size_t, const aclrtBinaryLoadOptions *, aclrtBinHandle *) =
    aclrtBinaryLoadFromData;
static aclError (*const p_wait_notify)(aclrtNotify, aclrtStream, uint32_t) = aclrtWaitAndResetNotify;
static aclError (*const p_notify_id)(aclrtNotify, uint32_t *) = aclrtGetNotifyId;
static aclError (*const p_host_func)(aclrtStream, aclrtHostFunc, void *) = aclrtLaunchHostFunc;
static aclError (*const p_fattr)(aclrtFuncHandle, aclrtFuncAttribute, int64_t *) = aclrtGetFunctionAttribute;
static aclError (*const p_memset)(void *, size_t, int32_t, size_t) = aclrtMemset;
static errno_t (*const p_memcpy_s)(void *, size_t, const void *, size_t) = memcpy_s;
static int (*const p_snprintf_s)(char *, size_t, size_t, const char *, ...) = snprintf_s;

// ---------------------------------------------------------------- HCCL / Hcomm
CHECK_SIZE(HcclResult, 4);
CHECK_SIZE(CommEngine, 4);
CHECK_SIZE(CommProtocol, 4);
CHECK_SIZE(HcommDataType, 4);
CHECK_SIZE(ThreadHandle, 8);
CHECK_SIZE(ChannelHandle, 8);
CHECK_SIZE(HcclRootInfo, 4108);
static_assert(HCCL_ROOT_INFO_BYTES == 4108 && COMM_NAME_MAX_LENGTH == 128, "root info");
static_assert(HCCL_COMM_DEFAULT_BUFFSIZE == 200, "buffsize");
static_assert(HCCL_RES_TAG_MAX_LEN == 255, "tag len");

LAYOUT(HcommBatchTransferDesc, 64, (transType, 0), (reserved, 4), (transferInfo, 8), (transferInfo.raws, 8),
       (transferInfo.write.len, 8), (transferInfo.write.dst, 16), (transferInfo.write.src, 24),
       (transferInfo.read.len, 8), (transferInfo.read.dst, 16), (transferInfo.read.src, 24),
       (transferInfo.reduce.count, 8), (transferInfo.reduce.dst, 16), (transferInfo.reduce.src, 24),
       (transferInfo.reduce.reduceOp, 32), (transferInfo.reduce.dataType, 36),
       (transferInfo.notifyRecord.notifyIdx, 8), (transferInfo.writeWithNotify.len, 8),
       (transferInfo.writeWithNotify.dst, 16), (transferInfo.writeWithNotify.src, 24),
       (transferInfo.writeWithNotify.notifyIdx, 32), (transferInfo.writeReduceWithNotify.count, 8),
       (transferInfo.writeReduceWithNotify.dst, 16), (transferInfo.writeReduceWithNotify.src, 24),
       (transferInfo.writeReduceWithNotify.reduceOp, 32), (transferInfo.writeReduceWithNotify.dataType, 36),
       (transferInfo.writeReduceWithNotify.notifyIdx, 40));

LAYOUT(CommMem, 24, (type, 0), (addr, 8), (size, 16));

LAYOUT(CommAbiHeader, 16, (version, 0), (magicWord, 4), (size, 8), (reserved, 12));

LAYOUT(ThreadConfig, 32, (header, 0), (notifyNumPerThread, 16), (reserved, 18));

LAYOUT(CommAddr, 40, (type, 0), (raws, 4), (addr, 4), (addr6, 4), (id, 4), (eid, 4));
static_assert(COMM_ADDR_EID_LEN == 16, "eid len");

LAYOUT(EndpointLoc, 64, (locType, 0), (raws, 4), (device.devPhyId, 4), (device.superPodIdx, 16), (host.id, 4));

LAYOUT(EndpointDesc, 160, (protocol, 0), (commAddr, 4), (loc, 44), (raws, 108));

LAYOUT(HcclChannelDesc, 496, (header, 0), (remoteRank, 16), (channelProtocol, 20), (localEndpoint, 24),
       (remoteEndpoint, 184), (notifyNum, 344), (memHandles, 352), (memHandleNum, 360), (raws, 364), (roceAttr, 364),
       (ubMemAttr.pathMode, 364));

LAYOUT(CommLink, 464, (header, 0), (srcEndpointDesc, 16), (dstEndpointDesc, 176), (linkAttr, 336),
       (linkAttr.linkProtocol, 336), (linkAttr.hop, 340));

LAYOUT(HcclKernelFuncInfo, 528, (kernelSoName, 0), (kernelFuncName, 256), (args, 512), (argSize, 520));

LAYOUT(HcclKernelLaunchCfg, 128, (timeOut, 16), (reserved, 24));

CHECK_SIZE(HcclOpP2pDesc, 48);
LAYOUT(HcclOpDesc, 360, (opDescType, 16), (opName, 20), (raws, 280), (p2p, 280));

// enum values (§2.2-§2.4)
static_assert(HCCL_SUCCESS == 0 && HCCL_E_PARA == 1 && HCCL_E_PTR == 2 && HCCL_E_INTERNAL == 4, "HcclResult");
static_assert(HCCL_E_NOT_SUPPORT == 5 && HCCL_E_TIMEOUT == 9 && HCCL_E_OOM == 24, "HcclResult");
static_assert(HCCL_E_IN_STATUS == 1041 && HCCL_E_RESERVED == 1042, "HcclResult");
static_assert(HCCL_DATA_TYPE_BFP16 == 11 && HCCL_DATA_TYPE_HIF8 == 14 && HCCL_DATA_TYPE_FP8E8M0 == 17, "dtype");
static_assert(HCCL_DATA_TYPE_RESERVED == 255, "dtype");
static_assert(HCOMM_DATA_TYPE_INT128 == 12 && HCOMM_DATA_TYPE_FP8E4M3 == 15 && HCOMM_DATA_TYPE_RESERVED == 255,
              "hcomm dtype");
static_assert(HCCL_REDUCE_MIN == 3 && HCCL_REDUCE_RESERVED == 255 && HCOMM_REDUCE_PROD == 1, "reduce");
static_assert(HCOMM_TRANSFER_TYPE_INVALID == -1 && HCOMM_TRANSFER_TYPE_NOTIFY_RECORD == 6, "transfer");
static_assert(HCCL_CMD_ALLREDUCE == 2 && HCCL_CMD_ALLGATHER == 6 && HCCL_CMD_BATCH_WRITE == 18, "cmd");
static_assert(HCCL_CMD_HALF_ALLTOALLV == 20 && HCCL_CMD_ALL == 21 && HCCL_CMD_INTER_GROUP_SYNC == 101, "cmd");
static_assert(HCCL_CMD_BARRIER == 103 && HCCL_CMD_MAX == 104, "cmd");
static_assert(HCCL_SEND == 0 && HCCL_RECV == 1 && HCCL_SEND_RECV_RESERVED == 2, "send recv");
static_assert(COMM_ENGINE_RESERVED == -1 && COMM_ENGINE_CPU_TS == 1 && COMM_ENGINE_AICPU_TS == 3, "engine");
static_assert(COMM_ENGINE_CCU == 5, "engine");
static_assert(COMM_PROTOCOL_UB_CTP == 4 && COMM_PROTOCOL_UBC_CTP == 4 && COMM_PROTOCOL_UBOE == 7, "protocol");
static_assert(COMM_PROTOCOL_UB_RTP == 9 && COMM_PROTOCOL_UBG == 9 && COMM_PROTOCOL_HCCS_ONLY == 8, "protocol");
static_assert(COMM_MEM_TYPE_INVALID == -1 && COMM_MEM_TYPE_HOST == 1, "mem type");
static_assert(THREAD_TYPE_INVALID == -1 && THREAD_TYPE_TS == 0, "thread type");
static_assert(HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_DEVICE == 5, "ded thread");
static_assert(COMM_TOPO_RESERVED == -1 && COMM_TOPO_CUSTOM == 5, "topo");
static_assert(COMM_ADDR_TYPE_EID == 3 && ENDPOINT_LOC_TYPE_HOST == 1, "endpoint enums");

// exact prototypes (device side, §3.1-§3.4)
static int32_t (*const p_lcopy)(ThreadHandle, void *, const void *, uint64_t) = HcommLocalCopyOnThread;
static int32_t (*const p_lreduce)(ThreadHandle, void *, const void *, uint64_t, HcommDataType, HcommReduceOp) =
    HcommLocalReduceOnThread;
static int32_t (*const p_wrnotify)(ThreadHandle, ChannelHandle, void *, const void *, uint64_t, uint32_t) =
    HcommWriteWithNotifyOnThread;
static int32_t (*const p_batch)(ThreadHandle, ChannelHandle, const HcommBatchTransferDesc *, uint32_t) =
    HcommBatchTransferOnThread;
static int32_t (*const p_aclwait)(ThreadHandle, uint64_t, uint32_t) = HcommAclrtNotifyWaitOnThread;
static int32_t (*const p_settimeout)(float) = HcommSetNotifyWaitTimeOut;
static HcommResult (*const p_tc_start)(const char *, void **, uint64_t *, uint64_t) = HcommAicpuTsTaskCacheStart;
static HcommResult (*const p_tc_lookup)(const char *, bool *) = HcommAicpuTsTaskCacheLookup;

// exact prototypes (host side, §3.6-§3.10)
static HcclResult (*const p_initroot)(uint32_t, const HcclRootInfo *, uint32_t, HcclComm *) = HcclCommInitRootInfo;
static HcclResult (*const p_tacq)(HcclComm, CommEngine, uint32_t, uint32_t, ThreadHandle *) = HcclThreadAcquire;
static HcclResult (*const p_tacqcfg)(HcclComm, CommEngine, uint32_t, ThreadType, const ThreadConfig *,
                                     ThreadHandle *) = HcclThreadAcquireWithConfig;
static HcclResult (*const p_texp)(HcclComm, uint32_t, const ThreadHandle *, CommEngine, ThreadHandle *) =
    HcclThreadExportToCommEngine;
static HcclResult (*const p_chacq)(HcclComm, CommEngine, const HcclChannelDesc *, uint32_t, ChannelHandle *) =
    HcclChannelAcquire;
static HcclResult (*const p_ctxcopy)(HcclComm, CommEngine, const char *, const void *, uint64_t, uint64_t) =
    HcclEngineCtxCopy;
static HcclResult (*const p_devmem)(HcclComm, const char *, uint64_t *, void **, bool *) = HcclDevMemAcquire;
static HcclResult (*const p_links)(HcclComm, uint32_t, uint32_t, uint32_t, CommLink **, uint32_t *) =
    HcclRankGraphGetLinks;
static HcclResult (*const p_aicpulaunch)(HcclComm, const HcclOpDesc *, const HcclKernelFuncInfo *, ThreadHandle,
                                         aclrtStream, const HcclKernelLaunchCfg *) = HcclAicpuKernelLaunch;

// header-inline helpers are usable from C++ and behave as specified
static inline bool inline_helpers_compile()
{
    ThreadConfig tc[2];
    HcclChannelDesc cd;
    HcclCommConfig cc;
    CommLink link;
    HcclOpDesc od;
    HcclKernelLaunchCfg klc;
    EndpointDesc ep;
    HcclCommConfigInit(&cc);
    return ThreadConfigInit(tc, 2) == 0 && HcclChannelDescInit(&cd, 1) == HCCL_SUCCESS &&
           CommLinkInit(&link, 1) == HCCL_SUCCESS && HcclOpDescInit(&od) == HCCL_SUCCESS &&
           HcclKernelLaunchCfgInit(&klc) == HCCL_SUCCESS && EndpointDescInit(&ep, 1) == 0 &&
           cd.header.magicWord == 0x0f0f0f0fU && tc[1].header.magicWord == 0x0f0f0f2fU &&
           link.header.magicWord == 0x0f0e0f0fU;
}

int main()
{
    const void *keep[] = {
        reinterpret_cast<const void *>(p_init),       reinterpret_cast<const void *>(p_fin_ref),
        reinterpret_cast<const void *>(p_errmsg),     reinterpret_cast<const void *>(p_soc),
        reinterpret_cast<const void *>(p_launch_cfg), reinterpret_cast<const void *>(p_host_args),
        reinterpret_cast<const void *>(p_args_array), reinterpret_cast<const void *>(p_reg_cpu),
        reinterpret_cast<const void *>(p_load_data),  reinterpret_cast<const void *>(p_wait_notify),
        reinterpret_cast<const void *>(p_notify_id),  reinterpret_cast<const void *>(p_host_func),
        reinterpret_cast<const void *>(p_fattr),      reinterpret_cast<const void *>(p_memset),
        reinterpret_cast<const void *>(p_memcpy_s),   reinterpret_cast<const void *>(p_snprintf_s),
        reinterpret_cast<const void *>(p_lcopy),      reinterpret_cast<const void *>(p_lreduce),
        reinterpret_cast<const void *>(p_wrnotify),   reinterpret_cast<const void *>(p_batch),
        reinterpret_cast<const void *>(p_aclwait),    reinterpret_cast<const void *>(p_settimeout),
        reinterpret_cast<const void *>(p_tc_start),   reinterpret_cast<const void *>(p_tc_lookup),
        reinterpret_cast<const void *>(p_initroot),   reinterpret_cast<const void *>(p_tacq),
        reinterpret_cast<const void *>(p_tacqcfg),    reinterpret_cast<const void *>(p_texp),
        reinterpret_cast<const void *>(p_chacq),      reinterpret_cast<const void *>(p_ctxcopy),
        reinterpret_cast<const void *>(p_devmem),     reinterpret_cast<const void *>(p_links),
        reinterpret_cast<const void *>(p_aicpulaunch),
    };
    (void)keep;
    return inline_helpers_compile() ? 0 : 1;
}
