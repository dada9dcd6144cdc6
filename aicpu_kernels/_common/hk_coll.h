/*
 * hk_coll.h -- the algorithms of hcomm-kit's built-in collective operators (aicpu_kernels/) and
 * the blocks they are made of.
 *
 * Each operator directory links this file as inc/hk_coll.h and includes it from exec_op.cc AFTER
 * its own headers (OpParam, AlgResourceCtx, OP_CHECK and OP_LOG_ERROR come from there).
 *
 * The built-ins run the algorithms CANN's AICPU selector picks (hicann/hccl
 * src/ops/<op>/selector/<op>_auto_selector.cc, SelectAicpuAlgo / SelectMeshAlgoAicpu) on the shapes the
 * emulator offers: one server (level 0 a full mesh, MESH_1D), several servers (level 1 CLOS over
 * RoCE, or UB inside a super-pod), and several super-pods (level 2). Their task structure follows
 * CANN's executors and templates (src/ops/<op>/executor/, template/aicpu/): which device threads
 * work, which transfers run at once, how a message is sliced (by the HCCL buffer, as CANN's
 * executors loop over the CCL buffer) and how the levels compose. The code is our own.
 *
 * Algorithm table: OpParam.algo = the id; the name is CANN's (<Engine><Op><Executor><Template>).
 * hcomm_kit/ops/algorithms.py (ALGORITHMS) mirrors it; tests/test_collectives.py checks the two.
 *   collective       CANN name                                    id
 *   allreduce        AicpuAllReduceSoleMeshOneShot                HK_ALGO_MESH_ONE_SHOT
 *   allreduce        AicpuAllReduceSoleMeshTwoShot                HK_ALGO_MESH_TWO_SHOT
 *   allreduce        AicpuAllReduceSoleMeshChunkTwoShot           HK_ALGO_MESH_CHUNK
 *   allreduce        AicpuAllReduceSoleNHR                        HK_ALGO_NHR
 *   allreduce        AicpuAllReduceSoleNHRAicpuReduce             HK_ALGO_NHR_AICPU_REDUCE
 *   allreduce        AicpuAllReduceParallelMeshNHR                HK_ALGO_PARALLEL_MESH_NHR
 *   allreduce        AicpuAllReduceSequenceMeshConcurNHR          HK_ALGO_SEQUENCE_MESH_NHR
 *   allreduce        AicpuAllReduceSequenceMeshConcurNHRNHR       HK_ALGO_SEQUENCE_MESH_NHR_NHR
 *   allgather        AicpuAllGatherSoleMesh                       HK_ALGO_MESH
 *   allgather        AicpuAllGatherSoleNHR                        HK_ALGO_NHR
 *   allgather        AicpuAllGatherParallelMeshNHR                HK_ALGO_PARALLEL_MESH_NHR
 *   allgather        AicpuAllGatherSequenceMeshConcurNHR          HK_ALGO_SEQUENCE_MESH_NHR
 *   allgather        AicpuAllGatherSequenceMeshConcurNHRNHR       HK_ALGO_SEQUENCE_MESH_NHR_NHR
 *   reduce_scatter   AicpuReduceScatterSoleMesh                   HK_ALGO_MESH
 *   reduce_scatter   AicpuReduceScatterSoleMeshChunk              HK_ALGO_MESH_CHUNK
 *   reduce_scatter   AicpuReduceScatterSoleNHR                    HK_ALGO_NHR
 *   reduce_scatter   AicpuReduceScatterSoleNHRAicpuReduce         HK_ALGO_NHR_AICPU_REDUCE
 *   reduce_scatter   AicpuReduceScatterParallelMeshNHR            HK_ALGO_PARALLEL_MESH_NHR
 *   reduce_scatter   AicpuReduceScatterSequenceMeshConcurNHR      HK_ALGO_SEQUENCE_MESH_NHR
 *   reduce_scatter   AicpuReduceScatterSequenceMeshConcurNHRNHR   HK_ALGO_SEQUENCE_MESH_NHR_NHR
 *   broadcast        AicpuBroadcastSoleMeshTwoShot                HK_ALGO_MESH_TWO_SHOT
 *   broadcast        AicpuBroadcastSoleNHR                        HK_ALGO_NHR
 *   broadcast        AicpuBroadcastParallelMeshNHR                HK_ALGO_PARALLEL_MESH_NHR
 *   broadcast        AicpuBroadcastSequenceMesh1dNHR              HK_ALGO_SEQUENCE_MESH_NHR
 *   broadcast        AicpuBroadcastSequenceMesh1dNHRNHR           HK_ALGO_SEQUENCE_MESH_NHR_NHR
 *   reduce           AicpuReduceSoleMesh                          HK_ALGO_MESH
 *   reduce           AicpuReduceSoleMeshTwoShot                   HK_ALGO_MESH_TWO_SHOT
 *   reduce           AicpuReduceSoleNHR                           HK_ALGO_NHR
 *   reduce           AicpuReduceSoleNHRAicpuReduce                HK_ALGO_NHR_AICPU_REDUCE
 *   reduce           AicpuReduceParallelMeshNHR                   HK_ALGO_PARALLEL_MESH_NHR
 *   reduce           AicpuReduceSequenceMesh1DNHR                 HK_ALGO_SEQUENCE_MESH_NHR
 *   reduce           AicpuReduceSequenceMesh1DNHRNHR              HK_ALGO_SEQUENCE_MESH_NHR_NHR
 *   scatter          AicpuScatterSoleMesh                         HK_ALGO_MESH
 *   scatter          AicpuScatterSoleNHR                          HK_ALGO_NHR
 *   scatter          AicpuScatterParallelMeshNHR                  HK_ALGO_PARALLEL_MESH_NHR
 *   scatter          AicpuScatterSequenceMeshConcurNHR            HK_ALGO_SEQUENCE_MESH_NHR
 *   scatter          AicpuScatterSequenceMeshConcurNHRNHR         HK_ALGO_SEQUENCE_MESH_NHR_NHR
 *   alltoall         AicpuAllToAllSoleMesh                        HK_ALGO_MESH
 *   alltoallv        AicpuAllToAllVSoleMesh                       HK_ALGO_MESH
 *   barrier          AicpuBarrierSoleNHR                          HK_ALGO_NHR
 * (gather has no CANN counterpart: hcomm-kit's own mesh, "mesh" = HK_ALGO_MESH; send_recv and
 * batch_send_recv have no algorithm to choose.) What each algorithm does, its threads and its
 * slicing: the comment above its code in aicpu_kernels/<collective>/op_kernel_aicpu/exec_op.cc (the
 * blocks they are built from: below). CANN's selectors choose among them per shape: the table of
 * docs/pending/builtins.md.
 *
 * Conventions every built-in follows (so that they can share channels, notify slots and the
 * HCCL buffer of a communicator with each other and with users' operators):
 *  - channel notify slots: only HK_ACK (0) and HK_DATA (1) are used (op.toml channels.notifies = 2),
 *    under the "notify discipline across calls" below;
 *  - clean exit: when an operator records "done", no peer will touch this rank's HCCL buffer for
 *    this call any more (every remote read of my buffer is acknowledged, every remote write into a
 *    peer's buffer is made only after that peer said it is ready). The next call may therefore
 *    overwrite its own buffer right away;
 *  - device threads: threads[0] is the main thread; a group of threads (a lead and its workers)
 *    is started by HkFork and joined by HkJoin, below (thread slots: HK_SLOT_START, the join lanes
 *    HK_SLOT_LANE.., HK_SLOT_CHAIN; op.toml notifies_per_thread = HK_THREAD_SLOTS);
 *  - results are deterministic: a reduction always combines contributions in the same order for a
 *    given (count, rank count, algorithm, HCCL buffer size), and every rank ends with the same bits
 *    (each element of an allreduce's result is computed by one rank, or by every rank in the same
 *    order).
 */
#ifndef HCOMM_KIT_AICPU_KERNELS_HK_COLL_H
#define HCOMM_KIT_AICPU_KERNELS_HK_COLL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmath>

#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

/* ---- algorithm ids (OpParam.algo; the table above) ----------------------------------------- */
#define HK_ALGO_AUTO 0u                   /* the kernel chooses (HkAuto* of each collective) */
#define HK_ALGO_MESH 1u                   /* <Op>SoleMesh */
#define HK_ALGO_MESH_ONE_SHOT 2u          /* AllReduceSoleMeshOneShot */
#define HK_ALGO_MESH_TWO_SHOT 3u          /* <Op>SoleMeshTwoShot */
#define HK_ALGO_MESH_CHUNK 4u             /* AllReduceSoleMeshChunkTwoShot, ReduceScatterSoleMeshChunk */
#define HK_ALGO_NHR 5u                    /* <Op>SoleNHR */
#define HK_ALGO_NHR_AICPU_REDUCE 6u       /* <Op>SoleNHRAicpuReduce */
#define HK_ALGO_PARALLEL_MESH_NHR 7u      /* <Op>ParallelMeshNHR (two levels) */
#define HK_ALGO_SEQUENCE_MESH_NHR 8u      /* <Op>SequenceMeshConcurNHR, <Op>SequenceMesh1dNHR (two levels) */
#define HK_ALGO_SEQUENCE_MESH_NHR_NHR 9u  /* <Op>SequenceMeshConcurNHRNHR, <Op>SequenceMesh1dNHRNHR (three levels) */

/* ---- channel and thread notify slots -------------------------------------------------------- */
#define HK_ACK 0u              /* channel, the "initiative" slot: e.g. "my slice is staged" / "you may write" */
#define HK_DATA 1u             /* channel, the "response" slot: e.g. "I have read it" (rules further down) */
#define HK_SLOT_START 1u       /* thread: lead -> worker "start" */
#define HK_SLOT_FINISH 2u      /* thread: worker -> previous thread "finished" (HkFanIn's reverse chain) */
#define HK_SLOT_LANE 2u        /* thread: worker j -> its lead "finished", slot HK_SLOT_LANE + j % HK_LANES */
#define HK_LANES 16u
#define HK_SLOT_CHAIN (HK_SLOT_LANE + HK_LANES) /* thread: worker j + HK_LANES -> worker j "finished" */
#define HK_THREAD_SLOTS HK_SLOT_CHAIN           /* op.toml resources.notifies_per_thread */

/* Slices are aligned to 128 bytes (a multiple of every element size; CANN's HCCL_MIN_SLICE_ALIGN).
 * HCCL_BUFFSIZE is job-wide, so every rank computes the same slices. */
#define HK_SLICE_ALIGN_BYTES 128ull
#define HK_MAX_SLICE_BYTES (256ull * 1024 * 1024)
#define HK_MAX_RANKS 64u

