/* Hcomm data plane (hcomm.md §3.1-§3.4): every call validates and only enqueues.
 *
 * Inside a kernel (an AICPU worker) the handles must be device-side views; on the host they must
 * be host-side (CPU_TS) views. Between HcommBatchModeStart/End the tasks are recorded per device
 * thread and submitted at End; outside batch mode Ascend950 submits at once (eager) and A2/A3
 * refuse, as the spec says they must use batch mode. Remote addresses must lie inside the peer's
 * HCCL buffer, local ones inside device memory of the thread's device. */
#include "acl/hooks.h"
#include "base/reduce.h"
#include "hcomm/dataplane.h"
#include "hcomm/hooks.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <set>

namespace emu {
namespace {

std::atomic<uint32_t> g_default_timeout_s{1836};
std::atomic<uint32_t> g_res_timeout_s{0};

const char* intern(const std::string& s) {
    static std::mutex m;
    static std::set<std::string> pool;
    std::lock_guard<std::mutex> g(m);
    return pool.insert(s).first->c_str();
}

thread_local BatchState tl_host_batch; /* batch state of host threads (kernels use kctx().batch) */
/* Emptied task vectors of submitted batches, for this thread's next ones (a kernel's batch state
 * is made anew at every launch). */
thread_local std::vector<std::vector<HTask>> tl_spare;
/* Return address of the exported Hcomm call being made: the call site in the kernel, stamped on
 * its task so that reports name the source line (KCALLER in every data-plane entry point). */
thread_local const void* tl_caller = nullptr;
#define KCALLER() (tl_caller = __builtin_return_address(0))

BatchState& batch() {
    KernelCtx& k = kctx();
    return k.active ? k.batch : tl_host_batch;
}

struct Call {
    const char* api;
    ThreadView* v = nullptr;
    HThread* t = nullptr;
    Device* dev = nullptr;
    int rank = -1;
};

int begin(Call& c, ThreadHandle thread) {
    if (!thread) return seterr(HCCL_E_PTR, c.api, "thread handle is 0");
    c.v = view_from_handle(thread);
    if (!c.v) return seterr(HCCL_E_PARA, c.api, "0x%llx is not a live ThreadHandle", (unsigned long long)thread);
    c.t = c.v->t;
    c.dev = c.t->dev;
    c.rank = c.t->comm ? comm_rank(c.t->comm) : -1;
    bool in_kernel = kctx().active;
    if (in_kernel && c.v->engine != Engine::Device)
        return seterr(HCCL_E_PARA, c.api,
                      "rank %d: ThreadHandle 0x%llx is the host-side (CPU engine) view of device thread t%u; inside an "
                      "AICPU kernel use the handle exported to COMM_ENGINE_AICPU_TS",
                      c.rank, (unsigned long long)thread, c.t->no);
    if (!in_kernel && c.v->engine != Engine::Device) return HCCL_SUCCESS;
    if (!in_kernel)
        return seterr(HCCL_E_PARA, c.api,
                      "rank %d: ThreadHandle 0x%llx is an AICPU-side view; on the host use the handle exported to "
                      "COMM_ENGINE_CPU_TS (HcclThreadExportToCommEngine)",
                      c.rank, (unsigned long long)thread);
    return HCCL_SUCCESS;
}

uint32_t tag_hash16(const char* s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    h = (h ^ (h >> 16)) & 0xffff;
    return h ? h : 1; /* 0 marks host-side tasks */
}

/* Stamps the operation of task h emitted inside a kernel: the op tag (batch tag, else the kernel
 * name), its instance on this communicator, and for channel tasks the channel's use number. */
void stamp_op(KernelCtx& k, const BatchState& b, Call& c, Channel* ch, HTask& h) {
    h.kseq = k.kseq;
    h.kernel = k.kernel;
    if (!k.optag) {
        k.optag = b.active && !b.tag.empty() ? b.itag : intern(k.kernel ? k.kernel : "");
        k.optag16 = tag_hash16(k.optag);
    }
    const char* tag = k.optag;
    if (!b.active || b.tag.empty()) h.tag = tag;
    h.tag16 = k.optag16;
    if (ch) {
        bool found = false;
        for (auto& u : k.chans)
            if (u.ch == ch) {
                h.use = u.use;
                found = true;
            }
        if (!found) {
            uint32_t use = ch->uses.fetch_add(1) + 1;
            ch->use_kseq[use % 8].store(k.kseq);
            k.chans.push_back({ch, use});
            h.use = use;
        }
    }
    Comm* cm = c.t->comm;
    for (auto& o : k.ops)
        if (o.c == cm && o.tag16 == h.tag16) {
            h.inst = o.inst;
            return;
        }
    uint32_t inst = cm ? comm_op_begin(cm, h.tag16, tag, k.kseq) : 0;
    k.ops.push_back({cm, h.tag16, inst});
    if (cm) kernel_note_comm(k, cm);
    h.inst = inst;
}

/* Queues h on c.t: into the open batch, onto the bound stream, or eagerly (950 only).
 * ch: the channel the task goes through (its use number is stamped), or nullptr. */
int emit(Call& c, HTask&& h, Channel* ch = nullptr) {
    BatchState& b = batch();
    h.api = c.api;
    h.comm = c.t->comm;
    if (ch && ch->link && (h.op == HOp::Copy || h.op == HOp::Reduce || h.op == HOp::Record)) h.link = ch->link;
    KernelCtx& kc = kctx();
    h.caller = kc.active ? tl_caller : nullptr; /* host calls come through ctypes/libffi: no line to show */
    static const char* const untagged = intern(std::string());
    h.tag = b.active && b.itag ? b.itag : untagged;
    if (h.op == HOp::Wait) h.desc.thread_no = h.desc.kind == 0 ? thread_code(c.t) : h.desc.thread_no;
    if (kc.active) {
        stamp_op(kc, b, c, ch, h);
        if (kc.run) kc.run->last_task_ns.store(now_coarse_ns(), std::memory_order_relaxed);
        /* the timing model logs every task a kernel queues (not one refused below) */
        if (b.active || c.t->stream_bound || is_950()) hooks::model_emit(h, c.t);
    }
    if (b.active) {
        for (auto& p : b.pending)
            if (p.first == c.t) {
                h.bidx = (uint32_t)p.second.size();
                p.second.push_back(std::move(h));
                return HCCL_SUCCESS;
            }
        b.pending.emplace_back(c.t, std::vector<HTask>());
        if (!tl_spare.empty()) {
            b.pending.back().second.swap(tl_spare.back());
            tl_spare.pop_back();
        } else {
            b.pending.back().second.reserve(32);
        }
        b.pending.back().second.push_back(std::move(h));
        return HCCL_SUCCESS;
    }
    h.bsize = 1;
    if (!c.t->stream_bound && !is_950())
        return seterr(HCCL_E_NOT_SUPPORT, c.api,
                      "rank %d: %s must run in batch mode (call HcommBatchModeStart first); only Ascend950 supports "
                      "eager mode",
                      c.rank, cfg().soc_name.c_str());
    hthread_submit_one(c.t, std::move(h));
    return HCCL_SUCCESS;
}

int check_local(Call& c, const char* what, const void* p, uint64_t len) {
    if (!p) return seterr(HCCL_E_PTR, c.api, "%s is NULL", what);
    MemRegion r;
    bool partial = false;
    if (mem_find(p, len, &r, &partial) && r.kind != MemKind::HostPinned && r.device == c.dev->id) return HCCL_SUCCESS;
    if (partial)
        return seterr(HCCL_E_PARA, c.api,
                      "rank %d: local %s %p + %llu bytes runs past the end of its %zu-byte %s at 0x%lx (by %llu bytes)",
                      c.rank, what, p, (unsigned long long)len, r.size, mem_kind_name(r.kind), (unsigned long)r.base,
                      (unsigned long long)((uintptr_t)p + len - (r.base + r.size)));
    return seterr(HCCL_E_PARA, c.api,
                  "rank %d: local %s %p (%llu bytes) is not device memory of device %d (aclrtMalloc, the HCCL buffer "
                  "or an engine context)",
                  c.rank, what, p, (unsigned long long)len, c.dev->id);
}

int check_remote(Call& c, Channel* ch, const char* what, const void* p, uint64_t len) {
    if (!p) return seterr(HCCL_E_PTR, c.api, "%s is NULL", what);
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)ch->remote_buf;
    if (a >= b && len <= ch->remote_buf_size && a - b <= ch->remote_buf_size - len) return HCCL_SUCCESS;
    long long off = (long long)(a - b);
    return seterr(HCCL_E_PARA, c.api,
                  "rank %d: remote %s %p + %llu bytes is outside rank %u's HCCL buffer (channel to rank %u: offset %lld, "
                  "length %llu, buffer size %llu); use addresses from HcclChannelGetHcclBuffer",
                  c.rank, what, p, (unsigned long long)len, ch->remote_rank, ch->remote_rank, off,
                  (unsigned long long)len, (unsigned long long)ch->remote_buf_size);
}

/* Race checker: the HCCL-buffer bytes a task touches (own buffer, or the peer's through ch). */
void local_access(Call& c, HTask::Access& a, const void* p, uint64_t len, uint8_t write) {
    if (!c.t->comm || !check_mode()) return;
    void* base;
    uint64_t size;
    comm_buffer(c.t->comm, &base, &size);
    uintptr_t x = (uintptr_t)p, b = (uintptr_t)base;
    if (x < b || x - b >= size) return;
    a.rank = (int16_t)c.rank;
    a.write = write;
    a.off = x - b;
    a.len = len;
}

void remote_access(Channel* ch, HTask::Access& a, const void* p, uint64_t len, uint8_t write) {
    if (!check_mode()) return;
    a.rank = (int16_t)ch->remote_rank;
    a.write = write;
    a.off = (uintptr_t)p - (uintptr_t)ch->remote_buf;
    a.len = len;
}

int get_channel(Call& c, ChannelHandle h, Channel** out) {
    if (!h) return seterr(HCCL_E_PTR, c.api, "channel handle is 0%s", comm_links_note(c.t->comm).c_str());
    Channel* ch = channel_from_handle(h);
    if (!ch) return seterr(HCCL_E_PARA, c.api, "0x%llx is not a live ChannelHandle", (unsigned long long)h);
    if (ch->comm != c.t->comm)
        return seterr(HCCL_E_PARA, c.api, "channel to rank %u belongs to another communicator than the thread t%u",
                      ch->remote_rank, c.t->no);
    *out = ch;
    return HCCL_SUCCESS;
}

int check_reduce(Call& c, int dtype, int op) {
    bool dt_ok, op_ok = op >= 0 && op <= 3;
    if (is_950()) {
        dt_ok = dtype_size(dtype) != 0;
    } else {
        dt_ok = dtype == HCOMM_DATA_TYPE_FP32 || dtype == HCOMM_DATA_TYPE_FP16 || dtype == HCOMM_DATA_TYPE_INT8 ||
                dtype == HCOMM_DATA_TYPE_INT16 || dtype == HCOMM_DATA_TYPE_INT32 || dtype == HCOMM_DATA_TYPE_BFP16;
        op_ok = op == HCOMM_REDUCE_SUM || op == HCOMM_REDUCE_MAX || op == HCOMM_REDUCE_MIN;
    }
    if (dt_ok && op_ok) return HCCL_SUCCESS;
    return seterr(HCCL_E_PARA, c.api, "rank %d: reduction %s x %s is not supported on %s (%s)", c.rank,
                  dtype_name(dtype), redop_name(op), cfg().soc_name.c_str(),
                  is_950() ? "int8..uint64, fp16, bf16, fp32, fp64 x sum/prod/max/min"
                           : "fp32, fp16, bf16, int8, int16, int32 x sum/max/min");
}

int check_count(Call& c, uint64_t n, const char* what) {
    if (n == 0) return seterr(HCCL_E_PARA, c.api, "rank %d: %s is 0", c.rank, what);
    return HCCL_SUCCESS;
}

/* Byte size of `count` elements of a (checked) dtype; a count whose byte size overflows is refused. */
int reduce_bytes(Call& c, uint64_t count, int dtype, uint64_t* bytes) {
    uint64_t es = dtype_size(dtype);
    if (es == 0 || count > UINT64_MAX / es)
        return seterr(HCCL_E_PARA, c.api, "rank %d: count %llu of %s (%llu bytes each) overflows a 64-bit byte size",
                      c.rank, (unsigned long long)count, dtype_name(dtype), (unsigned long long)es);
    *bytes = count * es;
    return HCCL_SUCCESS;
}

int chan_slot(Call& c, Channel* ch, uint32_t idx) {
    if (idx >= ch->notify_num)
        return seterr(HCCL_E_PARA, c.api, "rank %d: notify index %u out of range for channel to rank %u (notifyNum %u)",
                      c.rank, idx, ch->remote_rank, ch->notify_num);
    return HCCL_SUCCESS;
}

HTask wait_task(DevCtl* ctl, uint32_t slot, uint32_t timeout, uint8_t kind, int peer, uint32_t index, int rank) {
    HTask h;
    h.op = HOp::Wait;
    h.slot_ctl = ctl;
    h.slot = slot;
    h.slot_rank = (int16_t)rank;
    h.timeout_s = timeout;
    h.desc.kind = kind;
    h.desc.peer = (uint16_t)(peer < 0 ? 0 : peer);
    h.desc.index = index;
    h.peer_rank = peer;
    h.mkind = kind == 1 ? mkind::WaitChannel : kind == 2 ? mkind::WaitAcl : mkind::WaitThread;
    h.mpeer = (int16_t)(kind == 1 ? peer : -1);
    return h;
}

/* rank: the rank owning ctl; kind/index/thread: the notify in the SlotDesc words (0 thread slot
 * `index` of thread code `thread`, 1 channel slot `index`, 2 ACL notify `index`). */
HTask record_task(DevCtl* ctl, uint32_t slot, int rank, uint8_t kind, uint32_t index, uint32_t thread = 0) {
    HTask h;
    h.op = HOp::Record;
    h.slot_ctl = ctl;
    h.slot = slot;
    h.slot_rank = (int16_t)rank;
    h.chan_rec = kind == 1;
    h.desc.kind = kind;
    h.desc.index = index;
    h.desc.thread_no = thread;
    h.desc.peer = (uint16_t)(rank < 0 ? 0 : rank);
    h.mkind = kind == 1 ? mkind::RecordChannel : kind == 2 ? mkind::RecordAcl : mkind::RecordThread;
    h.mpeer = (int16_t)(kind == 1 ? rank : -1);
    return h;
}

/* Write / write-reduce / read / read-reduce with optional remote notify after the data landed.
 * check_only: validate without enqueueing (HcommBatchTransferOnThread checks every descriptor first). */
int transfer(const char* api, ThreadHandle thread, ChannelHandle channel, void* dst, const void* src, uint64_t n,
             bool reduce, int dtype, int op, bool write, bool notify, uint32_t notify_idx, bool check_only = false) {
    Call c{api};
    if (int r = begin(c, thread)) return r;
    Channel* ch;
    if (int r = get_channel(c, channel, &ch)) return r;
    if (int r = check_count(c, n, reduce ? "count" : "len")) return r;
    uint64_t bytes = n;
    if (reduce) {
        if (int r = check_reduce(c, dtype, op)) return r;
        if (int r = reduce_bytes(c, n, dtype, &bytes)) return r;
    }
    if (write) {
        if (int r = check_remote(c, ch, "dst", dst, bytes)) return r;
        if (int r = check_local(c, "src", src, bytes)) return r;
    } else {
        if (int r = check_local(c, "dst", dst, bytes)) return r;
        if (int r = check_remote(c, ch, "src", src, bytes)) return r;
    }
    if (notify)
        if (int r = chan_slot(c, ch, notify_idx)) return r;
    if (check_only) return HCCL_SUCCESS;
    HTask h;
    h.op = reduce ? HOp::Reduce : HOp::Copy;
    h.dst = dst;
    h.src = src;
    h.n = n;
    h.dtype = (uint8_t)dtype;
    h.redop = (uint8_t)op;
    h.mkind = write ? (reduce ? mkind::WriteReduce : mkind::Write) : (reduce ? mkind::ReadReduce : mkind::Read);
    h.mpeer = (int16_t)ch->remote_rank;
    if (write) {
        remote_access(ch, h.acc[0], dst, bytes, reduce ? 2 : 1);
        local_access(c, h.acc[1], src, bytes, 0);
    } else {
        remote_access(ch, h.acc[0], src, bytes, 0);
        local_access(c, h.acc[1], dst, bytes, reduce ? 2 : 1);
    }
    if (notify) {
        h.has_post_record = true;
        h.post_ctl = ch->remote_ctl;
        h.post_slot = ch->remote_slot_base + notify_idx;
        h.post_rank = (int16_t)ch->remote_rank;
        h.chan_rec = true;
        h.desc.kind = 1;
        h.desc.index = notify_idx;
        h.desc.peer = (uint16_t)ch->remote_rank;
    }
    return emit(c, std::move(h), ch);
}

/* A descriptor's transfer type read as an int: callers may pass values outside the enum, and
 * loading such a value through the enum type is undefined behaviour. */
int trans_type(const HcommBatchTransferDesc& d) {
    int32_t t;
    memcpy(&t, &d.transType, sizeof t);
    return t;
}

/* An enum argument read as the int the caller passed: C callers (and ctypes) may pass any value,
 * and loading an out-of-range value through the enum type is undefined behaviour. */
template <typename E>
int as_int(const E& e) { /* by reference: no load through the enum type */
    static_assert(sizeof(E) == sizeof(int32_t), "enum arguments are 4-byte ints");
    int32_t v;
    memcpy(&v, &e, sizeof v);
    return v;
}

int not_on_aicpu(const char* api) {
    return seterr(HCCL_E_NOT_SUPPORT, api,
                  "is a host-CPU API (Ascend950 host engine over RoCE); the AICPU_TS engine does not support it");
}

}  // namespace

