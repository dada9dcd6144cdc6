/* HCCL host plane: CANN's tuner plugin (HCCL_TUNER_PLUGIN, hcclTunerPlugin_v1), loaded as CANN
 * loads it (hicann/hccl src/common/tuner/tuner_setup.cc): dlopen once per process (never closed),
 * init once per communicator with its topology (BuildCommInfo), getCollInfo per call with CANN's
 * cost table, whose costs it may rewrite in place. As in CANN it takes part only in the cost-table
 * selection of HCCL_USE_NEW_SELECTOR=1 (selector_engine.cc Run; hccl/algo_select.cc). */
#include "base/reduce.h"
#include "hccl/comm.h"

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

}  // namespace

bool emu::tuner_apply(Comm* c, const AlgoQuery& q, std::vector<CostEntry>* entries) {
    if (entries->empty()) return false;
    std::lock_guard<std::mutex> g(g_tuner_m);
    hcclTunerFuncs_v1_t* t = tuner_load();
    if (!t) return false;
    if (!g_tuner_inited.count(c)) {
        /* BuildCommInfo (tuner_setup.cc): the topology fields CANN's selectors read */
        const CannTopoInfo& ti = c->cann_topo;
        hcclTunerCommInfo_t info;
        memset(&info, 0, sizeof info);
        info.nRanks = ti.userRankSize;
        info.nServers = ti.serverNum;
        if (!ti.localNetInsSizeOfLayer.empty()) info.nNpusPerServer = ti.localNetInsSizeOfLayer[0];
        if (ti.netInstNumOfLayer.size() > 1) info.nPods = ti.netInstNumOfLayer[1];
        if (ti.netInstNumOfLayer.size() > 2) info.nSuperPods = ti.netInstNumOfLayer[2];
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
        HcclResult r = t->init(static_cast<HcclComm>(c), &info, &hf);
        g_tuner_inited[c] = r == HCCL_SUCCESS;
        if (r != HCCL_SUCCESS)
            EMU_LOG(LOG_WARN, "[Tuner] %s: init returned %d for communicator %s; the plugin is not used for it",
                    g_tuner_path.c_str(), (int)r, c->name.c_str());
    }
    if (!g_tuner_inited[c]) return false;
    std::vector<hcclTunerAlgoEntry_t> e(entries->size());
    for (size_t i = 0; i < e.size(); i++) {
        memset(&e[i], 0, sizeof e[i]);
        e[i].algName = (*entries)[i].name.c_str();
        e[i].engineName = (*entries)[i].engine.c_str();
        e[i].executorName = (*entries)[i].executor.c_str();
        e[i].templateName = (*entries)[i].tpl.c_str();
        e[i].cost = (*entries)[i].cost;
        e[i].structSize = sizeof e[i];
    }
    hcclTunerCollInfo_t ci;
    memset(&ci, 0, sizeof ci);
    ci.collType = (HcclCMDType)q.coll;
    /* param.inputSize: reduce-scatter's whole input (reduce_scatter_op.cc:159) */
    ci.nBytes = (size_t)(q.count * dtype_size(q.dtype) * (q.coll == HCCL_CMD_REDUCE_SCATTER ? c->nranks : 1));
    ci.dataType = (HcclDataType)q.dtype;
    ci.structSize = sizeof ci;
    int matched = 0;
    HcclResult r = t->getCollInfo(static_cast<HcclComm>(c), &ci, e.data(), (int)e.size(),
                                  &matched);
    /* the plugin writes the table in place, as CANN hands it ct.costs (selector_engine.cc:218) */
    for (size_t i = 0; i < e.size(); i++) (*entries)[i].cost = e[i].cost;
    if (r != HCCL_SUCCESS) {
        EMU_LOG(LOG_WARN, "[Tuner] getCollInfo returned %d: no match", (int)r);
        return false;
    }
    return matched == 1;
}

void emu::tuner_forget(Comm* c) {
    std::lock_guard<std::mutex> g(g_tuner_m);
    g_tuner_inited.erase(c);
    for (auto it = g_tuner_ctx.begin(); it != g_tuner_ctx.end();)
        it = it->first.first == c ? g_tuner_ctx.erase(it) : std::next(it);
}
