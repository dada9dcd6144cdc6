/* HCCL host control plane: communicators, threads, channels, buffers, engine contexts, rank
 * graph (hcomm.md §3.6-§3.9; ARCHITECTURE.md "Emulator model").
 *
 * Bootstrap. HcclGetRootInfo draws a random job id. Every rank (a process or a thread) opens
 * or creates the job segment /hcomm_kit.<uid>.job.<jobid>, claims its rank entry, creates its
 * HCCL buffer segment, publishes both names, waits for all ranks, maps every peer's control
 * block and HCCL buffer, and marks itself attached. The last arriver unlinks the job segment's
 * name (everyone has it mapped) and, once every rank is attached, each rank unlinks its own
 * buffer's name, so nothing of a communicator stays in /dev/shm even after a SIGKILL.
 * A linked job segment nobody holds a lock on is left over from a crashed run and recreated.
 *
 * Liveness. A peer is dead when nobody holds the owner lock of its device control block any
 * more (shm_owner_dead), or before that segment is mapped, when its pid is gone. Every wait
 * here (bootstrap, channel handshake, barrier) checks liveness and the job-wide abort flag
 * every 200 ms, so a crash surfaces within about a second instead of the full timeout. */
#include "acl/hooks.h"
#include "hccl/comm.h"
#include "hccl/hooks.h"

#include "base/json.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace emu {

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free");
static_assert(sizeof(RootBlob) <= HCCL_ROOT_INFO_BYTES, "root blob too large");

namespace {
std::mutex g_comms_m;
std::unordered_set<Comm*> g_comms;
constexpr uint64_t kPollNs = 200000000ull;   /* liveness / abort check period */
constexpr uint64_t kProbeNs = 100000000ull;  /* at most one liveness probe per peer per 100 ms */

uint64_t secs_deadline(uint32_t s) { return s ? now_ns() + (uint64_t)s * 1000000000ull : 0; }

void job_wake(JobSeg* j) {
    j->wake.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&j->wake, INT_MAX, true);
}

/* Sets the job-wide abort flag (first writer wins). Returns true if this call set it. */
bool job_set_abort(JobSeg* j, int rank, const std::string& why, AbortKind kind = AbortKind::Other) {
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
    int pid = c->pid[r];
    if (pid <= 0 || pid == (int)getpid()) return false;
    if (c->ctl_seg[r].fd >= 0) return comm_peer_dead(c, (int)r);
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        c->dead[r].store(true);
        return true;
    }
    return false;
}

/* Outcome of comm_wait. */
enum WaitRc { kWaitOk = 0, kWaitTimeout = 1, kWaitAborted = 2, kWaitPeerDead = 3 };

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
                *why = strprintf("rank %u (pid %d) already destroyed its communicator (HcclCommDestroy)", r, c->pid[r]);
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

/* ------------------------------------------------------------------ job segment */

/* Opens an existing segment by exact name; -1 if absent (errno ENOENT), else fd. */
bool job_open(const std::string& name, ShmSeg* seg, int* eno) {
    int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
        *eno = errno;
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(JobSeg)) {
        *eno = EINVAL;
        close(fd);
        return false;
    }
    void* p = mmap(nullptr, sizeof(JobSeg), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
        *eno = errno;
        close(fd);
        return false;
    }
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    seg->name = name;
    seg->fd = fd;
    seg->addr = p;
    seg->size = sizeof(JobSeg);
    seg->owner = false;
    seg->linked = true;
    return true;
}

