/*
 * exec_op.cc -- built-in "gather": rank r's inputPtr (count elements) -> block r of root's
 * outputPtr (count * rankSize elements) (.dev/BUILTINS.md). Non-roots' outputPtr is not touched.
 *
 * Algorithm (mesh, read-based; OpParam.algo: HK_ALGO_AUTO or HK_ALGO_MESH):
 *   every non-root stages its block slice by slice in its own HCCL buffer; the root Reads each
 *   peer's slice straight into that peer's block of the output, peers in rank order. Blocks
 *   above HK_PIPELINE_BYTES are pipelined and double-buffered on the peers (slice k+1 is staged
 *   while the root reads slice k).
 *
 * Notify protocol per slice k, peer P and root R (hk_coll.h "notify discipline"):
 *   P: stage slice k; [k > 0: wait DATA (slice k-1 read)]; record ACK to R;
 *   R: for each peer: wait its ACK, Read into the output, record DATA to it;
 *   P finally waits the last DATA, so R never reads P's buffer after P is done ("clean exit").
 * The root's own block is one local copy on worker thread 1, concurrent with the reads
 * (HkSideCopyStart/HkSideCopyJoin).
 */
#include "exec_op.h"
#include "gather_log.h"
#include "hk_coll.h"

namespace ops_gather {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    uint32_t unitSize = 0;
    HK_TRY(HkRootedCheck(param, resCtx, &unitSize));
    const uint64_t blockBytes = param.count * unitSize;
    const uint32_t rank = resCtx.rank;
    const uint32_t rankSize = resCtx.rankSize;
    const uint32_t root = param.root;
    const uint32_t timeout = param.notifyTimeout;
    const ThreadHandle thread = resCtx.threads[0];
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (rankSize == 1 || blockBytes == 0) {
        return rank == root ? HkCopy(param, thread, output + rank * blockBytes, input, blockBytes) : HCCL_SUCCESS;
    }
    const uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    uint64_t sliceBytes = 0;
    uint64_t halfBytes = 0;
    HK_TRY(HkStagePlanFor(param, blockBytes, bufferBytes, 1, &sliceBytes, &halfBytes));

    if (rank != root) {  // stage slice k, [wait DATA k-1], record ACK; finally wait DATA (HkStagedWrite)
        return HkStagedWrite(param, thread, resCtx.channels[root].handle,
                             static_cast<uint8_t *>(resCtx.localBuffer.addr), input, blockBytes, sliceBytes,
                             halfBytes);
    }

    bool joined = false;
    OP_CHECK(param.tag, HkSideCopyStart(param, resCtx, output + root * blockBytes, input, blockBytes, &joined));
    uint64_t k = 0;
    for (uint64_t offset = 0; offset < blockBytes; offset += sliceBytes, ++k) {
        const uint64_t len = HkMin(sliceBytes, blockBytes - offset);
        for (uint32_t p = 0; p < rankSize; ++p) {
            if (p == root) {
                continue;
            }
            const ChannelInfo &ch = resCtx.channels[p];
            const uint8_t *src = static_cast<const uint8_t *>(ch.remoteBuffer.addr) + (k % 2) * halfBytes;
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch.handle, HK_ACK, timeout));
            OP_CHECK(param.tag, HcommReadOnThread(thread, ch.handle, output + p * blockBytes + offset, src, len));
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch.handle, HK_DATA));
        }
    }
    return HkSideCopyJoin(param, resCtx, joined);
}

}  // namespace ops_gather
