/* A CANN tuner plugin (hccl_tuner_plugin.h, hcclTunerPlugin_v1) for tests/test_topology.py: on
 * allreduce it prefers the ring (cost 0) and disables every other template (cost -1); it keeps
 * a per-communicator counter in a context block (ctxCreate at init, ctxGet per call) and logs
 * through the host's log function (init, and every entry it is shown). */
#include <hccl_tuner_plugin.h>

#include <stdio.h>
#include <string.h>

static hcclTunerHostFunctions_t g_host;

static HcclResult tuner_init(HcclComm comm, const hcclTunerCommInfo_t* info, const hcclTunerHostFunctions_t* host) {
    void* ctx = NULL;
    g_host = *host;
    if (host->ctxCreate(comm, "prefer_nhr", sizeof(unsigned), &ctx) != HCCL_SUCCESS) return HCCL_E_INTERNAL;
    memset(ctx, 0, sizeof(unsigned));
    host->logFunction(HCCL_TUNER_LOG_INFO, __FILE__, __LINE__, "prefer_nhr init: nRanks=%u nServers=%u nNpusPerServer=%u "
                      "nPods=%u nSuperPods=%u", info->nRanks, info->nServers, info->nNpusPerServer, info->nPods,
                      info->nSuperPods);
    return HCCL_SUCCESS;
}

static HcclResult tuner_get(HcclComm comm, const hcclTunerCollInfo_t* coll, hcclTunerAlgoEntry_t* e, int n, int* matched) {
    void* ctx = NULL;
    uint64_t size = 0;
    int i;
    if (g_host.ctxGet(comm, "prefer_nhr", &ctx, &size) != HCCL_SUCCESS || size != sizeof(unsigned)) return HCCL_E_INTERNAL;
    ++*(unsigned*)ctx;
    for (i = 0; i < n; i++)
        g_host.logFunction(HCCL_TUNER_LOG_INFO, __FILE__, __LINE__, "prefer_nhr sees %s: engine %s executor %s "
                           "template %s cost %g", e[i].algName, e[i].engineName, e[i].executorName, e[i].templateName,
                           (double)e[i].cost);
    if (coll->collType != HCCL_CMD_ALLREDUCE) return HCCL_SUCCESS;
    for (i = 0; i < n; i++) e[i].cost = strcmp(e[i].templateName, "nhr") == 0 ? 0.0f : -1.0f;
    *matched = 1;
    return HCCL_SUCCESS;
}

hcclTunerFuncs_v1_t hcclTunerPlugin_v1 = {tuner_init, tuner_get, 0};
