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
    /* A record into a slot of a rank reached over the network: the words a local record stores
     * (trace flow, provenance); and a lost notify found by the owner of such a slot. */
    void (*record_words)(const HTask& t, HThread* self, const DevCtl* ctl, uint32_t slot, int slot_rank, bool chan,
                         uint64_t* flow, uint64_t* prov);
    void (*remote_lost_notify)(Comm* c, uint32_t slot, uint64_t prov, uint64_t before);
    void (*check_op_begin)(const HTask& t, HThread* self);
    std::string (*check_accesses)(const HTask& t, HThread* self);
    /* The cross-rank report for a failed wait (a timeout), ready to be an abort reason. */
    std::string (*wait_report)(Comm* c, const HTask& t, const HThread* self, const char* headline);
    /* HCOMM_KIT_TRACE: whether it is on, and a task that ran from t0 to t1. */
    bool (*trace_on)();
    void (*trace_task)(const HTask& t, const HThread* self, uint64_t t0, uint64_t t1);
    /* The timing model (model/): a kernel queues task t on thread th (sets t.mid when it logs it);
     * the wait t consumed the record of task `rec` (DevCtl::mrec, 0: not a modelled one); the
     * running kernel returned. */
    void (*model_emit)(HTask& t, HThread* th);
    void (*model_matched)(const HTask& t, uint64_t rec);
    void (*model_kernel_end)();
};
extern HcommHooks hcomm_hooks;

/* Null-safe calls through hcomm_hooks (namespace hooks: diag/ defines the functions themselves
 * under the same names in namespace emu). */
namespace hooks {
/* Sets the flag of slot for task t run by self; "" or a lost-signal finding. */
inline std::string record_slot(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan) {
    /* before the flag (its store releases this one): the wait that takes the flag reads the id */
    ctl->mrec[slot].store(t.mid, std::memory_order_relaxed);
    if (hcomm_hooks.record_slot) return hcomm_hooks.record_slot(t, self, ctl, slot, slot_rank, chan);
    slot_record(ctl, slot);
    return "";
}
/* Takes the flag of t's slot: true when it was set (*finding: a record from another operation). */
inline bool consume_slot(const HTask& t, HThread* self, std::string* finding) {
    bool got = hcomm_hooks.consume_slot ? hcomm_hooks.consume_slot(t, self, finding) : slot_consume(t.slot_ctl, t.slot);
    if (got) {
        /* taken with the flag: the next record of this slot comes after this thread's next task */
        uint64_t rec = t.slot_ctl->mrec[t.slot].exchange(0, std::memory_order_acquire);
        if (t.mid && hcomm_hooks.model_matched) hcomm_hooks.model_matched(t, rec);
    }
    return got;
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
inline void model_emit(HTask& t, HThread* th) {
    if (hcomm_hooks.model_emit) hcomm_hooks.model_emit(t, th);
}
inline void model_kernel_end() {
    if (hcomm_hooks.model_kernel_end) hcomm_hooks.model_kernel_end();
}
}  // namespace hooks

}  // namespace emu

#endif
