/* Shared host/kernel layout of the data-plane test operator (tests/c/dataplane), CANN-example style.
 *
 * One kernel .so exposes one entry per scenario (Dp*); the host fills OpParam + AlgResourceCtx
 * (engine context) once per communicator and launches every scenario with the thread-notify
 * handshake (slot 0 of the main AICPU thread = "go", slot 0 of the host stream thread = "done"),
 * or the ACL-notify handshake (A2/A3). Kernels report return codes of the calls they make in
 * Results::gates (name, code) and observations in Results::flags; the host checks them against
 * its per-product expectations. HCCL-buffer offsets below are shared by both sides. */
#ifndef DATAPLANE_COMMON_H
#define DATAPLANE_COMMON_H
#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

constexpr uint32_t TAG_LENGTH = 160, COMM_ID_LENGTH = 128;
constexpr uint32_t DP_MAX_RANKS = 8, DP_MAX_THREADS = 8;
constexpr uint32_t DP_THREAD_SLOTS = 9;   /* slot 0: go (main thread); 1..7: fan-in/fan-out; 2,3: semantics tests */
constexpr uint32_t DP_CHANNEL_SLOTS = 4;  /* per channel end */
constexpr uint32_t DP_WAIT_TIMEOUT = 60;  /* s, kernel waits that must succeed */
enum DeviceType { DEVICE_TYPE_A2 = 0, DEVICE_TYPE_A3 = 1, DEVICE_TYPE_A5 = 2 };

typedef struct { void* addr; uint64_t size; } CommBuffer;
typedef struct { uint32_t remoteRank; uint32_t notifyNum; ChannelHandle handle; CommBuffer remoteBuffer; } ChannelInfo;

struct AlgResourceCtx {
    ThreadHandle aicpuThread;       /* == threads[0] */
    ThreadHandle cpuThreadOnAicpu;  /* host stream thread exported to AICPU_TS ("done") */
    uint32_t notifyIds[3];          /* ACL notifies (A2/A3): [0] go, [1] done, [2] spare for gate checks */
    uint32_t rank, rankSize, threadNum;
    CommBuffer localBuffer;
    ThreadHandle threads[DP_MAX_THREADS];
    ChannelInfo channels[DP_MAX_RANKS];  /* main protocol (HCCS on A2/A3, UB_CTP on 950), by peer rank */
    ChannelInfo roce[DP_MAX_RANKS];      /* RoCE channels, by peer rank */
};

struct GateRec { char name[56]; int32_t code; int32_t pad; };
constexpr uint32_t DP_MAX_GATES = 128;
constexpr uint32_t DP_NDT = 19, DP_NOP = 6;  /* reduction matrix: dtype / op values tried */
static const int32_t DP_DTYPES[DP_NDT] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 255};
static const int32_t DP_OPS[DP_NOP] = {0, 1, 2, 3, 4, 255};
struct Results {
    uint32_t ngates;
    int32_t flags[31];
    GateRec gates[DP_MAX_GATES];
    int32_t rcodes[3][DP_NDT][DP_NOP];  /* [local, write-reduce, read-reduce][dtype][op] */
};

struct OpParam {
    char tag[TAG_LENGTH];
    char commName[COMM_ID_LENGTH];
    void* inputPtr;    /* DP_LOCAL_BYTES each: in, in2, out, scratch */
    void* input2Ptr;
    void* outputPtr;
    void* scratchPtr;
    Results* results;  /* device memory */
    int32_t devType;
    uint32_t aclHandshake; /* 1: HcommAclrtNotify* handshake on notifyIds[0]/[1] */
    uint32_t pollChecks;   /* 1: the kernel may poll memory written by device threads (off under TSan) */
    uint32_t noHandshake;  /* 1: no go/done notifies (a kernel that fails on purpose: no done to wait for,
                              and an unconsumed go would merge with the next op's go) */
    ThreadHandle cpuThread;
    ThreadHandle aicpuThreadOnCpu;
    AlgResourceCtx* resCtx;
};

/* Local buffers and shared sizes. */
constexpr uint64_t DP_LOCAL_BYTES = 1u << 20;
constexpr uint64_t SEG = 8192;          /* per-rank slot in an HCCL-buffer region */
constexpr uint64_t LEN = 8191;          /* bytes moved by copies/writes/reads (odd on purpose) */
constexpr uint64_t LOCAL_LEN = 65539;   /* DpLocal copy length */
constexpr uint64_t RCOUNT = 1100;       /* elements per reduction-matrix combo (> one 1024 block) */
constexpr uint64_t RSTRIDE = RCOUNT * 8;
constexpr uint64_t XCOUNT = 1000;       /* elements of the typed transfers in DpWrite / DpXfer */

/* HCCL-buffer regions (bytes from the buffer start). */
constexpr uint64_t W_OFF = 0, WN_OFF = 64u << 10, RD_OFF = 128u << 10, WRN_OFF = 192u << 10, RDR_OFF = 256u << 10;
constexpr uint64_t WR_OFF = 320u << 10, RR_OFF = 768u << 10;          /* reduction matrix, 48 combos each */
constexpr uint64_t NB_OFF = 1280u << 10, BO_OFF = 1344u << 10, GATE_OFF = 1408u << 10;
constexpr uint64_t BT_OFF = 2048u << 10, BTR_OFF = BT_OFF + (64u << 10), BTWR_OFF = BT_OFF + (128u << 10),
                   BTRR_OFF = BT_OFF + (192u << 10), BTWN_OFF = BT_OFF + (256u << 10),
                   BTWRN_OFF = BT_OFF + (320u << 10), FENCE_OFF = BT_OFF + (384u << 10);
/* Offsets inside the local out/scratch buffers. */
constexpr uint64_t OUT2_OFF = 256u << 10, OUT3_OFF = 512u << 10, EAGER_OFF = 768u << 10, TMP_OFF = 832u << 10;

static_assert(sizeof(ChannelInfo) == 32, "ChannelInfo layout");
#endif
