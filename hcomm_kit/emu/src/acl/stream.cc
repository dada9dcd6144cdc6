/* Streams, events, ACL notifies, host callbacks and the launch-timeout watchdog
 * (acl_runtime.md §3.3, §3.8, §3.9, §3.10).
 *
 * A stream is a FIFO of Tasks run by one worker thread. Asynchronous failures are kept in
 * err_code and returned (then cleared) by the next synchronising call; tasks that reach the
 * head while the stream is in error are dropped, not run. A kernel that outlives its launch
 * timeout is abandoned by the watchdog: the stream fails with 507017 and gets a fresh worker,
 * the stuck thread exits whenever the kernel returns. */
#include "acl/hooks.h"
#include "acl/runtime.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace emu {

void worker_thread_init();  /* kernel.cc: crash-guard alternate stack */
void worker_thread_fini();

namespace {
/* Leaky singletons: a worker abandoned by the watchdog may return from its kernel after main()
 * has exited and static destructors have run; it must still find these alive. */
std::mutex& g_streams_m = *new std::mutex();
std::unordered_set<Stream*>& g_streams = *new std::unordered_set<Stream*>();
std::atomic<uint32_t> g_stream_ids{0};
/* Streams whose abandoned workers still run: deleted by the last of them. */
std::unordered_map<Stream*, int>& g_abandoned = *new std::unordered_map<Stream*, int>();
std::unordered_set<Stream*>& g_destroyed_pending = *new std::unordered_set<Stream*>();
/* Stream lifetime: held around every `delete` of a stream and by streams_visit, so a visitor can
 * look at streams (under their own locks) without one being freed meanwhile. Lock order:
 * g_life_m, then a stream's m, then g_streams_m. */
std::mutex& g_life_m = *new std::mutex();
}  // namespace

void streams_visit(Device* d, const std::function<void(Stream*)>& f) {
    std::lock_guard<std::mutex> life(g_life_m);
    std::vector<Stream*> list;
    {
        std::lock_guard<std::mutex> g(g_streams_m);
        for (Stream* s : g_streams)
            if (s->dev == d) list.push_back(s);
    }
    std::sort(list.begin(), list.end(), [](Stream* a, Stream* b) { return a->id < b->id; });
    for (Stream* s : list) f(s);
}

bool stream_valid(Stream* s) {
    std::lock_guard<std::mutex> g(g_streams_m);
    return g_streams.count(s) != 0;
}

Stream* stream_resolve(aclrtStream h, int* err_code, const char* api) {
    if (!h) {
        Context* c = current_ctx();
        if (!c) {
            *err_code = seterr(ACL_ERROR_RT_CONTEXT_NULL, api,
                               "stream is NULL (default stream) but no device is set on this thread");
            return nullptr;
        }
        return c->default_stream;
    }
    Stream* s = static_cast<Stream*>(h);
    if (!stream_valid(s)) {
        *err_code = seterr(ACL_ERROR_RT_PARAM_INVALID, api, "stream %p is not a live stream", h);
        return nullptr;
    }
    return s;
}

static void worker_main(Stream* s, uint64_t gen);

static void start_worker_locked(Stream* s) {
    s->worker_running = true;
    uint64_t gen = s->worker_gen;
    std::thread(worker_main, s, gen).detach();
}

int stream_enqueue(Stream* s, std::unique_ptr<Task> t) {
    {
        std::lock_guard<std::mutex> g(s->m);
        if (s->stop) return seterr(ACL_ERROR_RT_PARAM_INVALID, t->name(), "stream %p is being destroyed", (void*)s);
        s->q.push_back(std::move(t));
        s->submitted++;
        if (!s->worker_running) start_worker_locked(s);
    }
    s->qword.fetch_add(1, std::memory_order_seq_cst);
    /* One wake-up per sleep is enough: later enqueues find worker_woken set. */
    if (s->worker_idle.load(std::memory_order_seq_cst) && !s->worker_woken.exchange(1, std::memory_order_seq_cst))
        futex_wake(&s->qword, 1, false);
    return ACL_SUCCESS;
}

static void complete_one(Stream* s, Task* t) {
    if (t && t->done_word) {
        t->done_word->store(1, std::memory_order_release);
        futex_wake(t->done_word, INT_MAX, false);
    }
    uint64_t done = s->completed.fetch_add(1, std::memory_order_seq_cst) + 1;
    /* Wake sleeping sync callers only once the first of them is satisfied. The target is reset
     * before cword moves: a caller that registered a larger target meanwhile read cword before
     * the bump, so its futex wait returns at once and it registers again (stream_sync). */
    bool wake = s->waiters.load(std::memory_order_seq_cst) && s->wake_target.load(std::memory_order_seq_cst) <= done;
    if (wake) s->wake_target.store(UINT64_MAX, std::memory_order_seq_cst);
    s->cword.fetch_add(1, std::memory_order_seq_cst);
    if (wake) futex_wake(&s->cword, INT_MAX, false);
}

