/*
 * hcomm-kit emulator extension (not in CANN): what the host library generated for an operator's
 * aclnn interface (templates/op_api/aclnn_op.cc.jinja, compiled by `hcomm-kit build`) calls. The
 * generated aclnn<Name>GetWorkspaceSize / aclnn<Name> describe the operator once (HkAclnnOpDesc,
 * from op.toml and offsetof() of its generated param header) and hand the rest to the emulator,
 * which checks the arguments, sizes the workspace, builds the aclOpExecutor, acquires the
 * operator's resources per (communicator, stream) and launches the kernel exactly as the Python
 * CustomOp does (hcomm.md §3.7-§3.11). User programs never call these directly.
 */
#ifndef HCOMM_KIT_ACLNN_EXT_H
#define HCOMM_KIT_ACLNN_EXT_H

#include <stddef.h>
#include <stdint.h>

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HK_ACLNN_DESC_VERSION 3u
#define HK_ACLNN_MAX_DTYPES 32u

enum HkAclnnTopology { HK_TOPO_NONE = 0, HK_TOPO_P2P = 1, HK_TOPO_RING = 2, HK_TOPO_MESH = 3, HK_TOPO_PEER = 4 };
enum HkAclnnOutput { HK_OUT_COUNT = 0, HK_OUT_COUNT_TIMES_RANKS = 1, HK_OUT_COUNT_DIV_RANKS = 2 };
/* Or'ed into HkAclnnOpDesc.output: x holds one block per rank (kinds alltoall, reduce_scatter,
 * scatter), OpParam.count = numel(x) / ranks (HCCL's count) and the output rule applies to it. */
#define HK_OUT_INPUT_BLOCKS 0x100u
/* threadRule > 0: that many threads; else one of these. */
enum HkAclnnThreads { HK_THREADS_RANKS = 0, HK_THREADS_RANKS_M1 = -1, HK_THREADS_PEERS = -2, HK_THREADS_RANKS_P2 = -3 };

typedef struct HkAclnnOpDesc {
    uint32_t version;         /* HK_ACLNN_DESC_VERSION */
    const char *api;          /* "aclnnRingSum" */
    const char *opName;       /* op.toml name */
    const char *kernel;       /* kernel entry = op-info key */
    const char *opInfoJson;   /* the kernel's op-info JSON (absolute path) */
    uint32_t aclNotify;       /* 0: thread-notify handshake, 1: acl-notify */
    int32_t threadRule;       /* HkAclnnThreads or a count */
    uint32_t maxThreads;      /* length of AlgResourceCtx.threads */
    uint32_t notifySlots;     /* slots per thread, slot 0 included */
    uint32_t topology;        /* HkAclnnTopology */
    uint32_t channelNotifies; /* slots per channel end */
    uint32_t maxChannels;     /* length of AlgResourceCtx.channels */
    uint32_t output;          /* HkAclnnOutput, | HK_OUT_INPUT_BLOCKS */
    uint32_t inplace;         /* output may be the input */
    int32_t opType;           /* OpParam.opType (HcclCMDType) */
    /* accepted dtypes: aclDataType -> HcclDataType, from op.toml and hcomm_kit/base/dtypes.py */
    uint32_t dtypeNum;
    int32_t aclDtypes[HK_ACLNN_MAX_DTYPES];
    int32_t hcclDtypes[HK_ACLNN_MAX_DTYPES];
    uint32_t reduceMask;      /* bit HcclReduceOp of op.toml reduce_ops; 0 = not a reduction */
    uint32_t productMask;     /* bit 0 Ascend910B, 1 Ascend910_93, 2 Ascend950 */
    uint32_t a2a3DtypeMask;   /* reductions on A2/A3: HcclDataType bits HcommLocalReduceOnThread takes */
    uint32_t a2a3ReduceMask;  /* ... and HcclReduceOp bits */
    /* AlgResourceCtx layout (offsetof of the generated param header) */
    uint32_t ctxSize, ctxAicpuThread, ctxCpuThreadOnAicpu, ctxNotifyIds, ctxRank, ctxRankSize, ctxThreadNum,
        ctxChannelNum, ctxNotifyNumPerThread, ctxLocalBuffer, ctxThreads, ctxChannels, channelInfoSize;
    /* ChannelInfo layout */
    uint32_t chRemoteRank, chNotifyNum, chHandle, chRemoteBuffer;
    /* OpParam layout */
    uint32_t paramSize, pTag, pTagLen, pCommName, pCommNameLen, pInputPtr, pOutputPtr, pCount, pDevType, pDataType,
        pOpType, pReduceOp, pRoot, pNotifyTimeout, pCpuThread, pAicpuThreadOnCpu, pResCtx;
    /* what the collective-call check of phase two compares besides operator, dtype and reduce op
     * (op.toml [io] same_args; the counts of an alltoallv differ per rank by design) */
    uint32_t sameArgs;        /* HK_SAME_COUNT | HK_SAME_ROOT */
    /* a ring topology: AlgResourceCtx.ringNum / ringOrder / rings[] and RingInfo's layout (else 0) */
    uint32_t ringOrder;       /* op.toml ring_order: 0 rank, 1 avoid-down */
    uint32_t ctxRingNum, ctxRingOrder, ctxRings, ringInfoSize, riPos, riPrev, riNext, riOrder;
    /* op.toml link_map: offset of AlgResourceCtx.linkUp (uint64_t per rank); 0: none */
    uint32_t ctxLinkUp;
} HkAclnnOpDesc;
#define HK_SAME_COUNT 1u
#define HK_SAME_ROOT 2u

