/*
 * hcomm-kit CPU emulator: internal declarations shared by every emulator source.
 *
 * Model (see ARCHITECTURE.md, "Emulator model"):
 *   - A Device owns a control block (DevCtl) in POSIX shared memory: a doorbell futex word and a
 *     pool of 32-bit notify slots. Every notify of the device (ACL notifies, device-thread slots,
 *     local ends of channels) is one slot, so peers in other processes can set it.
 *   - A Stream is a FIFO of Tasks run by one worker OS thread.
 *   - A device thread (ThreadHandle, AICPU_TS engine) is a FIFO of HTasks run by the device's
 *     scheduler (sched.cc). Waiters park and sleep on the device doorbell.
 *   - Waits spin adaptively (wait_word) and then sleep on a futex; wakers skip the wake-up
 *     system call while nobody sleeps. The emulator's own threads run as SCHED_BATCH so that a
 *     woken worker does not preempt the host thread in the middle of its enqueue calls.
 * Public API symbols get default visibility from the headers included below; everything
 * internal is hidden by -fvisibility=hidden.
 */
#ifndef HCOMM_KIT_EMU_H
#define HCOMM_KIT_EMU_H

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

/* CANN declares the communicator API weak; the emulator defines them as ordinary symbols. */
#define HCOMM_WEAK_SYMBOL
#pragma GCC visibility push(default)
#include "acl/acl.h"
#include "hccl/hccl_types.h"
#include "hccl/hccl_comm.h"
#include "hccl/hccl_res.h"
#include "hccl/hccl_channel.h"
#include "hccl/hccl_res_expt.h"
#include "hccl/hcomm_primitives.h"
#include "hccl/hccl_rank_graph.h"
#include "hccl/hccl_launch.h"
#include "hcomm_kit/emu_ext.h"
#pragma GCC visibility pop

/* Marks the definition of an exported C API function. */
#define EMU_API extern "C" __attribute__((visibility("default")))

