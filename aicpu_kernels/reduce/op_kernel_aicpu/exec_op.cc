/*
 * exec_op.cc -- built-in "reduce" (op name hk_reduce: "reduce" clashes with a header symbol):
 * root's outputPtr = in_0 op in_1 op ... op in_{n-1}, combined in rank order (.dev/BUILTINS.md).
 * Non-roots' outputPtr is not touched.
 *
 * Algorithm (mesh, read-based, deterministic; OpParam.algo: HK_ALGO_AUTO or HK_ALGO_MESH):
 *   every non-root stages its input slice by slice in its own HCCL buffer; the root walks the
 *   ranks in order: rank 0's slice is Read (or copied, root 0) into the output, every later
 *   rank's slice is ReadReduce'd (or LocalReduce'd, the root's own) onto it. Messages above
 *   HK_PIPELINE_BYTES are pipelined and double-buffered on the non-roots (slice k+1 is staged
 *   while the root reads slice k).
 *
 * Notify protocol per slice k, non-root P and root R (hk_coll.h "notify discipline"):
 *   P: stage slice k; [k > 0: wait DATA (slice k-1 read)]; record ACK to R;
 *   R: for each rank in order: wait its ACK, Read/ReadReduce from its buffer, record DATA to it;
 *   P finally waits the last DATA, so R never reads P's buffer after P is done ("clean exit").
 * In place (output == input) with root != 0 the root first copies its own slice to its HCCL
 * buffer (nobody else uses the root's buffer), because rank 0's slice lands on it first.
 */
#include "exec_op.h"
#include "hk_reduce_log.h"
#include "hk_coll.h"

namespace ops_hk_reduce {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    uint32_t unitSize = 0;
    HK_TRY(HkRootedCheck(param, resCtx, &unitSize));
    const uint64_t totalBytes = param.count * unitSize;
    const uint32_t rank = resCtx.rank;
    const uint32_t rankSize = resCtx.rankSize;
    const uint32_t root = param.root;
    const uint32_t timeout = param.notifyTimeout;
    const ThreadHandle thread = resCtx.threads[0];
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (rankSize == 1 || totalBytes == 0) {
        return rank == root ? HkCopy(param, thread, output, input, totalBytes) : HCCL_SUCCESS;
    }
    uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    uint8_t *myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);
    // A dtype/op the Hcomm primitive cannot reduce here (A2/A3 int64, prod): every rank stages in
    // the first half of its buffer; the root reads into the second half (private) and combines in
    // its own code, the drain words at the end (hk_coll.h).
    uint8_t *scratch = nullptr;
    uint8_t *sync = nullptr;
    HK_TRY(HkStagedReduceCarve(param, resCtx, &bufferBytes, &sync, &scratch));
    uint64_t sliceBytes = 0;
    uint64_t halfBytes = 0;
    HK_TRY(HkStagePlanFor(param, totalBytes, bufferBytes, 1, &sliceBytes, &halfBytes));

    if (rank != root) {  // stage slice k, [wait DATA k-1], record ACK; finally wait DATA (HkStagedWrite)
        return HkStagedWrite(param, thread, resCtx.channels[root].handle, myBuf, input, totalBytes, sliceBytes,
                             halfBytes);
    }

    const bool stageOwn = (output == input) && root != 0;
    uint64_t k = 0;
    for (uint64_t offset = 0; offset < totalBytes; offset += sliceBytes, ++k) {
        const uint64_t len = HkMin(sliceBytes, totalBytes - offset);
        const uint64_t count = len / unitSize;
        uint8_t *dst = output + offset;
        const uint8_t *own = input + offset;
        if (stageOwn) {
            OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, myBuf, own, len));
            own = myBuf;
        }
        for (uint32_t r = 0; r < rankSize; ++r) {
            if (r == root) {
                if (r == 0) {
                    OP_CHECK(param.tag, HkCopy(param, thread, dst, own, len));
                } else {
                    OP_CHECK(param.tag, HkLocalReduce(param, resCtx, thread, sync, dst, own, count));
                }
                continue;
            }
            const ChannelInfo &ch = resCtx.channels[r];
            const uint8_t *src = static_cast<const uint8_t *>(ch.remoteBuffer.addr) + (k % 2) * halfBytes;
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch.handle, HK_ACK, timeout));
            if (r == 0) {
                OP_CHECK(param.tag, HcommReadOnThread(thread, ch.handle, dst, src, len));
            } else {
                OP_CHECK(param.tag, HkReadReduce(param, resCtx, thread, ch.handle, dst, src, count, unitSize, scratch,
                                                 sync));
            }
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch.handle, HK_DATA));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_hk_reduce
