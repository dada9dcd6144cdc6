/*
 * exec_op.cc -- built-in "barrier": no rank leaves before every rank has entered
 * (.dev/BUILTINS.md; count, buffers, dtype and root are ignored).
 *
 * Algorithm (mesh, two phases; OpParam.algo: HK_ALGO_AUTO or HK_ALGO_MESH):
 *   phase 1: record ACK to every peer, wait the ACK of every peer (everyone has arrived);
 *   phase 2: record DATA to every peer, wait the DATA of every peer.
 * Phase 1 alone is a barrier, phase 2 makes it safe to call back to back with binary notify
 * slots (hk_coll.h "notify discipline"): a peer records DATA only after it consumed our ACK, so
 * when we leave, our ACKs are consumed; our DATA may still be pending, but the next DATA we
 * record to that peer follows its ACK of the next call, i.e. its wait of this one.
 */
#include "exec_op.h"
#include "barrier_log.h"
#include "hk_coll.h"

namespace ops_barrier {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    OP_CHECK(param.tag, HkAlgoCheck(param, 1u << HK_ALGO_MESH));
    const uint32_t rank = resCtx.rank;
    const uint32_t rankSize = resCtx.rankSize;
    const ThreadHandle thread = resCtx.threads[0];
    for (uint32_t p = 0; p < rankSize; ++p) {
        if (p != rank && HkChannel(param, resCtx, p) == 0) {
            return HCCL_E_PARA;
        }
    }
    const uint32_t slots[2] = {HK_ACK, HK_DATA};
    for (uint32_t phase = 0; phase < 2; ++phase) {
        for (uint32_t i = 1; i < rankSize; ++i) {
            const uint32_t p = (rank + i) % rankSize;
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, resCtx.channels[p].handle, slots[phase]));
        }
        for (uint32_t i = 1; i < rankSize; ++i) {
            const uint32_t p = (rank + rankSize - i) % rankSize;
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, resCtx.channels[p].handle, slots[phase],
                                                               param.notifyTimeout));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_barrier
