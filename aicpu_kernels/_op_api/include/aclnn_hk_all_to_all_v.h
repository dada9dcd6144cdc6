/*
 * aclnn_hk_all_to_all_v.h -- hcomm-kit's built-in collective "HkAllToAllV" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclAlltoAllV does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkAllToAllVGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkAllToAllV(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Counts and displacements are aclIntArrays with one entry per rank, as CANN's aclnn communication
 * operators take them (aclnnAlltoAllvGroupedMatMul: const aclIntArray *sendCounts, *recvCounts).
 * Dtypes: those HcclAlltoAllV takes on the product (HCOMM_KIT_SOC). Tensors: any view (strides,
 * offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs again
 * until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_ALL_TO_ALL_V_H_
#define ACLNN_HK_ALL_TO_ALL_V_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: the blocks sent: sendCounts[j] elements at sendDispls[j] go to rank j
 * sendCounts: elements sent to every rank, one entry per rank
 * sendDisplsOptional: where block j starts in x (elements); NULL: packed, in rank order
 * recvCounts: elements received from every rank, one entry per rank
 * recvDisplsOptional: where the block of rank j lands in out (elements); NULL: packed
 * group: the communicator's name (HcclGetCommName)
 * out: the blocks received; elements between them are left alone
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllToAllVGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *sendCounts,
    const aclIntArray *sendDisplsOptional,
    const aclIntArray *recvCounts,
    const aclIntArray *recvDisplsOptional,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllToAllV(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_ALL_TO_ALL_V_H_ */
