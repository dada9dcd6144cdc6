/*
 * hcomm-kit CPU emulator, base layer: errors and logging, configuration, time, futex waits, and
 * the public C headers every layer implements. Includes nothing of the emulator's other folders
 * (base/ < acl/ < hcomm/ < hccl/ < diag/, see src/README.md); what it needs from above goes
 * through base/hooks.h.
 *
 * Public API symbols get default visibility from the headers included below; everything
 * internal is hidden by -fvisibility=hidden.
 */
#ifndef HCOMM_KIT_EMU_BASE_COMMON_H
#define HCOMM_KIT_EMU_BASE_COMMON_H

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

/* CANN declares the communicator API weak; the emulator defines them as ordinary symbols. */
#define HCOMM_WEAK_SYMBOL
#pragma GCC visibility push(default)
#include "acl/acl.h"
#include "hccl/hccl_types.h"
#include "hccl/hccl_comm.h"
#include "hccl/hccl_res.h"
#include "hccl/hccl_channel.h"
#include "hccl/hccl_res_expt.h"
#include "hccl/hcomm_primitives.h"
#include "hccl/hccl_rank_graph.h"
#include "hccl/hccl_launch.h"
#include "hcomm_kit/emu_ext.h"
#pragma GCC visibility pop

/* Marks the definition of an exported C API function. */
#define EMU_API extern "C" __attribute__((visibility("default")))

