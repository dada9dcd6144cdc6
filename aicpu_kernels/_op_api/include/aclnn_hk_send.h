/*
 * aclnn_hk_send.h -- hcomm-kit's built-in collective "HkSend" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclSend does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkSendGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkSend(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Only the two ranks make the call (the peer calls aclnnHkRecv).
 * Dtypes and reduce ops: those HcclSend takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_SEND_H_
#define ACLNN_HK_SEND_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: the data sent
 * dstRank: the receiving rank (which calls aclnnHkRecv with srcRank = this rank)
 * group: the communicator's name (HcclGetCommName)
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkSendGetWorkspaceSize(
    const aclTensor *x,
    int64_t dstRank,
    const char *group,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkSend(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_SEND_H_ */
