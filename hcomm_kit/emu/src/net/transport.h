/*
 * hcomm-kit CPU emulator, network layer: how a rank reaches a peer whose memory it cannot map (a
 * rank on another host, or every peer with HCOMM_KIT_TRANSPORT=ucx).
 *
 * Ranks of one host share memory: the data plane writes into a peer's mapped HCCL buffer and sets
 * its notify slots directly (hcomm/sched.cc), with no call through this interface. A pair that
 * cannot share memory gets a PeerLink: one-sided write/read into the peer's registered HCCL buffer,
 * reductions, notify records and control messages, implemented over UCX (net/ucx.cc). The
 * communicator's ranks meet through a rendezvous board in the root's process (its worker address
 * travels in the root info): every rank sends it its card (NetCard) and gets every rank's back.
 *
 * Layering: base < acl < net < hcomm < hccl. The network calls the layers above only through
 * net_hooks (net/hooks.h), filled in at library load.
 */
#ifndef HCOMM_KIT_EMU_NET_TRANSPORT_H
#define HCOMM_KIT_EMU_NET_TRANSPORT_H

#include "acl/device.h"

namespace emu {

/* ------------------------------------------------------------------ modes */

/* HCOMM_KIT_TRANSPORT: shm (default: every rank on this host), multihost (ranks on several hosts:
 * same-host pairs through shared memory, the others over the network), ucx (every pair over the
 * network, even on one host: tests the network path). */
enum class NetMode : uint32_t { Shm = 0, MultiHost = 1, Ucx = 2 };
NetMode net_mode_env();
const char* net_mode_name(NetMode m);

/* ------------------------------------------------------------------ cards and the board */

constexpr uint32_t kNetAddrMax = 1536; /* a UCX worker address (tcp: ~80 bytes; rc/ud/dc: a few hundred) */
constexpr uint32_t kNetRkeyMax = 256;  /* a packed memory key */
constexpr uint32_t kNetCardMagic = 0x4452434e; /* "NCRD" */

/* What one rank tells the others about itself at communicator creation (POD, fixed size). */
struct NetCard {
    uint32_t magic;
    uint32_t rank;
    int32_t pid;
    int32_t device;
    uint64_t host_key[2];   /* identity of the host's shared memory (net_host_key) */
    char host[64];          /* host name, for messages */
    uint64_t buf_addr;      /* its HCCL buffer in its own address space */
    uint64_t buf_size;
    uint32_t addr_len;      /* bytes of addr used: its process's UCX worker address */
    uint32_t rkey_len;      /* bytes of rkey used: the key of its HCCL buffer */
    uint8_t addr[kNetAddrMax];
    uint8_t rkey[kNetRkeyMax];
    uint64_t area_addr;     /* its log area (the timing model's, in its host's job segment): read by others */
    uint64_t area_size;
    uint32_t area_rkey_len;
    uint32_t pad;
    uint8_t area_rkey[kNetRkeyMax];
};

/* Where a rendezvous board lives: the worker of the process that made the root info (in the root
 * info; a communicator keeps it for its sub-communicators). */
struct NetBoardRef {
    uint32_t addr_len;
    uint8_t addr[kNetAddrMax];
};

/* This host as a shared-memory domain: ranks with equal keys map each other's segments. Boot id,
 * the device and inode of /dev/shm and the network namespace: two network namespaces with private
 * /dev/shm mounts on one machine are two hosts. */
void net_host_key(uint64_t key[2]);
std::string net_host_name();

/* ------------------------------------------------------------------ control messages */

/* A control-plane message between the processes of two ranks of one communicator (job key). */
enum class CtlType : uint32_t {
    Abort = 1,      /* a: kind, from: aborting rank; payload: the reason */
    Gone = 2,       /* from destroyed its communicator */
    Mail = 3,       /* channel request from -> to: a: seq, b: notify_num, c: protocol, d: slot_base, e: engine */
    MailAck = 4,    /* to consumed from's requests up to a (mail[to][from].consumed on from's host) */
    BarArrive = 5,  /* from arrived at barrier a (sent to rank 0's process) */
    BarRelease = 6, /* barrier a is complete */
    CallPost = 7,   /* from posted collective call a (the call check); payload: its description */
    CallChecked = 8, /* from compared its call a with the others' (the call check) */
};
struct CtlMsg {
    uint64_t key = 0;   /* the communicator's job key (net_job_key) */
    uint32_t type = 0;  /* CtlType */
    uint32_t from = 0, to = 0;
    uint32_t pad = 0;
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
};
uint64_t net_job_key(const std::string& jobid);

/* ------------------------------------------------------------------ links */

/* The words a notify record carries to the slot's owner (what a local record stores, see
 * diag/checker.cc record_slot): the model id of the recording task, its provenance for the notify
 * checker (0: checker off) and its trace flow id (0: none). */
struct RecordWords {
    uint64_t mrec = 0, prov = 0, flow = 0;
    uint64_t key = 0;   /* the communicator's job key: the owner reports a lost notify through it */
};

/* One rank's reach into a peer that it cannot map. Every operation returns 0, or an HCCL code with
 * *err set (the peer died, the network failed). Offsets are into the peer's HCCL buffer. Thread
 * safe; an operation returns when it is complete at this end (a write's data may still travel:
 * a later operation on the link is ordered after it). */
class PeerLink {
public:
    virtual ~PeerLink() = default;
    virtual int write(uint64_t off, const void* src, uint64_t n, std::string* err) = 0;
    virtual int read(void* dst, uint64_t off, uint64_t n, std::string* err) = 0;
    virtual int write_reduce(uint64_t off, const void* src, uint64_t count, int dtype, int op, std::string* err) = 0;
    virtual int read_reduce(void* dst, uint64_t off, uint64_t count, int dtype, int op, std::string* err) = 0;
    /* Reads n bytes at offset off of the peer's log area (NetCard::area_addr). */
    virtual int read_area(void* dst, uint64_t off, uint64_t n, std::string* err) = 0;
    /* Sets notify slot `slot` of the peer's device, as a local record would. */
    virtual int record(uint32_t slot, const RecordWords& w, std::string* err) = 0;
    /* A control message to the peer's process. */
    virtual int control(const CtlMsg& m, const void* payload, size_t len, std::string* err) = 0;
    /* The peer's process is gone (its connection failed); why says how. */
    virtual bool dead(std::string* why = nullptr) const = 0;

