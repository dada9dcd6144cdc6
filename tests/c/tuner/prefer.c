/* A CANN tuner plugin (hccl_tuner_plugin.h, hcclTunerPlugin_v1) for tests/test_algo_select.py:
 * every call it logs the entries it is shown (through the host's log function) and, when the
 * environment names one (TUNER_PREFER: an algName or a template), gives the entries that match it
 * cost 0 and says it matched. A per-communicator counter lives in a context block (ctxCreate at
 * init, ctxGet per call). */
#include <hccl_tuner_plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hcclTunerHostFunctions_t g_host;

static HcclResult tuner_init(HcclComm comm, const hcclTunerCommInfo_t* info, const hcclTunerHostFunctions_t* host) {
    void* ctx = NULL;
    g_host = *host;
    if (host->ctxCreate(comm, "prefer", sizeof(unsigned), &ctx) != HCCL_SUCCESS) return HCCL_E_INTERNAL;
    memset(ctx, 0, sizeof(unsigned));
    host->logFunction(HCCL_TUNER_LOG_INFO, __FILE__, __LINE__, "prefer init: nRanks=%u nServers=%u nNpusPerServer=%u "
                      "nPods=%u nSuperPods=%u", info->nRanks, info->nServers, info->nNpusPerServer, info->nPods,
                      info->nSuperPods);
    return HCCL_SUCCESS;
}

static HcclResult tuner_get(HcclComm comm, const hcclTunerCollInfo_t* coll, hcclTunerAlgoEntry_t* e, int n, int* matched) {
    void* ctx = NULL;
    uint64_t size = 0;
    const char* want = getenv("TUNER_PREFER");
    int i;
    if (g_host.ctxGet(comm, "prefer", &ctx, &size) != HCCL_SUCCESS || size != sizeof(unsigned)) return HCCL_E_INTERNAL;
    ++*(unsigned*)ctx;
    for (i = 0; i < n; i++)
        g_host.logFunction(HCCL_TUNER_LOG_INFO, __FILE__, __LINE__, "prefer sees %s: engine %s executor %s template %s "
                           "cost %g (call %u, %zu bytes)", e[i].algName, e[i].engineName, e[i].executorName,
                           e[i].templateName, (double)e[i].cost, *(unsigned*)ctx, coll->nBytes);
    if (!want || !*want) return HCCL_SUCCESS;
    for (i = 0; i < n; i++)
        if (strcmp(e[i].algName, want) == 0 || strcmp(e[i].templateName, want) == 0) {
            e[i].cost = 0.0f;
            *matched = 1;
        }
    return HCCL_SUCCESS;
}

hcclTunerFuncs_v1_t hcclTunerPlugin_v1 = {tuner_init, tuner_get, 0};