static bool abandoned_exit(Stream* s) {
    /* Called by a worker that found itself abandoned; returns true if it deleted the stream. */
    std::lock_guard<std::mutex> life(g_life_m);
    std::lock_guard<std::mutex> g(g_streams_m);
    if (--g_abandoned[s] > 0) return false;
    g_abandoned.erase(s);
    if (g_destroyed_pending.erase(s)) {
        delete s;
        return true;
    }
    return false;
}

static void worker_main(Stream* s, uint64_t gen) {
    worker_thread_init();
    for (;;) {
        auto has_work = [&] {
            return !s->q.empty() || s->stop;
        };
        bool idle;
        uint32_t qv;
        {
            std::lock_guard<std::mutex> g(s->m);
            if (s->worker_gen != gen) break;
            idle = !has_work();
            /* Every enqueue (and stop) bumps qword after its change under m: a value read
             * here changes before the worker could miss new work. */
            qv = s->qword.load(std::memory_order_seq_cst);
        }
        if (idle) {
            /* worker_idle counts this worker only while it sleeps: enqueue skips the wake-up
             * syscall while the worker is still spinning. */
            s->worker_woken.store(0, std::memory_order_seq_cst);
            wait_word(&s->qword, false, 0, [&] { return s->qword.load(std::memory_order_seq_cst) != qv; },
                      1000000000ull, &s->worker_idle);
        }
        std::unique_ptr<Task> t;
        bool failed;
        {
            std::lock_guard<std::mutex> g(s->m);
            if (s->worker_gen != gen) break;
            if (s->q.empty()) {
                if (s->stop) {
                    s->worker_running = false;
                    s->cword.fetch_add(1);
                    futex_wake(&s->cword, INT_MAX, false);
                    worker_thread_fini();
                    return;
                }
                continue;
            }
            t = std::move(s->q.front());
            s->q.pop_front();
            failed = s->err_code != 0;
            s->cur = t.get();
            s->cur_since_ns = now_ns();
        }
        int rc = 0;
        std::string msg;
        if (failed) t->drop();
        else rc = t->run(s, &msg);
        {
            std::lock_guard<std::mutex> g(s->m);
            if (s->worker_gen != gen) {
                /* The watchdog abandoned us while the kernel ran and already completed the task. */
                break;
            }
            s->cur = nullptr;
            if (rc) stream_note_error_locked(s, rc, msg);
        }
        complete_one(s, t.get());
    }
    worker_thread_fini();
    abandoned_exit(s);
}

Stream* stream_create(Context* ctx, uint32_t flags, int* err_code, const char* api) {
    Device* d = ctx->dev;
    {
        std::lock_guard<std::mutex> g(d->m);
        if (d->stream_count >= 1984) {
            *err_code = seterr(ACL_ERROR_RT_NO_STREAM_RESOURCE, api,
                               "device %d already has 1984 streams (the A2/A3/950 limit, default streams included)", d->id);
            return nullptr;
        }
        d->stream_count++;
    }
    Stream* s = new Stream();
    s->ctx = ctx;
    s->dev = d;
    s->flags = flags;
    s->id = g_stream_ids.fetch_add(1) + 1;
    std::lock_guard<std::mutex> g(g_streams_m);
    g_streams.insert(s);
    return s;
}

void stream_destroy(Stream* s) {
    {
        std::lock_guard<std::mutex> g(g_streams_m);
        if (!g_streams.erase(s)) return;
    }
    stream_sync(s, -1, "aclrtDestroyStream");
    {
        std::lock_guard<std::mutex> g(s->m);
        s->stop = true;
    }
    s->qword.fetch_add(1);
    futex_wake(&s->qword, INT_MAX, false);
    /* Wait for the current worker to leave (it only touches s under s->m). */
    wait_word(&s->cword, false, 0, [&] {
        std::lock_guard<std::mutex> g(s->m);
        return !s->worker_running;
    }, 10000000ull);
    {
        std::lock_guard<std::mutex> g(s->dev->m);
        s->dev->stream_count--;
    }
    s->magic = 0;
    std::lock_guard<std::mutex> life(g_life_m);
    std::lock_guard<std::mutex> g(g_streams_m);
    if (g_abandoned.count(s)) g_destroyed_pending.insert(s);
    else delete s;
}

void stream_note_error_locked(Stream* s, int code, const std::string& msg) {
    if (s->err_code) return;
    s->err_code = code;
    s->err_msg = msg;
    s->err_taken = std::make_shared<std::atomic<bool>>(false);
}

void stream_set_error(Stream* s, int code, const std::string& msg) {
    std::lock_guard<std::mutex> g(s->m);
    stream_note_error_locked(s, code, msg);
}

