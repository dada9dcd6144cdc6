/* Device side of the data-plane test operator: one entry per scenario (see common.h, main.cc).
 * Written like CANN's AICPU kernels: acquire the comm, open a batch, wait for the host's "go",
 * encode tasks on device threads, record "done", close the batch. Return values are the source
 * line of the first failed call (0 = success), so the host message points at it. */
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include "common.h"

namespace {

#define CK(x)                          \
    do {                               \
        if ((x) != 0) return __LINE__; \
    } while (0)

char* B(void* p, uint64_t off) { return static_cast<char*>(p) + off; }

void gate(Results* r, const char* name, int32_t code) {
    if (r->ngates >= DP_MAX_GATES) return;
    GateRec& g = r->gates[r->ngates++];
    snprintf(g.name, sizeof g.name, "%s", name);
    g.code = code;
}

double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sleep_ms(int ms) {
    timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

/* Polls until [a, a+n) equals [b, b+n) (tasks run asynchronously after submission). */
bool eventually_equal(const void* a, const void* b, uint64_t n, double seconds) {
    double end = now_s() + seconds;
    for (;;) {
        if (memcmp(a, b, n) == 0) return true;
        if (now_s() > end) return false;
        sleep_ms(1);
    }
}

bool all_zero(const void* p, uint64_t n) {
    const unsigned char* c = static_cast<const unsigned char*>(p);
    for (uint64_t i = 0; i < n; i++)
        if (c[i]) return false;
    return true;
}

uint32_t next_of(const AlgResourceCtx& r) { return (r.rank + 1) % r.rankSize; }
uint32_t prev_of(const AlgResourceCtx& r) { return (r.rank + r.rankSize - 1) % r.rankSize; }

typedef int (*Body)(OpParam&, AlgResourceCtx&);

/* The canonical kernel shape around a scenario body. A failing body skips "done" (the host's
 * done-wait is dropped with the stream error); the batch is still closed. */
unsigned Run(OpParam* p, Body body) {
    AlgResourceCtx& r = *p->resCtx;
    if (HcommAcquireComm(p->commName) != HCCL_SUCCESS) return 1000;
    if (HcommBatchModeStart(p->tag) != HCCL_SUCCESS) {
        HcommReleaseComm(p->commName);
        return 1001;
    }
    int rc = 0;
    if (p->noHandshake) {
    } else if (p->aclHandshake) {
        if (HcommAclrtNotifyWaitOnThread(r.aicpuThread, r.notifyIds[0], DP_WAIT_TIMEOUT)) rc = __LINE__;
    } else if (HcommThreadNotifyWaitOnThread(r.aicpuThread, 0, DP_WAIT_TIMEOUT)) {
        rc = __LINE__;
    }
    if (!rc) rc = body(*p, r);
    if (!rc && !p->noHandshake) {
        if (p->aclHandshake) {
            if (HcommAclrtNotifyRecordOnThread(r.aicpuThread, r.notifyIds[1])) rc = __LINE__;
        } else if (HcommThreadNotifyRecordOnThread(r.aicpuThread, r.cpuThreadOnAicpu, 0)) {
            rc = __LINE__;
        }
    }
    if (HcommBatchModeEnd(p->tag) != HCCL_SUCCESS && !rc) rc = 1002;
    if (HcommReleaseComm(p->commName) != HCCL_SUCCESS && !rc) rc = 1003;
    return (unsigned)rc;
}

/* Fan-out from the main thread to workers 1..n (their slot 1), fan-in into main slots 1..n. */
int fan_out(AlgResourceCtx& r, uint32_t n) {
    for (uint32_t w = 1; w <= n; w++) CK(HcommThreadNotifyRecordOnThread(r.threads[0], r.threads[w], 1));
    return 0;
}
int fan_in(AlgResourceCtx& r, uint32_t n) {
    for (uint32_t w = 1; w <= n; w++) {
        if (w % 2) CK(HcommThreadNotifyWaitOnThreadWithDefaultTimeout(r.threads[0], w));
        else CK(HcommThreadNotifyWaitOnThread(r.threads[0], w, DP_WAIT_TIMEOUT));
    }
    return 0;
}

/* ---------------------------------------------------------------- DpLocal */
int Local(OpParam& p, AlgResourceCtx& r) {
    uint32_t nw = r.threadNum - 1;
    ThreadHandle t0 = r.threads[0];
    CK(HcommLocalCopyOnThread(t0, p.scratchPtr, p.inputPtr, LOCAL_LEN));
    CK(fan_out(r, nw));
    uint64_t felems = LOCAL_LEN / 4;
    for (uint32_t w = 1; w <= nw; w++) {
        ThreadHandle t = r.threads[w];
        uint64_t a = LOCAL_LEN * (w - 1) / nw, b = LOCAL_LEN * w / nw;
        uint64_t fa = felems * (w - 1) / nw, fb = felems * w / nw;
        CK(HcommThreadNotifyWaitOnThreadWithDefaultTimeout(t, 1));
        CK(HcommLocalCopyOnThread(t, B(p.outputPtr, a), B(p.scratchPtr, a), b - a));
        CK(HcommLocalReduceOnThread(t, B(p.outputPtr, OUT2_OFF + fa * 4), B(p.input2Ptr, fa * 4), fb - fa,
                                    HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_SUM));
        CK(HcommThreadNotifyRecordOnThread(t, t0, w));
    }
    CK(fan_in(r, nw));
    CK(HcommLocalReduceOnThread(t0, B(p.outputPtr, OUT3_OFF), B(p.input2Ptr, OUT3_OFF), 1001, HCOMM_DATA_TYPE_INT8,
                                HCOMM_REDUCE_MIN));
    return 0;
}

/* ---------------------------------------------------------------- DpReduce */
int combo(uint32_t di, uint32_t oi) { return (di < 12 && oi < 4) ? (int)(di * 4 + oi) : -1; }

int Reduce(OpParam& p, AlgResourceCtx& r) {
    ThreadHandle t0 = r.threads[0], t1 = r.threads[1], t2 = r.threads[2];
    const ChannelInfo& nx = r.channels[next_of(r)];
    const ChannelInfo& pv = r.channels[prev_of(r)];
    CK(fan_out(r, 2));
    CK(HcommThreadNotifyWaitOnThread(t1, 1, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyWaitOnThread(t2, 1, DP_WAIT_TIMEOUT));
    for (uint32_t di = 0; di < DP_NDT; di++)
        for (uint32_t oi = 0; oi < DP_NOP; oi++) {
            int k = combo(di, oi);
            uint64_t off = (uint64_t)(k < 0 ? 0 : k) * RSTRIDE;
            HcommDataType dt = (HcommDataType)DP_DTYPES[di];
            HcommReduceOp op = (HcommReduceOp)DP_OPS[oi];
            p.results->rcodes[0][di][oi] =
                HcommLocalReduceOnThread(t0, B(p.outputPtr, off), B(p.inputPtr, off), RCOUNT, dt, op);
            p.results->rcodes[1][di][oi] = HcommWriteReduceOnThread(
                t1, nx.handle, B(nx.remoteBuffer.addr, WR_OFF + off), B(p.input2Ptr, off), RCOUNT, dt, op);
            p.results->rcodes[2][di][oi] = HcommReadReduceOnThread(
                t2, pv.handle, B(p.scratchPtr, off), B(pv.remoteBuffer.addr, RR_OFF + off), RCOUNT, dt, op);
        }
    /* write-reduce data landed at next before it is told; wait until prev's landed here */
    CK(HcommChannelNotifyRecordOnThread(t1, nx.handle, 1));
    CK(HcommChannelNotifyWaitOnThreadWithDefaultTimeout(t1, pv.handle, 1));
    CK(HcommThreadNotifyRecordOnThread(t1, t0, 1));
    CK(HcommThreadNotifyRecordOnThread(t2, t0, 2));
    return fan_in(r, 2);
}

/* ---------------------------------------------------------------- DpWrite: mesh, one thread per peer */
int Write(OpParam& p, AlgResourceCtx& r) {
    uint32_t nw = r.rankSize - 1;
    bool a5 = p.devType == DEVICE_TYPE_A5;
    CK(fan_out(r, nw));
    uint32_t w = 0;
    for (uint32_t peer = 0; peer < r.rankSize; peer++) {
        if (peer == r.rank) continue;
        ThreadHandle t = r.threads[++w];
        const ChannelInfo& c = r.channels[peer];
        char* rb = static_cast<char*>(c.remoteBuffer.addr);
        CK(HcommThreadNotifyWaitOnThread(t, 1, DP_WAIT_TIMEOUT));
        CK(HcommWriteOnThread(t, c.handle, rb + W_OFF + r.rank * SEG, p.inputPtr, LEN));
        CK(HcommChannelNotifyRecordOnThread(t, c.handle, 1));
        CK(HcommWriteWithNotifyOnThread(t, c.handle, rb + WN_OFF + r.rank * SEG, B(p.inputPtr, SEG), LEN, 2));
        CK(HcommReadOnThread(t, c.handle, B(p.outputPtr, peer * SEG), rb + RD_OFF, LEN));
        if (a5) {
            CK(HcommWriteReduceWithNotifyOnThread(t, c.handle, rb + WRN_OFF + r.rank * SEG, B(p.inputPtr, 2 * SEG),
                                                  XCOUNT, HCOMM_DATA_TYPE_BFP16, HCOMM_REDUCE_SUM, 3));
        } else {
            CK(HcommWriteReduceOnThread(t, c.handle, rb + WRN_OFF + r.rank * SEG, B(p.inputPtr, 2 * SEG), XCOUNT,
                                        HCOMM_DATA_TYPE_BFP16, HCOMM_REDUCE_SUM));
            CK(HcommChannelNotifyRecordOnThread(t, c.handle, 3));
        }
        CK(HcommReadReduceOnThread(t, c.handle, B(p.outputPtr, OUT2_OFF + peer * SEG), rb + RDR_OFF, XCOUNT,
                                   HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_MAX));
        CK(HcommChannelNotifyWaitOnThread(t, c.handle, 1, DP_WAIT_TIMEOUT));
        CK(HcommChannelNotifyWaitOnThreadWithDefaultTimeout(t, c.handle, 2));
        CK(HcommChannelNotifyWaitOnThread(t, c.handle, 3, DP_WAIT_TIMEOUT));
        CK(HcommThreadNotifyRecordOnThread(t, r.threads[0], w));
    }
    return fan_in(r, nw);
}

/* ---------------------------------------------------------------- DpNotify: binary flags */
int Notify(OpParam& p, AlgResourceCtx& r) {
    ThreadHandle t0 = r.threads[0], t1 = r.threads[1], t2 = r.threads[2], t3 = r.threads[3];
    /* thread slots: t0 records t1's slot 2 twice, then the gate slot 3: the two records merged.
     * t1's first wait consumes the flag and lets t0 go on (t0 slot 4); t0 overwrites scratch and
     * records slot 2 again. t1's second wait needs that third record, so t1 copies the new value
     * (with counting notifies it would pass at once and most likely copy the old one). */
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 2));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 2));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 3));
    CK(HcommThreadNotifyWaitOnThread(t0, 4, DP_WAIT_TIMEOUT));
    CK(HcommLocalCopyOnThread(t0, p.scratchPtr, p.inputPtr, LEN));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 2));
    CK(HcommThreadNotifyWaitOnThread(t1, 3, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyWaitOnThread(t1, 2, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyRecordOnThread(t1, t0, 4));
    CK(HcommThreadNotifyWaitOnThreadWithDefaultTimeout(t1, 2));
    CK(HcommLocalCopyOnThread(t1, p.outputPtr, p.scratchPtr, LEN));
    CK(HcommThreadNotifyRecordOnThread(t1, t0, 1));
    /* channel slots, same pattern across ranks: t2 writes for next, t3 reads from prev; next must
     * read the new value of our HCCL buffer */
    const ChannelInfo& nx = r.channels[next_of(r)];
    const ChannelInfo& pv = r.channels[prev_of(r)];
    CK(HcommChannelNotifyRecordOnThread(t2, nx.handle, 2));
    CK(HcommChannelNotifyRecordOnThread(t2, nx.handle, 2));
    CK(HcommChannelNotifyRecordOnThread(t2, nx.handle, 3));
    CK(HcommChannelNotifyWaitOnThread(t2, nx.handle, 1, DP_WAIT_TIMEOUT));
    CK(HcommLocalCopyOnThread(t2, B(r.localBuffer.addr, NB_OFF), B(p.inputPtr, SEG), LEN));
    CK(HcommChannelNotifyRecordOnThread(t2, nx.handle, 2));
    CK(HcommThreadNotifyRecordOnThread(t2, t0, 2));
    CK(HcommChannelNotifyWaitOnThread(t3, pv.handle, 3, DP_WAIT_TIMEOUT));
    CK(HcommChannelNotifyWaitOnThread(t3, pv.handle, 2, DP_WAIT_TIMEOUT));
    CK(HcommChannelNotifyRecordOnThread(t3, pv.handle, 1));
    CK(HcommChannelNotifyWaitOnThreadWithDefaultTimeout(t3, pv.handle, 2));
    CK(HcommReadOnThread(t3, pv.handle, B(p.outputPtr, SEG), B(pv.remoteBuffer.addr, NB_OFF), LEN));
    /* prev must not rewrite its buffer before we read it: the host barrier after the op covers that */
    CK(HcommThreadNotifyRecordOnThread(t3, t0, 3));
    CK(HcommThreadNotifyWaitOnThread(t0, 1, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyWaitOnThread(t0, 2, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyWaitOnThread(t0, 3, DP_WAIT_TIMEOUT));
    return 0;
}

/* ---------------------------------------------------------------- DpAclNotify (A2/A3 handshake) */
int AclBody(OpParam& p, AlgResourceCtx& r) {
    CK(HcommLocalCopyOnThread(r.threads[0], p.outputPtr, p.inputPtr, LEN));
    return 0;
}

/* ---------------------------------------------------------------- DpXfer: batch transfer, fence, drain */
int Xfer(OpParam& p, AlgResourceCtx& r) {
    ThreadHandle t1 = r.threads[1];
    uint32_t nxr = next_of(r), pvr = prev_of(r);
    CK(fan_out(r, 1));
    CK(HcommThreadNotifyWaitOnThread(t1, 1, DP_WAIT_TIMEOUT));
    HcommBatchTransferDesc d[7];
    memset(d, 0, sizeof d);
    if (p.devType != DEVICE_TYPE_A5) {
        const ChannelInfo& nx = r.roce[nxr];
        char* rb = static_cast<char*>(nx.remoteBuffer.addr);
        d[0].transType = HCOMM_TRANSFER_TYPE_WRITE;
        d[0].transferInfo.write = {LEN, rb + BT_OFF + r.rank * SEG, p.inputPtr};
        d[1].transType = HCOMM_TRANSFER_TYPE_READ;
        d[1].transferInfo.read = {LEN, p.outputPtr, rb + BTR_OFF};
        CK(HcommBatchTransferOnThread(t1, nx.handle, d, 2));
        CK(HcommChannelDrainOnThread(t1, nx.handle));
        CK(HcommChannelNotifyRecordOnThread(t1, nx.handle, 1));
        CK(HcommChannelNotifyWaitOnThread(t1, r.roce[pvr].handle, 1, DP_WAIT_TIMEOUT));
    } else {
        const ChannelInfo& nx = r.channels[nxr];
        char* rb = static_cast<char*>(nx.remoteBuffer.addr);
        char* in = static_cast<char*>(p.inputPtr);
        char* in2 = static_cast<char*>(p.input2Ptr);
        d[0].transType = HCOMM_TRANSFER_TYPE_WRITE;
        d[0].transferInfo.write = {LEN, rb + BT_OFF + r.rank * SEG, in};
        d[1].transType = HCOMM_TRANSFER_TYPE_READ;
        d[1].transferInfo.read = {LEN, p.outputPtr, rb + BTR_OFF};
        d[2].transType = HCOMM_TRANSFER_TYPE_WRITE_REDUCE;
        d[2].transferInfo.reduce = {XCOUNT, rb + BTWR_OFF + r.rank * SEG, in2, HCOMM_REDUCE_SUM, HCOMM_DATA_TYPE_INT32};
        d[3].transType = HCOMM_TRANSFER_TYPE_READ_REDUCE;
        d[3].transferInfo.reduce = {XCOUNT, B(p.outputPtr, OUT2_OFF), rb + BTRR_OFF, HCOMM_REDUCE_MAX, HCOMM_DATA_TYPE_FP16};
        d[4].transType = HCOMM_TRANSFER_TYPE_WRITE_WITH_NOTIFY;
        d[4].transferInfo.writeWithNotify = {LEN, rb + BTWN_OFF + r.rank * SEG, in + SEG, 1};
        d[5].transType = HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY;
        d[5].transferInfo.writeReduceWithNotify = {XCOUNT, rb + BTWRN_OFF + r.rank * SEG, in2 + SEG, HCOMM_REDUCE_PROD,
                                                   HCOMM_DATA_TYPE_UINT64, 2};
        d[6].transType = HCOMM_TRANSFER_TYPE_NOTIFY_RECORD;
        d[6].transferInfo.notifyRecord.notifyIdx = 3;
        CK(HcommBatchTransferOnThread(t1, nx.handle, d, 7));
        /* a rejected batch submits nothing: a valid READ before an out-of-bounds WRITE must not run */
        HcommBatchTransferDesc bad[2];
        memset(bad, 0, sizeof bad);
        bad[0].transType = HCOMM_TRANSFER_TYPE_READ;
        bad[0].transferInfo.read = {LEN, p.scratchPtr, rb + BTR_OFF};
        bad[1].transType = HCOMM_TRANSFER_TYPE_WRITE;
        bad[1].transferInfo.write = {LEN, rb + nx.remoteBuffer.size - 8, in};
        gate(p.results, "BatchTransfer.partly_invalid", HcommBatchTransferOnThread(t1, nx.handle, bad, 2));
        /* fence: the second write is ordered after the first on the same region */
        CK(HcommChannelFenceOnThread(t1, nx.handle));
        CK(HcommWriteOnThread(t1, nx.handle, rb + FENCE_OFF + r.rank * SEG, in + 2 * SEG, LEN));
        CK(HcommChannelFenceOnThread(t1, nx.handle));
        CK(HcommWriteOnThread(t1, nx.handle, rb + FENCE_OFF + r.rank * SEG, in + 3 * SEG, LEN / 2));
        CK(HcommChannelNotifyRecordOnThread(t1, nx.handle, 0));
        const ChannelInfo& pv = r.channels[pvr];
        for (uint32_t s = 0; s < 4; s++) CK(HcommChannelNotifyWaitOnThread(t1, pv.handle, (s + 1) % 4, DP_WAIT_TIMEOUT));
    }
    CK(HcommThreadNotifyRecordOnThread(t1, r.threads[0], 1));
    return fan_in(r, 1);
}

/* ---------------------------------------------------------------- DpGates: return codes only */
int Gates(OpParam& p, AlgResourceCtx& r) {
    Results* g = p.results;
    ThreadHandle t3 = r.threads[3];
    uint32_t nxr = next_of(r), pvr = prev_of(r);
    const ChannelInfo& nx = r.channels[nxr];
    const ChannelInfo& rx = r.roce[nxr];
    char* rb = static_cast<char*>(nx.remoteBuffer.addr);
    char* rrb = static_cast<char*>(rx.remoteBuffer.addr);
    void* in = p.inputPtr;
    void* dst = B(p.scratchPtr, 0);
    char host_mem[64] = {0};
    /* host-CPU-only and NBI variants */
    gate(g, "nbi.WriteNbiOnThread", HcommWriteNbiOnThread(t3, nx.handle, rb + GATE_OFF, in, 8));
    gate(g, "nbi.WriteNbi", HcommWriteNbi(nx.handle, rb + GATE_OFF, in, 8));
    gate(g, "nbi.WriteWithNotifyNbiOnThread", HcommWriteWithNotifyNbiOnThread(t3, nx.handle, rb + GATE_OFF, in, 8, 0));
    gate(g, "nbi.WriteWithNotifyNbi", HcommWriteWithNotifyNbi(nx.handle, rb + GATE_OFF, in, 8, 0));
    gate(g, "nbi.ReadNbiOnThread", HcommReadNbiOnThread(t3, nx.handle, dst, rb + GATE_OFF, 8));
    gate(g, "nbi.ReadNbi", HcommReadNbi(nx.handle, dst, rb + GATE_OFF, 8));
    gate(g, "nbi.ChannelNotifyRecord", HcommChannelNotifyRecord(nx.handle, 0));
    gate(g, "nbi.ChannelNotifyWait", HcommChannelNotifyWait(nx.handle, 0, 1));
    gate(g, "nbi.ChannelFence", HcommChannelFence(nx.handle));
    gate(g, "nbi.FenceOnThread", HcommFenceOnThread(t3));
    /* task cache (950 only; the emulator always misses) */
    bool hit = true;
    gate(g, "cache.Lookup", HcommAicpuTsTaskCacheLookup("dp_cache", &hit));
    g->flags[10] = hit ? 1 : 0;
    void* addrs[1] = {in};
    uint64_t sizes[1] = {64};
    gate(g, "cache.Start", HcommAicpuTsTaskCacheStart("dp_cache", addrs, sizes, 1));
    gate(g, "cache.End", HcommAicpuTsTaskCacheEnd("dp_cache"));
    gate(g, "cache.Execute", HcommAicpuTsTaskCacheExecute("dp_cache", addrs, sizes, 1));
    gate(g, "cache.Clear", HcommAicpuTsTaskCacheClear("dp_cache"));
    gate(g, "cache.Lookup_null_tag", HcommAicpuTsTaskCacheLookup(nullptr, &hit));
    /* product-gated calls; a success enqueues harmless, balanced work */
    int rc = HcommWriteReduceWithNotifyOnThread(t3, nx.handle, rb + GATE_OFF + r.rank * SEG, in, 4,
                                                HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_SUM, 3);
    gate(g, "WriteReduceWithNotify", rc);
    if (rc == 0) CK(HcommChannelNotifyWaitOnThread(t3, r.channels[pvr].handle, 3, DP_WAIT_TIMEOUT));
    gate(g, "WriteWithNotify.accepted", HcommWriteWithNotifyOnThread(t3, nx.handle, rb + GATE_OFF + r.rank * SEG, in, 8, 2));
    CK(HcommChannelNotifyWaitOnThread(t3, r.channels[pvr].handle, 2, DP_WAIT_TIMEOUT));
    gate(g, "ChannelFence.main", HcommChannelFenceOnThread(t3, nx.handle));
    gate(g, "ChannelFence.roce", HcommChannelFenceOnThread(t3, rx.handle));
    gate(g, "ChannelDrain.main", HcommChannelDrainOnThread(t3, nx.handle));
    gate(g, "ChannelDrain.roce", HcommChannelDrainOnThread(t3, rx.handle));
    HcommBatchTransferDesc d[2];
    memset(d, 0, sizeof d);
    d[0].transType = HCOMM_TRANSFER_TYPE_WRITE;
    d[0].transferInfo.write = {8, rb + GATE_OFF + r.rank * SEG, in};
    gate(g, "BatchTransfer.main.write", HcommBatchTransferOnThread(t3, nx.handle, d, 1));
    d[0].transferInfo.write = {8, rrb + GATE_OFF + r.rank * SEG, in};
    d[1].transType = HCOMM_TRANSFER_TYPE_READ;
    d[1].transferInfo.read = {8, dst, rrb + GATE_OFF};
    gate(g, "BatchTransfer.roce.write_read", HcommBatchTransferOnThread(t3, rx.handle, d, 2));
    d[0].transType = HCOMM_TRANSFER_TYPE_WRITE_REDUCE;
    d[0].transferInfo.reduce = {2, rrb + GATE_OFF + r.rank * SEG, in, HCOMM_REDUCE_SUM, HCOMM_DATA_TYPE_FP32};
    gate(g, "BatchTransfer.roce.write_reduce", HcommBatchTransferOnThread(t3, rx.handle, d, 1));
    gate(g, "BatchTransfer.null", HcommBatchTransferOnThread(t3, rx.handle, nullptr, 1));
    gate(g, "BatchTransfer.zero", HcommBatchTransferOnThread(t3, rx.handle, d, 0));
    d[0].transType = (HcommTransferType)42;
    gate(g, "BatchTransfer.bad_type", HcommBatchTransferOnThread(t3, nx.handle, d, 1));
    /* ACL notifies: record then wait the spare notify on one thread (balanced) */
    rc = HcommAclrtNotifyRecordOnThread(t3, r.notifyIds[2]);
    gate(g, "AclrtNotifyRecord", rc);
    gate(g, "AclrtNotifyWait", HcommAclrtNotifyWaitOnThread(t3, r.notifyIds[2], DP_WAIT_TIMEOUT));
    gate(g, "AclrtNotifyRecord.bad_id", HcommAclrtNotifyRecordOnThread(t3, 0xFFFFFFFFFull));
    /* comm lookup */
    gate(g, "AcquireComm.null", HcommAcquireComm(nullptr));
    gate(g, "AcquireComm.unknown", HcommAcquireComm("no_such_comm"));
    gate(g, "ReleaseComm.null", HcommReleaseComm(nullptr));
    /* timeout setters */
    gate(g, "SetNotifyWaitTimeOut.nan", HcommSetNotifyWaitTimeOut(NAN));
    gate(g, "SetNotifyWaitTimeOut.neg", HcommSetNotifyWaitTimeOut(-1.0f));
    gate(g, "SetNotifyWaitTimeOut.huge", HcommSetNotifyWaitTimeOut(5e9f));
    gate(g, "SetNotifyWaitTimeOut.ok", HcommSetNotifyWaitTimeOut(1836.0f));
    gate(g, "ThreadResAcquireTimeOut.nan", HcommThreadResAcquireTimeOut(NAN));
    gate(g, "ThreadResAcquireTimeOut.neg", HcommThreadResAcquireTimeOut(-0.5f));
    gate(g, "ThreadResAcquireTimeOut.huge", HcommThreadResAcquireTimeOut(1e10f));
    gate(g, "ThreadResAcquireTimeOut.ok", HcommThreadResAcquireTimeOut(0.0f));
    /* argument checks (nothing is enqueued) */
    gate(g, "LocalCopy.null_dst", HcommLocalCopyOnThread(t3, nullptr, in, 8));
    gate(g, "LocalCopy.null_src", HcommLocalCopyOnThread(t3, dst, nullptr, 8));
    gate(g, "LocalCopy.len0", HcommLocalCopyOnThread(t3, dst, in, 0));
    gate(g, "LocalCopy.thread0", HcommLocalCopyOnThread(0, dst, in, 8));
    gate(g, "LocalCopy.bad_thread", HcommLocalCopyOnThread(0x1234, dst, in, 8));
    gate(g, "LocalCopy.host_view", HcommLocalCopyOnThread(p.aicpuThreadOnCpu, dst, in, 8));
    gate(g, "LocalCopy.host_memory", HcommLocalCopyOnThread(t3, dst, host_mem, 8));
    gate(g, "LocalReduce.count0", HcommLocalReduceOnThread(t3, dst, in, 0, HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_SUM));
    gate(g, "LocalReduce.null_src", HcommLocalReduceOnThread(t3, dst, nullptr, 4, HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_SUM));
    gate(g, "LocalReduce.mxfp8", HcommLocalReduceOnThread(t3, dst, in, 4, (HcommDataType)18, HCOMM_REDUCE_SUM));
    gate(g, "ThreadNotifyRecord.bad_idx", HcommThreadNotifyRecordOnThread(t3, r.threads[0], DP_THREAD_SLOTS));
    gate(g, "ThreadNotifyRecord.dst0", HcommThreadNotifyRecordOnThread(t3, 0, 1));
    gate(g, "ThreadNotifyWait.bad_idx", HcommThreadNotifyWaitOnThread(t3, DP_THREAD_SLOTS, 1));
    gate(g, "ThreadNotifyWaitDefault.bad_idx", HcommThreadNotifyWaitOnThreadWithDefaultTimeout(t3, DP_THREAD_SLOTS));
    gate(g, "ChannelNotifyRecord.bad_idx", HcommChannelNotifyRecordOnThread(t3, nx.handle, DP_CHANNEL_SLOTS));
    gate(g, "ChannelNotifyRecord.chan0", HcommChannelNotifyRecordOnThread(t3, 0, 0));
    gate(g, "ChannelNotifyWait.bad_idx", HcommChannelNotifyWaitOnThread(t3, nx.handle, DP_CHANNEL_SLOTS, 1));
    gate(g, "ChannelNotifyWaitDefault.bad_idx",
         HcommChannelNotifyWaitOnThreadWithDefaultTimeout(t3, nx.handle, DP_CHANNEL_SLOTS));
    gate(g, "Write.chan0", HcommWriteOnThread(t3, 0, rb + GATE_OFF, in, 8));
    gate(g, "Write.bad_chan", HcommWriteOnThread(t3, 0x5678, rb + GATE_OFF, in, 8));
    gate(g, "Write.null_src", HcommWriteOnThread(t3, nx.handle, rb + GATE_OFF, nullptr, 8));
    gate(g, "Write.len0", HcommWriteOnThread(t3, nx.handle, rb + GATE_OFF, in, 0));
    gate(g, "Write.local_dst", HcommWriteOnThread(t3, nx.handle, dst, in, 8));
    gate(g, "Read.null_dst", HcommReadOnThread(t3, nx.handle, nullptr, rb + GATE_OFF, 8));
    gate(g, "WriteWithNotify.bad_idx", HcommWriteWithNotifyOnThread(t3, nx.handle, rb + GATE_OFF, in, 8, DP_CHANNEL_SLOTS));
    gate(g, "WriteReduce.count0",
         HcommWriteReduceOnThread(t3, nx.handle, rb + GATE_OFF, in, 0, HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_SUM));
    gate(g, "ReadReduce.op4",
         HcommReadReduceOnThread(t3, nx.handle, dst, rb + GATE_OFF, 4, HCOMM_DATA_TYPE_FP32, (HcommReduceOp)4));
    /* the accepted calls above run on t3: "done" must come after them */
    CK(HcommThreadNotifyRecordOnThread(t3, r.threads[0], 1));
    CK(HcommThreadNotifyWaitOnThread(r.threads[0], 1, DP_WAIT_TIMEOUT));
    return 0;
}

/* ---------------------------------------------------------------- DpOob: bounds checks */
int Oob(OpParam& p, AlgResourceCtx& r) {
    Results* g = p.results;
    const ChannelInfo& nx = r.channels[next_of(r)];
    char* rb = static_cast<char*>(nx.remoteBuffer.addr);
    ThreadHandle t0 = r.threads[0];
    /* the first error of the kernel is the one the host's message must show */
    gate(g, "oob.write_tail", HcommWriteOnThread(t0, nx.handle, rb + nx.remoteBuffer.size - 8, p.inputPtr, 16));
    gate(g, "oob.write_before", HcommWriteOnThread(t0, nx.handle, rb - 16, p.inputPtr, 8));
    gate(g, "oob.read_tail", HcommReadOnThread(t0, nx.handle, p.outputPtr, rb + nx.remoteBuffer.size - 4, 8));
    gate(g, "oob.write_reduce_tail", HcommWriteReduceOnThread(t0, nx.handle, rb + nx.remoteBuffer.size - 8, p.inputPtr,
                                                              4, HCOMM_DATA_TYPE_FP32, HCOMM_REDUCE_SUM));
    /* 64 bytes: past the 32-byte allocation pad of A2/A3 too */
    gate(g, "oob.local_tail", HcommLocalCopyOnThread(t0, B(p.outputPtr, DP_LOCAL_BYTES - 8), p.inputPtr, 64));
    return 77;
}

/* ---------------------------------------------------------------- timeouts (rank 0 only; last op of a communicator) */
int TimeoutThread(OpParam& p, AlgResourceCtx& r) {
    ThreadHandle t0 = r.threads[0], t1 = r.threads[1];
    CK(HcommSetNotifyWaitTimeOut(1.0f));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 2));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 2));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 3));
    CK(HcommThreadNotifyWaitOnThread(t1, 3, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyWaitOnThreadWithDefaultTimeout(t1, 2));
    CK(HcommLocalCopyOnThread(t1, p.outputPtr, p.inputPtr, LEN)); /* proves the first wait passed */
    CK(HcommThreadNotifyWaitOnThreadWithDefaultTimeout(t1, 2));   /* the records collapsed: times out */
    CK(HcommThreadNotifyRecordOnThread(t1, t0, 1));
    CK(HcommThreadNotifyWaitOnThread(t0, 1, 0));
    CK(HcommSetNotifyWaitTimeOut(1836.0f));
    return 0;
}

