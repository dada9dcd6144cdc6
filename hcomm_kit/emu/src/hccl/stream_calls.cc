/* HcommKitStreamCalls (hcomm_kit/emu_ext.h): a host's launch sequence (go, launch, done, sync) as one
 * call. Each call goes through its public function, so checks, codes and messages are theirs.
 *
 * With HCOMM_KIT_SC_INLINE on an idle stream, the calling thread runs the tasks itself
 * (stream_inline_begin / stream_inline_end): the kernel entry under the crash guard and its launch
 * timeout, then the "done" wait, which runs the device threads' tasks meanwhile (a helper, see
 * sched.cc). A blocking call then needs no thread hand-off on this rank: the stream's worker is
 * neither woken nor waited for, which on a loaded or oversubscribed node saves two wake-ups of a
 * sleeping thread (each tens of microseconds on a VM) per call.
 *
 * A HCOMM_KIT_SC_CALL_CHECK (the collective-call check) goes first, so a mismatch fails the call before
 * anything is enqueued; a blocking collective then also waits for every rank to have posted its
 * call (settle_call). */
#include "hccl/comm.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>

using namespace emu;

static int32_t one_call(aclrtStream stream, const HcommKitStreamCall& c) {
    switch (c.kind) {
        case HCOMM_KIT_SC_LAUNCH:
            return aclrtLaunchKernelWithConfig(reinterpret_cast<aclrtFuncHandle>(c.a), c.u32, stream,
                                               reinterpret_cast<aclrtLaunchKernelCfg*>(c.c),
                                               reinterpret_cast<aclrtArgsHandle>(c.b), nullptr);
        case HCOMM_KIT_SC_THREAD_RECORD:
            return HcommThreadNotifyRecordOnThread(c.a, c.b, c.u32);
        case HCOMM_KIT_SC_THREAD_WAIT:
            if (c.b > UINT32_MAX)
                return seterr(HCCL_E_PARA, "HcommThreadNotifyWaitOnThread", "timeout %llu s is above %u",
                              (unsigned long long)c.b, UINT32_MAX);
            return HcommThreadNotifyWaitOnThread(c.a, c.u32, (uint32_t)c.b);
        case HCOMM_KIT_SC_NOTIFY_RECORD:
            return aclrtRecordNotify(reinterpret_cast<aclrtNotify>(c.a), stream);
        case HCOMM_KIT_SC_NOTIFY_WAIT:
            return aclrtWaitAndResetNotify(reinterpret_cast<aclrtNotify>(c.a), stream, c.u32);
        case HCOMM_KIT_SC_CALL_CHECK: {
            const char* sig = reinterpret_cast<const char*>(c.b);
            return HcommKitCallCheck(reinterpret_cast<HcclComm>(c.a), (int32_t)c.u32, sig,
                                     c.c ? reinterpret_cast<const char*>(c.c) : sig, nullptr, 0);
        }
        case HCOMM_KIT_SC_OUTPUT:
            return 0; /* watched around the sequence (HcommKitStreamCalls) */
        default:
            return seterr(ACL_ERROR_INVALID_PARAM, "HcommKitStreamCalls",
                          "call kind %u is not one of HcommKitStreamCalls' call kinds (1-7)", c.kind);
    }
}

