/*
 * exec_op.cc -- built-in allgather: output = [input of rank 0, input of rank 1, ...] on every rank.
 *
 * OpParam.count = elements per rank (output holds count * rankSize); OpParam.algo (hk_coll.h):
 *   HK_ALGO_MESH               AicpuAllGatherSoleMesh: every rank stages its block in its HCCL
 *                              buffer and every peer reads it straight into its output, a thread per
 *                              peer (CANN's InsTempAllGatherMesh1D);
 *   HK_ALGO_NHR                AicpuAllGatherSoleNHR: the NHR all-gather over every rank in the
 *                              buffer (one thread), then the blocks copied out;
 *   HK_ALGO_SEQUENCE_MESH_NHR  AicpuAllGatherSequenceMeshConcurNHR: mesh all-gather in the server,
 *                              then NHR among the servers (hierarchical_comm_principle.md);
 *   HK_ALGO_SEQUENCE_MESH_NHR_NHR  AicpuAllGatherSequenceMeshConcurNHRNHR: then NHR among super-pods;
 *   HK_ALGO_PARALLEL_MESH_NHR  AicpuAllGatherParallelMeshNHR: each block in two parts, one
 *                              gathered in the server first, the other among the servers first, at
 *                              the same time (mesh and NHR threads), then the other level;
 *   HK_ALGO_AUTO               SoleMesh (CANN's SelectAicpuAlgo on one server, MESH_1D).
 * Blocks are cut into loops of the HCCL buffer divided by what each algorithm keeps there (1 block
 * piece for the mesh, n for the others); each loop runs the whole protocol and ends clean.
 */
#include "exec_op.h"
#include "allgather_log.h"
#include "hk_coll.h"

namespace ops_allgather {
namespace {

struct Io {
    const uint8_t *in;  /* my block, at the loop's offset */
    uint8_t *out;       /* output, at the loop's offset within block 0 */
    uint64_t block;     /* bytes between blocks of the output (count * unit) */
};

/*
 * Mesh (multiple 1): main stages my piece in my buffer, then HkMeshAllGatherEx: a thread per peer
 * reads the peer's staged piece into its output block, main copies my piece from the input.
 */
HcclResult MeshLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt)
{
    HK_TRY(HkCopy(c.param, c.Th(0), c.buf, io.in, cnt * c.unit));
    auto part = [&](uint32_t j, uint32_t) { return HkSpan{io.out + j * io.block, cnt, 0}; };
    return HkMeshAllGatherEx(c, g, 0, 1, 1, part, [&](uint32_t) { return io.in; });
}

/*
 * NHR (multiple n: the buffer holds the n pieces in rank order): main copies my piece into place,
 * runs the NHR all-gather (hk_coll.h) and copies the n pieces out.
 */
HcclResult NhrLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt)
{
    const ThreadHandle t = c.Th(0);
    const uint64_t piece = cnt * c.unit;
    HK_TRY(HkCopy(c.param, t, c.buf + g.me * piece, io.in, piece));
    HK_TRY(HkNhrAllGather(c, g, t, 0, g.n * cnt));
    for (uint32_t j = 0; j < g.n; ++j) {
        HK_TRY(HkCopy(c.param, t, io.out + j * io.block, j == g.me ? io.in : c.buf + j * piece, piece));
    }
    return HCCL_SUCCESS;
}

/*
 * Sequence (multiple n; the buffer holds the pieces by super-pod, server and local index, Z[k] the
 * piece of rank order[k]: server by server with two levels): main stages my piece at its place, the
 * level-0 mesh all-gather reads the pieces of my server into place (main leads, workers 1..L-1),
 * the level-1 NHR all-gather over my super-pod's part of Z (part m = server m's L pieces) brings the
 * other servers', with three levels (AicpuAllGatherSequenceMeshConcurNHRNHR) the level-2 NHR over
 * all of Z (part p = super-pod p's pieces) the other super-pods', and main copies the n pieces out in
 * rank order.
 */
HcclResult SeqLoop(const HkCall &c, const HkLevels &lv, const Io &io, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t L = lv.L, M = lv.M;
    const uint32_t pod = lv.count == 3 ? lv.g[2].me : 0;
    const uint64_t piece = cnt * c.unit;
    const uint64_t server = (pod * M + g1.me) * L;  /* my server's first piece */
    const uint64_t mine = (server + g0.me) * piece;
    HK_TRY(HkCopy(c.param, c.Th(0), c.buf + mine, io.in, piece));
    auto part = [&](uint32_t j, uint32_t) {
        const uint64_t at = (server + j) * piece;
        return HkSpan{c.buf + at, cnt, at};
    };
    HK_TRY(HkMeshAllGatherEx(c, g0, 0, 1, 1, part, [&](uint32_t) { return c.buf + mine; }));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(0), pod * M * L * piece, M * L * cnt));
    if (lv.count == 3) {
        HK_TRY(HkNhrAllGather(c, lv.g[2], c.Th(0), 0, lv.P * M * L * cnt));
    }
    for (uint32_t k = 0; k < lv.S * L; ++k) {
        HK_TRY(HkCopy(c.param, c.Th(0), io.out + lv.order[k] * io.block, k * piece == mine ? io.in : c.buf + k * piece,
                      piece));
    }
    return HCCL_SUCCESS;
}