/* AclHooks::kernel_returned, when a kernel returns: its operation instances and channel uses count
 * as submitted (every task of theirs is queued), and what it left open is closed. */
static std::string kernel_returned(KernelCtx& k) {
    hooks::model_kernel_end();
    for (auto& o : k.ops)
        if (o.c) comm_op_submitted(o.c, o.tag16, o.inst);
    for (auto& u : k.chans) {
        uint32_t cur = u.ch->uses_submitted.load();
        while (cur < u.use && !u.ch->uses_submitted.compare_exchange_weak(cur, u.use)) {
        }
    }
    std::string out;
    if (k.batch.active) {
        size_t n = 0;
        for (auto& p : k.batch.pending) n += p.second.size();
        out = strprintf("it left batch '%s' open (HcommBatchModeStart without HcommBatchModeEnd): %zu recorded task(s) "
                        "were discarded",
                        k.batch.tag.c_str(), n);
        k.batch = BatchState();
    }
    for (Comm* c : k.acquired) {
        comm_use_lock(c).unlock();
        out += std::string(out.empty() ? "" : "; ") + "it did not call HcommReleaseComm(\"" + comm_name(c) + "\")";
    }
    k.acquired.clear();
    return out;
}

namespace {
struct PrimitivesHooks {
    PrimitivesHooks() { acl_hooks.kernel_returned = kernel_returned; }
} g_primitives_hooks;
}  // namespace

}  // namespace emu

