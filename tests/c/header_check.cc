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

// ---------------------------------------------------------------- ACL (§1.5, §2)
static_assert(std::is_same<aclError, int>::value, "aclError is int");
CHECK_SIZE(aclrtStream, 8);
CHECK_SIZE(aclrtMemcpyKind, 4);
CHECK_SIZE(aclrtMemMallocPolicy, 4);
CHECK_SIZE(aclrtLaunchKernelAttrId, 4);
CHECK_SIZE(aclrtBinaryLoadOptionType, 4);

CHECK_SIZE(aclrtTimeoutUs, 8);
CHECK_ALIGN(aclrtTimeoutUs, 4);
CHECK_OFF(aclrtTimeoutUs, timeoutLow, 0);
CHECK_OFF(aclrtTimeoutUs, timeoutHigh, 4);

CHECK_SIZE(aclrtLaunchKernelAttrValue, 16);
CHECK_ALIGN(aclrtLaunchKernelAttrValue, 4);
CHECK_OFF(aclrtLaunchKernelAttrValue, schemMode, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, localMemorySize, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, dynUBufSize, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, engineType, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, blockDimOffset, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, isBlockTaskPrefetch, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, isDataDump, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, timeout, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, timeoutUs, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, enableProfiling, 0);
CHECK_OFF(aclrtLaunchKernelAttrValue, rsv, 0);

CHECK_SIZE(aclrtLaunchKernelAttr, 20);
CHECK_ALIGN(aclrtLaunchKernelAttr, 4);
CHECK_OFF(aclrtLaunchKernelAttr, id, 0);
CHECK_OFF(aclrtLaunchKernelAttr, value, 4);

CHECK_SIZE(aclrtLaunchKernelCfg, 16);
CHECK_ALIGN(aclrtLaunchKernelCfg, 8);
CHECK_OFF(aclrtLaunchKernelCfg, attrs, 0);
CHECK_OFF(aclrtLaunchKernelCfg, numAttrs, 8);

CHECK_SIZE(aclrtPlaceHolderInfo, 8);
CHECK_OFF(aclrtPlaceHolderInfo, addrOffset, 0);
CHECK_OFF(aclrtPlaceHolderInfo, dataOffset, 4);

CHECK_SIZE(aclrtBinaryLoadOptionValue, 16);
CHECK_OFF(aclrtBinaryLoadOptionValue, isLazyLoad, 0);
CHECK_OFF(aclrtBinaryLoadOptionValue, magic, 0);
CHECK_OFF(aclrtBinaryLoadOptionValue, cpuKernelMode, 0);
CHECK_OFF(aclrtBinaryLoadOptionValue, rsv, 0);
CHECK_SIZE(aclrtBinaryLoadOption, 20);
CHECK_OFF(aclrtBinaryLoadOption, type, 0);
CHECK_OFF(aclrtBinaryLoadOption, value, 4);
CHECK_SIZE(aclrtBinaryLoadOptions, 16);
CHECK_OFF(aclrtBinaryLoadOptions, options, 0);
CHECK_OFF(aclrtBinaryLoadOptions, numOpt, 8);

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

CHECK_SIZE(HcommBatchTransferDesc, 64);
CHECK_OFF(HcommBatchTransferDesc, transType, 0);
CHECK_OFF(HcommBatchTransferDesc, reserved, 4);
CHECK_OFF(HcommBatchTransferDesc, transferInfo, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.raws, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.write.len, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.write.dst, 16);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.write.src, 24);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.read.len, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.read.dst, 16);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.read.src, 24);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.reduce.count, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.reduce.dst, 16);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.reduce.src, 24);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.reduce.reduceOp, 32);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.reduce.dataType, 36);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.notifyRecord.notifyIdx, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeWithNotify.len, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeWithNotify.dst, 16);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeWithNotify.src, 24);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeWithNotify.notifyIdx, 32);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.count, 8);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.dst, 16);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.src, 24);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.reduceOp, 32);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.dataType, 36);
CHECK_OFF(HcommBatchTransferDesc, transferInfo.writeReduceWithNotify.notifyIdx, 40);

