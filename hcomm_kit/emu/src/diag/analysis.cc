/* Diagnosis: cross-rank hang analysis and its reports. From the snapshots of every rank (snapshot.cc),
 * any rank computes which waits can never be satisfied: a wait is stuck when every task that could
 * record its notify is itself stuck, or when nothing can record it any more (the recorder's part of
 * the operation finished or queued all its tasks without recording it, it died, or its host is
 * blocked behind stuck work); the report names the root causes (dead ends and wait-for cycles) and
 * every knock-on wait. */
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

namespace {
/* ================================================================ analysis */

}  // namespace

const DiagWait* node_wait(const Analysis& A, const Node& n) {
    const DiagSnap& s = *A.ranks[n.rank].s;
    if (n.type == Node::ThreadWait) return &s.threads[n.idx].head;
    if (n.type == Node::StreamWait) return &s.streams[n.idx].wait;
    return nullptr;
}

namespace {

bool truncated(const DiagSnap& s) {
    for (uint32_t i = 0; i < s.nthreads; i++)
        if (s.threads[i].rec_more) return true;
    for (uint32_t i = 0; i < s.nstreams; i++)
        if (s.streams[i].rec_more) return true;
    return s.idle_threads + s.nthreads >= kDiagThreads && s.nthreads >= kDiagThreads;
}

}  // namespace

const DiagChan* find_chan(const DiagSnap& s, uint32_t peer) {
    for (uint32_t i = 0; i < s.nchans; i++)
        if (s.chans[i].peer == peer) return &s.chans[i];
    return nullptr;
}

namespace {

bool any_runnable_stream(const DiagSnap& s) {
    for (uint32_t i = 0; i < s.nstreams; i++)
        if (s.streams[i].state == 1 || s.streams[i].state == 4) return true;
    return false;
}

}  // namespace

const char* op_tag_of(const DiagSnap& s, uint32_t tag16) {
    for (uint32_t i = 0; i < s.nops; i++)
        if (s.ops[i].tag16 == tag16) return s.ops[i].tag;
    return nullptr;
}


