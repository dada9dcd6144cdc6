/*
 * exec_op.cc -- built-in "scatter": block r (count elements) of root's inputPtr -> rank r's outputPtr.
 *
 * OpParam.count = elements per block (the root's input holds count * rankSize); OpParam.root;
 * OpParam.algo (hk_coll.h):
 *   HK_ALGO_MESH               AicpuScatterSoleMesh (CANN's InsTempScatterMesh1D): the root writes
 *                              block j into rank j's buffer, a thread per peer; rank j copies it out;
 *   HK_ALGO_NHR                AicpuScatterSoleNHR (CANN's InsTempScatterNHR): the root stages the n
 *                              blocks in its buffer, the NHR scatter spreads them (one thread);
 *   HK_ALGO_PARALLEL_MESH_NHR  AicpuScatterParallelMeshNHR (CANN's InsV2ScatterParallelExecutor with
 *                              the mesh and NHR scatter templates): every block in two parts, one
 *                              scattered in the root's server first, the other among the servers
 *                              first, both levels busy at once (ParLoop below);
 *   HK_ALGO_SEQUENCE_MESH_NHR_NHR  AicpuScatterSequenceMeshConcurNHRNHR (CANN's
 *                              ScatterSequenceAicpu3LevelExecutor, scatter_sequence_aicpu_executor_3level.cc):
 *                              scatter down the levels, mesh in the root's server, NHR among the
 *                              servers of its super-pod, NHR among the super-pods (SeqLoop below);
 *   HK_ALGO_SEQUENCE_MESH_NHR  AicpuScatterSequenceMeshConcurNHR: the same executor on two levels (CANN
 *                              registers both names with it);
 *   HK_ALGO_AUTO               SoleMesh (CANN's SelectSingleLevelAicpuAlgo, MESH_1D).
 * Blocks loop over the HCCL buffer (a piece per rank in the buffer: multiple 1 for the mesh, n for
 * the parallel and the NHR, n / L for the sequence); each loop runs the whole protocol and ends clean.
 */
#include "exec_op.h"
#include "scatter_log.h"
#include "hk_coll.h"