CHECK_SIZE(CommMem, 24);
CHECK_OFF(CommMem, type, 0);
CHECK_OFF(CommMem, addr, 8);
CHECK_OFF(CommMem, size, 16);

CHECK_SIZE(CommAbiHeader, 16);
CHECK_OFF(CommAbiHeader, version, 0);
CHECK_OFF(CommAbiHeader, magicWord, 4);
CHECK_OFF(CommAbiHeader, size, 8);
CHECK_OFF(CommAbiHeader, reserved, 12);

CHECK_SIZE(ThreadConfig, 32);
CHECK_OFF(ThreadConfig, header, 0);
CHECK_OFF(ThreadConfig, notifyNumPerThread, 16);
CHECK_OFF(ThreadConfig, reserved, 18);

CHECK_SIZE(CommAddr, 40);
CHECK_OFF(CommAddr, type, 0);
CHECK_OFF(CommAddr, raws, 4);
CHECK_OFF(CommAddr, addr, 4);
CHECK_OFF(CommAddr, addr6, 4);
CHECK_OFF(CommAddr, id, 4);
CHECK_OFF(CommAddr, eid, 4);
static_assert(COMM_ADDR_EID_LEN == 16, "eid len");

CHECK_SIZE(EndpointLoc, 64);
CHECK_OFF(EndpointLoc, locType, 0);
CHECK_OFF(EndpointLoc, raws, 4);
CHECK_OFF(EndpointLoc, device.devPhyId, 4);
CHECK_OFF(EndpointLoc, device.superPodIdx, 16);
CHECK_OFF(EndpointLoc, host.id, 4);

CHECK_SIZE(EndpointDesc, 160);
CHECK_OFF(EndpointDesc, protocol, 0);
CHECK_OFF(EndpointDesc, commAddr, 4);
CHECK_OFF(EndpointDesc, loc, 44);
CHECK_OFF(EndpointDesc, raws, 108);

CHECK_SIZE(HcclChannelDesc, 496);
CHECK_OFF(HcclChannelDesc, header, 0);
CHECK_OFF(HcclChannelDesc, remoteRank, 16);
CHECK_OFF(HcclChannelDesc, channelProtocol, 20);
CHECK_OFF(HcclChannelDesc, localEndpoint, 24);
CHECK_OFF(HcclChannelDesc, remoteEndpoint, 184);
CHECK_OFF(HcclChannelDesc, notifyNum, 344);
CHECK_OFF(HcclChannelDesc, memHandles, 352);
CHECK_OFF(HcclChannelDesc, memHandleNum, 360);
CHECK_OFF(HcclChannelDesc, raws, 364);
CHECK_OFF(HcclChannelDesc, roceAttr, 364);
CHECK_OFF(HcclChannelDesc, ubMemAttr.pathMode, 364);

CHECK_SIZE(CommLink, 464);
CHECK_OFF(CommLink, header, 0);
CHECK_OFF(CommLink, srcEndpointDesc, 16);
CHECK_OFF(CommLink, dstEndpointDesc, 176);
CHECK_OFF(CommLink, linkAttr, 336);
CHECK_OFF(CommLink, linkAttr.linkProtocol, 336);
CHECK_OFF(CommLink, linkAttr.hop, 340);

CHECK_SIZE(HcclKernelFuncInfo, 528);
CHECK_OFF(HcclKernelFuncInfo, kernelSoName, 0);
CHECK_OFF(HcclKernelFuncInfo, kernelFuncName, 256);
CHECK_OFF(HcclKernelFuncInfo, args, 512);
CHECK_OFF(HcclKernelFuncInfo, argSize, 520);

CHECK_SIZE(HcclKernelLaunchCfg, 128);
CHECK_OFF(HcclKernelLaunchCfg, timeOut, 16);
CHECK_OFF(HcclKernelLaunchCfg, reserved, 24);

CHECK_SIZE(HcclOpP2pDesc, 48);
CHECK_SIZE(HcclOpDesc, 360);
CHECK_OFF(HcclOpDesc, opDescType, 16);
CHECK_OFF(HcclOpDesc, opName, 20);
CHECK_OFF(HcclOpDesc, raws, 280);
CHECK_OFF(HcclOpDesc, p2p, 280);

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
