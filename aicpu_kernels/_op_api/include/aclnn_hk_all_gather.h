/*
 * aclnn_hk_all_gather.h -- hcomm-kit's built-in collective "HkAllGather" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclAllGather does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkAllGatherGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkAllGather(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Dtypes and reduce ops: those HcclAllGather takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_ALL_GATHER_H_
#define ACLNN_HK_ALL_GATHER_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: this rank's block
 * group: the communicator's name (HcclGetCommName)
 * out: every rank's x in rank order: ranks x the elements of x
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllGatherGetWorkspaceSize(
    const aclTensor *x,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllGather(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_ALL_GATHER_H_ */
