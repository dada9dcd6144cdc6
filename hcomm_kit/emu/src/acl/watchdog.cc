/* ACL runtime: the launch-timeout watchdog (acl_runtime.md §3.8). A kernel that outlives its launch
 * timeout is abandoned: the stream fails with 507017 and gets a fresh worker, the stuck thread
 * exits whenever the kernel returns; the kernel is interrupted if it runs its own code, else the
 * device is marked lost. The communicators it worked on are aborted with a report. */
#include "acl/hooks.h"
#include "acl/runtime.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace emu {

/* ---------------------------------------------------------------- watchdog */

namespace {
struct WdEntry {
    Stream* s;                       /* nullptr for a cancellation entry (the stream may be gone) */
    uint64_t deadline;
    uint64_t seq;
    std::shared_ptr<KernelRun> run;  /* cancellation entry: the overrunning kernel */
    int attempts = 0;
};
constexpr uint64_t kCancelEveryNs = 50000000ull; /* interruption attempts of an overrunning kernel */
constexpr int kCancelAttempts = 40;
/* Leaky singletons: a detached watchdog may still wait on them while statics are destroyed. */
std::mutex& g_wd_m = *new std::mutex();
std::condition_variable& g_wd_cv = *new std::condition_variable();
std::vector<WdEntry>& g_wd = *new std::vector<WdEntry>();
bool g_wd_started = false;
/* When the sleeping watchdog wakes up next (UINT64_MAX: no deadline; 0: it is awake and will
 * rescan before sleeping). Under g_wd_m. An arm with a later deadline need not wake it. */
uint64_t g_wd_wake = 0;
constexpr uint64_t kWdHorizonNs = 1000000000ull;

/* An overrunning kernel was abandoned: interrupt it (on_cancel in kernel_guard.cc leaves the entry when
 * the worker runs the kernel's own code), retrying; when that never works, the device is lost. */
void cancel_attempt(WdEntry& e) {
    KernelRun* r = e.run.get();
    if (r->done.load()) return; /* interrupted, or it returned by itself */
    if (e.attempts++ < kCancelAttempts) {
        syscall(SYS_tgkill, (int)getpid(), r->tid, kCancelSig);
        e.deadline = now_ns() + kCancelEveryNs;
        std::lock_guard<std::mutex> g(g_wd_m);
        g_wd.push_back(e);
        return;
    }
    Device* d = r->dev;
    {
        std::lock_guard<std::mutex> g(d->m);
        d->lost_reason = strprintf(
            "AICPU kernel %s (stream %u) overran its launch timeout of %.3f s and could not be interrupted (it does not "
            "run its own code: blocked in a system or library call); it keeps running on an abandoned worker thread "
            "at the lowest priority. Restart the process",
            r->kernel.c_str(), r->stream_id, (double)r->timeout_ns / 1e9);
    }
    d->lost.store(true);
    if (!r->on_caller) { /* a host thread's own scheduling is not ours to change */
        struct sched_param sp;
        memset(&sp, 0, sizeof sp);
        sched_setscheduler(r->tid, SCHED_IDLE, &sp); /* it may still spin: it no longer competes for a core */
    }
    EMU_LOG(LOG_ERROR, "device %d is lost: %s", d->id, d->lost_reason.c_str());
    rank_log("device %d is lost: %s", d->id, d->lost_reason.c_str());
}

void watchdog_fire(WdEntry& e) {
    if (!e.s) {
        cancel_attempt(e);
        return;
    }
    Stream* s = e.s;
    std::vector<std::unique_ptr<Task>> dropped;
    uint64_t n_dropped = 0;
    std::shared_ptr<KernelRun> run;
    std::vector<Comm*> comms;
    std::string what;
    bool on_caller = false;
    {
        std::lock_guard<std::mutex> g(s->m);
        if (s->kernel_seq != e.seq || s->kernel_deadline_ns == 0) return; /* finished meanwhile */
        std::string name = s->kernel_name;
        what = strprintf("AICPU kernel %s on stream %u did not finish within its launch timeout (%.3f s)", name.c_str(),
                         s->id, (double)s->kernel_timeout_ns / 1e9);
        stream_note_error_locked(s, ACL_ERROR_RT_AICPU_TIMEOUT,
                                 what + "; the stream's pending tasks were dropped and the kernel is being interrupted");
        run = s->kernel_run;
        comms = s->kernel_comms;
        s->kernel_run.reset();
        s->timed_out_kseq = e.seq;
        s->kernel_deadline_ns = 0;
        s->kernel_name.clear();
        /* Run by a host thread itself (stream_inline_end): no worker to replace; once interrupted, the
         * kernel task fails with the error above and that thread drops what follows it. */
        on_caller = run && run->on_caller;
        if (!on_caller) {
            s->worker_gen++;
            s->cur = nullptr;
            while (!s->q.empty()) {
                dropped.push_back(std::move(s->q.front()));
                s->q.pop_front();
            }
            n_dropped = dropped.size();
            stream_replace_worker_locked(s);
        }
    }
    EMU_LOG(LOG_ERROR, "%s: stream fails with 507017", what.c_str());
    rank_log("%s", what.c_str());
    if (run) {
        run->cancel.store(true);
        WdEntry ce{nullptr, 0, e.seq, run, 0};
        cancel_attempt(ce); /* first attempt now, retries queued */
    }
    /* The other ranks would wait for this kernel's part until their own timeouts: fail them now. */
    if (acl_hooks.kernel_overran)
        for (Comm* c : comms) acl_hooks.kernel_overran(c, what);
    if (on_caller) return;
    stream_task_done(s, nullptr); /* the abandoned kernel task */
    for (auto& t : dropped) {
        t->drop();
        stream_task_done(s, t.get());
    }
    (void)n_dropped;
}

void watchdog_main() {
    std::unique_lock<std::mutex> lk(g_wd_m);
    for (;;) {
        if (g_wd.empty()) {
            /* Sleep with a horizon rather than indefinitely: launches arm and disarm at every
             * call, and an arm whose deadline lies beyond the horizon (the common case: seconds
             * to minutes) then need not wake us. */
            g_wd_wake = now_ns() + kWdHorizonNs;
            g_wd_cv.wait_for(lk, std::chrono::nanoseconds(kWdHorizonNs));
            g_wd_wake = 0;
            continue;
        }
        uint64_t now = now_ns(), next = UINT64_MAX;
        std::vector<WdEntry> fire;
        for (size_t i = 0; i < g_wd.size();) {
            if (g_wd[i].deadline <= now) {
                fire.push_back(g_wd[i]);
                g_wd[i] = g_wd.back();
                g_wd.pop_back();
            } else {
                next = std::min(next, g_wd[i].deadline);
                i++;
            }
        }
        if (!fire.empty()) {
            lk.unlock();
            for (auto& e : fire) watchdog_fire(e);
            lk.lock();
            continue;
        }
        if (next - now > kWdHorizonNs) next = now + kWdHorizonNs;
        g_wd_wake = next;
        g_wd_cv.wait_for(lk, std::chrono::nanoseconds(next - now));
        g_wd_wake = 0;
    }
}
}  // namespace

void watchdog_arm(Stream* s, uint64_t deadline_ns, uint64_t seq) {
    std::lock_guard<std::mutex> g(g_wd_m);
    if (!g_wd_started) {
        g_wd_started = true;
        std::thread(watchdog_main).detach();
    }
    g_wd.push_back(WdEntry{s, deadline_ns, seq, nullptr, 0});
    if (deadline_ns < g_wd_wake) g_wd_cv.notify_one();
}

void watchdog_disarm(Stream* s, uint64_t seq) {
    std::lock_guard<std::mutex> g(g_wd_m);
    for (size_t i = 0; i < g_wd.size(); i++)
        if (g_wd[i].s == s && g_wd[i].seq == seq) {
            g_wd[i] = g_wd.back();
            g_wd.pop_back();
            break;
        }
}

}  // namespace emu
