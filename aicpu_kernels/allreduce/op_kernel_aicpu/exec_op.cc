/*
 * exec_op.cc -- built-in allreduce: output[i] = input_0[i] op input_1[i] op ... (every rank).
 *
 * OpParam.count = elements of input = output (output == input allowed); OpParam.algo:
 *   HK_ALGO_MESH  one-shot (small messages): every rank reduces every peer's whole input itself,
 *                 in rank order, so all ranks compute bit-identical results;
 *   HK_ALGO_RING  reduce-scatter over the ring rank-1 -> rank -> rank+1, then every rank reads the
 *                 reduced chunks directly from their owners (mesh channels);
 *   HK_ALGO_HIERARCHICAL  two levels (servers; OpParam.hierInfo, hk_coll.h): reduce-scatter
 *                 inside each server, allreduce among the ranks with the same local index (one per
 *                 server, over RoCE), allgather inside each server (HierSlice below);
 *   HK_ALGO_AUTO  HkChooseAlgo(HK_COLL_ALLREDUCE, ...) of hk_coll.h (never the hierarchical one:
 *                 the host's selector, hcomm_kit/ops/selector.py, knows the topology).
 * Messages are cut into slices of cache-sized chunks (HK_CACHE_SLICE_BYTES) that also fit the
 * HCCL buffer (the last one shorter); each slice runs the whole protocol and ends in a clean
 * state (see hk_coll.h: clean exit, ACK/DATA rules).
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

struct Ctx : HkPeers {  // param, res, Ch(peer), PeerBuf(peer)
    uint32_t unit;
    HcommDataType dataType;
    HcommReduceOp reduceOp;
    uint32_t rank;
    uint32_t rankSize;
    ThreadHandle thread;  // main thread
    const uint8_t *input;
    uint8_t *output;
    uint8_t *myBuf;
    uint64_t bufferBytes;
    uint8_t *scratch;  // staged reduce (HkReadReduce when the primitive cannot reduce): own, private
    uint8_t *sync;     // HK_SYNC_BYTES for HkDrain

    // Record / wait notify `slot` on the channel to `peer`, always on the main thread.
    HcclResult Record(uint32_t peer, uint32_t slot) const { return HkPeers::Record(thread, peer, slot); }
    HcclResult Wait(uint32_t peer, uint32_t slot) const { return HkPeers::Wait(thread, peer, slot); }
};

/*
 * One-shot, per slice of `count` elements at element offset `off`:
 *   copy my input slice into my HCCL buffer; record ACK to every peer ("my slice is staged");
 *   output = buf_0 op buf_1 op ... op buf_{n-1} in rank order (Read / ReadReduce from peers, wait
 *   peer r's ACK just before touching its buffer; LocalCopy / LocalReduce from my own buffer);
 *   record DATA to every peer ("done reading yours"), wait every peer's DATA (clean exit: nobody
 *   reads my buffer any more). Each ACK is consumed before the DATA that answers it; DATA is the
 *   last word. 2 notify rounds, 5n-3 tasks.
 */
HcclResult OneShotSlice(const Ctx &c, uint64_t off, uint64_t count)
{
    const uint64_t bytes = count * c.unit;
    const uint64_t offBytes = off * c.unit;
    uint8_t *out = c.output + offBytes;
    OP_CHECK(c.param.tag, HcommLocalCopyOnThread(c.thread, c.myBuf, c.input + offBytes, bytes));
    HK_TRY(HkRecordAll(c.param, c.res, c.thread, HK_ACK));
    for (uint32_t r = 0; r < c.rankSize; ++r) {
        if (r == c.rank) {
            if (r == 0) {  // rank 0's own input is still intact here (in place: nothing to copy)
                HK_TRY(HkCopy(c.param, c.thread, out, c.input + offBytes, bytes));
            } else {
                HK_TRY(HkLocalReduce(c.param, c.res, c.thread, c.sync, out, c.myBuf, count));
            }
            continue;
        }
        HK_TRY(c.Wait(r, HK_ACK));
        if (r == 0) {
            OP_CHECK(c.param.tag, HcommReadOnThread(c.thread, c.Ch(r), out, c.PeerBuf(r), bytes));
        } else {
            HK_TRY(HkReadReduce(c.param, c.res, c.thread, c.Ch(r), out, c.PeerBuf(r), count, c.unit, c.scratch,
                                c.sync));
        }
    }
    HK_TRY(HkRecordAll(c.param, c.res, c.thread, HK_DATA));
    return HkWaitAll(c.param, c.res, c.thread, HK_DATA);
}

