/*
 * hk_alltoall.h -- the all-to-all engine shared by the built-ins alltoall and alltoallv.
 *
 * Linked as inc/hk_alltoall.h by both operators and included from exec_op.cc after hk_coll.h.
 * The caller describes, per peer, the bytes it sends (input + sendOffset) and receives (output +
 * recvOffset); the engine moves them with one of two algorithms:
 *
 *  HK_ALGO_PAIRWISE: the main thread runs steps s = 1..n-1, sending to dst = rank + s and
 *      receiving from src = rank - s (no incast: each rank has one reader and one source per
 *      step); worker 1 copies the own block meanwhile. The whole HCCL buffer stages the block
 *      for dst.
 *  HK_ALGO_MESH: one worker thread per peer (fan-out/fan-in of hk_coll.h), all peers at once; main
 *      copies the own block. The HCCL buffer is cut into n-1 regions; region (p - rank - 1) mod n
 *      stages the block for p.
 *  HK_ALGO_AUTO: HkAlltoallAutoAlgo (must be the same choice on every rank).
 *
 * Both move a block the same way (HkA2aExchange): the sender stages a slice in its HCCL buffer and
 * records HK_ACK ("slice staged"); the receiver waits HK_ACK, Reads the slice straight into its
 * output and records HK_DATA ("read, the region is free"); the sender waits HK_DATA before it
 * records the next HK_ACK and before it exits (clean exit, notify discipline of hk_coll.h: ACK is
 * the initiative, consumed before the recorder exits; DATA the response). A block larger than
 * its region or HK_PIPE_MIN_BYTES is pipelined (HkPipePlan of hk_coll.h): slice t+1 is staged into
 * the other half of the region while the receiver still reads slice t. Slice sizes depend only on
 * the block size and the job-wide buffer size, so both ends of a pair cut the same slices. The
 * own block is a local copy.
 */
#ifndef HCOMM_KIT_AICPU_KERNELS_HK_ALLTOALL_H
#define HCOMM_KIT_AICPU_KERNELS_HK_ALLTOALL_H

/* One peer's share of an all-to-all, in bytes. */
typedef struct {
    uint64_t sendOffset; /* from inputPtr */
    uint64_t sendBytes;
    uint64_t recvOffset; /* into outputPtr */
    uint64_t recvBytes;
} HkA2aBlock;

/* On `thread`: send `sendBytes` from sendPtr to the peer of `toDst` (staged in my region `stage`)
 * and receive `recvBytes` into recvPtr from the peer of `fromSrc` (read from its region for me,
 * `srcStage`). toDst may equal fromSrc. Both peers run the mirror image of this loop. */
static inline HcclResult HkA2aExchange(const OpParam &param, ThreadHandle thread, uint64_t regionBytes,
                                       ChannelHandle toDst, uint8_t *stage, const uint8_t *sendPtr,
                                       uint64_t sendBytes, ChannelHandle fromSrc, const uint8_t *srcStage,
                                       uint8_t *recvPtr, uint64_t recvBytes)
{
    const uint32_t timeout = param.notifyTimeout;
    const HkPipe s = HkPipePlan(sendBytes, regionBytes);
    const HkPipe r = HkPipePlan(recvBytes, regionBytes);
    const uint64_t rounds = s.rounds > r.rounds ? s.rounds : r.rounds;

    if (s.rounds != 0) {
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage, sendPtr, HkMin(s.slice, sendBytes)));
        OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, toDst, HK_ACK));
    }
    for (uint64_t t = 0; t < rounds; ++t) {
        if (t + 1 < s.rounds) {  // stage the next slice into the other half while dst reads this one
            const uint64_t off = (t + 1) * s.slice;
            OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage + ((t + 1) % 2) * s.half, sendPtr + off,
                                                       HkMin(s.slice, sendBytes - off)));
        }
        if (t < r.rounds) {
            const uint64_t off = t * r.slice;
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, fromSrc, HK_ACK, timeout));
            OP_CHECK(param.tag, HcommReadOnThread(thread, fromSrc, recvPtr + off, srcStage + (t % 2) * r.half,
                                                  HkMin(r.slice, recvBytes - off)));
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, fromSrc, HK_DATA));
        }
        if (t < s.rounds) {
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, toDst, HK_DATA, timeout));
            if (t + 1 < s.rounds) {
                OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, toDst, HK_ACK));
            }
        }
    }
    return HCCL_SUCCESS;
}