/* True if the name still refers to the file open as fd. */
bool same_inode(const std::string& name, int fd) {
    struct stat a, b;
    if (fstat(fd, &a) != 0 || stat(("/dev/shm" + name).c_str(), &b) != 0) return false;
    return a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* Create-or-join the job segment; holds a shared flock on it (the creator's from shm_create).
 * Returns 0 or an HCCL code (message set). */
int job_attach(const std::string& name, ShmSeg* seg, uint64_t deadline, const char* api) {
    for (int attempt = 0;; attempt++) {
        if (deadline && now_ns() > deadline)
            return (HcclResult)seterr(HCCL_E_TIMEOUT, api, "could not open or create the job segment /dev/shm%s", name.c_str());
        if (attempt) usleep(attempt < 20 ? 500 : 5000);
        int eno = 0;
        if (job_open(name, seg, &eno)) {
            if (flock(seg->fd, LOCK_EX | LOCK_NB) == 0) {
                /* Nobody holds a lock: left over from a crashed run. */
                if (same_inode(name, seg->fd)) {
                    EMU_LOG(LOG_INFO, "removing stale job segment %s of a crashed run", name.c_str());
                    shm_unlink(name.c_str());
                }
                seg->linked = false;
                shm_close(seg);
                continue;
            }
            if (flock(seg->fd, LOCK_SH | LOCK_NB) != 0 || !same_inode(name, seg->fd)) {
                seg->linked = false;
                shm_close(seg); /* someone is judging it stale right now, or it was just replaced */
                continue;
            }
            JobSeg* j = static_cast<JobSeg*>(seg->addr);
            uint32_t n = j->nranks.load();
            if (n != 0 && j->arrived.load() >= n) {
                /* A finished bootstrap of the same job id (e.g. the rank table used again):
                 * nobody needs its name any more. */
                shm_unlink(name.c_str());
                seg->linked = false;
                shm_close(seg);
                continue;
            }
            /* Wait for the creator's initialisation (it links, then stamps the magic). */
            uint64_t t0 = now_ns();
            while (j->magic.load(std::memory_order_acquire) != kJobMagic && now_ns() - t0 < 2000000000ull)
                usleep(100);
            if (j->magic.load() != kJobMagic) {
                seg->linked = false;
                shm_close(seg);
                return (HcclResult)seterr(HCCL_E_INTERNAL, api, "job segment /dev/shm%s is not initialised (magic 0x%x)",
                              name.c_str(), j->magic.load());
            }
            return 0;
        }
        if (eno != ENOENT)
            return (HcclResult)seterr(HCCL_E_SYSCALL, api, "cannot open the job segment /dev/shm%s: %s", name.c_str(),
                          strerror(eno));
        std::string err;
        if (shm_create(seg, shm_prefix(), sizeof(JobSeg), &err, true, name)) {
            JobSeg* j = static_cast<JobSeg*>(seg->addr);
            j->version = kJobVersion;
            j->magic.store(kJobMagic, std::memory_order_release);
            seg->owner = false; /* its name is unlinked explicitly by the last arriver */
            return 0;
        }
        if (err == "EEXIST") continue;
        return (HcclResult)seterr(HCCL_E_SYSCALL, api, "cannot create the job segment: %s", err.c_str());
    }
}

void unlink_name(ShmSeg* seg) {
    if (seg->linked) {
        shm_unlink(seg->name.c_str());
        seg->linked = false;
    }
}

/* Releases everything bootstrap acquired (failure paths and destroy). */
void comm_release_segments(Comm* c) {
    for (uint32_t r = 0; r < c->pbuf_seg.size(); r++) {
        if (c->pbuf_seg[r].addr) {
            mem_unregister(c->pbuf_seg[r].addr);
            shm_close(&c->pbuf_seg[r]);
        }
        if (c->ctl_seg[r].addr) shm_close(&c->ctl_seg[r]);
    }
    if (c->buf_seg.addr) {
        mem_unregister(c->buf_seg.addr);
        shm_close(&c->buf_seg);
    }
    if (c->job_seg.addr) {
        /* Bootstrap failed before everyone arrived: if nobody else holds the job segment,
         * remove its name too (converting our shared lock succeeds only if we are alone). */
        if (c->job_seg.linked && flock(c->job_seg.fd, LOCK_EX | LOCK_NB) == 0 && same_inode(c->job_seg.name, c->job_seg.fd))
            shm_unlink(c->job_seg.name.c_str());
        c->job_seg.linked = false;
        shm_close(&c->job_seg);
    }
    c->job = nullptr;
}

/* Maps rank r's control block and HCCL buffer once its entry is published. */
int map_peer(Comm* c, uint32_t r, const char* api) {
    JobRank& e = c->job->ranks[r];
    c->pid[r] = e.pid.load();
    c->device[r] = e.device.load();
    if (r == c->rank) {
        c->ctl[r] = c->dev->ctl;
        c->pbuf[r] = c->buf;
        c->pbuf_size[r] = c->buf_size;
        return 0;
    }
    std::string err;
    if (!shm_open_map(&c->ctl_seg[r], std::string(e.ctl_name, strnlen(e.ctl_name, sizeof e.ctl_name)), sizeof(DevCtl),
                      &err)) {
        if (peer_dead_now(c, r)) return (HcclResult)seterr(HCCL_E_REMOTE, api, "%s during initialisation", comm_dead_msg(c, r).c_str());
        return (HcclResult)seterr(HCCL_E_SYSCALL, api, "rank %u: %s", r, err.c_str());
    }
    c->ctl[r] = static_cast<DevCtl*>(c->ctl_seg[r].addr);
    uint64_t bs = e.buf_size.load();
    if (!shm_open_map(&c->pbuf_seg[r], std::string(e.buf_name, strnlen(e.buf_name, sizeof e.buf_name)), bs, &err)) {
        if (peer_dead_now(c, r)) return (HcclResult)seterr(HCCL_E_REMOTE, api, "%s during initialisation", comm_dead_msg(c, r).c_str());
        return (HcclResult)seterr(HCCL_E_SYSCALL, api, "HCCL buffer of rank %u: %s", r, err.c_str());
    }
    c->pbuf[r] = c->pbuf_seg[r].addr;
    c->pbuf_size[r] = bs;
    mem_register(c->pbuf[r], bs, c->device[r], MemKind::HcclBuffer);
    return 0;
}

std::string ranks_where(Comm* c, const std::function<bool(uint32_t)>& f) {
    std::string s;
    int n = 0;
    for (uint32_t r = 0; r < c->nranks; r++)
        if (f(r)) {
            if (n++ < 16) s += (s.empty() ? "" : ", ") + std::to_string(r);
        }
    if (n > 16) s += strprintf(" (+%d more)", n - 16);
    return s;
}

int wait_fail(Comm* c, int rc, const std::string& why, const char* api, const char* what,
              const std::function<bool(uint32_t)>& missing) {
    if (rc == kWaitTimeout)
        return (HcclResult)seterr(HCCL_E_TIMEOUT, api,
                      "rank %u of %u: ranks %s never %s within HCCL_CONNECT_TIMEOUT=%u s (job %s)", c->rank, c->nranks,
                      ranks_where(c, missing).c_str(), what, cfg().connect_timeout_s, c->jobid.c_str());
    return (HcclResult)seterr(HCCL_E_REMOTE, api, "rank %u of %u: %s while waiting for ranks %s to %s", c->rank, c->nranks,
                  why.c_str(), ranks_where(c, missing).c_str(), what);
}

struct InitArgs {
    std::string jobid;
    std::string name;        /* "" = default */
    uint64_t buf_size = 0;   /* 0 = default */
};

int comm_init(uint32_t nranks, uint32_t rank, const InitArgs& a, HcclComm* out, const char* api) {
    Context* ctx = current_ctx();
    if (!ctx)
        return (HcclResult)seterr(HCCL_E_RUNTIME, api,
                      "no device is set on this thread: call aclrtSetDevice(deviceId) before creating a communicator");
    Device* dev = ctx->dev;
    std::unique_ptr<Comm> c(new Comm());
    c->dev = dev;
    c->ctx = ctx;
    c->rank = rank;
    c->nranks = nranks;
    note_local_ranks(nranks);
    c->jobid = a.jobid;
    c->name = a.name.empty() ? "hcomm_kit_" + a.jobid : a.name;
    c->ctl_seg.resize(nranks);
    c->pbuf_seg.resize(nranks);
    c->ctl.assign(nranks, nullptr);
    c->pbuf.assign(nranks, nullptr);
    c->pbuf_size.assign(nranks, 0);
    c->pid.assign(nranks, 0);
    c->device.assign(nranks, -1);
    c->live_checked.reset(new std::atomic<uint64_t>[nranks]);
    c->dead.reset(new std::atomic<bool>[nranks]);
    for (uint32_t r = 0; r < nranks; r++) c->live_checked[r] = 0, c->dead[r] = false;
    c->send_seq.assign(nranks, 0);
    c->recv_seq.assign(nranks, 0);
    uint64_t deadline = secs_deadline(cfg().connect_timeout_s);
    std::string jname = shm_prefix() + "job." + a.jobid;

    if (int rc = job_attach(jname, &c->job_seg, deadline, api)) return rc;
    JobSeg* j = c->job = static_cast<JobSeg*>(c->job_seg.addr);
    Comm* cp = c.get();
    auto fail = [&](int rc) {
        comm_release_segments(cp);
        return rc;
    };
    uint32_t zero = 0;
    if (!j->nranks.compare_exchange_strong(zero, nranks) && zero != nranks) {
        int rc = seterr(HCCL_E_PARA, api, "rank %u passed nRanks=%u but another rank of job %s passed nRanks=%u", rank,
                        nranks, a.jobid.c_str(), zero);
        job_set_abort(j, (int)rank, last_err());
        return fail(rc);
    }
    uint32_t st = kRankFree;
    if (!j->ranks[rank].state.compare_exchange_strong(st, kRankClaimed)) {
        int rc = seterr(HCCL_E_PARA, api, "rank %u of job %s is already taken by pid %d (device %d): duplicate rank id",
                        rank, a.jobid.c_str(), j->ranks[rank].pid.load(), j->ranks[rank].device.load());
        job_set_abort(j, (int)rank, last_err());
        return fail(rc);
    }
    /* Own HCCL buffer. */
    c->buf_size = a.buf_size ? a.buf_size : cfg().hccl_buffsize;
    std::string err;
    if (!shm_create(&c->buf_seg, shm_prefix() + strprintf("buf.%d.", (int)getpid()), c->buf_size, &err)) {
        int rc = seterr(HCCL_E_MEMORY, api, "cannot create the %llu-byte HCCL buffer of rank %u: %s",
                        (unsigned long long)c->buf_size, rank, err.c_str());
        job_set_abort(j, (int)rank, last_err());
        return fail(rc);
    }
    c->buf = c->buf_seg.addr;
    mem_register(c->buf, c->buf_size, dev->id, MemKind::HcclBuffer);
    JobRank& me = j->ranks[rank];
    me.pid.store((int32_t)getpid());
    me.device.store(dev->id);
    me.buf_size.store(c->buf_size);
    snprintf(me.ctl_name, sizeof me.ctl_name, "%s", dev->ctl_seg.name.c_str());
    snprintf(me.buf_name, sizeof me.buf_name, "%s", c->buf_seg.name.c_str());
    me.state.store(kRankPublished, std::memory_order_release);
    if (j->arrived.fetch_add(1) + 1 == nranks) {
        /* Everybody has the job segment mapped: drop its name. */
        shm_unlink(jname.c_str());
        c->job_seg.linked = false;
    }
    job_wake(j);

    /* Wait for every rank, mapping peers as they publish. */
    std::vector<bool> mapped(nranks, false);
    int map_rc = 0;
    auto all_mapped = [&]() -> bool {
        bool all = true;
        for (uint32_t r = 0; r < nranks; r++) {
            if (mapped[r]) continue;
            if (j->ranks[r].state.load(std::memory_order_acquire) < kRankPublished) {
                all = false;
                continue;
            }
            if (int rc = map_peer(cp, r, api)) {
                map_rc = rc;
                return true;
            }
            mapped[r] = true;
        }
        return all;
    };
    std::string why;
    int wr = comm_wait(cp, &j->wake, deadline, [&] { return map_rc != 0 || all_mapped(); }, nullptr, &why);
    if (map_rc) {
        job_set_abort(j, (int)rank, last_err());
        return fail(map_rc);
    }
    if (wr != kWaitOk) {
        int rc = wait_fail(cp, wr, why, api, "arrived", [&](uint32_t r) {
            return j->ranks[r].state.load() < kRankPublished;
        });
        if (wr == kWaitPeerDead) job_set_abort(j, (int)rank, why);
        return fail(rc);
    }
    me.state.store(kRankAttached, std::memory_order_release);
    j->attached.fetch_add(1);
    job_wake(j);
    wr = comm_wait(cp, &j->wake, deadline, [&] { return j->attached.load() >= nranks; }, nullptr, &why);
    if (wr != kWaitOk) {
        int rc = wait_fail(cp, wr, why, api, "attached", [&](uint32_t r) {
            return j->ranks[r].state.load() < kRankAttached;
        });
        if (wr == kWaitPeerDead) job_set_abort(j, (int)rank, why);
        return fail(rc);
    }
    /* Every peer mapped our buffer: its name is no longer needed (nor the job's, which the
     * last arriver removed). */
    unlink_name(&c->buf_seg);
    c->job_seg.linked = false;
    {
        std::lock_guard<std::mutex> g(g_comms_m);
        g_comms.insert(cp);
    }
    EMU_LOG(LOG_INFO, "communicator %s: rank %u of %u on device %d ready", c->name.c_str(), rank, nranks, dev->id);
    rank_log("communicator %s: rank %u of %u on device %d ready (job %s)", c->name.c_str(), rank, nranks, dev->id,
             a.jobid.c_str());
    if (hccl_hooks.comm_added) hccl_hooks.comm_added(cp);
    *out = c.release();
    return HCCL_SUCCESS;
}

int need_acl(const char* api) {
    if (check_init(api) != 0)
        return (HcclResult)seterr(HCCL_E_RUNTIME, api, "aclInit has not been called (or aclFinalize already was)");
    return 0;
}

int parse_root(const HcclRootInfo* root, std::string* job, const char* api) {
    RootBlob b;
    memcpy(&b, root->internal, sizeof b);
    if (b.magic != kRootMagic)
        return (HcclResult)seterr(HCCL_E_PARA, api,
                      "rootInfo was not produced by HcclGetRootInfo of this emulator (magic 0x%08x, expected \"HCKR\"); "
                      "broadcast the bytes HcclGetRootInfo wrote on the root rank to every rank",
                      b.magic);
    if (b.version != 1) return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo version %u is not supported (expected 1)", b.version);
    if (b.uid != (uint32_t)getuid())
        return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo was created by uid %u but this process runs as uid %u", b.uid,
                      (unsigned)getuid());
    size_t n = strnlen(b.job, sizeof b.job);
    if (n == 0 || n >= sizeof b.job) return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo carries a malformed job id");
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)b.job[i])) return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo carries a malformed job id");
    *job = std::string(b.job, n);
    return 0;
}

