/*
 * hcomm-kit CPU emulator, Hcomm data plane: what it asks of the diagnosis (diag/ registers at
 * library load; see base/hooks.h for the rules). Without diag/ the checker and the trace are off:
 * records and waits only set and take their flags, and a timeout's message is its headline.
 */
#ifndef HCOMM_KIT_EMU_HCOMM_HOOKS_H
#define HCOMM_KIT_EMU_HCOMM_HOOKS_H

#include "hcomm/dataplane.h"

namespace emu {

struct HcommHooks {
    /* The notify checker and the race checker (diag/checker.cc, diag/race.cc): */
    std::string (*record_slot)(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan);
    bool (*consume_slot)(const HTask& t, HThread* self, std::string* finding);
    void (*check_op_begin)(const HTask& t, HThread* self);
    std::string (*check_accesses)(const HTask& t, HThread* self);
    /* The cross-rank report for a failed wait (a timeout), ready to be an abort reason. */
    std::string (*wait_report)(Comm* c, const HTask& t, const HThread* self, const char* headline);
    /* HCOMM_KIT_TRACE: whether it is on, and a task that ran from t0 to t1. */
    bool (*trace_on)();
    void (*trace_task)(const HTask& t, const HThread* self, uint64_t t0, uint64_t t1);
};
extern HcommHooks hcomm_hooks;

/* Null-safe calls through hcomm_hooks (namespace hooks: diag/ defines the functions themselves
 * under the same names in namespace emu). */
namespace hooks {
/* Sets the flag of slot for task t run by self; "" or a lost-signal finding. */
inline std::string record_slot(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan) {
    if (hcomm_hooks.record_slot) return hcomm_hooks.record_slot(t, self, ctl, slot, slot_rank, chan);
    slot_record(ctl, slot);
    return "";
}
/* Takes the flag of t's slot: true when it was set (*finding: a record from another operation). */
inline bool consume_slot(const HTask& t, HThread* self, std::string* finding) {
    if (hcomm_hooks.consume_slot) return hcomm_hooks.consume_slot(t, self, finding);
    return slot_consume(t.slot_ctl, t.slot);
}
inline void check_op_begin(const HTask& t, HThread* self) {
    if (hcomm_hooks.check_op_begin) hcomm_hooks.check_op_begin(t, self);
}
inline std::string check_accesses(const HTask& t, HThread* self) {
    return hcomm_hooks.check_accesses ? hcomm_hooks.check_accesses(t, self) : std::string();
}
inline std::string wait_report(Comm* c, const HTask& t, const HThread* self, const char* headline) {
    return hcomm_hooks.wait_report ? hcomm_hooks.wait_report(c, t, self, headline) : std::string(headline);
}
inline bool trace_on() { return hcomm_hooks.trace_on && hcomm_hooks.trace_on(); }
inline void trace_task(const HTask& t, const HThread* self, uint64_t t0, uint64_t t1) {
    if (hcomm_hooks.trace_task) hcomm_hooks.trace_task(t, self, t0, t1);
}
}  // namespace hooks

}  // namespace emu

#endif
