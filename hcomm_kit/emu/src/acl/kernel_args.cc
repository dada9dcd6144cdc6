/* AICPU kernel argument lists (acl_runtime.md §3.6): aclrtArgsHandle building, placeholders,
 * finalisation. */
#include "acl/kernel.h"

#include <cstdlib>
#include <cstring>

namespace emu {
namespace {
thread_local ArgsHandle tl_args;
/* The system-managed 64 KiB argument buffer of this thread, freed when the thread exits. */
struct ArgsBuf {
    uint8_t* p = nullptr;
    ~ArgsBuf() { free(p); }
};
thread_local ArgsBuf tl_args_buf;

/* Bytes still free between the arguments (front) and the placeholder data (back). */
size_t args_room(const ArgsHandle* a) {
    size_t taken = a->used + a->ph_used; /* both <= cap, which is <= kMaxArgsBlob: no overflow */
    return taken < a->cap ? a->cap - taken : 0;
}

const char* state_name(uint8_t st) {
    switch (st) {
        case ARGS_PH_TAKEN: return "aclrtKernelArgsGetPlaceHolderBuffer was called";
        case ARGS_FINAL: return "aclrtKernelArgsFinalize was called";
        case ARGS_UPDATED: return "aclrtKernelArgsFinalize was called";
        default: return "building";
    }
}
}  // namespace

}  // namespace emu

namespace emu {
ArgsHandle* args_check(aclrtArgsHandle h, const char* api, int* code) {
    if (!h) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "argsHandle is NULL");
        return nullptr;
    }
    ArgsHandle* a = static_cast<ArgsHandle*>(h);
    if (a->magic != kArgsMagic) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p is not an initialised args handle", h);
        return nullptr;
    }
    return a;
}
}  // namespace emu

using namespace emu;

/* ================================================================ argument lists */

EMU_API aclError aclrtKernelArgsGetHandleMemSize(aclrtFuncHandle funcHandle, size_t* memSize) {
    if (int r = check_init(__func__)) return r;
    if (!memSize) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "memSize is NULL");
    int code = 0;
    if (!func_check(funcHandle, __func__, &code)) return code;
    *memSize = sizeof(ArgsHandle);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsGetMemSize(aclrtFuncHandle funcHandle, size_t userArgsSize, size_t* actualArgsSize) {
    if (int r = check_init(__func__)) return r;
    if (!actualArgsSize) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "actualArgsSize is NULL");
    int code = 0;
    if (!func_check(funcHandle, __func__, &code)) return code;
    *actualArgsSize = userArgsSize; /* CPU kernels: no system arguments */
    return ACL_SUCCESS;
}

static void args_reset(ArgsHandle* a, Func* f, uint8_t* buf, size_t cap, bool user) {
    a->magic = kArgsMagic;
    a->f = f;
    a->buf = buf;
    a->cap = cap;
    a->used = 0;
    a->ph_used = 0;
    a->nparams = 0;
    a->state = ARGS_BUILDING;
    a->user_mem = user;
}

