/* The HCCL C API's algorithm choice (hccl/algo_select.cc): one std::thread per rank, communicators
 * from a root info, topology from the environment (HCOMM_KIT_TOPOLOGY, HCOMM_KIT_LINKS_DOWN).
 *
 * Usage: capi <nranks> <count> <expected HcclResult>
 * Each rank asks HcommKitAlgoSelect what HcclAllReduce(count fp32, sum) runs ("SEL rank R <json>"),
 * makes the call, and checks its code; on success the result (every rank's input is rank + 1, so
 * each element is n (n + 1) / 2). Prints "RC rank R <code> <message>" and "PASS", exit 0; else exit 1. */
#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hcomm_kit/emu_ext.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

static std::atomic<int> g_failures{0};
static std::mutex g_print_m;
static uint32_t g_n = 0;
static uint64_t g_count = 0;
static int g_want = 0;
static HcclRootInfo g_root;

static void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char* fmt, ...) {
    std::lock_guard<std::mutex> g(g_print_m);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    g_failures++;
}
#define FAIL(...) fail(__VA_ARGS__)

static void rank_main(uint32_t rank) {
    if (aclrtSetDevice((int32_t)rank) != ACL_SUCCESS) return FAIL("rank %u: aclrtSetDevice", rank);
    HcclComm comm = nullptr;
    if (HcclCommInitRootInfo(g_n, &g_root, rank, &comm) != HCCL_SUCCESS)
        return FAIL("rank %u: HcclCommInitRootInfo: %s", rank, aclGetRecentErrMsg());
    aclrtStream stream = nullptr;
    aclrtCreateStream(&stream);
    char sel[8192];
    int32_t len = HcommKitAlgoSelect(comm, HCCL_CMD_ALLREDUCE, g_count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, nullptr,
                                     sel, sizeof sel);
    const size_t bytes = g_count * sizeof(float);
    std::vector<float> host(g_count, (float)(rank + 1));
    void *in = nullptr, *out = nullptr;
    aclrtMalloc(&in, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    aclrtMalloc(&out, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    aclrtMemcpy(in, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
    int rc = HcclAllReduce(in, out, g_count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream);
    const char* err = rc ? aclGetRecentErrMsg() : nullptr;
    std::string msg = err ? err : "";
    if (rc == HCCL_SUCCESS && aclrtSynchronizeStream(stream) != ACL_SUCCESS) rc = -1;
    {
        std::lock_guard<std::mutex> g(g_print_m);
        printf("SEL rank %u %s\n", rank, len > 0 ? sel : "-");
        printf("RC rank %u %d %s\n", rank, rc, msg.c_str());
    }
    if (rc != g_want) FAIL("rank %u: HcclAllReduce returned %d, expected %d", rank, rc, g_want);
    if (rc == HCCL_SUCCESS) {
        aclrtMemcpy(host.data(), bytes, out, bytes, ACL_MEMCPY_DEVICE_TO_HOST);
        const float want = (float)(g_n * (g_n + 1) / 2);
        for (uint64_t i = 0; i < g_count; i++)
            if (host[i] != want) {
                FAIL("rank %u: element %llu is %g, expected %g", rank, (unsigned long long)i, host[i], want);
                break;
            }
    }
    aclrtFree(in);
    aclrtFree(out);
    aclrtDestroyStream(stream);
    HcclCommDestroy(comm);
    aclrtResetDevice((int32_t)rank);
}

int main(int argc, char** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s <nranks> <count> <expected HcclResult>\n", argv[0]);
        return 2;
    }
    g_n = (uint32_t)atoi(argv[1]);
    g_count = strtoull(argv[2], nullptr, 10);
    g_want = atoi(argv[3]);
    if (aclInit(nullptr) != ACL_SUCCESS || HcclGetRootInfo(&g_root) != HCCL_SUCCESS) {
        fprintf(stderr, "init failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    std::vector<std::thread> ts;
    for (uint32_t r = 0; r < g_n; r++) ts.emplace_back(rank_main, r);
    for (auto& t : ts) t.join();
    aclFinalize();
    if (g_failures) return 1;
    printf("PASS\n");
    return 0;
}
