/* HCCL host plane: HCCL buffers, engine contexts and device memory of a communicator (hcomm.md
 * §3.9). */
#include "acl/hooks.h"
#include "hccl/comm.h"

#include <climits>
#include <cstring>

using namespace emu;

/* ================================================================ buffers, engine contexts */

EMU_API HcclResult HcclGetHcclBuffer(HcclComm comm, void** buffer, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(buffer);
    NEED_PTR(size);
    *buffer = c->buf;
    *size = c->buf_size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetHcclBufferCleared(HcclComm comm, void** buffer, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(buffer);
    NEED_PTR(size);
    memset(c->buf, 0, c->buf_size);
    note_host_write(c->buf, c->buf_size);
    *buffer = c->buf;
    *size = c->buf_size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetRemoteIpcHcclBuf(HcclComm comm, uint64_t remoteRank, void** addr, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(addr);
    NEED_PTR(size);
    if (remoteRank >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "remoteRank %llu is not below the rank size %u", (unsigned long long)remoteRank,
                      c->nranks);
    *addr = c->pbuf[remoteRank];
    *size = c->pbuf_size[remoteRank];
    return HCCL_SUCCESS;
}

namespace {
int check_ctx_args(const char* tag, int engine, const char* api) {
    if (!tag) return (HcclResult)seterr(HCCL_E_PTR, api, "ctxTag is NULL");
    size_t n = strnlen(tag, HCCL_RES_TAG_MAX_LEN + 1);
    if (n == 0) return (HcclResult)seterr(HCCL_E_PARA, api, "ctxTag is empty");
    if (n > HCCL_RES_TAG_MAX_LEN)
        return (HcclResult)seterr(HCCL_E_PARA, api, "ctxTag is longer than HCCL_RES_TAG_MAX_LEN (%u)", HCCL_RES_TAG_MAX_LEN);
    return check_thread_engine(engine, api);
}
}  // namespace

EMU_API HcclResult HcclEngineCtxCreate(HcclComm comm, const char* ctxTag, CommEngine engine, uint64_t size, void** ctx) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ctx);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    if (size == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "size is 0 (ctxTag \"%s\")", ctxTag);
    if (size > (1ull << 34)) return (HcclResult)seterr(HCCL_E_PARA, __func__, "size %llu is too large", (unsigned long long)size);
    std::lock_guard<std::mutex> g(c->m);
    auto key = std::make_pair(std::string(ctxTag), (int)engine_side(engine));
    if (c->ctxs.count(key))
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "an engine context tagged \"%s\" already exists for this engine (%llu bytes); "
                      "use HcclEngineCtxGet", ctxTag, (unsigned long long)c->ctxs[key].size);
    EngineCtxBlock b;
    b.size = size;
    b.device = engine_side(engine) == Engine::Device;
    if (posix_memalign(&b.ptr, 64, size) != 0 || !b.ptr)
        return (HcclResult)seterr(HCCL_E_MEMORY, __func__, "cannot allocate a %llu-byte engine context", (unsigned long long)size);
    memset(b.ptr, 0, size);
    if (b.device) mem_register(b.ptr, size, c->dev->id, MemKind::EngineCtx);
    c->ctxs[key] = b;
    *ctx = b.ptr;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclEngineCtxGet(HcclComm comm, const char* ctxTag, CommEngine engine, void** ctx, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ctx);
    NEED_PTR(size);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ctxs.find(std::make_pair(std::string(ctxTag), (int)engine_side(engine)));
    if (it == c->ctxs.end())  /* the documented probe before HcclEngineCtxCreate (hcomm.md §3.9) */
        return (HcclResult)setmiss(HCCL_E_NOT_FOUND, __func__,
                                   "no engine context tagged \"%s\" for this engine (create it first)", ctxTag);
    *ctx = it->second.ptr;
    *size = it->second.size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclEngineCtxCopy(HcclComm comm, CommEngine engine, const char* ctxTag, const void* srcCtx,
                                     uint64_t size, uint64_t dstCtxOffset) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(srcCtx);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ctxs.find(std::make_pair(std::string(ctxTag), (int)engine_side(engine)));
    if (it == c->ctxs.end())
        return (HcclResult)seterr(HCCL_E_NOT_FOUND, __func__, "no engine context tagged \"%s\" for this engine", ctxTag);
    uint64_t cap = it->second.size;
    if (size == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "size is 0");
    if (dstCtxOffset > cap || size > cap - dstCtxOffset)
        return (HcclResult)seterr(HCCL_E_PARA, __func__,
                      "dstCtxOffset %llu + size %llu runs past the end of engine context \"%s\" (%llu bytes)",
                      (unsigned long long)dstCtxOffset, (unsigned long long)size, ctxTag, (unsigned long long)cap);
    memmove(static_cast<char*>(it->second.ptr) + dstCtxOffset, srcCtx, size);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclEngineCtxDestroy(HcclComm comm, const char* ctxTag, CommEngine engine) {
    RESOLVE_COMM(c, comm);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ctxs.find(std::make_pair(std::string(ctxTag), (int)engine_side(engine)));
    if (it == c->ctxs.end())
        return (HcclResult)seterr(HCCL_E_NOT_FOUND, __func__, "no engine context tagged \"%s\" for this engine", ctxTag);
    if (it->second.device) mem_unregister(it->second.ptr);
    free(it->second.ptr);
    c->ctxs.erase(it);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclDevMemAcquire(HcclComm comm, const char* memTag, uint64_t* size, void** addr, bool* newCreated) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(size);
    NEED_PTR(addr);
    NEED_PTR(newCreated);
    if (int r = check_ctx_args(memTag, COMM_ENGINE_AICPU_TS, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->devmem.find(memTag);
    if (it != c->devmem.end()) {
        *size = it->second.size;
        *addr = it->second.ptr;
        *newCreated = false;
        return HCCL_SUCCESS;
    }
    if (*size == 0 || *size > (1ull << 34))
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "*size %llu is not in (0, 16 GiB]", (unsigned long long)*size);
    EngineCtxBlock b;
    b.size = *size;
    b.device = true;
    if (posix_memalign(&b.ptr, 64, b.size) != 0 || !b.ptr)
        return (HcclResult)seterr(HCCL_E_MEMORY, __func__, "cannot allocate %llu bytes", (unsigned long long)b.size);
    memset(b.ptr, 0, b.size);
    mem_register(b.ptr, b.size, c->dev->id, MemKind::Device);
    c->devmem[memTag] = b;
    *addr = b.ptr;
    *newCreated = true;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclCommMemReg(HcclComm comm, const char* memTag, const CommMem* mem, HcclMemHandle* memHandle) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)mem;
    (void)memHandle;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "memory registration (memTag \"%s\") is an Ascend950 feature the emulator does not provide; "
                  "use the HCCL buffer (HcclGetHcclBuffer / HcclChannelGetHcclBuffer)",
                  memTag ? memTag : "(null)");
}

EMU_API HcclResult HcclAicpuKernelLaunch(HcclComm comm, const HcclOpDesc* opInfo, const HcclKernelFuncInfo* funcInfo,
                                         ThreadHandle aicpuThreadHandle, aclrtStream userStream,
                                         const HcclKernelLaunchCfg* kernelLaunchCfg) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)opInfo;
    (void)aicpuThreadHandle;
    (void)userStream;
    (void)kernelLaunchCfg;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "HCCL-managed kernel launch is not emulated; load the op-info JSON with aclrtBinaryLoadFromFile and "
                  "launch %s with aclrtLaunchKernelWithConfig",
                  funcInfo ? funcInfo->kernelFuncName : "the kernel");
}
