/*
 * hcomm-kit CPU emulator, Hcomm data plane: device threads (HThread) and their scheduler,
 * channels, and the Hcomm C API that kernels call. The communicator is opaque here: what the data
 * plane needs of it is declared at the bottom (implemented by hccl/), and what it asks of the
 * diagnosis goes through hcomm/hooks.h.
 */
#ifndef HCOMM_KIT_EMU_HCOMM_DATAPLANE_H
#define HCOMM_KIT_EMU_HCOMM_DATAPLANE_H

#include "acl/runtime.h"

namespace emu {

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
    /* Race checker state (diag/race.cc), touched only by the one runner of the thread: */
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
/* One task, as hthread_submit (no vector made for a thread bound to a stream). */
void hthread_submit_one(HThread* t, HTask&& task);
/* Runs runnable device threads of dev once; returns true if any task made progress. */
bool sched_pass(Device* dev);
void sched_start(Device* dev);
/* Longest an executor sleeps without a ring: bounds timeout/liveness checks of parked waits
 * and the delay of a deferred wake-up (kernel_end_submit). */
constexpr uint64_t kExecPollNs = 20000000ull;
/* The same with no task queued on any device thread of the device (an idle rank). */
constexpr uint64_t kExecIdlePollNs = 200000000ull;
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
    void* remote_buf = nullptr;   /* our mapping of the peer's HCCL buffer (HcclChannelGetHcclBuffer), or the
                                   * link's stand-in range */
    PeerLink* link = nullptr;     /* the peer cannot be mapped: transfers and records go over this link */
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

/* What the data plane needs of its communicator: declared here, implemented by hccl/ (comm.cc,
 * bootstrap.cc), so that hcomm/ includes nothing of hccl/. */
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
/* Appended to messages about a rank: for a rank on another host " (pid P, device D, host H: it died or
 * its host was lost; the connection failed: why)"; for a rank on this host " (pid P, device D, host H)"
 * in a job over several hosts (the message reaches the other hosts), "" in a job on one host. */
std::string comm_peer_where(Comm* c, int peer);
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
/* A communicator's own HCCL buffer (race checker). */
void comm_buffer(Comm* c, void** base, uint64_t* size);
/* "" when no link of this rank is down, else a clause for messages about a missing channel:
 * " (rank 0 has no channel to rank 1: the HCCS link between them is down, HCOMM_KIT_LINKS_DOWN=0-1)". */
std::string comm_links_note(Comm* c);

/* Waits on one of dev's slots from a stream worker, running the device's runnable device threads
 * meanwhile. h: the Hcomm wait task (through the checker), else a plain ACL notify. Returns 1 when
 * consumed, 0 on timeout, -1 when aborted (msg says why). */
int stream_wait_slot(Device* dev, uint32_t slot, uint64_t deadline_ns, Comm* comm, std::string* msg, const HTask* h,
                     HThread* self);

/* Runs a transfer or record task whose peer is reached over the network (t.link; hcomm/remote.cc),
 * as htask_exec does for a mapped peer. */
int link_exec(HTask& t, HThread* self, std::string* msg, AbortKind* kind);
/* The communicator whose network key is key (nullptr: none here), and a communicator's key (0: its
 * ranks are on this host); hccl/ implements them. */
Comm* comm_by_net_key(uint64_t key);
uint64_t comm_net_key(Comm* c);

/* Thread codes for messages, provenance and the hang-analysis board: a device (AICPU) thread's
 * number within its communicator, or kStreamThread | stream id for a stream-bound (CPU_TS) thread. */
constexpr uint32_t kStreamThread = 0x800;
uint32_t thread_code(const HThread* t);
std::string thread_name(uint32_t code); /* "thread t3" / "stream thread s7" */

}  // namespace emu

#endif
