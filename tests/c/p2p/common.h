/* Shared host/kernel layout of the P2P test operator, written the way CANN's p2p example is. */
#ifndef P2P_COMMON_H
#define P2P_COMMON_H
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

constexpr uint32_t TAG_LENGTH = 160, COMM_ID_LENGTH = 128;
constexpr uint32_t NOTIFY_IDX_ACK = 0, NOTIFY_IDX_DATA_SIGNAL = 1;
constexpr uint32_t CUSTOM_TIMEOUT = 30;
enum DeviceType { DEVICE_TYPE_A2 = 0, DEVICE_TYPE_A3 = 1, DEVICE_TYPE_A5 = 2 };
typedef struct { void* addr; uint64_t size; } CommBuffer;
struct AlgResourceCtx {
    ThreadHandle aicpuThread;
    ThreadHandle cpuThreadOnAicpu;
    CommBuffer localBuffer;
    CommBuffer remoteBuffer;
    ChannelHandle channelHandle;
};
struct OpParam {
    char tag[TAG_LENGTH];
    char commName[COMM_ID_LENGTH];
    void* inputPtr;
    void* outputPtr;
    uint64_t count;
    DeviceType devType;
    HcclDataType dataType;
    HcclCMDType opType;
    ThreadHandle cpuThread;
    ThreadHandle aicpuThreadOnCpu;
    AlgResourceCtx* resCtx;
};
static_assert(sizeof(OpParam) == 352, "OpParam layout");
static_assert(sizeof(AlgResourceCtx) == 56, "AlgResourceCtx layout");
#endif