/* Optional fields of an initialised HcclCommConfig (name, buffer size). */
int apply_config(const HcclCommConfig* cfgp, InitArgs* a, const char* api) {
    uint32_t magic = 0;
    memcpy(&magic, cfgp->reserved + 8, sizeof magic);
    if (magic != HCCL_COMM_CONFIG_MAGIC_WORD) return 0; /* not initialised with HcclCommConfigInit: ignore */
    if (cfgp->hcclBufferSize != HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET) {
        if (cfgp->hcclBufferSize == 0 || cfgp->hcclBufferSize > 65536)
            return (HcclResult)seterr(HCCL_E_PARA, api, "config->hcclBufferSize %u MB is not in [1, 65536]", cfgp->hcclBufferSize);
        a->buf_size = (uint64_t)cfgp->hcclBufferSize << 20;
    }
    size_t n = strnlen(cfgp->hcclCommName, COMM_NAME_MAX_LENGTH);
    if (n == COMM_NAME_MAX_LENGTH)
        return (HcclResult)seterr(HCCL_E_PARA, api, "config->hcclCommName is not NUL-terminated within %u bytes",
                      COMM_NAME_MAX_LENGTH);
    if (n) a->name.assign(cfgp->hcclCommName, n);
    return 0;
}

int init_root(uint32_t nRanks, const HcclRootInfo* root, uint32_t rank, const HcclCommConfig* config, HcclComm* comm,
              const char* api) {
    if (!root) return (HcclResult)seterr(HCCL_E_PTR, api, "rootInfo is NULL");
    if (!comm) return (HcclResult)seterr(HCCL_E_PTR, api, "comm is NULL");
    if (int r = need_acl(api)) return r;
    if (nRanks == 0 || nRanks > kMaxRanks)
        return (HcclResult)seterr(HCCL_E_PARA, api, "nRanks %u is not in [1, %u]", nRanks, kMaxRanks);
    if (rank >= nRanks) return (HcclResult)seterr(HCCL_E_PARA, api, "rank %u is not below nRanks %u", rank, nRanks);
    InitArgs a;
    if (int r = parse_root(root, &a.jobid, api)) return r;
    if (config)
        if (int r = apply_config(config, &a, api)) return r;
    return comm_init(nRanks, rank, a, comm, api);
}

/* A job id every rank derives from the same key (FNV-1a, two lanes, 32 hex digits). */
std::string job_id_of(const std::string& key) {
    uint64_t h1 = 1469598103934665603ull, h2 = 1099511628211ull ^ 0x9e3779b97f4a7c15ull;
    for (unsigned char ch : key) {
        h1 = (h1 ^ ch) * 1099511628211ull;
        h2 = (h2 ^ ch) * 0x100000001b3ull + 0x7f4a7c15ull;
    }
    return strprintf("%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
}

/* ---- rank table ---- */

std::string json_str(const json::Value* v) {
    if (!v) return "";
    if (v->is_string()) return v->str;
    if (v->is_integer()) return std::to_string((long long)v->num);
    return "";
}

bool parse_uint(const std::string& s, uint32_t* out) {
    if (s.empty() || s.size() > 9) return false;
    for (char ch : s)
        if (ch < '0' || ch > '9') return false;
    *out = (uint32_t)strtoul(s.c_str(), nullptr, 10);
    return true;
}

int init_cluster(const char* path, uint32_t rank, HcclCommConfig* config, HcclComm* comm, const char* api) {
    if (!path) return (HcclResult)seterr(HCCL_E_PTR, api, "clusterInfo (rank-table path) is NULL");
    if (!comm) return (HcclResult)seterr(HCCL_E_PTR, api, "comm is NULL");
    if (int r = need_acl(api)) return r;
    if (strnlen(path, 4097) > 4096) return (HcclResult)seterr(HCCL_E_PARA, api, "rank-table path is longer than 4096 characters");
    std::string text, err;
    if (!json::read_file(path, text, err)) return (HcclResult)seterr(HCCL_E_OPEN_FILE_FAILURE, api, "rank table: %s", err.c_str());
    json::Value v;
    if (!json::parse(text, v, err)) return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s is not valid JSON: %s", path, err.c_str());
    if (!v.is_object()) return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: the top level is not an object", path);
    const json::Value* sl = v.get("server_list");
    if (!sl || !sl->is_array() || sl->arr.empty())
        return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: key \"server_list\" is missing or not a non-empty array", path);
    if (const json::Value* sc = v.get("server_count")) {
        uint32_t n = 0;
        if (!parse_uint(json_str(sc), &n) || n != sl->arr.size())
            return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: \"server_count\" (%s) does not match the %zu entries of "
                          "\"server_list\"", path, json_str(sc).c_str(), sl->arr.size());
    }
    if (const json::Value* stv = v.get("status"))
        if (json_str(stv) != "completed")
            return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: \"status\" is \"%s\", expected \"completed\"", path,
                          json_str(stv).c_str());
    std::map<uint32_t, uint32_t> ranks; /* rank id -> device id */
    for (size_t si = 0; si < sl->arr.size(); si++) {
        const json::Value& s = sl->arr[si];
        const json::Value* devs = s.get("device");
        if (!devs || !devs->is_array())
            return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: server_list[%zu] has no \"device\" array", path, si);
        for (size_t di = 0; di < devs->arr.size(); di++) {
            const json::Value& d = devs->arr[di];
            uint32_t rid = 0, did = 0;
            if (!parse_uint(json_str(d.get("rank_id")), &rid))
                return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: server_list[%zu].device[%zu] key \"rank_id\" is missing "
                              "or not a non-negative integer", path, si, di);
            if (!parse_uint(json_str(d.get("device_id")), &did))
                return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: server_list[%zu].device[%zu] key \"device_id\" is "
                              "missing or not a non-negative integer", path, si, di);
            if (!ranks.emplace(rid, did).second)
                return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: \"rank_id\" %u appears twice", path, rid);
        }
    }
    uint32_t n = (uint32_t)ranks.size();
    if (n == 0 || n > kMaxRanks)
        return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s lists %u devices; the emulator supports 1..%u", path, n, kMaxRanks);
    for (uint32_t r = 0; r < n; r++)
        if (!ranks.count(r))
            return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: rank ids are not 0..%u (rank_id %u is missing)", path, n - 1, r);
    if (rank >= n)
        return (HcclResult)seterr(HCCL_E_PARA, api, "rank %u is not in rank table %s (%u ranks)", rank, path, n);
    Context* ctx = current_ctx();
    if (ctx && (uint32_t)ctx->dev->id != ranks[rank])
        EMU_LOG(LOG_WARN, "%s: rank %u is listed on device_id %u in %s but this thread's device is %d", api, rank,
                ranks[rank], path, ctx->dev->id);
    /* Job id: hash of realpath + content + uid. */
    char real[PATH_MAX];
    std::string rp = realpath(path, real) ? real : path;
    InitArgs a;
    a.jobid = job_id_of(rp + '\0' + text + '\0' + std::to_string(getuid()));
    if (config)
        if (int r = apply_config(config, &a, api)) return r;
    return comm_init(n, rank, a, comm, api);
}

}  // namespace

/* ------------------------------------------------------------------ accessors (emu.h) */

/* How long channel set-up waits for the peers' ends: the communicator's own timeout when one was
 * set (HcommKitCommSetConnectTimeout: a torch group's timeout), else HCCL_CONNECT_TIMEOUT. */
static uint32_t connect_timeout_s(const Comm* c) {
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
    for (uint32_t r = 0; r < c->nranks; r++)
        if (c->ctl[r] && !c->dead[r].load()) doorbell_ring(c->ctl[r]);
    sched_abort_comm(c);
    return first;
}

std::string comm_dead_msg(Comm* c, uint32_t r) {
    return strprintf("rank %u (pid %d, device %d) died", r, c->pid[r], c->device[r]);
}

bool comm_peer_dead(Comm* c, int peer) {
    if (peer < 0 || (uint32_t)peer >= c->nranks || (uint32_t)peer == c->rank) return false;
    if (c->dead[peer].load()) return true;
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
const char* comm_name(Comm* c) { return c->name.c_str(); }

bool comm_op_tag(Comm* c, uint32_t tag16, std::string* tag) {
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ops.find(tag16);
    if (it == c->ops.end()) return false;
    if (tag) *tag = it->second.tag;
    return true;
}

uint32_t comm_op_begin(Comm* c, uint32_t tag16, const char* tag, uint64_t kseq) {
    std::lock_guard<std::mutex> g(c->m);
    Comm::OpTrack& e = c->ops[tag16];
    if (e.tag.empty()) e.tag = tag;
    uint32_t n = ++e.started;
    e.kseq[n % 8] = kseq;
    return n;
}

void comm_op_submitted(Comm* c, uint32_t tag16, uint32_t inst) {
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ops.find(tag16);
    if (it != c->ops.end() && it->second.submitted < inst) it->second.submitted = inst;
}

void comm_note_host_call(Comm* c, const char* what) {
    std::lock_guard<std::mutex> g(c->diag_m);
    c->cp_what = what ? what : "";
    c->cp_since = what ? now_ns() : 0;
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
bool kernel_failed(Comm* c, const std::string& msg, AbortKind kind) {
    return comm_abort(c, strprintf("rank %d: %s", comm_rank(c), msg.c_str()), kind);
}

/* AclHooks::kernel_overran: the same for a kernel the watchdog abandoned, with the hang report. */
void kernel_overran(Comm* c, const std::string& what) {
    if (!comm_from_handle(c)) return;
    std::string head = strprintf("rank %d: %s", comm_rank(c), what.c_str());
    std::string rep = hccl_hooks.comm_report ? hccl_hooks.comm_report(c, head.c_str()) : head;
    comm_abort(c, rep, AbortKind::KernelTimeout);
}

struct Registrar {
    Registrar() {
        acl_hooks.kernel_failed = kernel_failed;
        acl_hooks.kernel_overran = kernel_overran;
    }
} g_registrar;
}  // namespace

}  // namespace emu

using namespace emu;

