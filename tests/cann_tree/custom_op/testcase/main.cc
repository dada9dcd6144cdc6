/* Test program of the shift operator (CANN testcase style: one thread per device). */
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include <acl/acl_rt.h>
#include <hccl/hccl_comm.h>
#include <hccl/hccl_types.h>
#include <hccl_custom_shift.h>

#define CHECK(expr)                                                             \
    do {                                                                        \
        int ret_ = (expr);                                                      \
        if (ret_ != 0) {                                                        \
            printf("%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, ret_); \
            return 1;                                                           \
        }                                                                       \
    } while (0)

static int Sample(HcclRootInfo* root, uint32_t dev, uint32_t n)
{
    const uint64_t count = 300000; /* > the 1 MB HCCL buffer of the tests: sliced */
    CHECK(aclrtSetDevice((int32_t)dev));
    HcclComm comm;
    CHECK(HcclCommInitRootInfo(n, root, dev, &comm));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    std::vector<int32_t> host(count);
    for (uint64_t i = 0; i < count; i++) host[i] = (int32_t)(dev * 1000003 + i);
    void *in, *out;
    CHECK(aclrtMalloc(&in, count * 4, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK(aclrtMalloc(&out, count * 4, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK(aclrtMemcpy(in, count * 4, host.data(), count * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    for (int it = 0; it < 2; it++) CHECK(HcclShiftCustom(in, out, count, HCCL_DATA_TYPE_INT32, comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(host.data(), count * 4, out, count * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    uint32_t prev = (dev + n - 1) % n;
    int bad = 0;
    for (uint64_t i = 0; i < count; i++) bad += host[i] != (int32_t)(prev * 1000003 + i);
    printf("rankId: %u, output: [ %d %d ... ]%s\n", dev, host[0], host[1], bad ? " WRONG" : "");
    CHECK(HcclCommDestroy(comm));
    CHECK(aclrtFree(in));
    CHECK(aclrtFree(out));
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
    HcclRootInfo root;
    CHECK(HcclGetRootInfo(&root));
    std::atomic<int> fails{0};
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < n; i++) ts.emplace_back([&, i] { fails += Sample(&root, i, n); });
    for (auto& t : ts) t.join();
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("%s %u ranks\n", fails ? "FAIL" : "PASS", n);
    return fails ? 1 : 0;
}