/*
 * Parallel (CANN's InsV2AllGatherParallelExecutor, mesh and NHR templates; multiple n): my piece in
 * two parts, part 0 (e/8, HkParallelEighths of the all-gather kind) and part 1. Threads: 0 leads,
 * 1 leads the server's mesh (workers 3..L+1), 2 runs the NHR among the servers.
 *   1. part 0: level-0 mesh all-gather into Z0 (server-major)  | part 1: level-1 NHR into Z1 (local-major)
 *   2. part 0: level-1 NHR all-gather over Z0                  | part 1: level-0 mesh of the Z1 groups
 * then main copies both parts of every block out.
 */
HcclResult ParLoop(const HkCall &c, const HkLevels &lv, uint32_t eighths, const Io &io, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t L = lv.L, S = lv.S, li = g0.me, si = g1.me;
    const uint32_t intra = 1, inter = 2, intraWorkers = 3;
    const uint64_t p0 = cnt * eighths / 8, p1 = cnt - p0;
    const uint64_t b0 = p0 * c.unit, b1 = p1 * c.unit;
    const uint64_t z0 = 0, z1 = HkAlignUp(S * L * b0);
    /* 1 */
    HK_TRY(HkFork(c, 0, 1, 2));
    const uint64_t mine0 = z0 + (si * L + li) * b0;
    HK_TRY(HkCopy(c.param, c.Th(intra), c.buf + mine0, io.in, b0));
    auto part0 = [&](uint32_t j, uint32_t) {
        const uint64_t at = z0 + (si * L + j) * b0;
        return HkSpan{c.buf + at, p0, at};
    };
    HK_TRY(HkMeshAllGatherEx(c, g0, intra, intraWorkers, 1, part0, [&](uint32_t) { return c.buf + mine0; }));
    const uint64_t mine1 = z1 + (li * S + si) * b1;
    HK_TRY(HkCopy(c.param, c.Th(inter), c.buf + mine1, io.in + b0, b1));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(inter), z1 + li * S * b1, S * p1));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 2 */
    HK_TRY(HkFork(c, 0, 1, 2));
    auto part1 = [&](uint32_t j, uint32_t) {
        const uint64_t at = z1 + j * S * b1;
        return HkSpan{c.buf + at, S * p1, at};
    };
    HK_TRY(HkMeshAllGatherEx(c, g0, intra, intraWorkers, 1, part1,
                             [&](uint32_t) { return c.buf + z1 + li * S * b1; }));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(inter), z0, S * L * p0));
    HK_TRY(HkJoin(c, 0, 1, 2));
    for (uint32_t s = 0; s < S; ++s) {
        for (uint32_t j = 0; j < L; ++j) {
            uint8_t *dst = io.out + lv.grid[s * L + j] * io.block;
            HK_TRY(HkCopy(c.param, c.Th(0), dst, c.buf + z0 + (s * L + j) * b0, b0));
            HK_TRY(HkCopy(c.param, c.Th(0), dst + b0, c.buf + z1 + (j * S + s) * b1, b1));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    static const char *const kNames[] = {"", "AicpuAllGatherSoleMesh", "", "", "", "AicpuAllGatherSoleNHR", "",
                                         "AicpuAllGatherParallelMeshNHR", "AicpuAllGatherSequenceMeshConcurNHR",
                                         "AicpuAllGatherSequenceMeshConcurNHRNHR"};
    const uint32_t unit = HkUnitSize(param);
    if (unit == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t n = resCtx.rankSize;
    const uint32_t r = resCtx.rank;
    uint8_t *out = static_cast<uint8_t *>(param.outputPtr);
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    const uint64_t block = param.count * unit;
    if (n == 1 || param.count == 0) {
        return HkCopy(param, resCtx.threads[0], out + r * block, in, block);
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HK_ALGO_MESH;
    if (algo >= sizeof kNames / sizeof kNames[0] || kNames[algo][0] == '\0') {
        OP_LOG_ERROR("algo %u is not an allgather algorithm of this operator (hk_coll.h: %u mesh, %u NHR, %u parallel "
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
    double multiple = n;
    uint32_t eighths = 0;
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
    } else {
        HK_TRY(HkLevelsRead(c, param.hierInfo, algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR ? 3 : 2, &lv));
        HK_TRY(HkCallInit(&c, kNames[algo], algo == HK_ALGO_PARALLEL_MESH_NHR ? lv.L + 2 : lv.L));
        HK_TRY(HkCallLevelPeers(&c, lv));
        if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
            eighths = HkParallelEighths(lv.L, lv.S, 2);
        }
    }
    const bool par = algo == HK_ALGO_PARALLEL_MESH_NHR;  /* Z1 starts aligned: reserve that much */
    const uint64_t loop = HkLoopElems(c, multiple, par ? 8 : 1, par ? HK_SLICE_ALIGN_BYTES : 0);
    if (loop == 0) {
        return HCCL_E_MEMORY;
    }
    for (uint64_t off = 0; off < param.count; off += loop) {
        const uint64_t cnt = HkMin(loop, param.count - off);
        const Io io{in + off * unit, out + off * unit, block};
        if (algo == HK_ALGO_MESH) {
            HK_TRY(MeshLoop(c, g, io, cnt));
        } else if (algo == HK_ALGO_NHR) {
            HK_TRY(NhrLoop(c, g, io, cnt));
        } else if (algo == HK_ALGO_SEQUENCE_MESH_NHR || algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR) {
            HK_TRY(SeqLoop(c, lv, io, cnt));
        } else {
            HK_TRY(ParLoop(c, lv, eighths, io, cnt));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_allgather
