/* The crash guard of AICPU kernel entries (acl_runtime.md §3.7): crashes (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL, SIGABRT) inside an entry are caught with a per-thread sigsetjmp guard and reported as
 * 507018 naming the kernel; the watchdog's cancellation signal (kCancelSig) leaves an overrunning
 * entry the same way, and samples its position (kernel_sample_where). */
#include "acl/kernel.h"

#include <execinfo.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>

#include <cstdlib>
#include <cstring>

namespace emu {

namespace {
/* ---------------------------------------------------------------- crash guard */
struct Guard {
    sigjmp_buf jb;
    volatile sig_atomic_t armed = 0;
    volatile int sig = 0;
    void* volatile addr = nullptr;
    void* volatile pc = nullptr; /* the faulting instruction */
    KernelRun* volatile run = nullptr;
    /* The return addresses of the crashed thread's stack when the fault was not in the kernel's own
     * code (abort() raises SIGABRT inside libc): crash_site() finds the kernel's frame among them. */
    void* frames[kCrashFrames];
    volatile int nframes = 0;
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

bool in_code(const KernelRun* r, uintptr_t pc) {
    if (!r) return false;
    for (auto& rg : r->code)
        if (pc >= rg.first && pc < rg.second) return true;
    return false;
}

void on_fault(int sig, siginfo_t* si, void* uc) {
    Guard& g = tl_guard;
    if (g.armed) {
        g.armed = 0;
        g.sig = sig;
        g.addr = si ? si->si_addr : nullptr;
        g.pc = (void*)uc_pc(uc);
        /* Outside the kernel's code (a libc call: abort, memcpy on a bad pointer): unwind through
         * the signal frame (libgcc knows it) to the kernel's frame that made the call. The unwinder
         * was loaded by install_handlers, so nothing is allocated here. */
        g.nframes = in_code(g.run, (uintptr_t)g.pc) ? 0 : backtrace(g.frames, kCrashFrames);
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
}  // namespace

void install_handlers() {
    std::call_once(g_sig_once, [] {
        void* warm[2];
        backtrace(warm, 2); /* loads libgcc's unwinder now: on_fault must not allocate */
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
/* The alternate signal stack a host thread got from worker_thread_attach, freed at its exit. */
struct HostAltStack {
    void* mem = nullptr;
    bool checked = false;
    ~HostAltStack() {
        if (!mem) return;
        stack_t st;
        memset(&st, 0, sizeof st);
        st.ss_flags = SS_DISABLE;
        sigaltstack(&st, nullptr);
        free(mem);
    }
};
thread_local HostAltStack tl_host_stack;
}  // namespace

void worker_thread_attach() {
    HostAltStack& h = tl_host_stack;
    if (h.checked || tl_altstack) return;
    h.checked = true;
    stack_t cur;
    if (sigaltstack(nullptr, &cur) == 0 && !(cur.ss_flags & SS_DISABLE)) return; /* the thread has its own */
    size_t sz = 64 * 1024;
    h.mem = malloc(sz);
    if (!h.mem) return;
    stack_t st;
    st.ss_sp = h.mem;
    st.ss_size = sz;
    st.ss_flags = 0;
    if (sigaltstack(&st, nullptr) != 0) {
        free(h.mem);
        h.mem = nullptr;
    }
}

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

void guard_leave() { tl_guard.run = nullptr; }

void* crash_site(const KernelRun* run, void* pc) {
    Guard& g = tl_guard;
    if (in_code(run, (uintptr_t)pc)) return nullptr;
    for (int i = 0; i < g.nframes; i++)
        if (in_code(run, (uintptr_t)g.frames[i])) return g.frames[i];
    return nullptr;
}

}  // namespace emu
