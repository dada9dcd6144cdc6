/* HCCL host plane: CANN's tuner plugin (HCCL_TUNER_PLUGIN, hcclTunerPlugin_v1), loaded as CANN
 * loads it (hicann/hccl src/common/tuner/tuner_setup.cc): dlopen once per process (never closed),
 * init once per communicator with its topology, getCollInfo per call with the algorithm entries
 * and their costs. HcommKitTunerSelect (hcomm_kit/emu_ext.h) is what the built-in collectives'
 * selector (hcomm_kit/ops/selector.py) calls: it applies the plugin, picks the cheapest enabled
 * entry and logs the choice at info level. */
#include "hccl/comm.h"
#include "hccl/hooks.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <map>

#include "hccl_tuner_plugin.h"

using namespace emu;

namespace {

std::mutex g_tuner_m;
int g_tuner_state = 0; /* 0 not tried, 1 loaded, 2 none or failed */
hcclTunerFuncs_v1_t* g_tuner = nullptr;
std::string g_tuner_path;
std::map<Comm*, bool> g_tuner_inited;                          /* under g_tuner_m */
std::map<std::pair<Comm*, std::string>, std::vector<char>> g_tuner_ctx; /* ctxCreate blocks */

hcclTunerFuncs_v1_t* tuner_load() {
    if (g_tuner_state) return g_tuner_state == 1 ? g_tuner : nullptr;
    g_tuner_state = 2;
    const char* p = getenv("HCCL_TUNER_PLUGIN");
    if (!p || !*p) return nullptr;
    g_tuner_path = p;
    void* h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        EMU_LOG(LOG_WARN, "[Tuner] HCCL_TUNER_PLUGIN=%s: dlopen failed (%s); the cost model decides alone", p, dlerror());
        return nullptr;
    }
    auto* t = static_cast<hcclTunerFuncs_v1_t*>(dlsym(h, "hcclTunerPlugin_v1"));
    if (!t || !t->init || !t->getCollInfo) {
        EMU_LOG(LOG_WARN, "[Tuner] HCCL_TUNER_PLUGIN=%s exports no hcclTunerPlugin_v1 with init and getCollInfo; the "
                "cost model decides alone", p);
        return nullptr;
    }
    t->structSize = sizeof(hcclTunerFuncs_v1_t);
    g_tuner = t;
    g_tuner_state = 1;
    EMU_LOG(LOG_INFO, "[Tuner] loaded %s", p);
    return t;
}

HcclResult ctx_create(HcclComm comm, const char* tag, uint64_t size, void** ctx) {
    Comm* c = comm_from_handle(comm);
    if (!c || !tag || !ctx) return HCCL_E_PARA;
    auto& v = g_tuner_ctx[{c, tag}]; /* called under g_tuner_m (init / getCollInfo) */
    v.assign(size, 0);
    *ctx = v.data();
    return HCCL_SUCCESS;
}

HcclResult ctx_get(HcclComm comm, const char* tag, void** ctx, uint64_t* size) {
    Comm* c = comm_from_handle(comm);
    if (!c || !tag || !ctx) return HCCL_E_PARA;
    auto it = g_tuner_ctx.find({c, tag});
    if (it == g_tuner_ctx.end()) return HCCL_E_NOT_FOUND;
    *ctx = it->second.data();
    if (size) *size = it->second.size();
    return HCCL_SUCCESS;
}

HcclResult ctx_destroy(HcclComm comm, const char* tag) {
    Comm* c = comm_from_handle(comm);
    if (!c || !tag) return HCCL_E_PARA;
    return g_tuner_ctx.erase({c, tag}) ? HCCL_SUCCESS : HCCL_E_NOT_FOUND;
}

void tuner_log(int level, const char* file, int line, const char* fmt, ...) {
    if (level > g_log_level) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char* base = file ? strrchr(file, '/') : nullptr;
    emu::logf(level, "[Tuner plugin %s:%d] %s", base ? base + 1 : (file ? file : "?"), line, buf);
}

/* The executor of an entry, read from its algName as CANN composes it (Engine + Op + Executor +
 * templates, hicann/hccl src/common/alg_parse.cc EXECUTOR_TYPES): "AicpuAllReduceSequenceMeshMesh"
 * -> "sequence" (the two-level built-ins), else "sole". */
const char* executor_of(const char* algName) {
    static const char* const kExec[][2] = {{"Sequence", "sequence"}, {"Parallel", "parallel"}, {"PipeLine", "pipeline"},
                                           {"Concur", "concur"}, {"StrictOrdered", "strictordered"}};
    for (const auto& e : kExec)
        if (algName && strstr(algName, e[0])) return e[1];
    return "sole";
}

const char* coll_name(int t) {
    switch (t) {
        case HCCL_CMD_ALLREDUCE: return "allreduce";
        case HCCL_CMD_ALLGATHER: return "allgather";
        case HCCL_CMD_REDUCE_SCATTER: return "reduce_scatter";
        case HCCL_CMD_ALLTOALL: return "alltoall";
        case HCCL_CMD_ALLTOALLV: return "alltoallv";
        case HCCL_CMD_BROADCAST: return "broadcast";
        default: return "collective";
    }
}

}  // namespace