namespace {
constexpr uint64_t kSettleNs = 5000000000ull; /* longest a finished call waits for the others to check theirs */

/* ---- the unwritten-output check (HCOMM_KIT_SC_OUTPUT) ----
 * The device tasks' writes into the call's output are collected while it runs (output_watch_*,
 * acl/memory.cc); what no task wrote is a finding: those bytes would come back as data although
 * the operator never wrote them. */

/* "" or the finding for watch id of dev over [base, base + len) (label: what the call is). */
std::string output_finding(Device* dev, uint64_t id, uint64_t len, const char* label) {
    uint64_t unwritten = 0;
    auto gaps = output_watch_end(dev, id, &unwritten);
    if (!unwritten) return "";
    std::string ranges;
    for (const auto& g : gaps) ranges += strprintf("%s[%llu, %llu)", ranges.empty() ? "" : ", ", (unsigned long long)g.first,
                                                   (unsigned long long)g.second);
    if (unwritten > 0 && gaps.size() == 8) ranges += ", ...";
    std::string text = strprintf(
        "[hcomm-kit check] unwritten output: %s: %llu of its %llu output bytes were not written by the call (bytes %s "
        "of the output): they would come back as whatever the buffer held before. An operator writes its whole output "
        "on every rank its kind (op.toml [op].kind) defines one",
        label && *label ? label : "a call", (unsigned long long)unwritten, (unsigned long long)len, ranges.c_str());
    rank_log("%s", text.c_str());
    if (check_mode() == 2) {
        EMU_LOG(LOG_WARN, "%s (HCOMM_KIT_CHECK=warn: the call goes on)", text.c_str());
        return "";
    }
    return text + " (HCOMM_KIT_CHECK=warn reports without failing; =0 turns the checker off)";
}

/* A stream task of the check for a sequence made without SYNC: "arm" watches the output when the
 * stream gets to the sequence, "verify" (queued after its calls) judges it. */
struct OutputWatchTask : Task {
    bool arm = false;
    Device* dev = nullptr;
    const void* base = nullptr;
    uint64_t len = 0;
    std::string label;
    OutputWatchTask* verifier = nullptr; /* arm: its verify task (queued behind it: alive while it runs) */
    uint64_t id = 0;                     /* verify: the watch, set by its arm task */
    bool judge = true;                   /* verify: false when the sequence failed (only ends the watch) */
    int run(Stream*, std::string* msg) override {
        if (arm) {
            verifier->id = output_watch_begin(dev, base, len);
            return 0;
        }
        if (!judge) {
            drop();
            return 0;
        }
        *msg = output_finding(dev, id, len, label.c_str());
        id = 0;
        return msg->empty() ? 0 : kCheckErrorCode;
    }
    void drop() override {
        uint64_t unwritten = 0;
        if (!arm && id) output_watch_end(dev, id, &unwritten); /* the stream failed before: nothing to judge */
        id = 0;
    }
    const char* name() const override { return arm ? "output watch" : "output check"; }
};

/* After a blocking collective whose call check passed: return only once every rank has posted that
 * call and compared it with the others' (or died, left, or the communicator was aborted). A rank
 * that posts a different call later finds the mismatch and aborts the communicator; without this
 * wait, a rank whose part of the operation needs nothing from that rank (a broadcast's non-root,
 * say) would have returned success before. Returns 0, or HCCL_E_PARA when the communicator was
 * aborted for a mismatch.
 * The wait spins briefly, then yields, then sleeps with back-off (0 % CPU while a rank is late),
 * and gives up (success) after kSettleNs: the late rank still fails its own call then. */
int settle_call(Comm* c, uint64_t seq) {
    JobSeg* j = c->job;
    if (!j || !seq) return 0;
    auto reached = [&] {
        for (uint32_t r = 0; r < c->nranks; r++) {
            if (r == c->rank) continue;
            /* its comparison done, not only its call posted: a rank that posts last and finds the
             * mismatch aborts between the two, and a call that returned in between would succeed */
            if (j->calls[r][seq % kCallDepth].checked.load(std::memory_order_seq_cst) >= seq) continue;
            if (comm_peer_gone(c, (int)r) || comm_peer_dead(c, (int)r)) continue;
            return false;
        }
        return true;
    };
    uint64_t t0 = 0, pause_ns = 20000;
    for (uint32_t round = 0; !reached() && !comm_aborted(c, nullptr); round++) {
        if (round < 64) {
            spin_pause();
            continue;
        }
        uint64_t now = now_ns();
        if (!t0) t0 = now;
        if (now - t0 >= kSettleNs) break;
        if (now - t0 < 1000000ull) {
            sched_yield();
        } else {
            usleep((useconds_t)(pause_ns / 1000));
            pause_ns = std::min<uint64_t>(pause_ns * 2, 5000000ull);
        }
    }
    std::string why;
    AbortKind kind = AbortKind::Other;
    if (!comm_aborted(c, &why) || !comm_abort_info(c, &kind, nullptr) || kind != AbortKind::Mismatch) return 0;
    return seterr_str(HCCL_E_PARA, "HcommKitCallCheck", why);
}
}  // namespace