void analyse(Comm* c, Analysis& A) {
    uint32_t n = c->nranks;
    A.now = now_ns();
    A.self = (int)c->rank;
    A.ranks.resize(n);
    for (uint32_t r = 0; r < n; r++) {
        RankView& v = A.ranks[r];
        if (r != c->rank) {
            v.dead = c->dead[r].load() || comm_peer_dead(c, (int)r);
            v.gone = comm_peer_gone(c, (int)r);
        }
        if (v.dead) continue;
        v.s.reset(new DiagSnap);
        if (v.gone) { /* its last words: the records it left unconsumed (diag_comm_removed) */
            uint64_t hb = 0;
            if (!read_snap(c, r, v.s.get(), &hb)) v.s.reset();
            continue;
        }
        uint64_t hb = 0;
        if (r == c->rank) {
            build_snap(c, v.s.get());
            v.have = true;
            v.seen_ns = v.s->taken_ns;
        } else if (read_snap(c, r, v.s.get(), &hb) && A.now - std::min(hb, A.now) < kFreshNs) {
            v.have = true;
            v.seen_ns = hb;
        }
    }
    A.host_node.assign(n, -1);
    A.connect_node.assign(n, -1);
    for (uint32_t r = 0; r < n; r++) {
        RankView& v = A.ranks[r];
        if (!v.have) continue;
        const DiagSnap& s = *v.s;
        for (uint32_t i = 0; i < s.nthreads; i++)
            if (s.threads[i].state == 2) A.nodes.push_back(Node{Node::ThreadWait, (int)r, (int)i, true, "", {}, {}});
        for (uint32_t i = 0; i < s.nstreams; i++) {
            if (s.streams[i].state == 2) A.nodes.push_back(Node{Node::StreamWait, (int)r, (int)i, true, "", {}, {}});
            if (s.streams[i].state == 3) A.nodes.push_back(Node{Node::Barrier, (int)r, (int)i, true, "", {}, {}});
        }
        if (s.host_sync) {
            A.host_node[r] = (int)A.nodes.size();
            A.nodes.push_back(Node{Node::Host, (int)r, -1, true, "", {}, {}});
        }
        /* A host in HcclChannelAcquire is judged from a recent snapshot only: a peer that has just
         * moved on (into the matching call) must not look blocked elsewhere. */
        if (s.host_connect && (r == c->rank || A.now - std::min(A.now, s.taken_ns) < kConnectFreshNs)) {
            A.connect_node[r] = (int)A.nodes.size();
            A.nodes.push_back(Node{Node::Connect, (int)r, -1, true, "", {}, {}});
        }
    }
    /* who records what: (rank owning the slot, slot) -> sources (node index, or -1 = runnable) */
    std::map<std::pair<int, uint32_t>, std::vector<int>> sources;
    auto node_of = [&](int r, bool thread, int idx) -> int {
        for (size_t k = 0; k < A.nodes.size(); k++) {
            const Node& nd = A.nodes[k];
            if (nd.rank == r && nd.idx == idx &&
                (thread ? nd.type == Node::ThreadWait : (nd.type == Node::StreamWait || nd.type == Node::Barrier)))
                return (int)k;
        }
        return -1;
    };
    for (uint32_t r = 0; r < n; r++) {
        if (!A.ranks[r].have) continue;
        const DiagSnap& s = *A.ranks[r].s;
        for (uint32_t i = 0; i < s.nthreads; i++) {
            const DiagThread& t = s.threads[i];
            if (t.state == 3) continue; /* failed: records nothing any more */
            int nd = t.state == 2 ? node_of((int)r, true, (int)i) : -1;
            for (uint8_t k = 0; k < t.nrec; k++) sources[{t.rec[k].rank, t.rec[k].slot}].push_back(nd);
        }
        for (uint32_t i = 0; i < s.nstreams; i++) {
            const DiagStream& st = s.streams[i];
            int nd = (st.state == 2 || st.state == 3) ? node_of((int)r, false, (int)i) : -1;
            for (uint8_t k = 0; k < st.nrec; k++) sources[{st.rec[k].rank, st.rec[k].slot}].push_back(nd);
        }
    }
    /* A rank's host can no longer issue anything: every call it is blocked in is stuck. */
    auto host_stuck = [&](int r) {
        int h = A.host_node[r], k = A.connect_node[r];
        return (h >= 0 || k >= 0) && (h < 0 || A.nodes[h].stuck) && (k < 0 || A.nodes[k].stuck);
    };
    auto host_blocker = [&](int r) { return A.connect_node[r] >= 0 ? A.connect_node[r] : A.host_node[r]; };
    /* Rank p's latest HCCL call, which would have worked with rank q, failed and p's host has made no
     * call since: p's part (its channel end, its kernel) will not come. The text, or "". */
    auto failed_for = [&](uint32_t p, uint32_t q) -> std::string {
        if (p >= n || !A.ranks[p].have || q >= 64) return "";
        const DiagSnap& ps = *A.ranks[p].s;
        if (!ps.failed_ns || !(ps.failed_peers >> q & 1) || ps.host_call[0] || ps.host_connect || ps.host_sync)
            return "";
        return strprintf("rank %u's latest call, which would have done its part with rank %u, failed and it made "
                         "no call since: %s", p, q, ps.failed_call);
    };
    /* greatest fixpoint: start from "everything blocked is stuck", unmark what can progress */
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t k = 0; k < A.nodes.size(); k++) {
            Node& nd = A.nodes[k];
            if (!nd.stuck) continue;
            bool stuck = true;
            std::string dead_end;
            std::vector<int> deps, through;
            const DiagSnap& s = *A.ranks[nd.rank].s;
            if (nd.type == Node::Host) {
                uint32_t want = s.host_sync_stream;
                bool found = false;
                for (uint32_t i = 0; i < s.nstreams && stuck; i++) {
                    const DiagStream& st = s.streams[i];
                    if (want && st.id != want) continue;
                    found = true;
                    int sn = node_of(nd.rank, false, (int)i);
                    if (sn < 0 || !A.nodes[sn].stuck) stuck = false;
                    else through.push_back(sn);
                }
                if (want && !found) stuck = false; /* the stream is idle: the synchronize returns */
                if (!want && any_runnable_stream(s)) stuck = false;
                if (!found && !want && through.empty()) stuck = false;
            } else if (nd.type == Node::Connect) {
                /* Rank p completes its end of the channel only from its own HcclChannelAcquire: not
                 * while its host is blocked in another one that does not include this rank, or in a
                 * stuck synchronize call. */
                for (uint32_t p = 0; p < n && p < 64 && stuck; p++) {
                    if (!(s.host_connect >> p & 1)) continue;
                    if (A.ranks[p].dead || A.ranks[p].gone) {
                        if (dead_end.empty())
                            dead_end = A.ranks[p].dead ? strprintf("rank %u died", p) : comm_gone_msg(c, p);
                        continue;
                    }
                    std::string failed = failed_for(p, (uint32_t)nd.rank);
                    if (!failed.empty()) {
                        if (dead_end.empty()) dead_end = failed;
                    } else if (!A.ranks[p].have || (A.ranks[p].s->host_connect >> nd.rank & 1) || !host_stuck((int)p)) {
                        stuck = false; /* unknown, both ends are in the handshake, or p may still call it */
                    } else if (A.connect_node[p] >= 0) {
                        deps.push_back(A.connect_node[p]);
                    } else {
                        through.push_back(A.host_node[p]);
                        if (dead_end.empty())
                            dead_end = strprintf("rank %u cannot call HcclChannelAcquire for it: its host is blocked in a "
                                                 "synchronize call behind work that is stuck", p);
                    }
                }
            } else if (nd.type == Node::Barrier) {
                uint32_t b = s.streams[nd.idx].barrier_seq;
                for (uint32_t q = 0; q < n && stuck; q++) {
                    if ((int)q == nd.rank) continue;
                    if ((int32_t)(c->job->bar_seq[q].load() - b) >= 0) continue; /* arrived */
                    if (A.ranks[q].dead || A.ranks[q].gone) {
                        if (dead_end.empty())
                            dead_end = A.ranks[q].dead ? strprintf("rank %u died", q) : comm_gone_msg(c, q);
                        continue;
                    }
                    if (!A.ranks[q].have || !host_stuck((int)q)) stuck = false;
                    else through.push_back(host_blocker((int)q));
                }
            } else {
                const DiagWait& w = *node_wait(A, nd);
                auto it = sources.find({nd.rank, w.slot});
                if (it != sources.end() && !it->second.empty()) {
                    for (int src : it->second) {
                        if (src < 0 || !A.nodes[src].stuck) {
                            stuck = false;
                            break;
                        }
                        deps.push_back(src);
                    }
                } else if (w.kind == 1) {
                    uint32_t p = w.peer;
                    /* What rank p's snapshot says it will not do (any more) it may have done just
                     * before: the waiter's state must be newer than p's last completed task (a record
                     * made before would show there as a set notify). Snapshots of different ranks
                     * are of different times: on a loaded node a rank's monitor publishes hundreds of
                     * milliseconds behind its device threads. */
                    uint64_t p_last = ~0ull; /* no task of rank p completed after this */
                    if (p < n && A.ranks[p].gone) p_last = c->job->ranks[p].gone_ns.load(std::memory_order_relaxed);
                    else if (p < n && A.ranks[p].have) p_last = A.ranks[p].s->progress_ns;
                    const bool waiter_newer = A.ranks[nd.rank].seen_ns >= p_last;
                    if (p < n && A.ranks[p].dead) {
                        dead_end = strprintf("rank %u died", p);
                    } else if (p < n && A.ranks[p].gone) {
                        if (waiter_newer) dead_end = comm_gone_msg(c, p);
                        else stuck = false; /* it may have recorded it just before */
                    } else if (p >= n || !A.ranks[p].have || truncated(*A.ranks[p].s)) {
                        stuck = false;
                    } else {
                        const DiagSnap& ps = *A.ranks[p].s;
                        const DiagChan* ch = find_chan(ps, (uint32_t)nd.rank);
                        const DiagOp* op = nullptr;
                        for (uint32_t i = 0; i < ps.nops; i++)
                            if (ps.ops[i].tag16 == w.tag16) op = &ps.ops[i];
                        const char* tag = op_tag_of(s, w.tag16);
                        std::string opname = tag ? strprintf("'%s' #%u", tag, w.inst) : std::string("this operation");
                        /* Rank p's part of this call is known by two numbers: the instance of the
                         * same op tag, and its use of the channel with this rank. Both must say
                         * "finished" (or "started") before anything is concluded. */
                        auto stage = [](uint32_t n, uint32_t done, uint32_t submitted, uint32_t started) {
                            return n <= done ? 3 : n <= submitted ? 2 : n <= started ? 1 : 0;
                        };
                        int s_ch = ch && w.use ? stage(w.use, ch->done, ch->submitted, ch->uses) : -1;
                        int s_op = op && w.inst ? stage(w.inst, op->done, op->submitted, op->started) : -1;
                        int lo = s_ch < 0 ? s_op : s_op < 0 ? s_ch : std::min(s_ch, s_op);
                        if (!waiter_newer) {
                            stuck = false; /* undecided until the waiter publishes a newer state */
                        } else if (!ch && !host_stuck((int)p)) {
                            /* rank p's host may still make it: its HcclChannelAcquire with this rank
                             * (collective between the two ends) can return after this rank's did */
                            stuck = false;
                        } else if (!ch) {
                            dead_end = strprintf("rank %u has no channel to rank %d and cannot make one: its host "
                                                 "is blocked behind work that is stuck", p, nd.rank);
                            through.push_back(host_blocker((int)p));
                        } else if (s_ch < 0 || s_op < 0) {
                            stuck = false; /* rank p's part cannot be matched by both numbers: no claim */
                        } else if (lo >= 2 && A.ranks[nd.rank].seen_ns < A.ranks[p].seen_ns) {
                            /* The waiter's snapshot is older than rank p's: a record p ran after the
                             * waiter published (p past it now, nothing of it queued) may not show in
                             * the waiter's slot yet (a loaded node runs the waiter's monitor late).
                             * The waiter's own analysis, on its fresh snapshot, decides. */
                            stuck = false;
                        } else if (lo >= 2) {
                            dead_end = strprintf("rank %u's part of %s (its use #%u of the channel with rank %d) %s", p,
                                                 opname.c_str(), w.use, nd.rank,
                                                 lo == 3 ? "finished without recording it"
                                                         : "has queued all its tasks and none of them records it");
                        } else if (lo == 1) {
                            stuck = false; /* its kernel still runs and may record it */
                        } else if (!failed_for(p, (uint32_t)nd.rank).empty()) {
                            dead_end = failed_for(p, (uint32_t)nd.rank);
                        } else if (!host_stuck((int)p) || any_runnable_stream(ps)) {
                            stuck = false; /* rank p has not started it yet and still can */
                        } else {
                            dead_end = strprintf("rank %u has not started its part of %s and cannot: its host is "
                                                 "blocked in a synchronize call behind work that is stuck",
                                                 p, opname.c_str());
                            through.push_back(host_blocker((int)p));
                        }
                    }
                } else {
                    if (truncated(s) || any_runnable_stream(s)) {
                        stuck = false;
                    } else if (!host_stuck(nd.rank)) {
                        stuck = false; /* the host may still enqueue the record */
                    } else {
                        bool own_kernel_running = false;
                        for (uint32_t i = 0; i < s.nkernels; i++)
                            if (s.kernels[i].running) own_kernel_running = true;
                        if (own_kernel_running) stuck = false;
                        else {
                            dead_end = strprintf("no thread or stream of rank %d will record it: every kernel returned, "
                                                 "no queued task records it, and the host is blocked in a synchronize "
                                                 "call",
                                                 nd.rank);
                            through.push_back(host_blocker(nd.rank));
                        }
                    }
                }
            }
            if (!stuck) {
                nd.stuck = false;
                nd.deps.clear();
                nd.through.clear();
                changed = true;
            } else {
                nd.deps = deps;
                nd.through = through;
                nd.dead_end = dead_end;
            }
        }
    }
}