namespace emu {

/* ------------------------------------------------------------------ errors and logging */

/* Records "api: message" as the calling thread's recent error (aclGetRecentErrMsg) and
 * returns code, so error paths read `return seterr(CODE, __func__, "...", ...);`.
 * Data-plane (kernel) errors are also logged to stderr because a kernel cannot read them. */
int seterr(int code, const char* api, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, from a preformatted message. */
int seterr_str(int code, const char* api, const std::string& msg);
/* The answer "not there" of a lookup that callers make to probe (HcclEngineCtxGet before
 * HcclEngineCtxCreate, as CANN's examples do): recorded for aclGetRecentErrMsg like seterr, but not
 * written to the rank log (HCOMM_KIT_LOG_DIR) as a failed call, nor counted as a runtime error. */
int setmiss(int code, const char* api, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
/* Last message recorded by this thread (without clearing it). */
std::string last_err();
void clear_err();
/* Symbolic name of an HCCL code (HcclGetErrorString). */
const char* hccl_code_name(int code);
/* hcomm-kit's code for a notify-checker finding (HCOMM_KIT_CHECK=1): not a CANN code; declared
 * for C hosts in hcomm_kit/emu_ext.h. */
constexpr int kCheckErrorCode = HCOMM_KIT_ERROR_CHECK;

enum { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };
extern int g_log_level;
void logf(int level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
#define EMU_LOG(lvl, ...)                                   \
    do {                                                    \
        if ((lvl) <= ::emu::g_log_level) ::emu::logf((lvl), __VA_ARGS__); \
    } while (0)

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ configuration */

enum class Soc { A2, A3, A950 };
struct Config {
    Soc soc = Soc::A2;
    std::string soc_name = "Ascend910B";
    int device_count = 8;
    uint64_t spin_ns = 20000;              /* HCOMM_KIT_SPIN_US */
    uint64_t hccl_buffsize = 200ull << 20; /* HCCL_BUFFSIZE, MB */
    uint32_t connect_timeout_s = 120;      /* HCCL_CONNECT_TIMEOUT */
    uint32_t default_kernel_timeout_s = 1836;
    int check = 1;                         /* HCOMM_KIT_CHECK: 0 off, 1 fail the operation, 2 warn only */
    std::string log_dir;                   /* HCOMM_KIT_LOG_DIR: per-rank logs and hang reports ("" = none) */
    std::string trace_file;                /* HCOMM_KIT_TRACE: merged Chrome/Perfetto trace ("" = none) */
    bool trace_model_clock = false;        /* HCOMM_KIT_TRACE_CLOCK=model: the trace's tasks on the timing model's clock */
    std::string job_dir;                   /* HCOMM_KIT_JOB_DIR: launcher's per-job directory (state dumps) */
    uint32_t progress_s = 10;              /* HCOMM_KIT_PROGRESS_SECONDS: a line per long wait this often */
    /* HCOMM_KIT_FAULT_COPY_RESTORE_US (fault injection, tests): a device copy of at most 16 bytes
     * stores its bytes once more this many microseconds later, as a copy split into several stores
     * may (glibc's memmove of 8-16 bytes stores twice; a DMA engine may split); 0 = off. */
    uint32_t copy_restore_us = 0;
    /* HCOMM_KIT_FAULT_FINDING_HOLD_MS (fault injection, tests): a device thread that made a checker
     * finding holds it before writing the report until its communicator's HcclCommDestroy began (or
     * this many ms passed); 0 = off. */
    uint32_t finding_hold_ms = 0;
    /* HCOMM_KIT_FAULT_MONITOR_LAG=RANK:MS (fault injection, tests): the monitor publishes rank RANK's
     * snapshots MS ms late (as a monitor thread the OS leaves unscheduled); rank -1 = off. */
    int monitor_lag_rank = -1;
    uint32_t monitor_lag_ms = 0;
};
/* Why a communicator was aborted: decides the code every rank's failing stream reports. */
enum class AbortKind : uint32_t { Other = 0, Timeout, Deadlock, Check, Crash, PeerDead, Mismatch, KernelTimeout };

/* Reads the environment; returns false and sets *err on a bad value. */
bool config_load(std::string* err);
const Config& cfg();
inline bool is_950() { return cfg().soc == Soc::A950; }

/* ------------------------------------------------------------------ time and futex */

uint64_t now_ns();
/* The same clock at the last timer tick (CLOCK_MONOTONIC_COARSE: a few ns, milliseconds of
 * resolution, never ahead of now_ns()): for stamps that hang reports and timeouts read in seconds. */
uint64_t now_coarse_ns();
/* The calling thread's id (gettid), cached per thread. */
int this_tid();

/* Waits while *word == expected, at most timeout_ns (<0: forever). shared: futex across processes. */
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns, bool shared);
void futex_wake(std::atomic<uint32_t>* word, int n, bool shared);

/* Spins while pred() is false (adaptively, at most cfg().spin_ns: see common.cc), then sleeps
 * on word until pred() or the deadline (absolute ns, 0 = none). Returns pred() at the end.
 * poll_ns bounds each sleep so callers can run periodic checks through pred(). sleepers
 * (optional) counts the threads in the sleep phase only: a waker that bumps *word need not
 * call futex_wake while it reads 0. spin = false: sleep at once (a wait that already spun and
 * slept once: a long wait costs no CPU between its polls). */
constexpr uint64_t kMinSpinNs = 100;
constexpr uint64_t kDeschedGapNs = 3000; /* a spin round slower than this was descheduled */
constexpr uint64_t kYieldEveryNs = 2000;  /* contention probe interval while spinning */
constexpr uint64_t kYieldSlowNs = 1500;   /* a sched_yield() slower than this ran another thread */
constexpr uint64_t kYieldPhaseNs = 1000000; /* a wait for another process yields this long before it sleeps */
/* The spin phase alone: true as soon as pred() holds, false when the budget is spent. remote:
 * the waker is usually another process (wait_word passes `shared`), see common.cc. */
bool spin_until(std::atomic<uint32_t>* word, uint64_t deadline_ns, const std::function<bool()>& pred,
                bool remote = false);
constexpr uint32_t kProbeEvery = 128;
void spin_pause(); /* one pause instruction */
/* A communicator of n ranks was created in this process: all ranks of an emulated job share
 * this host, so more ranks than online CPUs means the node is oversubscribed (see spin_until). */
void note_local_ranks(uint32_t n);
/* Scheduling hint for the emulator's own threads (stream workers, executors). */
void background_thread_init();
bool wait_word(std::atomic<uint32_t>* word, bool shared, uint64_t deadline_ns,
               const std::function<bool()>& pred, uint64_t poll_ns = 200000000ull,
               std::atomic<uint32_t>* sleepers = nullptr, bool spin = true);

/* The notify checker's mode: 0 off, 1 fail, 2 warn (HCOMM_KIT_CHECK, changeable at run time by
 * HcommKitSetCheck through set_check_mode, which returns the previous mode). */
int check_mode();
int set_check_mode(int mode);

/* Per-rank log (HCOMM_KIT_LOG_DIR): one timestamped line, written by diag/ (BaseHooks::rank_logv);
 * nothing without it. */
void rank_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace emu

#endif
