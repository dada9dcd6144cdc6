/* AICPU kernel binaries, argument lists and launches (acl_runtime.md §3.5-§3.7, §3.11).
 *
 * A kernel entry `uint32_t fn(void* args)` runs on the stream's worker thread (our AICPU worker)
 * with a private copy of exactly the appended argument bytes (plus placeholder data). Crashes
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) inside the entry are caught with a per-thread
 * sigsetjmp guard and reported as 507018 naming the kernel. */
#include "acl/hooks.h"
#include "acl/runtime.h"
#include "base/hooks.h"
#include "base/json.h"
#include "hcomm_kit/asc_launch.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/syscall.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace emu {

struct Binary;
struct Func {
    uint32_t magic = kFuncMagic;
    Binary* bin = nullptr;
    std::string op_type, func_name, so_name;
    void* fn = nullptr;
    std::vector<std::pair<uintptr_t, uintptr_t>> code; /* executable ranges of its library */
};
struct Binary {
    uint32_t magic = kBinMagic;
    int mode = -1;       /* cpuKernelMode; -1 = not an AICPU binary */
    std::string json_path, so_path;
    void* dl = nullptr;
    int memfd = -1;
    std::map<std::string, Func*> funcs; /* op type -> function */
    std::map<std::string, std::pair<std::string, std::string>> entries; /* op type -> (functionName, kernelSo) */
    std::vector<std::pair<uintptr_t, uintptr_t>> code; /* executable segments of the loaded library */
    bool by_symbol = false; /* aclrtBinaryLoad image: aclrtBinaryGetFunction looks the name up as a symbol */
};
/* aclrtCreateBinary: a private copy of the caller's image. */
constexpr uint32_t kImageMagic = 0x494d4731; /* "IMG1" */
struct Image {
    uint32_t magic = kImageMagic;
    std::vector<uint8_t> data;
};

/* The executable segments of a library opened with dlopen (runaway-kernel cancellation). */
static void code_ranges(void* dl, std::vector<std::pair<uintptr_t, uintptr_t>>* out) {
    struct link_map* lm = nullptr;
    if (!dl || dlinfo(dl, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
    struct Ctx {
        uintptr_t base;
        std::vector<std::pair<uintptr_t, uintptr_t>>* out;
    } ctx{(uintptr_t)lm->l_addr, out};
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* p) -> int {
            Ctx* c = static_cast<Ctx*>(p);
            if ((uintptr_t)info->dlpi_addr != c->base) return 0;
            for (int i = 0; i < info->dlpi_phnum; i++) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
                    c->out->emplace_back(c->base + ph.p_vaddr, c->base + ph.p_vaddr + ph.p_memsz);
            }
            return 1;
        },
        &ctx);
}

namespace {
std::mutex g_bin_m;
std::unordered_set<Binary*> g_bins;
std::unordered_set<Func*> g_funcs;
std::unordered_set<Image*> g_images;

bool func_valid(Func* f) {
    std::lock_guard<std::mutex> g(g_bin_m);
    return g_funcs.count(f) != 0;
}

/* ---------------------------------------------------------------- crash guard */
struct Guard {
    sigjmp_buf jb;
    volatile sig_atomic_t armed = 0;
    volatile int sig = 0;
    void* volatile addr = nullptr;
    void* volatile pc = nullptr; /* the faulting instruction */
    KernelRun* volatile run = nullptr;
};

uintptr_t uc_pc(void* uc) {
#if defined(__x86_64__)
    return uc ? (uintptr_t) static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP] : 0;
#elif defined(__aarch64__)
    return uc ? (uintptr_t) static_cast<ucontext_t*>(uc)->uc_mcontext.pc : 0;
#else
    (void)uc;
    return 0;
#endif
}
thread_local Guard tl_guard;
thread_local void* tl_altstack = nullptr;
/* Signal mask of the worker, restored after a crash (the guard's sigsetjmp does not save it:
 * that would cost a sigprocmask system call per launch). */
thread_local sigset_t tl_mask;
thread_local bool tl_mask_saved = false;
struct sigaction g_old[32];
std::once_flag g_sig_once;
const int kSigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

