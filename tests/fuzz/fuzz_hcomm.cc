/* Fuzz target: address, length and count checks of the Hcomm data-plane API (hcomm.md §3.1-§3.2).
 *
 * Set-up (once): a 2-rank communicator inside this process (rank 1 on a helper thread, device 1),
 * channels from rank 0 to rank 1 over the product's native protocol and over RoCE, and a host
 * (COMM_ENGINE_CPU_TS) thread of rank 0 bound to a stream, so calls are validated and then run
 * eagerly on the stream. HCCL_BUFFSIZE is 1 MB; HCOMM_KIT_SOC picks A2 (default) or Ascend950.
 *
 * Each input is a program of calls: local copy/reduce, write/read (+reduce, +notify), channel and
 * thread notify records, batch transfers, fence/drain, with fuzzed thread/channel handles,
 * addresses (device memory, the local HCCL buffer, the peer's HCCL buffer, host memory, NULL, any
 * 64-bit value; plus any offset), lengths, counts, dtypes, reduce ops and notify indices. A model of
 * the spec (local ranges inside device memory of the thread's device, remote ranges inside the
 * peer's HCCL buffer, count x element size without overflow, A2/A3 reduce limits, notify index
 * below notifyNum, A2/A3 batch rules) predicts acceptance; the target asserts it, and the stream
 * is synchronised after every accepted call so the copies and reductions really run (ASan checks
 * every byte they touch). Waits are not issued (they would block on purpose). */
#include "fuzz_common.h"

#include <hccl/hccl.h>
#include <hccl/hccl_channel.h>
#include <hccl/hccl_res.h>
#include <hccl/hccl_res_expt.h>
#include <hccl/hcomm_primitives.h>

#include <thread>
#include <vector>

extern "C" {
int32_t shim_local_reduce(ThreadHandle, void*, const void*, uint64_t, int32_t, int32_t);
int32_t shim_write_reduce(ThreadHandle, ChannelHandle, void*, const void*, uint64_t, int32_t, int32_t);
int32_t shim_write_reduce_notify(ThreadHandle, ChannelHandle, void*, const void*, uint64_t, int32_t, int32_t, uint32_t);
int32_t shim_read_reduce(ThreadHandle, ChannelHandle, void*, const void*, uint64_t, int32_t, int32_t);
}

