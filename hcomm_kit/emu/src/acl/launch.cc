/* AICPU kernel launches (acl_runtime.md §3.7, §3.11); binaries, argument lists and the crash guard
 * are in binary.cc, kernel_args.cc and kernel_guard.cc.
 *
 * A kernel entry `uint32_t fn(void* args)` runs on the stream's worker thread (our AICPU worker)
 * with a private copy of exactly the appended argument bytes (plus placeholder data). Crashes
 * (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) inside the entry are caught with a per-thread
 * sigsetjmp guard and reported as 507018 naming the kernel. */
#include "acl/hooks.h"
#include "acl/kernel.h"
#include "base/hooks.h"
#include "hcomm_kit/asc_launch.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace emu {

void kernel_note_comm(KernelCtx& k, Comm* c) {
    if (!k.stream) return;
    std::lock_guard<std::mutex> g(k.stream->m);
    auto& v = k.stream->kernel_comms;
    if (std::find(v.begin(), v.end(), c) == v.end()) v.push_back(c);
}

int device_lost_check(Device* dev, const char* api) {
    if (!dev || !dev->lost.load(std::memory_order_relaxed)) return 0;
    std::lock_guard<std::mutex> g(dev->m);
    return seterr(ACL_ERROR_RT_AICPU_TIMEOUT, api, "device %d is lost: %s", dev->id, dev->lost_reason.c_str());
}

KernelCtx& kctx() {
    static thread_local KernelCtx k;
    return k;
}

namespace {
/* BaseHooks::kernel_error: an error raised inside a kernel is kept as the launch's first error. */
const char* kernel_error(const std::string& err) {
    KernelCtx& k = kctx();
    if (!k.active) return nullptr;
    if (k.first_err.empty()) k.first_err = err;
    return k.kernel ? k.kernel : "?";
}
struct LaunchHooks {
    LaunchHooks() { base_hooks.kernel_error = kernel_error; }
} g_launch_hooks;
}  // namespace

