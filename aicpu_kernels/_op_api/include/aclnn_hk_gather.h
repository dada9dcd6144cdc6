/*
 * aclnn_hk_gather.h -- hcomm-kit's built-in collective "HkGather" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclAlltoAllV with every block toward the root).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkGatherGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkGather(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * CANN has no HcclGather: the operator runs as HcclAlltoAllV with every rank's block toward the root.
 * Dtypes: those HcclAlltoAllV takes on the product (HCOMM_KIT_SOC). Tensors: any view (strides,
 * offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs again
 * until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_GATHER_H_
#define ACLNN_HK_GATHER_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: this rank's block, every rank the same shape
 * root: the rank that receives
 * group: the communicator's name (HcclGetCommName)
 * out: on the root: every rank's x in rank order (ranks x the elements of x); ignored (may be NULL) elsewhere
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkGatherGetWorkspaceSize(
    const aclTensor *x,
    int64_t root,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkGather(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_GATHER_H_ */