namespace ops_scatter {
namespace {

struct Io {
    const uint8_t *in;  /* the root's input at the loop's offset within block 0 */
    uint8_t *out;       /* my output at the loop's offset */
    uint64_t block;     /* bytes between the input's blocks */
};

/* Mesh (multiple 1): the root pushes rank j's piece into j's buffer; j copies it out. */
HcclResult MeshLoop(const HkCall &c, const HkGroup &g, uint32_t root, const Io &io, uint64_t cnt)
{
    auto part = [&](uint32_t j, uint32_t) { return HkSpan{const_cast<uint8_t *>(io.in) + j * io.block, cnt, 0}; };
    HK_TRY(HkMeshScatter(c, g, 0, 1, root, 1, part));
    const uint8_t *src = g.me == root ? io.in + root * io.block : c.buf;
    return HkCopy(c.param, c.Th(0), io.out, src, cnt * c.unit);
}

/* NHR (multiple n): the root copies the n pieces into its buffer in rank order; the NHR scatter
 * leaves piece i at rank i, which copies it out. */
HcclResult NhrLoop(const HkCall &c, const HkGroup &g, uint32_t root, const Io &io, uint64_t cnt)
{
    const uint64_t piece = cnt * c.unit;
    if (g.me == root) {
        for (uint32_t j = 0; j < g.n; ++j) {
            HK_TRY(HkCopy(c.param, c.Th(0), c.buf + j * piece, io.in + j * io.block, piece));
        }
    }
    HK_TRY(HkNhrScatter(c, g, c.Th(0), root, 0, g.n * cnt));
    return HkCopy(c.param, c.Th(0), io.out, c.buf + g.me * piece, piece);
}

/*
 * Parallel (multiple n): every piece in part 0 and part 1, halves as CANN's (e = 4 eighths; its
 * executor cuts in halves, not by CalcParallelDataSplitRatio). The root is (server sr, local index lr); the root stages X0 (part 0 of every block,
 * local-index major: (j, s) at (j S + s)) and X1 (part 1, server major: (s, j) at (s L + j)).
 * Threads: 0 leads; 1 leads the server's mesh (workers 3..L+1); 2 runs the NHR among the servers.
 *   1. part 0: mesh scatter in the root's server: local index j gets X0's S pieces of index j
 *                                       | part 1: NHR scatter from the root among its level-1 group
 *                                         (server s gets X1's L pieces of server s)
 *   2. part 0: NHR scatter of those S pieces among every level-1 group (server s gets its own)
 *                                       | part 1: mesh scatter of server s's L pieces from local
 *                                         index lr in every server
 * then every rank copies both parts of its block out.
 */
HcclResult ParLoop(const HkCall &c, const HkLevels &lv, uint32_t root, uint32_t eighths, const Io &io, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t L = lv.L, S = lv.S, li = g0.me, si = g1.me;
    const uint32_t intra = 1, inter = 2, intraWorkers = 3;
    const uint64_t p0 = cnt * eighths / 8, p1 = cnt - p0;
    const uint64_t b0 = p0 * c.unit, b1 = p1 * c.unit;
    const uint64_t x0 = 0, x1 = HkAlignUp(L * S * b0);
    uint32_t sr = 0, lr = 0;
    while (lv.grid[sr * L + lr] != root) {
        if (++lr == L) {
            lr = 0;
            ++sr;
        }
    }
    if (g0.me == lr && g1.me == sr) {  /* the root stages both parts of every block */
        for (uint32_t s = 0; s < S; ++s) {
            for (uint32_t j = 0; j < L; ++j) {
                const uint8_t *blk = io.in + lv.grid[s * L + j] * io.block;
                HK_TRY(HkCopy(c.param, c.Th(0), c.buf + x0 + (j * S + s) * b0, blk, b0));
                HK_TRY(HkCopy(c.param, c.Th(0), c.buf + x1 + (s * L + j) * b1, blk + b0, b1));
            }
        }
    }
    /* 1 */
    HK_TRY(HkFork(c, 0, 1, 2));
    if (si == sr) {
        auto group0 = [&](uint32_t j, uint32_t) {
            const uint64_t at = x0 + j * S * b0;
            return HkSpan{c.buf + at, S * p0, at};
        };
        HK_TRY(HkMeshScatter(c, g0, intra, intraWorkers, lr, 1, group0));
    }
    if (li == lr) {
        HK_TRY(HkNhrScatter(c, g1, c.Th(inter), sr, x1, S * L * p1));
    }
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 2 */
    HK_TRY(HkFork(c, 0, 1, 2));
    auto piece1 = [&](uint32_t j, uint32_t) {
        const uint64_t at = x1 + (si * L + j) * b1;
        return HkSpan{c.buf + at, p1, at};
    };
    HK_TRY(HkMeshScatter(c, g0, intra, intraWorkers, lr, 1, piece1));
    HK_TRY(HkNhrScatter(c, g1, c.Th(inter), sr, x0 + li * S * b0, S * p0));
    HK_TRY(HkJoin(c, 0, 1, 2));
    HK_TRY(HkCopy(c.param, c.Th(0), io.out, c.buf + x0 + (li * S + si) * b0, b0));
    return HkCopy(c.param, c.Th(0), io.out + b0, c.buf + x1 + (si * L + li) * b1, b1);
}

/*
 * Sequence, per loop (multiple n / L): a rank's buffer holds the M P pieces of the ranks with its
 * local index j (M servers per super-pod, P super-pods), server-major: the piece of the rank on
 * server m of super-pod p at (m P + p). The root is (super-pod pr, server mr, local index lr).
 * Main leads the server's mesh (workers 1..L-1) and runs the NHR levels itself:
 *   1. the root's server: the root writes local index j's M P pieces into j's buffer, one exchange
 *      per peer (a thread per peer), and copies its own local index's into its buffer;
 *   2. the root's super-pod: NHR scatter among the servers from server mr (level 1): server m of
 *      each local index gets its P pieces;
 *   3. every super-pod: NHR scatter of those among the super-pods from pr (level 2): super-pod p
 *      gets piece (m, p);
 * then every rank copies its piece out. With two levels P = 1 and step 3 has one member.
 */
HcclResult SeqLoop(const HkCall &c, const HkLevels &lv, uint32_t root, const Io &io, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const HkGroup &g2 = lv.g[2];
    const uint32_t L = lv.L, M = g1.n, P = g2.n;
    const uint64_t piece = cnt * c.unit;
    uint32_t pr = 0, mr = 0, lr = 0;
    HkLevelsWhere(lv, root, &pr, &mr, &lr);
    auto pieces = [&](uint32_t j, uint32_t rep) {  /* repetition rep = m P + p of local index j */
        const uint32_t m = rep / P, p = rep % P;
        const uint8_t *blk = io.in + lv.order[(p * M + m) * L + j] * io.block;
        return HkSpan{const_cast<uint8_t *>(blk), cnt, rep * piece};
    };
    if (g2.me == pr && g1.me == mr) {
        if (g0.me == lr) {
            for (uint32_t rep = 0; rep < M * P; ++rep) {
                HK_TRY(HkCopy(c.param, c.Th(0), c.buf + rep * piece, pieces(lr, rep).ptr, piece));
            }
        }
        HK_TRY(HkMeshScatter(c, g0, 0, 1, lr, M * P, pieces));
    }
    if (g2.me == pr) {
        HK_TRY(HkNhrScatter(c, g1, c.Th(0), mr, 0, M * P * cnt));
    }
    HK_TRY(HkNhrScatter(c, g2, c.Th(0), pr, g1.me * P * piece, P * cnt));
    return HkCopy(c.param, c.Th(0), io.out, c.buf + (g1.me * P + g2.me) * piece, piece);
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    static const char *const kNames[] = {"", "AicpuScatterSoleMesh", "", "", "", "AicpuScatterSoleNHR", "",
                                         "AicpuScatterParallelMeshNHR", "AicpuScatterSequenceMeshConcurNHR",
                                         "AicpuScatterSequenceMeshConcurNHRNHR"};
    const uint32_t unit = HkUnitSize(param);
    if (unit == 0) {
        return HCCL_E_PARA;
    }
    HK_TRY(HkRootCheck(param, resCtx));
    const uint32_t n = resCtx.rankSize;
    const uint32_t r = resCtx.rank;
    const uint32_t root = param.root;
    const uint64_t block = param.count * unit;
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *out = static_cast<uint8_t *>(param.outputPtr);
    if (n == 1 || param.count == 0) {
        return r == root ? HkCopy(param, resCtx.threads[0], out, in + r * block, block) : HCCL_SUCCESS;
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HK_ALGO_MESH;
    if (algo >= sizeof kNames / sizeof kNames[0] || kNames[algo][0] == '\0') {
        OP_LOG_ERROR("algo %u is not a scatter algorithm of this operator (hk_coll.h: %u mesh, %u NHR, %u parallel "
                     "mesh+NHR, %u sequence mesh+NHR, %u sequence mesh+NHR+NHR; 0 auto), tag %s", algo, HK_ALGO_MESH,
                     HK_ALGO_NHR, HK_ALGO_PARALLEL_MESH_NHR, HK_ALGO_SEQUENCE_MESH_NHR, HK_ALGO_SEQUENCE_MESH_NHR_NHR,
                     param.tag);
        return HCCL_E_PARA;
    }
    HkCall c{param, resCtx, kNames[algo], 0, false, nullptr, 0, nullptr};
    HK_TRY(HkCallInit(&c, kNames[algo], 1));
    HkGroup g;
    HkGroupAll(resCtx, &g);
    HkLevels lv;
    uint32_t eighths = 0;
    double multiple = n;
    uint64_t granule = 1, reserve = 0;
    if (algo == HK_ALGO_MESH) {
        HK_TRY(HkCallInit(&c, kNames[algo], n > 2 ? n : 1));
        for (uint32_t p = 0; p < n; ++p) {
            HK_TRY(HkCallPeer(&c, p));
        }
        multiple = 1;
    } else if (algo == HK_ALGO_NHR) {
        for (uint32_t s = 0, steps = HkNhrSteps(n); s < steps; ++s) {
            HK_TRY(HkCallPeer(&c, (r + (1u << s)) % n));
            HK_TRY(HkCallPeer(&c, (r + n - (1u << s) % n) % n));
        }
    } else if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
        HK_TRY(HkLevelsRead(c, param.hierInfo, 2, &lv));
        HK_TRY(HkCallInit(&c, kNames[algo], lv.L + 2));
        HK_TRY(HkCallLevelPeers(&c, lv));
        eighths = 4;  /* halves: InsV2ScatterParallelExecutor::GetParallelDataSplit takes no split ratio */
        granule = 8;
        reserve = HK_SLICE_ALIGN_BYTES;
    } else {
        HK_TRY(HkLevelsRead(c, param.hierInfo, algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR ? 3 : 2, &lv));
        HK_TRY(HkCallInit(&c, kNames[algo], lv.L > 2 ? lv.L : 1));
        HK_TRY(HkCallLevelPeers(&c, lv));
        multiple = static_cast<double>(lv.M) * lv.P;
    }
    const uint64_t loop = HkLoopElems(c, multiple, granule, reserve);
    if (loop == 0) {
        return HCCL_E_MEMORY;
    }
    for (uint64_t off = 0; off < param.count; off += loop) {
        const uint64_t cnt = HkMin(loop, param.count - off);
        const Io io{in + off * unit, out + off * unit, block};
        if (algo == HK_ALGO_MESH) {
            HK_TRY(MeshLoop(c, g, root, io, cnt));
        } else if (algo == HK_ALGO_NHR) {
            HK_TRY(NhrLoop(c, g, root, io, cnt));
        } else if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
            HK_TRY(ParLoop(c, lv, root, eighths, io, cnt));
        } else {
            HK_TRY(SeqLoop(c, lv, root, io, cnt));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_scatter
