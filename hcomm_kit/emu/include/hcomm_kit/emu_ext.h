/*
 * hcomm-kit emulator extensions: calls and codes that CANN does not have. They exist only in the
 * bundled CPU emulator (libhcomm_emu.so); a program that must also build against CANN guards them
 * with #ifdef HCOMM_KIT_EMU_EXT.
 */
#ifndef HCOMM_KIT_EMU_EXT_H
#define HCOMM_KIT_EMU_EXT_H

#include <stdint.h>

#include "acl/acl_base_rt.h"
#include "hccl/hccl_types.h"

#define HCOMM_KIT_EMU_EXT 1

/* aclError of an operation failed by the notify checker (HCOMM_KIT_CHECK=1): a lost notify (a
 * record while the flag is still set), a notify consumed by another call of the operation, an
 * unordered access to the same HCCL-buffer bytes, or a read of bytes nobody wrote. Every rank of
 * the communicator fails with it; aclGetRecentErrMsg() names rank, thread, task, call and bytes. */
#define HCOMM_KIT_ERROR_CHECK 509001

#ifdef __cplusplus
extern "C" {
#endif

/* The process is ending: unlink the names of its shared-memory segments now, as its exit handler
 * would (for hosts that end without running C exit handlers, e.g. Python after a KeyboardInterrupt,
 * which kills itself with SIGINT). Mappings stay valid. Returns the names unlinked. */
int32_t HcommKitProcessExiting(void);

/* The checker's mode for this process from now on: 0 off, 1 findings fail the operation, 2 warn
 * only (as HCOMM_KIT_CHECK=0/1/warn). Returns the previous mode, or -1 for a bad value. */
int32_t HcommKitSetCheck(int32_t mode);

/* Collective-call check: posts this rank's description of its next collective call (peer = -1) or
 * of its next point-to-point call with peer, and compares it with what the other rank(s) posted for
 * the same call (`expected`: the text they must have posted). A mismatch aborts the communicator
 * on every rank and returns HCCL_E_PARA with the text (also in msg). */
int32_t HcommKitCallCheck(HcclComm comm, int32_t peer, const char* signature, const char* expected, char* msg,
                          uint64_t msgLen);

/* Point-to-point call check matched per direction: posts this rank's description of its next send
 * to peer (recv = 0) or receive from peer (recv = 1) and compares it with the peer's description of
 * the same transfer (the k-th send from A to B pairs with B's k-th receive from A, whatever else
 * either posts in between). A mismatch aborts the communicator on every rank and returns
 * HCCL_E_PARA with the text (also in msg). */
int32_t HcommKitP2PCheck(HcclComm comm, int32_t peer, int32_t recv, const char* signature, const char* expected,
                         char* msg, uint64_t msgLen);

/* Abort the communicator on every rank with `reason` (for a host that posted a call to the call
 * check and will not make it after all): the peers' calls fail at once naming it. */
int32_t HcommKitCommAbort(HcclComm comm, const char* reason);

/* Why the communicator was aborted: 0 when it was not (or comm is not a live communicator), else
 * its kind (HCOMM_KIT_ABORT_MISMATCH & co. below), with the text every rank's failed call reports
 * in buf (truncated to bufLen - 1). */
int32_t HcommKitCommAbortReason(HcclComm comm, char* buf, uint64_t bufLen);
#define HCOMM_KIT_ABORT_OTHER 1
#define HCOMM_KIT_ABORT_TIMEOUT 2
#define HCOMM_KIT_ABORT_DEADLOCK 3
#define HCOMM_KIT_ABORT_CHECK 4
#define HCOMM_KIT_ABORT_CRASH 5
#define HCOMM_KIT_ABORT_PEER_DEAD 6
#define HCOMM_KIT_ABORT_MISMATCH 7
#define HCOMM_KIT_ABORT_KERNEL_TIMEOUT 8

/* How long channel set-up on this communicator (HcclChannelAcquire, a collective's first call)
 * waits for the peers' ends, in seconds; 0 goes back to HCCL_CONNECT_TIMEOUT. HCCL_E_PARA for a
 * communicator that is not live or more than 86400 s. */
HcclResult HcommKitCommSetConnectTimeout(HcclComm comm, uint32_t seconds);

/* The communicator's cluster topology as one line of JSON: {"product", "source", "servers":
 * [[ranks of server 0], ...], "pods": [[servers of super-pod 0], ...], "down": [[a, b], ...]}.
 * Returns the full length (written truncated to bufLen - 1), or minus an HCCL code. */
int32_t HcommKitCommTopology(HcclComm comm, char* buf, uint64_t bufLen);

/* The algorithm of a built-in collective for one call on comm, chosen as CANN's HCCL chooses it for
 * the AICPU engine (hccl/algo_select.h): collType an HcclCMDType, count as CANN's op puts it in
 * DataDes.count (allgather: sendCount; reduce-scatter, scatter: recvCount; alltoall: the count per
 * peer), forced NULL or a name to run instead (CANN's, or a built-in kernel's). HCCL_ALGO and
 * HCCL_USE_NEW_SELECTOR (with CANN's tuner plugin, HCCL_TUNER_PLUGIN) are applied as the
 * communicator read them at creation. Writes one line of JSON: {"name" (what runs), "cann" (CANN's
 * own choice), "source" (CANN's file:line), "how", "kernel" (OpParam.algo), "tuner_matched",
 * "entries" (the cost table)}; logs it at info level and notes it on the trace. Returns the full
 * length (written truncated to outLen - 1), or minus an HCCL code: HCCL_E_NETWORK when a link the
 * collective needs is down (HCOMM_KIT_LINKS_DOWN), HCCL_E_PARA for an unknown name,
 * HCCL_E_NOT_SUPPORT for an algorithm without a kernel; the message names them. */
int32_t HcommKitAlgoSelect(HcclComm comm, int32_t collType, uint64_t count, int32_t dataType, int32_t reduceOp,
                           const char* forced, char* out, uint64_t outLen);

/* The same without a communicator: topologyJson as HcommKitCommTopology writes it ("product",
 * "servers", "pods", "down"), the rank asking, algoConfig the HCCL_ALGO text (NULL: none),
 * newSelector as HCCL_USE_NEW_SELECTOR=1 would (CANN's cost table, without a tuner plugin). Writes
 * {"topo": CANN's topology fields, "selection": as above}. */
int32_t HcommKitAlgoSelectOn(const char* topologyJson, uint32_t rank, int32_t collType, uint64_t count,
                             int32_t dataType, int32_t reduceOp, const char* algoConfig, const char* forced,
                             int32_t newSelector, char* out, uint64_t outLen);

/* HCCL_ALGO text checked as communicator creation checks it: 0, or HCCL_E_PARA with the reason in
 * msg (both of CANN's grammars are accepted). */
int32_t HcommKitAlgoConfigCheck(const char* text, char* msg, uint64_t msgLen);

/* HCCL_ALGO text applied to CANN's registered AICPU algorithms of collType: {"decided" (a rule
 * decided for this op), "rule", "kept": [names], "kernel" (an emulator kernel the documented form
 * names, else "")}. Returns the length, or minus an HCCL code with the message. */
int32_t HcommKitAlgoConfigApply(const char* text, int32_t collType, char* out, uint64_t outLen);

/* The built-in kernels' algorithms as JSON: [{"coll", "collective", "name", "id"}, ...]. */
int32_t HcommKitAlgoKernels(char* out, uint64_t outLen);

/* One call of HcommKitStreamCalls: the launch sequence of hcomm.md §3.11 as data, so that a host
 * can build it once and make it with one call. */
typedef struct {
    uint32_t kind; /* HCOMM_KIT_SC_* */
    uint32_t u32;  /* LAUNCH: numBlocks; THREAD_*: notify index; NOTIFY_WAIT: timeout (s); CALL_CHECK: peer (int32) */
    uint64_t a;    /* LAUNCH: aclrtFuncHandle; THREAD_*: ThreadHandle; NOTIFY_*: aclrtNotify; CALL_CHECK: HcclComm */
    uint64_t b;    /* LAUNCH: aclrtArgsHandle; THREAD_RECORD: destination ThreadHandle; THREAD_WAIT: timeout (s);
                      CALL_CHECK: signature (const char*) */
    uint64_t c;    /* LAUNCH: aclrtLaunchKernelCfg* (or 0); CALL_CHECK: expected (const char*, 0: the signature) */
} HcommKitStreamCall;
#define HCOMM_KIT_SC_LAUNCH 1        /* aclrtLaunchKernelWithConfig(a, u32, stream, c, b, NULL) */
#define HCOMM_KIT_SC_THREAD_RECORD 2 /* HcommThreadNotifyRecordOnThread(a, b, u32) */
#define HCOMM_KIT_SC_THREAD_WAIT 3   /* HcommThreadNotifyWaitOnThread(a, u32, b) */
#define HCOMM_KIT_SC_NOTIFY_RECORD 4 /* aclrtRecordNotify(a, stream) */
#define HCOMM_KIT_SC_NOTIFY_WAIT 5   /* aclrtWaitAndResetNotify(a, stream, u32) */
#define HCOMM_KIT_SC_CALL_CHECK 6    /* HcommKitCallCheck(a, u32, b, c ? c : b, NULL, 0) */
/* The unwritten-output check (with the notify checker, HCOMM_KIT_CHECK): the kernel this sequence
 * launches must write every byte of [a, a + b) of device memory (the call's output on this rank)
 * with its device tasks; c: what to call the call in the message (const char*, "rank 1: operator
 * x (kind allreduce)"). Anywhere in the sequence, it watches from the sequence's first call; with
 * SYNC it is judged after the synchronisation (the call fails with HCOMM_KIT_ERROR_CHECK naming the
 * unwritten byte ranges, *failed = n), else by a task after the sequence's calls (the stream
 * fails). b = 0: nothing to check. */
#define HCOMM_KIT_SC_OUTPUT 7
/* Flags of HcommKitStreamCalls. SYNC: then aclrtSynchronizeStream(stream). INLINE (with SYNC): when
 * the stream is idle, the calling thread runs the tasks itself instead of waking the stream's
 * worker and sleeping until it is done (no thread hand-offs); only for kernels that return by
 * themselves (hcomm-kit's built-ins), since a launch timeout cannot take the calling thread back
 * from a kernel stuck in a system call. */
#define HCOMM_KIT_SC_SYNC 1u
#define HCOMM_KIT_SC_INLINE 2u

/* Makes the n calls in order with `stream`, exactly as the functions named above would (same
 * checks, codes and messages), then synchronises when flags has SYNC. Returns 0, or the code of
 * the first call that failed, with *failed (may be NULL) = its index (n: the synchronisation);
 * the calls after it are not made. With SYNC, a CALL_CHECK of a collective (peer < 0) also makes the
 * call return only once every rank has posted its call (at most 5 s), so that a mismatch found by
 * a later rank fails it too (HCCL_E_PARA, *failed = n). */
int32_t HcommKitStreamCalls(aclrtStream stream, const HcommKitStreamCall* calls, uint32_t n, uint32_t flags,
                            uint32_t* failed);

/* What every rank of the communicator waits for, as text (the hang report without a verdict).
 * Returns the length written, truncated to bufLen - 1. */
uint64_t HcommKitCommReport(HcclComm comm, char* buf, uint64_t bufLen);

/* Timing model (docs/predicted-time.md): the modelled Ascend time in microseconds of the latest
 * operation this rank ran on comm (its last kernel launch that queued Hcomm tasks), simulated from
 * the tasks every rank's kernel issued for that call and the product's parameters. Waits (at most
 * HCOMM_KIT_MODEL_WAIT seconds, default 30) until every rank has finished the same call;
 * HCCL_E_TIMEOUT naming the rank that has not, HCCL_E_NOT_FOUND before any operation,
 * HCCL_E_NOT_SUPPORT when the log is off (HCOMM_KIT_MODEL=0) or the product has no parameters. */
HcclResult HcommKitModelLastTime(HcclComm comm, double* us);

/* The same simulation as one line of JSON: {"time_us", "product", "op", "instance", "ranks",
 * "tasks", "critical_path": [{"rank", "thread", "task", "bytes", "peer", "link", "issue_us",
 * "start_us", "end_us", "why"}, ...], "notes", what the time is made of: "task_us", "launch_us",
 * "links": [{"from", "to", "type", "bytes", "transfers", "busy_us", "utilisation", "GBps"}, ...]
 * (directed links that carried bytes, busiest first), "idle_links": [[from, to], ...] (links up
 * between the ranks that carried nothing), "threads": [{"rank", "thread", "tasks", "bytes",
 * "busy_us", "wait_us", "utilisation"}, ...], "phases": [{"bound": "launch" | "issue" | "link" |
 * "local" | "peer", "rank", "thread", "peer", "link", "op", "shared", "tasks", "bytes",
 * "start_us", "end_us", "us"}, ...] (the critical path, first to last), "bound": {per kind, us}}
 * and, with allTasks, "all" (every task). Returns the full length (written truncated to
 * bufLen - 1), or minus an HCCL code. Keys are only ever added (the signature is unchanged). */
int32_t HcommKitModelExplain(HcclComm comm, int32_t allTasks, char* buf, uint64_t bufLen);

#ifdef __cplusplus
}
#endif

#endif
