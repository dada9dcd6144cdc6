/*
 * exec_op.cc -- built-in reduce_scatter: rank r gets block r of (input_0 op input_1 op ...).
 *
 * OpParam.count = elements per rank's result (input holds count * rankSize: block b is
 * elements [b * count, (b + 1) * count)); OpParam.algo:
 *   HK_ALGO_MESH  every rank writes block p of its input straight into peer p's buffer (one device
 *                 thread per peer when rankSize > 2); p reduces the blocks in rank order;
 *   HK_ALGO_RING  reduce-scatter over the ring rank-1 -> rank -> rank+1 by write-reduce;
 *   HK_ALGO_AUTO  HkChooseAlgo(HK_COLL_REDUCE_SCATTER, ...) of hk_coll.h.
 * Blocks are cut into slices of at most HK_CACHE_SLICE_BYTES that also fit the buffer regions
 * (the last one shorter); each slice runs the whole protocol and ends in a clean state
 * (hk_coll.h: clean exit, ACK/DATA rules).
 */
#include "exec_op.h"
#include "reduce_scatter_log.h"
#include "hk_coll.h"

namespace ops_reduce_scatter {
namespace {

struct Ctx : HkPeers {  // param, res, Ch(peer), PeerBuf(peer), Record/Wait(thread, peer, slot)
    uint32_t unit;
    HcommDataType dataType;
    HcommReduceOp reduceOp;
    uint32_t rank;
    uint32_t rankSize;
    const uint8_t *input;
    uint8_t *output;
    uint64_t blockBytes;  // count * unit
    uint8_t *myBuf;
    uint8_t *sync;  // HK_SYNC_BYTES for HkDrain (staged reduce: the primitive cannot reduce the dtype/op)
};

/* Mesh: region of `owner`'s buffer that receives the slice from rank `from` (n-1 regions, no
 * region for the owner itself). */
inline uint64_t MeshRegion(uint32_t from, uint32_t owner)
{
    return from < owner ? from : from - 1;
}

/* Mesh, the push to one peer: wait its ACK ("my regions are free"), write my block `peer` slice
 * into its region for me, record DATA ("landed"). */
HcclResult MeshPush(const Ctx &c, ThreadHandle t, uint32_t peer, uint64_t off, uint64_t len, uint64_t region)
{
    HK_TRY(c.Wait(t, peer, HK_ACK));
    OP_CHECK(c.param.tag, HcommWriteOnThread(t, c.Ch(peer), c.PeerBuf(peer) + MeshRegion(c.rank, peer) * region,
                                             c.input + peer * c.blockBytes + off, len));
    return c.Record(t, peer, HK_DATA);
}

/* Mesh slice [off, off + len) of every block: main records ACK to every peer, starts the workers
 * (push to peer rank+i on thread i; with 2 ranks main pushes itself), then reduces in rank order:
 * output = block_0 op block_1 op ... where block_q comes from my input (q == rank) or from my
 * region for q after waiting q's DATA; finally joins the workers. Writes only: when main is done
 * every write into my buffer landed, and mine were made after the peers' ACKs. */
HcclResult MeshSlice(const Ctx &c, uint64_t off, uint64_t len, uint64_t region)
{
    const ThreadHandle main = c.res.threads[0];
    const uint32_t n = c.rankSize;
    const uint32_t workers = n > 2 ? n - 1 : 0;
    const uint64_t count = len / c.unit;
    uint8_t *out = c.output + off;
    for (uint32_t i = 1; i < n; ++i) {
        HK_TRY(c.Record(main, (c.rank + i) % n, HK_ACK));
    }
    HK_TRY(HkFanOut(c.param, c.res, workers));
    if (workers == 0) {
        HK_TRY(MeshPush(c, main, 1 - c.rank, off, len, region));
    }
    // The workers' pushes are enqueued before the main thread's reductions: a staged reduce
    // (HkLocalReduce draining the batch) must not hold back the pushes the peers wait for.
    for (uint32_t i = 1; i <= workers; ++i) {
        HK_TRY(HkWorkerStart(c.param, c.res, i));
        HK_TRY(MeshPush(c, c.res.threads[i], (c.rank + i) % n, off, len, region));
        HK_TRY(HkWorkerFinish(c.param, c.res, i, workers));
    }
    for (uint32_t q = 0; q < n; ++q) {
        const uint8_t *src = c.input + c.rank * c.blockBytes + off;
        if (q != c.rank) {
            HK_TRY(c.Wait(main, q, HK_DATA));
            src = c.myBuf + MeshRegion(q, c.rank) * region;
        }
        if (q == 0) {
            OP_CHECK(c.param.tag, HcommLocalCopyOnThread(main, out, src, len));
        } else {
            HK_TRY(HkLocalReduce(c.param, c.res, main, c.sync, out, src, count));
        }
    }
    return HkFanIn(c.param, c.res, workers);
}

/* Ring slice; my buffer holds n regions of `region` bytes, region b for block b. Rank r sends
 * block r-1-s at step s and ends with block r fully reduced:
 *   copy every input block except r-1 into its region; record ACK to prev ("staged");
 *   steps s = 0..n-2: wait ACK from next, write-reduce block (r-1-s) into the same region of
 *   next's buffer (step 0 straight from my input, later from my region where it accumulated),
 *   record DATA to next; wait DATA from prev, record ACK to prev unless last;
 *   copy region r to the output. Same slot hand-over as the allreduce ring. */
HcclResult RingSlice(const Ctx &c, uint64_t off, uint64_t len, uint64_t region)
{
    const ThreadHandle main = c.res.threads[0];
    const uint32_t n = c.rankSize;
    const uint32_t r = c.rank;
    const uint32_t prev = (r + n - 1) % n;
    const uint32_t next = (r + 1) % n;
    const uint64_t count = len / c.unit;
    for (uint32_t b = 0; b < n; ++b) {
        if (b != prev) {
            OP_CHECK(c.param.tag, HcommLocalCopyOnThread(main, c.myBuf + b * region, c.input + b * c.blockBytes + off,
                                                         len));
        }
    }
    HK_TRY(c.Record(main, prev, HK_ACK));
    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t b = (r + 2 * n - 1 - s) % n;
        const uint8_t *src = s == 0 ? c.input + b * c.blockBytes + off : c.myBuf + b * region;
        HK_TRY(c.Wait(main, next, HK_ACK));
        OP_CHECK(c.param.tag, HcommWriteReduceOnThread(main, c.Ch(next), c.PeerBuf(next) + b * region, src, count,
                                                       c.dataType, c.reduceOp));
        HK_TRY(c.Record(main, next, HK_DATA));
        HK_TRY(c.Wait(main, prev, HK_DATA));
        if (s + 2 < n) {
            HK_TRY(c.Record(main, prev, HK_ACK));
        }
    }
    OP_CHECK(c.param.tag, HcommLocalCopyOnThread(main, c.output + off, c.myBuf + r * region, len));
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
    uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    if (bufferBytes == 0) {
        return HCCL_E_PARA;
    }
    uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HkChooseAlgo(HK_COLL_REDUCE_SCATTER, blockBytes, n);
    // A dtype/op the Hcomm primitive cannot reduce here (A2/A3 int64, prod): mesh (its reductions
    // are local), combined in the kernel's code, the drain words at the end of the buffer (hk_coll.h).
    uint8_t *sync = nullptr;
    HK_TRY(HkStagedReduceCarve(param, resCtx, &bufferBytes, &sync, nullptr));
    if (sync != nullptr) {
        algo = HK_ALGO_MESH;
    }
    HK_TRY(HkRingMeshCheck(param, resCtx, algo, "reduce_scatter"));
    const Ctx c{{param, resCtx},
                unit,
                static_cast<HcommDataType>(param.dataType),
                static_cast<HcommReduceOp>(param.reduceOp),
                resCtx.rank,
                n,
                static_cast<const uint8_t *>(param.inputPtr),
                static_cast<uint8_t *>(param.outputPtr),
                blockBytes,
                static_cast<uint8_t *>(resCtx.localBuffer.addr),
                sync};
    // Mesh: n-1 regions (one per sender); ring: n regions (one per block); cache-sized pieces.
    uint64_t region = 0;
    uint64_t slice = 0;
    HK_TRY(HkBlockSlices(param, resCtx, bufferBytes, algo == HK_ALGO_MESH ? n - 1 : n, unit, &region, &slice));
    for (uint64_t off = 0; off < blockBytes; off += slice) {
        const uint64_t len = HkMin(slice, blockBytes - off);
        HK_TRY(algo == HK_ALGO_MESH ? MeshSlice(c, off, len, region) : RingSlice(c, off, len, region));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_reduce_scatter
