/*
 * hcomm-kit CPU emulator: the HCCL host control plane (comm.cc), internal declarations.
 *
 * A communicator's ranks meet in a "job" shared-memory segment named after the job id carried
 * by the root info (or derived from the rank-table file). The segment holds the rank table
 * (pid, device, control-block and HCCL-buffer segment names), the job-wide abort flag, the
 * barrier words and the channel mailboxes. Ranks may be processes or threads of one process:
 * everything goes through shared memory either way. Other emulator sources only use the
 * comm_* accessors declared at the bottom of emu.h.
 */
#ifndef HCOMM_KIT_EMU_COMM_H
#define HCOMM_KIT_EMU_COMM_H

#include "emu.h"

#include <tuple>

namespace emu {

constexpr uint32_t kMaxRanks = 64;
constexpr uint32_t kMailDepth = 32;          /* channel requests in flight per ordered rank pair */
constexpr uint32_t kJobMagic = 0x484b4a42;   /* "HKJB" */
constexpr uint32_t kJobVersion = 1;
constexpr uint32_t kCommMagic = 0x434f4d4d;  /* "COMM" */
constexpr uint32_t kRootMagic = 0x524b4348;  /* "HCKR" read as little-endian bytes */

/* What HcclGetRootInfo writes at the start of HcclRootInfo.internal. */
struct RootBlob {
    uint32_t magic;   /* kRootMagic ("HCKR") */
    uint32_t version; /* 1 */
    char job[40];     /* job id: 32 hex characters, NUL-terminated */
    uint32_t uid;     /* creator's uid (segments live under /hcomm_kit.<uid>.) */
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
    char abort_reason[512];            /* first abort reason */
    std::atomic<uint32_t> bar_count;   /* ranks inside the current barrier */
    std::atomic<uint32_t> bar_gen;     /* barriers completed (futex) */
    uint32_t pad[14];
    JobRank ranks[kMaxRanks];
    MailBox mail[kMaxRanks][kMaxRanks]; /* mail[from][to] */
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

    std::mutex use_m; /* comm_use_lock (HcommAcquireComm) */
    std::mutex m;     /* everything below */
    std::vector<HThread*> threads;
    std::vector<Stream*> own_streams;
    std::map<std::pair<Stream*, uint32_t>, HThread*> stream_threads; /* (stream, stream id) */
    std::map<std::tuple<int, uint32_t, int>, Channel*> channels;   /* (engine side, peer, protocol) */
    std::vector<uint64_t> send_seq, recv_seq;                        /* channel mailbox sequence per peer */
    std::map<std::pair<std::string, int>, EngineCtxBlock> ctxs;      /* (tag, engine side) */
    std::map<std::string, EngineCtxBlock> devmem;                    /* HcclDevMemAcquire */
    uint32_t barrier_seq = 0;
    /* rank-graph answers (valid until the next query) */
    std::vector<CommLink> links;
    std::vector<uint32_t> graph_list;
    uint32_t layer0 = 0;
};

/* Validates an HcclComm; nullptr if it is not a live communicator of this process. */
Comm* comm_from_handle(HcclComm h);

}  // namespace emu

#endif
