/*
 * aclnn_hk_reduce_scatter_v.h -- hcomm-kit's built-in collective "HkReduceScatterV" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclReduceScatterV does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkReduceScatterVGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkReduceScatterV(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Counts and displacements are aclIntArrays with one entry per rank, as CANN's aclnn communication
 * operators take them (aclnnAlltoAllvGroupedMatMul: const aclIntArray *sendCounts).
 * Dtypes: those HcclReduceScatterV takes on the product (HCOMM_KIT_SOC). Tensors: any view (strides,
 * offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs again
 * until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_REDUCE_SCATTER_V_H_
#define ACLNN_HK_REDUCE_SCATTER_V_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: every rank's input: block j (sendCounts[j] elements at sendDispls[j]) is reduced into rank j's out
 * sendCounts: elements of every rank's block, one entry per rank (the same on every rank)
 * sendDisplsOptional: where block j starts in x (elements); NULL: packed, in rank order
 * reduceOp: HcclReduceOp (sum 0, prod 1, max 2, min 3)
 * group: the communicator's name (HcclGetCommName)
 * out: this rank's reduced block (sendCounts[rank] elements)
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkReduceScatterVGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *sendCounts,
    const aclIntArray *sendDisplsOptional,
    int64_t reduceOp,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkReduceScatterV(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_REDUCE_SCATTER_V_H_ */