void on_fault(int sig, siginfo_t* si, void* uc) {
    Guard& g = tl_guard;
    if (g.armed) {
        g.armed = 0;
        g.sig = sig;
        g.addr = si ? si->si_addr : nullptr;
        g.pc = (void*)uc_pc(uc);
        siglongjmp(g.jb, 1);
    }
    /* Not inside a kernel: behave as if we were never here. */
    struct sigaction& o = g_old[sig];
    if (o.sa_flags & SA_SIGINFO) {
        if (o.sa_sigaction) {
            o.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (o.sa_handler != SIG_DFL && o.sa_handler != SIG_IGN) {
        o.sa_handler(sig);
        return;
    }
    sigaction(sig, &o, nullptr);
    raise(sig);
}

/* The watchdog's interruption of an overrunning kernel: leave the entry (as a crash does) when the
 * worker runs the kernel library's own code; anywhere else (libc, the emulator: it may hold a lock)
 * do nothing, the watchdog tries again. */
void on_cancel(int, siginfo_t*, void* uc) {
    Guard& g = tl_guard;
    KernelRun* r = g.run;
    if (!g.armed || !r) return;
    uintptr_t pc = uc_pc(uc);
    /* A position sample (kernel_sample_where): record where the kernel was interrupted. */
    uint32_t req = r->sample_req.load(std::memory_order_acquire);
    if (req != r->sample_ack.load(std::memory_order_relaxed)) {
        r->sample_pc.store(pc, std::memory_order_relaxed);
        r->sample_ack.store(req, std::memory_order_release);
    }
    if (!r->cancel.load(std::memory_order_relaxed)) return;
    for (auto& rg : r->code)
        if (pc >= rg.first && pc < rg.second) {
            g.armed = 0;
            g.sig = kCancelSig;
            g.addr = nullptr;
            g.pc = (void*)pc;
            siglongjmp(g.jb, 1);
        }
}

void install_handlers() {
    std::call_once(g_sig_once, [] {
        for (int sig : kSigs) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_fault;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
            sigemptyset(&sa.sa_mask);
            sigaction(sig, &sa, &g_old[sig]);
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_cancel;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(kCancelSig, &sa, nullptr);
    });
}
}  // namespace

void worker_thread_init() {
    if (tl_altstack) return;
    background_thread_init();
    size_t sz = 64 * 1024;
    tl_altstack = malloc(sz);
    if (!tl_altstack) return;
    stack_t st;
    st.ss_sp = tl_altstack;
    st.ss_size = sz;
    st.ss_flags = 0;
    sigaltstack(&st, nullptr);
}

void worker_thread_fini() {
    if (!tl_altstack) return;
    stack_t st;
    memset(&st, 0, sizeof st);
    st.ss_flags = SS_DISABLE;
    sigaltstack(&st, nullptr);
    free(tl_altstack);
    tl_altstack = nullptr;
}

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
    if (r.done.load() || r.tid == (int)syscall(SYS_gettid)) return r.where;
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

void kernel_note_comm(KernelCtx& k, Comm* c) {
    if (!k.stream) return;
    std::lock_guard<std::mutex> g(k.stream->m);
    auto& v = k.stream->kernel_comms;
    if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
}

int device_lost_check(Device* dev, const char* api) {
    if (!dev || !dev->lost.load(std::memory_order_relaxed)) return 0;
    std::lock_guard<std::mutex> g(dev->m);
    return seterr(ACL_ERROR_RT_AICPU_TIMEOUT, api, "device %d is lost: %s", dev->id, dev->lost_reason.c_str());
}

KernelCtx& kctx() {
    static thread_local KernelCtx k;
    return k;
}

namespace {
/* BaseHooks::kernel_error: an error raised inside a kernel is kept as the launch's first error. */
const char* kernel_error(const std::string& err) {
    KernelCtx& k = kctx();
    if (!k.active) return nullptr;
    if (k.first_err.empty()) k.first_err = err;
    return k.kernel ? k.kernel : "?";
}
struct Registrar {
    Registrar() { base_hooks.kernel_error = kernel_error; }
} g_registrar;
}  // namespace

namespace {
/* ---------------------------------------------------------------- kernel task */
struct KernelTask : Task {
    Func* f;
    uint32_t blocks;
    std::vector<uint8_t> args;               /* private copy handed to the entry */
    std::vector<std::pair<uint32_t, uint32_t>> ph; /* (slot offset, data offset) patched at run */
    const void* dev_args = nullptr;          /* aclrtLaunchKernel: read device memory at run time */
    size_t dev_args_size = 0;
    uint64_t timeout_ns = 0;
    int run(Stream* s, std::string* msg) override;
    const char* name() const override { return "kernel launch"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Kernel;
        d->what = "kernel " + f->func_name;
    }
};

typedef uint32_t (*entry_t)(void*);

/* Calls the kernel entry under the crash guard. Kept free of C++ objects so that nothing in
 * this frame can be clobbered by siglongjmp. Returns the signal number, or 0. */
__attribute__((noinline)) int guarded_call(entry_t entry, void* args, uint32_t* ret, void** fault, void** pc,
                                           KernelRun* run) {
    tl_guard.run = run;
    if (!tl_mask_saved) {
        pthread_sigmask(SIG_SETMASK, nullptr, &tl_mask);
        tl_mask_saved = true;
    }
    if (sigsetjmp(tl_guard.jb, 0) == 0) {
        tl_guard.armed = 1;
        *ret = entry(args);
        tl_guard.armed = 0;
        return 0;
    }
    /* The handler runs with SA_NODEFER and an empty sa_mask, but the kernel (abort(), say) may
     * have changed the mask before it faulted: put the worker's mask back. */
    pthread_sigmask(SIG_SETMASK, &tl_mask, nullptr);
    *fault = tl_guard.addr;
    *pc = tl_guard.pc;
    return tl_guard.sig;
}

std::atomic<uint64_t> g_kseq{0};

int KernelTask::run(Stream* s, std::string* msg) {
    if (dev_args) args.assign((const uint8_t*)dev_args, (const uint8_t*)dev_args + dev_args_size);
    for (auto& p : ph) {
        void* addr = args.data() + p.second;
        memcpy(args.data() + p.first, &addr, sizeof addr);
    }
    if (args.empty()) args.resize(8); /* never hand a kernel a null pointer */
    entry_t entry = reinterpret_cast<entry_t>(f->fn);
    const char* kname = f->func_name.c_str();
    uint64_t seq = g_kseq.fetch_add(1) + 1;
    auto run = std::make_shared<KernelRun>();
    run->tid = (int)syscall(SYS_gettid);
    run->code = f->code;
    run->kernel = f->func_name;
    run->stream_id = s->id;
    run->dev = s->dev;
    run->timeout_ns = timeout_ns;
    run->start_ns.store(now_ns());
    {
        std::lock_guard<std::mutex> g(s->m);
        s->kernel_seq = seq;
        s->kernel_name = f->func_name;
        s->kernel_timeout_ns = timeout_ns;
        s->kernel_deadline_ns = timeout_ns ? now_ns() + timeout_ns : 0;
        s->kernel_run = run;
        s->kernel_comms.clear();
    }
    if (timeout_ns) watchdog_arm(s, now_ns() + timeout_ns, seq);
    install_handlers();
    KernelCtx& k = kctx();
    k = KernelCtx();
    k.active = true;
    k.dev = s->dev;
    k.kernel = kname;
    k.kseq = seq;
    k.stream = s;
    k.run = run.get();
    if (!cfg().log_dir.empty())
        rank_log("launch kernel %s (launch #%llu) on stream %u of device %d", kname, (unsigned long long)seq, s->id,
                 s->dev->id);
    Context* saved_ctx = current_ctx();
    set_current_ctx(s->ctx);
    uint32_t ret = 0;
    int crashed = 0;
    void* fault_addr = nullptr;
    void* fault_pc = nullptr;
    uint64_t t_start = now_ns();
    for (uint32_t b = 0; b < blocks && !crashed && ret == 0; b++)
        crashed = guarded_call(entry, args.data(), &ret, &fault_addr, &fault_pc, run.get());
    run->done.store(true);
    uint64_t t_end = now_ns();
    tl_guard.run = nullptr;
    set_current_ctx(saved_ctx);
    std::vector<Comm*> used; /* communicators this kernel worked on: told when it fails */
    for (auto& o : k.ops)
        if (o.c && std::find(used.begin(), used.end(), o.c) == used.end()) used.push_back(o.c);
    for (Comm* c : k.acquired)
        if (std::find(used.begin(), used.end(), c) == used.end()) used.push_back(c);
    if (acl_hooks.trace_kernel) acl_hooks.trace_kernel(s, kname, t_start, t_end, used);
    std::string left = acl_hooks.kernel_returned ? acl_hooks.kernel_returned(k) : std::string();
    std::string first_err = k.first_err;
    k.active = false;
    k.run = nullptr;
    if (timeout_ns) watchdog_disarm(s, seq);
    bool helper_follows = false, abandoned;
    {
        std::lock_guard<std::mutex> g(s->m);
        /* Abandoned by the watchdog (launch timeout): the stream has another worker and maybe
         * another kernel by now; its state is not ours to touch. */
        abandoned = s->timed_out_kseq == seq;
        if (!abandoned) {
            s->kernel_deadline_ns = 0;
            s->kernel_name.clear();
            s->kernel_run.reset();
            /* Tasks the kernel submitted to device threads: the next task runs them if it is a
             * notify wait that this worker will execute (not dropped by an error). */
            helper_follows = !crashed && ret == 0 && left.empty() && s->err_code == 0 && !s->q.empty() &&
                             s->q.front()->helps;
        }
    }
    if (abandoned) {
        EMU_LOG(LOG_WARN, "AICPU kernel %s (stream %u) %s after overrunning its launch timeout; its worker thread ends",
                kname, s->id, crashed == kCancelSig ? "was interrupted" : "returned");
        rank_log("kernel %s left after its launch timeout (%s)", kname, crashed == kCancelSig ? "interrupted" : "returned");
        *msg = strprintf("AICPU kernel %s overran its launch timeout", kname);
        return ACL_ERROR_RT_AICPU_TIMEOUT;
    }
    if (acl_hooks.kernel_submitted) acl_hooks.kernel_submitted(s, helper_follows);
    if (!crashed && ret == 0 && left.empty()) return 0;
    if (crashed) {
        *msg = strprintf("AICPU kernel %s crashed with %s at %s (fault address %p)", kname, strsignal(crashed),
                         code_location(fault_pc).c_str(), fault_addr);
        if (!first_err.empty()) *msg += "; first error in the kernel: " + first_err;
    } else if (ret != 0) {
        *msg = strprintf("AICPU kernel %s returned %u", kname, ret);
        if (!first_err.empty()) *msg += "; first error in the kernel: " + first_err;
        if (!left.empty()) *msg += "; " + left;
    } else {
        *msg = strprintf("AICPU kernel %s returned 0 but %s", kname, left.c_str());
    }
    /* The other ranks of its communicators would wait for this rank's part of the operation until
     * their timeout: fail them now, naming the kernel. */
    bool first = used.empty();
    for (Comm* c : used)
        if (acl_hooks.kernel_failed && acl_hooks.kernel_failed(c, *msg, crashed ? AbortKind::Crash : AbortKind::Other))
            first = true;
    /* Logged by the rank whose failure aborted the communicator, and by any rank whose kernel failed
     * on its own (a crash, or an error code with no failed API call before it); failures that
     * follow from another rank's abort are left to that rank's report. */
    if (first || crashed || first_err.empty()) EMU_LOG(LOG_ERROR, "%s", msg->c_str());
    rank_log("kernel failed: %s", msg->c_str());
    return ACL_ERROR_RT_AICPU_EXCEPTION;
}

/* ---------------------------------------------------------------- args handles */
struct ParaDetail {
    uint32_t offset = 0;
    uint32_t size = 0;
    uint8_t type = 0; /* 0 value, 1 placeholder */
    bool ph_taken = false;
    uint32_t ph_data = 0; /* offset of placeholder data from the end of the buffer */
    uint32_t ph_size = 0;
};
enum : uint8_t { ARGS_BUILDING = 0, ARGS_PH_TAKEN = 1, ARGS_FINAL = 2, ARGS_UPDATED = 3 };
constexpr size_t kMaxArgs = 128, kArgsBuf = 64 * 1024;
/* Largest argument blob: offsets into it are 32-bit (ParaDetail here, aclrtPlaceHolderInfo in the
 * API), so no valid blob reaches 4 GiB. Applies to InitByUserMem and every launch's argsSize. */
constexpr size_t kMaxArgsBlob = UINT32_MAX;
struct ArgsHandle {
    uint32_t magic = kArgsMagic;
    Func* f = nullptr;
    uint8_t* buf = nullptr;
    size_t cap = 0;
    size_t used = 0;    /* argument bytes from the front */
    size_t ph_used = 0; /* placeholder data bytes taken from the back */
    uint32_t nparams = 0;
    uint8_t state = ARGS_BUILDING;
    bool user_mem = false;
    ParaDetail params[kMaxArgs];
};
thread_local ArgsHandle tl_args;
/* The system-managed 64 KiB argument buffer of this thread, freed when the thread exits. */
struct ArgsBuf {
    uint8_t* p = nullptr;
    ~ArgsBuf() { free(p); }
};
thread_local ArgsBuf tl_args_buf;

ArgsHandle* args_check(aclrtArgsHandle h, const char* api, int* code) {
    if (!h) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "argsHandle is NULL");
        return nullptr;
    }
    ArgsHandle* a = static_cast<ArgsHandle*>(h);
    if (a->magic != kArgsMagic) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p is not an initialised args handle", h);
        return nullptr;
    }
    return a;
}

