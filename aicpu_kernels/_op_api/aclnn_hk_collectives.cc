/*
 * The host library of hcomm-kit's built-in collectives behind CANN's aclnn interface: the
 * aclnnHk<Name>GetWorkspaceSize / aclnnHk<Name> pairs of include/aclnn_hk_*.h. Each hands its
 * arguments to the emulator (<hcomm_kit/aclnn_ext.h> HkAclnnCollGetWorkspaceSize / HkAclnnCollRun),
 * which checks them, stages non-contiguous views and enqueues the HCCL collective.
 *
 * Built with the emulator (hcomm_kit/build/builtins.py) into <library dir>/op_api/lib/libcust_opapi.so
 * and linked into the vendor package's libcust_opapi.so of a CANN-shaped tree
 * (hcomm-kit config --ascend-home).
 */
#include <stddef.h>
#include <string.h>

#include "aclnn_hk_collectives.h"
#include "hcomm_kit/aclnn_ext.h"

extern "C" aclnnStatus aclnnHkAllReduceGetWorkspaceSize(
    const aclTensor *x,
    int64_t reduceOp,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_ALL_REDUCE, x, out, reduceOp, 0, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkAllReduce(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_ALL_REDUCE, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkAllGatherGetWorkspaceSize(
    const aclTensor *x,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_ALL_GATHER, x, out, 0, 0, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkAllGather(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_ALL_GATHER, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkReduceScatterGetWorkspaceSize(
    const aclTensor *x,
    int64_t reduceOp,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_REDUCE_SCATTER, x, out, reduceOp, 0, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkReduceScatter(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_REDUCE_SCATTER, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkBroadcastGetWorkspaceSize(
    aclTensor *selfRef,
    int64_t root,
    const char *group,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_BROADCAST, selfRef, selfRef, 0, root, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkBroadcast(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_BROADCAST, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkReduceGetWorkspaceSize(
    const aclTensor *x,
    int64_t reduceOp,
    int64_t root,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_REDUCE, x, out, reduceOp, root, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkReduce(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_REDUCE, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkScatterGetWorkspaceSize(
    const aclTensor *x,
    int64_t root,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_SCATTER, x, out, 0, root, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkScatter(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_SCATTER, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkAllToAllGetWorkspaceSize(
    const aclTensor *x,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_ALL_TO_ALL, x, out, 0, 0, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkAllToAll(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_ALL_TO_ALL, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkSendGetWorkspaceSize(
    const aclTensor *x,
    int64_t dstRank,
    const char *group,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_SEND, x, NULL, 0, dstRank, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkSend(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_SEND, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkRecvGetWorkspaceSize(
    int64_t srcRank,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    return HkAclnnCollGetWorkspaceSize(HK_COLL_RECV, NULL, out, 0, srcRank, group, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkRecv(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_RECV, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkAllGatherVGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *recvCounts,
    const aclIntArray *recvDisplsOptional,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.arrays[0] = recvCounts;
    a.arrays[1] = recvDisplsOptional;
    a.out = out;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_ALL_GATHER_V, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkAllGatherV(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_ALL_GATHER_V, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkReduceScatterVGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *sendCounts,
    const aclIntArray *sendDisplsOptional,
    int64_t reduceOp,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.arrays[0] = sendCounts;
    a.arrays[1] = sendDisplsOptional;
    a.reduceOp = reduceOp;
    a.out = out;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_REDUCE_SCATTER_V, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkReduceScatterV(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_REDUCE_SCATTER_V, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkAllToAllVGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *sendCounts,
    const aclIntArray *sendDisplsOptional,
    const aclIntArray *recvCounts,
    const aclIntArray *recvDisplsOptional,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.arrays[0] = sendCounts;
    a.arrays[1] = sendDisplsOptional;
    a.arrays[2] = recvCounts;
    a.arrays[3] = recvDisplsOptional;
    a.out = out;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_ALL_TO_ALL_V, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkAllToAllV(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_ALL_TO_ALL_V, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkAllToAllVCGetWorkspaceSize(
    const aclTensor *x,
    const aclIntArray *sendCountMatrix,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.arrays[0] = sendCountMatrix;
    a.out = out;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_ALL_TO_ALL_VC, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkAllToAllVC(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_ALL_TO_ALL_VC, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkGatherGetWorkspaceSize(
    const aclTensor *x,
    int64_t root,
    const char *group,
    aclTensor *out,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.root = root;
    a.out = out;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_GATHER, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkGather(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_GATHER, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkBatchSendRecvGetWorkspaceSize(
    const aclTensorList *sendTensors,
    const aclIntArray *sendRanks,
    const aclIntArray *recvRanks,
    const char *group,
    const aclTensorList *recvTensors,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.lists[0] = sendTensors;
    a.arrays[0] = sendRanks;
    a.arrays[1] = recvRanks;
    a.lists[1] = recvTensors;
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_BATCH_SEND_RECV, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkBatchSendRecv(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_BATCH_SEND_RECV, workspace, workspaceSize, executor, stream);
}

extern "C" aclnnStatus aclnnHkBarrierGetWorkspaceSize(
    const char *group,
    uint64_t *workspaceSize,
    aclOpExecutor **executor)
{
    HkAclnnCollArgs a;
    memset(&a, 0, sizeof a);
    a.group = group;
    return HkAclnnCollGetWorkspaceSizeEx(HK_COLL_BARRIER, &a, workspaceSize, executor);
}

extern "C" aclnnStatus aclnnHkBarrier(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
    aclrtStream stream)
{
    return HkAclnnCollRun(HK_COLL_BARRIER, workspace, workspaceSize, executor, stream);
}