static inline uint64_t HkMin(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* Largest slice (bytes) that fits in `bufferBytes`, aligned. */
static inline uint64_t HkSliceBytes(uint64_t bufferBytes)
{
    return HkMin(bufferBytes, HK_MAX_SLICE_BYTES) / HK_SLICE_ALIGN_BYTES * HK_SLICE_ALIGN_BYTES;
}

/* Chunk `index` of `total` elements cut into `chunks` nearly equal parts: the first total % chunks
 * chunks get one element more (counts need not divide evenly). */
static inline void HkChunkRange(uint64_t total, uint32_t chunks, uint32_t index, uint64_t *first, uint64_t *count)
{
    const uint64_t base = total / chunks;
    const uint64_t extra = total % chunks;
    *count = base + (index < extra ? 1 : 0);
    *first = index * base + (index < extra ? index : extra);
}

/* Element size of OpParam.dataType, or 0 with an error logged. */
static inline uint32_t HkUnitSize(const OpParam &param)
{
    const uint32_t unit = OpDataTypeSize(param.dataType);
    if (unit == 0) {
        OP_LOG_ERROR("unsupported dataType %d, tag %s", static_cast<int>(param.dataType), param.tag);
    }
    return unit;
}

/* OpParam.root must name a rank of the communicator (rooted collectives). */
static inline HcclResult HkRootCheck(const OpParam &param, const AlgResourceCtx &resCtx)
{
    if (param.root >= resCtx.rankSize) {
        OP_LOG_ERROR("root %u out of range (%u ranks), tag %s", param.root, resCtx.rankSize, param.tag);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* The channel to `peer` of a mesh/peer-topology operator, or 0 with an error logged. */
static inline ChannelHandle HkChannel(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t peer)
{
    const ChannelHandle h = (peer < resCtx.rankSize && peer != resCtx.rank) ? resCtx.channels[peer].handle : 0;
    if (h == 0) {
        OP_LOG_ERROR("no channel to rank %u (rank %u/%u), tag %s", peer, resCtx.rank, resCtx.rankSize, param.tag);
    }
    return h;
}

/* Propagate the result of a helper that logged its own failure (OP_CHECK would log it again). */
#define HK_TRY(call)                      \
    do {                                  \
        const HcclResult hkRet_ = (call); \
        if (hkRet_ != HCCL_SUCCESS) {     \
            return hkRet_;                \
        }                                 \
    } while (0)

/* Local copy that skips empty and self copies. */
static inline HcclResult HkCopy(const OpParam &param, ThreadHandle thread, void *dst, const void *src, uint64_t bytes)
{
    if (bytes != 0 && dst != src) {
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, dst, src, bytes));
    }
    return HCCL_SUCCESS;
}

/* ---- notify discipline across calls (added with broadcast/reduce/scatter/gather/barrier) ------
 * Channel slots are binary and shared by every built-in of a communicator, and a rank may enter
 * its next call while a peer is still finishing this one. A record made at the start of call k+1
 * must never land on a slot whose record from call k the peer has not consumed yet (the two would
 * merge and the peer would hang in call k+1). Every built-in therefore keeps two rules:
 *  - HK_ACK is the "initiative" slot: it may be recorded to P without having heard from P in this
 *    call, but every ACK recorded to P is known to be consumed before the recorder exits (P sends
 *    something back after its wait of that ACK, and the recorder waits for it);
 *  - HK_DATA is the "response" slot: it is recorded to P only after having waited, in this call,
 *    for a signal P recorded after its last wait of our DATA (so P has left its previous call),
 *    and it may still be pending when the recorder exits.
 * (The ring/mesh/p2p patterns of templates/ and CANN's send/recv example keep both rules.) The
 * exchanges below (HkPush, HkPull, HkPushOnly/HkPushRecv, HkPullOnly/HkPullServe) keep them for
 * any sequence of exchanges between a pair, in any order of steps, as long as both ends make the
 * same sequence of exchanges with each other (every exchange is paired with its mirror image).
 */
/* ---- reductions the Hcomm primitive cannot do (added for CANN's per-API dtype/op table) ------
 * CANN's HcclAllReduce / HcclReduce / HcclReduceScatter reduce int64 (all ops) and prod (int8,
 * int32, fp16, fp32, int64) on A2/A3 too, but HcommLocalReduceOnThread / ReadReduce / WriteReduce
 * refuse them there (hcomm.md §3.1: A2/A3 int8/int16/int32/fp16/fp32/bf16 x sum/max/min). For
 * those the built-ins stage the operand in local device memory with plain copies / reads and
 * combine it in their own code (an element loop on the AICPU), after everything enqueued so far
 * has run: HkDrain closes the batch, waits until a token copied last on the thread lands (a
 * memory flag, bounded by OpParam.notifyTimeout) and opens the batch again. Notify protocols stay
 * as they are; only the reduce tasks become copy + drain + loop (slower, as CANN's pages say of
 * int64 on A2). Results follow the emulator's reduce semantics: integers wrap modulo 2^n, fp16
 * products are rounded once to fp16 (round to nearest even), combined in the same order. */
#define HK_SYNC_BYTES HK_SLICE_ALIGN_BYTES  /* tail of the own HCCL buffer holding the drain words */
#define HK_SYNC_FLAGS (HK_SYNC_BYTES / 8 - 1)  /* flag words in turn; the last word counts the drains */

/* True when the Hcomm reduce primitives take (dataType, reduceOp) on this product. */
static inline bool HkPrimitiveReduces(const OpParam &param)
{
    if (param.devType == 2) {  // Ascend950: every dtype and op
        return true;
    }
    const int32_t dt = static_cast<int32_t>(param.dataType);
    const bool dtOk = dt == HCOMM_DATA_TYPE_INT8 || dt == HCOMM_DATA_TYPE_INT16 || dt == HCOMM_DATA_TYPE_INT32 ||
                      dt == HCOMM_DATA_TYPE_FP16 || dt == HCOMM_DATA_TYPE_FP32 || dt == HCOMM_DATA_TYPE_BFP16;
    return dtOk && static_cast<int32_t>(param.reduceOp) != HCOMM_REDUCE_PROD;
}

/* Everything enqueued on `thread` so far has run (see above). `sync`: HK_SYNC_BYTES of the thread's
 * own HCCL buffer that nobody else touches in this call (its tail); the token copied into it is
 * AlgResourceCtx.localBuffer.addr of the device copy of the context (non-zero device memory that
 * the kernel only reads), so every byte a task reads was written before. */
__attribute__((no_sanitize("thread"))) static inline HcclResult HkDrain(const OpParam &param,
                                                                        const AlgResourceCtx &resCtx,
                                                                        ThreadHandle thread, uint8_t *sync)
{
    // A flag word of its own per drain (words 0..HK_SYNC_FLAGS-1 in turn; the last word counts the
    // drains, kernel-private), so a drain ends only on its own token copy, which the thread runs
    // after every earlier task. A copy may store its bytes more than once (glibc's memmove of 8
    // bytes stores the first and the last 8, the same word twice; a DMA engine may split too):
    // with one word for all drains, the copy's second store could land after the next drain had
    // reset the word, which then ended before its thread's Read ran, and the kernel combined stale
    // scratch data (8 loaded ranks: a slice silently missed one rank's contribution).
    uint64_t *const words = reinterpret_cast<uint64_t *>(sync);
    const uint64_t drainNo = words[HK_SYNC_FLAGS] + 1;
    words[HK_SYNC_FLAGS] = drainNo;
    uint64_t *const flag = words + drainNo % HK_SYNC_FLAGS;
    const void *const tokenSrc = &resCtx.localBuffer.addr;
    uint64_t token;
    memcpy(&token, tokenSrc, sizeof token);
    __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
    OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, flag, tokenSrc, sizeof token));
    OP_CHECK(param.tag, HcommBatchModeEnd(param.tag));
    OP_CHECK(param.tag, HcommBatchModeStart(param.tag));  // nothing is recorded while we wait
    const uint64_t limitS = param.notifyTimeout != 0 ? param.notifyTimeout : 1836;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (uint32_t spin = 0; __atomic_load_n(flag, __ATOMIC_ACQUIRE) != token; ++spin) {
        if (spin < 64) {
            continue;
        }
        if (spin % 64 == 0) {  // every ~1.3 ms: a communicator that failed meanwhile dropped the
            // tasks, so the flag never comes; reopening the batch then fails, naming why
            OP_CHECK(param.tag, HcommBatchModeEnd(param.tag));
            OP_CHECK(param.tag, HcommBatchModeStart(param.tag));
        }
        struct timespec nap = {0, 20000};
        nanosleep(&nap, nullptr);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (static_cast<uint64_t>(now.tv_sec - start.tv_sec) > limitS) {
            OP_LOG_ERROR("the thread's tasks did not finish within %llu s (staged reduction), tag %s",
                         static_cast<unsigned long long>(limitS), param.tag);
            return HCCL_E_TIMEOUT;
        }
    }
    return HCCL_SUCCESS;
}

static inline float HkHalfToFloat(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {  // zero or subnormal: man * 2^-24
        const float f = static_cast<float>(man) * 0x1.0p-24f;
        memcpy(&bits, &f, sizeof bits);
        bits |= sign;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t HkFloatToHalf(float f)  // round to nearest even; NaN -> quiet NaN, sign kept
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) {  // at least halfway between 65504 and 65536: inf
        return sign | 0x7c00u;
    }
    if (a < 0x38800000u) {  // below 2^-14: subnormal, units of 2^-24
        float v;
        memcpy(&v, &a, sizeof v);
        return sign | static_cast<uint16_t>(std::nearbyint(v * 0x1.0p24f));
    }
    uint32_t h = (((a >> 23) - 112u) << 10) | ((a & 0x7fffffu) >> 13);
    const uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0)) {
        ++h;  // may carry into the exponent (correct: the next binade / inf)
    }
    return sign | static_cast<uint16_t>(h);
}

static inline float HkBf16ToFloat(uint16_t h)
{
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t HkFloatToBf16(float f)  // round to nearest even; NaN -> quiet NaN, sign kept
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return static_cast<uint16_t>((x >> 16) | 0x0040u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return static_cast<uint16_t>(x >> 16);
}

/* Integer arithmetic in an unsigned type at least as wide as int: wraps modulo 2^n (as numpy). */
template <class T> struct HkUnsigned { typedef uint32_t Type; };
template <> struct HkUnsigned<int64_t> { typedef uint64_t Type; };
template <> struct HkUnsigned<uint64_t> { typedef uint64_t Type; };

template <class T>
__attribute__((no_sanitize("thread"))) static inline void HkLoopInt(void *dst, const void *src, uint64_t count,
                                                                     int32_t op)
{
    typedef typename HkUnsigned<T>::Type U;
    T *d = static_cast<T *>(dst);
    const T *s = static_cast<const T *>(src);
    for (uint64_t i = 0; i < count; ++i) {
        const T a = d[i];
        const T b = s[i];
        switch (op) {
            case HCOMM_REDUCE_SUM: d[i] = static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); break;
            case HCOMM_REDUCE_PROD: d[i] = static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); break;
            case HCOMM_REDUCE_MAX: d[i] = a < b ? b : a; break;
            default: d[i] = b < a ? b : a; break;
        }
    }
}

/* Max / min of floats as the emulator's reduce (reduce.h): NaN wins (either operand NaN -> NaN). */
template <class F>
__attribute__((no_sanitize("thread"))) static inline F HkFloatOp(F a, F b, int32_t op)
{
    switch (op) {
        case HCOMM_REDUCE_SUM: return a + b;
        case HCOMM_REDUCE_PROD: return a * b;
        case HCOMM_REDUCE_MAX: return (a != a || b != b) ? (a != a ? a : b) : (a < b ? b : a);
        default: return (a != a || b != b) ? (a != a ? a : b) : (b < a ? b : a);
    }
}

template <class F>
__attribute__((no_sanitize("thread"))) static inline void HkLoopFloat(void *dst, const void *src, uint64_t count,
                                                                       int32_t op)
{
    F *d = static_cast<F *>(dst);
    const F *s = static_cast<const F *>(src);
    for (uint64_t i = 0; i < count; ++i) {
        d[i] = HkFloatOp<F>(d[i], s[i], op);
    }
}

/* fp16 / bf16: widened to float, combined, rounded back to nearest-even (as the emulator's reduce). */
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
__attribute__((no_sanitize("thread"))) static inline void HkLoopHalf(void *dst, const void *src, uint64_t count,
                                                                      int32_t op)
{
    uint16_t *d = static_cast<uint16_t *>(dst);
    const uint16_t *s = static_cast<const uint16_t *>(src);
    for (uint64_t i = 0; i < count; ++i) {
        d[i] = Narrow(HkFloatOp<float>(Widen(d[i]), Widen(s[i]), op));
    }
}

/* dst[i] = dst[i] op src[i] in the kernel's own code (local memory; call HkDrain first). */
__attribute__((no_sanitize("thread"))) static inline HcclResult HkLoopReduce(const OpParam &param, void *dst,
                                                                            const void *src, uint64_t count)
{
    const int32_t op = static_cast<int32_t>(param.reduceOp);
    switch (static_cast<int32_t>(param.dataType)) {
        case HCOMM_DATA_TYPE_INT8: HkLoopInt<int8_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_INT16: HkLoopInt<int16_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_INT32: HkLoopInt<int32_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_INT64: HkLoopInt<int64_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_UINT8: HkLoopInt<uint8_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_UINT16: HkLoopInt<uint16_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_UINT32: HkLoopInt<uint32_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_UINT64: HkLoopInt<uint64_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_FP32: HkLoopFloat<float>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_FP64: HkLoopFloat<double>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_FP16: HkLoopHalf<HkHalfToFloat, HkFloatToHalf>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_BFP16: HkLoopHalf<HkBf16ToFloat, HkFloatToBf16>(dst, src, count, op); return HCCL_SUCCESS;
        default:
            OP_LOG_ERROR("dataType %d with reduce op %d is neither a Hcomm reduction on this product nor one "
                         "the kernel computes, tag %s", static_cast<int>(param.dataType), static_cast<int>(op),
                         param.tag);
            return HCCL_E_NOT_SUPPORT;
    }
}