namespace emu {

/* ------------------------------------------------------------------ errors and logging */

/* Records "api: message" as the calling thread's recent error (aclGetRecentErrMsg) and
 * returns code, so error paths read `return seterr(CODE, __func__, "...", ...);`.
 * Data-plane (kernel) errors are also logged to stderr because a kernel cannot read them. */
int seterr(int code, const char* api, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, from a preformatted message. */
int seterr_str(int code, const char* api, const std::string& msg);
/* The answer "not there" of a lookup that callers make to probe (HcclEngineCtxGet before
 * HcclEngineCtxCreate, as CANN's examples do): recorded for aclGetRecentErrMsg like seterr, but not
 * written to the rank log (HCOMM_KIT_LOG_DIR) as a failed call, nor counted as a runtime error. */
int setmiss(int code, const char* api, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* Last message recorded by this thread (without clearing it). */
std::string last_err();
void clear_err();
/* Symbolic name of an HCCL code (HcclGetErrorString). */
const char* hccl_code_name(int code);
/* Memory checks shared by the synchronous and asynchronous copies (acl_core.cc). */
int memcpy_check(const char* api, void* dst, size_t destMax, const void* src, size_t count, int kind);
int check_side(const char* api, const char* what, const void* p, size_t n, int want_device, const char* kind);

enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };
extern int g_log_level;
void logf(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#define EMU_LOG(lvl, ...)                                   \
    do {                                                    \
        if ((lvl) <= ::emu::g_log_level) ::emu::logf((lvl), __VA_ARGS__); \
    } while (0)

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ configuration */

enum class Soc { A2, A3, A950 };
struct Config {
    Soc soc = Soc::A2;
    std::string soc_name = "Ascend910B";
    int device_count = 8;
    uint64_t spin_ns = 20000;              /* HCOMM_KIT_SPIN_US */
    uint64_t hccl_buffsize = 200ull << 20; /* HCCL_BUFFSIZE, MB */
    uint32_t connect_timeout_s = 120;      /* HCCL_CONNECT_TIMEOUT */
    uint32_t default_kernel_timeout_s = 1836;
    int check = 1;                         /* HCOMM_KIT_CHECK: 0 off, 1 fail the operation, 2 warn only */
    std::string log_dir;                   /* HCOMM_KIT_LOG_DIR: per-rank logs and hang reports ("" = none) */
    std::string trace_file;                /* HCOMM_KIT_TRACE: merged Chrome/Perfetto trace ("" = none) */
    std::string job_dir;                   /* HCOMM_KIT_JOB_DIR: launcher's per-job directory (state dumps) */
    uint32_t progress_s = 10;              /* HCOMM_KIT_PROGRESS_SECONDS: a line per long wait this often */
};
/* Why a communicator was aborted: decides the code every rank's failing stream reports. */
enum class AbortKind : uint32_t { Other = 0, Timeout, Deadlock, Check, Crash, PeerDead, Mismatch, KernelTimeout };

/* Reads the environment; returns false and sets *err on a bad value. */
bool config_load(std::string* err);
const Config& cfg();
inline bool is_950() { return cfg().soc == Soc::A950; }

/* ------------------------------------------------------------------ time and futex */

uint64_t now_ns();

/* Waits while *word == expected, at most timeout_ns (<0: forever). shared: futex across processes. */
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, bool shared);
void futex_wake(std::atomic<uint32_t>* word, int n, bool shared);

/* Spins while pred() is false (adaptively, at most cfg().spin_ns: see common.cc), then sleeps
 * on word until pred() or the deadline (absolute ns, 0 = none). Returns pred() at the end.
 * poll_ns bounds each sleep so callers can run periodic checks through pred(). sleepers
 * (optional) counts the threads in the sleep phase only: a waker that bumps *word need not
 * call futex_wake while it reads 0. */
constexpr uint64_t kMinSpinNs = 100;
constexpr uint64_t kDeschedGapNs = 3000; /* a spin round slower than this was descheduled */
constexpr uint64_t kYieldEveryNs = 2000;  /* contention probe interval while spinning */
constexpr uint64_t kYieldSlowNs = 1500;   /* a sched_yield() slower than this ran another thread */
/* The spin phase alone: true as soon as pred() holds, false when the budget is spent. remote:
 * the waker is usually another process (wait_word passes `shared`), see common.cc. */
bool spin_until(std::atomic<uint32_t>* word, uint64_t deadline_ns, const std::function<bool()>& pred,
                bool remote = false);
constexpr uint32_t kProbeEvery = 128;
void spin_pause(); /* one pause instruction */
/* A communicator of n ranks was created in this process: all ranks of an emulated job share
 * this host, so more ranks than online CPUs means the node is oversubscribed (see spin_until). */
void note_local_ranks(uint32_t n);
/* Scheduling hint for the emulator's own threads (stream workers, executors). */
void background_thread_init();
bool wait_word(std::atomic<uint32_t>* word, bool shared, uint64_t deadline_ns,
               const std::function<bool()>& pred, uint64_t poll_ns = 200000000ull,
               std::atomic<uint32_t>* sleepers = nullptr);

/* ------------------------------------------------------------------ shared memory */

struct ShmSeg {
    std::string name; /* "/hcomm_kit...." */
    int fd = -1;
    void* addr = nullptr;
    size_t size = 0;
    bool owner = false;  /* created by this process: unlinked on close */
    bool linked = false; /* still has a name in /dev/shm */
};
/* Creates a new named segment of size bytes (sparse, zero-filled), locked by this process
 * (flock LOCK_EX) so that peers can tell whether the owner is alive. */
bool shm_create(ShmSeg* seg, const std::string& prefix, size_t size, std::string* err, bool shared_lock = false,
                const std::string& exact_name = std::string());
/* The job (rendezvous) segment: created with a shared lock under an exact name; *err == "EEXIST"
 * when another rank published it first. */
/* Opens and maps a peer's segment by name (no lock taken). */
bool shm_open_map(ShmSeg* seg, const std::string& name, size_t size, std::string* err);
void shm_unlink_seg(ShmSeg* seg);
void shm_close(ShmSeg* seg); /* unmaps, closes, unlinks if owner and still linked */
/* True when nobody holds the owner lock on this (peer) segment any more: the owner died. */
bool shm_owner_dead(const ShmSeg* seg);
/* Removes /dev/shm/hcomm_kit.* segments whose owner died (crashed runs). Called once per process. */
void shm_reclaim_stale();
std::string shm_prefix();  /* "/hcomm_kit.<uid>." */
std::string random_hex(size_t nbytes);

/* ------------------------------------------------------------------ devices, slots, memory */

constexpr uint32_t kMaxSlots = 65536;
constexpr uint32_t kDevCtlMagic = 0x48434b44; /* "HCKD" */

/* One per (process, device), in shared memory. Fields written by peers are atomics. */
struct DevCtl {
    uint32_t magic;
    uint32_t version;
    int32_t pid;
    int32_t device;
    /* Bumped after every slot record and every task submission; sleepers wait on it. */
    std::atomic<uint32_t> doorbell;
    /* Number of helpers sleeping (or about to) on doorbell; a recorder wakes only if > 0. */
    std::atomic<uint32_t> sleepers;
    /* Stream workers currently inside a notify wait on this device ("helpers"): they run the
     * device threads' ready tasks themselves, so while one is present a ring need not wake the
     * executor (it would only compete for the core). */
    std::atomic<uint32_t> helpers;
    /* The executor sleeps on exec_word (not on doorbell) with exec_sleeping = 1. */
    std::atomic<uint32_t> exec_word;
    std::atomic<uint32_t> exec_sleeping;
    /* Tasks queued on this device's device threads (not yet finished): with none, a ring has
     * nothing for the executor to run. */
    std::atomic<uint32_t> queued;
    uint32_t pad[6];
    /* Binary notify flags: 1 = set. Record = store 1; wait = exchange(0) == 1. Slot 0 unused. */
    std::atomic<uint32_t> slots[kMaxSlots];
    /* Who set each flag (prov:: encoding), written by the recorder before the flag (release),
     * read by the waiter after consuming it: the notify checker compares it with the waiter's
     * operation. Only written while the checker is on. */
    std::atomic<uint64_t> src[kMaxSlots];
    /* Trace flow id of the record that set the flag (HCOMM_KIT_TRACE only). */
    std::atomic<uint64_t> flow[kMaxSlots];
};

/* Provenance of a notify record (DevCtl::src): recorder rank and thread, its operation (op tag
 * hash, instance number on its rank) and, for channel notifies, its use number of the channel (the
 * n-th operation that used that channel on that rank). Numbers are kept mod 8192. */
namespace prov {
constexpr uint64_t kValid = 1ull << 63, kHost = 1ull << 62, kChan = 1ull << 61;
constexpr uint32_t kMod = 8192;
inline uint64_t make(bool host, bool chan, uint32_t rank, uint32_t thread, uint32_t tag16, uint32_t inst,
                     uint32_t use) {
    return kValid | (host ? kHost : 0) | (chan ? kChan : 0) | ((uint64_t)(rank & 0x7f) << 54) |
           ((uint64_t)(thread & 0xfff) << 42) | ((uint64_t)(tag16 & 0xffff) << 26) |
           ((uint64_t)(inst % kMod) << 13) | (use % kMod);
}
inline uint32_t rank(uint64_t p) { return (uint32_t)(p >> 54) & 0x7f; }
inline uint32_t thread(uint64_t p) { return (uint32_t)(p >> 42) & 0xfff; }
inline uint32_t tag16(uint64_t p) { return (uint32_t)(p >> 26) & 0xffff; }
inline uint32_t inst(uint64_t p) { return (uint32_t)(p >> 13) & (kMod - 1); }
inline uint32_t use(uint64_t p) { return (uint32_t)p & (kMod - 1); }
/* b - a in (-kMod/2, kMod/2] for numbers kept mod kMod */
inline int delta(uint32_t a, uint32_t b) {
    int d = (int)((b - a) % kMod);
    return d > (int)kMod / 2 ? d - (int)kMod : d;
}
}  // namespace prov

inline void exec_wake(DevCtl* c) {
    c->exec_word.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&c->exec_word, 1, true);
}
/* Announces a slot record or a task submission. Sleeping helpers are woken; the executor only
 * when no helper is present (unless wake_exec is false: the caller guarantees that someone will
 * look at the device threads soon, see hthread_submit). */
inline void doorbell_ring(DevCtl* c, bool wake_exec = true) {
    c->doorbell.fetch_add(1, std::memory_order_seq_cst);
    if (c->sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(&c->doorbell, 0x7fffffff, true);
    if (wake_exec && c->exec_sleeping.load(std::memory_order_seq_cst) != 0 &&
        c->helpers.load(std::memory_order_seq_cst) == 0 && c->queued.load(std::memory_order_seq_cst) != 0)
        exec_wake(c);
}
inline void slot_record(DevCtl* c, uint32_t idx) {
    c->slots[idx].store(1, std::memory_order_release);
    doorbell_ring(c);
}
inline bool slot_consume(DevCtl* c, uint32_t idx) {
    if (c->slots[idx].load(std::memory_order_acquire) == 0) return false;
    return c->slots[idx].exchange(0, std::memory_order_acq_rel) == 1;
}

/* HostMapped: host memory registered with aclrtHostRegister; device memory of its device. */
enum class MemKind : uint8_t { Device, HcclBuffer, EngineCtx, HostPinned, HostMapped };
struct MemRegion {
    uintptr_t base;
    size_t size;
    int device; /* -1 for host pinned */
    MemKind kind;
};
void mem_register(void* base, size_t size, int device, MemKind kind);
/* Registers [base, base+size) unless it overlaps a known region (then false, *clash = that region). */
bool mem_register_exclusive(void* base, size_t size, int device, MemKind kind, MemRegion* clash);
void mem_unregister(void* base);
/* Finds the region containing [p, p+len); false if p is not inside a known region or the
 * range runs past its end (out->size tells by how much). */
bool mem_find(const void* p, size_t len, MemRegion* out, bool* partial = nullptr);
bool mem_is_device(const void* p, size_t len, int device = -1);
const char* mem_kind_name(MemKind k);

struct Context;
struct Stream;
struct HThread;
struct Comm;

struct Device {
    int id = 0;
    int refcount = 0; /* aclrtSetDevice count */
    ShmSeg ctl_seg;
    DevCtl* ctl = nullptr;
    std::mutex m;                     /* slot allocator, contexts, threads list */
    uint32_t slot_next = 1;           /* bump allocator */
    std::vector<std::pair<uint32_t, uint32_t>> slot_free; /* (base, n) */
    Context* default_ctx = nullptr;
    std::vector<Context*> contexts;   /* explicit ones */
    int stream_count = 0;
    /* device-thread scheduler state (sched.cc) */
    std::mutex sched_m;
    std::vector<HThread*> hthreads;   /* all device threads of this device */
    std::vector<HThread*> retired_hthreads;  /* destroyed ones, never freed (see hthread_destroy) */
    std::atomic<uint32_t> sched_epoch{0};
    std::thread executor;
    bool executor_started = false;
    std::atomic<bool> executor_stop{false};
    /* notify ids handed out by aclrtCreateNotify: slot index -> live */
    std::unordered_set<uint32_t> acl_notifies;
    /* last communicator failure on this device (aborts unrelated-looking stream waits) */
    std::atomic<uint32_t> abort_epoch{0};
    std::string abort_reason;
    int abort_code = 0;
    /* Host threads blocked in a synchronising call on this device's streams, and the stream the
     * latest of them waits for (0: an event or the whole device): hang analysis (diag.cc). */
    std::atomic<uint32_t> host_sync{0};
    std::atomic<uint32_t> host_sync_stream{0};
    /* A kernel overran its launch timeout and could not be stopped: launches and synchronisations
     * on this device fail with 507017 naming it (lost_reason under m). */
    std::atomic<bool> lost{false};
    std::string lost_reason;
};
/* 0, or 507017 with the reason set (api) when dev is lost. */
int device_lost_check(Device* dev, const char* api);

/* Returns the device, creating its control block if needed; nullptr + error on failure. */
Device* device_get(int id, int* err_code, const char* api);
Device* device_peek(int id); /* nullptr if never set */
bool slots_alloc(Device* d, uint32_t n, uint32_t* base, std::string* err);
void slots_free(Device* d, uint32_t base, uint32_t n);

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
    std::string what;                 /* "kernel HcclFoo", "aclrtWaitAndResetNotify", ... */
    const HTask* wait = nullptr;      /* Wait: the wait (valid while the lock is held) */
    uint64_t since_ns = 0;            /* Wait: when the task started waiting (0: not started) */
    Comm* comm = nullptr;             /* the communicator it works for (Barrier, Hcomm stream tasks), if known */
    uint32_t barrier_seq = 0;         /* Barrier: this rank's barrier number */
    std::vector<std::pair<const DevCtl*, uint32_t>> records; /* notify slots the task will set */
};

/* A kernel launch in flight, shared by its stream worker and the watchdog: a kernel that overruns
 * its launch timeout is interrupted (a signal to its worker; the crash guard leaves the entry when
 * the worker is in the kernel's own code), else the device is marked lost (kernel.cc, stream.cc). */
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
    virtual void describe(TaskDiag* d) const { d->what = name(); }
    std::atomic<uint32_t>* done_word = nullptr; /* set to 1 + woken when the task finishes (sync memcpy) */
    bool helps = false; /* run() waits on a notify of the stream's device, running its device threads meanwhile */
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
};