/* Bytes still free between the arguments (front) and the placeholder data (back). */
size_t args_room(const ArgsHandle* a) {
    size_t taken = a->used + a->ph_used; /* both <= cap, which is <= kMaxArgsBlob: no overflow */
    return taken < a->cap ? a->cap - taken : 0;
}

const char* state_name(uint8_t st) {
    switch (st) {
        case ARGS_PH_TAKEN: return "aclrtKernelArgsGetPlaceHolderBuffer was called";
        case ARGS_FINAL: return "aclrtKernelArgsFinalize was called";
        case ARGS_UPDATED: return "aclrtKernelArgsFinalize was called";
        default: return "building";
    }
}
}  // namespace
}  // namespace emu

using namespace emu;

/* ================================================================ binaries */

static int parse_options(const aclrtBinaryLoadOptions* options, int* mode, bool from_file, const char* api) {
    *mode = -1;
    if (!options) return ACL_SUCCESS;
    if (!options->options && options->numOpt)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "options->options is NULL with numOpt %zu", options->numOpt);
    if (!options->options)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "options->options is NULL");
    for (size_t i = 0; i < options->numOpt; i++) {
        const aclrtBinaryLoadOption& o = options->options[i];
        int32_t type; /* read as an int: callers may pass values outside the enum */
        memcpy(&type, &o.type, sizeof type);
        switch (type) {
            case ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD:
                if (o.value.isLazyLoad > 1)
                    return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "option %zu: isLazyLoad %u is not 0 or 1", i,
                                  o.value.isLazyLoad);
                break;
            case ACL_RT_BINARY_LOAD_OPT_MAGIC:
                if (from_file)
                    return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                                  "option %zu: ACL_RT_BINARY_LOAD_OPT_MAGIC is valid only with aclrtBinaryLoadFromData", i);
                break;
            case ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE: *mode = o.value.cpuKernelMode; break;
            default:
                return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "option %zu: type %d is not a load option type (1..3)", i,
                              type);
        }
    }
    return ACL_SUCCESS;
}

static std::string dirname_of(const std::string& p) {
    size_t k = p.rfind('/');
    return k == std::string::npos ? "." : p.substr(0, k);
}

