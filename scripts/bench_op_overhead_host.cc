/*
 * bench_op_overhead_host.cc -- the C++ baseline of scripts/bench_op_overhead.py.
 *
 * Runs exactly the host sequence of hcomm_kit.op.CustomOp (thread-notify scheme, hcomm.md
 * §3.7-§3.11) for the ring-allreduce operator "bench" scaffolded by the script:
 *   once:  aclInit, aclrtSetDevice, root info through a file, HcclCommInitRootInfo, stream,
 *          binary load (CPU_KERNEL_MODE 1), threads + exports, ring channels, HCCL buffers,
 *          engine context, args handle in user memory (Append + Finalize)
 *   timed: aclrtMemcpy H2D, HcommThreadNotifyRecordOnThread "go", aclrtLaunchKernelWithConfig
 *          (timeout attr), HcommThreadNotifyWaitOnThread "done", aclrtSynchronizeStream,
 *          aclrtMemcpy D2H
 * Usage: bench_host RANK NRANKS ROOTINFO_FILE OP_INFO_JSON ITERS COUNT
 * Prints "us_per_call <value>" on rank 0.
 */
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hcomm_primitives.h>

#include "bench_param.h"

#define CHECK(call)                                                                       \
    do {                                                                                  \
        int rc_ = static_cast<int>(call);                                                 \
        if (rc_ != 0) {                                                                   \
            std::fprintf(stderr, "%s failed: %d (%s)\n", #call, rc_, aclGetRecentErrMsg()); \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 7) {
        std::fprintf(stderr, "usage: %s RANK NRANKS ROOTINFO_FILE OP_INFO_JSON ITERS COUNT\n", argv[0]);
        return 2;
    }
    const uint32_t rank = std::atoi(argv[1]), nranks = std::atoi(argv[2]);
    const char *rootFile = argv[3], *json = argv[4];
    const int iters = std::atoi(argv[5]);
    const uint64_t count = std::strtoull(argv[6], nullptr, 10);

    aclInit(nullptr);
    CHECK(aclrtSetDevice(rank));
    HcclRootInfo root;
    if (rank == 0) {
        CHECK(HcclGetRootInfo(&root));
        std::string tmp = std::string(rootFile) + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "wb");
        std::fwrite(&root, sizeof root, 1, f);
        std::fclose(f);
        std::rename(tmp.c_str(), rootFile);
    } else {
        for (;;) {
            FILE *f = std::fopen(rootFile, "rb");
            if (f != nullptr && std::fread(&root, sizeof root, 1, f) == 1) {
                std::fclose(f);
                break;
            }
            if (f != nullptr) std::fclose(f);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }
    HcclComm comm;
    CHECK(HcclCommInitRootInfo(nranks, &root, rank, &comm));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));

    /* Resources, as hcomm_kit.op._Resources does for a ring operator. */
    OpParam param;
    std::memset(&param, 0, sizeof param);
    AlgResourceCtx ctx;
    std::memset(&ctx, 0, sizeof ctx);
    const char *tag = "bench_c_host";
    std::snprintf(param.tag, sizeof param.tag, "%s", tag);
    CHECK(HcclGetCommName(comm, param.commName));
    CHECK(HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, stream, 1, &param.cpuThread));
    CHECK(HcclThreadExportToCommEngine(comm, 1, &param.cpuThread, COMM_ENGINE_AICPU_TS, &ctx.cpuThreadOnAicpu));
    CHECK(HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, 1, BENCH_THREAD_NOTIFY_NUM + 1, ctx.threads));
    ctx.aicpuThread = ctx.threads[0];
    CHECK(HcclThreadExportToCommEngine(comm, 1, &ctx.aicpuThread, COMM_ENGINE_CPU_TS, &param.aicpuThreadOnCpu));
    ctx.rank = rank;
    ctx.rankSize = nranks;
    ctx.threadNum = 1;
    ctx.channelNum = 2;
    ctx.notifyNumPerThread = BENCH_THREAD_NOTIFY_NUM + 1;
    CHECK(HcclGetHcclBuffer(comm, &ctx.localBuffer.addr, &ctx.localBuffer.size));
    HcclChannelDesc descs[2];
    HcclChannelDescInit(descs, 2);
    const uint32_t peers[2] = {(rank + nranks - 1) % nranks, (rank + 1) % nranks};
    for (int i = 0; i < 2; i++) {
        descs[i].remoteRank = peers[i];
        descs[i].channelProtocol = COMM_PROTOCOL_HCCS;
        descs[i].notifyNum = BENCH_CHANNEL_NOTIFY_NUM;
    }
    ChannelHandle handles[2];
    CHECK(HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, descs, 2, handles));
    for (int i = 0; i < 2; i++) {
        ctx.channels[i].remoteRank = peers[i];
        ctx.channels[i].notifyNum = BENCH_CHANNEL_NOTIFY_NUM;
        ctx.channels[i].handle = handles[i];
        CHECK(HcclChannelGetHcclBuffer(comm, handles[i], &ctx.channels[i].remoteBuffer.addr,
                                       &ctx.channels[i].remoteBuffer.size));
    }
    void *ctxDev = nullptr;
    CHECK(HcclEngineCtxCreate(comm, tag, COMM_ENGINE_AICPU_TS, sizeof ctx, &ctxDev));
    CHECK(aclrtMemcpy(ctxDev, sizeof ctx, &ctx, sizeof ctx, ACL_MEMCPY_HOST_TO_DEVICE));

    /* Kernel, buffers, args handle in user memory. */
    aclrtBinaryLoadOption opt;
    opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    opt.value.cpuKernelMode = 1;
    aclrtBinaryLoadOptions opts = {&opt, 1};
    aclrtBinHandle bin;
    CHECK(aclrtBinaryLoadFromFile(json, &opts, &bin));
    aclrtFuncHandle fn;
    CHECK(aclrtBinaryGetFunction(bin, "HcclBenchAicpuKernel", &fn));
    const size_t bytes = count * sizeof(float);
    void *in = nullptr, *out = nullptr;
    CHECK(aclrtMalloc(&in, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&out, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<float> hostIn(count, 1.0f + rank), hostOut(count);
    param.inputPtr = in;
    param.outputPtr = out;
    param.count = count;
    param.devType = 0;
    param.dataType = HCCL_DATA_TYPE_FP32;
    param.reduceOp = HCCL_REDUCE_SUM;
    param.notifyTimeout = 1836;
    param.resCtx = static_cast<AlgResourceCtx *>(ctxDev);
    size_t handleSize = 0, argsSize = 0;
    CHECK(aclrtKernelArgsGetHandleMemSize(fn, &handleSize));
    CHECK(aclrtKernelArgsGetMemSize(fn, (sizeof param + 7) / 8 * 8, &argsSize));
    std::vector<char> handleMem(handleSize), argsMem(argsSize);
    aclrtArgsHandle args = handleMem.data();
    aclrtParamHandle paramHandle;
    CHECK(aclrtKernelArgsInitByUserMem(fn, args, argsMem.data(), argsSize));
    CHECK(aclrtKernelArgsAppend(args, &param, sizeof param, &paramHandle));
    CHECK(aclrtKernelArgsFinalize(args));
    aclrtLaunchKernelAttr attr;
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    attr.value.timeout = 1836;
    aclrtLaunchKernelCfg cfg = {&attr, 1};

    auto once = [&]() {
        CHECK(aclrtMemcpy(in, 4096, hostIn.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(HcommThreadNotifyRecordOnThread(param.cpuThread, param.aicpuThreadOnCpu, 0));
        CHECK(aclrtLaunchKernelWithConfig(fn, 1, stream, &cfg, args, nullptr));
        CHECK(HcommThreadNotifyWaitOnThread(param.cpuThread, 0, 1836));
        CHECK(aclrtSynchronizeStream(stream));
        CHECK(aclrtMemcpy(hostOut.data(), bytes, out, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    };
    for (int i = 0; i < 20; i++) once();  /* warm-up */
    CHECK(HcclBarrier(comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) once();
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    if (hostOut[0] != static_cast<float>(nranks * (nranks + 1) / 2)) {
        std::fprintf(stderr, "rank %u: wrong result %f\n", rank, hostOut[0]);
        return 1;
    }
    if (rank == 0) std::printf("us_per_call %.3f\n", us);
    CHECK(HcclBarrier(comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    HcclCommDestroy(comm);
    return 0;
}
