/* Device side: canonical entry + send/recv by one-sided read and channel notifies. */
#include <cstdio>
#include "common.h"

static int ExecOp(OpParam& p, AlgResourceCtx* r) {
    uint64_t size = p.count * 4;
    int ret;
    if (p.opType == HCCL_CMD_SEND) {
        if ((ret = HcommLocalCopyOnThread(r->aicpuThread, r->localBuffer.addr, p.inputPtr, size))) return ret;
        if ((ret = HcommChannelNotifyRecordOnThread(r->aicpuThread, r->channelHandle, NOTIFY_IDX_ACK))) return ret;
        return HcommChannelNotifyWaitOnThread(r->aicpuThread, r->channelHandle, NOTIFY_IDX_DATA_SIGNAL, CUSTOM_TIMEOUT);
    }
    if ((ret = HcommChannelNotifyWaitOnThread(r->aicpuThread, r->channelHandle, NOTIFY_IDX_ACK, CUSTOM_TIMEOUT))) return ret;
    if ((ret = HcommReadOnThread(r->aicpuThread, r->channelHandle, p.outputPtr, r->remoteBuffer.addr, size))) return ret;
    return HcommChannelNotifyRecordOnThread(r->aicpuThread, r->channelHandle, NOTIFY_IDX_DATA_SIGNAL);
}

extern "C" unsigned int HcclLaunchP2PAicpuKernel(OpParam* param) {
    bool a23 = param->devType != DEVICE_TYPE_A5;
    if (a23 && HcommAcquireComm(param->commName) != HCCL_SUCCESS) return 1;
    if (HcommBatchModeStart(param->tag) != HCCL_SUCCESS) return 1;
    int rc = 0;
    if (HcommThreadNotifyWaitOnThread(param->resCtx->aicpuThread, 0, CUSTOM_TIMEOUT) != HCCL_SUCCESS) rc = 2;
    if (!rc && ExecOp(*param, param->resCtx) != HCCL_SUCCESS) rc = 3;
    if (!rc && HcommThreadNotifyRecordOnThread(param->resCtx->aicpuThread, param->resCtx->cpuThreadOnAicpu, 0) != HCCL_SUCCESS) rc = 4;
    if (HcommBatchModeEnd(param->tag) != HCCL_SUCCESS) rc = rc ? rc : 5;
    if (a23 && HcommReleaseComm(param->commName) != HCCL_SUCCESS) rc = rc ? rc : 6;
    return rc;
}
