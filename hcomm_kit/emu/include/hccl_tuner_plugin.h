/* CANN's HCCL tuner plugin interface (hicann/hccl src/ops/op_common/selector/inc/hccl_tuner_plugin.h),
 * the same declarations for the emulator, installed at the top of the include tree where CANN's
 * examples/06_tuner_plugin finds it (-I$(ASCEND_HOME_PATH)/include). A plugin is a shared object
 * named by HCCL_TUNER_PLUGIN exporting hcclTunerPlugin_v1: init once per communicator with its
 * topology, getCollInfo per collective call with the algorithm entries and their costs, which it
 * may change (< 0 disables, 0 prefers, > 0 overrides, unchanged = the cost model's). */
#ifndef HCCL_TUNER_PLUGIN_H_
#define HCCL_TUNER_PLUGIN_H_

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* communicator information (per communicator, given to init) */
typedef struct {
    uint32_t nRanks;
    uint32_t nNpusPerServer;
    uint32_t nServers;
    uint32_t nPods;
    uint32_t nSuperPods;
    const char* commName;
    uint64_t bufferSize;
    uint32_t structSize;
} hcclTunerCommInfo_t;

/* collective call information (per call, given to getCollInfo) */
typedef struct {
    HcclCMDType collType;
    size_t nBytes;
    HcclDataType dataType;
    uint32_t structSize;
} hcclTunerCollInfo_t;

/* one algorithm entry (the named cost table) */
typedef struct {
    const char* algName;      /* "AicpuAllReduceSoleMeshoneshot" */
    const char* engineName;   /* "aicpu" (read-only for the plugin) */
    const char* executorName; /* "sole" (read-only) */
    const char* templateName; /* "meshoneshot" (read-only) */
    float cost;               /* writable: < 0 disables, 0 prefers, > 0 overrides, unchanged = cost model */
    uint32_t structSize;
} hcclTunerAlgoEntry_t;

typedef void (*hcclTunerLogFn_t)(int level, const char* file, int line, const char* fmt, ...);

typedef struct {
    HcclResult (*ctxCreate)(HcclComm comm, const char* ctxTag, uint64_t size, void** ctx);
    HcclResult (*ctxGet)(HcclComm comm, const char* ctxTag, void** ctx, uint64_t* size);
    HcclResult (*ctxDestroy)(HcclComm comm, const char* ctxTag);
    hcclTunerLogFn_t logFunction;
    uint32_t structSize;
} hcclTunerHostFunctions_t;

typedef HcclResult (*hcclTunerInit_t)(HcclComm comm, const hcclTunerCommInfo_t* commInfo,
                                      const hcclTunerHostFunctions_t* hostFuncs);
/* *matched = 1: a rule matched and changed costs; 0: none (HCCL sets it to 0 before the call) */
typedef HcclResult (*hcclTunerGetCollInfo_t)(HcclComm comm, const hcclTunerCollInfo_t* collInfo,
                                             hcclTunerAlgoEntry_t* algoEntries, int algoCount, int* matched);

typedef struct {
    hcclTunerInit_t init;
    hcclTunerGetCollInfo_t getCollInfo;
    uint32_t structSize; /* set by HCCL: the plugin can tell the table's size (ABI compatibility) */
} hcclTunerFuncs_v1_t;

/* the plugin's entry symbol */
extern hcclTunerFuncs_v1_t hcclTunerPlugin_v1;

#define HCCL_TUNER_LOG_ERROR 0
#define HCCL_TUNER_LOG_WARN 1
#define HCCL_TUNER_LOG_INFO 2
#define HCCL_TUNER_LOG_DEBUG 3

#ifdef __cplusplus
}
#endif

#endif /* HCCL_TUNER_PLUGIN_H_ */
