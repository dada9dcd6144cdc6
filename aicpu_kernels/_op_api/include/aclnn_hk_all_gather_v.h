/*
 * aclnn_hk_all_gather_v.h -- hcomm-kit's built-in collective "HkAllGatherV" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclAllGatherV does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkAllGatherVGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkAllGatherV(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Counts and displacements are aclIntArrays with one entry per rank, as CANN's aclnn communication
 * operators take them (aclnnAlltoAllvGroupedMatMul: const aclIntArray *sendCounts), not device
 * buffers: phase one checks them against the tensors and the executor keeps a copy.
 * Dtypes: those HcclAllGatherV takes on the product (HCOMM_KIT_SOC). Tensors: any view (strides,
 * offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs again
 * until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_ALL_GATHER_V_H_
#define ACLNN_HK_ALL_GATHER_V_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: this rank's block (recvCounts[rank] elements)
 * recvCounts: elements of every rank's block, one entry per rank (the same on every rank)
 * recvDisplsOptional: where block j starts in out (elements); NULL: packed, in rank order
 * group: the communicator's name (HcclGetCommName)
 * out: every rank's block at its displacement; elements between the blocks are left alone
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllGatherVGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *recvCounts,
    const aclIntArray *recvDisplsOptional,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllGatherV(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_ALL_GATHER_V_H_ */
