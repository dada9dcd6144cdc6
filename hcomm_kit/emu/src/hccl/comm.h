/*
 * hcomm-kit CPU emulator: the HCCL host control plane (hccl/), internal declarations.
 *
 * A communicator's ranks meet in a "job" shared-memory segment named after the job id carried
 * by the root info (or derived from the rank-table file). The segment holds the rank table
 * (pid, device, control-block and HCCL-buffer segment names), the job-wide abort flag, the
 * barrier words and the channel mailboxes. Ranks may be processes or threads of one process:
 * everything goes through shared memory either way. Other emulator sources only use the
 * comm_* accessors declared at the bottom of hcomm/dataplane.h; diag/ reads everything here.
 */
#ifndef HCOMM_KIT_EMU_COMM_H
#define HCOMM_KIT_EMU_COMM_H

#include "hcomm/dataplane.h"
#include "hccl/algo_select.h"
#include "hccl/topology.h"
#include "net/transport.h"

#include <tuple>

namespace emu {

constexpr uint32_t kMaxRanks = 64;
constexpr uint32_t kMailDepth = 32;          /* channel requests in flight per ordered rank pair */
constexpr uint32_t kJobMagic = 0x484b4a42;   /* "HKJB" */
constexpr uint32_t kJobVersion = 5; /* 3: ModelArea; 4: DiagSnap progress_ns and failed_*, JobRank::gone_ns; 5: P2PSig p2p_dir */
constexpr uint32_t kCommMagic = 0x434f4d4d;  /* "COMM" */
constexpr uint32_t kRootMagic = 0x524b4348;  /* "HCKR" read as little-endian bytes */

/* What HcclGetRootInfo writes at the start of HcclRootInfo.internal. */
struct RootBlob {
    uint32_t magic;   /* kRootMagic ("HCKR") */
    uint32_t version; /* 1: every rank on this host; 2: ranks may be on several hosts (mode, board) */
    char job[40];     /* job id: 32 hex characters, NUL-terminated */
    uint32_t uid;     /* creator's uid (segments live under /hcomm_kit.<uid>.) */
    uint32_t mode;    /* version 2: NetMode (HCOMM_KIT_TRANSPORT of the root) */
    NetBoardRef board; /* version 2: the rendezvous board in the root's process */
};

/* ------------------------------------------------------------------ hang-analysis board
 * Every rank publishes what its threads and streams are doing (diag/monitor.cc, a monitor thread per
 * process), so that any rank can explain a hang of the whole communicator. Fixed-size records,
 * written under a per-rank seqlock, read by copying. Thread codes: a device (AICPU) thread's number
 * within its communicator, or kStreamThread | stream id for a stream-bound (CPU_TS) thread
 * (hcomm/dataplane.h thread_code). */
constexpr uint32_t kDiagThreads = 96, kDiagStreams = 16, kDiagKernels = 16, kDiagChans = 64, kDiagRecs = 16,
                   kDiagOps = 16, kDiagPending = 8, kDiagUnclaimed = 32;

struct DiagWait {
    uint8_t kind;         /* SlotDesc kind: 0 thread slot, 1 channel slot, 2 ACL notify */
    uint8_t set;          /* the flag was set when the snapshot was taken (not really blocked) */
    uint16_t peer;        /* channel: remote rank */
    uint32_t index;       /* notify index in its thread / channel, or the ACL notify id */
    uint32_t slot;        /* absolute slot in the waiting rank's DevCtl */
    uint32_t slot_thread; /* kind 0: code of the thread owning the slot */
    uint32_t timeout_s;
    uint32_t inst;        /* instance of the waiting task's operation on its rank */
    uint32_t use;         /* channel waits: the waiter's use number of the channel */
    uint32_t tag16;
    uint32_t bidx, bsize; /* position of the task in its thread's batch */
    uint64_t since_ns;    /* when it started waiting (CLOCK_MONOTONIC: one clock for every rank) */
    uint64_t kseq;        /* kernel launch that emitted it */
    char api[56];
    char where[56];       /* source line of the call in the kernel ("exec_op.cc:42"), when known */
};
struct DiagRec {          /* a notify a thread or stream still has to set */
    int16_t rank;         /* rank owning the slot */
    uint16_t pad;
    uint32_t slot;
};
struct DiagThread {
    uint16_t code;        /* thread code (see above) */
    uint8_t state;        /* 1 runnable (head is not a wait, or its flag is set), 2 blocked on a wait, 3 failed */
    uint8_t nrec;         /* entries of rec[] used (more may exist: rec_more) */
    uint32_t queued;      /* tasks queued, head included */
    uint32_t rec_more;
    uint32_t pad;
    uint64_t executed;    /* tasks run so far */
    DiagWait head;        /* the head task (a wait when state == 2; api, op and position otherwise) */
    DiagRec rec[kDiagRecs];
    char tag[56];         /* op tag of the head task */
    char kernel[56];      /* kernel that emitted it */
};
struct DiagStream {
    uint32_t id;
    uint8_t state;        /* 1 runs a kernel, 2 waits on a notify, 3 waits in a barrier, 4 runs another task */
    uint8_t nrec;
    uint16_t thread;      /* code of the stream-bound thread of this communicator on it (0xffff: none) */
    uint32_t pending;     /* tasks queued behind the current one */
    uint32_t barrier_seq; /* state 3 */
    uint32_t rec_more;
    uint64_t since_ns;    /* current task started */
    uint64_t kseq;        /* state 1: the kernel launch */
    DiagWait wait;        /* state 2 */
    DiagRec rec[kDiagRecs];
    char what[72];        /* the current task in words */
};
struct DiagKernel {       /* a kernel launch whose work is not finished */
    uint64_t kseq;
    uint32_t stream;
    uint8_t running;      /* 1: the entry still runs (may still submit tasks); 0: returned, tasks queued */
    uint8_t pad[3];
    uint32_t queued;      /* its tasks still queued on this communicator's threads */
    uint32_t pad2;
    uint64_t start_ns;    /* running: when its entry started */
    uint64_t last_task_ns; /* running: when it last issued an Hcomm task (0: never) */
    uint64_t deadline_ns; /* running: its launch timeout ends it then (0: no timeout) */
    char name[56];
    char tag[56];
    char where[160];      /* running without issuing tasks: where its worker was sampled */
};
struct DiagPending {      /* a notify this rank recorded that is still set: nobody consumed it yet */
    int16_t owner;        /* rank owning the slot */
    uint16_t thread;      /* code of the recording thread */
    uint32_t slot;        /* absolute slot in the owner's DevCtl */
    uint32_t bidx, bsize, inst, use, tag16;
    uint64_t when_ns;     /* when it was recorded */
    char api[48];
    char where[56];       /* source line of the record call */
    char target[72];      /* "channel notify slot 1 of rank 0" */
    char tag[56];
};
struct DiagSetSlot {      /* a notify slot of this rank that is set and no queued wait of it consumes */
    uint32_t slot;
    uint32_t pad;
};
struct DiagChan {
    uint16_t peer;
    uint16_t pad;
    uint32_t uses;        /* operations that used this channel so far (use numbers 1..uses) */
    uint32_t submitted;   /* uses whose kernel returned (every task queued) */
    uint32_t done;        /* uses finished: kernel returned and no task left */
};
struct DiagOp {
    uint32_t tag16;
    uint32_t started;     /* instances of this tag launched so far */
    uint32_t submitted;   /* instances whose kernel returned (every task queued) */
    uint32_t done;        /* instances finished: kernel returned and no task left */
    char tag[56];
};
struct DiagSnap {
    uint32_t nthreads, nstreams, nkernels, nchans, nops, idle_threads;
    char host_call[120];       /* a control-plane call the host is blocked in ("" none) */
    uint64_t host_call_since;
    uint64_t host_connect;     /* HcclChannelAcquire: bit r = still waiting for rank r's end (0 none) */
    int32_t pid;
    int32_t device;
    uint32_t host_sync;        /* host threads blocked in a synchronising call */
    uint32_t host_sync_stream; /* the stream the latest of them waits for (0: event or device) */
    uint32_t pad;
    /* The latest HCCL call of this rank's host failed, so its part of that call (channels, kernel)
     * will not happen: the call and why, and the ranks it would have worked with (bit r); failed_ns
     * 0 when there is none (cleared by the host's next call). */
    uint64_t failed_ns, failed_peers;
    char failed_call[320];
    uint64_t taken_ns;
    uint64_t progress;         /* changes whenever any task of this rank completes */
    uint64_t progress_ns;      /* no task of this rank completed after this time (when a snapshot
                                * first saw the current progress): its records are all older */
    DiagThread threads[kDiagThreads];
    DiagStream streams[kDiagStreams];
    DiagKernel kernels[kDiagKernels];
    DiagChan chans[kDiagChans];
    DiagOp ops[kDiagOps];
    uint32_t npending, nunclaimed;
    DiagPending pending[kDiagPending];
    DiagSetSlot unclaimed[kDiagUnclaimed];
};
struct DiagArea {
    std::atomic<uint32_t> seq;          /* seqlock: odd while the owner rewrites snap */
    uint32_t pad;
    std::atomic<uint64_t> heartbeat_ns; /* the owner's monitor is alive and snap is current: the start
                                         * (taken_ns) of its latest build that found it unchanged */
    DiagSnap snap;
};

/* ------------------------------------------------------------------ race checker (diag/race.cc)
 * Happens-before over notify edges with vector clocks: every Hcomm thread of every rank has a
 * clock; a record publishes the recorder's clock vector in its rank's outbox (VcEntry, id in
 * DevCtl::flow of the slot), the wait that consumes it joins it. Accesses to HCCL-buffer bytes are
 * logged per owner rank in buckets of the buffer (AccessEntry, the latest kBucketDepth per bucket)
 * with the accessor's epoch; an access that overlaps a logged one of the same operation, one of
 * them a write, and is not ordered after it, is a race. A read of which any byte was last written
 * before its operation began (by happens-before), or never, reads stale data. */
constexpr uint32_t kVcMax = 120;       /* entries of a published clock vector */
constexpr uint32_t kVcRing = 512;      /* published vectors kept per rank */
constexpr uint32_t kBuckets = 256;     /* access-log buckets per HCCL buffer */
constexpr uint32_t kBucketDepth = 32;  /* accesses kept per bucket */
constexpr uint32_t kVcPerRank = 128;   /* clock indices per rank: g = rank * kVcPerRank + i */

struct VcEntry {
    std::atomic<uint64_t> id; /* record number (rank << 48 | n); written last */
    uint32_t n;               /* pairs used */
    uint32_t truncated;       /* the vector had more than kVcMax entries: joins are incomplete */
    uint64_t pairs[kVcMax];   /* g << 32 | clock, sorted by g */
};
struct AccessEntry {
    std::atomic<uint64_t> seq; /* bucket append number + 1; 0 = empty; written last */
    uint64_t off, len;         /* bytes [off, off + len) of the owner's HCCL buffer */
    uint64_t when_ns;
    uint32_t g, clock;         /* accessor's epoch */
    uint32_t tag16, inst;      /* accessor's operation */
    uint16_t rank;             /* accessor's rank */
    uint16_t thread;           /* accessor's thread code */
    uint8_t write;             /* 0 read, 1 write, 2 read-modify-write (reduce) */
    uint8_t pad[3];
    uint32_t bidx, bsize;
    int32_t pid;               /* accessor's process: its caller address means something only there */
    uint32_t pad2;
    uint64_t caller;           /* return address of the Hcomm call in the kernel */
    char api[40];
};
struct AccessBucket {
    std::atomic<uint64_t> appends;   /* entries ever appended */
    /* hull [~evicted_nlo, evicted_hi) of the writes pushed out of the ring (zero: none yet): bytes
     * outside it that no logged write covers were never written (stale-read check) */
    std::atomic<uint64_t> evicted_nlo, evicted_hi;
    AccessEntry e[kBucketDepth];
};
struct RaceArea {                    /* per rank: its outbox and the log of its HCCL buffer */
    std::atomic<uint64_t> records;   /* vectors published so far */
    uint64_t pad;
    VcEntry out[kVcRing];
    AccessBucket buckets[kBuckets];
};

/* A rank's description of its latest collective calls (collective mismatch check, diag/call_check.cc). */
constexpr uint32_t kCallDepth = 16;
struct CallSig {
    std::atomic<uint64_t> seq;     /* call number (1, 2, ...); written last */
    std::atomic<uint64_t> checked; /* the last call number this rank compared with the others' (stored
                                    * after the abort it made for a mismatch): settle_call waits for it */
    char text[240];                /* "all_reduce(count=100, dtype=fp32, op=sum)" */
};

constexpr uint32_t kP2PDepth = 4;
struct P2PSig {                /* the same for point-to-point calls, per ordered pair of ranks */
    std::atomic<uint64_t> seq;
    char text[120];
};
/* Point-to-point calls matched per direction (HcommKitP2PCheck): the k-th transfer from a sender to
 * a receiver is the sender's k-th send to it and the receiver's k-th receive from it. */
constexpr uint32_t kP2PDirDepth = 64; /* a window of 64 receives posted before the sends (osu_bibw) is checked whole */

/* ------------------------------------------------------------------ timing model (model/)
 * Every rank logs the tasks its kernels queue (model/record.cc): one ModelTask per task in a ring,
 * one ModelLaunch per kernel launch that queued tasks on this communicator. A wait task gets the
 * id of the record it consumed when it runs (DevCtl::mrec); a launch is complete when its kernel
 * returned and every wait of it ran. Any rank reads every rank's log to simulate one operation
 * (model/sim.cc). Task ids: kModelIdValid | rank << 48 | position in the rank's ring. */
constexpr uint32_t kModelTasks = 1u << 15;   /* task records kept per rank */
constexpr uint32_t kModelLaunches = 64;      /* launches kept per rank */
constexpr uint64_t kModelIdValid = 1ull << 63;

struct ModelTask {
    uint32_t launch;              /* launch number on its rank (ModelLaunch::number) */
    uint16_t thread;              /* thread code */
    uint8_t kind;                 /* mkind:: */
    uint8_t dtype;
    int16_t peer;                 /* remote rank (transfers, channel notifies), -1 */
    uint16_t pad;
    uint32_t index;               /* notify index (records, waits) */
    uint64_t bytes;               /* data bytes (copies, transfers, reductions) */
    std::atomic<uint64_t> matched; /* waits: id of the record consumed (0 not yet, kModelIdValid alone: not modelled) */
};
struct ModelLaunch {
    std::atomic<uint32_t> number; /* 0 while (re)written; launch l lives at l % kModelLaunches */
    std::atomic<uint32_t> closed; /* its kernel returned: no more tasks */
    std::atomic<int32_t> pending; /* waits not run yet */
    uint32_t tag16, inst;         /* its operation (op tag hash, instance on this rank) */
    std::atomic<uint32_t> overflow; /* more tasks than the ring holds */
    uint64_t first;               /* ring position of its first task */
    std::atomic<uint64_t> end;    /* one past its last task */
    uint64_t kseq;
    char tag[56];
};
struct ModelArea {
    std::atomic<uint64_t> next;     /* positions handed out */
    std::atomic<uint32_t> launches; /* launches started (the latest is number `launches`) */
    uint32_t pad;
    ModelLaunch l[kModelLaunches];
    ModelTask t[kModelTasks];
};

/* Rank states in the job segment. */
enum : uint32_t { kRankFree = 0, kRankClaimed = 1, kRankPublished = 2, kRankAttached = 3, kRankGone = 4 };

/* One rank's entry in the job segment. Strings are written before state becomes Published
 * (release) and only read after seeing it (acquire). */
struct JobRank {
    std::atomic<uint32_t> state;    /* kRank* */
    std::atomic<int32_t> pid;       /* process of the rank */
    std::atomic<int32_t> device;    /* device id the rank runs on */
    uint32_t pad0;
    std::atomic<uint64_t> buf_size; /* bytes of its HCCL buffer */
    std::atomic<uint64_t> gone_ns;  /* when it became kRankGone (written before state) */
    char gone_after[256];           /* it left right after a failed call: that call and why ("" none) */
    char ctl_name[96];              /* its device control block (DevCtl) segment */
    char buf_name[96];              /* its HCCL buffer segment (unlinked once everyone mapped it) */
};

/* A channel request from rank a to rank b, stamped with the pair's sequence number. */
struct MailEntry {
    std::atomic<uint64_t> seq; /* 0 = empty; written last (release) */
    uint32_t notify_num;       /* slots per end */
    int32_t protocol;          /* CommProtocol */
    uint32_t slot_base;        /* sender's first slot in its own DevCtl */
    int32_t engine;            /* CommEngine */
    uint64_t pad;
};

/* Ring of requests posted by one rank to another: mail[from][to]. */
struct MailBox {
    std::atomic<uint64_t> consumed; /* highest seq the receiver has taken (written by the receiver) */
    uint64_t pad[7];
    MailEntry e[kMailDepth];        /* entry of seq s lives at e[s % kMailDepth] */
};

/* The rendezvous segment of one communicator (zero-filled on creation = empty). */
struct JobSeg {
    std::atomic<uint32_t> magic;       /* kJobMagic once initialised by the creator */
    uint32_t version;                  /* kJobVersion */
    std::atomic<uint32_t> nranks;      /* set by the first arriver (CAS from 0) */
    std::atomic<uint32_t> arrived;     /* ranks that published their entry */
    std::atomic<uint32_t> attached;    /* ranks that mapped every peer */
    std::atomic<uint32_t> wake;        /* bumped on every bootstrap / mailbox change (futex) */
    std::atomic<uint32_t> abort_state; /* 0 none, 1 being written, 2 set (reason valid) */
    std::atomic<int32_t> abort_rank;   /* rank that aborted first */
    std::atomic<uint32_t> abort_kind;  /* AbortKind of the first abort */
    uint32_t pad0;
    std::atomic<uint64_t> abort_ns;    /* when (CLOCK_MONOTONIC) */
    char abort_reason[16384];          /* first abort reason (hang reports included) */
    std::atomic<uint32_t> bar_count;   /* ranks inside the current barrier */
    std::atomic<uint32_t> bar_gen;     /* barriers completed (futex) */
    std::atomic<uint64_t> attention_ns; /* a rank has a long wait: every monitor publishes each tick */
    std::atomic<uint32_t> trace_done;   /* ranks that wrote their HCOMM_KIT_TRACE part at destroy */
    std::atomic<uint32_t> link_told;    /* a call over a downed link was reported on stderr (once per job) */
    uint32_t pad[10];
    std::atomic<uint32_t> bar_seq[kMaxRanks]; /* latest barrier each rank arrived at */
    JobRank ranks[kMaxRanks];
    MailBox mail[kMaxRanks][kMaxRanks]; /* mail[from][to] */
    DiagArea diag[kMaxRanks];
    CallSig calls[kMaxRanks][kCallDepth];  /* calls[rank][seq % kCallDepth] */
    P2PSig p2p[kMaxRanks][kMaxRanks][kP2PDepth]; /* p2p[from][to][seq % kP2PDepth] */
    /* p2p_dir[sender][receiver][0: the sender's call, 1: the receiver's][transfer % kP2PDirDepth] */
    P2PSig p2p_dir[kMaxRanks][kMaxRanks][2][kP2PDirDepth];
    RaceArea race[kMaxRanks];
    ModelArea model[kMaxRanks];
};

struct EngineCtxBlock {
    void* ptr = nullptr;
    uint64_t size = 0;
    bool device = false; /* device memory (registered) or host memory */
};

struct Comm {
    uint32_t magic = kCommMagic;
    Device* dev = nullptr;
    Context* ctx = nullptr; /* context current at init (internal streams are created here) */
    uint32_t rank = 0, nranks = 0;
    std::string name, jobid;
    ShmSeg job_seg;
    JobSeg* job = nullptr;
    ShmSeg buf_seg; /* own HCCL buffer */
    void* buf = nullptr;
    uint64_t buf_size = 0;
    /* per rank (index = rank; own entry: ctl = dev->ctl, no segments) */
    std::vector<ShmSeg> ctl_seg, pbuf_seg;
    std::vector<DevCtl*> ctl;
    std::vector<void*> pbuf;
    std::vector<uint64_t> pbuf_size;
    std::vector<int> pid, device;
    std::unique_ptr<std::atomic<uint64_t>[]> live_checked; /* last liveness probe (ns) */
    std::unique_ptr<std::atomic<bool>[]> dead;             /* sticky */

