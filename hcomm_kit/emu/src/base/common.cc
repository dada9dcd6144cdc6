/* Errors, logging, configuration, time and futex helpers of the emulator. */
#include "base/common.h"
#include "base/hooks.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace emu {

int g_log_level = LOG_WARN;
BaseHooks base_hooks;

namespace {
thread_local std::string tl_err;
/* Last runtime (ACL, >= 100000) error code of this thread, for aclrtGetLastError. HCCL codes
 * (below 100000) are not runtime errors and leave it alone; so do errors raised inside a kernel,
 * which runs on an AICPU worker rather than on the caller's thread. */
thread_local int tl_rt_code = 0;
constexpr int kFirstAclCode = 100000;
std::mutex g_cfg_m;
/* Never destroyed: detached background threads (the diagnosis monitor, stream workers) read the
 * configuration until the process is gone, after exit() has run the static destructors. */
Config& g_cfg = *new Config();
bool g_cfg_loaded = false;
}  // namespace

std::string strprintf(const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < (int)sizeof buf) return std::string(buf, n < 0 ? 0 : (size_t)n);
    std::string s((size_t)n + 1, '\0');
    va_start(ap, fmt);
    vsnprintf(&s[0], s.size(), fmt, ap);
    va_end(ap);
    s.resize((size_t)n);
    return s;
}

int seterr_str(int code, const char* api, const std::string& msg) {
    tl_err = std::string(api) + ": " + msg;
    rank_log("%s returned %d: %s", api, code, msg.c_str());
    /* A kernel cannot read aclGetRecentErrMsg: the runtime keeps it for the launch, and it is said on stderr. */
    const char* kernel = base_hooks.kernel_error ? base_hooks.kernel_error(tl_err) : nullptr;
    if (!kernel && code >= kFirstAclCode) tl_rt_code = code;
    if (kernel) {
        EMU_LOG(LOG_ERROR, "kernel %s: %s (returns %d)", kernel, tl_err.c_str(), code);
    } else {
        EMU_LOG(LOG_DEBUG, "%s (returns %d)", tl_err.c_str(), code);
    }
    return code;
}

int setmiss(int code, const char* api, const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    tl_err = std::string(api) + ": " + buf;
    EMU_LOG(LOG_DEBUG, "%s (returns %d; a lookup miss, not logged as a failure)", tl_err.c_str(), code);
    return code;
}

int seterr(int code, const char* api, const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return seterr_str(code, api, buf);
}

std::string last_err() { return tl_err; }
void clear_err() { tl_err.clear(); }

/* aclrtGetLastError / aclrtPeekAtLastError: the code part of the error last recorded above. */
static aclError last_error(aclrtLastErrLevel level, bool clear, const char* api) {
    int32_t lv;
    memcpy(&lv, &level, sizeof lv); /* read as an int: callers may pass values outside the enum */
    if (lv != ACL_RT_THREAD_LEVEL)
        return seterr(ACL_ERROR_INVALID_PARAM, api, "level %d is not ACL_RT_THREAD_LEVEL (0), the only level there is",
                      (int)lv);
    int code = tl_rt_code;
    if (clear) tl_rt_code = 0;
    return code;
}

}  // namespace emu

EMU_API aclError aclrtGetLastError(aclrtLastErrLevel level) { return emu::last_error(level, true, __func__); }
EMU_API aclError aclrtPeekAtLastError(aclrtLastErrLevel level) { return emu::last_error(level, false, __func__); }

