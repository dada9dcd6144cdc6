/*
 * hcomm-kit CPU emulator: HCCL basic types, matching CANN's <hccl/hccl_types.h>.
 * Values from hcomm.md §2.2-§2.3. Valid C11 and C++.
 */
#ifndef HCCL_TYPES_H_
#define HCCL_TYPES_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result code of every HCCL / Hcomm call. */
typedef enum {
    HCCL_SUCCESS = 0,
    HCCL_E_PARA = 1,               /* bad parameter */
    HCCL_E_PTR = 2,                /* NULL pointer / handle */
    HCCL_E_MEMORY = 3,
    HCCL_E_INTERNAL = 4,
    HCCL_E_NOT_SUPPORT = 5,
    HCCL_E_NOT_FOUND = 6,
    HCCL_E_UNAVAIL = 7,
    HCCL_E_SYSCALL = 8,
    HCCL_E_TIMEOUT = 9,
    HCCL_E_OPEN_FILE_FAILURE = 10,
    HCCL_E_TCP_CONNECT = 11,
    HCCL_E_ROCE_CONNECT = 12,
    HCCL_E_TCP_TRANSFER = 13,
    HCCL_E_ROCE_TRANSFER = 14,
    HCCL_E_RUNTIME = 15,
    HCCL_E_DRV = 16,
    HCCL_E_PROFILING = 17,
    HCCL_E_CCE = 18,
    HCCL_E_NETWORK = 19,
    HCCL_E_AGAIN = 20,
    HCCL_E_REMOTE = 21,
    HCCL_E_SUSPENDING = 22,
    HCCL_E_OPRETRY_FAIL = 23,
    HCCL_E_OOM = 24,
    HCCL_E_IN_STATUS = 1041,
    HCCL_E_RESERVED                /* 1042 */
} HcclResult;

/* Communicator handle. */
typedef void *HcclComm;
/* Connection handle. */
typedef void *HcclConn;
/* Symmetric-memory window handle. */
typedef void *HcclCommSymWindow;

typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

/* Same numbering as HcommDataType; 13 is unused. */
typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3,
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,
    HCCL_DATA_TYPE_INT128 = 12,
    HCCL_DATA_TYPE_HIF8 = 14,
    HCCL_DATA_TYPE_FP8E4M3 = 15,
    HCCL_DATA_TYPE_FP8E5M2 = 16,
    HCCL_DATA_TYPE_FP8E8M0 = 17,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

typedef enum {
    HCCL_DETERMINISTIC = 0,
    HCCL_CONFIG_RESERVED
} HcclConfig;

union HcclConfigValue {
    int32_t value;
};
#ifndef __cplusplus
typedef union HcclConfigValue HcclConfigValue;
#endif

/* Size constants. In C++ they are typed constants as in CANN; in C the ones
 * used as array bounds must be integer constant expressions. */
#ifdef __cplusplus
const uint32_t HCCL_ROOT_INFO_BYTES = 4108;
const uint32_t COMM_NAME_MAX_LENGTH = 128;
const uint32_t BUFFER_NAME_MAX_LENGTH = 128;
const uint32_t UDI_MAX_LENGTH = 128;
const uint32_t HCCL_COMM_ALGO_MAX_LENGTH = 1600;
const uint32_t HCCL_COMM_RETRY_ENABLE_MAX_LENGTH = 50;
const uint32_t HCCL_COMM_RETRY_PARAMS_MAX_LENGTH = 128;
const uint32_t HCCL_COMM_CONFIG_INFO_BYTES = 24;
#else
enum {
    HCCL_ROOT_INFO_BYTES = 4108,
    COMM_NAME_MAX_LENGTH = 128,
    BUFFER_NAME_MAX_LENGTH = 128,
    UDI_MAX_LENGTH = 128,
    HCCL_COMM_ALGO_MAX_LENGTH = 1600,
    HCCL_COMM_RETRY_ENABLE_MAX_LENGTH = 50,
    HCCL_COMM_RETRY_PARAMS_MAX_LENGTH = 128,
    HCCL_COMM_CONFIG_INFO_BYTES = 24
};
#endif

static const uint32_t HCCL_COMM_CONFIG_MAGIC_WORD = 0xf0f0f0f0U;
static const uint32_t HCCL_COMM_CONFIG_VERSION = 10U;
static const uint32_t HCCL_COMM_DEFAULT_BUFFSIZE = 200U; /* MB */
static const uint32_t HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET = 0xffffffffU;
static const uint32_t HCCL_COMM_DEFAULT_DETERMINISTIC = 0U;
static const uint32_t HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET = 0xffffffffU;
static const uint32_t HCCL_COMM_DEFAULT_OP_EXPANSION_MODE = 0U;
static const uint32_t HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET = 0xffffffffU;
static const uint32_t HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET = 0xffffffffU;
static const int32_t HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET = -1; /* bit pattern 0xffffffff */
static const uint32_t HCCL_COMM_QOS_CONFIG_NOT_SET = 0xffffffffU;
static const uint64_t HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE = 16ULL;

