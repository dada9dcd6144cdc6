/* Shared host/kernel layout of the diagnosis test operator (tests/c/diag): a small mesh exchange,
 * written like CANN's examples, with one entry per planted bug. Every rank's block of BLOCK bytes
 * goes to slot `rank` of every peer's HCCL buffer (write with notify), then each rank copies the
 * n slots to its output and the ranks acknowledge each other (clean exit). */
#ifndef DIAG_COMMON_H
#define DIAG_COMMON_H
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

constexpr uint32_t MAX_RANKS = 8;
constexpr uint64_t BLOCK = 256;          /* bytes per rank */
constexpr uint32_t DATA = 0, ACK = 1;    /* channel notify slots */
constexpr uint32_t WAIT_TIMEOUT = 0;     /* kernel waits: no limit (HCCL_EXEC_TIMEOUT is the host's) */

typedef struct { void* addr; uint64_t size; } CommBuffer;
typedef struct { uint32_t remoteRank; uint32_t notifyNum; ChannelHandle handle; CommBuffer remoteBuffer; } ChannelInfo;

struct AlgResourceCtx {
    ThreadHandle aicpuThread;       /* == threads[0] */
    ThreadHandle cpuThreadOnAicpu;  /* host stream thread exported to AICPU_TS ("done") */
    uint32_t rank, rankSize;
    CommBuffer localBuffer;
    ThreadHandle threads[2];        /* [1]: a worker for the thread-notify scenario */
    ChannelInfo channels[MAX_RANKS];
};

struct OpParam {
    char tag[160];
    char commName[128];
    void* inputPtr;   /* BLOCK bytes */
    void* outputPtr;  /* MAX_RANKS * BLOCK bytes */
    int32_t bugRank;  /* the rank that carries the planted bug (-1: none) */
    uint32_t pad;
    AlgResourceCtx* resCtx;
};
#endif