namespace emu {

void logf(int level, const char* fmt, ...) {
    static const char* names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char small[1536];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    std::string big;
    if (n >= (int)sizeof small) { /* hang reports run to several kilobytes */
        big.resize((size_t)n + 1);
        vsnprintf(&big[0], big.size(), fmt, ap2);
        big.resize((size_t)n);
    }
    va_end(ap2);
    va_end(ap);
    /* one write: lines of concurrent ranks do not interleave */
    std::string line = strprintf("[hcomm-kit emu %s pid %d] ", names[level < 0 ? 0 : level > 3 ? 3 : level], (int)getpid());
    line += big.empty() ? small : big.c_str();
    line += '\n';
    fwrite(line.data(), 1, line.size(), stderr);
    fflush(stderr);
}

const char* hccl_code_name(int code) {
    switch (code) {
        case 0: return "HCCL_SUCCESS";
        case 1: return "HCCL_E_PARA";
        case 2: return "HCCL_E_PTR";
        case 3: return "HCCL_E_MEMORY";
        case 4: return "HCCL_E_INTERNAL";
        case 5: return "HCCL_E_NOT_SUPPORT";
        case 6: return "HCCL_E_NOT_FOUND";
        case 7: return "HCCL_E_UNAVAIL";
        case 8: return "HCCL_E_SYSCALL";
        case 9: return "HCCL_E_TIMEOUT";
        case 10: return "HCCL_E_OPEN_FILE_FAILURE";
        case 11: return "HCCL_E_TCP_CONNECT";
        case 12: return "HCCL_E_ROCE_CONNECT";
        case 13: return "HCCL_E_TCP_TRANSFER";
        case 14: return "HCCL_E_ROCE_TRANSFER";
        case 15: return "HCCL_E_RUNTIME";
        case 16: return "HCCL_E_DRV";
        case 17: return "HCCL_E_PROFILING";
        case 18: return "HCCL_E_CCE";
        case 19: return "HCCL_E_NETWORK";
        case 20: return "HCCL_E_AGAIN";
        case 21: return "HCCL_E_REMOTE";
        case 22: return "HCCL_E_SUSPENDING";
        case 23: return "HCCL_E_OPRETRY_FAIL";
        case 24: return "HCCL_E_OOM";
        case 1041: return "HCCL_E_IN_STATUS";
        default: return "HCCL_E_UNKNOWN";
    }
}

/* ---------------------------------------------------------------- configuration */

static bool env_u64(const char* name, uint64_t lo, uint64_t hi, uint64_t* out, std::string* err) {
    const char* v = getenv(name);
    if (!v || !*v) return true;
    char* end = nullptr;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi || v[0] == '-') {
        *err = strprintf("%s='%s' is not an integer in [%llu, %llu]", name, v, (unsigned long long)lo,
                         (unsigned long long)hi);
        return false;
    }
    *out = x;
    return true;
}

bool config_load(std::string* err) {
    std::lock_guard<std::mutex> g(g_cfg_m);
    Config c;
    const char* lvl = getenv("HCOMM_KIT_LOG");
    if (lvl && *lvl) {
        if (!strcmp(lvl, "error")) g_log_level = LOG_ERROR;
        else if (!strcmp(lvl, "warn")) g_log_level = LOG_WARN;
        else if (!strcmp(lvl, "info")) g_log_level = LOG_INFO;
        else if (!strcmp(lvl, "debug")) g_log_level = LOG_DEBUG;
        else {
            *err = strprintf("HCOMM_KIT_LOG='%s' is not one of error, warn, info, debug", lvl);
            return false;
        }
    }
    const char* soc = getenv("HCOMM_KIT_SOC");
    if (soc && *soc) {
        if (!strcmp(soc, "Ascend910B") || !strcmp(soc, "A2")) c.soc = Soc::A2, c.soc_name = "Ascend910B";
        else if (!strcmp(soc, "Ascend910_93") || !strcmp(soc, "A3")) c.soc = Soc::A3, c.soc_name = "Ascend910_93";
        else if (!strcmp(soc, "Ascend950") || !strcmp(soc, "950") || !strcmp(soc, "A5"))
            c.soc = Soc::A950, c.soc_name = "Ascend950";
        else {
            *err = strprintf("HCOMM_KIT_SOC='%s' is not a supported SoC (Ascend910B, Ascend910_93, Ascend950)", soc);
            return false;
        }
    }
    uint64_t v = (uint64_t)c.device_count;
    if (!env_u64("HCOMM_KIT_DEVICE_COUNT", 1, 64, &v, err)) return false;
    c.device_count = (int)v;
    /* Spinning only pays when every waiter can have a core; otherwise sleep at once. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    v = ncpu >= 2 ? 20 : 0;
    if (!env_u64("HCOMM_KIT_SPIN_US", 0, 1000000, &v, err)) return false;
    c.spin_ns = v * 1000;
    v = 0;
    if (!env_u64("HCOMM_KIT_FAULT_COPY_RESTORE_US", 0, 1000000, &v, err)) return false;
    c.copy_restore_us = (uint32_t)v;
    v = 0;
    if (!env_u64("HCOMM_KIT_FAULT_FINDING_HOLD_MS", 0, 600000, &v, err)) return false;
    c.finding_hold_ms = (uint32_t)v;
    if (const char* lag = getenv("HCOMM_KIT_FAULT_MONITOR_LAG"); lag && *lag) {
        unsigned r = 0, ms = 0;
        char tail = 0;
        if (sscanf(lag, "%u:%u%c", &r, &ms, &tail) != 2 || r >= 64 || ms > 60000) {
            *err = strprintf("HCOMM_KIT_FAULT_MONITOR_LAG='%s' is not RANK:MS (a rank below 64, at most 60000 ms)", lag);
            return false;
        }
        c.monitor_lag_rank = (int)r;
        c.monitor_lag_ms = ms;
    }
    v = 200;
    if (!env_u64("HCCL_BUFFSIZE", 1, 65536, &v, err)) return false;
    c.hccl_buffsize = v << 20;
    v = 120;
    if (!env_u64("HCCL_CONNECT_TIMEOUT", 1, 86400, &v, err)) return false;
    c.connect_timeout_s = (uint32_t)v;
    v = 1836;
    if (!env_u64("HCCL_EXEC_TIMEOUT", 0, 65535, &v, err)) return false;
    c.default_kernel_timeout_s = (uint32_t)v;
    v = 10;
    if (!env_u64("HCOMM_KIT_PROGRESS_SECONDS", 1, 86400, &v, err)) return false;
    c.progress_s = (uint32_t)v;
    const char* chk = getenv("HCOMM_KIT_CHECK");
    if (chk && *chk) {
        if (!strcmp(chk, "0")) c.check = 0;
        else if (!strcmp(chk, "1")) c.check = 1;
        else if (!strcasecmp(chk, "warn")) c.check = 2;
        else {
            *err = strprintf("HCOMM_KIT_CHECK='%s' is not one of 1 (fail the operation), warn, 0 (off)", chk);
            return false;
        }
    }
    const char* clk = getenv("HCOMM_KIT_TRACE_CLOCK");
    if (clk && *clk) {
        if (!strcasecmp(clk, "model")) c.trace_model_clock = true;
        else if (strcasecmp(clk, "host") != 0) {
            *err = strprintf("HCOMM_KIT_TRACE_CLOCK='%s' is not one of host (the CPU's clock), model (the timing "
                             "model's clock)", clk);
            return false;
        }
    }
    for (auto kv : {std::make_pair("HCOMM_KIT_LOG_DIR", &c.log_dir), std::make_pair("HCOMM_KIT_TRACE", &c.trace_file),
                    std::make_pair("HCOMM_KIT_JOB_DIR", &c.job_dir)}) {
        const char* x = getenv(kv.first);
        if (x && *x) *kv.second = x;
    }
    g_cfg = c;
    g_cfg_loaded = true;
    return true;
}

const Config& cfg() {
    if (!g_cfg_loaded) {
        std::string e;
        if (!config_load(&e)) EMU_LOG(LOG_ERROR, "%s (using defaults)", e.c_str());
        g_cfg_loaded = true;
    }
    return g_cfg;
}

namespace {
/* HCOMM_KIT_CHECK, changeable at run time (HcommKitSetCheck): -1 = not read yet. */
std::atomic<int> g_check{-1};
}  // namespace

