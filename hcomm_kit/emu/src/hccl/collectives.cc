/* HCCL's collective C API (include/hccl/hccl.h of CANN's hccl repository): HcclAllReduce,
 * HcclBroadcast, HcclAllGather(V), HcclReduceScatter(V), HcclReduce, HcclScatter,
 * HcclAlltoAll(V, VC), HcclSend, HcclRecv and HcclBatchSendRecv.
 *
 * Every call is asynchronous on the given stream, as in CANN: it checks its arguments (CANN's
 * checks and codes), then launches one of hcomm-kit's built-in operators (aicpu_kernels/, the
 * same kernels the Python collectives run) with the thread-notify handshake of hcomm.md §3.11:
 *     record "go" (host stream thread -> AICPU main thread, slot 0)
 *     aclrtLaunchKernelWithConfig(kernel, timeout attribute = HCCL_EXEC_TIMEOUT)
 *     wait "done" (AICPU main thread -> host stream thread, slot 0)
 * and returns; errors of the operator surface at the next synchronisation of the stream. Each call's
 * algorithm is the one CANN's selector picks there (hccl/algo_select.h), passed as OpParam.algo.
 *
 * The built-in kernels are compiled with the library (hcomm_kit/build/emulator.py) into the
 * directory builtin_kernels/ beside it, found through dladdr: C programs need no Python at run
 * time. Their OpParam / AlgResourceCtx layouts come from each operator's generated header
 * (aicpu_kernels/<op>/inc/<op>_param.h, from op.toml), included here in a namespace per
 * operator. Every built-in uses the same AlgResourceCtx layout (checked below), so one set of
 * resources per (communicator, stream) serves them all: the stream's CPU_TS thread and its
 * export, rankSize AICPU_TS threads with 3 notify slots each, the engine context, and channels,
 * acquired for every peer by the first collective and for the peers of a point-to-point call by
 * that call (channel creation is collective between the two ends).
 */
#include "hccl/comm.h"
#include "hccl/hccl_api_support.h"
#include "hccl/hooks.h"
#include "base/reduce.h"

#pragma GCC visibility push(default)
#include "hccl/hccl.h"
#pragma GCC visibility pop

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <tuple>