/* Enqueues a task (starting the worker if needed). Returns ACL_SUCCESS or an error code. */
int stream_enqueue(Stream* s, std::unique_ptr<Task> t);
/* Waits for every task submitted so far; timeout_ms < 0 = forever. Returns the stream's
 * first async error (and clears it), 507046 on timeout when timeout_code != 0. */
int stream_sync(Stream* s, int64_t timeout_ms, const char* api);
/* Under s->m: records the stream's first async error (later ones are ignored until it is reported). */
void stream_note_error_locked(Stream* s, int code, const std::string& msg);
Stream* stream_create(Context* ctx, uint32_t flags, int* err_code, const char* api);
void stream_destroy(Stream* s);
/* Fails the stream from inside a task (e.g. watchdog): sets err if none yet. */
void stream_set_error(Stream* s, int code, const std::string& msg);
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
};
KernelCtx& kctx();

/* Sent by the watchdog to the worker of a kernel that overran its launch timeout. */
#define kCancelSig (SIGRTMAX - 3)
/* The running kernel works on communicator c (told if it overruns its launch timeout). */
void kernel_note_comm(KernelCtx& k, Comm* c);
/* Watchdog (stream.cc): enforces launch timeouts. */
void watchdog_arm(Stream* s, uint64_t deadline_ns, uint64_t seq);
void watchdog_disarm(Stream* s, uint64_t seq);

