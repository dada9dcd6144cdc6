/*
 * exec_op.cc -- built-in allreduce: output[i] = input_0[i] op input_1[i] op ... (every rank).
 *
 * OpParam.count = elements of input = output (output == input allowed); OpParam.algo (hk_coll.h):
 *   HK_ALGO_MESH_ONE_SHOT      AicpuAllReduceSoleMeshOneShot: every rank writes its whole input
 *                              into a slot of every peer's HCCL buffer (a thread per peer), then
 *                              reduces the n inputs itself in rank order;
 *   HK_ALGO_MESH_TWO_SHOT      AicpuAllReduceSoleMeshTwoShot: mesh reduce-scatter (writes into
 *                              slots, a local reduce) then mesh all-gather (reads);
 *   HK_ALGO_MESH_CHUNK         AicpuAllReduceSoleMeshChunkTwoShot: the reduce-scatter by
 *                              write-reduce in n-1 steps (every peer adds one sub-chunk of my chunk
 *                              per step), then the mesh all-gather;
 *   HK_ALGO_NHR                AicpuAllReduceSoleNHR: NHR reduce-scatter + all-gather (one thread);
 *   HK_ALGO_NHR_AICPU_REDUCE   AicpuAllReduceSoleNHRAicpuReduce: the same, the reductions computed
 *                              by the kernel (writes into a scratch mirror, then loops);
 *   HK_ALGO_SEQUENCE_MESH_NHR  AicpuAllReduceSequenceMeshConcurNHR: mesh reduce-scatter in the
 *                              server, NHR reduce-scatter + all-gather among the servers, mesh
 *                              all-gather in the server;
 *   HK_ALGO_SEQUENCE_MESH_NHR_NHR  AicpuAllReduceSequenceMeshConcurNHRNHR: the same with a third
 *                              level (super-pods) between the two NHR halves;
 *   HK_ALGO_PARALLEL_MESH_NHR  AicpuAllReduceParallelMeshNHR: the data in two parts, one taking
 *                              the order of the sequence executor, the other the servers first,
 *                              so that the server's mesh and the links between servers work at
 *                              the same time;
 *   HK_ALGO_AUTO               HkAutoAllReduce below (CANN's SelectMeshAlgoAicpu for one server:
 *                              the kernel does not know the servers; the host's selector does).
 * Every algorithm loops over the message in pieces of the HCCL buffer divided by what it keeps
 * there (CANN's executors: maxDataSizePerLoop = CCL buffer / scratch multiple); each piece runs the
 * whole protocol and ends clean (hk_coll.h: clean exit, ACK/DATA rules). A2/A3 int64 and prod,
 * which the Hcomm reduce primitives refuse, are combined by the kernel (hk_coll.h, staged
 * reductions): the write-reduce algorithms (ChunkTwoShot, SoleNHR) cannot take them and say so.
 *
 * Data plane rules (Hcomm guide §1, §2, §4): ...OnThread calls only enqueue; one thread's
 * tasks run in order; notifies are binary flags; remote Write destinations / Read sources lie in
 * the peer's HCCL buffer, local sides may be any device memory (input/output directly).
 */
#include "exec_op.h"
#include "allreduce_log.h"
#include "hk_coll.h"

