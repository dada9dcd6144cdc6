/* What a simulated operation's time is made of, for `hcomm-kit model explain`
 * (HcommKitModelExplain): every directed link's and every device thread's use over the
 * operation, the links that sat idle, and the critical path cut into phases, each bound by one
 * thing: the host launch, the AICPU's issue of the tasks before the path's first, a link (the
 * transfers on the path), a local copy / reduction, or a peer's notify in flight. Computed only
 * when asked (the modelled figure of every bench size does not need it). */
#include "base/reduce.h"
#include "model/model.h"

#include <algorithm>
#include <map>

namespace emu {

namespace {

/* Total length of the union of intervals (sorted in place). */
double union_length(std::vector<std::pair<double, double>>* iv) {
    std::sort(iv->begin(), iv->end());
    double total = 0, s = 0, e = -1;
    bool open = false;
    for (auto& x : *iv) {
        if (!open || x.first > e) {
            if (open) total += e - s;
            s = x.first;
            e = x.second;
            open = true;
        } else {
            e = std::max(e, x.second);
        }
    }
    if (open) total += e - s;
    return total;
}

const char* phase_name(PhaseKind k) {
    static const char* const names[] = {"launch", "issue", "link", "local", "peer"};
    return names[(int)k];
}

}  // namespace

void ModelResult::analyse(const ModelParams& p, const Topology& topo) {
    analysed = true;
    task_us = p.task_us;
    launch_us = p.launch_us;
    links.clear();
    idle.clear();
    threads.clear();
    phases.clear();

    /* links and threads */
    std::map<std::pair<uint32_t, uint32_t>, size_t> link_at;
    std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<double, double>>> busy;
    std::map<std::pair<uint32_t, uint16_t>, size_t> thread_at;
    for (const ModelTaskTime& t : tasks) {
        auto tk = std::make_pair(t.rank, t.thread);
        auto ti = thread_at.find(tk);
        if (ti == thread_at.end()) {
            ti = thread_at.emplace(tk, threads.size()).first;
            ModelThreadUse u;
            u.rank = t.rank;
            u.thread = t.thread;
            threads.push_back(u);
        }
        ModelThreadUse& tu = threads[ti->second];
        tu.tasks++;
        if (mkind::is_wait(t.kind)) tu.wait_us += t.end - t.start;
        if (mkind::is_transfer(t.kind) || mkind::is_local(t.kind)) {
            tu.busy_us += t.end - t.start;
            tu.bytes += t.bytes;
        }
        if (!mkind::is_transfer(t.kind) || t.peer < 0 || t.link == LinkType::None) continue;
        uint32_t from = mkind::is_read(t.kind) ? (uint32_t)t.peer : t.rank, to = mkind::is_read(t.kind) ? t.rank : (uint32_t)t.peer;
        auto key = std::make_pair(from, to);
        auto li = link_at.find(key);
        if (li == link_at.end()) {
            li = link_at.emplace(key, links.size()).first;
            ModelLinkUse u;
            u.from = from;
            u.to = to;
            u.type = t.link;
            links.push_back(u);
        }
        links[li->second].bytes += t.bytes;
        links[li->second].transfers++;
        double moving = t.start + p.link[(int)t.link].latency_us;
        if (t.end > moving) busy[key].emplace_back(moving, t.end);
    }
    for (ModelLinkUse& u : links) {
        auto b = busy.find({u.from, u.to});
        if (b != busy.end()) u.busy_us = union_length(&b->second);
    }
    std::sort(links.begin(), links.end(), [](const ModelLinkUse& a, const ModelLinkUse& b) {
        return a.busy_us != b.busy_us ? a.busy_us > b.busy_us : std::make_pair(a.from, a.to) < std::make_pair(b.from, b.to);
    });
    for (uint32_t a : ranks)
        for (uint32_t b : ranks) {
            if (a == b || a >= topo.nranks || b >= topo.nranks || topo.is_down(a, b)) continue;
            if (!link_at.count({a, b})) idle.emplace_back(a, b);
        }

    /* the critical path in phases: each task's stretch [end of the one before it, its end] */
    auto push = [&](const ModelPhase& ph) {
        if (ph.end - ph.start <= 1e-9) return;
        if (!phases.empty()) {
            ModelPhase& last = phases.back();
            bool same = last.kind == ph.kind && last.rank == ph.rank && last.thread == ph.thread &&
                        (ph.kind == PhaseKind::Local || ph.kind == PhaseKind::Peer ||
                         (ph.kind == PhaseKind::Link && last.peer == ph.peer && last.read == ph.read));
            if (same && ph.kind == PhaseKind::Peer) same = last.peer == ph.peer;
            if (same) {
                last.end = ph.end;
                last.tasks += ph.tasks;
                last.bytes += ph.bytes;
                last.shared = last.shared || ph.shared;
                last.kinds |= ph.kinds;
                return;
            }
        }
        phases.push_back(ph);
    };
    double prev = 0;
    for (size_t k = 0; k < critical.size(); k++) {
        const ModelTaskTime& t = tasks[(size_t)critical[k]];
        if (k == 0) {
            ModelPhase l;
            l.kind = PhaseKind::Launch;
            l.rank = t.rank;
            l.end = std::min(launch_us, t.start);
            push(l);
            ModelPhase is;
            is.kind = PhaseKind::Issue;
            is.rank = t.rank;
            is.thread = t.thread;
            is.tasks = t.seq + 1;
            is.start = l.end;
            is.end = t.start;
            push(is);
            prev = t.start;
        }
        ModelPhase ph;
        ph.rank = t.rank;
        ph.thread = t.thread;
        ph.start = std::min(prev, t.end);
        ph.end = t.end;
        ph.tasks = 1;
        if (mkind::is_wait(t.kind)) {
            ph.kind = PhaseKind::Peer; /* the record's notify in flight (the path went through its recorder) */
            ph.link = t.link;
            ph.peer = t.src >= 0 ? (int32_t)tasks[(size_t)t.src].rank : -1;
        } else if (mkind::is_transfer(t.kind)) {
            ph.kind = PhaseKind::Link;
            ph.peer = t.peer;
            ph.link = t.link;
            ph.read = mkind::is_read(t.kind);
            ph.shared = t.why == 3;
            ph.bytes = t.bytes;
            ph.kinds = (t.kind == mkind::WriteReduce || t.kind == mkind::ReadReduce) ? 2 : 1;
        } else if (mkind::is_local(t.kind)) {
            ph.kind = PhaseKind::Local;
            ph.bytes = t.bytes;
            ph.kinds = t.kind == mkind::LocalCopy ? 1 : 2;
        } else {
            ph.kind = PhaseKind::Peer; /* a record or nop: takes no time of its own */
        }
        push(ph);
        prev = t.end;
    }
}

std::string ModelResult::analysis_json() const {
    if (!analysed) return "";
    std::string s = strprintf(",\"task_us\":%.4f,\"launch_us\":%.4f,\"links\":[", task_us, launch_us);
    for (size_t i = 0; i < links.size(); i++) {
        const ModelLinkUse& u = links[i];
        s += strprintf("%s{\"from\":%u,\"to\":%u,\"type\":\"%s\",\"bytes\":%llu,\"transfers\":%u,\"busy_us\":%.4f,"
                       "\"utilisation\":%.4f,\"GBps\":%.4f}",
                       i ? "," : "", u.from, u.to, link_type_name(u.type), (unsigned long long)u.bytes, u.transfers,
                       u.busy_us, time_us > 0 ? u.busy_us / time_us : 0.0,
                       u.busy_us > 0 ? (double)u.bytes / u.busy_us / 1e3 : 0.0);
    }
    s += "],\"idle_links\":[";
    for (size_t i = 0; i < idle.size(); i++) s += strprintf("%s[%u,%u]", i ? "," : "", idle[i].first, idle[i].second);
    s += "],\"threads\":[";
    for (size_t i = 0; i < threads.size(); i++) {
        const ModelThreadUse& u = threads[i];
        s += strprintf("%s{\"rank\":%u,\"thread\":\"%s\",\"tasks\":%u,\"bytes\":%llu,\"busy_us\":%.4f,\"wait_us\":%.4f,"
                       "\"utilisation\":%.4f}",
                       i ? "," : "", u.rank, thread_name(u.thread).c_str(), u.tasks, (unsigned long long)u.bytes,
                       u.busy_us, u.wait_us, time_us > 0 ? u.busy_us / time_us : 0.0);
    }
    s += "],\"phases\":[";
    for (size_t i = 0; i < phases.size(); i++) {
        const ModelPhase& ph = phases[i];
        s += strprintf("%s{\"bound\":\"%s\",\"rank\":%u", i ? "," : "", phase_name(ph.kind), ph.rank);
        if (ph.kind != PhaseKind::Launch) s += strprintf(",\"thread\":\"%s\"", thread_name(ph.thread).c_str());
        if (ph.peer >= 0) s += strprintf(",\"peer\":%d", ph.peer);
        if (ph.link != LinkType::None) s += strprintf(",\"link\":\"%s\"", link_type_name(ph.link));
        if (ph.kind == PhaseKind::Link)
            s += strprintf(",\"op\":\"%s%s\",\"shared\":%s", ph.read ? "read" : "write",
                           ph.kinds & 2 ? " reduce" : "", ph.shared ? "true" : "false");
        if (ph.kind == PhaseKind::Local)
            s += strprintf(",\"op\":\"%s\"", ph.kinds == 1 ? "copy" : ph.kinds == 2 ? "reduce" : "copy and reduce");
        s += strprintf(",\"tasks\":%u,\"bytes\":%llu,\"start_us\":%.4f,\"end_us\":%.4f,\"us\":%.4f}", ph.tasks,
                       (unsigned long long)ph.bytes, ph.start, ph.end, ph.end - ph.start);
    }
    s += "],\"bound\":{";
    double by[5] = {0, 0, 0, 0, 0};
    for (const ModelPhase& ph : phases) by[(int)ph.kind] += ph.end - ph.start;
    for (int k = 0; k < 5; k++) s += strprintf("%s\"%s\":%.4f", k ? "," : "", phase_name((PhaseKind)k), by[k]);
    return s + "}";
}

}  // namespace emu
