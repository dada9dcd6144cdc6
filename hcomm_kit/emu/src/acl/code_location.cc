/* Where kernel code is: source lines of instruction addresses (dladdr + addr2line on the kernel's
 * debug info), and position samples of a running kernel (kernel_sample_where) for hang reports. */
#include "acl/runtime.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

namespace emu {

namespace {
std::mutex& g_loc_m = *new std::mutex();
std::map<std::pair<const void*, bool>, std::pair<std::string, std::string>>& g_loc =
    *new std::map<std::pair<const void*, bool>, std::pair<std::string, std::string>>();

/* (long, short) descriptions of pc, through dladdr and addr2line. */
std::pair<std::string, std::string> locate(const void* pc, bool call_site) {
    if (!pc) return {"an unknown instruction", ""};
    const void* q = call_site ? (const char*)pc - 1 : pc;
    Dl_info di;
    memset(&di, 0, sizeof di);
    if (!dladdr(q, &di) || !di.dli_fname) return {strprintf("%p", pc), ""};
    uintptr_t off = (uintptr_t)q - (uintptr_t)di.dli_fbase;
    const char* base = strrchr(di.dli_fname, '/');
    std::string where = strprintf("%s+0x%lx", base ? base + 1 : di.dli_fname, (unsigned long)off);
    std::string func = di.dli_sname ? di.dli_sname : "";
    /* addr2line -f -C -i: function and file:line pairs, innermost first */
    std::string cmd = strprintf("addr2line -f -C -i -e '%s' 0x%lx 2>/dev/null", di.dli_fname, (unsigned long)off);
    std::string file_line, fn;
    if (FILE* p = popen(cmd.c_str(), "r")) {
        char line[1024];
        int n = 0;
        while (fgets(line, sizeof line, p)) {
            std::string l(line);
            while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
            if (n == 0) fn = l;
            if (n == 1) file_line = l;
            n++;
        }
        pclose(p);
    }
    if (!file_line.empty() && file_line.find("??") == std::string::npos &&
        (file_line.size() < 2 || file_line.compare(file_line.size() - 2, 2, ":?") != 0)) {
        size_t k = file_line.find(" (discriminator");
        if (k != std::string::npos) file_line.resize(k);
        std::string f = !fn.empty() && fn != "??" ? fn : func;
        const char* sl = strrchr(file_line.c_str(), '/');
        return {strprintf("%s in %s (%s)", file_line.c_str(), f.c_str(), where.c_str()), sl ? sl + 1 : file_line};
    }
    if (!func.empty())
        return {strprintf("%s (%s; build with debug info for the source line)", func.c_str(), where.c_str()),
                func + " (" + where + ")"};
    return {strprintf("%s (build with debug info for the source line)", where.c_str()), where};
}

std::pair<std::string, std::string> locate_cached(const void* pc, bool call_site) {
    auto key = std::make_pair(pc, call_site);
    {
        std::lock_guard<std::mutex> g(g_loc_m);
        auto it = g_loc.find(key);
        if (it != g_loc.end()) return it->second;
    }
    auto r = locate(pc, call_site);
    std::lock_guard<std::mutex> g(g_loc_m);
    if (g_loc.size() < 4096) g_loc[key] = r;
    return r;
}
}  // namespace

std::string code_location(const void* pc, bool call_site) { return locate_cached(pc, call_site).first; }

namespace {
/* The scheduling state of thread tid of this process ('R' running, 'S' sleeping, ...; 0: unknown). */
char thread_state(int tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char* e = strrchr(buf, ')'); /* the command may contain spaces and parentheses */
    return e && e[1] == ' ' ? e[2] : 0;
}

/* The user-space PC of thread tid blocked in a system call, and the call's number (-1: not in one). */
long thread_syscall(int tid, uintptr_t* pc) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = 0;
    char* end = nullptr;
    long nr = strtol(buf, &end, 10);
    if (end == buf) return -1; /* "running" */
    const char* last = strrchr(buf, ' ');
    *pc = last ? (uintptr_t)strtoull(last + 1, nullptr, 16) : 0;
    return nr;
}
}  // namespace

/* Sampling a kernel's position. A worker that is running (state R) is sent kCancelSig: its handler
 * (on_cancel) stores the interrupted PC, which dladdr + addr2line turn into "file:line in function"
 * (-g kernels). A worker sleeping in a system call is not signalled (that could cut a sleep short):
 * /proc/self/task/<tid>/syscall gives its PC in the system call. */
std::string kernel_sample_where(KernelRun& r, uint64_t min_interval_ns) {
    std::unique_lock<std::mutex> g(r.sample_m, std::try_to_lock);
    if (!g.owns_lock()) return "";
    uint64_t now = now_ns();
    if (r.sampled_ns && now - r.sampled_ns < min_interval_ns) return r.where;
    if (r.done.load() || r.tid == this_tid()) return r.where;
    r.sampled_ns = now;
    char st = thread_state(r.tid);
    uintptr_t pc = 0;
    if (st == 'S' || st == 'D') {
        long nr = thread_syscall(r.tid, &pc);
        if (nr >= 0) {
            r.where = strprintf("in system call %ld (%s)", nr, locate_cached((const void*)pc, false).second.c_str());
            return r.where;
        }
    }
    if (st != 'R') return r.where;
    uint32_t req = r.sample_req.fetch_add(1) + 1;
    if (syscall(SYS_tgkill, (int)getpid(), r.tid, kCancelSig) != 0) return r.where;
    for (int i = 0; i < 50 && r.sample_ack.load(std::memory_order_acquire) != req; i++) usleep(1000);
    if (r.sample_ack.load(std::memory_order_acquire) != req || r.done.load()) return r.where;
    pc = r.sample_pc.load(std::memory_order_relaxed);
    if (!pc) return r.where;
    bool own = false;
    for (auto& rg : r.code)
        if (pc >= rg.first && pc < rg.second) own = true;
    /* "exec_op.cc:42 in ops_x::ExecOp(...)" (-g), else "ExecOp (lib.so+0x1234)" */
    auto loc = locate_cached((const void*)pc, false);
    std::string where = loc.second;
    size_t in = loc.first.find(" in "), lib = loc.first.rfind(" (");
    if (where.find(':') != std::string::npos && in != std::string::npos && lib != std::string::npos && lib > in)
        where += loc.first.substr(in, lib - in);
    r.where = own ? where : "outside the kernel library, in " + where;
    return r.where;
}
std::string code_line(const void* pc, bool call_site) { return pc ? locate_cached(pc, call_site).second : ""; }

}  // namespace emu