using namespace emu;

/* ================================================================ local operations */

EMU_API int32_t HcommLocalCopyOnThread(ThreadHandle thread, void* dst, const void* src, uint64_t len) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    if (int r = check_count(c, len, "len")) return r;
    if (int r = check_local(c, "dst", dst, len)) return r;
    if (int r = check_local(c, "src", src, len)) return r;
    HTask h;
    h.op = HOp::Copy;
    h.dst = dst;
    h.src = src;
    h.n = len;
    h.mkind = mkind::LocalCopy;
    local_access(c, h.acc[0], dst, len, 1);
    local_access(c, h.acc[1], src, len, 0);
    return emit(c, std::move(h));
}

EMU_API int32_t HcommLocalReduceOnThread(ThreadHandle thread, void* dst, const void* src, uint64_t count,
                                         HcommDataType dataType, HcommReduceOp reduceOp) {
    KCALLER();
    Call c{__func__};
    int dt = as_int(dataType), op = as_int(reduceOp);
    if (int r = begin(c, thread)) return r;
    if (int r = check_count(c, count, "count")) return r;
    if (int r = check_reduce(c, dt, op)) return r;
    uint64_t bytes = 0;
    if (int r = reduce_bytes(c, count, dt, &bytes)) return r;
    if (int r = check_local(c, "dst", dst, bytes)) return r;
    if (int r = check_local(c, "src", src, bytes)) return r;
    HTask h;
    h.op = HOp::Reduce;
    h.dst = dst;
    h.src = src;
    h.n = count;
    h.dtype = (uint8_t)dt;
    h.redop = (uint8_t)op;
    h.mkind = mkind::LocalReduce;
    local_access(c, h.acc[0], dst, bytes, 2);
    local_access(c, h.acc[1], src, bytes, 0);
    return emit(c, std::move(h));
}