/* hcomm-kit extension (hcomm_kit/emu_ext.h): the entry to run among n algorithm entries. */
EMU_API int32_t HcommKitTunerSelect(HcclComm comm, int32_t collType, uint64_t nBytes, int32_t dataType,
                                    const char** algNames, const char** templates, float* costs, uint32_t n) {
    Comm* c = comm_from_handle(comm);
    if (!c) return -(int32_t)seterr(HCCL_E_PARA, __func__, "comm %p is not a live communicator", comm);
    if (!algNames || !templates || !costs || n == 0 || n > 64)
        return -(int32_t)seterr(HCCL_E_PARA, __func__, "algNames/templates/costs must be arrays of 1..64 entries (n=%u)", n);
    std::vector<float> model(costs, costs + n);
    int matched = 0;
    {
        std::lock_guard<std::mutex> g(g_tuner_m);
        if (hcclTunerFuncs_v1_t* t = tuner_load()) {
            bool ok = true;
            if (!g_tuner_inited.count(c)) {
                const Topology& tp = c->topo;
                hcclTunerCommInfo_t info;
                memset(&info, 0, sizeof info);
                info.nRanks = c->nranks;
                info.nServers = tp.nservers;
                info.nNpusPerServer = (uint32_t)tp.members(0, tp.group(0, c->rank)).size();
                if (tp.layers() > 1) info.nPods = tp.groups(1);
                if (tp.layers() > 2) info.nSuperPods = tp.groups(2);
                info.commName = c->name.c_str();
                info.bufferSize = c->buf_size;
                info.structSize = sizeof info;
                hcclTunerHostFunctions_t hf;
                memset(&hf, 0, sizeof hf);
                hf.ctxCreate = ctx_create;
                hf.ctxGet = ctx_get;
                hf.ctxDestroy = ctx_destroy;
                hf.logFunction = tuner_log;
                hf.structSize = sizeof hf;
                HcclResult r = t->init(comm, &info, &hf);
                g_tuner_inited[c] = r == HCCL_SUCCESS;
                if (r != HCCL_SUCCESS)
                    EMU_LOG(LOG_WARN, "[Tuner] %s: init returned %d for communicator %s; the plugin is not used for it",
                            g_tuner_path.c_str(), (int)r, c->name.c_str());
            }
            ok = g_tuner_inited[c];
            if (ok) {
                std::vector<hcclTunerAlgoEntry_t> e(n);
                for (uint32_t i = 0; i < n; i++) {
                    e[i].algName = algNames[i];
                    e[i].engineName = "aicpu";
                    e[i].executorName = executor_of(algNames[i]);
                    e[i].templateName = templates[i];
                    e[i].cost = costs[i];
                    e[i].structSize = sizeof e[i];
                }
                hcclTunerCollInfo_t ci;
                memset(&ci, 0, sizeof ci);
                ci.collType = (HcclCMDType)collType;
                ci.nBytes = (size_t)nBytes;
                ci.dataType = (HcclDataType)dataType;
                ci.structSize = sizeof ci;
                HcclResult r = t->getCollInfo(comm, &ci, e.data(), (int)n, &matched);
                if (r != HCCL_SUCCESS) {
                    EMU_LOG(LOG_WARN, "[Tuner] getCollInfo returned %d; its changes are ignored", (int)r);
                    matched = 0;
                } else if (matched == 1) {
                    for (uint32_t i = 0; i < n; i++) costs[i] = e[i].cost;
                }
            }
        }
    }
    int32_t best = -1;
    for (uint32_t i = 0; i < n; i++)
        if (costs[i] >= 0 && (best < 0 || costs[i] < costs[best])) best = (int32_t)i;
    if (hccl_hooks.trace_note) {
        std::string costs_json;
        for (uint32_t i = 0; i < n; i++)
            costs_json += strprintf("%s\"%s\":%.6g", i ? "," : "", algNames[i], (double)costs[i]);
        hccl_hooks.trace_note(c, "algorithm selection",
                              strprintf("\"collective\":\"%s\",\"bytes\":%llu,\"chosen\":\"%s\",\"tuner_matched\":%d,"
                                        "\"costs\":{%s}", coll_name(collType), (unsigned long long)nBytes,
                                        best >= 0 ? algNames[best] : "none", matched == 1 ? 1 : 0, costs_json.c_str()));
    }
    if (c->rank == 0 && g_log_level >= LOG_INFO) {
        std::string s;
        for (uint32_t i = 0; i < n; i++)
            s += strprintf("%s%s %.3g s%s", i ? ", " : "", algNames[i], (double)costs[i],
                           costs[i] != model[i] ? strprintf(" (cost model %.3g)", (double)model[i]).c_str() : "");
        EMU_LOG(LOG_INFO, "[Selector] %s of %llu bytes on %s: %s -> %s%s", coll_name(collType), (unsigned long long)nBytes,
                c->name.c_str(), s.c_str(), best >= 0 ? algNames[best] : "none",
                matched == 1 ? " (tuner plugin matched)" : "");
    }
    return best;
}

void emu::tuner_forget(Comm* c) {
    std::lock_guard<std::mutex> g(g_tuner_m);
    g_tuner_inited.erase(c);
    for (auto it = g_tuner_ctx.begin(); it != g_tuner_ctx.end();)
        it = it->first.first == c ? g_tuner_ctx.erase(it) : std::next(it);
}