namespace {
/* ---------------------------------------------------------------- kernel task */
struct KernelTask : Task {
    Func* f;
    uint32_t blocks;
    std::vector<uint8_t> args;               /* private copy handed to the entry */
    std::vector<std::pair<uint32_t, uint32_t>> ph; /* (slot offset, data offset) patched at run */
    const void* dev_args = nullptr;          /* aclrtLaunchKernel: read device memory at run time */
    size_t dev_args_size = 0;
    uint64_t timeout_ns = 0;
    int run(Stream* s, std::string* msg) override;
    const char* name() const override { return "kernel launch"; }
    void describe(TaskDiag* d) const override {
        d->kind = TaskDiag::Kernel;
        if (!d->brief) d->what = "kernel " + f->func_name;
    }
    bool recycle() override;
    void reuse() { /* as made, the argument buffer's storage kept */
        args.clear();
        ph.clear();
        dev_args = nullptr;
        dev_args_size = 0;
        done_word = nullptr;
        helps = false;
    }
};

Recycler<KernelTask>& g_kernel_tasks = *new Recycler<KernelTask>(); /* leaky: workers may outlive exit */
bool KernelTask::recycle() { return args.capacity() <= 4096 && g_kernel_tasks.give(this); }

/* A launch of f on numBlocks blocks with its launch timeout (0: none); arguments set by the caller. */
std::unique_ptr<KernelTask> kernel_task(Func* f, uint32_t numBlocks, uint64_t timeout_ns) {
    auto t = g_kernel_tasks.take();
    t->f = f;
    t->blocks = numBlocks;
    t->timeout_ns = timeout_ns;
    return t;
}

std::atomic<uint64_t> g_kseq{0};

int KernelTask::run(Stream* s, std::string* msg) {
    if (dev_args) args.assign((const uint8_t*)dev_args, (const uint8_t*)dev_args + dev_args_size);
    for (auto& p : ph) {
        void* addr = args.data() + p.second;
        memcpy(args.data() + p.first, &addr, sizeof addr);
    }
    if (args.empty()) args.resize(8); /* never hand a kernel a null pointer */
    entry_t entry = reinterpret_cast<entry_t>(f->fn);
    const char* kname = f->func_name.c_str();
    uint64_t seq = g_kseq.fetch_add(1) + 1;
    /* The thread's last launch record serves again unless someone still holds it (a hang report,
     * the watchdog): a launch allocates nothing for it in the steady state. */
    static thread_local std::shared_ptr<KernelRun> tl_run;
    std::shared_ptr<KernelRun> run;
    if (tl_run && tl_run.use_count() == 1) {
        run = tl_run;
        run->reset();
    } else {
        run = std::make_shared<KernelRun>();
        tl_run = run;
    }
    run->tid = this_tid();
    run->code = f->code;
    run->kernel = f->func_name;
    run->stream_id = s->id;
    run->dev = s->dev;
    run->timeout_ns = timeout_ns;
    const uint64_t t_start = now_ns();
    run->start_ns.store(t_start);
    {
        std::lock_guard<std::mutex> g(s->m);
        s->kernel_seq = seq;
        s->kernel_name = f->func_name;
        s->kernel_timeout_ns = timeout_ns;
        s->kernel_deadline_ns = timeout_ns ? t_start + timeout_ns : 0;
        s->kernel_run = run;
        s->kernel_comms.clear();
        run->on_caller = s->inline_tid == run->tid;
    }
    if (timeout_ns) watchdog_arm(s, t_start + timeout_ns, seq);
    install_handlers();
    KernelCtx& k = kctx();
    k.reset();
    k.active = true;
    k.dev = s->dev;
    k.kernel = kname;
    {
        std::lock_guard<std::mutex> g(s->dev->m);
        if (s->dev->last_kernel != f->func_name) s->dev->last_kernel = f->func_name;
    }
    k.kseq = seq;
    k.stream = s;
    k.run = run.get();
    if (!cfg().log_dir.empty())
        rank_log("launch kernel %s (launch #%llu) on stream %u of device %d", kname, (unsigned long long)seq, s->id,
                 s->dev->id);
    Context* saved_ctx = current_ctx();
    set_current_ctx(s->ctx);
    uint32_t ret = 0;
    int crashed = 0;
    void* fault_addr = nullptr;
    void* fault_pc = nullptr;
    for (uint32_t b = 0; b < blocks && !crashed && ret == 0; b++)
        crashed = guarded_call(entry, args.data(), &ret, &fault_addr, &fault_pc, run.get());
    void* call_pc = crashed && crashed != kCancelSig ? crash_site(run.get(), fault_pc) : nullptr;
    run->done.store(true);
    uint64_t t_end = acl_hooks.trace_kernel ? now_ns() : 0; /* only traces read it */
    guard_leave();
    set_current_ctx(saved_ctx);
    std::vector<Comm*>& used = k.used; /* communicators this kernel worked on: told when it fails */
    for (auto& o : k.ops)
        if (o.c && std::find(used.begin(), used.end(), o.c) == used.end()) used.push_back(o.c);
    for (Comm* c : k.acquired)
        if (std::find(used.begin(), used.end(), c) == used.end()) used.push_back(c);
    if (acl_hooks.trace_kernel) acl_hooks.trace_kernel(s, kname, t_start, t_end, used);
    std::string left = acl_hooks.kernel_returned ? acl_hooks.kernel_returned(k) : std::string();
    std::string first_err = k.first_err;
    k.active = false;
    k.run = nullptr;
    if (timeout_ns) watchdog_disarm(s, seq);
    bool helper_follows = false, abandoned;
    {
        std::lock_guard<std::mutex> g(s->m);
        /* Abandoned by the watchdog (launch timeout): the stream has another worker and maybe
         * another kernel by now; its state is not ours to touch. */
        abandoned = s->timed_out_kseq == seq;
        if (!abandoned) {
            s->kernel_deadline_ns = 0;
            s->kernel_name.clear();
            s->kernel_run.reset();
            /* Tasks the kernel submitted to device threads: the next task runs them if it is a
             * notify wait that this worker will execute (not dropped by an error). */
            helper_follows = !crashed && ret == 0 && left.empty() && s->err_code == 0 && !s->q.empty() &&
                             s->q.front()->helps;
        }
    }
    if (abandoned) {
        EMU_LOG(LOG_WARN, "AICPU kernel %s (stream %u) %s after overrunning its launch timeout; its worker thread ends",
                kname, s->id, crashed == kCancelSig ? "was interrupted" : "returned");
        rank_log("kernel %s left after its launch timeout (%s)", kname, crashed == kCancelSig ? "interrupted" : "returned");
        *msg = strprintf("AICPU kernel %s overran its launch timeout", kname);
        return ACL_ERROR_RT_AICPU_TIMEOUT;
    }
    if (acl_hooks.kernel_submitted) acl_hooks.kernel_submitted(s, helper_follows);
    if (!crashed && ret == 0 && left.empty()) return 0;
    if (crashed) {
        if (call_pc) /* in a library the kernel called (abort() raises SIGABRT in libc): the kernel's line */
            *msg = strprintf("AICPU kernel %s crashed with %s at %s, in a call that reached %s (fault address %p)",
                             kname, strsignal(crashed), code_location(call_pc, true).c_str(),
                             code_location(fault_pc).c_str(), fault_addr);
        else
            *msg = strprintf("AICPU kernel %s crashed with %s at %s (fault address %p)", kname, strsignal(crashed),
                             code_location(fault_pc).c_str(), fault_addr);
        if (!first_err.empty()) *msg += "; first error in the kernel: " + first_err;
    } else if (ret != 0) {
        *msg = strprintf("AICPU kernel %s returned %u", kname, ret);
        if (!first_err.empty()) *msg += "; first error in the kernel: " + first_err;
        if (!left.empty()) *msg += "; " + left;
    } else {
        *msg = strprintf("AICPU kernel %s returned 0 but %s", kname, left.c_str());
    }
    /* The other ranks of its communicators would wait for this rank's part of the operation until
     * their timeout: fail them now, naming the kernel. */
    bool first = used.empty();
    for (Comm* c : used)
        if (acl_hooks.kernel_failed && acl_hooks.kernel_failed(c, msg, crashed ? AbortKind::Crash : AbortKind::Other))
            first = true;
    /* Logged by the rank whose failure aborted the communicator, and by any rank whose kernel failed
     * on its own (a crash, or an error code with no failed API call before it); failures that
     * follow from another rank's abort are left to that rank's report. */
    if (first || crashed || first_err.empty()) EMU_LOG(LOG_ERROR, "%s", msg->c_str());
    rank_log("kernel failed: %s", msg->c_str());
    return ACL_ERROR_RT_AICPU_EXCEPTION;
}
}  // namespace
int launch_with_timeout(aclrtFuncHandle fn, aclrtStream s, const void* param, size_t len, uint32_t timeout_s,
                        const char** step) {
    aclrtArgsHandle args = nullptr;
    aclrtParamHandle ph = nullptr;
    int rc;
    *step = "preparing the arguments of";
    if ((rc = aclrtKernelArgsInit(fn, &args)) || (rc = aclrtKernelArgsAppend(args, const_cast<void*>(param), len, &ph)) ||
        (rc = aclrtKernelArgsFinalize(args)))
        return rc;
    aclrtLaunchKernelAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    attr.value.timeout = (uint16_t)std::min<uint32_t>(timeout_s, 65535);
    aclrtLaunchKernelCfg lcfg;
    lcfg.numAttrs = 1;
    lcfg.attrs = &attr;
    *step = "launching";
    return aclrtLaunchKernelWithConfig(fn, 1, s, &lcfg, args, nullptr);
}

}  // namespace emu

