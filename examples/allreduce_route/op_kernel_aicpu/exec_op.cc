/*
 * exec_op.cc -- allreduce on a full mesh with links taken down (the public HCCL operator contest
 * task: an 8-NPU A2 server whose ranks 0 and 1 lost their direct link).
 *
 *   hcomm-kit test examples/allreduce_route --np 8 --topology A2:1x8 --links-down 0-1
 *
 * Channels: op.toml asks for a mesh; the host gives none to a peer behind a downed link
 * (channels[peer].handle == 0; the rank graph reports no link there either). Such a peer's
 * contribution is routed through a relay: the smallest rank outside the pair that both ends
 * reach (with one downed link, or downed links that share no rank with the relay, both ends
 * pick the same one).
 *
 * The HCCL buffer of every rank holds rankSize + 1 regions of one slice each: region 0 = the
 * rank's own input slice (what its peers read), region 1 + w = the slice rank w deposited here
 * for a peer it cannot reach. Per slice, four barrier rounds over every live channel (a round
 * records to every peer, then waits for every peer; a rank records round k + 1 only after its
 * round k waits, so round k + 1 from a relay tells that every peer of the relay passed round k):
 *   SYNC1  my peers finished reading my buffer (previous slice): stage my input in region 0;
 *   SYNC2  the relay's peers finished reading its deposits (previous slice): for each peer m I
 *          cannot reach, write my input into region 1 + me of relay(me, m);
 *   SYNC3  my deposits have landed (the relay waits for it from me);
 *   SYNC4  forwarded: from the relay, the unreachable peer's deposit there is complete;
 * then the result is reduced in rank order 0..n-1 (every rank the same order: the same bits
 * everywhere): my own slice from my input, a reachable peer's from its region 0, an unreachable
 * peer's from its region at the relay. A final round (on SYNC2) keeps the buffers until every
 * peer has read them. Each slot is recorded once and waited once per round, and two consecutive
 * rounds never use the same slot (a peer may not have consumed the previous record yet).
 */
#include "exec_op.h"
#include "allreduce_route_log.h"

