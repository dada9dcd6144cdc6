/*
 * hcomm-kit CPU emulator: Hcomm device-side data plane, matching CANN's
 * <hcomm/hcomm_primitives.h> (also installed as <hccl/hcomm_primitives.h>).
 * Prototypes follow hcomm.md §3.1-§3.4 exactly. Every function returns
 * 0 or an HcclResult value as int32_t.
 *
 * ...OnThread calls only enqueue a task on the thread's FIFO; timeouts are in
 * seconds, 0 = no limit.
 */
#ifndef HCOMM_PRIMITIVES_H
#define HCOMM_PRIMITIVES_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <securec.h>
#include <arpa/inet.h>
#include "acl/acl_rt.h"
#include "hcomm_res_defs.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef CHANNEL_HANDLE_DEFINED
#define CHANNEL_HANDLE_DEFINED
typedef uint64_t ChannelHandle;
#endif

#ifndef THREAD_HANDLE_DEFINED
#define THREAD_HANDLE_DEFINED
typedef uint64_t ThreadHandle;
#endif

/* Timeouts passed to HcommSetNotifyWaitTimeOut / HcommThreadResAcquireTimeOut are float. */
#ifndef HCOMM_TIMEOUT_FLOAT_TYPE
#define HCOMM_TIMEOUT_FLOAT_TYPE 1
#endif

typedef enum {
    HCOMM_REDUCE_SUM = 0,
    HCOMM_REDUCE_PROD = 1,
    HCOMM_REDUCE_MAX = 2,
    HCOMM_REDUCE_MIN = 3,
    HCOMM_REDUCE_RESERVED = 255
} HcommReduceOp;

/* Same numbering as HcclDataType; 13 is unused. */
typedef enum {
    HCOMM_DATA_TYPE_INT8 = 0,
    HCOMM_DATA_TYPE_INT16 = 1,
    HCOMM_DATA_TYPE_INT32 = 2,
    HCOMM_DATA_TYPE_FP16 = 3,
    HCOMM_DATA_TYPE_FP32 = 4,
    HCOMM_DATA_TYPE_INT64 = 5,
    HCOMM_DATA_TYPE_UINT64 = 6,
    HCOMM_DATA_TYPE_UINT8 = 7,
    HCOMM_DATA_TYPE_UINT16 = 8,
    HCOMM_DATA_TYPE_UINT32 = 9,
    HCOMM_DATA_TYPE_FP64 = 10,
    HCOMM_DATA_TYPE_BFP16 = 11,
    HCOMM_DATA_TYPE_INT128 = 12,
    HCOMM_DATA_TYPE_HIF8 = 14,
    HCOMM_DATA_TYPE_FP8E4M3 = 15,
    HCOMM_DATA_TYPE_FP8E5M2 = 16,
    HCOMM_DATA_TYPE_FP8E8M0 = 17,
    HCOMM_DATA_TYPE_RESERVED = 255
} HcommDataType;

typedef enum {
    HCOMM_TRANSFER_TYPE_INVALID = -1,
    HCOMM_TRANSFER_TYPE_WRITE = 0,
    HCOMM_TRANSFER_TYPE_WRITE_REDUCE = 1,
    HCOMM_TRANSFER_TYPE_WRITE_WITH_NOTIFY = 2,
    HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY = 3,
    HCOMM_TRANSFER_TYPE_READ = 4,
    HCOMM_TRANSFER_TYPE_READ_REDUCE = 5,
    HCOMM_TRANSFER_TYPE_NOTIFY_RECORD = 6
} HcommTransferType;

/* One entry of HcommBatchTransferOnThread (64 bytes, transferInfo @8). */
typedef struct {
    HcommTransferType transType;
    uint8_t reserved[4];
    union {
        uint8_t raws[56];
        struct {
            uint64_t len;
            void *dst;
            void *src;
        } write;
        struct {
            uint64_t len;
            void *dst;
            void *src;
        } read;
        struct {
            uint64_t count;
            void *dst;
            void *src;
            HcommReduceOp reduceOp;
            HcommDataType dataType;
        } reduce;
        struct {
            uint32_t notifyIdx;
        } notifyRecord;
        struct {
            uint64_t len;
            void *dst;
            void *src;
            uint32_t notifyIdx;
        } writeWithNotify;
        struct {
            uint64_t count;
            void *dst;
            void *src;
            HcommReduceOp reduceOp;
            HcommDataType dataType;
            uint32_t notifyIdx;
        } writeReduceWithNotify;
    } transferInfo;
} HcommBatchTransferDesc;

/* ---- local operations (§3.1) ---------------------------------------------- */
extern int32_t HcommLocalCopyOnThread(ThreadHandle thread, void *dst, const void *src, uint64_t len);
extern int32_t HcommLocalReduceOnThread(ThreadHandle thread, void *dst, const void *src, uint64_t count,
                                        HcommDataType dataType, HcommReduceOp reduceOp);