    std::atomic<bool> destroying{false}; /* HcclCommDestroy's teardown has begun */
    std::atomic<uint32_t> findings_held{0}; /* HCOMM_KIT_FAULT_FINDING_HOLD_MS: findings waiting for the destroy */
    std::mutex use_m; /* comm_use_lock (HcommAcquireComm); taken with try_lock + backoff (comm_use_acquire) */
    /* Lock order: use_m, then m, then ops_m, then diag_m. Device-thread runners (the executor, stream
     * workers helping in their waits) take only ops_m (and diag_m), never m or use_m: the host holds
     * m across long control-plane waits (channel set-up), and HcclCommDestroy waits for the runners. */
    std::mutex m;     /* everything below but ops, vc_threads and what diag_m guards */
    std::vector<HThread*> threads;
    std::vector<Stream*> own_streams;
    std::map<std::pair<Stream*, uint32_t>, HThread*> stream_threads; /* (stream, stream id) */
    std::map<std::tuple<int, uint32_t, int>, Channel*> channels;   /* (engine side, peer, protocol) */
    std::vector<uint64_t> send_seq, recv_seq;                        /* channel mailbox sequence per peer */
    std::map<std::pair<std::string, int>, EngineCtxBlock> ctxs;      /* (tag, engine side) */
    std::map<std::string, EngineCtxBlock> devmem;                    /* HcclDevMemAcquire */
    uint32_t barrier_seq = 0;
    std::atomic<uint32_t> connect_timeout_s{0}; /* channel set-up wait (s), HcommKitCommSetConnectTimeout; 0: HCCL_CONNECT_TIMEOUT */
    /* operation instances per op tag hash, see KernelCtx::ops */
    struct OpTrack {
        std::string tag;
        uint32_t started = 0;   /* instances launched (numbers 1..started) */
        uint32_t submitted = 0; /* instances whose kernel returned */
        uint64_t kseq[8] = {};  /* kernel launch of instance n at [n % 8] */
    };
    std::mutex ops_m;             /* ops and vc_threads: a leaf lock, never held while waiting */
    std::map<uint32_t, OpTrack> ops;
    uint32_t vc_threads = 0;      /* race checker: clock indices handed to this rank's threads */
    uint32_t aicpu_threads = 0;   /* device threads acquired so far (their numbers t0, t1, ...) */
    uint64_t call_seq = 0;        /* collective calls checked (diag/call_check.cc) */
    /* Hang analysis: the last thread / channel lists it read under m (used while m is held by a
     * long control-plane call), and that call (host blocked in it since cp_since). Under diag_m. */
    std::mutex diag_m;
    std::vector<HThread*> diag_threads;
    std::vector<std::pair<uint32_t, Channel*>> diag_chans;
    uint64_t diag_progress = ~0ull, diag_progress_ns = 0; /* DiagSnap::progress, and when it last changed */
    std::string failed_call;                              /* DiagSnap::failed_*: comm_note_failed_call */
    uint64_t failed_ns = 0, failed_peers = 0;
    std::string cp_what;
    uint64_t cp_since = 0;
    uint64_t cp_peers = 0; /* HcclChannelAcquire: bitmap of the ranks whose end has not matched yet */
    std::vector<uint64_t> p2p_seq; /* point-to-point calls checked, per peer */
    std::vector<uint64_t> p2p_sent, p2p_received; /* ... per peer and direction (HcommKitP2PCheck) */
    /* rank-graph answers (valid until the next query) */
    std::vector<CommLink> links;
    std::vector<uint32_t> graph_list;
    std::vector<uint32_t> layer_list;
    Topology topo; /* fixed at init (hccl/topology.h) */
    /* Ranks reached over the network (net/transport.h); all empty for a one-host communicator. */
    NetMode net = NetMode::Shm;
    uint64_t net_key = 0;          /* key of its control messages (net_job_key); 0: no network */
    NetBoardRef board{};           /* where its ranks met; its sub-communicators meet there too */
    NetMem* net_mem = nullptr;     /* its HCCL buffer, registered for remote access */
    NetMem* area_mem = nullptr;    /* its model log (job->model[rank]), registered for the far ranks to read */
    std::vector<PeerLink*> link;   /* per rank: the link to it (nullptr: its memory is mapped here) */
    std::vector<uint8_t> far;      /* per rank: on another host (not in this host's job segment) */
    std::vector<uint8_t> far_lead; /* per rank: the lowest rank of its host, another host (gets what a host's
                                    * ranks share in its job segment, once per host: the call check) */
    std::vector<std::string> host; /* per rank: its host's name */
    std::vector<void*> standin;    /* per far rank: a never-set stand-in of its DevCtl (ctl[r]) */
    uint32_t nlocal = 0;           /* ranks on this host, this one included */
    std::map<uint64_t, uint32_t> sub_made; /* sub-communicators made per subCommId (their board key) */
    /* The built-ins' algorithm selection (hccl/algo_select.h), fixed at init: CANN's topology
     * fields of this rank, HCCL_ALGO (config->hcclAlgo, else the environment), HCCL_USE_NEW_SELECTOR. */
    CannTopoInfo cann_topo;
    AlgoConfig algo_cfg;
    bool new_selector = false;
};

/* Validates an HcclComm; nullptr if it is not a live communicator of this process. */
Comm* comm_from_handle(HcclComm h);
/* ------------------------------------------------------------------ internal to hccl/ */

/* The communicators of this process (comm_from_handle), under g_comms_m. */
extern std::mutex g_comms_m;
extern std::unordered_set<Comm*> g_comms;
/* now + s seconds, or 0 (no deadline) for s = 0. */
uint64_t secs_deadline(uint32_t s);
/* Bumps the job segment's wake word and wakes its sleepers (bootstrap, mailboxes). */
void job_wake(JobSeg* j);
/* Sets the job-wide abort flag (first writer wins). Returns true if this call set it. */
bool job_set_abort(JobSeg* j, int rank, const std::string& why, AbortKind kind = AbortKind::Other);
bool job_aborted(JobSeg* j, std::string* why);
/* Is peer r dead? Uses the control-block lock once mapped, the pid before. */
bool peer_dead_now(Comm* c, uint32_t r);
/* Outcome of comm_wait. */
enum WaitRc { kWaitOk = 0, kWaitTimeout = 1, kWaitAborted = 2, kWaitPeerDead = 3 };
/* Waits until done() on word (shared futex), checking the abort flag and the liveness of the
 * ranks in `peers` (nullptr = all) every 200 ms. deadline 0 = none. */
int comm_wait(Comm* c, std::atomic<uint32_t>* word, uint64_t deadline, const std::function<bool()>& done,
              const std::vector<uint32_t>* peers, std::string* why);
/* Releases everything bootstrap acquired (failure paths and destroy; bootstrap.cc). */
void comm_release_segments(Comm* c);
/* Control messages of a communicator with ranks on other hosts (net_ctl.cc). Sends m to every
 * rank on another host (to = each); failures to reach a dead rank are ignored. */
void net_send_far(Comm* c, CtlMsg m, const void* payload = nullptr, size_t len = 0);
/* The collective-call check across hosts (diag/call_check.cc): this rank posted call seq (text) /
 * compared it with the others'; the other hosts' job segments get it (no-op on one host). */
void comm_call_posted(Comm* c, uint64_t seq, const char* text);
void comm_call_checked(Comm* c, uint64_t seq);
/* What comm_abort does after the first abort was set: the other hosts learn it, this host's waiters
 * wake, the device threads drop their queues. */
void comm_abort_spread(Comm* c, const std::string& why, AbortKind kind);
/* HcclBarrier's arrival of rank r at barrier seq on the host of rank 0 (comm.cc): true when it was
 * the last, and the barrier is released. */
bool barrier_arrive(Comm* c, uint32_t r, uint32_t seq);
/* Rank r runs on another host. */
inline bool comm_far(const Comm* c, uint32_t r) { return r < c->far.size() && c->far[r]; }
/* How long channel set-up waits for the peers' ends (HcommKitCommSetConnectTimeout, else
 * HCCL_CONNECT_TIMEOUT). */
uint32_t connect_timeout_s(const Comm* c);

/* 0, or the error (api) for a CommEngine a thread or an engine context cannot use (threads.cc). */
int check_thread_engine(int engine, const char* api);

/* Stream handle `stream` (NULL: the current default stream) for work of communicator c: nullptr with
 * *rc set (HCCL_E_PARA) when it is not a live stream or not on c's device. */
Stream* comm_stream(Comm* c, aclrtStream stream, const char* api, int* rc);

/* In an API function: resolves comm handle h into var, or returns the error. */
#define RESOLVE_COMM(var, h)                                                                      \
    Comm* var = comm_from_handle(h);                                                              \
    if (!(h)) return (HcclResult)seterr(HCCL_E_PTR, __func__, "comm is NULL");                              \
    if (!var) return (HcclResult)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", (void*)(h))

/* In an API function: returns HCCL_E_PTR when pointer argument p is NULL. */
#define NEED_PTR(p) \
    if (!(p)) return (HcclResult)seterr(HCCL_E_PTR, __func__, #p " is NULL")

/* The host is blocked in a control-plane call of c (what = nullptr: it returned); hang analysis. */
void comm_note_host_call(Comm* c, const char* what);
/* Drops CANN's tuner plugin state of a communicator (tuner.cc; HcclCommDestroy). */
void tuner_forget(Comm* c);
/* The host waits in HcclChannelAcquire for the ranks in the bitmap peers (0: no longer). */
void comm_note_connect(Comm* c, uint64_t peers);
/* A call failed on a downed link (text: the full message): on stderr once per job (C hosts that only
 * check return codes see it there), in the rank's log always. */
void comm_tell_link_failure(Comm* c, const std::string& text);
/* The host's HCCL call failed (text: "Api: why") before doing its part with the ranks in the bitmap
 * peers, who may be waiting for it: published on the board, where the hang analysis fails their waits
 * at once naming it (a rank whose call failed and that makes no other call will not do its part). */
void comm_note_failed_call(Comm* c, const std::string& text, uint64_t peers);
/* The host makes another call: what comm_note_failed_call published no longer holds. */
void comm_clear_failed_call(Comm* c);
/* "rank R (pid P) already destroyed its communicator (HcclCommDestroy)[ right after its call failed: ...]" */
std::string comm_gone_msg(Comm* c, uint32_t r);
/* "the HCCS link between rank a and rank b is down (HCOMM_KIT_LINKS_DOWN=...)"; needed: "..., which is
 * down (...)" (after "needs"). */
std::string link_down_text(const Comm* c, uint32_t a, uint32_t b, bool needed = false);

}  // namespace emu

#endif
