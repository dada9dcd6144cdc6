/* HCCL host plane: the communicator (hcomm.md §3.6): the registry of this process's communicators,
 * the job-wide abort flag and the waits that watch it and the peers' liveness, the accessors the
 * data plane uses (hcomm/dataplane.h), rank queries, HcclBarrier and HcclCommDestroy. Creation
 * (bootstrap) is in bootstrap.cc; threads, channels, buffers and the rank graph in their files.
 *
 * Liveness. A peer is dead when nobody holds the owner lock of its device control block any
 * more (shm_owner_dead), or before that segment is mapped, when its pid is gone. Every wait
 * here (bootstrap, channel handshake, barrier) checks liveness and the job-wide abort flag
 * every 200 ms, so a crash surfaces within about a second instead of the full timeout. */
#include "acl/hooks.h"
#include "hccl/comm.h"
#include "hccl/hooks.h"


#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace emu {

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free");
static_assert(sizeof(RootBlob) <= HCCL_ROOT_INFO_BYTES, "root blob too large");

std::mutex g_comms_m;
std::unordered_set<Comm*> g_comms;

namespace {
constexpr uint64_t kPollNs = 200000000ull;   /* liveness / abort check period */
constexpr uint64_t kProbeNs = 100000000ull;  /* at most one liveness probe per peer per 100 ms */
}  // namespace

uint64_t secs_deadline(uint32_t s) { return s ? now_ns() + (uint64_t)s * 1000000000ull : 0; }

void job_wake(JobSeg* j) {
    j->wake.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&j->wake, INT_MAX, true);
}

/* Sets the job-wide abort flag (first writer wins). Returns true if this call set it. */
bool job_set_abort(JobSeg* j, int rank, const std::string& why, AbortKind kind) {
    uint32_t z = 0;
    if (!j->abort_state.compare_exchange_strong(z, 1)) return false;
    snprintf(j->abort_reason, sizeof j->abort_reason, "%s", why.c_str());
    j->abort_rank.store(rank);
    j->abort_kind.store((uint32_t)kind);
    j->abort_ns.store(now_ns());
    j->abort_state.store(2, std::memory_order_release);
    job_wake(j);
    futex_wake(&j->bar_gen, INT_MAX, true);
    return true;
}

bool job_aborted(JobSeg* j, std::string* why) {
    uint32_t s = j->abort_state.load(std::memory_order_acquire);
    if (s == 0) return false;
    for (int i = 0; i < 1000 && s == 1; i++) {
        std::this_thread::yield();
        s = j->abort_state.load(std::memory_order_acquire);
    }
    if (why) {
        if (s == 2) *why = strprintf("communicator aborted by rank %d: %s", j->abort_rank.load(), j->abort_reason);
        else *why = "communicator is being aborted";
    }
    return true;
}

/* Is peer r dead? Uses the control-block lock once mapped, the pid before. */
bool peer_dead_now(Comm* c, uint32_t r) {
    if (r == c->rank) return false;
    if (c->dead[r].load()) return true;
    if (comm_far(c, r)) return comm_peer_dead(c, (int)r);
    int pid = c->pid[r];
    if (pid <= 0 || pid == (int)getpid()) return false;
    if (c->ctl_seg[r].fd >= 0) return comm_peer_dead(c, (int)r);
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        c->dead[r].store(true);
        return true;
    }
    return false;
}

/* Waits until done() on word (shared futex), checking the abort flag and the liveness of the
 * ranks in `peers` (nullptr = all) every 200 ms. deadline 0 = none. */