/*
 * Two ranks. The message is cut into slices of at most 2 * `half` bytes (a cache-sized piece,
 * HK_CACHE_SLICE_BYTES, or half the buffer); slice k has chunk m (mine, HkChunkRange index
 * rank) and chunk q (the peer's). Each rank owns the reduction of the OTHER chunk, in half k % 2
 * of its buffer:
 *   copy input chunk q into my half; record ACK ("staged"); wait the peer's ACK;
 *   write-reduce my input chunk m into the peer's half (it becomes final there: peer_m op my_m);
 *   read it back into output chunk m; record DATA ("done with your buffer");
 *   copy input chunk q of slice k+1 into my other half (overlaps the peer's read);
 *   wait the peer's DATA (its write-reduce into my half and its read are done); copy my half
 *   into output chunk q.
 * Every chunk is reduced once, so both ranks hold identical bits. Memory passes per rank: copy,
 * write-reduce, read and copy of half the message, on cache-sized pieces (the peer's reduce
 * reads what I staged just before, the read-back reads what I just wrote). 2 notify rounds per
 * slice. ACK k+1 is recorded after DATA k was waited (the peer consumed ACK k before its write);
 * DATA k+1 after ACK k+1 was waited; the half staged for k+1 was last touched by slice k-1.
 */
HcclResult PairRun(const Ctx &c)
{
    const uint32_t peer = 1 - c.rank;
    const uint64_t unit = c.unit;
    const uint64_t half = HkSliceBytes(HkMin(c.bufferBytes / 2, HK_CACHE_SLICE_BYTES)) / unit;  // elements
    const uint64_t maxCount = 2 * half;
    const uint64_t total = c.param.count;
    auto qRange = [&](uint64_t off, uint64_t *first, uint64_t *cnt) {
        HkChunkRange(HkMin(maxCount, total - off), 2, peer, first, cnt);
    };
    uint64_t qFirst = 0, qCount = 0;
    qRange(0, &qFirst, &qCount);
    HK_TRY(HkCopy(c.param, c.thread, c.myBuf, c.input + qFirst * unit, qCount * unit));
    uint32_t k = 0;
    for (uint64_t off = 0; off < total; off += maxCount, ++k) {
        const uint64_t count = HkMin(maxCount, total - off);
        uint64_t mFirst = 0, mCount = 0;
        HkChunkRange(count, 2, c.rank, &mFirst, &mCount);
        qRange(off, &qFirst, &qCount);
        uint8_t *myHalf = c.myBuf + (k % 2) * half * unit;
        uint8_t *peerHalf = c.PeerBuf(peer) + (k % 2) * half * unit;
        const uint64_t mOff = (off + mFirst) * unit;
        const uint64_t qOff = (off + qFirst) * unit;

        HK_TRY(c.Record(peer, HK_ACK));
        HK_TRY(c.Wait(peer, HK_ACK));
        if (mCount != 0) {
            OP_CHECK(c.param.tag, HcommWriteReduceOnThread(c.thread, c.Ch(peer), peerHalf, c.input + mOff, mCount,
                                                           c.dataType, c.reduceOp));
            OP_CHECK(c.param.tag,
                     HcommReadOnThread(c.thread, c.Ch(peer), c.output + mOff, peerHalf, mCount * unit));
        }
        HK_TRY(c.Record(peer, HK_DATA));
        if (off + maxCount < total) {  // stage the next slice's chunk q into my other half
            uint64_t nFirst = 0, nCount = 0;
            qRange(off + maxCount, &nFirst, &nCount);
            HK_TRY(HkCopy(c.param, c.thread, c.myBuf + ((k + 1) % 2) * half * unit,
                          c.input + (off + maxCount + nFirst) * unit, nCount * unit));
        }
        HK_TRY(c.Wait(peer, HK_DATA));
        HK_TRY(HkCopy(c.param, c.thread, c.output + qOff, myHalf, qCount * unit));
    }
    return HCCL_SUCCESS;
}