namespace ops_allreduce {
namespace {

/* CANN's SelectMeshAlgoAicpu (all_reduce_auto_selector.cc), level 0 MESH_1D: one-shot up to 8 MiB;
 * above, the chunked two-shot when bytes * 64 / n^2 exceeds 32 MiB, else the two-shot; 64-bit
 * dtypes and prod: one-shot up to 8 MiB, else the two-shot. */
uint32_t HkAutoAllReduce(const OpParam &param, uint64_t bytes, uint32_t n)
{
    const int32_t dt = param.dataType;
    const bool special = dt == HCOMM_DATA_TYPE_INT64 || dt == HCOMM_DATA_TYPE_UINT64 || dt == HCOMM_DATA_TYPE_FP64 ||
                         param.reduceOp == HCOMM_REDUCE_PROD;
    const uint64_t small = 8ull << 20;
    if (bytes <= small) {
        return HK_ALGO_MESH_ONE_SHOT;
    }
    if (special) {
        return HK_ALGO_MESH_TWO_SHOT;
    }
    const double ratio = 64.0 / (static_cast<double>(n) * n);
    return static_cast<double>(bytes) * ratio > static_cast<double>(32ull << 20) ? HK_ALGO_MESH_CHUNK
                                                                                 : HK_ALGO_MESH_TWO_SHOT;
}

struct Io {
    const uint8_t *in;
    uint8_t *out;
};

HcclResult NeedAll(HkCall *c)
{
    for (uint32_t p = 0; p < c->res.rankSize; ++p) {
        HK_TRY(HkCallPeer(c, p));
    }
    return HCCL_SUCCESS;
}

/* Write-reduce algorithms need the reduce primitive for the dtype/op. */
HcclResult NeedPrimitive(const HkCall &c, const char *instead)
{
    if (c.prim) {
        return HCCL_SUCCESS;
    }
    OP_LOG_ERROR("%s reduces with write-reduce, which this product cannot do for dataType %d with reduce op %d "
                 "(A2/A3: no int64, no prod); use %s, tag %s", c.name, static_cast<int>(c.param.dataType),
                 static_cast<int>(c.param.reduceOp), instead, c.param.tag);
    return HCCL_E_NOT_SUPPORT;
}

/*
 * One-shot (CANN's InsTempAllReduceMesh1DOneShot), per loop of `cnt` elements (the HCCL buffer
 * holds n slots of a loop: multiple n). Threads: main + one per peer (2 ranks: main alone). Each
 * peer thread: push exchange writing my input into slot `me` of the peer's buffer while the peer
 * writes its input into my slot `peer`. After the join, main: output = term 0 op term 1 op ... in
 * rank order (term k: slot k, my own input for k = me), so every rank computes the same bits.
 * In place with me > 0, my input is first copied into my own (unused) slot: output = term 0
 * overwrites it. Tasks per rank: fork 2(n-1), 5 per peer, join 2(n-1), copy, n-1 reduces.
 */
HcclResult OneShotLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt, uint64_t slotBytes)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t workers = HkMeshWorkers(n);
    const uint8_t *mine = io.in;
    if (io.in == io.out && me != 0) {
        mine = c.buf + me * slotBytes;
        HK_TRY(HkCopy(c.param, c.Th(0), c.buf + me * slotBytes, io.in, cnt * c.unit));
    }
    if (workers != 0) {
        HK_TRY(HkFork(c, 0, 1, workers));
    }
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t p = (me + i) % n;
        const HkXfer x{c.Remote(p) + me * slotBytes, io.in, cnt};
        HK_TRY(HkPush(c, c.Th(workers != 0 ? i : 0), p, p, &x, 1, HK_WRITE));
    }
    if (workers != 0) {
        HK_TRY(HkJoin(c, 0, 1, workers));
    }
    const uint8_t *terms[HK_MAX_RANKS];
    for (uint32_t k = 0; k < n; ++k) {
        terms[k] = k == me ? mine : c.buf + k * slotBytes;
    }
    return HkReduceSeq(c, c.Th(0), io.out, terms, n, cnt);
}

/*
 * Two-shot (CANN's InsTempAllReduceMesh1DTwoShot), per loop: n chunks (HkChunkRange), n slots of a
 * chunk in the buffer (multiple about 1). Mesh reduce-scatter (hk_coll.h HkMeshReduceScatter: my
 * chunk j goes into slot `me` of rank j, then main combines my own chunk and the slots into slot
 * `me`, which holds my reduced chunk), then mesh all-gather by reads (HkMeshAllGather: every rank
 * reads rank j's slot j into its output chunk j). Each chunk is reduced once, by its owner.
 */
HcclResult TwoShotLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt, uint64_t slotBytes)
{
    uint8_t *mySlot = c.buf + g.me * slotBytes;
    HK_TRY(HkMeshReduceScatter(c, g, 0, 1, io.in, cnt, 0, slotBytes, mySlot));
    return HkMeshAllGather(c, g, 0, 1, HkStage{0, slotBytes, false}, cnt, io.out, mySlot);
}

/*
 * Chunked two-shot (CANN's InsTempAllReduceMesh1DTwoShotMeshChunk), per loop (the buffer mirrors
 * the loop's data: multiple 2, as CANN's): n chunks. Main copies my chunk of the input into its
 * place in my buffer; HkMeshChunkReduceScatter (hk_coll.h: n-1 steps of write-reduce, every peer
 * adding one sub-chunk of my chunk per step, a thread per peer) leaves my chunk reduced there; then
 * the mesh all-gather by reads of the reduced chunks. No local reduce pass: the links reduce.
 */
