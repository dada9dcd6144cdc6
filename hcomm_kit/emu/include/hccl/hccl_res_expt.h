/*
 * hcomm-kit CPU emulator: experimental HCCL resource calls, matching CANN's
 * pkg_inc <hccl/hccl_res_expt.h> (hcomm.md §3.7, §3.9).
 */
#ifndef HCCL_RES_EXPT_H
#define HCCL_RES_EXPT_H

#include <stdint.h>
#include <stdbool.h>
#include "hccl_res.h"

#ifdef __cplusplus
extern "C" {
#endif

/* HCCL buffer of `remoteRank` mapped into this process (IPC). */
extern HcclResult HcclGetRemoteIpcHcclBuf(HcclComm comm, uint64_t remoteRank, void **addr, uint64_t *size);

/* Device workspace keyed by memTag; created with *size on first use. */
extern HcclResult HcclDevMemAcquire(HcclComm comm, const char *memTag, uint64_t *size, void **addr,
                                    bool *newCreated);

/* Handles naming the same threads on another engine (e.g. CPU_TS <-> AICPU_TS). */
extern HcclResult HcclThreadExportToCommEngine(HcclComm comm, uint32_t threadNum, const ThreadHandle *threads,
                                               CommEngine dstCommEngine, ThreadHandle *exportedThreads);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_RES_EXPT_H */