namespace emu {
namespace coll {

/* The built-ins' host <-> kernel contracts, each in its own namespace (the headers define the
 * same type names). Their own includes are already in place (base/common.h), so only the types land here. */
namespace op_allreduce {
#include "allreduce/inc/allreduce_param.h"
}
namespace op_allgather {
#include "allgather/inc/allgather_param.h"
}
namespace op_reduce_scatter {
#include "reduce_scatter/inc/reduce_scatter_param.h"
}
namespace op_broadcast {
#include "broadcast/inc/broadcast_param.h"
}
namespace op_reduce {
#include "reduce/inc/hk_reduce_param.h"
}
namespace op_scatter {
#include "scatter/inc/scatter_param.h"
}
namespace op_alltoall {
#include "alltoall/inc/alltoall_param.h"
}
namespace op_alltoallv {
#include "alltoallv/inc/alltoallv_param.h"
}
namespace op_batch {
#include "batch_send_recv/inc/batch_send_recv_param.h"
}

/* One resource set serves every built-in: their AlgResourceCtx must be the same struct. */
using Ctx = op_allreduce::AlgResourceCtx;
#define HK_SAME_CTX(ns)                                                                                \
    static_assert(sizeof(ns::AlgResourceCtx) == sizeof(Ctx) &&                                         \
                      offsetof(ns::AlgResourceCtx, threads) == offsetof(Ctx, threads) &&               \
                      offsetof(ns::AlgResourceCtx, channels) == offsetof(Ctx, channels) &&             \
                      sizeof(ns::ChannelInfo) == sizeof(op_allreduce::ChannelInfo),                    \
                  "built-in " #ns " has another AlgResourceCtx layout")
HK_SAME_CTX(op_allgather);
HK_SAME_CTX(op_reduce_scatter);
HK_SAME_CTX(op_broadcast);
HK_SAME_CTX(op_reduce);
HK_SAME_CTX(op_scatter);
HK_SAME_CTX(op_alltoall);
HK_SAME_CTX(op_alltoallv);
HK_SAME_CTX(op_batch);
#undef HK_SAME_CTX

constexpr uint32_t kMaxChannels = ALLREDUCE_MAX_CHANNELS;
constexpr uint32_t kMaxThreads = ALLREDUCE_MAX_THREADS;
constexpr uint32_t kThreadSlots = ALLREDUCE_THREAD_NOTIFY_NUM + 1; /* + slot 0, the host's "go" */
constexpr uint32_t kChannelNotifies = ALLREDUCE_CHANNEL_NOTIFY_NUM;
constexpr uint32_t kV = 64;            /* length of alltoallv's count arrays */
constexpr uint32_t kBatchItems = 256;  /* length of batch_send_recv's item arrays */
static_assert(kMaxChannels >= kMaxRanks && kMaxThreads >= kMaxRanks && kV >= kMaxRanks,
              "the built-ins' arrays must cover every rank of a communicator");

/* ------------------------------------------------------------------ built-in kernels */

struct Builtin {
    const char* stem;   /* <stem>.json / <stem>.so in builtin_kernels/ */
    const char* kernel; /* functionName = op-info key */
    aclrtFuncHandle fn;
};
enum BuiltinId { B_ALLREDUCE, B_ALLGATHER, B_REDUCE_SCATTER, B_BROADCAST, B_REDUCE, B_SCATTER, B_ALLTOALL,
                 B_ALLTOALLV, B_BATCH, B_COUNT };
Builtin g_builtins[B_COUNT] = {
    {"liballreduce_aicpu_kernel", "HcclAllreduceAicpuKernel", nullptr},
    {"liballgather_aicpu_kernel", "HcclAllgatherAicpuKernel", nullptr},
    {"libreduce_scatter_aicpu_kernel", "HcclReduceScatterAicpuKernel", nullptr},
    {"libbroadcast_aicpu_kernel", "HcclBroadcastAicpuKernel", nullptr},
    {"libhk_reduce_aicpu_kernel", "HcclReduceAicpuKernel", nullptr},
    {"libscatter_aicpu_kernel", "HcclScatterAicpuKernel", nullptr},
    {"liballtoall_aicpu_kernel", "HcclAlltoallAicpuKernel", nullptr},
    {"liballtoallv_aicpu_kernel", "HcclAlltoallvAicpuKernel", nullptr},
    {"libbatch_send_recv_aicpu_kernel", "HcclBatchSendRecvAicpuKernel", nullptr},
};
std::mutex g_builtin_m;

/* builtin_kernels/ beside the real file of this library (symbolic links resolved). */
std::string builtin_dir() {
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (!dladdr(reinterpret_cast<void*>(&builtin_dir), &info) || !info.dli_fname) return "builtin_kernels";
    char real[PATH_MAX];
    std::string lib = realpath(info.dli_fname, real) ? real : info.dli_fname;
    size_t k = lib.rfind('/');
    return (k == std::string::npos ? std::string(".") : lib.substr(0, k)) + "/builtin_kernels";
}

/* The function handle of built-in b, loading its binary on first use (once per process). */
int builtin_fn(BuiltinId id, aclrtFuncHandle* fn, const char* api) {
    std::lock_guard<std::mutex> g(g_builtin_m);
    Builtin& b = g_builtins[id];
    if (!b.fn) {
        std::string json = builtin_dir() + "/" + b.stem + ".json";
        aclrtBinaryLoadOption opt;
        memset(&opt, 0, sizeof opt);
        opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
        opt.value.cpuKernelMode = 1;
        aclrtBinaryLoadOptions opts = {&opt, 1};
        aclrtBinHandle bin = nullptr;
        if (aclrtBinaryLoadFromFile(json.c_str(), &opts, &bin) != ACL_SUCCESS)
            return seterr(HCCL_E_NOT_FOUND, api,
                          "cannot load the built-in operator %s (%s): %s. The emulator library is built together with "
                          "its built-in operators (hcomm-kit config --libs, or hcomm-kit config --ascend-home DIR "
                          "for a CANN-shaped tree); rebuild it if the directory was removed",
                          b.kernel, json.c_str(), last_err().c_str());
        if (aclrtBinaryGetFunction(bin, b.kernel, &b.fn) != ACL_SUCCESS)
            return seterr(HCCL_E_NOT_FOUND, api, "built-in operator %s: %s", b.kernel, last_err().c_str());
    }
    *fn = b.fn;
    return HCCL_SUCCESS;
}

/* ------------------------------------------------------------------ resources per (comm, stream) */

struct Res {
    std::mutex m;            /* one call at a time on this (comm, stream) */
    bool ready = false;
    std::string tag;         /* engine context tag, unique in the process */
    void* dev_ctx = nullptr; /* the engine context (device memory) = OpParam.resCtx */
    ThreadHandle cpu = 0;          /* the stream's CPU_TS thread */
    ThreadHandle aicpu_on_cpu = 0; /* main AICPU thread exported to CPU_TS */
    Ctx host;                /* host copy of *dev_ctx */
    uint32_t scratch_gen = 0;
    void* scratch = nullptr; /* device scratch of HcclReduceScatterV (owned by the communicator) */
    uint64_t scratch_size = 0;
    void* hier = nullptr;    /* OpParam.hierInfo of the multi-level algorithms (engine context "<tag>.hier") */
    std::string hier_err;    /* why this communicator has none (servers of different sizes) */
};

using ResKey = std::tuple<Comm*, Stream*, uint32_t>;
std::mutex g_res_m;
std::map<ResKey, std::shared_ptr<Res>> g_res;
std::atomic<uint64_t> g_res_serial{0};

/* The comm at this address may be a new one (the old one destroyed): the engine context tag is
 * unique per resource set, so it exists only in the communicator that made it. */
bool res_alive(HcclComm comm, Res& r) {
    void* p = nullptr;
    uint64_t size = 0;
    return HcclEngineCtxGet(comm, r.tag.c_str(), COMM_ENGINE_AICPU_TS, &p, &size) == HCCL_SUCCESS && p == r.dev_ctx &&
           size == sizeof(Ctx);
}

/* Pushes channels[first, first + n) of the host copy into the engine context. */
int push_channels(HcclComm comm, Res& r, uint32_t first, uint32_t n, const char* api) {
    if (n == 0) return HCCL_SUCCESS;
    uint64_t off = offsetof(Ctx, channels) + (uint64_t)first * sizeof(r.host.channels[0]);
    int rc = HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, r.tag.c_str(), &r.host.channels[first],
                               (uint64_t)n * sizeof(r.host.channels[0]), off);
    if (rc) return seterr(rc, api, "cannot update the engine context: %s", last_err().c_str());
    return HCCL_SUCCESS;
}

/* Acquires the channels to `peers` this resource set lacks (collective with each of them). */
int ensure_channels(HcclComm comm, Comm* c, Res& r, const std::vector<uint32_t>& peers, const char* api) {
    std::vector<uint32_t> need;
    for (uint32_t p : peers)
        if (p != c->rank && p < c->nranks && r.host.channels[p].handle == 0) need.push_back(p);
    if (need.empty()) return HCCL_SUCCESS;
    std::vector<HcclChannelDesc> descs(need.size());
    HcclChannelDescInit(descs.data(), (uint32_t)descs.size());
    CommProtocol proto = is_950() ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
    for (size_t i = 0; i < need.size(); i++) {
        descs[i].remoteRank = need[i];
        descs[i].channelProtocol = proto;
        descs[i].notifyNum = kChannelNotifies;
    }
    std::vector<ChannelHandle> handles(need.size(), 0);
    int rc = HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, descs.data(), (uint32_t)descs.size(), handles.data());
    if (rc) return seterr(rc, api, "rank %u: %s", c->rank, last_err().c_str());
    uint32_t lo = kMaxChannels, hi = 0;
    for (size_t i = 0; i < need.size(); i++) {
        uint32_t p = need[i];
        op_allreduce::ChannelInfo& ch = r.host.channels[p];
        void* buf = nullptr;
        uint64_t size = 0;
        rc = HcclChannelGetHcclBuffer(comm, handles[i], &buf, &size);
        if (rc) return seterr(rc, api, "rank %u: %s", c->rank, last_err().c_str());
        ch.remoteRank = p;
        ch.notifyNum = kChannelNotifies;
        ch.handle = handles[i];
        ch.remoteBuffer.addr = buf;
        ch.remoteBuffer.size = size;
        lo = std::min(lo, p);
        hi = std::max(hi, p);
    }
    return push_channels(comm, r, lo, hi - lo + 1, api);
}

/* The layout of servers and super-pods the multi-level algorithms read (OpParam.hierInfo, the words
 * of aicpu_kernels/_common/hk_coll.h HkLevelsRead, as hcomm_kit/ops/collectives.py _hier_info makes
 * them): rank count, server count, super-pod count, each rank's server, each server's super-pod. In
 * an engine context of its own, so the communicator frees it. None (r.hier_err says why) when the
 * servers differ in size or there are more ranks than the layout holds. */
int hier_init(HcclComm comm, Comm* c, Res& r) {
    const Topology& t = c->topo;
    const uint32_t n = c->nranks, S = t.nservers;
    constexpr uint32_t kMaxRanks = 64; /* HK_MAX_RANKS */
    std::vector<uint32_t> size(S, 0);
    for (uint32_t q = 0; q < n; q++) size[t.server[q]]++;
    if (n > kMaxRanks) {
        r.hier_err = strprintf("%u ranks; the multi-level layout holds at most %u", n, kMaxRanks);
        return HCCL_SUCCESS;
    }
    for (uint32_t s = 1; s < S; s++)
        if (size[s] != size[0]) {
            r.hier_err = strprintf("its servers hold different numbers of ranks (server 0: %u, server %u: %u); the "
                                   "multi-level algorithms need equal servers", size[0], s, size[s]);
            return HCCL_SUCCESS;
        }
    std::vector<uint32_t> words(3 + n + S, 0);
    words[0] = n;
    words[1] = S;
    words[2] = t.npods;
    for (uint32_t q = 0; q < n; q++) {
        words[3 + q] = t.server[q];
        words[3 + n + t.server[q]] = t.pod[q];
    }
    const std::string tag = r.tag + ".hier";
    const uint64_t bytes = words.size() * sizeof(uint32_t);
    if (int rc = HcclEngineCtxCreate(comm, tag.c_str(), COMM_ENGINE_AICPU_TS, bytes, &r.hier)) return rc;
    return HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, tag.c_str(), words.data(), bytes, 0);
}

