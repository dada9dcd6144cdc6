/* Streams (acl_runtime.md §3.3), their asynchronous copies and host functions. Events, ACL
 * notifies, host callbacks and the launch-timeout watchdog are in event.cc, notify.cc,
 * callback.cc and watchdog.cc.
 *
 * A stream is a FIFO of Tasks run by one worker thread. Asynchronous failures are kept in
 * err_code and returned (then cleared) by the next synchronising call; tasks that reach the
 * head while the stream is in error are dropped, not run. A kernel that outlives its launch
 * timeout is abandoned by the watchdog: the stream fails with 507017 and gets a fresh worker
 * (stream_replace_worker_locked), the stuck thread exits whenever the kernel returns. */
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
        /* A host thread runs the stream itself (stream_inline_begin): it hands over what it leaves. */
        if (s->inline_tid) return ACL_SUCCESS;
        if (!s->worker_running) start_worker_locked(s);
    }
    s->qword.fetch_add(1, std::memory_order_seq_cst);
    /* One wake-up per sleep is enough: later enqueues find worker_woken set. */
    if (s->worker_idle.load(std::memory_order_seq_cst) && !s->worker_woken.exchange(1, std::memory_order_seq_cst))
        futex_wake(&s->qword, 1, false);
    return ACL_SUCCESS;
}

void stream_task_done(Stream* s, Task* t) {
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

void stream_replace_worker_locked(Stream* s) {
    {
        std::lock_guard<std::mutex> g2(g_streams_m);
        g_abandoned[s]++;
    }
    start_worker_locked(s);
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
            return (!s->q.empty() && !s->inline_tid) || s->stop;
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
            if (s->q.empty() || s->inline_tid) {
                if (s->stop && s->q.empty()) {
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
            s->cur_since_ns = now_coarse_ns();
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
        stream_task_done(s, t.get());
        task_end(t);
    }
    worker_thread_fini();
    abandoned_exit(s);
}

/* ---------------------------------------------------------------- blocking calls on the caller's thread */

bool stream_inline_begin(Stream* s) {
    int tid = this_tid();
    std::lock_guard<std::mutex> g(s->m);
    if (s->stop || s->inline_tid || s->cur || !s->q.empty()) return false;
    s->inline_tid = tid;
    return true;
}

/* The worker's loop body for one task, run by the host thread that owns s (inline_tid). Returns
 * false when there is nothing (more) of the queue up to `last` (a submission count) to run. */
static bool inline_run_one(Stream* s, uint64_t last) {
    std::unique_ptr<Task> t;
    bool failed;
    {
        std::lock_guard<std::mutex> g(s->m);
        /* Tasks enqueued by other threads after ours are the worker's (they may wait for us). */
        if (s->q.empty() || s->completed.load(std::memory_order_relaxed) >= last) return false;
        t = std::move(s->q.front());
        s->q.pop_front();
        failed = s->err_code != 0;
        s->cur = t.get();
        s->cur_since_ns = now_coarse_ns();
    }
    int rc = 0;
    std::string msg;
    if (failed) t->drop();
    else rc = t->run(s, &msg);
    {
        std::lock_guard<std::mutex> g(s->m);
        s->cur = nullptr;
        if (rc) stream_note_error_locked(s, rc, msg);
    }
    stream_task_done(s, t.get());
    task_end(t);
    return true;
}

int stream_inline_end(Stream* s, bool run, const char* api) {
    if (run) {
        uint64_t last;
        {
            std::lock_guard<std::mutex> g(s->m);
            last = s->submitted;
        }
        HostSync hs(s->dev, s->id);
        worker_thread_attach();
        while (inline_run_one(s, last)) {
        }
    }
    bool left;
    {
        std::lock_guard<std::mutex> g(s->m);
        s->inline_tid = 0;
        left = !s->q.empty();
        if (left && !s->worker_running) start_worker_locked(s);
    }
    if (left) {
        s->qword.fetch_add(1, std::memory_order_seq_cst);
        if (s->worker_idle.load(std::memory_order_seq_cst) && !s->worker_woken.exchange(1, std::memory_order_seq_cst))
            futex_wake(&s->qword, 1, false);
    }
    return run ? stream_sync(s, -1, api) : ACL_SUCCESS;
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

/* ---------------------------------------------------------------- simple tasks */

namespace {
struct CopyTask : Task {
    void* dst;
    const void* src;
    size_t n;
    bool d2h = false;
    CopyTask(void* d, const void* s, size_t c) : dst(d), src(s), n(c) {}
    int run(Stream*, std::string* msg) override {
        memmove(dst, src, n);
        note_host_write(dst, n);
        if (d2h) *msg = mem_unwritten_finding("aclrtMemcpyAsync", src, n);
        return msg->empty() ? 0 : kCheckErrorCode;
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
    t->d2h = k == ACL_MEMCPY_DEVICE_TO_HOST;
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
    if (int r = memset_check(__func__, devPtr, maxCount, count)) return r;
    RESOLVE_STREAM(s, stream);
    return stream_enqueue(s, std::make_unique<SetTask>(devPtr, value, count));
}

EMU_API aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void* args) {
    if (int r = check_init(__func__)) return r;
    if (!fn) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "fn is NULL");
    RESOLVE_STREAM(s, stream);
    return stream_enqueue(s, std::make_unique<HostFuncTask>(fn, args));
}
