/*
 * exec_op.cc -- built-in "broadcast": root's inputPtr -> every rank's outputPtr.
 *
 * OpParam.count = elements; OpParam.root; OpParam.algo (hk_coll.h):
 *   HK_ALGO_MESH_TWO_SHOT      AicpuBroadcastSoleMeshTwoShot (CANN's InsTempBroadcastMesh1DTwoShot):
 *                              the root writes chunk j of the message and its own chunk into rank j's
 *                              buffer (a thread per peer), then the other ranks write their chunk into
 *                              each other's buffers (mesh all-gather by writes among them);
 *   HK_ALGO_NHR                AicpuBroadcastSoleNHR (CANN's InsTempBroadcastNHR): NHR scatter from
 *                              the root, then the NHR all-gather (one thread);
 *   HK_ALGO_PARALLEL_MESH_NHR  AicpuBroadcastParallelMeshNHR (CANN's InsBroadcastParallelExecutor with
 *                              the mesh and NHR scatter and all-gather templates): the message in two
 *                              parts, one scattered in the root's server first, the other among the
 *                              servers first, both levels busy at once (ParLoop below);
 *   HK_ALGO_SEQUENCE_MESH_NHR_NHR  AicpuBroadcastSequenceMesh1dNHRNHR (CANN's
 *                              BroadcastSequenceMesh1dNHRNHRExecutor, ins_v2_broadcast_sequence_executor_
 *                              aicpu_3level.cc): scatter down the levels from the root (mesh in its
 *                              server, NHR among the servers of its super-pod, NHR among the
 *                              super-pods), then all-gather up them (NHR, NHR, mesh; SeqLoop below);
 *   HK_ALGO_SEQUENCE_MESH_NHR  AicpuBroadcastSequenceMesh1dNHR: the same executor on two levels (CANN
 *                              registers both names with it);
 *   HK_ALGO_AUTO               SoleMeshTwoShot (CANN's SelectMeshAlgoAicpu on one server, MESH_1D).
 * Every algorithm keeps the message's loop in the HCCL buffer, mirrored (multiple 1, as CANN's), and
 * loops over the message; the root copies the input into its buffer first, the other ranks copy the
 * buffer into their output last (the sequence gathers straight into the output, as CANN's). Each
 * loop runs the whole protocol and ends clean.
 */
#include "exec_op.h"
#include "broadcast_log.h"
#include "hk_coll.h"