using namespace emu;

/* ================================================================ launches */

constexpr uint64_t kMaxTimeoutNs = 1ull << 62;

static int launch_timeout(const aclrtLaunchKernelCfg* cfgp, uint64_t* timeout_ns, const char* api) {
    *timeout_ns = (uint64_t)cfg().default_kernel_timeout_s * 1000000000ull;
    if (!cfgp) return ACL_SUCCESS;
    if (cfgp->numAttrs && !cfgp->attrs) return seterr(ACL_ERROR_INVALID_PARAM, api, "cfg->attrs is NULL");
    bool s7 = false, s8 = false;
    for (size_t i = 0; i < cfgp->numAttrs; i++) {
        const aclrtLaunchKernelAttr& at = cfgp->attrs[i];
        int32_t id; /* read as an int: callers may pass values outside the enum */
        memcpy(&id, &at.id, sizeof id);
        switch (id) {
            case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT:
                s7 = true;
                *timeout_ns = (uint64_t)at.value.timeout * 1000000000ull;
                break;
            case ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US: {
                s8 = true;
                uint64_t us = ((uint64_t)at.value.timeoutUs.timeoutHigh << 32) | at.value.timeoutUs.timeoutLow;
                /* Clamp (~146 years) so that `now + timeout` cannot wrap into the past. */
                *timeout_ns = us > kMaxTimeoutNs / 1000 ? kMaxTimeoutNs : us * 1000ull;
                break;
            }
            case 1: case 2: case 3: case 4: case 5: case 6: case 9: break;
            default:
                return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "cfg attribute %zu: id %d is not a launch attribute", i,
                              id);
        }
    }
    if (s7 && s8)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                      "cfg gives both ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT (7) and ..._TIMEOUT_US (8); use one");
    return ACL_SUCCESS;
}