/* ------------------------------------------------------------------ Hcomm device threads (sched.cc) */

enum class HOp : uint8_t { Copy, Reduce, Record, Wait, Nop };

/* Describes a slot for diagnostics: "thread t0 slot 1", "channel to rank 3 slot 0", "ACL notify 12". */
struct SlotDesc {
    uint8_t kind = 0; /* 0 thread slot, 1 channel slot, 2 ACL notify */
    uint16_t peer = 0;
    uint32_t index = 0;
    uint32_t thread_no = 0;
};

struct HTask {
    HOp op = HOp::Nop;
    uint8_t dtype = 0;
    uint8_t redop = 0;
    bool has_post_record = false; /* write-with-notify: record post slot after the data landed */
    uint32_t timeout_s = 0;       /* Wait: seconds, 0 = forever */
    void* dst = nullptr;
    const void* src = nullptr;
    uint64_t n = 0;               /* bytes (Copy) or elements (Reduce) */
    DevCtl* slot_ctl = nullptr;   /* Record/Wait target */
    uint32_t slot = 0;
    DevCtl* post_ctl = nullptr;
    uint32_t post_slot = 0;
    SlotDesc desc;
    uint64_t deadline_ns = 0;     /* Wait: set at first attempt */
    uint64_t wait_start_ns = 0;
    const char* api = "";
    const char* tag = nullptr;    /* batch tag (interned) for messages */
    Comm* comm = nullptr;         /* for aborts and liveness (peer = desc.peer when channel) */
    int peer_rank = -1;
    /* Diagnosis and the notify checker (diag.cc): */
    uint32_t bidx = 0, bsize = 0; /* position in its thread's batch (emit order) and the batch's size */
    uint32_t tag16 = 0;           /* op tag hash (0: a host-side task, exempt from operation checks) */
    uint32_t inst = 0;            /* instance of its operation on this rank (the n-th launch of its op tag) */
    uint32_t use = 0;             /* channel tasks: the channel's use number (the n-th operation using it) */
    uint64_t kseq = 0;            /* kernel launch that emitted it (0: host) */
    const char* kernel = nullptr; /* name of that kernel */
    int16_t slot_rank = -1;       /* rank owning slot_ctl (Record/Wait) */
    int16_t post_rank = -1;       /* rank owning post_ctl */
    bool chan_rec = false;        /* Record / post record goes through a channel */
    const void* caller = nullptr; /* return address of the Hcomm call in the kernel (source line) */
    /* HCCL-buffer bytes it reads / writes (race checker): owner rank, offset, length, kind */
    struct Access {
        int16_t rank = -1;        /* owner of the buffer; -1 = no access */
        uint8_t write = 0;        /* 0 read, 1 write, 2 read-modify-write */
        uint64_t off = 0, len = 0;
    } acc[2];
};