#define RESOLVE_COMM(var, h)                                                                      \
    Comm* var = comm_from_handle(h);                                                              \
    if (!(h)) return (HcclResult)seterr(HCCL_E_PTR, __func__, "comm is NULL");                              \
    if (!var) return (HcclResult)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", (void*)(h))

#define NEED_PTR(p) \
    if (!(p)) return (HcclResult)seterr(HCCL_E_PTR, __func__, #p " is NULL")

/* ================================================================ communicators */

EMU_API HcclResult HcommKitCommSetConnectTimeout(HcclComm comm, uint32_t seconds) {
    RESOLVE_COMM(c, comm);
    if (seconds > 86400)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "seconds=%u: expected 0 (HCCL_CONNECT_TIMEOUT) to 86400",
                                  seconds);
    c->connect_timeout_s = seconds;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetRootInfo(HcclRootInfo* rootInfo) {
    NEED_PTR(rootInfo);
    if (int r = need_acl(__func__)) return (HcclResult)r;
    memset(rootInfo->internal, 0, sizeof rootInfo->internal);
    RootBlob b;
    memset(&b, 0, sizeof b);
    b.magic = kRootMagic;
    b.version = 1;
    snprintf(b.job, sizeof b.job, "%s", random_hex(16).c_str());
    b.uid = (uint32_t)getuid();
    memcpy(rootInfo->internal, &b, sizeof b);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank, HcclComm* comm) {
    return (HcclResult)init_root(nRanks, rootInfo, rank, nullptr, comm, __func__);
}

EMU_API HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo* rootInfo, uint32_t rank,
                                              const HcclCommConfig* config, HcclComm* comm) {
    NEED_PTR(config);
    return (HcclResult)init_root(nRanks, rootInfo, rank, config, comm, __func__);
}

/* Only the members call it (not every rank of the parent), each with the same rankIds and
 * subCommId: they meet in a job derived from the parent's job, subCommId and rankIds. */
EMU_API HcclResult HcclCreateSubCommConfig(HcclComm* comm, uint32_t rankNum, uint32_t* rankIds, uint64_t subCommId,
                                           uint32_t subCommRankId, HcclCommConfig* config, HcclComm* subComm) {
    NEED_PTR(comm);
    NEED_PTR(rankIds);
    NEED_PTR(config);
    NEED_PTR(subComm);
    if (int r = need_acl(__func__)) return (HcclResult)r;
    RESOLVE_COMM(parent, *comm);
    uint32_t n = parent->nranks;
    if (rankNum == 0 || rankNum > n)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "rankNum %u is not in [1, %u] (the parent communicator %s has %u ranks)",
                                  rankNum, n, parent->name.c_str(), n);
    if (subCommRankId >= rankNum)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "subCommRankId %u is not below rankNum %u", subCommRankId, rankNum);
    std::vector<bool> seen(n, false);
    std::string key = parent->jobid + strprintf("/sub/%llu:", (unsigned long long)subCommId);
    for (uint32_t i = 0; i < rankNum; i++) {
        if (rankIds[i] >= n)
            return (HcclResult)seterr(HCCL_E_PARA, __func__, "rankIds[%u] = %u is not a rank of the parent communicator %s (%u ranks)",
                                      i, rankIds[i], parent->name.c_str(), n);
        if (seen[rankIds[i]])
            return (HcclResult)seterr(HCCL_E_PARA, __func__, "rank %u appears twice in rankIds", rankIds[i]);
        seen[rankIds[i]] = true;
        key += strprintf("%u,", rankIds[i]);
    }
    if (rankIds[subCommRankId] != parent->rank)
        return (HcclResult)seterr(HCCL_E_PARA, __func__,
                                  "rankIds[subCommRankId = %u] = %u, but this is rank %u of the parent communicator %s",
                                  subCommRankId, rankIds[subCommRankId], parent->rank, parent->name.c_str());
    InitArgs a;
    a.jobid = job_id_of(key);
    if (int r = apply_config(config, &a, __func__)) return (HcclResult)r;
    if (a.name.empty()) a.name = parent->name + strprintf("_sub%llu", (unsigned long long)subCommId);
    return (HcclResult)comm_init(rankNum, subCommRankId, a, subComm, __func__);
}

EMU_API HcclResult HcclCommInitClusterInfo(const char* clusterInfo, uint32_t rank, HcclComm* comm) {
    return (HcclResult)init_cluster(clusterInfo, rank, nullptr, comm, __func__);
}

EMU_API HcclResult HcclCommInitClusterInfoConfig(const char* clusterInfo, uint32_t rank, HcclCommConfig* config,
                                                 HcclComm* comm) {
    NEED_PTR(config);
    return (HcclResult)init_cluster(clusterInfo, rank, config, comm, __func__);
}

EMU_API HcclResult HcclCommInitAll(uint32_t ndev, int32_t* devices, HcclComm* comms) {
    NEED_PTR(devices);
    NEED_PTR(comms);
    if (int r = need_acl(__func__)) return (HcclResult)r;
    if (ndev == 0 || ndev > kMaxRanks) return (HcclResult)seterr(HCCL_E_PARA, __func__, "ndev %u is not in [1, %u]", ndev, kMaxRanks);
    for (uint32_t i = 0; i < ndev; i++) {
        if (devices[i] < 0 || devices[i] >= cfg().device_count)
            return (HcclResult)seterr(HCCL_E_PARA, __func__, "devices[%u] = %d is not a device id in [0, %d]", i, devices[i],
                          cfg().device_count - 1);
        for (uint32_t k = 0; k < i; k++)
            if (devices[k] == devices[i])
                return (HcclResult)seterr(HCCL_E_PARA, __func__, "device %d appears twice in devices[] (indices %u and %u)",
                              devices[i], k, i);
    }
    HcclRootInfo root;
    if (HcclResult r = HcclGetRootInfo(&root)) return r;
    std::vector<int> rcs(ndev, 0);
    std::vector<std::string> msgs(ndev);
    std::vector<std::thread> ts;
    for (uint32_t i = 0; i < ndev; i++) {
        comms[i] = nullptr;
        ts.emplace_back([&, i] {
            int rc = aclrtSetDevice(devices[i]);
            if (rc == ACL_SUCCESS) rc = init_root(ndev, &root, i, nullptr, &comms[i], "HcclCommInitAll");
            else rc = seterr(HCCL_E_RUNTIME, "HcclCommInitAll", "aclrtSetDevice(%d) failed: %s", devices[i],
                             last_err().c_str());
            rcs[i] = rc;
            msgs[i] = last_err();
        });
    }
    for (auto& t : ts) t.join();
    for (uint32_t i = 0; i < ndev; i++)
        if (rcs[i]) {
            for (uint32_t k = 0; k < ndev; k++)
                if (comms[k]) {
                    HcclCommDestroy(comms[k]);
                    comms[k] = nullptr;
                }
            return (HcclResult)seterr_str(rcs[i], __func__,
                                          strprintf("rank %u (device %d): %s", i, devices[i], msgs[i].c_str()));
        }
    return HCCL_SUCCESS;
}

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
    /* Counts this rank in; the last one releases everybody. Returns true if this was the last. */
    bool arrive() {
        JobSeg* j = c->job;
        j->bar_seq[c->rank].store(seq, std::memory_order_seq_cst);
        if (j->bar_count.fetch_add(1) + 1 != c->nranks) return false;
        j->bar_count.store(0);
        j->bar_gen.store(seq, std::memory_order_seq_cst);
        futex_wake(&j->bar_gen, INT_MAX, true);
        return true;
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
        d->what = strprintf("HcclBarrier #%u of communicator %s", seq, c->name.c_str());
        d->comm = c;
        d->barrier_seq = seq;
    }
};
}  // namespace
}  // namespace emu

EMU_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
    RESOLVE_COMM(c, comm);
    int code = 0;
    Stream* s = stream_resolve(stream, &code, __func__);
    if (!s) return (HcclResult)seterr(HCCL_E_PARA, __func__, "%s", last_err().c_str());
    if (s->dev != c->dev)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "stream %u belongs to device %d but the communicator's rank %u is on device %d",
                      s->id, s->dev->id, c->rank, c->dev->id);
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
/* Frees everything a communicator owns in this process; peers may still run (they keep their
 * own mappings of our buffer, and our device control block stays). */
bool comm_teardown(Comm* c) {
    /* Wait for kernels holding it (HcommAcquireComm); every kernel ends within its launch timeout,
     * except one that overran it and could not be stopped: the device is then lost, and what that
     * kernel may still touch is left allocated (bounded teardown, nothing freed under it). */
    if (!comm_use_acquire(c, [&] { return c->dev->lost.load(); })) {
        EMU_LOG(LOG_WARN, "communicator %s: a kernel that overran its launch timeout still holds it; its "
                "resources stay allocated until the process exits", c->name.c_str());
        if (c->job) c->job->ranks[c->rank].state.store(kRankGone);
        return false;
    }
    std::lock_guard<std::mutex> use(c->use_m, std::adopt_lock);
    std::lock_guard<std::mutex> g(c->m);
    for (HThread* t : c->threads) hthread_destroy(t);
    c->threads.clear();
    c->stream_threads.clear();
    for (Stream* s : c->own_streams) stream_destroy(s);
    c->own_streams.clear();
    for (auto& kv : c->channels) {
        Channel* ch = kv.second;
        channel_unregister(ch);
        slots_free(c->dev, ch->local_slot_base, ch->notify_num);
        ch->magic = 0;
        delete ch;
    }
    c->channels.clear();
    for (auto& kv : c->ctxs) {
        if (kv.second.device) mem_unregister(kv.second.ptr);
        free(kv.second.ptr);
    }
    c->ctxs.clear();
    for (auto& kv : c->devmem) {
        mem_unregister(kv.second.ptr);
        free(kv.second.ptr);
    }
    c->devmem.clear();
    if (c->job) c->job->ranks[c->rank].state.store(kRankGone);
    comm_release_segments(c);
    c->magic = 0;
    return true;
}
}  // namespace

