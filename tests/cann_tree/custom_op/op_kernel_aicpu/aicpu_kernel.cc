/* AICPU kernel of the test operator: ring shift through the HCCL buffers (stage, ACK, read, DATA). */
#include <cstdio>
#include <cstring>

#include <hccl/hcomm_primitives.h>

#include "common.h"
#include "tag_text.h"

#define KCHK(expr)                                                                   \
    do {                                                                             \
        int32_t r_ = (int32_t)(expr);                                                \
        if (r_ != 0) {                                                               \
            fprintf(stderr, "[shift kernel] %s returned %d\n", #expr, (int)r_);      \
            return (uint32_t)r_;                                                     \
        }                                                                            \
    } while (0)

static uint32_t ElemSize(int32_t dt)
{
    static const uint32_t sizes[] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};
    return dt >= 0 && dt < 12 ? sizes[dt] : 0;
}

static uint32_t Body(const OpParam* p, const AlgResourceCtx* c)
{
    const ThreadHandle t = c->aicpuThread;
    KCHK(HcommThreadNotifyWaitOnThread(t, 0, kShiftTimeout));
    const uint64_t bytes = p->count * ElemSize(p->dataType);
    uint64_t slice = c->localBuffer.size < c->prevBuffer.size ? c->localBuffer.size : c->prevBuffer.size;
    for (uint64_t off = 0; off < bytes; off += slice) {
        uint64_t len = bytes - off < slice ? bytes - off : slice;
        KCHK(HcommLocalCopyOnThread(t, c->localBuffer.addr, (const uint8_t*)p->inputPtr + off, len));
        KCHK(HcommChannelNotifyRecordOnThread(t, c->next, kShiftAck));
        KCHK(HcommChannelNotifyWaitOnThread(t, c->prev, kShiftAck, kShiftTimeout));
        KCHK(HcommReadOnThread(t, c->prev, (uint8_t*)p->outputPtr + off, c->prevBuffer.addr, len));
        KCHK(HcommChannelNotifyRecordOnThread(t, c->prev, kShiftData));
        KCHK(HcommChannelNotifyWaitOnThread(t, c->next, kShiftData, kShiftTimeout));
    }
    KCHK(HcommThreadNotifyRecordOnThread(t, c->cpuThreadOnAicpu, 0));
    return 0;
}

extern "C" uint32_t HkShiftEntry(void* args)
{
    const OpParam* p = static_cast<const OpParam*>(args);
    /* the kernel's (new ABI) copy of the class the host library also has */
    TagText tag;
    tag.Add("shift");
    tag.Add(p->commName);
    char expect[160];
    snprintf(expect, sizeof expect, "shift_%llx", (unsigned long long)tag.Hash());
    if (strcmp(expect, p->tag) != 0) {
        fprintf(stderr, "[shift kernel] tag %s, expected %s\n", p->tag, expect);
        return 1;
    }
    const bool lock = p->devType != 2;
    if (lock) KCHK(HcommAcquireComm(p->commName));
    KCHK(HcommBatchModeStart(p->tag));
    uint32_t ret = Body(p, p->resCtx);
    int32_t end = HcommBatchModeEnd(p->tag);
    if (lock) HcommReleaseComm(p->commName);
    return ret ? ret : (uint32_t)end;
}

extern "C" uint32_t HkShiftAicpuKernel(void* args)
{
    return HkShiftEntry(args);
}
