/*
 * exec_op.cc -- built-in "reduce" (op name hk_reduce: "reduce" clashes with a header symbol):
 * root's outputPtr = in_0 op in_1 op ... op in_{n-1}. Non-roots' outputPtr is not touched.
 *
 * OpParam.count = elements; OpParam.root; OpParam.algo (hk_coll.h):
 *   HK_ALGO_MESH               AicpuReduceSoleMesh (CANN's ReduceMesh1D): every rank writes its input
 *                              into a slot of the root's buffer; the root receives from every peer
 *                              (a thread per peer) and combines the n inputs in rank order;
 *   HK_ALGO_MESH_TWO_SHOT      AicpuReduceSoleMeshTwoShot (CANN's ReduceMesh1DTwoShot): mesh
 *                              reduce-scatter among every rank, then the root reads every rank's
 *                              reduced chunk;
 *   HK_ALGO_NHR                AicpuReduceSoleNHR (CANN's ReduceNHR: the NHR reduce-scatter and
 *                              all-gather, the root keeps the result);
 *   HK_ALGO_NHR_AICPU_REDUCE   AicpuReduceSoleNHRAicpuReduce: the same, reductions by the kernel;
 *   HK_ALGO_PARALLEL_MESH_NHR  AicpuReduceParallelMeshNHR (CANN's ReduceParallelExecutor: the steps
 *                              of the parallel two-level allreduce, HkArParLoop), the root keeps it;
 *   HK_ALGO_SEQUENCE_MESH_NHR_NHR  AicpuReduceSequenceMesh1DNHRNHR (CANN's ReduceSequenceExecutorAicpu3Level,
 *                              reduce_sequence_executor_aicpu_3level.cc): the steps of the sequence
 *                              allreduce over three levels (HkArSeqLoop: mesh reduce-scatter in the
 *                              server, NHR reduce-scatter among the servers of the super-pod, then among
 *                              the super-pods, the NHR all-gathers back, the mesh all-gather), the root
 *                              gathers the result into its output, the others into their buffer;
 *   HK_ALGO_SEQUENCE_MESH_NHR  AicpuReduceSequenceMesh1DNHR: the same executor on two levels (CANN
 *                              registers both names with it);
 *   HK_ALGO_AUTO               CANN's SelectMeshAlgoAicpu on one server (MESH_1D): the two-shot from
 *                              8 MiB, else the mesh.
 * Loops over the HCCL buffer (multiple n for the mesh, about 1 for the two-shot, 1 for the NHR, 2
 * for its AicpuReduce form, (L + 1) / L for the sequence: L + 1 slots of a chunk); each loop runs the whole protocol and ends clean. A2/A3 int64 and prod
 * are combined by the kernel (hk_coll.h, staged reductions); SoleNHR (write-reduce) refuses them.
 */
#include "exec_op.h"
#include "hk_reduce_log.h"
#include "hk_coll.h"