static bool file_exists(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

/* Kernel isolation. On Ascend an AICPU kernel runs in the device's address space, so it never
 * sees the host program's libraries. Here it shares the host process: with default symbol
 * binding, an inline (vague-linkage) function that both the host program and the kernel define
 * (e.g. a class shared through a header, compiled with different _GLIBCXX_USE_CXX11_ABI values)
 * would bind the kernel's calls to the host's copy. RTLD_DEEPBIND makes the kernel look in its own
 * symbols and its own dependencies (the emulator's device API, libstdc++, libc) before the global
 * scope. The sanitizer runtimes refuse RTLD_DEEPBIND (their interceptors must come first), so
 * sanitizer builds of the emulator load kernels with default binding: link kernels with
 * -Wl,-Bsymbolic there if host and kernel share inline code. */
static int kernel_dlopen_flags() {
    /* Decided at run time: a sanitizer runtime may be in the process even when this library was
     * built without one (a sanitized host program, the fuzzers' replay builds). */
    static const int flags = [] {
        bool san = dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init") ||
                   dlsym(RTLD_DEFAULT, "__msan_init") || dlsym(RTLD_DEFAULT, "__hwasan_init");
        return RTLD_NOW | RTLD_LOCAL | (san ? 0 : RTLD_DEEPBIND);
    }();
    return flags;
}

/* AICPU packages (aicpu_*.tar.gz, CMS-signed by CANN's build) in the directories searched. */
static std::vector<std::string> find_packages(const std::vector<std::string>& tried, const std::string& json_dir) {
    std::vector<std::string> found;
    std::unordered_set<std::string> dirs = {json_dir, json_dir + "/../kernel"}; /* CANN's opp layout */
    for (const std::string& t : tried) dirs.insert(dirname_of(t));
    for (const std::string& d : dirs) {
        DIR* dp = opendir(d.c_str());
        if (!dp) continue;
        while (struct dirent* e = readdir(dp)) {
            std::string n = e->d_name;
            if (n.size() > 7 && n.compare(n.size() - 7, 7, ".tar.gz") == 0) found.push_back(d + "/" + n);
        }
        closedir(dp);
    }
    std::sort(found.begin(), found.end());
    return found;
}

/* Why a kernel library could not be found: the op-info JSON, the paths looked at, and what to do,
 * including the common CANN layout where only the signed device package was installed. */
static std::string missing_kernel_message(const std::string& json_path, const std::string& so_name, int mode,
                                          const std::vector<std::string>& tried) {
    std::string list;
    for (auto& t : tried) list += (list.empty() ? "" : ", ") + t;
    std::string msg = strprintf("kernel library %s named by the op-info JSON %s was not found (cpuKernelMode %d); "
                                "looked for: %s",
                                so_name.c_str(), json_path.c_str(), mode, list.c_str());
    std::vector<std::string> pkgs = find_packages(tried, dirname_of(json_path));
    if (!pkgs.empty()) {
        std::string p;
        for (auto& f : pkgs) p += (p.empty() ? "" : ", ") + f;
        msg += strprintf(". Found the AICPU package(s) %s instead: CANN installs custom kernels only as signed device "
                         "packages (aarch64 code inside a CMS-signed tar.gz), which the emulator cannot load. Put the "
                         "host-built %s beside the JSON or in %s/../kernel",
                         p.c_str(), so_name.c_str(), dirname_of(json_path).c_str());
        if (mode == 0) msg += ", or add its directory to HCOMM_KIT_KERNEL_PATH";
    } else if (mode == 0) {
        msg += " (add the directory of the host-built kernel library to HCOMM_KIT_KERNEL_PATH)";
    } else {
        msg += " (cpuKernelMode 1 loads the .so with the JSON's file name beside it)";
    }
    return msg;
}

/* opInfo.<key> must be a non-empty string: missing -> 100007, another type or empty -> 100008. */
static int opinfo_string(const std::string& json_path, const std::string& op, const char* key, const json::Value* v,
                         const char* api) {
    if (!v)
        return seterr(ACL_ERROR_FILE_MISSING_ATTR, api, "op-info JSON %s: key \"%s.opInfo.%s\" is missing",
                      json_path.c_str(), op.c_str(), key);
    if (!v->is_string())
        return seterr(ACL_ERROR_FILE_ATTR_INVALID, api, "op-info JSON %s: \"%s.opInfo.%s\" must be a string, not a %s",
                      json_path.c_str(), op.c_str(), key, v->type_name());
    if (v->str.empty() || v->str.find('\0') != std::string::npos)
        return seterr(ACL_ERROR_FILE_ATTR_INVALID, api, "op-info JSON %s: \"%s.opInfo.%s\" must be a non-empty string%s",
                      json_path.c_str(), op.c_str(), key, v->str.empty() ? "" : " without NUL characters");
    return ACL_SUCCESS;
}

static void register_binary(Binary* b) {
    std::lock_guard<std::mutex> g(g_bin_m);
    g_bins.insert(b);
}

EMU_API aclError aclrtBinaryLoadFromFile(const char* binPath, aclrtBinaryLoadOptions* options, aclrtBinHandle* binHandle) {
    if (int r = check_init(__func__)) return r;
    if (!binPath) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binPath is NULL");
    if (!binHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binHandle is NULL");
    int mode;
    if (int r = parse_options(options, &mode, true, __func__)) return r;
    std::string path = binPath;
    if (mode == -1)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "%s: only AICPU kernels can run on the emulator; pass ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE "
                      "(0 or 1) with an op-info JSON",
                      binPath);
    if (mode != 0 && mode != 1)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "cpuKernelMode %d is not valid with aclrtBinaryLoadFromFile (0 or 1; 2 needs LoadFromData)", mode);
    /* The runtime swaps the extension to find both <stem>.json and <stem>.so. */
    std::string stem = path;
    size_t dot = stem.rfind('.'), slash = stem.rfind('/');
    if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) stem = stem.substr(0, dot);
    std::string json_path = stem + ".json";
    std::string text, err;
    json::ReadStatus rs = json::ReadStatus::Ok;
    if (!json::read_file(json_path, text, err, &rs))
        return seterr(rs == json::ReadStatus::TooLarge ? ACL_ERROR_INVALID_FILE_SIZE : ACL_ERROR_INVALID_FILE, __func__,
                      "cannot read the op-info JSON %s: %s", json_path.c_str(), err.c_str());
    json::Value root;
    if (!json::parse(text, root, err))
        return seterr(ACL_ERROR_PARSE_FILE, __func__, "op-info JSON %s is malformed: %s", json_path.c_str(), err.c_str());
    if (!root.is_object())
        return seterr(ACL_ERROR_PARSE_FILE, __func__, "op-info JSON %s: the top level must be an object keyed by op type",
                      json_path.c_str());
    auto b = std::make_unique<Binary>();
    b->mode = mode;
    b->json_path = json_path;
    for (auto& kv : root.obj) {
        const json::Value* info = kv.second.get("opInfo");
        if (!info) continue; /* entries without opInfo are skipped */
        if (!info->is_object())
            return seterr(ACL_ERROR_FILE_ATTR_INVALID, __func__, "op-info JSON %s: \"%s.opInfo\" must be an object, not a %s",
                          json_path.c_str(), kv.first.c_str(), info->type_name());
        const json::Value* fn = info->get("functionName");
        const json::Value* so = info->get("kernelSo");
        if (int r = opinfo_string(json_path, kv.first, "functionName", fn, __func__)) return r;
        if (int r = opinfo_string(json_path, kv.first, "kernelSo", so, __func__)) return r;
        const json::Value* lib = info->get("opKernelLib");
        if (lib && (!lib->is_string() || (lib->str != "AICPUKernel" && lib->str != "CUSTAICPUKernel")))
            return seterr(ACL_ERROR_FILE_ATTR_INVALID, __func__,
                          "op-info JSON %s: \"%s.opInfo.opKernelLib\" must be \"AICPUKernel\"", json_path.c_str(),
                          kv.first.c_str());
        b->entries[kv.first] = {fn->str, so->str};
    }
    if (b->entries.empty())
        return seterr(ACL_ERROR_FILE_MISSING_ATTR, __func__, "op-info JSON %s has no entry with an \"opInfo\" object",
                      json_path.c_str());
    /* Which .so: mode 1 = the file beside the JSON; mode 0 = the package "on the device". */
    std::string so_name = b->entries.begin()->second.second;
    std::vector<std::string> tried;
    if (mode == 1) {
        b->so_path = stem + ".so";
        tried.push_back(b->so_path);
    } else {
        std::vector<std::string> dirs;
        if (const char* kp = getenv("HCOMM_KIT_KERNEL_PATH")) {
            std::string s = kp;
            size_t a = 0;
            while (a <= s.size()) {
                size_t e = s.find(':', a);
                if (e == std::string::npos) e = s.size();
                if (e > a) dirs.push_back(s.substr(a, e - a));
                a = e + 1;
            }
        }
        std::string jd = dirname_of(json_path);
        dirs.push_back(jd);
        dirs.push_back(jd + "/../kernel");
        for (auto& dd : dirs) {
            std::string c = dd + "/" + so_name;
            tried.push_back(c);
            if (file_exists(c)) {
                b->so_path = c;
                break;
            }
        }
    }
    if (b->so_path.empty() || !file_exists(b->so_path)) {
        std::string msg = missing_kernel_message(json_path, mode == 1 ? stem + ".so" : so_name, mode, tried);
        EMU_LOG(LOG_ERROR, "aclrtBinaryLoadFromFile: %s", msg.c_str());
        return seterr_str(ACL_ERROR_RT_FILE_OPEN, __func__, msg);
    }
    b->dl = dlopen(b->so_path.c_str(), kernel_dlopen_flags());
    if (!b->dl)
        return seterr(ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR, __func__, "cannot load kernel library %s: %s",
                      b->so_path.c_str(), dlerror());
    Binary* raw = b.release();
    register_binary(raw);
    *binHandle = raw;
    return ACL_SUCCESS;
}

/* Loads a kernel image (an ELF shared object for this host) from memory: it is written to a
 * memfd and dlopen'ed from there. The runtime names the .so after a hash of its contents. */
static int stage_image(const void* data, size_t length, Binary* b, const char* api) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < length; i++) h = (h ^ ((const uint8_t*)data)[i]) * 1099511628211ull;
    std::string name = strprintf("aicpu_kernel_%016llx.so", (unsigned long long)h);
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (fd < 0) return seterr(ACL_ERROR_RT_FILE_OPEN, api, "memfd_create failed: %s", strerror(errno));
    size_t off = 0;
    while (off < length) {
        ssize_t w = write(fd, (const char*)data + off, length - off);
        if (w <= 0) {
            close(fd);
            return seterr(ACL_ERROR_RT_FILE_WRITE, api, "cannot stage the kernel image: %s", strerror(errno));
        }
        off += (size_t)w;
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    b->dl = dlopen(path.c_str(), kernel_dlopen_flags());
    if (!b->dl) {
        std::string e = dlerror();
        close(fd);
        return seterr(ACL_ERROR_RT_AICPU_INFO_LOAD_RSP_ERR, api, "cannot load the kernel image (%zu bytes): %s", length,
                      e.c_str());
    }
    b->memfd = fd;
    b->so_path = name;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtBinaryLoadFromData(const void* data, size_t length, const aclrtBinaryLoadOptions* options,
                                         aclrtBinHandle* binHandle) {
    if (int r = check_init(__func__)) return r;
    if (!data) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "data is NULL");
    if (length == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "length is 0");
    if (!binHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binHandle is NULL");
    int mode;
    if (int r = parse_options(options, &mode, false, __func__)) return r;
    auto b = std::make_unique<Binary>();
    if (mode != -1 && mode != 2)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "cpuKernelMode %d is not valid with aclrtBinaryLoadFromData (only 2)", mode);
    b->mode = mode;
    if (mode == 2) {
        if (int r = stage_image(data, length, b.get(), __func__)) return r;
    }
    Binary* raw = b.release();
    register_binary(raw);
    *binHandle = raw;
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- binaries from memory (aclrtBinary) */

EMU_API aclrtBinary aclrtCreateBinary(const void* data, size_t dataLen) {
    if (!data) {
        seterr(ACL_ERROR_INVALID_PARAM, __func__, "data is NULL");
        return nullptr;
    }
    if (dataLen == 0) {
        seterr(ACL_ERROR_INVALID_PARAM, __func__, "dataLen is 0");
        return nullptr;
    }
    Image* img = new (std::nothrow) Image();
    if (!img) {
        seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "out of memory for a %zu-byte binary", dataLen);
        return nullptr;
    }
    try {
        img->data.assign((const uint8_t*)data, (const uint8_t*)data + dataLen);
    } catch (const std::bad_alloc&) {
        delete img;
        seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "out of memory for a %zu-byte binary", dataLen);
        return nullptr;
    }
    std::lock_guard<std::mutex> g(g_bin_m);
    g_images.insert(img);
    return img;
}