int comm_wait(Comm* c, std::atomic<uint32_t>* word, uint64_t deadline, const std::function<bool()>& done,
              const std::vector<uint32_t>* peers, std::string* why) {
    int fail = kWaitOk;
    uint64_t last = now_ns();
    auto check = [&]() -> bool {
        if (job_aborted(c->job, why)) {
            fail = kWaitAborted;
            return true;
        }
        auto one = [&](uint32_t r) {
            if (r != c->rank && c->job->ranks[r].state.load() == kRankGone) {
                fail = kWaitPeerDead;
                *why = comm_gone_msg(c, r);
                return true;
            }
            if (peer_dead_now(c, r)) {
                fail = kWaitPeerDead;
                *why = comm_dead_msg(c, r);
                return true;
            }
            return false;
        };
        if (peers) {
            for (uint32_t r : *peers)
                if (one(r)) return true;
        } else {
            for (uint32_t r = 0; r < c->nranks; r++)
                if (one(r)) return true;
        }
        return false;
    };
    auto pred = [&]() -> bool {
        if (done()) return true;
        if (c->job->abort_state.load(std::memory_order_relaxed) != 0) return check();
        uint64_t now = now_ns();
        if (now - last >= kPollNs) {
            last = now;
            return check();
        }
        return false;
    };
    if (check()) return fail;
    wait_word(word, true, deadline, pred, kPollNs);
    if (done()) return kWaitOk;
    if (fail) return fail;
    if (check()) return fail;
    return kWaitTimeout;
}

/* ------------------------------------------------------------------ accessors (hcomm/dataplane.h) */

/* How long channel set-up waits for the peers' ends: the communicator's own timeout when one was
 * set (HcommKitCommSetConnectTimeout: a torch group's timeout), else HCCL_CONNECT_TIMEOUT. */
uint32_t connect_timeout_s(const Comm* c) {
    uint32_t s = c->connect_timeout_s;
    return s ? s : cfg().connect_timeout_s;
}

Comm* comm_from_handle(HcclComm h) {
    if (!h) return nullptr;
    std::lock_guard<std::mutex> g(g_comms_m);
    Comm* c = static_cast<Comm*>(h);
    return g_comms.count(c) ? c : nullptr;
}

Device* comm_device(Comm* c) { return c->dev; }

Comm* comm_find_by_name(const char* name, Device* dev) {
    if (!name) return nullptr;
    std::lock_guard<std::mutex> g(g_comms_m);
    Comm* any = nullptr;
    for (Comm* c : g_comms) {
        if (c->name != name) continue;
        if (!dev || c->dev == dev) return c;
        any = c;
    }
    return dev ? nullptr : any;
}

std::mutex& comm_use_lock(Comm* c) { return c->use_m; }

bool comm_use_acquire(Comm* c, const std::function<bool()>& stop) {
    if (c->use_m.try_lock()) return true;
    uint64_t next_check = now_ns() + 100000000ull, nap_us = 10;
    while (!c->use_m.try_lock()) {
        if (now_ns() >= next_check) {
            if (stop()) return false;
            next_check = now_ns() + 100000000ull;
        }
        usleep((useconds_t)nap_us);
        if (nap_us < 1000) nap_us *= 2;
    }
    return true;
}

bool comm_aborted(Comm* c, std::string* why) { return c->job && job_aborted(c->job, why); }

bool comm_abort_info(Comm* c, AbortKind* kind, int* rank) {
    if (!c->job || !job_aborted(c->job, nullptr)) return false;
    if (kind) *kind = (AbortKind)c->job->abort_kind.load();
    if (rank) *rank = c->job->abort_rank.load();
    return true;
}

int abort_code(AbortKind kind, bool self) {
    switch (kind) {
        case AbortKind::Deadlock: return ACL_ERROR_RT_TASK_TIMEOUT; /* every stuck rank would have timed out */
        case AbortKind::Timeout:
        case AbortKind::KernelTimeout: return self ? ACL_ERROR_RT_TASK_TIMEOUT : ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
        case AbortKind::Check: return kCheckErrorCode;
        default: return ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
    }
}

int comm_abort_code(Comm* c, uint64_t started_ns) {
    AbortKind k = AbortKind::Other;
    int r = -1;
    if (!comm_abort_info(c, &k, &r)) return ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
    /* Work started after the abort fails because the communicator is gone: a remote error. */
    if (started_ns && started_ns > c->job->abort_ns.load()) return ACL_ERROR_RT_SUSPECT_REMOTE_ERROR;
    return abort_code(k, r == (int)c->rank);
}

uint32_t comm_size(Comm* c) { return c->nranks; }

void comm_buffer(Comm* c, void** base, uint64_t* size) {
    *base = c->buf;
    *size = c->buf_size;
}

