/*
 * hcomm-kit CPU emulator, base layer: what base code asks of the layers above it.
 *
 * Every layer that calls upward owns a table like this one (acl/hooks.h, hcomm/hooks.h,
 * hccl/hooks.h): plain function pointers, zero until the upper layer registers at library load
 * (a static registrar in its sources), so the lower layer never includes an upper header. Every
 * entry may be null (a build without that layer, such as a test linking only base/): callers go
 * through the null-safe wrappers and fall back to doing nothing more than their own job.
 * Registration happens during the library's static initialisation, before any API call, and the
 * tables are never written again.
 */
#ifndef HCOMM_KIT_EMU_BASE_HOOKS_H
#define HCOMM_KIT_EMU_BASE_HOOKS_H

#include <cstdarg>
#include <string>

namespace emu {

struct BaseHooks {
    /* diag/: writes one line of the per-rank log (HCOMM_KIT_LOG_DIR), see rank_log. */
    void (*rank_logv)(const char* fmt, va_list ap);
    /* acl/: an error was recorded on this thread. When the thread runs a kernel (an AICPU worker:
     * the kernel cannot read aclGetRecentErrMsg), keeps err as the launch's first error and
     * returns the kernel's name ("?" unknown); nullptr otherwise. */
    const char* (*kernel_error)(const std::string& err);
};
extern BaseHooks base_hooks;

}  // namespace emu

#endif