enum class Engine : int8_t { Host, Device };

struct HThread {
    uint32_t magic = 0x48544844;
    Device* dev = nullptr;
    Comm* comm = nullptr;
    uint32_t no = 0;           /* index within its communicator, for messages */
    bool stream_bound = false; /* CPU_TS thread: tasks go to `stream` */
    Stream* stream = nullptr;
    bool own_stream = false;
    int engine = 0;            /* CommEngine given at acquire */
    uint32_t nslots = 0;
    uint32_t slot_base = 0;
    /* device-thread queue (not stream_bound) */
    std::mutex qm;
    std::deque<HTask> q;
    std::atomic<bool> claimed{false};
    std::atomic<uint32_t> qlen{0};
    bool dead = false;
    std::atomic<uint64_t> executed{0}; /* tasks run so far (progress seen by hang analysis) */
    std::atomic<bool> failed{false};   /* a task of it failed (its queue was dropped) */
    /* Race checker state (diag.cc), touched only by the one runner of the thread: */
    int32_t vcg = -1;                  /* clock index (rank * kVcPerRank + i), -2: none left */
    uint32_t clock = 1;                /* own clock, bumped after every record */
    std::vector<uint64_t> vc;          /* g << 32 | clock of everything this thread has seen, sorted */
    bool vc_lost = false;              /* a join was incomplete: no race findings until it is idle */
    uint64_t op_kseq = 0;              /* kernel launch of the task it runs now */
    uint64_t op_start_ns = 0;          /* when it began that launch's tasks */
    std::vector<uint64_t> op_start_vc; /* its clock vector then */
    /* Its latest notify records (checker on), so that hang reports can name a record nobody
     * consumed (a record to the wrong peer or slot); written by its runner, read by snapshots. */
    struct RecentRecord {
        const DevCtl* ctl = nullptr; /* the slot owner's control block */
        uint32_t slot = 0;
        int slot_rank = -1;
        uint64_t prov = 0;           /* provenance written with it (still there: not consumed) */
        uint64_t when_ns = 0;
        const void* caller = nullptr;
        const char* api = nullptr;
        const char* tag = nullptr;
        SlotDesc desc;
        uint32_t bidx = 0, bsize = 0, inst = 0, use = 0;
    };
    std::mutex rec_m;
    RecentRecord recent[8];
    uint32_t nrecent = 0;
};

