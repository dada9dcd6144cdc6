/*
 * aclnn_hk_barrier.h -- hcomm-kit's built-in collective "HkBarrier" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclBarrier does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkBarrierGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkBarrier(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * The stream's later work starts when every rank of the group has reached the barrier.
 * A repeatable executor (aclSetAclOpExecutorRepeatable) runs again until
 * aclDestroyAclOpExecutor. The workspace is always 0 bytes.
 */
#ifndef ACLNN_HK_BARRIER_H_
#define ACLNN_HK_BARRIER_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * group: the communicator's name (HcclGetCommName)
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkBarrierGetWorkspaceSize(
    const char *group,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkBarrier(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_BARRIER_H_ */