int stream_sync(Stream* s, int64_t timeout_ms, const char* api) {
    uint64_t target;
    {
        std::lock_guard<std::mutex> g(s->m);
        target = s->submitted;
        if (!s->err_code)
            if (int r = device_lost_check(s->dev, api)) return r;
    }
    uint64_t deadline = timeout_ms >= 0 ? now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
    if (timeout_ms == 0) deadline = now_ns();
    HostSync hs(s->dev, s->id);
    /* waiters counts only sleeping callers, so a completion skips the wake-up syscall while we spin.
     * Before each check (the last one precedes the sleep) the target is published in wake_target
     * (a minimum over the sleepers), then completed is read again: a completer that missed the
     * target has already raised completed. */
    bool ok = wait_word(&s->cword, false, deadline, [&] {
        if (s->completed.load(std::memory_order_seq_cst) >= target) return true;
        uint64_t cur = s->wake_target.load(std::memory_order_seq_cst);
        while (target < cur && !s->wake_target.compare_exchange_weak(cur, target, std::memory_order_seq_cst)) {
        }
        return s->completed.load(std::memory_order_seq_cst) >= target;
    }, 1000000000ull, &s->waiters);
    if (!ok) {
        std::string running;
        {
            std::lock_guard<std::mutex> g(s->m);
            if (!s->kernel_name.empty()) running = " (kernel " + s->kernel_name + " is running)";
        }
        std::string acct = device_threads_account(s->dev);
        return seterr(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, api, "stream %u still has %llu unfinished task(s) after %lld ms%s%s%s",
                      s->id, (unsigned long long)(target - s->completed.load()), (long long)timeout_ms,
                      running.c_str(), acct.empty() ? "" : "; ", acct.c_str());
    }
    int rc;
    std::string msg;
    {
        std::lock_guard<std::mutex> g(s->m);
        rc = s->err_code;
        msg = s->err_msg;
        if (s->err_taken && s->err_taken->load()) rc = 0; /* an event synchronisation reported it */
        s->err_code = 0;
        s->err_msg.clear();
        s->err_taken.reset();
    }
    if (rc) return seterr_str(rc, api, msg);
    return ACL_SUCCESS;
}

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

/* An overrunning kernel was abandoned: interrupt it (on_cancel in kernel.cc leaves the entry when
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
    struct sched_param sp;
    memset(&sp, 0, sizeof sp);
    sched_setscheduler(r->tid, SCHED_IDLE, &sp); /* it may still spin: it no longer competes for a core */
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
        s->worker_gen++;
        s->cur = nullptr;
        while (!s->q.empty()) {
            dropped.push_back(std::move(s->q.front()));
            s->q.pop_front();
        }
        n_dropped = dropped.size();
        {
            std::lock_guard<std::mutex> g2(g_streams_m);
            g_abandoned[s]++;
        }
        start_worker_locked(s);
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
    complete_one(s, nullptr); /* the abandoned kernel task */
    for (auto& t : dropped) {
        t->drop();
        complete_one(s, t.get());
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

/* ---------------------------------------------------------------- simple tasks */

namespace {
struct CopyTask : Task {
    void* dst;
    const void* src;
    size_t n;
    CopyTask(void* d, const void* s, size_t c) : dst(d), src(s), n(c) {}
    int run(Stream*, std::string*) override {
        memmove(dst, src, n);
        note_host_write(dst, n);
        return 0;
    }
    const char* name() const override { return "aclrtMemcpyAsync"; }
};

struct SetTask : Task {
    void* dst;
    int v;
    size_t n;
    SetTask(void* d, int val, size_t c) : dst(d), v(val), n(c) {}
    int run(Stream*, std::string*) override {
        memset(dst, v, n);
        note_host_write(dst, n);
        return 0;
    }
    const char* name() const override { return "aclrtMemsetAsync"; }
};

struct HostFuncTask : Task {
    aclrtHostFunc fn;
    void* args;
    HostFuncTask(aclrtHostFunc f, void* a) : fn(f), args(a) {}
    int run(Stream*, std::string*) override {
        fn(args);
        return 0;
    }
    const char* name() const override { return "aclrtLaunchHostFunc"; }
};
}  // namespace

}  // namespace emu

using namespace emu;

#define RESOLVE_STREAM(var, h)                      \
    int var##_code = 0;                             \
    Stream* var = stream_resolve((h), &var##_code, __func__); \
    if (!var) return var##_code

/* ================================================================ streams */

EMU_API aclError aclrtCreateStreamWithConfig(aclrtStream* stream, uint32_t priority, uint32_t flag) {
    if (int r = check_init(__func__)) return r;
    (void)priority;
    if (!stream) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "stream is NULL");
    Context* c = current_ctx();
    if (!c) return seterr(ACL_ERROR_RT_CONTEXT_NULL, __func__, "no device set on this thread (call aclrtSetDevice)");
    if (flag & ~0x3fu) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "unknown stream flag bits 0x%x", flag & ~0x3fu);
    int code = 0;
    Stream* s = stream_create(c, flag, &code, __func__);
    if (!s) return code;
    {
        std::lock_guard<std::mutex> g(c->dev->m);
        c->streams.push_back(s);
    }
    *stream = s;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtCreateStream(aclrtStream* stream) { return aclrtCreateStreamWithConfig(stream, 0, 0); }

EMU_API aclError aclrtDestroyStream(aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    if (!stream) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "stream is NULL");
    Stream* s = static_cast<Stream*>(stream);
    if (!stream_valid(s)) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "stream %p is not a live stream", stream);
    Context* c = s->ctx;
    if (s == c->default_stream)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "stream %p is a default stream; it goes with its context", stream);
    {
        std::lock_guard<std::mutex> g(c->dev->m);
        for (size_t i = 0; i < c->streams.size(); i++)
            if (c->streams[i] == s) c->streams.erase(c->streams.begin() + (long)i);
    }
    stream_destroy(s);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtSynchronizeStream(aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_STREAM(s, stream);
    return stream_sync(s, -1, __func__);
}