DevCtl* comm_ctl(Comm* c, uint32_t rank) { return rank < c->nranks ? c->ctl[rank] : nullptr; }

bool comm_peer_gone(Comm* c, int peer) {
    return c->job && peer >= 0 && (uint32_t)peer < c->nranks && (uint32_t)peer != c->rank &&
           c->job->ranks[peer].state.load() == kRankGone;
}

bool comm_abort(Comm* c, const std::string& why, AbortKind kind) {
    if (!c->job) return false;
    bool first = job_set_abort(c->job, (int)c->rank, why, kind);
    if (first) comm_abort_spread(c, why, kind);
    else {
        for (uint32_t r = 0; r < c->nranks; r++)
            if (c->ctl[r] && !c->dead[r].load()) doorbell_ring(c->ctl[r]);
        sched_abort_comm(c);
    }
    return first;
}

void comm_abort_spread(Comm* c, const std::string& why, AbortKind kind) {
    if (c->net_key) { /* the hosts of the other ranks learn it from this one */
        CtlMsg m;
        m.type = (uint32_t)CtlType::Abort;
        m.a = (uint64_t)kind;
        net_send_far(c, m, why.data(), std::min<size_t>(why.size(), sizeof(c->job->abort_reason) - 1));
    }
    for (uint32_t r = 0; r < c->nranks; r++)
        if (c->ctl[r] && !c->dead[r].load()) doorbell_ring(c->ctl[r]);
    sched_abort_comm(c);
}

namespace {
/* Some rank of the communicator is on another host. */
bool several_hosts(const Comm* c) { return std::find(c->far.begin(), c->far.end(), uint8_t{1}) != c->far.end(); }
}  // namespace

std::string comm_dead_msg(Comm* c, uint32_t r) {
    if (comm_far(c, r)) {
        std::string why;
        if (c->link[r]) c->link[r]->dead(&why);
        return strprintf("rank %u (pid %d, device %d, host %s) died or its host was lost (the connection failed: %s)", r,
                         c->pid[r], c->device[r], c->host[r].c_str(), why.empty() ? "?" : why.c_str());
    }
    /* a job over several hosts: its host too (the message reaches the other hosts' ranks) */
    if (several_hosts(c))
        return strprintf("rank %u (pid %d, device %d, host %s) died", r, c->pid[r], c->device[r], c->host[r].c_str());
    return strprintf("rank %u (pid %d, device %d) died", r, c->pid[r], c->device[r]);
}

std::string comm_peer_where(Comm* c, int peer) {
    if (peer < 0 || (uint32_t)peer >= c->nranks) return "";
    if (!comm_far(c, (uint32_t)peer)) /* on this host: named with its host in a job over several (as comm_dead_msg) */
        return several_hosts(c) ? strprintf(" (pid %d, device %d, host %s)", c->pid[peer], c->device[peer],
                                            c->host[peer].c_str())
                                : "";
    std::string why;
    if (c->link[peer]) c->link[peer]->dead(&why);
    return strprintf(" (pid %d, device %d, host %s: it died or its host was lost; the connection failed: %s)",
                     c->pid[peer], c->device[peer], c->host[peer].c_str(), why.empty() ? "?" : why.c_str());
}

bool comm_peer_dead(Comm* c, int peer) {
    if (peer < 0 || (uint32_t)peer >= c->nranks || (uint32_t)peer == c->rank) return false;
    if (c->dead[peer].load()) return true;
    if (comm_far(c, (uint32_t)peer)) { /* its connection's state, kept by the network */
        if (!c->link[peer] || !c->link[peer]->dead()) return false;
        if (!c->dead[peer].exchange(true))
            EMU_LOG(LOG_WARN, "communicator %s: %s", c->name.c_str(), comm_dead_msg(c, (uint32_t)peer).c_str());
        return true;
    }
    /* Rate limit first: this runs at every unsatisfied wait attempt, getpid() is a system call. */
    uint64_t now = now_ns(), last = c->live_checked[peer].load();
    if (now - last < kProbeNs) return false;
    if (c->pid[peer] == (int)getpid()) return false;
    if (!c->live_checked[peer].compare_exchange_strong(last, now)) return c->dead[peer].load();
    if (!shm_owner_dead(&c->ctl_seg[peer])) return false;
    if (!c->dead[peer].exchange(true)) {
        /* The owner cannot remove its control block any more: do it for it. */
        shm_unlink(c->ctl_seg[peer].name.c_str());
        EMU_LOG(LOG_WARN, "communicator %s: rank %d (pid %d, device %d) died", c->name.c_str(), peer, c->pid[peer],
                c->device[peer]);
    }
    return true;
}