static Image* image_check(aclrtBinary binary, const char* api, int* code) {
    if (!binary) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "binary is NULL");
        return nullptr;
    }
    Image* img = static_cast<Image*>(binary);
    std::lock_guard<std::mutex> g(g_bin_m);
    if (!g_images.count(img)) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p is not a binary made by aclrtCreateBinary (or it was destroyed)",
                       binary);
        return nullptr;
    }
    return img;
}

EMU_API aclError aclrtDestroyBinary(aclrtBinary binary) {
    int code = 0;
    Image* img = image_check(binary, __func__, &code);
    if (!img) return code;
    {
        std::lock_guard<std::mutex> g(g_bin_m);
        g_images.erase(img);
    }
    img->magic = 0;
    delete img;
    return ACL_SUCCESS;
}

/* ELF header fields of an image, or false if it is not a 64-bit ELF file. */
static bool elf_kind(const std::vector<uint8_t>& d, uint16_t* type, uint16_t* machine) {
    if (d.size() < 64 || memcmp(d.data(), "\x7f" "ELF", 4) != 0 || d[4] != 2 /* ELFCLASS64 */) return false;
    memcpy(type, d.data() + 16, 2);
    memcpy(machine, d.data() + 18, 2);
    return true;
}

#if defined(__x86_64__)
static constexpr uint16_t kHostMachine = 62; /* EM_X86_64 */
#elif defined(__aarch64__)
static constexpr uint16_t kHostMachine = 183; /* EM_AARCH64 */
#else
static constexpr uint16_t kHostMachine = 0;
#endif

EMU_API aclError aclrtBinaryLoad(const aclrtBinary binary, aclrtBinHandle* binHandle) {
    if (int r = check_init(__func__)) return r;
    if (!binHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "binHandle is NULL");
    int code = 0;
    Image* img = image_check(binary, __func__, &code);
    if (!img) return code;
    uint16_t type = 0, machine = 0;
    if (!elf_kind(img->data, &type, &machine))
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "binary %p (%zu bytes) is not an ELF file; the emulator loads only AICPU kernels built for this "
                      "host as shared objects",
                      binary, img->data.size());
    if (machine != kHostMachine || type != 3 /* ET_DYN */)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "binary %p (%zu bytes, ELF type %u, machine %u) is not a shared object for this host (machine %u): "
                      "AI Core / AIV (Ascend C) kernel images are not emulated; only AICPU kernels run on the emulator",
                      binary, img->data.size(), type, machine, kHostMachine);
    auto b = std::make_unique<Binary>();
    b->mode = 2;
    b->by_symbol = true;
    if (int r = stage_image(img->data.data(), img->data.size(), b.get(), __func__)) return r;
    Binary* raw = b.release();
    register_binary(raw);
    *binHandle = raw;
    return ACL_SUCCESS;
}

/* Shortest launch-timeout step in microseconds; a timeout takes effect as interval * N, N in
 * [1, 254]. The value mirrors the A2/A3 hardware, whose longest operator timeout is 254 steps
 * (about 1091 s); the emulator itself enforces launch timeouts exactly as given. */
static constexpr uint64_t kOpTimeoutIntervalUs = 4294967;

EMU_API aclError aclrtGetOpTimeOutInterval(uint64_t* interval) {
    if (!interval) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "interval is NULL");
    *interval = kOpTimeoutIntervalUs;
    return ACL_SUCCESS;
}

static Binary* bin_check(aclrtBinHandle h, const char* api, int* code) {
    if (!h) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "binHandle is NULL");
        return nullptr;
    }
    Binary* b = static_cast<Binary*>(h);
    std::lock_guard<std::mutex> g(g_bin_m);
    if (!g_bins.count(b)) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p is not a loaded binary", h);
        return nullptr;
    }
    return b;
}

static Func* make_func(Binary* b, const std::string& op, const std::string& fname, int* code, const char* api) {
    auto it = b->funcs.find(op);
    if (it != b->funcs.end()) return it->second;
    dlerror();
    void* sym = dlsym(b->dl, fname.c_str());
    if (!sym) {
        *code = seterr(ACL_ERROR_RT_SYMBOL_NOT_FOUND, api,
                       "kernel library %s does not export \"%s\" (op type \"%s\"); declare it extern \"C\"",
                       b->so_path.c_str(), fname.c_str(), op.c_str());
        return nullptr;
    }
    Func* f = new Func();
    f->bin = b;
    f->op_type = op;
    f->func_name = fname;
    f->so_name = b->so_path;
    f->fn = sym;
    if (b->code.empty()) code_ranges(b->dl, &b->code);
    f->code = b->code;
    b->funcs[op] = f;
    g_funcs.insert(f);
    return f;
}

EMU_API aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char* kernelName,
                                        aclrtFuncHandle* funcHandle) {
    if (int r = check_init(__func__)) return r;
    if (!kernelName) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "kernelName is NULL");
    if (!funcHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "funcHandle is NULL");
    int code = 0;
    Binary* b = bin_check(binHandle, __func__, &code);
    if (!b) return code;
    std::lock_guard<std::mutex> g(g_bin_m);
    if (b->mode == -1)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "binary is not an AICPU kernel; the emulator runs AICPU only");
    auto it = b->funcs.find(kernelName);
    if (it != b->funcs.end()) {
        *funcHandle = it->second;
        return ACL_SUCCESS;
    }
    if (b->by_symbol) {
        Func* f = make_func(b, kernelName, kernelName, &code, __func__);
        if (!f) return code;
        *funcHandle = f;
        return ACL_SUCCESS;
    }
    auto e = b->entries.find(kernelName);
    if (e == b->entries.end()) {
        std::string keys;
        for (auto& kv : b->entries) keys += (keys.empty() ? "" : ", ") + kv.first;
        return seterr(ACL_ERROR_KERNEL_NOT_FOUND, __func__, "op type \"%s\" is not a key of %s (keys: %s)", kernelName,
                      b->json_path.empty() ? "this binary" : b->json_path.c_str(), keys.c_str());
    }
    Func* f = make_func(b, kernelName, e->second.first, &code, __func__);
    if (!f) return code;
    *funcHandle = f;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtRegisterCpuFunc(const aclrtBinHandle handle, const char* funcName, const char* kernelName,
                                      aclrtFuncHandle* funcHandle) {
    if (int r = check_init(__func__)) return r;
    if (!funcName || !*funcName) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "funcName is NULL or empty");
    if (!kernelName || !*kernelName) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "kernelName is NULL or empty");
    if (!funcHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "funcHandle is NULL");
    int code = 0;
    Binary* b = bin_check(handle, __func__, &code);
    if (!b) return code;
    std::lock_guard<std::mutex> g(g_bin_m);
    if (b->mode != 2 || !b->dl)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "binary is not an AICPU image loaded with cpuKernelMode 2 (aclrtBinaryLoadFromData)");
    Func* f = make_func(b, kernelName, funcName, &code, __func__);
    if (!f) return code;
    *funcHandle = f;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtBinaryGetFunctionByEntry(aclrtBinHandle binHandle, uint64_t funcEntry, aclrtFuncHandle* funcHandle) {
    if (int r = check_init(__func__)) return r;
    (void)binHandle;
    (void)funcHandle;
    return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                  "lookup by entry %llu is reserved for AI Core kernels and not supported (use aclrtBinaryGetFunction)",
                  (unsigned long long)funcEntry);
}