int res_init(HcclComm comm, Comm* c, Stream* s, Res& r, const char* api) {
    r.tag = strprintf("hk_capi_%llu", (unsigned long long)g_res_serial.fetch_add(1) + 1);
    memset(&r.host, 0, sizeof r.host);
    ThreadHandle cpu_on_ai = 0;
    std::vector<ThreadHandle> threads(c->nranks, 0);
    int rc;
    const char* step = "";
    if ((rc = HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, s, 1, &r.cpu))) {
        step = "HcclThreadAcquireWithStream";
    } else if ((rc = HcclThreadExportToCommEngine(comm, 1, &r.cpu, COMM_ENGINE_AICPU_TS, &cpu_on_ai))) {
        step = "HcclThreadExportToCommEngine (stream thread)";
    } else if ((rc = HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, c->nranks, kThreadSlots, threads.data()))) {
        step = "HcclThreadAcquire";
    } else if ((rc = HcclThreadExportToCommEngine(comm, 1, threads.data(), COMM_ENGINE_CPU_TS, &r.aicpu_on_cpu))) {
        step = "HcclThreadExportToCommEngine (AICPU main thread)";
    } else {
        void* buf = nullptr;
        uint64_t size = 0;
        if ((rc = HcclGetHcclBuffer(comm, &buf, &size))) {
            step = "HcclGetHcclBuffer";
        } else {
            r.host.aicpuThread = threads[0];
            r.host.cpuThreadOnAicpu = cpu_on_ai;
            r.host.rank = c->rank;
            r.host.rankSize = c->nranks;
            r.host.threadNum = c->nranks;
            r.host.channelNum = c->nranks;
            r.host.notifyNumPerThread = kThreadSlots;
            r.host.localBuffer.addr = buf;
            r.host.localBuffer.size = size;
            for (uint32_t i = 0; i < c->nranks; i++) r.host.threads[i] = threads[i];
            if ((rc = HcclEngineCtxCreate(comm, r.tag.c_str(), COMM_ENGINE_AICPU_TS, sizeof(Ctx), &r.dev_ctx))) {
                step = "HcclEngineCtxCreate";
            } else if ((rc = HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, r.tag.c_str(), &r.host, sizeof(Ctx), 0))) {
                step = "HcclEngineCtxCopy";
            }
        }
    }
    if (!rc && (rc = hier_init(comm, c, r))) step = "the layout of servers (OpParam.hierInfo)";
    if (rc)
        return seterr(rc, api, "rank %u: acquiring the operator resources failed in %s: %s", c->rank, step,
                      last_err().c_str());
    r.ready = true;
    return HCCL_SUCCESS;
}

/* A call in progress: the checked communicator and stream and the locked resource set. */
struct Call {
    explicit Call(const char* a) : api(a) {}
    const char* api;
    HcclComm comm = nullptr;
    Comm* c = nullptr;
    Stream* s = nullptr;
    std::shared_ptr<Res> res;
    std::unique_lock<std::mutex> lock;
};

/* Checks the communicator and the stream (CANN: NULL -> HCCL_E_PTR) and finds the resources. */
int begin(Call& k, HcclComm comm, aclrtStream stream) {
    const char* api = k.api;
    if (!comm) return seterr(HCCL_E_PTR, api, "comm is NULL");
    if (!stream) return seterr(HCCL_E_PTR, api, "stream is NULL (pass the stream the operation is enqueued on)");
    Comm* c = comm_from_handle(comm);
    if (!c) return seterr(HCCL_E_PARA, api, "comm %p is not a live communicator", comm);
    int code = 0;
    Stream* s = stream_resolve(stream, &code, api);
    if (!s) return seterr(HCCL_E_PARA, api, "%s", last_err().c_str());
    if (s->dev != c->dev)
        return seterr(HCCL_E_PARA, api, "stream %u belongs to device %d but rank %u of the communicator is on device %d",
                      s->id, s->dev->id, c->rank, c->dev->id);
    k.comm = comm;
    k.c = c;
    k.s = s;
    comm_clear_failed_call(c);
    return HCCL_SUCCESS;
}

/* The resource set of (comm, stream), created on first use; locked for the rest of the call. */
int resources(Call& k) {
    ResKey key(k.c, k.s, k.s->id);
    {
        std::lock_guard<std::mutex> g(g_res_m);
        auto it = g_res.find(key);
        if (it == g_res.end()) it = g_res.emplace(key, std::make_shared<Res>()).first;
        k.res = it->second;
    }
    k.lock = std::unique_lock<std::mutex>(k.res->m);
    if (k.res->ready && !res_alive(k.comm, *k.res)) {
        /* A communicator destroyed and another made at the same address: start afresh. */
        k.lock.unlock();
        std::lock_guard<std::mutex> g(g_res_m);
        auto fresh = std::make_shared<Res>();
        g_res[key] = fresh;
        k.res = fresh;
        k.lock = std::unique_lock<std::mutex>(k.res->m);
    }
    if (!k.res->ready) return res_init(k.comm, k.c, k.s, *k.res, k.api);
    return HCCL_SUCCESS;
}

/* Every peer's channel (the collectives), but none over a link taken down: as the Python path
 * gives an operator, its handle stays 0 (the selection already refused an algorithm that needs it). */
int mesh(Call& k) {
    std::vector<uint32_t> peers;
    for (uint32_t p = 0; p < k.c->nranks; p++)
        if (p == k.c->rank || !k.c->topo.is_down(k.c->rank, p)) peers.push_back(p);
    return ensure_channels(k.comm, k.c, *k.res, peers, k.api);
}

