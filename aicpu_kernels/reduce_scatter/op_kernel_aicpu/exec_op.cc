/*
 * exec_op.cc -- built-in reduce_scatter: rank r gets block r of (input_0 op input_1 op ...).
 *
 * OpParam.count = elements per rank's result (input holds count * rankSize: block b is
 * elements [b * count, (b + 1) * count)); OpParam.algo (hk_coll.h):
 *   HK_ALGO_MESH               AicpuReduceScatterSoleMesh: every rank writes block p of its input
 *                              into slot `rank` of p's buffer, a thread per peer; p combines its
 *                              own block and the slots (CANN's InsTempReduceScatterMesh1D);
 *   HK_ALGO_MESH_CHUNK         AicpuReduceScatterSoleMeshChunk: write-reduce of sub-chunks in n-1
 *                              steps (CANN's InsTempReduceScatterMesh1DMeshChunk);
 *   HK_ALGO_NHR                AicpuReduceScatterSoleNHR: the NHR reduce-scatter over every rank;
 *   HK_ALGO_NHR_AICPU_REDUCE   AicpuReduceScatterSoleNHRAicpuReduce: the same, the reductions
 *                              computed by the kernel (writes into a scratch mirror, then loops);
 *   HK_ALGO_SEQUENCE_MESH_NHR  AicpuReduceScatterSequenceMeshConcurNHR: mesh reduce-scatter in the
 *                              server (for every server's blocks at once), then NHR among servers;
 *   HK_ALGO_SEQUENCE_MESH_NHR_NHR  AicpuReduceScatterSequenceMeshConcurNHRNHR: then NHR among super-pods;
 *   HK_ALGO_PARALLEL_MESH_NHR  AicpuReduceScatterParallelMeshNHR: each block in two parts, one
 *                              reduced in the server first, the other among the servers first, at
 *                              the same time, then the other level;
 *   HK_ALGO_AUTO               CANN's SelectMeshAlgoAicpu for one server (MESH_1D): the chunked
 *                              mesh when count * size * 64 / n^2 exceeds 16 MiB, else the mesh
 *                              (64-bit dtypes and prod: the mesh).
 * Blocks are cut into loops of the HCCL buffer divided by what each algorithm keeps there; each
 * loop runs the whole protocol and ends clean. A2/A3 int64 and prod are combined by the kernel
 * (hk_coll.h, staged reductions); the write-reduce algorithms cannot take them and say so.
 */
#include "exec_op.h"
#include "reduce_scatter_log.h"
#include "hk_coll.h"

namespace ops_reduce_scatter {
namespace {

struct Io {
    const uint8_t *in;  /* input at the loop's offset within block 0 */
    uint8_t *out;       /* my result at the loop's offset */
    uint64_t block;     /* bytes between blocks of the input (count * unit) */
};

uint32_t HkAutoReduceScatter(const OpParam &param, uint64_t bytes, uint32_t n)
{
    const int32_t dt = param.dataType;
    if (dt == HCOMM_DATA_TYPE_INT64 || dt == HCOMM_DATA_TYPE_UINT64 || dt == HCOMM_DATA_TYPE_FP64 ||
        param.reduceOp == HCOMM_REDUCE_PROD) {
        return HK_ALGO_MESH;
    }
    const double ratio = (8.0 / n) * (8.0 / n);
    return static_cast<double>(bytes) * ratio > static_cast<double>(16ull << 20) ? HK_ALGO_MESH_CHUNK : HK_ALGO_MESH;
}

/* Mesh (multiple n: n slots of a piece), HkMeshReduceScatterEx with strided blocks. */
HcclResult MeshLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt, uint64_t slotBytes)
{
    auto part = [&](uint32_t j, uint32_t) { return HkSpan{const_cast<uint8_t *>(io.in) + j * io.block, cnt, 0}; };
    return HkMeshReduceScatterEx(c, g, 0, 1, 1, part, 0, slotBytes, 0, [&](uint32_t) { return io.out; });
}

/* Chunked mesh (multiple 1: my piece): main copies my block's piece into my buffer,
 * HkMeshChunkReduceScatter adds the peers' into it, main copies it out. */
HcclResult ChunkLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt)
{
    HK_TRY(HkCopy(c.param, c.Th(0), c.buf, io.in + g.me * io.block, cnt * c.unit));
    auto part = [&](uint32_t j) { return HkSpan{const_cast<uint8_t *>(io.in) + j * io.block, cnt, 0}; };
    HK_TRY(HkMeshChunkReduceScatter(c, g, 0, 1, part));
    return HkCopy(c.param, c.Th(0), io.out, c.buf, cnt * c.unit);
}

