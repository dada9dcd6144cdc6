/*
 * exec_op.cc -- built-in "send_recv": point-to-point transfer of `count` elements between this
 * rank and the peer OpParam.root. direction 0: send inputPtr to the peer; direction 1: receive
 * into outputPtr from the peer. Only the two ends call; the channel to the peer (topology "peer")
 * is acquired by the host on the first call with that peer.
 *
 * Protocol (CANN's send/recv example, Hcomm guide §5), per slice:
 *   sender:   stage the slice in its HCCL buffer; record HK_ACK ("staged") to the receiver;
 *             ... wait HK_DATA before the next HK_ACK and before it exits;
 *   receiver: wait HK_ACK; Read the slice from the sender's buffer straight into the output;
 *             record HK_DATA ("read, the buffer is free").
 * Messages larger than the HCCL buffer or HK_PIPE_MIN_BYTES are sliced and double-buffered
 * (HkPipePlan of hk_coll.h): the sender stages slice t+1 in the other half of its buffer while
 * the receiver reads slice t. Slices depend only on
 * count and both buffer sizes, so the two ends agree. Clean exit: when the sender is done, the
 * receiver has read everything (its last HK_DATA was waited); HK_ACK is the initiative slot and
 * HK_DATA the response (hk_coll.h), so a following call of any built-in cannot merge notifies.
 *
 * Pairing rule: channels (and their slots) and the HCCL buffer are shared by every operator of
 * the communicator. Sends/receives are matched purely by order on a (sender, receiver) pair, as
 * in HCCL: the k-th send from A to B pairs with the k-th recv on B from A, and the counts must be
 * equal (the receiver cannot check this: a longer send would hang the sender). Point-to-point
 * calls must not run concurrently with other collectives of the same communicator on other
 * streams (both would stage in the same HCCL buffer and use the same slots); calls on one stream
 * are ordered and safe in any mix. A send to self (peer == rank) is rejected (HCCL_E_PARA).
 */
#include "exec_op.h"
#include "send_recv_log.h"
#include "hk_coll.h"

namespace ops_send_recv {

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    const uint32_t unitSize = HkUnitSize(param);
    if (unitSize == 0) {
        return HCCL_E_PARA;
    }
    const uint32_t rank = resCtx.rank;
    const uint32_t peer = param.root;
    const bool send = param.direction == 0;
    if (param.direction > 1) {
        OP_LOG_ERROR("direction %u is neither 0 (send) nor 1 (recv), tag %s", param.direction, param.tag);
        return HCCL_E_PARA;
    }
    if (peer == rank) {
        OP_LOG_ERROR("%s to/from self (peer %u == rank %u) is not supported, tag %s", send ? "send" : "recv", peer,
                     rank, param.tag);
        return HCCL_E_PARA;
    }
    if (peer >= resCtx.rankSize || peer >= SEND_RECV_MAX_CHANNELS) {
        OP_LOG_ERROR("peer %u is not a rank of this %u-rank communicator, tag %s", peer, resCtx.rankSize, param.tag);
        return HCCL_E_PARA;
    }
    if (param.count == 0) {
        return HCCL_SUCCESS;
    }
    if (param.count > UINT64_MAX / unitSize) {
        OP_LOG_ERROR("count %llu overflows, tag %s", static_cast<unsigned long long>(param.count), param.tag);
        return HCCL_E_PARA;
    }
    const ChannelHandle ch = HkChannel(param, resCtx, peer);
    if (ch == 0) {
        return HCCL_E_PARA;
    }
    if ((send ? param.inputPtr : param.outputPtr) == nullptr) {
        OP_LOG_ERROR("%s is NULL, tag %s", send ? "inputPtr" : "outputPtr", param.tag);
        return HCCL_E_PTR;
    }
    const uint64_t totalBytes = param.count * unitSize;
    const ThreadHandle thread = resCtx.threads[0];
    const uint32_t timeout = param.notifyTimeout;
    const ChannelInfo &info = resCtx.channels[peer];
    const uint64_t bufferBytes = HkMin(resCtx.localBuffer.size, info.remoteBuffer.size);

    const HkPipe plan = HkPipePlan(totalBytes, bufferBytes);  // one round, or pipelined halves
    if (plan.rounds == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes), tag %s", static_cast<unsigned long long>(bufferBytes),
                     param.tag);
        return HCCL_E_MEMORY;
    }
    const uint64_t slice = plan.slice;
    const uint64_t half = plan.half;
    const uint64_t rounds = plan.rounds;

    if (send) {
        uint8_t *stage = static_cast<uint8_t *>(resCtx.localBuffer.addr);
        const uint8_t *input = static_cast<const uint8_t *>(param.inputPtr);
        OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage, input, HkMin(slice, totalBytes)));
        OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch, HK_ACK));
        for (uint64_t t = 0; t < rounds; ++t) {
            if (t + 1 < rounds) {  // stage the next slice while the receiver reads this one
                const uint64_t off = (t + 1) * slice;
                OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage + ((t + 1) % 2) * half, input + off,
                                                           HkMin(slice, totalBytes - off)));
            }
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch, HK_DATA, timeout));
            if (t + 1 < rounds) {
                OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch, HK_ACK));
            }
        }
        return HCCL_SUCCESS;
    }
    // The receiver, per slice t: wait HK_ACK, Read slice t from half t % 2 of the sender's buffer,
    // record HK_DATA (HkStagedRead of hk_coll.h, as the rooted collectives' readers).
    return HkStagedRead(param, thread, ch, static_cast<const uint8_t *>(info.remoteBuffer.addr),
                        static_cast<uint8_t *>(param.outputPtr), totalBytes, slice, half);
}

}  // namespace ops_send_recv