/* Opaque root information produced by HcclGetRootInfo (4108 bytes). */
typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

/* Communicator configuration; initialise with HcclCommConfigInit (hccl_comm.h). */
typedef struct HcclCommConfigDef {
    char reserved[HCCL_COMM_CONFIG_INFO_BYTES]; /* size / magic / version header */
    uint32_t hcclBufferSize;                    /* MB */
    uint32_t hcclDeterministic;
    char hcclCommName[COMM_NAME_MAX_LENGTH];
    char hcclUdi[UDI_MAX_LENGTH];
    uint32_t hcclOpExpansionMode;
    uint32_t hcclRdmaTrafficClass;
    uint32_t hcclRdmaServiceLevel;
    uint32_t hcclWorldRankID;
    uint64_t hcclJobID;
    uint8_t aclGraphZeroCopyEnable;
    int32_t hcclExecTimeOut;
    char hcclAlgo[HCCL_COMM_ALGO_MAX_LENGTH];
    char hcclRetryEnable[HCCL_COMM_RETRY_ENABLE_MAX_LENGTH];
    char hcclRetryParams[HCCL_COMM_RETRY_PARAMS_MAX_LENGTH];
    char hcclBufferName[BUFFER_NAME_MAX_LENGTH];
    uint32_t hcclQos;
    uint64_t hcclSymWinMaxMemSizePerRank;
} HcclCommConfig;

typedef enum {
    HCCL_COMM_CONFIG_BUFFER_SIZE = 0,
    HCCL_COMM_CONFIG_DETERMINISTIC = 1,
    HCCL_COMM_CONFIG_COMM_NAME = 2,
    HCCL_COMM_CONFIG_OP_EXPANSION_MODE = 3,
    HCCL_COMM_CONFIG_SUPPORT_INIT_BY_ENV = 4,
    HCCL_COMM_CONFIG_WORLD_RANKID = 5,
    HCCL_COMM_CONFIG_JOBID = 6,
    HCCL_COMM_CONFIG_ACLGRAPH_ZEROCOPY_ENABLE = 7,
    HCCL_COMM_CONFIG_EXEC_TIMEOUT = 8,
    HCCL_COMM_CONFIG_ALGO = 9,
    HCCL_COMM_CONFIG_RETRY = 10,
    HCCL_COMM_CONFIG_BUFFER_NAME = 11,
    HCCL_COMM_CONFIG_RESERVED
} HcclCommConfigCapability;

typedef enum {
    HCCL_SEND = 0,
    HCCL_RECV = 1,
    HCCL_SEND_RECV_RESERVED
} HcclSendRecvType;

typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType;
    void *buf;
    uint64_t count;
    HcclDataType dataType;
    uint32_t remoteRank;
} HcclSendRecvItem;

/* Collective command types; unlisted values follow declaration order. */
typedef enum {
    HCCL_CMD_INVALID = 0,
    HCCL_CMD_BROADCAST = 1,
    HCCL_CMD_ALLREDUCE,          /* 2 */
    HCCL_CMD_REDUCE,             /* 3 */
    HCCL_CMD_SEND,               /* 4 */
    HCCL_CMD_RECEIVE,            /* 5 */
    HCCL_CMD_ALLGATHER,          /* 6 */
    HCCL_CMD_REDUCE_SCATTER,     /* 7 */
    HCCL_CMD_ALLTOALLV,          /* 8 */
    HCCL_CMD_ALLTOALLVC,         /* 9 */
    HCCL_CMD_ALLTOALL,           /* 10 */
    HCCL_CMD_GATHER,             /* 11 */
    HCCL_CMD_SCATTER,            /* 12 */
    HCCL_CMD_BATCH_SEND_RECV,    /* 13 */
    HCCL_CMD_BATCH_PUT,          /* 14 */
    HCCL_CMD_BATCH_GET,          /* 15 */
    HCCL_CMD_ALLGATHER_V,        /* 16 */
    HCCL_CMD_REDUCE_SCATTER_V,   /* 17 */
    HCCL_CMD_BATCH_WRITE,        /* 18 */
    HCCL_CMD_HALF_ALLTOALLV = 20,
    HCCL_CMD_ALL,                /* 21 */
    HCCL_CMD_FINALIZE = 100,
    HCCL_CMD_INTER_GROUP_SYNC,   /* 101 */
    HCCL_CMD_INIT,               /* 102 */
    HCCL_CMD_BARRIER,            /* 103 */
    HCCL_CMD_MAX                 /* 104 */
} HcclCMDType;

typedef enum {
    HCCL_COMM_STATUS_READY = 0,
    HCCL_COMM_STATUS_SUSPENDING = 1,
    HCCL_COMM_STATUS_INVALID = 254,
    HCCL_COMM_STATUS_RESERVED = 255
} HcclCommStatus;

#ifdef __cplusplus
}
#endif

#endif /* HCCL_TYPES_H_ */
