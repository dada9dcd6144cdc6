/* Data-plane micro-benchmark: 2 ranks (threads of one process, one device each).
 * Prints the half round trip of a channel-notify ping-pong and the bandwidth of a 64 MiB remote
 * write, next to single-core memcpy bandwidth measured in the same run. */
#include <acl/acl_rt.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hcomm_primitives.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct BenchParam {
    char tag[32];
    ThreadHandle thread, hostThread;
    ChannelHandle channel;
    void *dst, *src;
    uint64_t bytes;
    uint32_t iters, rank, mode;
};

#define CK(x) do { int r_ = (x); if (r_) { printf("%s -> %d %s\n", #x, r_, aclGetRecentErrMsg()); exit(1); } } while (0)
static const char* g_json;
static double g_result[2];

static double run(BenchParam& p, aclrtFuncHandle fh, aclrtStream s, ThreadHandle cpu, ThreadHandle aicpuOnCpu) {
    (void)aicpuOnCpu;
    aclrtArgsHandle ah;
    aclrtParamHandle ph;
    CK(aclrtKernelArgsInit(fh, &ah));
    CK(aclrtKernelArgsAppend(ah, &p, sizeof p, &ph));
    CK(aclrtKernelArgsFinalize(ah));
    auto t0 = std::chrono::steady_clock::now();
    CK(aclrtLaunchKernelWithConfig(fh, 1, s, nullptr, ah, nullptr));
    CK(HcommThreadNotifyWaitOnThread(cpu, 0, 60));
    CK(aclrtSynchronizeStream(s));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static void rank_main(HcclRootInfo* root, uint32_t r) {
    CK(aclrtSetDevice((int32_t)r));
    HcclComm comm;
    CK(HcclCommInitRootInfo(2, root, r, &comm));
    aclrtStream s;
    CK(aclrtCreateStream(&s));
    BenchParam p;
    memset(&p, 0, sizeof p);
    snprintf(p.tag, sizeof p.tag, "bench");
    p.rank = r;
    ThreadHandle cpu, aicpuOnCpu;
    CK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, s, 1, &cpu));
    CK(HcclThreadExportToCommEngine(comm, 1, &cpu, COMM_ENGINE_AICPU_TS, &p.hostThread));
    CK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, 1, &p.thread));
    CK(HcclThreadExportToCommEngine(comm, 1, &p.thread, COMM_ENGINE_CPU_TS, &aicpuOnCpu));
    HcclChannelDesc d;
    CK(HcclChannelDescInit(&d, 1));
    d.remoteRank = 1 - r;
    d.channelProtocol = COMM_PROTOCOL_HCCS;
    d.notifyNum = 1;
    CK(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, &d, 1, &p.channel));
    uint64_t sz;
    CK(HcclGetHcclBuffer(comm, &p.src, &sz));
    CK(HcclChannelGetHcclBuffer(comm, p.channel, &p.dst, &sz));
    aclrtBinaryLoadOption o;
    o.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    o.value.cpuKernelMode = 1;
    aclrtBinaryLoadOptions os = {&o, 1};
    aclrtBinHandle b;
    CK(aclrtBinaryLoadFromFile(g_json, &os, &b));
    aclrtFuncHandle fh;
    CK(aclrtBinaryGetFunction(b, "BenchKernel", &fh));
    /* ping-pong */
    p.mode = 0;
    p.iters = 1000;
    run(p, fh, s, cpu, aicpuOnCpu);
    p.iters = 20000;
    double t = run(p, fh, s, cpu, aicpuOnCpu);
    if (r == 0) g_result[0] = t / p.iters / 2 * 1e6;
    CK(HcclBarrier(comm, s));
    CK(aclrtSynchronizeStream(s));
    /* write bandwidth */
    p.mode = 1;
    p.bytes = 64ull << 20;
    memset(p.src, 1, p.bytes);
    p.iters = 2;
    run(p, fh, s, cpu, aicpuOnCpu);
    p.iters = 10;
    t = run(p, fh, s, cpu, aicpuOnCpu);
    if (r == 0) g_result[1] = (double)p.bytes * p.iters / t / 1e9;
    CK(HcclBarrier(comm, s));
    CK(aclrtSynchronizeStream(s));
    CK(HcclCommDestroy(comm));
    CK(aclrtDestroyStream(s));
    CK(aclrtResetDevice((int32_t)r));
}

int main(int argc, char** argv) {
    if (argc < 2) {
        printf("usage: %s <op-info json>\n", argv[0]);
        return 2;
    }
    g_json = argv[1];
    CK(aclInit(nullptr));
    HcclRootInfo root;
    CK(HcclGetRootInfo(&root));
    std::thread a(rank_main, &root, 0), b(rank_main, &root, 1);
    a.join();
    b.join();
    /* single-core memcpy bandwidth, same size, same run */
    size_t n = 64ull << 20;
    std::vector<char> x(n, 1), y(n, 2);
    memcpy(y.data(), x.data(), n);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; i++) memcpy((i & 1 ? x : y).data(), (i & 1 ? y : x).data(), n);
    double memcpy_gbs = 10.0 * n / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
    printf("channel notify ping-pong, half round trip: %.2f us (target <= 5 us)\n", g_result[0]);
    printf("remote write 64 MiB: %.2f GB/s; single-core memcpy: %.2f GB/s; ratio %.0f%% (target >= 70%%)\n", g_result[1],
           memcpy_gbs, 100.0 * g_result[1] / memcpy_gbs);
    CK(aclFinalize());
    return 0;
}