EMU_API aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle* argsHandle) {
    if (int r = check_init(__func__)) return r;
    if (!argsHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsHandle is NULL");
    int code = 0;
    Func* f = func_check(funcHandle, __func__, &code);
    if (!f) return code;
    if (!tl_args_buf.p) tl_args_buf.p = static_cast<uint8_t*>(malloc(kArgsBuf));
    if (!tl_args_buf.p) return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "out of memory");
    /* One handle per thread, re-initialised on every call (spec §3.6). */
    args_reset(&tl_args, f, tl_args_buf.p, kArgsBuf, false);
    *argsHandle = &tl_args;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsInitByUserMem(aclrtFuncHandle funcHandle, aclrtArgsHandle argsHandle, void* userHostMem,
                                              size_t actualArgsSize) {
    if (int r = check_init(__func__)) return r;
    if (!argsHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsHandle is NULL");
    if (!userHostMem) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "userHostMem is NULL");
    if (actualArgsSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "actualArgsSize is 0");
    if (actualArgsSize > kMaxArgsBlob)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "actualArgsSize %zu is above %zu bytes (argument offsets are 32-bit)", actualArgsSize, kMaxArgsBlob);
    int code = 0;
    Func* f = func_check(funcHandle, __func__, &code);
    if (!f) return code;
    if ((uintptr_t)argsHandle % alignof(ArgsHandle))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "argsHandle memory %p is not %zu-byte aligned", argsHandle,
                      alignof(ArgsHandle));
    ArgsHandle* a = new (argsHandle) ArgsHandle();
    args_reset(a, f, static_cast<uint8_t*>(userHostMem), actualArgsSize, true);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void* param, size_t paramSize,
                                       aclrtParamHandle* paramHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!param) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "param is NULL");
    if (paramSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "paramSize is 0");
    if (a->state != ARGS_BUILDING)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "cannot append: %s", state_name(a->state));
    if (a->nparams >= kMaxArgs)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "argument %u exceeds the limit of %zu arguments",
                      a->nparams + 1, kMaxArgs);
    if (paramSize > args_room(a)) /* no `used + paramSize`: paramSize may be near SIZE_MAX */
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "argument of %zu bytes overflows the %zu-byte argument buffer (%zu bytes used)", paramSize, a->cap,
                      a->used + a->ph_used);
    ParaDetail& p = a->params[a->nparams++];
    p = ParaDetail();
    p.offset = (uint32_t)a->used;
    p.size = (uint32_t)paramSize;
    memcpy(a->buf + a->used, param, paramSize); /* AICPU: packed, 1-byte alignment */
    a->used += paramSize;
    if (paramHandle) *paramHandle = &p;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle, aclrtParamHandle* paramHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!paramHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "paramHandle is NULL");
    if (a->state != ARGS_BUILDING)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "cannot append: %s", state_name(a->state));
    if (a->nparams >= kMaxArgs)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "argument %u exceeds the limit of %zu arguments",
                      a->nparams + 1, kMaxArgs);
    if (args_room(a) < 8)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "placeholder slot overflows the %zu-byte argument buffer",
                      a->cap);
    ParaDetail& p = a->params[a->nparams++];
    p = ParaDetail();
    p.offset = (uint32_t)a->used;
    p.size = 8;
    p.type = 1;
    memset(a->buf + a->used, 0, 8);
    a->used += 8;
    *paramHandle = &p;
    return ACL_SUCCESS;
}

static ParaDetail* para_check(ArgsHandle* a, aclrtParamHandle ph, const char* api, int* code) {
    /* Compare addresses as integers: a foreign pointer must not be turned into an index. */
    uintptr_t at = (uintptr_t)ph, first = (uintptr_t)a->params;
    if (!ph || at < first || at >= first + a->nparams * sizeof(ParaDetail) || (at - first) % sizeof(ParaDetail)) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                       "paramHandle %p does not belong to this args handle (not one of its %u parameters)", ph,
                       a->nparams);
        return nullptr;
    }
    return static_cast<ParaDetail*>(ph);
}

EMU_API aclError aclrtKernelArgsGetPlaceHolderBuffer(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle,
                                                     size_t dataSize, void** bufferAddr) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!bufferAddr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "bufferAddr is NULL");
    if (dataSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "dataSize is 0");
    if (a->state == ARGS_FINAL || a->state == ARGS_UPDATED)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "cannot take a placeholder buffer: %s",
                      state_name(a->state));
    ParaDetail* p = para_check(a, paramHandle, __func__, &code);
    if (!p) return code;
    if (p->type != 1)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "paramHandle %p is an ordinary argument, not a placeholder",
                      paramHandle);
    if (p->ph_taken)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "placeholder %p already has a buffer", paramHandle);
    if (dataSize > args_room(a))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "placeholder data of %zu bytes overflows the %zu-byte argument buffer (%zu bytes used)", dataSize,
                      a->cap, a->used + a->ph_used);
    a->ph_used += dataSize;
    p->ph_taken = true;
    p->ph_data = (uint32_t)a->ph_used;
    p->ph_size = (uint32_t)dataSize;
    a->state = ARGS_PH_TAKEN;
    *bufferAddr = a->buf + a->cap - a->ph_used;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle, void* param,
                                           size_t paramSize) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!param) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "param is NULL");
    ParaDetail* p = para_check(a, paramHandle, __func__, &code);
    if (!p) return code;
    if (p->type != 0) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "paramHandle %p is a placeholder", paramHandle);
    if (paramSize != p->size)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "paramSize %zu differs from the appended size %u", paramSize,
                      p->size);
    memcpy(a->buf + p->offset, param, paramSize);
    if (a->state == ARGS_FINAL) a->state = ARGS_UPDATED;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    for (uint32_t i = 0; i < a->nparams; i++)
        if (a->params[i].type == 1 && !a->params[i].ph_taken)
            return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                          "placeholder argument %u has no buffer (call aclrtKernelArgsGetPlaceHolderBuffer)", i);
    a->state = ARGS_FINAL;
    return ACL_SUCCESS;
}