int comm_rank(Comm* c) { return (int)c->rank; }

uint64_t comm_net_key(Comm* c) { return c->net_key; }

Comm* comm_by_net_key(uint64_t key) {
    if (!key) return nullptr;
    std::lock_guard<std::mutex> g(g_comms_m);
    for (Comm* c : g_comms)
        if (c->net_key == key) return c;
    return nullptr;
}
const char* comm_name(Comm* c) { return c->name.c_str(); }

bool comm_op_tag(Comm* c, uint32_t tag16, std::string* tag) {
    std::lock_guard<std::mutex> g(c->ops_m);
    auto it = c->ops.find(tag16);
    if (it == c->ops.end()) return false;
    if (tag) *tag = it->second.tag;
    return true;
}

uint32_t comm_op_begin(Comm* c, uint32_t tag16, const char* tag, uint64_t kseq) {
    std::lock_guard<std::mutex> g(c->ops_m);
    Comm::OpTrack& e = c->ops[tag16];
    if (e.tag.empty()) e.tag = tag;
    uint32_t n = ++e.started;
    e.kseq[n % 8] = kseq;
    return n;
}

void comm_op_submitted(Comm* c, uint32_t tag16, uint32_t inst) {
    std::lock_guard<std::mutex> g(c->ops_m);
    auto it = c->ops.find(tag16);
    if (it != c->ops.end() && it->second.submitted < inst) it->second.submitted = inst;
}

Stream* comm_stream(Comm* c, aclrtStream stream, const char* api, int* rc) {
    int code = 0;
    Stream* s = stream_resolve(stream, &code, api);
    if (!s) {
        *rc = seterr(HCCL_E_PARA, api, "%s", last_err().c_str());
        return nullptr;
    }
    if (s->dev != c->dev) {
        *rc = seterr(HCCL_E_PARA, api, "stream %u belongs to device %d but the communicator's rank %u is on device %d",
                     s->id, s->dev->id, c->rank, c->dev->id);
        return nullptr;
    }
    return s;
}

bool barrier_arrive(Comm* c, uint32_t r, uint32_t seq) {
    JobSeg* j = c->job;
    j->bar_seq[r].store(seq, std::memory_order_seq_cst);
    if (j->bar_count.fetch_add(1) + 1 != c->nranks) return false;
    j->bar_count.store(0);
    j->bar_gen.store(seq, std::memory_order_seq_cst);
    futex_wake(&j->bar_gen, INT_MAX, true);
    if (c->net_key) {
        CtlMsg m;
        m.type = (uint32_t)CtlType::BarRelease;
        m.a = seq;
        net_send_far(c, m);
    }
    return true;
}

void comm_note_host_call(Comm* c, const char* what) {
    std::lock_guard<std::mutex> g(c->diag_m);
    c->cp_what = what ? what : "";
    c->cp_since = what ? now_ns() : 0;
}

void comm_note_failed_call(Comm* c, const std::string& text, uint64_t peers) {
    std::lock_guard<std::mutex> g(c->diag_m);
    c->failed_call = text;
    c->failed_ns = now_ns();
    c->failed_peers = peers;
}

std::string comm_gone_msg(Comm* c, uint32_t r) {
    std::string m = strprintf("rank %u (pid %d) already destroyed its communicator (HcclCommDestroy)", r, c->pid[r]);
    const JobRank& e = c->job->ranks[r];
    if (e.gone_after[0]) m += strprintf(" right after its call failed: %.*s", (int)sizeof e.gone_after, e.gone_after);
    return m;
}

void comm_tell_link_failure(Comm* c, const std::string& text) {
    rank_log("%s", text.c_str());
    if (!c->job || c->job->link_told.exchange(1) == 0) EMU_LOG(LOG_ERROR, "%s", text.c_str());
}