EMU_API aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    Binary* b = bin_check(binHandle, __func__, &code);
    if (!b) return code;
    std::lock_guard<std::mutex> g(g_bin_m);
    g_bins.erase(b);
    /* Launches still queued keep using their entries: the library stays mapped and the Func
     * objects are retired (kept reachable until exit) rather than freed under a running kernel. */
    static std::vector<Func*>& retired = *new std::vector<Func*>();
    for (auto& kv : b->funcs) {
        g_funcs.erase(kv.second);
        kv.second->magic = 0;
        kv.second->bin = nullptr;
        retired.push_back(kv.second);
    }
    if (b->memfd >= 0) close(b->memfd);
    delete b;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtGetFunctionAttribute(aclrtFuncHandle funcHandle, aclrtFuncAttribute attrType, int64_t* attrValue) {
    if (int r = check_init(__func__)) return r;
    if (!funcHandle || !attrValue) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "NULL argument");
    if (!func_valid(static_cast<Func*>(funcHandle)))
        return seterr(ACL_ERROR_RT_INVALID_HANDLE, __func__, "%p is not a live function handle", funcHandle);
    if ((int)attrType != ACL_FUNC_ATTR_KERNEL_TYPE)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "attribute %d is not supported", (int)attrType);
    *attrValue = ACL_KERNEL_TYPE_AICPU;
    return ACL_SUCCESS;
}

/* ================================================================ argument lists */

static Func* func_check(aclrtFuncHandle h, const char* api, int* code) {
    if (!h) {
        *code = seterr(ACL_ERROR_INVALID_PARAM, api, "funcHandle is NULL");
        return nullptr;
    }
    Func* f = static_cast<Func*>(h);
    if (!func_valid(f)) {
        *code = seterr(ACL_ERROR_RT_INVALID_HANDLE, api, "%p is not a live function handle", h);
        return nullptr;
    }
    return f;
}

EMU_API aclError aclrtKernelArgsGetHandleMemSize(aclrtFuncHandle funcHandle, size_t* memSize) {
    if (int r = check_init(__func__)) return r;
    if (!memSize) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "memSize is NULL");
    int code = 0;
    if (!func_check(funcHandle, __func__, &code)) return code;
    *memSize = sizeof(ArgsHandle);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsGetMemSize(aclrtFuncHandle funcHandle, size_t userArgsSize, size_t* actualArgsSize) {
    if (int r = check_init(__func__)) return r;
    if (!actualArgsSize) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "actualArgsSize is NULL");
    int code = 0;
    if (!func_check(funcHandle, __func__, &code)) return code;
    *actualArgsSize = userArgsSize; /* CPU kernels: no system arguments */
    return ACL_SUCCESS;
}

static void args_reset(ArgsHandle* a, Func* f, uint8_t* buf, size_t cap, bool user) {
    a->magic = kArgsMagic;
    a->f = f;
    a->buf = buf;
    a->cap = cap;
    a->used = 0;
    a->ph_used = 0;
    a->nparams = 0;
    a->state = ARGS_BUILDING;
    a->user_mem = user;
}

EMU_API aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle* argsHandle) {
    if (int r = check_init(__func__)) return r;
    if (!argsHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsHandle is NULL");
    int code = 0;
    Func* f = func_check(funcHandle, __func__, &code);
    if (!f) return code;
    if (!tl_args_buf.p) tl_args_buf.p = static_cast<uint8_t*>(malloc(kArgsBuf));
    if (!tl_args_buf.p) return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "out of memory");
    /* One handle per thread, re-initialised on every call (spec §3.6). */
    args_reset(&tl_args, f, tl_args_buf.p, kArgsBuf, false);
    *argsHandle = &tl_args;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsInitByUserMem(aclrtFuncHandle funcHandle, aclrtArgsHandle argsHandle, void* userHostMem,
                                              size_t actualArgsSize) {
    if (int r = check_init(__func__)) return r;
    if (!argsHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsHandle is NULL");
    if (!userHostMem) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "userHostMem is NULL");
    if (actualArgsSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "actualArgsSize is 0");
    if (actualArgsSize > kMaxArgsBlob)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "actualArgsSize %zu is above %zu bytes (argument offsets are 32-bit)", actualArgsSize, kMaxArgsBlob);
    int code = 0;
    Func* f = func_check(funcHandle, __func__, &code);
    if (!f) return code;
    if ((uintptr_t)argsHandle % alignof(ArgsHandle))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "argsHandle memory %p is not %zu-byte aligned", argsHandle,
                      alignof(ArgsHandle));
    ArgsHandle* a = new (argsHandle) ArgsHandle();
    args_reset(a, f, static_cast<uint8_t*>(userHostMem), actualArgsSize, true);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void* param, size_t paramSize,
                                       aclrtParamHandle* paramHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!param) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "param is NULL");
    if (paramSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "paramSize is 0");
    if (a->state != ARGS_BUILDING)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "cannot append: %s", state_name(a->state));
    if (a->nparams >= kMaxArgs)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "argument %u exceeds the limit of %zu arguments",
                      a->nparams + 1, kMaxArgs);
    if (paramSize > args_room(a)) /* no `used + paramSize`: paramSize may be near SIZE_MAX */
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "argument of %zu bytes overflows the %zu-byte argument buffer (%zu bytes used)", paramSize, a->cap,
                      a->used + a->ph_used);
    ParaDetail& p = a->params[a->nparams++];
    p = ParaDetail();
    p.offset = (uint32_t)a->used;
    p.size = (uint32_t)paramSize;
    memcpy(a->buf + a->used, param, paramSize); /* AICPU: packed, 1-byte alignment */
    a->used += paramSize;
    if (paramHandle) *paramHandle = &p;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle, aclrtParamHandle* paramHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!paramHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "paramHandle is NULL");
    if (a->state != ARGS_BUILDING)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "cannot append: %s", state_name(a->state));
    if (a->nparams >= kMaxArgs)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "argument %u exceeds the limit of %zu arguments",
                      a->nparams + 1, kMaxArgs);
    if (args_room(a) < 8)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "placeholder slot overflows the %zu-byte argument buffer",
                      a->cap);
    ParaDetail& p = a->params[a->nparams++];
    p = ParaDetail();
    p.offset = (uint32_t)a->used;
    p.size = 8;
    p.type = 1;
    memset(a->buf + a->used, 0, 8);
    a->used += 8;
    *paramHandle = &p;
    return ACL_SUCCESS;
}

static ParaDetail* para_check(ArgsHandle* a, aclrtParamHandle ph, const char* api, int* code) {
    /* Compare addresses as integers: a foreign pointer must not be turned into an index. */
    uintptr_t at = (uintptr_t)ph, first = (uintptr_t)a->params;
    if (!ph || at < first || at >= first + a->nparams * sizeof(ParaDetail) || (at - first) % sizeof(ParaDetail)) {
        *code = seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                       "paramHandle %p does not belong to this args handle (not one of its %u parameters)", ph,
                       a->nparams);
        return nullptr;
    }
    return static_cast<ParaDetail*>(ph);
}