int check_mode() {
    int m = g_check.load(std::memory_order_relaxed);
    if (m < 0) {
        m = cfg().check;
        g_check.store(m, std::memory_order_relaxed);
    }
    return m;
}

int set_check_mode(int mode) {
    int prev = check_mode();
    g_check.store(mode);
    return prev;
}

void rank_log(const char* fmt, ...) {
    if (!base_hooks.rank_logv) return;
    va_list ap;
    va_start(ap, fmt);
    base_hooks.rank_logv(fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- time and futex */

uint64_t now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_coarse_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int this_tid() {
    static thread_local int tid = 0;
    if (!tid) tid = (int)syscall(SYS_gettid);
    return tid;
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, bool shared) {
    struct timespec ts, *tsp = nullptr;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    int op = shared ? FUTEX_WAIT : (FUTEX_WAIT | FUTEX_PRIVATE_FLAG);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, expected, tsp, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word, int n, bool shared) {
    int op = shared ? FUTEX_WAKE : (FUTEX_WAKE | FUTEX_PRIVATE_FLAG);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, n, nullptr, nullptr, 0);
}

static inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield" ::: "memory");
#endif
}

void spin_pause() { cpu_relax(); }

void background_thread_init() {
    /* Stream workers and executors run when the host thread blocks or on a free core. As
     * SCHED_BATCH (same fair share, no wake-up preemption) a worker woken by an enqueue does not
     * preempt the host between its enqueue calls: the host finishes queueing, blocks, and the
     * worker runs the whole sequence, instead of one task per wake-up. Unprivileged, best effort. */
    struct sched_param sp;
    memset(&sp, 0, sizeof sp);
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
}