/*
 * Ring, n > 2 ranks, per slice cut into n chunks; my buffer mirrors the slice (chunk k at its
 * offset in the slice). prev = rank-1, next = rank+1.
 *  1. copy every input chunk except mine into my buffer; record ACK to prev ("staged");
 *  2. reduce-scatter, steps s = 0..n-2: wait ACK from next, write-reduce chunk (rank - s) into
 *     next's buffer (step 0 straight from my input, later from my buffer where it was
 *     accumulated), record DATA to next; wait DATA from prev (chunk rank-1-s landed in mine),
 *     record ACK to prev unless it was the last step. Afterwards my buffer holds chunk rank+1
 *     fully reduced (in ring order: in_{rank+1} op (in_rank op (... op in_{rank+2}))).
 *  3. allgather by reads: record ACK to every peer ("my reduced chunk is ready"), copy my chunk
 *     to the output; for each peer p: wait its ACK, read chunk p+1 from its buffer into the
 *     output, record DATA ("done reading yours"); finally wait every peer's DATA.
 * Slot hand-over: every RS ACK is consumed before the DATA it enables comes back; the ready ACKs
 * of step 3 go to slots whose earlier ACKs are consumed (prev's: before its last write, whose
 * DATA we waited; others: unused in step 2); the DATA of step 3 to a peer is recorded after its
 * ready ACK, i.e. after it consumed our last RS DATA.
 */
HcclResult RingSlice(const Ctx &c, uint64_t off, uint64_t count)
{
    const uint32_t n = c.rankSize;
    const uint32_t rank = c.rank;
    const uint32_t prev = (rank + n - 1) % n;
    const uint32_t next = (rank + 1) % n;
    const uint8_t *in = c.input + off * c.unit;
    uint8_t *out = c.output + off * c.unit;

    uint64_t first = 0, cnt = 0;
    HkChunkRange(count, n, rank, &first, &cnt);
    HK_TRY(HkCopy(c.param, c.thread, c.myBuf, in, first * c.unit));
    HK_TRY(HkCopy(c.param, c.thread, c.myBuf + (first + cnt) * c.unit, in + (first + cnt) * c.unit,
                  (count - first - cnt) * c.unit));
    HK_TRY(c.Record(prev, HK_ACK));

    for (uint32_t s = 0; s + 1 < n; ++s) {
        const uint32_t chunk = (rank + n - s) % n;
        HkChunkRange(count, n, chunk, &first, &cnt);
        HK_TRY(c.Wait(next, HK_ACK));
        if (cnt != 0) {
            const uint8_t *src = (s == 0 ? in : c.myBuf) + first * c.unit;
            OP_CHECK(c.param.tag, HcommWriteReduceOnThread(c.thread, c.Ch(next), c.PeerBuf(next) + first * c.unit, src,
                                                           cnt, c.dataType, c.reduceOp));
        }
        HK_TRY(c.Record(next, HK_DATA));
        HK_TRY(c.Wait(prev, HK_DATA));
        if (s + 2 < n) {
            HK_TRY(c.Record(prev, HK_ACK));
        }
    }

    for (uint32_t i = 1; i < n; ++i) {
        HK_TRY(c.Record((rank + i) % n, HK_ACK));
    }
    HkChunkRange(count, n, next, &first, &cnt);
    HK_TRY(HkCopy(c.param, c.thread, out + first * c.unit, c.myBuf + first * c.unit, cnt * c.unit));
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t p = (rank + n - i) % n;  // prev first: its chunk (= mine) was final earliest
        HkChunkRange(count, n, (p + 1) % n, &first, &cnt);
        HK_TRY(c.Wait(p, HK_ACK));
        if (cnt != 0) {
            OP_CHECK(c.param.tag, HcommReadOnThread(c.thread, c.Ch(p), out + first * c.unit,
                                                    c.PeerBuf(p) + first * c.unit, cnt * c.unit));
        }
        HK_TRY(c.Record(p, HK_DATA));
    }
    for (uint32_t i = 1; i < n; ++i) {
        HK_TRY(c.Wait((rank + i) % n, HK_DATA));
    }
    return HCCL_SUCCESS;
}