/* HcommLocalReduceOnThread, or (primitive cannot) drain + loop. */
static inline HcclResult HkLocalReduce(const OpParam &param, const AlgResourceCtx &resCtx, ThreadHandle thread,
                                       uint8_t *sync, void *dst, const void *src, uint64_t count)
{
    if (HkPrimitiveReduces(param)) {
        OP_CHECK(param.tag, HcommLocalReduceOnThread(thread, dst, src, count,
                                                     static_cast<HcommDataType>(param.dataType),
                                                     static_cast<HcommReduceOp>(param.reduceOp)));
        return HCCL_SUCCESS;
    }
    const HcclResult rc = HkDrain(param, resCtx, thread, sync);
    return rc != HCCL_SUCCESS ? rc : HkLoopReduce(param, dst, src, count);
}

/* HcommReadReduceOnThread, or (primitive cannot) Read into `scratch` (own local memory of
 * count elements), drain, loop. */
static inline HcclResult HkReadReduce(const OpParam &param, const AlgResourceCtx &resCtx, ThreadHandle thread,
                                      ChannelHandle ch, void *dst, const void *src, uint64_t count, uint32_t unit,
                                      uint8_t *scratch, uint8_t *sync)
{
    if (HkPrimitiveReduces(param)) {
        OP_CHECK(param.tag, HcommReadReduceOnThread(thread, ch, dst, src, count,
                                                    static_cast<HcommDataType>(param.dataType),
                                                    static_cast<HcommReduceOp>(param.reduceOp)));
        return HCCL_SUCCESS;
    }
    OP_CHECK(param.tag, HcommReadOnThread(thread, ch, scratch, src, count * unit));
    const HcclResult rc = HkDrain(param, resCtx, thread, sync);
    return rc != HCCL_SUCCESS ? rc : HkLoopReduce(param, dst, scratch, count);
}

/* ---- a call: its context, resources and checks ----------------------------------------------- */
struct HkCall {
    const OpParam &param;
    const AlgResourceCtx &res;
    const char *name;  /* the algorithm's CANN name, for messages */
    uint32_t unit;     /* element bytes */
    bool prim;         /* the Hcomm reduce primitives take (dataType, reduceOp) on this product */
    uint8_t *buf;      /* my HCCL buffer */
    uint64_t bufBytes; /* usable: the smallest HCCL buffer of the ranks the algorithm talks to, less the drain words */
    uint8_t *sync;     /* HK_SYNC_BYTES of drain words (staged reductions), else null */

    ThreadHandle Th(uint32_t i) const { return res.threads[i]; }
    ChannelHandle Ch(uint32_t peer) const { return res.channels[peer].handle; }
    uint8_t *Remote(uint32_t peer) const { return static_cast<uint8_t *>(res.channels[peer].remoteBuffer.addr); }
    HcommDataType Dt() const { return static_cast<HcommDataType>(param.dataType); }
    HcommReduceOp Op() const { return static_cast<HcommReduceOp>(param.reduceOp); }
};

/* Starts a call of algorithm `name` that uses `threads` device threads: the element size, my
 * HCCL buffer, the reduce path. HCCL_E_PARA with an error logged when the dtype has no size or the
 * operator has fewer threads. */
static inline HcclResult HkCallInit(HkCall *c, const char *name, uint32_t threads)
{
    c->name = name;
    c->unit = HkUnitSize(c->param);
    if (c->unit == 0) {
        return HCCL_E_PARA;
    }
    c->prim = HkPrimitiveReduces(c->param);
    c->buf = static_cast<uint8_t *>(c->res.localBuffer.addr);
    c->bufBytes = c->res.localBuffer.size;
    c->sync = nullptr;
    if (c->res.threadNum < threads) {
        OP_LOG_ERROR("%s needs %u device threads, the operator has %u, tag %s", name, threads, c->res.threadNum,
                     c->param.tag);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* The algorithm talks to `peer` (a rank; itself is ignored): it needs a channel to it (a downed
 * link gives none: the algorithm cannot run on this communicator) and only the smaller of the two
 * HCCL buffers is usable. */
static inline HcclResult HkCallPeer(HkCall *c, uint32_t peer)
{
    const AlgResourceCtx &res = c->res;
    if (peer == res.rank) {
        return HCCL_SUCCESS;
    }
    if (peer >= res.rankSize || res.channels[peer].handle == 0) {
        OP_LOG_ERROR("%s needs a channel between rank %u and rank %u, which this communicator does not have (the "
                     "link is down, or the operator's channel topology gave none); it cannot run here, tag %s",
                     c->name, res.rank, peer, c->param.tag);
        return HCCL_E_PARA;
    }
    c->bufBytes = HkMin(c->bufBytes, res.channels[peer].remoteBuffer.size);
    return HCCL_SUCCESS;
}

/* After the peers: an algorithm that combines data in the kernel's own code (a reduction the
 * primitive cannot do, A2/A3 int64 and prod; CANN's ...AicpuReduce algorithms always) keeps the
 * drain words of HkDrain at the end of the buffer (the same offset on every rank). */
static inline HcclResult HkCallCarve(HkCall *c, bool drains)
{
    if (!drains) {
        return HCCL_SUCCESS;
    }
    if (c->bufBytes <= 2 * HK_SYNC_BYTES) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(c->bufBytes),
                     c->param.tag);
        return HCCL_E_MEMORY;
    }
    c->bufBytes = HkSliceBytes(c->bufBytes - HK_SYNC_BYTES);
    c->sync = c->buf + c->bufBytes;
    return HCCL_SUCCESS;
}

static inline uint64_t HkAlignUp(uint64_t bytes)
{
    return (bytes + HK_SLICE_ALIGN_BYTES - 1) / HK_SLICE_ALIGN_BYTES * HK_SLICE_ALIGN_BYTES;
}

/* Elements one loop of the algorithm moves when its scratch takes `multiple` times the loop's bytes
 * in the HCCL buffer (CANN's executors: maxDataSizePerLoop = CCL buffer / scratch multiple, aligned),
 * rounded down to a multiple of `granule` elements, after `reserve` bytes for alignment; 0 with an error
 * logged when not one granule fits. */
static inline uint64_t HkLoopElems(const HkCall &c, double multiple, uint64_t granule, uint64_t reserve = 0)
{
    const uint64_t usable = c.bufBytes > reserve ? c.bufBytes - reserve : 0;
    const uint64_t bytes = static_cast<uint64_t>(static_cast<double>(usable) / multiple);
    const uint64_t elems = HkSliceBytes(bytes) / c.unit / granule * granule;
    if (elems == 0) {
        OP_LOG_ERROR("%s: HCCL buffer too small (%llu bytes usable), tag %s", c.name,
                     static_cast<unsigned long long>(c.bufBytes), c.param.tag);
    }
    return elems;
}

/* ---- thread groups ----------------------------------------------------------------------------
 * A group is a lead thread and k workers (threads first..first+k-1). HkFork: the lead records
 * "start" to each worker, each worker waits it (it must be a worker's first task of the phase).
 * HkJoin (after the workers' last tasks): worker j records "finished" to the lead on lane slot
 * HK_SLOT_LANE + j (j < HK_LANES), or to worker j - HK_LANES on HK_SLOT_CHAIN after its own chain
 * successor finished; the lead waits its lanes. As CANN's PreSyncInterThreads / PostSync: a
 * notify per worker each way, the lead's waits on separate slots. */
static inline HcclResult HkFork(const HkCall &c, uint32_t lead, uint32_t first, uint32_t k)
{
    for (uint32_t j = 0; j < k; ++j) {
        OP_CHECK(c.param.tag, HcommThreadNotifyRecordOnThread(c.Th(lead), c.Th(first + j), HK_SLOT_START));
    }
    for (uint32_t j = 0; j < k; ++j) {
        OP_CHECK(c.param.tag, HcommThreadNotifyWaitOnThread(c.Th(first + j), HK_SLOT_START, c.param.notifyTimeout));
    }
    return HCCL_SUCCESS;
}

static inline HcclResult HkJoin(const HkCall &c, uint32_t lead, uint32_t first, uint32_t k)
{
    for (uint32_t j = 0; j < k; ++j) {
        const ThreadHandle t = c.Th(first + j);
        if (j + HK_LANES < k) {
            OP_CHECK(c.param.tag, HcommThreadNotifyWaitOnThread(t, HK_SLOT_CHAIN, c.param.notifyTimeout));
        }
        if (j < HK_LANES) {
            OP_CHECK(c.param.tag, HcommThreadNotifyRecordOnThread(t, c.Th(lead), HK_SLOT_LANE + j));
        } else {
            OP_CHECK(c.param.tag, HcommThreadNotifyRecordOnThread(t, c.Th(first + j - HK_LANES), HK_SLOT_CHAIN));
        }
    }
    for (uint32_t j = 0; j < k && j < HK_LANES; ++j) {
        OP_CHECK(c.param.tag, HcommThreadNotifyWaitOnThread(c.Th(lead), HK_SLOT_LANE + j, c.param.notifyTimeout));
    }
    return HCCL_SUCCESS;
}

/* ---- exchanges with a peer (CANN's SendRecvWrite / SendRecvRead and their one-sided forms) ---- */
struct HkXfer {
    void *dst;
    const void *src;
    uint64_t count; /* elements */
};

#define HK_WRITE 0
#define HK_WRITE_REDUCE 1
#define HK_READ 2

static inline HcclResult HkMove(const HkCall &c, ThreadHandle t, ChannelHandle ch, const HkXfer &x, int kind)
{
    if (x.count == 0) {
        return HCCL_SUCCESS;
    }
    if (kind == HK_WRITE) {
        OP_CHECK(c.param.tag, HcommWriteOnThread(t, ch, x.dst, x.src, x.count * c.unit));
    } else if (kind == HK_WRITE_REDUCE) {
        OP_CHECK(c.param.tag, HcommWriteReduceOnThread(t, ch, x.dst, x.src, x.count, c.Dt(), c.Op()));
    } else {
        OP_CHECK(c.param.tag, HcommReadOnThread(t, ch, x.dst, x.src, x.count * c.unit));
    }
    return HCCL_SUCCESS;
}

/* On thread t, a push exchange: `from` may write into my buffer (ACK to it), I wait until `to` lets
 * me write, write (or write-reduce) xfers into `to`'s buffer, tell `to` (DATA), and wait until
 * `from` has written into mine. `to` may equal `from`; both run the mirror image. */
static inline HcclResult HkPush(const HkCall &c, ThreadHandle t, uint32_t to, uint32_t from, const HkXfer *x,
                                uint32_t nx, int kind)
{
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(from), HK_ACK));
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(to), HK_ACK, c.param.notifyTimeout));
    for (uint32_t i = 0; i < nx; ++i) {
        HK_TRY(HkMove(c, t, c.Ch(to), x[i], kind));
    }
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(to), HK_DATA));
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(from), HK_DATA, c.param.notifyTimeout));
    return HCCL_SUCCESS;
}

/* On thread t, a pull exchange with p: my data is staged (ACK), I wait for p's, read xfers from
 * p's buffer, tell p I am done (DATA), and wait until p is done reading mine (clean exit). */
static inline HcclResult HkPull(const HkCall &c, ThreadHandle t, uint32_t p, const HkXfer *x, uint32_t nx)
{
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(p), HK_ACK));
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(p), HK_ACK, c.param.notifyTimeout));
    for (uint32_t i = 0; i < nx; ++i) {
        HK_TRY(HkMove(c, t, c.Ch(p), x[i], HK_READ));
    }
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(p), HK_DATA));
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(p), HK_DATA, c.param.notifyTimeout));
    return HCCL_SUCCESS;
}