EMU_API int32_t HcommThreadNotifyRecordOnThread(ThreadHandle thread, ThreadHandle dstThread, uint32_t dstNotifyIdx) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    if (!dstThread) return seterr(HCCL_E_PTR, c.api, "dstThread handle is 0");
    ThreadView* dv = view_from_handle(dstThread);
    if (!dv) return seterr(HCCL_E_PARA, c.api, "dstThread 0x%llx is not a live ThreadHandle", (unsigned long long)dstThread);
    if (dv->engine != c.v->engine)
        return seterr(HCCL_E_PARA, c.api,
                      "rank %d: dstThread 0x%llx is the %s view of thread t%u but the call runs on the %s; export it with "
                      "HcclThreadExportToCommEngine",
                      c.rank, (unsigned long long)dstThread, dv->engine == Engine::Device ? "AICPU" : "host", dv->t->no,
                      c.v->engine == Engine::Device ? "AICPU" : "host");
    if (dstNotifyIdx >= dv->t->nslots)
        return seterr(HCCL_E_PARA, c.api, "rank %d: notify index %u out of range for thread t%u (%u notify slots)", c.rank,
                      dstNotifyIdx, dv->t->no, dv->t->nslots);
    return emit(c, record_task(dv->t->dev->ctl, dv->t->slot_base + dstNotifyIdx, dv->t->comm ? comm_rank(dv->t->comm) : -1,
                               0, dstNotifyIdx, thread_code(dv->t)));
}