void comm_clear_failed_call(Comm* c) {
    if (!c->failed_ns) return; /* read by its own host only (and under diag_m by snapshots) */
    std::lock_guard<std::mutex> g(c->diag_m);
    c->failed_call.clear();
    c->failed_ns = 0;
    c->failed_peers = 0;
}

std::string link_down_text(const Comm* c, uint32_t a, uint32_t b, bool needed) {
    const char* env = getenv("HCOMM_KIT_LINKS_DOWN");
    return strprintf("the %s link between rank %u and rank %u%s down (HCOMM_KIT_LINKS_DOWN=%s)",
                     link_type_name(c->topo.link(a, b)), a, b, needed ? ", which is" : " is", env ? env : "");
}

std::string comm_links_note(Comm* c) {
    if (!c || c->topo.down.empty()) return "";
    std::string peers, kinds;
    for (const auto& d : c->topo.down) {
        if (d.first != c->rank && d.second != c->rank) continue;
        uint32_t p = d.first == c->rank ? d.second : d.first;
        peers += strprintf("%s%u", peers.empty() ? "" : ", ", p);
        if (kinds.empty()) kinds = link_type_name(c->topo.link(c->rank, p));
    }
    if (peers.empty()) return "";
    const char* env = getenv("HCOMM_KIT_LINKS_DOWN");
    return strprintf(" (rank %u has no channel to rank(s) %s: the %s link(s) to them are down, HCOMM_KIT_LINKS_DOWN=%s; "
                     "route through another rank)", c->rank, peers.c_str(), kinds.c_str(), env ? env : "");
}

void comm_note_connect(Comm* c, uint64_t peers) {
    std::lock_guard<std::mutex> g(c->diag_m);
    c->cp_peers = peers;
}

/* ------------------------------------------------------------------ the runtime's hooks */

HcclHooks hccl_hooks;

namespace {
/* AclHooks::kernel_failed: the other ranks would wait for this rank's part of the operation until
 * their timeout: fail them now, naming the kernel. */
bool kernel_failed(Comm* c, std::string* msg, AbortKind kind) {
    *msg += comm_links_note(c);
    return comm_abort(c, strprintf("rank %d: %s", comm_rank(c), msg->c_str()), kind);
}

/* AclHooks::kernel_overran: the same for a kernel the watchdog abandoned, with the hang report. */
void kernel_overran(Comm* c, const std::string& what) {
    if (!comm_from_handle(c)) return;
    std::string head = strprintf("rank %d: %s", comm_rank(c), what.c_str());
    std::string rep = hccl_hooks.comm_report ? hccl_hooks.comm_report(c, head.c_str()) : head;
    comm_abort(c, rep, AbortKind::KernelTimeout);
}

struct CommHooks {
    CommHooks() {
        acl_hooks.kernel_failed = kernel_failed;
        acl_hooks.kernel_overran = kernel_overran;
    }
} g_comm_hooks;
}  // namespace

}  // namespace emu

using namespace emu;

EMU_API HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(rank);
    *rank = c->rank;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t* rankSize) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(rankSize);
    *rankSize = c->nranks;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetCommName(HcclComm comm, char* commName) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(commName);
    snprintf(commName, COMM_NAME_MAX_LENGTH, "%s", c->name.c_str());
    return HCCL_SUCCESS;
}

EMU_API const char* HcclGetErrorString(HcclResult code) { return hccl_code_name((int)code); }

EMU_API HcclResult HcclGroupStart(void) { return HCCL_SUCCESS; }
EMU_API HcclResult HcclGroupEnd(void) { return HCCL_SUCCESS; }