namespace ops_hk_reduce {
namespace {

struct Io {
    const uint8_t *in;
    uint8_t *out;  /* the root's; null elsewhere */
};

/* Mesh (multiple n): every non-root pushes its input into slot `me` of the root's buffer; the root
 * combines term 0 op term 1 op ... (term k: slot k, its own input for k = root; in place with root
 * > 0 the input is first copied into the root's own slot). */
HcclResult MeshLoop(const HkCall &c, const HkGroup &g, uint32_t root, const Io &io, uint64_t cnt, uint64_t slotBytes)
{
    const uint32_t me = g.me;
    const uint8_t *mine = io.in;
    if (me == root && io.in == io.out && root != 0) {
        mine = c.buf + me * slotBytes;
        HK_TRY(HkCopy(c.param, c.Th(0), c.buf + me * slotBytes, io.in, cnt * c.unit));
    }
    auto part = [&](uint32_t j) { return HkSpan{const_cast<uint8_t *>(io.in), cnt, j * slotBytes}; };
    HK_TRY(HkMeshGatherWrite(c, g, 0, 1, root, part));
    if (me != root) {
        return HCCL_SUCCESS;
    }
    const uint8_t *terms[HK_MAX_RANKS];
    for (uint32_t k = 0; k < g.n; ++k) {
        terms[k] = k == me ? mine : c.buf + k * slotBytes;
    }
    return HkReduceSeq(c, c.Th(0), io.out, terms, g.n, cnt);
}

/* Two-shot (n slots of a chunk): the mesh reduce-scatter leaves chunk j reduced in slot j of rank
 * j; the root reads them into its output and copies its own. */
HcclResult TwoShotLoop(const HkCall &c, const HkGroup &g, uint32_t root, const Io &io, uint64_t cnt,
                       uint64_t slotBytes)
{
    uint8_t *mySlot = c.buf + g.me * slotBytes;
    HK_TRY(HkMeshReduceScatter(c, g, 0, 1, io.in, cnt, 0, slotBytes, mySlot));
    auto part = [&](uint32_t j) {
        uint64_t f = 0, k = 0;
        HkChunkRange(cnt, g.n, j, &f, &k);
        return HkSpan{io.out + f * c.unit, k, j * slotBytes};
    };
    HK_TRY(HkMeshGatherRead(c, g, 0, 1, root, part));
    if (g.me == root) {
        const HkSpan own = part(root);
        HK_TRY(HkCopy(c.param, c.Th(0), own.ptr, mySlot, own.count * c.unit));
    }
    return HCCL_SUCCESS;
}

uint32_t HkAutoReduce(uint64_t bytes)
{
    return bytes >= (8ull << 20) ? HK_ALGO_MESH_TWO_SHOT : HK_ALGO_MESH;
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    static const char *const kNames[] = {"", "AicpuReduceSoleMesh", "", "AicpuReduceSoleMeshTwoShot", "",
                                         "AicpuReduceSoleNHR", "AicpuReduceSoleNHRAicpuReduce",
                                         "AicpuReduceParallelMeshNHR", "AicpuReduceSequenceMesh1DNHR",
                                         "AicpuReduceSequenceMesh1DNHRNHR"};
    const uint32_t unit = HkUnitSize(param);
    if (unit == 0) {
        return HCCL_E_PARA;
    }
    HK_TRY(HkRootCheck(param, resCtx));
    const uint32_t n = resCtx.rankSize;
    const uint32_t r = resCtx.rank;
    const uint32_t root = param.root;
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *out = r == root ? static_cast<uint8_t *>(param.outputPtr) : nullptr;
    if (n == 1 || param.count == 0) {
        return r == root ? HkCopy(param, resCtx.threads[0], out, in, param.count * unit) : HCCL_SUCCESS;
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HkAutoReduce(param.count * unit);
    if (algo >= sizeof kNames / sizeof kNames[0] || kNames[algo][0] == '\0') {
        OP_LOG_ERROR("algo %u is not a reduce algorithm of this operator (hk_coll.h: %u mesh, %u mesh two-shot, %u NHR, "
                     "%u NHR with AICPU reduce, %u parallel mesh+NHR, %u sequence mesh+NHR, %u sequence "
                     "mesh+NHR+NHR; 0 auto), tag %s", algo, HK_ALGO_MESH, HK_ALGO_MESH_TWO_SHOT, HK_ALGO_NHR,
                     HK_ALGO_NHR_AICPU_REDUCE, HK_ALGO_PARALLEL_MESH_NHR, HK_ALGO_SEQUENCE_MESH_NHR,
                     HK_ALGO_SEQUENCE_MESH_NHR_NHR, param.tag);
        return HCCL_E_PARA;
    }
    const char *name = kNames[algo];
    HkCall c{param, resCtx, name, 0, false, nullptr, 0, nullptr};
    HK_TRY(HkCallInit(&c, name, 1));
    HkGroup g;
    HkGroupAll(resCtx, &g);
    HkLevels lv;
    if (algo == HK_ALGO_MESH || algo == HK_ALGO_MESH_TWO_SHOT) {
        HK_TRY(HkCallInit(&c, name, n > 2 ? n : 1));
        for (uint32_t p = 0; p < n; ++p) {
            HK_TRY(HkCallPeer(&c, p));
        }
    } else if (algo == HK_ALGO_NHR || algo == HK_ALGO_NHR_AICPU_REDUCE) {
        for (uint32_t s = 0, steps = HkNhrSteps(n); s < steps; ++s) {
            HK_TRY(HkCallPeer(&c, (r + (1u << s)) % n));
            HK_TRY(HkCallPeer(&c, (r + n - (1u << s) % n) % n));
        }
    } else {
        HK_TRY(HkLevelsRead(c, param.hierInfo, algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR ? 3 : 2, &lv));
        HK_TRY(HkCallInit(&c, name, algo == HK_ALGO_PARALLEL_MESH_NHR ? lv.L + 2 : lv.L));
        HK_TRY(HkCallLevelPeers(&c, lv));
    }
    if (algo == HK_ALGO_NHR && !c.prim) {
        OP_LOG_ERROR("%s reduces with write-reduce, which this product cannot do for dataType %d with reduce op %d "
                     "(A2/A3: no int64, no prod); use AicpuReduceSoleNHRAicpuReduce, tag %s", name,
                     static_cast<int>(param.dataType), static_cast<int>(param.reduceOp), param.tag);
        return HCCL_E_NOT_SUPPORT;
    }
    const bool staged = !c.prim;
    HK_TRY(HkCallCarve(&c, staged || algo == HK_ALGO_NHR_AICPU_REDUCE));
    uint64_t loop = 0, slotBytes = 0;
    HkArPar par{};
    HkArSeq seq{};
    if (algo == HK_ALGO_MESH) {
        loop = HkLoopElems(c, n, 1);
        slotBytes = loop * unit;
    } else if (algo == HK_ALGO_MESH_TWO_SHOT) {
        const uint64_t chunk = HkLoopElems(c, n, 1);
        slotBytes = chunk * unit;
        loop = chunk * n;
    } else if (algo == HK_ALGO_NHR || algo == HK_ALGO_NHR_AICPU_REDUCE) {
        loop = HkLoopElems(c, algo == HK_ALGO_NHR ? 1 : 2, 1);
    } else if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
        loop = HkArParPlan(c, lv, staged, true, &par);
    } else {
        loop = HkArSeqPlan(c, lv.L, staged, &seq);
    }
    if (loop == 0) {
        return HCCL_E_MEMORY;
    }
    const uint64_t scratchOff = algo == HK_ALGO_NHR_AICPU_REDUCE ? loop * unit : HK_NO_SCRATCH;
    for (uint64_t off = 0; off < param.count; off += loop) {
        const uint64_t cnt = HkMin(loop, param.count - off);
        const Io io{in + off * unit, out != nullptr ? out + off * unit : nullptr};
        if (algo == HK_ALGO_MESH) {
            HK_TRY(MeshLoop(c, g, root, io, cnt, slotBytes));
        } else if (algo == HK_ALGO_MESH_TWO_SHOT) {
            HK_TRY(TwoShotLoop(c, g, root, io, cnt, slotBytes));
        } else if (algo == HK_ALGO_NHR || algo == HK_ALGO_NHR_AICPU_REDUCE) {
            HK_TRY(HkArNhrLoop(c, g, io.in, io.out, cnt, scratchOff));
        } else if (algo != HK_ALGO_PARALLEL_MESH_NHR) {
            HK_TRY(HkArSeqLoop(c, lv, seq, io.in, io.out, cnt));
        } else {
            HK_TRY(HkArParLoop(c, lv, par, io.in, nullptr, cnt));
            if (io.out != nullptr) {
                const uint64_t part0 = cnt * par.eighths / 8;
                HK_TRY(HkCopy(param, c.Th(0), io.out, c.buf + par.offO0, part0 * unit));
                HK_TRY(HkCopy(param, c.Th(0), io.out + part0 * unit, c.buf + par.offD1, (cnt - part0) * unit));
            }
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_hk_reduce