EMU_API HcclResult HcclCommDestroy(HcclComm comm) {
    RESOLVE_COMM(c, comm);
    if (hccl_hooks.comm_removed) hccl_hooks.comm_removed(c); /* before it leaves g_comms: the monitor reports leftovers, then forgets it */
    {
        std::lock_guard<std::mutex> g(g_comms_m);
        g_comms.erase(c);
    }
    if (comm_teardown(c)) delete c; /* else a stuck kernel may still use it: kept (leaked) */
    return HCCL_SUCCESS;
}

/* ================================================================ threads */

namespace {
int check_thread_engine(int engine, const char* api) {
    switch (engine) {
        case COMM_ENGINE_CPU:
        case COMM_ENGINE_CPU_TS:
        case COMM_ENGINE_AICPU:
        case COMM_ENGINE_AICPU_TS: return 0;
        case COMM_ENGINE_AIV:
        case COMM_ENGINE_CCU:
            return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, api, "engine %s is not emulated (use COMM_ENGINE_AICPU_TS or COMM_ENGINE_CPU_TS)",
                          engine == COMM_ENGINE_AIV ? "COMM_ENGINE_AIV" : "COMM_ENGINE_CCU");
        default: return (HcclResult)seterr(HCCL_E_PARA, api, "engine %d is not a CommEngine value", engine);
    }
}

Context* comm_ctx(Comm* c) {
    Context* cur = current_ctx();
    return cur && cur->dev == c->dev ? cur : c->ctx;
}

int acquire_threads(Comm* c, int engine, uint32_t n, uint32_t notify, ThreadHandle* out, const char* api) {
    if (int r = check_thread_engine(engine, api)) return r;
    if (n == 0) return (HcclResult)seterr(HCCL_E_PARA, api, "threadNum is 0");
    if (n > 4096) return (HcclResult)seterr(HCCL_E_PARA, api, "threadNum %u is above the emulator's limit of 4096", n);
    if (notify > 65535) return (HcclResult)seterr(HCCL_E_PARA, api, "notifyNumPerThread %u is above 65535", notify);
    std::lock_guard<std::mutex> g(c->m);
    std::vector<HThread*> made;
    std::vector<Stream*> streams;
    auto undo = [&] {
        for (HThread* t : made) hthread_destroy(t);
        for (Stream* s : streams) stream_destroy(s);
    };
    bool host = engine_side(engine) == Engine::Host;
    for (uint32_t i = 0; i < n; i++) {
        Stream* s = nullptr;
        if (host) {
            int code = 0;
            s = stream_create(comm_ctx(c), 0, &code, api);
            if (!s) {
                std::string m = last_err();
                undo();
                return (HcclResult)seterr(HCCL_E_RUNTIME, api, "cannot create the stream of CPU thread %u: %s", i, m.c_str());
            }
            streams.push_back(s);
        }
        std::string err;
        HThread* t = hthread_create(c->dev, c, notify, host, s, engine, &err);
        if (!t) {
            undo();
            return (HcclResult)seterr(HCCL_E_UNAVAIL, api, "cannot create thread %u of %u (%u notifies each) on device %d: %s", i, n,
                          notify, c->dev->id, err.c_str());
        }
        made.push_back(t);
    }
    for (uint32_t i = 0; i < n; i++) {
        /* Device threads are numbered t0, t1, ... per communicator in acquisition order (so the
         * first HcclThreadAcquire's threads[i] is ti); stream-bound ones go by their stream. */
        if (!host) made[i]->no = c->aicpu_threads++;
        c->threads.push_back(made[i]);
        out[i] = (ThreadHandle)(uintptr_t)thread_view(made[i], engine_side(engine), engine);
    }
    /* internal streams of CPU threads: destroyed by HcclCommDestroy after their threads */
    c->own_streams.insert(c->own_streams.end(), streams.begin(), streams.end());
    return HCCL_SUCCESS;
}
}  // namespace

EMU_API HcclResult HcclThreadAcquire(HcclComm comm, CommEngine engine, uint32_t threadNum, uint32_t notifyNumPerThread,
                                     ThreadHandle* threads) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(threads);
    return (HcclResult)acquire_threads(c, engine, threadNum, notifyNumPerThread, threads, __func__);
}

EMU_API HcclResult HcclThreadAcquireWithConfig(HcclComm comm, CommEngine engine, uint32_t threadNum, ThreadType type,
                                               const ThreadConfig* config, ThreadHandle* threads) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(config);
    NEED_PTR(threads);
    if (type != THREAD_TYPE_TS) return (HcclResult)seterr(HCCL_E_PARA, __func__, "type %d is not THREAD_TYPE_TS (0)", (int)type);
    if (config->header.magicWord != HCOMM_THREAD_CONFIG_MAGIC_WORD || config->header.version != HCOMM_THREAD_CONFIG_VERSION)
        return (HcclResult)seterr(HCCL_E_PARA, __func__,
                      "config header (magic 0x%08x, version %u) is not initialised: call ThreadConfigInit first",
                      config->header.magicWord, config->header.version);
    return (HcclResult)acquire_threads(c, engine, threadNum, config->notifyNumPerThread, threads, __func__);
}

EMU_API HcclResult HcclThreadAcquireWithStream(HcclComm comm, CommEngine engine, aclrtStream stream, uint32_t notifyNum,
                                               ThreadHandle* thread) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(thread);
    if (engine != COMM_ENGINE_CPU && engine != COMM_ENGINE_CPU_TS) {
        if (int r = check_thread_engine(engine, __func__)) return (HcclResult)r;
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                      "engine %d cannot wrap a user stream: use COMM_ENGINE_CPU_TS (or COMM_ENGINE_CPU)", (int)engine);
    }
    if (notifyNum > 65535) return (HcclResult)seterr(HCCL_E_PARA, __func__, "notifyNum %u is above 65535", notifyNum);
    int code = 0;
    Stream* s = stream_resolve(stream, &code, __func__);
    if (!s) return (HcclResult)seterr(HCCL_E_PARA, __func__, "%s", last_err().c_str());
    if (s->dev != c->dev)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "stream %u belongs to device %d but the communicator's rank %u is on device %d",
                      s->id, s->dev->id, c->rank, c->dev->id);
    std::lock_guard<std::mutex> g(c->m);
    auto key = std::make_pair(s, s->id);
    auto it = c->stream_threads.find(key);
    if (it != c->stream_threads.end() && it->second->nslots >= notifyNum) {
        *thread = (ThreadHandle)(uintptr_t)thread_view(it->second, engine_side(engine), engine);
        return HCCL_SUCCESS;
    }
    std::string err;
    HThread* t = hthread_create(c->dev, c, notifyNum, true, s, engine, &err);
    if (!t)
        return (HcclResult)seterr(HCCL_E_UNAVAIL, __func__, "cannot wrap stream %u as a thread with %u notifies: %s", s->id, notifyNum,
                      err.c_str());
    c->threads.push_back(t);
    c->stream_threads[key] = t;
    *thread = (ThreadHandle)(uintptr_t)thread_view(t, engine_side(engine), engine);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclThreadExportToCommEngine(HcclComm comm, uint32_t threadNum, const ThreadHandle* threads,
                                                CommEngine dstCommEngine, ThreadHandle* exportedThreads) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(threads);
    NEED_PTR(exportedThreads);
    if (threadNum == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "threadNum is 0");
    if (threadNum > (1u << 20)) return (HcclResult)seterr(HCCL_E_PARA, __func__, "threadNum %u is not in (0, 1048576]", threadNum);
    if (int r = check_thread_engine(dstCommEngine, __func__)) return (HcclResult)r;
    std::vector<ThreadHandle> out(threadNum);
    for (uint32_t i = 0; i < threadNum; i++) {
        ThreadView* v = view_from_handle(threads[i]);
        if (!v) return (HcclResult)seterr(HCCL_E_PARA, __func__, "threads[%u] = 0x%llx is not a live thread handle", i,
                              (unsigned long long)threads[i]);
        if (v->t->comm != c)
            return (HcclResult)seterr(HCCL_E_PARA, __func__, "threads[%u] belongs to another communicator (rank %d of %s)", i,
                          v->t->comm ? comm_rank(v->t->comm) : -1, v->t->comm ? comm_name(v->t->comm) : "?");
        out[i] = (ThreadHandle)(uintptr_t)thread_view(v->t, engine_side(dstCommEngine), dstCommEngine);
    }
    memcpy(exportedThreads, out.data(), threadNum * sizeof(ThreadHandle));
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclDedicatedThreadAcquire(HcclComm comm, HcclDedicatedThreadType useType, uint32_t notifyNumPerThread,
                                              ThreadHandle* thread) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)notifyNumPerThread;
    (void)thread;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "dedicated threads (type %d) are not emulated; use HcclThreadAcquire(COMM_ENGINE_AICPU_TS)", (int)useType);
}

EMU_API HcclResult HcclThreadResGetInfo(HcclComm comm, ThreadHandle thread, ThreadResType resType, uint32_t infoLen,
                                        void** info) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)thread;
    (void)infoLen;
    (void)info;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "thread resource queries (resType %d) are not emulated", (int)resType);
}

/* ================================================================ channels */

