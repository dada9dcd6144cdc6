/* The timing model's simulation: a discrete-event run of every rank's logged task graph of one
 * operation.
 *
 * Each rank's AICPU issues its tasks one after another in the kernel's order (task_us each, from
 * the host launch on), never waiting for an earlier task to run: it writes them to the threads'
 * queues, which the engines run asynchronously. A task starts when it was issued and its
 * thread's previous task ended. A notify record reaches its slot after a latency (thread notify,
 * or the link's notify_us for a channel notify and a write with notify); a wait ends when the
 * record it consumed (logged when it ran) has arrived. Copies, reductions and transfers are
 * flows: a transfer waits its link's latency, then moves its bytes at the smallest of its own
 * rate (one stream's write or read bandwidth of its link type, or the local copy / reduce
 * bandwidth of its dtype) and its fair share of every resource it uses (the directed link between
 * the two NPUs, each NPU's ports of that link type, the NPU's copy or reduce engine), recomputed
 * whenever a flow starts or ends (processor sharing). Ties are broken by rank, thread and issue
 * order, so one graph always gives one time. */
#include "base/reduce.h"
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>

namespace emu {

const char* mkind_name(uint8_t k) {
    static const char* const names[] = {"nop", "local copy", "local reduce", "write", "write reduce", "read",
                                        "read reduce", "thread notify record", "channel notify record",
                                        "ACL notify record", "thread notify wait", "channel notify wait",
                                        "ACL notify wait"};
    return k < mkind::Count ? names[k] : "?";
}

namespace {

struct Thread {
    uint32_t rank;
    uint16_t code;
    std::vector<int> list;
    size_t cur = 0;
    double free_at = 0;
    int last = -1;   /* task that ended last on it */
    bool busy = false;
};

struct Res {
    double cap = 0;
    int n = 0;
};

struct Flow {
    int task;
    double remaining; /* bytes */
    double own;       /* bytes/us alone */
    std::vector<uint64_t> res;
    double rate = 0;
};

uint64_t rkey(uint32_t what, uint32_t a, uint32_t b) { return ((uint64_t)what << 56) | ((uint64_t)a << 28) | b; }

}  // namespace

void model_simulate(const ModelParams& p, const Topology& topo, const std::vector<uint32_t>& ranks,
                    const std::vector<std::vector<ModelInputTask>>& in, ModelResult* out) {
    std::vector<ModelTaskTime>& T = out->tasks;
    T.clear();
    std::vector<uint64_t> matched;
    std::unordered_map<uint64_t, int> by_id;
    std::map<std::pair<uint32_t, uint16_t>, int> thread_of;
    std::vector<Thread> threads;
    for (size_t r = 0; r < ranks.size(); r++) {
        for (size_t i = 0; i < in[r].size(); i++) {
            const ModelInputTask& m = in[r][i];
            ModelTaskTime t;
            t.rank = ranks[r];
            t.thread = m.thread;
            t.kind = m.kind;
            t.dtype = m.dtype;
            t.peer = m.peer;
            t.index = m.index;
            t.bytes = m.bytes;
            t.seq = (uint32_t)i;
            t.id = m.id;
            t.issue = p.launch_us + (double)(i + 1) * p.task_us;
            if (m.peer >= 0 && (uint32_t)m.peer < topo.nranks && ranks[r] < topo.nranks && (uint32_t)m.peer != ranks[r])
                t.link = topo.link(ranks[r], (uint32_t)m.peer);
            int idx = (int)T.size();
            T.push_back(t);
            matched.push_back(m.matched);
            by_id[m.id] = idx;
            auto key = std::make_pair(ranks[r], m.thread);
            auto it = thread_of.find(key);
            if (it == thread_of.end()) {
                it = thread_of.emplace(key, 0).first;
            }
            (void)it;
        }
    }
    for (auto& kv : thread_of) {
        kv.second = (int)threads.size();
        Thread th;
        th.rank = kv.first.first;
        th.code = kv.first.second;
        threads.push_back(th);
    }
    for (size_t i = 0; i < T.size(); i++) threads[thread_of[{T[i].rank, T[i].thread}]].list.push_back((int)i);

    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> arrival(T.size(), -1); /* records (and transfers with notify): when the notify lands */
    std::vector<int> src(T.size(), -1);        /* waits: the task whose record they consumed (-1: none of this op) */
    uint32_t foreign = 0;
    for (size_t i = 0; i < T.size(); i++) {
        if (!mkind::is_wait(T[i].kind)) continue;
        uint64_t id = matched[i];
        if (id && id != kModelIdValid) {
            auto it = by_id.find(id);
            if (it != by_id.end()) src[i] = T[i].src = it->second;
            else foreign++;
        }
    }
    if (foreign)
        out->notes.push_back(strprintf("%u wait(s) consumed a record made before this operation (counted as ready at "
                                       "its start)", foreign));
    /* A transfer's link parameters (a peer outside the topology: the in-server link's). */
    auto link_of = [&](const ModelTaskTime& t) -> const LinkParams& {
        return p.link[(int)(t.link == LinkType::None ? topo.in_server() : t.link)];
    };
    auto notify_latency = [&](const ModelTaskTime& t) {
        if (t.link != LinkType::None) return p.link[(int)t.link].notify_us;
        return p.thread_notify_us;
    };

    std::map<uint64_t, Res> res;
    std::vector<Flow> flows;
    std::vector<std::pair<double, int>> pend; /* (activation time, task) */
    double now = 0;
    size_t done = 0;

    auto start_flow = [&](int i) {
        ModelTaskTime& t = T[i];
        Flow f;
        f.task = i;
        f.remaining = (double)t.bytes;
        if (t.kind == mkind::LocalCopy) {
            f.own = p.copy;
            f.res.push_back(rkey(5, t.rank, 0));
            res[f.res.back()].cap = p.copy;
        } else if (t.kind == mkind::LocalReduce) {
            f.own = p.reduce_bw(t.dtype);
            f.res.push_back(rkey(4, t.rank, 0));
            res[f.res.back()].cap = p.reduce;
        } else {
            const LinkParams& lp = link_of(t);
            bool write = t.kind == mkind::Write || t.kind == mkind::WriteReduce;
            uint32_t from = write ? t.rank : (uint32_t)t.peer, to = write ? (uint32_t)t.peer : t.rank;
            f.own = write ? lp.write : lp.read;
            f.res.push_back(rkey(1, from, to));
            res[f.res.back()].cap = lp.link;
            if (lp.port > 0) {
                f.res.push_back(rkey(2, from, (uint32_t)t.link));
                res[f.res.back()].cap = lp.port;
                f.res.push_back(rkey(3, to, (uint32_t)t.link));
                res[f.res.back()].cap = lp.port;
            }
            if (t.kind == mkind::WriteReduce || t.kind == mkind::ReadReduce) {
                f.own = std::min(f.own, p.reduce_bw(t.dtype));
                f.res.push_back(rkey(4, to, 0));
                res[f.res.back()].cap = p.reduce;
            }
        }
        for (uint64_t k : f.res) res[k].n++;
        flows.push_back(std::move(f));
    };
    auto rates = [&] {
        for (Flow& f : flows) {
            double r = f.own;
            for (uint64_t k : f.res) {
                const Res& x = res[k];
                r = std::min(r, x.cap / std::max(1, x.n));
            }
            f.rate = r;
        }
    };
    auto finish = [&](int i, double end) {
        ModelTaskTime& t = T[i];
        t.end = end;
        Thread& th = threads[thread_of[{t.rank, t.thread}]];
        th.free_at = end;
        th.last = i;
        th.busy = false;
        th.cur++;
        arrival[i] = end + notify_latency(t);
        done++;
    };

    /* Runs every thread as far as it goes without a flow starting; returns true on progress. */
    auto advance = [&]() {
        bool any = false;
        for (Thread& th : threads) {
            while (!th.busy && th.cur < th.list.size()) {
                int i = th.list[th.cur];
                ModelTaskTime& t = T[i];
                double st = std::max(t.issue, th.free_at);
                t.pred = t.issue >= th.free_at ? -1 : th.last;
                t.why = t.issue >= th.free_at ? 0 : 1;
                if (mkind::is_wait(t.kind)) {
                    int s = src[i];
                    if (s >= 0 && arrival[s] < 0) break; /* its record has not happened yet */
                    double arr = s >= 0 ? arrival[s] : 0;
                    t.start = st;
                    if (arr > st) {
                        t.pred = s;
                        t.why = 2;
                    }
                    finish(i, std::max(st, arr));
                } else if (mkind::is_flow(t.kind)) {
                    t.start = st;
                    double lat = mkind::is_transfer(t.kind) ? link_of(t).latency_us : 0;
                    pend.emplace_back(std::max(st + lat, now), i);
                    th.busy = true;
                } else { /* records and nops take no time beyond their issue */
                    t.start = st;
                    finish(i, st);
                }
                any = true;
            }
        }
        return any;
    };

    size_t guard = 0;
    while (done < T.size()) {
        if (++guard > 50 * T.size() + 1000) {
            out->notes.push_back("simulation stopped early (no progress)");
            break;
        }
        while (advance()) {
        }
        if (done == T.size()) break;
        /* next event: a flow starts, or the first flow ends at its current rate */
        double next = inf;
        for (auto& pe : pend) next = std::min(next, pe.first);
        for (Flow& f : flows) next = std::min(next, f.rate > 0 ? now + f.remaining / f.rate : inf);
        if (next == inf) {
            /* every thread left waits for a record that never comes in this graph: release the first */
            bool released = false;
            for (Thread& th : threads) {
                if (th.busy || th.cur >= th.list.size()) continue;
                int i = th.list[th.cur];
                if (mkind::is_wait(T[i].kind) && src[i] >= 0) {
                    out->notes.push_back(strprintf("rank %u %s: a wait whose record never happened in the model "
                                                   "was released",
                                                   T[i].rank, thread_name(T[i].thread).c_str()));
                    src[i] = -1;
                    released = true;
                    break;
                }
            }
            if (!released) {
                out->notes.push_back("simulation stopped: nothing can run");
                break;
            }
            continue;
        }
        if (next < now) next = now;
        double dt = next - now;
        for (Flow& f : flows) f.remaining -= f.rate * dt;
        now = next;
        /* flows that ended (in task order, for determinism) */
        std::vector<size_t> ended;
        for (size_t k = 0; k < flows.size(); k++)
            if (flows[k].remaining <= 1e-9 * std::max(1.0, (double)T[flows[k].task].bytes)) ended.push_back(k);
        std::sort(ended.begin(), ended.end(), [&](size_t a, size_t b) { return flows[a].task < flows[b].task; });
        for (size_t k : ended) {
            Flow& f = flows[k];
            for (uint64_t key : f.res) res[key].n--;
            ModelTaskTime& t = T[f.task];
            double alone = t.start + (mkind::is_transfer(t.kind) ? link_of(t).latency_us : 0) +
                           (f.own > 0 ? (double)t.bytes / f.own : 0);
            if (now > alone * (1 + 1e-9) + 1e-9 && t.why != 2) t.why = 3;
            finish(f.task, now);
        }
        std::sort(ended.begin(), ended.end());
        for (size_t k = ended.size(); k-- > 0;) flows.erase(flows.begin() + (long)ended[k]);
        /* flows that start now */
        std::vector<int> starting;
        for (size_t k = 0; k < pend.size();)
            if (pend[k].first <= now) {
                starting.push_back(pend[k].second);
                pend.erase(pend.begin() + (long)k);
            } else {
                k++;
            }
        std::sort(starting.begin(), starting.end());
        for (int i : starting) start_flow(i);
        rates();
    }
    out->time_us = 0;
    int last = -1;
    for (size_t i = 0; i < T.size(); i++)
        if (last < 0 || T[i].end > T[last].end) last = (int)i;
    out->time_us = last >= 0 ? T[last].end : p.launch_us;
    out->critical.clear();
    for (int i = last; i >= 0 && out->critical.size() <= T.size(); i = T[i].pred) out->critical.push_back(i);
    std::reverse(out->critical.begin(), out->critical.end());
}

std::string ModelResult::json(bool all_tasks) const {
    static const char* const whys[] = {"issued", "thread", "notify", "shared link"};
    auto task = [&](const ModelTaskTime& t) {
        std::string s = strprintf("{\"rank\":%u,\"thread\":\"%s\",\"task\":\"%s\",\"seq\":%u", t.rank,
                                  thread_name(t.thread).c_str(), mkind_name(t.kind), t.seq);
        if (t.bytes) s += strprintf(",\"bytes\":%llu", (unsigned long long)t.bytes);
        if (t.peer >= 0) s += strprintf(",\"peer\":%d", t.peer);
        if (t.link != LinkType::None) s += strprintf(",\"link\":\"%s\"", link_type_name(t.link));
        if (t.kind == mkind::LocalReduce || t.kind == mkind::WriteReduce || t.kind == mkind::ReadReduce)
            s += strprintf(",\"dtype\":\"%s\"", dtype_name(t.dtype));
        if (t.src >= 0) s += strprintf(",\"after\":[%u,%u]", tasks[t.src].rank, tasks[t.src].seq);
        s += strprintf(",\"issue_us\":%.4f,\"start_us\":%.4f,\"end_us\":%.4f,\"why\":\"%s\"}", t.issue, t.start, t.end,
                       whys[t.why < 4 ? t.why : 0]);
        return s;
    };
    std::string s = strprintf("{\"time_us\":%.4f,\"product\":\"%s\",\"op\":\"", time_us, product.c_str());
    for (char ch : tag) {
        if (ch == '"' || ch == '\\') s += '\\';
        if ((unsigned char)ch >= 0x20) s += ch;
    }
    s += strprintf("\",\"instance\":%u,\"ranks\":[", inst);
    for (size_t i = 0; i < ranks.size(); i++) s += strprintf("%s%u", i ? "," : "", ranks[i]);
    s += strprintf("],\"tasks\":%zu,\"critical_path\":[", tasks.size());
    for (size_t i = 0; i < critical.size(); i++) s += (i ? "," : "") + task(tasks[critical[i]]);
    s += "],\"notes\":[";
    for (size_t i = 0; i < notes.size(); i++) s += strprintf("%s\"%s\"", i ? "," : "", notes[i].c_str());
    s += "]";
    s += analysis_json();
    if (all_tasks) {
        s += ",\"all\":[";
        for (size_t i = 0; i < tasks.size(); i++) s += (i ? "," : "") + task(tasks[i]);
        s += "]";
    }
    return s + "}";
}

namespace {
constexpr uint32_t kTrackOps = 0x4000;      /* apart from thread codes (< 0x1000) and diag/trace.cc's tracks */
constexpr uint32_t kTrackCritical = 0x4001;

std::string jesc(const std::string& in) {
    std::string o;
    for (char ch : in) {
        if (ch == '"' || ch == '\\') o += '\\';
        if ((unsigned char)ch >= 0x20) o += ch;
    }
    return o;
}

/* The host-clock trace's categories (diag/trace.cc), ",critical" added on the critical path. */
std::string cat(uint8_t kind, bool critical) {
    const char* c = mkind::is_wait(kind) ? "wait"
                    : kind == mkind::LocalReduce || kind == mkind::WriteReduce || kind == mkind::ReadReduce ? "reduce"
                    : kind == mkind::LocalCopy || kind == mkind::Write || kind == mkind::Read ? "copy"
                    : kind == mkind::Nop ? "task" : "notify";
    return std::string(c) + (critical ? ",critical" : "");
}
}  // namespace

std::string ModelResult::trace_events(double off, uint64_t* flow, std::set<std::pair<uint32_t, uint32_t>>* tracks) const {
    static const char* const whys[] = {"issued", "thread", "notify", "shared link"};
    std::string out;
    auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",\n") + item; };
    auto name = [&](uint32_t pid, uint32_t tid, const std::string& what) {
        if (tracks->insert({pid, tid}).second)
            add(strprintf("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"%s\"}}",
                          pid, tid, jesc(what).c_str()));
    };
    std::vector<char> crit(tasks.size(), 0);
    for (int i : critical) crit[(size_t)i] = 1;
    std::string op = jesc(tag) + strprintf(" #%u", inst);
    for (uint32_t r : ranks) {
        if (tracks->insert({r, 0xffffffffu}).second)
            add(strprintf("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,\"args\":{\"name\":\"rank %u\"}}", r, r));
        name(r, kTrackOps, "operations (modelled)");
        add(strprintf("{\"name\":\"%s\",\"cat\":\"operation\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.4f,"
                      "\"dur\":%.4f,\"args\":{\"model_time_us\":%.4f,\"product\":\"%s\",\"tasks\":%zu,"
                      "\"critical_tasks\":%zu}}",
                      op.c_str(), r, kTrackOps, off, time_us, time_us, jesc(product).c_str(), tasks.size(),
                      critical.size()));
    }
    auto slice = [&](const ModelTaskTime& t, uint32_t tid, bool critical_track, bool on_path) {
        std::string args = strprintf("\"op\":\"%s\",\"seq\":%u,\"issue_us\":%.4f,\"why\":\"%s\"", op.c_str(), t.seq,
                                     off + t.issue, whys[t.why < 4 ? t.why : 0]);
        if (t.bytes) args += strprintf(",\"bytes\":%llu", (unsigned long long)t.bytes);
        if (t.peer >= 0) args += strprintf(",\"peer\":%d", t.peer);
        if (t.link != LinkType::None) args += strprintf(",\"link\":\"%s\"", link_type_name(t.link));
        if (t.src >= 0) args += strprintf(",\"after\":[%u,%u]", tasks[(size_t)t.src].rank, tasks[(size_t)t.src].seq);
        if (critical_track) args += ",\"thread\":\"" + thread_name(t.thread) + "\"";
        if (on_path) args += ",\"critical\":true";
        return strprintf("{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":%.4f,"
                         "\"dur\":%.4f%s,\"args\":{%s}}",
                         mkind_name(t.kind), cat(t.kind, on_path).c_str(), t.rank, tid, off + t.start,
                         t.end - t.start, on_path ? ",\"cname\":\"terrible\"" : "", args.c_str());
    };
    for (size_t i = 0; i < tasks.size(); i++) {
        const ModelTaskTime& t = tasks[i];
        name(t.rank, t.thread, thread_name(t.thread));
        add(slice(t, t.thread, false, crit[i]));
        if (crit[i]) {
            name(t.rank, kTrackCritical, "critical path (modelled)");
            add(slice(t, kTrackCritical, true, true));
        }
    }
    /* a notify edge: from the record to the wait that consumed it (each bound to its slice's middle) */
    for (const ModelTaskTime& t : tasks) {
        if (t.src < 0) continue;
        const ModelTaskTime& s = tasks[(size_t)t.src];
        uint64_t id = ++*flow;
        add(strprintf("{\"name\":\"notify\",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%llu,\"pid\":%u,\"tid\":%u,\"ts\":%.4f}",
                      (unsigned long long)id, s.rank, (uint32_t)s.thread, off + (s.start + s.end) / 2));
        add(strprintf("{\"name\":\"notify\",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,\"pid\":%u,"
                      "\"tid\":%u,\"ts\":%.4f}",
                      (unsigned long long)id, t.rank, (uint32_t)t.thread, off + (t.start + t.end) / 2));
    }
    return out;
}

}  // namespace emu