/* NHR (multiple n, 2n for the AicpuReduce form): main copies the n pieces into the buffer in rank
 * order, runs the NHR reduce-scatter (hk_coll.h) and copies my reduced piece out. */
HcclResult NhrLoop(const HkCall &c, const HkGroup &g, const Io &io, uint64_t cnt, uint64_t scratchOff)
{
    const ThreadHandle t = c.Th(0);
    const uint64_t piece = cnt * c.unit;
    for (uint32_t j = 0; j < g.n; ++j) {
        HK_TRY(HkCopy(c.param, t, c.buf + j * piece, io.in + j * io.block, piece));
    }
    HK_TRY(HkNhrReduceScatter(c, g, t, 0, g.n * cnt, scratchOff));
    return HkCopy(c.param, t, io.out, c.buf + g.me * piece, piece);
}

/*
 * Sequence (CANN's InsV2ReduceScatterSequenceExecutorAicpu, multiple S (L + 1), + S for a
 * reduction the kernel computes): level 0 first, repeated for every server at once (one exchange per
 * peer carries the S pieces): W holds, for every server, the block of its rank with my local index
 * reduced over my server; then the level-1 NHR reduce-scatter over W leaves my block reduced over
 * everything (with three levels, AicpuReduceScatterSequenceMeshConcurNHRNHR, CANN's
 * InsV2ReduceScatterSequenceExecutor3Level: reduced over my super-pod, and the level-2 NHR over my
 * part finishes it; W is ordered server in the super-pod first so that each level's parts are
 * contiguous).
 */
struct Seq {
    uint64_t slotBytes; /* S pieces */
    uint64_t offW;
    uint64_t offC;      /* HK_NO_SCRATCH when the primitive reduces */
};

HcclResult SeqLoop(const HkCall &c, const HkLevels &lv, const Seq &q, const Io &io, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t L = lv.L, M = lv.M, P = lv.P;
    const uint64_t piece = cnt * c.unit;
    /* W piece r = m P + p: the block of (super-pod p, server m, my local index), reduced over my server */
    auto part = [&](uint32_t j, uint32_t r) {
        const uint32_t m = r / P, p = r % P;
        return HkSpan{const_cast<uint8_t *>(io.in) + lv.order[(p * M + m) * L + j] * io.block, cnt, 0};
    };
    HK_TRY(HkMeshReduceScatterEx(c, g0, 0, 1, lv.S, part, 0, q.slotBytes, piece,
                                 [&](uint32_t r) { return c.buf + q.offW + r * piece; }));
    HK_TRY(HkNhrReduceScatter(c, g1, c.Th(0), q.offW, lv.S * cnt, q.offC));  /* part m: P pieces */
    const uint64_t at = g1.me * P * piece;
    uint32_t pod = 0;
    if (lv.count == 3) {
        pod = lv.g[2].me;
        HK_TRY(HkNhrReduceScatter(c, lv.g[2], c.Th(0), q.offW + at, P * cnt, q.offC == HK_NO_SCRATCH ? q.offC : q.offC + at));
    }
    return HkCopy(c.param, c.Th(0), io.out, c.buf + q.offW + at + pod * piece, piece);
}

/*
 * Parallel (CANN's InsReduceScatterParallelExecutor, mesh and NHR templates): each piece in two
 * parts, part 0 (e/8, HkParallelEighths, reduce-scatter kind) and part 1. Threads: 0 leads, 1
 * leads the server's mesh (workers 3..L+1), 2 runs the NHR among the servers.
 *   1. part 0: level-0 mesh for every server's blocks (into W0) | part 1: copy the n blocks into X1
 *      (server-major), level-1 NHR reduce-scatter over X1 (part s = server s's L blocks)
 *   2. part 0: level-1 NHR over W0, copy piece si out          | part 1: level-0 mesh of X1's part si
 *      into the output
 * Buffer: A0 (L slots of S part-0 pieces), W0, X1 (n part-1 pieces), A1 (L slots of a part-1
 * piece) and, for a reduction the kernel computes, scratch mirrors of W0 and X1.
 */
struct Par {
    uint32_t eighths;
    uint64_t offA0, slot0, offW0, offC0, offX1, offE1, offA1, slot1, end;
};

