/*
 * hcomm-kit CPU emulator, ACL runtime layer: devices, their shared-memory control blocks and
 * notify slots, the memory registry, and the tasks a device engine runs (HTask).
 *
 * Model (see ARCHITECTURE.md, "Emulator model"):
 *   - A Device owns a control block (DevCtl) in POSIX shared memory: a doorbell futex word and a
 *     pool of 32-bit notify slots. Every notify of the device (ACL notifies, device-thread slots,
 *     local ends of channels) is one slot, so peers in other processes can set it.
 *   - A Stream is a FIFO of Tasks run by one worker OS thread.
 *   - A device thread (ThreadHandle, AICPU_TS engine) is a FIFO of HTasks run by the device's
 *     scheduler (hcomm/sched.cc). Waiters park and sleep on the device doorbell.
 *   - Waits spin adaptively (wait_word) and then sleep on a futex; wakers skip the wake-up
 *     system call while nobody sleeps. The emulator's own threads run as SCHED_BATCH so that a
 *     woken worker does not preempt the host thread in the middle of its enqueue calls.
 */
#ifndef HCOMM_KIT_EMU_ACL_DEVICE_H
#define HCOMM_KIT_EMU_ACL_DEVICE_H

#include "base/common.h"
#include "base/shm.h"

namespace emu {

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
    /* Timing model (model/): id of the recorded task whose record set the flag (HTask::mid), taken
     * (and cleared) by the wait that consumes it; 0 = not a modelled record. */
    std::atomic<uint64_t> mrec[kMaxSlots];
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
class PeerLink;

/* Device memory a launch must write in full (the unwritten-output check, HcommKitStreamCalls'
 * HCOMM_KIT_SC_OUTPUT): the device tasks' writes into it, as sorted disjoint byte ranges. */
struct OutputWatch {
    uint64_t id = 0;
    uintptr_t base = 0;
    uint64_t len = 0;
    std::vector<std::pair<uint64_t, uint64_t>> written; /* [lo, hi) offsets from base */
};

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
    /* device-thread scheduler state (hcomm/sched.cc) */
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
     * latest of them waits for (0: an event or the whole device): hang analysis (diag/). */
    std::atomic<uint32_t> host_sync{0};
    std::atomic<uint32_t> host_sync_stream{0};
    /* A kernel overran its launch timeout and could not be stopped: launches and synchronisations
     * on this device fail with 507017 naming it (lost_reason under m). */
    std::atomic<bool> lost{false};
    std::string lost_reason;
    /* The latest kernel launched on this device (its function name, under m): named when the host
     * reads back device memory nothing wrote (mem_unwritten_finding). */
    std::string last_kernel;
    /* Output watches armed (output_watch_begin): device tasks report their writes while > 0. */
    std::atomic<uint32_t> watches{0};
    std::mutex watch_m; /* watch_list, watch_next */
    std::vector<OutputWatch> watch_list;
    uint64_t watch_next = 1;
};
/* The unwritten-output check: watches [base, base + len) of dev's memory from now on (0: nothing to
 * watch); a device task's write of n bytes at dst (output_watch_write, cheap while nothing is
 * watched); the watch ends with the ranges nobody wrote ([lo, hi) offsets, at most max_ranges of
 * them, *unwritten = their total bytes). */
uint64_t output_watch_begin(Device* dev, const void* base, uint64_t len);
/* Device memory nothing wrote (with the checker on, aclrtMalloc fills each allocation of at most
 * 256 MiB with a pattern of 8-byte words that depends on the offset, as real device memory holds
 * garbage): "" or the finding for the host reading back [src, src + n) (api: the copy) while
 * 8-byte words of it still hold the pattern; in warn mode logged and "". */
std::string mem_unwritten_finding(const char* api, const void* src, size_t n);
void output_watch_write(Device* dev, const void* dst, uint64_t n);
std::vector<std::pair<uint64_t, uint64_t>> output_watch_end(Device* dev, uint64_t id, uint64_t* unwritten,
                                                            size_t max_ranges = 8);
/* 0, or 507017 with the reason set (api) when dev is lost. */
int device_lost_check(Device* dev, const char* api);

/* Returns the device, creating its control block if needed; nullptr + error on failure. */
Device* device_get(int id, int* err_code, const char* api);
Device* device_peek(int id); /* nullptr if never set */
bool slots_alloc(Device* d, uint32_t n, uint32_t* base, std::string* err);
void slots_free(Device* d, uint32_t base, uint32_t n);

/* ------------------------------------------------------------------ device tasks (run by hcomm/sched.cc) */

enum class HOp : uint8_t { Copy, Reduce, Record, Wait, Nop };

/* What a task is for the timing model (HTask::mkind). */
namespace mkind {
enum : uint8_t {
    Nop = 0, LocalCopy, LocalReduce, Write, WriteReduce, Read, ReadReduce,
    RecordThread, RecordChannel, RecordAcl, WaitThread, WaitChannel, WaitAcl, Count
};
inline bool is_wait(uint8_t k) { return k == WaitThread || k == WaitChannel || k == WaitAcl; }
inline bool is_transfer(uint8_t k) { return k >= Write && k <= ReadReduce; }  /* to or from a peer */
inline bool is_read(uint8_t k) { return k == Read || k == ReadReduce; }
inline bool is_local(uint8_t k) { return k == LocalCopy || k == LocalReduce; }
inline bool is_flow(uint8_t k) { return is_local(k) || is_transfer(k); }  /* moves bytes */
}  // namespace mkind

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
    /* Diagnosis and the notify checker (diag/): */
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
    /* Timing model (model/): what the task is (MKind, set where it is made), the peer a transfer or
     * channel notify goes to, and its id in the rank's model log (0: not recorded). */
    uint8_t mkind = 0;
    int16_t mpeer = -1;
    uint64_t mid = 0;
    /* A transfer or record to a peer this rank cannot map (net/transport.h): it goes over the link;
     * nullptr: the peer's memory is mapped here (shared memory). */
    PeerLink* link = nullptr;
    /* HCCL-buffer bytes it reads / writes (race checker): owner rank, offset, length, kind */
    struct Access {
        int16_t rank = -1;        /* owner of the buffer; -1 = no access */
        uint8_t write = 0;        /* 0 read, 1 write, 2 read-modify-write */
        uint64_t off = 0, len = 0;
    } acc[2];
};

}  // namespace emu

#endif