static int launch_common(const char* api, aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                         const aclrtLaunchKernelCfg* cfgp, Func** fout, Stream** sout, uint64_t* tmo) {
    if (int r = check_init(api)) return r;
    if (!funcHandle) return seterr(ACL_ERROR_INVALID_PARAM, api, "funcHandle is NULL");
    if (numBlocks == 0) return seterr(ACL_ERROR_INVALID_PARAM, api, "numBlocks is 0");
    int code = 0;
    Func* f = func_check(funcHandle, api, &code);
    if (!f) return code;
    if (int r = launch_timeout(cfgp, tmo, api)) return r;
    Stream* s = stream_resolve(stream, &code, api);
    if (!s) return code;
    if (int r = device_lost_check(s->dev, api)) return r;
    if (acl_hooks.trace_launch) acl_hooks.trace_launch(s, f->func_name.c_str());
    *fout = f;
    *sout = s;
    return ACL_SUCCESS;
}

EMU_API aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                             aclrtLaunchKernelCfg* cfg, aclrtArgsHandle argsHandle, void* reserve) {
    if (reserve) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "reserve must be NULL");
    if (!argsHandle) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsHandle is NULL");
    Func* f;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(__func__, funcHandle, numBlocks, stream, cfg, &f, &s, &tmo)) return r;
    int code = 0;
    ArgsHandle* a = args_check(argsHandle, __func__, &code);
    if (!a) return code;
    if (a->state == ARGS_UPDATED)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                      "args were updated after aclrtKernelArgsFinalize; finalize again before launching");
    if (a->state != ARGS_FINAL)
        return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__, "args handle is not finalized (aclrtKernelArgsFinalize)");
    if (a->f != f)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "args handle was initialised for kernel %s, not %s",
                      a->f ? a->f->func_name.c_str() : "?", f->func_name.c_str());
    auto t = kernel_task(f, numBlocks, tmo);
    /* Blob seen by the kernel: the arguments, then each placeholder's data. */
    try {
        t->args.reserve(a->used + a->ph_used);
        t->args.assign(a->buf, a->buf + a->used);
        for (uint32_t i = 0; i < a->nparams; i++) {
            const ParaDetail& p = a->params[i];
            if (p.type != 1) continue;
            uint32_t doff = (uint32_t)t->args.size();
            const uint8_t* src = a->buf + a->cap - p.ph_data;
            t->args.insert(t->args.end(), src, src + p.ph_size);
            t->ph.emplace_back(p.offset, doff);
        }
    } catch (const std::bad_alloc&) {
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "cannot copy the %zu-byte argument list",
                      a->used + a->ph_used);
    }
    return stream_enqueue(s, std::move(t));
}

static aclError launch_dev_args(const char* api, aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData,
                                size_t argsSize, const aclrtLaunchKernelCfg* cfgp, aclrtStream stream) {
    if (!argsData) return seterr(ACL_ERROR_INVALID_PARAM, api, "argsData is NULL");
    Func* f;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(api, funcHandle, numBlocks, stream, cfgp, &f, &s, &tmo)) return r;
    if (argsSize > kMaxArgsBlob)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api, "argsSize %zu is above %zu bytes (argument offsets are 32-bit)",
                      argsSize, kMaxArgsBlob);
    if (argsSize && !mem_is_device(argsData, argsSize))
        return seterr(ACL_ERROR_RT_PARAM_INVALID, api,
                      "argsData %p + %zu bytes is not device memory (this launch reads its arguments from the device; "
                      "use aclrtLaunchKernelWithConfig for host arguments)",
                      argsData, argsSize);
    auto t = kernel_task(f, numBlocks, tmo);
    t->dev_args = argsData;
    t->dev_args_size = argsSize;
    return stream_enqueue(s, std::move(t));
}

EMU_API aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData, size_t argsSize,
                                   aclrtStream stream) {
    return launch_dev_args(__func__, funcHandle, numBlocks, argsData, argsSize, nullptr, stream);
}

EMU_API aclError aclrtLaunchKernelV2(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void* argsData, size_t argsSize,
                                     aclrtLaunchKernelCfg* cfg, aclrtStream stream) {
    return launch_dev_args(__func__, funcHandle, numBlocks, argsData, argsSize, cfg, stream);
}