namespace {
const char* proto_name(int p) {
    switch (p) {
        case COMM_PROTOCOL_HCCS: return "COMM_PROTOCOL_HCCS";
        case COMM_PROTOCOL_ROCE: return "COMM_PROTOCOL_ROCE";
        case COMM_PROTOCOL_PCIE: return "COMM_PROTOCOL_PCIE";
        case COMM_PROTOCOL_SIO: return "COMM_PROTOCOL_SIO";
        case COMM_PROTOCOL_UB_CTP: return "COMM_PROTOCOL_UB_CTP";
        case COMM_PROTOCOL_UBC_TP: return "COMM_PROTOCOL_UBC_TP";
        case COMM_PROTOCOL_UB_MEM: return "COMM_PROTOCOL_UB_MEM";
        case COMM_PROTOCOL_UBOE: return "COMM_PROTOCOL_UBOE";
        case COMM_PROTOCOL_HCCS_ONLY: return "COMM_PROTOCOL_HCCS_ONLY";
        case COMM_PROTOCOL_UB_RTP: return "COMM_PROTOCOL_UB_RTP";
        case COMM_PROTOCOL_RESERVED: return "COMM_PROTOCOL_RESERVED";
        default: return "unknown protocol";
    }
}

bool proto_ok(int p) {
    if (is_950())
        return p == COMM_PROTOCOL_UB_CTP || p == COMM_PROTOCOL_UBOE || p == COMM_PROTOCOL_ROCE || p == COMM_PROTOCOL_UB_MEM;
    return p == COMM_PROTOCOL_HCCS || p == COMM_PROTOCOL_ROCE || p == COMM_PROTOCOL_HCCS_ONLY || p == COMM_PROTOCOL_SIO ||
           p == COMM_PROTOCOL_PCIE;
}

int check_desc(Comm* c, const HcclChannelDesc& d, uint32_t i, const char* api) {
    if (d.header.magicWord != HCCL_CHANNEL_MAGIC_WORD)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u] header magic 0x%08x is not 0x%08x: initialise it with "
                      "HcclChannelDescInit", i, d.header.magicWord, HCCL_CHANNEL_MAGIC_WORD);
    if (d.remoteRank >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u].remoteRank %u is not below the rank size %u", i, d.remoteRank,
                      c->nranks);
    if (d.remoteRank == c->rank)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u].remoteRank %u is this rank itself", i, d.remoteRank);
    if (d.notifyNum > 1024)
        return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u].notifyNum %u is above 1024", i, d.notifyNum);
    if (!proto_ok((int)d.channelProtocol))
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, api, "channelDescs[%u]: protocol %s (%d) is not supported on %s (%s)", i,
                      proto_name((int)d.channelProtocol), (int)d.channelProtocol, cfg().soc_name.c_str(),
                      is_950() ? "use UB_CTP, UBOE, ROCE or UB_MEM" : "use HCCS, ROCE, HCCS_ONLY, SIO or PCIE");
    return 0;
}

int check_channel_engine(int engine, const char* api) {
    if (engine == COMM_ENGINE_CCU || engine == COMM_ENGINE_AIV)
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, api, "channels of engine %s are not emulated",
                      engine == COMM_ENGINE_CCU ? "COMM_ENGINE_CCU" : "COMM_ENGINE_AIV");
    if (engine < COMM_ENGINE_CPU || engine > COMM_ENGINE_AICPU_TS)
        return (HcclResult)seterr(HCCL_E_PARA, api, "engine %d is not a CommEngine value", engine);
    return 0;
}

std::tuple<int, uint32_t, int> chan_key(int engine, const HcclChannelDesc& d) {
    return std::make_tuple((int)engine_side(engine), d.remoteRank, (int)d.channelProtocol);
}

struct Pending {
    uint32_t idx;      /* descriptor index */
    uint32_t peer;
    uint64_t seq;
    uint32_t slot_base;
    bool posted = false, matched = false;
    /* the peer's request */
    uint32_t got_notify = 0, got_slot = 0;
    int32_t got_proto = 0;
};

int acquire_channels(Comm* c, int engine, const HcclChannelDesc* descs, uint32_t n, ChannelHandle* out, const char* api) {
    if (int r = check_channel_engine(engine, api)) return r;
    if (n == 0 || n > (1u << 20)) return (HcclResult)seterr(HCCL_E_PARA, api, "channelNum %u is not in (0, 1048576]", n);
    for (uint32_t i = 0; i < n; i++)
        if (int r = check_desc(c, descs[i], i, api)) return r;
    std::lock_guard<std::mutex> g(c->m);
    JobSeg* j = c->job;
    std::vector<Pending> pend;
    std::map<std::tuple<int, uint32_t, int>, size_t> in_call; /* key -> pend index */
    std::vector<int64_t> slot_of(n, -1);                       /* desc -> pend index, or -1 = existing */
    auto free_unmatched = [&] {
        for (auto& p : pend)
            if (!p.matched) slots_free(c->dev, p.slot_base, descs[p.idx].notifyNum);
    };
    for (uint32_t i = 0; i < n; i++) {
        auto key = chan_key(engine, descs[i]);
        if (c->channels.count(key)) continue;
        auto it = in_call.find(key);
        if (it != in_call.end()) {
            slot_of[i] = (int64_t)it->second;
            if (descs[pend[it->second].idx].notifyNum != descs[i].notifyNum) {
                free_unmatched();
                return (HcclResult)seterr(HCCL_E_PARA, api, "channelDescs[%u] and [%u] name the same channel (rank %u, %s) with "
                              "different notifyNum (%u, %u)", pend[it->second].idx, i, descs[i].remoteRank,
                              proto_name((int)descs[i].channelProtocol), descs[pend[it->second].idx].notifyNum,
                              descs[i].notifyNum);
            }
            continue;
        }
        Pending p;
        p.idx = i;
        p.peer = descs[i].remoteRank;
        std::string err;
        if (!slots_alloc(c->dev, descs[i].notifyNum, &p.slot_base, &err)) {
            free_unmatched();
            return (HcclResult)seterr(HCCL_E_UNAVAIL, api, "channelDescs[%u] (to rank %u): %s", i, p.peer, err.c_str());
        }
        in_call[key] = pend.size();
        slot_of[i] = (int64_t)pend.size();
        pend.push_back(p);
    }
    /* Sequence numbers per peer, in descriptor order (the peer numbers its requests alike). */
    for (auto& p : pend) p.seq = ++c->send_seq[p.peer];
    /* Posts and matches progress together: a full ring waits for the peer to consume. The ranks
     * still to match are published for the hang analysis (a cycle of hosts blocked here). */
    uint64_t waiting_for = ~0ull;
    auto step = [&]() -> bool {
        bool all = true;
        uint64_t unmatched = 0;
        for (auto& p : pend) {
            if (!p.posted) {
                MailBox& mb = j->mail[c->rank][p.peer];
                if (p.seq - mb.consumed.load(std::memory_order_acquire) <= kMailDepth) {
                    MailEntry& e = mb.e[p.seq % kMailDepth];
                    const HcclChannelDesc& d = descs[p.idx];
                    e.notify_num = d.notifyNum;
                    e.protocol = (int32_t)d.channelProtocol;
                    e.slot_base = p.slot_base;
                    e.engine = engine;
                    e.seq.store(p.seq, std::memory_order_release);
                    p.posted = true;
                    job_wake(j);
                }
            }
            if (!p.matched) {
                MailBox& mb = j->mail[p.peer][c->rank];
                MailEntry& e = mb.e[p.seq % kMailDepth];
                if (e.seq.load(std::memory_order_acquire) == p.seq) {
                    p.got_notify = e.notify_num;
                    p.got_proto = e.protocol;
                    p.got_slot = e.slot_base;
                    mb.consumed.store(p.seq, std::memory_order_release);
                    p.matched = true;
                    job_wake(j);
                }
            }
            all = all && p.posted && p.matched;
            if (!p.matched && p.peer < 64) unmatched |= 1ull << p.peer;
        }
        if (unmatched != waiting_for) {
            waiting_for = unmatched;
            comm_note_connect(c, unmatched);
        }
        return all;
    };
    std::vector<uint32_t> peers;
    for (auto& p : pend) peers.push_back(p.peer);
    std::string why;
    int wr = kWaitOk;
    if (!pend.empty()) {
        std::string who;
        for (uint32_t r : peers) who += (who.empty() ? "" : ", ") + std::to_string(r);
        comm_note_host_call(c, strprintf("%s: setting up channels with rank(s) %s", api, who.c_str()).c_str());
        wr = comm_wait(c, &j->wake, secs_deadline(connect_timeout_s(c)), step, &peers, &why);
        comm_note_connect(c, 0);
        comm_note_host_call(c, nullptr);
    }
    /* Whatever matched becomes a channel even on failure (the peer made its end). */
    int rc = 0;
    for (auto& p : pend) {
        if (!p.matched) continue;
        c->recv_seq[p.peer] = std::max(c->recv_seq[p.peer], p.seq);
        const HcclChannelDesc& d = descs[p.idx];
        if (!rc && (p.got_notify != d.notifyNum || p.got_proto != (int32_t)d.channelProtocol)) {
            rc = seterr(HCCL_E_PARA, api,
                        "channel %llu between rank %u and rank %u: this rank asked for %s with notifyNum %u "
                        "(channelDescs[%u]) but rank %u asked for %s with notifyNum %u; both ends must match",
                        (unsigned long long)p.seq, c->rank, p.peer, proto_name((int)d.channelProtocol), d.notifyNum,
                        p.idx, p.peer, proto_name(p.got_proto), p.got_notify);
        }
        Channel* ch = new Channel();
        ch->comm = c;
        ch->engine = engine;
        ch->protocol = (int)d.channelProtocol;
        ch->remote_rank = p.peer;
        ch->notify_num = std::min(d.notifyNum, p.got_notify);
        ch->local_slot_base = p.slot_base;
        ch->remote_ctl = c->ctl[p.peer];
        ch->remote_slot_base = p.got_slot;
        ch->remote_buf = c->pbuf[p.peer];
        ch->remote_buf_size = c->pbuf_size[p.peer];
        channel_register(ch);
        c->channels[chan_key(engine, d)] = ch;
    }
    if (wr != kWaitOk) {
        for (auto& p : pend)
            if (!p.matched) slots_free(c->dev, p.slot_base, descs[p.idx].notifyNum);
        std::string missing;
        for (auto& p : pend)
            if (!p.matched) missing += (missing.empty() ? "" : ", ") + std::to_string(p.peer);
        if (wr == kWaitTimeout)
            return (HcclResult)seterr(HCCL_E_TIMEOUT, api,
                          "rank %u: rank(s) %s did not call HcclChannelAcquire for the matching channel within "
                          "%s%u s (channel creation is collective: both ends must call it)", c->rank, missing.c_str(),
                          c->connect_timeout_s ? "the communicator's connect timeout of " : "HCCL_CONNECT_TIMEOUT=",
                          connect_timeout_s(c));
        if (wr == kWaitPeerDead) comm_abort(c, why, AbortKind::PeerDead);
        return (HcclResult)seterr(HCCL_E_REMOTE, api, "rank %u: %s while connecting to rank(s) %s", c->rank, why.c_str(),
                      missing.c_str());
    }
    if (rc) return rc;
    for (uint32_t i = 0; i < n; i++) out[i] = (ChannelHandle)(uintptr_t)c->channels.at(chan_key(engine, descs[i]));
    return HCCL_SUCCESS;
}
}  // namespace

