/*
 * exec_op.cc -- built-in "batch_send_recv": a batch of point-to-point sends and receives
 * (HcclBatchSendRecv; HcclSend / HcclRecv are batches of one item). Item i moves itemCount[i]
 * elements of itemDataType[i] between this rank's itemBuf[i] and rank itemRank[i]: a send
 * (itemType 0) reads the buffer, a receive (itemType 1) fills it. All peers progress
 * concurrently: worker thread w (1..k) serves the w-th distinct peer of the batch, in ascending
 * rank order; the channel to every peer is acquired by the host before the launch.
 *
 * Matching follows HCCL: the sends from A to B pair with the receives on B from A in item order,
 * and paired items must have the same size in bytes.
 *
 * Staging: the HCCL buffer of each rank is cut into rankSize regions; region p holds what this
 * rank sends to rank p, so a receiver reads region <its own rank> of the sender's buffer. The
 * region is the same on both ends (job-wide buffer size), so both cut every item into the same
 * slices. A worker runs one symmetric round per slice, in which sending and receiving with its
 * peer interleave without deadlock (both ends of a pair run the same rounds):
 *   send slice r:  stage it in my region for the peer; record HK_ACK ("staged");
 *   recv slice r:  wait HK_ACK; Read it from the peer's region for me; record HK_DATA ("read");
 *   send slice r:  wait HK_DATA (my region is free again).
 * Notify discipline (hk_coll.h): every HK_ACK I record is waited by the peer before it records
 * the HK_DATA I wait for, so it is consumed before I exit; HK_DATA is recorded only after the
 * peer's HK_ACK of this call. A sender exits after its receiver has read everything.
 */
#include "exec_op.h"
#include "batch_send_recv_log.h"
#include "hk_coll.h"

namespace ops_batch_send_recv {

namespace {

constexpr uint32_t kMaxItems = 256;   /* length of the item arrays of OpParam */
constexpr uint32_t kSend = 0;         /* HCCL_SEND */
constexpr uint32_t kRecv = 1;         /* HCCL_RECV */

/* The next slice of one direction (send or receive) with one peer: items in batch order. */
struct Cursor {
    const OpParam *param;
    uint32_t peer;
    uint32_t type;
    uint64_t slice;    /* bytes per round */
    uint32_t item;     /* current item (kMaxItems = none left) */
    uint64_t offset;   /* bytes of the current item already moved */