EMU_API aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    if (int r = check_init(__func__)) return r;
    if (timeout < -1) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "timeout %d ms is below -1", timeout);
    RESOLVE_STREAM(s, stream);
    if (s->flags & (ACL_STREAM_PERSISTENT | ACL_STREAM_DEVICE_USE_ONLY | ACL_STREAM_CPU_SCHEDULE)) return ACL_SUCCESS;
    return stream_sync(s, timeout, __func__);
}

EMU_API aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus* status) {
    if (int r = check_init(__func__)) return r;
    if (!status) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "status is NULL");
    RESOLVE_STREAM(s, stream);
    std::lock_guard<std::mutex> g(s->m);
    *status = s->completed.load() >= s->submitted ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

/* ================================================================ async memory */

EMU_API aclError aclrtMemcpyAsync(void* dst, size_t destMax, const void* src, size_t count, aclrtMemcpyKind kind,
                                  aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    if (count == 0) return ACL_SUCCESS;
    int k; /* the kind read as an int: callers may pass values outside the enum */
    memcpy(&k, &kind, sizeof k);
    if (int r = memcpy_check(__func__, dst, destMax, src, count, k)) return r;
    RESOLVE_STREAM(s, stream);
    /* Pageable host memory: the call returns only after the copy completed (spec §3.4). */
    MemRegion r;
    bool dst_pageable = !mem_find(dst, count, &r);
    bool src_pageable = !mem_find(src, count, &r);
    auto t = std::make_unique<CopyTask>(dst, src, count);
    std::atomic<uint32_t> done{0};
    bool wait = dst_pageable || src_pageable;
    if (wait) t->done_word = &done;
    if (int rc = stream_enqueue(s, std::move(t))) return rc;
    if (wait) wait_word(&done, false, 0, [&] { return done.load(std::memory_order_acquire) != 0; });
    return ACL_SUCCESS;
}

EMU_API aclError aclrtMemsetAsync(void* devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    if (count == 0) return ACL_SUCCESS;
    if (!devPtr) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "devPtr is NULL");
    if (maxCount < count)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "count %zu exceeds maxCount %zu", count, maxCount);
    if (int r = check_side(__func__, "devPtr", devPtr, count, -1, "memset")) return r;
    RESOLVE_STREAM(s, stream);
    return stream_enqueue(s, std::make_unique<SetTask>(devPtr, value, count));
}

EMU_API aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) {
    if (int r = check_init(__func__)) return r;
    if (!fn) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "fn is NULL");
    RESOLVE_STREAM(s, stream);
    return stream_enqueue(s, std::make_unique<HostFuncTask>(fn, args));
}

/* ================================================================ events */

namespace emu {
struct Event {
    uint32_t magic = kEventMagic;
    uint32_t flags = 0;
    bool ex = false;
    std::atomic<uint64_t> rec_seq{0};  /* records enqueued */
    std::atomic<uint64_t> done_seq{0}; /* records completed */
    std::atomic<uint64_t> ts_ns{0};    /* time of the last completed record */
    std::atomic<uint32_t> word{0};     /* futex: bumped at each completion */
    std::atomic<Device*> dev{nullptr};  /* device and stream of the latest record (hang analysis) */
    std::atomic<uint32_t> stream_id{0};
    /* The latest completed record's outcome (under g_ev_m): 0, or the error of the stream that
     * dropped it, which aclrtSynchronizeEvent reports (spec: "the next synchronising call on
     * that stream (stream, event or device sync) returns" the error). */
    int err_code = 0;
    std::string err_msg;
    std::shared_ptr<std::atomic<bool>> err_taken;
};
namespace {
std::mutex g_ev_m;
std::unordered_set<Event*> g_events;
uint32_t g_op_wait_timeout_s = 0;

bool event_valid(Event* e) {
    std::lock_guard<std::mutex> g(g_ev_m);
    return g_events.count(e) != 0;
}

void event_complete(Event* e, uint64_t seq) {
    e->ts_ns.store(now_ns(), std::memory_order_release);
    uint64_t cur = e->done_seq.load();
    while (cur < seq && !e->done_seq.compare_exchange_weak(cur, seq)) {
    }
    e->word.fetch_add(1);
    futex_wake(&e->word, INT_MAX, false);
}

void event_set_outcome(Event* e, int code, const std::string& msg, std::shared_ptr<std::atomic<bool>> taken) {
    std::lock_guard<std::mutex> g(g_ev_m);
    e->err_code = code;
    e->err_msg = msg;
    e->err_taken = std::move(taken);
}

struct EventRecordTask : Task {
    Event* e;
    uint64_t seq;
    Stream* s;  /* the stream it was recorded on: alive while the task is queued or running */
    EventRecordTask(Event* ev, uint64_t sq, Stream* st) : e(ev), seq(sq), s(st) {}
    int run(Stream*, std::string*) override {
        event_set_outcome(e, 0, std::string(), nullptr);
        event_complete(e, seq);
        return 0;
    }
    /* A dropped record (the stream failed before it) still completes, so nothing waits forever on
     * a failed stream, and carries the stream's error for aclrtSynchronizeEvent to report. */
    void drop() override {
        int code;
        std::string msg;
        std::shared_ptr<std::atomic<bool>> taken;
        {
            std::lock_guard<std::mutex> g(s->m);
            code = s->err_code;
            msg = s->err_msg;
            taken = s->err_taken;
        }
        if (!code) {
            code = ACL_ERROR_RT_AICPU_EXCEPTION;
            msg = "a task before the event on its stream failed";
        }
        event_set_outcome(e, code, msg, std::move(taken));
        event_complete(e, seq);
    }
    const char* name() const override { return "aclrtRecordEvent"; }
};

struct EventWaitTask : Task {
    Event* e;
    uint64_t target;
    EventWaitTask(Event* ev, uint64_t t) : e(ev), target(t) {}
    int run(Stream* s, std::string* msg) override {
        uint64_t deadline = g_op_wait_timeout_s ? now_ns() + (uint64_t)g_op_wait_timeout_s * 1000000000ull : 0;
        bool ok = wait_word(&e->word, false, deadline, [&] { return e->done_seq.load() >= target; });
        if (!ok) {
            *msg = strprintf("stream %u waited more than %u s (aclrtSetOpWaitTimeout) for an event", s->id,
                             g_op_wait_timeout_s);
            return ACL_ERROR_RT_TASK_TIMEOUT;
        }
        return 0;
    }
    const char* name() const override { return "aclrtStreamWaitEvent"; }
};
}  // namespace
}  // namespace emu