namespace emu {
namespace {
/* Cross-rank barrier run by the stream worker (generation counter in the job segment). */
struct BarrierTask : Task {
    Comm* c;
    uint32_t seq; /* this rank's barrier number: done when bar_gen >= seq */
    BarrierTask(Comm* cm, uint32_t s) : c(cm), seq(s) {}
    /* Counts this rank in; the last one releases everybody. Returns true if this was the last. The
     * count is kept on the host of rank 0: a rank of another host sends its arrival there. */
    bool arrive() {
        if (comm_far(c, 0)) {
            c->job->bar_seq[c->rank].store(seq, std::memory_order_seq_cst);
            CtlMsg m;
            m.type = (uint32_t)CtlType::BarArrive;
            m.to = 0;
            m.from = c->rank;
            m.key = c->net_key;
            m.a = seq;
            std::string err;
            if (c->link[0]->control(m, nullptr, 0, &err))
                EMU_LOG(LOG_WARN, "HcclBarrier: rank %u cannot tell rank 0 it arrived: %s", c->rank, err.c_str());
            return false;
        }
        return barrier_arrive(c, c->rank, seq);
    }
    /* The stream already failed: still arrive (without waiting) so that the peers are not held
     * until HCCL_EXEC_TIMEOUT by a rank that will report its own error at synchronisation. */
    void drop() override { arrive(); }
    int run(Stream* s, std::string* msg) override {
        JobSeg* j = c->job;
        std::string why;
        if (job_aborted(j, &why)) {
            *msg = strprintf("HcclBarrier on stream %u (rank %u of %s): %s", s->id, c->rank, c->name.c_str(), why.c_str());
            return ACL_ERROR_RT_SUSPECT_REMOTE_ERROR; /* aborted before this barrier began */
        }
        if (arrive()) return 0;
        uint32_t tmo = cfg().default_kernel_timeout_s;
        auto done = [&] { return (int32_t)(j->bar_gen.load(std::memory_order_acquire) - seq) >= 0; };
        int rc = comm_wait(c, &j->bar_gen, secs_deadline(tmo), done, nullptr, &why);
        if (rc == kWaitOk) return 0;
        if (rc == kWaitTimeout) {
            *msg = strprintf("HcclBarrier on stream %u (rank %u of %u, %s) timed out after HCCL_EXEC_TIMEOUT=%u s: "
                             "%u of %u ranks arrived",
                             s->id, c->rank, c->nranks, c->name.c_str(), tmo, j->bar_count.load(), c->nranks);
            return ACL_ERROR_RT_TASK_TIMEOUT;
        }
        if (rc == kWaitPeerDead) comm_abort(c, why, AbortKind::PeerDead);
        *msg = strprintf("HcclBarrier on stream %u (rank %u of %u, %s): %s", s->id, c->rank, c->nranks,
                         c->name.c_str(), why.c_str());
        return comm_abort_code(c);
    }
    const char* name() const override { return "HcclBarrier"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Barrier;
        if (!d->brief) d->what = strprintf("HcclBarrier #%u of communicator %s", seq, c->name.c_str());
        d->comm = c;
        d->barrier_seq = seq;
    }
};
}  // namespace
}  // namespace emu

EMU_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
    RESOLVE_COMM(c, comm);
    int rc = 0;
    Stream* s = comm_stream(c, stream, __func__, &rc);
    if (!s) return (HcclResult)rc;
    uint32_t seq;
    {
        std::lock_guard<std::mutex> g(c->m);
        seq = ++c->barrier_seq;
    }
    if (stream_enqueue(s, std::unique_ptr<Task>(new BarrierTask(c, seq))) != ACL_SUCCESS)
        return (HcclResult)seterr(HCCL_E_RUNTIME, __func__, "%s", last_err().c_str());
    return HCCL_SUCCESS;
}

