/* The two phases of an operator's aclnn interface (<hcomm_kit/aclnn_ext.h>), called by the host
 * library `hcomm-kit build` generates for every operator (templates/op_api/aclnn_op.cc.jinja).
 *
 * Phase one (HkAclnnGetWorkspaceSize) checks what CANN's aclnn operators check, with CANN's aclnn
 * codes (<aclnn/aclnn_base.h>) and the reason in aclGetRecentErrMsg(): NULL arguments
 * (ACLNN_ERR_PARAM_NULLPTR), dtypes against op.toml, shapes against [io].output, formats, the
 * group (a live communicator of this process on the current device, by HcclGetCommName), the
 * products of op.toml and the A2/A3 reduce gate, device memory (ACLNN_ERR_PARAM_INVALID). It
 * sizes the workspace: the staging of a non-contiguous input / output (the kernel takes flat
 * buffers), 0 for contiguous tensors. It builds the executor (OpParam filled).
 *
 * Phase two (HkAclnnRun) enqueues on the stream, asynchronously: the gather of a non-contiguous
 * input into the workspace (aclrtMemcpyAsync per contiguous run), the launch protocol of the
 * Python CustomOp and of the HCCL collective API (hccl_coll.cc; hcomm.md §3.11):
 *     record "go" -> aclrtLaunchKernelWithConfig(timeout = HCCL_EXEC_TIMEOUT) -> wait "done"
 * (thread-notify handshake; acl-notify: aclrtRecordNotify / aclrtWaitAndResetNotify), then the
 * scatter of a staged output. The operator's resources (threads, notifies, channels of its
 * topology, the engine context in its AlgResourceCtx layout) are acquired by the first call per
 * (communicator, stream, operator), as CustomOp does: that first call is collective. A
 * non-repeatable executor is released by phase two, as in CANN.
 */
