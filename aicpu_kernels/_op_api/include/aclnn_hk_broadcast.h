/*
 * aclnn_hk_broadcast.h -- hcomm-kit's built-in collective "HkBroadcast" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclBroadcast does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkBroadcastGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkBroadcast(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Dtypes and reduce ops: those HcclBroadcast takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_BROADCAST_H_
#define ACLNN_HK_BROADCAST_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * selfRef: in place: the root's is sent, every other rank's is overwritten
 * root: the sending rank
 * group: the communicator's name (HcclGetCommName)
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkBroadcastGetWorkspaceSize(
    aclTensor *selfRef,
    int64_t root,
    const char *group,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkBroadcast(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_BROADCAST_H_ */