/*
 * Two-level (hierarchical) allreduce, CANN's sequence executor shape (hicann/hccl
 * docs/zh/user_guide/coll_algo_intro/hierarchical_comm_principle.md: "Server内ReduceScatter,
 * Server间AllReduce, Server内AllGather"), level 0 and level 1 both one-shot meshes. L ranks per
 * server, S servers; I am local index li on server si. Per slice of `count` elements, cut into L
 * chunks (HkChunkRange; chunk j may be empty), the regions A (the staged input slice, L chunk
 * regions), B (my chunk reduced over my server) and C (my chunk reduced over everything) sit at
 * the same offsets in every rank's HCCL buffer:
 *  1. level 0, reduce-scatter: copy my input slice into A, ACK my server peers; B = chunk li of
 *     every server rank's input, combined in local order (my own from my input, the others read
 *     from their A after their ACK); DATA to my server peers ("done reading your A");
 *  2. level 1, allreduce: ACK my level-1 peers ("B ready"); C = B of server 0 op B of server 1 op
 *     ... (server order: the S ranks of a level-1 group compute the same bits); DATA to them;
 *  3. level 0, allgather: wait my server peers' DATA of step 1 (nobody reads A any more, and they
 *     consumed my ACK of step 1), copy C into my output chunk, ACK my server peers ("C ready"),
 *     read each peer's C into its output chunk, DATA to them; then wait their DATA and my level-1
 *     peers' DATA (nobody reads my B or C any more: clean exit, the next slice may stage again).
 * Every rank's output chunk j is one rank's C, so all ranks hold identical bits. Reductions run
 * through HkReadReduce / HkLocalReduce, so the A2/A3 staged path (int64, prod) works here too
 * (the scratch region behind C, the drain words at the end of the buffer). Slot hand-over: an
 * ACK to a peer follows the wait of that peer's DATA answering my previous ACK (step 3 after the
 * wait of step 1's DATA; the next slice after the final waits); a DATA to a peer follows the wait
 * of that peer's ACK of the same step.
 */
struct Hier {
    const Ctx &c;
    const HkHier &h;
    uint64_t cmb;  // bytes of one chunk region (A holds L of them)

    uint64_t OffA() const { return 0; }
    uint64_t OffB() const { return h.L * cmb; }
    uint64_t OffC() const { return (h.L + 1) * cmb; }

    /* dst (count elements) = the `group` ranks' src regions combined in group order; my own
     * contribution is `mine` (local memory), the peers' at `peerOff` of their HCCL buffer, each
     * read after that peer's ACK. */
    HcclResult Combine(uint32_t level, uint32_t self, uint8_t *dst, const uint8_t *mine, uint64_t peerOff,
                       uint64_t count) const
    {
        const uint32_t k = level == 0 ? h.L : h.S;
        for (uint32_t i = 0; i < k; ++i) {
            const uint32_t p = level == 0 ? h.Local(i) : h.Inter(i);
            if (i == self) {
                if (i == 0) {
                    HK_TRY(HkCopy(c.param, c.thread, dst, mine, count * c.unit));
                } else if (count != 0) {
                    HK_TRY(HkLocalReduce(c.param, c.res, c.thread, c.sync, dst, mine, count));
                }
                continue;
            }
            HK_TRY(c.Wait(p, HK_ACK));
            if (count == 0) {
                continue;
            }
            if (i == 0) {
                OP_CHECK(c.param.tag,
                         HcommReadOnThread(c.thread, c.Ch(p), dst, c.PeerBuf(p) + peerOff, count * c.unit));
            } else {
                HK_TRY(HkReadReduce(c.param, c.res, c.thread, c.Ch(p), dst, c.PeerBuf(p) + peerOff, count, c.unit,
                                    c.scratch, c.sync));
            }
        }
        return HCCL_SUCCESS;
    }