#include "aclnn/aclnn_impl.h"
#include "hccl/comm.h"
#include "acl/runtime.h"
#include "acl/device.h"
#include "base/common.h"
#include "base/reduce.h"
#include "hccl/hooks.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace emu {
namespace {

template <class T>
void put(std::vector<unsigned char>& b, uint32_t off, T v) {
    memcpy(b.data() + off, &v, sizeof v);
}

/* ------------------------------------------------------------------ kernels */

/* The operators' kernels, loaded by their first phase two and kept for the life of the process
 * (json + kernel + the host library's d->api, its address). Never destroyed: a static map would
 * be torn down at exit before LeakSanitizer looks, orphaning the loaded binaries it holds. */
std::mutex g_fn_m;
std::map<std::string, aclrtFuncHandle>& g_fns = *new std::map<std::string, aclrtFuncHandle>();

/* The op-info JSON of an operator installed into a vendor package (aclnnbuild.install): the host
 * library is <vendor>/op_api/lib/libcust_opapi.so, the JSON <vendor>/aicpu/config/<name>.json and
 * the kernel <vendor>/aicpu/kernel/<kernelSo>, found as CANN finds a custom AICPU package's
 * (cpuKernelMode 0: the JSON's ../kernel). The package needs nothing of the build cache. "" when
 * the host library is not in a package with that JSON (a build-cache library: the absolute path). */
std::string installed_json(const HkAclnnOpDesc* d) {
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (!dladdr(static_cast<const void*>(d->api), &info) || !info.dli_fname) return "";
    const std::string lib = info.dli_fname;
    const size_t k = lib.rfind("/op_api/lib/");
    if (k == std::string::npos) return "";
    const std::string json = d->opInfoJson;
    const size_t slash = json.rfind('/');
    const std::string path = lib.substr(0, k) + "/aicpu/config/" + (slash == std::string::npos ? json : json.substr(slash + 1));
    return access(path.c_str(), R_OK) == 0 ? path : "";
}

int kernel_fn(const HkAclnnOpDesc* d, aclrtFuncHandle* fn) {
    std::lock_guard<std::mutex> g(g_fn_m);
    std::string key = strprintf("%s\n%s\n%p", d->opInfoJson, d->kernel, static_cast<const void*>(d->api));
    auto it = g_fns.find(key);
    if (it != g_fns.end()) {
        *fn = it->second;
        return 0;
    }
    const std::string installed = installed_json(d);
    const std::string json = installed.empty() ? std::string(d->opInfoJson) : installed;
    aclrtBinaryLoadOption opt;
    memset(&opt, 0, sizeof opt);
    opt.type = ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE;
    opt.value.cpuKernelMode = installed.empty() ? 1 : 0; /* 1: the kernel beside the JSON (build cache) */
    aclrtBinaryLoadOptions opts = {&opt, 1};
    aclrtBinHandle bin = nullptr;
    if (aclrtBinaryLoadFromFile(json.c_str(), &opts, &bin) != ACL_SUCCESS)
        return seterr(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, d->api,
                      "cannot load the kernel of operator %s (%s): %s. Rebuild it: hcomm-kit build <operator dir>%s",
                      d->opName, json.c_str(), last_err().c_str(),
                      installed.empty() ? "" : " (with ASCEND_HOME_PATH set to the tree: it installs the kernel again)");
    if (aclrtBinaryGetFunction(bin, d->kernel, fn) != ACL_SUCCESS)
        return seterr(ACLNN_ERR_INNER_FIND_KERNEL_ERROR, d->api, "operator %s: kernel %s: %s", d->opName, d->kernel,
                      last_err().c_str());
    g_fns.emplace(key, *fn);
    return 0;
}

/* ------------------------------------------------------------------ resources per (comm, stream, op) */

struct OpRes {
    std::mutex m;
    bool ready = false;
    std::string tag;
    void* dev_ctx = nullptr;
    ThreadHandle cpu = 0, aicpu_on_cpu = 0;
    aclrtNotify notify[2] = {nullptr, nullptr};
    std::vector<unsigned char> host; /* host copy of AlgResourceCtx */
};
using ResKey = std::tuple<Comm*, Stream*, uint32_t, std::string>;
std::mutex g_res_m;
std::map<ResKey, std::shared_ptr<OpRes>> g_res;
std::atomic<uint64_t> g_serial{0};

uint32_t thread_count(const HkAclnnOpDesc* d, uint32_t nranks, const std::vector<std::pair<uint32_t, uint32_t>>& peers0) {
    int64_t n;
    if (d->threadRule > 0) n = d->threadRule;
    else if (d->threadRule == HK_THREADS_RANKS) n = nranks;
    else if (d->threadRule == HK_THREADS_RANKS_M1) n = (int64_t)nranks - 1;
    else if (d->threadRule == HK_THREADS_RANKS_P2) n = (int64_t)nranks + 2;
    else {
        std::vector<uint32_t> p;
        for (auto& x : peers0) p.push_back(x.second);
        std::sort(p.begin(), p.end());
        n = std::unique(p.begin(), p.end()) - p.begin();
    }
    return (uint32_t)std::max<int64_t>(1, n);
}

/* [(index in channels[], peer rank)] of the topology (OpSpec.channel_peers). A mesh gets no channel
 * over a link taken down (`c`: the communicator's topology; its entry keeps handle 0), as in
 * comm.load_op; a ring here is in rank order (check_ring refuses one across a downed link). */
std::vector<std::pair<uint32_t, uint32_t>> channel_peers(const HkAclnnOpDesc* d, uint32_t rank, uint32_t n,
                                                         const Comm* c = nullptr) {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    if (d->topology == HK_TOPO_NONE || d->topology == HK_TOPO_PEER || n == 1) return out;
    uint32_t prev = (rank + n - 1) % n, next = (rank + 1) % n;
    if (d->topology == HK_TOPO_RING) return {{0, prev}, {1, next}};
    if (d->topology == HK_TOPO_MESH) {
        for (uint32_t p = 0; p < n; p++)
            if (p != rank && !(c && c->topo.is_down(rank, p))) out.emplace_back(p, p);
        return out;
    }
    out.emplace_back(std::min(prev, next), std::min(prev, next));
    if (prev != next) out.emplace_back(std::max(prev, next), std::max(prev, next));
    return out;
}

int push_ctx(HcclComm comm, const HkAclnnOpDesc* d, OpRes& r) {
    int rc = HcclEngineCtxCopy(comm, COMM_ENGINE_AICPU_TS, r.tag.c_str(), r.host.data(), d->ctxSize, 0);
    if (rc) return seterr(ACLNN_ERR_RUNTIME_ERROR, d->api, "HcclEngineCtxCopy: %s", last_err().c_str());
    return 0;
}

int acquire_channels(HcclComm comm, Comm* c, const HkAclnnOpDesc* d, OpRes& r,
                     const std::vector<std::pair<uint32_t, uint32_t>>& peers) {
    if (peers.empty()) return 0;
    std::vector<HcclChannelDesc> descs(peers.size());
    HcclChannelDescInit(descs.data(), (uint32_t)descs.size());
    for (size_t i = 0; i < peers.size(); i++) {
        descs[i].remoteRank = peers[i].second;
        descs[i].channelProtocol = is_950() ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
        descs[i].notifyNum = d->channelNotifies;
    }
    std::vector<ChannelHandle> handles(peers.size(), 0);
    if (int rc = HcclChannelAcquire(comm, COMM_ENGINE_AICPU_TS, descs.data(), (uint32_t)descs.size(), handles.data()))
        return seterr(ACLNN_ERR_RUNTIME_ERROR, d->api, "rank %u: HcclChannelAcquire (HcclResult %d): %s", c->rank, rc,
                      last_err().c_str());
    for (size_t i = 0; i < peers.size(); i++) {
        void* buf = nullptr;
        uint64_t size = 0;
        if (int rc = HcclChannelGetHcclBuffer(comm, handles[i], &buf, &size))
            return seterr(ACLNN_ERR_RUNTIME_ERROR, d->api, "rank %u: HcclChannelGetHcclBuffer (HcclResult %d): %s",
                          c->rank, rc, last_err().c_str());
        uint32_t base = d->ctxChannels + peers[i].first * d->channelInfoSize;
        put<uint32_t>(r.host, base + d->chRemoteRank, peers[i].second);
        put<uint32_t>(r.host, base + d->chNotifyNum, d->channelNotifies);
        put<uint64_t>(r.host, base + d->chHandle, handles[i]);
        put<void*>(r.host, base + d->chRemoteBuffer, buf);
        put<uint64_t>(r.host, base + d->chRemoteBuffer + sizeof(void*), size);
    }
    return 0;
}

/* A ring topology: one ring, in rank order (ringNum 1, rings[0]); refused on every rank alike when one
 * of its links is down. The aclnn interface does not lay rings around downed links, nor the further
 * link-disjoint rings op.toml's `rings` allows: comm.load_op does (hcomm_kit/build/rings.py). */
int fill_ring(Comm* c, const HkAclnnOpDesc* d, OpRes& r) {
    const uint32_t n = c->nranks, me = c->rank;
    for (uint32_t a = 0; a < n && n > 1; a++) {
        const uint32_t b = (a + 1) % n;
        if (!c->topo.is_down(a, b)) continue;
        return seterr(ACLNN_ERR_RUNTIME_ERROR, d->api, "rank %u: operator %s: its ring in rank order needs the %s; "
                      "%s", me, d->opName, link_down_text(c, a, b, true).c_str(),
                      d->ringOrder == 1 ? "its aclnn interface lays the ring in rank order only (ring_order = "
                      "\"avoid-down\" is laid around downed links by comm.load_op): call it through load_op, or take "
                      "the link up" : "set ring_order = \"avoid-down\" in op.toml and call it through comm.load_op, "
                      "or take the link up");
    }
    put<uint32_t>(r.host, d->ctxRingNum, 1);
    put<uint32_t>(r.host, d->ctxRingOrder, d->ringOrder);
    put<uint32_t>(r.host, d->ctxRings + d->riPos, me);
    put<uint32_t>(r.host, d->ctxRings + d->riPrev, (me + n - 1) % n);
    put<uint32_t>(r.host, d->ctxRings + d->riNext, (me + 1) % n);
    for (uint32_t i = 0; i < n; i++) put<uint32_t>(r.host, d->ctxRings + d->riOrder + 4u * i, i);
    return 0;
}

int res_init(HcclComm comm, Comm* c, Stream* s, const HkAclnnOpDesc* d, OpRes& r) {
    const char* api = d->api;
    r.tag = strprintf("hk_aclnn_%s_%llu", d->opName, (unsigned long long)g_serial.fetch_add(1) + 1).substr(0, 150);
    r.host.assign(d->ctxSize, 0);
    if (d->topology == HK_TOPO_RING && d->ringInfoSize)
        if (int e = fill_ring(c, d, r)) return e;
    if (d->ctxLinkUp)  /* op.toml link_map: bit q of linkUp[a] when ranks a and q have a link */
        for (uint32_t a = 0; a < c->nranks; a++) {
            uint64_t up = 0;
            for (uint32_t q = 0; q < c->nranks; q++)
                if (q != a && !c->topo.is_down(a, q)) up |= 1ull << q;
            put<uint64_t>(r.host, d->ctxLinkUp + 8u * a, up);
        }
    auto peers = channel_peers(d, c->rank, c->nranks, c);
    uint32_t nthreads = thread_count(d, c->nranks, channel_peers(d, 0, c->nranks));
    if (nthreads > d->maxThreads)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "operator %s needs %u threads for %u ranks but threads[] holds %u",
                      d->opName, nthreads, c->nranks, d->maxThreads);
    if (c->nranks > d->maxChannels && d->topology != HK_TOPO_RING && d->topology != HK_TOPO_NONE)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "operator %s supports at most %u ranks, the communicator has %u",
                      d->opName, d->maxChannels, c->nranks);
    std::vector<ThreadHandle> threads(nthreads, 0);
    int rc = 0;
    const char* step = "";
    ThreadHandle cpu_on_ai = 0;
    if (!d->aclNotify) {
        if ((rc = HcclThreadAcquireWithStream(comm, COMM_ENGINE_CPU_TS, s, 1, &r.cpu))) step = "HcclThreadAcquireWithStream";
        else if ((rc = HcclThreadExportToCommEngine(comm, 1, &r.cpu, COMM_ENGINE_AICPU_TS, &cpu_on_ai)))
            step = "HcclThreadExportToCommEngine (stream thread)";
        else if ((rc = HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, nthreads, d->notifySlots, threads.data())))
            step = "HcclThreadAcquire";
        else if ((rc = HcclThreadExportToCommEngine(comm, 1, threads.data(), COMM_ENGINE_CPU_TS, &r.aicpu_on_cpu)))
            step = "HcclThreadExportToCommEngine (AICPU main thread)";
    } else {
        for (int i = 0; i < 2 && !rc; i++) {
            uint32_t id = 0;
            if ((rc = aclrtCreateNotify(&r.notify[i], ACL_NOTIFY_DEFAULT))) step = "aclrtCreateNotify";
            else if ((rc = aclrtGetNotifyId(r.notify[i], &id))) step = "aclrtGetNotifyId";
            else put<uint32_t>(r.host, d->ctxNotifyIds + 4u * (uint32_t)i, id);
        }
        if (!rc && (rc = HcclThreadAcquire(comm, COMM_ENGINE_AICPU_TS, nthreads, d->notifySlots, threads.data())))
            step = "HcclThreadAcquire";
    }
    void* buf = nullptr;
    uint64_t size = 0;
    if (!rc && (rc = HcclGetHcclBuffer(comm, &buf, &size))) step = "HcclGetHcclBuffer";
    if (rc)
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "rank %u: acquiring the resources of operator %s failed in %s: %s",
                      c->rank, d->opName, step, last_err().c_str());
    put<uint64_t>(r.host, d->ctxAicpuThread, threads[0]);
    put<uint64_t>(r.host, d->ctxCpuThreadOnAicpu, cpu_on_ai);
    put<uint32_t>(r.host, d->ctxRank, c->rank);
    put<uint32_t>(r.host, d->ctxRankSize, c->nranks);
    put<uint32_t>(r.host, d->ctxThreadNum, nthreads);
    uint32_t chnum = (d->topology == HK_TOPO_NONE || c->nranks == 1) ? 0 : d->topology == HK_TOPO_RING ? 2 : c->nranks;
    put<uint32_t>(r.host, d->ctxChannelNum, chnum);
    put<uint32_t>(r.host, d->ctxNotifyNumPerThread, d->notifySlots);
    put<void*>(r.host, d->ctxLocalBuffer, buf);
    put<uint64_t>(r.host, d->ctxLocalBuffer + sizeof(void*), size);
    memcpy(r.host.data() + d->ctxThreads, threads.data(), nthreads * sizeof(ThreadHandle));
    if (int e = acquire_channels(comm, c, d, r, peers)) return e;
    if ((rc = HcclEngineCtxCreate(comm, r.tag.c_str(), COMM_ENGINE_AICPU_TS, d->ctxSize, &r.dev_ctx)))
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "HcclEngineCtxCreate: %s", last_err().c_str());
    if (int e = push_ctx(comm, d, r)) return e;
    r.ready = true;
    return 0;
}