EMU_API aclError aclrtKernelArgsGetPlaceHolderBuffer(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle,
                                                     size_t dataSize, void** bufferAddr) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!bufferAddr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "bufferAddr is NULL");
    if (dataSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "dataSize is 0");
    if (a->state == ARGS_FINAL || a->state == ARGS_UPDATED)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "cannot take a placeholder buffer: %s",
                      state_name(a->state));
    ParaDetail* p = para_check(a, paramHandle, __func__, &code);
    if (!p) return code;
    if (p->type != 1)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "paramHandle %p is an ordinary argument, not a placeholder",
                      paramHandle);
    if (p->ph_taken)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "placeholder %p already has a buffer", paramHandle);
    if (dataSize > args_room(a))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "placeholder data of %zu bytes overflows the %zu-byte argument buffer (%zu bytes used)", dataSize,
                      a->cap, a->used + a->ph_used);
    a->ph_used += dataSize;
    p->ph_taken = true;
    p->ph_data = (uint32_t)a->ph_used;
    p->ph_size = (uint32_t)dataSize;
    a->state = ARGS_PH_TAKEN;
    *bufferAddr = a->buf + a->cap - a->ph_used;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle, void* param,
                                           size_t paramSize) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (!param) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "param is NULL");
    ParaDetail* p = para_check(a, paramHandle, __func__, &code);
    if (!p) return code;
    if (p->type != 0) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "paramHandle %p is a placeholder", paramHandle);
    if (paramSize != p->size)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "paramSize %zu differs from the appended size %u", paramSize,
                      p->size);
    memcpy(a->buf + p->offset, param, paramSize);
    if (a->state == ARGS_FINAL) a->state = ARGS_UPDATED;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle) {
    if (int r = check_init(__func__)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    for (uint32_t i = 0; i < a->nparams; i++)
        if (a->params[i].type == 1 && !a->params[i].ph_taken)
            return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                          "placeholder argument %u has no buffer (call aclrtKernelArgsGetPlaceHolderBuffer)", i);
    a->state = ARGS_FINAL;
    return ACL_SUCCESS;
}

/* ================================================================ launches */

constexpr uint64_t kMaxTimeoutNs = 1ull << 62;

static int launch_timeout(const aclrtLaunchKernelCfg* cfgp, uint64_t* timeout_ns, const char* api) {
    *timeout_ns = (uint64_t)cfg().default_kernel_timeout_s * 1000000000ull;
    if (!cfgp) return ACL_SUCCESS;
    if (cfgp->numAttrs && !cfgp->attrs) return seterr(ACL_ERROR_INVALID_PARAM, api, "cfg->attrs is NULL");
    bool s7 = false, s8 = false;
    for (size_t i = 0; i < cfgp->numAttrs; i++) {
        const aclrtLaunchKernelAttr& at = cfgp->attrs[i];
        int32_t id; /* read as an int: callers may pass values outside the enum */
        memcpy(&id, &at.id, sizeof id);
        switch (id) {
            case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT:
                s7 = true;
                *timeout_ns = (uint64_t)at.value.timeout * 1000000000ull;
                break;
            case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: {
                s8 = true;
                uint64_t us = ((uint64_t)at.value.timeoutUs.timeoutHigh << 32) | at.value.timeoutUs.timeoutLow;
                /* Clamp (~146 years) so that `now + timeout` cannot wrap into the past. */
                *timeout_ns = us > kMaxTimeoutNs / 1000 ? kMaxTimeoutNs : us * 1000ull;
                break;
            }
            case 1: case 2: case 3: case 4: case 5: case 6: case 9: break;
            default:
                return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "cfg attribute %zu: id %d is not a launch attribute", i,
                              id);
        }
    }
    if (s7 && s8)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                      "cfg gives both ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT (7) and ..._TIMEOUT_US (8); use one");
    return ACL_SUCCESS;
}

static int launch_common(const char* api, aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                         const aclrtLaunchKernelCfg* cfgp, Func** fout, Stream** sout, uint64_t* tmo) {
    if (int r = check_init(api)) return r;
    if (!funcHandle) return seterr(ACL_ERROR_INVALID_PARAM, api, "funcHandle is NULL");
    if (numBlocks == 0) return seterr(ACL_ERROR_INVALID_PARAM, api, "numBlocks is 0");
    int code = 0;
    Func* f = func_check(funcHandle, api, &code);
    if (!f) return code;
    if (int r = launch_timeout(cfgp, tmo, api)) return r;
    Stream* s = stream_resolve(stream, &code, api);
    if (!s) return code;
    if (int r = device_lost_check(s->dev, api)) return r;
    if (acl_hooks.trace_launch) acl_hooks.trace_launch(s, f->func_name.c_str());
    *fout = f;
    *sout = s;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                             aclrtLaunchKernelCfg* cfg, aclrtArgsHandle argsHandle, void* reserve) {
    if (reserve) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "reserve must be NULL");
    if (!argsHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsHandle is NULL");
    Func* f;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(__func__, funcHandle, numBlocks, stream, cfg, &f, &s, &tmo)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (a->state == ARGS_UPDATED)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "args were updated after aclrtKernelArgsFinalize; finalize again before launching");
    if (a->state != ARGS_FINAL)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "args handle is not finalized (aclrtKernelArgsFinalize)");
    if (a->f != f)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "args handle was initialised for kernel %s, not %s",
                      a->f ? a->f->func_name.c_str() : "?", f->func_name.c_str());
    auto t = std::make_unique<KernelTask>();
    t->f = f;
    t->blocks = numBlocks;
    t->timeout_ns = tmo;
    /* Blob seen by the kernel: the arguments, then each placeholder's data. */
    try {
        t->args.reserve(a->used + a->ph_used);
        t->args.assign(a->buf, a->buf + a->used);
        for (uint32_t i = 0; i < a->nparams; i++) {
            const ParaDetail& p = a->params[i];
            if (p.type != 1) continue;
            uint32_t doff = (uint32_t)t->args.size();
            const uint8_t* src = a->buf + a->cap - p.ph_data;
            t->args.insert(t->args.end(), src, src + p.ph_size);
            t->ph.emplace_back(p.offset, doff);
        }
    } catch (const std::bad_alloc&) {
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "cannot copy the %zu-byte argument list",
                      a->used + a->ph_used);
    }
    return stream_enqueue(s, std::move(t));
}

static aclError launch_dev_args(const char* api, aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData,
                                size_t argsSize, const aclrtLaunchKernelCfg* cfgp, aclrtStream stream) {
    if (!argsData) return seterr(ACL_ERROR_INVALID_PARAM, api, "argsData is NULL");
    Func* f;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(api, funcHandle, numBlocks, stream, cfgp, &f, &s, &tmo)) return r;
    if (argsSize > kMaxArgsBlob)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "argsSize %zu is above %zu bytes (argument offsets are 32-bit)",
                      argsSize, kMaxArgsBlob);
    if (argsSize && !mem_is_device(argsData, argsSize))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                      "argsData %p + %zu bytes is not device memory (this launch reads its arguments from the device; "
                      "use aclrtLaunchKernelWithConfig for host arguments)",
                      argsData, argsSize);
    auto t = std::make_unique<KernelTask>();
    t->f = f;
    t->blocks = numBlocks;
    t->timeout_ns = tmo;
    t->dev_args = argsData;
    t->dev_args_size = argsSize;
    return stream_enqueue(s, std::move(t));
}

EMU_API aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData, size_t argsSize,
                                   aclrtStream stream) {
    return launch_dev_args(__func__, funcHandle, numBlocks, argsData, argsSize, nullptr, stream);
}

EMU_API aclError aclrtLaunchKernelV2(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData, size_t argsSize,
                                     aclrtLaunchKernelCfg* cfg, aclrtStream stream) {
    return launch_dev_args(__func__, funcHandle, numBlocks, argsData, argsSize, cfg, stream);
}