/* Public handle for a thread as seen from one engine (exported handles are other views). */
struct ThreadView {
    uint32_t magic = 0x54565731;
    HThread* t = nullptr;
    Engine engine = Engine::Device;
    int comm_engine = 0;
};

/* Executes one HTask for thread self. Returns 1 done, 0 blocked (Wait not satisfied yet), <0 failed
 * (msg set, *kind says why: AbortKind::Timeout, PeerDead, Check, or the kind of the abort that
 * stopped it). */
int htask_exec(HTask& t, HThread* self, std::string* msg, AbortKind* kind);
/* Submits tasks to a device thread and wakes the device scheduler. */
void hthread_submit(HThread* t, std::vector<HTask>&& tasks);
/* Runs runnable device threads of dev once; returns true if any task made progress. */
bool sched_pass(Device* dev);
void sched_start(Device* dev);
/* Longest an executor sleeps without a ring: bounds timeout/liveness checks of parked waits
 * and the delay of a deferred wake-up (kernel_end_submit). */
constexpr uint64_t kExecPollNs = 20000000ull;
/* Called on the stream worker when a kernel returned: wakes the executor for the tasks the kernel
 * submitted unless helper_follows (the stream's next task is a notify wait on the same device,
 * whose worker runs them). */
void kernel_end_submit(Stream* s, bool helper_follows);
/* A kernel opened a batch again after submitting one: wake the executor now (it keeps running). */
void kernel_batch_reopened();
void sched_stop(Device* dev);
/* Fails all queued tasks of the communicator's device threads on this process. */
void sched_abort_comm(Comm* c);
/* Human-readable account of what each device thread of dev (optionally of comm c) is waiting for. */
std::string sched_describe(Device* dev, Comm* c);

/* Stream task wrapping HTasks for CPU_TS (stream-bound) threads. */
std::unique_ptr<Task> make_htask_stream_task(HThread* t, std::vector<HTask>&& tasks);

/* Creates a device thread (registered with dev's scheduler) with nslots notify slots.
 * stream_bound: a CPU_TS thread whose tasks run in stream s's order. */
