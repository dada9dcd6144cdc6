/*
 * hcomm-kit CPU emulator: HCCL resource management (threads, buffers,
 * engine contexts, memory registration), matching CANN's <hccl/hccl_res.h>.
 * Prototypes follow hcomm.md §3.7 and §3.9. Channel declarations
 * (HcclChannelDesc, HcclChannelAcquire, ...) are pulled in from hccl_channel.h.
 */
#ifndef HCCL_RES_H
#define HCCL_RES_H

#include <stdint.h>
#include "acl/acl_rt.h"
#include "hccl_types.h"
#include "hcomm_res_defs.h"
#include "hccl_channel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest resource tag (ctxTag, memTag), in bytes. */
#ifdef __cplusplus
const uint32_t HCCL_RES_TAG_MAX_LEN = 255;
#else
enum { HCCL_RES_TAG_MAX_LEN = 255 };
#endif

/* Value type for THREAD_RES_TYPE_STREAM in HcclThreadResGetInfo. */
typedef aclrtStream ThreadResTypeStream;

/* ---- HCCL buffer ----------------------------------------------------------- */
extern HcclResult HcclGetHcclBuffer(HcclComm comm, void **buffer, uint64_t *size);
extern HcclResult HcclGetHcclBufferCleared(HcclComm comm, void **buffer, uint64_t *size);

/* ---- communication threads -------------------------------------------------- */
extern HcclResult HcclThreadAcquire(HcclComm comm, CommEngine engine, uint32_t threadNum,
                                    uint32_t notifyNumPerThread, ThreadHandle *threads);
extern HcclResult HcclThreadAcquireWithConfig(HcclComm comm, CommEngine engine, uint32_t threadNum,
                                              ThreadType type, const ThreadConfig *config, ThreadHandle *threads);
extern HcclResult HcclThreadAcquireWithStream(HcclComm comm, CommEngine engine, aclrtStream stream,
                                              uint32_t notifyNum, ThreadHandle *thread);
extern HcclResult HcclDedicatedThreadAcquire(HcclComm comm, HcclDedicatedThreadType useType,
                                             uint32_t notifyNumPerThread, ThreadHandle *thread);
extern HcclResult HcclThreadResGetInfo(HcclComm comm, ThreadHandle thread, ThreadResType resType,
                                       uint32_t infoLen, void **info);

/* ---- engine contexts: one block per (comm, engine, tag) ------------------------ */
extern HcclResult HcclEngineCtxCreate(HcclComm comm, const char *ctxTag, CommEngine engine, uint64_t size,
                                      void **ctx);
extern HcclResult HcclEngineCtxGet(HcclComm comm, const char *ctxTag, CommEngine engine, void **ctx,
                                   uint64_t *size);
extern HcclResult HcclEngineCtxCopy(HcclComm comm, CommEngine engine, const char *ctxTag, const void *srcCtx,
                                    uint64_t size, uint64_t dstCtxOffset);
extern HcclResult HcclEngineCtxDestroy(HcclComm comm, const char *ctxTag, CommEngine engine);

/* ---- memory registration (950) ----------------------------------------------- */
extern HcclResult HcclCommMemReg(HcclComm comm, const char *memTag, const CommMem *mem,
                                 HcclMemHandle *memHandle);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_RES_H */