namespace {
/* Adaptive spin budgets of the calling thread, one per recently waited-on word (see wait_word):
 * a stream worker waits both for its host thread (usually sharing its core: spinning never
 * pays) and for peers (other cores: spinning pays). */
struct SpinSlot {
    const void* word = nullptr;
    uint64_t budget = 0;
    uint32_t waits = 0;
};
constexpr int kSpinSlots = 4;
thread_local SpinSlot tl_spin[kSpinSlots];
thread_local unsigned tl_spin_next = 0;

SpinSlot& spin_slot(const void* word, uint64_t max) {
    for (SpinSlot& s : tl_spin)
        if (s.word == word) return s;
    SpinSlot& s = tl_spin[tl_spin_next++ % kSpinSlots];
    s.word = word;
    s.budget = max;
    s.waits = 0;
    return s;
}
}  // namespace

static std::atomic<uint32_t> g_local_ranks{1};

void note_local_ranks(uint32_t n) {
    uint32_t cur = g_local_ranks.load();
    while (n > cur && !g_local_ranks.compare_exchange_weak(cur, n)) {
    }
}

/* Whether the calling thread may run on one CPU only while the node has a CPU per rank (ranks
 * pinned one per CPU, as hcomm_kit does when they nearly fill the node, or mpirun binding).
 * Oversubscribed (taskset of many ranks onto few CPUs), other ranks' threads share our CPU and
 * the adaptive spin's contention detection serves better. Affinity rarely changes, so it is
 * looked up again only every 256th call. */
static bool confined_to_one_cpu() {
    static thread_local uint32_t calls = 0;
    static thread_local bool one = false;
    if (calls++ % 256 == 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        one = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1 &&
              (long)g_local_ranks.load(std::memory_order_relaxed) <= online;
    }
    return one;
}

/* The spin phase of a thread confined to one CPU: whoever else runs on that CPU is usually one of
 * our own threads (the rank is pinned), which can only make progress while we do not. So no
 * contention detection and no adaptive budget: poll pred() for up to budget_ns, giving the CPU
 * away with sched_yield() every yield_every_ns (0: at every round). The thread we wait for runs
 * at once, and since we never sleep it skips its wake-up syscall. Without the yields a spinning
 * stream worker would keep its host thread from running at all. */
static bool confined_spin(std::atomic<uint32_t>* word, uint64_t deadline_ns, const std::function<bool()>& pred,
                          uint64_t budget_ns, uint64_t yield_every_ns) {
    uint64_t t0 = now_ns(), next_yield = t0 + yield_every_ns;
    for (;;) {
        if (pred()) return true;
        uint64_t now = now_ns();
        if (now - t0 >= budget_ns || (deadline_ns && now >= deadline_ns)) return false;
        if (now >= next_yield) {
            sched_yield();
            next_yield = now_ns() + yield_every_ns;
        } else {
            uint32_t v = word->load(std::memory_order_acquire);
            for (int k = 0; k < 16 && word->load(std::memory_order_acquire) == v; k++) cpu_relax();
        }
    }
}

/* More ranks of emulated jobs on this node than online CPUs (note_local_ranks). */
static bool oversubscribed() {
    static const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return (long)g_local_ranks.load(std::memory_order_relaxed) > online;
}

/* The spin phase of a wait for another process (a peer rank's notify record; see spin_until).
 * First, when every rank can have a CPU of its own, spin on the word for up to budget_ns (its
 * writer runs on another CPU: a record lands within a microsecond or two), yielding every
 * kYieldEveryNs so that this process's own threads still run. Then, and at once on an
 * oversubscribed node (more ranks than CPUs: the peer may be waiting for this very CPU), give the
 * CPU away in a loop of sched_yield() for up to kYieldPhaseNs: a runnable peer runs at once, and
 * the record needs no wake-up system call from its writer. Only then does the caller sleep on the
 * futex, so a rank waiting for a late peer (or an idle rank) stops using the CPU. */
static bool remote_spin(std::atomic<uint32_t>* word, uint64_t deadline_ns, const std::function<bool()>& pred,
                        uint64_t budget_ns) {
    uint64_t t0 = now_ns();
    if (!oversubscribed()) {
        uint64_t next_yield = t0 + kYieldEveryNs;
        for (;;) {
            if (pred()) return true;
            uint64_t now = now_ns();
            if (now - t0 >= budget_ns || (deadline_ns && now >= deadline_ns)) break;
            if (now >= next_yield) {
                sched_yield();
                next_yield = now_ns() + kYieldEveryNs;
            } else {
                uint32_t v = word->load(std::memory_order_acquire);
                for (int k = 0; k < 16 && word->load(std::memory_order_acquire) == v; k++) cpu_relax();
            }
        }
    }
    uint64_t y0 = now_ns();
    for (;;) {
        sched_yield();
        if (pred()) return true;
        uint64_t now = now_ns();
        if (now - y0 >= kYieldPhaseNs || (deadline_ns && now >= deadline_ns)) return false;
    }
}

