/*
 * aclnn_hk_all_to_all_vc.h -- hcomm-kit's built-in collective "HkAllToAllVC" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclAlltoAllVC does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkAllToAllVCGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkAllToAllVC(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Every rank of the group makes the call.
 * The count matrix is an aclIntArray (row-major), as CANN's aclnn operators take counts.
 * Dtypes: those HcclAlltoAllVC takes on the product (HCOMM_KIT_SOC). Tensors: any view (strides,
 * offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs again
 * until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_ALL_TO_ALL_VC_H_
#define ACLNN_HK_ALL_TO_ALL_VC_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * x: the blocks sent, packed in rank order
 * sendCountMatrix: ranks x ranks entries: [i * ranks + j] elements go from rank i to rank j (the same on every rank)
 * group: the communicator's name (HcclGetCommName)
 * out: the blocks received, packed in rank order
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllToAllVCGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *sendCountMatrix,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkAllToAllVC(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_ALL_TO_ALL_VC_H_ */
