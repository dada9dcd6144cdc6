/*
 * exec_op.cc -- orchestration of operator "reduce_scatter" (pattern: ring-allreduce).
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
#include "reduce_scatter_log.h"

namespace ops_reduce_scatter {
namespace {

constexpr uint32_t ACK = REDUCE_SCATTER_CHANNEL_NOTIFY_ACK;    // receiver -> sender: "you may write the next chunk"
constexpr uint32_t DATA = REDUCE_SCATTER_CHANNEL_NOTIFY_DATA;  // sender -> receiver: "the chunk has landed"

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

// Chunk `index` of a slice of `sliceCount` elements cut into `chunks` nearly equal parts: the
// first sliceCount % chunks chunks get one element more (counts need not divide evenly).
void ChunkRange(uint64_t sliceCount, uint32_t chunks, uint32_t index, uint64_t *first, uint64_t *count)
{
    const uint64_t base = sliceCount / chunks;
    const uint64_t extra = sliceCount % chunks;
    *count = base + (index < extra ? 1 : 0);
    *first = index * base + (index < extra ? index : extra);
}

}  // namespace

/*
 * Pattern "ring-allreduce": output[i] = reduce over all ranks of input[i].
 *
 * Per slice (as much as one HCCL buffer holds), with n ranks and the slice cut into n chunks:
 *   - copy my input slice into my HCCL buffer;
 *   - reduce-scatter, n-1 steps: at step s, write-reduce chunk (rank - s) of my buffer into the
 *     same chunk of next's buffer (next_buf[c] = next_buf[c] op my_buf[c]). After the last step
 *     chunk (rank + 1) of my buffer is fully reduced;
 *   - allgather, n-1 steps: at step t, write chunk (rank + 1 - t) into next's buffer;
 *   - copy my buffer (now the full result) to the output.
 * Flow control per step: wait ACK from next (it is ready for this step), write, record DATA to
 * next; wait DATA from prev (its chunk has landed in my buffer), record ACK to prev for the
 * following step. Each slot thus alternates record/wait and is never recorded twice in a row.
 * The chunk a rank writes at a step is never the one it receives at that step, so a write never
 * races with the receiver's own send. With 2 ranks prev == next: one channel, both directions.
 */
HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    const uint32_t unitSize = OpDataTypeSize(param.dataType);
    if (unitSize == 0) {
        OP_LOG_ERROR("unsupported dataType %d, tag %s", static_cast<int>(param.dataType), param.tag);
        return HCCL_E_PARA;
    }
    const HcommDataType dataType = static_cast<HcommDataType>(param.dataType);
    const HcommReduceOp reduceOp = static_cast<HcommReduceOp>(param.reduceOp);
    const ThreadHandle thread = resCtx.aicpuThread;
    const uint32_t rank = resCtx.rank;
    const uint32_t rankSize = resCtx.rankSize;
    const uint32_t timeout = param.notifyTimeout;
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (rankSize == 1) {
        return CopyLocal(param, thread, output, input, param.count * unitSize);
    }
    if (param.count == 0) {
        return HCCL_SUCCESS;
    }

    const ChannelInfo &prev = resCtx.channels[0];
    const ChannelInfo &next = resCtx.channels[1];
    if (prev.handle == 0 || next.handle == 0) {
        OP_LOG_ERROR("missing ring channel (prev %llu, next %llu), tag %s",
                     static_cast<unsigned long long>(prev.handle), static_cast<unsigned long long>(next.handle),
                     param.tag);
        return HCCL_E_PARA;
    }
    uint8_t *myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);
    uint8_t *nextBuf = static_cast<uint8_t *>(next.remoteBuffer.addr);
    const uint64_t bufferBytes = Min(resCtx.localBuffer.size, Min(next.remoteBuffer.size, prev.remoteBuffer.size));
    const uint64_t maxSliceCount = SliceBytes(bufferBytes) / unitSize;
    if (maxSliceCount == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                     param.tag);
        return HCCL_E_MEMORY;
    }
    const uint32_t steps = 2 * (rankSize - 1);

    for (uint64_t done = 0; done < param.count; done += maxSliceCount) {
        const uint64_t sliceCount = Min(maxSliceCount, param.count - done);
        const uint64_t sliceBytes = sliceCount * unitSize;

        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, myBuf, input + done * unitSize, sliceBytes));
        // My buffer holds my contribution: prev may start writing into it.
        OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, prev.handle, ACK));

        for (uint32_t step = 0; step < steps; ++step) {
            const bool reduceScatter = step < rankSize - 1;
            const uint32_t back = reduceScatter ? step : step - (rankSize - 1);
            // Reduce-scatter sends chunk (rank - step); allgather sends chunk (rank + 1 - t).
            const uint32_t chunk = reduceScatter ? (rank + rankSize - back % rankSize) % rankSize
                                                 : (rank + 1 + rankSize - back % rankSize) % rankSize;
            uint64_t first = 0;
            uint64_t count = 0;
            ChunkRange(sliceCount, rankSize, chunk, &first, &count);

            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, next.handle, ACK, timeout));
            if (count != 0) {  // a slice shorter than the rank count has empty chunks
                uint8_t *dst = nextBuf + first * unitSize;
                const uint8_t *src = myBuf + first * unitSize;
                if (reduceScatter) {
                    OP_CHECK(param.tag, HcommWriteReduceOnThread(thread, next.handle, dst, src, count, dataType,
                                                                 reduceOp));
                } else {
                    OP_CHECK(param.tag, HcommWriteOnThread(thread, next.handle, dst, src, count * unitSize));
                }
            }
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, next.handle, DATA));

            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, prev.handle, DATA, timeout));
            if (step + 1 < steps) {
                OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, prev.handle, ACK));
            }
        }

        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, output + done * unitSize, myBuf, sliceBytes));
    }
    return HCCL_SUCCESS;
}

}  // namespace ops_reduce_scatter
