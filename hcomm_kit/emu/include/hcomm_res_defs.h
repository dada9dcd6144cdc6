/*
 * hcomm-kit CPU emulator: Hcomm resource definitions, matching CANN's
 * "hcomm_res_defs.h" (engines, protocols, endpoints, memory descriptors,
 * thread configuration). Layouts follow hcomm.md §2.4-§2.5 (LP64).
 * Valid C11 and C++.
 */
#ifndef HCOMM_RES_DEFS_H
#define HCOMM_RES_DEFS_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "securec.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
static const uint32_t COMM_ADDR_EID_LEN = 16U;
#else
enum { COMM_ADDR_EID_LEN = 16 };
#endif

typedef int32_t HcommResult;

typedef void *EndpointHandle;   /* network device handle */
typedef void *HcommMemHandle;   /* opaque registered-memory handle */
typedef void *HcommSocket;

#ifndef CHANNEL_HANDLE_DEFINED
#define CHANNEL_HANDLE_DEFINED
typedef uint64_t ChannelHandle; /* 0 = invalid */
#endif

#ifndef THREAD_HANDLE_DEFINED
#define THREAD_HANDLE_DEFINED
typedef uint64_t ThreadHandle;  /* 0 = invalid */
#endif

/* ---- ABI header carried at the start of versioned structs --------------- */
typedef struct {
    uint32_t version;
    uint32_t magicWord;
    uint32_t size;
    uint32_t reserved;
} CommAbiHeader;

/* ---- communication threads ---------------------------------------------- */
typedef enum {
    THREAD_TYPE_INVALID = -1,
    THREAD_TYPE_TS = 0
} ThreadType;

static const uint32_t HCOMM_THREAD_CONFIG_MAGIC_WORD = 0x0f0f0f2fU;
static const uint32_t HCOMM_THREAD_CONFIG_VERSION = 1U;

/* Per-thread configuration for HcclThreadAcquireWithConfig (32 bytes). */
typedef struct {
    CommAbiHeader header;
    uint16_t notifyNumPerThread;
    uint8_t reserved[14];
} ThreadConfig;

/* Zero `num` consecutive configs and stamp their ABI header.
 * Returns 0, or 2 (HCCL_E_PTR) for a NULL array. */
static inline HcommResult ThreadConfigInit(ThreadConfig *config, uint32_t num)
{
    uint32_t i;
    if (config == NULL) {
        return (HcommResult)2;
    }
    for (i = 0; i < num; ++i) {
        ThreadConfig *cur = config + i;
        memset(cur, 0, sizeof(ThreadConfig));
        cur->header.version = HCOMM_THREAD_CONFIG_VERSION;
        cur->header.magicWord = HCOMM_THREAD_CONFIG_MAGIC_WORD;
        cur->header.size = (uint32_t)sizeof(ThreadConfig);
        cur->header.reserved = 0;
        cur->notifyNumPerThread = 0;
    }
    return 0;
}

/* Dedicated thread purposes for HcclDedicatedThreadAcquire. */
typedef enum {
    HCCL_DED_THREAD_TYPE_INVALID = -1,
    HCCL_DED_THREAD_TYPE_AICPU_LAUNCH = 0,
    HCCL_DED_THREAD_TYPE_AICPU_LAUNCH_GE = 1,
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_OPBASE = 2,
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_ACLGRAPH = 3,
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_GE = 4,
    HCCL_DED_THREAD_TYPE_AICPU_ORDER_LAUNCH_DEVICE = 5
} HcclDedicatedThreadType;

/* Underlying resource kinds reported by HcclThreadResGetInfo. */
typedef enum {
    THREAD_RES_TYPE_INVALID = -1,
    THREAD_RES_TYPE_STREAM = 0
} ThreadResType;

/* ---- engines and protocols ------------------------------------------------ */
typedef enum {
    COMM_ENGINE_RESERVED = -1,
    COMM_ENGINE_CPU = 0,
    COMM_ENGINE_CPU_TS = 1,
    COMM_ENGINE_AICPU = 2,
    COMM_ENGINE_AICPU_TS = 3,
    COMM_ENGINE_AIV = 4,
    COMM_ENGINE_CCU = 5
} CommEngine;

