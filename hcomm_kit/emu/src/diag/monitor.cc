/* Diagnosis: the monitor. A monitor thread per process publishes, every kTickNs, a snapshot of every
 * live communicator of the process into its rank's area of the job segment, and analyses them when a
 * wait is long. When the same set of waits is stuck in two analyses kTickNs apart with no progress
 * anywhere, the hang is certain: the monitor aborts the communicator with a report, whatever
 * HCCL_EXEC_TIMEOUT says. Waits that are merely long get a progress line every 10 s. It also
 * answers the launcher's state-dump requests, and gives the reports of timeouts and launch
 * timeouts. */
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
#include <deque>
#include <memory>
#include <set>

namespace emu {

namespace {
/* ================================================================ monitor */

struct MonState {
    uint64_t stuck_sig = 0;
    uint64_t stuck_at = 0;
    uint64_t next_progress = 0;
    uint64_t last_published_progress = ~0ull;
    uint64_t dead_seen = 0; /* when a dead rank was first seen (0: none) */
    uint64_t next_spin = 0; /* progress lines about this rank's own kernel running without issuing tasks */
    bool reported = false;
    /* HCOMM_KIT_FAULT_MONITOR_LAG: snapshots built but not yet published, oldest first */
    std::deque<std::unique_ptr<DiagSnap>> lagging;
};

/* HCOMM_KIT_FAULT_MONITOR_LAG (tests): rank c->rank's snapshots are published lag_ms late, as when its
 * monitor thread is not run for that long; returns false when c is not the lagging rank. */
bool publish_lagged(Comm* c, MonState& st, const DiagSnap& fresh) {
    if (cfg().monitor_lag_rank != (int)c->rank) return false;
    st.lagging.emplace_back(new DiagSnap(fresh));
    const uint64_t lag = (uint64_t)cfg().monitor_lag_ms * 1000000ull;
    std::unique_ptr<DiagSnap> due;
    while (!st.lagging.empty() && fresh.taken_ns - st.lagging.front()->taken_ns >= lag) {
        due = std::move(st.lagging.front());
        st.lagging.pop_front();
    }
    if (due) publish_snap(c, *due);
    return true;
}

std::mutex& g_mon_m = *new std::mutex();
std::map<Comm*, MonState>& g_mon = *new std::map<Comm*, MonState>();
std::condition_variable& g_mon_cv = *new std::condition_variable();
bool g_mon_started = false;
int64_t g_dump_mtime = -1;

/* The oldest blocked wait of this rank (0: none). */
uint64_t oldest_wait(const DiagSnap& s, uint64_t now) {
    uint64_t best = 0;
    auto take = [&](const DiagWait& w) {
        if (w.since_ns && w.since_ns < now && now - w.since_ns > best) best = now - w.since_ns;
    };
    for (uint32_t i = 0; i < s.nthreads; i++)
        if (s.threads[i].state == 2) take(s.threads[i].head);
    for (uint32_t i = 0; i < s.nstreams; i++)
        if (s.streams[i].state == 2) take(s.streams[i].wait);
    if (s.host_connect && s.host_call_since && s.host_call_since < now && now - s.host_call_since > best)
        best = now - s.host_call_since;
    return best;
}

void monitor_comm(Comm* c, MonState& st, const DiagSnap& mine) {
    JobSeg* j = c->job;
    uint64_t now = now_ns();
    if (comm_aborted(c, nullptr)) return;
    /* This rank's own kernel running without issuing tasks: a progress line every interval (the
     * ranks waiting on it name it too). It ends when it returns or at its launch timeout. */
    {
        const uint64_t every = (uint64_t)cfg().progress_s * 1000000000ull;
        uint64_t longest = 0;
        std::string text;
        for (uint32_t i = 0; i < mine.nkernels; i++) {
            const DiagKernel& k = mine.kernels[i];
            std::string t = spin_text(k, now);
            uint64_t since = std::max(k.start_ns, k.last_task_ns);
            if (t.empty() || now - std::min(now, since) < longest) continue;
            longest = now - std::min(now, since);
            text = t;
        }
        if (longest < every) {
            st.next_spin = 0;
        } else if (longest / every > st.next_spin) {
            st.next_spin = longest / every;
            std::string line = strprintf("[hcomm-kit] rank %u %s", c->rank, text.c_str());
            EMU_LOG(LOG_WARN, "%s", line.c_str());
            rank_log("%s", line.c_str());
        }
    }
    uint64_t oldest = oldest_wait(mine, now);
    bool stream_barrier = false;
    for (uint32_t i = 0; i < mine.nstreams; i++)
        if (mine.streams[i].state == 3 && now - mine.streams[i].since_ns > kAnalyseAfterNs) stream_barrier = true;
    if (oldest < kAnalyseAfterNs && !stream_barrier) {
        st.stuck_sig = 0;
        st.next_progress = 0;
        return;
    }
    j->attention_ns.store(now, std::memory_order_relaxed);
    Analysis A;
    analyse(c, A);
    /* A dead rank is the cause of every wait on it, not a deadlock: the waits on it fail through
     * their own liveness checks (507057, naming the wait and the dead rank). Should none of them do
     * so within a second (only indirect waits left), fail the communicator here the same way. */
    for (uint32_t r = 0; r < A.ranks.size(); r++)
        if (A.ranks[r].dead) {
            if (!st.dead_seen) st.dead_seen = now;
            if (now - st.dead_seen >= kDeadGraceNs) {
                comm_abort(c, comm_dead_msg(c, r), AbortKind::PeerDead);
                st.reported = true;
            }
            return;
        }
    bool any = false;
    for (const Node& nd : A.nodes)
        if (nd.stuck && nd.type != Node::Host) any = true;
    /* No verdict for a communicator with ranks on other hosts: their boards are in their hosts' job
     * segments, so a wait on them can never be proved stuck here (it ends at its timeout instead). */
    if (any && !(c->net_key && c->nlocal < c->nranks)) {
        uint64_t sig = stuck_signature(A);
        uint64_t first_ns = now, last_ns = 0;
        for (const Node& nd : A.nodes) {
            if (!nd.stuck) continue;
            const DiagWait* w = node_wait(A, nd);
            uint64_t since = w ? w->since_ns : nd.type == Node::Connect ? A.ranks[nd.rank].s->host_call_since : 0;
            if (since && since < first_ns) first_ns = since;
            last_ns = std::max(last_ns, since);
        }
        /* A verdict needs every rank's snapshot read after the last of these waits began: whatever a
         * waiting rank recorded before its wait is then in the others' snapshots. A rank the OS has
         * not run for a while (a loaded node, a stopped process) still shows its older state, e.g. a
         * wait whose notify has been recorded since; the others wait for it to publish again. */
        bool views_current = true;
        for (const RankView& v : A.ranks)
            if (v.have && v.seen_ns < last_ns) views_current = false;
        if (sig == st.stuck_sig && now - st.stuck_at >= kTickNs && views_current) {
            std::string head = strprintf(
                "[hcomm-kit] DEADLOCK on communicator %s (%u ranks), found by rank %u: the waits below can never be "
                "satisfied, so they fail now instead of after HCCL_EXEC_TIMEOUT=%u s (stuck for %.1f s)",
                c->name.c_str(), c->nranks, c->rank, cfg().default_kernel_timeout_s, secs(now - first_ns));
            std::vector<std::vector<int>> cycles;
            std::string text = report_text(A, c, head, true, &cycles);
            if (comm_abort(c, text, AbortKind::Deadlock)) {
                EMU_LOG(LOG_ERROR, "%s", text.c_str());
                rank_log("%s", text.c_str());
                write_report_file(c, "deadlock", report_json(A, c, "deadlock", head, cycles));
            }
            st.reported = true;
            return;
        }
        if (sig != st.stuck_sig) {
            st.stuck_sig = sig;
            st.stuck_at = now;
        }
    } else {
        st.stuck_sig = 0;
    }
    /* long waits: a progress line every 10 s */
    const uint64_t every = (uint64_t)cfg().progress_s * 1000000000ull;
    if (oldest >= every) {
        uint64_t bucket = oldest / every;
        if (bucket > st.next_progress) {
            st.next_progress = bucket;
            /* The wait of this rank the others hang on: a device thread's wait for another rank
             * first, then any device thread's, then a stream's (usually the host's "done"); the
             * oldest of the kind. */
            const Node* best = nullptr;
            uint64_t age = 0;
            int best_prio = -1;
            for (const Node& nd : A.nodes) {
                if (nd.rank != (int)c->rank) continue;
                const DiagWait* w = node_wait(A, nd);
                if (!w || !w->since_ns) continue;
                int prio = nd.type == Node::ThreadWait ? (w->kind == 1 ? 2 : 1) : 0;
                uint64_t a = now - std::min(now, w->since_ns);
                if (prio > best_prio || (prio == best_prio && a >= age)) {
                    best_prio = prio;
                    age = a;
                    best = &nd;
                }
            }
            if (best) {
                const DiagWait& w = *node_wait(A, *best);
                std::string line = strprintf("[hcomm-kit] %s has waited %.0f s for %s (%s, %s)", node_who(A, *best).c_str(),
                                             secs(age), wait_text(w).c_str(), w.api, task_pos(w.bidx, w.bsize).c_str());
                std::string spin = spinning_kernels(A, w.kind == 1 ? (int)w.peer : -1);
                if (w.kind == 1 && w.peer < A.ranks.size()) {
                    std::string peer = rank_summary(A, w.peer, "");
                    /* the peer's own kernel running without issuing tasks is the news, not its host */
                    std::string own;
                    if (A.ranks[w.peer].have)
                        for (uint32_t i = 0; i < A.ranks[w.peer].s->nkernels && own.empty(); i++)
                            own = spin_text(A.ranks[w.peer].s->kernels[i], A.now);
                    line += "; " + (own.empty() ? peer.substr(0, peer.find('\n')) : strprintf("rank %u ", w.peer) + own);
                    uint32_t p = w.peer;
                    if (A.ranks[p].have) {
                        const DiagChan* ch = find_chan(*A.ranks[p].s, c->rank);
                        if (ch && w.use > ch->uses)
                            line += strprintf("; rank %u has not started its use #%u of the channel yet (it is at #%u)", p,
                                              w.use, ch->uses);
                    }
                } else {
                    std::string rec = recorder_text(A, *best);
                    if (!rec.empty()) line += "; " + rec;
                }
                if (!spin.empty()) line += "; " + spin;
                line += strprintf(" (timeout %s)", w.timeout_s ? strprintf("%u s", w.timeout_s).c_str() : "none");
                EMU_LOG(LOG_WARN, "%s", line.c_str());
                rank_log("%s", line.c_str());
            } else if (mine.host_connect && A.connect_node[c->rank] >= 0) {
                const Node& nd = A.nodes[A.connect_node[c->rank]];
                std::string line = strprintf("[hcomm-kit] rank %u host %s (HCCL_CONNECT_TIMEOUT %u s)", c->rank,
                                             wait_detail(A, nd).c_str(), cfg().connect_timeout_s);
                for (uint32_t p = 0; p < A.ranks.size() && p < 64; p++)
                    if (mine.host_connect >> p & 1) {
                        std::string peer = rank_summary(A, p, "");
                        line += "; " + peer.substr(0, peer.find('\n'));
                    }
                EMU_LOG(LOG_WARN, "%s", line.c_str());
                rank_log("%s", line.c_str());
            }
        }
    }
}

/* Launcher state dumps: $HCOMM_KIT_JOB_DIR/dump.request -> rank<R>.state.json. */
void answer_dump_request() {
    const std::string& dir = cfg().job_dir;
    if (dir.empty()) return;
    struct stat stv;
    if (stat((dir + "/dump.request").c_str(), &stv) != 0) return;
    int64_t mt = (int64_t)stv.st_mtim.tv_sec * 1000000000ll + stv.st_mtim.tv_nsec;
    if (mt == g_dump_mtime) return;
    g_dump_mtime = mt;
    std::string r = world_rank_text();
    std::string summary, report;
    for (auto& kv : g_mon) {
        Comm* c = kv.first;
        Analysis A;
        analyse(c, A);
        std::string rep = report_text(A, c, strprintf("[hcomm-kit] state of communicator %s (%u ranks) seen by rank %u",
                                                      c->name.c_str(), c->nranks, c->rank), false);
        report += (report.empty() ? "" : "\n") + rep;
        if (summary.empty()) {
            const DiagSnap& s = *A.ranks[c->rank].s;
            uint64_t now = A.now;
            std::string what;
            /* its own kernel running without issuing tasks first: the others wait on it */
            for (uint32_t i = 0; i < s.nkernels && what.empty(); i++) what = spin_text(s.kernels[i], now);
            for (uint32_t i = 0; i < s.nthreads && what.empty(); i++)
                if (s.threads[i].state == 2)
                    what = strprintf("%s waits for %s (%s, %.1f s)", thread_name(s.threads[i].code).c_str(),
                                     wait_text(s.threads[i].head).c_str(), s.threads[i].head.api,
                                     secs(now - std::min(now, s.threads[i].head.since_ns)));
            for (uint32_t i = 0; i < s.nstreams && what.empty(); i++)
                what = strprintf("stream %u %s", s.streams[i].id,
                                 s.streams[i].state == 2 ? ("waits for " + wait_text(s.streams[i].wait)).c_str()
                                                         : ("runs " + std::string(s.streams[i].what)).c_str());
            if (what.empty() && s.host_call[0])
                what = strprintf("host blocked in %s for %.1f s", s.host_call, secs(now - std::min(now, s.host_call_since)));
            if (what.empty()) what = s.host_sync ? "host in a synchronize call, nothing queued" : "idle (no hcomm-kit work)";
            std::string others = spinning_kernels(A, (int)c->rank);
            if (!others.empty()) what += "; " + others;
            summary = strprintf("communicator %s rank %u: %s", c->name.c_str(), c->rank, what.c_str());
        }
    }
    if (summary.empty()) summary = "no live communicator";
    std::string name = r.empty() ? strprintf("pid%d", (int)getpid()) : "rank" + r;
    std::string json = strprintf("{\"rank\": %s, \"pid\": %d, \"summary\": \"%s\", \"report\": \"%s\"}\n",
                                 r.empty() ? "null" : r.c_str(), (int)getpid(), json_esc(summary).c_str(),
                                 json_esc(report).c_str());
    std::string path = dir + "/" + name + ".state.json", tmp = path + ".tmp";
    if (FILE* f = fopen(tmp.c_str(), "w")) {
        fwrite(json.data(), 1, json.size(), f);
        fclose(f);
        rename(tmp.c_str(), path.c_str());
    }
}

void monitor_main() {
    background_thread_init();
    std::unique_lock<std::mutex> lk(g_mon_m);
    DiagSnap* snap = new DiagSnap;
    for (;;) {
        g_mon_cv.wait_for(lk, std::chrono::nanoseconds(kTickNs));
        for (auto& kv : g_mon) {
            Comm* c = kv.first;
            MonState& st = kv.second;
            build_snap(c, snap);
            /* Republish when something moved, or when a rank asked for attention; otherwise only
             * the heartbeat says the snapshot is current. */
            uint64_t att = c->job->attention_ns.load(std::memory_order_relaxed);
            bool attention = att && now_ns() - att < 2 * kFreshNs;
            uint64_t key = snap->progress ^ ((uint64_t)snap->nthreads << 40) ^ ((uint64_t)snap->nstreams << 48) ^
                           ((uint64_t)snap->host_sync << 56);
            if (publish_lagged(c, st, *snap)) {
                /* published late (fault injection) */
            } else if (attention || key != st.last_published_progress || snap->nthreads || snap->nstreams) {
                publish_snap(c, *snap);
                st.last_published_progress = key;
            } else {
                c->job->diag[c->rank].heartbeat_ns.store(snap->taken_ns, std::memory_order_release);
            }
            monitor_comm(c, st, *snap);
        }
        answer_dump_request();
    }
}
}  // namespace

void diag_comm_added(Comm* c) {
    c->p2p_seq.assign(c->nranks, 0);
    c->p2p_sent.assign(c->nranks, 0);
    c->p2p_received.assign(c->nranks, 0);
    trace_comm_added(c);
    race_comm_added(c);
    std::lock_guard<std::mutex> g(g_mon_m);
    g_mon[c];
    if (!g_mon_started) {
        g_mon_started = true;
        std::thread(monitor_main).detach();
    }
    /* an empty first snapshot, so peers see this rank as present and idle at once */
    DiagSnap* s = new DiagSnap;
    build_snap(c, s);
    publish_snap(c, *s);
    delete s;
}

void diag_comm_removed(Comm* c) {
    trace_comm_removed(c);
    race_comm_removed(c);
    std::lock_guard<std::mutex> g(g_mon_m);
    g_mon.erase(c);
    if (!c->job || !check_mode() || comm_aborted(c, nullptr)) return;
    /* a last snapshot: the records this rank made that nobody consumed yet stay known to the others'
     * hang reports (a record to the wrong peer leaves one behind while its intended waiter hangs) */
    {
        std::unique_ptr<DiagSnap> s(new DiagSnap);
        build_snap(c, s.get(), 0);
        publish_snap(c, *s);
    }
    /* notifies left set by this communicator's operations: nobody will consume them any more */
    std::vector<std::pair<std::string, uint64_t>> left;
    {
        std::lock_guard<std::mutex> cg(c->m);
        DevCtl* ctl = c->dev->ctl;
        auto look = [&](uint32_t base, uint32_t n, const std::string& what) {
            for (uint32_t i = 0; i < n && left.size() < 8; i++) {
                uint64_t p = ctl->src[base + i].load();
                if (ctl->slots[base + i].load() && (p & prov::kValid) && !(p & prov::kHost))
                    left.emplace_back(strprintf("%s slot %u", what.c_str(), i), p);
            }
        };
        for (HThread* t : c->threads)
            if (!t->stream_bound) look(t->slot_base, t->nslots, "thread notify of " + thread_name(thread_code(t)));
        for (auto& kv : c->channels)
            look(kv.second->local_slot_base, kv.second->notify_num,
                 strprintf("channel notify from rank %u", kv.second->remote_rank));
    }
    if (!left.empty()) {
        std::string all;
        const std::string lead = "an earlier record by ";
        for (auto& s : left) {
            std::string by = prov_text(c, s.second); /* "an earlier record by rank 0 thread t0 for op 'x'" */
            if (!by.compare(0, lead.size(), lead)) by = by.substr(lead.size());
            all += (all.empty() ? "" : "; ") + s.first + " (set by " + by + ")";
        }
        std::string text = strprintf("[hcomm-kit check] rank %u: notifies left set when communicator %s was destroyed "
                                     "(recorded by an operation but never waited for: a doubled or extra record): %s",
                                     c->rank, c->name.c_str(), all.c_str());
        EMU_LOG(LOG_WARN, "%s", text.c_str());
        rank_log("%s", text.c_str());
    }
}

std::string diag_wait_report(Comm* c, const HTask& t, const HThread* self, const char* headline) {
    (void)t;
    (void)self;
    Analysis A;
    analyse(c, A);
    std::vector<std::vector<int>> cycles;
    std::string text = report_text(A, c, headline, false, &cycles);
    write_report_file(c, "timeout", report_json(A, c, "timeout", headline, cycles));
    return text;
}

std::string diag_comm_report(Comm* c, const char* headline) {
    Analysis A;
    analyse(c, A);
    return report_text(A, c, headline, false);
}

}  // namespace emu