EMU_API HcclResult HcclChannelAcquire(HcclComm comm, CommEngine engine, const HcclChannelDesc* channelDescs,
                                      uint32_t channelNum, ChannelHandle* channels) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(channelDescs);
    NEED_PTR(channels);
    return (HcclResult)acquire_channels(c, engine, channelDescs, channelNum, channels, __func__);
}

EMU_API HcclResult HcclChannelAcquireWithConfig(HcclComm comm, CommEngine engine, const HcclChannelDesc* channelDescs,
                                                uint32_t channelNum, HcclChannelConfig config, ChannelHandle* channels) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(channelDescs);
    NEED_PTR(channels);
    (void)config;
    return (HcclResult)acquire_channels(c, engine, channelDescs, channelNum, channels, __func__);
}

EMU_API HcclResult HcclChannelQuery(HcclComm comm, CommEngine engine, const HcclChannelDesc* channelDescs,
                                    uint32_t channelNum, ChannelHandle* channels) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(channelDescs);
    NEED_PTR(channels);
    if (int r = check_channel_engine(engine, __func__)) return (HcclResult)r;
    if (channelNum == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "channelNum is 0");
    std::lock_guard<std::mutex> g(c->m);
    int missing = -1;
    for (uint32_t i = 0; i < channelNum; i++) {
        auto it = c->channels.find(chan_key(engine, channelDescs[i]));
        channels[i] = it == c->channels.end() ? 0 : (ChannelHandle)(uintptr_t)it->second;
        if (!channels[i] && missing < 0) missing = (int)i;
    }
    if (missing >= 0)
        return (HcclResult)seterr(HCCL_E_NOT_FOUND, __func__, "no channel to rank %u over %s exists yet (channelDescs[%d])",
                      channelDescs[missing].remoteRank, proto_name((int)channelDescs[missing].channelProtocol), missing);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclChannelDestroy(HcclComm comm, const ChannelHandle* channels, uint32_t channelNum) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)channels;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "only CCU channels can be destroyed (spec §3.8); %u channel(s) stay until HcclCommDestroy", channelNum);
}

static Channel* comm_channel(Comm* c, ChannelHandle h, const char* api, int* rc) {
    Channel* ch = channel_from_handle(h);
    if (!ch) {
        *rc = seterr(h ? HCCL_E_PARA : HCCL_E_PTR, api, "channel 0x%llx is not a live channel handle", (unsigned long long)h);
        return nullptr;
    }
    if (ch->comm != c) {
        *rc = seterr(HCCL_E_PARA, api, "channel 0x%llx belongs to another communicator", (unsigned long long)h);
        return nullptr;
    }
    return ch;
}

EMU_API HcclResult HcclChannelGetHcclBuffer(HcclComm comm, ChannelHandle channel, void** buffer, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(buffer);
    NEED_PTR(size);
    int rc = 0;
    Channel* ch = comm_channel(c, channel, __func__, &rc);
    if (!ch) return (HcclResult)rc;
    *buffer = ch->remote_buf;
    *size = ch->remote_buf_size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclChannelGetRemoteMems(HcclComm comm, ChannelHandle channel, uint32_t* memNum, CommMem** remoteMems,
                                            char*** memTags) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(memNum);
    NEED_PTR(remoteMems);
    NEED_PTR(memTags);
    if (!is_950())
        return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "remote memories are an Ascend950 feature (SoC is %s)",
                      cfg().soc_name.c_str());
    int rc = 0;
    if (!comm_channel(c, channel, __func__, &rc)) return (HcclResult)rc;
    /* HcclCommMemReg is not emulated, so no channel carries registered memories. */
    *memNum = 0;
    *remoteMems = nullptr;
    *memTags = nullptr;
    return HCCL_SUCCESS;
}

/* ================================================================ buffers, engine contexts */

EMU_API HcclResult HcclGetHcclBuffer(HcclComm comm, void** buffer, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(buffer);
    NEED_PTR(size);
    *buffer = c->buf;
    *size = c->buf_size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetHcclBufferCleared(HcclComm comm, void** buffer, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(buffer);
    NEED_PTR(size);
    memset(c->buf, 0, c->buf_size);
    note_host_write(c->buf, c->buf_size);
    *buffer = c->buf;
    *size = c->buf_size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclGetRemoteIpcHcclBuf(HcclComm comm, uint64_t remoteRank, void** addr, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(addr);
    NEED_PTR(size);
    if (remoteRank >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "remoteRank %llu is not below the rank size %u", (unsigned long long)remoteRank,
                      c->nranks);
    *addr = c->pbuf[remoteRank];
    *size = c->pbuf_size[remoteRank];
    return HCCL_SUCCESS;
}

namespace {
int check_ctx_args(const char* tag, int engine, const char* api) {
    if (!tag) return (HcclResult)seterr(HCCL_E_PTR, api, "ctxTag is NULL");
    size_t n = strnlen(tag, HCCL_RES_TAG_MAX_LEN + 1);
    if (n == 0) return (HcclResult)seterr(HCCL_E_PARA, api, "ctxTag is empty");
    if (n > HCCL_RES_TAG_MAX_LEN)
        return (HcclResult)seterr(HCCL_E_PARA, api, "ctxTag is longer than HCCL_RES_TAG_MAX_LEN (%u)", HCCL_RES_TAG_MAX_LEN);
    return check_thread_engine(engine, api);
}
}  // namespace

EMU_API HcclResult HcclEngineCtxCreate(HcclComm comm, const char* ctxTag, CommEngine engine, uint64_t size, void** ctx) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ctx);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    if (size == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "size is 0 (ctxTag \"%s\")", ctxTag);
    if (size > (1ull << 34)) return (HcclResult)seterr(HCCL_E_PARA, __func__, "size %llu is too large", (unsigned long long)size);
    std::lock_guard<std::mutex> g(c->m);
    auto key = std::make_pair(std::string(ctxTag), (int)engine_side(engine));
    if (c->ctxs.count(key))
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "an engine context tagged \"%s\" already exists for this engine (%llu bytes); "
                      "use HcclEngineCtxGet", ctxTag, (unsigned long long)c->ctxs[key].size);
    EngineCtxBlock b;
    b.size = size;
    b.device = engine_side(engine) == Engine::Device;
    if (posix_memalign(&b.ptr, 64, size) != 0 || !b.ptr)
        return (HcclResult)seterr(HCCL_E_MEMORY, __func__, "cannot allocate a %llu-byte engine context", (unsigned long long)size);
    memset(b.ptr, 0, size);
    if (b.device) mem_register(b.ptr, size, c->dev->id, MemKind::EngineCtx);
    c->ctxs[key] = b;
    *ctx = b.ptr;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclEngineCtxGet(HcclComm comm, const char* ctxTag, CommEngine engine, void** ctx, uint64_t* size) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ctx);
    NEED_PTR(size);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ctxs.find(std::make_pair(std::string(ctxTag), (int)engine_side(engine)));
    if (it == c->ctxs.end())  /* the documented probe before HcclEngineCtxCreate (hcomm.md §3.9) */
        return (HcclResult)setmiss(HCCL_E_NOT_FOUND, __func__,
                                   "no engine context tagged \"%s\" for this engine (create it first)", ctxTag);
    *ctx = it->second.ptr;
    *size = it->second.size;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclEngineCtxCopy(HcclComm comm, CommEngine engine, const char* ctxTag, const void* srcCtx,
                                     uint64_t size, uint64_t dstCtxOffset) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(srcCtx);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ctxs.find(std::make_pair(std::string(ctxTag), (int)engine_side(engine)));
    if (it == c->ctxs.end())
        return (HcclResult)seterr(HCCL_E_NOT_FOUND, __func__, "no engine context tagged \"%s\" for this engine", ctxTag);
    uint64_t cap = it->second.size;
    if (size == 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "size is 0");
    if (dstCtxOffset > cap || size > cap - dstCtxOffset)
        return (HcclResult)seterr(HCCL_E_PARA, __func__,
                      "dstCtxOffset %llu + size %llu runs past the end of engine context \"%s\" (%llu bytes)",
                      (unsigned long long)dstCtxOffset, (unsigned long long)size, ctxTag, (unsigned long long)cap);
    memmove(static_cast<char*>(it->second.ptr) + dstCtxOffset, srcCtx, size);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclEngineCtxDestroy(HcclComm comm, const char* ctxTag, CommEngine engine) {
    RESOLVE_COMM(c, comm);
    if (int r = check_ctx_args(ctxTag, engine, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->ctxs.find(std::make_pair(std::string(ctxTag), (int)engine_side(engine)));
    if (it == c->ctxs.end())
        return (HcclResult)seterr(HCCL_E_NOT_FOUND, __func__, "no engine context tagged \"%s\" for this engine", ctxTag);
    if (it->second.device) mem_unregister(it->second.ptr);
    free(it->second.ptr);
    c->ctxs.erase(it);
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclDevMemAcquire(HcclComm comm, const char* memTag, uint64_t* size, void** addr, bool* newCreated) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(size);
    NEED_PTR(addr);
    NEED_PTR(newCreated);
    if (int r = check_ctx_args(memTag, COMM_ENGINE_AICPU_TS, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    auto it = c->devmem.find(memTag);
    if (it != c->devmem.end()) {
        *size = it->second.size;
        *addr = it->second.ptr;
        *newCreated = false;
        return HCCL_SUCCESS;
    }
    if (*size == 0 || *size > (1ull << 34))
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "*size %llu is not in (0, 16 GiB]", (unsigned long long)*size);
    EngineCtxBlock b;
    b.size = *size;
    b.device = true;
    if (posix_memalign(&b.ptr, 64, b.size) != 0 || !b.ptr)
        return (HcclResult)seterr(HCCL_E_MEMORY, __func__, "cannot allocate %llu bytes", (unsigned long long)b.size);
    memset(b.ptr, 0, b.size);
    mem_register(b.ptr, b.size, c->dev->id, MemKind::Device);
    c->devmem[memTag] = b;
    *addr = b.ptr;
    *newCreated = true;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclCommMemReg(HcclComm comm, const char* memTag, const CommMem* mem, HcclMemHandle* memHandle) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)mem;
    (void)memHandle;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "memory registration (memTag \"%s\") is an Ascend950 feature the emulator does not provide; "
                  "use the HCCL buffer (HcclGetHcclBuffer / HcclChannelGetHcclBuffer)",
                  memTag ? memTag : "(null)");
}

EMU_API HcclResult HcclAicpuKernelLaunch(HcclComm comm, const HcclOpDesc* opInfo, const HcclKernelFuncInfo* funcInfo,
                                         ThreadHandle aicpuThreadHandle, aclrtStream userStream,
                                         const HcclKernelLaunchCfg* kernelLaunchCfg) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)opInfo;
    (void)aicpuThreadHandle;
    (void)userStream;
    (void)kernelLaunchCfg;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__,
                  "HCCL-managed kernel launch is not emulated; load the op-info JSON with aclrtBinaryLoadFromFile and "
                  "launch %s with aclrtLaunchKernelWithConfig",
                  funcInfo ? funcInfo->kernelFuncName : "the kernel");
}