/* HK_ALGO_* of the multi-level algorithms (aicpu_kernels/_common/hk_coll.h): they read OpParam.hierInfo. */
constexpr uint32_t kAlgoParallel = 7, kAlgoSequence = 8, kAlgoSequence3 = 9;

/* OpParam.hierInfo where the operator's OpParam has it (op.toml [[param]] hierInfo). */
template <class P>
auto set_hier(P& p, void* h, int) -> decltype(p.hierInfo = h, void()) {
    p.hierInfo = h;
}
template <class P>
void set_hier(P&, void*, long) {}

/* Records "go", launches built-in b with param (OpParam of its namespace), enqueues "done". */
template <class P>
int launch(Call& k, BuiltinId b, P& param, int op_type) {
    const char* api = k.api;
    Res& r = *k.res;
    aclrtFuncHandle fn = nullptr;
    if (int rc = builtin_fn(b, &fn, api)) return rc;
    snprintf(param.tag, sizeof param.tag, "%s", api);
    snprintf(param.commName, sizeof param.commName, "%s", k.c->name.c_str());
    param.devType = cfg().soc == Soc::A2 ? 0 : cfg().soc == Soc::A3 ? 1 : 2;
    param.opType = op_type;
    uint32_t tmo = cfg().default_kernel_timeout_s; /* HCCL_EXEC_TIMEOUT, s; 0 = no limit */
    param.notifyTimeout = tmo;
    param.cpuThread = r.cpu;
    param.aicpuThreadOnCpu = r.aicpu_on_cpu;
    param.resCtx = reinterpret_cast<decltype(param.resCtx)>(r.dev_ctx);
    if (param.algo == kAlgoParallel || param.algo == kAlgoSequence || param.algo == kAlgoSequence3) {
        if (!r.hier)
            return seterr(HCCL_E_NOT_SUPPORT, api, "rank %u: the multi-level algorithm (OpParam.algo %u) cannot run on "
                          "this communicator: %s", k.c->rank, param.algo, r.hier_err.c_str());
        set_hier(param, r.hier, 0);
    }
    int rc = HcommThreadNotifyRecordOnThread(r.cpu, r.aicpu_on_cpu, 0);
    if (rc) return seterr(rc, api, "recording the host's \"go\": %s", last_err().c_str());
    const char* step = "";
    if ((rc = launch_with_timeout(fn, k.s, &param, sizeof param, tmo, &step)))
        return seterr(HCCL_E_RUNTIME, api, "%s %s: %s (aclError %d)", step, g_builtins[b].kernel, last_err().c_str(),
                      rc);
    if ((rc = HcommThreadNotifyWaitOnThread(r.cpu, 0, tmo)))
        return seterr(rc, api, "enqueueing the wait for \"done\": %s", last_err().c_str());
    return HCCL_SUCCESS;
}

/* The collective-call check for C callers (diag/call_check.cc; hcomm-kit's Python collectives post
 * their own descriptions): posts this rank's description of the call, e.g. "HcclAllReduce(count=8,
 * dtype=fp32, op=sum)". When another rank's call of the same number differs, the communicator is
 * aborted and the call fails naming every rank's call, instead of exchanging mismatched buffers or
 * waiting for a call that never comes. Posted after the local argument checks and before any
 * early return for an empty call, so that a rank with nothing to move still takes its turn. */
int posted(Call& k, const std::string& desc) {
    if (!hccl_hooks.call_check || k.c->nranks < 2) return HCCL_SUCCESS;
    std::string bad = hccl_hooks.call_check(k.c, -1, desc.c_str(), desc.c_str());
    return bad.empty() ? HCCL_SUCCESS : seterr_str(HCCL_E_PARA, k.api, bad);
}

/* A call with count 0 succeeds at once (CANN), but on a live communicator it still takes its turn in
 * the call check: a rank passing 0 where the others pass 8 is a mismatch, not a silent no-op. */
int empty_call(Call& k, HcclComm comm, const std::string& desc) {
    Comm* c = comm ? comm_from_handle(comm) : nullptr;
    if (!c) return HCCL_SUCCESS;
    k.c = c;
    return posted(k, desc);
}

/* ------------------------------------------------------------------ argument checks (CANN's) */

/* CheckDataType(dataType, needReduce = false): CANN refuses INT128 and unknown values with
 * HCCL_E_NOT_SUPPORT; the emulator moves the 12 types of reduce.h (not HIF8 / FP8), which every
 * non-reducing API page lists on A2, A3 and 950 (hccl_api_support.h, kHcclApiMove). */
int check_dtype(int dt, const char* what, const char* api) {
    uint32_t mask = 0;
    for (const HcclApiMoveRow& r : kHcclApiMove)
        if (strcmp(r.api, api) == 0 && cfg().soc_name == r.product) mask = r.dtypes;
    if (dtype_size(dt) == 0 || dt < 0 || dt >= 32 || !(mask >> dt & 1u))
        return seterr(HCCL_E_NOT_SUPPORT, api,
                      "%s %d (%s) is not supported on %s: use one of int8, int16, int32, int64, uint8, uint16, uint32, "
                      "uint64, fp16, bfp16, fp32, fp64 (int128, hif8 and the fp8 types are not emulated)",
                      what, dt, dtype_name(dt), cfg().soc_name.c_str());
    return HCCL_SUCCESS;
}

/* CheckDataType(dataType, needReduce = true) and CheckReduceOp, per API and product as CANN's API
 * pages say (the one table: hcomm_kit/base/dtypes.py HCCL_API_REDUCE, generated into
 * hccl_api_support.h). Wider than HcommLocalReduceOnThread on A2/A3: the built-ins reduce int64
 * and prod in their own code there. */
int check_reduce(int dt, int op, const char* api) {
    if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN)
        return seterr(HCCL_E_PARA, api, "op %d is not a reduce op (sum 0, prod 1, max 2, min 3)", op);
    const char* product = cfg().soc_name.c_str();
    const HcclApiReduceRow* row = nullptr;
    for (const HcclApiReduceRow& r : kHcclApiReduce)
        if (strcmp(r.api, api) == 0 && strcmp(r.product, product) == 0) row = &r;
    if (!row) return seterr(HCCL_E_INTERNAL, api, "no dtype/op table row for %s on %s", api, product);
    const bool known = dt >= 0 && dt < 32;
    if (known && (row->ops[op] >> dt & 1u)) return HCCL_SUCCESS;
    std::string accepted;
    for (int o = HCCL_REDUCE_SUM; o <= HCCL_REDUCE_MIN; o++) {
        std::string names;
        for (int d = 0; d < 32; d++)
            if (row->ops[o] >> d & 1u) names += std::string(names.empty() ? "" : ", ") + dtype_name(d);
        accepted += strprintf("%s%s: %s", accepted.empty() ? "" : "; ", redop_name(o), names.empty() ? "-" : names.c_str());
    }
    return seterr(HCCL_E_NOT_SUPPORT, api, "dataType %d (%s) with op %s is not supported on %s (%s accepts %s)", dt,
                  dtype_name(dt), redop_name(op), product, api, accepted.c_str());
}

