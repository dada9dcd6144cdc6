/*
 * hcomm-kit emulator extensions: calls and codes that CANN does not have. They exist only in the
 * bundled CPU emulator (libhcomm_emu.so); a program that must also build against CANN guards them
 * with #ifdef HCOMM_KIT_EMU_EXT.
 */
#ifndef HCOMM_KIT_EMU_EXT_H
#define HCOMM_KIT_EMU_EXT_H

#include <stdint.h>

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

/* The checker's mode for this process from now on: 0 off, 1 findings fail the operation, 2 warn
 * only (as HCOMM_KIT_CHECK=0/1/warn). Returns the previous mode, or -1 for a bad value. */
int32_t HcommKitSetCheck(int32_t mode);

/* Collective-call check: posts this rank's description of its next collective call (peer = -1) or
 * of its next point-to-point call with peer, and compares it with what the other rank(s) posted for
 * the same call (`expected`: the text they must have posted). A mismatch aborts the communicator
 * on every rank and returns HCCL_E_PARA with the text (also in msg). */
int32_t HcommKitCallCheck(HcclComm comm, int32_t peer, const char* signature, const char* expected, char* msg,
                          uint64_t msgLen);

/* How long channel set-up on this communicator (HcclChannelAcquire, a collective's first call)
 * waits for the peers' ends, in seconds; 0 goes back to HCCL_CONNECT_TIMEOUT. HCCL_E_PARA for a
 * communicator that is not live or more than 86400 s. */
HcclResult HcommKitCommSetConnectTimeout(HcclComm comm, uint32_t seconds);

/* The communicator's cluster topology as one line of JSON: {"product", "source", "servers":
 * [[ranks of server 0], ...], "pods": [[servers of super-pod 0], ...], "down": [[a, b], ...]}.
 * Returns the full length (written truncated to bufLen - 1), or minus an HCCL code. */
int32_t HcommKitCommTopology(HcclComm comm, char* buf, uint64_t bufLen);

/* Algorithm selection of the built-in collectives (hcomm_kit/ops/selector.py): n entries (CANN's
 * algorithm names, template names, costs in seconds from the cost model). Runs CANN's tuner
 * plugin (HCCL_TUNER_PLUGIN, hccl_tuner_plugin.h) over them, which may rewrite costs[] (< 0
 * disables, 0 prefers), logs the choice at info level (HCOMM_KIT_LOG=info, rank 0) and returns
 * the index of the cheapest enabled entry; -1 when every entry is disabled; minus an HCCL code
 * on bad arguments. */
int32_t HcommKitTunerSelect(HcclComm comm, int32_t collType, uint64_t nBytes, int32_t dataType, const char** algNames,
                            const char** templates, float* costs, uint32_t n);

/* What every rank of the communicator waits for, as text (the hang report without a verdict).
 * Returns the length written, truncated to bufLen - 1. */
uint64_t HcommKitCommReport(HcclComm comm, char* buf, uint64_t bufLen);

/* Timing model (README "Predicted time"): the modelled Ascend time in microseconds of the latest
 * operation this rank ran on comm (its last kernel launch that queued Hcomm tasks), simulated from
 * the tasks every rank's kernel issued for that call and the product's parameters. Waits (at most
 * HCOMM_KIT_MODEL_WAIT seconds, default 30) until every rank has finished the same call;
 * HCCL_E_TIMEOUT naming the rank that has not, HCCL_E_NOT_FOUND before any operation,
 * HCCL_E_NOT_SUPPORT when the log is off (HCOMM_KIT_MODEL=0) or the product has no parameters. */
HcclResult HcommKitModelLastTime(HcclComm comm, double* us);

/* The same simulation as one line of JSON: {"time_us", "product", "op", "instance", "ranks",
 * "tasks", "critical_path": [{"rank", "thread", "task", "bytes", "peer", "link", "issue_us",
 * "start_us", "end_us", "why"}, ...], "notes"} and, with allTasks, "all" (every task). Returns the
 * full length (written truncated to bufLen - 1), or minus an HCCL code. */
int32_t HcommKitModelExplain(HcclComm comm, int32_t allTasks, char* buf, uint64_t bufLen);

#ifdef __cplusplus
}
#endif

#endif
