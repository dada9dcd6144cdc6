/*
 * hcomm-kit CPU emulator, the timing model: a deterministic discrete-event simulation of the task
 * graph a kernel really issued, on per-product parameters (model/params/<product>.toml, compiled
 * into model_params.json beside the library by hcomm_kit/build/emulator.py).
 *
 *   record.cc  logs every task a kernel queues into the rank's ModelArea of the job segment
 *              (hcomm hooks: emit, a wait's matched record, kernel end);
 *   params.cc  reads the parameters of a product;
 *   sim.cc     gathers every rank's log of one operation and simulates it;
 *   explain.cc what a simulated operation's time is made of (links, threads, critical-path phases);
 *   api.cc     the C extensions (HcommKitModelLastTime, HcommKitModelExplain).
 *
 * The modelled time never depends on the host: only the logged graph (what the kernel issued and
 * which record each wait consumed) and the parameters go in.
 */
#ifndef HCOMM_KIT_EMU_MODEL_MODEL_H
#define HCOMM_KIT_EMU_MODEL_MODEL_H

#include "hccl/comm.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace emu {

/* One link type's parameters (model/params/<product>.toml; every figure per direction). A transfer
 * of B bytes waits latency_us once its task has started, then moves its bytes at the smallest of
 * one stream's bandwidth in its direction (write or read) and its fair share of the directed
 * link (link) and of each end's ports of that type (port). */
struct LinkParams {
    double latency_us = 0;      /* before the first byte moves */
    double notify_us = 0;       /* a channel notify record reaches the peer after this */
    double write = 0;           /* bytes/us of one stream writing (initiator -> peer) */
    double read = 0;            /* bytes/us of one stream reading (peer -> initiator) */
    double link = 0;            /* bytes/us of all streams on one directed link together */
    double port = 0;            /* bytes/us of an NPU's links of this type together (0: no limit) */
};

struct ModelParams {
    std::string product, file;
    double task_us = 0;         /* the AICPU issues one task per task_us, in the kernel's order, never
                                 * waiting for an earlier task to run (only the task's start does) */
    double launch_us = 0;       /* host launch of the kernel until its first task is issued */
    double thread_notify_us = 0; /* a thread notify (same NPU) reaches its waiter */
    double copy = 0;            /* local copy, bytes/us */
    double reduce = 0;          /* local reduce, bytes/us (default for every dtype) */
    std::vector<std::pair<int, double>> reduce_dtype; /* (dtype, bytes/us) where it differs */
    LinkParams link[4];         /* by LinkType (HCCS, UB, RoCE; None unused) */
    double reduce_bw(int dtype) const;
};

/* The parameters of product ("A2", "A3", "950"); nullptr with *err naming the file or the value. */
const ModelParams* model_params(const std::string& product, std::string* err);

/* Logging on (HCOMM_KIT_MODEL unset or 1) or off (0). */
bool model_logging();

/* One simulated operation. */
struct ModelTaskTime {
    uint32_t rank = 0;
    uint16_t thread = 0;
    uint8_t kind = 0;
    uint8_t dtype = 0;
    int16_t peer = -1;
    LinkType link = LinkType::None;
    uint32_t index = 0;
    uint64_t bytes = 0;
    uint32_t seq = 0;           /* position in its rank's issue order */
    double issue = 0, start = 0, end = 0; /* us from the host launch */
    int pred = -1;              /* the task whose end decided this one's start (critical path), -1: its issue */
    uint8_t why = 0;            /* 0 issued (AICPU), 1 its thread's previous task, 2 the notify it waited for, 3 link sharing */
    uint64_t id = 0;            /* model id (rank << 48 | ring position) */
    int src = -1;               /* waits: the task whose record it consumed (-1: none of this operation) */
};
/* One directed link's use over an operation (explain.cc). */
struct ModelLinkUse {
    uint32_t from = 0, to = 0;  /* the bytes move from -> to (a read's peer is its from) */
    LinkType type = LinkType::None;
    uint64_t bytes = 0;
    uint32_t transfers = 0;
    double busy_us = 0;         /* time with at least one of its transfers moving bytes */
};
/* One device thread's use over an operation. */
struct ModelThreadUse {
    uint32_t rank = 0;
    uint16_t thread = 0;
    uint32_t tasks = 0;
    uint64_t bytes = 0;         /* moved or reduced by its copies, reductions and transfers */
    double busy_us = 0;         /* running copies, reductions and transfers */
    double wait_us = 0;         /* in notify waits */
};
/* A stretch of the critical path and what bound it. */
enum class PhaseKind : uint8_t { Launch = 0, Issue, Link, Local, Peer };
struct ModelPhase {
    PhaseKind kind = PhaseKind::Launch;
    uint32_t rank = 0;          /* the rank it ran on (Peer: the waiting rank) */
    uint16_t thread = 0;
    int32_t peer = -1;          /* Link: the other end; Peer: the recording rank */
    LinkType link = LinkType::None;
    bool read = false;          /* Link: the transfers read (else write) */
    bool shared = false;        /* Link: a transfer shared its link or ports with another */
    uint32_t tasks = 0;         /* Issue: tasks its rank issued before the path's first; else tasks in it */
    uint64_t bytes = 0;
    double start = 0, end = 0;
    uint8_t kinds = 0;          /* Local: 1 copy, 2 reduce (bits); Link: 1 plain, 2 with reduction */
};

