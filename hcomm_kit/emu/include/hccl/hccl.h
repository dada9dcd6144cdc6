/*
 * hcomm-kit CPU emulator: HCCL's collective communication API, matching CANN's <hccl/hccl.h>
 * (include/hccl.h of the hccl repository). Every call is asynchronous: it checks its arguments,
 * enqueues the operation on `stream` and returns; errors of the operation itself surface at the
 * next synchronisation of the stream. The emulator runs them with its built-in AICPU operators.
 * HcclBarrier is declared in <hccl/hccl_comm.h>, as in CANN.
 */
#ifndef HCCL_H_
#define HCCL_H_

#include <hccl/hccl_types.h>
#include <hccl/hccl_comm.h>
#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* recvBuf[i] = op over the ranks of sendBuf[i], i < count. */
extern HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                                HcclComm comm, aclrtStream stream);

/* buf of rank root -> buf of every rank (count elements). */
extern HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                aclrtStream stream);

/* recvBuf (recvCount elements) = op over the ranks of block <rank> of sendBuf (rankSize blocks). */
extern HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                    HcclReduceOp op, HcclComm comm, aclrtStream stream);

/* Like HcclReduceScatter with per-rank counts: rank i receives sendCounts[i] elements reduced from
 * sendBuf + sendDispls[i] of every rank (uint64 arrays of rankSize entries, in elements). */
extern HcclResult HcclReduceScatterV(void *sendBuf, const void *sendCounts, const void *sendDispls, void *recvBuf,
                                     uint64_t recvCount, HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                     aclrtStream stream);

/* Block i (recvCount elements) of root's sendBuf -> recvBuf of rank i. */
extern HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType, uint32_t root,
                              HcclComm comm, aclrtStream stream);

/* recvBuf = the sendBuf (sendCount elements) of every rank, in rank order. */
extern HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                HcclComm comm, aclrtStream stream);

/* Like HcclAllGather with per-rank counts: rank j's sendBuf lands at recvBuf + recvDispls[j]
 * (recvCounts[j] elements; uint64 arrays of rankSize entries). */
extern HcclResult HcclAllGatherV(void *sendBuf, uint64_t sendCount, void *recvBuf, const void *recvCounts,
                                 const void *recvDispls, HcclDataType dataType, HcclComm comm, aclrtStream stream);

/* Point to point; a send pairs with the receive of the same size posted by destRank. */
extern HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                           aclrtStream stream);
extern HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                           aclrtStream stream);

/* sendCountMatrix[i * rankSize + j]: elements rank i sends to rank j (uint64); blocks packed in
 * rank order in both buffers. */
extern HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                                 const void *recvBuf, HcclDataType recvType, HcclComm comm, aclrtStream stream);

/* Counts and displacements: uint64 arrays of rankSize entries, in elements. */
extern HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls, HcclDataType sendType,
                                const void *recvBuf, const void *recvCounts, const void *rdispls,
                                HcclDataType recvType, HcclComm comm, aclrtStream stream);

/* Block j (sendCount elements) of sendBuf -> block <rank> of rank j's recvBuf; recvCount == sendCount. */
extern HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType, const void *recvBuf,
                               uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream);

/* recvBuf of rank root = op over the ranks of sendBuf (count elements). */
extern HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                             uint32_t root, HcclComm comm, aclrtStream stream);

/* The sends and receives of sendRecvInfo, all in flight together. */
extern HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H_ */
