/*
 * hcomm-kit CPU emulator: HCCL communicator management, matching CANN's
 * <hccl/hccl_comm.h>. Prototypes follow hcomm.md §3.6. As in CANN, the
 * functions are declared with HCOMM_WEAK_SYMBOL (define it empty before
 * including this header to get ordinary declarations).
 */
#ifndef HCCL_COMM_H_
#define HCCL_COMM_H_

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include "hccl_types.h"
#include "hccl_res.h"
#include "hccl_launch.h"
#include "acl/acl.h"

#ifndef HCOMM_WEAK_SYMBOL
#define HCOMM_WEAK_SYMBOL __attribute__((weak))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* clusterInfo: path of a rank-table JSON file. */
extern HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclCommInitClusterInfoConfig(const char *clusterInfo, uint32_t rank, HcclCommConfig *config,
                                                HcclComm *comm) HCOMM_WEAK_SYMBOL;
/* Called on the root rank only; every rank then passes the same rootInfo. */
extern HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                       HcclComm *comm) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                             const HcclCommConfig *config, HcclComm *comm) HCOMM_WEAK_SYMBOL;
/* A communicator of the parent's ranks rankIds[0..rankNum) (this rank is rankIds[subCommRankId]);
 * called by those ranks only, each with the same rankIds and subCommId. */
extern HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds, uint64_t subCommId,
                                          uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm)
    HCOMM_WEAK_SYMBOL;
/* One communicator per device of `devices`, all in this process. */
extern HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms) HCOMM_WEAK_SYMBOL;
/* commName must hold at least COMM_NAME_MAX_LENGTH (128) bytes. */
extern HcclResult HcclGetCommName(HcclComm comm, char *commName) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) HCOMM_WEAK_SYMBOL;
extern HcclResult HcclCommDestroy(HcclComm comm) HCOMM_WEAK_SYMBOL;
/* Text for an HcclResult value. */
extern const char *HcclGetErrorString(HcclResult code) HCOMM_WEAK_SYMBOL;

/* Operator groups (HcclAicpuKernelLaunch joins an open group). */
extern HcclResult HcclGroupStart(void);
extern HcclResult HcclGroupEnd(void);

/* Reset a communicator configuration to "nothing set". Header-inline. */
static inline void HcclCommConfigInit(HcclCommConfig *config)
{
    /* The 24 reserved bytes carry {size_t size; uint32_t magic; uint32_t version; uint64_t reserved;}. */
    size_t structSize = sizeof(HcclCommConfig);
    uint32_t magic = HCCL_COMM_CONFIG_MAGIC_WORD;
    uint32_t version = HCCL_COMM_CONFIG_VERSION;
    uint64_t reserved = 0;
    if (config == NULL) {
        return;
    }
    memcpy(config->reserved, &structSize, sizeof(structSize));
    memcpy(config->reserved + 8, &magic, sizeof(magic));
    memcpy(config->reserved + 12, &version, sizeof(version));
    memcpy(config->reserved + 16, &reserved, sizeof(reserved));

    config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
    config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
    config->hcclCommName[0] = '\0';
    config->hcclUdi[0] = '\0';
    config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
    config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
    config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
    config->hcclWorldRankID = 0;
    config->hcclJobID = 0;
    config->aclGraphZeroCopyEnable = 0;
    config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
    config->hcclAlgo[0] = '\0';
    config->hcclRetryEnable[0] = '\0';
    config->hcclRetryParams[0] = '\0';
    config->hcclBufferName[0] = '\0';
    config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
    config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
}

#ifdef __cplusplus
}
#endif

#endif /* HCCL_COMM_H_ */