/* One-sided pushes (CANN's SendWrite / RecvWrite): the sender waits until `to` lets it write,
 * writes and tells it; the receiver lets `from` write and waits until it has. */
static inline HcclResult HkPushOnly(const HkCall &c, ThreadHandle t, uint32_t to, const HkXfer *x, uint32_t nx,
                                    int kind)
{
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(to), HK_ACK, c.param.notifyTimeout));
    for (uint32_t i = 0; i < nx; ++i) {
        HK_TRY(HkMove(c, t, c.Ch(to), x[i], kind));
    }
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(to), HK_DATA));
    return HCCL_SUCCESS;
}

static inline HcclResult HkPushRecv(const HkCall &c, ThreadHandle t, uint32_t from)
{
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(from), HK_ACK));
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(from), HK_DATA, c.param.notifyTimeout));
    return HCCL_SUCCESS;
}

/* One-sided pulls (CANN's SendRead / RecvRead): the owner says its data is staged and waits until p
 * has read it; the reader waits for the owner, reads and tells it. */
static inline HcclResult HkPullServe(const HkCall &c, ThreadHandle t, uint32_t p)
{
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(p), HK_ACK));
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(p), HK_DATA, c.param.notifyTimeout));
    return HCCL_SUCCESS;
}

static inline HcclResult HkPullOnly(const HkCall &c, ThreadHandle t, uint32_t p, const HkXfer *x, uint32_t nx)
{
    OP_CHECK(c.param.tag, HcommChannelNotifyWaitOnThread(t, c.Ch(p), HK_ACK, c.param.notifyTimeout));
    for (uint32_t i = 0; i < nx; ++i) {
        HK_TRY(HkMove(c, t, c.Ch(p), x[i], HK_READ));
    }
    OP_CHECK(c.param.tag, HcommChannelNotifyRecordOnThread(t, c.Ch(p), HK_DATA));
    return HCCL_SUCCESS;
}

/* ---- local reduction of several operands ------------------------------------------------------
 * On thread t: dst = srcs[0] op srcs[1] op ... op srcs[k-1] (count elements), in that order; dst
 * may be srcs[0] and must not overlap the others. Primitive: a copy and k-1 LocalReduce tasks;
 * staged (the primitive cannot, hk_coll.h above): the copy, one drain, then the kernel's loops. */
static inline HcclResult HkReduceSeq(const HkCall &c, ThreadHandle t, uint8_t *dst, const uint8_t *const *srcs,
                                     uint32_t k, uint64_t count)
{
    if (count == 0 || k == 0) {
        return HCCL_SUCCESS;
    }
    HK_TRY(HkCopy(c.param, t, dst, srcs[0], count * c.unit));
    if (k == 1) {
        return HCCL_SUCCESS;
    }
    if (c.prim) {
        for (uint32_t i = 1; i < k; ++i) {
            OP_CHECK(c.param.tag, HcommLocalReduceOnThread(t, dst, srcs[i], count, c.Dt(), c.Op()));
        }
        return HCCL_SUCCESS;
    }
    HK_TRY(HkDrain(c.param, c.res, t, c.sync));
    for (uint32_t i = 1; i < k; ++i) {
        HK_TRY(HkLoopReduce(c.param, dst, srcs[i], count));
    }
    return HCCL_SUCCESS;
}

/* ---- rank groups ------------------------------------------------------------------------------ */
struct HkGroup {
    uint32_t n;                  /* members */
    uint32_t me;                 /* my index */
    uint32_t rank[HK_MAX_RANKS]; /* communicator rank of each member */
};

/* Every rank of the communicator, in rank order. */
static inline void HkGroupAll(const AlgResourceCtx &res, HkGroup *g)
{
    g->n = res.rankSize;
    g->me = res.rank;
    for (uint32_t i = 0; i < g->n && i < HK_MAX_RANKS; ++i) {
        g->rank[i] = i;
    }
}

/* ---- NHR over a group (NHR.md; CANN's InsTempReduceScatterNHR / InsTempAllGatherNHR) ------------
 * The data: a region mirrored at offset `off` of every member's HCCL buffer, `count` elements cut
 * into g.n parts (HkChunkRange). ceil(log2 n) steps on one thread, each a push exchange with two
 * peers: reduce-scatter step s sends parts to - 2^(s+1) k (k = 0, 1, ...) to to = me - 2^s and
 * receives the same from me + 2^s, halving what is sent each step; all-gather runs the steps in
 * reverse, to = me + 2^(S-1-s). Within a step a rank's sent and received parts are disjoint, and
 * every contribution reaches every part exactly once, for any n (checked for n = 2..69). */
#define HK_NO_SCRATCH UINT64_MAX

static inline uint32_t HkNhrSteps(uint32_t n)
{
    uint32_t s = 0;
    for (uint32_t t = n - 1; t != 0; t >>= 1) {
        ++s;
    }
    return s;
}

/* Reduce-scatter in place: afterwards part g.me of my region holds its reduction over the group.
 * Write-reduce, or with scratchOff != HK_NO_SCRATCH (CANN's ...AicpuReduce: the primitive cannot
 * reduce the dtype/op) plain writes into the receiver's scratch mirror at scratchOff, combined
 * into the region by the receiver after the step (a drain, then the kernel's loops). */
static inline HcclResult HkNhrReduceScatter(const HkCall &c, const HkGroup &g, ThreadHandle t, uint64_t off,
                                            uint64_t count, uint64_t scratchOff)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const bool staged = scratchOff != HK_NO_SCRATCH;
    const uint32_t steps = n > 1 ? HkNhrSteps(n) : 0;
    for (uint32_t s = 0; s < steps; ++s) {
        const uint32_t d = 1u << s;
        const uint32_t stride = (2 * d) % n;
        const uint32_t parts = (n - 1 + d) / (2 * d);
        const uint32_t to = (me + n - d) % n;
        const uint32_t from = (me + d) % n;
        HkXfer x[HK_MAX_RANKS / 2 + 1];
        uint32_t nx = 0;
        for (uint32_t k = 0, idx = to; k < parts; ++k, idx = (idx + n - stride) % n) {
            uint64_t first = 0, cnt = 0;
            HkChunkRange(count, n, idx, &first, &cnt);
            const uint64_t at = first * c.unit;
            x[nx++] = HkXfer{c.Remote(g.rank[to]) + (staged ? scratchOff : off) + at, c.buf + off + at, cnt};
        }
        HK_TRY(HkPush(c, t, g.rank[to], g.rank[from], x, nx, staged ? HK_WRITE : HK_WRITE_REDUCE));
        if (!staged) {
            continue;
        }
        HK_TRY(HkDrain(c.param, c.res, t, c.sync));
        for (uint32_t k = 0, idx = me; k < parts; ++k, idx = (idx + n - stride) % n) {
            uint64_t first = 0, cnt = 0;
            HkChunkRange(count, n, idx, &first, &cnt);
            HK_TRY(HkLoopReduce(c.param, c.buf + off + first * c.unit, c.buf + scratchOff + first * c.unit, cnt));
        }
    }
    return HCCL_SUCCESS;
}

/* All-gather in place: part g.me of my region is mine; afterwards the region holds every part. */
static inline HcclResult HkNhrAllGather(const HkCall &c, const HkGroup &g, ThreadHandle t, uint64_t off,
                                        uint64_t count)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t steps = n > 1 ? HkNhrSteps(n) : 0;
    for (uint32_t s = 0; s < steps; ++s) {
        const uint32_t d = 1u << (steps - 1 - s);
        const uint32_t stride = (2 * d) % n;
        const uint32_t parts = (n - 1 + d) / (2 * d);
        const uint32_t to = (me + d) % n;
        const uint32_t from = (me + n - d) % n;
        HkXfer x[HK_MAX_RANKS / 2 + 1];
        uint32_t nx = 0;
        for (uint32_t k = 0, idx = me; k < parts; ++k, idx = (idx + n - stride) % n) {
            uint64_t first = 0, cnt = 0;
            HkChunkRange(count, n, idx, &first, &cnt);
            const uint64_t at = off + first * c.unit;
            x[nx++] = HkXfer{c.Remote(g.rank[to]) + at, c.buf + at, cnt};
        }
        HK_TRY(HkPush(c, t, g.rank[to], g.rank[from], x, nx, HK_WRITE));
    }
    return HCCL_SUCCESS;
}

/* ---- mesh over a group (Mesh.md; CANN's InsTempReduceScatterMesh1D / InsTempAllGatherMesh1D) ----
 * One device thread per peer (workers first..first+n-2, member me+i on worker i-1; with a single
 * peer the lead does the exchange itself), every link at once. `total` elements cut into g.n parts
 * (HkChunkRange); an exchange whose parts are empty both ways is skipped (both ends agree). */
static inline uint32_t HkMeshWorkers(uint32_t n)
{
    return n > 2 ? n - 1 : 0;
}

/* A part of the data: a span of local memory (count elements) and, for an all-gather, the offset
 * in the owner's HCCL buffer where the owner staged it. */
struct HkSpan {
    uint8_t *ptr;
    uint64_t count;
    uint64_t remote;
};

#define HK_MAX_REPS HK_MAX_RANKS

/* Reduce-scatter, `reps` repetitions (CANN's repeatNum: one exchange per peer carries all of them).
 * part(j, r) -> HkSpan: my contribution to member j's part of repetition r (local memory). Every
 * member writes it into its slot of member j's buffer (member k's slot at slotsOff + k * slotBytes,
 * repetition r at + r * repBytes); after the join the lead combines, per repetition, my own part
 * and the other members' slots in member order into dst(r) (my part's reduction; it may be my own
 * part, it must not overlap the slots). Staged reductions: one drain for all repetitions. */
template <class PartFn, class DstFn>
static inline HcclResult HkMeshReduceScatterEx(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                               uint32_t reps, PartFn part, uint64_t slotsOff, uint64_t slotBytes,
                                               uint64_t repBytes, DstFn dst)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t workers = HkMeshWorkers(n);
    if (workers != 0) {
        HK_TRY(HkFork(c, lead, first, workers));
    }
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t j = (me + i) % n;
        const ThreadHandle t = c.Th(workers != 0 ? first + i - 1 : lead);
        HkXfer x[HK_MAX_REPS];
        bool any = false;
        for (uint32_t r = 0; r < reps; ++r) {
            const HkSpan out = part(j, r);
            any = any || out.count != 0 || part(me, r).count != 0;
            x[r] = HkXfer{c.Remote(g.rank[j]) + slotsOff + me * slotBytes + r * repBytes, out.ptr, out.count};
        }
        if (any) {
            HK_TRY(HkPush(c, t, g.rank[j], g.rank[j], x, reps, HK_WRITE));
        }
    }
    if (workers != 0) {
        HK_TRY(HkJoin(c, lead, first, workers));
    }
    const ThreadHandle t = c.Th(lead);
    for (uint32_t r = 0; r < reps; ++r) {
        const HkSpan mine = part(me, r);
        HK_TRY(HkCopy(c.param, t, dst(r), mine.ptr, mine.count * c.unit));
    }
    if (n > 1 && !c.prim) {
        HK_TRY(HkDrain(c.param, c.res, t, c.sync));
    }
    for (uint32_t r = 0; r < reps; ++r) {
        const uint64_t count = part(me, r).count;
        for (uint32_t k = 0; k < n && count != 0; ++k) {
            if (k == me) {
                continue;
            }
            const uint8_t *slot = c.buf + slotsOff + k * slotBytes + r * repBytes;
            if (c.prim) {
                OP_CHECK(c.param.tag, HcommLocalReduceOnThread(t, dst(r), slot, count, c.Dt(), c.Op()));
            } else {
                HK_TRY(HkLoopReduce(c.param, dst(r), slot, count));
            }
        }
    }
    return HCCL_SUCCESS;
}

/* All-gather by reads, `reps` repetitions: part(j, r) -> HkSpan: where member j's part of
 * repetition r goes in my memory (ptr, count) and where j staged it in its buffer (remote); mine(r):
 * my own part (local; the caller staged it in my buffer before, on the lead). Every member reads
 * every peer's parts straight into place (one exchange per peer for all repetitions) while the
 * lead copies my own (skipped when they are there already). */