EMU_API int32_t HcommKitStreamCalls(aclrtStream stream, const HcommKitStreamCall* calls, uint32_t n, uint32_t flags,
                                    uint32_t* failed) {
    const char* api = __func__;
    uint32_t where = 0;
    if (!failed) failed = &where;
    *failed = 0;
    if (int r = check_init(api)) return r;
    if (n && !calls) return seterr(ACL_ERROR_INVALID_PARAM, api, "calls is NULL with n = %u", n);
    if (flags & ~(HCOMM_KIT_SC_SYNC | HCOMM_KIT_SC_INLINE))
        return seterr(ACL_ERROR_INVALID_PARAM, api, "unknown flag bits 0x%x", flags & ~3u);
    const bool sync = flags & HCOMM_KIT_SC_SYNC;
    Stream* s = nullptr;
    if (sync) {
        int code = 0;
        s = stream_resolve(stream, &code, api);
        if (!s) {
            *failed = n;
            return code;
        }
    }
    /* the unwritten-output check: the output a sequence declares is watched from here */
    const HcommKitStreamCall* out = nullptr;
    if (check_mode())
        for (uint32_t i = 0; i < n; i++)
            if (calls[i].kind == HCOMM_KIT_SC_OUTPUT && calls[i].a && calls[i].b) out = &calls[i];
    /* Without SYNC: a task that watches when the stream gets here, and one after the calls that
     * judges (queued on every way out once the first is: it owns the watch). */
    Stream* os = nullptr;
    std::unique_ptr<OutputWatchTask> verify;
    if (out && !sync) {
        int code = 0;
        os = stream_resolve(stream, &code, api);
        if (!os) return code;
        auto arm = std::make_unique<OutputWatchTask>();
        verify = std::make_unique<OutputWatchTask>();
        for (OutputWatchTask* t : {arm.get(), verify.get()}) {
            t->dev = os->dev;
            t->base = reinterpret_cast<const void*>(out->a);
            t->len = out->b;
            if (out->c) t->label = reinterpret_cast<const char*>(out->c);
        }
        arm->arm = true;
        arm->verifier = verify.get();
        if (int r = stream_enqueue(os, std::move(arm))) return r;
    }
    struct VerifyQueue { /* the judging task goes after whatever the sequence enqueued */
        Stream* s;
        std::unique_ptr<OutputWatchTask>* t;
        ~VerifyQueue() {
            if (*t) {
                (*t)->judge = false; /* a failed sequence: only end the watch */
                stream_enqueue(s, std::unique_ptr<Task>(t->release()));
            }
        }
    } verify_queue{os, &verify};
    uint64_t watch = out && sync ? output_watch_begin(s->dev, reinterpret_cast<const void*>(out->a), out->b) : 0;
    struct WatchEnd { /* a sequence that fails before its judgement drops its watch */
        Device* dev;
        uint64_t* id;
        ~WatchEnd() {
            uint64_t u;
            if (*id) output_watch_end(dev, *id, &u);
        }
    } watch_end{s ? s->dev : nullptr, &watch};
    const bool inl = sync && (flags & HCOMM_KIT_SC_INLINE) && stream_inline_begin(s);
    Comm* checked = nullptr; /* a collective call check made by the sequence, and the call's number */
    uint64_t seq = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (calls[i].kind == HCOMM_KIT_SC_CALL_CHECK) {
            /* On a communicator another rank's failure aborted, the call fails with that failure (its
             * description compared with calls the others made after failing would only say they differ). */
            std::string why;
            Comm* cc = comm_from_handle(reinterpret_cast<HcclComm>(calls[i].a));
            if (cc && comm_aborted(cc, &why)) {
                *failed = i;
                if (inl) stream_inline_end(s, false, api);
                return seterr_str(HCCL_E_REMOTE, "HcommKitCallCheck", why);
            }
        }
        if (sync && calls[i].kind == HCOMM_KIT_SC_CALL_CHECK && (int32_t)calls[i].u32 < 0) {
            checked = comm_from_handle(reinterpret_cast<HcclComm>(calls[i].a));
            if (checked) {
                std::lock_guard<std::mutex> g(checked->m);
                seq = checked->call_seq + 1; /* the number the check gives this call */
            }
        }
        if (int32_t r = one_call(stream, calls[i])) {
            *failed = i;
            if (inl) stream_inline_end(s, false, api); /* what was enqueued goes to the worker, as usual */
            return r;
        }
    }
    if (!sync) {
        if (verify) {
            *failed = n;
            return stream_enqueue(os, std::unique_ptr<Task>(verify.release()));
        }
        return 0;
    }
    *failed = n;
    int rc = inl ? stream_inline_end(s, true, "aclrtSynchronizeStream") : stream_sync(s, -1, "aclrtSynchronizeStream");
    if (rc == 0 && checked) rc = settle_call(checked, seq);
    if (rc == 0 && watch) {
        std::string finding = output_finding(s->dev, watch, out->b, reinterpret_cast<const char*>(out->c));
        watch = 0;
        if (!finding.empty()) rc = seterr_str(kCheckErrorCode, "aclrtSynchronizeStream", finding);
    }
    return rc;
}
