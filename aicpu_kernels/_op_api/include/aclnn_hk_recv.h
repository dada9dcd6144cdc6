/*
 * aclnn_hk_recv.h -- hcomm-kit's built-in collective "HkRecv" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclRecv does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkRecvGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkRecv(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Only the two ranks make the call (the peer calls aclnnHkSend).
 * Dtypes and reduce ops: those HcclRecv takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_RECV_H_
#define ACLNN_HK_RECV_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * srcRank: the sending rank (which calls aclnnHkSend with dstRank = this rank)
 * group: the communicator's name (HcclGetCommName)
 * out: receives what srcRank sends (as many elements)
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkRecvGetWorkspaceSize(
    int64_t srcRank,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkRecv(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_RECV_H_ */