namespace {
/* This rank leaves the communicator: the others' waits on it fail (comm_wait), and the hang analysis
 * knows that nothing it recorded is younger than gone_ns. */
void mark_gone(Comm* c) {
    if (!c->job) return;
    {
        std::lock_guard<std::mutex> g(c->diag_m);
        char* dst = c->job->ranks[c->rank].gone_after;
        snprintf(dst, sizeof c->job->ranks[c->rank].gone_after, "%s", c->failed_ns ? c->failed_call.c_str() : "");
    }
    c->job->ranks[c->rank].gone_ns.store(now_ns(), std::memory_order_relaxed);
    c->job->ranks[c->rank].state.store(kRankGone, std::memory_order_seq_cst);
    if (c->net_key) { /* and the ranks on other hosts */
        CtlMsg m;
        m.type = (uint32_t)CtlType::Gone;
        net_send_far(c, m);
    }
}

/* Frees everything a communicator owns in this process; peers may still run (they keep their
 * own mappings of our buffer, and our device control block stays).
 *
 * Lock order (comm.h): what the teardown waits for here (a device thread's runner leaving it, an
 * internal stream draining) may need the communicator's locks to finish its task (the checker
 * names operations, the race checker hands out clocks): the waits happen with no lock of the
 * communicator held, on lists taken out of it under m. */
bool comm_teardown(Comm* c) {
    /* Wait for kernels holding it (HcommAcquireComm); every kernel ends within its launch timeout,
     * except one that overran it and could not be stopped: the device is then lost, and what that
     * kernel may still touch is left allocated (bounded teardown, nothing freed under it). */
    if (!comm_use_acquire(c, [&] { return c->dev->lost.load(); })) {
        EMU_LOG(LOG_WARN, "communicator %s: a kernel that overran its launch timeout still holds it; its "
                "resources stay allocated until the process exits", c->name.c_str());
        mark_gone(c);
        return false;
    }
    /* use_m stays held: no kernel acquires the communicator any more (runners never take it) */
    std::lock_guard<std::mutex> use(c->use_m, std::adopt_lock);
    std::vector<HThread*> threads;
    std::vector<Stream*> streams;
    std::map<std::tuple<int, uint32_t, int>, Channel*> channels;
    std::map<std::pair<std::string, int>, EngineCtxBlock> ctxs;
    std::map<std::string, EngineCtxBlock> devmem;
    {
        std::lock_guard<std::mutex> g(c->m);
        c->destroying.store(true);
        threads.swap(c->threads);
        c->stream_threads.clear();
        streams.swap(c->own_streams);
        channels.swap(c->channels);
        ctxs.swap(c->ctxs);
        devmem.swap(c->devmem);
    }
    for (HThread* t : threads) hthread_destroy(t); /* waits for a runner inside it */
    for (Stream* s : streams) stream_destroy(s);   /* waits for its tasks */
    for (auto& kv : channels) {
        Channel* ch = kv.second;
        channel_unregister(ch);
        slots_free(c->dev, ch->local_slot_base, ch->notify_num);
        ch->magic = 0;
        delete ch;
    }
    for (auto& kv : ctxs) {
        if (kv.second.device) mem_unregister(kv.second.ptr);
        free(kv.second.ptr);
    }
    for (auto& kv : devmem) {
        mem_unregister(kv.second.ptr);
        free(kv.second.ptr);
    }
    mark_gone(c);
    comm_release_segments(c);
    c->magic = 0;
    return true;
}
}  // namespace

namespace {
/* HCOMM_KIT_FAULT_FINDING_HOLD_MS (tests): before the destroy begins, its communicator's device
 * threads run what they have queued until they are idle or one holds a checker finding (the
 * checker's finding_hold waits for the destroy in turn), at most that long. */
void finding_hold_meet(Comm* c) {
    uint32_t ms = cfg().finding_hold_ms;
    if (!ms) return;
    std::vector<HThread*> ts;
    {
        std::lock_guard<std::mutex> g(c->m);
        ts = c->threads;
    }
    auto busy = [&] {
        for (HThread* t : ts)
            if (!t->stream_bound && t->qlen.load() && !t->failed.load()) return true;
        return false;
    };
    for (uint64_t until = now_ns() + (uint64_t)ms * 1000000ull; busy() && !c->findings_held.load() && now_ns() < until;)
        usleep(1000);
}
}  // namespace

EMU_API HcclResult HcclCommDestroy(HcclComm comm) {
    RESOLVE_COMM(c, comm);
    finding_hold_meet(c);
    if (hccl_hooks.model_comm_removed) hccl_hooks.model_comm_removed(c);
    if (hccl_hooks.comm_removed) hccl_hooks.comm_removed(c); /* before it leaves g_comms: the monitor reports leftovers, then forgets it */
    tuner_forget(c);
    {
        std::lock_guard<std::mutex> g(g_comms_m);
        g_comms.erase(c);
    }
    if (comm_teardown(c)) delete c; /* else a stuck kernel may still use it: kept (leaked) */
    return HCCL_SUCCESS;
}