HcclResult ChunkLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt)
{
    uint64_t myFirst = 0, myCnt = 0;
    HkChunkRange(cnt, g.n, g.me, &myFirst, &myCnt);
    HK_TRY(HkCopy(c.param, c.Th(0), c.buf + myFirst * c.unit, io.in + myFirst * c.unit, myCnt * c.unit));
    auto part = [&](uint32_t j) {
        uint64_t f = 0, k = 0;
        HkChunkRange(cnt, g.n, j, &f, &k);
        return HkSpan{const_cast<uint8_t *>(io.in) + f * c.unit, k, f * c.unit};
    };
    HK_TRY(HkMeshChunkReduceScatter(c, g, 0, 1, part));
    return HkMeshAllGather(c, g, 0, 1, HkStage{0, 0, true}, cnt, io.out, c.buf + myFirst * c.unit);
}

/* NHR: HkArNhrLoop of hk_coll.h (CANN's InsTempAllReduceNHR / InsTempAllReduceAicpuReduceNHR). */

/* Sequence: HkArSeqLoop of hk_coll.h (CANN's InsV2AllReduceSequenceExecutorAicpu[3Level]). */

/* Parallel: HkArParLoop of hk_coll.h (CANN's InsAllReduceParallelExecutor). */
/* ---- the executors: resources, loop sizes, the loop ------------------------------------------- */
HcclResult RunFlat(const OpParam &param, const AlgResourceCtx &res, uint32_t algo)
{
    const uint32_t n = res.rankSize;
    static const char *const kNames[] = {"", "", "AicpuAllReduceSoleMeshOneShot", "AicpuAllReduceSoleMeshTwoShot",
                                         "AicpuAllReduceSoleMeshChunkTwoShot", "AicpuAllReduceSoleNHR",
                                         "AicpuAllReduceSoleNHRAicpuReduce"};
    const bool mesh = algo == HK_ALGO_MESH_ONE_SHOT || algo == HK_ALGO_MESH_TWO_SHOT || algo == HK_ALGO_MESH_CHUNK;
    HkCall c{param, res, kNames[algo], 0, false, nullptr, 0, nullptr};
    HK_TRY(HkCallInit(&c, kNames[algo], mesh ? (n > 2 ? n : 1) : 1));
    HkGroup g;
    HkGroupAll(res, &g);
    if (mesh) {
        HK_TRY(NeedAll(&c));
    } else {  /* NHR talks to me +- 2^s only: other links may be down */
        for (uint32_t s = 0, steps = HkNhrSteps(n); s < steps; ++s) {
            HK_TRY(HkCallPeer(&c, (g.me + (1u << s)) % n));
            HK_TRY(HkCallPeer(&c, (g.me + n - (1u << s) % n) % n));
        }
    }
    if (algo == HK_ALGO_MESH_CHUNK || algo == HK_ALGO_NHR) {
        HK_TRY(NeedPrimitive(c, algo == HK_ALGO_NHR ? "AicpuAllReduceSoleNHRAicpuReduce"
                                                    : "AicpuAllReduceSoleMeshTwoShot"));
    }
    HK_TRY(HkCallCarve(&c, algo == HK_ALGO_NHR_AICPU_REDUCE || !c.prim));
    uint64_t loop = 0, slotBytes = 0;
    if (algo == HK_ALGO_MESH_ONE_SHOT) {
        loop = HkLoopElems(c, n, 1);
        slotBytes = loop * c.unit;
    } else if (algo == HK_ALGO_MESH_TWO_SHOT) {
        const uint64_t chunk = HkLoopElems(c, n, 1);
        slotBytes = chunk * c.unit;
        loop = chunk * n;
    } else {
        loop = HkLoopElems(c, (algo == HK_ALGO_NHR ? 1 : 2), 1);
    }
    if (loop == 0) {
        return HCCL_E_MEMORY;
    }
    const uint64_t scratchOff = algo == HK_ALGO_NHR_AICPU_REDUCE ? loop * c.unit : HK_NO_SCRATCH;
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *out = static_cast<uint8_t *>(param.outputPtr);
    for (uint64_t off = 0; off < param.count; off += loop) {
        const uint64_t cnt = HkMin(loop, param.count - off);
        const Io io{in + off * c.unit, out + off * c.unit};
        if (algo == HK_ALGO_MESH_ONE_SHOT) {
            HK_TRY(OneShotLoop(c, g, io, cnt, slotBytes));
        } else if (algo == HK_ALGO_MESH_TWO_SHOT) {
            HK_TRY(TwoShotLoop(c, g, io, cnt, slotBytes));
        } else if (algo == HK_ALGO_MESH_CHUNK) {
            HK_TRY(ChunkLoop(c, g, io, cnt));
        } else {
            HK_TRY(HkArNhrLoop(c, g, io.in, io.out, cnt, scratchOff));
        }
    }
    return HCCL_SUCCESS;
}