namespace {

/* ---------------------------------------------------------------- report text */

}  // namespace

std::string node_who(const Analysis& A, const Node& nd) {
    const DiagSnap& s = *A.ranks[nd.rank].s;
    switch (nd.type) {
        case Node::ThreadWait: return strprintf("rank %d %s", nd.rank, thread_name(s.threads[nd.idx].code).c_str());
        case Node::StreamWait:
        case Node::Barrier: {
            const DiagStream& st = s.streams[nd.idx];
            if (st.thread != 0xffff) return strprintf("rank %d %s (host stream %u)", nd.rank, thread_name(st.thread).c_str(), st.id);
            return strprintf("rank %d stream %u", nd.rank, st.id);
        }
        case Node::Host:
        case Node::Connect: return strprintf("rank %d host", nd.rank);
    }
    return "?";
}

namespace {

std::string rank_list(uint64_t bits) {
    std::string out;
    for (uint32_t r = 0; r < 64; r++)
        if (bits >> r & 1) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
}

}  // namespace

std::string wait_detail(const Analysis& A, const Node& nd) {
    const DiagSnap& s = *A.ranks[nd.rank].s;
    if (nd.type == Node::Host)
        return s.host_sync_stream ? strprintf("blocked in a synchronize call on stream %u", s.host_sync_stream)
                                  : std::string("blocked in a synchronize call (event or device)");
    if (nd.type == Node::Barrier)
        return strprintf("waits in HcclBarrier #%u for the ranks that have not arrived", s.streams[nd.idx].barrier_seq);
    if (nd.type == Node::Connect)
        return strprintf("is blocked in HcclChannelAcquire (a channel is made by both of its ends) waiting for rank(s) %s, "
                         "%.1f s so far", rank_list(s.host_connect).c_str(),
                         secs(A.now - std::min(A.now, s.host_call_since)));
    const DiagWait& w = *node_wait(A, nd);
    const char* tag = nd.type == Node::ThreadWait ? s.threads[nd.idx].tag : nullptr;
    if (!tag || !*tag) tag = op_tag_of(s, w.tag16);
    std::string op = w.tag16 && tag ? "; " + op_text(tag, w.inst, w.kind == 1 ? w.use : 0, w.peer) : std::string();
    uint64_t since = w.since_ns && w.since_ns < A.now ? A.now - w.since_ns : 0;
    return strprintf("waits for %s (%s%s%s, %s%s), %.1f s so far", wait_text(w).c_str(), w.api, w.where[0] ? " at " : "",
                     w.where, task_pos(w.bidx, w.bsize).c_str(), op.c_str(), secs(since));
}


