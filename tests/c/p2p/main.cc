/* Host side, CANN testcase style: one std::thread per device, HcclCommInitRootInfo, custom send/recv.
 * Usage: p2p_main <json path> [iterations]  -- ranks = aclrtGetDeviceCount() (HCOMM_KIT_DEVICE_COUNT). */
#include <acl/acl_rt.h>
#include <hccl/hccl_types.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hcomm_primitives.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <atomic>
#include "common.h"

#define ACLCHECK(x) do { aclError r_ = (x); if (r_ != ACL_SUCCESS) { printf("%s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #x, r_, aclGetRecentErrMsg()); return 1; } } while (0)
#define HCCLCHECK(x) do { int r_ = (x); if (r_ != HCCL_SUCCESS) { printf("%s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #x, r_, aclGetRecentErrMsg()); return 1; } } while (0)

static const char* g_json;
static int g_iters = 3;
static std::atomic<int> g_fail{0};
thread_local aclrtBinHandle g_bin = nullptr;

static int Launch(OpParam& param, aclrtStream stream) {
    if (!g_bin) {
        aclrtBinaryLoadOptions opts = {};
        aclrtBinaryLoadOption opt;
        opts.numOpt = 1;
        opts.options = &opt;
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = 0;  /* .so found on HCOMM_KIT_KERNEL_PATH, like the device package */
        ACLCHECK(aclrtBinaryLoadFromFile(g_json, &opts, &g_bin));
    }
    HCCLCHECK(HcommThreadNotifyRecordOnThread(param.cpuThread, param.aicpuThreadOnCpu, 0));
    aclrtFuncHandle fh;
    ACLCHECK(aclrtBinaryGetFunction(g_bin, "HcclLaunchP2PAicpuKernel", &fh));
    aclrtArgsHandle ah;
    aclrtParamHandle ph;
    ACLCHECK(aclrtKernelArgsInit(fh, &ah));
    ACLCHECK(aclrtKernelArgsAppend(ah, &param, sizeof(OpParam), &ph));
    ACLCHECK(aclrtKernelArgsFinalize(ah));
    aclrtLaunchKernelAttr attr;
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    attr.value.timeout = 27 * 68;
    aclrtLaunchKernelCfg cfg;
    cfg.numAttrs = 1;
    cfg.attrs = &attr;
    ACLCHECK(aclrtLaunchKernelWithConfig(fh, 1, stream, &cfg, ah, nullptr));
    HCCLCHECK(HcommThreadNotifyWaitOnThread(param.cpuThread, 0, CUSTOM_TIMEOUT));
    return 0;
}

static int SendRecv(void* buf, uint64_t count, uint32_t peer, bool send, HcclComm comm, aclrtStream stream) {
    OpParam param;
    memset(&param, 0, sizeof param);
    snprintf(param.tag, sizeof param.tag, "%s", "hccl_custom_p2p");
    HCCLCHECK(HcclGetCommName(comm, param.commName));
    (send ? param.inputPtr : param.outputPtr) = buf;
    param.count = count;
    param.dataType = HCCL_DATA_TYPE_FP32;
    param.opType = send ? HCCL_CMD_SEND : HCCL_CMD_RECEIVE;
    std::string soc = aclrtGetSocName();
    param.devType = soc.find("Ascend950") != std::string::npos ? DEVICE_TYPE_A5
                    : soc.find("Ascend910_93") != std::string::npos ? DEVICE_TYPE_A3 : DEVICE_TYPE_A2;
    void* ctx = nullptr;
    uint64_t size = sizeof(AlgResourceCtx);
    if (HcclEngineCtxGet(comm, param.tag, COMM_ENGINE_AICPU, &ctx, &size) == HCCL_SUCCESS) {
        param.resCtx = static_cast<AlgResourceCtx*>(ctx);
        /* cpuThread lives in OpParam only: re-acquire (returns the cached thread for this stream). */
        HCCLCHECK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &param.cpuThread));
        AlgResourceCtx host;
        ACLCHECK(aclrtMemcpy(&host, size, ctx, size, ACL_MEMCPY_DEVICE_TO_HOST));
        HCCLCHECK(HcclThreadExportToCommEngine(comm, 1, &host.aicpuThread, COMM_ENGINE_CPU_TS, &param.aicpuThreadOnCpu));
    } else {
        HCCLCHECK(HcclEngineCtxCreate(comm, param.tag, COMM_ENGINE_AICPU, size, &ctx));
        param.resCtx = static_cast<AlgResourceCtx*>(ctx);
        AlgResourceCtx host;
        HCCLCHECK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &param.cpuThread));
        HCCLCHECK(HcclThreadExportToCommEngine(comm, 1, &param.cpuThread, COMM_ENGINE_AICPU_TS, &host.cpuThreadOnAicpu));
        HCCLCHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 1, &host.aicpuThread));
        HCCLCHECK(HcclThreadExportToCommEngine(comm, 1, &host.aicpuThread, COMM_ENGINE_CPU_TS, &param.aicpuThreadOnCpu));
        HcclChannelDesc desc;
        HCCLCHECK(HcclChannelDescInit(&desc, 1));
        desc.remoteRank = peer;
        desc.channelProtocol = param.devType == DEVICE_TYPE_A5 ? COMM_PROTOCOL_UBC_CTP : COMM_PROTOCOL_HCCS;
        desc.notifyNum = 2;
        HCCLCHECK(HcclChannelAcquire(comm, COMM_ENGINE_AICPU, &desc, 1, &host.channelHandle));
        HCCLCHECK(HcclGetHcclBuffer(comm, &host.localBuffer.addr, &host.localBuffer.size));
        HCCLCHECK(HcclChannelGetHcclBuffer(comm, host.channelHandle, &host.remoteBuffer.addr, &host.remoteBuffer.size));
        ACLCHECK(aclrtMemcpy(param.resCtx, size, &host, size, ACL_MEMCPY_HOST_TO_DEVICE));
    }
    return Launch(param, stream);
}

