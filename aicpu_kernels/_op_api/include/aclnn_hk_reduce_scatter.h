/*
 * aclnn_hk_reduce_scatter.h -- hcomm-kit's built-in collective "HkReduceScatter" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclReduceScatter does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkReduceScatterGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkReduceScatter(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Dtypes and reduce ops: those HcclReduceScatter takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_REDUCE_SCATTER_H_
#define ACLNN_HK_REDUCE_SCATTER_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: ranks blocks of out's size
 * reduceOp: HcclReduceOp (sum 0, prod 1, max 2, min 3)
 * group: the communicator's name (HcclGetCommName)
 * out: block <rank> of the element-wise reduction: the elements of x / ranks
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkReduceScatterGetWorkspaceSize(
    const aclTensor *x,
    int64_t reduceOp,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkReduceScatter(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_REDUCE_SCATTER_H_ */
