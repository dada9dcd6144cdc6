/*
 * A C++ host calling hcomm-kit's built-in collectives through CANN's aclnn interface, as on
 * Ascend: the vendor package's headers (aclnn_hk_*.h) and library (-lcust_opapi), the aclnn meta
 * API (aclnn/acl_meta.h, -lnnopbase), a communicator (HcclCommInitRootInfo, HcclGetCommName as the
 * group) and a stream; no HCCL collective call. Two phases per call, a workspace when phase one
 * asks for one, the stream synchronised once per case.
 *
 * As tests/c/hccl_coll, the program does not judge the data: each rank writes the elements of its
 * output view of every case to <outdir>/<case>.r<rank>.bin and rank 0 writes <outdir>/manifest.txt
 *     <case> <kind> <dtype> <count> <op> <root> <seed>
 * from which tests/test_aclnn.py computes the expected bytes with numpy (tests/hccl_capi.py: same
 * kinds, inputs and layouts). Tensors are views (layout of a case): contiguous, every other element
 * of a larger buffer at offset 1 (stride 2), or the transpose of a matrix (2-D, column-major); the
 * bytes of a buffer outside its output view must keep the sentinel, which this program checks. It
 * also checks a repeatable executor (allreduce run twice on new data) and every refusal of phase
 * one and two (codes and messages) on every rank.
 *
 * Usage: aclnn_coll threads <outdir> | mpi <outdir>      (as tests/c/hccl_coll)
 * Prints "OK rank <r>" per rank.
 */
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnn_hk_collectives.h"
#include "hccl/hccl.h" /* the communicator only */