template <class PartFn, class MineFn>
static inline HcclResult HkMeshAllGatherEx(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                           uint32_t reps, PartFn part, MineFn mine)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t workers = HkMeshWorkers(n);
    if (workers != 0) {
        HK_TRY(HkFork(c, lead, first, workers));
    }
    for (uint32_t r = 0; r < reps; ++r) {
        const HkSpan own = part(me, r);
        HK_TRY(HkCopy(c.param, c.Th(lead), own.ptr, mine(r), own.count * c.unit));
    }
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t j = (me + i) % n;
        const ThreadHandle t = c.Th(workers != 0 ? first + i - 1 : lead);
        HkXfer x[HK_MAX_REPS];
        bool any = false;
        for (uint32_t r = 0; r < reps; ++r) {
            const HkSpan in = part(j, r);
            any = any || in.count != 0 || part(me, r).count != 0;
            x[r] = HkXfer{in.ptr, c.Remote(g.rank[j]) + in.remote, in.count};
        }
        if (any) {
            HK_TRY(HkPull(c, t, g.rank[j], x, reps));
        }
    }
    if (workers != 0) {
        HK_TRY(HkJoin(c, lead, first, workers));
    }
    return HCCL_SUCCESS;
}

/* Chunked reduce-scatter by write-reduce (CANN's InsTempAllReduceMesh1DTwoShotMeshChunk and
 * InsTempReduceScatterMesh1DMeshChunk): part(j) -> HkSpan: my contribution to member j's part
 * (local ptr, count) and where member j keeps its part in its buffer (remote), which already holds
 * its own contribution (each member copies it there first, on the lead, before calling). Each part
 * is cut into n-1 sub-chunks; n-1 steps, a thread per peer: in step s the thread of peer j = me + d
 * write-reduces sub-chunk (d + s) mod (n-1) of j's part into j's buffer while j adds sub-chunk
 * (n - d + s) mod (n-1) of mine into mine, so every sub-chunk of a part has one writer per step and
 * every peer once over the steps; the threads join and start again between steps (the next writer
 * of a sub-chunk comes after the last). No local reduce pass: the links reduce. Needs the reduce
 * primitive for the dtype/op. */
template <class PartFn>
static inline HcclResult HkMeshChunkReduceScatter(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                                  PartFn part)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t workers = HkMeshWorkers(n);
    const uint64_t myCnt = part(me).count;
    for (uint32_t s = 0; s + 1 < n; ++s) {
        if (workers != 0) {
            HK_TRY(HkFork(c, lead, first, workers));
        }
        for (uint32_t d = 1; d < n; ++d) {
            const uint32_t j = (me + d) % n;
            const HkSpan pj = part(j);
            uint64_t subFirst = 0, subCnt = 0, inFirst = 0, inCnt = 0;
            HkChunkRange(pj.count, n - 1, (d + s) % (n - 1), &subFirst, &subCnt);
            HkChunkRange(myCnt, n - 1, (n - d + s) % (n - 1), &inFirst, &inCnt);
            if (subCnt == 0 && inCnt == 0) {
                continue;
            }
            const HkXfer x{c.Remote(g.rank[j]) + pj.remote + subFirst * c.unit, pj.ptr + subFirst * c.unit, subCnt};
            HK_TRY(HkPush(c, c.Th(workers != 0 ? first + d - 1 : lead), g.rank[j], g.rank[j], &x, 1,
                          HK_WRITE_REDUCE));
        }
        if (workers != 0) {
            HK_TRY(HkJoin(c, lead, first, workers));
        }
    }
    return HCCL_SUCCESS;
}

/* The common case: `total` elements cut into g.n parts (HkChunkRange), my contribution to part j at
 * src + its offset; slot k of a member at slotsOff + k * slotBytes; my part's reduction into dst. */
static inline HcclResult HkMeshReduceScatter(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                             const uint8_t *src, uint64_t total, uint64_t slotsOff,
                                             uint64_t slotBytes, uint8_t *dst)
{
    const uint32_t n = g.n;
    auto part = [&](uint32_t j, uint32_t) {
        uint64_t f = 0, k = 0;
        HkChunkRange(total, n, j, &f, &k);
        return HkSpan{const_cast<uint8_t *>(src) + f * c.unit, k, 0};
    };
    return HkMeshReduceScatterEx(c, g, lead, first, 1, part, slotsOff, slotBytes, 0,
                                 [&](uint32_t) { return dst; });
}

/* Where member j's part is staged in its HCCL buffer: at off + j * stride, plus the part's own
 * offset in the data when `mirror` (the buffer mirrors the data). */
struct HkStage {
    uint64_t off;
    uint64_t stride;
    bool mirror;
};

/* The common case: `total` elements cut into g.n parts (HkChunkRange), part j read into dst + its
 * offset from member j's buffer (HkStage); my own part copied from `mine`. */
static inline HcclResult HkMeshAllGather(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                         const HkStage &stage, uint64_t total, uint8_t *dst, const uint8_t *mine)
{
    const uint32_t n = g.n;
    auto part = [&](uint32_t j, uint32_t) {
        uint64_t f = 0, k = 0;
        HkChunkRange(total, n, j, &f, &k);
        return HkSpan{dst + f * c.unit, k, stage.off + j * stage.stride + (stage.mirror ? f * c.unit : 0)};
    };
    return HkMeshAllGatherEx(c, g, lead, first, 1, part, [&](uint32_t) { return mine; });
}

/* ---- rooted blocks: scatter and gather over a group ------------------------------------------- */

/* NHR scatter from member `root` (CANN's InsTempScatterNHR / the first half of InsTempBroadcastNHR):
 * the region mirrored at `off` of every member's buffer, `count` elements cut into g.n parts, is
 * full at the root; afterwards member i holds part i. Step s: the members within 2^s of the root
 * (counted backwards; the last step of a non-power-of-two count n - 2^s of them) push parts
 * (to - 2^(s+1) k) to to = me - 2^s, one push per member and step, on one thread; a member sends only
 * the parts it holds by then (the others would be stale; every member still ends with its own). */
static inline HcclResult HkNhrScatter(const HkCall &c, const HkGroup &g, ThreadHandle t, uint32_t root, uint64_t off,
                                      uint64_t count)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t steps = n > 1 ? HkNhrSteps(n) : 0;
    const bool pow2 = (n & (n - 1)) == 0;
    uint64_t held[HK_MAX_RANKS];  /* parts each member holds (bit i: part i), as the schedule moves them */
    for (uint32_t r = 0; r < n; ++r) {
        held[r] = r == root ? (n == 64 ? ~0ull : (1ull << n) - 1) : 0;
    }
    for (uint32_t s = 0; s < steps; ++s) {
        const uint32_t d = 1u << s;
        const uint32_t stride = (2 * d) % n;
        const uint32_t parts = (n - 1 + d) / (2 * d);
        const uint32_t senders = (!pow2 && s + 1 == steps) ? n - d : d;
        uint64_t next[HK_MAX_RANKS];
        memcpy(next, held, n * sizeof(uint64_t));
        for (uint32_t r = 0; r < n; ++r) {
            const uint32_t toRoot = (root + n - r) % n;  /* how far r is behind the root */
            if (toRoot >= senders) {
                continue;
            }
            const uint32_t to = (r + n - d) % n;
            HkXfer x[HK_MAX_RANKS / 2 + 1];
            uint32_t nx = 0;
            for (uint32_t k = 0, idx = to; k < parts; ++k, idx = (idx + n - stride) % n) {
                if ((held[r] >> idx & 1u) == 0) {
                    continue;
                }
                next[to] |= 1ull << idx;
                if (r == me) {
                    uint64_t first = 0, cnt = 0;
                    HkChunkRange(count, n, idx, &first, &cnt);
                    x[nx++] = HkXfer{c.Remote(g.rank[to]) + off + first * c.unit, c.buf + off + first * c.unit, cnt};
                }
            }
            if (r == me) {
                HK_TRY(HkPushOnly(c, t, g.rank[to], x, nx, HK_WRITE));
            } else if (to == me) {
                HK_TRY(HkPushRecv(c, t, g.rank[r]));
            }
        }
        memcpy(held, next, n * sizeof(uint64_t));
    }
    return HCCL_SUCCESS;
}

/* Mesh scatter from member `root` (CANN's InsTempScatterMesh1D, the first half of
 * InsTempBroadcastMesh1DTwoShot): part(j, r) -> HkSpan: at the root, the data for member j,
 * repetition r (ptr, count), and where it lands in j's buffer (remote). The root pushes every
 * member's repetitions to it in one exchange, a thread per peer; the others receive on the lead. */
template <class PartFn>
static inline HcclResult HkMeshScatter(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                       uint32_t root, uint32_t reps, PartFn part)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    if (n == 1) {
        return HCCL_SUCCESS;
    }
    if (me != root) {
        return HkPushRecv(c, c.Th(lead), g.rank[root]);
    }
    const uint32_t workers = HkMeshWorkers(n);
    if (workers != 0) {
        HK_TRY(HkFork(c, lead, first, workers));
    }
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t j = (me + i) % n;
        HkXfer x[HK_MAX_REPS];
        for (uint32_t r = 0; r < reps; ++r) {
            const HkSpan p = part(j, r);
            x[r] = HkXfer{c.Remote(g.rank[j]) + p.remote, p.ptr, p.count};
        }
        HK_TRY(HkPushOnly(c, c.Th(workers != 0 ? first + i - 1 : lead), g.rank[j], x, reps, HK_WRITE));
    }
    return workers != 0 ? HkJoin(c, lead, first, workers) : HCCL_SUCCESS;
}

/* Mesh all-gather by writes (CANN's second half of InsTempBroadcastMesh1DTwoShot): part(j) ->
 * HkSpan: member j's data (ptr in j's own memory: used where j == me), its count, and where it lands
 * in every member's buffer (remote). Every member pushes its part into every peer, a thread per peer. */
template <class PartFn>
static inline HcclResult HkMeshAllGatherWrite(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                              PartFn part)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    const uint32_t workers = HkMeshWorkers(n);
    const HkSpan mine = part(me);
    if (workers != 0) {
        HK_TRY(HkFork(c, lead, first, workers));
    }
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t j = (me + i) % n;
        if (mine.count == 0 && part(j).count == 0) {
            continue;
        }
        const HkXfer x{c.Remote(g.rank[j]) + mine.remote, mine.ptr, mine.count};
        HK_TRY(HkPush(c, c.Th(workers != 0 ? first + i - 1 : lead), g.rank[j], g.rank[j], &x, 1, HK_WRITE));
    }
    return workers != 0 ? HkJoin(c, lead, first, workers) : HCCL_SUCCESS;
}

/* Mesh gather to member `root` by reads (CANN's ReduceMesh1DTwoShot RunGatherToRoot): part(j) ->
 * HkSpan: where member j's part goes at the root (ptr, count) and where j keeps it in its buffer
 * (remote). The root reads every peer's part, a thread per peer; the others serve it on the lead. */
template <class PartFn>
static inline HcclResult HkMeshGatherRead(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                          uint32_t root, PartFn part)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    if (n == 1) {
        return HCCL_SUCCESS;
    }
    if (me != root) {
        return HkPullServe(c, c.Th(lead), g.rank[root]);
    }
    const uint32_t workers = HkMeshWorkers(n);
    if (workers != 0) {
        HK_TRY(HkFork(c, lead, first, workers));
    }
    for (uint32_t i = 1; i < n; ++i) {
        const uint32_t j = (me + i) % n;
        const HkSpan p = part(j);
        const HkXfer x{p.ptr, c.Remote(g.rank[j]) + p.remote, p.count};
        HK_TRY(HkPullOnly(c, c.Th(workers != 0 ? first + i - 1 : lead), g.rank[j], &x, 1));
    }
    return workers != 0 ? HkJoin(c, lead, first, workers) : HCCL_SUCCESS;
}

/* Mesh gather to member `root` by writes (CANN's ReduceMesh1D): part(j) -> HkSpan: member j's data
 * (ptr in its own memory), count, and where it lands in the root's buffer (remote). Every member
 * pushes its part to the root on its lead; the root receives from every peer, a thread per peer. */