static aclError create_event(aclrtEvent* event, uint32_t flag, bool ex, const char* api) {
    if (int r = check_init(api)) return r;
    if (!event) return seterr(ACL_ERROR_INVALID_PARAM, api, "event is NULL");
    if (flag & ~0x7bu) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "unknown event flag bits 0x%x", flag & ~0x7bu);
    Event* e = new Event();
    e->flags = flag;
    e->ex = ex;
    std::lock_guard<std::mutex> g(g_ev_m);
    g_events.insert(e);
    *event = e;
    return ACL_SUCCESS;
}

#define RESOLVE_EVENT(var, h)                                                                        \
    if (!(h)) return seterr(ACL_ERROR_INVALID_PARAM, __func__, #h " is NULL");                       \
    Event* var = static_cast<Event*>(h);                                                              \
    if (!event_valid(var)) return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p is not a live event", (void*)(h))

EMU_API aclError aclrtCreateEvent(aclrtEvent* event) { return create_event(event, ACL_EVENT_SYNC, false, __func__); }
EMU_API aclError aclrtCreateEventWithFlag(aclrtEvent* event, uint32_t flag) {
    return create_event(event, flag, false, __func__);
}
EMU_API aclError aclrtCreateEventExWithFlag(aclrtEvent* event, uint32_t flag) {
    return create_event(event, flag, true, __func__);
}

EMU_API aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    RESOLVE_STREAM(s, stream);
    uint64_t seq = e->rec_seq.fetch_add(1) + 1;
    e->dev.store(s->dev);
    e->stream_id.store(s->id);
    return stream_enqueue(s, std::make_unique<EventRecordTask>(e, seq, s));
}

EMU_API aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    RESOLVE_STREAM(s, stream);
    (void)s;
    if (!(e->flags & ACL_EVENT_SYNC) || !e->ex)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "event %p was not created with aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)", event);
    e->done_seq.store(e->rec_seq.load());
    return ACL_SUCCESS;
}

EMU_API aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    RESOLVE_STREAM(s, stream);
    uint64_t target = e->rec_seq.load();
    if (target == 0) return ACL_SUCCESS; /* never recorded: nothing to wait for */
    return stream_enqueue(s, std::make_unique<EventWaitTask>(e, target));
}

static aclError sync_event(aclrtEvent event, int32_t timeout, const char* api) {
    if (int r = check_init(api)) return r;
    if (!event) return seterr(ACL_ERROR_INVALID_PARAM, api, "event is NULL");
    Event* e = static_cast<Event*>(event);
    if (!event_valid(e)) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "%p is not a live event", event);
    if (timeout < -1) return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "timeout %d ms is below -1", timeout);
    uint64_t target = e->rec_seq.load();
    uint64_t deadline = timeout >= 0 ? now_ns() + (uint64_t)timeout * 1000000ull : 0;
    if (timeout == 0) deadline = now_ns();
    Device* dev = e->dev.load();
    std::unique_ptr<HostSync> hs(dev ? new HostSync(dev, e->stream_id.load()) : nullptr);
    bool ok = wait_word(&e->word, false, deadline, [&] { return e->done_seq.load() >= target; }, 1000000000ull);
    if (!ok)
        return seterr(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, api, "event %p did not complete within %d ms", event, timeout);
    int code;
    std::string msg;
    {
        std::lock_guard<std::mutex> g(g_ev_m);
        code = e->err_code;
        msg = e->err_msg;
        if (code && e->err_taken) e->err_taken->store(true); /* the stream's next sync stays quiet */
    }
    if (code) return seterr_str(code, api, msg);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtSynchronizeEvent(aclrtEvent event) { return sync_event(event, -1, __func__); }