HcclResult RunTwoLevel(const OpParam &param, const AlgResourceCtx &res, uint32_t algo)
{
    const bool par = algo == HK_ALGO_PARALLEL_MESH_NHR;
    const char *name = par ? "AicpuAllReduceParallelMeshNHR"
                           : algo == HK_ALGO_SEQUENCE_MESH_NHR ? "AicpuAllReduceSequenceMeshConcurNHR"
                                                               : "AicpuAllReduceSequenceMeshConcurNHRNHR";
    HkCall c{param, res, name, 0, false, nullptr, 0, nullptr};
    HK_TRY(HkCallInit(&c, name, 1));
    HkLevels lv;
    HK_TRY(HkLevelsRead(c, param.hierInfo, algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR ? 3 : 2, &lv));
    const uint32_t L = lv.L;
    const uint32_t threads = par ? L + 2 : L;
    if (res.threadNum < threads) {
        OP_LOG_ERROR("%s needs %u device threads, the operator has %u, tag %s", name, threads, res.threadNum,
                     param.tag);
        return HCCL_E_PARA;
    }
    HK_TRY(HkCallLevelPeers(&c, lv));
    const bool staged = !c.prim;
    HK_TRY(HkCallCarve(&c, staged));
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *out = static_cast<uint8_t *>(param.outputPtr);
    if (!par) {
        HkArSeq q;
        const uint64_t loop = HkArSeqPlan(c, L, staged, &q);
        if (loop == 0) {
            return HCCL_E_MEMORY;
        }
        for (uint64_t off = 0; off < param.count; off += loop) {
            HK_TRY(HkArSeqLoop(c, lv, q, in + off * c.unit, out + off * c.unit, HkMin(loop, param.count - off)));
        }
        return HCCL_SUCCESS;
    }
    HkArPar p;
    if (HkArParPlan(c, lv, staged, false, &p) == 0) {
        return HCCL_E_MEMORY;
    }
    for (uint64_t off = 0; off < param.count; off += p.total) {
        HK_TRY(HkArParLoop(c, lv, p, in + off * c.unit, out + off * c.unit, HkMin(p.total, param.count - off)));
    }
    return HCCL_SUCCESS;
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    const uint32_t unit = HkUnitSize(param);
    if (unit == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t n = resCtx.rankSize;
    if (n == 1 || param.count == 0) {
        return HkCopy(param, resCtx.threads[0], param.outputPtr, param.inputPtr, param.count * unit);
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HkAutoAllReduce(param, param.count * unit, n);
    switch (algo) {
        case HK_ALGO_MESH_ONE_SHOT:
        case HK_ALGO_MESH_TWO_SHOT:
        case HK_ALGO_MESH_CHUNK:
        case HK_ALGO_NHR:
        case HK_ALGO_NHR_AICPU_REDUCE:
            return RunFlat(param, resCtx, algo);
        case HK_ALGO_SEQUENCE_MESH_NHR:
        case HK_ALGO_SEQUENCE_MESH_NHR_NHR:
        case HK_ALGO_PARALLEL_MESH_NHR:
            return RunTwoLevel(param, resCtx, algo);
        default:
            OP_LOG_ERROR("algo %u is not an allreduce algorithm of this operator (hk_coll.h: %u one-shot, %u two-shot, "
                         "%u chunked two-shot, %u NHR, %u NHR with AICPU reduce, %u parallel mesh+NHR, %u sequence "
                         "mesh+NHR, %u sequence mesh+NHR+NHR; 0 auto), tag %s", algo, HK_ALGO_MESH_ONE_SHOT,
                         HK_ALGO_MESH_TWO_SHOT, HK_ALGO_MESH_CHUNK, HK_ALGO_NHR, HK_ALGO_NHR_AICPU_REDUCE,
                         HK_ALGO_PARALLEL_MESH_NHR, HK_ALGO_SEQUENCE_MESH_NHR, HK_ALGO_SEQUENCE_MESH_NHR_NHR, param.tag);
            return HCCL_E_PARA;
    }
}

}  // namespace ops_allreduce
