/* HCOMM_KIT_TRACE=FILE: one Chrome / Perfetto JSON trace of a whole job (hcomm-kit extension).
 *
 * Every process buffers its events in memory: a slice per Hcomm task on its device thread's track
 * (copy, write, read, reduce, notify record / wait), a slice per kernel launch on its stream's
 * track, an instant per host launch, and a flow arrow from every notify record to the wait that
 * consumed it (the id travels in DevCtl::flow, like the race checker's clock vectors). Track
 * groups ("processes") are ranks: pid = rank, tid = thread code (kStreamThread | id for stream
 * threads, kTrackStream | id for a stream's kernels, 0 for the host).
 *
 * When a communicator is destroyed, each rank writes its part (FILE.part.<job>.<pid>.json); the
 * last rank of the job merges every part of the job into FILE and removes them. A process that
 * exits without that (a failed job) writes its part and merges what exists at exit, so FILE always
 * holds what the surviving ranks saw.
 *
 * HCOMM_KIT_TRACE_CLOCK=model puts the timing model's clock in place of the host's: none of the
 * host-clock events above; when a communicator is destroyed, its rank 0 adds every operation its
 * model log holds, every rank's tasks simulated (model/, ModelResult::trace_events: the one writer
 * of modelled traces) and laid end to end, with the critical path marked. */
#include "diag/diag.h"
#include "hccl/hooks.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

namespace emu {

namespace {
constexpr uint32_t kTrackStream = 0x1000;
constexpr uint32_t kTrackHost = 0x3000; /* apart from thread codes (t0 = 0) and kTrackStream */

struct Ev {
    char ph;           /* 'X' slice, 'i' instant, 's' flow start, 'f' flow end */
    uint8_t cat;       /* index into kCats */
    uint16_t pad;
    int32_t pid;       /* rank */
    uint32_t tid;      /* track */
    uint64_t ts, dur;  /* ns */
    uint64_t id;       /* flow id */
    const char* name;  /* interned or static */
    std::string args;  /* JSON object body, may be empty */
};
const char* const kCats[] = {"task", "copy", "reduce", "notify", "wait", "kernel", "launch", "flow"};
enum Cat : uint8_t { CTask, CCopy, CReduce, CNotify, CWait, CKernel, CLaunch, CFlow };

std::mutex& g_tr_m = *new std::mutex();
std::vector<Ev>& g_ev = *new std::vector<Ev>();
std::map<std::pair<int32_t, uint32_t>, std::string>& g_tracks = *new std::map<std::pair<int32_t, uint32_t>, std::string>();
std::string& g_job = *new std::string();
std::map<Device*, int32_t>& g_dev_rank = *new std::map<Device*, int32_t>(); /* host launches: the rank of a device */
std::string& g_raw = *new std::string(); /* event items written elsewhere (the modelled clock) */
std::string& g_note = *new std::string(); /* what the modelled trace left out */
std::atomic<uint64_t> g_flow_ids{0};
bool g_atexit = false;
int g_live = 0; /* communicators of this process not yet removed */

std::string esc(const char* s) {
    std::string o;
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') o += '\\', o += (char)ch;
        else if (ch < 0x20) o += strprintf("\\u%04x", ch);
        else o += (char)ch;
    }
    return o;
}

bool on() { return !cfg().trace_file.empty(); }
/* host-clock events: not when the trace is on the modelled clock */
bool host_on() { return on() && !cfg().trace_model_clock; }

void push(Ev&& e) {
    std::lock_guard<std::mutex> g(g_tr_m);
    g_ev.push_back(std::move(e));
}

void name_track(int32_t pid, uint32_t tid, const std::string& name) {
    std::lock_guard<std::mutex> g(g_tr_m);
    g_tracks.emplace(std::make_pair(pid, tid), name);
}

std::string part_name(const std::string& file, const std::string& job, int pid) {
    /* the job id is the first communicator's: every rank of the job shares it */
    return strprintf("%s.part.%s.%d.json", file.c_str(), job.c_str(), pid);
}

/* This process's events as JSON array items (no brackets); clears the buffer. */
std::string take_events() {
    std::vector<Ev> ev;
    std::map<std::pair<int32_t, uint32_t>, std::string> tracks;
    std::string out;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        ev.swap(g_ev);
        tracks = g_tracks;
        out.swap(g_raw);
    }
    auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",\n") + item; };
    std::set<int32_t> pids;
    for (auto& kv : tracks) pids.insert(kv.first.first);
    for (int32_t p : pids)
        add(strprintf("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}", p, p));
    for (auto& kv : tracks)
        add(strprintf("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%u,\"args\":{\"name\":\"%s\"}}",
                      kv.first.first, kv.first.second, esc(kv.second.c_str()).c_str()));
    for (const Ev& e : ev) {
        std::string item = strprintf("{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"%c\",\"pid\":%d,\"tid\":%u,\"ts\":%.3f",
                                     esc(e.name).c_str(), kCats[e.cat], e.ph, e.pid, e.tid, (double)e.ts / 1000.0);
        if (e.ph == 'X') item += strprintf(",\"dur\":%.3f", (double)e.dur / 1000.0);
        if (e.ph == 'i') item += ",\"s\":\"t\"";
        if (e.ph == 's' || e.ph == 'f') item += strprintf(",\"id\":%llu", (unsigned long long)e.id);
        if (e.ph == 'f') item += ",\"bp\":\"e\"";
        if (!e.args.empty()) item += ",\"args\":{" + e.args + "}";
        add(item + "}");
    }
    return out;
}