int check_root(Call& k, uint32_t root, const char* what = "root") {
    if (root >= k.c->nranks)
        return seterr(HCCL_E_PARA, k.api, "%s %u is not a rank of this %u-rank communicator", what, root, k.c->nranks);
    return HCCL_SUCCESS;
}

#define NEED(p)                                                                   \
    do {                                                                          \
        if (!(p)) return (HcclResult)seterr(HCCL_E_PTR, k.api, "%s is NULL", #p); \
    } while (0)
#define TRY(expr)                                  \
    do {                                           \
        if (int rc_ = (expr)) return (HcclResult)rc_; \
    } while (0)

/* The algorithm of this call, chosen as CANN chooses it (hccl/algo_select.h): the built-in kernel's
 * OpParam.algo. Before any resource is acquired: a call that cannot run (a link down) fails at once
 * on every rank instead of waiting for its peers' channels. */
int choose_algo(Call& k, int op_type, uint64_t count, int dt, int op, uint32_t* algo) {
    AlgoQuery q;
    q.coll = op_type;
    q.count = count;
    q.dtype = dt;
    q.op = op;
    Selection sel;
    if (int rc = select_algo(k.c, q, "", &sel, k.api)) {
        /* every rank finds the same downed link from the topology they share; published too, so a
         * peer already waiting in another call of this communicator ends at once */
        if (rc == HCCL_E_NETWORK) comm_tell_link_failure(k.c, last_err());
        return rc;
    }
    *algo = (uint32_t)sel.kernel;
    return HCCL_SUCCESS;
}

/* The common shape of AllReduce / Broadcast / AllGather / ReduceScatter / Reduce / Scatter /
 * AlltoAll: one built-in, one count, mesh channels. */
template <class P>
HcclResult simple(Call& k, BuiltinId b, int op_type, void* in, void* out, uint64_t count, int dt, int op,
                  uint32_t root) {
    uint32_t algo = 0;
    TRY(choose_algo(k, op_type, count, dt, op, &algo));
    TRY(resources(k));
    TRY(mesh(k));
    P param;
    memset(&param, 0, sizeof param);
    param.algo = algo;
    param.inputPtr = in;
    param.outputPtr = out;
    param.count = count;
    param.dataType = dt;
    param.reduceOp = op;
    param.root = root;
    return (HcclResult)launch(k, b, param, op_type);
}

/* alltoallv from per-peer counts and displacements (elements): AlltoAllV, AlltoAllVC, AllGatherV. */
HcclResult alltoallv(Call& k, int op_type, const void* send, const uint64_t* sc, const uint64_t* sd, void* recv,
                     const uint64_t* rc, const uint64_t* rd, int dt) {
    uint32_t algo = 0;
    TRY(choose_algo(k, op_type, sc[0], dt, 0, &algo));
    TRY(resources(k));
    TRY(mesh(k));
    op_alltoallv::OpParam param;
    memset(&param, 0, sizeof param);
    param.algo = algo;
    param.inputPtr = const_cast<void*>(send);
    param.outputPtr = recv;
    param.dataType = dt;
    for (uint32_t j = 0; j < k.c->nranks; j++) {
        param.sendCounts[j] = sc[j];
        param.sdispls[j] = sd[j];
        param.recvCounts[j] = rc[j];
        param.rdispls[j] = rd[j];
    }
    return (HcclResult)launch(k, B_ALLTOALLV, param, op_type);
}

/* Checks a count/displacement table of n entries: no element index overflows. */
int check_table(Call& k, const uint64_t* counts, const uint64_t* displs, uint32_t n, uint32_t unit, const char* what) {
    for (uint32_t j = 0; j < n; j++) {
        uint64_t end = counts[j] + displs[j];
        if (end < counts[j] || end > UINT64_MAX / unit)
            return seterr(HCCL_E_PARA, k.api, "%s[%u]: count %llu + displacement %llu overflows", what, j,
                          (unsigned long long)counts[j], (unsigned long long)displs[j]);
    }
    return HCCL_SUCCESS;
}

/* Point-to-point items -> batch_send_recv launches of at most kBatchItems items each. */
HcclResult batch(Call& k, const HcclSendRecvItem* items, uint32_t n, int op_type) {
    std::vector<uint32_t> peers;
    for (uint32_t i = 0; i < n; i++) {
        const HcclSendRecvItem& it = items[i];
        int type;
        memcpy(&type, &it.sendRecvType, sizeof type); /* callers may pass values outside the enum */
        if (type != HCCL_SEND && type != HCCL_RECV)
            return (HcclResult)seterr(HCCL_E_PARA, k.api, "item %u: sendRecvType %d is neither HCCL_SEND (0) nor "
                                      "HCCL_RECV (1)", i, type);
        TRY(check_dtype((int)it.dataType, strprintf("item %u: dataType", i).c_str(), k.api));
        if (it.remoteRank >= k.c->nranks)
            return (HcclResult)seterr(HCCL_E_PARA, k.api, "item %u: remoteRank %u is not a rank of this %u-rank "
                                      "communicator", i, it.remoteRank, k.c->nranks);
        if (it.remoteRank == k.c->rank)
            return (HcclResult)seterr(HCCL_E_PARA, k.api, "item %u: remoteRank %u is this rank (no %s to self)", i,
                                      it.remoteRank, type == HCCL_SEND ? "send" : "recv");
        if (it.count != 0 && !it.buf)
            return (HcclResult)seterr(HCCL_E_PTR, k.api, "item %u: buf is NULL (count %llu)", i,
                                      (unsigned long long)it.count);
        if (it.count > UINT64_MAX / dtype_size((int)it.dataType))
            return (HcclResult)seterr(HCCL_E_PARA, k.api, "item %u: count %llu overflows", i, (unsigned long long)it.count);
        if (it.count != 0) peers.push_back(it.remoteRank);
    }
    if (peers.empty()) return HCCL_SUCCESS;
    /* An item over a downed link: this rank and the item's peer fail at once (each sees the link);
     * the abort fails the other ranks of the batch pattern too, whose items wait for these two. */
    for (uint32_t i = 0; i < n; i++) {
        const HcclSendRecvItem& it = items[i];
        if (it.count == 0 || !k.c->topo.is_down(k.c->rank, it.remoteRank)) continue;
        int type;
        memcpy(&type, &it.sendRecvType, sizeof type);
        std::string why = strprintf("rank %u: item %u (%s rank %u) needs %s", k.c->rank, i,
                                    type == HCCL_SEND ? "send to" : "recv from", it.remoteRank,
                                    link_down_text(k.c, k.c->rank, it.remoteRank, true).c_str());
        uint64_t with = 0;
        for (uint32_t p : peers)
            if (p < 64) with |= 1ull << p;
        int rc = seterr_str(HCCL_E_NETWORK, k.api, why);
        comm_note_failed_call(k.c, last_err(), with);
        comm_tell_link_failure(k.c, last_err());
        return (HcclResult)rc;
    }
    uint32_t algo = 0;
    TRY(choose_algo(k, op_type, items[0].count, (int)items[0].dataType, 0, &algo));
    std::sort(peers.begin(), peers.end());
    peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
    TRY(resources(k));
    TRY(ensure_channels(k.comm, k.c, *k.res, peers, k.api));
    for (uint32_t first = 0; first < n; first += kBatchItems) {
        uint32_t m = std::min(kBatchItems, n - first);
        op_batch::OpParam param;
        memset(&param, 0, sizeof param);
        param.itemNum = m;
        param.algo = algo;
        for (uint32_t i = 0; i < m; i++) {
            const HcclSendRecvItem& it = items[first + i];
            param.itemType[i] = (uint32_t)it.sendRecvType;
            param.itemRank[i] = it.remoteRank;
            param.itemDataType[i] = (uint32_t)it.dataType;
            param.itemCount[i] = it.count;
            param.itemBuf[i] = it.buf;
        }
        TRY(launch(k, B_BATCH, param, op_type));
    }
    return HCCL_SUCCESS;
}

/* AlltoAll(V, VC): both element types valid, and the same. */
int check_types(Call& k, HcclDataType sendType, HcclDataType recvType) {
    TRY(check_dtype((int)sendType, "sendType", k.api));
    TRY(check_dtype((int)recvType, "recvType", k.api));
    if (sendType != recvType)
        return (HcclResult)seterr(HCCL_E_PARA, k.api, "sendType %s and recvType %s differ", dtype_name(sendType),
                                  dtype_name(recvType));
    return HCCL_SUCCESS;
}

/* HcclSend / HcclRecv: one point-to-point item with peer (destRank / srcRank). */
HcclResult p2p(Call& k, HcclSendRecvType type, void* buf, uint64_t count, HcclDataType dataType, uint32_t peer,
               HcclComm comm, aclrtStream stream) {
    bool send = type == HCCL_SEND;
    if (count == 0) return HCCL_SUCCESS;
    TRY(begin(k, comm, stream));
    if (!buf) return (HcclResult)seterr(HCCL_E_PTR, k.api, "%s is NULL", send ? "sendBuf" : "recvBuf");
    TRY(check_dtype((int)dataType, "dataType", k.api));
    TRY(check_root(k, peer, send ? "destRank" : "srcRank"));
    HcclSendRecvItem it;
    memset(&it, 0, sizeof it);
    it.sendRecvType = type;
    it.buf = buf;
    it.count = count;
    it.dataType = dataType;
    it.remoteRank = peer;
    return batch(k, &it, 1, send ? HCCL_CMD_SEND : HCCL_CMD_RECEIVE);
}

/* Device scratch of at least `bytes` for this resource set, owned by the communicator (freed by
 * HcclCommDestroy). Grows by powers of two; older blocks stay valid for calls still queued. */
int scratch(Call& k, uint64_t bytes, void** out) {
    Res& r = *k.res;
    if (r.scratch_size < bytes) {
        uint64_t size = 1ull << 20;
        while (size < bytes) size <<= 1;
        std::string tag = strprintf("%s_scratch_%u", r.tag.c_str(), ++r.scratch_gen);
        bool created = false;
        void* p = nullptr;
        if (int rc = HcclDevMemAcquire(k.comm, tag.c_str(), &size, &p, &created))
            return seterr(rc, k.api, "cannot allocate %llu bytes of device scratch: %s", (unsigned long long)size,
                          last_err().c_str());
        r.scratch = p;
        r.scratch_size = size;
    }
    *out = r.scratch;
    return HCCL_SUCCESS;
}

int copy_async(Call& k, void* dst, const void* src, uint64_t bytes) {
    if (bytes == 0 || dst == src) return HCCL_SUCCESS;
    if (int rc = aclrtMemcpyAsync(dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, k.s))
        return seterr(HCCL_E_RUNTIME, k.api, "staging %llu bytes: %s (aclError %d)", (unsigned long long)bytes,
                      last_err().c_str(), rc);
    return HCCL_SUCCESS;
}

}  // namespace coll
}  // namespace emu

