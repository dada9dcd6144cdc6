/*
 * hk_coll.h -- helpers shared by hcomm-kit's built-in collective operators (aicpu_kernels/).
 *
 * Each operator directory links this file as inc/hk_coll.h and includes it from exec_op.cc AFTER
 * its own headers (OpParam, AlgResourceCtx, OP_CHECK and OP_LOG_ERROR come from there).
 *
 * Conventions every built-in follows (so that they can share channels, notify slots and the
 * HCCL buffer of a communicator with each other and with users' operators):
 *  - channel notify slots: only HK_ACK (0) and HK_DATA (1) are used (op.toml channels.notifies = 2),
 *    under the "notify discipline across calls" below;
 *  - clean exit: when an operator records "done", no peer will touch this rank's HCCL buffer for
 *    this call any more (every remote read of my buffer is acknowledged, every remote write into a
 *    peer's buffer is made only after that peer said it is ready). The next call may therefore
 *    overwrite its own buffer right away;
 *  - device threads: threads[0] is the main thread; workers 1..k are started by HkFanOut (thread
 *    slot HK_SLOT_START) and joined by HkFanIn (thread slot HK_SLOT_FINISH, a reverse chain, so two
 *    slots per thread suffice for any rank count; op.toml notifies_per_thread = 2);
 *  - algorithm ids (OpParam.algo; 0 = let the kernel choose by size and rank count) are below and
 *    mirrored in hcomm_kit/ops/collectives.py (ALGORITHMS), checked by tests/test_collectives.py;
 *  - results are deterministic: a reduction always combines contributions in the same order for a
 *    given (count, rank count, algorithm, HCCL buffer size).
 */
#ifndef HCOMM_KIT_AICPU_KERNELS_HK_COLL_H
#define HCOMM_KIT_AICPU_KERNELS_HK_COLL_H

#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmath>

#include <hccl/hccl_types.h>
#include <hccl/hcomm_primitives.h>

/* ---- algorithm ids (OpParam.algo) ----------------------------------------------------------- */
#define HK_ALGO_AUTO 0u
#define HK_ALGO_RING 1u       /* allreduce (reduce-scatter + allgather), allgather, reduce-scatter */
#define HK_ALGO_MESH 2u       /* one-shot: every rank talks to every peer directly (thread per peer) */
#define HK_ALGO_PAIRWISE 3u   /* alltoall(v): step s exchanges with rank +/- s */
#define HK_ALGO_HIERARCHICAL 4u /* allreduce, allgather: two levels, servers (OpParam.hierInfo, below) */

/* ---- channel and thread notify slots -------------------------------------------------------- */
#define HK_ACK 0u              /* channel, the "initiative" slot: e.g. "my slice is staged" / "you may write" */
#define HK_DATA 1u             /* channel, the "response" slot: e.g. "I have read it" (rules further down) */
#define HK_SLOT_START 1u       /* thread: main -> worker "start" */
#define HK_SLOT_FINISH 2u      /* thread: worker -> previous thread "finished" (reverse chain) */

/* Slices are aligned to 128 bytes (a multiple of every element size) and capped at 256 MiB like
 * CANN's examples. HCCL_BUFFSIZE is job-wide, so every rank computes the same slice size. */
#define HK_SLICE_ALIGN_BYTES 128ull
#define HK_MAX_SLICE_BYTES (256ull * 1024 * 1024)

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
 * (The ring/mesh/p2p patterns of templates/ and CANN's send/recv example keep both rules.)
 */

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

/* Local copy that skips empty and self copies. */
static inline HcclResult HkCopy(const OpParam &param, ThreadHandle thread, void *dst, const void *src, uint64_t bytes)
{
    if (bytes != 0 && dst != src) {
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, dst, src, bytes));
    }
    return HCCL_SUCCESS;
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

/* Integer arithmetic in an unsigned type at least as wide as int: wraps modulo 2^n (as numpy). */
template <class T> struct HkUnsigned;
template <> struct HkUnsigned<int8_t> { typedef uint32_t Type; };
template <> struct HkUnsigned<int32_t> { typedef uint32_t Type; };
template <> struct HkUnsigned<int64_t> { typedef uint64_t Type; };

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
__attribute__((no_sanitize("thread"))) static inline float HkFloatOp(float a, float b, int32_t op)
{
    switch (op) {
        case HCOMM_REDUCE_SUM: return a + b;
        case HCOMM_REDUCE_PROD: return a * b;
        case HCOMM_REDUCE_MAX: return (a != a || b != b) ? (a != a ? a : b) : (a < b ? b : a);
        default: return (a != a || b != b) ? (a != a ? a : b) : (b < a ? b : a);
    }
}

