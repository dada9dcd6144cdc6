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
};
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
};

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
};

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

class Task {
public:
    virtual ~Task() = default;
    /* Runs on the stream worker. Returns ACL_SUCCESS or an aclError; *msg explains failures. */
    virtual int run(Stream* s, std::string* msg) = 0;
    /* Called instead of run() when the stream is in an error state and the task is dropped. */
    virtual void drop() {}
    virtual const char* name() const = 0;
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
    bool stop = false;
    uint64_t worker_gen = 0;              /* bumped when a stuck worker is abandoned */
    bool worker_running = false;
    /* kernel currently running on the worker (for the watchdog) */
    uint64_t kernel_deadline_ns = 0;
    uint64_t kernel_timeout_ns = 0;
    uint64_t kernel_seq = 0;
    std::string kernel_name;
    int subscriber_set = 0;
    uint64_t subscriber = 0;
};

/* Enqueues a task (starting the worker if needed). Returns ACL_SUCCESS or an error code. */
int stream_enqueue(Stream* s, std::unique_ptr<Task> t);
/* Waits for every task submitted so far; timeout_ms < 0 = forever. Returns the stream's
 * first async error (and clears it), 507046 on timeout when timeout_code != 0. */
int stream_sync(Stream* s, int64_t timeout_ms, const char* api);
Stream* stream_create(Context* ctx, uint32_t flags, int* err_code, const char* api);
void stream_destroy(Stream* s);
/* Fails the stream from inside a task (e.g. watchdog): sets err if none yet. */
void stream_set_error(Stream* s, int code, const std::string& msg);

/* Kernel execution context of the calling OS thread (an AICPU worker while it runs a kernel). */
struct BatchState {
    bool active = false;
    std::string tag;
    const char* itag = nullptr; /* tag interned at HcommBatchModeStart (stable pointer for HTask::tag) */
    /* tasks recorded per device thread, submitted in thread order at HcommBatchModeEnd */
    std::vector<std::pair<HThread*, std::vector<struct HTask>>> pending;
};
struct KernelCtx {
    bool active = false; /* true while a kernel entry runs on this thread */
    Device* dev = nullptr;
    const char* kernel = nullptr;
    BatchState batch;
    std::vector<Comm*> acquired;
    std::string first_err; /* first data-plane error raised during this kernel */
    bool deferred_exec_wake = false; /* submitted to device threads without waking the executor */
};
KernelCtx& kctx();

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
};

/* Public handle for a thread as seen from one engine (exported handles are other views). */
struct ThreadView {
    uint32_t magic = 0x54565731;
    HThread* t = nullptr;
    Engine engine = Engine::Device;
    int comm_engine = 0;
};

/* Executes one HTask. Returns 1 done, 0 blocked (Wait not satisfied yet), <0 failed (msg set). */
int htask_exec(HTask& t, std::string* msg);
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
};
/* Validates a ChannelHandle; nullptr if it is not a live channel of this process. */
Channel* channel_from_handle(ChannelHandle h);
void channel_register(Channel* c);
void channel_unregister(Channel* c);

/* Communicator helpers used by the data plane (comm.cc). */
Device* comm_device(Comm* c);
Comm* comm_find_by_name(const char* name, Device* dev); /* HcommAcquireComm lookup */
std::mutex& comm_use_lock(Comm* c);
bool comm_aborted(Comm* c, std::string* why);
void comm_abort(Comm* c, const std::string& why);
bool comm_peer_dead(Comm* c, int peer);
int comm_rank(Comm* c);
const char* comm_name(Comm* c);

}  // namespace emu

#endif