static int32_t thread_wait(const char* api, ThreadHandle thread, uint32_t notifyIdx, uint32_t timeOut) {
    Call c{api};
    if (int r = begin(c, thread)) return r;
    if (notifyIdx >= c.t->nslots)
        return seterr(HCCL_E_PARA, c.api, "rank %d: notify index %u out of range for thread t%u (%u notify slots)", c.rank,
                      notifyIdx, c.t->no, c.t->nslots);
    return emit(c, wait_task(c.dev->ctl, c.t->slot_base + notifyIdx, timeOut, 0, -1, notifyIdx, c.rank));
}

EMU_API int32_t HcommThreadNotifyWaitOnThread(ThreadHandle thread, uint32_t notifyIdx, uint32_t timeOut) {
    KCALLER();
    return thread_wait(__func__, thread, notifyIdx, timeOut);
}

EMU_API int32_t HcommThreadNotifyWaitOnThreadWithDefaultTimeout(ThreadHandle thread, uint32_t notifyIdx) {
    KCALLER();
    return thread_wait(__func__, thread, notifyIdx, g_default_timeout_s.load());
}

static int acl_notify_check(Call& c, uint64_t id) {
    if (is_950())
        return seterr(HCCL_E_NOT_SUPPORT, c.api, "not supported on Ascend950 (A5); use the thread-notify handshake");
    std::lock_guard<std::mutex> g(c.dev->m);
    if (id > UINT32_MAX || !c.dev->acl_notifies.count((uint32_t)id))
        return seterr(HCCL_E_PARA, c.api, "rank %d: %llu is not the id of a live ACL notify of device %d (aclrtGetNotifyId)",
                      c.rank, (unsigned long long)id, c.dev->id);
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommAclrtNotifyRecordOnThread(ThreadHandle thread, uint64_t dstNotifyId) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    if (int r = acl_notify_check(c, dstNotifyId)) return r;
    return emit(c, record_task(c.dev->ctl, (uint32_t)dstNotifyId, c.rank, 2, (uint32_t)dstNotifyId));
}

EMU_API int32_t HcommAclrtNotifyWaitOnThread(ThreadHandle thread, uint64_t notifyId, uint32_t timeOut) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    if (int r = acl_notify_check(c, notifyId)) return r;
    return emit(c, wait_task(c.dev->ctl, (uint32_t)notifyId, timeOut, 2, -1, (uint32_t)notifyId, c.rank));
}

/* ================================================================ channel operations */

EMU_API int32_t HcommWriteOnThread(ThreadHandle thread, ChannelHandle channel, void* dst, const void* src, uint64_t len) {
    KCALLER();
    return transfer(__func__, thread, channel, dst, src, len, false, 0, 0, true, false, 0);
}

EMU_API int32_t HcommWriteReduceOnThread(ThreadHandle thread, ChannelHandle channel, void* dst, const void* src,
                                         uint64_t count, HcommDataType dataType, HcommReduceOp reduceOp) {
    KCALLER();
    return transfer(__func__, thread, channel, dst, src, count, true, as_int(dataType), as_int(reduceOp), true, false, 0);
}

EMU_API int32_t HcommWriteWithNotifyOnThread(ThreadHandle thread, ChannelHandle channel, void* dst, const void* src,
                                             uint64_t len, uint32_t remoteNotifyIdx) {
    KCALLER();
    return transfer(__func__, thread, channel, dst, src, len, false, 0, 0, true, true, remoteNotifyIdx);
}

EMU_API int32_t HcommWriteReduceWithNotifyOnThread(ThreadHandle thread, ChannelHandle channel, void* dst,
                                                   const void* src, uint64_t count, HcommDataType dataType,
                                                   HcommReduceOp reduceOp, uint32_t remoteNotifyIdx) {
    KCALLER();
    if (!is_950())
        return seterr(HCCL_E_NOT_SUPPORT, __func__, "only Ascend950 supports write-reduce with notify (running as %s)",
                      cfg().soc_name.c_str());
    return transfer(__func__, thread, channel, dst, src, count, true, as_int(dataType), as_int(reduceOp), true, true, remoteNotifyIdx);
}

EMU_API int32_t HcommReadOnThread(ThreadHandle thread, ChannelHandle channel, void* dst, const void* src, uint64_t len) {
    KCALLER();
    return transfer(__func__, thread, channel, dst, src, len, false, 0, 0, false, false, 0);
}

EMU_API int32_t HcommReadReduceOnThread(ThreadHandle thread, ChannelHandle channel, void* dst, const void* src,
                                        uint64_t count, HcommDataType dataType, HcommReduceOp reduceOp) {
    KCALLER();
    return transfer(__func__, thread, channel, dst, src, count, true, as_int(dataType), as_int(reduceOp), false, false, 0);
}

