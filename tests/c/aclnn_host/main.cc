/*
 * A C++ host calling a scaffolded operator (ring_sum, `hcomm-kit new ring_sum --pattern
 * ring-allreduce`) through its aclnn interface, written as on Ascend: aclnn_ring_sum.h, the
 * aclnn meta API (aclnn/acl_meta.h), HcclCommInitRootInfo, HcclGetCommName as the group, a stream.
 * Build: g++ main.cc -I<emu include> -I<op_api/include> -L<op_api/lib> -lcust_opapi_ring_sum
 *        -lnnopbase -lhccl -lascendcl
 *
 *   aclnn_host threads        ranks = threads of this process, one per device (HCOMM_KIT_DEVICE_COUNT)
 *   aclnn_host mpi <dir>      ranks = processes under mpirun (root info through <dir>/root.bin)
 *   aclnn_host product        phase one only, on a product op.toml does not list: must be refused
 *
 * Cases per rank, every output element checked against the sum / max over ranks computed here:
 * contiguous fp32 sum; int32 max; a strided input view (a column of a matrix, stride 2, offset 1)
 * into an output view at an offset inside a larger buffer whose other bytes must stay untouched;
 * a repeatable executor run 3 times on new data; every refusal of phase one (and of phase two's
 * workspace checks) with its ACLNN code and a message in aclGetRecentErrMsg().
 * Prints "OK rank <r>" per rank.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnn_ring_sum.h"
#include "hccl/hccl.h"

#define FAILF(...)                                                    \
    do {                                                              \
        fprintf(stderr, "rank %u: ", R.rank);                         \
        fprintf(stderr, __VA_ARGS__);                                 \
        fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);            \
        return 1;                                                     \
    } while (0)
#define CHECK(x)                                                                                      \
    do {                                                                                              \
        int rc_ = (int)(x);                                                                           \
        if (rc_ != 0) FAILF("%s returned %d: %s", #x, rc_, aclGetRecentErrMsg());                     \
    } while (0)

namespace {

struct Rank {
    uint32_t rank = 0, n = 1;
    int32_t device = 0;
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    char group[128] = {};
};

float ValF(uint32_t r, uint64_t i, int run) { return (float)((r * 7 + i * 3 + run) % 19) - 5.0f; }
int32_t ValI(uint32_t r, uint64_t i) { return (int32_t)((r * 11 + i * 5) % 97) - 40; }

aclTensor* Tensor1D(int64_t n, aclDataType dt, int64_t stride, int64_t offset, int64_t storage, void* data)
{
    int64_t dims[1] = {n}, st[1] = {stride}, sd[1] = {storage};
    return aclCreateTensor(dims, 1, dt, st, offset, ACL_FORMAT_ND, sd, 1, data);
}

/* Phase one + workspace + phase two + synchronize. */
int Call(Rank& R, aclTensor* x, int64_t op, aclTensor* out)
{
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    CHECK(aclnnRingSumGetWorkspaceSize(x, op, 0, R.group, out, &ws, &ex));
    void* w = nullptr;
    if (ws) CHECK(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclnnRingSum(w, ws, ex, R.stream));
    CHECK(aclrtSynchronizeStream(R.stream));
    if (w) CHECK(aclrtFree(w));
    return 0;
}