bool res_alive(HcclComm comm, const HkAclnnOpDesc* d, OpRes& r) {
    void* p = nullptr;
    uint64_t size = 0;
    return HcclEngineCtxGet(comm, r.tag.c_str(), COMM_ENGINE_AICPU_TS, &p, &size) == HCCL_SUCCESS && p == r.dev_ctx &&
           size == d->ctxSize;
}

/* The locked resource set of (comm, stream, operator), created on first use. */
int resources(HcclComm comm, Comm* c, Stream* s, const HkAclnnOpDesc* d, std::shared_ptr<OpRes>* out,
              std::unique_lock<std::mutex>* lock) {
    ResKey key(c, s, s->id, std::string(d->opInfoJson) + "\n" + d->kernel);
    std::shared_ptr<OpRes> r;
    {
        std::lock_guard<std::mutex> g(g_res_m);
        auto& slot = g_res[key];
        if (!slot) slot = std::make_shared<OpRes>();
        r = slot;
    }
    *lock = std::unique_lock<std::mutex>(r->m);
    if (r->ready && !res_alive(comm, d, *r)) { /* another communicator at the same address */
        lock->unlock();
        auto fresh = std::make_shared<OpRes>();
        {
            std::lock_guard<std::mutex> g(g_res_m);
            g_res[key] = fresh;
        }
        r = fresh;
        *lock = std::unique_lock<std::mutex>(r->m);
    }
    *out = r;
    if (!r->ready) {
        clear_err();
        return res_init(comm, c, s, d, *r);
    }
    return 0;
}

