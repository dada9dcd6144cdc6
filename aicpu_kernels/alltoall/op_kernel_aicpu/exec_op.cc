/*
 * exec_op.cc -- built-in "alltoall": input block j (count elements) goes to block `rank` of rank
 * j's output; input and output hold count * rankSize elements and must not overlap.
 *
 * The algorithm (AicpuAllToAllSoleMesh; OpParam.algo: HK_ALGO_MESH or 0) lives in
 * inc/hk_alltoall.h, shared with alltoallv; see there for the rounds, threads and the protocol.
 */
#include "exec_op.h"
#include "alltoall_log.h"
#include "hk_coll.h"
#include "hk_alltoall.h"

namespace ops_alltoall {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    const uint32_t unitSize = HkUnitSize(param);
    if (unitSize == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t n = resCtx.rankSize;
    if (n == 0 || n > ALLTOALL_MAX_CHANNELS || resCtx.rank >= n) {
        OP_LOG_ERROR("bad rank %u / rankSize %u (at most %u ranks), tag %s", resCtx.rank, n, ALLTOALL_MAX_CHANNELS,
                     param.tag);
        return HCCL_E_PARA;
    }
    if (param.count == 0) {
        return HCCL_SUCCESS;
    }
    if (param.count > UINT64_MAX / unitSize / n) {
        OP_LOG_ERROR("count %llu x %u ranks overflows, tag %s", static_cast<unsigned long long>(param.count), n,
                     param.tag);
        return HCCL_E_PARA;
    }
    const uint64_t blockBytes = param.count * unitSize;
    const uint64_t totalBytes = blockBytes * n;
    const uintptr_t in = reinterpret_cast<uintptr_t>(param.inputPtr);
    const uintptr_t out = reinterpret_cast<uintptr_t>(param.outputPtr);
    if (in == 0 || out == 0) {
        OP_LOG_ERROR("inputPtr/outputPtr is NULL, tag %s", param.tag);
        return HCCL_E_PTR;
    }
    if (in < out + totalBytes && out < in + totalBytes) {
        OP_LOG_ERROR("input and output overlap (in-place alltoall is not supported), tag %s", param.tag);
        return HCCL_E_PARA;
    }

    HkA2aBlock blocks[ALLTOALL_MAX_CHANNELS];
    for (uint32_t p = 0; p < n; ++p) {
        blocks[p].sendOffset = p * blockBytes;
        blocks[p].sendBytes = blockBytes;
        blocks[p].recvOffset = p * blockBytes;
        blocks[p].recvBytes = blockBytes;
    }
    return HkAlltoallRun(param, resCtx, param.algo, blocks, "AicpuAllToAllSoleMesh");
}

}  // namespace ops_alltoall