static int Sample(HcclRootInfo* root, uint32_t dev, uint32_t n) {
    ACLCHECK(aclrtSetDevice((int32_t)dev));
    HcclComm comm;
    HCCLCHECK(HcclCommInitRootInfo(n, root, dev, &comm));
    aclrtStream stream;
    ACLCHECK(aclrtCreateStream(&stream));
    uint64_t count = 1000003;
    size_t bytes = count * sizeof(float);
    void* buf;
    ACLCHECK(aclrtMalloc(&buf, bytes, ACL_MEM_MALLOC_HUGE_ONLY));
    std::vector<float> host(count);
    bool sender = dev % 2 == 0;
    bool idle = !sender && dev == 0;
    if (sender && dev + 1 >= n) idle = true;  /* odd rank count: the last rank has no partner */
    for (int it = 0; it < g_iters && !idle; it++) {
        if (sender) {
            for (uint64_t i = 0; i < count; i++) host[i] = (float)(dev * 1000 + it) + (float)(i % 97);
            ACLCHECK(aclrtMemcpy(buf, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
            if (SendRecv(buf, count, dev + 1, true, comm, stream)) return 1;
        } else {
            ACLCHECK(aclrtMemset(buf, bytes, 0, bytes));
            if (SendRecv(buf, count, dev - 1, false, comm, stream)) return 1;
        }
        ACLCHECK(aclrtSynchronizeStream(stream));
        if (!sender) {
            ACLCHECK(aclrtMemcpy(host.data(), bytes, buf, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
            for (uint64_t i = 0; i < count; i++) {
                float want = (float)((dev - 1) * 1000 + it) + (float)(i % 97);
                if (host[i] != want) {
                    printf("rank %u iteration %d: element %llu is %g, expected %g\n", dev, it, (unsigned long long)i, host[i], want);
                    return 1;
                }
            }
        }
    }
    ACLCHECK(aclrtSynchronizeStream(stream));
    HCCLCHECK(HcclCommDestroy(comm));
    ACLCHECK(aclrtFree(buf));
    ACLCHECK(aclrtDestroyStream(stream));
    ACLCHECK(aclrtResetDevice((int32_t)dev));
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) { printf("usage: %s <op-info json> [iterations]\n", argv[0]); return 2; }
    g_json = argv[1];
    if (argc > 2) g_iters = atoi(argv[2]);
    ACLCHECK(aclInit(nullptr));
    uint32_t n;
    ACLCHECK(aclrtGetDeviceCount(&n));
    ACLCHECK(aclrtSetDevice(0));
    HcclRootInfo root;
    HCCLCHECK(HcclGetRootInfo(&root));
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < n; i++)
        ts.emplace_back([&, i] { if (Sample(&root, i, n)) g_fail++; });
    for (auto& t : ts) t.join();
    ACLCHECK(aclrtResetDevice(0));
    ACLCHECK(aclFinalize());
    printf("%s: %u ranks, %d iterations\n", g_fail ? "FAILED" : "OK", n, g_iters);
    return g_fail ? 1 : 0;
}