namespace {

constexpr uint32_t kNotify = 4;
constexpr size_t kLoc = 4096;

struct Region {
    uintptr_t base = 0;
    uint64_t size = 0;
    bool holds(uintptr_t p, uint64_t len) const { return p >= base && p - base < size && len <= size - (p - base); }
};

struct Setup {
    bool is950 = false;
    HcclComm comm0 = nullptr, comm1 = nullptr;
    aclrtStream stream = nullptr;
    ThreadHandle thr = 0, thr_ai = 0, thr2 = 0;
    ChannelHandle ch_native = 0, ch_roce = 0;
    Region loc, lbuf, mirror, rbuf; /* rank 0's device memory / HCCL buffer / rank 1's map of it; peer buffer */
    std::vector<Region> local;      /* every region of device 0 (memory of rank 0's device) */
    std::vector<uint8_t> host;      /* ordinary host memory */
};

HcclChannelDesc desc(uint32_t peer, CommProtocol proto) {
    HcclChannelDesc d;
    HcclChannelDescInit(&d, 1);
    d.remoteRank = peer;
    d.channelProtocol = proto;
    d.notifyNum = kNotify;
    return d;
}

Setup& setup() {
    static Setup* s = [] {
        auto* x = new Setup();
        setenv("HCCL_BUFFSIZE", "1", 0);
        FUZZ_SETUP(aclInit(nullptr));
        const char* soc = aclrtGetSocName();
        x->is950 = soc && strstr(soc, "950");
        CommProtocol native = x->is950 ? COMM_PROTOCOL_UB_CTP : COMM_PROTOCOL_HCCS;
        HcclChannelDesc d[2] = {desc(1, native), desc(1, COMM_PROTOCOL_ROCE)};
        HcclRootInfo root;
        FUZZ_SETUP(aclrtSetDevice(0));
        FUZZ_SETUP(HcclGetRootInfo(&root));
        std::thread peer([&] {
            FUZZ_SETUP(aclrtSetDevice(1));
            FUZZ_SETUP(HcclCommInitRootInfo(2, &root, 1, &x->comm1));
            HcclChannelDesc e[2] = {desc(0, native), desc(0, COMM_PROTOCOL_ROCE)};
            ChannelHandle h[2];
            FUZZ_SETUP(HcclChannelAcquire(x->comm1, COMM_ENGINE_CPU_TS, e, 2, h));
        });
        FUZZ_SETUP(HcclCommInitRootInfo(2, &root, 0, &x->comm0));
        ChannelHandle h[2];
        FUZZ_SETUP(HcclChannelAcquire(x->comm0, COMM_ENGINE_CPU_TS, d, 2, h));
        peer.join();
        x->ch_native = h[0];
        x->ch_roce = h[1];
        FUZZ_SETUP(aclrtCreateStream(&x->stream));
        FUZZ_SETUP(HcclThreadAcquireWithStream(x->comm0, COMM_ENGINE_CPU_TS, x->stream, kNotify, &x->thr));
        FUZZ_SETUP(HcclThreadExportToCommEngine(x->comm0, 1, &x->thr, COMM_ENGINE_AICPU_TS, &x->thr_ai));
        FUZZ_SETUP(HcclThreadAcquire(x->comm0, COMM_ENGINE_CPU_TS, 1, kNotify, &x->thr2));
        void* p = nullptr;
        uint64_t n = 0;
        FUZZ_SETUP(aclrtMalloc(&p, kLoc, ACL_MEM_MALLOC_HUGE_FIRST));
        memset(p, 1, kLoc);
        x->loc = {(uintptr_t)p, (kLoc + 31) / 32 * 32 + (x->is950 ? 0 : 32)};
        FUZZ_SETUP(HcclGetHcclBuffer(x->comm0, &p, &n));
        x->lbuf = {(uintptr_t)p, n};
        FUZZ_SETUP(HcclGetRemoteIpcHcclBuf(x->comm1, 0, &p, &n));
        x->mirror = {(uintptr_t)p, n};
        FUZZ_SETUP(HcclChannelGetHcclBuffer(x->comm0, x->ch_native, &p, &n));
        x->rbuf = {(uintptr_t)p, n};
        x->local = {x->loc, x->lbuf};
        if (x->mirror.base != x->lbuf.base) x->local.push_back(x->mirror);
        x->host.assign(4096, 7);
        return x;
    }();
    return *s;
}

bool local_ok(Setup& s, uintptr_t p, uint64_t len) {
    for (auto& r : s.local)
        if (r.holds(p, len)) return true;
    return false;
}

/* An address chosen by the input. */
uintptr_t pick_addr(Reader& r, Setup& s) {
    uint8_t sel = r.u8();
    switch (sel % 6) {
        case 0: return s.loc.base + r.size(s.loc.size + 16);
        case 1: return s.lbuf.base + r.size(s.lbuf.size + 16);
        case 2: return s.rbuf.base + r.size(s.rbuf.size + 16);
        case 3: return (uintptr_t)s.host.data() + r.size(s.host.size());
        case 4: return 0;
        default: return (uintptr_t)r.u64();
    }
}

ThreadHandle pick_thread(Reader& r, Setup& s, bool* valid) {
    uint8_t sel = r.u8();
    *valid = sel < 224;
    if (sel < 224) return s.thr;
    switch (sel % 4) {
        case 0: return 0;
        case 1: return s.thr_ai; /* the AICPU view: refused on the host */
        case 2: return (ThreadHandle)r.u64();
        default: return s.thr + 8;
    }
}

ChannelHandle pick_channel(Reader& r, Setup& s, bool* valid, bool* roce) {
    uint8_t sel = r.u8();
    *valid = sel < 224;
    *roce = sel & 1;
    if (sel < 224) return (sel & 1) ? s.ch_roce : s.ch_native;
    switch (sel % 3) {
        case 0: return 0;
        case 1: return (ChannelHandle)r.u64();
        default: return s.ch_native + 16;
    }
}

size_t esize(int32_t dt) {
    static const size_t k[12] = {1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2};
    return dt >= 0 && dt < 12 ? k[dt] : 0;
}

bool reduce_ok(Setup& s, int32_t dt, int32_t op) {
    if (s.is950) return dt >= 0 && dt < 12 && op >= 0 && op <= 3;
    bool d = dt == HCOMM_DATA_TYPE_FP32 || dt == HCOMM_DATA_TYPE_FP16 || dt == HCOMM_DATA_TYPE_INT8 ||
             dt == HCOMM_DATA_TYPE_INT16 || dt == HCOMM_DATA_TYPE_INT32 || dt == HCOMM_DATA_TYPE_BFP16;
    return d && (op == HCOMM_REDUCE_SUM || op == HCOMM_REDUCE_MAX || op == HCOMM_REDUCE_MIN);
}

/* One transfer as the model sees it (fields of a call or of a batch descriptor). */
struct Xfer {
    uintptr_t dst = 0, src = 0;
    uint64_t n = 0;
    bool reduce = false, write = true, notify = false;
    int32_t dt = 0, op = 0;
    uint32_t idx = 0;
    void read(Reader& r, Setup& s, bool red) {
        reduce = red;
        dst = pick_addr(r, s);
        src = pick_addr(r, s);
        n = r.size(reduce ? 600 : 2500);
        if (reduce) {
            uint8_t k = r.u8();
            dt = (k & 0x80) ? (int32_t)r.u32() : (int32_t)(k % 14);
            k = r.u8();
            op = (k & 0x80) ? (int32_t)r.u32() : (int32_t)(k % 5);
        }
        idx = r.u8() < 240 ? r.u8() % (kNotify + 1) : r.u32();
    }
    /* Does the model accept it (given a valid thread and channel)? */
    bool ok(Setup& s) const {
        if (n == 0) return false;
        uint64_t bytes = n;
        if (reduce) {
            if (!reduce_ok(s, dt, op)) return false;
            if (n > UINT64_MAX / esize(dt)) return false;
            bytes = n * esize(dt);
        }
        bool addrs = write ? (dst && s.rbuf.holds(dst, bytes) && src && local_ok(s, src, bytes))
                           : (dst && local_ok(s, dst, bytes) && src && s.rbuf.holds(src, bytes));
        return addrs && (!notify || idx < kNotify);
    }
};

void expect(bool want_ok, int rc, const char* what, const Xfer* x) {
    if (want_ok) {
        FUZZ_ASSERT(rc == HCCL_SUCCESS, "%s returned %d but the model accepts it (dst %p src %p n %llu dt %d op %d idx %u)",
                    what, rc, x ? (void*)x->dst : nullptr, x ? (void*)x->src : nullptr,
                    x ? (unsigned long long)x->n : 0ull, x ? x->dt : 0, x ? x->op : 0, x ? x->idx : 0);
    } else {
        FUZZ_ASSERT(rc == HCCL_E_PARA || rc == HCCL_E_PTR || rc == HCCL_E_NOT_SUPPORT,
                    "%s returned %d but the model refuses it (dst %p src %p n %llu dt %d op %d idx %u)", what, rc,
                    x ? (void*)x->dst : nullptr, x ? (void*)x->src : nullptr, x ? (unsigned long long)x->n : 0ull,
                    x ? x->dt : 0, x ? x->op : 0, x ? x->idx : 0);
    }
}

void sync(Setup& s) {
    int rc = aclrtSynchronizeStream(s.stream);
    FUZZ_ASSERT(rc == ACL_SUCCESS, "stream sync after accepted calls returned %d", rc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Setup& s = setup();
    Reader r(data, size);
    int steps = 0;
    clear_error();
    while (!r.empty() && steps++ < 200) {
        uint8_t op = r.u8() % 12;
        bool tv = false, cv = false, roce = false;
        ThreadHandle t = pick_thread(r, s, &tv);
        int rc;
        bool want;
        switch (op) {
            case 0:
            case 1: { /* local copy / reduce: both ranges in device memory of the thread's device */
                Xfer x;
                x.read(r, s, op == 1);
                uint64_t bytes = x.n;
                bool ok = tv && x.n;
                if (ok && x.reduce) {
                    ok = reduce_ok(s, x.dt, x.op) && x.n <= UINT64_MAX / esize(x.dt);
                    if (ok) bytes = x.n * esize(x.dt);
                }
                want = ok && x.dst && x.src && local_ok(s, x.dst, bytes) && local_ok(s, x.src, bytes);
                rc = op == 0 ? HcommLocalCopyOnThread(t, (void*)x.dst, (const void*)x.src, x.n)
                             : shim_local_reduce(t, (void*)x.dst, (const void*)x.src, x.n, x.dt, x.op);
                expect(want, rc, op == 0 ? "HcommLocalCopyOnThread" : "HcommLocalReduceOnThread", &x);
                break;
            }
            case 2: case 3: case 4: case 5: case 6: case 7: { /* write / read over a channel */
                ChannelHandle ch = pick_channel(r, s, &cv, &roce);
                Xfer x;
                x.read(r, s, op == 3 || op == 5 || op == 7);
                x.write = op <= 5;
                x.notify = op == 4 || op == 5;
                want = tv && cv && x.ok(s) && (op != 5 || s.is950);
                void* d = (void*)x.dst;
                const void* sp = (const void*)x.src;
                switch (op) {
                    case 2: rc = HcommWriteOnThread(t, ch, d, sp, x.n); break;
                    case 3: rc = shim_write_reduce(t, ch, d, sp, x.n, x.dt, x.op); break;
                    case 4: rc = HcommWriteWithNotifyOnThread(t, ch, d, sp, x.n, x.idx); break;
                    case 5: rc = shim_write_reduce_notify(t, ch, d, sp, x.n, x.dt, x.op, x.idx); break;
                    case 6: rc = HcommReadOnThread(t, ch, d, sp, x.n); break;
                    default: rc = shim_read_reduce(t, ch, d, sp, x.n, x.dt, x.op); break;
                }
                expect(want, rc, "a channel transfer", &x);
                break;
            }
            case 8: { /* channel notify record */
                ChannelHandle ch = pick_channel(r, s, &cv, &roce);
                uint32_t idx = r.u8() < 240 ? r.u8() % (kNotify + 1) : r.u32();
                want = tv && cv && idx < kNotify;
                rc = HcommChannelNotifyRecordOnThread(t, ch, idx);
                expect(want, rc, "HcommChannelNotifyRecordOnThread", nullptr);
                break;
            }
            case 9: { /* thread notify record */
                bool dv = false;
                ThreadHandle dst = pick_thread(r, s, &dv);
                if (dv && (r.u8() & 1)) dst = s.thr2;
                uint32_t idx = r.u8() < 240 ? r.u8() % (kNotify + 1) : r.u32();
                want = tv && dv && idx < kNotify;
                rc = HcommThreadNotifyRecordOnThread(t, dst, idx);
                expect(want, rc, "HcommThreadNotifyRecordOnThread", nullptr);
                break;
            }
            case 10: { /* batch transfer */
                ChannelHandle ch = pick_channel(r, s, &cv, &roce);
                uint32_t k = r.u8() % 5;
                std::vector<HcommBatchTransferDesc> descs(k ? k : 1);
                bool all_ok = k > 0 && (s.is950 || roce);
                for (uint32_t i = 0; i < k; i++) {
                    HcommBatchTransferDesc& dd = descs[i];
                    memset(&dd, 0, sizeof dd);
                    uint8_t ty = r.u8();
                    int32_t type = ty < 250 ? (int32_t)(ty % 8) - 1 : (int32_t)r.u32();
                    memcpy(&dd.transType, &type, sizeof type);
                    Xfer x;
                    bool known = type >= 0 && type <= 6;
                    if (!known) {
                        all_ok = false;
                        continue;
                    }
                    if (!s.is950 && type != HCOMM_TRANSFER_TYPE_WRITE && type != HCOMM_TRANSFER_TYPE_READ) all_ok = false;
                    if (type == HCOMM_TRANSFER_TYPE_NOTIFY_RECORD) {
                        dd.transferInfo.notifyRecord.notifyIdx = r.u8() % (kNotify + 1);
                        if (dd.transferInfo.notifyRecord.notifyIdx >= kNotify) all_ok = false;
                        continue;
                    }
                    bool red = type == HCOMM_TRANSFER_TYPE_WRITE_REDUCE || type == HCOMM_TRANSFER_TYPE_READ_REDUCE ||
                               type == HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY;
                    x.read(r, s, red);
                    x.write = type != HCOMM_TRANSFER_TYPE_READ && type != HCOMM_TRANSFER_TYPE_READ_REDUCE;
                    x.notify = type == HCOMM_TRANSFER_TYPE_WRITE_WITH_NOTIFY ||
                               type == HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY;
                    if (!x.ok(s)) all_ok = false;
                    auto& ti = dd.transferInfo;
                    switch (type) {
                        case HCOMM_TRANSFER_TYPE_WRITE:
                        case HCOMM_TRANSFER_TYPE_READ:
                            ti.write.len = x.n, ti.write.dst = (void*)x.dst, ti.write.src = (void*)x.src;
                            break;
                        case HCOMM_TRANSFER_TYPE_WRITE_WITH_NOTIFY:
                            ti.writeWithNotify.len = x.n, ti.writeWithNotify.dst = (void*)x.dst;
                            ti.writeWithNotify.src = (void*)x.src, ti.writeWithNotify.notifyIdx = x.idx;
                            break;
                        case HCOMM_TRANSFER_TYPE_WRITE_REDUCE_WITH_NOTIFY:
                            ti.writeReduceWithNotify.count = x.n, ti.writeReduceWithNotify.dst = (void*)x.dst;
                            ti.writeReduceWithNotify.src = (void*)x.src, ti.writeReduceWithNotify.notifyIdx = x.idx;
                            memcpy(&ti.writeReduceWithNotify.reduceOp, &x.op, 4);
                            memcpy(&ti.writeReduceWithNotify.dataType, &x.dt, 4);
                            break;
                        default:
                            ti.reduce.count = x.n, ti.reduce.dst = (void*)x.dst, ti.reduce.src = (void*)x.src;
                            memcpy(&ti.reduce.reduceOp, &x.op, 4);
                            memcpy(&ti.reduce.dataType, &x.dt, 4);
                            break;
                    }
                }
                bool null_descs = (r.u8() & 7) == 0;
                want = tv && cv && !null_descs && all_ok;
                rc = HcommBatchTransferOnThread(t, ch, null_descs ? nullptr : descs.data(), k);
                expect(want, rc, "HcommBatchTransferOnThread", nullptr);
                break;
            }
            default: { /* fence (950) / drain (A2/A3, RoCE) */
                ChannelHandle ch = pick_channel(r, s, &cv, &roce);
                if (s.is950) {
                    rc = HcommChannelFenceOnThread(t, ch);
                    want = tv && cv;
                } else {
                    rc = HcommChannelDrainOnThread(t, ch);
                    want = tv && cv && roce;
                }
                expect(want, rc, s.is950 ? "HcommChannelFenceOnThread" : "HcommChannelDrainOnThread", nullptr);
                break;
            }
        }
        if (rc == HCCL_SUCCESS) sync(s);
        clear_error();
    }
    return 0;
}