int TimeoutChannel(OpParam&, AlgResourceCtx& r) {
    CK(HcommChannelNotifyWaitOnThread(r.threads[0], r.channels[1].handle, 3, 1));
    return 0;
}

/* ---------------------------------------------------------------- peer death: wait for the victim forever */
int WaitPeer(OpParam&, AlgResourceCtx& r) {
    uint32_t victim = r.rankSize - 1;
    CK(HcommChannelNotifyWaitOnThread(r.threads[0], r.channels[victim].handle, 3, 0));
    return 0;
}

}  // namespace

extern "C" unsigned int DpLocal(OpParam* p) { return Run(p, Local); }
extern "C" unsigned int DpReduce(OpParam* p) { return Run(p, Reduce); }
extern "C" unsigned int DpWrite(OpParam* p) { return Run(p, Write); }
extern "C" unsigned int DpNotify(OpParam* p) { return Run(p, Notify); }
extern "C" unsigned int DpAclNotify(OpParam* p) { return Run(p, AclBody); }
extern "C" unsigned int DpXfer(OpParam* p) { return Run(p, Xfer); }
extern "C" unsigned int DpGates(OpParam* p) { return Run(p, Gates); }
extern "C" unsigned int DpOob(OpParam* p) { return Run(p, Oob); }
extern "C" unsigned int DpTimeoutThread(OpParam* p) { return Run(p, TimeoutThread); }
extern "C" unsigned int DpTimeoutChannel(OpParam* p) { return Run(p, TimeoutChannel); }
extern "C" unsigned int DpWaitPeer(OpParam* p) { return Run(p, WaitPeer); }