HThread* hthread_create(Device* dev, Comm* comm, uint32_t nslots, bool stream_bound, Stream* s, int engine,
                        std::string* err);
void hthread_destroy(HThread* t); /* unregisters and frees its slots (thread must be idle) */
/* A handle value naming thread t as seen from an engine (exported handles are other views).
 * Views are cached per (thread, engine); the returned pointer is the ThreadHandle value. */
ThreadView* thread_view(HThread* t, Engine e, int comm_engine);
/* Validates a ThreadHandle; nullptr if it is not a live view. */
ThreadView* view_from_handle(ThreadHandle h);
inline Engine engine_side(int comm_engine) {
    return (comm_engine == COMM_ENGINE_AICPU || comm_engine == COMM_ENGINE_AICPU_TS) ? Engine::Device : Engine::Host;
}

/* One end of a point-to-point link (ChannelHandle value = Channel*). */
struct Channel {
    uint32_t magic = 0x43484e4c;
    Comm* comm = nullptr;
    int engine = 0;
    int protocol = 0;
    uint32_t remote_rank = 0;
    uint32_t notify_num = 0;
    uint32_t local_slot_base = 0; /* in our device's DevCtl: ChannelNotifyWait waits here */
    DevCtl* remote_ctl = nullptr; /* the peer's DevCtl (mapped): ChannelNotifyRecord sets remote_slot_base + idx */
    uint32_t remote_slot_base = 0;
    void* remote_buf = nullptr;   /* our mapping of the peer's HCCL buffer (HcclChannelGetHcclBuffer) */
    uint64_t remote_buf_size = 0;
    /* Operations that used this channel (one use per kernel launch), see KernelCtx::chans. */
    std::atomic<uint32_t> uses{0};
    std::atomic<uint32_t> uses_submitted{0};   /* uses whose kernel returned (all their tasks queued) */
    std::atomic<uint64_t> use_kseq[8] = {};     /* kernel launch of use n at [n % 8] */
};
/* Validates a ChannelHandle; nullptr if it is not a live channel of this process. */
Channel* channel_from_handle(ChannelHandle h);
void channel_register(Channel* c);
void channel_unregister(Channel* c);

/* Communicator helpers used by the data plane (comm.cc). */
Device* comm_device(Comm* c);
Comm* comm_from_handle(HcclComm h); /* nullptr unless a live communicator of this process */
Comm* comm_find_by_name(const char* name, Device* dev); /* HcommAcquireComm lookup */
std::mutex& comm_use_lock(Comm* c);
/* Takes comm_use_lock(c), polling (ThreadSanitizer does not see timed locks) while stop() is false;
 * returns false when stop() said so. */
bool comm_use_acquire(Comm* c, const std::function<bool()>& stop);
bool comm_aborted(Comm* c, std::string* why);
/* Aborts the communicator on every rank; returns true when this call was the first abort. */
bool comm_abort(Comm* c, const std::string& why, AbortKind kind = AbortKind::Other);
/* Kind and first rank of an abort (false when not aborted). */
bool comm_abort_info(Comm* c, AbortKind* kind, int* rank);
/* The aclError a stream task reports when its communicator was aborted for `kind` (self: by this
 * rank), and the one for communicator c's abort as seen by this rank. */
int abort_code(AbortKind kind, bool self);
int comm_abort_code(Comm* c, uint64_t started_ns = 0); /* started_ns: when the failing wait began */
uint32_t comm_size(Comm* c);
DevCtl* comm_ctl(Comm* c, uint32_t rank); /* a rank's device control block (mapped), or nullptr */
bool comm_peer_gone(Comm* c, int peer);   /* destroyed its communicator (HcclCommDestroy) */
bool comm_peer_dead(Comm* c, int peer);
/* "rank R (pid P, device D) died": the message of every failure caused by a dead rank. */
std::string comm_dead_msg(Comm* c, uint32_t r);
int comm_rank(Comm* c);
const char* comm_name(Comm* c);
/* A kernel starts an instance of operation `tag` on c: returns its number (1, 2, ...). */
uint32_t comm_op_begin(Comm* c, uint32_t tag16, const char* tag, uint64_t kseq);
/* The kernel of instance inst of op tag16 returned: all its tasks are queued. */
void comm_op_submitted(Comm* c, uint32_t tag16, uint32_t inst);
/* The op tag this rank ran under hash tag16 on c (false: none). */
bool comm_op_tag(Comm* c, uint32_t tag16, std::string* tag);