bool write_atomic(const std::string& path, const std::string& text) {
    std::string tmp = path + strprintf(".tmp%d", (int)getpid());
    FILE* f = fopen(tmp.c_str(), "w");
    if (!f) return false;
    bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = fclose(f) == 0 && ok;
    return ok && rename(tmp.c_str(), path.c_str()) == 0;
}

std::string read_all(const std::string& path) {
    std::string s;
    FILE* f = fopen(path.c_str(), "r");
    if (!f) return s;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    fclose(f);
    return s;
}

/* Writes this process's part; with merge, combines every part of the job into the trace file
 * (remove_parts: and deletes them: the job is complete). */
void flush(bool merge, bool remove_parts) {
    const std::string& file = cfg().trace_file;
    std::string job;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        job = g_job.empty() ? strprintf("p%d", (int)getpid()) : g_job;
    }
    std::string part = part_name(file, job, (int)getpid());
    {
        static std::mutex& part_m = *new std::mutex(); /* ranks as threads share the process's part */
        std::lock_guard<std::mutex> g(part_m);
        std::string mine = take_events();
        if (!mine.empty()) {
            std::string prev = read_all(part);
            write_atomic(part, prev.empty() ? mine : prev + ",\n" + mine);
        }
    }
    if (!merge) return;
    int lock = open((file + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock >= 0) flock(lock, LOCK_EX);
    std::string dir = ".", base = file;
    size_t sl = file.rfind('/');
    if (sl != std::string::npos) dir = file.substr(0, sl), base = file.substr(sl + 1);
    std::string prefix = base + ".part." + job + ".";
    std::vector<std::string> parts;
    if (DIR* d = opendir(dir.c_str())) {
        while (struct dirent* de = readdir(d))
            if (!strncmp(de->d_name, prefix.c_str(), prefix.size())) parts.push_back(dir + "/" + de->d_name);
        closedir(d);
    }
    std::sort(parts.begin(), parts.end());
    std::string body;
    for (auto& p : parts) {
        std::string t = read_all(p);
        if (!t.empty()) body += (body.empty() ? "" : ",\n") + t;
    }
    std::string note;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        note = g_note;
    }
    std::string clock = cfg().trace_model_clock
                            ? "modelled (timing model, `hcomm-kit docs predicted-time`), microseconds from the first operation's "
                              "host launch; operations end to end"
                            : "CLOCK_MONOTONIC, microseconds";
    if (!note.empty()) clock += "\",\"note\":\"" + esc(note.c_str());
    std::string doc = "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"hcomm-kit emulator\",\"job\":\"" + job +
                      "\",\"clock\":\"" + clock + "\"},\"traceEvents\":[\n" + body + "\n]}\n";
    if (!write_atomic(file, doc))
        EMU_LOG(LOG_WARN, "HCOMM_KIT_TRACE: cannot write %s: %s", file.c_str(), strerror(errno));
    if (remove_parts) {
        for (auto& p : parts) unlink(p.c_str());
        unlink((file + ".lock").c_str());
    }
    if (lock >= 0) close(lock);
}

void at_exit() {
    if (!on()) return;
    bool pending;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        /* every communicator was removed, so this process's part is in the job's merge already:
         * events after that (track names of late tasks) must not replace the merged file */
        pending = !g_ev.empty() && g_live > 0;
    }
    if (pending) flush(true, false);
}
}  // namespace

bool trace_on() { return host_on(); }

uint64_t trace_flow_id(uint32_t rank) {
    return kTraceOnlyId | ((uint64_t)(rank & 0x7f) << 48) | (g_flow_ids.fetch_add(1) + 1);
}

void trace_comm_added(Comm* c) {
    if (!on()) return;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        if (g_job.empty()) g_job = c->jobid;
        g_live++;
        g_dev_rank[c->dev] = (int32_t)c->rank;
        if (!g_atexit) {
            g_atexit = true;
            atexit(at_exit);
        }
    }
    name_track((int32_t)c->rank, kTrackHost, "host");
}

