/* Device threads (ThreadHandle) and their scheduler.
 *
 * A device thread is a FIFO of HTasks. The tasks of all threads of a device are run by the
 * device's executor thread, and also by any stream worker of that device that is blocked on a
 * notify wait (a "helper": it runs them instead of sleeping, fewer hand-offs between OS threads).
 * A thread is claimed (atomic flag) by one runner at a time, so its order is kept; different
 * threads run concurrently. A Wait at the head of a queue parks the thread until its slot is set.
 *
 * Wake-ups (DevCtl, shared with peers): every slot record and submission bumps the doorbell.
 * Helpers sleep on it (counted in `sleepers`, woken only if > 0). The executor sleeps on its own
 * word and is woken only when work is queued (`queued`) and no helper is present (`helpers`):
 * a helper will run the work anyway, and a second runner would only compete for the core.
 * Tasks a kernel submits do not wake the executor when the stream's next task is a helper
 * (kernel_end_submit); the executor's periodic poll bounds every deferred wake-up. */
#include "acl/hooks.h"
#include "base/reduce.h"
#include "hcomm/hooks.h"
#include "net/transport.h"

#include <climits>
#include <cstring>
#include <sched.h>
#include <unistd.h>
#include <set>

namespace emu {

HcommHooks hcomm_hooks;

namespace {
std::mutex g_reg_m;
std::unordered_set<ThreadView*> g_views;
std::map<std::pair<HThread*, int>, ThreadView*> g_view_cache;
std::unordered_set<Channel*> g_channels;
/* Bumped (under g_reg_m) whenever a view or channel is removed: a thread's cache of the handles it
 * validated (every Hcomm call validates its thread and channel) is good while it reads the same
 * number. */
std::atomic<uint64_t> g_reg_gen{1};
struct HandleCache {
    uint64_t gen = 0;
    uintptr_t h[8] = {};
    void* p[8] = {};
    unsigned next = 0;
    void* find(uintptr_t key, uint64_t g) {
        if (gen != g) {
            gen = g;
            for (auto& x : h) x = 0;
            return nullptr;
        }
        for (unsigned i = 0; i < 8; i++)
            if (h[i] == key) return p[i];
        return nullptr;
    }
    void put(uintptr_t key, void* v) {
        h[next] = key;
        p[next] = v;
        next = (next + 1) % 8;
    }
};
thread_local HandleCache tl_views, tl_chans;
}  // namespace

/* ---------------------------------------------------------------- naming */

uint32_t thread_code(const HThread* t) {
    if (!t) return 0xfff;
    if (t->stream_bound) return kStreamThread | (t->stream ? (t->stream->id & 0x7ff) : 0);
    return t->no & 0x7ff;
}

std::string thread_name(uint32_t code) {
    if (code == 0xfff) return "host stream";
    if (code & kStreamThread) return strprintf("stream thread s%u", code & 0x7ff);
    return strprintf("thread t%u", code);
}

/* ---------------------------------------------------------------- registries */

HThread* hthread_create(Device* dev, Comm* comm, uint32_t nslots, bool stream_bound, Stream* s, int engine,
                        std::string* err) {
    uint32_t base = 0;
    if (!slots_alloc(dev, nslots, &base, err)) return nullptr;
    HThread* t = new HThread();
    t->dev = dev;
    t->comm = comm;
    t->nslots = nslots;
    t->slot_base = base;
    t->stream_bound = stream_bound;
    t->stream = s;
    t->engine = engine;
    std::lock_guard<std::mutex> g(dev->sched_m);
    t->no = (uint32_t)dev->hthreads.size();
    dev->hthreads.push_back(t);
    return t;
}

void hthread_destroy(HThread* t) {
    {
        std::lock_guard<std::mutex> g(g_reg_m);
        for (auto it = g_view_cache.begin(); it != g_view_cache.end();) {
            if (it->first.first == t) {
                /* Handles are validated against g_views, so a stale handle is rejected, never read. */
                g_reg_gen.fetch_add(1, std::memory_order_release);
                g_views.erase(it->second);
                delete it->second;
                it = g_view_cache.erase(it);
            } else {
                ++it;
            }
        }
    }
    Device* d = t->dev;
    {
        std::lock_guard<std::mutex> g(d->sched_m);
        for (size_t i = 0; i < d->hthreads.size(); i++)
            if (d->hthreads[i] == t) {
                d->hthreads.erase(d->hthreads.begin() + (long)i);
                break;
            }
    }
    /* Wait for a runner that may still hold it. */
    while (t->claimed.exchange(true)) std::this_thread::yield();
    {
        std::lock_guard<std::mutex> g(t->qm);
        if (!t->stream_bound && !t->q.empty()) {
            d->ctl->queued.fetch_sub((uint32_t)t->q.size(), std::memory_order_seq_cst);
            t->q.clear();
            t->qlen.store(0);
        }
    }
    slots_free(d, t->slot_base, t->nslots);
    t->magic = 0;
    /* Views were freed above. The thread object itself is retired, not freed: a scheduling pass
     * that took its snapshot of hthreads before the removal (sched_pass, sched_describe) may still
     * look at it (an empty queue, so it does nothing), and a stream task may still refer to a
     * stream-bound one. A few hundred bytes per destroyed communicator thread, kept reachable. */
    std::lock_guard<std::mutex> g(d->sched_m);
    d->retired_hthreads.push_back(t);
}

ThreadView* thread_view(HThread* t, Engine e, int comm_engine) {
    std::lock_guard<std::mutex> g(g_reg_m);
    auto key = std::make_pair(t, (int)e * 100 + comm_engine);
    auto it = g_view_cache.find(key);
    if (it != g_view_cache.end()) return it->second;
    ThreadView* v = new ThreadView();
    v->t = t;
    v->engine = e;
    v->comm_engine = comm_engine;
    g_view_cache[key] = v;
    g_views.insert(v);
    return v;
}

ThreadView* view_from_handle(ThreadHandle h) {
    ThreadView* v = reinterpret_cast<ThreadView*>((uintptr_t)h);
    uint64_t gen = g_reg_gen.load(std::memory_order_acquire);
    if (h && tl_views.find((uintptr_t)h, gen) == v) return v;
    std::lock_guard<std::mutex> g(g_reg_m);
    if (!g_views.count(v)) return nullptr;
    if (g_reg_gen.load(std::memory_order_relaxed) == gen) tl_views.put((uintptr_t)h, v);
    return v;
}

void channel_register(Channel* c) {
    std::lock_guard<std::mutex> g(g_reg_m);
    g_channels.insert(c);
}

void channel_unregister(Channel* c) {
    std::lock_guard<std::mutex> g(g_reg_m);
    g_reg_gen.fetch_add(1, std::memory_order_release);
    g_channels.erase(c);
}

Channel* channel_from_handle(ChannelHandle h) {
    Channel* c = reinterpret_cast<Channel*>((uintptr_t)h);
    uint64_t gen = g_reg_gen.load(std::memory_order_acquire);
    if (h && tl_chans.find((uintptr_t)h, gen) == c) return c;
    std::lock_guard<std::mutex> g(g_reg_m);
    if (!g_channels.count(c)) return nullptr;
    if (g_reg_gen.load(std::memory_order_relaxed) == gen) tl_chans.put((uintptr_t)h, c);
    return c;
}

/* ---------------------------------------------------------------- executing tasks */

static std::string slot_text(const HTask& t) {
    switch (t.desc.kind) {
        case 1: return strprintf("channel notify slot %u from rank %u", t.desc.index, (unsigned)t.desc.peer);
        case 2: return strprintf("ACL notify id %u", t.desc.index);
        default: return strprintf("thread notify slot %u of device %s", t.desc.index, thread_name(t.desc.thread_no).c_str());
    }
}

static uint64_t aload(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static void astore(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* The wait of t failed because its communicator was aborted: the abort's kind decides the code. */
static int aborted(const HTask& t, std::string* msg, AbortKind* kind) {
    std::string why;
    if (!t.comm || !comm_aborted(t.comm, &why)) return 0;
    *msg = why;
    AbortKind k = AbortKind::Other;
    comm_abort_info(t.comm, &k, nullptr);
    *kind = k;
    return -2;
}

int htask_exec(HTask& t, HThread* self, std::string* msg, AbortKind* kind) {
    if (self && t.kseq != self->op_kseq && check_mode()) hooks::check_op_begin(t, self);
    switch (t.op) {
        case HOp::Copy:
        case HOp::Reduce:
            if (t.acc[0].rank >= 0 || t.acc[1].rank >= 0) {
                std::string f = hooks::check_accesses(t, self);
                if (!f.empty()) {
                    *msg = f;
                    *kind = AbortKind::Check;
                    return -4;
                }
            }
            if (t.link) return link_exec(t, self, msg, kind); /* a peer on the network */
            if (t.op == HOp::Copy && t.n <= 16 && cfg().copy_restore_us) { /* fault injection (tests) */
                uint8_t bytes[16];
                memcpy(bytes, t.src, t.n);
                memcpy(t.dst, bytes, t.n);
                usleep(cfg().copy_restore_us);
                memcpy(t.dst, bytes, t.n); /* the same bytes stored again, late */
            } else if (t.op == HOp::Copy) {
                memmove(t.dst, t.src, t.n);
            } else {
                reduce_inplace(t.dst, t.src, t.n, t.dtype, t.redop);
            }
            if (self && self->dev->watches.load(std::memory_order_relaxed)) /* the unwritten-output check */
                output_watch_write(self->dev, t.dst, t.op == HOp::Copy ? t.n : t.n * dtype_size(t.dtype));
            if (t.has_post_record) {
                std::string f = hooks::record_slot(t, self, t.post_ctl, t.post_slot, t.post_rank, t.chan_rec);
                if (!f.empty()) {
                    *msg = f;
                    *kind = AbortKind::Check;
                    return -4;
                }
            }
            return 1;
        case HOp::Record: {
            if (t.link) return link_exec(t, self, msg, kind);
            std::string f = hooks::record_slot(t, self, t.slot_ctl, t.slot, t.slot_rank, t.chan_rec);
            if (!f.empty()) {
                *msg = f;
                *kind = AbortKind::Check;
                return -4;
            }
            return 1;
        }
        case HOp::Nop:
            return 1;
        case HOp::Wait: {
            std::string finding;
            if (hooks::consume_slot(t, self, &finding)) {
                if (finding.empty()) return 1;
                *msg = finding;
                *kind = AbortKind::Check;
                return -4;
            }
            /* The first blocked attempt stamps the wait's start; later ones (a waiting runner polls)
             * only compare with its deadline, in seconds: the coarse clock will do. */
            uint64_t now;
            if (!aload(&t.wait_start_ns)) {
                now = now_ns();
                astore(&t.wait_start_ns, now);
                if (t.timeout_s) astore(&t.deadline_ns, now + (uint64_t)t.timeout_s * 1000000000ull);
            } else {
                now = now_coarse_ns();
            }
            if (int r = aborted(t, msg, kind)) return r;
            if (t.comm && t.peer_rank >= 0 && comm_peer_dead(t.comm, t.peer_rank)) {
                *msg = strprintf("rank %d: %s: peer rank %d died while this device thread waited for %s%s",
                                 comm_rank(t.comm), t.api, t.peer_rank, slot_text(t).c_str(),
                                 comm_peer_where(t.comm, t.peer_rank).c_str());
                *kind = AbortKind::PeerDead;
                return -3;
            }
            uint64_t dl = aload(&t.deadline_ns);
            if (dl && now >= dl) {
                std::string head = strprintf("rank %d: %s timed out after %u s on device %s waiting for %s (op tag '%s')",
                                             t.comm ? comm_rank(t.comm) : -1, t.api, t.timeout_s,
                                             thread_name(thread_code(self)).c_str(), slot_text(t).c_str(),
                                             t.tag ? t.tag : "");
                *msg = t.comm ? hooks::wait_report(t.comm, t, self, head.c_str()) : head;
                *kind = AbortKind::Timeout;
                return -1;
            }
            return 0;
        }
    }
    return 1;
}

/* Drops what is left of t's queue (a task failed or the communicator was aborted). */
static void drop_queue(HThread* t) {
    std::lock_guard<std::mutex> g(t->qm);
    t->dev->ctl->queued.fetch_sub((uint32_t)t->q.size(), std::memory_order_seq_cst);
    t->q.clear();
    t->qlen.store(0);
}

/* Runs thread t until its queue is empty or its head waits. Returns true on progress. */
static bool run_thread(HThread* t) {
    if (t->qlen.load(std::memory_order_acquire) == 0) return false;
    if (t->claimed.exchange(true, std::memory_order_acquire)) return false;
    bool progress = false;
    for (;;) {
        HTask* h;
        {
            std::lock_guard<std::mutex> g(t->qm);
            if (t->q.empty()) break;
            h = &t->q.front(); /* deque references survive push_back by submitters */
        }
        std::string why;
        if (t->comm && comm_aborted(t->comm, &why)) {
            t->failed.store(true);
            drop_queue(t);
            progress = true;
            break;
        }
        std::string msg;
        AbortKind kind = AbortKind::Other;
        bool tr = hooks::trace_on();
        uint64_t t0 = tr ? now_ns() : 0;
        int r = htask_exec(*h, t, &msg, &kind);
        if (r == 0) break;
        if (tr && r == 1) {
            uint64_t ws = h->op == HOp::Wait ? __atomic_load_n(&h->wait_start_ns, __ATOMIC_RELAXED) : 0;
            hooks::trace_task(*h, t, ws ? ws : t0, now_ns());
        }
        if (r < 0) {
            t->failed.store(true);
            if (r != -2) { /* -2: aborted by someone else, who reported it */
                /* The first failure of the communicator is reported in full on stderr (C hosts
                 * that only check return codes see it there); later ones in one line. */
                bool first = !t->comm || comm_abort(t->comm, msg, kind);
                if (first) EMU_LOG(LOG_ERROR, "%s", msg.c_str());
                else EMU_LOG(LOG_WARN, "%s", msg.substr(0, msg.find('\n')).c_str());
                rank_log("device thread failed: %s", msg.c_str());
            }
            drop_queue(t);
            progress = true;
            break;
        }
        {
            std::lock_guard<std::mutex> g(t->qm);
            t->q.pop_front();
            /* counted with its removal: a snapshot that no longer sees the task sees it counted */
            t->executed.fetch_add(1, std::memory_order_relaxed);
            t->qlen.fetch_sub(1, std::memory_order_release);
            t->dev->ctl->queued.fetch_sub(1, std::memory_order_seq_cst);
        }
        progress = true;
    }
    t->claimed.store(false, std::memory_order_release);
    return progress;
}

bool sched_pass(Device* dev) {
    /* Nothing queued on any device thread: nothing to run (helpers call this in their wait loop). */
    if (dev->ctl->queued.load(std::memory_order_seq_cst) == 0) return false;
    static thread_local std::vector<HThread*> snap;
    {
        std::lock_guard<std::mutex> g(dev->sched_m);
        snap.assign(dev->hthreads.begin(), dev->hthreads.end());
    }
    bool progress = false;
    for (HThread* t : snap)
        if (!t->stream_bound && run_thread(t)) progress = true;
    return progress;
}

static void executor_main(Device* dev) {
    background_thread_init();
    DevCtl* c = dev->ctl;
    while (!dev->executor_stop.load()) {
        uint32_t db = c->doorbell.load(std::memory_order_seq_cst);
        if (sched_pass(dev)) continue;
        /* Parked waits and no helper: spin for the next ring (a peer's record usually follows
         * within a microsecond when it runs on another core), then sleep. With ranks on other hosts
         * the spin also progresses the network (net_poll): a far peer's record lands here instead of
         * waking the progress thread, which wakes us; and a spin in which the network moved data (a
         * transfer under way: over TCP, UCX moves it only when progressed) is followed by another
         * pass, after a yield (oversubscribed ranks get their turn), not by a sleep. The thread
         * sleeps once a whole spin went by with nothing moving (a 64 MiB all-reduce between two
         * hosts: ~100 ms every call instead of 100-300 ms with the transfer left to the progress
         * thread). */
        const bool net = net_in_use();
        bool moved = false;
        auto rung = [&] {
            if (net && net_poll()) moved = true;
            return c->doorbell.load(std::memory_order_acquire) != db || dev->executor_stop.load();
        };
        if (c->queued.load(std::memory_order_seq_cst) != 0 && c->helpers.load(std::memory_order_seq_cst) == 0) {
            if (spin_until(&c->doorbell, 0, rung, true)) continue;
            if (moved) {
                sched_yield();
                continue;
            }
        }
        /* Sleep on our own word until a ring wakes us (only done while no helper is present, see
         * doorbell_ring) or the poll interval passes, so parked waits notice timeouts, dead peers
         * and aborts, and tasks whose wake-up was deferred (hthread_submit) never wait long.
         * exec_sleeping is raised before the doorbell is read again: a ring either sees it and
         * wakes us, or we see its doorbell bump and run another pass. */
        uint32_t ew = c->exec_word.load(std::memory_order_seq_cst);
        c->exec_sleeping.store(1, std::memory_order_seq_cst);
        /* Nothing queued: nothing to watch, so an idle rank wakes up only kExecIdlePollNs apart. */
        int64_t poll = c->queued.load(std::memory_order_seq_cst) ? (int64_t)kExecPollNs : (int64_t)kExecIdlePollNs;
        if (c->doorbell.load(std::memory_order_seq_cst) == db && !dev->executor_stop.load())
            futex_wait(&c->exec_word, ew, poll, true);
        c->exec_sleeping.store(0, std::memory_order_seq_cst);
    }
}

void sched_start(Device* dev) {
    std::lock_guard<std::mutex> g(dev->sched_m);
    if (dev->executor_started) return;
    dev->executor_started = true;
    dev->executor_stop.store(false);
    dev->executor = std::thread(executor_main, dev);
}

void sched_stop(Device* dev) {
    std::thread t;
    {
        std::lock_guard<std::mutex> g(dev->sched_m);
        if (!dev->executor_started) return;
        dev->executor_started = false;
        dev->executor_stop.store(true);
        t = std::move(dev->executor);
    }
    doorbell_ring(dev->ctl);
    exec_wake(dev->ctl);
    if (t.joinable()) t.join();
}

void hthread_submit(HThread* t, std::vector<HTask>&& tasks) {
    if (tasks.empty()) return;
    if (t->stream_bound) {
        stream_enqueue(t->stream, make_htask_stream_task(t, std::move(tasks)));
        return;
    }
    size_t n = tasks.size();
    {
        std::lock_guard<std::mutex> g(t->qm);
        for (auto& h : tasks) t->q.push_back(std::move(h));
        t->qlen.fetch_add((uint32_t)n, std::memory_order_release);
        t->dev->ctl->queued.fetch_add((uint32_t)n, std::memory_order_seq_cst);
    }
    sched_start(t->dev);
    KernelCtx& k = kctx();
    if (k.active && k.dev == t->dev) {
        /* Submitted by a kernel on a stream worker: the stream's next task is usually the host
         * handshake wait, whose worker then runs these tasks itself. Waking the executor now
         * would only add a thread competing for the core; kernel_end_submit decides once the
         * kernel has returned (and the executor's poll bounds the delay if it never does). */
        doorbell_ring(t->dev->ctl, false);
        k.deferred_exec_wake = true;
        return;
    }
    doorbell_ring(t->dev->ctl);
}

void kernel_end_submit(Stream* s, bool helper_follows) {
    KernelCtx& k = kctx();
    if (!k.deferred_exec_wake) return;
    k.deferred_exec_wake = false;
    if (helper_follows) return;
    DevCtl* c = s->dev->ctl;
    if (c->exec_sleeping.load(std::memory_order_seq_cst) && c->helpers.load(std::memory_order_seq_cst) == 0 &&
        c->queued.load(std::memory_order_seq_cst) != 0)
        exec_wake(c);
}

void kernel_batch_reopened() {
    KernelCtx& k = kctx();
    if (!k.active || !k.deferred_exec_wake || !k.dev) return;
    /* The kernel goes on after submitting a batch (e.g. it waits for those tasks to combine data in
     * its own code): deferring the executor's wake-up to its return would stall them a poll interval. */
    k.deferred_exec_wake = false;
    DevCtl* c = k.dev->ctl;
    if (c->helpers.load(std::memory_order_seq_cst) == 0 && c->queued.load(std::memory_order_seq_cst) != 0) exec_wake(c);
}

void sched_abort_comm(Comm* c) {
    Device* d = comm_device(c);
    if (!d) return;
    std::string why;
    comm_aborted(c, &why);
    {
        std::lock_guard<std::mutex> g(d->m);
        d->abort_reason = why;
        d->abort_code = comm_abort_code(c);
    }
    d->abort_epoch.fetch_add(1);
    doorbell_ring(d->ctl);
}

std::string sched_describe(Device* dev, Comm* c) {
    std::string out;
    std::vector<HThread*> ts;
    {
        std::lock_guard<std::mutex> g(dev->sched_m);
        ts = dev->hthreads;
    }
    uint64_t now = now_ns();
    for (HThread* t : ts) {
        if (t->stream_bound || (c && t->comm != c)) continue;
        std::lock_guard<std::mutex> g(t->qm);
        if (t->q.empty()) continue;
        const HTask& h = t->q.front();
        std::string line;
        if (h.op == HOp::Wait) {
            uint64_t st = aload(&h.wait_start_ns);
            line = strprintf("device %s%s waits for %s (%s, %.1f s so far, timeout %s)", thread_name(thread_code(t)).c_str(),
                             t->comm ? strprintf(" of rank %d", comm_rank(t->comm)).c_str() : "", slot_text(h).c_str(),
                             h.api, st ? (double)(now - st) / 1e9 : 0.0,
                             h.timeout_s ? strprintf("%u s", h.timeout_s).c_str() : "none");
        } else {
            line = strprintf("device %s runs %s", thread_name(thread_code(t)).c_str(), h.api);
        }
        if (t->q.size() > 1) line += strprintf(", %zu more task(s) queued", t->q.size() - 1);
        out += (out.empty() ? "" : "; ") + line;
    }
    return out;
}

/* ---------------------------------------------------------------- waits on stream workers */

static int stream_wait_slot_loop(Device* dev, uint32_t slot, uint64_t deadline_ns, Comm* comm, std::string* msg,
                                 const HTask* h, HThread* self);

int stream_wait_slot(Device* dev, uint32_t slot, uint64_t deadline_ns, Comm* comm, std::string* msg, const HTask* h,
                     HThread* self) {
    DevCtl* c = dev->ctl;
    c->helpers.fetch_add(1, std::memory_order_seq_cst);
    int r = stream_wait_slot_loop(dev, slot, deadline_ns, comm, msg, h, self);
    c->helpers.fetch_sub(1, std::memory_order_seq_cst);
    /* Rings seen while we were here did not wake the executor: hand it what is left. */
    if (c->exec_sleeping.load(std::memory_order_seq_cst) && c->helpers.load(std::memory_order_seq_cst) == 0 &&
        c->queued.load(std::memory_order_seq_cst) != 0)
        exec_wake(c);
    return r;
}

/* One attempt to take the flag: through the checker when the wait is an Hcomm task. */
static bool take(DevCtl* c, uint32_t slot, const HTask* h, HThread* self, std::string* finding) {
    if (h) return hooks::consume_slot(*h, self, finding);
    return slot_consume(c, slot);
}

static int stream_wait_slot_loop(Device* dev, uint32_t slot, uint64_t deadline_ns, Comm* comm, std::string* msg,
                                 const HTask* h, HThread* self) {
    DevCtl* c = dev->ctl;
    uint32_t epoch = dev->abort_epoch.load();
    /* Spin (and yield) while the last progress is recent; a wait that has seen none for longer than
     * that sleeps at once between its polls and rings (a rank waiting for a late peer uses no CPU).
     * Progress (device tasks run here) restarts the clock: this loop may run a long operation. */
    uint64_t progress_ns = now_ns();
    const uint64_t young_ns = 2 * kYieldPhaseNs + cfg().spin_ns;
    for (;;) {
        /* Sampled before looking: a record or submission after this point changes it, so the
         * wait below cannot miss work (the executor is not woken while we are here). */
        uint32_t v = c->doorbell.load(std::memory_order_seq_cst);
        if (take(c, slot, h, self, msg)) return 1;
        if (sched_pass(dev)) { /* help the device threads instead of sleeping */
            progress_ns = now_ns();
            continue;
        }
        std::string why;
        if (comm && comm_aborted(comm, &why)) {
            *msg = "communicator aborted: " + why;
            return -1;
        }
        if (dev->abort_epoch.load() != epoch) {
            std::lock_guard<std::mutex> g(dev->m);
            *msg = "a communicator on this device failed while the stream waited: " + dev->abort_reason;
            return -1;
        }
        if (deadline_ns && now_ns() >= deadline_ns) return 0;
        uint64_t poll_deadline = now_ns() + 100000000ull;
        if (deadline_ns && deadline_ns < poll_deadline) poll_deadline = deadline_ns;
        /* As in executor_main: the spin progresses the network, and data it moved counts as progress
         * (another spin after a yield, instead of a sleep). */
        const bool net = net_in_use();
        bool moved = false;
        auto rung = [&] {
            if (net && net_poll()) moved = true;
            return c->doorbell.load(std::memory_order_acquire) != v;
        };
        bool young = now_ns() - progress_ns < young_ns;
        if (net && young) {
            if (!spin_until(&c->doorbell, poll_deadline, rung, true) && moved) {
                progress_ns = now_ns();
                sched_yield();
                continue;
            }
            young = false; /* spun already */
        }
        wait_word(&c->doorbell, true, poll_deadline, rung, 100000000ull, &c->sleepers, young);
    }
}

/* The code of a stream wait that failed because a communicator (comm, else any on the device) was
 * aborted. */
static int aborted_code(Device* dev, Comm* comm, uint64_t started_ns) {
    if (comm && comm_aborted(comm, nullptr)) return comm_abort_code(comm, started_ns);
    std::lock_guard<std::mutex> g(dev->m);
    return dev->abort_code ? dev->abort_code : ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
}

/* ---------------------------------------------------------------- CPU_TS threads on streams */

namespace {
struct HTaskStreamTask : Task {
    HThread* t;
    /* The tasks: `one` when a single task was submitted (a host thread's eager record or wait, the
     * usual case: no vector to allocate per call), else `many`. */
    HTask one;
    std::vector<HTask> many;
    bool single = false;
    std::atomic<int> cur{-1};           /* index of the task being run (hang reports) */
    std::atomic<uint64_t> since{0};
    void set(HThread* th, std::vector<HTask>&& v) {
        t = th;
        many = std::move(v);
        init();
    }
    void set(HThread* th, HTask&& h) {
        t = th;
        one = std::move(h);
        single = true;
        init();
    }
    void init() {
        for (size_t i = 0; i < size(); i++)
            if (at(i).op == HOp::Wait) helps = true;
    }
    void reuse() { /* as made (set() follows) */
        many.clear();
        single = false;
        cur.store(-1, std::memory_order_relaxed);
        since.store(0, std::memory_order_relaxed);
        done_word = nullptr;
        helps = false;
    }
    bool recycle() override;
    size_t size() const { return single ? 1 : many.size(); }
    HTask& at(size_t i) { return single ? one : many[i]; }
    const HTask& at(size_t i) const { return single ? one : many[i]; }
    int run(Stream* s, std::string* msg) override {
        for (size_t i = 0; i < size(); i++) {
            HTask& h = at(i);
            cur.store((int)i, std::memory_order_relaxed);
            if (h.op != HOp::Wait) {
                std::string m;
                AbortKind kind = AbortKind::Other;
                uint64_t t0 = hooks::trace_on() ? now_ns() : 0;
                if (htask_exec(h, t, &m, &kind) < 0) {
                    *msg = strprintf("rank %d: %s on stream %u failed: %s", h.comm ? comm_rank(h.comm) : -1, h.api,
                                     s->id, m.c_str());
                    if (h.comm && kind == AbortKind::Check) comm_abort(h.comm, m, kind);
                    return abort_code(kind, true);
                }
                t->executed.fetch_add(1, std::memory_order_relaxed);
                if (t0) hooks::trace_task(h, t, t0, now_ns());
                continue;
            }
            uint64_t now = now_ns();
            since.store(now, std::memory_order_relaxed);
            uint64_t deadline = h.timeout_s ? now + (uint64_t)h.timeout_s * 1000000000ull : 0;
            std::string why;
            int r = stream_wait_slot(s->dev, h.slot, deadline, h.comm, &why, &h, t);
            since.store(0, std::memory_order_relaxed);
            if (r == 1 && why.empty()) {
                t->executed.fetch_add(1, std::memory_order_relaxed);
                if (hooks::trace_on()) hooks::trace_task(h, t, now, now_ns());
                continue;
            }
            if (r == 1) { /* a checker finding on the consumed notify */
                *msg = why;
                if (h.comm) comm_abort(h.comm, why, AbortKind::Check);
                return kCheckErrorCode;
            }
            if (r == 0) {
                std::string head = strprintf("rank %d: %s on stream %u timed out after %u s waiting for %s (op tag '%s')",
                                             h.comm ? comm_rank(h.comm) : -1, h.api, s->id, h.timeout_s,
                                             slot_text(h).c_str(), h.tag ? h.tag : "");
                *msg = h.comm ? hooks::wait_report(h.comm, h, t, head.c_str()) : head;
                if (h.comm) comm_abort(h.comm, *msg, AbortKind::Timeout);
                return ACL_ERROR_RT_TASK_TIMEOUT;
            }
            *msg = strprintf("rank %d: %s on stream %u failed: %s", h.comm ? comm_rank(h.comm) : -1, h.api, s->id,
                             why.c_str());
            return aborted_code(s->dev, h.comm, now);
        }
        return 0;
    }
    const char* name() const override { return "Hcomm task on a CPU_TS thread"; }
    void describe(TaskDiag* d) const override {
        d->comm = t->comm;
        int i = cur.load(std::memory_order_relaxed);
        size_t from = i < 0 ? 0 : (size_t)i;
        if (i >= 0 && at(from).op == HOp::Wait) {
            d->kind = TaskDiag::Wait;
            d->wait = &at(from);
            d->since_ns = since.load(std::memory_order_relaxed);
            if (!d->brief) d->what = strprintf("%s (%s)", at(from).api, thread_name(thread_code(t)).c_str());
            from++;
        } else if (!d->brief) {
            d->what = strprintf("Hcomm tasks of %s", thread_name(thread_code(t)).c_str());
        }
        for (size_t k = from; k < size(); k++) {
            const HTask& h = at(k);
            if (h.op == HOp::Record) d->records.emplace_back(h.slot_ctl, h.slot);
            if (h.has_post_record) d->records.emplace_back(h.post_ctl, h.post_slot);
        }
    }
};
}  // namespace

namespace {
Recycler<HTaskStreamTask>& g_stream_htasks = *new Recycler<HTaskStreamTask>(); /* leaky: workers may outlive exit */
}
bool HTaskStreamTask::recycle() { return many.capacity() <= 64 && g_stream_htasks.give(this); }

std::unique_ptr<Task> make_htask_stream_task(HThread* t, std::vector<HTask>&& tasks) {
    auto task = g_stream_htasks.take();
    task->set(t, std::move(tasks));
    return task;
}

void hthread_submit_one(HThread* t, HTask&& task) {
    if (t->stream_bound) {
        auto st = g_stream_htasks.take();
        st->set(t, std::move(task));
        stream_enqueue(t->stream, std::move(st));
        return;
    }
    std::vector<HTask> v;
    v.push_back(std::move(task));
    hthread_submit(t, std::move(v));
}

/* ---------------------------------------------------------------- the runtime's hooks */

namespace {
struct SchedHooks {
    SchedHooks() {
        acl_hooks.wait_slot = [](Device* dev, uint32_t slot, uint64_t deadline_ns, std::string* msg) {
            return stream_wait_slot(dev, slot, deadline_ns, nullptr, msg, nullptr, nullptr);
        };
        acl_hooks.describe_device = [](Device* dev) { return sched_describe(dev, nullptr); };
        acl_hooks.device_reset = sched_stop;
        acl_hooks.kernel_submitted = kernel_end_submit;
    }
} g_sched_hooks;
}  // namespace

}  // namespace emu
