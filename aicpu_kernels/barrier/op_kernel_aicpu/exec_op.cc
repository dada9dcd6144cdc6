/*
 * exec_op.cc -- built-in "barrier": no rank leaves before every rank has entered
 * (count, buffers, dtype and root are ignored).
 *
 * AicpuBarrierSoleNHR (CANN's InsTempBarrierNhrAicpu; OpParam.algo: HK_ALGO_AUTO or HK_ALGO_NHR):
 * ceil(log2 n) steps on the main thread, step s an empty push exchange (hk_coll.h HkPush: ACK to
 * the rank 2^(S-1-s) behind, wait the ACK of the one as far ahead, DATA to it, wait the DATA of the
 * one behind) in the pattern of the NHR all-gather, so every rank hears, through the steps, from
 * every other one before it leaves. The exchanges keep hk_coll.h's notify discipline, so barriers
 * and the other built-ins may follow each other at once.
 */
#include "exec_op.h"
#include "barrier_log.h"
#include "hk_coll.h"

namespace ops_barrier {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    OP_CHECK(param.tag, HkAlgoCheck(param, 1u << HK_ALGO_NHR));
    const uint32_t n = resCtx.rankSize;
    const uint32_t me = resCtx.rank;
    if (n == 1) {
        return HCCL_SUCCESS;
    }
    HkCall c{param, resCtx, "AicpuBarrierSoleNHR", 0, false, nullptr, 0, nullptr};
    c.unit = 1;
    const uint32_t steps = HkNhrSteps(n);
    for (uint32_t s = 0; s < steps; ++s) {
        const uint32_t d = 1u << s;
        HK_TRY(HkCallPeer(&c, (me + d) % n));
        HK_TRY(HkCallPeer(&c, (me + n - d) % n));
    }
    for (uint32_t s = 0; s < steps; ++s) {
        const uint32_t d = 1u << (steps - 1 - s);
        HK_TRY(HkPush(c, resCtx.threads[0], (me + d) % n, (me + n - d) % n, nullptr, 0, HK_WRITE));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_barrier
