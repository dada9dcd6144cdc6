/*
 * exec_op.cc -- built-in allgather: output = [input of rank 0, input of rank 1, ...] on every rank.
 *
 * OpParam.count = elements per rank (output holds count * rankSize); OpParam.algo:
 *   HK_ALGO_MESH  every rank stages its block in its HCCL buffer and every peer reads it straight
 *                 into its output (one device thread per peer when rankSize > 2);
 *   HK_ALGO_RING  blocks travel rank -> rank+1 by writes into region `block` of next's buffer;
 *   HK_ALGO_HIERARCHICAL  two levels (servers; OpParam.hierInfo, hk_coll.h): first among the
 *                 ranks with my local index (one per server, over RoCE), then inside my server
 *                 (HierSlice below);
 *   HK_ALGO_AUTO  HkChooseAlgo(HK_COLL_ALLGATHER, ...) of hk_coll.h (never the hierarchical one:
 *                 the host's selector, hcomm_kit/ops/selector.py, knows the topology).
 * Blocks are cut into slices of at most HK_CACHE_SLICE_BYTES that also fit the buffer regions
 * (the last one shorter); each slice runs the whole protocol and ends in a clean state
 * (hk_coll.h: clean exit, ACK/DATA rules).
 */
#include "exec_op.h"
#include "allgather_log.h"
#include "hk_coll.h"