    /* The local stand-in of the peer's HCCL buffer: an address range reserved (never accessible)
     * so that HcclChannelGetHcclBuffer hands out addresses a kernel can offset and the data plane
     * can bounds-check; the offset into it is the offset into the peer's buffer. */
    void* base = nullptr;
    uint64_t size = 0;
    uint32_t rank = 0;
    NetCard card{};     /* the peer's card */
};

/* ------------------------------------------------------------------ the network (process-wide) */

/* "" when this build can use the network, else what is missing (no UCX headers at build time, the
 * UCX library cannot be loaded, ...) and how to fix it. */
std::string net_unavailable();
/* Starts the network once per process (UCX context, worker, progress thread). 0 or an HCCL code. */
int net_start(std::string* err);
/* This process uses the network (net_start succeeded): a relaxed load, for hot paths. */
bool net_in_use();
/* For a thread spinning in a wait that a peer on another host may end (its notify record is an
 * active message): progresses the worker once if nobody else does right now (never blocks), so the
 * record lands without waking the progress thread and then the waiter. True when it handled
 * something. */
bool net_poll();

/* Registered memory: a rank's HCCL buffer (write_reduce may target it) or its log area (read only);
 * its key goes into the card. */
struct NetMem;
int net_mem_register(void* p, uint64_t n, bool reduce_target, NetMem** out, uint8_t* rkey, uint32_t* rkey_len,
                     std::string* err);
void net_mem_unregister(NetMem* m);
/* This process's worker address (for its cards). */
int net_worker_address(uint8_t* addr, uint32_t* len, std::string* err);

/* A rendezvous board hosted by this process (HcclGetRootInfo): its worker, which keeps the cards
 * it is sent per communicator (job key) and sends every rank the table once all n are there. */
int net_board_create(NetBoardRef* out, std::string* err);
/* Exchanges cards through board b: rank `rank` of n sends `mine` under `key` and returns when every
 * rank's card came back (all[r] = rank r's card). stop() is asked every ~100 ms while it waits
 * (aborts, the deadline): a non-empty answer ends the wait with HCCL_E_TIMEOUT (or the code it sets
 * in *code). */
int net_board_exchange(const NetBoardRef& b, uint64_t key, uint32_t n, uint32_t rank, const NetCard& mine,
                       std::vector<NetCard>* all, const std::function<std::string(int*)>& stop, std::string* err);

/* A link to the rank whose card is `peer`: the stand-in range is reserved here. nullptr + *err. */
PeerLink* net_link_open(const NetCard& peer, std::string* err);
void net_link_close(PeerLink* l);

/* Control messages of job key `key` are delivered to `owner` (net_hooks.control) from now on (a
 * communicator subscribes before it leaves its card on the board: nobody can send to it earlier);
 * messages of a key nobody subscribes to are dropped (a communicator already destroyed here). */
void net_subscribe(uint64_t key, void* owner);
void net_unsubscribe(uint64_t key);

/* For a handler (net_hooks.control, inside the network's progress: it must not block nor take the
 * locks of the layers above): fn runs soon after on the network's progress thread, outside the
 * network's lock, unless the communicator of job key `key` unsubscribes first (then never). */
void net_defer(uint64_t key, std::function<void()> fn);

}  // namespace emu

#endif
