/* The diagnosis fills in the hook tables of the layers below it at library load (base/hooks.h):
 * that is the only way they reach it. */
#include "acl/hooks.h"
#include "base/hooks.h"
#include "diag/diag.h"
#include "hccl/hooks.h"
#include "hcomm/hooks.h"

namespace emu {
namespace {

void trace_launch_hook(Stream* s, const char* name) {
    if (trace_on()) trace_launch(s, name);
}

void trace_kernel_hook(Stream* s, const char* name, uint64_t t0, uint64_t t1, const std::vector<Comm*>& comms) {
    if (trace_on()) trace_kernel(s, name, t0, t1, comms);
}

struct DiagHooks {
    DiagHooks() {
        base_hooks.rank_logv = diag_logv;

        acl_hooks.host_write = diag_host_write;
        acl_hooks.trace_launch = trace_launch_hook;
        acl_hooks.trace_kernel = trace_kernel_hook;

        hcomm_hooks.record_slot = record_slot;
        hcomm_hooks.consume_slot = consume_slot;
        hcomm_hooks.record_words = record_words;
        hcomm_hooks.remote_lost_notify = remote_lost_notify;
        hcomm_hooks.check_op_begin = check_op_begin;
        hcomm_hooks.check_accesses = check_accesses;
        hcomm_hooks.wait_report = diag_wait_report;
        hcomm_hooks.trace_on = trace_on;
        hcomm_hooks.trace_task = trace_task;

        hccl_hooks.comm_added = diag_comm_added;
        hccl_hooks.comm_removed = diag_comm_removed;
        hccl_hooks.comm_report = diag_comm_report;
        hccl_hooks.trace_note = trace_note;
        hccl_hooks.call_check = call_check;
        hccl_hooks.far_call_posted = far_call_posted;
    }
} g_diag_hooks;

}  // namespace
}  // namespace emu