/* Who would record the notify nd waits for, in words. */
std::string recorder_text(const Analysis& A, const Node& nd) {
    if (!nd.dead_end.empty()) return nd.dead_end;
    std::string out;
    if (nd.type == Node::Connect) {
        for (int d : nd.deps)
            out += (out.empty() ? "" : "; ") + strprintf("rank %d cannot make its end before its own call returns: its "
                                                         "host %s", A.nodes[d].rank, wait_detail(A, A.nodes[d]).c_str());
        return out;
    }
    for (int d : nd.deps) {
        const Node& o = A.nodes[d];
        std::string w = o.type == Node::Host ? "whose host is stuck" : "which " + wait_detail(A, o);
        out += (out.empty() ? "" : "; ") + std::string("recorded later by ") + node_who(A, o) + " (queued after its " +
               "current wait), " + w;
    }
    return out;
}

namespace {

/* Wait-for cycles among the stuck nodes (at most 4), as "a waits for b, which waits for a". */
std::vector<std::vector<int>> find_cycles(const Analysis& A) {
    std::vector<std::vector<int>> cycles;
    size_t N = A.nodes.size();
    std::vector<int> color(N, 0), stack;
    std::set<std::vector<int>> seen;
    std::function<void(int)> dfs = [&](int u) {
        color[u] = 1;
        stack.push_back(u);
        for (int v : A.nodes[u].deps) {
            if (!A.nodes[v].stuck || cycles.size() >= 4) continue;
            if (color[v] == 1) {
                auto it = std::find(stack.begin(), stack.end(), v);
                std::vector<int> cyc(it, stack.end());
                std::vector<int> key = cyc;
                std::sort(key.begin(), key.end());
                if (seen.insert(key).second) cycles.push_back(cyc);
            } else if (color[v] == 0) {
                dfs(v);
            }
        }
        stack.pop_back();
        color[u] = 2;
    };
    for (size_t u = 0; u < N; u++)
        if (A.nodes[u].stuck && color[u] == 0) dfs((int)u);
    return cycles;
}

}  // namespace