EMU_API aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    return sync_event(event, timeout, __func__);
}

EMU_API aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    if (int r = check_init(__func__)) return r;
    if (!ms) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "ms is NULL");
    RESOLVE_EVENT(a, startEvent);
    RESOLVE_EVENT(b, endEvent);
    if (a->rec_seq.load() == 0 || b->rec_seq.load() == 0)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%s event was never recorded",
                      a->rec_seq.load() == 0 ? "start" : "end");
    if (a->done_seq.load() < a->rec_seq.load() || b->done_seq.load() < b->rec_seq.load())
        return seterr(ACL_ERROR_RT_EVENT_NOT_COMPLETE, __func__,
                      "%s event has not completed yet (synchronise the stream first)",
                      a->done_seq.load() < a->rec_seq.load() ? "start" : "end");
    uint64_t t0 = a->ts_ns.load(), t1 = b->ts_ns.load();
    *ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus* status) {
    if (int r = check_init(__func__)) return r;
    if (!status) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "status is NULL");
    RESOLVE_EVENT(e, event);
    if (e->ex) return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "not allowed on Ex-created events");
    *status = e->done_seq.load() >= e->rec_seq.load() ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
    if (int r = check_init(__func__)) return r;
    if (!status) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "status is NULL");
    RESOLVE_EVENT(e, event);
    *status = e->done_seq.load() >= e->rec_seq.load() ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                                        : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtDestroyEvent(aclrtEvent event) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_EVENT(e, event);
    /* Records still queued refer to it: retire it (kept reachable, 48 bytes) rather than risk a
     * use after free in a stream worker. */
    static std::vector<Event*>& retired = *new std::vector<Event*>();
    std::lock_guard<std::mutex> g(g_ev_m);
    g_events.erase(e);
    e->magic = 0;
    retired.push_back(e);
    return ACL_SUCCESS;
}

EMU_API aclError aclrtSetOpWaitTimeout(uint32_t timeout) {
    if (int r = check_init(__func__)) return r;
    g_op_wait_timeout_s = timeout;
    return ACL_SUCCESS;
}

/* ================================================================ ACL notifies */

namespace emu {
struct Notify {
    uint32_t magic = kNotifyMagic;
    Device* dev;
    uint32_t slot;
};
namespace {
std::mutex g_nt_m;
std::unordered_set<Notify*> g_notifies;

/* An ACL notify wait/record seen as an Hcomm task of a host stream (checker, hang reports). */
HTask acl_notify_task(HOp op, const char* api, Device* dev, uint32_t slot, uint32_t timeout_s) {
    HTask h;
    h.op = op;
    h.api = api;
    h.slot_ctl = dev->ctl;
    h.slot = slot;
    h.timeout_s = timeout_s;
    h.desc.kind = 2;
    h.desc.index = slot;
    return h;
}

struct NotifyRecordTask : Task {
    DevCtl* ctl;
    uint32_t slot;
    NotifyRecordTask(Device* d, uint32_t s) : ctl(d->ctl), slot(s) {}
    int run(Stream*, std::string*) override {
        /* A plain ACL notify between host streams is the runtime's business, not an operator's:
         * no lost-signal finding here; the provenance says "host" so Hcomm waits do not judge it. */
        if (check_mode()) ctl->src[slot].store(prov::make(true, false, 0x7f, 0xfff, 0, 0, 0), std::memory_order_release);
        slot_record(ctl, slot);
        return 0;
    }
    const char* name() const override { return "aclrtRecordNotify"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Record;
        d->what = strprintf("aclrtRecordNotify (ACL notify id %u)", slot);
        d->records.emplace_back(ctl, slot);
    }
};

struct NotifyWaitTask : Task {
    Device* dev;
    uint32_t slot;
    uint32_t timeout_s;
    HTask h;
    std::atomic<uint64_t> since{0};
    NotifyWaitTask(Device* d, uint32_t s, uint32_t t)
        : dev(d), slot(s), timeout_s(t), h(acl_notify_task(HOp::Wait, "aclrtWaitAndResetNotify", d, s, t)) {
        helps = true;
    }
    int run(Stream* s, std::string* msg) override;
    const char* name() const override { return "aclrtWaitAndResetNotify"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Wait;
        d->wait = &h;
        d->since_ns = since.load(std::memory_order_relaxed);
        d->what = strprintf("aclrtWaitAndResetNotify (ACL notify id %u)", slot);
    }
};
}  // namespace

/* Waits for an ACL notify on a stream worker: through the device-thread scheduler, which runs the
 * device's device threads meanwhile; without it (no hcomm/), a plain wait on the doorbell. Returns
 * 1 when consumed, 0 on timeout, -1 when aborted (msg says why). */
static int wait_acl_notify(Device* dev, uint32_t slot, uint64_t deadline_ns, std::string* msg) {
    if (acl_hooks.wait_slot) return acl_hooks.wait_slot(dev, slot, deadline_ns, msg);
    DevCtl* c = dev->ctl;
    for (;;) {
        uint32_t v = c->doorbell.load(std::memory_order_seq_cst);
        if (slot_consume(c, slot)) return 1;
        if (deadline_ns && now_ns() >= deadline_ns) return 0;
        uint64_t poll_deadline = now_ns() + 100000000ull;
        if (deadline_ns && deadline_ns < poll_deadline) poll_deadline = deadline_ns;
        wait_word(&c->doorbell, true, poll_deadline,
                  [&] { return c->doorbell.load(std::memory_order_acquire) != v; }, 100000000ull, &c->sleepers);
    }
}

int NotifyWaitTask::run(Stream* s, std::string* msg) {
    uint64_t deadline = (timeout_s == 0 || timeout_s == UINT32_MAX) ? 0 : now_ns() + (uint64_t)timeout_s * 1000000000ull;
    since.store(now_ns(), std::memory_order_relaxed);
    int r = wait_acl_notify(dev, slot, deadline, msg);
    since.store(0, std::memory_order_relaxed);
    if (r == 1) return 0;
    if (r == 0) {
        std::string acct = device_threads_account(dev);
        *msg = strprintf("stream %u: ACL notify id %u was not recorded within %u s (aclrtWaitAndResetNotify)%s%s",
                         s->id, slot, timeout_s, acct.empty() ? "" : "; ", acct.c_str());
        return ACL_ERROR_RT_TASK_TIMEOUT;
    }
    std::lock_guard<std::mutex> g(dev->m);
    return dev->abort_code ? dev->abort_code : ACL_ERROR_RT_TASK_TIMEOUT;
}
}  // namespace emu