EMU_API aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                               aclrtLaunchKernelCfg* cfg, void* hostArgs, size_t argsSize,
                                               aclrtPlaceHolderInfo* placeHolderArray, size_t placeHolderNum) {
    if (!hostArgs) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "hostArgs is NULL");
    if (argsSize == 0) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "argsSize is 0");
    if (placeHolderNum && !placeHolderArray)
        return seterr(ACL_ERROR_INVALID_PARAM, __func__, "placeHolderArray is NULL with placeHolderNum %zu", placeHolderNum);
    if (argsSize > kMaxArgsBlob)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                      "argsSize %zu is above %zu bytes (aclrtPlaceHolderInfo offsets are 32-bit)", argsSize, kMaxArgsBlob);
    if (placeHolderNum > kMaxArgs)
        return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__, "placeHolderNum %zu is above the limit of %zu arguments",
                      placeHolderNum, kMaxArgs);
    Func* f;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(__func__, funcHandle, numBlocks, stream, cfg, &f, &s, &tmo)) return r;
    auto t = kernel_task(f, numBlocks, tmo);
    try {
        t->args.assign((uint8_t*)hostArgs, (uint8_t*)hostArgs + argsSize); /* copied during the call */
    } catch (const std::bad_alloc&) {
        return seterr(ACL_ERROR_RT_MEMORY_ALLOCATION, __func__, "cannot copy the %zu-byte argument blob", argsSize);
    }
    for (size_t i = 0; i < placeHolderNum; i++) {
        const aclrtPlaceHolderInfo& p = placeHolderArray[i];
        if ((size_t)p.addrOffset + 8 > argsSize || p.dataOffset >= argsSize)
            return seterr(ACL_ERROR_RT_PARAM_INVALID, __func__,
                          "placeholder %zu: addrOffset %u / dataOffset %u outside the %zu-byte argument blob", i,
                          p.addrOffset, p.dataOffset, argsSize);
        t->ph.emplace_back(p.addrOffset, p.dataOffset);
    }
    return stream_enqueue(s, std::move(t));
}

EMU_API aclError aclrtLaunchKernelWithArgsArray(void* func, uint32_t numBlocks, aclrtStream stream,
                                                aclrtLaunchKernelCfg* cfg, void** args) {
    if (int r = check_init(__func__)) return r;
    (void)numBlocks;
    (void)stream;
    (void)cfg;
    (void)args;
    if (!func) return seterr(ACL_ERROR_INVALID_PARAM, __func__, "func is NULL");
    return seterr(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, __func__,
                  "argument arrays carry no sizes, so AICPU kernels cannot be launched this way on the emulator "
                  "(use aclrtLaunchKernelWithConfig)");
}

/* hcomm-kit extension behind the Ascend C launch syntax for AICPU kernels: the emulator's ASC
 * compiler (the install tree's bin/hk-asc) rewrites `Kernel<<<numBlocks, l2ctrl, stream>>>(args,
 * argsSize)` in .asc sources into this call. The kernel gets a copy of the argsSize bytes at args. */
EMU_API aclError hcomm_kit_asc_launch_aicpu(const char* kernel, uint32_t numBlocks, void* l2ctrl, aclrtStream stream,
                                            const void* args, size_t argsSize) {
    const char* api = "aclrtLaunchKernel (<<<>>>)";
    if (int r = check_init(api)) return r;
    (void)l2ctrl; /* reserved, nullptr */
    if (!kernel || !*kernel) return seterr(ACL_ERROR_INVALID_PARAM, api, "kernel name is NULL or empty");
    if (!args && argsSize) return seterr(ACL_ERROR_INVALID_PARAM, api, "args is NULL with %zu bytes", argsSize);
    Func* f = nullptr;
    std::string looked;
    f = asc_function(kernel, &looked);
    if (!f)
        return seterr(ACL_ERROR_RT_SYMBOL_NOT_FOUND, api,
                      "AICPU kernel %s<<<>>> not found: no loaded kernel library, no library in [%s] and not the "
                      "program itself exports it (install the host-built kernel .so under "
                      "$ASCEND_HOME_PATH/opp/vendors/<vendor>/aicpu/kernel or add its directory to HCOMM_KIT_KERNEL_PATH)",
                      kernel, looked.c_str());
    Func* fo;
    Stream* s;
    uint64_t tmo;
    if (int r = launch_common(api, f, numBlocks, stream, nullptr, &fo, &s, &tmo)) return r;
    auto t = kernel_task(fo, numBlocks, tmo);
    if (argsSize) t->args.assign((const uint8_t*)args, (const uint8_t*)args + argsSize);
    return stream_enqueue(s, std::move(t));
}
