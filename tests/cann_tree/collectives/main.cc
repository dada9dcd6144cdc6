/*
 * CANN-example-style program (one thread per device, no MPI): every rank all-reduces, then
 * all-gathers, then exchanges with its ring neighbours through HcclBatchSendRecv, and checks the
 * results itself. Prints "rankId: <r>, output: [...]" per rank and "PASS <n> ranks".
 */
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "hccl/hccl.h"
#include "hccl/hccl_types.h"

#define CHECK(expr)                                                                            \
    do {                                                                                       \
        int ret_ = (expr);                                                                     \
        if (ret_ != 0) {                                                                       \
            printf("%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, ret_);                \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

static int Sample(HcclRootInfo* rootInfo, uint32_t dev, uint32_t n)
{
    const uint64_t count = 1000;
    CHECK(aclrtSetDevice((int32_t)dev));
    HcclComm comm;
    CHECK(HcclCommInitRootInfo(n, rootInfo, dev, &comm));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    std::vector<float> host(count * n);
    for (uint64_t i = 0; i < count; i++) host[i] = (float)(dev + i % 7);
    void *in, *sum, *all, *prev;
    CHECK(aclrtMalloc(&in, count * 4, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK(aclrtMalloc(&sum, count * 4, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK(aclrtMalloc(&all, count * n * 4, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK(aclrtMalloc(&prev, count * 4, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK(aclrtMemcpy(in, count * 4, host.data(), count * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(HcclAllReduce(in, sum, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    CHECK(HcclAllGather(in, all, count, HCCL_DATA_TYPE_FP32, comm, stream));
    HcclSendRecvItem items[2] = {{HCCL_SEND, in, count, HCCL_DATA_TYPE_FP32, (dev + 1) % n},
                                 {HCCL_RECV, prev, count, HCCL_DATA_TYPE_FP32, (dev + n - 1) % n}};
    CHECK(HcclBatchSendRecv(items, 2, comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    int bad = 0;
    CHECK(aclrtMemcpy(host.data(), count * 4, sum, count * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < count; i++) bad += host[i] != (float)(n * (n - 1) / 2 + n * (i % 7));
    CHECK(aclrtMemcpy(host.data(), count * n * 4, all, count * n * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < count * n; i++) bad += host[i] != (float)(i / count + (i % count) % 7);
    CHECK(aclrtMemcpy(host.data(), count * 4, prev, count * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < count; i++) bad += host[i] != (float)((dev + n - 1) % n + i % 7);
    printf("rankId: %u, output: [ %g %g %g ... ]%s\n", dev, host[0], host[1], host[2], bad ? " WRONG" : "");
    CHECK(HcclCommDestroy(comm));
    CHECK(aclrtFree(in));
    CHECK(aclrtFree(sum));
    CHECK(aclrtFree(all));
    CHECK(aclrtFree(prev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice((int32_t)dev));
    return bad ? 1 : 0;
}

int main()
{
    CHECK(aclInit(NULL));
    uint32_t n;
    CHECK(aclrtGetDeviceCount(&n));
    printf("Found %u NPU device(s) available\n", n);
    CHECK(aclrtSetDevice(0));
    HcclRootInfo rootInfo;
    CHECK(HcclGetRootInfo(&rootInfo));
    std::atomic<int> fails{0};
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < n; i++) ts.emplace_back([&, i] { fails += Sample(&rootInfo, i, n); });
    for (auto& t : ts) t.join();
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s %u ranks\n", fails ? "FAIL" : "PASS", n);
    return fails ? 1 : 0;
}
