/* Kernels of the data-plane micro-benchmark (see bench_dataplane.py). */
#include <hccl/hcomm_primitives.h>
#include <cstdint>

struct BenchParam {
    char tag[32];
    ThreadHandle thread;      /* AICPU thread of this rank */
    ThreadHandle hostThread;  /* stream thread exported to AICPU: "done" */
    ChannelHandle channel;
    void* dst;                /* remote HCCL buffer (write) */
    void* src;                /* local HCCL buffer */
    uint64_t bytes;
    uint32_t iters;
    uint32_t rank;
    uint32_t mode;            /* 0 ping-pong, 1 write bandwidth */
};

extern "C" unsigned int BenchKernel(void* args) {
    BenchParam* p = static_cast<BenchParam*>(args);
    if (HcommBatchModeStart(p->tag)) return 1;
    for (uint32_t i = 0; i < p->iters; i++) {
        if (p->mode == 0) {
            if (p->rank == 0) {
                HcommChannelNotifyRecordOnThread(p->thread, p->channel, 0);
                HcommChannelNotifyWaitOnThread(p->thread, p->channel, 0, 60);
            } else {
                HcommChannelNotifyWaitOnThread(p->thread, p->channel, 0, 60);
                HcommChannelNotifyRecordOnThread(p->thread, p->channel, 0);
            }
        } else if (p->rank == 0) {
            HcommWriteOnThread(p->thread, p->channel, p->dst, p->src, p->bytes);
        }
    }
    HcommThreadNotifyRecordOnThread(p->thread, p->hostThread, 0);
    return HcommBatchModeEnd(p->tag) ? 1 : 0;
}