/* A running kernel that has issued no Hcomm task for a while, in words ("" otherwise):
 * "kernel K (launch #n, op 'tag') is running kernel code, issued no task for 9.8 s, at
 * exec_op.cc:42 in ExecOp (...); its launch timeout (1836 s) ends it in 1826 s". */
std::string spin_text(const DiagKernel& k, uint64_t now) {
    uint64_t since = std::max(k.start_ns, k.last_task_ns);
    if (!k.running || !since || now - std::min(now, since) < spin_note_ns()) return "";
    std::string op = k.tag[0] ? strprintf(", op '%s'", k.tag) : std::string();
    std::string out = strprintf("kernel %s (launch #%llu%s) is running kernel code, issued no task for %.1f s%s",
                                k.name[0] ? k.name : "?", (unsigned long long)k.kseq, op.c_str(),
                                secs(now - std::min(now, since)), k.last_task_ns ? "" : " (none since it started)");
    if (k.where[0]) out += strprintf(", at %s", k.where);
    if (k.deadline_ns)
        out += strprintf("; its launch timeout (%.0f s) ends it in %.0f s", secs(k.deadline_ns - std::min(k.deadline_ns, k.start_ns)),
                         secs(k.deadline_ns - std::min(k.deadline_ns, now)));
    else
        out += "; it has no launch timeout";
    return out;
}