    void Skip()
    {
        while (item < param->itemNum) {
            if (param->itemType[item] == type && param->itemRank[item] == peer &&
                offset < param->itemCount[item] * OpDataTypeSize(static_cast<int32_t>(param->itemDataType[item]))) {
                return;
            }
            ++item;
            offset = 0;
        }
        item = kMaxItems;
    }
    bool Done() const { return item == kMaxItems; }
    uint64_t Bytes() const
    {
        return param->itemCount[item] * OpDataTypeSize(static_cast<int32_t>(param->itemDataType[item]));
    }
    /* The current slice: buffer address and length; then moves on. */
    void Next(uint8_t **buf, uint64_t *len)
    {
        const uint64_t left = Bytes() - offset;
        *len = HkMin(left, slice);
        *buf = static_cast<uint8_t *>(param->itemBuf[item]) + offset;
        offset += *len;
        Skip();
    }
};

HcclResult CheckItems(const OpParam &param, const AlgResourceCtx &resCtx)
{
    if (param.itemNum > kMaxItems) {
        OP_LOG_ERROR("itemNum %u exceeds the %u items of one launch, tag %s", param.itemNum, kMaxItems, param.tag);
        return HCCL_E_PARA;
    }
    for (uint32_t i = 0; i < param.itemNum; ++i) {
        const uint32_t unit = OpDataTypeSize(static_cast<int32_t>(param.itemDataType[i]));
        if (param.itemType[i] != kSend && param.itemType[i] != kRecv) {
            OP_LOG_ERROR("item %u: type %u is neither HCCL_SEND (0) nor HCCL_RECV (1), tag %s", i, param.itemType[i],
                         param.tag);
            return HCCL_E_PARA;
        }
        if (unit == 0) {
            OP_LOG_ERROR("item %u: unsupported dataType %u, tag %s", i, param.itemDataType[i], param.tag);
            return HCCL_E_PARA;
        }
        if (param.itemRank[i] >= resCtx.rankSize || param.itemRank[i] == resCtx.rank ||
            param.itemRank[i] >= BATCH_SEND_RECV_MAX_CHANNELS) {
            OP_LOG_ERROR("item %u: remote rank %u is not another rank of this %u-rank communicator (rank %u), tag %s",
                         i, param.itemRank[i], resCtx.rankSize, resCtx.rank, param.tag);
            return HCCL_E_PARA;
        }
        if (param.itemCount[i] > UINT64_MAX / unit) {
            OP_LOG_ERROR("item %u: count %llu overflows, tag %s", i, static_cast<unsigned long long>(param.itemCount[i]),
                         param.tag);
            return HCCL_E_PARA;
        }
        if (param.itemCount[i] != 0 && param.itemBuf[i] == nullptr) {
            OP_LOG_ERROR("item %u: buffer is NULL, tag %s", i, param.tag);
            return HCCL_E_PTR;
        }
    }
    return HCCL_SUCCESS;
}

/* Worker `w` moves everything this batch exchanges with `peer` (see the file comment). */
HcclResult RunPeer(const OpParam &param, const AlgResourceCtx &resCtx, uint32_t w, uint32_t peer)
{
    const ThreadHandle thread = resCtx.threads[w];
    const ChannelHandle ch = HkChannel(param, resCtx, peer);
    if (ch == 0) {
        return HCCL_E_PARA;
    }
    const ChannelInfo &info = resCtx.channels[peer];
    const uint64_t region = HkSliceBytes(HkMin(resCtx.localBuffer.size, info.remoteBuffer.size) / resCtx.rankSize);
    if (region == 0) {
        OP_LOG_ERROR("HCCL buffer too small (%llu bytes for %u ranks), tag %s",
                     static_cast<unsigned long long>(resCtx.localBuffer.size), resCtx.rankSize, param.tag);
        return HCCL_E_MEMORY;
    }
    uint8_t *stage = static_cast<uint8_t *>(resCtx.localBuffer.addr) + static_cast<uint64_t>(peer) * region;
    const uint8_t *peerStage =
        static_cast<const uint8_t *>(info.remoteBuffer.addr) + static_cast<uint64_t>(resCtx.rank) * region;
    const uint32_t timeout = param.notifyTimeout;
    Cursor send = {&param, peer, kSend, region, 0, 0};
    Cursor recv = {&param, peer, kRecv, region, 0, 0};
    send.Skip();
    recv.Skip();
    while (!send.Done() || !recv.Done()) {
        const bool sending = !send.Done();
        if (sending) {
            uint8_t *src = nullptr;
            uint64_t len = 0;
            send.Next(&src, &len);
            OP_CHECK(param.tag, HcommLocalCopyOnThread(thread, stage, src, len));
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch, HK_ACK));
        }
        if (!recv.Done()) {
            uint8_t *dst = nullptr;
            uint64_t len = 0;
            recv.Next(&dst, &len);
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch, HK_ACK, timeout));
            OP_CHECK(param.tag, HcommReadOnThread(thread, ch, dst, peerStage, len));
            OP_CHECK(param.tag, HcommChannelNotifyRecordOnThread(thread, ch, HK_DATA));
        }
        if (sending) {
            OP_CHECK(param.tag, HcommChannelNotifyWaitOnThread(thread, ch, HK_DATA, timeout));
        }
    }
    return HCCL_SUCCESS;
}

}  // namespace

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{
    OP_CHECK(param.tag, CheckItems(param, resCtx));
    /* Distinct peers with something to move, ascending: peer i is served by worker thread i + 1. */
    uint32_t peers[BATCH_SEND_RECV_MAX_CHANNELS];
    uint32_t k = 0;
    for (uint32_t p = 0; p < resCtx.rankSize && p < BATCH_SEND_RECV_MAX_CHANNELS; ++p) {
        for (uint32_t i = 0; i < param.itemNum; ++i) {
            if (param.itemRank[i] == p && param.itemCount[i] != 0) {
                peers[k++] = p;
                break;
            }
        }
    }
    if (k == 0) {
        return HCCL_SUCCESS;
    }
    if (k + 1 > resCtx.threadNum) {
        OP_LOG_ERROR("%u peers need %u device threads, %u acquired, tag %s", k, k + 1, resCtx.threadNum, param.tag);
        return HCCL_E_INTERNAL;
    }
    OP_CHECK(param.tag, HkFanOut(param, resCtx, k));
    for (uint32_t w = 1; w <= k; ++w) {
        OP_CHECK(param.tag, HkWorkerStart(param, resCtx, w));
        OP_CHECK(param.tag, RunPeer(param, resCtx, w, peers[w - 1]));
        OP_CHECK(param.tag, HkWorkerFinish(param, resCtx, w, k));
    }
    OP_CHECK(param.tag, HkFanIn(param, resCtx, k));
    return HCCL_SUCCESS;
}

}  // namespace ops_batch_send_recv
