/* Mesh AllGather: main thread copies the local slice into the CCL buffer, fans out to one thread
 * per peer (thread notifies), each writes the slice into its peer's CCL buffer behind an ACK/DATA
 * channel handshake, fans in, and the main thread copies every slice to the output. */
#include "common.h"

#define CHK(x) do { int r_ = (x); if (r_) return r_; } while (0)

static int ExecOp(OpParam& p, AlgResourceCtx* r) {
    uint32_t n = r->rankSize, me = r->rank;
    uint64_t slice = p.count * sizeof(float);
    char* ccl = static_cast<char*>(r->localCcl.addr);
    ThreadHandle main = r->threads[0];
    CHK(HcommLocalCopyOnThread(main, ccl + slice * me, p.inputPtr, slice));
    for (uint32_t i = 1; i < n; i++) CHK(HcommThreadNotifyRecordOnThread(main, r->threads[i], 0));
    for (uint32_t i = 1; i < n; i++) {
        uint32_t peer = (me + i) % n;
        ThreadHandle t = r->threads[i];
        ChannelHandle ch = r->channels[peer];
        CHK(HcommThreadNotifyWaitOnThread(t, 0, TIMEOUT_S));
        CHK(HcommChannelNotifyRecordOnThread(t, ch, NOTIFY_ACK));
        CHK(HcommChannelNotifyWaitOnThread(t, ch, NOTIFY_ACK, TIMEOUT_S));
        CHK(HcommWriteOnThread(t, ch, static_cast<char*>(r->remoteCcl[peer].addr) + slice * me, ccl + slice * me, slice));
        CHK(HcommChannelNotifyRecordOnThread(t, ch, NOTIFY_DATA));
        CHK(HcommChannelNotifyWaitOnThread(t, ch, NOTIFY_DATA, TIMEOUT_S));
        CHK(HcommThreadNotifyRecordOnThread(t, main, i));
    }
    for (uint32_t i = 1; i < n; i++) CHK(HcommThreadNotifyWaitOnThread(main, i, TIMEOUT_S));
    return HcommLocalCopyOnThread(main, p.outputPtr, ccl, slice * n);
}

extern "C" unsigned int HcclAllGatherMeshKernel(void* args) {
    OpParam* p = static_cast<OpParam*>(args);
    if (HcommBatchModeStart(p->tag)) return 1;
    int rc = HcommThreadNotifyWaitOnThread(p->resCtx->threads[0], 0, TIMEOUT_S);
    if (!rc) rc = ExecOp(*p, p->resCtx);
    if (!rc) rc = HcommThreadNotifyRecordOnThread(p->resCtx->threads[0], p->resCtx->cpuThreadOnAicpu, 0);
    if (HcommBatchModeEnd(p->tag) && !rc) rc = 1;
    return rc ? 1 : 0;
}