/* Phase one. x / out: the tensors; reduceOp (HcclReduceOp, ignored unless a reduction), root;
 * group: the communicator's name (HcclGetCommName); param: an OpParam (desc->paramSize bytes)
 * with the operator's own [[param]] fields filled (the rest is filled here). */
aclnnStatus HkAclnnGetWorkspaceSize(const HkAclnnOpDesc *desc, const aclTensor *x, const aclTensor *out,
                                    int64_t reduceOp, int64_t root, const char *group, const void *param,
                                    uint64_t *workspaceSize, aclOpExecutor **executor);
/* Phase two: enqueue the operator on stream (asynchronous). */
aclnnStatus HkAclnnRun(const HkAclnnOpDesc *desc, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                       aclrtStream stream);

/* The built-in collectives' aclnn interface (aclnnHkAllReduce ..., the host library built with
 * the emulator from aicpu_kernels/_op_api/): each aclnnHk<Name> pair hands its arguments here.
 * Phase one checks them as CANN's aclnn operators do (ACLNN codes, aclGetRecentErrMsg) against
 * the HCCL API the collective runs as (its dtype / reduce-op table of the product); phase two
 * stages non-contiguous views through the workspace and enqueues HcclAllReduce & co. */
enum HkAclnnColl {
    HK_COLL_ALL_REDUCE = 0,
    HK_COLL_ALL_GATHER = 1,
    HK_COLL_REDUCE_SCATTER = 2,
    HK_COLL_BROADCAST = 3, /* in place: x is out */
    HK_COLL_REDUCE = 4,
    HK_COLL_SCATTER = 5,   /* x: read on the root only (may be NULL elsewhere) */
    HK_COLL_ALL_TO_ALL = 6,
    HK_COLL_SEND = 7,      /* x only; root = the destination rank */
    HK_COLL_RECV = 8,      /* out only; root = the source rank */
    HK_COLL_ALL_GATHER_V = 9,      /* arrays: recvCounts, recvDispls (NULL: packed) */
    HK_COLL_REDUCE_SCATTER_V = 10, /* arrays: sendCounts, sendDispls (NULL: packed) */
    HK_COLL_ALL_TO_ALL_V = 11,     /* arrays: sendCounts, sendDispls, recvCounts, recvDispls */
    HK_COLL_ALL_TO_ALL_VC = 12,    /* arrays: sendCountMatrix (ranks x ranks) */
    HK_COLL_GATHER = 13,           /* out: written on the root only (may be NULL elsewhere) */
    HK_COLL_BATCH_SEND_RECV = 14,  /* lists: sendTensors, recvTensors; arrays: sendRanks, recvRanks */
    HK_COLL_BARRIER = 15,          /* the group only */
    HK_COLL_COUNT = 16
};
/* Every argument an aclnnHk<Name>GetWorkspaceSize may take; those its collective does not take
 * are NULL / 0 (see HkAclnnColl for the meaning of arrays[] and lists[]). */
typedef struct HkAclnnCollArgs {
    const aclTensor *x;
    const aclTensor *out;
    int64_t reduceOp;
    int64_t root;
    const char *group;
    const aclIntArray *arrays[4];
    const aclTensorList *lists[2];
} HkAclnnCollArgs;
aclnnStatus HkAclnnCollGetWorkspaceSizeEx(int32_t coll, const HkAclnnCollArgs *args, uint64_t *workspaceSize,
                                          aclOpExecutor **executor);
/* The single-tensor collectives' shorthand of HkAclnnCollGetWorkspaceSizeEx. */
aclnnStatus HkAclnnCollGetWorkspaceSize(int32_t coll, const aclTensor *x, const aclTensor *out, int64_t reduceOp,
                                        int64_t root, const char *group, uint64_t *workspaceSize,
                                        aclOpExecutor **executor);
aclnnStatus HkAclnnCollRun(int32_t coll, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                           aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HCOMM_KIT_ACLNN_EXT_H */