namespace ops_allreduce_route {
namespace {

constexpr uint32_t SYNC1 = 0;
constexpr uint32_t SYNC2 = 1;
constexpr uint32_t SYNC3 = 2;
constexpr uint32_t SYNC4 = 3;
constexpr uint64_t SLICE_ALIGN_BYTES = 128;
constexpr uint32_t NO_RANK = 0xffffffffu;

uint64_t Min(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

bool Live(const AlgResourceCtx &resCtx, uint32_t peer)
{
    return peer != resCtx.rank && resCtx.channels[peer].handle != 0;
}

// The relay of the pair (me, peer): the smallest other rank I reach. The peer computes it from
// its side with the same rule.
uint32_t Relay(const AlgResourceCtx &resCtx, uint32_t peer)
{
    for (uint32_t r = 0; r < resCtx.rankSize; ++r) {
        if (r != peer && Live(resCtx, r)) {
            return r;
        }
    }
    return NO_RANK;
}

// One barrier round on `slot` with every peer I have a channel to.
HcclResult Round(const OpParam &param, const AlgResourceCtx &resCtx, ThreadHandle thread, uint32_t slot)
{
    for (uint32_t p = 0; p < resCtx.rankSize; ++p) {
        if (Live(resCtx, p)) {
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, resCtx.channels[p].handle, slot));
        }
    }
    for (uint32_t p = 0; p < resCtx.rankSize; ++p) {
        if (Live(resCtx, p)) {
            OP_CHECK(param.tag,
                     HcommChannelNotifyWaitOnThread(thread, resCtx.channels[p].handle, slot, param.notifyTimeout));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace

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
    const uint32_t n = resCtx.rankSize;
    const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
    uint8_t *output = static_cast<uint8_t *>(param.outputPtr);

    if (n == 1 || param.count == 0) {
        if (param.count != 0 && output != input) {
            OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, output, input, param.count * unitSize));
        }
        return HCCL_SUCCESS;
    }
    // Who relays for whom: relayOf[m] for each peer m I cannot reach.
    uint32_t relayOf[ALLREDUCE_ROUTE_MAX_CHANNELS];
    uint64_t bufferBytes = resCtx.localBuffer.size;
    for (uint32_t p = 0; p < n; ++p) {
        relayOf[p] = NO_RANK;
        if (p == rank) {
            continue;
        }
        if (Live(resCtx, p)) {
            bufferBytes = Min(bufferBytes, resCtx.channels[p].remoteBuffer.size);
            continue;
        }
        relayOf[p] = Relay(resCtx, p);
        if (relayOf[p] == NO_RANK) {
            OP_LOG_ERROR("rank %u reaches neither rank %u nor any rank that could relay for it, tag %s", rank, p,
                         param.tag);
            return HCCL_E_NETWORK;
        }
    }
    const uint64_t regionBytes = bufferBytes / (n + 1) / SLICE_ALIGN_BYTES * SLICE_ALIGN_BYTES;
    const uint64_t maxSliceCount = regionBytes / unitSize;
    if (maxSliceCount == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u regions), tag %s",
                     static_cast<unsigned long long>(bufferBytes), n + 1, param.tag);
        return HCCL_E_MEMORY;
    }
    uint8_t *myBuf = static_cast<uint8_t *>(resCtx.localBuffer.addr);

    for (uint64_t done = 0; done < param.count; done += maxSliceCount) {
        const uint64_t sliceCount = Min(maxSliceCount, param.count - done);
        const uint64_t sliceBytes = sliceCount * unitSize;
        const uint8_t *in = input + done * unitSize;
        uint8_t *out = output + done * unitSize;

        OP_CHECK(param.tag, Round(param, resCtx, thread, SYNC1));
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, myBuf, in, sliceBytes));
        OP_CHECK(param.tag, Round(param, resCtx, thread, SYNC2));
        for (uint32_t m = 0; m < n; ++m) {
            if (relayOf[m] != NO_RANK) {
                const ChannelInfo &via = resCtx.channels[relayOf[m]];
                uint8_t *dst = static_cast<uint8_t *>(via.remoteBuffer.addr) + (1 + rank) * regionBytes;
                OP_CHECK(param.tag, HcommWriteOnThread(thread, via.handle, dst, in, sliceBytes));
            }
        }
        OP_CHECK(param.tag, Round(param, resCtx, thread, SYNC3));
        OP_CHECK(param.tag, Round(param, resCtx, thread, SYNC4));

        // The output is only written here: in place (output == input) is safe, my input slice
        // is already staged in region 0 and deposited at the relays.
        for (uint32_t r = 0; r < n; ++r) {
            if (r == rank) {
                if (r == 0) {
                    OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, out, myBuf, sliceBytes));
                } else {
                    OP_CHECK(param.tag, HcommLocalReduceOnThread(thread, out, myBuf, sliceCount, dataType, reduceOp));
                }
                continue;
            }
            const bool direct = relayOf[r] == NO_RANK;
            const ChannelInfo &ch = resCtx.channels[direct ? r : relayOf[r]];
            const uint8_t *src = static_cast<const uint8_t *>(ch.remoteBuffer.addr) + (direct ? 0 : (1 + r) * regionBytes);
            if (r == 0) {
                OP_CHECK(param.tag, HcommReadOnThread(thread, ch.handle, out, src, sliceBytes));
            } else {
                OP_CHECK(param.tag, HcommReadReduceOnThread(thread, ch.handle, out, src, sliceCount, dataType, reduceOp));
            }
        }
    }
    // Nobody leaves while a peer may still read its buffer. On SYNC2: two rounds in a row on one
    // slot (this one and the next call's first SYNC1) could record a slot the peer has not
    // consumed yet.
    OP_CHECK(param.tag, Round(param, resCtx, thread, SYNC2));
    return HCCL_SUCCESS;
}

}  // namespace ops_allreduce_route
