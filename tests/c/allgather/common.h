/* Host/kernel layout of the mesh AllGather test operator (one device thread per peer). */
#ifndef AG_COMMON_H
#define AG_COMMON_H
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

constexpr uint32_t MAX_RANKS = 8, NOTIFY_ACK = 0, NOTIFY_DATA = 1, CHANNEL_NOTIFIES = 2, TIMEOUT_S = 30;
typedef struct { void* addr; uint64_t size; } CommBuffer;
struct AlgResourceCtx {
    ThreadHandle threads[MAX_RANKS];       /* threads[0] main, threads[i] serves peer (rank + i) % n */
    ThreadHandle cpuThreadOnAicpu;
    ChannelHandle channels[MAX_RANKS];     /* by peer rank */
    CommBuffer remoteCcl[MAX_RANKS];       /* by peer rank */
    CommBuffer localCcl;
    uint32_t rank;
    uint32_t rankSize;
};
struct OpParam {
    char tag[160];
    char commName[128];
    void* inputPtr;
    void* outputPtr;
    uint64_t count;       /* float elements per rank */
    ThreadHandle cpuThread;
    ThreadHandle aicpuThreadOnCpu;
    AlgResourceCtx* resCtx;
};
#endif
