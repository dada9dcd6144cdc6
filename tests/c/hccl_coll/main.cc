/*
 * A CANN-style host program for HCCL's collective C API (include <hccl/hccl.h>, link -lhccl
 * -lascendcl): aclrtSetDevice, HcclCommInitRootInfo, a stream, then every collective, the
 * point-to-point calls and batch send/recv patterns over several dtypes, counts, reduce ops and
 * roots. Every call is enqueued on the stream and the stream synchronised once per case, as
 * CANN's examples do.
 *
 * The program does not judge the data: each rank writes its output buffer of every case to
 * <outdir>/<case>.r<rank>.bin and rank 0 writes <outdir>/manifest.txt, one line per case
 *     <case> <kind> <dtype> <count> <op> <root> <seed>
 * from which tests/test_hccl_coll.py computes the expected bytes with numpy. Inputs are small
 * integers (exact in every dtype, also after reductions), see Value(). Output buffers start
 * filled with the byte kSentinel, so bytes a collective must not touch can be checked too.
 * It does check the argument checks and return codes of every API itself (group "args").
 *
 * Usage:
 *   hccl_coll_main threads <outdir> [cases]     ranks = threads of this process, one per device
 *                                               (aclrtGetDeviceCount, HCOMM_KIT_DEVICE_COUNT)
 *   hccl_coll_main mpi <outdir> [cases]         ranks = processes under mpirun
 *                                               (OMPI_COMM_WORLD_RANK/SIZE; root info through
 *                                               <outdir>/root.bin)
 * cases: a comma-separated list of kinds to run (default: all). Prints "OK rank <r>" per rank.
 * cases "mismatch" / "mismatch0": the collective-call check instead (see Mismatch()).
 * cases "links_allreduce" / "links_batch" / "links_acquire": a call over a downed link (see LinksDown()).
 */
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <acl/acl.h>
#include <hccl/hccl.h>
#include <hccl/hccl_res.h>