struct ModelResult {
    double time_us = 0;
    std::string product, tag;
    uint32_t inst = 0;
    std::vector<uint32_t> ranks;
    std::vector<ModelTaskTime> tasks;
    std::vector<int> critical;  /* task indices, first to last */
    std::vector<std::string> notes;
    /* Filled by analyse() (explain.cc), for `model explain`; empty otherwise (the figure alone
     * does not need them). */
    bool analysed = false;
    double task_us = 0, launch_us = 0;
    std::vector<ModelLinkUse> links;                 /* links that carried bytes, busiest first */
    std::vector<std::pair<uint32_t, uint32_t>> idle; /* directed links up between the ranks that carried nothing */
    std::vector<ModelThreadUse> threads;
    std::vector<ModelPhase> phases;                  /* the critical path, first to last */
    void analyse(const ModelParams& p, const Topology& topo);
    std::string analysis_json() const; /* analyse()'s keys, each with a leading comma ("" before it) */
    /* One JSON object: the figure and the critical path (the keys HcommKitModelExplain documents),
     * with analyse()'s keys when it ran, every task with all_tasks. */
    std::string json(bool all_tasks) const;
    /* The operation as Chrome / Perfetto trace event items (comma-separated, no brackets) on the
     * modelled clock, offset_us added to every time: per rank (pid) a slice per task on its
     * thread's track (tid = thread code; cat as the host-clock trace's, ",critical" added and
     * args.critical on the critical path),
     * which is also copied onto a "critical path (modelled)" track of its rank; the operation on an
     * "operations (modelled)" track of every rank; a flow arrow per notify edge (ids from *flow).
     * tracks: the (pid, tid) already named, extended with those this adds a name for. The one
     * writer of modelled traces: HCOMM_KIT_TRACE_CLOCK=model, and so `hcomm-kit model explain --trace`. */
    std::string trace_events(double offset_us, uint64_t* flow, std::set<std::pair<uint32_t, uint32_t>>* tracks) const;
};

/* Simulates the latest operation this rank ran on c (its last launch that queued tasks) with the
 * launches of every rank of c for the same operation call (op tag and instance). Waits up to
 * wait_s for every rank to have logged and finished it. 0, or an HCCL code with *err. */
int model_last(Comm* c, double wait_s, ModelResult* out, std::string* err);

/* Every operation this rank still holds in its log of c (at most kModelLaunches launches, oldest
 * first), each simulated with every rank's launch of the same call and laid end to end on one
 * modelled clock (an operation starts when the previous one ended): trace event items
 * (ModelResult::trace_events), "" when there is nothing; *note says what was left out. */
std::string model_trace(Comm* c, double wait_s, std::string* note);

/* The simulation itself: per rank (ranks[i]) its tasks in issue order. */
struct ModelInputTask {
    uint16_t thread;
    uint8_t kind, dtype;
    int16_t peer;
    uint32_t index;
    uint64_t bytes;
    uint64_t id, matched;
};
void model_simulate(const ModelParams& p, const Topology& topo, const std::vector<uint32_t>& ranks,
                    const std::vector<std::vector<ModelInputTask>>& tasks, ModelResult* out);

const char* mkind_name(uint8_t kind);

}  // namespace emu

#endif