void trace_comm_removed(Comm* c) {
    if (!on() || !c->job) return;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        g_live--;
    }
    if (cfg().trace_model_clock && c->rank == 0) {
        std::string note;
        std::string items = hccl_hooks.model_trace ? hccl_hooks.model_trace(c, &note) : std::string();
        if (!hccl_hooks.model_trace) note = "the timing model is not in this library";
        if (!note.empty()) EMU_LOG(LOG_WARN, "HCOMM_KIT_TRACE_CLOCK=model: %s", note.c_str());
        std::lock_guard<std::mutex> g(g_tr_m);
        if (!items.empty()) g_raw += (g_raw.empty() ? "" : ",\n") + items;
        if (!note.empty()) g_note += (g_note.empty() ? "" : "; ") + note;
    }
    /* write this rank's part first, then count it: the last rank of the job to leave merges the
     * job's parts, and every part is on disk by then */
    flush(false, false);
    if (c->job->trace_done.fetch_add(1) + 1 == c->nranks) flush(true, true);
}

void trace_task(const HTask& t, const HThread* self, uint64_t t0, uint64_t t1) {
    if (!host_on() || !self || !self->comm) return;
    int32_t pid = comm_rank(self->comm);
    uint32_t tid = thread_code(self);
    name_track(pid, tid, thread_name(tid));
    Ev e{};
    e.ph = 'X';
    e.pid = pid;
    e.tid = tid;
    e.ts = t0;
    e.dur = t1 > t0 ? t1 - t0 : 0;
    e.name = t.api && *t.api ? t.api : "task";
    switch (t.op) {
        case HOp::Copy: e.cat = CCopy; break;
        case HOp::Reduce: e.cat = CReduce; break;
        case HOp::Record: e.cat = CNotify; break;
        case HOp::Wait: e.cat = CWait; break;
        default: e.cat = CTask;
    }
    std::string args = strprintf("\"task\":\"%u of %u\"", t.bidx + 1, t.bsize);
    if (t.tag && *t.tag) args += strprintf(",\"op\":\"%s #%u\"", esc(t.tag).c_str(), t.inst);
    if (t.op == HOp::Copy) args += strprintf(",\"bytes\":%llu", (unsigned long long)t.n);
    if (t.op == HOp::Reduce) args += strprintf(",\"elements\":%llu", (unsigned long long)t.n);
    if (t.op == HOp::Wait || t.op == HOp::Record) args += strprintf(",\"slot\":%u", t.desc.index);
    if (t.caller) args += ",\"at\":\"" + esc(code_line(t.caller).c_str()) + "\"";
    e.args = args;
    push(std::move(e));
}

void trace_flow(bool start, uint64_t id, const HThread* self, uint64_t ts) {
    if (!host_on() || !id || !self || !self->comm) return;
    Ev e{};
    e.ph = start ? 's' : 'f';
    e.cat = CFlow;
    e.pid = comm_rank(self->comm);
    e.tid = thread_code(self);
    e.ts = ts;
    e.id = id;
    e.name = "notify";
    push(std::move(e));
}

void trace_kernel(Stream* s, const char* name, uint64_t t0, uint64_t t1, const std::vector<Comm*>& comms) {
    if (!host_on()) return;
    for (Comm* c : comms) {
        int32_t pid = comm_rank(c);
        uint32_t tid = kTrackStream | s->id;
        name_track(pid, tid, strprintf("stream %u (kernels)", s->id));
        Ev e{};
        e.ph = 'X';
        e.cat = CKernel;
        e.pid = pid;
        e.tid = tid;
        e.ts = t0;
        e.dur = t1 > t0 ? t1 - t0 : 0;
        e.name = name;
        push(std::move(e));
    }
}

void trace_launch(Stream* s, const char* name) {
    if (!host_on()) return;
    int32_t rank;
    {
        std::lock_guard<std::mutex> g(g_tr_m);
        auto it = g_dev_rank.find(s->dev);
        if (it == g_dev_rank.end()) return;
        rank = it->second;
    }
    Ev e{};
    e.ph = 'i';
    e.cat = CLaunch;
    e.pid = rank;
    e.tid = kTrackHost;
    e.ts = now_ns();
    e.name = name;
    e.args = strprintf("\"stream\":%u", s->id);
    push(std::move(e));
}

void trace_note(Comm* c, const char* name, const std::string& args) {
    if (!host_on()) return;
    Ev e{};
    e.ph = 'i';
    e.cat = CLaunch;
    e.pid = (int32_t)c->rank;
    e.tid = kTrackHost;
    e.ts = now_ns();
    e.name = name;
    e.args = args;
    push(std::move(e));
}

}  // namespace emu