extern int32_t HcommThreadNotifyRecordOnThread(ThreadHandle thread, ThreadHandle dstThread, uint32_t dstNotifyIdx);
extern int32_t HcommThreadNotifyWaitOnThread(ThreadHandle thread, uint32_t notifyIdx, uint32_t timeOut);
extern int32_t HcommThreadNotifyWaitOnThreadWithDefaultTimeout(ThreadHandle thread, uint32_t notifyIdx);
extern int32_t HcommAclrtNotifyRecordOnThread(ThreadHandle thread, uint64_t dstNotifyId);
extern int32_t HcommAclrtNotifyWaitOnThread(ThreadHandle thread, uint64_t notifyId, uint32_t timeOut);

/* ---- channel operations (§3.2) -------------------------------------------- */
extern int32_t HcommWriteOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                  uint64_t len);
extern int32_t HcommWriteReduceOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                        uint64_t count, HcommDataType dataType, HcommReduceOp reduceOp);
extern int32_t HcommWriteWithNotifyOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                            uint64_t len, uint32_t remoteNotifyIdx);
extern int32_t HcommWriteReduceWithNotifyOnThread(ThreadHandle thread, ChannelHandle channel, void *dst,
                                                  const void *src, uint64_t count, HcommDataType dataType,
                                                  HcommReduceOp reduceOp, uint32_t remoteNotifyIdx);
extern int32_t HcommReadOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                 uint64_t len);
extern int32_t HcommReadReduceOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                       uint64_t count, HcommDataType dataType, HcommReduceOp reduceOp);
extern int32_t HcommChannelNotifyRecordOnThread(ThreadHandle thread, ChannelHandle channel,
                                                uint32_t remoteNotifyIdx);
extern int32_t HcommChannelNotifyWaitOnThread(ThreadHandle thread, ChannelHandle channel, uint32_t localNotifyIdx,
                                              uint32_t timeOut);
extern int32_t HcommChannelNotifyWaitOnThreadWithDefaultTimeout(ThreadHandle thread, ChannelHandle channel,
                                                                uint32_t localNotifyIdx);
extern int32_t HcommBatchTransferOnThread(ThreadHandle thread, ChannelHandle channel,
                                          const HcommBatchTransferDesc *transferDescs, uint32_t transferDescNum);
extern int32_t HcommChannelFenceOnThread(ThreadHandle thread, ChannelHandle channel);
extern int32_t HcommChannelDrainOnThread(ThreadHandle thread, ChannelHandle channel);

/* ---- host-CPU-only and non-blocking variants (§3.3) ------------------------- */
extern int32_t HcommWriteNbiOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                     uint64_t len);
extern int32_t HcommWriteNbi(ChannelHandle channel, void *dst, const void *src, uint64_t len);
extern int32_t HcommWriteWithNotifyNbiOnThread(ThreadHandle thread, ChannelHandle channel, void *dst,
                                               const void *src, uint64_t len, uint32_t remoteNotifyIdx);
extern int32_t HcommWriteWithNotifyNbi(ChannelHandle channel, void *dst, const void *src, uint64_t len,
                                       uint32_t remoteNotifyIdx);
extern int32_t HcommReadNbiOnThread(ThreadHandle thread, ChannelHandle channel, void *dst, const void *src,
                                    uint64_t len);
extern int32_t HcommReadNbi(ChannelHandle channel, void *dst, const void *src, uint64_t len);
extern int32_t HcommChannelNotifyRecord(ChannelHandle channel, uint32_t remoteNotifyIdx);
extern int32_t HcommChannelNotifyWait(ChannelHandle channel, uint32_t localNotifyIdx, uint32_t timeOut);
extern int32_t HcommChannelFence(ChannelHandle channel);
extern int32_t HcommFenceOnThread(ThreadHandle thread);

/* ---- device-side control (§3.4) -------------------------------------------- */
extern int32_t HcommBatchModeStart(const char *batchTag);
extern int32_t HcommBatchModeEnd(const char *batchTag);
extern int32_t HcommAcquireComm(const char *commId);
extern int32_t HcommReleaseComm(const char *commId);
extern int32_t HcommSetNotifyWaitTimeOut(float timeOut);
extern int32_t HcommThreadResAcquireTimeOut(float timeOut);

/* 950-only AICPU task cache. */
extern HcommResult HcommAicpuTsTaskCacheLookup(const char *tag, bool *isHit);
extern HcommResult HcommAicpuTsTaskCacheStart(const char *tag, void **addrs, uint64_t *sizes, uint64_t count);
extern HcommResult HcommAicpuTsTaskCacheEnd(const char *tag);
extern HcommResult HcommAicpuTsTaskCacheExecute(const char *tag, void **addrs, uint64_t *sizes, uint64_t count);
extern HcommResult HcommAicpuTsTaskCacheClear(const char *tag);

#ifdef __cplusplus
}
#endif

#endif /* HCOMM_PRIMITIVES_H */