/* Run the all-to-all described by blocks[0..rankSize) (own block: blocks[rank], sendBytes must
 * equal recvBytes). `algo` (and so the staging layout) must be the same on every rank.
 * Validates resources before enqueuing anything. */
static inline HcclResult HkAlltoallRun(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t algo,
                                       const HkA2aBlock *blocks, uint64_t uniformBlockBytes)
{
    const uint32_t rank = resCtx.rank;
    const uint32_t n = resCtx.rankSize;
    const ThreadHandle mainThread = resCtx.threads[0];
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);
    const HkA2aBlock &own = blocks[rank];

    uint64_t remoteBytes = 0;
    for (uint32_t p = 0; p < n; ++p) {
        if (p != rank) {
            remoteBytes |= blocks[p].sendBytes | blocks[p].recvBytes;
        }
    }
    if (remoteBytes == 0) {  // nothing crosses ranks (1 rank, count 0, or only the own block)
        return HkCopy(param, mainThread, output + own.recvOffset, input + own.sendOffset, own.recvBytes);
    }
    (void)uniformBlockBytes;
    if (algo != HK_ALGO_AUTO && algo != HK_ALGO_MESH) {
        OP_LOG_ERROR("unknown algo %u (0 auto, %u mesh), tag %s", algo, HK_ALGO_MESH, param.tag);
        return HCCL_E_PARA;
    }
    if (resCtx.threadNum < n) {
        OP_LOG_ERROR("mesh needs %u threads (main + one per peer), got %u, tag %s", n, resCtx.threadNum, param.tag);
        return HCCL_E_PARA;
    }
    const uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);  // logs a missing channel
    if (bufferBytes == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t regions = n - 1;
    const uint64_t regionBytes = HkSliceBytes(bufferBytes / regions);
    if (regionBytes < 2 * HK_SLICE_ALIGN_BYTES) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u staging regions), tag %s",
                     static_cast<unsigned long long>(bufferBytes), regions, param.tag);
        return HCCL_E_MEMORY;
    }
    uint8_t *myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);

    // Mesh: worker i exchanges with peer (rank + i) % n; main copies the own block meanwhile.
    const uint32_t k = n - 1;
    OP_CHECK(param.tag, HkFanOut(param, resCtx, k));
    OP_CHECK(param.tag, HkCopy(param, mainThread, output + own.recvOffset, input + own.sendOffset, own.recvBytes));
    for (uint32_t i = 1; i <= k; ++i) {
        const ThreadHandle worker = resCtx.threads[i];
        const uint32_t p = (rank + i) % n;
        const ChannelInfo &ch = resCtx.channels[p];
        uint8_t *stage = myBuf + static_cast<uint64_t>((p + n - rank - 1) % n) * regionBytes;
        const uint8_t *peerStage =
            static_cast<const uint8_t *>(ch.remoteBuffer.addr) + static_cast<uint64_t>((rank + n - p - 1) % n) * regionBytes;
        OP_CHECK(param.tag, HkWorkerStart(param, resCtx, i));
        OP_CHECK(param.tag, HkA2aExchange(param, worker, regionBytes, ch.handle, stage, input + blocks[p].sendOffset,
                                          blocks[p].sendBytes, ch.handle, peerStage, output + blocks[p].recvOffset,
                                          blocks[p].recvBytes));
    }
    for (uint32_t i = k; i >= 1; --i) {
        OP_CHECK(param.tag, HkWorkerFinish(param, resCtx, i, k));
    }
    return HkFanIn(param, resCtx, k);
}

#endif /* HCOMM_KIT_AICPU_KERNELS_HK_ALLTOALL_H */
