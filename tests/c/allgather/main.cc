/* Host side of the mesh AllGather test: one std::thread per device, resources in an engine context. */
#include <acl/acl_rt.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include "common.h"

#define ACLCHECK(x) do { int r_ = (x); if (r_) { printf("%s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #x, r_, aclGetRecentErrMsg()); return 1; } } while (0)

static const char* g_json;
static std::atomic<int> g_fail{0};

static int Setup(HcclComm comm, aclrtStream stream, OpParam& p) {
    AlgResourceCtx h;
    memset(&h, 0, sizeof h);
    ACLCHECK(HcclGetRankId(comm, &h.rank));
    ACLCHECK(HcclGetRankSize(comm, &h.rankSize));
    void* ctx;
    ACLCHECK(HcclEngineCtxCreate(comm, p.tag, COMM_ENGINE_AICPU_TS, sizeof h, &ctx));
    ACLCHECK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &p.cpuThread));
    ACLCHECK(HcclThreadExportToCommEngine(comm, 1, &p.cpuThread, COMM_ENGINE_AICPU_TS, &h.cpuThreadOnAicpu));
    ACLCHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, h.rankSize, h.rankSize, h.threads));
    ACLCHECK(HcclThreadExportToCommEngine(comm, 1, &h.threads[0], COMM_ENGINE_CPU_TS, &p.aicpuThreadOnCpu));
    std::vector<HcclChannelDesc> descs(h.rankSize - 1);
    ACLCHECK(HcclChannelDescInit(descs.data(), h.rankSize - 1));
    for (uint32_t i = 1; i < h.rankSize; i++) {
        descs[i - 1].remoteRank = (h.rank + i) % h.rankSize;
        descs[i - 1].channelProtocol = strstr(aclrtGetSocName(), "Ascend950") ? COMM_PROTOCOL_UBC_CTP : COMM_PROTOCOL_HCCS;
        descs[i - 1].notifyNum = CHANNEL_NOTIFIES;
    }
    std::vector<ChannelHandle> chs(h.rankSize - 1);
    if (h.rankSize > 1) ACLCHECK(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, descs.data(), h.rankSize - 1, chs.data()));
    for (uint32_t i = 1; i < h.rankSize; i++) {
        uint32_t peer = descs[i - 1].remoteRank;
        h.channels[peer] = chs[i - 1];
        ACLCHECK(HcclChannelGetHcclBuffer(comm, chs[i - 1], &h.remoteCcl[peer].addr, &h.remoteCcl[peer].size));
    }
    ACLCHECK(HcclGetHcclBuffer(comm, &h.localCcl.addr, &h.localCcl.size));
    ACLCHECK(HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, p.tag, &h, sizeof h, 0));
    p.resCtx = static_cast<AlgResourceCtx*>(ctx);
    return 0;
}

static int Sample(HcclRootInfo* root, uint32_t dev, uint32_t n, int iters) {
    ACLCHECK(aclrtSetDevice((int32_t)dev));
    HcclComm comm;
    ACLCHECK(HcclCommInitRootInfo(n, root, dev, &comm));
    aclrtStream stream;
    ACLCHECK(aclrtCreateStream(&stream));
    OpParam p;
    memset(&p, 0, sizeof p);
    snprintf(p.tag, sizeof p.tag, "allgather_mesh");
    ACLCHECK(HcclGetCommName(comm, p.commName));
    if (Setup(comm, stream, p)) return 1;
    p.count = 65537;
    size_t slice = p.count * sizeof(float);
    ACLCHECK(aclrtMalloc(&p.inputPtr, slice, ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMalloc(&p.outputPtr, slice * n, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtBinHandle bin;
    aclrtBinaryLoadOption opt;
    opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    opt.value.cpuKernelMode = 1;
    aclrtBinaryLoadOptions opts = {&opt, 1};
    ACLCHECK(aclrtBinaryLoadFromFile(g_json, &opts, &bin));
    aclrtFuncHandle fh;
    ACLCHECK(aclrtBinaryGetFunction(bin, "HcclAllGatherMeshKernel", &fh));
    std::vector<float> in(p.count), out(p.count * n);
    for (int it = 0; it < iters; it++) {
        for (uint64_t i = 0; i < p.count; i++) in[i] = (float)(dev * 100000 + i % 1000 + it);
        ACLCHECK(aclrtMemcpy(p.inputPtr, slice, in.data(), slice, ACL_MEMCPY_HOST_TO_DEVICE));
        ACLCHECK(HcommThreadNotifyRecordOnThread(p.cpuThread, p.aicpuThreadOnCpu, 0));
        aclrtArgsHandle ah;
        aclrtParamHandle ph;
        ACLCHECK(aclrtKernelArgsInit(fh, &ah));
        ACLCHECK(aclrtKernelArgsAppend(ah, &p, sizeof p, &ph));
        ACLCHECK(aclrtKernelArgsFinalize(ah));
        ACLCHECK(aclrtLaunchKernelWithConfig(fh, 1, stream, nullptr, ah, nullptr));
        ACLCHECK(HcommThreadNotifyWaitOnThread(p.cpuThread, 0, TIMEOUT_S));
        ACLCHECK(aclrtSynchronizeStream(stream));
        ACLCHECK(aclrtMemcpy(out.data(), slice * n, p.outputPtr, slice * n, ACL_MEMCPY_DEVICE_TO_HOST));
        for (uint32_t r = 0; r < n; r++)
            for (uint64_t i = 0; i < p.count; i++)
                if (out[r * p.count + i] != (float)(r * 100000 + i % 1000 + it)) {
                    printf("rank %u iteration %d: slice %u element %llu is %g\n", dev, it, r, (unsigned long long)i,
                           out[r * p.count + i]);
                    return 1;
                }
    }
    ACLCHECK(HcclCommDestroy(comm));
    ACLCHECK(aclrtDestroyStream(stream));
    ACLCHECK(aclrtResetDevice((int32_t)dev));
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) { printf("usage: %s <op-info json> [iterations]\n", argv[0]); return 2; }
    g_json = argv[1];
    int iters = argc > 2 ? atoi(argv[2]) : 3;
    ACLCHECK(aclInit(nullptr));
    uint32_t n;
    ACLCHECK(aclrtGetDeviceCount(&n));
    if (n > MAX_RANKS) n = MAX_RANKS;
    HcclRootInfo root;
    ACLCHECK(HcclGetRootInfo(&root));
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < n; i++) ts.emplace_back([&, i] { if (Sample(&root, i, n, iters)) g_fail++; });
    for (auto& t : ts) t.join();
    ACLCHECK(aclFinalize());
    printf("%s: %u ranks, %d iterations\n", g_fail ? "FAILED" : "OK", n, iters);
    return g_fail ? 1 : 0;
}