EMU_API int32_t HcommChannelNotifyRecordOnThread(ThreadHandle thread, ChannelHandle channel, uint32_t remoteNotifyIdx) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    Channel* ch;
    if (int r = get_channel(c, channel, &ch)) return r;
    if (int r = chan_slot(c, ch, remoteNotifyIdx)) return r;
    return emit(c, record_task(ch->remote_ctl, ch->remote_slot_base + remoteNotifyIdx, (int)ch->remote_rank, 1,
                               remoteNotifyIdx), ch);
}

static int32_t channel_wait(const char* api, ThreadHandle thread, ChannelHandle channel, uint32_t idx, uint32_t timeOut) {
    Call c{api};
    if (int r = begin(c, thread)) return r;
    Channel* ch;
    if (int r = get_channel(c, channel, &ch)) return r;
    if (int r = chan_slot(c, ch, idx)) return r;
    return emit(c, wait_task(c.dev->ctl, ch->local_slot_base + idx, timeOut, 1, (int)ch->remote_rank, idx, c.rank), ch);
}

EMU_API int32_t HcommChannelNotifyWaitOnThread(ThreadHandle thread, ChannelHandle channel, uint32_t localNotifyIdx,
                                               uint32_t timeOut) {
    KCALLER();
    return channel_wait(__func__, thread, channel, localNotifyIdx, timeOut);
}

EMU_API int32_t HcommChannelNotifyWaitOnThreadWithDefaultTimeout(ThreadHandle thread, ChannelHandle channel,
                                                                 uint32_t localNotifyIdx) {
    KCALLER();
    return channel_wait(__func__, thread, channel, localNotifyIdx, g_default_timeout_s.load());
}

EMU_API int32_t HcommBatchTransferOnThread(ThreadHandle thread, ChannelHandle channel,
                                           const HcommBatchTransferDesc* transferDescs, uint32_t transferDescNum) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    Channel* ch;
    if (int r = get_channel(c, channel, &ch)) return r;
    if (!transferDescs) return seterr(HCCL_E_PTR, c.api, "transferDescs is NULL");
    if (transferDescNum == 0) return seterr(HCCL_E_PARA, c.api, "transferDescNum is 0");
    if (!is_950() && ch->protocol != COMM_PROTOCOL_ROCE)
        return seterr(HCCL_E_NOT_SUPPORT, c.api, "on %s batch transfer needs a RoCE channel (channel to rank %u uses protocol %d)",
                      cfg().soc_name.c_str(), ch->remote_rank, ch->protocol);
    for (uint32_t i = 0; i < transferDescNum; i++) {
        const HcommBatchTransferDesc& d = transferDescs[i];
        int t = trans_type(d);
        if (!is_950() && t != HCOMM_TRANSFER_TYPE_WRITE && t != HCOMM_TRANSFER_TYPE_READ)
            return seterr(HCCL_E_NOT_SUPPORT, c.api, "descriptor %u: transfer type %d; %s supports only WRITE and READ", i, t,
                          cfg().soc_name.c_str());
    }
    /* Two passes: a batch with an invalid descriptor is rejected as a whole, nothing enqueued. */
    for (int pass = 0; pass < 2; pass++) {
        bool check = pass == 0;
        for (uint32_t i = 0; i < transferDescNum; i++) {
            const HcommBatchTransferDesc& d = transferDescs[i];
            int r;
            switch (trans_type(d)) {
                case HCOMM_TRANSFER_TYPE_WRITE:
                    r = transfer(c.api, thread, channel, d.transferInfo.write.dst, d.transferInfo.write.src,
                                 d.transferInfo.write.len, false, 0, 0, true, false, 0, check);
                    break;
                case HCOMM_TRANSFER_TYPE_READ:
                    r = transfer(c.api, thread, channel, d.transferInfo.read.dst, d.transferInfo.read.src,
                                 d.transferInfo.read.len, false, 0, 0, false, false, 0, check);
                    break;
                case HCOMM_TRANSFER_TYPE_WRITE_REDUCE:
                    r = transfer(c.api, thread, channel, d.transferInfo.reduce.dst, d.transferInfo.reduce.src,
                                 d.transferInfo.reduce.count, true, as_int(d.transferInfo.reduce.dataType),
                                 as_int(d.transferInfo.reduce.reduceOp), true, false, 0, check);
                    break;
                case HCOMM_TRANSFER_TYPE_READ_REDUCE:
                    r = transfer(c.api, thread, channel, d.transferInfo.reduce.dst, d.transferInfo.reduce.src,
                                 d.transferInfo.reduce.count, true, as_int(d.transferInfo.reduce.dataType),
                                 as_int(d.transferInfo.reduce.reduceOp), false, false, 0, check);
                    break;
                case HCOMM_TRANSFER_TYPE_WRITE_WITH_NOTIFY:
                    r = transfer(c.api, thread, channel, d.transferInfo.writeWithNotify.dst,
                                 d.transferInfo.writeWithNotify.src, d.transferInfo.writeWithNotify.len, false, 0, 0, true,
                                 true, d.transferInfo.writeWithNotify.notifyIdx, check);
                    break;
                case HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY:
                    r = transfer(c.api, thread, channel, d.transferInfo.writeReduceWithNotify.dst,
                                 d.transferInfo.writeReduceWithNotify.src, d.transferInfo.writeReduceWithNotify.count,
                                 true, as_int(d.transferInfo.writeReduceWithNotify.dataType),
                                 as_int(d.transferInfo.writeReduceWithNotify.reduceOp), true, true,
                                 d.transferInfo.writeReduceWithNotify.notifyIdx, check);
                    break;
                case HCOMM_TRANSFER_TYPE_NOTIFY_RECORD:
                    r = check ? chan_slot(c, ch, d.transferInfo.notifyRecord.notifyIdx)
                              : emit(c, record_task(ch->remote_ctl, ch->remote_slot_base + d.transferInfo.notifyRecord.notifyIdx,
                                                    (int)ch->remote_rank, 1, d.transferInfo.notifyRecord.notifyIdx), ch);
                    break;
                default:
                    return seterr(HCCL_E_PARA, c.api, "descriptor %u: transfer type %d is not valid", i, trans_type(d));
            }
            if (r) return check ? r : seterr(HCCL_E_INTERNAL, c.api, "descriptor %u failed after validation (%d)", i, r);
        }
    }
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommChannelFenceOnThread(ThreadHandle thread, ChannelHandle channel) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    Channel* ch;
    if (int r = get_channel(c, channel, &ch)) return r;
    if (!is_950()) return seterr(HCCL_E_NOT_SUPPORT, c.api, "channel fence exists only on Ascend950");
    HTask h; /* tasks of one thread complete in order: the fence is a no-op marker */
    return emit(c, std::move(h), ch);
}

