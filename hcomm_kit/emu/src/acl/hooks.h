/*
 * hcomm-kit CPU emulator, ACL runtime layer: what the runtime asks of the layers above it (the
 * device-thread scheduler of hcomm/, the communicators of hccl/, the diagnosis of diag/), which
 * register at library load. See base/hooks.h for the rules; every entry may be null, and the
 * wrappers below say what happens then.
 */
#ifndef HCOMM_KIT_EMU_ACL_HOOKS_H
#define HCOMM_KIT_EMU_ACL_HOOKS_H

#include "acl/runtime.h"

namespace emu {

struct AclHooks {
    /* hcomm/: an ACL notify wait on a stream worker, running dev's device threads meanwhile
     * (stream_wait_slot: 1 consumed, 0 timeout, -1 aborted with *msg). */
    int (*wait_slot)(Device* dev, uint32_t slot, uint64_t deadline_ns, std::string* msg);
    /* hcomm/: what each device thread of dev is waiting for ("" none). */
    std::string (*describe_device)(Device* dev);
    /* hcomm/: the device is reset: stop its scheduler. */
    void (*device_reset)(Device* dev);
    /* hcomm/: a kernel entry returned on this worker: the launch's operations and channel uses
     * count as submitted, and what the kernel left open (a batch, acquired communicators) is
     * closed; returns a description of that, or "". */
    std::string (*kernel_returned)(KernelCtx& k);
    /* hcomm/: after kernel_returned and the stream's bookkeeping: wake the executor for the tasks
     * the kernel submitted unless helper_follows (kernel_end_submit). */
    void (*kernel_submitted)(Stream* s, bool helper_follows);
    /* hccl/: a kernel working on communicator c failed with *msg: abort c on every rank ("rank R:
     * msg"), after adding to *msg what c knows of it (links of this rank taken down); true when this
     * was the communicator's first abort. */
    bool (*kernel_failed)(Comm* c, std::string* msg, AbortKind kind);
    /* hccl/: the watchdog abandoned a kernel working on c (what: why): abort c with a report. */
    void (*kernel_overran)(Comm* c, const std::string& what);
    /* diag/: the host wrote n bytes at dst (aclrtMemcpy, aclrtMemset, ...; race checker). */
    void (*host_write)(const void* dst, uint64_t n);
    /* diag/: HCOMM_KIT_TRACE events of a launch (enqueued) and of a kernel run (t0..t1). */
    void (*trace_launch)(Stream* s, const char* name);
    void (*trace_kernel)(Stream* s, const char* name, uint64_t t0, uint64_t t1, const std::vector<Comm*>& comms);
};
extern AclHooks acl_hooks;

/* The host wrote n bytes at dst: HCCL-buffer bytes staged by the host count as freshly written for
 * the race checker (nothing without diag/). */
inline void note_host_write(const void* dst, uint64_t n) {
    if (acl_hooks.host_write) acl_hooks.host_write(dst, n);
}

/* What each device thread of dev is waiting for ("" none, or without hcomm/). */
inline std::string device_threads_account(Device* dev) {
    return acl_hooks.describe_device ? acl_hooks.describe_device(dev) : std::string();
}

}  // namespace emu

#endif