using namespace emu;
using namespace emu::coll;

/* ================================================================ the C API */

EMU_API HcclResult HcclAllReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                                 HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclAllReduce(count=%llu, dtype=%s, op=%s)", (unsigned long long)count,
                                 dtype_name((int)dataType), redop_name((int)op));
    if (count == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    NEED(sendBuf);
    NEED(recvBuf);
    TRY(check_reduce((int)dataType, (int)op, k.api));
    TRY(posted(k, desc));
    return simple<op_allreduce::OpParam>(k, B_ALLREDUCE, HCCL_CMD_ALLREDUCE, sendBuf, recvBuf, count, (int)dataType,
                                         (int)op, 0);
}

EMU_API HcclResult HcclBroadcast(void* buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                 aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclBroadcast(count=%llu, dtype=%s, root=%u)", (unsigned long long)count,
                                 dtype_name((int)dataType), root);
    if (count == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    NEED(buf);
    TRY(check_dtype((int)dataType, "dataType", k.api));
    TRY(check_root(k, root));
    TRY(posted(k, desc));
    return simple<op_broadcast::OpParam>(k, B_BROADCAST, HCCL_CMD_BROADCAST, buf, buf, count, (int)dataType, 0, root);
}

EMU_API HcclResult HcclAllGather(void* sendBuf, void* recvBuf, uint64_t sendCount, HcclDataType dataType,
                                 HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclAllGather(sendCount=%llu, dtype=%s)", (unsigned long long)sendCount,
                                 dtype_name((int)dataType));
    if (sendCount == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    NEED(sendBuf);
    NEED(recvBuf);
    TRY(check_dtype((int)dataType, "dataType", k.api));
    TRY(posted(k, desc));
    return simple<op_allgather::OpParam>(k, B_ALLGATHER, HCCL_CMD_ALLGATHER, sendBuf, recvBuf, sendCount,
                                         (int)dataType, 0, 0);
}