/* ------------------------------------------------------------------ diagnosis (diag.cc) */

/* hcomm-kit's code for a notify-checker finding (HCOMM_KIT_CHECK=1): not a CANN code; declared
 * for C hosts in hcomm_kit/emu_ext.h. */
constexpr int kCheckErrorCode = HCOMM_KIT_ERROR_CHECK;

/* Notify operations with the checker's bookkeeping. record_slot sets the flag for task t run by
 * thread self and returns "" or a lost-signal finding; consume_slot clears a set flag and returns
 * true, with *finding set when the record came from another operation. */
std::string record_slot(const HTask& t, HThread* self, DevCtl* ctl, uint32_t slot, int slot_rank, bool chan);
bool consume_slot(const HTask& t, HThread* self, std::string* finding);
/* The race checker's bookkeeping when thread self starts a task of another kernel launch. */
void check_op_begin(const HTask& t, HThread* self);
/* The race checker's bookkeeping of an access task (Copy/Reduce) before it runs: "" or a finding. */
std::string check_accesses(const HTask& t, HThread* self);
/* The host wrote n bytes at dst (aclrtMemcpy, aclrtMemset, ...): HCCL-buffer bytes staged by the
 * host count as freshly written for the race checker. */
void diag_host_write(const void* dst, uint64_t n);
/* A communicator's own HCCL buffer (race checker). */
void comm_buffer(Comm* c, void** base, uint64_t* size);
/* A finding of the checker: logged, and in fail mode returned so the task fails (empty: go on). */
std::string check_finding(Comm* c, const std::string& text);
int check_mode(); /* 0 off, 1 fail, 2 warn (HCOMM_KIT_CHECK, HcommKitSetCheck) */
/* Thread code for messages and provenance (kStreamThread | stream id for stream-bound threads). */
uint32_t thread_code(const HThread* t);
std::string thread_name(uint32_t code); /* "thread t3" / "stream thread s7" */

/* The cross-rank report for a failed wait (timeout), ready to be an abort reason. */
std::string diag_wait_report(Comm* c, const HTask& t, const HThread* self, const char* headline);
/* Cross-rank report of everything communicator c waits for (launch timeouts, dumps). */
std::string diag_comm_report(Comm* c, const char* headline);
/* The host is blocked in a control-plane call of c (what = nullptr: it returned). */
void diag_host_call(Comm* c, const char* what);
/* The host waits in HcclChannelAcquire for the ranks in the bitmap peers (0: no longer). */
void diag_host_connect(Comm* c, uint64_t peers);
/* Communicator lifetime hooks: the monitor publishes and analyses live communicators. */
void diag_comm_added(Comm* c);
void diag_comm_removed(Comm* c);
/* Kernel lifetime: launches tracked for reports; end marks the op instances as submitted. */
void diag_kernel_begin(KernelCtx& k, Stream* s, const char* name);
void diag_kernel_end(KernelCtx& k);
/* "exec_op.cc:42 in ExecOp (libx.so+0x1a2b)" for an instruction address (kernel.cc; addr2line on
 * the kernel's debug info, else the nearest symbol). call_site: pc is a return address (the line
 * of the call is wanted). Cached per address. */
std::string code_location(const void* pc, bool call_site = false);
/* Short form for reports: "exec_op.cc:42" (or "libx.so+0x1a2b"); "" when unknown. */
std::string code_line(const void* pc, bool call_site = true);
/* HCOMM_KIT_TRACE (trace.cc): whether it is on, and the events. Flow ids of trace-only records
 * carry kTraceOnlyId (the race checker's clock-vector ids double as flow ids otherwise). */
constexpr uint64_t kTraceOnlyId = 1ull << 55;
bool trace_on();
uint64_t trace_flow_id(uint32_t rank);
void trace_comm_added(Comm* c);
void trace_comm_removed(Comm* c);
void trace_task(const HTask& t, const HThread* self, uint64_t t0, uint64_t t1);
void trace_flow(bool start, uint64_t id, const HThread* self, uint64_t ts);
void trace_kernel(Stream* s, const char* name, uint64_t t0, uint64_t t1, const std::vector<Comm*>& comms);
void trace_launch(Stream* s, const char* name);
/* Per-rank log (HCOMM_KIT_LOG_DIR): one timestamped line. */
void diag_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace emu

#endif