namespace {

constexpr uint8_t kSentinel = 0xA5;

#define FAILF(...)                                                        \
    do {                                                                  \
        fprintf(stderr, "[rank %u] %s:%d: ", R.rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                     \
        fprintf(stderr, "\n");                                            \
        return 1;                                                         \
    } while (0)
#define CHECK(expr)                                                               \
    do {                                                                          \
        int rc_ = (int)(expr);                                                    \
        if (rc_ != 0) FAILF("%s returned %d: %s", #expr, rc_, aclGetRecentErrMsg()); \
    } while (0)

struct Rank {
    uint32_t rank = 0, n = 0;
    int32_t device = 0;
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    char group[128] = {};
    bool is950 = false;
    std::string out;
};

struct DType {
    aclDataType acl;
    const char* name;
    uint32_t size;
    bool isUnsigned;
};
const DType F32{ACL_FLOAT, "fp32", 4, false}, F16{ACL_FLOAT16, "fp16", 2, false}, BF16{ACL_BF16, "bf16", 2, false},
    I8{ACL_INT8, "int8", 1, false}, I32{ACL_INT32, "int32", 4, false}, I64{ACL_INT64, "int64", 8, false},
    U16{ACL_UINT16, "uint16", 2, true}, F64{ACL_DOUBLE, "fp64", 8, false}, I16V{ACL_INT16, "int16", 2, false};

/* Input element i of `rank` (tests/hccl_capi.py inputs()): small integers, exact in every dtype. */
int64_t Value(uint32_t seed, uint32_t rank, uint64_t i, const DType& dt, int op)
{
    const uint64_t m = op == HCCL_REDUCE_PROD ? 3 : 23;
    const int64_t v = (int64_t)((seed * 31ull + rank * 7ull + i * 3ull) % m);
    return dt.isUnsigned ? v : v - (int64_t)(m / 2);
}

uint16_t Half(float f)
{
    if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (mant >> 13));
}

void Put(uint8_t* p, const DType& dt, int64_t v)
{
    switch (dt.acl) {
        case ACL_INT8: *(int8_t*)p = (int8_t)v; break;
        case ACL_INT16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
        case ACL_INT32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
        case ACL_INT64: memcpy(p, &v, 8); break;
        case ACL_UINT16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
        case ACL_FLOAT16: { uint16_t x = Half((float)v); memcpy(p, &x, 2); break; }
        case ACL_BF16: {
            float f = (float)v;
            uint32_t x;
            memcpy(&x, &f, 4);
            uint16_t h = (uint16_t)(x >> 16);
            memcpy(p, &h, 2);
            break;
        }
        case ACL_FLOAT: { float x = (float)v; memcpy(p, &x, 4); break; }
        default: { double x = (double)v; memcpy(p, &x, 8); break; }
    }
}

/* Elements rank i sends rank j in the V cases (tests/hccl_capi.py vcount()). */
uint64_t VCount(uint32_t i, uint32_t j, uint64_t base, uint32_t seed) { return base + (i * 3 + j * 5 + seed) % 4; }

/* Where the elements of a view live in its buffer. */
enum Layout { CONTIG = 0, STRIDED = 1, TRANSPOSED = 2 };
const char* LayoutName(Layout l) { return l == CONTIG ? "c" : l == STRIDED ? "s" : "t"; }

struct View {
    std::vector<int64_t> dims, strides, storage;
    int64_t offset = 0;
    uint64_t storageElems = 0;
    /* buffer element of logical (row-major) element k */
    uint64_t Pos(uint64_t k) const
    {
        uint64_t p = (uint64_t)offset;
        for (size_t i = dims.size(); i-- > 0;) {
            p += (k % (uint64_t)dims[i]) * (uint64_t)strides[i];
            k /= (uint64_t)dims[i];
        }
        return p;
    }
};

/* A view of `elems` elements: contiguous; stride 2 at offset 1 (buffer 2e+1); the transpose of a
 * [3, e/3] row-major matrix (view [e/3, 3], strides [1, e/3]; e % 3 == 0, else contiguous). */
View MakeView(Layout l, uint64_t e)
{
    View v;
    if (l == STRIDED) {
        v.dims = {(int64_t)e};
        v.strides = {2};
        v.offset = 1;
        v.storageElems = 2 * e + 1;
    } else if (l == TRANSPOSED && e % 3 == 0 && e > 0) {
        int64_t q = (int64_t)e / 3;
        v.dims = {q, 3};
        v.strides = {1, q};
        v.storageElems = e;
    } else {
        v.dims = {(int64_t)e};
        v.strides = {1};
        v.storageElems = e;
    }
    v.storage = {(int64_t)v.storageElems};
    return v;
}

struct Case {
    std::string name, kind;
    DType dt;
    uint64_t count;
    int op;
    uint32_t root;
    uint32_t seed;
    Layout lx, lout;
    bool repeat;
};

/* A device buffer laid out as a view, and its aclTensor; freed with the case. */
struct Tensor {
    void* dev = nullptr;
    aclTensor* t = nullptr;
    View v;
    uint64_t elems = 0;
    ~Tensor()
    {
        if (t) aclDestroyTensor(t);
        if (dev) aclrtFree(dev);
    }
};

/* A tensor of `elems` elements in layout l: the buffer is sentinel bytes, with this rank's (`as`)
 * input values at the view's elements when `fill`. */
int Make(Rank& R, Tensor& T, const Case& c, Layout l, uint64_t elems, bool fill, uint32_t as)
{
    T.v = MakeView(l, elems);
    T.elems = elems;
    const uint32_t u = c.dt.size;
    std::vector<uint8_t> host(T.v.storageElems * u + 1, kSentinel); /* + a guard byte */
    if (fill)
        for (uint64_t k = 0; k < elems; k++) Put(host.data() + T.v.Pos(k) * u, c.dt, Value(c.seed, as, k, c.dt, c.op));
    CHECK(aclrtMalloc(&T.dev, host.size(), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(T.dev, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE));
    T.t = aclCreateTensor(T.v.dims.data(), T.v.dims.size(), c.dt.acl, T.v.strides.data(), T.v.offset, ACL_FORMAT_ND,
                          T.v.storage.data(), T.v.storage.size(), T.dev);
    if (!T.t) FAILF("aclCreateTensor: %s", aclGetRecentErrMsg());
    return 0;
}

/* Writes the view's elements to <case>.r<rank>.bin; the buffer's other bytes must be sentinels. */
int Save(Rank& R, const Case& c, Tensor& T)
{
    const uint32_t u = c.dt.size;
    std::vector<uint8_t> host(T.v.storageElems * u + 1), out(T.elems * u);
    CHECK(aclrtMemcpy(host.data(), host.size(), T.dev, host.size(), ACL_MEMCPY_DEVICE_TO_HOST));
    std::vector<bool> in_view(T.v.storageElems, false);
    for (uint64_t k = 0; k < T.elems; k++) {
        memcpy(out.data() + k * u, host.data() + T.v.Pos(k) * u, u);
        in_view[T.v.Pos(k)] = true;
    }
    for (uint64_t p = 0; p < T.v.storageElems; p++)
        for (uint32_t b = 0; b < u && !in_view[p]; b++)
            if (host[p * u + b] != kSentinel) FAILF("case %s wrote element %llu of its buffer, outside the view",
                                                     c.name.c_str(), (unsigned long long)p);
    if (host.back() != kSentinel) FAILF("case %s wrote past the end of its buffer", c.name.c_str());
    std::string path = R.out + "/" + c.name + ".r" + std::to_string(R.rank) + ".bin";
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(out.data(), 1, out.size(), f) != out.size() || fclose(f) != 0) FAILF("cannot write %s", path.c_str());
    return 0;
}

/* Elements [first, first + count) of a 1-D tensor (contiguous or strided) as a tensor of its own. */
aclTensor* Sub(const Tensor& T, const Case& c, uint64_t first, uint64_t count)
{
    int64_t dims[1] = {(int64_t)count}, st[1] = {T.v.strides[0]};
    return aclCreateTensor(dims, 1, c.dt.acl, st, T.v.offset + (int64_t)first * T.v.strides[0], ACL_FORMAT_ND,
                           T.v.storage.data(), T.v.storage.size(), T.dev);
}

/* An aclIntArray of unsigned counts; destroyed by the caller. */
aclIntArray* Ints(const std::vector<uint64_t>& v)
{
    std::vector<int64_t> s(v.begin(), v.end());
    return aclCreateIntArray(s.data(), s.size());
}

/* Phase two with a workspace of the size phase one asked for, then synchronise. */
template <class Run>
int Launch(Rank& R, uint64_t ws, aclOpExecutor* ex, Run run)
{
    void* w = nullptr;
    if (ws) CHECK(aclrtMalloc(&w, ws, ACL_MEM_MALLOC_HUGE_FIRST));
    int rc = run(w, ws, ex, R.stream);
    if (rc) {
        if (w) aclrtFree(w);
        FAILF("phase two returned %d: %s", rc, aclGetRecentErrMsg());
    }
    CHECK(aclrtSynchronizeStream(R.stream));
    if (w) CHECK(aclrtFree(w));
    return 0;
}

int Run(Rank& R, const Case& c)
{
    const uint32_t n = R.n, me = R.rank;
    const uint64_t cnt = c.count;
    const std::string& k = c.kind;
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    Tensor X, Y;
    if (k == "allreduce" || k == "allreduce_inplace") {
        const bool inplace = k == "allreduce_inplace";
        if (Make(R, X, c, c.lx, cnt, !c.repeat, me)) return 1;
        if (!inplace && Make(R, Y, c, c.lout, cnt, false, me)) return 1;
        Tensor& out = inplace ? X : Y;
        CHECK(aclnnHkAllReduceGetWorkspaceSize(X.t, c.op, R.group, out.t, &ws, &ex));
        if (c.repeat) {
            /* first run on zeros, then on the case's input: the same executor */
            CHECK(aclSetAclOpExecutorRepeatable(ex));
            if (Launch(R, ws, ex, aclnnHkAllReduce)) return 1;
            Tensor fresh;
            if (Make(R, fresh, c, c.lx, cnt, true, me)) return 1;
            uint64_t bytes = X.v.storageElems * c.dt.size;
            CHECK(aclrtMemcpy(X.dev, bytes, fresh.dev, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE));
            if (Launch(R, ws, ex, aclnnHkAllReduce)) return 1;
            CHECK(aclDestroyAclOpExecutor(ex));
        } else if (Launch(R, ws, ex, aclnnHkAllReduce)) {
            return 1;
        }
        return Save(R, c, out);
    }
    if (k == "broadcast") {
        if (Make(R, X, c, c.lx, cnt, me == c.root, me)) return 1;
        CHECK(aclnnHkBroadcastGetWorkspaceSize(X.t, c.root, R.group, &ws, &ex));
        if (Launch(R, ws, ex, aclnnHkBroadcast)) return 1;
        return Save(R, c, X);
    }
    if (k == "allgather") {
        if (Make(R, X, c, c.lx, cnt, true, me) || Make(R, Y, c, c.lout, cnt * n, false, me)) return 1;
        CHECK(aclnnHkAllGatherGetWorkspaceSize(X.t, R.group, Y.t, &ws, &ex));
        if (Launch(R, ws, ex, aclnnHkAllGather)) return 1;
        return Save(R, c, Y);
    }
    if (k == "reducescatter") {
        if (Make(R, X, c, c.lx, cnt * n, true, me) || Make(R, Y, c, c.lout, cnt, false, me)) return 1;
        CHECK(aclnnHkReduceScatterGetWorkspaceSize(X.t, c.op, R.group, Y.t, &ws, &ex));
        if (Launch(R, ws, ex, aclnnHkReduceScatter)) return 1;
        return Save(R, c, Y);
    }
    if (k == "reduce") {
        if (Make(R, X, c, c.lx, cnt, true, me) || Make(R, Y, c, c.lout, cnt, false, me)) return 1;
        CHECK(aclnnHkReduceGetWorkspaceSize(X.t, c.op, c.root, R.group, Y.t, &ws, &ex));
        if (Launch(R, ws, ex, aclnnHkReduce)) return 1;
        return me == c.root ? Save(R, c, Y) : 0;
    }
    if (k == "scatter") {
        if (me == c.root && Make(R, X, c, c.lx, cnt * n, true, me)) return 1;
        if (Make(R, Y, c, c.lout, cnt, false, me)) return 1;
        CHECK(aclnnHkScatterGetWorkspaceSize(X.t, c.root, R.group, Y.t, &ws, &ex)); /* X.t NULL off the root */
        if (Launch(R, ws, ex, aclnnHkScatter)) return 1;
        return Save(R, c, Y);
    }
    if (k == "alltoall") {
        if (Make(R, X, c, c.lx, cnt * n, true, me) || Make(R, Y, c, c.lout, cnt * n, false, me)) return 1;
        CHECK(aclnnHkAllToAllGetWorkspaceSize(X.t, R.group, Y.t, &ws, &ex));
        if (Launch(R, ws, ex, aclnnHkAllToAll)) return 1;
        return Save(R, c, Y);
    }
    if (k == "sendrecv") {
        /* pairs (0 -> 1), (2 -> 3), ...; an odd last rank idles */
        if (Make(R, Y, c, c.lout, cnt, false, me)) return 1;
        if (me % 2 == 0 && me + 1 < n) {
            if (Make(R, X, c, c.lx, cnt, true, me)) return 1;
            CHECK(aclnnHkSendGetWorkspaceSize(X.t, me + 1, R.group, &ws, &ex));
            if (Launch(R, ws, ex, aclnnHkSend)) return 1;
        } else if (me % 2 == 1) {
            CHECK(aclnnHkRecvGetWorkspaceSize(me - 1, R.group, Y.t, &ws, &ex));
            if (Launch(R, ws, ex, aclnnHkRecv)) return 1;
        }
        return Save(R, c, Y);
    }
    if (k == "allgatherv") {
        /* rank j contributes VCount(j, 0) elements, placed with a gap of 2 (displacements given) */
        std::vector<uint64_t> rc(n), rd(n);
        uint64_t ro = 0;
        for (uint32_t j = 0; j < n; j++) {
            rc[j] = VCount(j, 0, cnt, c.seed);
            rd[j] = ro;
            ro += rc[j] + 2;
        }
        if (Make(R, X, c, c.lx, rc[me], true, me) || Make(R, Y, c, c.lout, ro, false, me)) return 1;
        aclIntArray *a = Ints(rc), *b = Ints(rd);
        CHECK(aclnnHkAllGatherVGetWorkspaceSize(X.t, a, b, R.group, Y.t, &ws, &ex));
        aclDestroyIntArray(a);
        aclDestroyIntArray(b);
        if (Launch(R, ws, ex, aclnnHkAllGatherV)) return 1;
        return Save(R, c, Y);
    }
    if (k == "reducescatterv") {
        /* rank i receives VCount(i, 0) elements reduced from offset sd[i] (gap of 3 between blocks) */
        std::vector<uint64_t> sc(n), sd(n);
        uint64_t so = 0;
        for (uint32_t j = 0; j < n; j++) {
            sc[j] = VCount(j, 0, cnt, c.seed);
            sd[j] = so;
            so += sc[j] + 3;
        }
        if (Make(R, X, c, c.lx, so, true, me) || Make(R, Y, c, c.lout, sc[me], false, me)) return 1;
        aclIntArray *a = Ints(sc), *b = Ints(sd);
        CHECK(aclnnHkReduceScatterVGetWorkspaceSize(X.t, a, b, c.op, R.group, Y.t, &ws, &ex));
        aclDestroyIntArray(a);
        aclDestroyIntArray(b);
        if (Launch(R, ws, ex, aclnnHkReduceScatterV)) return 1;
        return Save(R, c, Y);
    }
    if (k == "alltoallv" || k == "alltoallvc") {
        /* rank i sends VCount(i, j) elements to j; send blocks packed (no sendDispls: packed by
         * default), receive blocks with a gap of 1 (alltoallv) or packed (alltoallvc) */
        std::vector<uint64_t> sc(n), rc(n), rd(n), matrix((size_t)n * n);
        uint64_t so = 0, ro = 0;
        for (uint32_t j = 0; j < n; j++) {
            sc[j] = VCount(me, j, cnt, c.seed);
            rc[j] = VCount(j, me, cnt, c.seed);
            rd[j] = ro;
            so += sc[j];
            ro += rc[j] + (k == "alltoallv" ? 1 : 0);
            for (uint32_t i = 0; i < n; i++) matrix[(size_t)i * n + j] = VCount(i, j, cnt, c.seed);
        }
        if (Make(R, X, c, c.lx, so, true, me) || Make(R, Y, c, c.lout, ro, false, me)) return 1;
        if (k == "alltoallv") {
            aclIntArray *a = Ints(sc), *b = Ints(rc), *d = Ints(rd);
            CHECK(aclnnHkAllToAllVGetWorkspaceSize(X.t, a, nullptr, b, d, R.group, Y.t, &ws, &ex));
            for (aclIntArray* arr : {a, b, d}) aclDestroyIntArray(arr);
            if (Launch(R, ws, ex, aclnnHkAllToAllV)) return 1;
        } else {
            aclIntArray* m = Ints(matrix);
            CHECK(aclnnHkAllToAllVCGetWorkspaceSize(X.t, m, R.group, Y.t, &ws, &ex));
            aclDestroyIntArray(m);
            if (Launch(R, ws, ex, aclnnHkAllToAllVC)) return 1;
        }
        return Save(R, c, Y);
    }
    if (k == "gather") {
        if (Make(R, X, c, c.lx, cnt, true, me)) return 1;
        if (me == c.root && Make(R, Y, c, c.lout, cnt * n, false, me)) return 1;
        CHECK(aclnnHkGatherGetWorkspaceSize(X.t, c.root, R.group, Y.t, &ws, &ex)); /* Y.t NULL off the root */
        if (Launch(R, ws, ex, aclnnHkGather)) return 1;
        return me == c.root ? Save(R, c, Y) : 0;
    }
    if (k == "batchring" || k == "batchall") {
        /* batchring: send to the next rank, receive from the previous one; batchall: VCount(me, j)
         * elements to every other rank j, from all. Items are 1-D views into one buffer each way. */
        std::vector<uint64_t> so(n + 1, 0), ro(n + 1, 0);
        for (uint32_t j = 0; j < n; j++) {
            const bool ring_s = j == (me + 1) % n, ring_r = j == (me + n - 1) % n;
            so[j + 1] = so[j] + (j == me ? 0 : k == "batchring" ? (ring_s ? cnt : 0) : VCount(me, j, cnt, c.seed));
            ro[j + 1] = ro[j] + (j == me ? 0 : k == "batchring" ? (ring_r ? cnt : 0) : VCount(j, me, cnt, c.seed));
        }
        if (Make(R, X, c, c.lx, so[n], true, me) || Make(R, Y, c, c.lout, ro[n], false, me)) return 1;
        std::vector<const aclTensor*> st, rt;
        std::vector<int64_t> sr, rr;
        for (uint32_t d = 1; d < n; d++) {
            uint32_t j = (me + d) % n;
            if (so[j + 1] > so[j]) {
                st.push_back(Sub(X, c, so[j], so[j + 1] - so[j]));
                sr.push_back(j);
            }
            if (ro[j + 1] > ro[j]) {
                rt.push_back(Sub(Y, c, ro[j], ro[j + 1] - ro[j]));
                rr.push_back(j);
            }
        }
        aclTensorList *sl = aclCreateTensorList(st.data(), st.size()), *rl = aclCreateTensorList(rt.data(), rt.size());
        aclIntArray *sa = aclCreateIntArray(sr.data(), sr.size()), *ra = aclCreateIntArray(rr.data(), rr.size());
        if (!sl || !rl || !sa || !ra) FAILF("list / array: %s", aclGetRecentErrMsg());
        CHECK(aclnnHkBatchSendRecvGetWorkspaceSize(sl, sa, ra, R.group, rl, &ws, &ex));
        aclDestroyTensorList(sl); /* and its tensors */
        aclDestroyTensorList(rl);
        aclDestroyIntArray(sa);
        aclDestroyIntArray(ra);
        if (Launch(R, ws, ex, aclnnHkBatchSendRecv)) return 1;
        return Save(R, c, Y);
    }
    FAILF("unknown case kind %s", k.c_str());
}

/* The barrier orders the ranks: rank 0 writes a file only after a pause, then enters the barrier;
 * the others find the file once their barrier has completed. Run twice (a repeatable executor). */
int Barrier(Rank& R, int round)
{
    const std::string flag = R.out + "/barrier" + std::to_string(round) + ".flag";
    uint64_t ws = 1;
    aclOpExecutor* ex = nullptr;
    CHECK(aclnnHkBarrierGetWorkspaceSize(R.group, &ws, &ex));
    if (ws != 0) FAILF("barrier asked for a workspace of %llu bytes", (unsigned long long)ws);
    CHECK(aclSetAclOpExecutorRepeatable(ex));
    for (int i = 0; i < 2; i++) {
        if (R.rank == 0) {
            usleep(100000);
            FILE* f = fopen((flag + std::to_string(i)).c_str(), "w");
            if (!f || fclose(f) != 0) FAILF("cannot write %s", flag.c_str());
        }
        CHECK(aclnnHkBarrier(nullptr, 0, ex, R.stream));
        CHECK(aclrtSynchronizeStream(R.stream));
        if (access((flag + std::to_string(i)).c_str(), F_OK) != 0)
            FAILF("aclnnHkBarrier returned before rank 0 reached it (%s missing)", flag.c_str());
    }
    CHECK(aclDestroyAclOpExecutor(ex));
    return 0;
}

/* Expects `got` == code and a message naming `word`. */
int Refused(Rank& R, const char* what, int got, int code, const char* word)
{
    const char* msg = aclGetRecentErrMsg();
    if (got != code) FAILF("%s: returned %d, want %d (%s)", what, got, code, msg ? msg : "");
    if (!msg || !strstr(msg, word)) FAILF("%s: message '%s' does not name '%s'", what, msg ? msg : "(null)", word);
    return 0;
}

/* Every refusal of phase one (and of phase two's workspace): local calls only. */
int Refusals(Rank& R)
{
    const uint64_t n = 60; /* a multiple of 2, 3 and 4 (n + 1 of none) */
    const int NUL = ACLNN_ERR_PARAM_NULLPTR, INV = ACLNN_ERR_PARAM_INVALID;
    void *d, *e;
    CHECK(aclrtMalloc(&d, n * 16, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&e, n * 8 * (R.n + 1), ACL_MEM_MALLOC_HUGE_FIRST));
    std::vector<float> host(n);
    auto T = [](int64_t elems, aclDataType dt, void* data, int64_t stride = 1) {
        int64_t dims[1] = {elems}, st[1] = {stride}, sd[1] = {elems * stride};
        return aclCreateTensor(dims, 1, dt, st, 0, ACL_FORMAT_ND, sd, 1, data);
    };
    aclTensor* x = T(n, ACL_FLOAT, d);
    aclTensor* y = T(n, ACL_FLOAT, e);
    aclTensor* yn = T(n / 2 * R.n, ACL_FLOAT, e);
    aclTensor* y16 = T(n, ACL_FLOAT16, e);
    aclTensor* xu8 = T(n, ACL_UINT8, d);
    aclTensor* xhost = T(n, ACL_FLOAT, host.data());
    aclTensor* xodd = T(n + 1, ACL_FLOAT, d);
    aclTensor* ypart = T(n, ACL_FLOAT, (char*)d + 8); /* overlaps x */
    aclTensor* xs = T(n / 2, ACL_FLOAT, d, 2);         /* strided: staged through the workspace */
    if (!x || !y || !yn || !y16 || !xu8 || !xhost || !xodd || !ypart || !xs) FAILF("aclCreateTensor: %s", aclGetRecentErrMsg());
    uint64_t ws = 0;
    aclOpExecutor* ex = nullptr;
    const char* g = R.group;
    const int64_t other = (R.rank + 1) % R.n;
    int bad = 0;
    bad |= Refused(R, "x NULL", aclnnHkAllReduceGetWorkspaceSize(nullptr, 0, g, y, &ws, &ex), NUL, "x is NULL");
    bad |= Refused(R, "out NULL", aclnnHkAllGatherGetWorkspaceSize(x, g, nullptr, &ws, &ex), NUL, "out is NULL");
    bad |= Refused(R, "selfRef NULL", aclnnHkBroadcastGetWorkspaceSize(nullptr, 0, g, &ws, &ex), NUL, "selfRef");
    bad |= Refused(R, "group NULL", aclnnHkAllReduceGetWorkspaceSize(x, 0, nullptr, y, &ws, &ex), NUL, "group");
    bad |= Refused(R, "workspaceSize NULL", aclnnHkAllToAllGetWorkspaceSize(x, g, y, nullptr, &ex), NUL, "workspaceSize");
    bad |= Refused(R, "executor NULL", aclnnHkSendGetWorkspaceSize(x, other, g, &ws, nullptr), NUL, "executor");
    bad |= Refused(R, "scatter root x NULL", aclnnHkScatterGetWorkspaceSize(nullptr, R.rank, g, y, &ws, &ex), NUL,
                   "root");
    bad |= Refused(R, "dtype mismatch", aclnnHkAllReduceGetWorkspaceSize(x, 0, g, y16, &ws, &ex), INV, "ACL_FLOAT16");
    bad |= Refused(R, "reduce op", aclnnHkAllReduceGetWorkspaceSize(x, 7, g, y, &ws, &ex), INV, "reduceOp 7");
    if (!R.is950) /* A2/A3 reduce no uint8 (CANN's HcclAllReduce page) */
        bad |= Refused(R, "reduce dtype", aclnnHkAllReduceGetWorkspaceSize(xu8, 0, g, xu8, &ws, &ex), INV, "ACL_UINT8");
    bad |= Refused(R, "allgather shape", aclnnHkAllGatherGetWorkspaceSize(x, g, y, &ws, &ex), INV, "ranks x");
    if (R.n > 1) {
        bad |= Refused(R, "reducescatter divisible", aclnnHkReduceScatterGetWorkspaceSize(xodd, 0, g, y, &ws, &ex), INV,
                       "multiple");
        bad |= Refused(R, "alltoall divisible", aclnnHkAllToAllGetWorkspaceSize(xodd, g, xodd, &ws, &ex), INV,
                       "multiple");
    }
    bad |= Refused(R, "group", aclnnHkAllReduceGetWorkspaceSize(x, 0, "no_such_group", y, &ws, &ex), INV,
                   "no_such_group");
    bad |= Refused(R, "root", aclnnHkReduceGetWorkspaceSize(x, 0, R.n, g, y, &ws, &ex), INV, "root");
    bad |= Refused(R, "negative root", aclnnHkBroadcastGetWorkspaceSize(x, -1, g, &ws, &ex), INV, "root -1");
    bad |= Refused(R, "send to self", aclnnHkSendGetWorkspaceSize(x, R.rank, g, &ws, &ex), INV, "to self");
    bad |= Refused(R, "recv peer", aclnnHkRecvGetWorkspaceSize(R.n, g, y, &ws, &ex), INV, "srcRank");
    bad |= Refused(R, "host memory", aclnnHkAllReduceGetWorkspaceSize(xhost, 0, g, y, &ws, &ex), INV, "device memory");
    bad |= Refused(R, "overlap", aclnnHkAllReduceGetWorkspaceSize(x, 0, g, ypart, &ws, &ex), INV, "overlap");
    bad |= Refused(R, "alltoall in place", aclnnHkAllToAllGetWorkspaceSize(x, g, x, &ws, &ex), INV, "in place");
    /* phase two: the workspace phase one asked for, and an executor of another operator */
    CHECK(aclnnHkAllGatherGetWorkspaceSize(xs, g, yn, &ws, &ex));
    if (ws < n / 2 * 4) FAILF("a strided x needs staging: workspace %llu", (unsigned long long)ws);
    bad |= Refused(R, "workspace NULL", aclnnHkAllGather(nullptr, ws, ex, R.stream), NUL, "workspace");
    CHECK(aclnnHkAllGatherGetWorkspaceSize(xs, g, yn, &ws, &ex));
    bad |= Refused(R, "workspace small", aclnnHkAllGather(d, ws - 1, ex, R.stream), INV, "workspaceSize");
    CHECK(aclnnHkAllGatherGetWorkspaceSize(xs, g, yn, &ws, &ex));
    CHECK(aclSetAclOpExecutorRepeatable(ex));
    bad |= Refused(R, "other operator", aclnnHkAllReduce(d, ws, ex, R.stream), INV, "aclnnHkAllGatherGetWorkspaceSize");
    CHECK(aclDestroyAclOpExecutor(ex));
    bad |= Refused(R, "NULL executor", aclnnHkAllReduce(nullptr, 0, nullptr, R.stream), NUL, "executor");
    /* the V collectives, gather, batch send/recv, barrier */
    std::vector<int64_t> ones(R.n, n / 2), big(R.n, n), neg(R.n, 1), three(3, 1);
    neg[R.n - 1] = -1;
    aclIntArray* cnt = aclCreateIntArray(ones.data(), R.n);      /* n/2 per rank: x has n */
    aclIntArray* cntn = aclCreateIntArray(big.data(), R.n);      /* n per rank */
    aclIntArray* cntneg = aclCreateIntArray(neg.data(), R.n);
    aclIntArray* cnt3 = aclCreateIntArray(three.data(), R.n == 3 ? 2 : 3); /* wrong length */
    aclIntArray* mat = aclCreateIntArray(big.data(), R.n);       /* ranks entries, not ranks x ranks */
    aclTensor* yvn = T(n * R.n - 1, ACL_FLOAT, e);               /* one element short of n per rank */
    bad |= Refused(R, "agv counts NULL", aclnnHkAllGatherVGetWorkspaceSize(x, nullptr, nullptr, g, y, &ws, &ex), NUL,
                   "recvCounts is NULL");
    bad |= Refused(R, "agv counts length", aclnnHkAllGatherVGetWorkspaceSize(x, cnt3, nullptr, g, y, &ws, &ex), INV,
                   "recvCounts has");
    bad |= Refused(R, "agv own count", aclnnHkAllGatherVGetWorkspaceSize(x, cnt, nullptr, g, y, &ws, &ex), INV,
                   "recvCounts[");
    bad |= Refused(R, "agv out small", aclnnHkAllGatherVGetWorkspaceSize(x, cntn, nullptr, g, yvn, &ws, &ex), INV,
                   "reach element");
    bad |= Refused(R, "agv displs length", aclnnHkAllGatherVGetWorkspaceSize(x, cntn, cnt3, g, yvn, &ws, &ex), INV,
                   "recvDisplsOptional has");
    bad |= Refused(R, "rsv negative", aclnnHkReduceScatterVGetWorkspaceSize(x, cntneg, nullptr, 0, g, y, &ws, &ex), INV,
                   "negative");
    bad |= Refused(R, "rsv out", aclnnHkReduceScatterVGetWorkspaceSize(x, cnt, nullptr, 0, g, y, &ws, &ex), INV,
                   "sendCounts[");
    bad |= Refused(R, "rsv reduce op", aclnnHkReduceScatterVGetWorkspaceSize(x, cnt, nullptr, 9, g, y, &ws, &ex), INV,
                   "reduceOp 9");
    bad |= Refused(R, "a2av recv NULL", aclnnHkAllToAllVGetWorkspaceSize(x, cnt, nullptr, nullptr, nullptr, g, y, &ws,
                                                                         &ex), NUL, "recvCounts");
    if (R.n > 1)
        bad |= Refused(R, "a2av x small", aclnnHkAllToAllVGetWorkspaceSize(x, cntn, nullptr, cnt, nullptr, g, yn, &ws,
                                                                           &ex), INV, "sendCounts/sendDispls");
    bad |= Refused(R, "a2avc matrix", aclnnHkAllToAllVCGetWorkspaceSize(x, R.n > 1 ? mat : cnt3, g, y, &ws, &ex), INV,
                   "sendCountMatrix has");
    bad |= Refused(R, "gather out NULL", aclnnHkGatherGetWorkspaceSize(x, R.rank, g, nullptr, &ws, &ex), NUL,
                   "out is NULL on the root");
    bad |= Refused(R, "gather root", aclnnHkGatherGetWorkspaceSize(x, R.n, g, y, &ws, &ex), INV, "root");
    if (R.n > 1)
        bad |= Refused(R, "gather out shape", aclnnHkGatherGetWorkspaceSize(x, R.rank, g, y, &ws, &ex), INV, "ranks x");
    {
        const aclTensor* one[1] = {T(n / 2, ACL_FLOAT, d)};
        const aclTensor* onr[1] = {T(n / 2, ACL_FLOAT, (char*)d + n)}; /* overlaps the sent tensor */
        const aclTensor* oku[1] = {T(n / 2, ACL_BOOL, e)}; /* no HCCL type */
        aclTensorList* sl = aclCreateTensorList(one, 1);
        aclTensorList* rl = aclCreateTensorList(onr, 1);
        aclTensorList* ul = aclCreateTensorList(oku, 1);
        int64_t self = R.rank, peer = (R.rank + 1) % R.n, out_of = R.n;
        aclIntArray* rself = aclCreateIntArray(&self, 1);
        aclIntArray* rpeer = aclCreateIntArray(&peer, 1);
        aclIntArray* rout = aclCreateIntArray(&out_of, 1);
        aclIntArray* rtwo = aclCreateIntArray(big.data(), 2);
        bad |= Refused(R, "batch ranks NULL", aclnnHkBatchSendRecvGetWorkspaceSize(sl, nullptr, nullptr, g, nullptr, &ws,
                                                                                   &ex), NUL, "sendRanks is NULL");
        bad |= Refused(R, "batch ranks length", aclnnHkBatchSendRecvGetWorkspaceSize(sl, rtwo, nullptr, g, nullptr, &ws,
                                                                                     &ex), INV, "one rank per tensor");
        bad |= Refused(R, "batch self", aclnnHkBatchSendRecvGetWorkspaceSize(sl, rself, nullptr, g, nullptr, &ws, &ex),
                       INV, "to self");
        bad |= Refused(R, "batch rank", aclnnHkBatchSendRecvGetWorkspaceSize(nullptr, nullptr, rout, g, rl, &ws, &ex),
                       INV, "recvRanks[0]");
        if (R.n > 1) {
            bad |= Refused(R, "batch overlap", aclnnHkBatchSendRecvGetWorkspaceSize(sl, rpeer, rpeer, g, rl, &ws, &ex),
                           INV, "overlap");
            bad |= Refused(R, "batch dtype", aclnnHkBatchSendRecvGetWorkspaceSize(ul, rpeer, nullptr, g, nullptr, &ws,
                                                                                  &ex), INV,
                           "sendTensors[0] has dataType ACL_BOOL");
        }
        for (aclTensorList* l : {sl, rl, ul}) aclDestroyTensorList(l);
        for (aclIntArray* a : {rself, rpeer, rout, rtwo}) aclDestroyIntArray(a);
    }
    bad |= Refused(R, "barrier group NULL", aclnnHkBarrierGetWorkspaceSize(nullptr, &ws, &ex), NUL, "group");
    bad |= Refused(R, "barrier group", aclnnHkBarrierGetWorkspaceSize("no_such_group", &ws, &ex), INV, "no_such_group");
    CHECK(aclnnHkBarrierGetWorkspaceSize(g, &ws, &ex));
    bad |= Refused(R, "barrier executor", aclnnHkGather(nullptr, 0, ex, R.stream), INV, "aclnnHkBarrierGetWorkspaceSize");
    CHECK(aclDestroyAclOpExecutor(ex)); /* refused before it was taken: still the caller's */
    for (aclIntArray* a : {cnt, cntn, cntneg, cnt3, mat}) aclDestroyIntArray(a);
    aclDestroyTensor(yvn);
    CHECK(aclrtSynchronizeStream(R.stream)); /* nothing was enqueued */
    for (aclTensor* t : {x, y, yn, y16, xu8, xhost, xodd, ypart, xs}) aclDestroyTensor(t);
    CHECK(aclrtFree(d));
    CHECK(aclrtFree(e));
    return bad;
}

std::vector<Case> Cases(bool is950, uint32_t n)
{
    std::vector<Case> cs;
    uint32_t seed = 1;
    auto add = [&](const std::string& kind, const DType& dt, uint64_t count, int op, uint32_t root, Layout lx,
                   Layout lout, bool repeat = false) {
        char name[160];
        snprintf(name, sizeof name, "%s_%s_c%llu_o%d_r%u_%s%s_s%u%s", kind.c_str(), dt.name, (unsigned long long)count,
                 op, root, LayoutName(lx), LayoutName(lout), seed, repeat ? "_rep" : "");
        cs.push_back({name, kind, dt, count, op, root, seed++, lx, lout, repeat});
    };
    const int SUM = HCCL_REDUCE_SUM, MAX = HCCL_REDUCE_MAX, MIN = HCCL_REDUCE_MIN, PROD = HCCL_REDUCE_PROD;
    add("allreduce", F32, 1000, SUM, 0, CONTIG, CONTIG);
    add("allreduce", I32, 777, MAX, 0, STRIDED, CONTIG);
    add("allreduce", BF16, 99, MIN, 0, CONTIG, STRIDED);
    add("allreduce", F16, 300, SUM, 0, TRANSPOSED, STRIDED);
    add("allreduce", I64, 257, PROD, 0, CONTIG, CONTIG); /* A2/A3: the built-in computes int64 and prod itself */
    if (is950) add("allreduce", F64, 129, PROD, 0, STRIDED, STRIDED);
    add("allreduce", F32, 300001, SUM, 0, STRIDED, STRIDED); /* > the 1 MB HCCL buffer: sliced */
    add("allreduce", F32, 513, SUM, 0, CONTIG, CONTIG, true);
    add("allreduce_inplace", I32, 4099, MAX, 0, CONTIG, CONTIG);
    add("allreduce_inplace", F32, 600, SUM, 0, TRANSPOSED, TRANSPOSED);
    for (uint32_t root : {0u, n - 1}) {
        add("broadcast", I8, 1001, 0, root, CONTIG, CONTIG);
        add("broadcast", F64, 333, 0, root, STRIDED, STRIDED);
        add("reduce", I32, 777, SUM, root, CONTIG, STRIDED);
        add("reduce", F16, 12, MAX, root, STRIDED, CONTIG);
        add("scatter", F16, 515, 0, root, CONTIG, CONTIG);
        add("scatter", U16, 33, 0, root, STRIDED, TRANSPOSED);
    }
    add("allgather", U16, 333, 0, 0, CONTIG, CONTIG);
    add("allgather", F32, 70001, 0, 0, STRIDED, TRANSPOSED);
    add("allgather", I64, 9, 0, 0, TRANSPOSED, STRIDED);
    add("reducescatter", F32, 129, SUM, 0, CONTIG, CONTIG);
    add("reducescatter", I32, 70001, PROD, 0, STRIDED, STRIDED);
    add("reducescatter", I8, 21, MIN, 0, TRANSPOSED, CONTIG);
    add("alltoall", F64, 97, 0, 0, CONTIG, CONTIG);
    add("alltoall", I32, 40001, 0, 0, TRANSPOSED, STRIDED);
    add("allgatherv", F32, 61, 0, 0, CONTIG, CONTIG);
    add("allgatherv", I16V, 3001, 0, 0, STRIDED, TRANSPOSED);
    add("reducescatterv", I32, 61, SUM, 0, CONTIG, CONTIG);
    add("reducescatterv", F16, 2000, MAX, 0, STRIDED, STRIDED);
    add("alltoallv", F32, 61, 0, 0, CONTIG, CONTIG);
    add("alltoallv", I64, 1001, 0, 0, TRANSPOSED, STRIDED);
    add("alltoallvc", BF16, 33, 0, 0, STRIDED, CONTIG);
    for (uint32_t root : {0u, n - 1}) {
        add("gather", F32, 77, 0, root, CONTIG, CONTIG);
        add("gather", I8, 3001, 0, root, STRIDED, TRANSPOSED);
    }
    add("batchring", F32, 999, 0, 0, CONTIG, STRIDED);
    add("batchall", F16, 77, 0, 0, STRIDED, CONTIG);
    add("batchall", I64, 5000, 0, 0, CONTIG, CONTIG);
    add("sendrecv", F32, 1025, 0, 0, CONTIG, CONTIG);
    add("sendrecv", I8, 300001, 0, 0, STRIDED, STRIDED);
    return cs;
}

int Manifest(Rank& R, const std::vector<Case>& cs)
{
    std::string path = R.out + "/manifest.txt";
    FILE* f = fopen(path.c_str(), "w");
    if (!f) FAILF("cannot write %s", path.c_str());
    fprintf(f, "ranks %u soc %s\n", R.n, aclrtGetSocName());
    for (const Case& c : cs)
        fprintf(f, "%s %s %s %llu %d %u %u\n", c.name.c_str(), c.kind.c_str(), c.dt.name, (unsigned long long)c.count,
                c.op, c.root, c.seed);
    if (fclose(f) != 0) FAILF("cannot write %s", path.c_str());
    return 0;
}

int RunRank(Rank& R, const HcclRootInfo* root)
{
    CHECK(aclrtSetDevice(R.device));
    CHECK(HcclCommInitRootInfo(R.n, root, R.rank, &R.comm));
    CHECK(HcclGetCommName(R.comm, R.group));
    CHECK(aclrtCreateStream(&R.stream));
    R.is950 = strcmp(aclrtGetSocName(), "Ascend950") == 0;
    if (Refusals(R)) return 1;
    std::vector<Case> cs = Cases(R.is950, R.n);
    if (R.rank == 0 && Manifest(R, cs)) return 1;
    for (const Case& c : cs)
        if (Run(R, c)) FAILF("case %s failed", c.name.c_str());
    if (Barrier(R, 0)) return 1;
    CHECK(HcclCommDestroy(R.comm));
    CHECK(aclrtDestroyStream(R.stream));
    CHECK(aclrtResetDevice(R.device));
    printf("OK rank %u (%zu cases)\n", R.rank, cs.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Rank R;
    if (argc < 3) {
        fprintf(stderr, "usage: %s threads|mpi <outdir>\n", argv[0]);
        return 2;
    }
    std::string mode = argv[1];
    CHECK(aclInit(nullptr));
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
            ranks[i].out = argv[2];
            ts.emplace_back([&, i] {
                if (RunRank(ranks[i], &root)) fails++;
            });
        }
        for (auto& t : ts) t.join();
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        return fails ? 1 : 0;
    }
    if (mode != "mpi") FAILF("unknown mode %s", mode.c_str());
    const char* r = getenv("OMPI_COMM_WORLD_RANK");
    const char* s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!r || !s) FAILF("mpi mode: OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE are not set (run under mpirun)");
    R.rank = (uint32_t)atoi(r);
    R.n = (uint32_t)atoi(s);
    R.out = argv[2];
    std::string path = R.out + "/root.bin";
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