namespace ops_broadcast {
namespace {

HcclResult TwoShotLoop(const HkCall &c, const HkGroup &g, uint32_t root, uint64_t cnt)
{
    auto chunk = [&](uint32_t j) {
        uint64_t f = 0, k = 0;
        HkChunkRange(cnt, g.n, j, &f, &k);
        return HkSpan{c.buf + f * c.unit, k, f * c.unit};
    };
    /* the root: chunk j and its own chunk to rank j */
    HK_TRY(HkMeshScatter(c, g, 0, 1, root, 2, [&](uint32_t j, uint32_t r) { return chunk(r == 0 ? j : root); }));
    if (g.me == root || g.n < 3) {
        return HCCL_SUCCESS;
    }
    HkGroup others;
    HkGroupWithout(g, root, &others);
    /* the others: my chunk (index in g) into every other non-root */
    return HkMeshAllGatherWrite(c, others, 0, 1, [&](uint32_t k) { return chunk(others.rank[k]); });
}

HcclResult NhrLoop(const HkCall &c, const HkGroup &g, uint32_t root, uint64_t cnt)
{
    HK_TRY(HkNhrScatter(c, g, c.Th(0), root, 0, cnt));
    return HkNhrAllGather(c, g, c.Th(0), 0, cnt);
}

/*
 * Parallel, per loop in the buffer mirror: part 0 (e/8, HkParallelEighths of the scatter kind) and
 * part 1. The root is (server sr, local index lr). Threads: 0 leads; 1 leads the server's mesh
 * (workers 3..L+1); 2 runs the NHR among the servers.
 *   1. part 0: mesh scatter from the root in its server (piece j of part 0 to local index j)
 *                                       | part 1: NHR scatter from the root among its level-1 group
 *                                         (sub-part s of part 1 to server s)
 *   2. part 0: NHR scatter of piece j among each level-1 group (sub-piece s to server s), from the
 *              rank of the root's server | part 1: mesh scatter of sub-part s in server s from local
 *                                         index lr (piece j to local index j)
 *   3. part 0: NHR all-gather of piece j among each level-1 group | part 1: mesh all-gather of
 *              sub-part s in server s
 *   4. part 0: mesh all-gather of part 0 in every server | part 1: NHR all-gather of part 1
 * The scatter phases run only where the data are (the other ranks' halves are empty phases).
 */
HcclResult ParLoop(const HkCall &c, const HkLevels &lv, uint32_t root, uint32_t eighths, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t L = lv.L, S = lv.S;
    const uint32_t intra = 1, inter = 2, intraWorkers = 3;
    const uint64_t p0 = cnt * eighths / 8, p1 = cnt - p0;
    uint32_t sr = 0, lr = 0;  /* the root's server and local index */
    while (lv.grid[sr * L + lr] != root) {
        if (++lr == L) {
            lr = 0;
            ++sr;
        }
    }
    const bool inRootServer = g1.me == sr, inRootGroup = g0.me == lr;
    uint64_t f0 = 0, n0 = 0, f1 = 0, n1 = 0;
    HkChunkRange(p0, L, g0.me, &f0, &n0);  /* my piece of part 0 */
    HkChunkRange(p1, S, g1.me, &f1, &n1);  /* my server's sub-part of part 1 */
    const uint64_t off1 = p0 * c.unit;
    auto piece0 = [&](uint32_t j, uint32_t) {
        uint64_t f = 0, k = 0;
        HkChunkRange(p0, L, j, &f, &k);
        return HkSpan{c.buf + f * c.unit, k, f * c.unit};
    };
    auto piece1 = [&](uint32_t j, uint32_t) {
        uint64_t f = 0, k = 0;
        HkChunkRange(n1, L, j, &f, &k);
        const uint64_t at = off1 + (f1 + f) * c.unit;
        return HkSpan{c.buf + at, k, at};
    };
    /* 1 */
    HK_TRY(HkFork(c, 0, 1, 2));
    if (inRootServer) {
        HK_TRY(HkMeshScatter(c, g0, intra, intraWorkers, lr, 1, piece0));
    }
    if (inRootGroup) {
        HK_TRY(HkNhrScatter(c, g1, c.Th(inter), sr, off1, p1));
    }
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 2 */
    HK_TRY(HkFork(c, 0, 1, 2));
    HK_TRY(HkMeshScatter(c, g0, intra, intraWorkers, lr, 1, piece1));
    HK_TRY(HkNhrScatter(c, g1, c.Th(inter), sr, f0 * c.unit, n0));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 3 */
    HK_TRY(HkFork(c, 0, 1, 2));
    uint8_t *sub = c.buf + off1 + f1 * c.unit;  /* my server's sub-part of part 1 */
    HK_TRY(HkMeshAllGather(c, g0, intra, intraWorkers, HkStage{off1 + f1 * c.unit, 0, true}, n1, sub,
                           piece1(g0.me, 0).ptr));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(inter), f0 * c.unit, n0));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 4 */
    HK_TRY(HkFork(c, 0, 1, 2));
    HK_TRY(HkMeshAllGather(c, g0, intra, intraWorkers, HkStage{0, 0, true}, p0, c.buf, c.buf + f0 * c.unit));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(inter), off1, p1));
    return HkJoin(c, 0, 1, 2);
}

/*
 * Sequence, per loop in the buffer mirror. The root is (super-pod pr, server mr in it, local index
 * lr); my piece of the loop is piece li of L (HkChunkRange), my sub-piece part mi of M of it (li,
 * mi, pi: my local index, server in the super-pod, super-pod). Main leads the server's mesh
 * (workers 1..L-1) and runs the NHR levels itself:
 *   1. the root's server: mesh scatter from lr, piece j into local index j's buffer (a thread per peer);
 *   2. the root's super-pod: NHR scatter of piece li among the servers from server mr (level 1);
 *   3. every super-pod: NHR scatter of sub-piece mi among the super-pods from pr (level 2);
 *   4. NHR all-gather of the sub-piece among the super-pods, 5. of the piece among the servers;
 *   6. mesh all-gather by reads of the server's pieces into the output.
 * The scatter steps run only where the data are; with two levels step 3 and 4 have one member.
 */
