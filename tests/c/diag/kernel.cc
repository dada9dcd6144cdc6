/* Device side of the diagnosis test operator: one entry per scenario (main.cc); each planted bug is
 * marked "BUG:" and only the rank param->bugRank carries it. Compiled with -g so that the reports
 * can name these lines. */
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common.h"

namespace {

#define CK(x)                          \
    do {                               \
        if ((x) != 0) return __LINE__; \
    } while (0)

char* B(void* p, uint64_t off) { return static_cast<char*>(p) + off; }

enum Bug { NONE, MISSING, DOUBLE, CYCLE, RACE, STALE, CRASH, THREAD_MISSING, SPIN, STRAY, RING, RING_SHIFT, P2P, P2P_SHIFT, HELD, LAG, OWN_BLOCK,
           ABORT };

/* The scaffold's ring-allreduce (templates/.../ring-allreduce.cc.jinja) on BLOCK bytes of int32, one
 * slice: copy in, n-1 write-reduce steps, n-1 write steps, copy out. RING_SHIFT: bugRank's final copy
 * reads one element too far (myBuf + unitSize): its last 4 bytes were not written in this call. */
int Ring(OpParam& p, AlgResourceCtx& r, bool shift) {
    const ThreadHandle t = r.threads[0];
    const uint32_t n = r.rankSize, unit = 4, count = BLOCK / unit, steps = 2 * (n - 1);
    const ChannelInfo& prev = r.channels[(r.rank + n - 1) % n];
    const ChannelInfo& next = r.channels[(r.rank + 1) % n];
    char* buf = static_cast<char*>(r.localBuffer.addr);
    char* nextBuf = static_cast<char*>(next.remoteBuffer.addr);
    CK(HcommLocalCopyOnThread(t, buf, p.inputPtr, BLOCK));
    CK(HcommChannelNotifyRecordOnThread(t, prev.handle, ACK));
    for (uint32_t step = 0; step < steps; step++) {
        const bool rs = step < n - 1;
        const uint32_t back = rs ? step : step - (n - 1);
        const uint32_t chunk = rs ? (r.rank + n - back % n) % n : (r.rank + 1 + n - back % n) % n;
        const uint32_t base = count / n, extra = count % n;
        const uint32_t cnt = base + (chunk < extra ? 1 : 0), first = chunk * base + (chunk < extra ? chunk : extra);
        CK(HcommChannelNotifyWaitOnThread(t, next.handle, ACK, WAIT_TIMEOUT));
        if (cnt) {
            if (rs)
                CK(HcommWriteReduceOnThread(t, next.handle, nextBuf + first * unit, buf + first * unit, cnt,
                                            HCOMM_DATA_TYPE_INT32, HCOMM_REDUCE_SUM));
            else
                CK(HcommWriteOnThread(t, next.handle, nextBuf + first * unit, buf + first * unit, cnt * unit));
        }
        CK(HcommChannelNotifyRecordOnThread(t, next.handle, DATA));
        CK(HcommChannelNotifyWaitOnThread(t, prev.handle, DATA, WAIT_TIMEOUT));
        if (step + 1 < steps) CK(HcommChannelNotifyRecordOnThread(t, prev.handle, ACK));
    }
    CK(HcommLocalCopyOnThread(t, p.outputPtr, shift ? buf + unit : buf, BLOCK));  // BUG (shift): one element on
    return 0;
}

/* The scaffold's p2p ring shift (templates/.../p2p.cc.jinja): stage in my buffer, ACK to next; wait
 * ACK from prev, read its stage into my output, DATA back; wait DATA from next. P2P_SHIFT: bugRank
 * stages at stage + unitSize, so next reads 4 bytes it did not stage in this call. */
int P2p(OpParam& p, AlgResourceCtx& r, bool shift) {
    const ThreadHandle t = r.threads[0];
    const uint32_t n = r.rankSize;
    const ChannelInfo& fromPrev = r.channels[(r.rank + n - 1) % n];
    const ChannelInfo& toNext = r.channels[(r.rank + 1) % n];
    char* stage = static_cast<char*>(r.localBuffer.addr);
    CK(HcommLocalCopyOnThread(t, shift ? stage + 4 : stage, p.inputPtr, BLOCK));  // BUG (shift): staged 4 bytes on
    CK(HcommChannelNotifyRecordOnThread(t, toNext.handle, ACK));
    CK(HcommChannelNotifyWaitOnThread(t, fromPrev.handle, ACK, WAIT_TIMEOUT));
    CK(HcommReadOnThread(t, fromPrev.handle, p.outputPtr, fromPrev.remoteBuffer.addr, BLOCK));
    CK(HcommChannelNotifyRecordOnThread(t, fromPrev.handle, DATA));
    CK(HcommChannelNotifyWaitOnThread(t, toNext.handle, DATA, WAIT_TIMEOUT));
    return 0;
}

int Body(OpParam& p, AlgResourceCtx& r, Bug bug) {
    const bool me = (int32_t)r.rank == p.bugRank;
    const ThreadHandle t = r.threads[0];
    char* buf = static_cast<char*>(r.localBuffer.addr);
    if (bug == CRASH && me) {
        volatile int* nowhere = nullptr;
        *nowhere = 42;  // BUG: crash
    }
    if (bug == ABORT && me) {
        abort();  // BUG: aborts (SIGABRT raised inside libc)
    }
    if (bug == THREAD_MISSING) {
        /* main waits for the worker, which should record slot 1 of main when done */
        CK(HcommLocalCopyOnThread(r.threads[1], buf + r.rank * BLOCK, p.inputPtr, BLOCK));
        if (!me) CK(HcommThreadNotifyRecordOnThread(r.threads[1], t, 1));  // BUG (on bugRank): never recorded
        CK(HcommThreadNotifyWaitOnThread(t, 1, WAIT_TIMEOUT));
        CK(HcommLocalCopyOnThread(t, p.outputPtr, buf + r.rank * BLOCK, BLOCK));
        return 0;
    }
    if (bug == SPIN && me) {
        volatile uint64_t spins = 0;
        while (p.bugRank >= 0) spins = spins + 1;  // BUG: spins, never returns
    }
    if (bug == STRAY) {
        /* a ring step: data notify to the next rank, then wait for the previous rank's */
        uint32_t nx = (r.rank + 1) % r.rankSize, pv = (r.rank + r.rankSize - 1) % r.rankSize;
        uint32_t to = me ? (nx + 1) % r.rankSize : nx;
        CK(HcommChannelNotifyRecordOnThread(t, r.channels[to].handle, DATA));  // BUG (on bugRank): wrong peer
        CK(HcommChannelNotifyWaitOnThread(t, r.channels[pv].handle, DATA, WAIT_TIMEOUT));
        return 0;
    }
    if (bug == HELD) {
        /* bugRank: t0 records the ACK notify of the next rank twice, nobody waits for it: a lost
         * notify. The host does not wait for this call's "done" (scenario "Held-"), so the device
         * threads run it on the executor while the host goes on to HcclCommDestroy;
         * HCOMM_KIT_FAULT_FINDING_HOLD_MS holds the finding until then. */
        if (me) {
            const ChannelInfo& next = r.channels[(r.rank + 1) % r.rankSize];
            CK(HcommChannelNotifyRecordOnThread(t, next.handle, ACK));
            CK(HcommChannelNotifyRecordOnThread(t, next.handle, ACK));  // BUG: twice, never waited for
        }
        return 0;
    }
    if (bug == LAG && r.rankSize == 4) {
        /* No bug: rank 0 waits for rank 1's DATA (recorded after 0.3 s), then for rank 3's ACK
         * (after 1 s), then records DATA to rank 2, which waits for it. Run with rank 0's published
         * state 0.4 s late (HCOMM_KIT_FAULT_MONITOR_LAG=0:400): between 0.3 and 0.7 s the board
         * shows rank 0 still waiting for rank 1, whose part is over. */
        if (r.rank == 0) {
            CK(HcommChannelNotifyWaitOnThread(t, r.channels[1].handle, DATA, WAIT_TIMEOUT));
            CK(HcommChannelNotifyWaitOnThread(t, r.channels[3].handle, ACK, WAIT_TIMEOUT));
            CK(HcommChannelNotifyRecordOnThread(t, r.channels[2].handle, DATA));
        } else if (r.rank == 2) {
            CK(HcommChannelNotifyWaitOnThread(t, r.channels[0].handle, DATA, WAIT_TIMEOUT));
        } else {
            usleep(r.rank == 1 ? 300000 : 1000000); /* the kernel's own work before it queues the record */
            CK(HcommChannelNotifyRecordOnThread(t, r.channels[0].handle, r.rank == 1 ? DATA : ACK));
        }
        return 0;
    }
    if (bug == RING || bug == RING_SHIFT) return Ring(p, r, bug == RING_SHIFT && me);
    if (bug == P2P || bug == P2P_SHIFT) return P2p(p, r, bug == P2P_SHIFT && me);
    if (bug == CYCLE) {
        /* every rank waits for its next before acknowledging its previous: nobody starts */
        uint32_t nx = (r.rank + 1) % r.rankSize, pv = (r.rank + r.rankSize - 1) % r.rankSize;
        CK(HcommChannelNotifyWaitOnThread(t, r.channels[nx].handle, ACK, WAIT_TIMEOUT));  // BUG: wait before record
        CK(HcommChannelNotifyRecordOnThread(t, r.channels[pv].handle, ACK));
        return 0;
    }
    /* own block: into my own slot, then to every peer's slot `rank` */
    uint64_t own = r.rank * BLOCK;
    CK(HcommLocalCopyOnThread(t, buf + own, p.inputPtr, BLOCK));
    for (uint32_t q = 0; q < r.rankSize; q++) {
        if (q == r.rank) continue;
        const ChannelInfo& ch = r.channels[q];
        char* dst = static_cast<char*>(ch.remoteBuffer.addr) + own;
        bool first_peer = q == (r.rank + 1) % r.rankSize;
        if (me && first_peer && bug == MISSING) continue;  // BUG: no write, no notify to this peer
        if (me && first_peer && bug == STALE) {
            CK(HcommChannelNotifyRecordOnThread(t, ch.handle, DATA));  // BUG: notify without the data
            continue;
        }
        if (me && first_peer && bug == RACE)
            dst = static_cast<char*>(ch.remoteBuffer.addr) + q * BLOCK;  // BUG: writes into the peer's own slot
        CK(HcommWriteWithNotifyOnThread(t, ch.handle, dst, p.inputPtr, BLOCK, DATA));
        if (me && first_peer && bug == DOUBLE) CK(HcommChannelNotifyRecordOnThread(t, ch.handle, DATA));  // BUG: twice
    }
    /* collect: wait each peer's data notify, then copy its slot */
    for (uint32_t q = 0; q < r.rankSize; q++) {
        if (q != r.rank) CK(HcommChannelNotifyWaitOnThread(t, r.channels[q].handle, DATA, WAIT_TIMEOUT));
        if (bug == OWN_BLOCK && q == r.rank) continue;  // BUG (every rank): its own block never reaches the output
        CK(HcommLocalCopyOnThread(t, B(p.outputPtr, q * BLOCK), buf + q * BLOCK, BLOCK));
    }
    /* clean exit: nobody touches my buffer after this */
    for (uint32_t q = 0; q < r.rankSize; q++)
        if (q != r.rank) CK(HcommChannelNotifyRecordOnThread(t, r.channels[q].handle, ACK));
    for (uint32_t q = 0; q < r.rankSize; q++)
        if (q != r.rank) CK(HcommChannelNotifyWaitOnThread(t, r.channels[q].handle, ACK, WAIT_TIMEOUT));
    return 0;
}

/* The canonical kernel shape: acquire, batch, wait "go", body, record "done", end, release. */
unsigned Run(OpParam* p, Bug bug) {
    AlgResourceCtx& r = *p->resCtx;
    if (HcommAcquireComm(p->commName) != HCCL_SUCCESS) return 1000;
    if (HcommBatchModeStart(p->tag) != HCCL_SUCCESS) {
        HcommReleaseComm(p->commName);
        return 1001;
    }
    int rc = 0;
    if (HcommThreadNotifyWaitOnThread(r.aicpuThread, 0, WAIT_TIMEOUT)) rc = __LINE__;
    if (!rc) rc = Body(*p, r, bug);
    if (!rc && HcommThreadNotifyRecordOnThread(r.aicpuThread, r.cpuThreadOnAicpu, 0)) rc = __LINE__;
    if (HcommBatchModeEnd(p->tag) != HCCL_SUCCESS && !rc) rc = 1002;
    if (HcommReleaseComm(p->commName) != HCCL_SUCCESS && !rc) rc = 1003;
    return (unsigned)rc;
}

}  // namespace

