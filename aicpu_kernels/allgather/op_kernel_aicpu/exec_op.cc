/*
 * exec_op.cc -- orchestration of operator "allgather" (pattern: mesh-allgather).
 *
 * This file is YOURS: hcomm-kit wrote it once and never overwrites it (neither
 * `hcomm-kit new --update` nor `--force` touch it; delete it to get the pattern back).
 *
 * Rules of the Hcomm data plane used below (hcomm.md §1.5-§1.6, §3.1-§3.2):
 *  - every ...OnThread call only enqueues a task on that thread's FIFO; tasks of one thread run
 *    in order, different threads run concurrently and are ordered only by notifies;
 *  - notifies are binary flags: a record sets, a wait blocks its thread until set and clears it.
 *    Never record a slot twice before the matching wait has consumed the first record;
 *  - a channel record sets the slot at the PEER's end, a channel wait clears the slot at ours;
 *  - copy/write/read lengths are in bytes, reduce counts in elements; remote Write destinations
 *    and Read sources must lie inside the peer's HCCL buffer.
 */
#include "exec_op.h"
#include "allgather_log.h"

namespace ops_allgather {
namespace {

// Channel slots (one channel per peer).
constexpr uint32_t ACK = ALLGATHER_CHANNEL_NOTIFY_ACK;    // "my region for your slice is free"
constexpr uint32_t DATA = ALLGATHER_CHANNEL_NOTIFY_DATA;  // "my slice has landed in your buffer"
// Thread slots (every thread; slot 0 of the main thread is the host's "go").
constexpr uint32_t FAN_OUT = ALLGATHER_THREAD_NOTIFY_BASE + 0;  // main -> worker i: "slice staged, go"
constexpr uint32_t FAN_IN = ALLGATHER_THREAD_NOTIFY_BASE + 1;   // worker i+1 -> worker i (-> main): "done"

// Slices are cut so that every HCCL buffer involved can hold them; aligned to 128 bytes (a
// multiple of every element size) and capped at 256 MiB like CANN's examples. HCCL_BUFFSIZE is
// a job-wide setting, so every rank computes the same slice size.
constexpr uint64_t SLICE_ALIGN_BYTES = 128;
constexpr uint64_t MAX_SLICE_BYTES = 256ULL * 1024 * 1024;

uint64_t SliceBytes(uint64_t bufferBytes)
{
    const uint64_t bytes = bufferBytes < MAX_SLICE_BYTES ? bufferBytes : MAX_SLICE_BYTES;
    return bytes / SLICE_ALIGN_BYTES * SLICE_ALIGN_BYTES;
}

uint64_t Min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

// Copy the whole input to the output on one thread (single rank, or the rank's own block).
HcclResult CopyLocal(const OpParam &param, ThreadHandle thread, void *dst, const void *src, uint64_t bytes)
{
    if (bytes != 0 && dst != src) {
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, dst, src, bytes));
    }
    return HCCL_SUCCESS;
}

}  // namespace

/*
 * Pattern "mesh-allgather": output = [input of rank 0, input of rank 1, ...], one device thread
 * per peer, like CANN's allgather example (hcomm.md §3.12).
 *
 * Every HCCL buffer is cut into rankSize regions; region r holds the current slice of rank r.
 * Per slice:
 *   - main thread: copy my input slice into my region, fan out to the workers, copy it into my
 *     own block of the output;
 *   - worker i (peer p = rank + i): record ACK to p (my region p is free), wait for p's ACK,
 *     write my region into region `rank` of p's buffer, record DATA to p, wait for p's DATA
 *     (p's slice is in my region p), copy region p into block p of the output;
 *   - fan in: worker n-1 -> n-2 -> ... -> 1 -> main, so that every thread slot has exactly one
 *     producer and is consumed before it is recorded again; main starts the next slice only
 *     when every worker is done with this one.
 */
HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    const uint32_t unitSize = OpDataTypeSize(param.dataType);
    if (unitSize == 0) {
        OP_LOG_ERROR("unsupported dataType %d, tag %s", static_cast<int>(param.dataType), param.tag);
        return HCCL_E_PARA;
    }
    const uint64_t blockBytes = param.count * unitSize;  // one rank's contribution
    const uint32_t rank = resCtx.rank;
    const uint32_t rankSize = resCtx.rankSize;
    const uint32_t timeout = param.notifyTimeout;
    const ThreadHandle mainThread = resCtx.threads[0];
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (rankSize == 1) {
        return CopyLocal(param, mainThread, output, input, blockBytes);
    }
    if (blockBytes == 0) {
        return HCCL_SUCCESS;
    }
    if (resCtx.threadNum < rankSize) {
        OP_LOG_ERROR("needs %u threads (main + one per peer), got %u, tag %s", rankSize, resCtx.threadNum,
                     param.tag);
        return HCCL_E_PARA;
    }
    uint64_t bufferBytes = resCtx.localBuffer.size;
    for (uint32_t p = 0; p < rankSize; ++p) {
        if (p == rank) {
            continue;
        }
        if (resCtx.channels[p].handle == 0) {
            OP_LOG_ERROR("missing channel to rank %u, tag %s", p, param.tag);
            return HCCL_E_PARA;
        }
        bufferBytes = Min(bufferBytes, resCtx.channels[p].remoteBuffer.size);
    }
    const uint64_t regionBytes = SliceBytes(bufferBytes / rankSize);
    if (regionBytes == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u ranks), tag %s",
                     static_cast<unsigned long long>(bufferBytes), rankSize, param.tag);
        return HCCL_E_MEMORY;
    }
    uint8_t *myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);
    uint8_t *myRegion = myBuf + rank * regionBytes;

    for (uint64_t offset = 0; offset < blockBytes; offset += regionBytes) {
        const uint64_t len = Min(regionBytes, blockBytes - offset);

        // Main thread: stage my slice, start the workers, then fill my own output block.
        OP_CHECK(param.tag, HcommLocalCopyOnThread(mainThread, myRegion, input + offset, len));
        for (uint32_t i = 1; i < rankSize; ++i) {
            OP_CHECK(param.tag, HcommThreadNotifyRecordOnThread(mainThread, resCtx.threads[i], FAN_OUT));
        }
        OP_CHECK(param.tag, CopyLocal(param, mainThread, output + rank * blockBytes + offset, input + offset, len));

        // Worker i exchanges slices with peer (rank + i) % rankSize.
        for (uint32_t i = 1; i < rankSize; ++i) {
            const ThreadHandle worker = resCtx.threads[i];
            const uint32_t peer = (rank + i) % rankSize;
            const ChannelInfo &ch = resCtx.channels[peer];
            uint8_t *peerRegionForMe = static_cast<uint8_t *>(ch.remoteBuffer.addr) + rank * regionBytes;

            OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(worker, FAN_OUT, timeout));
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(worker, ch.handle, ACK));
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(worker, ch.handle, ACK, timeout));
            OP_CHECK(param.tag, HcommWriteOnThread(worker, ch.handle, peerRegionForMe, myRegion, len));
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(worker, ch.handle, DATA));
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(worker, ch.handle, DATA, timeout));
            OP_CHECK(param.tag, HcommLocalCopyOnThread(worker, output + peer * blockBytes + offset,
                                                       myBuf + peer * regionBytes, len));
        }

        // Fan in as a chain: worker n-1 -> ... -> worker 1 -> main.
        for (uint32_t i = rankSize - 1; i >= 1; --i) {
            const ThreadHandle worker = resCtx.threads[i];
            if (i + 1 < rankSize) {
                OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(worker, FAN_IN, timeout));
            }
            const ThreadHandle target = (i == 1) ? mainThread : resCtx.threads[i - 1];
            OP_CHECK(param.tag, HcommThreadNotifyRecordOnThread(worker, target, FAN_IN));
        }
        OP_CHECK(param.tag, HcommThreadNotifyWaitOnThread(mainThread, FAN_IN, timeout));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_allgather
