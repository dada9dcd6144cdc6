/* Host <-> kernel contract of the test operator (plain data, LP64). */
#ifndef HK_SHIFT_COMMON_H
#define HK_SHIFT_COMMON_H

#include <stdint.h>
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

constexpr uint32_t kShiftAck = 0;      /* channel slot: "staged for you" */
constexpr uint32_t kShiftData = 1;     /* channel slot: "read" */
constexpr uint32_t kShiftTimeout = 1836;

struct CommBuffer {
    void* addr;
    uint64_t size;
};

struct AlgResourceCtx {
    ThreadHandle aicpuThread;      /* main AICPU thread */
    ThreadHandle cpuThreadOnAicpu; /* the host stream thread, exported to the AICPU engine */
    CommBuffer localBuffer;        /* this rank's HCCL buffer */
    CommBuffer prevBuffer;         /* the HCCL buffer of rank - 1 */
    ChannelHandle prev;            /* channel to rank - 1 */
    ChannelHandle next;            /* channel to rank + 1 (== prev with 2 ranks) */
};

struct OpParam {
    char tag[160];
    char commName[128];
    void* inputPtr;
    void* outputPtr;
    uint64_t count;
    int32_t devType;
    int32_t dataType;
    uint32_t rank;
    uint32_t rankSize;
    ThreadHandle cpuThread;
    ThreadHandle aicpuThreadOnCpu;
    AlgResourceCtx* resCtx;
};

#endif