/* dst[i] = dst[i] op src[i] in the kernel's own code (local memory; call HkDrain first). */
__attribute__((no_sanitize("thread"))) static inline HcclResult HkLoopReduce(const OpParam &param, void *dst,
                                                                            const void *src, uint64_t count)
{
    const int32_t op = static_cast<int32_t>(param.reduceOp);
    switch (static_cast<int32_t>(param.dataType)) {
        case HCOMM_DATA_TYPE_INT8: HkLoopInt<int8_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_INT32: HkLoopInt<int32_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_INT64: HkLoopInt<int64_t>(dst, src, count, op); return HCCL_SUCCESS;
        case HCOMM_DATA_TYPE_FP32: {
            float *d = static_cast<float *>(dst);
            const float *s = static_cast<const float *>(src);
            for (uint64_t i = 0; i < count; ++i) {
                d[i] = HkFloatOp(d[i], s[i], op);
            }
            return HCCL_SUCCESS;
        }
        case HCOMM_DATA_TYPE_FP16: {
            uint16_t *d = static_cast<uint16_t *>(dst);
            const uint16_t *s = static_cast<const uint16_t *>(src);
            for (uint64_t i = 0; i < count; ++i) {
                d[i] = HkFloatToHalf(HkFloatOp(HkHalfToFloat(d[i]), HkHalfToFloat(s[i]), op));
            }
            return HCCL_SUCCESS;
        }
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

/* ---- automatic algorithm choice (OpParam.algo == HK_ALGO_AUTO) ---------------------------------
 * (added with allreduce/allgather/reduce_scatter) The ONE place for the size/rank-count
 * thresholds of allreduce, allgather and reduce_scatter. `bytes` is the per-rank message:
 * allreduce count * size, allgather and reduce_scatter the per-rank block (count * size). Every
 * rank computes the same answer (same inputs).
 *  - allreduce: HK_ALGO_MESH (one-shot: every rank reads every peer's whole input and reduces in
 *    rank order; 2 notify rounds, n reads of `bytes`) up to HK_AR_ONESHOT_MAX_BYTES (2 ranks) or
 *    HK_AR_ONESHOT_MAX_BYTES_MANY (more ranks: the ring's 2(n-1) notify rounds cost more there),
 *    else HK_ALGO_RING (reduce-scatter ring + allgather by reads, ~3 passes). Crossovers measured
 *    on the emulator: 2 ranks ~64-256 KiB, 4 ranks ~1 MiB, 8 ranks 256 KiB-1 MiB.
 *  - allgather / reduce_scatter: HK_ALGO_MESH (each block moves once, peers in parallel; fewer
 *    memory passes than the ring on shared-memory links) up to HK_MESH_MAX_RANKS ranks, else RING. */
/* Large messages move in pieces of at most HK_CACHE_SLICE_BYTES per peer region/chunk, so a piece
 * one rank stages or writes is still in the (shared) last-level cache when the peer reads or
 * reduces it (measured on the emulator, 2 ranks: 64 MiB allreduce 5.7 -> ~8 GB/s). */
#define HK_CACHE_SLICE_BYTES (512ull * 1024)

#define HK_COLL_ALLREDUCE 0u
#define HK_COLL_ALLGATHER 1u
#define HK_COLL_REDUCE_SCATTER 2u
#define HK_AR_ONESHOT_MAX_BYTES (64ull * 1024)
#define HK_AR_ONESHOT_MAX_BYTES_MANY (512ull * 1024)
#define HK_MESH_MAX_RANKS 64u

static inline uint32_t HkChooseAlgo(uint32_t coll, uint64_t bytes, uint32_t rankSize)
{
    if (coll == HK_COLL_ALLREDUCE) {
        return bytes <= (rankSize <= 2 ? HK_AR_ONESHOT_MAX_BYTES : HK_AR_ONESHOT_MAX_BYTES_MANY) ? HK_ALGO_MESH
                                                                                                : HK_ALGO_RING;
    }
    return rankSize <= HK_MESH_MAX_RANKS ? HK_ALGO_MESH : HK_ALGO_RING;
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

/* ---- pieces of protocol several built-ins share (issue 19: folded out of the kernels) -------- */

/* Propagate the result of a helper that logged its own failure (OP_CHECK would log it again). */
#define HK_TRY(call)                      \
    do {                                  \
        const HcclResult hkRet_ = (call); \
        if (hkRet_ != HCCL_SUCCESS) {     \
            return hkRet_;                \
        }                                 \
    } while (0)

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

/* allgather / reduce_scatter: OpParam.algo resolved to ring or mesh, and mesh has a thread per
 * rank; HCCL_E_PARA with an error logged otherwise (`what` names the operator). */
static inline HcclResult HkRingMeshCheck(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t algo,
                                         const char *what)
{
    if (algo != HK_ALGO_MESH && algo != HK_ALGO_RING) {
        OP_LOG_ERROR("unknown algo %u (1 = ring, 2 = mesh), tag %s", algo, param.tag);
        return HCCL_E_PARA;
    }
    if (algo == HK_ALGO_MESH && resCtx.threadNum < resCtx.rankSize) {
        OP_LOG_ERROR("mesh %s needs %u threads, got %u, tag %s", what, resCtx.rankSize, resCtx.threadNum, param.tag);
        return HCCL_E_PARA;
    }
    return HCCL_SUCCESS;
}

/* allgather / reduce_scatter: the HCCL buffer of `bufferBytes` holds `regions` regions of *region
 * bytes (cache-sized: HK_CACHE_SLICE_BYTES at most, aligned); a block moves in slices of *slice
 * bytes (whole elements). HCCL_E_MEMORY with an error logged when not one element fits. */
static inline HcclResult HkBlockSlices(const OpParam &param, const AlgResourceCtx &resCtx, uint64_t bufferBytes,
                                       uint32_t regions, uint32_t unit, uint64_t *region, uint64_t *slice)
{
    *region = HkSliceBytes(HkMin(bufferBytes / regions, HK_CACHE_SLICE_BYTES));
    *slice = *region / unit * unit;
    if (*slice == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u ranks), tag %s",
                     static_cast<unsigned long long>(bufferBytes), resCtx.rankSize, param.tag);
        return HCCL_E_MEMORY;
    }
    return HCCL_SUCCESS;
}

/* ---- two-level layout (added with HK_ALGO_HIERARCHICAL, issue 20) ----------------------------
 * A two-level collective needs the communicator's servers. CANN's own operators learn them on the
 * host: TopoMatchMultilevel (hicann/hccl src/ops/op_common/topo/topo_match_multilevel.cc; its
 * rank-graph queries are host code, compiled out of the AICPU build) reads the rank graph, the
 * executor serializes the per-level rank lists (AlgHierarchyInfoForAllLevel) into device memory
 * and the kernel finds them through a pointer in its OpParam. The built-ins do the same: the host
 * sets OpParam.hierInfo to a device copy of these words, made once per communicator from its
 * topology (hcomm_kit/ops/collectives.py, from comm.topology = the emulator's rank graph):
 *     uint32_t words[2 + rankSize] = { rankSize, serverNum, server of rank 0, ..., of rank n-1 }
 * Level 0 = the ranks of my server, ascending (my local index = my place among them); level 1 =
 * the ranks with my local index, one per server, in server order. Every server must hold the
 * same number of ranks (CANN's sequence executors are symmetric too). */
#define HK_HIER_MAX_RANKS 64u

struct HkHier {
    uint32_t L;                         /* ranks per server (level 0) */
    uint32_t S;                         /* servers (level 1) */
    uint32_t li;                        /* my local index */
    uint32_t si;                        /* my server */
    uint32_t grid[HK_HIER_MAX_RANKS];   /* grid[t * L + j]: local index j of server t */
    uint64_t bufferBytes;               /* usable in my HCCL buffer and every level peer's */

    uint32_t Local(uint32_t j) const { return grid[si * L + j]; }  /* my server's ranks */
    uint32_t Inter(uint32_t t) const { return grid[t * L + li]; }  /* my level-1 group */
};

/* Reads OpParam.hierInfo (`info`) into *h and checks it: the layout names this communicator's
 * ranks, servers are equal, and every level-0 and level-1 peer has a channel (only those: a link
 * between other pairs may be down). HCCL_E_PARA with an error logged otherwise. */
static inline HcclResult HkHierLayout(const OpParam &param, const AlgResourceCtx &resCtx, const void *info,
                                      HkHier *h)
{
    const uint32_t n = resCtx.rankSize;
    if (info == nullptr) {
        OP_LOG_ERROR("the hierarchical algorithm needs OpParam.hierInfo (the host's two-level layout), got null, "
                     "tag %s", param.tag);
        return HCCL_E_PARA;
    }
    uint32_t head[2];
    memcpy(head, info, sizeof head);
    if (head[0] != n || n > HK_HIER_MAX_RANKS || head[1] == 0 || head[1] > n) {
        OP_LOG_ERROR("OpParam.hierInfo describes %u ranks in %u servers; the communicator has %u ranks (at most %u), "
                     "tag %s", head[0], head[1], n, HK_HIER_MAX_RANKS, param.tag);
        return HCCL_E_PARA;
    }
    uint32_t server[HK_HIER_MAX_RANKS];
    memcpy(server, static_cast<const uint32_t *>(info) + 2, n * sizeof(uint32_t));
    h->S = head[1];
    h->L = n / h->S;
    h->li = 0;
    h->si = 0;
    uint32_t fill[HK_HIER_MAX_RANKS] = {0};
    for (uint32_t r = 0; r < n; ++r) {
        const uint32_t s = server[r];
        if (s >= h->S || fill[s] >= h->L || n % h->S != 0) {
            OP_LOG_ERROR("OpParam.hierInfo: rank %u is on server %u; the %u servers must hold %u/%u ranks each "
                         "(the two-level algorithm needs servers of equal size), tag %s", r, s, h->S, n, h->S,
                         param.tag);
            return HCCL_E_PARA;
        }
        if (r == resCtx.rank) {
            h->si = s;
            h->li = fill[s];
        }
        h->grid[s * h->L + fill[s]++] = r;
    }
    h->bufferBytes = resCtx.localBuffer.size;
    for (uint32_t k = 0; k < h->L + h->S; ++k) {
        const uint32_t peer = k < h->L ? h->Local(k) : h->Inter(k - h->L);
        if (peer == resCtx.rank) {
            continue;
        }
        if (HkChannel(param, resCtx, peer) == 0) {
            return HCCL_E_PARA;
        }
        h->bufferBytes = HkMin(h->bufferBytes, resCtx.channels[peer].remoteBuffer.size);
    }
    return HCCL_SUCCESS;
}

/* On the main thread: record notify `slot` to my level-0 peers (level = 0) or level-1 peers (1). */
static inline HcclResult HkHierRecord(const OpParam &param, const AlgResourceCtx &resCtx, const HkHier &h,
                                      uint32_t level, uint32_t slot)
{
    const uint32_t k = level == 0 ? h.L : h.S;
    for (uint32_t i = 0; i < k; ++i) {
        const uint32_t p = level == 0 ? h.Local(i) : h.Inter(i);
        if (p != resCtx.rank) {
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(resCtx.threads[0], resCtx.channels[p].handle, slot));
        }
    }
    return HCCL_SUCCESS;
}

/* On the main thread: wait notify `slot` from my level-0 (level = 0) or level-1 (1) peers. */
static inline HcclResult HkHierWait(const OpParam &param, const AlgResourceCtx &resCtx, const HkHier &h,
                                    uint32_t level, uint32_t slot)
{
    const uint32_t k = level == 0 ? h.L : h.S;
    for (uint32_t i = 0; i < k; ++i) {
        const uint32_t p = level == 0 ? h.Local(i) : h.Inter(i);
        if (p != resCtx.rank) {
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(resCtx.threads[0], resCtx.channels[p].handle, slot,
                                                               param.notifyTimeout));
        }
    }
    return HCCL_SUCCESS;
}

#endif /* HCOMM_KIT_AICPU_KERNELS_HK_COLL_H */