/* ================================================================ rank graph */

namespace {
int check_layer(Comm* c, uint32_t layer, const char* api) {
    (void)c;
    if (layer != 0) return (HcclResult)seterr(HCCL_E_PARA, api, "netLayer %u does not exist (the emulator has one layer, 0)", layer);
    return 0;
}

void fill_endpoint(Comm* c, EndpointDesc* e, uint32_t rank, int proto) {
    EndpointDescInit(e, 1);
    e->protocol = (CommProtocol)proto;
    memset(e->commAddr.raws, 0, sizeof e->commAddr.raws);
    e->commAddr.type = COMM_ADDR_TYPE_ID;
    e->commAddr.id = rank;
    memset(e->loc.raws, 0, sizeof e->loc.raws);
    e->loc.locType = ENDPOINT_LOC_TYPE_DEVICE;
    e->loc.device.devPhyId = (uint32_t)c->device[rank];
}
}  // namespace

EMU_API HcclResult HcclRankGraphGetLayers(HcclComm comm, uint32_t** netLayers, uint32_t* netLayerNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(netLayers);
    NEED_PTR(netLayerNum);
    c->layer0 = 0;
    *netLayers = &c->layer0;
    *netLayerNum = 1;
    return HCCL_SUCCESS;
}

static HcclResult all_ranks(Comm* c, uint32_t** ranks, uint32_t* rankNum) {
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list.resize(c->nranks);
    for (uint32_t r = 0; r < c->nranks; r++) c->graph_list[r] = r;
    *ranks = c->graph_list.data();
    *rankNum = c->nranks;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetRanksByLayer(HcclComm comm, uint32_t netLayer, uint32_t** ranks, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ranks);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    return all_ranks(c, ranks, rankNum);
}

EMU_API HcclResult HcclRankGraphGetRankSizeByLayer(HcclComm comm, uint32_t netLayer, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    *rankNum = c->nranks;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoTypeByLayer(HcclComm comm, uint32_t netLayer, CommTopo* topoType) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoType);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    *topoType = COMM_TOPO_1DMESH;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetInstSizeListByLayer(HcclComm comm, uint32_t netLayer, uint32_t** instSizeList,
                                                       uint32_t* listSize) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(instSizeList);
    NEED_PTR(listSize);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list.assign(1, c->nranks);
    *instSizeList = c->graph_list.data();
    *listSize = 1;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetLinks(HcclComm comm, uint32_t netLayer, uint32_t srcRank, uint32_t dstRank,
                                         CommLink** links, uint32_t* linkNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(links);
    NEED_PTR(linkNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    if (srcRank >= c->nranks || dstRank >= c->nranks)
        return (HcclResult)seterr(HCCL_E_PARA, __func__, "srcRank %u / dstRank %u: both must be below the rank size %u", srcRank,
                      dstRank, c->nranks);
    if (srcRank == dstRank) return (HcclResult)seterr(HCCL_E_PARA, __func__, "srcRank and dstRank are both %u: no link to itself", srcRank);
    int proto = is_950() ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
    std::lock_guard<std::mutex> g(c->m);
    c->links.resize(1);
    CommLink* l = &c->links[0];
    CommLinkInit(l, 1);
    fill_endpoint(c, &l->srcEndpointDesc, srcRank, proto);
    fill_endpoint(c, &l->dstEndpointDesc, dstRank, proto);
    memset(l->linkAttr.raws, 0, sizeof l->linkAttr.raws);
    l->linkAttr.linkProtocol = (CommProtocol)proto;
    l->linkAttr.hop = 1;
    *links = c->links.data();
    *linkNum = 1;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoInstsByLayer(HcclComm comm, uint32_t netLayer, uint32_t** topoInsts,
                                                    uint32_t* topoInstNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoInsts);
    NEED_PTR(topoInstNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    std::lock_guard<std::mutex> g(c->m);
    c->graph_list.assign(1, 0);
    *topoInsts = c->graph_list.data();
    *topoInstNum = 1;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetTopoType(HcclComm comm, uint32_t netLayer, uint32_t topoInstId, CommTopo* topoType) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(topoType);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    if (topoInstId != 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "topoInstId %u does not exist (only 0)", topoInstId);
    *topoType = COMM_TOPO_1DMESH;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetRanksByTopoInst(HcclComm comm, uint32_t netLayer, uint32_t topoInstId,
                                                   uint32_t** ranks, uint32_t* rankNum) {
    RESOLVE_COMM(c, comm);
    NEED_PTR(ranks);
    NEED_PTR(rankNum);
    if (int r = check_layer(c, netLayer, __func__)) return (HcclResult)r;
    if (topoInstId != 0) return (HcclResult)seterr(HCCL_E_PARA, __func__, "topoInstId %u does not exist (only 0)", topoInstId);
    return all_ranks(c, ranks, rankNum);
}

EMU_API HcclResult HcclGetHeterogMode(HcclComm comm, HcclHeterogMode* mode) {
    RESOLVE_COMM(c, comm);
    (void)c;
    NEED_PTR(mode);
    *mode = HCCL_HETEROG_MODE_HOMOGENEOUS;
    return HCCL_SUCCESS;
}

EMU_API HcclResult HcclRankGraphGetEndpointNum(HcclComm comm, uint32_t layer, uint32_t topoInstId, uint32_t* num) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)num;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "endpoint queries (layer %u, topoInst %u) are not emulated; use "
                  "HcclRankGraphGetLinks", layer, topoInstId);
}

EMU_API HcclResult HcclRankGraphGetEndpointDesc(HcclComm comm, uint32_t layer, uint32_t topoInstId, uint32_t* descNum,
                                                EndpointDesc* endpointDesc) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)descNum;
    (void)endpointDesc;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "endpoint queries (layer %u, topoInst %u) are not emulated; use "
                  "HcclRankGraphGetLinks", layer, topoInstId);
}

EMU_API HcclResult HcclRankGraphGetEndpointInfo(HcclComm comm, uint32_t rankId, const EndpointDesc* endpointDesc,
                                                EndpointAttr endpointAttr, uint32_t infoLen, void* info) {
    RESOLVE_COMM(c, comm);
    (void)c;
    (void)endpointDesc;
    (void)infoLen;
    (void)info;
    return (HcclResult)seterr(HCCL_E_NOT_SUPPORT, __func__, "endpoint attribute %d of rank %u is not emulated", (int)endpointAttr,
                  rankId);
}