/* Every rank's kernels running without issuing tasks: "rank 1 kernel ...; rank 3 kernel ...". */
std::string spinning_kernels(const Analysis& A, int skip_rank) {
    std::string out;
    for (uint32_t r = 0; r < A.ranks.size(); r++) {
        if (!A.ranks[r].have || (int)r == skip_rank) continue;
        const DiagSnap& s = *A.ranks[r].s;
        for (uint32_t i = 0; i < s.nkernels; i++) {
            std::string t = spin_text(s.kernels[i], A.now);
            if (!t.empty()) out += (out.empty() ? "" : "; ") + strprintf("rank %u ", r) + t;
        }
    }
    return out;
}

namespace {

/* Notifies recorded and still set that no wait of their owner consumes, as report lines (a record
 * to the wrong peer or slot leaves one behind while the intended waiter hangs). */
std::string unconsumed_records(const Analysis& A, const char* indent) {
    std::string out;
    for (uint32_t r = 0; r < A.ranks.size(); r++) {
        if (!A.ranks[r].have && !(A.ranks[r].gone && A.ranks[r].s)) continue;
        const DiagSnap& s = *A.ranks[r].s;
        for (uint32_t i = 0; i < s.npending; i++) {
            const DiagPending& p = s.pending[i];
            if (p.owner < 0 || (uint32_t)p.owner >= A.ranks.size()) continue;
            const RankView& ov = A.ranks[p.owner];
            std::string why = strprintf("no wait of rank %d consumes it", p.owner);
            if (ov.gone || ov.dead) {
                why = strprintf("rank %d %s without consuming it", p.owner,
                                ov.gone ? "destroyed its communicator" : "died");
            } else {
                if (!ov.have) continue;
                bool unclaimed = false;
                for (uint32_t k = 0; k < ov.s->nunclaimed; k++)
                    if (ov.s->unclaimed[k].slot == p.slot) unclaimed = true;
                if (!unclaimed) continue;
            }
            std::string op = p.tag[0] ? "; " + op_text(p.tag, p.inst, 0, 0) : std::string();
            out += strprintf("%srank %u %s set %s (%s%s%s, %s%s), %.1f s ago, and %s\n", indent, r,
                             thread_name(p.thread).c_str(), p.target, p.api, p.where[0] ? " at " : "", p.where,
                             task_pos(p.bidx, p.bsize).c_str(), op.c_str(), secs(A.now - std::min(A.now, p.when_ns)),
                             why.c_str());
        }
    }
    return out;
}

}  // namespace