EMU_API aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                               aclrtLaunchKernelCfg* cfg, void* hostArgs, size_t argsSize,
                                               aclrtPlaceHolderInfo* placeHolderArray, size_t placeHolderNum) {
    if (!hostArgs) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "hostArgs is NULL");
    if (argsSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsSize is 0");
    if (placeHolderNum && !placeHolderArray)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "placeHolderArray is NULL with placeHolderNum %zu", placeHolderNum);
    if (argsSize > kMaxArgsBlob)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "argsSize %zu is above %zu bytes (aclrtPlaceHolderInfo offsets are 32-bit)", argsSize, kMaxArgsBlob);
    if (placeHolderNum > kMaxArgs)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "placeHolderNum %zu is above the limit of %zu arguments",
                      placeHolderNum, kMaxArgs);
    Func* f;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(__func__, funcHandle, numBlocks, stream, cfg, &f, &s, &tmo)) return r;
    auto t = std::make_unique<KernelTask>();
    t->f = f;
    t->blocks = numBlocks;
    t->timeout_ns = tmo;
    try {
        t->args.assign((uint8_t*)hostArgs, (uint8_t*)hostArgs + argsSize); /* copied during the call */
    } catch (const std::bad_alloc&) {
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "cannot copy the %zu-byte argument blob", argsSize);
    }
    for (size_t i = 0; i < placeHolderNum; i++) {
        const aclrtPlaceHolderInfo& p = placeHolderArray[i];
        if ((size_t)p.addrOffset + 8 > argsSize || p.dataOffset >= argsSize)
            return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                          "placeholder %zu: addrOffset %u / dataOffset %u outside the %zu-byte argument blob", i,
                          p.addrOffset, p.dataOffset, argsSize);
        t->ph.emplace_back(p.addrOffset, p.dataOffset);
    }
    return stream_enqueue(s, std::move(t));
}

EMU_API aclError aclrtLaunchKernelWithArgsArray(void* func, uint32_t numBlocks, aclrtStream stream,
                                                aclrtLaunchKernelCfg* cfg, void** args) {
    if (int r = check_init(__func__)) return r;
    (void)numBlocks;
    (void)stream;
    (void)cfg;
    (void)args;
    if (!func) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "func is NULL");
    return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                  "argument arrays carry no sizes, so AICPU kernels cannot be launched this way on the emulator "
                  "(use aclrtLaunchKernelWithConfig)");
}

/* ================================================================ Ascend C <<<>>> launches of AICPU kernels */

namespace {
std::map<std::string, Func*> g_asc_funcs; /* kernel name -> function (under g_bin_m) */

/* Directories holding installed kernel libraries: HCOMM_KIT_KERNEL_PATH, then
 * <opp>/vendors/<vendor>/aicpu/kernel for $ASCEND_OPP_PATH and $ASCEND_HOME_PATH/opp. */
std::vector<std::string> asc_kernel_dirs() {
    std::vector<std::string> dirs;
    if (const char* kp = getenv("HCOMM_KIT_KERNEL_PATH")) {
        std::string s = kp;
        size_t a = 0;
        while (a <= s.size()) {
            size_t e = s.find(':', a);
            if (e == std::string::npos) e = s.size();
            if (e > a) dirs.push_back(s.substr(a, e - a));
            a = e + 1;
        }
    }
    std::vector<std::string> opps;
    if (const char* o = getenv("ASCEND_OPP_PATH")) opps.push_back(o);
    if (const char* h = getenv("ASCEND_HOME_PATH")) opps.push_back(std::string(h) + "/opp");
    for (const std::string& opp : opps) {
        std::string vd = opp + "/vendors";
        DIR* dp = opendir(vd.c_str());
        if (!dp) continue;
        std::vector<std::string> vendors;
        while (struct dirent* e = readdir(dp))
            if (e->d_name[0] != '.') vendors.push_back(e->d_name);
        closedir(dp);
        std::sort(vendors.begin(), vendors.end());
        for (auto& v : vendors) dirs.push_back(vd + "/" + v + "/aicpu/kernel");
    }
    return dirs;
}

/* The function named `kernel` for an Ascend C launch (caller holds g_bin_m): a loaded binary
 * exporting it, else a kernel library of asc_kernel_dirs() (loaded and kept), else a symbol of
 * the program itself (an .aicpu file compiled into the host library). *looked gets the search. */
Func* asc_find(const std::string& kernel, std::string* looked) {
    auto it = g_asc_funcs.find(kernel);
    if (it != g_asc_funcs.end()) return it->second;
    int code = 0;
    for (Binary* b : g_bins) {
        if (!b->dl || !dlsym(b->dl, kernel.c_str())) continue;
        Func* f = make_func(b, "asc:" + kernel, kernel, &code, "aclrtLaunchKernel");
        if (f) return g_asc_funcs[kernel] = f;
    }
    for (const std::string& d : asc_kernel_dirs()) {
        *looked += (looked->empty() ? "" : ", ") + d;
        DIR* dp = opendir(d.c_str());
        if (!dp) continue;
        std::vector<std::string> sos;
        while (struct dirent* e = readdir(dp)) {
            std::string n = e->d_name;
            if (n.size() > 3 && n.compare(n.size() - 3, 3, ".so") == 0) sos.push_back(d + "/" + n);
        }
        closedir(dp);
        std::sort(sos.begin(), sos.end());
        for (const std::string& so : sos) {
            void* dl = dlopen(so.c_str(), kernel_dlopen_flags());
            if (!dl) continue;
            if (!dlsym(dl, kernel.c_str())) {
                dlclose(dl);
                continue;
            }
            auto b = std::make_unique<Binary>();
            b->mode = 2;
            b->by_symbol = true;
            b->dl = dl;
            b->so_path = so;
            Binary* raw = b.release();
            g_bins.insert(raw);
            Func* f = make_func(raw, "asc:" + kernel, kernel, &code, "aclrtLaunchKernel");
            if (f) return g_asc_funcs[kernel] = f;
        }
    }
    if (dlsym(RTLD_DEFAULT, kernel.c_str())) {
        auto b = std::make_unique<Binary>();
        b->mode = 2;
        b->by_symbol = true;
        b->dl = RTLD_DEFAULT;
        b->so_path = "(the program)";
        Binary* raw = b.release();
        g_bins.insert(raw);
        Func* f = make_func(raw, "asc:" + kernel, kernel, &code, "aclrtLaunchKernel");
        if (f) return g_asc_funcs[kernel] = f;
    }
    return nullptr;
}
}  // namespace

/* hcomm-kit extension behind the Ascend C launch syntax for AICPU kernels: the emulator's ASC
 * compiler (the install tree's bin/hk-asc) rewrites `Kernel<<<numBlocks, l2ctrl, stream>>>(args,
 * argsSize)` in .asc sources into this call. The kernel gets a copy of the argsSize bytes at args. */
EMU_API aclError hcomm_kit_asc_launch_aicpu(const char* kernel, uint32_t numBlocks, void* l2ctrl, aclrtStream stream,
                                            const void* args, size_t argsSize) {
    const char* api = "aclrtLaunchKernel (<<<>>>)";
    if (int r = check_init(api)) return r;
    (void)l2ctrl; /* reserved, nullptr */
    if (!kernel || !*kernel) return seterr(ACL_ERROR_INVALID_PARAM, api, "kernel name is NULL or empty");
    if (!args && argsSize) return seterr(ACL_ERROR_INVALID_PARAM, api, "args is NULL with %zu bytes", argsSize);
    Func* f = nullptr;
    std::string looked;
    {
        std::lock_guard<std::mutex> g(g_bin_m);
        f = asc_find(kernel, &looked);
    }
    if (!f)
        return seterr(ACL_ERROR_RT_SYMBOL_NOT_FOUND, api,
                      "AICPU kernel %s<<<>>> not found: no loaded kernel library, no library in [%s] and not the "
                      "program itself exports it (install the host-built kernel .so under "
                      "$ASCEND_HOME_PATH/opp/vendors/<vendor>/aicpu/kernel or add its directory to HCOMM_KIT_KERNEL_PATH)",
                      kernel, looked.c_str());
    Func* fo;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(api, f, numBlocks, stream, nullptr, &fo, &s, &tmo)) return r;
    auto t = std::make_unique<KernelTask>();
    t->f = fo;
    t->blocks = numBlocks;
    t->timeout_ns = tmo;
    if (argsSize) t->args.assign((const uint8_t*)args, (const uint8_t*)args + argsSize);
    return stream_enqueue(s, std::move(t));
}
