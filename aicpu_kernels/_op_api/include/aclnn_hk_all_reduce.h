/*
 * aclnn_hk_all_reduce.h -- hcomm-kit's built-in collective "HkAllReduce" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclAllReduce does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkAllReduceGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkAllReduce(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * Dtypes and reduce ops: those HcclAllReduce takes on the product (HCOMM_KIT_SOC). Tensors: any view
 * (strides, offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs
 * again until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_ALL_REDUCE_H_
#define ACLNN_HK_ALL_REDUCE_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: the input, every rank the same shape
 * reduceOp: HcclReduceOp (sum 0, prod 1, max 2, min 3)
 * group: the communicator's name (HcclGetCommName)
 * out: the element-wise reduction over the ranks, as many elements as x (may be x)
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllReduceGetWorkspaceSize(
    const aclTensor *x,
    int64_t reduceOp,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllReduce(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_ALL_REDUCE_H_ */