bool spin_until(std::atomic<uint32_t>* word, uint64_t deadline_ns, const std::function<bool()>& pred, bool remote) {
    /* Adaptive and bounded by HCOMM_KIT_SPIN_US. Spinning costs nothing on a core nobody else
     * wants, and saves the wake-up of a sleeping thread (tens of microseconds when its CPU went
     * idle, on a VM). It is lost time when a thread that must run first shares our core
     * (oversubscription, or both ends of a hand-off on one core). So the spin watches for
     * contention: a round that took far longer than a round takes (we were descheduled), or a
     * sched_yield() probe every kYieldEveryNs that returned late (another thread ran). On
     * contention it stops at once and halves this thread's budget for this word; a spin that
     * succeeded uncontended restores the full budget; every kProbeEvery-th wait spends the full
     * budget to find out whether spinning pays again.
     * remote (the waker is another process, usually on another core): a spin that ran out of
     * budget without any sign of contention cost nobody anything, so the budget doubles back
     * towards the maximum. Otherwise one contended wait (often just the VM pausing this vCPU, or
     * a thread of our own process that ran once) would leave the budget collapsed until a wait
     * that short happened to succeed: both ranks then sleep, and each notify pays the wake-up
     * of an idle vCPU (2-rank 8-byte allreduce 30-50 us instead of ~17). Not for local wakers:
     * they usually share our core, and spinning longer would only delay them. */
    uint64_t max = cfg().spin_ns;
    if (!max) return false;
    if (remote) return remote_spin(word, deadline_ns, pred, max);
    /* Confined to one CPU, a CPU per rank (ranks pinned): a local waker (a thread of this process) can
     * only run when we give the CPU away, so yield at once. */
    if (confined_to_one_cpu()) return confined_spin(word, deadline_ns, pred, max, 0);
    SpinSlot& st = spin_slot(word, max);
    if (st.budget > max) st.budget = max;
    uint64_t spin = (++st.waits % kProbeEvery) == 0 ? max : st.budget;
    uint64_t t0 = now_ns(), last = t0, next_yield = t0 + kYieldEveryNs;
    bool contended = false;
    for (;;) {
        uint32_t v = word->load(std::memory_order_acquire);
        for (int k = 0; k < 4 && word->load(std::memory_order_acquire) == v; k++) cpu_relax();
        bool ok = pred();
        uint64_t now = now_ns();
        if (now - last > kDeschedGapNs) contended = true;
        last = now;
        if (ok) {
            if (!contended) st.budget = max;
            else st.budget = st.budget / 2 > kMinSpinNs ? st.budget / 2 : kMinSpinNs;
            return true;
        }
        if (contended || now - t0 >= spin || (deadline_ns && now >= deadline_ns)) break;
        if (now >= next_yield) {
            sched_yield();
            last = now_ns();
            if (last - now > kYieldSlowNs) contended = true;
            next_yield = last + kYieldEveryNs;
        }
    }
    if (contended) st.budget = spin / 2 > kMinSpinNs ? spin / 2 : kMinSpinNs;
    else if (remote) st.budget = spin * 2 < max ? spin * 2 : max;
    return false;
}

bool wait_word(std::atomic<uint32_t>* word, bool shared, uint64_t deadline_ns, const std::function<bool()>& pred,
               uint64_t poll_ns, std::atomic<uint32_t>* sleepers, bool spin) {
    if (pred()) return true;
    if (spin && spin_until(word, deadline_ns, pred, shared)) return true;
    /* Sleep phase. The waker bumps *word (seq_cst) and then reads *sleepers; we raise
     * *sleepers before re-reading *word, so one of us always sees the other. */
    for (;;) {
        if (sleepers) sleepers->fetch_add(1, std::memory_order_seq_cst);
        uint32_t v = word->load(std::memory_order_seq_cst);
        bool ok = pred();
        uint64_t now = now_ns();
        if (!ok && !(deadline_ns && now >= deadline_ns)) {
            int64_t t = (int64_t)poll_ns;
            if (deadline_ns && (int64_t)(deadline_ns - now) < t) t = (int64_t)(deadline_ns - now);
            futex_wait(word, v, t, shared);
        }
        if (sleepers) sleepers->fetch_sub(1, std::memory_order_seq_cst);
        if (ok) return true;
        if (deadline_ns && now_ns() >= deadline_ns) return pred();
        if (pred()) return true;
    }
}

}  // namespace emu