extern "C" unsigned int DgGood(OpParam* p) { return Run(p, NONE); }
extern "C" unsigned int DgMissing(OpParam* p) { return Run(p, MISSING); }
extern "C" unsigned int DgDouble(OpParam* p) { return Run(p, DOUBLE); }
extern "C" unsigned int DgCycle(OpParam* p) { return Run(p, CYCLE); }
extern "C" unsigned int DgRace(OpParam* p) { return Run(p, RACE); }
extern "C" unsigned int DgStale(OpParam* p) { return Run(p, STALE); }
extern "C" unsigned int DgCrash(OpParam* p) { return Run(p, CRASH); }
extern "C" unsigned int DgThreadMissing(OpParam* p) { return Run(p, THREAD_MISSING); }
extern "C" unsigned int DgSpin(OpParam* p) { return Run(p, SPIN); }
extern "C" unsigned int DgStray(OpParam* p) { return Run(p, STRAY); }
extern "C" unsigned int DgRing(OpParam* p) { return Run(p, RING); }
extern "C" unsigned int DgRingShift(OpParam* p) { return Run(p, RING_SHIFT); }
extern "C" unsigned int DgP2p(OpParam* p) { return Run(p, P2P); }
extern "C" unsigned int DgP2pShift(OpParam* p) { return Run(p, P2P_SHIFT); }
extern "C" unsigned int DgHeld(OpParam* p) { return Run(p, HELD); }
extern "C" unsigned int DgLag(OpParam* p) { return Run(p, LAG); }
extern "C" unsigned int DgOwnBlock(OpParam* p) { return Run(p, OWN_BLOCK); }
extern "C" unsigned int DgAbort(OpParam* p) { return Run(p, ABORT); }
