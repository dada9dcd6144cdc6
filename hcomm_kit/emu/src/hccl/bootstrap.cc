/* HCCL host plane: creating communicators (hcomm.md §3.6; ARCHITECTURE.md "Emulator model").
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

namespace {
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
}  // namespace

/* Releases everything bootstrap acquired (failure paths and destroy). */
void comm_release_segments(Comm* c) {
    if (c->net_key) net_unsubscribe(c->net_key); /* no handler runs for c once this returns */
    for (uint32_t r = 0; r < c->link.size(); r++) {
        if (c->link[r]) {
            mem_unregister(c->link[r]->base);
            net_link_close(c->link[r]);
            c->link[r] = nullptr;
            c->pbuf[r] = nullptr;
        }
        if (c->standin[r]) {
            munmap(c->standin[r], sizeof(DevCtl));
            c->standin[r] = nullptr;
            c->ctl[r] = nullptr;
        }
    }
    if (c->net_mem) {
        net_mem_unregister(c->net_mem);
        c->net_mem = nullptr;
    }
    if (c->area_mem) {
        net_mem_unregister(c->area_mem);
        c->area_mem = nullptr;
    }
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

namespace {

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
    if (comm_far(c, r)) return 0; /* its card was read from the board (net_attach) */
    if (!shm_open_map(&c->ctl_seg[r], std::string(e.ctl_name, strnlen(e.ctl_name, sizeof e.ctl_name)), sizeof(DevCtl),
                      &err)) {
        if (peer_dead_now(c, r)) return (HcclResult)seterr(HCCL_E_REMOTE, api, "%s during initialisation", comm_dead_msg(c, r).c_str());
        return (HcclResult)seterr(HCCL_E_SYSCALL, api, "rank %u: %s", r, err.c_str());
    }
    c->ctl[r] = static_cast<DevCtl*>(c->ctl_seg[r].addr);
    if (c->link.size() && c->link[r]) return 0; /* HCOMM_KIT_TRANSPORT=ucx: its buffer is reached over the link */
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

struct InitArgs {
    std::string jobid;
    NetMode net = NetMode::Shm; /* version 2 root info, or a multi-host parent */
    NetBoardRef board{};        /* where the ranks meet (net != Shm) */
    std::string board_key;      /* the key of the board slot (net != Shm): the job id, and for a
                                 * sub-communicator how many of that id its parent made */
    std::string name;        /* "" = default */
    uint64_t buf_size = 0;   /* 0 = default */
    bool has_topo = false;   /* false: HCOMM_KIT_TOPOLOGY, else one server */
    Topology topo;
    std::string algo;        /* config->hcclAlgo; "" = HCCL_ALGO of the environment */
};

constexpr int kRemoteDevice = -2; /* device of a far rank's stand-in buffer: never a local device */

/* A communicator with ranks on several hosts (or HCOMM_KIT_TRANSPORT=ucx): every rank's card through
 * the rendezvous board, then a link to each rank that is on another host (or to every rank, ucx);
 * the far ranks' entries of this host's job segment are filled from their cards. */
int net_attach(Comm* c, const NetCard& mine, const InitArgs& a, uint64_t deadline, const char* api) {
    JobSeg* j = c->job;
    std::vector<NetCard> cards;
    std::string err;
    auto stop = [&](int* code) -> std::string {
        std::string why;
        if (job_aborted(j, &why)) {
            *code = HCCL_E_REMOTE;
            return why;
        }
        if (deadline && now_ns() > deadline) {
            *code = HCCL_E_TIMEOUT;
            return strprintf("not every rank arrived within HCCL_CONNECT_TIMEOUT=%u s", cfg().connect_timeout_s);
        }
        return "";
    };
    comm_note_host_call(c, "HcclCommInitRootInfo: meeting the ranks of other hosts");
    int rc = net_board_exchange(a.board, net_job_key(a.board_key), c->nranks, c->rank, mine, &cards, stop, &err);
    comm_note_host_call(c, nullptr);
    if (rc)
        return (HcclResult)seterr(rc, api, "rank %u of %u (job %s, host %s): %s", c->rank, c->nranks, c->jobid.c_str(),
                                  mine.host, err.c_str());
    uint32_t nlocal = 0;
    for (uint32_t r = 0; r < c->nranks; r++) {
        const NetCard& k = cards[r];
        bool far = memcmp(k.host_key, mine.host_key, sizeof mine.host_key) != 0;
        c->far[r] = far;
        uint32_t lead = 0;
        while (memcmp(cards[lead].host_key, k.host_key, sizeof k.host_key) != 0) lead++;
        c->far_lead[r] = far && lead == r;
        c->host[r] = std::string(k.host, strnlen(k.host, sizeof k.host));
        if (!far) nlocal++;
        if (r == c->rank || (!far && c->net != NetMode::Ucx)) continue;
        PeerLink* l = net_link_open(k, &err);
        if (!l)
            return (HcclResult)seterr(HCCL_E_NETWORK, api, "rank %u: the link to rank %u (host %s): %s", c->rank, r,
                                      c->host[r].c_str(), err.c_str());
        c->link[r] = l;
        c->pbuf[r] = l->base;
        c->pbuf_size[r] = k.buf_size;
        mem_register(l->base, k.buf_size, kRemoteDevice, MemKind::HcclBuffer);
        if (!far) continue;
        c->pid[r] = k.pid;
        c->device[r] = k.device;
        void* st = mmap(nullptr, sizeof(DevCtl), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
        if (st == MAP_FAILED)
            return (HcclResult)seterr(HCCL_E_MEMORY, api, "rank %u: cannot map a stand-in control block for rank %u",
                                      c->rank, r);
        c->standin[r] = st;
        c->ctl[r] = static_cast<DevCtl*>(st);
        JobRank& e = j->ranks[r]; /* the same rank table on every host */
        e.pid.store(k.pid);
        e.device.store(k.device);
        e.buf_size.store(k.buf_size);
        uint32_t free_state = kRankFree;
        e.state.compare_exchange_strong(free_state, kRankAttached);
    }
    c->nlocal = nlocal;
    note_local_ranks(nlocal);
    if (c->rank == 0 && c->topo.nservers > 1) { /* servers of the topology against hosts */
        for (uint32_t r = 1; r < c->nranks; r++) {
            uint32_t first = 0;
            while (c->topo.server[first] != c->topo.server[r]) first++;
            if (first != r && c->far[r] != c->far[first] && c->host[r] != c->host[first]) {
                EMU_LOG(LOG_WARN, "communicator %s: server %u of the topology has ranks on host %s and host %s: its "
                        "in-server pairs run over the network (results and the model's times are those of the topology; "
                        "only the wall time grows). Give each host whole servers (--np a multiple of the server size)",
                        c->name.c_str(), c->topo.server[r], c->host[first].c_str(), c->host[r].c_str());
                break;
            }
        }
    }
    EMU_LOG(LOG_INFO, "communicator %s: rank %u on host %s; %u of %u ranks on this host, the others over the network "
            "(HCOMM_KIT_TRANSPORT=%s)", c->name.c_str(), c->rank, mine.host, nlocal, c->nranks, net_mode_name(c->net));
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
    if (a.has_topo) c->topo = a.topo;
    else if (int rc = topology_from_env(nranks, &c->topo, api)) return rc;
    /* The algorithm selection's inputs (hccl/algo_select.h). HCCL_ALGO: the communicator's
     * hcclAlgo first, then the environment (CANN's FilterCmByHcclAlgo); HCCL_USE_NEW_SELECTOR must be
     * 0 or 1 (alg_env_config.cc ParseUseNewSelector). */
    c->cann_topo = cann_topo_info(c->topo, rank);
    {
        const char* env = getenv("HCCL_ALGO");
        std::string err;
        if (int rc = parse_algo_config(!a.algo.empty() ? a.algo : env ? env : "", &c->algo_cfg, &err))
            return seterr_str(rc, api, a.algo.empty() ? err : "config->hcclAlgo: " + err);
        const char* ns = getenv("HCCL_USE_NEW_SELECTOR");
        if (ns && *ns && strcmp(ns, "0") != 0 && strcmp(ns, "1") != 0)
            return seterr(HCCL_E_PARA, api, "HCCL_USE_NEW_SELECTOR='%s' must be 0 or 1 (1: CANN's cost table and tuner "
                          "plugin choose the algorithm of allreduce, allgather and reduce-scatter)", ns);
        c->new_selector = ns && strcmp(ns, "1") == 0;
    }
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
    bool multi = a.net != NetMode::Shm;
    if (multi) {
        std::string err;
        if (int rc = net_start(&err))
            return (HcclResult)seterr(rc, api, "rank %u: the root info asks for ranks on several hosts "
                                      "(HCOMM_KIT_TRANSPORT=%s on the root) but the network cannot start: %s", rank,
                                      net_mode_name(a.net), err.c_str());
        c->net = a.net;
        c->net_key = net_job_key(a.jobid);
        c->board = a.board;
        c->link.assign(nranks, nullptr);
        c->far.assign(nranks, 0);
        c->far_lead.assign(nranks, 0);
        c->host.assign(nranks, std::string());
        c->standin.assign(nranks, nullptr);
    }

    if (int rc = job_attach(jname, &c->job_seg, deadline, api)) return rc;
    JobSeg* j = c->job = static_cast<JobSeg*>(c->job_seg.addr);
    Comm* cp = c.get();
    if (multi) net_subscribe(c->net_key, cp); /* before its card is on the board: nobody sends earlier */
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
    NetCard card;
    if (multi) {
        memset(&card, 0, sizeof card);
        card.magic = kNetCardMagic;
        card.rank = rank;
        card.pid = (int32_t)getpid();
        card.device = dev->id;
        net_host_key(card.host_key);
        snprintf(card.host, sizeof card.host, "%s", net_host_name().c_str());
        card.buf_addr = (uint64_t)(uintptr_t)c->buf;
        card.buf_size = c->buf_size;
        /* its model log, which the ranks of other hosts read (model/api.cc) */
        card.area_addr = (uint64_t)(uintptr_t)&j->model[rank];
        card.area_size = sizeof(ModelArea);
        if (net_worker_address(card.addr, &card.addr_len, &err) ||
            net_mem_register(c->buf, c->buf_size, true, &c->net_mem, card.rkey, &card.rkey_len, &err) ||
            net_mem_register(&j->model[rank], sizeof(ModelArea), false, &c->area_mem, card.area_rkey,
                             &card.area_rkey_len, &err)) {
            int rc = seterr(HCCL_E_NETWORK, api, "rank %u: %s", rank, err.c_str());
            job_set_abort(j, (int)rank, last_err());
            return fail(rc);
        }
    }
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
    if (multi) {
        if (int rc = net_attach(cp, card, a, deadline, api)) {
            job_set_abort(j, (int)rank, last_err());
            return fail(rc);
        }
    } else {
        note_local_ranks(nranks);
    }

    /* Wait for every rank, mapping peers as they publish. */
    std::vector<bool> mapped(nranks, false);
    int map_rc = 0;
    auto all_mapped = [&]() -> bool {
        bool all = true;
        for (uint32_t r = 0; r < nranks; r++) {
            if (mapped[r] || comm_far(cp, r)) continue;
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
            return !comm_far(cp, r) && j->ranks[r].state.load() < kRankPublished;
        });
        if (wr == kWaitPeerDead) job_set_abort(j, (int)rank, why);
        return fail(rc);
    }
    me.state.store(kRankAttached, std::memory_order_release);
    j->attached.fetch_add(1);
    job_wake(j);
    uint32_t here = multi ? c->nlocal : nranks;
    wr = comm_wait(cp, &j->wake, deadline, [&] { return j->attached.load() >= here; }, nullptr, &why);
    if (wr != kWaitOk) {
        int rc = wait_fail(cp, wr, why, api, "attached", [&](uint32_t r) {
            return !comm_far(cp, r) && j->ranks[r].state.load() < kRankAttached;
        });
        if (wr == kWaitPeerDead) job_set_abort(j, (int)rank, why);
        return fail(rc);
    }
    /* Every peer mapped our buffer: its name is no longer needed (nor the job's, which the
     * last arriver removed). */
    unlink_name(&c->buf_seg);
    if (multi) shm_unlink(jname.c_str()); /* every rank of this host has it (the count above) */
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

int parse_root(const HcclRootInfo* root, InitArgs* a, const char* api) {
    std::string* job = &a->jobid;
    RootBlob b;
    memcpy(&b, root->internal, sizeof b);
    if (b.magic != kRootMagic)
        return (HcclResult)seterr(HCCL_E_PARA, api,
                      "rootInfo was not produced by HcclGetRootInfo of this emulator (magic 0x%08x, expected \"HCKR\"); "
                      "broadcast the bytes HcclGetRootInfo wrote on the root rank to every rank",
                      b.magic);
    if (b.version != 1 && b.version != 2)
        return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo version %u is not supported (expected 1 or 2)", b.version);
    if (b.version == 2) { /* ranks on several hosts: uids may differ between hosts */
        if (b.mode != (uint32_t)NetMode::MultiHost && b.mode != (uint32_t)NetMode::Ucx)
            return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo names transport mode %u, not multihost or ucx", b.mode);
        if (b.board.addr_len == 0 || b.board.addr_len > kNetAddrMax)
            return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo carries a malformed rendezvous address");
        a->net = (NetMode)b.mode;
        a->board = b.board;
    } else if (b.uid != (uint32_t)getuid())
        return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo was created by uid %u but this process runs as uid %u", b.uid,
                      (unsigned)getuid());
    size_t n = strnlen(b.job, sizeof b.job);
    if (n == 0 || n >= sizeof b.job) return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo carries a malformed job id");
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)b.job[i])) return (HcclResult)seterr(HCCL_E_PARA, api, "rootInfo carries a malformed job id");
    *job = std::string(b.job, n);
    a->board_key = *job;
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
    n = strnlen(cfgp->hcclAlgo, HCCL_COMM_ALGO_MAX_LENGTH);
    if (n == HCCL_COMM_ALGO_MAX_LENGTH)
        return (HcclResult)seterr(HCCL_E_PARA, api, "config->hcclAlgo is not NUL-terminated within %u bytes",
                                  (unsigned)HCCL_COMM_ALGO_MAX_LENGTH);
    if (n) a->algo.assign(cfgp->hcclAlgo, n);
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
    if (int r = parse_root(root, &a, api)) return r;
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
    std::map<uint32_t, uint32_t> rank_server; /* rank id -> index in server_list */
    std::map<std::string, uint32_t> server_ids; /* server_id -> index in server_list */
    for (size_t si = 0; si < sl->arr.size(); si++) {
        const json::Value& s = sl->arr[si];
        std::string sid = json_str(s.get("server_id"));
        if (!sid.empty() && !server_ids.emplace(sid, (uint32_t)si).second)
            return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: server_list[%zu].server_id \"%s\" appears twice",
                                      path, si, sid.c_str());
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
            rank_server[rid] = (uint32_t)si;
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
    /* Topology: server_list entries are servers; super_pod_list (CANN's A3 rank table,
     * hicann/hccl docs/zh/user_guide/cluster_info_config/rank_table_config_a3.md) groups them into
     * super-pods; without it, "AI Server mode" (every server on its own). */
    std::vector<uint32_t> servers(n), pods;
    for (uint32_t r = 0; r < n; r++) servers[r] = rank_server[r];
    if (const json::Value* spl = v.get("super_pod_list")) {
        if (!spl->is_array())
            return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: \"super_pod_list\" is not an array", path);
        std::vector<int64_t> pod_of_server(sl->arr.size(), -1);
        for (size_t pi = 0; pi < spl->arr.size(); pi++) {
            const json::Value* psl = spl->arr[pi].get("server_list");
            if (!psl || !psl->is_array())
                return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: super_pod_list[%zu] has no \"server_list\" array",
                                          path, pi);
            for (size_t k = 0; k < psl->arr.size(); k++) {
                std::string sid = json_str(psl->arr[k].get("server_id"));
                auto it = server_ids.find(sid);
                if (it == server_ids.end())
                    return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: super_pod_list[%zu].server_list[%zu] names "
                                              "server_id \"%s\", which server_list does not have", path, pi, k, sid.c_str());
                if (pod_of_server[it->second] >= 0)
                    return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: server_id \"%s\" is in super-pods %lld and %zu",
                                              path, sid.c_str(), (long long)pod_of_server[it->second], pi);
                pod_of_server[it->second] = (int64_t)pi;
            }
        }
        for (size_t si = 0; si < sl->arr.size(); si++)
            if (pod_of_server[si] < 0)
                return (HcclResult)seterr(HCCL_E_PARA, api, "rank table %s: server_list[%zu] (server_id \"%s\") is in no "
                                          "super-pod of \"super_pod_list\"", path, si, json_str(sl->arr[si].get("server_id")).c_str());
        pods.resize(n);
        for (uint32_t r = 0; r < n; r++) pods[r] = (uint32_t)pod_of_server[servers[r]];
    }
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
    a.has_topo = true;
    if (int r = topology_build(&a.topo, soc_product(), std::string("rank table ") + path, servers, pods, api)) return r;
    return comm_init(n, rank, a, comm, api);
}

}  // namespace

}  // namespace emu

using namespace emu;

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
    NetMode mode = net_mode_env();
    if (mode != NetMode::Shm) { /* ranks may be on several hosts: they meet on a board in this process */
        std::string err;
        if (int rc = net_board_create(&b.board, &err))
            return (HcclResult)seterr(rc, __func__, "HCOMM_KIT_TRANSPORT=%s: %s", net_mode_name(mode), err.c_str());
        b.version = 2;
        b.mode = (uint32_t)mode;
    }
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
    if (parent->net != NetMode::Shm) { /* the members meet on the parent's board */
        a.net = parent->net;
        a.board = parent->board;
        uint32_t made;
        {
            std::lock_guard<std::mutex> g(parent->m);
            made = ++parent->sub_made[subCommId];
        }
        a.board_key = a.jobid + strprintf("#%u", made);
    }
    if (int r = apply_config(config, &a, __func__)) return (HcclResult)r;
    if (a.name.empty()) a.name = parent->name + strprintf("_sub%llu", (unsigned long long)subCommId);
    a.has_topo = true;
    a.topo = parent->topo.restrict_to(std::vector<uint32_t>(rankIds, rankIds + rankNum));
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