EMU_API int32_t HcommChannelDrainOnThread(ThreadHandle thread, ChannelHandle channel) {
    KCALLER();
    Call c{__func__};
    if (int r = begin(c, thread)) return r;
    Channel* ch;
    if (int r = get_channel(c, channel, &ch)) return r;
    if (is_950()) return seterr(HCCL_E_NOT_SUPPORT, c.api, "channel drain does not exist on Ascend950 (use the fence)");
    if (ch->protocol != COMM_PROTOCOL_ROCE)
        return seterr(HCCL_E_NOT_SUPPORT, c.api, "channel drain needs a RoCE channel (channel to rank %u uses protocol %d)",
                      ch->remote_rank, ch->protocol);
    HTask h;
    return emit(c, std::move(h), ch);
}

/* ================================================================ host-only / NBI variants */

EMU_API int32_t HcommWriteNbiOnThread(ThreadHandle, ChannelHandle, void*, const void*, uint64_t) {
    return not_on_aicpu(__func__);
}
EMU_API int32_t HcommWriteNbi(ChannelHandle, void*, const void*, uint64_t) { return not_on_aicpu(__func__); }
EMU_API int32_t HcommWriteWithNotifyNbiOnThread(ThreadHandle, ChannelHandle, void*, const void*, uint64_t, uint32_t) {
    return not_on_aicpu(__func__);
}
EMU_API int32_t HcommWriteWithNotifyNbi(ChannelHandle, void*, const void*, uint64_t, uint32_t) {
    return not_on_aicpu(__func__);
}
EMU_API int32_t HcommReadNbiOnThread(ThreadHandle, ChannelHandle, void*, const void*, uint64_t) {
    return not_on_aicpu(__func__);
}
EMU_API int32_t HcommReadNbi(ChannelHandle, void*, const void*, uint64_t) { return not_on_aicpu(__func__); }
EMU_API int32_t HcommChannelNotifyRecord(ChannelHandle, uint32_t) { return not_on_aicpu(__func__); }
EMU_API int32_t HcommChannelNotifyWait(ChannelHandle, uint32_t, uint32_t) { return not_on_aicpu(__func__); }
EMU_API int32_t HcommChannelFence(ChannelHandle) { return not_on_aicpu(__func__); }
EMU_API int32_t HcommFenceOnThread(ThreadHandle) { return not_on_aicpu(__func__); }

/* ================================================================ control */

