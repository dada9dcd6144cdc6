/*
 * exec_op.cc -- built-in "broadcast": root's inputPtr -> every rank's outputPtr (.dev/BUILTINS.md).
 *
 * Algorithm (mesh, read-based; OpParam.algo: HK_ALGO_AUTO or HK_ALGO_MESH):
 *   the root stages the message slice by slice in its HCCL buffer and every other rank Reads each
 *   slice straight from there into its output, so a byte crosses memory once on the root side
 *   (staging) and once per reader. Messages above HK_PIPELINE_BYTES are pipelined and
 *   double-buffered: the root stages slice k+1 into one half of its buffer while the readers
 *   read slice k from the other half.
 *
 * Notify protocol per slice k, root R and each reader P (hk_coll.h "notify discipline"):
 *   R: stage slice k; [k > 0: wait DATA from every P (slice k-1 read)]; record ACK to every P;
 *   P: wait ACK; Read slice k into its output; record DATA to R;
 *   R finally waits the last DATA of every P, so no reader touches R's buffer after R is done
 *   ("clean exit"); every ACK is consumed before R exits, P's last DATA may be pending.
 * The root's own output is filled by one local copy on worker thread 1 (skipped when output ==
 * input), concurrent with the staging (hk_coll.h HkSideCopyStart/HkSideCopyJoin).
 */
#include "exec_op.h"
#include "broadcast_log.h"
#include "hk_coll.h"

namespace ops_broadcast {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    uint32_t unitSize = 0;
    HK_TRY(HkRootedCheck(param, resCtx, &unitSize));
    const uint64_t totalBytes = param.count * unitSize;
    const uint32_t rank = resCtx.rank;
    const uint32_t root = param.root;
    const ThreadHandle thread = resCtx.threads[0];
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (resCtx.rankSize == 1 || totalBytes == 0) {
        return rank == root ? HkCopy(param, thread, output, input, totalBytes) : HCCL_SUCCESS;
    }
    const uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    uint64_t sliceBytes = 0;
    uint64_t halfBytes = 0;
    HK_TRY(HkStagePlanFor(param, totalBytes, bufferBytes, 1, &sliceBytes, &halfBytes));

    if (rank == root) {
        uint8_t *stage = static_cast<uint8_t *>(resCtx.localBuffer.addr);
        bool joined = false;
        OP_CHECK(param.tag, HkSideCopyStart(param, resCtx, output, input, totalBytes, &joined));
        uint64_t k = 0;
        for (uint64_t offset = 0; offset < totalBytes; offset += sliceBytes, ++k) {
            const uint64_t len = HkMin(sliceBytes, totalBytes - offset);
            OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage + (k % 2) * halfBytes, input + offset, len));
            if (k != 0) {
                HK_TRY(HkWaitAll(param, resCtx, thread, HK_DATA));  // every reader is done with slice k-1
            }
            HK_TRY(HkRecordAll(param, resCtx, thread, HK_ACK));  // slice k is staged
        }
        HK_TRY(HkWaitAll(param, resCtx, thread, HK_DATA));
        return HkSideCopyJoin(param, resCtx, joined);
    }

    // Every other rank: wait ACK, Read slice k from the root's buffer, record DATA (HkStagedRead).
    const ChannelInfo &ch = resCtx.channels[root];
    return HkStagedRead(param, thread, ch.handle, static_cast<const uint8_t *>(ch.remoteBuffer.addr), output,
                        totalBytes, sliceBytes, halfBytes);
}

}  // namespace ops_broadcast