int ContiguousSum(Rank& R)
{
    const uint64_t n = 3000;
    std::vector<float> h(n), o(n);
    for (uint64_t i = 0; i < n; i++) h[i] = ValF(R.rank, i, 0);
    void *dx, *dy;
    CHECK(aclrtMalloc(&dx, n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dx, n * 4, h.data(), n * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    int64_t dims[2] = {30, 100};
    aclTensor* x = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, dx);
    aclTensor* y = aclCreateTensor(dims, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, dims, 2, dy);
    if (!x || !y) FAILF("aclCreateTensor: %s", aclGetRecentErrMsg());
    int64_t* vd = nullptr;
    uint64_t vn = 0;
    CHECK(aclGetViewShape(x, &vd, &vn));
    if (vn != 2 || vd[0] != 30 || vd[1] != 100) FAILF("aclGetViewShape");
    delete[] vd;
    aclDataType dt;
    CHECK(aclGetDataType(x, &dt));
    if (dt != ACL_FLOAT) FAILF("aclGetDataType");
    if (Call(R, x, HCCL_REDUCE_SUM, y)) return 1;
    CHECK(aclrtMemcpy(o.data(), n * 4, dy, n * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < n; i++) {
        float want = 0;
        for (uint32_t r = 0; r < R.n; r++) want += ValF(r, i, 0);
        if (o[i] != want) FAILF("contiguous sum: out[%llu] = %g, want %g", (unsigned long long)i, o[i], want);
    }
    /* in place: out is x */
    if (Call(R, x, HCCL_REDUCE_SUM, x)) return 1;
    CHECK(aclrtMemcpy(o.data(), n * 4, dx, n * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < n; i++) {
        float want = 0;
        for (uint32_t r = 0; r < R.n; r++) want += ValF(r, i, 0);
        if (o[i] != want) FAILF("in-place sum: out[%llu] = %g, want %g", (unsigned long long)i, o[i], want);
    }
    CHECK(aclDestroyTensor(x));
    CHECK(aclDestroyTensor(y));
    CHECK(aclrtFree(dx));
    CHECK(aclrtFree(dy));
    return 0;
}

int IntMax(Rank& R)
{
    const uint64_t n = 777;
    std::vector<int32_t> h(n), o(n);
    for (uint64_t i = 0; i < n; i++) h[i] = ValI(R.rank, i);
    void *dx, *dy;
    CHECK(aclrtMalloc(&dx, n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dx, n * 4, h.data(), n * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    aclTensor* x = Tensor1D(n, ACL_INT32, 1, 0, n, dx);
    aclTensor* y = Tensor1D(n, ACL_INT32, 1, 0, n, dy);
    if (Call(R, x, HCCL_REDUCE_MAX, y)) return 1;
    CHECK(aclrtMemcpy(o.data(), n * 4, dy, n * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < n; i++) {
        int32_t want = ValI(0, i);
        for (uint32_t r = 1; r < R.n; r++) want = std::max(want, ValI(r, i));
        if (o[i] != want) FAILF("int32 max: out[%llu] = %d, want %d", (unsigned long long)i, o[i], want);
    }
    aclDestroyTensor(x);
    aclDestroyTensor(y);
    aclrtFree(dx);
    aclrtFree(dy);
    return 0;
}

/* x = column 1 of a [n, 2] fp32 matrix (stride 2, offset 1); out = n elements at offset 5 of a
 * buffer of n + 10 elements filled with a sentinel. */
int StridedViews(Rank& R)
{
    const uint64_t n = 500;
    std::vector<float> m(2 * n), o(n + 10, 0.0f);
    for (uint64_t i = 0; i < n; i++) {
        m[2 * i] = 1e6f;
        m[2 * i + 1] = ValF(R.rank, i, 1);
    }
    std::vector<float> sentinel(n + 10, -12345.0f);
    void *dm, *dy;
    CHECK(aclrtMalloc(&dm, 2 * n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, (n + 10) * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dm, 2 * n * 4, m.data(), 2 * n * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(dy, (n + 10) * 4, sentinel.data(), (n + 10) * 4, ACL_MEMCPY_HOST_TO_DEVICE));
    int64_t xd[1] = {(int64_t)n}, xs[1] = {2}, xsd[2] = {(int64_t)n, 2};
    aclTensor* x = aclCreateTensor(xd, 1, ACL_FLOAT, xs, 1, ACL_FORMAT_ND, xsd, 2, dm);
    aclTensor* y = Tensor1D(n, ACL_FLOAT, 1, 5, n + 10, dy);
    if (!x || !y) FAILF("aclCreateTensor: %s", aclGetRecentErrMsg());
    int64_t off = -1;
    CHECK(aclGetViewOffset(x, &off));
    if (off != 1) FAILF("aclGetViewOffset = %lld", (long long)off);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    CHECK(aclnnRingSumGetWorkspaceSize(x, HCCL_REDUCE_SUM, 0, R.group, y, &ws, &ex));
    if (ws < n * 4) FAILF("a strided input needs staging: workspace %llu < %llu", (unsigned long long)ws,
                          (unsigned long long)(n * 4));
    void* w = nullptr;
    CHECK(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclnnRingSum(w, ws, ex, R.stream));
    CHECK(aclrtSynchronizeStream(R.stream));
    CHECK(aclrtMemcpy(o.data(), (n + 10) * 4, dy, (n + 10) * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < n + 10; i++) {
        float want = -12345.0f;
        if (i >= 5 && i < n + 5) {
            want = 0;
            for (uint32_t r = 0; r < R.n; r++) want += ValF(r, i - 5, 1);
        }
        if (o[i] != want) FAILF("strided: out buffer[%llu] = %g, want %g", (unsigned long long)i, o[i], want);
    }
    /* a strided output too: the result lands in column 0 of the matrix */
    aclTensor* y2 = aclCreateTensor(xd, 1, ACL_FLOAT, xs, 0, ACL_FORMAT_ND, xsd, 2, dm);
    if (Call(R, x, HCCL_REDUCE_SUM, y2)) return 1;
    CHECK(aclrtMemcpy(m.data(), 2 * n * 4, dm, 2 * n * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    for (uint64_t i = 0; i < n; i++) {
        float want = 0;
        for (uint32_t r = 0; r < R.n; r++) want += ValF(r, i, 1);
        if (m[2 * i] != want || m[2 * i + 1] != ValF(R.rank, i, 1))
            FAILF("strided out: row %llu = (%g, %g), want (%g, %g)", (unsigned long long)i, m[2 * i], m[2 * i + 1], want,
                  ValF(R.rank, i, 1));
    }
    aclDestroyTensor(x);
    aclDestroyTensor(y);
    aclDestroyTensor(y2);
    aclrtFree(w);
    aclrtFree(dm);
    aclrtFree(dy);
    return 0;
}

int Repeatable(Rank& R)
{
    const uint64_t n = 1024;
    std::vector<float> h(n), o(n);
    void *dx, *dy;
    CHECK(aclrtMalloc(&dx, n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, n * 4, ACL_MEM_MALLOC_HUGE_FIRST));
    aclTensor* x = Tensor1D(n, ACL_FLOAT, 1, 0, n, dx);
    aclTensor* y = Tensor1D(n, ACL_FLOAT, 1, 0, n, dy);
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    CHECK(aclnnRingSumGetWorkspaceSize(x, HCCL_REDUCE_SUM, 0, R.group, y, &ws, &ex));
    CHECK(aclSetAclOpExecutorRepeatable(ex));
    for (int run = 0; run < 3; run++) {
        for (uint64_t i = 0; i < n; i++) h[i] = ValF(R.rank, i, run + 2);
        CHECK(aclrtMemcpy(dx, n * 4, h.data(), n * 4, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclnnRingSum(nullptr, 0, ex, R.stream));
        CHECK(aclrtSynchronizeStream(R.stream));
        CHECK(aclrtMemcpy(o.data(), n * 4, dy, n * 4, ACL_MEMCPY_DEVICE_TO_HOST));
        for (uint64_t i = 0; i < n; i++) {
            float want = 0;
            for (uint32_t r = 0; r < R.n; r++) want += ValF(r, i, run + 2);
            if (o[i] != want) FAILF("repeatable run %d: out[%llu] = %g, want %g", run, (unsigned long long)i, o[i], want);
        }
    }
    CHECK(aclDestroyAclOpExecutor(ex));
    if (aclDestroyAclOpExecutor(nullptr) != ACLNN_ERR_INNER_NULLPTR) FAILF("aclDestroyAclOpExecutor(NULL)");
    if (aclSetAclOpExecutorRepeatable(nullptr) != ACLNN_ERR_INNER_NULLPTR) FAILF("aclSetAclOpExecutorRepeatable(NULL)");
    /* a non-repeatable executor is gone after its run */
    CHECK(aclnnRingSumGetWorkspaceSize(x, HCCL_REDUCE_SUM, 0, R.group, y, &ws, &ex));
    CHECK(aclnnRingSum(nullptr, 0, ex, R.stream));
    CHECK(aclrtSynchronizeStream(R.stream));
    if (aclnnRingSum(nullptr, 0, ex, R.stream) != ACLNN_ERR_PARAM_INVALID) FAILF("a released executor ran again");
    aclDestroyTensor(x);
    aclDestroyTensor(y);
    aclrtFree(dx);
    aclrtFree(dy);
    return 0;
}

/* Expects phase one to fail with code and a message naming `word`. */
int Refused(Rank& R, const char* what, int got, int code, const char* word)
{
    const char* msg = aclGetRecentErrMsg();
    if (got != code) FAILF("%s: returned %d, want %d (%s)", what, got, code, msg ? msg : "");
    if (!msg || !strstr(msg, word)) FAILF("%s: message '%s' does not name '%s'", what, msg ? msg : "(null)", word);
    return 0;
}

int Refusals(Rank& R)
{
    const uint64_t n = 64;
    void *dx, *dy, *dl;
    CHECK(aclrtMalloc(&dx, n * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, n * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dl, n * 8, ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<float> host(n);
    aclTensor* x = Tensor1D(n, ACL_FLOAT, 1, 0, n, dx);
    aclTensor* y = Tensor1D(n, ACL_FLOAT, 1, 0, n, dy);
    aclTensor* y_short = Tensor1D(n - 1, ACL_FLOAT, 1, 0, n, dy);
    aclTensor* x64 = Tensor1D(n, ACL_INT64, 1, 0, n, dl);
    aclTensor* y16 = Tensor1D(n, ACL_FLOAT16, 1, 0, n, dy);
    aclTensor* xhost = Tensor1D(n, ACL_FLOAT, 1, 0, n, host.data());
    aclTensor* xnull = Tensor1D(n, ACL_FLOAT, 1, 0, n, nullptr);
    aclTensor* ypart = Tensor1D(n, ACL_FLOAT, 1, 0, n + 8, static_cast<char*>(dx) + 16); /* overlaps x */
    if (!x || !y || !y_short || !x64 || !y16 || !xhost || !xnull || !ypart) FAILF("aclCreateTensor: %s", aclGetRecentErrMsg());
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    const char* g = R.group;
    const int NUL = ACLNN_ERR_PARAM_NULLPTR, INV = ACLNN_ERR_PARAM_INVALID;
    int bad = 0;
    bad |= Refused(R, "x NULL", aclnnRingSumGetWorkspaceSize(nullptr, 0, 0, g, y, &ws, &ex), NUL, "x is NULL");
    bad |= Refused(R, "out NULL", aclnnRingSumGetWorkspaceSize(x, 0, 0, g, nullptr, &ws, &ex), NUL, "out is NULL");
    bad |= Refused(R, "group NULL", aclnnRingSumGetWorkspaceSize(x, 0, 0, nullptr, y, &ws, &ex), NUL, "group");
    bad |= Refused(R, "workspaceSize NULL", aclnnRingSumGetWorkspaceSize(x, 0, 0, g, y, nullptr, &ex), NUL,
                   "workspaceSize");
    bad |= Refused(R, "executor NULL", aclnnRingSumGetWorkspaceSize(x, 0, 0, g, y, &ws, nullptr), NUL, "executor");
    bad |= Refused(R, "data NULL", aclnnRingSumGetWorkspaceSize(xnull, 0, 0, g, y, &ws, &ex), NUL, "tensorData");
    bad |= Refused(R, "dtype", aclnnRingSumGetWorkspaceSize(x64, 0, 0, g, y, &ws, &ex), INV, "ACL_INT64");
    bad |= Refused(R, "dtype mismatch", aclnnRingSumGetWorkspaceSize(x, 0, 0, g, y16, &ws, &ex), INV, "ACL_FLOAT16");
    bad |= Refused(R, "shape", aclnnRingSumGetWorkspaceSize(x, 0, 0, g, y_short, &ws, &ex), INV, "elements");
    bad |= Refused(R, "group", aclnnRingSumGetWorkspaceSize(x, 0, 0, "no_such_group", y, &ws, &ex), INV,
                   "no_such_group");
    bad |= Refused(R, "reduce op", aclnnRingSumGetWorkspaceSize(x, HCCL_REDUCE_PROD, 0, g, y, &ws, &ex), INV, "prod");
    bad |= Refused(R, "root", aclnnRingSumGetWorkspaceSize(x, 0, R.n, g, y, &ws, &ex), INV, "root");
    bad |= Refused(R, "host memory", aclnnRingSumGetWorkspaceSize(xhost, 0, 0, g, y, &ws, &ex), INV, "device memory");
    bad |= Refused(R, "overlap", aclnnRingSumGetWorkspaceSize(x, 0, 0, g, ypart, &ws, &ex), INV, "overlap");
    /* aclCreateTensor refuses a view beyond its storage */
    int64_t d[1] = {10}, s[1] = {1}, sd[1] = {9};
    if (aclCreateTensor(d, 1, ACL_FLOAT, s, 0, ACL_FORMAT_ND, sd, 1, dx) != nullptr) FAILF("view beyond the storage");
    if (!strstr(aclGetRecentErrMsg(), "storage")) FAILF("aclCreateTensor message: %s", aclGetRecentErrMsg());
    /* phase two: a strided view needs its workspace */
    int64_t xd[1] = {(int64_t)n / 2}, xs[1] = {2};
    aclTensor* xs2 = aclCreateTensor(xd, 1, ACL_FLOAT, xs, 0, ACL_FORMAT_ND, d, 0, dx);
    int64_t nn[1] = {(int64_t)n};
    aclDestroyTensor(xs2);
    xs2 = aclCreateTensor(xd, 1, ACL_FLOAT, xs, 0, ACL_FORMAT_ND, nn, 1, dx);
    aclTensor* yh = Tensor1D(n / 2, ACL_FLOAT, 1, 0, n / 2, dy);
    CHECK(aclnnRingSumGetWorkspaceSize(xs2, 0, 0, g, yh, &ws, &ex));
    if (ws == 0) FAILF("strided x: workspace 0");
    bad |= Refused(R, "workspace NULL", aclnnRingSum(nullptr, ws, ex, R.stream), NUL, "workspace");
    CHECK(aclnnRingSumGetWorkspaceSize(xs2, 0, 0, g, yh, &ws, &ex));
    void* w = nullptr;
    CHECK(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST));
    bad |= Refused(R, "workspace short", aclnnRingSum(w, ws - 1, ex, R.stream), INV, "workspaceSize");
    bad |= Refused(R, "executor NULL", aclnnRingSum(w, ws, nullptr, R.stream), NUL, "executor");
    for (aclTensor* t : {x, y, y_short, x64, y16, xhost, xnull, ypart, xs2, yh}) CHECK(aclDestroyTensor(t));
    aclrtFree(w);
    aclrtFree(dx);
    aclrtFree(dy);
    aclrtFree(dl);
    return bad;
}

int RunRank(Rank& R, const HcclRootInfo* root)
{
    CHECK(aclrtSetDevice(R.device));
    CHECK(HcclCommInitRootInfo(R.n, root, R.rank, &R.comm));
    CHECK(HcclGetCommName(R.comm, R.group));
    CHECK(aclrtCreateStream(&R.stream));
    if (Refusals(R) || ContiguousSum(R) || IntMax(R) || StridedViews(R) || Repeatable(R)) return 1;
    CHECK(aclrtSynchronizeStream(R.stream));
    CHECK(HcclCommDestroy(R.comm));
    CHECK(aclrtDestroyStream(R.stream));
    CHECK(aclrtResetDevice(R.device));
    printf("OK rank %u\n", R.rank);
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Rank R;
    std::string mode = argc > 1 ? argv[1] : "threads";
    CHECK(aclInit(nullptr));
    if (mode == "product") {
        /* phase one refuses a product op.toml does not list, before it looks at the group */
        CHECK(aclrtSetDevice(0));
        void* d = nullptr;
        CHECK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_HUGE_FIRST));
        int64_t n[1] = {64};
        aclTensor* x = aclCreateTensor(n, 1, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, n, 1, d);
        uint64_t ws = 0;
        aclOpExecutor* ex = nullptr;
        if (Refused(R, "product", aclnnRingSumGetWorkspaceSize(x, 0, 0, "g", x, &ws, &ex), ACLNN_ERR_PARAM_INVALID,
                    "op.toml products"))
            return 1;
        aclDestroyTensor(x);
        aclrtFree(d);
        printf("OK product refused\n");
        return 0;
    }
    if (mode == "threads") {
        uint32_t devs = 0;
        CHECK(aclrtGetDeviceCount(&devs));
        CHECK(aclrtSetDevice(0));
        HcclRootInfo root;
        CHECK(HcclGetRootInfo(&root));
        std::vector<Rank> ranks(devs);
        std::vector<std::thread> ts;
        std::atomic<int> fails{0};
        for (uint32_t i = 0; i < devs; i++) {
            ranks[i].rank = i;
            ranks[i].n = devs;
            ranks[i].device = (int32_t)i;
            ts.emplace_back([&, i] {
                if (RunRank(ranks[i], &root)) fails++;
            });
        }
        for (auto& t : ts) t.join();
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        return fails ? 1 : 0;
    }
    if (mode != "mpi" || argc < 3) FAILF("usage: %s threads | mpi <dir> | product", argv[0]);
    const char* r = getenv("OMPI_COMM_WORLD_RANK");
    const char* s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!r || !s) FAILF("mpi mode: run under mpirun (hcomm-kit launch)");
    R.rank = (uint32_t)atoi(r);
    R.n = (uint32_t)atoi(s);
    std::string path = std::string(argv[2]) + "/root.bin";
    HcclRootInfo root;
    if (R.rank == 0) {
        CHECK(aclrtSetDevice(0));
        CHECK(HcclGetRootInfo(&root));
        std::string tmp = path + ".tmp";
        FILE* f = fopen(tmp.c_str(), "wb");
        if (!f || fwrite(&root, sizeof root, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), path.c_str()) != 0)
            FAILF("cannot write %s", path.c_str());
    } else {
        FILE* f = nullptr;
        for (int i = 0; i < 6000 && !(f = fopen(path.c_str(), "rb")); i++) usleep(10000);
        if (!f || fread(&root, sizeof root, 1, f) != 1) FAILF("cannot read %s", path.c_str());
        fclose(f);
    }
    int rc = RunRank(R, &root);
    if (R.rank == 0) aclrtResetDevice(0);
    aclFinalize();
    return rc;
}