std::string rank_summary(const Analysis& A, uint32_t r, const char* indent) {
    const RankView& v = A.ranks[r];
    if (v.dead) return strprintf("%srank %u: died\n", indent, r);
    if (v.gone) return strprintf("%srank %u: destroyed its communicator\n", indent, r);
    if (!v.have) return strprintf("%srank %u: no recent state (its process did not report within %.1f s)\n", indent, r,
                                  secs(kFreshNs));
    const DiagSnap& s = *v.s;
    std::string host = s.host_call[0] ? strprintf("blocked in %s for %.1f s", s.host_call,
                                                  secs(A.now - std::min(A.now, s.host_call_since)))
                       : s.host_sync ? (s.host_sync_stream ? strprintf("blocked in a synchronize call on stream %u",
                                                                       s.host_sync_stream)
                                                           : std::string("blocked in a synchronize call"))
                                     : std::string("not in an hcomm-kit call");
    std::string out = strprintf("%srank %u (pid %d, device %d): host %s; %u idle thread(s)\n", indent, r, s.pid, s.device,
                                host.c_str(), s.idle_threads);
    for (uint32_t i = 0; i < s.nkernels; i++) {
        const DiagKernel& k = s.kernels[i];
        std::string spin = spin_text(k, A.now);
        if (!spin.empty()) {
            out += strprintf("%s  %s; %u task(s) queued\n", indent, spin.c_str(), k.queued);
            continue;
        }
        out += strprintf("%s  kernel %s (launch #%llu%s%s): %s, %u task(s) still queued\n", indent, k.name[0] ? k.name : "?",
                         (unsigned long long)k.kseq, k.tag[0] ? ", op '" : "", k.tag[0] ? (std::string(k.tag) + "'").c_str() : "",
                         k.running ? "still running (may still submit tasks)" : "returned", k.queued);
    }
    for (uint32_t i = 0; i < s.nstreams; i++) {
        const DiagStream& st = s.streams[i];
        std::string what;
        uint64_t since = st.since_ns && st.since_ns < A.now ? A.now - st.since_ns : 0;
        if (st.state == 2) {
            Node tmp{Node::StreamWait, (int)r, (int)i, false, "", {}, {}};
            what = wait_detail(A, tmp);
        } else {
            what = strprintf("runs %s for %.1f s", st.what, secs(since));
        }
        out += strprintf("%s  stream %u%s: %s; %u more task(s) queued\n", indent, st.id,
                         st.thread != 0xffff ? strprintf(" (%s)", thread_name(st.thread).c_str()).c_str() : "",
                         what.c_str(), st.pending);
    }
    for (uint32_t i = 0; i < s.nthreads; i++) {
        const DiagThread& t = s.threads[i];
        if (t.state == 3) {
            out += strprintf("%s  %s: failed (its remaining tasks were dropped)\n", indent, thread_name(t.code).c_str());
            continue;
        }
        std::string what;
        if (t.state == 2) {
            Node tmp{Node::ThreadWait, (int)r, (int)i, false, "", {}, {}};
            what = wait_detail(A, tmp);
        } else {
            what = strprintf("runnable at %s (%s%s)", task_pos(t.head.bidx, t.head.bsize).c_str(), t.head.api,
                             t.head.set ? ", its notify is set" : "");
        }
        out += strprintf("%s  %s: %s; %u task(s) left%s\n", indent, thread_name(t.code).c_str(), what.c_str(), t.queued,
                         t.kernel[0] ? strprintf(" [kernel %s]", t.kernel).c_str() : "");
    }
    return out;
}


std::string report_json(const Analysis& A, Comm* c, const char* kind, const std::string& headline,
                        const std::vector<std::vector<int>>& cycles) {
    std::string j = strprintf("{\"kind\": \"%s\", \"communicator\": \"%s\", \"ranks\": %u, \"detected_by\": %d, "
                              "\"headline\": \"%s\", \"waits\": [",
                              kind, json_esc(c->name).c_str(), c->nranks, A.self, json_esc(headline).c_str());
    bool first = true;
    for (size_t k = 0; k < A.nodes.size(); k++) {
        const Node& nd = A.nodes[k];
        j += strprintf("%s{\"id\": %zu, \"who\": \"%s\", \"rank\": %d, \"type\": \"%s\", \"stuck\": %s, \"detail\": \"%s\", "
                       "\"recorder\": \"%s\", \"waits_for\": [",
                       first ? "" : ", ", k, json_esc(node_who(A, nd)).c_str(), nd.rank,
                       nd.type == Node::ThreadWait ? "thread" : nd.type == Node::StreamWait ? "stream"
                       : nd.type == Node::Barrier ? "barrier" : nd.type == Node::Connect ? "connect" : "host",
                       nd.stuck ? "true" : "false", json_esc(wait_detail(A, nd)).c_str(),
                       json_esc(recorder_text(A, nd)).c_str());
        for (size_t d = 0; d < nd.deps.size(); d++) j += strprintf("%s%d", d ? ", " : "", nd.deps[d]);
        j += "]}";
        first = false;
    }
    j += "], \"cycles\": [";
    for (size_t i = 0; i < cycles.size(); i++) {
        j += i ? ", [" : "[";
        for (size_t k = 0; k < cycles[i].size(); k++) j += strprintf("%s%d", k ? ", " : "", cycles[i][k]);
        j += "]";
    }
    j += "], \"rank_states\": [";
    for (uint32_t r = 0; r < A.ranks.size(); r++)
        j += strprintf("%s\"%s\"", r ? ", " : "", json_esc(rank_summary(A, r, "")).c_str());
    j += "]}";
    return j;
}