namespace {

constexpr uint8_t kSentinel = 0xA5;

#define FAILF(...)                                                     \
    do {                                                               \
        fprintf(stderr, "[rank %u] %s:%d: ", R.rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                  \
        fprintf(stderr, "\n");                                         \
        return 1;                                                      \
    } while (0)
#define ACLCHECK(expr)                                                                         \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        if (rc_ != 0) {                                                                        \
            const char* m_ = aclGetRecentErrMsg();                                             \
            FAILF("%s returned %d: %s", #expr, rc_, m_ ? m_ : "");                             \
        }                                                                                      \
    } while (0)
#define EXPECT_RC(expr, want)                                                                  \
    do {                                                                                       \
        int rc_ = (expr);                                                                      \
        if (rc_ != (int)(want)) {                                                              \
            const char* m_ = aclGetRecentErrMsg();                                             \
            FAILF("%s returned %d, expected %d: %s", #expr, rc_, (int)(want), m_ ? m_ : "");    \
        }                                                                                      \
    } while (0)

struct Rank {
    uint32_t rank = 0, n = 0;
    int32_t device = 0;
    HcclComm comm = nullptr;
    aclrtStream stream = nullptr;
    bool is950 = false;
    std::string out;
};

uint32_t Size(HcclDataType dt)
{
    switch (dt) {
        case HCCL_DATA_TYPE_INT8: case HCCL_DATA_TYPE_UINT8: return 1;
        case HCCL_DATA_TYPE_INT16: case HCCL_DATA_TYPE_UINT16: case HCCL_DATA_TYPE_FP16: case HCCL_DATA_TYPE_BFP16:
            return 2;
        case HCCL_DATA_TYPE_INT32: case HCCL_DATA_TYPE_UINT32: case HCCL_DATA_TYPE_FP32: return 4;
        default: return 8;
    }
}

const char* Name(HcclDataType dt)
{
    switch (dt) {
        case HCCL_DATA_TYPE_INT8: return "int8";
        case HCCL_DATA_TYPE_INT16: return "int16";
        case HCCL_DATA_TYPE_INT32: return "int32";
        case HCCL_DATA_TYPE_INT64: return "int64";
        case HCCL_DATA_TYPE_UINT8: return "uint8";
        case HCCL_DATA_TYPE_UINT16: return "uint16";
        case HCCL_DATA_TYPE_UINT32: return "uint32";
        case HCCL_DATA_TYPE_UINT64: return "uint64";
        case HCCL_DATA_TYPE_FP16: return "fp16";
        case HCCL_DATA_TYPE_BFP16: return "bf16";
        case HCCL_DATA_TYPE_FP32: return "fp32";
        default: return "fp64";
    }
}

bool IsUnsigned(HcclDataType dt)
{
    return dt == HCCL_DATA_TYPE_UINT8 || dt == HCCL_DATA_TYPE_UINT16 || dt == HCCL_DATA_TYPE_UINT32 ||
           dt == HCCL_DATA_TYPE_UINT64;
}

/* The input element i of `rank` in a case with `seed`: a small integer (tests/test_hccl_coll.py
 * computes the same). prod cases use {-1, 0, 1} (or {0, 1, 2} unsigned) so products stay exact. */
int64_t Value(uint32_t seed, uint32_t rank, uint64_t i, HcclDataType dt, int op)
{
    const uint64_t m = op == HCCL_REDUCE_PROD ? 3 : 23;
    const int64_t v = (int64_t)((seed * 31ull + rank * 7ull + i * 3ull) % m);
    return IsUnsigned(dt) ? v : v - (int64_t)(m / 2);
}

uint16_t Half(float f)
{
    /* exact for the small integers used here */
    if (f == 0.0f) return std::signbit(f) ? 0x8000 : 0;
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (mant >> 13));
}

void Put(uint8_t* p, HcclDataType dt, uint64_t i, int64_t v)
{
    switch (dt) {
        case HCCL_DATA_TYPE_INT8: ((int8_t*)p)[i] = (int8_t)v; break;
        case HCCL_DATA_TYPE_UINT8: ((uint8_t*)p)[i] = (uint8_t)v; break;
        case HCCL_DATA_TYPE_INT16: ((int16_t*)p)[i] = (int16_t)v; break;
        case HCCL_DATA_TYPE_UINT16: ((uint16_t*)p)[i] = (uint16_t)v; break;
        case HCCL_DATA_TYPE_INT32: ((int32_t*)p)[i] = (int32_t)v; break;
        case HCCL_DATA_TYPE_UINT32: ((uint32_t*)p)[i] = (uint32_t)v; break;
        case HCCL_DATA_TYPE_INT64: ((int64_t*)p)[i] = v; break;
        case HCCL_DATA_TYPE_UINT64: ((uint64_t*)p)[i] = (uint64_t)v; break;
        case HCCL_DATA_TYPE_FP16: ((uint16_t*)p)[i] = Half((float)v); break;
        case HCCL_DATA_TYPE_BFP16: {
            float f = (float)v;
            uint32_t x;
            memcpy(&x, &f, 4);
            ((uint16_t*)p)[i] = (uint16_t)(x >> 16);
            break;
        }
        case HCCL_DATA_TYPE_FP32: ((float*)p)[i] = (float)v; break;
        default: ((double*)p)[i] = (double)v; break;
    }
}

/* Count of a V-collective block from rank i to rank j (also in test_hccl_coll.py). */
uint64_t VCount(uint32_t i, uint32_t j, uint64_t base, uint32_t seed)
{
    return base + (i * 3u + j * 5u + seed) % 4u;
}

struct Case {
    std::string name, kind;
    HcclDataType dt;
    uint64_t count;
    int op;
    uint32_t root;
    uint32_t seed;
};

/* Device buffers of one case; freed at the end of it. */
struct Buffers {
    std::vector<void*> ptrs;
    ~Buffers()
    {
        for (void* p : ptrs) aclrtFree(p);
    }
    void* Alloc(size_t bytes)
    {
        void* p = nullptr;
        if (aclrtMalloc(&p, bytes ? bytes : 1, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return nullptr;
        ptrs.push_back(p);
        return p;
    }
};

/* A device buffer of `elems` elements holding this rank's input (rank = `as`). */
void* Input(Rank& R, Buffers& B, const Case& c, uint64_t elems, uint32_t as)
{
    std::vector<uint8_t> host(elems * Size(c.dt) + 1, kSentinel); /* + a guard byte past the end */
    for (uint64_t i = 0; i < elems; i++) Put(host.data(), c.dt, i, Value(c.seed, as, i, c.dt, c.op));
    void* d = B.Alloc(host.size());
    if (d && aclrtMemcpy(d, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS) return nullptr;
    (void)R;
    return d;
}

void* Output(Buffers& B, uint64_t bytes)
{
    std::vector<uint8_t> host(bytes + 1, kSentinel);
    void* d = B.Alloc(host.size());
    if (d && aclrtMemcpy(d, host.size(), host.data(), host.size(), ACL_MEMCPY_HOST_TO_DEVICE) != ACL_SUCCESS) return nullptr;
    return d;
}

int Save(Rank& R, const Case& c, void* dev, uint64_t bytes)
{
    std::vector<uint8_t> host(bytes + 1);
    ACLCHECK(aclrtMemcpy(host.data(), host.size(), dev, host.size(), ACL_MEMCPY_DEVICE_TO_HOST));
    std::string path = R.out + "/" + c.name + ".r" + std::to_string(R.rank) + ".bin";
    FILE* f = fopen(path.c_str(), "wb");
    if (!f || fwrite(host.data(), 1, bytes, f) != bytes || fclose(f) != 0) FAILF("cannot write %s", path.c_str());
    if (host[bytes] != kSentinel) FAILF("case %s wrote past the end of its output buffer", c.name.c_str());
    return 0;
}

/* Runs one case on this rank: enqueue, synchronise, save the output. */
int Run(Rank& R, const Case& c)
{
    Buffers B;
    const uint32_t n = R.n, me = R.rank, u = Size(c.dt);
    const uint64_t cnt = c.count;
    const std::string& k = c.kind;
    if (k == "allreduce") {
        void* in = Input(R, B, c, cnt, me);
        void* out = Output(B, cnt * u);
        ACLCHECK(HcclAllReduce(in, out, cnt, c.dt, (HcclReduceOp)c.op, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * u);
    }
    if (k == "allreduce_inplace") {
        void* buf = Input(R, B, c, cnt, me);
        ACLCHECK(HcclAllReduce(buf, buf, cnt, c.dt, (HcclReduceOp)c.op, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, buf, cnt * u);
    }
    if (k == "broadcast") {
        void* buf = me == c.root ? Input(R, B, c, cnt, me) : Output(B, cnt * u);
        ACLCHECK(HcclBroadcast(buf, cnt, c.dt, c.root, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, buf, cnt * u);
    }
    if (k == "allgather") {
        void* in = Input(R, B, c, cnt, me);
        void* out = Output(B, cnt * n * u);
        ACLCHECK(HcclAllGather(in, out, cnt, c.dt, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * n * u);
    }
    if (k == "reducescatter") {
        void* in = Input(R, B, c, cnt * n, me);
        void* out = Output(B, cnt * u);
        ACLCHECK(HcclReduceScatter(in, out, cnt, c.dt, (HcclReduceOp)c.op, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * u);
    }
    if (k == "reduce") {
        void* in = Input(R, B, c, cnt, me);
        void* out = Output(B, cnt * u);
        ACLCHECK(HcclReduce(in, out, cnt, c.dt, (HcclReduceOp)c.op, c.root, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return me == c.root ? Save(R, c, out, cnt * u) : 0;
    }
    if (k == "scatter") {
        void* in = me == c.root ? Input(R, B, c, cnt * n, me) : nullptr; /* as in CANN's example */
        void* out = Output(B, cnt * u);
        ACLCHECK(HcclScatter(in, out, cnt, c.dt, c.root, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * u);
    }
    if (k == "alltoall") {
        void* in = Input(R, B, c, cnt * n, me);
        void* out = Output(B, cnt * n * u);
        ACLCHECK(HcclAlltoAll(in, cnt, c.dt, out, cnt, c.dt, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * n * u);
    }
    if (k == "alltoallv" || k == "alltoallvc") {
        /* rank i sends VCount(i, j) elements to j; send blocks packed, receive blocks with a gap of 1 */
        std::vector<uint64_t> sc(n), sd(n), rc(n), rd(n), matrix((size_t)n * n);
        uint64_t so = 0, ro = 0;
        for (uint32_t j = 0; j < n; j++) {
            sc[j] = VCount(me, j, cnt, c.seed);
            rc[j] = VCount(j, me, cnt, c.seed);
            sd[j] = so;
            rd[j] = ro;
            so += sc[j];
            ro += rc[j] + (k == "alltoallv" ? 1 : 0);
            for (uint32_t i = 0; i < n; i++) matrix[(size_t)i * n + j] = VCount(i, j, cnt, c.seed);
        }
        void* in = Input(R, B, c, so, me);
        void* out = Output(B, ro * u);
        if (k == "alltoallv")
            ACLCHECK(HcclAlltoAllV(in, sc.data(), sd.data(), c.dt, out, rc.data(), rd.data(), c.dt, R.comm, R.stream));
        else
            ACLCHECK(HcclAlltoAllVC(in, matrix.data(), c.dt, out, c.dt, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, ro * u);
    }
    if (k == "allgatherv") {
        /* rank j contributes VCount(j, 0) elements, placed with a gap of 2 */
        std::vector<uint64_t> rc(n), rd(n);
        uint64_t ro = 0;
        for (uint32_t j = 0; j < n; j++) {
            rc[j] = VCount(j, 0, cnt, c.seed);
            rd[j] = ro;
            ro += rc[j] + 2;
        }
        void* in = Input(R, B, c, rc[me], me);
        void* out = Output(B, ro * u);
        ACLCHECK(HcclAllGatherV(in, rc[me], out, rc.data(), rd.data(), c.dt, R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, ro * u);
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
        void* in = Input(R, B, c, so, me);
        void* out = Output(B, sc[me] * u);
        ACLCHECK(HcclReduceScatterV(in, sc.data(), sd.data(), out, sc[me], c.dt, (HcclReduceOp)c.op, R.comm,
                                    R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, sc[me] * u);
    }
    if (k == "sendrecv") {
        /* pairs (0 -> 1), (2 -> 3), ...: the even rank sends, the odd one receives; an odd last rank idles */
        void* out = Output(B, cnt * u);
        if (me % 2 == 0 && me + 1 < n) {
            void* in = Input(R, B, c, cnt, me);
            ACLCHECK(HcclSend(in, cnt, c.dt, me + 1, R.comm, R.stream));
        } else if (me % 2 == 1) {
            ACLCHECK(HcclRecv(out, cnt, c.dt, me - 1, R.comm, R.stream));
        }
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * u);
    }
    if (k == "batchring" || k == "batchring2" || k == "batchmany") {
        /* send to the next rank, receive from the previous one (batchring2: two items each way;
         * batchmany: 150 each way, more than one launch of the built-in takes) */
        const uint32_t items = k == "batchring" ? 1 : k == "batchring2" ? 2 : 150;
        void* in = Input(R, B, c, cnt * items, me);
        void* out = Output(B, cnt * items * u);
        std::vector<HcclSendRecvItem> list;
        for (uint32_t t = 0; t < items; t++) {
            HcclSendRecvItem s = {HCCL_SEND, (uint8_t*)in + t * cnt * u, cnt, c.dt, (me + 1) % n};
            HcclSendRecvItem r = {HCCL_RECV, (uint8_t*)out + t * cnt * u, cnt, c.dt, (me + n - 1) % n};
            list.push_back(t % 2 ? r : s);
            list.push_back(t % 2 ? s : r);
        }
        ACLCHECK(HcclBatchSendRecv(list.data(), (uint32_t)list.size(), R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, cnt * items * u);
    }
    if (k == "batchall") {
        /* everyone sends VCount(me, j) elements to every other rank j and receives from all */
        std::vector<uint64_t> so(n + 1, 0), ro(n + 1, 0);
        for (uint32_t j = 0; j < n; j++) {
            so[j + 1] = so[j] + (j == me ? 0 : VCount(me, j, cnt, c.seed));
            ro[j + 1] = ro[j] + (j == me ? 0 : VCount(j, me, cnt, c.seed));
        }
        void* in = Input(R, B, c, so[n], me);
        void* out = Output(B, ro[n] * u);
        std::vector<HcclSendRecvItem> list;
        for (uint32_t d = 1; d < n; d++) { /* receives first on odd ranks: any order must work */
            uint32_t j = (me + d) % n;
            HcclSendRecvItem s = {HCCL_SEND, (uint8_t*)in + so[j] * u, so[j + 1] - so[j], c.dt, j};
            HcclSendRecvItem r = {HCCL_RECV, (uint8_t*)out + ro[j] * u, ro[j + 1] - ro[j], c.dt, j};
            list.push_back(me % 2 ? r : s);
            list.push_back(me % 2 ? s : r);
        }
        ACLCHECK(HcclBatchSendRecv(list.data(), (uint32_t)list.size(), R.comm, R.stream));
        ACLCHECK(aclrtSynchronizeStream(R.stream));
        return Save(R, c, out, ro[n] * u);
    }
    FAILF("unknown case kind %s", k.c_str());
}

/* Argument checks and return codes (CANN's), and count 0 as a successful no-op. Local calls only. */
int Args(Rank& R)
{
    const HcclComm cm = R.comm;
    const aclrtStream st = R.stream;
    void* d = nullptr;
    ACLCHECK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    const HcclDataType f32 = HCCL_DATA_TYPE_FP32;
    EXPECT_RC(HcclAllReduce(d, d, 0, f32, HCCL_REDUCE_SUM, nullptr, nullptr), HCCL_SUCCESS); /* count 0 first */
    EXPECT_RC(HcclAllReduce(nullptr, d, 4, f32, HCCL_REDUCE_SUM, cm, st), HCCL_E_PTR);
    EXPECT_RC(HcclAllReduce(d, nullptr, 4, f32, HCCL_REDUCE_SUM, cm, st), HCCL_E_PTR);
    EXPECT_RC(HcclAllReduce(d, d, 4, f32, HCCL_REDUCE_SUM, nullptr, st), HCCL_E_PTR);
    EXPECT_RC(HcclAllReduce(d, d, 4, f32, HCCL_REDUCE_SUM, cm, nullptr), HCCL_E_PTR);
    EXPECT_RC(HcclAllReduce(d, d, 4, f32, (HcclReduceOp)7, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclAllReduce(d, d, 4, (HcclDataType)99, HCCL_REDUCE_SUM, cm, st), HCCL_E_NOT_SUPPORT);
    EXPECT_RC(HcclAllReduce(d, d, 4, HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_SUM, cm, st), HCCL_E_NOT_SUPPORT);
    EXPECT_RC(HcclReduceScatter(d, d, 4, HCCL_DATA_TYPE_INT16, HCCL_REDUCE_PROD, cm, st), HCCL_E_NOT_SUPPORT);
    /* CANN's per-API pages (hcomm_kit/base/dtypes.py HCCL_API_REDUCE): A2/A3 no uint64 / fp64; prod never
     * int16 / bf16; HcclReduceScatterV: A2 no int64, A2/A3 no prod, 950 no uint64. */
    const bool isA2 = strcmp(aclrtGetSocName(), "Ascend910B") == 0;
    EXPECT_RC(HcclAllReduce(d, d, 4, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_PROD, cm, st), HCCL_E_NOT_SUPPORT);
    if (!R.is950) {
        EXPECT_RC(HcclReduce(d, d, 4, HCCL_DATA_TYPE_UINT64, HCCL_REDUCE_SUM, 0, cm, st), HCCL_E_NOT_SUPPORT);
        EXPECT_RC(HcclAllReduce(d, d, 4, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_MAX, cm, st), HCCL_E_NOT_SUPPORT);
    }
    {
        uint64_t cnt[64], dsp[64];
        for (uint32_t j = 0; j < R.n; j++) cnt[j] = 1, dsp[j] = j;
        void* out = (char*)d + 1024;
        if (!R.is950) /* A2/A3: sum, max, min only */
            EXPECT_RC(HcclReduceScatterV(d, cnt, dsp, out, 1, f32, HCCL_REDUCE_PROD, cm, st), HCCL_E_NOT_SUPPORT);
        if (isA2) /* A2: no int64 */
            EXPECT_RC(HcclReduceScatterV(d, cnt, dsp, out, 1, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, cm, st),
                      HCCL_E_NOT_SUPPORT);
        EXPECT_RC(HcclReduceScatterV(d, cnt, dsp, out, 1, HCCL_DATA_TYPE_UINT64, HCCL_REDUCE_SUM, cm, st),
                  HCCL_E_NOT_SUPPORT);
    }
    EXPECT_RC(HcclReduce(d, d, 4, f32, HCCL_REDUCE_SUM, R.n, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclBroadcast(d, 4, f32, R.n, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclBroadcast(d, 4, HCCL_DATA_TYPE_INT128, 0, cm, st), HCCL_E_NOT_SUPPORT);
    EXPECT_RC(HcclScatter(nullptr, d, 4, f32, R.rank, cm, st), HCCL_E_PTR); /* the root must send */
    EXPECT_RC(HcclAllGather(d, nullptr, 4, f32, cm, st), HCCL_E_PTR);
    EXPECT_RC(HcclAlltoAll(d, 4, f32, (char*)d + 1024, 8, f32, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclAlltoAll(d, 4, f32, (char*)d + 1024, 4, HCCL_DATA_TYPE_INT32, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclAlltoAllV(d, nullptr, nullptr, f32, d, nullptr, nullptr, f32, cm, st), HCCL_E_PTR);
    EXPECT_RC(HcclAlltoAllVC(d, nullptr, f32, d, f32, cm, st), HCCL_E_PTR);
    EXPECT_RC(HcclSend(d, 4, f32, R.rank, cm, st), HCCL_E_PARA); /* no send to self */
    EXPECT_RC(HcclSend(d, 4, f32, R.n, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclRecv(nullptr, 4, f32, (R.rank + 1) % R.n, cm, st), HCCL_E_PTR);
    EXPECT_RC(HcclSend(nullptr, 0, f32, R.rank, cm, st), HCCL_SUCCESS);
    EXPECT_RC(HcclBatchSendRecv(nullptr, 1, cm, st), HCCL_E_PTR);
    HcclSendRecvItem bad = {(HcclSendRecvType)5, d, 4, f32, (R.rank + 1) % R.n};
    EXPECT_RC(HcclBatchSendRecv(&bad, 1, cm, st), HCCL_E_PARA);
    HcclSendRecvItem self = {HCCL_SEND, d, 4, f32, R.rank};
    EXPECT_RC(HcclBatchSendRecv(&self, 1, cm, st), HCCL_E_PARA);
    EXPECT_RC(HcclBatchSendRecv(&bad, 0, cm, st), HCCL_SUCCESS);
    uint64_t counts[64] = {0};
    counts[R.rank] = 5;
    EXPECT_RC(HcclAllGatherV(d, 4, d, counts, counts, f32, cm, st), HCCL_E_PARA); /* recvCounts[me] != sendCount */
    EXPECT_RC(HcclReduceScatterV(d, counts, counts, d, 4, f32, HCCL_REDUCE_SUM, cm, st), HCCL_E_PARA);
    /* HCCL errors are not runtime errors: the thread's last ACL error is untouched */
    EXPECT_RC(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    /* nothing above was enqueued */
    ACLCHECK(aclrtSynchronizeStream(st));
    ACLCHECK(aclrtFree(d));
    return 0;
}

std::vector<Case> Cases(bool is950, uint32_t n, const std::string& only)
{
    std::vector<Case> cs;
    auto want = [&only](const std::string& k) {
        return only.empty() || ("," + only + ",").find("," + k + ",") != std::string::npos;
    };
    uint32_t seed = 1;
    auto add = [&](const std::string& kind, HcclDataType dt, uint64_t count, int op, uint32_t root) {
        if (!want(kind)) return;
        char name[128];
        snprintf(name, sizeof name, "%s_%s_c%llu_o%d_r%u_s%u", kind.c_str(), Name(dt), (unsigned long long)count, op,
                 root, seed);
        cs.push_back({name, kind, dt, count, op, root, seed++});
    };
    std::vector<HcclDataType> red = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT16, HCCL_DATA_TYPE_INT32,
                                     HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_BFP16};
    /* CANN's tables (hcomm_kit/base/dtypes.py): int64 and prod on every product (A2/A3: the built-ins
     * compute them, the Hcomm primitive cannot), uint64 / fp64 on 950. */
    red.push_back(HCCL_DATA_TYPE_INT64);
    if (is950) red.insert(red.end(), {HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_FP64});
    std::vector<int> ops = {HCCL_REDUCE_SUM, HCCL_REDUCE_MAX, HCCL_REDUCE_MIN};
    for (HcclDataType dt : red)
        for (int op : ops) add("allreduce", dt, 1000, op, 0);
    for (HcclDataType dt : {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_INT32, HCCL_DATA_TYPE_INT64, HCCL_DATA_TYPE_FP16,
                            HCCL_DATA_TYPE_FP32})
        add("allreduce", dt, 257, HCCL_REDUCE_PROD, 0);
    if (is950)
        for (HcclDataType dt : {HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_FP64}) add("allreduce", dt, 257, HCCL_REDUCE_PROD, 0);
    add("reduce", HCCL_DATA_TYPE_INT64, 300001, HCCL_REDUCE_SUM, n - 1);   /* > the 1 MB HCCL buffer */
    add("reducescatter", HCCL_DATA_TYPE_INT32, 70001, HCCL_REDUCE_PROD, 0);
    add("allreduce", HCCL_DATA_TYPE_FP32, 1, HCCL_REDUCE_SUM, 0);
    add("allreduce", HCCL_DATA_TYPE_FP32, 300001, HCCL_REDUCE_SUM, 0); /* > the 1 MB HCCL buffer: sliced */
    add("allreduce_inplace", HCCL_DATA_TYPE_INT32, 4099, HCCL_REDUCE_MAX, 0);
    std::vector<HcclDataType> any = {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_UINT16, HCCL_DATA_TYPE_INT32,
                                     HCCL_DATA_TYPE_FP16, HCCL_DATA_TYPE_UINT64, HCCL_DATA_TYPE_FP64};
    for (uint32_t root : {0u, n - 1})
        for (HcclDataType dt : {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP64}) add("broadcast", dt, 1001, 0, root);
    add("broadcast", HCCL_DATA_TYPE_BFP16, 140000, 0, n / 2);
    for (HcclDataType dt : any) add("allgather", dt, 333, 0, 0);
    add("allgather", HCCL_DATA_TYPE_FP32, 70001, 0, 0);
    for (HcclDataType dt : red) add("reducescatter", dt, 129, HCCL_REDUCE_SUM, 0);
    add("reducescatter", HCCL_DATA_TYPE_FP32, 70001, HCCL_REDUCE_MIN, 0);
    for (uint32_t root : {0u, n - 1}) {
        add("reduce", HCCL_DATA_TYPE_INT32, 777, HCCL_REDUCE_SUM, root);
        add("reduce", HCCL_DATA_TYPE_BFP16, 3, HCCL_REDUCE_MAX, root);
        add("scatter", HCCL_DATA_TYPE_FP16, 515, 0, root);
        add("scatter", HCCL_DATA_TYPE_UINT64, 1, 0, root);
    }
    add("reduce", HCCL_DATA_TYPE_FP32, 300001, HCCL_REDUCE_MIN, n / 2);
    for (HcclDataType dt : any) add("alltoall", dt, 97, 0, 0);
    add("alltoall", HCCL_DATA_TYPE_INT32, 40001, 0, 0);
    for (HcclDataType dt : {HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_FP64}) {
        add("alltoallv", dt, 50, 0, 0);
        add("alltoallvc", dt, 50, 0, 0);
        add("allgatherv", dt, 61, 0, 0);
    }
    add("alltoallv", HCCL_DATA_TYPE_FP32, 0, 0, 0); /* some blocks empty */
    add("reducescatterv", HCCL_DATA_TYPE_FP32, 101, HCCL_REDUCE_SUM, 0);
    add("reducescatterv", HCCL_DATA_TYPE_INT16, 7, HCCL_REDUCE_MAX, 0);
    for (HcclDataType dt : {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_INT8, HCCL_DATA_TYPE_FP64}) add("sendrecv", dt, 1025, 0, 0);
    add("sendrecv", HCCL_DATA_TYPE_FP32, 300001, 0, 0);
    for (HcclDataType dt : {HCCL_DATA_TYPE_FP32, HCCL_DATA_TYPE_UINT16}) add("batchring", dt, 999, 0, 0);
    add("batchring", HCCL_DATA_TYPE_FP32, 300001, 0, 0);
    add("batchring2", HCCL_DATA_TYPE_INT32, 513, 0, 0);
    add("batchmany", HCCL_DATA_TYPE_INT16, 3, 0, 0);
    add("batchall", HCCL_DATA_TYPE_FP16, 77, 0, 0);
    add("batchall", HCCL_DATA_TYPE_INT64, 5000, 0, 0);
    return cs;
}

int Manifest(Rank& R, const std::vector<Case>& cs)
{
    std::string path = R.out + "/manifest.txt";
    FILE* f = fopen(path.c_str(), "w");
    if (!f) FAILF("cannot write %s", path.c_str());
    fprintf(f, "ranks %u soc %s\n", R.n, aclrtGetSocName());
    for (const Case& c : cs)
        fprintf(f, "%s %s %s %llu %d %u %u\n", c.name.c_str(), c.kind.c_str(), Name(c.dt), (unsigned long long)c.count,
                c.op, c.root, c.seed);
    if (fclose(f) != 0) FAILF("cannot write %s", path.c_str());
    return 0;
}

/* cases "mismatch" / "mismatch0": every rank makes one matching HcclAllReduce of 8 fp32, then a
 * second one where rank 1 passes 16 elements ("mismatch") or 0 ("mismatch0") and the others 8. The
 * collective-call check must fail that call on every rank, at the call or at the stream's
 * synchronisation, naming both calls (a rank whose call moves nothing may return at once, before the
 * others find the mismatch), and every later call fails. Prints "MISMATCH rank <r> call <rc> sync
 * <rc> next <rc> msg <text>". */
int Mismatch(Rank& R, bool zero)
{
    void* d = nullptr;
    ACLCHECK(aclrtMalloc(&d, 64 * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMemset(d, 64 * sizeof(float), 0, 64 * sizeof(float)));
    ACLCHECK(HcclAllReduce(d, d, 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, R.comm, R.stream));
    ACLCHECK(aclrtSynchronizeStream(R.stream));
    uint64_t count = R.rank == 1 ? (zero ? 0 : 16) : 8;
    int call = HcclAllReduce(d, d, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, R.comm, R.stream);
    auto recent = [] {
        const char* m = aclGetRecentErrMsg(); /* reading it clears it */
        return std::string(m ? m : "");
    };
    std::string msg = recent();
    int sync = aclrtSynchronizeStream(R.stream);
    if (sync != 0 && call == 0) msg = recent();
    for (char& ch : msg)
        if (ch == '\n') ch = ' ';
    /* the communicator is aborted now: the next call fails on every rank (also on a rank whose
     * empty call returned at once before the others found the mismatch) */
    int next = HcclAllReduce(d, d, 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, R.comm, R.stream);
    if (next == 0) next = aclrtSynchronizeStream(R.stream);
    recent();
    printf("MISMATCH rank %u call %d sync %d next %d msg %s\n", R.rank, call, sync, next, msg.c_str());
    /* the communicator is aborted: destroying it must still work */
    ACLCHECK(HcclCommDestroy(R.comm));
    ACLCHECK(aclrtDestroyStream(R.stream));
    ACLCHECK(aclrtFree(d));
    ACLCHECK(aclrtResetDevice(R.device));
    return 0;
}

/* cases "links_allreduce" / "links_batch" / "links_acquire", run with HCOMM_KIT_LINKS_DOWN=0-1: every
 * rank makes an HcclAllReduce of 8 fp32 (its algorithm needs every pair's link), a batch ring (send to
 * rank + 1, recv from rank - 1: ranks 0 and 1 exchange over the downed link, the others wait for them),
 * or acquires channels to every peer itself. Every rank's call must fail at once (at the call or at
 * the stream's synchronisation), naming the link. Prints "LINKS rank <r> call <rc> sync <rc> secs <t>
 * msg <text>". */
int LinksDown(Rank& R, const std::string& which)
{
    void* d = nullptr;
    ACLCHECK(aclrtMalloc(&d, 64 * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    ACLCHECK(aclrtMemset(d, 64 * sizeof(float), 0, 64 * sizeof(float)));
    auto recent = [] {
        const char* m = aclGetRecentErrMsg(); /* reading it clears it */
        return std::string(m ? m : "");
    };
    auto t0 = std::chrono::steady_clock::now();
    int call = 0;
    if (which == "links_allreduce") {
        call = HcclAllReduce(d, d, 8, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, R.comm, R.stream);
    } else if (which == "links_batch") {
        HcclSendRecvItem items[2];
        memset(items, 0, sizeof items);
        items[0].sendRecvType = HCCL_SEND;
        items[0].remoteRank = (R.rank + 1) % R.n;
        items[0].buf = d;
        items[1].sendRecvType = HCCL_RECV;
        items[1].remoteRank = (R.rank + R.n - 1) % R.n;
        items[1].buf = static_cast<float*>(d) + 32;
        for (HcclSendRecvItem& it : items) {
            it.count = 8;
            it.dataType = HCCL_DATA_TYPE_FP32;
        }
        call = HcclBatchSendRecv(items, 2, R.comm, R.stream);
    } else {
        std::vector<HcclChannelDesc> descs(R.n - 1);
        HcclChannelDescInit(descs.data(), R.n - 1);
        for (uint32_t i = 0, q = 0; q < R.n; q++) {
            if (q == R.rank) continue;
            descs[i].remoteRank = q;
            descs[i].channelProtocol = COMM_PROTOCOL_HCCS;
            descs[i++].notifyNum = 2;
        }
        std::vector<ChannelHandle> hs(R.n - 1, 0);
        call = HcclChannelAcquire(R.comm, COMM_ENGINE_AICPU_TS, descs.data(), R.n - 1, hs.data());
    }
    std::string msg = recent();
    int sync = call == 0 ? aclrtSynchronizeStream(R.stream) : 0;
    if (sync != 0) msg = recent();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (char& ch : msg)
        if (ch == '\n') ch = ' ';
    printf("LINKS rank %u call %d sync %d secs %.3f msg %s\n", R.rank, call, sync, secs, msg.c_str());
    /* as in CANN's examples, a rank whose call failed does not destroy its communicator while the
     * others still wait (their waits must end through what the board says about it) */
    static std::atomic<uint32_t> printed{0};
    printed++;
    for (int i = 0; i < 6000 && printed.load() < R.n; i++) usleep(10000);
    ACLCHECK(HcclCommDestroy(R.comm));
    ACLCHECK(aclrtDestroyStream(R.stream));
    ACLCHECK(aclrtFree(d));
    ACLCHECK(aclrtResetDevice(R.device));
    return 0;
}

int RunRank(Rank& R, const HcclRootInfo* root, const std::string& only)
{
    ACLCHECK(aclrtSetDevice(R.device));
    ACLCHECK(HcclCommInitRootInfo(R.n, root, R.rank, &R.comm));
    ACLCHECK(aclrtCreateStream(&R.stream));
    R.is950 = strcmp(aclrtGetSocName(), "Ascend950") == 0;
    if (only == "mismatch" || only == "mismatch0") return Mismatch(R, only == "mismatch0");
    if (only.rfind("links_", 0) == 0) return LinksDown(R, only);
    if (only.empty() || only.find("args") != std::string::npos) {
        if (Args(R)) return 1;
    }
    std::vector<Case> cs = Cases(R.is950, R.n, only);
    if (R.rank == 0 && Manifest(R, cs)) return 1;
    for (const Case& c : cs)
        if (Run(R, c)) FAILF("case %s failed", c.name.c_str());
    ACLCHECK(HcclCommDestroy(R.comm));
    ACLCHECK(aclrtDestroyStream(R.stream));
    ACLCHECK(aclrtResetDevice(R.device));
    printf("OK rank %u (%zu cases)\n", R.rank, cs.size());
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    setvbuf(stdout, nullptr, _IOLBF, 0);
    Rank R;
    if (argc < 3) {
        fprintf(stderr, "usage: %s threads|mpi <outdir> [cases]\n", argv[0]);
        return 2;
    }
    std::string mode = argv[1], only = argc > 3 ? argv[3] : "";
    ACLCHECK(aclInit(nullptr));
    if (mode == "threads") {
        uint32_t devs = 0;
        ACLCHECK(aclrtGetDeviceCount(&devs));
        ACLCHECK(aclrtSetDevice(0));
        HcclRootInfo root;
        ACLCHECK(HcclGetRootInfo(&root));
        std::vector<Rank> ranks(devs);
        std::vector<std::thread> ts;
        std::atomic<int> fails{0};
        for (uint32_t i = 0; i < devs; i++) {
            ranks[i].rank = i;
            ranks[i].n = devs;
            ranks[i].device = (int32_t)i;
            ranks[i].out = argv[2];
            ts.emplace_back([&, i] {
                if (RunRank(ranks[i], &root, only)) fails++;
            });
        }
        for (auto& t : ts) t.join();
        ACLCHECK(aclrtResetDevice(0));
        ACLCHECK(aclFinalize());
        return fails ? 1 : 0;
    }
    if (mode != "mpi") FAILF("unknown mode %s", mode.c_str());
    const char* r = getenv("OMPI_COMM_WORLD_RANK");
    const char* s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!r || !s) FAILF("mpi mode: OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE are not set (run under mpirun)");
    R.rank = (uint32_t)atoi(r);
    R.n = (uint32_t)atoi(s);
    R.out = argv[2];
    R.device = 0; /* one device per process */
    std::string path = R.out + "/root.bin";
    HcclRootInfo root;
    if (R.rank == 0) {
        ACLCHECK(aclrtSetDevice(0));
        ACLCHECK(HcclGetRootInfo(&root));
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
    int rc = RunRank(R, &root, only);
    if (R.rank == 0) aclrtResetDevice(0);
    aclFinalize();
    return rc;
}