#define RESOLVE_NOTIFY(var, h)                                                                        \
    if (!(h)) return seterr(ACL_ERROR_INVALID_PARAM, __func__, #h " is NULL");                         \
    Notify* var = static_cast<Notify*>(h);                                                             \
    {                                                                                                  \
        std::lock_guard<std::mutex> g_(g_nt_m);                                                        \
        if (!g_notifies.count(var))                                                                    \
            return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "%p is not a live notify", (void*)(h)); \
    }

EMU_API aclError aclrtCreateNotify(aclrtNotify* notify, uint64_t flag) {
    if (int r = check_init(__func__)) return r;
    if (!notify) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "notify is NULL");
    if (flag > 1)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "flag 0x%llx is not ACL_NOTIFY_DEFAULT (0) or ACL_NOTIFY_DEVICE_USE_ONLY (1)", (unsigned long long)flag);
    Context* c = current_ctx();
    if (!c) return seterr(ACL_ERROR_RT_CONTEXT_NULL, __func__, "no device set on this thread (call aclrtSetDevice)");
    Device* d = c->dev;
    size_t limit = is_950() ? 65535 : 8192;
    {
        std::lock_guard<std::mutex> g(d->m);
        if (d->acl_notifies.size() >= limit)
            return seterr(ACL_ERROR_RT_NO_NOTIFY_RESOURCE, __func__, "device %d already has %zu notifies (limit on %s)",
                          d->id, limit, cfg().soc_name.c_str());
    }
    uint32_t slot;
    std::string err;
    if (!slots_alloc(d, 1, &slot, &err)) return seterr(ACL_ERROR_RT_NO_NOTIFY_RESOURCE, __func__, "%s", err.c_str());
    Notify* n = new Notify();
    n->dev = d;
    n->slot = slot;
    {
        std::lock_guard<std::mutex> g(d->m);
        d->acl_notifies.insert(slot);
    }
    std::lock_guard<std::mutex> g(g_nt_m);
    g_notifies.insert(n);
    *notify = n;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtDestroyNotify(aclrtNotify notify) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_NOTIFY(n, notify);
    {
        std::lock_guard<std::mutex> g(g_nt_m);
        g_notifies.erase(n);
    }
    {
        std::lock_guard<std::mutex> g(n->dev->m);
        n->dev->acl_notifies.erase(n->slot);
    }
    slots_free(n->dev, n->slot, 1);
    n->magic = 0;
    delete n;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_NOTIFY(n, notify);
    RESOLVE_STREAM(s, stream);
    return stream_enqueue(s, std::make_unique<NotifyRecordTask>(n->dev, n->slot));
}

EMU_API aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t timeout) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_NOTIFY(n, notify);
    RESOLVE_STREAM(s, stream);
    if (s->dev != n->dev)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "notify belongs to device %d but stream to device %d",
                      n->dev->id, s->dev->id);
    return stream_enqueue(s, std::make_unique<NotifyWaitTask>(n->dev, n->slot, timeout));
}

EMU_API aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t* notifyId) {
    if (int r = check_init(__func__)) return r;
    if (!notifyId) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "notifyId is NULL");
    RESOLVE_NOTIFY(n, notify);
    *notifyId = n->slot;
    return ACL_SUCCESS;
}

/* ================================================================ callbacks */