/* Phase two's collective-call check (diag/call_check.cc, as the Python operators and the HCCL C API
 * post theirs): "aclnnRingSum(dtype=fp32, op=sum, count=8, root=0)". Made before the first call's
 * resources are acquired (their channels wait for the peers), so that ranks making different calls
 * (other counts, another operator or collective) fail naming each rank's call instead of waiting for
 * each other or racing on the HCCL buffer. A peer operator's call is matched with its partner's. */
int call_check(const HkAclnnOpDesc* d, const aclOpExecutor* e, Comm* c, const char* api) {
    if (!hccl_hooks.call_check || c->nranks < 2) return 0;
    uint64_t n;
    int32_t dt, rop;
    uint32_t root;
    memcpy(&n, e->param.data() + d->pCount, sizeof n);
    memcpy(&dt, e->param.data() + d->pDataType, sizeof dt);
    memcpy(&rop, e->param.data() + d->pReduceOp, sizeof rop);
    memcpy(&root, e->param.data() + d->pRoot, sizeof root);
    std::string desc = strprintf("%s(dtype=%s", d->api, dtype_name(dt));
    if (d->reduceMask) desc += strprintf(", op=%s", redop_name(rop));
    if (d->sameArgs & HK_SAME_COUNT) desc += strprintf(", count=%llu", (unsigned long long)n);
    if (d->sameArgs & HK_SAME_ROOT) desc += strprintf(", root=%u", root);
    desc += ")";
    int peer = d->topology == HK_TOPO_PEER && root != c->rank ? (int)root : -1;
    std::string bad = hccl_hooks.call_check(c, peer, desc.c_str(), desc.c_str());
    return bad.empty() ? 0 : seterr_str(ACLNN_ERR_PARAM_INVALID, api, bad);
}

