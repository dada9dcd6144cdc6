/* The timing model's log: every task a kernel queues gets a ModelTask in its rank's ModelArea of
 * the job segment (a few stores, no allocation), every kernel launch that queues tasks on a
 * communicator a ModelLaunch. A wait learns which record it consumed when it runs (DevCtl::mrec,
 * see hcomm/hooks.h). HCOMM_KIT_MODEL=0 turns the log off. */
#include "base/reduce.h"
#include "hcomm/hooks.h"
#include "model/model.h"

#include <cstring>

namespace emu {

namespace {

struct Open {
    Comm* c;
    uint64_t kseq;
    uint32_t number;
};
thread_local std::vector<Open> tl_open; /* launches the running kernel logs (one per communicator) */

uint32_t open_launch(Comm* c, ModelArea& a, const HTask& t) {
    for (auto& o : tl_open)
        if (o.c == c && o.kseq == t.kseq) return o.number;
    uint32_t number = a.launches.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (number == 0) number = a.launches.fetch_add(1, std::memory_order_acq_rel) + 1; /* 0 means "being written" */
    ModelLaunch& L = a.l[number % kModelLaunches];
    L.number.store(0, std::memory_order_release);
    L.closed.store(0, std::memory_order_relaxed);
    L.pending.store(0, std::memory_order_relaxed);
    L.overflow.store(0, std::memory_order_relaxed);
    L.tag16 = t.tag16;
    L.inst = t.inst;
    L.first = a.next.load(std::memory_order_acquire);
    L.end.store(L.first, std::memory_order_relaxed);
    L.kseq = t.kseq;
    const char* tag = t.tag && *t.tag ? t.tag : (t.kernel ? t.kernel : "");
    const size_t n = strnlen(tag, sizeof L.tag - 1); /* once per launch: no snprintf on the hot path */
    memcpy(L.tag, tag, n);
    L.tag[n] = 0;
    L.number.store(number, std::memory_order_release);
    tl_open.push_back({c, t.kseq, number});
    return number;
}

void emit(HTask& t, HThread* th) {
    if (!model_logging() || !th || !th->comm) return;
    Comm* c = th->comm;
    if (!c->job || c->rank >= kMaxRanks) return;
    ModelArea& a = c->job->model[c->rank];
    uint32_t number = open_launch(c, a, t);
    ModelLaunch& L = a.l[number % kModelLaunches];
    uint64_t pos = a.next.fetch_add(1, std::memory_order_acq_rel);
    ModelTask& m = a.t[pos % kModelTasks];
    m.launch = number;
    m.thread = (uint16_t)thread_code(th);
    m.kind = t.mkind;
    m.dtype = t.dtype;
    m.peer = t.mpeer;
    m.index = t.desc.index;
    m.bytes = t.op == HOp::Reduce ? t.n * dtype_size(t.dtype) : t.op == HOp::Copy ? t.n : 0;
    m.matched.store(0, std::memory_order_relaxed);
    if (mkind::is_wait(t.mkind)) L.pending.fetch_add(1, std::memory_order_acq_rel);
    if (pos + 1 - L.first > kModelTasks) L.overflow.store(1, std::memory_order_relaxed);
    L.end.store(pos + 1, std::memory_order_release);
    t.mid = kModelIdValid | ((uint64_t)c->rank << 48) | pos;
}

void matched(const HTask& t, uint64_t rec) {
    Comm* c = t.comm;
    if (!c || !c->job) return;
    uint32_t rank = (uint32_t)(t.mid >> 48) & 0x7fff;
    if (rank >= kMaxRanks) return;
    ModelArea& a = c->job->model[rank];
    uint64_t pos = t.mid & ((1ull << 48) - 1);
    ModelTask& m = a.t[pos % kModelTasks];
    m.matched.store(rec ? rec : kModelIdValid, std::memory_order_release);
    ModelLaunch& L = a.l[m.launch % kModelLaunches];
    if (L.number.load(std::memory_order_acquire) == m.launch) L.pending.fetch_sub(1, std::memory_order_acq_rel);
}

void kernel_end() {
    for (auto& o : tl_open) {
        if (!o.c->job) continue;
        ModelLaunch& L = o.c->job->model[o.c->rank].l[o.number % kModelLaunches];
        if (L.number.load(std::memory_order_acquire) == o.number) L.closed.store(1, std::memory_order_release);
    }
    tl_open.clear();
}

struct ModelRecordHooks {
    ModelRecordHooks() {
        hcomm_hooks.model_emit = emit;
        hcomm_hooks.model_matched = matched;
        hcomm_hooks.model_kernel_end = kernel_end;
    }
} g_model_record_hooks;

}  // namespace

}  // namespace emu