void ParLayout(uint32_t L, uint32_t S, bool staged, uint64_t cnt, uint32_t unit, Par *p)
{
    const uint64_t b0 = cnt * p->eighths / 8 * unit;
    const uint64_t b1 = cnt * unit - b0;
    uint64_t at = 0;
    p->offA0 = at;
    p->slot0 = HkAlignUp(S * b0);
    at += L * p->slot0;
    p->offW0 = at;
    at += HkAlignUp(S * b0);
    p->offC0 = staged ? at : HK_NO_SCRATCH;
    at += staged ? HkAlignUp(S * b0) : 0;
    p->offX1 = at;
    at += HkAlignUp(L * S * b1);
    p->offE1 = staged ? at : HK_NO_SCRATCH;
    at += staged ? HkAlignUp(L * S * b1) : 0;
    p->offA1 = at;
    p->slot1 = HkAlignUp(b1);
    at += L * p->slot1;
    p->end = at;
}

HcclResult ParLoop(const HkCall &c, const HkLevels &lv, const Par &p, const Io &io, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t L = lv.L, S = lv.S, si = g1.me;
    const uint32_t intra = 1, inter = 2, intraWorkers = 3;
    const uint64_t p0 = cnt * p.eighths / 8, p1 = cnt - p0;
    const uint64_t b0 = p0 * c.unit, b1 = p1 * c.unit;
    /* 1 */
    HK_TRY(HkFork(c, 0, 1, 2));
    auto part0 = [&](uint32_t j, uint32_t r) {
        return HkSpan{const_cast<uint8_t *>(io.in) + lv.grid[r * L + j] * io.block, p0, 0};
    };
    HK_TRY(HkMeshReduceScatterEx(c, g0, intra, intraWorkers, S, part0, p.offA0, p.slot0, b0,
                                 [&](uint32_t r) { return c.buf + p.offW0 + r * b0; }));
    for (uint32_t k = 0; k < S * L; ++k) {
        HK_TRY(HkCopy(c.param, c.Th(inter), c.buf + p.offX1 + k * b1, io.in + lv.grid[k] * io.block + b0, b1));
    }
    HK_TRY(HkNhrReduceScatter(c, g1, c.Th(inter), p.offX1, S * L * p1, p.offE1));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 2 */
    HK_TRY(HkFork(c, 0, 1, 2));
    auto part1 = [&](uint32_t j, uint32_t) { return HkSpan{c.buf + p.offX1 + (si * L + j) * b1, p1, 0}; };
    HK_TRY(HkMeshReduceScatterEx(c, g0, intra, intraWorkers, 1, part1, p.offA1, p.slot1, 0,
                                 [&](uint32_t) { return io.out + b0; }));
    HK_TRY(HkNhrReduceScatter(c, g1, c.Th(inter), p.offW0, S * p0, p.offC0));
    HK_TRY(HkCopy(c.param, c.Th(inter), io.out, c.buf + p.offW0 + si * b0, b0));
    return HkJoin(c, 0, 1, 2);
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    static const char *const kNames[] = {"", "AicpuReduceScatterSoleMesh", "", "",
                                         "AicpuReduceScatterSoleMeshChunk", "AicpuReduceScatterSoleNHR",
                                         "AicpuReduceScatterSoleNHRAicpuReduce", "AicpuReduceScatterParallelMeshNHR",
                                         "AicpuReduceScatterSequenceMeshConcurNHR",
                                         "AicpuReduceScatterSequenceMeshConcurNHRNHR"};
    const uint32_t unit = HkUnitSize(param);
    if (unit == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t n = resCtx.rankSize;
    const uint32_t r = resCtx.rank;
    const uint8_t *in = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *out = static_cast<uint8_t *>(param.outputPtr);
    const uint64_t block = param.count * unit;
    if (n == 1 || param.count == 0) {
        return HkCopy(param, resCtx.threads[0], out, in + r * block, block);
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HkAutoReduceScatter(param, block, n);
    if (algo >= sizeof kNames / sizeof kNames[0] || kNames[algo][0] == '\0') {
        OP_LOG_ERROR("algo %u is not a reduce_scatter algorithm of this operator (hk_coll.h: %u mesh, %u chunked mesh, "
                     "%u NHR, %u NHR with AICPU reduce, %u parallel mesh+NHR, %u sequence mesh+NHR, %u sequence "
                     "mesh+NHR+NHR; 0 auto), tag %s", algo, HK_ALGO_MESH, HK_ALGO_MESH_CHUNK, HK_ALGO_NHR,
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
    const bool seq = algo == HK_ALGO_SEQUENCE_MESH_NHR || algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR;
    const bool twoLevel = algo == HK_ALGO_PARALLEL_MESH_NHR || seq;
    if (algo == HK_ALGO_MESH || algo == HK_ALGO_MESH_CHUNK) {
        HK_TRY(HkCallInit(&c, name, n > 2 ? n : 1));
        for (uint32_t p = 0; p < n; ++p) {
            HK_TRY(HkCallPeer(&c, p));
        }
    } else if (!twoLevel) {
        for (uint32_t s = 0, steps = HkNhrSteps(n); s < steps; ++s) {
            HK_TRY(HkCallPeer(&c, (r + (1u << s)) % n));
            HK_TRY(HkCallPeer(&c, (r + n - (1u << s) % n) % n));
        }
    } else {
        HK_TRY(HkLevelsRead(c, param.hierInfo, algo == HK_ALGO_SEQUENCE_MESH_NHR_NHR ? 3 : 2, &lv));
        HK_TRY(HkCallInit(&c, name, algo == HK_ALGO_PARALLEL_MESH_NHR ? lv.L + 2 : lv.L));
        HK_TRY(HkCallLevelPeers(&c, lv));
    }
    if ((algo == HK_ALGO_MESH_CHUNK || algo == HK_ALGO_NHR) && !c.prim) {
        OP_LOG_ERROR("%s reduces with write-reduce, which this product cannot do for dataType %d with reduce op %d "
                     "(A2/A3: no int64, no prod); use %s, tag %s", name, static_cast<int>(param.dataType),
                     static_cast<int>(param.reduceOp),
                     algo == HK_ALGO_NHR ? "AicpuReduceScatterSoleNHRAicpuReduce" : "AicpuReduceScatterSoleMesh",
                     param.tag);
        return HCCL_E_NOT_SUPPORT;
    }
    const bool staged = !c.prim;
    HK_TRY(HkCallCarve(&c, staged || algo == HK_ALGO_NHR_AICPU_REDUCE));
    uint64_t loop = 0;
    Seq q{0, 0, HK_NO_SCRATCH};
    Par p{};
    if (algo == HK_ALGO_MESH) {
        loop = HkLoopElems(c, n, 1);
    } else if (algo == HK_ALGO_MESH_CHUNK) {
        loop = HkLoopElems(c, 1, 1);
    } else if (algo == HK_ALGO_NHR || algo == HK_ALGO_NHR_AICPU_REDUCE) {
        loop = HkLoopElems(c, algo == HK_ALGO_NHR ? n : 2.0 * n, 1);
    } else if (seq) {
        loop = HkLoopElems(c, lv.S * (lv.L + 1.0 + (staged ? 1.0 : 0.0)), 1, 2 * HK_SLICE_ALIGN_BYTES);
        const uint64_t piece = loop * unit;
        q = Seq{lv.S * piece, lv.L * lv.S * piece, staged ? (lv.L + 1) * lv.S * piece : HK_NO_SCRATCH};
    } else {
        p.eighths = HkParallelEighths(lv.L, lv.S, 0);
        const double e = p.eighths / 8.0;
        const double multiple = e * lv.S * (lv.L + 1.0 + (staged ? 1.0 : 0.0)) +
                                (1.0 - e) * (n * (staged ? 2.0 : 1.0) + lv.L);
        loop = HkLoopElems(c, multiple, 8, (2 * lv.L + 8) * HK_SLICE_ALIGN_BYTES);
        ParLayout(lv.L, lv.S, staged, loop, unit, &p);
        if (p.end > c.bufBytes) {
            loop = 0;
        }
    }
    if (loop == 0) {
        if (algo == HK_ALGO_PARALLEL_MESH_NHR) {
            OP_LOG_ERROR("%s: HCCL buffer too small (%llu bytes usable), tag %s", name,
                         static_cast<unsigned long long>(c.bufBytes), param.tag);
        }
        return HCCL_E_MEMORY;
    }
    const uint64_t scratchOff = algo == HK_ALGO_NHR_AICPU_REDUCE ? n * loop * unit : HK_NO_SCRATCH;
    for (uint64_t off = 0; off < param.count; off += loop) {
        const uint64_t cnt = HkMin(loop, param.count - off);
        const Io io{in + off * unit, out + off * unit, block};
        if (algo == HK_ALGO_MESH) {
            HK_TRY(MeshLoop(c, g, io, cnt, loop * unit));
        } else if (algo == HK_ALGO_MESH_CHUNK) {
            HK_TRY(ChunkLoop(c, g, io, cnt));
        } else if (algo == HK_ALGO_NHR || algo == HK_ALGO_NHR_AICPU_REDUCE) {
            HK_TRY(NhrLoop(c, g, io, cnt, scratchOff));
        } else if (seq) {
            HK_TRY(SeqLoop(c, lv, q, io, cnt));
        } else {
            if (cnt != loop) {
                ParLayout(lv.L, lv.S, staged, cnt, unit, &p);
            }
            HK_TRY(ParLoop(c, lv, p, io, cnt));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_reduce_scatter
