/* HCCL host plane: the control messages of a communicator whose ranks are on several hosts
 * (net/transport.h CtlType). Each host has its own job segment for its ranks; what a rank changes
 * there that the other hosts' ranks read (the abort flag, a rank gone, channel requests and their
 * consumption, barrier arrivals) goes to them as a message, and the receiving process applies it
 * to its host's job segment with the code a local rank runs, so waiters there wake as they would
 * for a local change. Handlers run inside the network's progress: no lock of the communicator is
 * taken here, and what they send is queued by the network. */
#include "hccl/comm.h"
#include "hccl/hooks.h"
#include "net/hooks.h"

#include <climits>
#include <cstring>

namespace emu {

void net_send_far(Comm* c, CtlMsg m, const void* payload, size_t len) {
    m.key = c->net_key;
    m.from = c->rank;
    for (uint32_t r = 0; r < c->nranks; r++) {
        if (!comm_far(c, r) || !c->link[r] || c->dead[r].load()) continue;
        m.to = r;
        std::string err;
        if (c->link[r]->control(m, payload, len, &err))
            EMU_LOG(LOG_DEBUG, "communicator %s: control message %u to rank %u: %s", c->name.c_str(), m.type, r,
                    err.c_str());
    }
}

/* Sent to one rank of each other host: its host's job segment is shared by its ranks. */
static void send_to_far_hosts(Comm* c, CtlMsg m, const void* payload, size_t len) {
    m.key = c->net_key;
    m.from = c->rank;
    for (uint32_t r = 0; r < c->nranks; r++) {
        if (r >= c->far_lead.size() || !c->far_lead[r] || !c->link[r] || c->dead[r].load()) continue;
        m.to = r;
        std::string err;
        if (c->link[r]->control(m, payload, len, &err))
            EMU_LOG(LOG_DEBUG, "communicator %s: control message %u to rank %u: %s", c->name.c_str(), m.type, r,
                    err.c_str());
    }
}

void comm_call_posted(Comm* c, uint64_t seq, const char* text) {
    if (!c->net_key) return;
    CtlMsg m;
    m.type = (uint32_t)CtlType::CallPost;
    m.a = seq;
    send_to_far_hosts(c, m, text, strnlen(text, sizeof(CallSig::text) - 1));
}

void comm_call_checked(Comm* c, uint64_t seq) {
    if (!c->net_key) return;
    CtlMsg m;
    m.type = (uint32_t)CtlType::CallChecked;
    m.a = seq;
    send_to_far_hosts(c, m, nullptr, 0);
}

namespace {

void on_control(void* owner, const CtlMsg& m, const void* payload, size_t len) {
    Comm* c = static_cast<Comm*>(owner);
    JobSeg* j = c->job;
    if (!j || m.from >= c->nranks || m.to >= c->nranks) return;
    switch ((CtlType)m.type) {
        case CtlType::Abort: {
            std::string why(static_cast<const char*>(payload), payload ? len : 0);
            if (job_set_abort(j, (int)m.from, why, (AbortKind)m.a))
                rank_log("communicator %s aborted by rank %u of host %s", c->name.c_str(), m.from,
                         c->host[m.from].c_str());
            for (uint32_t r = 0; r < c->nranks; r++) /* the waiters of this host's ranks look again */
                if (!comm_far(c, r) && c->ctl[r] && !c->dead[r].load()) doorbell_ring(c->ctl[r]);
            break;
        }
        case CtlType::Gone:
            j->ranks[m.from].gone_ns.store(now_ns(), std::memory_order_relaxed); /* no record of it after this */
            j->ranks[m.from].state.store(kRankGone);
            job_wake(j);
            break;
        case CtlType::Mail: {
            MailEntry& e = j->mail[m.from][m.to].e[m.a % kMailDepth];
            e.notify_num = (uint32_t)m.b;
            e.protocol = (int32_t)m.c;
            e.slot_base = (uint32_t)m.d;
            e.engine = (int32_t)m.e;
            e.seq.store(m.a, std::memory_order_release);
            job_wake(j);
            break;
        }
        case CtlType::MailAck: { /* from consumed to's requests up to seq a */
            std::atomic<uint64_t>& cons = j->mail[m.to][m.from].consumed;
            uint64_t cur = cons.load();
            while (cur < m.a && !cons.compare_exchange_weak(cur, m.a)) {
            }
            job_wake(j);
            break;
        }
        case CtlType::BarArrive:
            barrier_arrive(c, m.from, (uint32_t)m.a);
            break;
        case CtlType::BarRelease:
            j->bar_count.store(0);
            j->bar_gen.store((uint32_t)m.a, std::memory_order_seq_cst);
            futex_wake(&j->bar_gen, INT_MAX, true);
            break;
        case CtlType::CallPost: { /* as the rank would have posted it here (diag/call_check.cc) */
            if (!m.a) break;
            CallSig& s = j->calls[m.from][m.a % kCallDepth];
            size_t n = std::min(payload ? len : 0, sizeof s.text - 1);
            memcpy(s.text, payload, n);
            s.text[n] = 0;
            s.seq.store(m.a, std::memory_order_seq_cst);
            std::string bad = hccl_hooks.far_call_posted ? hccl_hooks.far_call_posted(c, m.from, m.a) : "";
            if (bad.empty() || !job_set_abort(j, (int)c->rank, bad, AbortKind::Mismatch)) break;
            /* settle_call and every waiter here see the abort at once; the rest (the other hosts,
             * the device threads) after progress, outside the network's lock */
            rank_log("%s", bad.c_str());
            for (uint32_t r = 0; r < c->nranks; r++)
                if (!comm_far(c, r) && c->ctl[r] && !c->dead[r].load()) doorbell_ring(c->ctl[r]);
            net_defer(c->net_key, [c, bad] { comm_abort_spread(c, bad, AbortKind::Mismatch); });
            break;
        }
        case CtlType::CallChecked: {
            std::atomic<uint64_t>& ck = j->calls[m.from][m.a % kCallDepth].checked;
            uint64_t cur = ck.load();
            while (cur < m.a && !ck.compare_exchange_weak(cur, m.a)) {
            }
            break;
        }
        default:
            EMU_LOG(LOG_WARN, "communicator %s: unknown control message %u from rank %u", c->name.c_str(), m.type,
                    m.from);
    }
}

struct NetCtlHooks {
    NetCtlHooks() { net_hooks.control = on_control; }
} g_net_ctl_hooks;

}  // namespace
}  // namespace emu