EMU_API HcclResult HcclReduceScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType,
                                     HcclReduceOp op, HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclReduceScatter(recvCount=%llu, dtype=%s, op=%s)", (unsigned long long)recvCount,
                                 dtype_name((int)dataType), redop_name((int)op));
    if (recvCount == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    NEED(sendBuf);
    NEED(recvBuf);
    TRY(check_reduce((int)dataType, (int)op, k.api));
    TRY(posted(k, desc));
    return simple<op_reduce_scatter::OpParam>(k, B_REDUCE_SCATTER, HCCL_CMD_REDUCE_SCATTER, sendBuf, recvBuf,
                                              recvCount, (int)dataType, (int)op, 0);
}

EMU_API HcclResult HcclReduce(void* sendBuf, void* recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                              uint32_t root, HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclReduce(count=%llu, dtype=%s, op=%s, root=%u)", (unsigned long long)count,
                                 dtype_name((int)dataType), redop_name((int)op), root);
    if (count == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    NEED(sendBuf);
    NEED(recvBuf); /* CANN requires it on every rank; on non-roots the operator uses it as scratch */
    TRY(check_reduce((int)dataType, (int)op, k.api));
    TRY(check_root(k, root));
    TRY(posted(k, desc));
    return simple<op_reduce::OpParam>(k, B_REDUCE, HCCL_CMD_REDUCE, sendBuf, recvBuf, count, (int)dataType, (int)op,
                                      root);
}

EMU_API HcclResult HcclScatter(void* sendBuf, void* recvBuf, uint64_t recvCount, HcclDataType dataType, uint32_t root,
                               HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclScatter(recvCount=%llu, dtype=%s, root=%u)", (unsigned long long)recvCount,
                                 dtype_name((int)dataType), root);
    if (recvCount == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    TRY(check_root(k, root));
    if (k.c->rank == root) NEED(sendBuf); /* only the root sends */
    NEED(recvBuf);
    TRY(check_dtype((int)dataType, "dataType", k.api));
    TRY(posted(k, desc));
    return simple<op_scatter::OpParam>(k, B_SCATTER, HCCL_CMD_SCATTER, sendBuf, recvBuf, recvCount, (int)dataType, 0,
                                       root);
}

EMU_API HcclResult HcclAlltoAll(const void* sendBuf, uint64_t sendCount, HcclDataType sendType, const void* recvBuf,
                                uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    std::string desc = strprintf("HcclAlltoAll(count=%llu, dtype=%s)", (unsigned long long)sendCount,
                                 dtype_name((int)sendType));
    if (sendCount == 0 && recvCount == 0) return (HcclResult)empty_call(k, comm, desc);
    TRY(begin(k, comm, stream));
    NEED(sendBuf);
    NEED(recvBuf);
    TRY(check_types(k, sendType, recvType));
    if (sendCount != recvCount)
        return (HcclResult)seterr(HCCL_E_PARA, k.api, "sendCount %llu and recvCount %llu differ (AlltoAll moves the same "
                                  "amount to and from every rank)", (unsigned long long)sendCount,
                                  (unsigned long long)recvCount);
    if (sendBuf == recvBuf) return (HcclResult)seterr(HCCL_E_PARA, k.api, "recvBuf must not be sendBuf");
    TRY(posted(k, desc));
    return simple<op_alltoall::OpParam>(k, B_ALLTOALL, HCCL_CMD_ALLTOALL, const_cast<void*>(sendBuf),
                                        const_cast<void*>(recvBuf), sendCount, (int)sendType, 0, 0);
}

EMU_API HcclResult HcclAlltoAllV(const void* sendBuf, const void* sendCounts, const void* sdispls, HcclDataType sendType,
                                 const void* recvBuf, const void* recvCounts, const void* rdispls, HcclDataType recvType,
                                 HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    TRY(begin(k, comm, stream));
    NEED(sendCounts);
    NEED(sdispls);
    NEED(recvCounts);
    NEED(rdispls);
    TRY(check_types(k, sendType, recvType));
    const uint64_t* sc = static_cast<const uint64_t*>(sendCounts);
    const uint64_t* rc = static_cast<const uint64_t*>(recvCounts);
    uint32_t n = k.c->nranks, unit = dtype_size((int)sendType);
    uint64_t sends = 0, recvs = 0;
    for (uint32_t j = 0; j < n; j++) {
        sends += sc[j];
        recvs += rc[j];
    }
    if (sends && !sendBuf) NEED(sendBuf);
    if (recvs && !recvBuf) NEED(recvBuf);
    TRY(check_table(k, sc, static_cast<const uint64_t*>(sdispls), n, unit, "sendCounts/sdispls"));
    TRY(check_table(k, rc, static_cast<const uint64_t*>(rdispls), n, unit, "recvCounts/rdispls"));
    /* the counts differ per rank by design: the element type is what every rank must agree on */
    TRY(posted(k, strprintf("HcclAlltoAllV(dtype=%s)", dtype_name((int)sendType))));
    if (sends == 0 && recvs == 0) return HCCL_SUCCESS;
    return alltoallv(k, HCCL_CMD_ALLTOALLV, sendBuf, sc, static_cast<const uint64_t*>(sdispls),
                     const_cast<void*>(recvBuf), rc, static_cast<const uint64_t*>(rdispls), (int)sendType);
}

EMU_API HcclResult HcclAlltoAllVC(const void* sendBuf, const void* sendCountMatrix, HcclDataType sendType,
                                  const void* recvBuf, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    TRY(begin(k, comm, stream));
    NEED(sendCountMatrix);
    TRY(check_types(k, sendType, recvType));
    /* sendCountMatrix[i * n + j]: elements rank i sends to rank j; blocks are packed in rank order. */
    const uint64_t* m = static_cast<const uint64_t*>(sendCountMatrix);
    uint32_t n = k.c->nranks, me = k.c->rank, unit = dtype_size((int)sendType);
    uint64_t sc[kV], sd[kV], rc[kV], rd[kV], so = 0, ro = 0;
    for (uint32_t j = 0; j < n; j++) {
        sc[j] = m[(uint64_t)me * n + j];
        rc[j] = m[(uint64_t)j * n + me];
        sd[j] = so;
        rd[j] = ro;
        if (so + sc[j] < so || ro + rc[j] < ro || so + sc[j] > UINT64_MAX / unit || ro + rc[j] > UINT64_MAX / unit)
            return (HcclResult)seterr(HCCL_E_PARA, k.api, "sendCountMatrix: the counts of rank %u overflow", me);
        so += sc[j];
        ro += rc[j];
    }
    if (so && !sendBuf) NEED(sendBuf);
    if (ro && !recvBuf) NEED(recvBuf);
    TRY(posted(k, strprintf("HcclAlltoAllVC(dtype=%s)", dtype_name((int)sendType))));
    if (so == 0 && ro == 0) return HCCL_SUCCESS;
    return alltoallv(k, HCCL_CMD_ALLTOALLVC, sendBuf, sc, sd, const_cast<void*>(recvBuf), rc, rd, (int)sendType);
}