int soc_bit() { return cfg().soc == Soc::A2 ? 0 : cfg().soc == Soc::A3 ? 1 : 2; }
const char* kProducts[3] = {"Ascend910B", "Ascend910_93", "Ascend950"};

std::string mask_names(uint32_t mask, const char* (*name)(int)) {
    std::string s;
    for (int i = 0; i < 32; i++)
        if (mask >> i & 1u) s += std::string(s.empty() ? "" : ", ") + name(i);
    return s.empty() ? "-" : s;
}

}  // namespace
}  // namespace emu

using namespace emu;

EMU_API aclnnStatus HkAclnnGetWorkspaceSize(const HkAclnnOpDesc* d, const aclTensor* x, const aclTensor* out,
                                            int64_t reduceOp, int64_t root, const char* group, const void* param,
                                            uint64_t* workspaceSize, aclOpExecutor** executor) {
    if (!d || d->version != HK_ACLNN_DESC_VERSION)
        return seterr(ACLNN_ERR_INNER, "HkAclnnGetWorkspaceSize",
                      "operator description of version %u, this emulator takes %u: rebuild the operator (hcomm-kit build)",
                      d ? d->version : 0u, HK_ACLNN_DESC_VERSION);
    const std::string api1 = std::string(d->api) + "GetWorkspaceSize";
    const char* api = api1.c_str();
    clear_err();
    if (check_init(api)) return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "%s", last_err().c_str());
    struct {
        const void* p;
        const char* name;
    } nulls[] = {{x, "x"}, {out, "out"}, {group, "group"}, {workspaceSize, "workspaceSize"}, {executor, "executor"},
                 {param, "param"}};
    for (auto& n : nulls)
        if (!n.p) return seterr(ACLNN_ERR_PARAM_NULLPTR, api, "%s is NULL", n.name);
    *executor = nullptr;
    *workspaceSize = 0;
    if (!tensor_live(x)) return seterr(ACLNN_ERR_PARAM_INVALID, api, "x = %p is not a live aclTensor", (const void*)x);
    if (!tensor_live(out)) return seterr(ACLNN_ERR_PARAM_INVALID, api, "out = %p is not a live aclTensor", (const void*)out);
    /* dtype */
    int hdt = -1;
    std::string accepted;
    for (uint32_t i = 0; i < d->dtypeNum && i < HK_ACLNN_MAX_DTYPES; i++) {
        if (d->aclDtypes[i] == (int32_t)x->dtype) hdt = d->hcclDtypes[i];
        accepted += std::string(accepted.empty() ? "" : ", ") + acl_dtype_name(d->aclDtypes[i]);
    }
    if (hdt < 0)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "x has dataType %s (%d): operator %s takes %s (op.toml dtypes)",
                      acl_dtype_name(x->dtype), (int)x->dtype, d->opName, accepted.c_str());
    if (out->dtype != x->dtype)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "out has dataType %s, x has %s: they must be the same",
                      acl_dtype_name(out->dtype), acl_dtype_name(x->dtype));
    /* product */
    int sb = soc_bit();
    if (!(d->productMask >> sb & 1u)) {
        std::string p;
        for (int i = 0; i < 3; i++)
            if (d->productMask >> i & 1u) p += std::string(p.empty() ? "" : ", ") + kProducts[i];
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "operator %s runs on %s (op.toml products), this is %s (HCOMM_KIT_SOC)",
                      d->opName, p.c_str(), cfg().soc_name.c_str());
    }
    /* reduce op */
    if (d->reduceMask) {
        if (reduceOp < 0 || reduceOp > 31 || !(d->reduceMask >> reduceOp & 1u))
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "reduceOp %lld (%s): operator %s takes %s (op.toml reduce_ops)",
                          (long long)reduceOp, reduceOp >= 0 && reduceOp < 4 ? redop_name((int)reduceOp) : "unknown", d->opName, mask_names(d->reduceMask, redop_name).c_str());
        if (sb < 2 && (!(d->a2a3DtypeMask >> hdt & 1u) || !(d->a2a3ReduceMask >> reduceOp & 1u)))
            return seterr(ACLNN_ERR_PARAM_INVALID, api,
                          "%s with reduceOp %s is not supported on %s: HcommLocalReduceOnThread reduces %s x %s there "
                          "(hcomm.md §3.1)", acl_dtype_name(x->dtype), redop_name((int)reduceOp), cfg().soc_name.c_str(),
                          mask_names(d->a2a3DtypeMask, dtype_name).c_str(), mask_names(d->a2a3ReduceMask, redop_name).c_str());
    }
    /* group */
    Context* ctx = current_ctx();
    if (!ctx) return seterr(ACLNN_ERR_PARAM_INVALID, api, "no current device (aclrtSetDevice) to find group '%s' on", group);
    Comm* c = comm_find_by_name(group, ctx->dev);
    if (!c)
        return seterr(ACLNN_ERR_PARAM_INVALID, api,
                      "group '%s' names no live HCCL communicator of this process on device %d (pass HcclGetCommName of "
                      "this rank's communicator)", group, ctx->dev->id);
    if (root < 0 || root >= (int64_t)c->nranks)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "root %lld is not a rank of the %u-rank group '%s'", (long long)root,
                      c->nranks, group);
    /* shapes */
    size_t es = acl_dtype_size(x->dtype);
    /* OpParam.count: x's elements, or one block of them per rank (HK_OUT_INPUT_BLOCKS: HCCL's count) */
    uint64_t n = x->numel(), want;
    const uint32_t out_rule = d->output & ~HK_OUT_INPUT_BLOCKS;
    if ((d->output & HK_OUT_INPUT_BLOCKS) != 0) {
        if (n % c->nranks)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "x has %llu elements, not one block per rank of the %u ranks "
                          "(operator %s: x holds count x ranks elements)", (unsigned long long)n, c->nranks, d->opName);
        n /= c->nranks;
    }
    const char* rule = "count";
    if (out_rule == HK_OUT_COUNT_TIMES_RANKS) {
        want = n * c->nranks;
        rule = "count*ranks";
    } else if (out_rule == HK_OUT_COUNT_DIV_RANKS) {
        rule = "count/ranks";
        if (n % c->nranks)
            return seterr(ACLNN_ERR_PARAM_INVALID, api, "x has %llu elements, not a multiple of the %u ranks ([io].output = "
                          "\"count/ranks\")", (unsigned long long)n, c->nranks);
        want = n / c->nranks;
    } else {
        want = n;
    }
    if (out->numel() != want)
        return seterr(ACLNN_ERR_PARAM_INVALID, api, "out has shape %s (%llu elements), operator %s writes %llu for x of shape "
                      "%s on %u ranks ([io].output = \"%s\")", shape_str(out).c_str(), (unsigned long long)out->numel(),
                      d->opName, (unsigned long long)want, shape_str(x).c_str(), c->nranks, rule);
    std::unique_ptr<aclOpExecutor, void (*)(aclOpExecutor*)> e(executor_new(), executor_free);
    if (!e) return seterr(ACLNN_ERR_INNER_CREATE_EXECUTOR, api, "out of memory");
    const std::string owner = strprintf("operator %s", d->opName);
    if (int rc = check_view(api, "x", owner.c_str(), x, es, &e->in)) return rc;
    if (int rc = check_view(api, "out", owner.c_str(), out, es, &e->out)) return rc;
    if (int rc = check_overlap(api, owner.c_str(), e->in, e->out, d->inplace != 0)) return rc;
    /* workspace: staging of non-contiguous views */
    uint64_t ws = layout_workspace({&e->in, &e->out});
    e->ws_size = ws;
    /* OpParam */
    e->api = d->api;
    e->kernel = d->kernel;
    e->comm = c;
    e->group = group;
    e->param.assign(static_cast<const unsigned char*>(param), static_cast<const unsigned char*>(param) + d->paramSize);
    std::vector<unsigned char>& p = e->param;
    snprintf(reinterpret_cast<char*>(p.data() + d->pTag), d->pTagLen, "hk_aclnn_%s", d->opName);
    snprintf(reinterpret_cast<char*>(p.data() + d->pCommName), d->pCommNameLen, "%s", c->name.c_str());
    put<uint64_t>(p, d->pCount, n);
    put<int32_t>(p, d->pDevType, sb);
    put<int32_t>(p, d->pDataType, hdt);
    put<int32_t>(p, d->pOpType, d->opType);
    put<int32_t>(p, d->pReduceOp, d->reduceMask ? (int32_t)reduceOp : 0);
    put<uint32_t>(p, d->pRoot, (uint32_t)root);
    put<uint32_t>(p, d->pNotifyTimeout, cfg().default_kernel_timeout_s);
    *workspaceSize = ws;
    *executor = e.release();
    return ACLNN_SUCCESS;
}

