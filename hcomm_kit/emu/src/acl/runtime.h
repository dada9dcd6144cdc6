/*
 * hcomm-kit CPU emulator, ACL runtime layer: contexts, streams and their tasks, kernel launches
 * (the kernel context of an AICPU worker, the launch-timeout watchdog), memory checks.
 */
#ifndef HCOMM_KIT_EMU_ACL_RUNTIME_H
#define HCOMM_KIT_EMU_ACL_RUNTIME_H

#include "acl/device.h"

namespace emu {

/* ------------------------------------------------------------------ contexts and streams */

constexpr uint32_t kCtxMagic = 0x43545831, kStreamMagic = 0x5354524d, kEventMagic = 0x45564e54,
                   kNotifyMagic = 0x4e4f5446, kBinMagic = 0x42494e31, kFuncMagic = 0x46554e43,
                   kArgsMagic = 0x41524753;

struct Context {
    uint32_t magic = kCtxMagic;
    Device* dev = nullptr;
    bool is_default = false;
    Stream* default_stream = nullptr;
    std::vector<Stream*> streams; /* explicit streams created under this context */
};

/* Calling thread's current context (after aclrtSetDevice / aclrtSetCurrentContext). */
Context* current_ctx();
void set_current_ctx(Context* c);
/* Resolves NULL to the current context's default stream; validates handles. */
Stream* stream_resolve(aclrtStream s, int* err_code, const char* api);
bool stream_valid(Stream* s);
int check_init(const char* api); /* 0 or ACL_ERROR_UNINITIALIZE */

struct HTask;

/* What a stream task means for hang analysis (Task::describe, called under the stream's lock). */
struct TaskDiag {
    enum Kind : uint8_t { Other, Kernel, Wait, Barrier, Record } kind = Other;
    /* Set by the caller: only kind, wait, comm and records are wanted, not `what` (a snapshot
     * walking a stream's whole queue: thousands of tasks when calls are enqueued back to back). */
    bool brief = false;
    std::string what;                 /* "kernel HcclFoo", "aclrtWaitAndResetNotify", ... */
    const HTask* wait = nullptr;      /* Wait: the wait (valid while the lock is held) */
    uint64_t since_ns = 0;            /* Wait: when the task started waiting (0: not started) */
    Comm* comm = nullptr;             /* the communicator it works for (Barrier, Hcomm stream tasks), if known */
    uint32_t barrier_seq = 0;         /* Barrier: this rank's barrier number */
    std::vector<std::pair<const DevCtl*, uint32_t>> records; /* notify slots the task will set */
};

/* A kernel launch in flight, shared by its stream worker and the watchdog: a kernel that overruns
 * its launch timeout is interrupted (a signal to its worker; the crash guard leaves the entry when
 * the worker is in the kernel's own code), else the device is marked lost (launch.cc, kernel_guard.cc, watchdog.cc). */
struct KernelRun {
    std::atomic<bool> cancel{false};   /* the watchdog asks the worker to leave the kernel */
    std::atomic<bool> done{false};     /* the entry returned, crashed or was left */
    int tid = 0;                       /* the worker's thread id (gettid) */
    std::vector<std::pair<uintptr_t, uintptr_t>> code; /* executable ranges of the kernel library */
    std::string kernel;
    uint32_t stream_id = 0;
    Device* dev = nullptr;
    uint64_t timeout_ns = 0;
    /* Progress of the entry, for hang reports: when it started and when it last issued an Hcomm
     * task (0: none yet). */
    std::atomic<uint64_t> start_ns{0};
    std::atomic<uint64_t> last_task_ns{0};
    /* Position sampling (kernel_sample_where): the sampler bumps sample_req and signals the
     * worker (kCancelSig); the handler stores the interrupted PC and sets sample_ack = sample_req. */
    std::atomic<uint32_t> sample_req{0};
    std::atomic<uint32_t> sample_ack{0};
    std::atomic<uintptr_t> sample_pc{0};
    std::mutex sample_m;     /* one sampler at a time; guards the two below */
    uint64_t sampled_ns = 0; /* when `where` was last taken */
    std::string where;       /* "exec_op.cc:42 in ops_x::ExecOp(...)" or "in a system call (...)" */
    bool on_caller = false;  /* run by a host thread (stream_inline_end), not by the stream's worker */
    /* As new for the next launch (the owner holds the only reference), storage kept. Every field
     * above is set here: keep the two in step. */
    void reset() {
        cancel.store(false);
        done.store(false);
        tid = 0;
        code.clear();
        kernel.clear();
        stream_id = 0;
        dev = nullptr;
        timeout_ns = 0;
        start_ns.store(0);
        last_task_ns.store(0);
        sample_req.store(0);
        sample_ack.store(0);
        sample_pc.store(0);
        sampled_ns = 0;
        where.clear();
        on_caller = false;
    }
};
/* Where the kernel of r is now (its worker's PC: "file:line in function (lib+off)"), sampled at
 * most every min_interval_ns; "" when it cannot be told. Never blocks for more than ~50 ms. */
std::string kernel_sample_where(KernelRun& r, uint64_t min_interval_ns);

class Task {
public:
    virtual ~Task() = default;
    /* Runs on the stream worker. Returns ACL_SUCCESS or an aclError; *msg explains failures. */
    virtual int run(Stream* s, std::string* msg) = 0;
    /* Called instead of run() when the stream is in an error state and the task is dropped. */
    virtual void drop() {}
    virtual const char* name() const = 0;
    /* Fills d for hang reports (under the stream's lock; run() may be in progress). */
    virtual void describe(TaskDiag* d) const {
        if (!d->brief) d->what = name();
    }
    std::atomic<uint32_t>* done_word = nullptr; /* set to 1 + woken when the task finishes (sync memcpy) */
    bool helps = false; /* run() waits on a notify of the stream's device, running its device threads meanwhile */
    /* A task that has run or was dropped, kept by its type for reuse (a Recycler): returns true and
     * owns itself from then on; false: the caller deletes it. */
    virtual bool recycle() { return false; }
};

/* Ends a task that has run or was dropped: kept for reuse by its type, else deleted. */
inline void task_end(std::unique_ptr<Task>& t) {
    if (t && t->recycle()) (void)t.release();
    t.reset();
}

/* Finished tasks of one type kept for the next ones (at most kKeep): a launch made on one thread and
 * finished on another (a stream's host and its worker) then allocates nothing in the steady state.
 * Freed on the other thread, every task missed glibc's per-thread caches: malloc and free took a
 * quarter of the host thread's time and a sixth of the worker's (perf, one rank, a deep queue). */
template <class T>
class Recycler {
public:
    static constexpr size_t kKeep = 64;
    /* A task as newly made (T::reuse() resets a kept one). */
    std::unique_ptr<T> take() {
        T* p = nullptr;
        {
            std::lock_guard<std::mutex> g(m_);
            if (!kept_.empty()) {
                p = kept_.back();
                kept_.pop_back();
            }
        }
        if (p) {
            p->reuse();
            return std::unique_ptr<T>(p);
        }
        return std::make_unique<T>();
    }
    /* Keeps t (true) unless kKeep are kept already. */
    bool give(T* t) {
        std::lock_guard<std::mutex> g(m_);
        if (kept_.size() >= kKeep) return false;
        kept_.push_back(t);
        return true;
    }

private:
    std::mutex m_;
    std::vector<T*> kept_;
};

struct Stream {
    uint32_t magic = kStreamMagic;
    Context* ctx = nullptr;
    Device* dev = nullptr;
    uint32_t flags = 0;
    uint32_t id = 0;
    std::mutex m;
    std::deque<std::unique_ptr<Task>> q;
    Task* cur = nullptr;                  /* under m: the task the worker runs now (hang reports) */
    uint64_t cur_since_ns = 0;            /* under m: when it started */
    uint64_t submitted = 0;               /* under m */
    std::atomic<uint64_t> completed{0};
    std::atomic<uint32_t> qword{0};       /* worker wake-up futex */
    std::atomic<uint32_t> cword{0};       /* completion futex */
    std::atomic<uint32_t> waiters{0};     /* host threads sleeping in sync */
    /* Smallest completion count a sleeping sync caller waits for: completions before it wake nobody. */
    std::atomic<uint64_t> wake_target{UINT64_MAX};
    std::atomic<uint32_t> worker_idle{0}; /* worker sleeping on qword */
    std::atomic<uint32_t> worker_woken{0}; /* a wake-up was sent since the worker last went to sleep */
    int err_code = 0;                     /* under m: first async error, reported by next sync */
    std::string err_msg;
    /* Under m, with err_code: set when an event synchronisation already reported this error (an
     * event record dropped because of it carries the flag), so the next stream sync does not
     * report it a second time. A fresh flag for every new error (stream_note_error). */
    std::shared_ptr<std::atomic<bool>> err_taken;
    bool stop = false;
    uint64_t worker_gen = 0;              /* bumped when a stuck worker is abandoned */
    bool worker_running = false;
    /* kernel currently running on the worker (for the watchdog) */
    uint64_t kernel_deadline_ns = 0;
    uint64_t kernel_timeout_ns = 0;
    uint64_t kernel_seq = 0;
    std::string kernel_name;
    std::shared_ptr<KernelRun> kernel_run;   /* the running kernel (under m) */
    std::vector<Comm*> kernel_comms;         /* communicators it works on (under m), told when it overruns */
    uint64_t timed_out_kseq = 0;             /* the launch the watchdog abandoned last (under m) */
    int subscriber_set = 0;
    uint64_t subscriber = 0;
    /* Under m: the thread id of a host thread that runs the stream's tasks itself (stream_inline_*;
     * 0: none). Meanwhile the worker leaves the queue alone and enqueues do not wake it. */
    int inline_tid = 0;
    /* Under m: the completion count the hang monitor's last snapshot saw (diag/snapshot.cc scans a
     * long queue in full only when the stream made no progress since). */
    uint64_t diag_seen_completed = UINT64_MAX;
};

/* Enqueues a task (starting the worker if needed). Returns ACL_SUCCESS or an error code. */
int stream_enqueue(Stream* s, std::unique_ptr<Task> t);
/* A blocking call run on the caller's thread (HcommKitStreamCalls): stream_inline_begin claims an
 * idle stream (nothing queued or running) for the calling thread and returns true; the tasks
 * enqueued until stream_inline_end then wait for it instead of waking the worker. stream_inline_end
 * runs them (run = true) on the calling thread in order, as the worker would (crash guard, launch
 * timeout, errors), hands whatever is left to the worker and then synchronises like stream_sync;
 * with run = false it only hands the queue over (a call of the sequence failed). */
bool stream_inline_begin(Stream* s);
int stream_inline_end(Stream* s, bool run, const char* api);
/* Waits for every task submitted so far; timeout_ms < 0 = forever. Returns the stream's
 * first async error (and clears it), 507046 on timeout when timeout_code != 0. */
int stream_sync(Stream* s, int64_t timeout_ms, const char* api);
/* Under s->m: records the stream's first async error (later ones are ignored until it is reported). */
void stream_note_error_locked(Stream* s, int code, const std::string& msg);
Stream* stream_create(Context* ctx, uint32_t flags, int* err_code, const char* api);
void stream_destroy(Stream* s);
/* Fails the stream from inside a task (e.g. watchdog): sets err if none yet. */
void stream_set_error(Stream* s, int code, const std::string& msg);
/* A task of s finished (or was dropped; t = nullptr for a task already gone): wakes its waiters. */
void stream_task_done(Stream* s, Task* t);
/* Under s->m, with s->worker_gen bumped (the watchdog abandoned a kernel): the stuck worker counts
 * as abandoned (the last one to leave deletes a destroyed stream) and a fresh worker starts. */
void stream_replace_worker_locked(Stream* s);
/* In an API function: resolves stream handle h (NULL: the current default stream) into var, or
 * returns the error. */
#define RESOLVE_STREAM(var, h)                                 \
    int var##_code = 0;                                        \
    Stream* var = stream_resolve((h), &var##_code, __func__); \
    if (!var) return var##_code
/* Calls f for every live stream of device d (in id order); none is freed meanwhile. f locks s->m
 * itself if it reads the queue. */
void streams_visit(Device* d, const std::function<void(Stream*)>& f);
/* A host thread is blocked in a synchronising call on device d (stream id, 0 = event/device) for
 * the lifetime of this object: hang analysis treats a rank whose host waits as unable to enqueue. */
struct HostSync {
    Device* d;
    HostSync(Device* dev, uint32_t stream_id) : d(dev) {
        d->host_sync_stream.store(stream_id, std::memory_order_relaxed);
        d->host_sync.fetch_add(1, std::memory_order_relaxed);
    }
    ~HostSync() { d->host_sync.fetch_sub(1, std::memory_order_relaxed); }
    HostSync(const HostSync&) = delete;
    HostSync& operator=(const HostSync&) = delete;
};

/* Kernel execution context of the calling OS thread (an AICPU worker while it runs a kernel). */
struct BatchState {
    bool active = false;
    std::string tag;
    const char* itag = nullptr; /* tag interned at HcommBatchModeStart (stable pointer for HTask::tag) */
    /* tasks recorded per device thread, submitted in thread order at HcommBatchModeEnd */
    std::vector<std::pair<HThread*, std::vector<struct HTask>>> pending;
};
struct Channel;
struct KernelCtx {
    bool active = false; /* true while a kernel entry runs on this thread */
    Device* dev = nullptr;
    Stream* stream = nullptr;
    const char* kernel = nullptr;
    uint64_t kseq = 0;   /* process-wide launch number of the running kernel */
    KernelRun* run = nullptr; /* its launch (progress stamps) */
    /* The launch's operation name: the tag of the batch of its first Hcomm task (else the kernel
     * name), kept for the whole launch so that every task of one launch is one operation. */
    const char* optag = nullptr;
    uint32_t optag16 = 0;
    /* Operation instances of this launch: per (communicator, op tag) the instance number, and per
     * channel the use number (stamped on the tasks for the notify checker and hang reports). */
    struct OpUse {
        Comm* c;
        uint32_t tag16;
        uint32_t inst;
    };
    std::vector<OpUse> ops;
    struct ChanUse {
        Channel* ch;
        uint32_t use;
    };
    std::vector<ChanUse> chans;
    BatchState batch;
    std::vector<Comm*> acquired;
    std::string first_err; /* first data-plane error raised during this kernel */
    bool deferred_exec_wake = false; /* submitted to device threads without waking the executor */
    std::vector<Comm*> used; /* after the entry: the communicators it worked on (KernelTask::run) */
    /* Made ready for the next launch on this thread: every field as new, the vectors' and strings'
     * storage kept (a launch would otherwise allocate it again). Every field above is set here:
     * keep the two in step. */
    void reset() {
        active = false;
        dev = nullptr;
        stream = nullptr;
        kernel = nullptr;
        kseq = 0;
        run = nullptr;
        optag = nullptr;
        optag16 = 0;
        ops.clear();
        chans.clear();
        batch.active = false;
        batch.tag.clear();
        batch.itag = nullptr;
        batch.pending.clear();
        acquired.clear();
        first_err.clear();
        deferred_exec_wake = false;
        used.clear();
    }
};
KernelCtx& kctx();

/* A stream worker's crash guard (kernel_guard.cc): its alternate signal stack, set up when it starts
 * and freed when it ends. */
void worker_thread_init();
void worker_thread_fini();
/* A host thread about to run kernels itself (stream_inline_end): the crash guard's alternate signal
 * stack unless the thread has one (Python's faulthandler), freed when the thread ends. No
 * scheduling change. Cheap after the first call. */
void worker_thread_attach();
/* Sent by the watchdog to the worker of a kernel that overran its launch timeout. */
#define kCancelSig (SIGRTMAX - 3)
/* The running kernel works on communicator c (told if it overruns its launch timeout). */
void kernel_note_comm(KernelCtx& k, Comm* c);
/* Watchdog (watchdog.cc): enforces launch timeouts. */
void watchdog_arm(Stream* s, uint64_t deadline_ns, uint64_t seq);
void watchdog_disarm(Stream* s, uint64_t seq);

/* The host side of a custom-operator launch, as the built-ins' C API and the aclnn engine make it
 * (launch.cc): args = exactly `len` bytes of `param`, launched with the launch-timeout attribute
 * (seconds, at most 65535) on `s`. On failure returns the aclError and sets *step to what failed
 * ("preparing the arguments of" / "launching"), for the caller's message. */
int launch_with_timeout(aclrtFuncHandle fn, aclrtStream s, const void* param, size_t len, uint32_t timeout_s,
                        const char** step);

/* Memory checks shared by the synchronous and asynchronous copies and memsets (memory.cc). */
int memcpy_check(const char* api, void* dst, size_t destMax, const void* src, size_t count, int kind);
int memset_check(const char* api, void* devPtr, size_t maxCount, size_t count); /* count > 0 */
int check_side(const char* api, const char* what, const void* p, size_t n, int want_device, const char* kind);

/* "exec_op.cc:42 in ExecOp (libx.so+0x1a2b)" for an instruction address (addr2line on the kernel's
 * debug info, else the nearest symbol). call_site: pc is a return address (the line of the call is
 * wanted). Cached per address. */
std::string code_location(const void* pc, bool call_site = false);
/* Short form for reports: "exec_op.cc:42" (or "libx.so+0x1a2b"); "" when unknown. */
std::string code_line(const void* pc, bool call_site = true);

}  // namespace emu

#endif