EMU_API HcclResult HcclAllGatherV(void* sendBuf, uint64_t sendCount, void* recvBuf, const void* recvCounts,
                                  const void* recvDispls, HcclDataType dataType, HcclComm comm, aclrtStream stream) {
    Call k(__func__);
    TRY(begin(k, comm, stream));
    NEED(recvCounts);
    NEED(recvDispls);
    TRY(check_dtype((int)dataType, "dataType", k.api));
    const uint64_t* rc = static_cast<const uint64_t*>(recvCounts);
    const uint64_t* rd = static_cast<const uint64_t*>(recvDispls);
    uint32_t n = k.c->nranks, me = k.c->rank;
    if (rc[me] != sendCount)
        return (HcclResult)seterr(HCCL_E_PARA, k.api, "recvCounts[%u] = %llu differs from this rank's sendCount %llu", me,
                                  (unsigned long long)rc[me], (unsigned long long)sendCount);
    uint64_t recvs = 0;
    for (uint32_t j = 0; j < n; j++) recvs += rc[j];
    if (sendCount && !sendBuf) NEED(sendBuf);
    if (recvs && !recvBuf) NEED(recvBuf);
    TRY(check_table(k, rc, rd, n, dtype_size((int)dataType), "recvCounts/recvDispls"));
    /* recvCounts is the same table on every rank: its total is compared too */
    TRY(posted(k, strprintf("HcclAllGatherV(dtype=%s, total=%llu)", dtype_name((int)dataType),
                            (unsigned long long)recvs)));
    if (recvs == 0) return HCCL_SUCCESS;
    /* Every rank sends its whole input to every rank (an alltoallv with the same source block). */
    uint64_t sc[kV], sd[kV];
    for (uint32_t j = 0; j < n; j++) {
        sc[j] = sendCount;
        sd[j] = 0;
    }
    return alltoallv(k, HCCL_CMD_ALLGATHER_V, sendBuf, sc, sd, recvBuf, rc, rd, (int)dataType);
}

EMU_API HcclResult HcclReduceScatterV(void* sendBuf, const void* sendCounts, const void* sendDispls, void* recvBuf,
                                      uint64_t recvCount, HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                      aclrtStream stream) {
    Call k(__func__);
    TRY(begin(k, comm, stream));
    NEED(sendCounts);
    NEED(sendDispls);
    TRY(check_reduce((int)dataType, (int)op, k.api));
    const uint64_t* sc = static_cast<const uint64_t*>(sendCounts);
    const uint64_t* sd = static_cast<const uint64_t*>(sendDispls);
    uint32_t n = k.c->nranks, me = k.c->rank, unit = dtype_size((int)dataType);
    if (sc[me] != recvCount)
        return (HcclResult)seterr(HCCL_E_PARA, k.api, "sendCounts[%u] = %llu differs from this rank's recvCount %llu", me,
                                  (unsigned long long)sc[me], (unsigned long long)recvCount);
    TRY(check_table(k, sc, sd, n, unit, "sendCounts/sendDispls"));
    uint64_t maxc = 0, total = 0;
    for (uint32_t j = 0; j < n; j++) {
        maxc = std::max(maxc, sc[j]);
        total += sc[j];
    }
    if (total && !sendBuf) NEED(sendBuf);
    if (recvCount && !recvBuf) NEED(recvBuf);
    /* sendCounts is the same table on every rank: its total is compared too */
    TRY(posted(k, strprintf("HcclReduceScatterV(dtype=%s, op=%s, total=%llu)", dtype_name((int)dataType),
                            redop_name((int)op), (unsigned long long)total)));
    if (maxc == 0) return HCCL_SUCCESS;
    if (maxc > UINT64_MAX / unit / (n + 1))
        return (HcclResult)seterr(HCCL_E_PARA, k.api, "sendCounts are too large (%llu elements)", (unsigned long long)maxc);
    uint32_t algo = 0;
    TRY(choose_algo(k, HCCL_CMD_REDUCE_SCATTER_V, recvCount, (int)dataType, (int)op, &algo));
    /* Blocks padded to the largest count (sendCounts is the same on every rank), a reduce-scatter
     * of maxc elements per rank, then this rank's recvCount elements out. */
    TRY(resources(k));
    TRY(mesh(k));
    uint64_t block = maxc * unit;
    void* base = nullptr;
    TRY(scratch(k, block * (n + 1), &base));
    uint8_t* in = static_cast<uint8_t*>(base);
    uint8_t* out = in + block * n;
    for (uint32_t j = 0; j < n; j++) {
        TRY(copy_async(k, in + j * block, static_cast<uint8_t*>(sendBuf) + sd[j] * unit, sc[j] * unit));
        if (sc[j] < maxc && aclrtMemsetAsync(in + j * block + sc[j] * unit, block - sc[j] * unit, 0,
                                             block - sc[j] * unit, k.s) != ACL_SUCCESS)
            return (HcclResult)seterr(HCCL_E_RUNTIME, k.api, "clearing the padding: %s", last_err().c_str());
    }
    op_reduce_scatter::OpParam param;
    memset(&param, 0, sizeof param);
    param.inputPtr = in;
    param.outputPtr = out;
    param.count = maxc;
    param.dataType = (int)dataType;
    param.reduceOp = (int)op;
    param.algo = algo;
    TRY(launch(k, B_REDUCE_SCATTER, param, HCCL_CMD_REDUCE_SCATTER_V));
    return (HcclResult)copy_async(k, recvBuf, out, recvCount * unit);
}

EMU_API HcclResult HcclSend(void* sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                            aclrtStream stream) {
    Call k(__func__);
    return p2p(k, HCCL_SEND, sendBuf, count, dataType, destRank, comm, stream);
}

EMU_API HcclResult HcclRecv(void* recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                            aclrtStream stream) {
    Call k(__func__);
    return p2p(k, HCCL_RECV, recvBuf, count, dataType, srcRank, comm, stream);
}

EMU_API HcclResult HcclBatchSendRecv(HcclSendRecvItem* sendRecvInfo, uint32_t itemNum, HcclComm comm,
                                     aclrtStream stream) {
    Call k(__func__);
    TRY(begin(k, comm, stream));
    NEED(sendRecvInfo);
    if (itemNum == 0) return HCCL_SUCCESS;
    return batch(k, sendRecvInfo, itemNum, HCCL_CMD_BATCH_SEND_RECV);
}