EMU_API aclnnStatus HkAclnnRun(const HkAclnnOpDesc* d, void* workspace, uint64_t workspaceSize, aclOpExecutor* e,
                               aclrtStream stream) {
    if (!d || d->version != HK_ACLNN_DESC_VERSION)
        return seterr(ACLNN_ERR_INNER, "HkAclnnRun", "operator description of another version: rebuild the operator");
    const char* api = d->api;
    clear_err();
    PhaseTwo run;
    if (int rc = run.begin(api, -1, e, workspace, workspaceSize, stream)) return rc;
    Comm* c = run.c;
    Stream* s = run.s;
    HcclComm comm = c;
    aclrtFuncHandle fn = nullptr;
    if (int rc = kernel_fn(d, &fn)) return rc;
    if (int rc = call_check(d, e, c, api)) return rc;
    std::shared_ptr<OpRes> rp;
    std::unique_lock<std::mutex> lock;
    if (int rc = resources(comm, c, s, d, &rp, &lock)) return rc;
    OpRes& r = *rp;
    if (d->topology == HK_TOPO_PEER) {
        uint32_t peer;
        memcpy(&peer, e->param.data() + d->pRoot, sizeof peer);
        uint64_t h = 0;
        memcpy(&h, r.host.data() + d->ctxChannels + peer * d->channelInfoSize + d->chHandle, sizeof h);
        if (peer != c->rank && !h) {
            if (int rc = acquire_channels(comm, c, d, r, {{peer, peer}})) return rc;
            if (int rc = push_ctx(comm, d, r)) return rc;
        }
    }
    char* in = run.in;
    char* out = run.out;
    if (e->in.staged())
        if (int rc = stage_gather(api, "x", e->in, in, s)) return rc;
    std::vector<unsigned char> p = e->param;
    put<void*>(p, d->pInputPtr, in);
    put<void*>(p, d->pOutputPtr, out);
    put<uint64_t>(p, d->pCpuThread, r.cpu);
    put<uint64_t>(p, d->pAicpuThreadOnCpu, r.aicpu_on_cpu);
    put<void*>(p, d->pResCtx, r.dev_ctx);
    uint32_t tmo;
    memcpy(&tmo, p.data() + d->pNotifyTimeout, sizeof tmo);
    int rc;
    if (!d->aclNotify) {
        if ((rc = HcommThreadNotifyRecordOnThread(r.cpu, r.aicpu_on_cpu, 0)))
            return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "recording the host's \"go\": %s", last_err().c_str());
    } else if ((rc = aclrtRecordNotify(r.notify[0], s))) {
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "aclrtRecordNotify (\"go\"): %s", last_err().c_str());
    }
    const char* step = "";
    if ((rc = launch_with_timeout(fn, s, p.data(), p.size(), tmo, &step)))
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "%s %s: %s (aclError %d)", step, d->kernel, last_err().c_str(), rc);
    if (!d->aclNotify) {
        if ((rc = HcommThreadNotifyWaitOnThread(r.cpu, 0, tmo)))
            return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "enqueueing the wait for \"done\": %s", last_err().c_str());
    } else if ((rc = aclrtWaitAndResetNotify(r.notify[1], s, tmo))) {
        return seterr(ACLNN_ERR_RUNTIME_ERROR, api, "aclrtWaitAndResetNotify (\"done\"): %s", last_err().c_str());
    }
    if (e->out.staged())
        if (int rc = stage_scatter(api, "the result", e->out, out, s)) return rc;
    return ACLNN_SUCCESS;
}