template <class PartFn>
static inline HcclResult HkMeshGatherWrite(const HkCall &c, const HkGroup &g, uint32_t lead, uint32_t first,
                                           uint32_t root, PartFn part)
{
    const uint32_t n = g.n;
    const uint32_t me = g.me;
    if (n == 1) {
        return HCCL_SUCCESS;
    }
    if (me != root) {
        const HkSpan p = part(me);
        const HkXfer x{c.Remote(g.rank[root]) + p.remote, p.ptr, p.count};
        return HkPushOnly(c, c.Th(lead), g.rank[root], &x, 1, HK_WRITE);
    }
    const uint32_t workers = HkMeshWorkers(n);
    if (workers != 0) {
        HK_TRY(HkFork(c, lead, first, workers));
    }
    for (uint32_t i = 1; i < n; ++i) {
        HK_TRY(HkPushRecv(c, c.Th(workers != 0 ? first + i - 1 : lead), g.rank[(me + i) % n]));
    }
    return workers != 0 ? HkJoin(c, lead, first, workers) : HCCL_SUCCESS;
}

/* The group g without member `drop` (my index shifts; I must not be the one dropped). */
static inline void HkGroupWithout(const HkGroup &g, uint32_t drop, HkGroup *out)
{
    out->n = 0;
    for (uint32_t i = 0; i < g.n; ++i) {
        if (i == drop) {
            continue;
        }
        if (i == g.me) {
            out->me = out->n;
        }
        out->rank[out->n++] = g.rank[i];
    }
}

/* ---- levels (OpParam.hierInfo) ----------------------------------------------------------------
 * A multi-level algorithm needs the communicator's servers and super-pods. CANN's own operators
 * learn them on the host: TopoMatchMultilevel (hicann/hccl src/ops/op_common/topo/
 * topo_match_multilevel.cc; its rank-graph queries are host code, compiled out of the AICPU build)
 * reads the rank graph, the executor serializes the per-level rank lists
 * (AlgHierarchyInfoForAllLevel) into device memory and the kernel finds them through a pointer in
 * its OpParam. The built-ins do the same: the host sets OpParam.hierInfo to a device copy of these
 * words, made once per communicator from its topology (hcomm_kit/ops/collectives.py, from
 * comm.topology = the emulator's rank graph):
 *     uint32_t words[3 + n + S] = { n, S, P, server of rank 0, ..., of rank n-1,
 *                                   super-pod of server 0, ..., of server S-1 }
 * Level 0 = the ranks of my server, ascending (my local index = my place among them). With two
 * levels, level 1 = the ranks with my local index, one per server, in server order. With three,
 * level 1 = those of my super-pod, level 2 = the ranks with my local index and my server's place in
 * its super-pod, one per super-pod. Servers must hold the same number of ranks (and super-pods the
 * same number of servers): CANN's sequence and parallel executors are symmetric too. */
struct HkLevels {
    uint32_t count;               /* levels described: 2 or 3 */
    HkGroup g[3];
    uint32_t L, S;                /* ranks per server, servers */
    uint32_t M, P;                /* three levels: servers per super-pod, super-pods (else S, 1) */
    uint32_t grid[HK_MAX_RANKS];  /* grid[s * L + j]: the rank with local index j on server s */
    uint32_t order[HK_MAX_RANKS]; /* every rank by (super-pod, server in it, local index) */
};

static inline HcclResult HkLevelsRead(const HkCall &c, const void *info, uint32_t want, HkLevels *lv)
{
    const uint32_t n = c.res.rankSize;
    if (info == nullptr) {
        OP_LOG_ERROR("%s needs OpParam.hierInfo (the host's layout of servers), got null, tag %s", c.name,
                     c.param.tag);
        return HCCL_E_PARA;
    }
    uint32_t head[3];
    memcpy(head, info, sizeof head);
    const uint32_t S = head[1];
    const uint32_t P = head[2];
    if (head[0] != n || n > HK_MAX_RANKS || S == 0 || S > n || P == 0 || P > S) {
        OP_LOG_ERROR("OpParam.hierInfo describes %u ranks in %u servers and %u super-pods; the communicator has %u "
                     "ranks (at most %u), tag %s", head[0], S, P, n, HK_MAX_RANKS, c.param.tag);
        return HCCL_E_PARA;
    }
    uint32_t server[HK_MAX_RANKS];
    uint32_t pod[HK_MAX_RANKS];
    memcpy(server, static_cast<const uint32_t *>(info) + 3, n * sizeof(uint32_t));
    memcpy(pod, static_cast<const uint32_t *>(info) + 3 + n, S * sizeof(uint32_t));
    const uint32_t L = n / S;
    uint32_t fill[HK_MAX_RANKS] = {0};
    uint32_t grid[HK_MAX_RANKS];  /* grid[s * L + j]: local index j of server s */
    for (uint32_t r = 0; r < n; ++r) {
        const uint32_t s = server[r];
        if (n % S != 0 || s >= S || fill[s] >= L) {
            OP_LOG_ERROR("%s: rank %u is on server %u; the %u servers must hold %u/%u ranks each (the algorithm needs "
                         "servers of equal size), tag %s", c.name, r, s, S, n, S, c.param.tag);
            return HCCL_E_PARA;
        }
        grid[s * L + fill[s]++] = r;
    }
    lv->L = L;
    lv->S = S;
    memcpy(lv->grid, grid, n * sizeof(uint32_t));
    uint32_t mySrv = server[c.res.rank];
    uint32_t li = 0;
    while (grid[mySrv * L + li] != c.res.rank) {
        ++li;
    }
    HkGroup &g0 = lv->g[0];
    g0.n = L;
    g0.me = li;
    for (uint32_t j = 0; j < L; ++j) {
        g0.rank[j] = grid[mySrv * L + j];
    }
    lv->count = want;
    lv->M = S;
    lv->P = 1;
    memcpy(lv->order, grid, n * sizeof(uint32_t));
    if (want == 2) {
        HkGroup &g1 = lv->g[1];
        g1.n = S;
        g1.me = mySrv;
        for (uint32_t s = 0; s < S; ++s) {
            g1.rank[s] = grid[s * L + li];
        }
        HkGroup &g2 = lv->g[2];  /* no third level: a group of one (its NHR steps are none) */
        g2.n = 1;
        g2.me = 0;
        g2.rank[0] = c.res.rank;
        return HCCL_SUCCESS;
    }
    /* three levels: servers of my pod (level 1), then the pods (level 2) */
    const uint32_t M = S / P;  /* servers per pod */
    uint32_t podFill[HK_MAX_RANKS] = {0};
    uint32_t podGrid[HK_MAX_RANKS]; /* podGrid[p * M + m]: server m of pod p */
    for (uint32_t s = 0; s < S; ++s) {
        const uint32_t p = pod[s];
        if (S % P != 0 || p >= P || podFill[p] >= M) {
            OP_LOG_ERROR("%s: server %u is in super-pod %u; the %u super-pods must hold %u/%u servers each, tag %s",
                         c.name, s, p, P, S, P, c.param.tag);
            return HCCL_E_PARA;
        }
        podGrid[p * M + podFill[p]++] = s;
    }
    const uint32_t myPod = pod[mySrv];
    uint32_t mi = 0;
    while (podGrid[myPod * M + mi] != mySrv) {
        ++mi;
    }
    HkGroup &g1 = lv->g[1];
    g1.n = M;
    g1.me = mi;
    for (uint32_t m = 0; m < M; ++m) {
        g1.rank[m] = grid[podGrid[myPod * M + m] * L + li];
    }
    HkGroup &g2 = lv->g[2];
    g2.n = P;
    g2.me = myPod;
    for (uint32_t p = 0; p < P; ++p) {
        g2.rank[p] = grid[podGrid[p * M + mi] * L + li];
    }
    lv->M = M;
    lv->P = P;
    for (uint32_t k = 0; k < S; ++k) {
        memcpy(lv->order + k * L, grid + podGrid[k] * L, L * sizeof(uint32_t));
    }
    return HCCL_SUCCESS;
}

/* Where `rank` sits in the levels: its super-pod, its server's place in the super-pod and its local
 * index (two levels: super-pod 0, its server, its local index). */
static inline void HkLevelsWhere(const HkLevels &lv, uint32_t rank, uint32_t *pod, uint32_t *server, uint32_t *local)
{
    uint32_t k = 0;
    while (k + 1 < lv.L * lv.S && lv.order[k] != rank) {
        ++k;
    }
    *local = k % lv.L;
    *server = (k / lv.L) % lv.M;
    *pod = k / (lv.L * lv.M);
}

/* Every member of every level group is a peer of the call (HkCallPeer). */
static inline HcclResult HkCallLevelPeers(HkCall *c, const HkLevels &lv)
{
    for (uint32_t l = 0; l < lv.count; ++l) {
        for (uint32_t i = 0; i < lv.g[l].n; ++i) {
            HK_TRY(HkCallPeer(c, lv.g[l].rank[i]));
        }
    }
    return HCCL_SUCCESS;
}

/* The split of a two-level parallel executor's data (CANN's CalcParallelDataSplitRatio, one port
 * per peer): the share of the part that goes inside the servers first, in eighths (1..7). `kind`:
 * 0 reduce-scatter with a local reduce (allreduce, reduce_scatter, reduce), 1 scatter (broadcast;
 * CANN's parallel scatter takes no ratio: halves), 2 all-gather (capped at 4/8). */
static inline uint32_t HkParallelEighths(uint32_t L, uint32_t S, int kind)
{
    double mesh = 0.0;
    const double clos = kind == 2 ? static_cast<double>(S - 1) : static_cast<double>(S - 1) / S;
    if (kind == 0) {
        mesh = 21.0 / (20.0 * L);
    } else if (kind == 1) {
        mesh = 1.0 / L;
    } else {
        mesh = 1.0;
    }
    double ratio = clos / (clos + mesh);
    if (kind == 2 && ratio > 0.5) {
        ratio = 0.5;
    }
    long q = std::lround(ratio * 8.0);
    q = q < 1 ? 1 : (q > 7 ? 7 : q);
    return static_cast<uint32_t>(q);
}

/* ---- allreduce executors shared with reduce ---------------------------------------------------
 * NHR (CANN's InsTempAllReduceNHR / InsTempAllReduceAicpuReduceNHR, and its ReduceNHR, which runs
 * the same two halves): the buffer mirrors the loop (multiple 1; the AicpuReduce form keeps a
 * scratch mirror behind it at scratchOff: multiple 2). The lead copies `in` into the buffer, runs
 * the NHR reduce-scatter and all-gather over g in place (one thread, ceil(log2 n) steps each way)
 * and copies the buffer into `out` (null: the result stays in the buffer). */
static inline HcclResult HkArNhrLoop(const HkCall &c, const HkGroup &g, const uint8_t *in, uint8_t *out, uint64_t cnt,
                                     uint64_t scratchOff)
{
    const ThreadHandle t = c.Th(0);
    HK_TRY(HkCopy(c.param, t, c.buf, in, cnt * c.unit));
    HK_TRY(HkNhrReduceScatter(c, g, t, 0, cnt, scratchOff));
    HK_TRY(HkNhrAllGather(c, g, t, 0, cnt));
    return out != nullptr ? HkCopy(c.param, t, out, c.buf, cnt * c.unit) : HCCL_SUCCESS;
}

/*
 * Sequence allreduce (CANN's InsV2AllReduceSequenceExecutorAicpu and ...ExecutorAicpu3Level, templates
 * mesh (ZAxisDetour: one link per pair here) and NHR; its ReduceSequenceExecutorAicpu3Level,
 * AicpuReduceSequenceMesh1DNHR[NHR], runs the same steps and the root keeps the result), per loop
 * of L chunks: the buffer holds L slots of a chunk (A), my chunk (B) and, for a reduction the
 * kernel computes, a scratch mirror of B (C). Main leads the server's mesh (workers 1..L-1) and
 * runs the NHR levels itself:
 *   1. level 0 mesh reduce-scatter: my chunk li, reduced over my server, into B;
 *   2. level 1 NHR reduce-scatter over B: sub-chunk si reduced over every server (of my super-pod);
 *   3. three levels: the level-2 NHR reduce-scatter and all-gather (the super-pods) on my sub-chunk;
 *   4. level 1 NHR all-gather over B: B holds chunk li reduced over everything;
 *   5. level 0 mesh all-gather by reads of the B of my server's ranks into `out` (null, reduce's
 *      non-roots: into A, whose slots nobody writes after step 1 of the loop).
 * So 1/L of the message crosses the servers (hierarchical_comm_principle.md).
 */
