/*
 * aclnn_hk_scatter.h -- hcomm-kit's built-in collective "HkScatter" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclScatter does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkScatterGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkScatter(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Dtypes and reduce ops: those HcclScatter takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_SCATTER_H_
#define ACLNN_HK_SCATTER_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: read on the root only (ranks blocks of out's size); may be NULL on the other ranks
 * root: the sending rank
 * group: the communicator's name (HcclGetCommName)
 * out: block <rank> of the root's x
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkScatterGetWorkspaceSize(
    const aclTensor *x,
    int64_t root,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkScatter(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_SCATTER_H_ */