/* DpBatch: batch-mode rules, eager mode (950 only), temporary batches. Own flow around the handshake. */
extern "C" unsigned int DpBatch(OpParam* pp) {
    OpParam& p = *pp;
    AlgResourceCtx& r = *p.resCtx;
    Results* g = p.results;
    ThreadHandle t0 = r.threads[0], t1 = r.threads[1], t2 = r.threads[2];
    const ChannelInfo& nx = r.channels[next_of(r)];
    const ChannelInfo& pv = r.channels[prev_of(r)];
    if (HcommAcquireComm(p.commName)) return __LINE__;
    /* eager: outside a batch, 950 runs at once (A2/A3 refuse); the record tells t0 it ran */
    int eager = HcommLocalCopyOnThread(t2, B(p.outputPtr, EAGER_OFF), B(p.inputPtr, EAGER_OFF), LEN);
    gate(g, "eager.LocalCopy", eager);
    if (eager == 0) {
        gate(g, "eager.ThreadNotifyRecord", HcommThreadNotifyRecordOnThread(t2, t0, 3));
        g->flags[3] = !p.pollChecks || eventually_equal(B(p.outputPtr, EAGER_OFF), B(p.inputPtr, EAGER_OFF), LEN, 10.0);
    }
    /* pairing rules; NULL and "" tags are temporary batches */
    gate(g, "batch.end_without_start", HcommBatchModeEnd(p.tag));
    gate(g, "batch.start_null", HcommBatchModeStart(nullptr));
    gate(g, "batch.tmp_copy", HcommLocalCopyOnThread(t2, B(p.outputPtr, TMP_OFF), B(p.inputPtr, TMP_OFF), LEN));
    gate(g, "batch.tmp_record", HcommThreadNotifyRecordOnThread(t2, t0, 2));
    gate(g, "batch.end_null", HcommBatchModeEnd(nullptr));
    gate(g, "batch.start_empty", HcommBatchModeStart(""));
    gate(g, "batch.end_empty", HcommBatchModeEnd(""));
    if (HcommBatchModeStart(p.tag)) return __LINE__;
    gate(g, "batch.start_twice", HcommBatchModeStart(p.tag));
    gate(g, "batch.end_wrong_tag", HcommBatchModeEnd("not_the_tag"));
    /* the op itself: nothing may move before End */
    char* remote = static_cast<char*>(nx.remoteBuffer.addr) + BO_OFF + r.rank * SEG;
    CK(HcommThreadNotifyWaitOnThread(t0, 0, DP_WAIT_TIMEOUT));
    CK(HcommLocalCopyOnThread(t0, p.outputPtr, p.inputPtr, LEN));
    CK(HcommThreadNotifyRecordOnThread(t0, t1, 1));
    CK(HcommThreadNotifyWaitOnThread(t1, 1, DP_WAIT_TIMEOUT));
    CK(HcommWriteOnThread(t1, nx.handle, remote, p.inputPtr, LEN));
    CK(HcommChannelNotifyRecordOnThread(t1, nx.handle, 1));
    CK(HcommChannelNotifyWaitOnThread(t1, pv.handle, 1, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyRecordOnThread(t1, t0, 1));
    CK(HcommThreadNotifyWaitOnThread(t0, 1, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyWaitOnThread(t0, 2, DP_WAIT_TIMEOUT)); /* the temporary batch ran */
    if (eager == 0) CK(HcommThreadNotifyWaitOnThread(t0, 3, DP_WAIT_TIMEOUT));
    CK(HcommThreadNotifyRecordOnThread(t0, r.cpuThreadOnAicpu, 0));
    sleep_ms(30);
    g->flags[0] = all_zero(p.outputPtr, LEN);  /* local copy not run yet */
    g->flags[1] = all_zero(remote, LEN);       /* the peer's buffer, seen through our mapping, unchanged */
    if (HcommBatchModeEnd(p.tag)) return __LINE__;
    if (HcommReleaseComm(p.commName)) return __LINE__;
    return 0; /* the host checks the data after the op */
}
