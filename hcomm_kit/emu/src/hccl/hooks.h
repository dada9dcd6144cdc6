/*
 * hcomm-kit CPU emulator, HCCL host plane: what the communicators ask of the diagnosis (diag/
 * registers at library load; see base/hooks.h for the rules).
 */
#ifndef HCOMM_KIT_EMU_HCCL_HOOKS_H
#define HCOMM_KIT_EMU_HCCL_HOOKS_H

#include <string>

namespace emu {

struct Comm;

struct HcclHooks {
    /* A communicator is ready / about to be torn down: the monitor, the race checker and the trace
     * publish and analyse live communicators. */
    void (*comm_added)(Comm* c);
    void (*comm_removed)(Comm* c);
    /* Cross-rank report of everything communicator c waits for, under headline (launch timeouts). */
    std::string (*comm_report)(Comm* c, const char* headline);
    /* An instant on communicator c's host track of the trace (HCOMM_KIT_TRACE): name is static,
     * args the body of a JSON object (the algorithm selection, hccl/tuner.cc). */
    void (*trace_note)(Comm* c, const char* name, const std::string& args);
    /* The collective-call check (diag/call_check.cc): posts this rank's description of its next
     * collective call (peer < 0); "" or the mismatch found (the communicator is then aborted). */
    std::string (*call_check)(Comm* c, int peer, const char* mine, const char* expect);
    /* The same check when rank `from` of another host posted collective call seq (its post is in
     * this host's job segment now): "" or the mismatch with this host's ranks' posts of it. Runs
     * inside the network's progress: reads the job segment only. */
    std::string (*far_call_posted)(Comm* c, uint32_t from, uint64_t seq);
    /* The timing model (model/) forgets what it cached of a communicator being destroyed. */
    void (*model_comm_removed)(Comm* c);
    /* HCOMM_KIT_TRACE_CLOCK=model (diag/trace.cc): every operation of c this rank's model log
     * holds, every rank's tasks on the modelled clock, as trace event items; *note what was left out. */
    std::string (*model_trace)(Comm* c, std::string* note);
};
extern HcclHooks hccl_hooks;

}  // namespace emu

#endif