HcclResult SeqLoop(const HkCall &c, const HkLevels &lv, uint32_t root, uint64_t cnt, uint8_t *out)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const HkGroup &g2 = lv.g[2];
    uint32_t pr = 0, mr = 0, lr = 0;
    HkLevelsWhere(lv, root, &pr, &mr, &lr);
    uint64_t f0 = 0, n0 = 0, f1 = 0, n1 = 0;
    HkChunkRange(cnt, g0.n, g0.me, &f0, &n0);  /* my piece */
    HkChunkRange(n0, g1.n, g1.me, &f1, &n1);   /* my sub-piece of it */
    auto piece = [&](uint32_t j, uint32_t) {
        uint64_t f = 0, k = 0;
        HkChunkRange(cnt, g0.n, j, &f, &k);
        return HkSpan{c.buf + f * c.unit, k, f * c.unit};
    };
    if (g2.me == pr && g1.me == mr) {
        HK_TRY(HkMeshScatter(c, g0, 0, 1, lr, 1, piece));
    }
    if (g2.me == pr) {
        HK_TRY(HkNhrScatter(c, g1, c.Th(0), mr, f0 * c.unit, n0));
    }
    HK_TRY(HkNhrScatter(c, g2, c.Th(0), pr, (f0 + f1) * c.unit, n1));
    HK_TRY(HkNhrAllGather(c, g2, c.Th(0), (f0 + f1) * c.unit, n1));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(0), f0 * c.unit, n0));
    return HkMeshAllGather(c, g0, 0, 1, HkStage{0, 0, true}, cnt, out, c.buf + f0 * c.unit);
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    static const char *const kNames[] = {"", "", "", "AicpuBroadcastSoleMeshTwoShot", "", "AicpuBroadcastSoleNHR", "",
                                         "AicpuBroadcastParallelMeshNHR", "AicpuBroadcastSequenceMesh1dNHR",
                                         "AicpuBroadcastSequenceMesh1dNHRNHR"};
    const uint32_t unit = HkUnitSize(param);
    if (unit == 0) {
        return HCCL_E_PARA;
    }
    HK_TRY(HkRootCheck(param, resCtx));
    const uint32_t n = resCtx.rankSize;
    const uint32_t root = param.root;
    const bool isRoot = resCtx.rank == root;
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *out = static_cast<uint8_t *>(param.outputPtr);
    if (n == 1 || param.count == 0) {
        return isRoot ? HkCopy(param, resCtx.threads[0], out, in, param.count * unit) : HCCL_SUCCESS;
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HK_ALGO_MESH_TWO_SHOT;
    if (algo >= sizeof kNames / sizeof kNames[0] || kNames[algo][0] == '\0') {
        OP_LOG_ERROR("algo %u is not a broadcast algorithm of this operator (hk_coll.h: %u mesh two-shot, %u NHR, "
                     "%u parallel mesh+NHR, %u sequence mesh+NHR, %u sequence mesh+NHR+NHR; 0 auto), tag %s", algo,
                     HK_ALGO_MESH_TWO_SHOT, HK_ALGO_NHR, HK_ALGO_PARALLEL_MESH_NHR, HK_ALGO_SEQUENCE_MESH_NHR,
                     HK_ALGO_SEQUENCE_MESH_NHR_NHR, param.tag);
        return HCCL_E_PARA;
    }
    HkCall c{param, resCtx, kNames[algo], 0, false, nullptr, 0, nullptr};
    HK_TRY(HkCallInit(&c, kNames[algo], 1));
    HkGroup g;
    HkGroupAll(resCtx, &g);
    HkLevels lv;
    uint32_t eighths = 0;
    if (algo == HK_ALGO_MESH_TWO_SHOT) {
        HK_TRY(HkCallInit(&c, kNames[algo], n > 2 ? n : 1));
        for (uint32_t p = 0; p < n; ++p) {
            HK_TRY(HkCallPeer(&c, p));
        }
    } else if (algo == HK_ALGO_NHR) {
        for (uint32_t s = 0, steps = HkNhrSteps(n); s < steps; ++s) {
            HK_TRY(HkCallPeer(&c, (resCtx.rank + (1u << s)) % n));
            HK_TRY(HkCallPeer(&c, (resCtx.rank + n - (1u << s) % n) % n));
        }
    } else if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
        HK_TRY(HkLevelsRead(c, param.hierInfo, 2, &lv));
        HK_TRY(HkCallInit(&c, kNames[algo], lv.L + 2));
        HK_TRY(HkCallLevelPeers(&c, lv));
        eighths = HkParallelEighths(lv.L, lv.S, 1);
    } else {
        HK_TRY(HkLevelsRead(c, param.hierInfo, algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR ? 3 : 2, &lv));
        HK_TRY(HkCallInit(&c, kNames[algo], lv.L > 2 ? lv.L : 1));
        HK_TRY(HkCallLevelPeers(&c, lv));
    }
    const uint64_t loop = HkLoopElems(c, 1, 1);
    if (loop == 0) {
        return HCCL_E_MEMORY;
    }
    for (uint64_t off = 0; off < param.count; off += loop) {
        const uint64_t cnt = HkMin(loop, param.count - off);
        if (isRoot) {
            HK_TRY(HkCopy(param, c.Th(0), c.buf, in + off * unit, cnt * unit));
        }
        if (algo == HK_ALGO_MESH_TWO_SHOT) {
            HK_TRY(TwoShotLoop(c, g, root, cnt));
        } else if (algo == HK_ALGO_NHR) {
            HK_TRY(NhrLoop(c, g, root, cnt));
        } else if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
            HK_TRY(ParLoop(c, lv, root, eighths, cnt));
        } else {
            HK_TRY(SeqLoop(c, lv, root, cnt, out + off * unit));
            continue;
        }
        HK_TRY(HkCopy(param, c.Th(0), out + off * unit, isRoot ? in + off * unit : c.buf, cnt * unit));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_broadcast