struct HkArSeq {
    uint64_t chunkBytes;
    uint64_t offB;
    uint64_t offC;  /* HK_NO_SCRATCH when the primitive reduces */
};

/* The loop (elements: L chunks) and the layout; 0 with an error logged when not one chunk fits. */
static inline uint64_t HkArSeqPlan(const HkCall &c, uint32_t L, bool staged, HkArSeq *q)
{
    const uint64_t chunk = HkLoopElems(c, L + 1 + (staged ? 1 : 0), 1);
    const uint64_t chunkBytes = chunk * c.unit;
    *q = HkArSeq{chunkBytes, L * chunkBytes, staged ? (L + 1) * chunkBytes : HK_NO_SCRATCH};
    return chunk * L;
}

static inline HcclResult HkArSeqLoop(const HkCall &c, const HkLevels &lv, const HkArSeq &q, const uint8_t *in,
                                     uint8_t *out, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    uint64_t myFirst = 0, myCnt = 0;
    HkChunkRange(cnt, g0.n, g0.me, &myFirst, &myCnt);
    HK_TRY(HkMeshReduceScatter(c, g0, 0, 1, in, cnt, 0, q.chunkBytes, c.buf + q.offB));
    HK_TRY(HkNhrReduceScatter(c, g1, c.Th(0), q.offB, myCnt, q.offC));
    if (lv.count == 3) {  /* level 2 on my part of level 1 */
        uint64_t f1 = 0, n1 = 0;
        HkChunkRange(myCnt, g1.n, g1.me, &f1, &n1);
        const uint64_t at = f1 * c.unit;
        HK_TRY(HkNhrReduceScatter(c, lv.g[2], c.Th(0), q.offB + at, n1, q.offC == HK_NO_SCRATCH ? q.offC : q.offC + at));
        HK_TRY(HkNhrAllGather(c, lv.g[2], c.Th(0), q.offB + at, n1));
    }
    HK_TRY(HkNhrAllGather(c, g1, c.Th(0), q.offB, myCnt));
    return HkMeshAllGather(c, g0, 0, 1, HkStage{q.offB, 0, false}, cnt, out != nullptr ? out : c.buf,
                           c.buf + q.offB);
}

/*
 * Parallel two-level allreduce (CANN's InsAllReduceParallelExecutor with the mesh and NHR
 * reduce-scatter and all-gather templates; its ReduceParallelExecutor runs the same steps): each
 * loop is cut into part 0 (e/8 of it, e from HkParallelEighths: CANN's CalcParallelDataSplitRatio
 * with one port per peer) and part 1. Threads: 0 leads; 1 leads the server's mesh (workers
 * 3..L+1); 2 runs the NHR among the servers. Four phases, each the mesh on one part and the NHR on
 * the other at the same time (thread 0 starts threads 1 and 2 and joins them between phases):
 *   1. part 0: level 0 reduce-scatter (into B0)   | part 1: copy into D1, level 1 reduce-scatter on D1
 *   2. part 0: level 1 reduce-scatter on B0       | part 1: level 0 reduce-scatter of my D1 part (into B1)
 *   3. part 0: level 1 all-gather on B0           | part 1: level 0 all-gather of B1 into my D1 part
 *   4. part 0: level 0 all-gather into the output | part 1: level 1 all-gather on D1, copy to the output
 * Buffer: A0 (L slots of a part-0 chunk), B0, D1 (part 1), A1 (L slots of a part-1 piece), B1; for
 * a reduction the kernel computes the scratch mirrors C0 (of B0) and E1 (of D1); without an output
 * (reduce's non-roots) O0, where part 0 is gathered.
 */
struct HkArPar {
    uint64_t total;   /* elements of a full loop */
    uint32_t eighths; /* part 0 = cnt * eighths / 8 */
    uint64_t c0, c1;  /* bytes of a part-0 chunk and of a part-1 piece (slot sizes) */
    uint64_t offA0, offB0, offC0, offD1, offE1, offA1, offB1, offO0, end;
};

static inline void HkArParLayout(const HkCall &c, uint32_t L, uint32_t S, bool staged, bool own0, uint64_t total,
                                 HkArPar *p)
{
    p->total = total;
    const uint64_t part0 = total * p->eighths / 8;
    const uint64_t part1 = total - part0;
    p->c0 = HkAlignUp((part0 + L - 1) / L * c.unit);
    p->c1 = HkAlignUp(((part1 + S - 1) / S + L - 1) / L * c.unit);
    uint64_t at = 0;
    p->offA0 = at;
    at += L * p->c0;
    p->offB0 = at;
    at += p->c0;
    p->offC0 = staged ? at : HK_NO_SCRATCH;
    at += staged ? p->c0 : 0;
    p->offD1 = at;
    at += HkAlignUp(part1 * c.unit);
    p->offE1 = staged ? at : HK_NO_SCRATCH;
    at += staged ? HkAlignUp(part1 * c.unit) : 0;
    p->offA1 = at;
    at += L * p->c1;
    p->offB1 = at;
    at += p->c1;
    p->offO0 = own0 ? at : HK_NO_SCRATCH;
    at += own0 ? HkAlignUp(part0 * c.unit) : 0;
    p->end = at;
}

/* The loop of the parallel allreduce that fits the buffer (and its layout in *p), 0 with an error
 * logged when none does. `own0`: keep an O0 region (reduce). */
static inline uint64_t HkArParPlan(const HkCall &c, const HkLevels &lv, bool staged, bool own0, HkArPar *p)
{
    const uint32_t L = lv.L, S = lv.S;
    p->eighths = HkParallelEighths(L, S, 0);
    /* bytes per element of a loop, roughly: part 0 (L + 1 [+ 1] [+ L]) / L, part 1 (1 [+ 1]) + (L + 1) / (L S) */
    const double e = p->eighths / 8.0;
    const double multiple = e * (L + 1.0 + (staged ? 1.0 : 0.0) + (own0 ? L : 0.0)) / L +
                            (1.0 - e) * (1.0 + (staged ? 1.0 : 0.0) + (L + 1.0) / (static_cast<double>(L) * S));
    uint64_t total = HkLoopElems(c, multiple, 1);
    for (HkArParLayout(c, L, S, staged, own0, total, p); total != 0 && p->end > c.bufBytes;
         HkArParLayout(c, L, S, staged, own0, total, p)) {
        total -= total / 64 + 1;  /* the regions' rounding: a little less per loop */
    }
    if (total == 0 || p->end > c.bufBytes) {
        OP_LOG_ERROR("%s: HCCL buffer too small (%llu bytes usable), tag %s", c.name,
                     static_cast<unsigned long long>(c.bufBytes), c.param.tag);
        return 0;
    }
    return total;
}

/* One loop of `cnt` elements from `in` into `out` (null: the result stays in the buffer, part 0 at
 * offO0 and part 1 at offD1: reduce copies it out on the root). */
static inline HcclResult HkArParLoop(const HkCall &c, const HkLevels &lv, const HkArPar &p, const uint8_t *in,
                                     uint8_t *out, uint64_t cnt)
{
    const HkGroup &g0 = lv.g[0];
    const HkGroup &g1 = lv.g[1];
    const uint32_t intra = 1, inter = 2, intraWorkers = 3;
    const uint64_t part0 = cnt * p.eighths / 8;
    const uint64_t part1 = cnt - part0;
    uint64_t f0 = 0, n0 = 0, f1 = 0, n1 = 0;
    HkChunkRange(part0, g0.n, g0.me, &f0, &n0);  /* my chunk of part 0 (level 0) */
    HkChunkRange(part1, g1.n, g1.me, &f1, &n1);  /* my part of part 1 (level 1) */
    const uint8_t *in1 = in + part0 * c.unit;
    uint8_t *d1 = c.buf + p.offD1;
    uint8_t *mine1 = d1 + f1 * c.unit;
    uint8_t *out0 = out != nullptr ? out : c.buf + p.offO0;
    /* 1 */
    HK_TRY(HkFork(c, 0, 1, 2));
    HK_TRY(HkMeshReduceScatter(c, g0, intra, intraWorkers, in, part0, p.offA0, p.c0, c.buf + p.offB0));
    HK_TRY(HkCopy(c.param, c.Th(inter), d1, in1, part1 * c.unit));
    HK_TRY(HkNhrReduceScatter(c, g1, c.Th(inter), p.offD1, part1, p.offE1));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 2 */
    HK_TRY(HkFork(c, 0, 1, 2));
    HK_TRY(HkMeshReduceScatter(c, g0, intra, intraWorkers, mine1, n1, p.offA1, p.c1, c.buf + p.offB1));
    HK_TRY(HkNhrReduceScatter(c, g1, c.Th(inter), p.offB0, n0, p.offC0));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 3 */
    HK_TRY(HkFork(c, 0, 1, 2));
    HK_TRY(HkMeshAllGather(c, g0, intra, intraWorkers, HkStage{p.offB1, 0, false}, n1, mine1, c.buf + p.offB1));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(inter), p.offB0, n0));
    HK_TRY(HkJoin(c, 0, 1, 2));
    /* 4 */
    HK_TRY(HkFork(c, 0, 1, 2));
    HK_TRY(HkMeshAllGather(c, g0, intra, intraWorkers, HkStage{p.offB0, 0, false}, part0, out0, c.buf + p.offB0));
    HK_TRY(HkNhrAllGather(c, g1, c.Th(inter), p.offD1, part1));
    if (out != nullptr) {
        HK_TRY(HkCopy(c.param, c.Th(inter), out + part0 * c.unit, d1, part1 * c.unit));
    }
    return HkJoin(c, 0, 1, 2);
}


/* ---- pieces of the built-ins not (yet) built from the blocks above: rooted collectives, --------
 * alltoall(v), send/recv, barrier. */

/* Main thread -> workers 1..k: "start" (each worker must HkWorkerStart first). */
static inline HcclResult HkFanOut(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t k)
{
    for (uint32_t i = 1; i <= k; ++i) {
        OP_CHECK(param.tag, HcommThreadNotifyRecordOnThread(resCtx.threads[0], resCtx.threads[i], HK_SLOT_START));
    }
    return HCCL_SUCCESS;
}

/* Worker i waits for the main thread's "start". */
static inline HcclResult HkWorkerStart(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t i)
{
    OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(resCtx.threads[i], HK_SLOT_START, param.notifyTimeout));
    return HCCL_SUCCESS;
}

/* Worker i (1..k) has enqueued its last task: join the reverse chain k -> k-1 -> ... -> 1 -> main. */
static inline HcclResult HkWorkerFinish(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t i, uint32_t k)
{
    if (i < k) {
        OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(resCtx.threads[i], HK_SLOT_FINISH, param.notifyTimeout));
    }
    OP_CHECK(param.tag, HcommThreadNotifyRecordOnThread(resCtx.threads[i], resCtx.threads[i - 1], HK_SLOT_FINISH));
    return HCCL_SUCCESS;
}

/* Main thread waits until workers 1..k have all finished (k = 0: nothing). */
static inline HcclResult HkFanIn(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t k)
{
    if (k != 0) {
        OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(resCtx.threads[0], HK_SLOT_FINISH, param.notifyTimeout));
    }
    return HCCL_SUCCESS;
}

/* Bytes usable in every HCCL buffer of a mesh operator (own buffer and every peer's), the same
 * on every rank; 0 with an error logged when a channel is missing. */
static inline uint64_t HkMeshBufferBytes(const OpParam &param, const AlgResourceCtx &resCtx)
{
    uint64_t bytes = resCtx.localBuffer.size;
    for (uint32_t p = 0; p < resCtx.rankSize; ++p) {
        if (p == resCtx.rank) {
            continue;
        }
        if (HkChannel(param, resCtx, p) == 0) {
            return 0;
        }
        bytes = HkMin(bytes, resCtx.channels[p].remoteBuffer.size);
    }
    return bytes;
}



