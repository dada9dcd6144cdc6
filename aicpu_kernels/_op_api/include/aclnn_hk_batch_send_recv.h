/*
 * aclnn_hk_batch_send_recv.h -- hcomm-kit's built-in collective "HkBatchSendRecv" behind CANN's two-phase aclnn
 * interface (the operator runs as HcclBatchSendRecv does: same algorithms, resources and checks).
 * Library: libcust_opapi.so of the vendor package (opp/vendors/<vendor>/op_api/lib), with
 * libnnopbase.so (the aclnn meta API) and libhccl.so (the communicator).
 *
 *   1. aclnnHkBatchSendRecvGetWorkspaceSize(...) checks the arguments (codes of <aclnn/aclnn_base.h>, the
 *      reason in aclGetRecentErrMsg()), sizes the workspace (the staging of non-contiguous views)
 *      and builds the executor;
 *   2. aclnnHkBatchSendRecv(workspace, workspaceSize, executor, stream) enqueues it on the stream
 *      (asynchronous). Each rank passes its own sends and receives; every send pairs with the peer's receive of the same size.
 * The items are two lists rather than HcclBatchSendRecv's one array of HcclSendRecvItem: aclnn
 * operators separate their inputs (the sent tensors) from their outputs (the received ones) and
 * take several tensors as an aclTensorList with their attributes as an aclIntArray, as CANN's
 * grouped operators do (aclnnGroupedMatMul: const aclTensorList *x, const aclIntArray *groupList).
 * All the transfers are in flight together, in any order (no deadlock between two ranks).
 * Dtypes: those HcclBatchSendRecv takes on the product (HCOMM_KIT_SOC). Tensors: any view (strides,
 * offset) of device memory. A repeatable executor (aclSetAclOpExecutorRepeatable) runs again
 * until aclDestroyAclOpExecutor.
 */
#ifndef ACLNN_HK_BATCH_SEND_RECV_H_
#define ACLNN_HK_BATCH_SEND_RECV_H_

#include <stdint.h>
#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Phase one.
 * sendTensors: the tensors sent (NULL or empty: none)
 * sendRanks: the peer of each sent tensor (as many entries)
 * recvRanks: the peer of each received tensor (as many entries as recvTensors)
 * group: the communicator's name (HcclGetCommName)
 * recvTensors: the tensors received into (NULL or empty: none); no byte shared with another item
 * workspaceSize: set to the workspace phase two needs (bytes, may be 0)
 * executor: set to the executor phase two runs
 */
__attribute__((visibility("default")))
aclnnStatus aclnnHkBatchSendRecvGetWorkspaceSize(
    const aclTensorList *sendTensors,
    const aclIntArray *sendRanks,
    const aclIntArray *recvRanks,
    const char *group,
    const aclTensorList *recvTensors,
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

/* Phase two. */
__attribute__((visibility("default")))
aclnnStatus aclnnHkBatchSendRecv(void *workspace, uint64_t workspaceSize,
    aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_HK_BATCH_SEND_RECV_H_ */
