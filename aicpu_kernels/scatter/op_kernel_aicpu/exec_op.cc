/*
 * exec_op.cc -- built-in "scatter": block r (count elements) of root's inputPtr -> rank r's
 * outputPtr (.dev/BUILTINS.md).
 *
 * Algorithm (mesh, read-based; OpParam.algo: HK_ALGO_AUTO or HK_ALGO_MESH):
 *   the root stages the blocks of all other ranks in its HCCL buffer, one region per peer, and
 *   every peer Reads its region straight into its output. When all blocks fit, one round with
 *   the regions laid out like the input (at most two staging copies) when all blocks together are
 *   at most HK_PIPELINE_BYTES; otherwise rounds of one slice per peer, double-buffered (round k+1
 *   is staged while the peers read round k).
 *
 * Notify protocol per round k, root R and each peer P (hk_coll.h "notify discipline"):
 *   R: stage round k; [k > 0: wait DATA from every P (round k-1 read)]; record ACK to every P;
 *   P: wait ACK; Read its slice into its output; record DATA to R;
 *   R finally waits the last DATA of every P ("clean exit"). The root's own block is one local
 *   copy on worker thread 1, concurrent with the staging (HkSideCopyStart/HkSideCopyJoin).
 */
#include "exec_op.h"
#include "scatter_log.h"
#include "hk_coll.h"

namespace ops_scatter {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    uint32_t unitSize = 0;
    HK_TRY(HkRootedCheck(param, resCtx, &unitSize));
    const uint64_t blockBytes = param.count * unitSize;
    const uint32_t rank = resCtx.rank;
    const uint32_t rankSize = resCtx.rankSize;
    const uint32_t root = param.root;
    const ThreadHandle thread = resCtx.threads[0];
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (rankSize == 1 || blockBytes == 0) {
        return rank == root ? HkCopy(param, thread, output, input + rank * blockBytes, blockBytes) : HCCL_SUCCESS;
    }
    const uint64_t bufferBytes = HkMeshBufferBytes(param, resCtx);
    uint64_t sliceBytes = 0;
    uint64_t halfBytes = 0;
    HK_TRY(HkStagePlanFor(param, blockBytes, bufferBytes, rankSize - 1, &sliceBytes, &halfBytes));

    if (rank == root) {
        uint8_t *stage = static_cast<uint8_t *>(resCtx.localBuffer.addr);
        bool joined = false;
        OP_CHECK(param.tag, HkSideCopyStart(param, resCtx, output, input + root * blockBytes, blockBytes, &joined));
        uint64_t k = 0;
        for (uint64_t offset = 0; offset < blockBytes; offset += sliceBytes, ++k) {
            const uint64_t len = HkMin(sliceBytes, blockBytes - offset);
            uint8_t *half = stage + (k % 2) * halfBytes;
            if (halfBytes == 0) {  // one round: regions = the input without the root's block
                OP_CHECK(param.tag, HkCopy(param, thread, half, input, root * blockBytes));
                OP_CHECK(param.tag, HkCopy(param, thread, half + root * blockBytes, input + (root + 1) * blockBytes,
                                           (rankSize - 1 - root) * blockBytes));
            } else {
                for (uint32_t p = 0; p < rankSize; ++p) {
                    if (p != root) {
                        const uint32_t j = p < root ? p : p - 1;
                        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, half + j * sliceBytes,
                                                                   input + p * blockBytes + offset, len));
                    }
                }
            }
            if (k != 0) {
                HK_TRY(HkWaitAll(param, resCtx, thread, HK_DATA));  // every peer is done with round k-1
            }
            HK_TRY(HkRecordAll(param, resCtx, thread, HK_ACK));  // round k is staged
        }
        HK_TRY(HkWaitAll(param, resCtx, thread, HK_DATA));
        return HkSideCopyJoin(param, resCtx, joined);
    }

    // Every peer: wait ACK, Read its slice of round k from its region of the root's buffer, record
    // DATA (HkStagedRead).
    const ChannelInfo &ch = resCtx.channels[root];
    const uint32_t j = rank < root ? rank : rank - 1;
    const uint8_t *region = static_cast<const uint8_t *>(ch.remoteBuffer.addr) + j * sliceBytes;
    return HkStagedRead(param, thread, ch.handle, region, output, blockBytes, sliceBytes, halfBytes);
}

}  // namespace ops_scatter
