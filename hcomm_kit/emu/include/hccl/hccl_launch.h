/*
 * hcomm-kit CPU emulator: HCCL-managed AICPU kernel launch (950, Send/Recv-type
 * custom operators), matching CANN's <hccl/hccl_launch.h>. Layouts follow
 * hcomm.md §2.5; the launcher is described in §3.10.
 */
#ifndef HCCL_LAUNCH_H
#define HCCL_LAUNCH_H

#include <stdint.h>
#include <string.h>
#include "hccl_types.h"
#include "acl/acl_rt.h"
#include "hcomm_res_defs.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HCCL_GROUP_FEATURE_SUPPORT

#ifdef __cplusplus
const uint32_t P2P_MAX_ARG_SIZE = 8192U;
const uint32_t HCCL_OP_DESC_OP_NAME_MAX_LEN = 256U;
const uint32_t HCCL_KERNEL_SO_NAME_MAX_LEN = 256U;
const uint32_t HCCL_KERNEL_FUNC_NAME_MAX_LEN = 256U;
#else
enum {
    P2P_MAX_ARG_SIZE = 8192,
    HCCL_OP_DESC_OP_NAME_MAX_LEN = 256,
    HCCL_KERNEL_SO_NAME_MAX_LEN = 256,
    HCCL_KERNEL_FUNC_NAME_MAX_LEN = 256
};
#endif

typedef struct {
    ThreadHandle sendRecvThread;
    uint8_t opParams[P2P_MAX_ARG_SIZE];
} HcclP2pKernelParam;

/* Point-to-point operator description (48 bytes, LP64). */
typedef struct {
    void *buffer;
    uint8_t reserved[8];
    HcclCMDType cmdType;
    HcclDataType dataType;
    uint64_t count;
    uint32_t remoteRank;
    void *unfoldStream;
} HcclOpP2pDesc;

/* Operator description (360 bytes, LP64; union @280). */
typedef struct {
    CommAbiHeader header;
    uint32_t opDescType;
    char opName[HCCL_OP_DESC_OP_NAME_MAX_LEN];
    union {
        uint8_t raws[76];
        HcclOpP2pDesc p2p;
    };
} HcclOpDesc;

static const uint32_t HCCL_OPDESC_MAGIC_WORD = 0x0f0f0f0fU;
static const uint32_t HCCL_OPDESC_VERSION = 1U;

/* Fill with 0xFF and stamp the ABI header. Returns HCCL_SUCCESS or HCCL_E_PTR. */
static inline HcclResult HcclOpDescInit(HcclOpDesc *opDesc)
{
    if (opDesc == NULL) {
        return HCCL_E_PTR;
    }
    memset(opDesc, 0xFF, sizeof(HcclOpDesc));
    opDesc->header.version = HCCL_OPDESC_VERSION;
    opDesc->header.magicWord = HCCL_OPDESC_MAGIC_WORD;
    opDesc->header.size = (uint32_t)sizeof(HcclOpDesc);
    opDesc->header.reserved = 0;
    return HCCL_SUCCESS;
}

/* Kernel to launch (528 bytes, LP64): args @512, argSize @520. */
typedef struct {
    char kernelSoName[HCCL_KERNEL_SO_NAME_MAX_LEN];
    char kernelFuncName[HCCL_KERNEL_FUNC_NAME_MAX_LEN];
    void *args;
    uint32_t argSize;
} HcclKernelFuncInfo;

static const uint32_t HCCL_KERNEL_LAUNCH_CFG_MAGIC_WORD = 0x0f0f0f0fU;
static const uint32_t HCCL_KERNEL_LAUNCH_CFG_VERSION = 1U;

/* Launch configuration (128 bytes): timeOut @16. */
typedef struct {
    CommAbiHeader header;
    uint64_t timeOut;
    uint8_t reserved[104];
} HcclKernelLaunchCfg;

/* Fill with 0xFF and stamp the ABI header. Returns HCCL_SUCCESS or HCCL_E_PTR. */
static inline HcclResult HcclKernelLaunchCfgInit(HcclKernelLaunchCfg *kernelLaunchCfg)
{
    if (kernelLaunchCfg == NULL) {
        return HCCL_E_PTR;
    }
    memset(kernelLaunchCfg, 0xFF, sizeof(HcclKernelLaunchCfg));
    kernelLaunchCfg->header.version = HCCL_KERNEL_LAUNCH_CFG_VERSION;
    kernelLaunchCfg->header.magicWord = HCCL_KERNEL_LAUNCH_CFG_MAGIC_WORD;
    kernelLaunchCfg->header.size = (uint32_t)sizeof(HcclKernelLaunchCfg);
    kernelLaunchCfg->header.reserved = 0;
    return HCCL_SUCCESS;
}

/* Launch an AICPU kernel for a point-to-point operator on `userStream`, using
 * the AICPU thread `aicpuThreadHandle`. Joins an open HcclGroupStart/End group. */
extern HcclResult HcclAicpuKernelLaunch(HcclComm comm, const HcclOpDesc *opInfo, const HcclKernelFuncInfo *funcInfo,
                                        ThreadHandle aicpuThreadHandle, aclrtStream userStream,
                                        const HcclKernelLaunchCfg *kernelLaunchCfg);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_LAUNCH_H */