namespace emu {
namespace {
struct CbItem {
    aclrtCallback fn;
    void* data;
    bool block;
    std::atomic<uint32_t> done{0};
};
struct Subscriber {
    std::mutex m;
    std::deque<std::shared_ptr<CbItem>> q;
    std::atomic<uint32_t> word{0};
    int nstreams = 0;
};
std::mutex g_cb_m;
std::unordered_map<uint64_t, std::shared_ptr<Subscriber>> g_subs;

std::shared_ptr<Subscriber> find_sub(uint64_t tid) {
    std::lock_guard<std::mutex> g(g_cb_m);
    auto it = g_subs.find(tid);
    return it == g_subs.end() ? nullptr : it->second;
}

struct CallbackTask : Task {
    std::shared_ptr<CbItem> item;
    uint64_t tid;
    explicit CallbackTask(std::shared_ptr<CbItem> i, uint64_t t) : item(std::move(i)), tid(t) {}
    int run(Stream* s, std::string* msg) override {
        auto sub = find_sub(tid);
        if (!sub) {
            *msg = strprintf("stream %u: the thread subscribed for its callbacks unsubscribed", s->id);
            return ACL_ERROR_RT_STREAM_NO_CB_REG;
        }
        {
            std::lock_guard<std::mutex> g(sub->m);
            sub->q.push_back(item);
        }
        sub->word.fetch_add(1);
        futex_wake(&sub->word, INT_MAX, false);
        if (item->block) {
            wait_word(&item->done, false, 0, [&] { return item->done.load() != 0 || !find_sub(tid); }, 200000000ull);
        }
        return 0;
    }
    const char* name() const override { return "aclrtLaunchCallback"; }
};
}  // namespace
}  // namespace emu

EMU_API aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_STREAM(s, stream);
    std::lock_guard<std::mutex> g(g_cb_m);
    if (s->subscriber_set && s->subscriber != threadId)
        return seterr(ACL_ERROR_RT_STREAM_SUBSCRIBE, __func__, "stream %u is already served by thread %llu", s->id,
                      (unsigned long long)s->subscriber);
    if (s->subscriber_set) return seterr(ACL_ERROR_REPEAT_SUBSCRIBE, __func__, "stream %u already subscribed", s->id);
    if (g_subs.size() >= 1024 && !g_subs.count(threadId))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "1024 report threads already registered");
    auto& sub = g_subs[threadId];
    if (!sub) sub = std::make_shared<Subscriber>();
    sub->nstreams++;
    s->subscriber_set = 1;
    s->subscriber = threadId;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    RESOLVE_STREAM(s, stream);
    std::lock_guard<std::mutex> g(g_cb_m);
    if (!s->subscriber_set || s->subscriber != threadId)
        return seterr(ACL_ERROR_STREAM_NOT_SUBSCRIBE, __func__, "stream %u is not subscribed by thread %llu", s->id,
                      (unsigned long long)threadId);
    s->subscriber_set = 0;
    auto it = g_subs.find(threadId);
    if (it != g_subs.end() && --it->second->nstreams <= 0) {
        it->second->word.fetch_add(1);
        futex_wake(&it->second->word, INT_MAX, false);
        g_subs.erase(it);
    }
    return ACL_SUCCESS;
}

EMU_API aclError aclrtLaunchCallback(aclrtCallback fn, void* userData, aclrtCallbackBlockType blockType,
                                     aclrtStream stream) {
    if (int r = check_init(__func__)) return r;
    if (!fn) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "fn is NULL");
    if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "blockType %d is not ACL_CALLBACK_NO_BLOCK/BLOCK", (int)blockType);
    RESOLVE_STREAM(s, stream);
    uint64_t tid;
    {
        std::lock_guard<std::mutex> g(g_cb_m);
        if (!s->subscriber_set)
            return seterr(ACL_ERROR_RT_STREAM_NO_CB_REG, __func__,
                          "stream %u has no thread subscribed for callbacks (call aclrtSubscribeReport)", s->id);
        tid = s->subscriber;
    }
    auto item = std::make_shared<CbItem>();
    item->fn = fn;
    item->data = userData;
    item->block = blockType == ACL_CALLBACK_BLOCK;
    return stream_enqueue(s, std::make_unique<CallbackTask>(item, tid));
}

EMU_API aclError aclrtProcessReport(int32_t timeout) {
    if (int r = check_init(__func__)) return r;
    if (timeout == 0 || timeout < -1)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "timeout %d ms must be -1 or positive", timeout);
    uint64_t tid = (uint64_t)pthread_self();
    auto sub = find_sub(tid);
    if (!sub)
        return seterr(ACL_ERROR_RT_THREAD_SUBSCRIBE, __func__,
                      "thread %llu is not subscribed to any stream (call aclrtSubscribeReport)", (unsigned long long)tid);
    uint64_t deadline = timeout > 0 ? now_ns() + (uint64_t)timeout * 1000000ull : 0;
    std::shared_ptr<CbItem> item;
    bool ok = wait_word(&sub->word, false, deadline, [&] {
        std::lock_guard<std::mutex> g(sub->m);
        if (sub->q.empty()) return false;
        item = sub->q.front();
        sub->q.pop_front();
        return true;
    }, 200000000ull);
    if (!ok) return seterr(ACL_ERROR_RT_REPORT_TIMEOUT, __func__, "no callback arrived within %d ms", timeout);
    item->fn(item->data);
    item->done.store(1);
    futex_wake(&item->done, INT_MAX, false);
    return ACL_SUCCESS;
}