namespace ops_allgather {
namespace {

struct Ctx : HkPeers {  // param, res, Ch(peer), PeerBuf(peer), Record/Wait(thread, peer, slot)
    uint32_t rank;
    uint32_t rankSize;
    const uint8_t *input;
    uint8_t *output;
    uint64_t blockBytes;  // one rank's contribution
    uint8_t *myBuf;
};

/* Mesh, the exchange with one peer for the slice [off, off + len) of every block: record ACK
 * ("my slice is staged"), wait the peer's ACK, read its slice into its output block, record DATA
 * ("done reading yours"), wait its DATA (it is done reading mine: clean exit). */
HcclResult MeshPeer(const Ctx &c, ThreadHandle t, uint32_t peer, uint64_t off, uint64_t len)
{
    HK_TRY(c.Record(t, peer, HK_ACK));
    HK_TRY(c.Wait(t, peer, HK_ACK));
    OP_CHECK(c.param.tag, HcommReadOnThread(t, c.Ch(peer), c.output + peer * c.blockBytes + off, c.PeerBuf(peer), len));
    HK_TRY(c.Record(t, peer, HK_DATA));
    return c.Wait(t, peer, HK_DATA);
}

/* Mesh slice: main stages my slice, starts the workers (peer rank+i on thread i; with 2 ranks the
 * main thread does the one exchange itself), copies my own block, and joins the workers. Memory
 * passes per rank: stage 1 + own copy 1 + one read per peer. */
HcclResult MeshSlice(const Ctx &c, uint64_t off, uint64_t len)
{
    const ThreadHandle main = c.res.threads[0];
    const uint32_t n = c.rankSize;
    const uint32_t workers = n > 2 ? n - 1 : 0;
    OP_CHECK(c.param.tag, HcommLocalCopyOnThread(main, c.myBuf, c.input + off, len));
    HK_TRY(HkFanOut(c.param, c.res, workers));
    if (workers == 0) {
        HK_TRY(MeshPeer(c, main, 1 - c.rank, off, len));
    }
    HK_TRY(HkCopy(c.param, main, c.output + c.rank * c.blockBytes + off, c.input + off, len));
    for (uint32_t i = 1; i <= workers; ++i) {
        const ThreadHandle t = c.res.threads[i];
        HK_TRY(HkWorkerStart(c.param, c.res, i));
        HK_TRY(MeshPeer(c, t, (c.rank + i) % n, off, len));
        HK_TRY(HkWorkerFinish(c.param, c.res, i, workers));
    }
    return HkFanIn(c.param, c.res, workers);
}

/* Ring slice; my buffer holds n regions of `region` bytes, region b for block b. Own block: copy
 * input -> output. Steps t = 0..n-2: wait ACK from next, write block (rank - t) into region
 * (rank - t) of next's buffer (step 0 straight from my input, later from my region where it
 * arrived), record DATA to next; wait DATA from prev (block rank-1-t is in my region), record ACK
 * to prev unless last, copy that region to its output block. Writes only: at the end every write
 * into my buffer has landed (DATA waited) and mine were made after next's ACK. */
HcclResult RingSlice(const Ctx &c, uint64_t off, uint64_t len, uint64_t region)
{
    const ThreadHandle main = c.res.threads[0];
    const uint32_t n = c.rankSize;
    const uint32_t prev = (c.rank + n - 1) % n;
    const uint32_t next = (c.rank + 1) % n;
    HK_TRY(HkCopy(c.param, main, c.output + c.rank * c.blockBytes + off, c.input + off, len));
    HK_TRY(c.Record(main, prev, HK_ACK));
    for (uint32_t t = 0; t + 1 < n; ++t) {
        const uint32_t sendBlock = (c.rank + n - t) % n;
        const uint32_t recvBlock = (c.rank + 2 * n - 1 - t) % n;
        const uint8_t *src = t == 0 ? c.input + off : c.myBuf + sendBlock * region;
        HK_TRY(c.Wait(main, next, HK_ACK));
        OP_CHECK(c.param.tag, HcommWriteOnThread(main, c.Ch(next), c.PeerBuf(next) + sendBlock * region, src, len));
        HK_TRY(c.Record(main, next, HK_DATA));
        HK_TRY(c.Wait(main, prev, HK_DATA));
        if (t + 2 < n) {
            HK_TRY(c.Record(main, prev, HK_ACK));
        }
        OP_CHECK(c.param.tag, HcommLocalCopyOnThread(main, c.output + recvBlock * c.blockBytes + off,
                                                     c.myBuf + recvBlock * region, len));
    }
    return HCCL_SUCCESS;
}

/*
 * Two-level (hierarchical) slice [off, off + len) of every block, level 1 first and level 0
 * second, as CANN's AICPU sequence executor does ("先inter再intra", hicann/hccl
 * src/ops/all_gather/executor/ins_v2_all_gather_sequence_executor_aicpu.cc): each rank crosses the
 * servers with its own block only (S - 1 blocks in over RoCE instead of (S - 1) * L), then the
 * server peers exchange what they gathered. My buffer holds S regions G[0..S-1] of `region`
 * bytes, G[t] = the block of the rank with my local index on server t (G[si] = mine):
 *  1. level 1: copy my input slice into G[si]; ACK my level-1 peers; read G[t] of each (its own
 *     block) into my G[t] after its ACK; DATA to them ("done reading yours");
 *  2. level 0: ACK my server peers ("my G is complete"); copy my G[t] into output block
 *     grid[t][li] (mine from the input); after each server peer j's ACK read its G[t] into output
 *     block grid[t][j], for every t; DATA to them; wait their DATA and my level-1 peers' DATA
 *     (nobody reads my G any more: clean exit, the next slice may stage again).
 * Output block r is rank r's input wherever r sits (the grid comes from the layout, so servers
 * need not hold consecutive ranks). Slot hand-over as in the mesh: every ACK of a slice is
 * answered by a DATA that is waited before the slice ends; each DATA follows the peer's ACK.
 */
HcclResult HierSlice(const Ctx &c, const HkHier &h, uint64_t off, uint64_t len, uint64_t region)
{
    const ThreadHandle main = c.res.threads[0];
    uint8_t *mine = c.myBuf + h.si * region;
    OP_CHECK(c.param.tag, HcommLocalCopyOnThread(main, mine, c.input + off, len));
    // 1. level 1
    if (h.S > 1) {
        HK_TRY(HkHierRecord(c.param, c.res, h, 1, HK_ACK));
        for (uint32_t t = 0; t < h.S; ++t) {
            const uint32_t p = h.Inter(t);
            if (t == h.si) {
                continue;
            }
            HK_TRY(c.Wait(main, p, HK_ACK));
            OP_CHECK(c.param.tag,
                     HcommReadOnThread(main, c.Ch(p), c.myBuf + t * region, c.PeerBuf(p) + t * region, len));
        }
        HK_TRY(HkHierRecord(c.param, c.res, h, 1, HK_DATA));
    }
    // 2. level 0
    if (h.L > 1) {
        HK_TRY(HkHierRecord(c.param, c.res, h, 0, HK_ACK));
    }
    for (uint32_t t = 0; t < h.S; ++t) {
        const uint8_t *src = t == h.si ? c.input + off : c.myBuf + t * region;
        OP_CHECK(c.param.tag,
                 HcommLocalCopyOnThread(main, c.output + h.grid[t * h.L + h.li] * c.blockBytes + off, src, len));
    }
    if (h.L > 1) {
        for (uint32_t j = 0; j < h.L; ++j) {
            const uint32_t p = h.Local(j);
            if (j == h.li) {
                continue;
            }
            HK_TRY(c.Wait(main, p, HK_ACK));
            for (uint32_t t = 0; t < h.S; ++t) {
                uint8_t *dst = c.output + h.grid[t * h.L + j] * c.blockBytes + off;
                OP_CHECK(c.param.tag, HcommReadOnThread(main, c.Ch(p), dst, c.PeerBuf(p) + t * region, len));
            }
        }
        HK_TRY(HkHierRecord(c.param, c.res, h, 0, HK_DATA));
        HK_TRY(HkHierWait(c.param, c.res, h, 0, HK_DATA));
    }
    if (h.S > 1) {
        HK_TRY(HkHierWait(c.param, c.res, h, 1, HK_DATA));
    }
    return HCCL_SUCCESS;
}

/* HK_ALGO_HIERARCHICAL: the layout, S cache-sized regions per slice, then slice by slice. */
HcclResult HierRun(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t unit, uint64_t blockBytes)
{
    HkHier h;
    HK_TRY(HkHierLayout(param, resCtx, param.hierInfo, &h));
    const Ctx c{{param, resCtx},
                resCtx.rank,
                resCtx.rankSize,
                static_cast<const uint8_t *>(param.inputPtr),
                static_cast<uint8_t *>(param.outputPtr),
                blockBytes,
                static_cast<uint8_t *>(resCtx.localBuffer.addr)};
    uint64_t region = 0;
    uint64_t slice = 0;
    HK_TRY(HkBlockSlices(param, resCtx, h.bufferBytes, h.S, unit, &region, &slice));
    for (uint64_t off = 0; off < blockBytes; off += slice) {
        HK_TRY(HierSlice(c, h, off, HkMin(slice, blockBytes - off), region));
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
    const uint64_t blockBytes = param.count * unit;
    if (n == 1 || blockBytes == 0) {
        return HkCopy(param, resCtx.threads[0], param.outputPtr, param.inputPtr, blockBytes);
    }
    if (param.algo == HK_ALGO_HIERARCHICAL) {  // before the mesh checks: it needs its levels' channels only
        return HierRun(param, resCtx, unit, blockBytes);
    }
    const uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    if (bufferBytes == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HkChooseAlgo(HK_COLL_ALLGATHER, blockBytes, n);
    HK_TRY(HkRingMeshCheck(param, resCtx, algo, "allgather"));
    const Ctx c{{param, resCtx},
                resCtx.rank,
                n,
                static_cast<const uint8_t *>(param.inputPtr),
                static_cast<uint8_t *>(param.outputPtr),
                blockBytes,
                static_cast<uint8_t *>(resCtx.localBuffer.addr)};
    // Mesh keeps my slice in the buffer, the ring one region per block; cache-sized pieces.
    uint64_t region = 0;
    uint64_t slice = 0;
    HK_TRY(HkBlockSlices(param, resCtx, bufferBytes, algo == HK_ALGO_MESH ? 1 : n, unit, &region, &slice));
    for (uint64_t off = 0; off < blockBytes; off += slice) {
        const uint64_t len = HkMin(slice, blockBytes - off);
        HK_TRY(algo == HK_ALGO_MESH ? MeshSlice(c, off, len) : RingSlice(c, off, len, region));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_allgather