typedef enum {
    COMM_PROTOCOL_RESERVED = -1,
    COMM_PROTOCOL_HCCS = 0,
    COMM_PROTOCOL_ROCE = 1,
    COMM_PROTOCOL_PCIE = 2,
    COMM_PROTOCOL_SIO = 3,
    COMM_PROTOCOL_UB_CTP = 4,
    COMM_PROTOCOL_UBC_CTP = COMM_PROTOCOL_UB_CTP, /* older name */
    COMM_PROTOCOL_UBC_TP = 5,
    COMM_PROTOCOL_UB_MEM = 6,
    COMM_PROTOCOL_UBOE = 7,
    COMM_PROTOCOL_HCCS_ONLY = 8,
    COMM_PROTOCOL_UB_RTP = 9,
    COMM_PROTOCOL_UBG = COMM_PROTOCOL_UB_RTP      /* older name */
} CommProtocol;

/* Topology of one network layer (hccl_rank_graph.h queries). */
typedef enum {
    COMM_TOPO_RESERVED = -1,
    COMM_TOPO_CLOS = 0,
    COMM_TOPO_1DMESH = 1,
    COMM_TOPO_910_93 = 2,
    COMM_TOPO_310P = 3,
    COMM_TOPO_A2AXSERVER = 4,
    COMM_TOPO_CUSTOM = 5
} CommTopo;

/* ---- endpoints ------------------------------------------------------------- */
typedef enum {
    COMM_ADDR_TYPE_RESERVED = -1,
    COMM_ADDR_TYPE_IP_V4 = 0,
    COMM_ADDR_TYPE_IP_V6 = 1,
    COMM_ADDR_TYPE_ID = 2,
    COMM_ADDR_TYPE_EID = 3
} CommAddrType;

/* Address of a communication device (40 bytes; payload up to 36 bytes). */
typedef struct {
    CommAddrType type;
    union {
        uint8_t raws[36];
        struct in_addr addr;
        struct in6_addr addr6;
        uint32_t id;
        uint8_t eid[COMM_ADDR_EID_LEN];
    };
} CommAddr;

typedef enum {
    ENDPOINT_LOC_TYPE_RESERVED = -1,
    ENDPOINT_LOC_TYPE_DEVICE = 0,
    ENDPOINT_LOC_TYPE_HOST = 1
} EndpointLocType;

/* Where an endpoint lives (64 bytes; payload up to 60 bytes). */
typedef struct {
    EndpointLocType locType;
    union {
        uint8_t raws[60];
        struct {
            uint32_t devPhyId;
            uint32_t superDevId;
            uint32_t serverIdx;
            uint32_t superPodIdx;
        } device;
        struct {
            uint32_t id;
        } host;
    };
} EndpointLoc;

/* Endpoint descriptor (160 bytes): protocol @0, commAddr @4, loc @44, raws @108. */
typedef struct {
    CommProtocol protocol;
    CommAddr commAddr;
    EndpointLoc loc;
    union {
        uint8_t raws[52];
    };
} EndpointDesc;

/* Fill `num` endpoint descriptors with 0xFF and mark them unset.
 * Returns 0, or 2 (HCCL_E_PTR) for a NULL array. */
static inline HcommResult EndpointDescInit(EndpointDesc *endpoint, uint32_t num)
{
    uint32_t i;
    if (endpoint == NULL && num > 0) {
        return (HcommResult)2;
    }
    for (i = 0; i < num; ++i) {
        EndpointDesc *cur = endpoint + i;
        memset(cur, 0xFF, sizeof(EndpointDesc));
        cur->protocol = COMM_PROTOCOL_RESERVED;
        cur->commAddr.type = COMM_ADDR_TYPE_RESERVED;
        cur->loc.locType = ENDPOINT_LOC_TYPE_RESERVED;
    }
    return 0;
}

/* ---- memory descriptors ------------------------------------------------------ */
typedef enum {
    COMM_MEM_TYPE_INVALID = -1,
    COMM_MEM_TYPE_DEVICE = 0,
    COMM_MEM_TYPE_HOST = 1
} CommMemType;

/* Memory segment (24 bytes): type @0, addr @8, size @16. */
typedef struct {
    CommMemType type;
    void *addr;
    uint64_t size;
} CommMem;

typedef enum {
    HCOMM_SOCKET_ROLE_RESERVED = -1,
    HCOMM_SOCKET_ROLE_CLIENT = 0,
    HCOMM_SOCKET_ROLE_SERVER = 1
} HcommSocketRole;

typedef enum {
    HCOMM_ENDPOINT_FEATURE_INVALID = -1,
    HCOMM_ENDPOINT_FEATURE_NDA = 0
} HcommEndpointFeatureType;

#ifdef __cplusplus
}
#endif

#endif /* HCOMM_RES_DEFS_H */