EMU_API int32_t HcommBatchModeStart(const char* batchTag) {
    BatchState& b = batch();
    if (b.active)
        return seterr(HCCL_E_PARA, __func__, "batch '%s' is still open on this thread (HcommBatchModeEnd missing)",
                      b.tag.c_str());
    b.active = true;
    /* The interned text of the last tag this thread opened: a kernel opens the same tag every call. */
    static thread_local const char* last_itag = nullptr;
    const char* t = batchTag ? batchTag : "";
    if (!last_itag || strcmp(last_itag, t) != 0) last_itag = intern(t);
    b.tag.assign(last_itag);
    b.itag = last_itag;
    b.pending.clear();
    kernel_batch_reopened();
    /* A batch reopened inside a kernel whose earlier tasks went to a communicator that has since
     * been aborted (a peer died, a task failed, a mismatch): those tasks were dropped, so whatever
     * the kernel waits for (a flag one of them writes, see the built-ins' HkDrain) never comes.
     * The batch is open all the same, so the kernel's cleanup (HcommBatchModeEnd) goes as written. */
    KernelCtx& k = kctx();
    if (k.active)
        for (const KernelCtx::OpUse& o : k.ops) {
            std::string why;
            if (o.c && comm_aborted(o.c, &why))
                return seterr(HCCL_E_REMOTE, __func__,
                              "communicator '%s' of this kernel's earlier tasks was aborted, so they were dropped: %s",
                              comm_name(o.c), why.c_str());
        }
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommBatchModeEnd(const char* batchTag) {
    BatchState& b = batch();
    const char* tag = batchTag ? batchTag : "";
    if (!b.active) return seterr(HCCL_E_PARA, __func__, "no batch is open on this thread (tag '%s')", tag);
    if (b.tag != tag)
        return seterr(HCCL_E_PARA, __func__, "tag '%s' does not match the open batch '%s'", tag, b.tag.c_str());
    /* The batch's list moves out (to this thread's list of the last batch, whose storage the
     * batch state takes back): neither is allocated again per batch. */
    static thread_local std::vector<std::pair<HThread*, std::vector<HTask>>> tl_submitting;
    std::vector<std::pair<HThread*, std::vector<HTask>>>& pending = tl_submitting;
    pending.clear();
    pending.swap(b.pending);
    b.active = false; /* the tag's buffer is kept for the next batch */
    b.itag = nullptr;
    for (auto& p : pending) {
        for (HTask& h : p.second) h.bsize = (uint32_t)p.second.size();
        hthread_submit(p.first, std::move(p.second));
        /* A device thread's queue took the tasks one by one: their vector serves the next batch. */
        if (p.second.capacity() && tl_spare.size() < 8) {
            p.second.clear();
            tl_spare.push_back(std::move(p.second));
        }
    }
    pending.clear();
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommAcquireComm(const char* commId) {
    if (!commId) return seterr(HCCL_E_PTR, __func__, "commId is NULL");
    KernelCtx& k = kctx();
    if (!k.active) return seterr(HCCL_E_NOT_SUPPORT, __func__, "is a device-side call: use it inside the AICPU kernel");
    Comm* c = comm_find_by_name(commId, k.dev);
    if (!c)
        return seterr(HCCL_E_NOT_FOUND, __func__, "no communicator named '%s' on device %d (HcclGetCommName)", commId,
                      k.dev ? k.dev->id : -1);
    for (Comm* a : k.acquired)
        if (a == c) return seterr(HCCL_E_PARA, __func__, "communicator '%s' is already acquired by this kernel", commId);
    /* Another kernel may hold it (it runs on another stream); one that overran its launch timeout
     * and could not be stopped holds it for good: fail instead of waiting forever. */
    std::string why;
    bool lost = false;
    /* try_lock first: the stop test below is a std::function (an allocation) made only to wait */
    if (!comm_use_lock(c).try_lock() && !comm_use_acquire(c, [&] {
            lost = k.dev && k.dev->lost.load();
            return lost || comm_aborted(c, &why);
        })) {
        if (lost) {
            std::lock_guard<std::mutex> g(k.dev->m);
            return seterr(HCCL_E_INTERNAL, __func__, "communicator '%s' is held for good: %s", commId,
                          k.dev->lost_reason.c_str());
        }
        return seterr(HCCL_E_INTERNAL, __func__, "communicator '%s' was aborted: %s", commId, why.c_str());
    }
    k.acquired.push_back(c);
    kernel_note_comm(k, c);
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommReleaseComm(const char* commId) {
    if (!commId) return seterr(HCCL_E_PTR, __func__, "commId is NULL");
    KernelCtx& k = kctx();
    if (!k.active) return seterr(HCCL_E_NOT_SUPPORT, __func__, "is a device-side call: use it inside the AICPU kernel");
    for (size_t i = 0; i < k.acquired.size(); i++)
        if (!strcmp(comm_name(k.acquired[i]), commId)) {
            comm_use_lock(k.acquired[i]).unlock();
            k.acquired.erase(k.acquired.begin() + (long)i);
            return HCCL_SUCCESS;
        }
    return seterr(HCCL_E_PARA, __func__, "communicator '%s' was not acquired by this kernel (HcommAcquireComm)", commId);
}

static int check_timeout_value(const char* api, float t, uint32_t* out) {
    if (std::isnan(t) || t < 0 || (double)t > (double)UINT32_MAX)
        return seterr(HCCL_E_PARA, api, "timeout %g s is not in [0, %u]", (double)t, UINT32_MAX);
    *out = (uint32_t)t; /* only whole seconds are honoured */
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommSetNotifyWaitTimeOut(float timeOut) {
    uint32_t v = 0;
    if (int r = check_timeout_value(__func__, timeOut, &v)) return r;
    g_default_timeout_s.store(v);
    return HCCL_SUCCESS;
}

EMU_API int32_t HcommThreadResAcquireTimeOut(float timeOut) {
    uint32_t v = 0;
    if (int r = check_timeout_value(__func__, timeOut, &v)) return r;
    g_res_timeout_s.store(v);
    return HCCL_SUCCESS;
}

/* 950-only task cache: optional per spec; lookups always miss, so kernels take their normal path. */
static int task_cache_gate(const char* api, const char* tag) {
    if (!is_950()) return seterr(HCCL_E_NOT_SUPPORT, api, "the AICPU_TS task cache exists only on Ascend950");
    if (!tag) return seterr(HCCL_E_PTR, api, "tag is NULL");
    return HCCL_SUCCESS;
}

EMU_API HcommResult HcommAicpuTsTaskCacheLookup(const char* tag, bool* isHit) {
    if (int r = task_cache_gate(__func__, tag)) return r;
    if (!isHit) return seterr(HCCL_E_PTR, __func__, "isHit is NULL");
    *isHit = false;
    return HCCL_SUCCESS;
}

EMU_API HcommResult HcommAicpuTsTaskCacheStart(const char* tag, void** addrs, uint64_t* sizes, uint64_t count) {
    (void)addrs;
    (void)sizes;
    (void)count;
    return task_cache_gate(__func__, tag);
}

EMU_API HcommResult HcommAicpuTsTaskCacheEnd(const char* tag) { return task_cache_gate(__func__, tag); }

EMU_API HcommResult HcommAicpuTsTaskCacheExecute(const char* tag, void** addrs, uint64_t* sizes, uint64_t count) {
    (void)addrs;
    (void)sizes;
    (void)count;
    if (int r = task_cache_gate(__func__, tag)) return r;
    return seterr(HCCL_E_NOT_FOUND, __func__, "no cached tasks for tag '%s' (the emulator never caches; Lookup misses)",
                  tag);
}

EMU_API HcommResult HcommAicpuTsTaskCacheClear(const char* tag) { return task_cache_gate(__func__, tag); }
