/* HcommKitStreamCalls (hcomm_kit/emu_ext.h): a host's launch sequence (go, launch, done, sync) as one
 * call. Each call goes through its public function, so checks, codes and messages are theirs.
 *
 * With HCOMM_KIT_CALLS_INLINE on an idle stream, the calling thread runs the tasks itself
 * (stream_inline_begin / stream_inline_end): the kernel entry under the crash guard and its launch
 * timeout, then the "done" wait, which runs the device threads' tasks meanwhile (a helper, see
 * sched.cc). A blocking call then needs no thread hand-off on this rank: the stream's worker is
 * neither woken nor waited for, which on a loaded or oversubscribed node saves two wake-ups of a
 * sleeping thread (each tens of microseconds on a VM) per call. */
#include "hcomm/dataplane.h"

using namespace emu;

static int32_t one_call(aclrtStream stream, const HcommKitStreamCall& c) {
    switch (c.kind) {
        case HCOMM_KIT_CALL_LAUNCH:
            return aclrtLaunchKernelWithConfig(reinterpret_cast<aclrtFuncHandle>(c.a), c.u32, stream,
                                               reinterpret_cast<aclrtLaunchKernelCfg*>(c.c),
                                               reinterpret_cast<aclrtArgsHandle>(c.b), nullptr);
        case HCOMM_KIT_CALL_THREAD_RECORD:
            return HcommThreadNotifyRecordOnThread(c.a, c.b, c.u32);
        case HCOMM_KIT_CALL_THREAD_WAIT:
            if (c.b > UINT32_MAX)
                return seterr(HCCL_E_PARA, "HcommThreadNotifyWaitOnThread", "timeout %llu s is above %u",
                              (unsigned long long)c.b, UINT32_MAX);
            return HcommThreadNotifyWaitOnThread(c.a, c.u32, (uint32_t)c.b);
        case HCOMM_KIT_CALL_NOTIFY_RECORD:
            return aclrtRecordNotify(reinterpret_cast<aclrtNotify>(c.a), stream);
        case HCOMM_KIT_CALL_NOTIFY_WAIT:
            return aclrtWaitAndResetNotify(reinterpret_cast<aclrtNotify>(c.a), stream, c.u32);
        default:
            return seterr(ACL_ERROR_INVALID_PARAM, "HcommKitStreamCalls", "call kind %u is not one of HCOMM_KIT_CALL_* (1-5)",
                          c.kind);
    }
}

EMU_API int32_t HcommKitStreamCalls(aclrtStream stream, const HcommKitStreamCall* calls, uint32_t n, uint32_t flags,
                                    uint32_t* failed) {
    const char* api = __func__;
    uint32_t where = 0;
    if (!failed) failed = &where;
    *failed = 0;
    if (int r = check_init(api)) return r;
    if (n && !calls) return seterr(ACL_ERROR_INVALID_PARAM, api, "calls is NULL with n = %u", n);
    if (flags & ~(HCOMM_KIT_CALLS_SYNC | HCOMM_KIT_CALLS_INLINE))
        return seterr(ACL_ERROR_INVALID_PARAM, api, "unknown flag bits 0x%x", flags & ~3u);
    const bool sync = flags & HCOMM_KIT_CALLS_SYNC;
    Stream* s = nullptr;
    if (sync) {
        int code = 0;
        s = stream_resolve(stream, &code, api);
        if (!s) {
            *failed = n;
            return code;
        }
    }
    const bool inl = sync && (flags & HCOMM_KIT_CALLS_INLINE) && stream_inline_begin(s);
    for (uint32_t i = 0; i < n; i++) {
        if (int32_t r = one_call(stream, calls[i])) {
            *failed = i;
            if (inl) stream_inline_end(s, false, api); /* what was enqueued goes to the worker, as usual */
            return r;
        }
    }
    if (!sync) return 0;
    *failed = n;
    return inl ? stream_inline_end(s, true, "aclrtSynchronizeStream") : stream_sync(s, -1, "aclrtSynchronizeStream");
}
