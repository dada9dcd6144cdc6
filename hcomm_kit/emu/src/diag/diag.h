/*
 * hcomm-kit CPU emulator, diagnosis (the top layer: it may call every other one, and none calls
 * it but through the hook tables it fills in at library load, diag/hooks.cc): the notify checker,
 * the race checker, cross-rank hang analysis and reports, per-rank logs, state dumps, the
 * collective-call check and the trace.
 */
#ifndef HCOMM_KIT_EMU_DIAG_DIAG_H
#define HCOMM_KIT_EMU_DIAG_DIAG_H

#include "hccl/comm.h"

namespace emu {

/* Notify operations with the checker's bookkeeping. record_slot sets the flag for task t run by
 * thread self and returns "" or a lost-signal finding; consume_slot clears a set flag and returns
 * true, with *finding set when the record came from another operation. */
std::string record_slot(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan);
bool consume_slot(const HTask& t, HThread* self, std::string* finding);
/* A record into a slot of a rank on another host (net/): its trace flow id and provenance, with
 * the checker's note, as record_slot makes them; the slot's owner stores them (hcomm/remote.cc). */
void record_words(const HTask& t, HThread* self, const DevCtl* ctl, uint32_t slot, int slot_rank, bool chan,
                  uint64_t* flow, uint64_t* prov);
/* A record from another host found slot `slot` of this rank still set (before: its provenance). */
void remote_lost_notify(Comm* c, uint32_t slot, uint64_t prov, uint64_t before);
/* The race checker's bookkeeping when thread self starts a task of another kernel launch. */
void check_op_begin(const HTask& t, HThread* self);
/* The race checker's bookkeeping of an access task (Copy/Reduce) before it runs: "" or a finding. */
std::string check_accesses(const HTask& t, HThread* self);
/* The host wrote n bytes at dst (aclrtMemcpy, aclrtMemset, ...): HCCL-buffer bytes staged by the
 * host count as freshly written for the race checker. */
void diag_host_write(const void* dst, uint64_t n);
/* A finding of the checker: logged, and in fail mode returned so the task fails (empty: go on). */
std::string check_finding(Comm* c, const std::string& text);

/* The cross-rank report for a failed wait (timeout), ready to be an abort reason. */
std::string diag_wait_report(Comm* c, const HTask& t, const HThread* self, const char* headline);
/* Cross-rank report of everything communicator c waits for (launch timeouts, dumps). */
std::string diag_comm_report(Comm* c, const char* headline);
/* Communicator lifetime: the monitor publishes and analyses live communicators. */
void diag_comm_added(Comm* c);
void diag_comm_removed(Comm* c);
/* The per-rank log's writer (rank_log in base/ calls it through BaseHooks). */
void diag_logv(const char* fmt, va_list ap);
/* The collective-call check (HcommKitCallCheck): "" or the mismatch found. */
std::string call_check(Comm* c, int peer, const char* mine, const char* expect);
/* The collective-call check for a post that came from another host (hccl_hooks.far_call_posted). */
std::string far_call_posted(Comm* c, uint32_t from, uint64_t seq);

/* HCOMM_KIT_TRACE (diag/trace.cc): whether it is on, and the events. Flow ids of trace-only records
 * carry kTraceOnlyId (the race checker's clock-vector ids double as flow ids otherwise). */
constexpr uint64_t kTraceOnlyId = 1ull << 55;
bool trace_on();
uint64_t trace_flow_id(uint32_t rank);
void trace_comm_added(Comm* c);
void trace_comm_removed(Comm* c);
void trace_task(const HTask& t, const HThread* self, uint64_t t0, uint64_t t1);
void trace_flow(bool start, uint64_t id, const HThread* self, uint64_t ts);
void trace_kernel(Stream* s, const char* name, uint64_t t0, uint64_t t1, const std::vector<Comm*>& comms);
void trace_launch(Stream* s, const char* name);
void trace_note(Comm* c, const char* name, const std::string& args);

}  // namespace emu

#endif