    HcclResult Slice(uint64_t off, uint64_t count) const
    {
        const uint64_t unit = c.unit;
        const uint8_t *in = c.input + off * unit;
        uint8_t *out = c.output + off * unit;
        uint64_t first = 0, cnt = 0;
        HkChunkRange(count, h.L, h.li, &first, &cnt);
        uint8_t *regB = c.myBuf + OffB();
        uint8_t *regC = c.myBuf + OffC();
        // 1. level 0: reduce-scatter into B
        if (h.L > 1) {
            HK_TRY(HkCopy(c.param, c.thread, c.myBuf + OffA(), in, count * unit));
            HK_TRY(HkHierRecord(c.param, c.res, h, 0, HK_ACK));
        }
        HK_TRY(Combine(0, h.li, regB, in + first * unit, OffA() + first * unit, cnt));
        if (h.L > 1) {
            HK_TRY(HkHierRecord(c.param, c.res, h, 0, HK_DATA));
        }
        // 2. level 1: allreduce of chunk li into C
        if (h.S > 1) {
            HK_TRY(HkHierRecord(c.param, c.res, h, 1, HK_ACK));
        }
        HK_TRY(Combine(1, h.si, regC, regB, OffB(), cnt));
        if (h.S > 1) {
            HK_TRY(HkHierRecord(c.param, c.res, h, 1, HK_DATA));
        }
        // 3. level 0: allgather of the C chunks
        HK_TRY(HkCopy(c.param, c.thread, out + first * unit, regC, cnt * unit));
        if (h.L > 1) {
            HK_TRY(HkHierWait(c.param, c.res, h, 0, HK_DATA));
            HK_TRY(HkHierRecord(c.param, c.res, h, 0, HK_ACK));
            for (uint32_t j = 0; j < h.L; ++j) {
                if (j == h.li) {
                    continue;
                }
                const uint32_t p = h.Local(j);
                uint64_t jFirst = 0, jCnt = 0;
                HkChunkRange(count, h.L, j, &jFirst, &jCnt);
                HK_TRY(c.Wait(p, HK_ACK));
                if (jCnt != 0) {
                    OP_CHECK(c.param.tag, HcommReadOnThread(c.thread, c.Ch(p), out + jFirst * unit,
                                                            c.PeerBuf(p) + OffC(), jCnt * unit));
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
};

/* HK_ALGO_HIERARCHICAL: the layout, the buffer plan (A, B, C and, for a staged reduction, the
 * scratch region: L + 3 chunk regions of at most HK_CACHE_SLICE_BYTES), then slice by slice. */
HcclResult HierRun(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t unit)
{
    HkHier h;
    HK_TRY(HkHierLayout(param, resCtx, param.hierInfo, &h));
    uint64_t bufferBytes = h.bufferBytes;
    uint8_t *myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);
    uint8_t *sync = nullptr;
    const bool staged = !HkPrimitiveReduces(param);
    if (staged) {
        if (bufferBytes <= HK_SYNC_BYTES) {
            OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                         param.tag);
            return HCCL_E_MEMORY;
        }
        bufferBytes -= HK_SYNC_BYTES;
        sync = myBuf + bufferBytes;
    }
    const uint64_t regions = h.L + 2 + (staged ? 1 : 0);
    const uint64_t cmb = HkSliceBytes(HkMin(bufferBytes / regions, HK_CACHE_SLICE_BYTES));
    const uint64_t chunkMax = cmb / unit;
    if (chunkMax == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %llu regions of the hierarchical allreduce), tag %s",
                     static_cast<unsigned long long>(bufferBytes), static_cast<unsigned long long>(regions),
                     param.tag);
        return HCCL_E_MEMORY;
    }
    const Ctx c{{param, resCtx},
                unit,
                static_cast<HcommDataType>(param.dataType),
                static_cast<HcommReduceOp>(param.reduceOp),
                resCtx.rank,
                resCtx.rankSize,
                resCtx.threads[0],
                static_cast<const uint8_t *>(param.inputPtr),
                static_cast<uint8_t *>(param.outputPtr),
                myBuf,
                bufferBytes,
                staged ? myBuf + (h.L + 2) * cmb : nullptr,
                sync};
    const Hier run{c, h, cmb};
    const uint64_t maxCount = chunkMax * h.L;
    for (uint64_t off = 0; off < param.count; off += maxCount) {
        HK_TRY(run.Slice(off, HkMin(maxCount, param.count - off)));
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
    const ThreadHandle thread = resCtx.threads[0];
    if (n == 1 || param.count == 0) {
        return HkCopy(param, thread, param.outputPtr, param.inputPtr, param.count * unit);
    }
    if (param.algo == HK_ALGO_HIERARCHICAL) {  // before the mesh checks: it needs its levels' channels only
        return HierRun(param, resCtx, unit);
    }
    uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    if (bufferBytes == 0) {
        return HCCL_E_PARA;
    }
    uint32_t algo = param.algo != HK_ALGO_AUTO ? param.algo : HkChooseAlgo(HK_COLL_ALLREDUCE, param.count * unit, n);
    // A dtype/op the Hcomm primitive cannot reduce here (A2/A3 int64, prod): one-shot with staged
    // reads, every slice in the first half of the buffer, the second half private scratch, the
    // drain words at the end (hk_coll.h). Every rank takes this branch alike (same dtype/op/product).
    uint8_t *scratch = nullptr;
    uint8_t *sync = nullptr;
    HK_TRY(HkStagedReduceCarve(param, resCtx, &bufferBytes, &sync, &scratch));
    if (sync != nullptr) {
        algo = HK_ALGO_MESH;
    }
    const Ctx c{{param, resCtx},
                unit,
                static_cast<HcommDataType>(param.dataType),
                static_cast<HcommReduceOp>(param.reduceOp),
                resCtx.rank,
                n,
                thread,
                static_cast<const uint8_t *>(param.inputPtr),
                static_cast<uint8_t *>(param.outputPtr),
                static_cast<uint8_t *>(resCtx.localBuffer.addr),
                bufferBytes,
                scratch,
                sync};

    if (algo == HK_ALGO_RING && n == 2) {
        if (HkSliceBytes(bufferBytes / 2) < unit) {
            OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                         param.tag);
            return HCCL_E_MEMORY;
        }
        return PairRun(c);
    }
    // Elements per slice: one-shot and ring keep a whole slice in the buffer; cache-sized pieces
    // (HK_CACHE_SLICE_BYTES per chunk, n chunks per ring slice; 64 MiB, 4 ranks: 3.3 -> 4.8 GB/s).
    const uint64_t pieceBytes = HK_CACHE_SLICE_BYTES * (algo == HK_ALGO_RING ? n : 1);
    const uint64_t maxCount = HkSliceBytes(HkMin(bufferBytes, pieceBytes)) / unit;
    if (maxCount == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                     param.tag);
        return HCCL_E_MEMORY;
    }
    for (uint64_t off = 0; off < param.count; off += maxCount) {
        const uint64_t count = HkMin(maxCount, param.count - off);
        if (algo == HK_ALGO_MESH) {
            HK_TRY(OneShotSlice(c, off, count));
        } else if (algo == HK_ALGO_RING) {
            HK_TRY(RingSlice(c, off, count));
        } else {
            OP_LOG_ERROR("unknown algo %u (1 = ring, 2 = mesh, 4 = hierarchical), tag %s", algo, param.tag);
            return HCCL_E_PARA;
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_allreduce
