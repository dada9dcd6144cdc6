/* Diagnosis: the notify checker (HCOMM_KIT_CHECK, on by default). Every notify record stores who made
 * it (DevCtl::src, prov:: encoding) next to the flag. A record that finds the flag still set is a
 * lost signal (two records merge); a wait that consumes a record made by another call of its
 * operation (or by another operation of the communicator) takes a signal that was not meant for it.
 * Findings fail the operation (code kCheckErrorCode on every rank) or, with HCOMM_KIT_CHECK=warn,
 * are logged. */
#include "diag/board.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <set>

namespace emu {

std::string check_finding(Comm* c, const std::string& text) {
    std::string full = "[hcomm-kit check] " + text;
    rank_log("%s", full.c_str());
    if (check_mode() == 2) {
        EMU_LOG(LOG_WARN, "%s (HCOMM_KIT_CHECK=warn: the operation goes on)", full.c_str());
        return "";
    }
    (void)c;
    return full + " (HCOMM_KIT_CHECK=warn reports without failing; =0 turns the checker off)";
}

namespace {
/* HCOMM_KIT_FAULT_FINDING_HOLD_MS (tests): the finding just made by a device thread waits, before its
 * report is written, until the host began HcclCommDestroy (which waits for it, see there), or the
 * time passed: the window in which another rank's error let the host tear the communicator down
 * while this thread still reports. */
void finding_hold(Comm* c) {
    uint32_t ms = cfg().finding_hold_ms;
    if (!ms || !c) return;
    c->findings_held.fetch_add(1);
    for (uint64_t until = now_ns() + (uint64_t)ms * 1000000ull; !c->destroying.load() && now_ns() < until;)
        usleep(1000);
    usleep(20000); /* and lets the destroy go on into the teardown */
}

/* The words of a record by t into slot `slot` of rank slot_rank (its trace flow id, its provenance
 * when the checker is on) and the checker's note of it (self->recent: hang reports name a record
 * nobody consumed). ctl: the slot owner's control block (a stand-in for a rank on another host). */
void record_prepare(const HTask& t, HThread* self, const DevCtl* ctl, uint32_t slot, int slot_rank, bool chan,
                    bool chk, bool tr, uint64_t* fid, uint64_t* prov) {
    Comm* c = self && self->comm ? self->comm : t.comm;
    int rank = c ? comm_rank(c) : -1;
    *fid = chk && self ? vc_publish(self) : 0;
    if (!*fid && tr && self) *fid = trace_flow_id((uint32_t)(rank < 0 ? 0 : rank));
    if (tr) trace_flow(true, *fid, self, now_ns());
    *prov = 0;
    if (!chk) return;
    uint32_t code = thread_code(self);
    *prov = prov::make(t.tag16 == 0, chan, rank < 0 ? 0x7f : (uint32_t)rank, code, t.tag16, t.inst, t.use);
    if (self) {
        std::lock_guard<std::mutex> g(self->rec_m);
        HThread::RecentRecord& r = self->recent[self->nrecent++ % 8];
        r.ctl = ctl;
        r.slot = slot;
        r.slot_rank = slot_rank;
        r.prov = *prov;
        r.when_ns = now_coarse_ns(); /* hang reports: seconds */
        r.caller = t.caller;
        r.api = t.api;
        r.tag = t.tag;
        r.desc = t.desc;
        if (!(t.desc.kind || t.op == HOp::Record)) { /* a post record: only the slot is known */
            r.desc.kind = 0xff;
            r.desc.index = slot;
        }
        r.bidx = t.bidx;
        r.bsize = t.bsize;
        r.inst = t.inst;
        r.use = t.use;
    }
}

std::string lost_notify_text(Comm* c, const std::string& who, const std::string& what, uint64_t before) {
    return strprintf(
        "lost notify: %s, set %s while it was still set by %s that no wait has consumed yet; the two records merge "
        "into one, so a wait will miss a signal (a doubled record, or a record before the peer consumed the previous "
        "one)",
        who.c_str(), what.c_str(), prov_text(c, before).c_str());
}
}  // namespace

std::string record_slot(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan) {
    bool chk = check_mode() != 0, tr = trace_on();
    if (!chk && !tr) {
        slot_record(ctl, slot);
        return "";
    }
    Comm* c = self && self->comm ? self->comm : t.comm;
    int rank = c ? comm_rank(c) : -1;
    uint64_t fid = 0, p = 0;
    record_prepare(t, self, ctl, slot, slot_rank, chan, chk, tr, &fid, &p);
    ctl->flow[slot].store(fid, std::memory_order_release);
    if (!chk) {
        slot_record(ctl, slot);
        return "";
    }
    uint64_t before = ctl->src[slot].load(std::memory_order_relaxed);
    ctl->src[slot].store(p, std::memory_order_release);
    uint32_t old = ctl->slots[slot].exchange(1, std::memory_order_acq_rel);
    doorbell_ring(ctl);
    if (!old) return "";
    if (c && comm_aborted(c, nullptr)) return ""; /* leftovers of the operation that failed */
    finding_hold(c);
    uint32_t code = thread_code(self);
    std::string who = self ? strprintf("rank %d %s", rank, thread_name(code).c_str()) : std::string("the host");
    std::string at = t.caller ? " at " + code_line(t.caller) : std::string();
    who += strprintf(", %s (%s%s, %s)", task_pos(t.bidx, t.bsize).c_str(), t.api, at.c_str(),
                     op_text(t.tag, t.inst, t.use, slot_rank).c_str());
    std::string what = t.desc.kind || t.op == HOp::Record ? record_target_text(t, slot_rank)
                                                          : strprintf("notify slot %u of rank %d", slot, slot_rank);
    return check_finding(c, lost_notify_text(c, who, what, before));
}

void record_words(const HTask& t, HThread* self, const DevCtl* ctl, uint32_t slot, int slot_rank, bool chan,
                  uint64_t* flow, uint64_t* prov) {
    bool chk = check_mode() != 0, tr = trace_on();
    *flow = *prov = 0;
    if (chk || tr) record_prepare(t, self, ctl, slot, slot_rank, chan, chk, tr, flow, prov);
}

void remote_lost_notify(Comm* c, uint32_t slot, uint64_t prov, uint64_t before) {
    if (comm_aborted(c, nullptr)) return;
    std::string who = strprintf("rank %u %s (%s)", prov::rank(prov), thread_name(prov::thread(prov)).c_str(),
                                prov_text(c, prov).c_str());
    std::string what = strprintf("notify slot %u of rank %u (a record from another host)", slot, (unsigned)comm_rank(c));
    std::string f = check_finding(c, lost_notify_text(c, who, what, before));
    if (!f.empty()) comm_abort(c, f, AbortKind::Check);
}

bool consume_slot(const HTask& t, HThread* self, std::string* finding) {
    DevCtl* c = t.slot_ctl;
    uint32_t s = t.slot;
    bool chk = check_mode() != 0, tr = trace_on();
    if (!chk && !tr) return slot_consume(c, s);
    if (c->slots[s].load(std::memory_order_acquire) == 0) return false;
    /* Provenance first, then the flag (record_slot writes them in the other order): a record that
     * lands in between finds the flag still set and is reported as lost, never misattributed. */
    uint64_t vid = c->flow[s].exchange(0, std::memory_order_acq_rel);
    uint64_t p = chk ? c->src[s].exchange(0, std::memory_order_acq_rel) : 0;
    if (c->slots[s].exchange(0, std::memory_order_acq_rel) != 1) return false;
    if (tr) trace_flow(false, vid, self, now_ns());
    if (!chk) return true;
    if (self && vid && !(vid & kTraceOnlyId)) vc_join(self, vid);
    if (!(p & prov::kValid) || (p & prov::kHost) || t.tag16 == 0 || !t.comm) return true;
    /* Which call of its operation made the record, against the waiter's: the same operation (op
     * tag hash) and, for collectives, the same instance number on both ranks; for channel notifies
     * also the same use number of the channel (the only match for point-to-point calls, whose
     * instance numbers differ per partner). A finding needs every available match to fail. */
    bool chan = t.desc.kind == 1 && (p & prov::kChan);
    uint32_t ptag = prov::tag16(p);
    int d_inst = prov::delta(t.inst % prov::kMod, prov::inst(p));
    int d_use = chan ? prov::delta(t.use % prov::kMod, prov::use(p)) : 0;
    std::string other;
    bool same = ptag == t.tag16;
    if (same) {
        if (d_inst == 0 || (chan && d_use == 0)) return true;
    } else if (chan && d_use == 0) {
        return true; /* paired operators of different names */
    }
    finding_hold(t.comm);
    if (!same && !comm_op_tag(t.comm, ptag, &other)) return true; /* a tag this rank never ran: no claim */
    int rank = comm_rank(t.comm);
    std::string waiter = strprintf("rank %d %s, %s (%s%s on %s, %s)", rank, thread_name(thread_code(self)).c_str(),
                                   task_pos(t.bidx, t.bsize).c_str(), t.api,
                                   t.caller ? (" at " + code_line(t.caller)).c_str() : "",
                                   t.desc.kind == 1 ? strprintf("channel notify slot %u from rank %u", t.desc.index, t.desc.peer).c_str()
                                   : t.desc.kind == 2 ? strprintf("ACL notify id %u", t.desc.index).c_str()
                                                      : strprintf("thread notify slot %u", t.desc.index).c_str(),
                                   op_text(t.tag, t.inst, chan ? t.use : 0, t.desc.peer).c_str());
    std::string rec = strprintf("rank %u %s", prov::rank(p), thread_name(prov::thread(p)).c_str());
    int d = chan ? d_use : d_inst;
    const char* unit = chan ? "use of the channel" : "call of the operation";
    std::string why;
    if (same && d > 0)
        why = strprintf("it was recorded by %s in a later %s (%d ahead): the matching call there never recorded it (a "
                        "missing record in that rank's call, or one wait too many here)",
                        rec.c_str(), unit, d);
    else if (same)
        why = strprintf("it was recorded by %s in an earlier %s (%d behind) and left set: that call recorded it once more "
                        "than it was waited for (a doubled record), and this call consumed the leftover instead of its "
                        "own signal",
                        rec.c_str(), unit, -d);
    else
        why = strprintf("it was recorded by %s for another operation, op '%s': notifies of two operations met (collective "
                        "calls that do not match across ranks, or two operations sharing a channel or thread at once)",
                        rec.c_str(), other.c_str());
    *finding = check_finding(t.comm, "notify from another call: " + waiter + " consumed a notify, but " + why);
    return true;
}

}  // namespace emu
