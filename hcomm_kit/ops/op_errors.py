"""The exceptions of failed custom operator calls: a return code and the runtime's message mapped
to the most specific error (timeout, deadlock, call mismatch, kernel failure, remote failure)."""

from __future__ import annotations

from typing import Any

from ..base.errors import (AclError, CheckError, CollectiveMismatchError, DeadlockError, HcclError, KernelError,
                           OpTimeoutError, RemoteError)
from ..diag import ranklog as _diag
from ..runtime import codes

__all__ = ["op_error", "MISMATCH_MARK"]

_TIMEOUT_CODES = (107020, 507017)           # TASK_TIMEOUT, AICPU_TIMEOUT
_KERNEL_CODE = 507018                        # AICPU_EXCEPTION
_DEADLOCK_MARK = "[hcomm-kit] DEADLOCK"     # the emulator's certain-hang report
MISMATCH_MARK = "mismatch on communicator"  # the emulator's call check (collective or point-to-point)


def op_error(op: Any, ret: int, api: str, timeout: float | None, *, hccl: bool = False,
             message: str | None = None) -> Exception:
    """The exception for a failed call of ``op`` (a CustomOp), with the operator, rank and the
    runtime's message (which it consumes, and logs to the rank's diagnostic log).

    Args:
        op: the :class:`~hcomm_kit.ops.custom_op.CustomOp` whose call failed.
        ret: the ACL (or, with ``hccl``, HCCL) return code.
        api: the C function that returned it.
        timeout: the call's operator timeout in seconds (None: the operator's default).
        hccl: ``ret`` is an HcclResult.
        message: the runtime's message when the caller has already taken it.

    Returns:
        The most specific :class:`~hcomm_kit.base.errors.HcommKitError` for it (not raised).
    """
    rt = op.rt
    ret = int(ret)
    if message is None:
        message = rt.recent_error_message() or ""
    rank = op.comm.rank
    where = f"operator {op.name} (kernel {op.spec.kernel}) on rank {rank}/{op.comm.size}"
    _diag.log(f"{where}: {api} failed with {ret}: {message}")
    if MISMATCH_MARK in message:
        return CollectiveMismatchError(f"{where}: {message}")
    if hccl and ret == codes.HCCL_E_REMOTE:
        return RemoteError(ret, codes.hccl_name(ret), api, f"{where}: a peer rank failed or exited "
                                                          f"(remote error): {message or codes.hccl_meaning(ret)}")
    if hccl:
        name = codes.hccl_name(ret)
        return HcclError(ret, name, api, f"{where}: {message or codes.hccl_meaning(ret)}")
    name = codes.acl_name(ret)
    t = op._default_timeout if timeout is None else timeout
    if ret in _TIMEOUT_CODES:
        if _DEADLOCK_MARK in message:
            return DeadlockError(ret, name, api, f"operator {op.name} can never finish on rank {rank}: the "
                                                 f"emulator found a deadlock (report below)",
                                 op=op.name, rank=rank, timeout=float(t), account=message)
        hint = (f"operator {op.name} did not finish within {t} s on rank {rank} "
                f"(timeout= argument or HCCL_EXEC_TIMEOUT)")
        return OpTimeoutError(ret, name, api, hint, op=op.name, rank=rank, timeout=float(t),
                              account=message or codes.acl_meaning(ret))
    if ret == codes.HCOMM_KIT_ERROR_CHECK:
        return CheckError(ret, name, api, f"{where}: {message or codes.acl_meaning(ret)}")
    if ret == _KERNEL_CODE:
        return KernelError(ret, name, api, f"kernel {op.spec.kernel} of {where} failed: "
                                           f"{message or codes.acl_meaning(ret)}")
    if ret == codes.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR:
        return RemoteError(ret, name, api, f"{where}: a peer rank failed or exited "
                                           f"(remote error): {message or codes.acl_meaning(ret)}")
    return AclError(ret, name, api, f"{where}: {message or codes.acl_meaning(ret)}")