/* Staging slices for a message of `totalBytes` per part in a buffer of `bufferBytes` split into
 * `parts` regions (one per reader/writer). Small messages (all parts together at most
 * HK_PIPELINE_BYTES and fitting the buffer) go in one round with whole regions; larger ones in
 * double-buffered rounds of at most HK_PIPELINE_BYTES (all parts together) and half the buffer,
 * so that round k+1 is staged while round k is read. *sliceBytes = bytes per region per round
 * (0: buffer too small), *halfBytes = offset of the second half (0 when single-buffered). */
#define HK_PIPELINE_BYTES (4ull * 1024 * 1024)

static inline void HkStagePlan(uint64_t totalBytes, uint64_t bufferBytes, uint32_t parts, uint64_t *sliceBytes,
                               uint64_t *halfBytes)
{
    if (parts == 0) {
        parts = 1;
    }
    if (totalBytes * parts <= HkMin(bufferBytes, HK_PIPELINE_BYTES)) {
        *sliceBytes = totalBytes;
        *halfBytes = 0;
        return;
    }
    *sliceBytes = HkSliceBytes(HkMin(bufferBytes / 2, HK_PIPELINE_BYTES) / parts);
    *halfBytes = *sliceBytes * parts;
}

/* A local copy that runs concurrently with the main thread's work: on worker thread 1 (started
 * and joined with the HK_SLOT_START / HK_SLOT_FINISH slots), or on the main thread when the
 * operator has a single thread. *joined tells HkSideCopyJoin whether there is a worker to join.
 * Empty and self copies are skipped. */
static inline HcclResult HkSideCopyStart(const OpParam &param, const AlgResourceCtx &resCtx, void *dst,
                                         const void *src, uint64_t bytes, bool *joined)
{
    *joined = false;
    if (bytes == 0 || dst == src) {
        return HCCL_SUCCESS;
    }
    if (resCtx.threadNum < 2) {
        return HkCopy(param, resCtx.threads[0], dst, src, bytes);
    }
    OP_CHECK(param.tag, HkFanOut(param, resCtx, 1));
    OP_CHECK(param.tag, HkWorkerStart(param, resCtx, 1));
    OP_CHECK(param.tag, HcommLocalCopyOnThread(resCtx.threads[1], dst, src, bytes));
    OP_CHECK(param.tag, HkWorkerFinish(param, resCtx, 1, 1));
    *joined = true;
    return HCCL_SUCCESS;
}

static inline HcclResult HkSideCopyJoin(const OpParam &param, const AlgResourceCtx &resCtx, bool joined)
{
    return joined ? HkFanIn(param, resCtx, 1) : HCCL_SUCCESS;
}


/* ---- pipelined staging (added with alltoall/alltoallv/send_recv) ---------------------------
 * A message of `bytes` that a reader fetches from a staging region of `regionBytes` in the
 * writer's HCCL buffer: one round when it is small (<= HK_PIPE_MIN_BYTES) and fits the region,
 * else `rounds` slices of `slice` bytes (the last may be shorter) double-buffered in the two
 * halves of the region (slice t at offset (t % 2) * half): the writer stages slice t+1 while the
 * reader still reads slice t. Measured on the emulator at 2 ranks, 64 MiB send/recv: 2 MiB
 * pipelined slices take ~7 ms against ~15 ms unpipelined. Depends only on `bytes` and the
 * job-wide buffer size, so both ends of a pair cut the same slices. */
#define HK_PIPE_MIN_BYTES (4ull << 20)
#define HK_PIPE_SLICE_BYTES (2ull << 20)

typedef struct {
    uint64_t slice;  /* bytes per round (0 = nothing to move) */
    uint64_t half;   /* offset of the second half of the region (0 = single-buffered) */
    uint64_t rounds;
} HkPipe;

static inline HkPipe HkPipePlan(uint64_t bytes, uint64_t regionBytes)
{
    HkPipe plan = {0, 0, 0};
    if (bytes == 0) {
        return plan;
    }
    if (bytes <= HkMin(HkSliceBytes(regionBytes), HK_PIPE_MIN_BYTES)) {
        plan.slice = bytes;
        plan.rounds = 1;
        return plan;
    }
    plan.slice = HkMin(HkSliceBytes(regionBytes / 2), HK_PIPE_SLICE_BYTES);
    plan.half = plan.slice;
    plan.rounds = plan.slice == 0 ? 0 : (bytes + plan.slice - 1) / plan.slice;
    return plan;
}

/* OpParam.algo must be HK_ALGO_AUTO or one of `allowed` (a mask of 1u << HK_ALGO_*); otherwise
 * HCCL_E_PARA with an error logged (every rank gets the same algo, so every rank fails alike). */
static inline HcclResult HkAlgoCheck(const OpParam &param, uint32_t allowed)
{
    if (param.algo != HK_ALGO_AUTO && (param.algo >= 32 || (allowed & (1u << param.algo)) == 0)) {
        OP_LOG_ERROR("algo %u is not implemented by this operator (allowed mask 0x%x, 0 = auto), tag %s",
                     param.algo, allowed, param.tag);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* The channel helpers of a mesh kernel that names its peers by rank. A kernel derives its context
 * from it (struct Ctx : HkPeers { ... }, built as Ctx c{{param, resCtx}, ...}); Record / Wait
 * enqueue a notify on thread `t` on the channel to `peer` (waits bounded by OpParam.notifyTimeout). */
struct HkPeers {
    const OpParam &param;
    const AlgResourceCtx &res;

    ChannelHandle Ch(uint32_t peer) const { return res.channels[peer].handle; }
    uint8_t *PeerBuf(uint32_t peer) const { return static_cast<uint8_t *>(res.channels[peer].remoteBuffer.addr); }
    HcclResult Record(ThreadHandle t, uint32_t peer, uint32_t slot) const
    {
        OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(t, Ch(peer), slot));
        return HCCL_SUCCESS;
    }
    HcclResult Wait(ThreadHandle t, uint32_t peer, uint32_t slot) const
    {
        OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(t, Ch(peer), slot, param.notifyTimeout));
        return HCCL_SUCCESS;
    }
};

/* On `thread`: record notify `slot` to every other rank, in rank order. */
static inline HcclResult HkRecordAll(const OpParam &param, const AlgResourceCtx &resCtx, ThreadHandle thread,
                                     uint32_t slot)
{
    for (uint32_t p = 0; p < resCtx.rankSize; ++p) {
        if (p != resCtx.rank) {
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, resCtx.channels[p].handle, slot));
        }
    }
    return HCCL_SUCCESS;
}

/* On `thread`: wait notify `slot` from every other rank, in rank order. */
static inline HcclResult HkWaitAll(const OpParam &param, const AlgResourceCtx &resCtx, ThreadHandle thread,
                                   uint32_t slot)
{
    for (uint32_t p = 0; p < resCtx.rankSize; ++p) {
        if (p != resCtx.rank) {
            OP_CHECK(param.tag,
                     HcommChannelNotifyWaitOnThread(thread, resCtx.channels[p].handle, slot, param.notifyTimeout));
        }
    }
    return HCCL_SUCCESS;
}

/* The checks a rooted mesh collective (broadcast, reduce, scatter, gather) starts with, in this
 * order: OpParam.algo is auto or mesh, the dtype has a size (*unit), the root is a rank. */
static inline HcclResult HkRootedCheck(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t *unit)
{
    OP_CHECK(param.tag, HkAlgoCheck(param, 1u << HK_ALGO_MESH));
    *unit = HkUnitSize(param);
    if (*unit == 0) {
        return HCCL_E_PARA;
    }
    OP_CHECK(param.tag, HkRootCheck(param, resCtx));
    return HCCL_SUCCESS;
}

/* HkStagePlan, HCCL_E_MEMORY with an error logged when the buffer cannot hold a slice. */
static inline HcclResult HkStagePlanFor(const OpParam &param, uint64_t totalBytes, uint64_t bufferBytes,
                                        uint32_t parts, uint64_t *sliceBytes, uint64_t *halfBytes)
{
    HkStagePlan(totalBytes, bufferBytes, parts, sliceBytes, halfBytes);
    if (*sliceBytes != 0) {
        return HCCL_SUCCESS;
    }
    if (parts > 1) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u peers), tag %s",
                     static_cast<unsigned long long>(bufferBytes), parts, param.tag);
    } else {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                     param.tag);
    }
    return HCCL_E_MEMORY;
}

/* One staged stream from a writer to a reader over channel `ch`, the read-based pattern of the
 * rooted collectives (and of send_recv's receiver). `bytes` move in slices of `slice` bytes (the
 * last shorter); slice k sits at stage + (k % 2) * half in the writer's HCCL buffer (half = 0:
 * single-buffered; HkStagePlan / HkPipePlan):
 *   writer (HkStagedWrite): stage slice k; [k > 0: wait DATA (slice k-1 read)]; record ACK
 *          ("staged"); finally wait the last DATA, so the reader never touches my buffer after I
 *          am done ("clean exit"). Every ACK is consumed before the writer exits;
 *   reader (HkStagedRead): wait ACK; Read slice k straight into dst; record DATA ("read, the half
 *          is free"); its last DATA may still be pending when it exits (the response slot). */
static inline HcclResult HkStagedWrite(const OpParam &param, ThreadHandle thread, ChannelHandle ch, uint8_t *stage,
                                       const uint8_t *src, uint64_t bytes, uint64_t slice, uint64_t half)
{
    uint64_t k = 0;
    for (uint64_t offset = 0; offset < bytes; offset += slice, ++k) {
        const uint64_t len = HkMin(slice, bytes - offset);
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage + (k % 2) * half, src + offset, len));
        if (k != 0) {
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch, HK_DATA, param.notifyTimeout));
        }
        OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch, HK_ACK));
    }
    OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch, HK_DATA, param.notifyTimeout));
    return HCCL_SUCCESS;
}

static inline HcclResult HkStagedRead(const OpParam &param, ThreadHandle thread, ChannelHandle ch,
                                      const uint8_t *stage, uint8_t *dst, uint64_t bytes, uint64_t slice,
                                      uint64_t half)
{
    uint64_t k = 0;
    for (uint64_t offset = 0; offset < bytes; offset += slice, ++k) {
        const uint64_t len = HkMin(slice, bytes - offset);
        OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch, HK_ACK, param.notifyTimeout));
        OP_CHECK(param.tag, HcommReadOnThread(thread, ch, dst + offset, stage + (k % 2) * half, len));
        OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch, HK_DATA));
    }
    return HCCL_SUCCESS;
}

/* Staged reductions (HkLocalReduce / HkReadReduce when the primitive cannot reduce the dtype/op):
 * carve the drain words (*sync, the last HK_SYNC_BYTES of the own HCCL buffer) and, with
 * `scratch` non-null, a private scratch area (*scratch, the second half of what is left) out of
 * *bufferBytes, which shrinks to the part the kernel may still stage in (the same on every rank).
 * Leaves everything as it is when the primitive reduces (*sync stays null); HCCL_E_MEMORY with an
 * error logged when the buffer is too small. */
static inline HcclResult HkStagedReduceCarve(const OpParam &param, const AlgResourceCtx &resCtx,
                                             uint64_t *bufferBytes, uint8_t **sync, uint8_t **scratch)
{
    if (HkPrimitiveReduces(param)) {
        return HCCL_SUCCESS;
    }
    if (*bufferBytes <= HK_SYNC_BYTES) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(*bufferBytes),
                     param.tag);
        return HCCL_E_MEMORY;
    }
    uint8_t *const myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);
    *sync = myBuf + *bufferBytes - HK_SYNC_BYTES;
    if (scratch == nullptr) {
        *bufferBytes -= HK_SYNC_BYTES;
    } else {
        *bufferBytes = HkSliceBytes((*bufferBytes - HK_SYNC_BYTES) / 2);
        *scratch = myBuf + *bufferBytes;
    }
    return HCCL_SUCCESS;
}

#endif /* HCOMM_KIT_AICPU_KERNELS_HK_COLL_H */