/* Full text report. stuck_only: a certain hang (only the stuck waits are listed as such). */
std::string report_text(const Analysis& A, Comm* c, const std::string& headline, bool deadlock,
                        std::vector<std::vector<int>>* cycles_out) {
    (void)c;
    std::vector<std::vector<int>> cycles = find_cycles(A);
    if (cycles_out) *cycles_out = cycles;
    std::string out = headline + "\n";
    std::set<int> in_cycle;
    for (auto& cyc : cycles) {
        std::string line = "  wait-for cycle:";
        for (size_t i = 0; i < cyc.size(); i++) {
            const Node& a = A.nodes[cyc[i]];
            const Node& b = A.nodes[cyc[(i + 1) % cyc.size()]];
            in_cycle.insert(cyc[i]);
            const char* how = a.type == Node::Connect ? "makes its end only after its own call returns"
                                                      : "records it, after its own wait";
            line += strprintf("\n    %s %s; %s%s %s%s", node_who(A, a).c_str(), wait_detail(A, a).c_str(),
                              a.type == Node::Connect ? "" : "only ", node_who(A, b).c_str(), how,
                              i + 1 == cyc.size() ? " (the first one above): none of them can move" : ";");
        }
        out += line + "\n";
    }
    bool any_root = false;
    for (const Node& nd : A.nodes)
        if (nd.stuck && !nd.dead_end.empty()) {
            if (!any_root) out += "  root cause(s):\n";
            any_root = true;
            out += strprintf("    %s %s: %s\n", node_who(A, nd).c_str(), wait_detail(A, nd).c_str(), nd.dead_end.c_str());
        }
    std::string stray = unconsumed_records(A, "    ");
    if (!stray.empty())
        out += std::string(deadlock ? "  likely cause(s): notifies recorded that no wait consumes (a record to the wrong "
                                      "peer or slot?):\n"
                                    : "  notifies recorded that no queued wait consumes (yet):\n") + stray;
    if (!deadlock) {
        std::string spin = spinning_kernels(A);
        if (!spin.empty()) out += "  running kernel code without issuing tasks (the emulator cannot tell whether it will return):\n    " + spin + "\n";
    }
    bool any_knock = false;
    for (size_t k = 0; k < A.nodes.size(); k++) {
        const Node& nd = A.nodes[k];
        if (!nd.stuck || !nd.dead_end.empty() || in_cycle.count((int)k) || nd.type == Node::Host) continue;
        if (!any_knock) out += deadlock ? "  waiting on those:\n" : "  also waiting:\n";
        any_knock = true;
        out += strprintf("    %s %s: %s\n", node_who(A, nd).c_str(), wait_detail(A, nd).c_str(),
                         recorder_text(A, nd).c_str());
    }
    if (!deadlock) {
        bool head = false;
        for (const Node& nd : A.nodes) {
            if (nd.stuck || nd.type == Node::Host) continue;
            if (!head) out += "  waiting (not known to be stuck):\n";
            head = true;
            out += strprintf("    %s %s\n", node_who(A, nd).c_str(), wait_detail(A, nd).c_str());
        }
    }
    out += "  state of every rank:\n";
    for (uint32_t r = 0; r < A.ranks.size(); r++) out += rank_summary(A, r, "    ");
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}


void write_report_file(Comm* c, const char* kind, const std::string& json) {
    const std::string& dir = cfg().log_dir;
    if (dir.empty()) return;
    mkdir(dir.c_str(), 0777);
    std::string path = strprintf("%s/%s-%s-rank%u.json", dir.c_str(), kind, c->name.c_str(), c->rank);
    std::string tmp = path + strprintf(".tmp%d", (int)getpid());
    FILE* f = fopen(tmp.c_str(), "w");
    if (!f) return;
    fwrite(json.data(), 1, json.size(), f);
    fputc('\n', f);
    fclose(f);
    rename(tmp.c_str(), path.c_str());
}


/* A stable signature of the stuck set: which waits, since when, and the progress of their ranks. */
uint64_t stuck_signature(const Analysis& A) {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (const Node& nd : A.nodes) {
        if (!nd.stuck) continue;
        mix((uint64_t)nd.type << 32 | (uint32_t)nd.rank);
        mix((uint64_t)(uint32_t)nd.idx);
        if (const DiagWait* w = node_wait(A, nd)) {
            mix(w->slot);
            mix(w->since_ns);
        }
        if (nd.type == Node::Connect) {
            mix(A.ranks[nd.rank].s->host_connect);
            mix(A.ranks[nd.rank].s->host_call_since);
        }
        mix(A.ranks[nd.rank].s->progress);
    }
    return h;
}

}  // namespace emu
