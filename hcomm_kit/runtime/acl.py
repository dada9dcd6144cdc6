"""Declarations of the ACL runtime C API (``acl_runtime.md`` §3), as one data table.

Each :class:`Decl` gives the exact ctypes ``restype``/``argtypes`` of one prototype (§3.13 rules:
``aclError`` -> ``c_int``, handles -> ``c_void_p``, out-handles -> ``POINTER(c_void_p)``,
``size_t`` -> ``c_size_t``, enums -> ``c_int``, ``uint64_t`` -> ``c_uint64``). Binding happens in
:mod:`hcomm_kit.runtime.library`; nothing here loads a library.
"""

from __future__ import annotations

from ctypes import (
    CFUNCTYPE, POINTER, c_char_p, c_float, c_int, c_int32, c_size_t, c_uint32, c_uint64, c_void_p,
)
from typing import NamedTuple

from .structs import aclrtBinaryLoadOptions, aclrtLaunchKernelCfg, aclrtPlaceHolderInfo

__all__ = ["Decl", "DECLS", "aclrtCallback", "aclrtHostFunc", "aclError"]


class Decl(NamedTuple):
    """One C function: name, ctypes restype, argtypes and how its return value is checked.

    Attributes:
        name: the exported symbol.
        restype: ctypes return type.
        argtypes: ctypes argument types, in order.
        kind: ``'acl'`` (aclError, checked by ``check_acl``), ``'hccl'`` (HcclResult/HcommResult,
            checked by ``check_hccl``) or ``'value'`` (the return value is data, e.g. the code
            aclrtGetLastError reports: never checked). Functions returning ``const char*`` or a
            handle (``c_void_p``) are never checked either.
        required: the emulator must export it (missing optional symbols are tolerated everywhere).
        ok: return codes the checked wrapper treats as success (besides 0).
        side: ``'host'`` or ``'device'`` (device-side Hcomm data plane, §3.1-§3.4 of hcomm.md).
    """

    name: str
    restype: object
    argtypes: tuple
    kind: str
    required: bool = True
    ok: tuple[int, ...] = ()
    side: str = "host"


aclError = c_int
#: ``typedef void (*aclrtCallback)(void* userData);`` keep the Python object alive while in use.
aclrtCallback = CFUNCTYPE(None, c_void_p)
#: ``typedef void (*aclrtHostFunc)(void* args);``
aclrtHostFunc = CFUNCTYPE(None, c_void_p)

_vp = c_void_p
_out = POINTER(c_void_p)
_cfg = POINTER(aclrtLaunchKernelCfg)
_opts = POINTER(aclrtBinaryLoadOptions)


def _d(name: str, *argtypes, restype=aclError, **kw) -> Decl:
    return Decl(name, restype, tuple(argtypes), "acl", **kw)


DECLS: tuple[Decl, ...] = (
    # §3.1 initialisation, finalisation, error text
    _d("aclInit", c_char_p, ok=(100002,)),           # repeated aclInit: harmless, reference counted
    _d("aclFinalize"),
    # hcomm-kit emulator extension (hcomm_kit/emu_ext.h): unlink this process's segment names at exit
    Decl("HcommKitProcessExiting", c_int32, (), "value", required=False),
    _d("aclFinalizeReference", POINTER(c_uint64)),
    _d("aclGetRecentErrMsg", restype=c_char_p),
    # §3.14 the calling thread's last runtime error (level: ACL_RT_THREAD_LEVEL = 0)
    Decl("aclrtGetLastError", aclError, (c_int,), "value"),
    Decl("aclrtPeekAtLastError", aclError, (c_int,), "value"),
    # §3.2 devices, contexts, run mode
    _d("aclrtSetDevice", c_int32),
    _d("aclrtResetDevice", c_int32),
    _d("aclrtResetDeviceForce", c_int32),
    _d("aclrtGetDevice", POINTER(c_int32)),
    _d("aclrtCreateContext", _out, c_int32),
    _d("aclrtDestroyContext", _vp),
    _d("aclrtSetCurrentContext", _vp),
    _d("aclrtGetCurrentContext", _out),
    _d("aclrtGetRunMode", POINTER(c_int)),
    _d("aclrtGetSocName", restype=c_char_p),
    _d("aclrtGetDeviceCount", POINTER(c_uint32)),
    # §3.3 streams
    _d("aclrtCreateStream", _out),
    _d("aclrtDestroyStream", _vp),
    _d("aclrtSynchronizeStream", _vp),
    _d("aclrtSynchronizeStreamWithTimeout", _vp, c_int32),
    _d("aclrtSynchronizeDevice"),
    _d("aclrtSynchronizeDeviceWithTimeout", c_int32),
    _d("aclrtStreamQuery", _vp, POINTER(c_int)),
    # §3.4 memory
    _d("aclrtMalloc", _out, c_size_t, c_int),
    _d("aclrtMallocAlign32", _out, c_size_t, c_int),
    _d("aclrtFree", _vp),
    _d("aclrtMallocHost", _out, c_size_t),
    _d("aclrtFreeHost", _vp),
    _d("aclrtHostRegister", _vp, c_uint64, c_int, _out, required=False),  # newer CANN; emulator: same address
    _d("aclrtHostUnregister", _vp, required=False),
    _d("aclrtMemcpy", _vp, c_size_t, _vp, c_size_t, c_int),
    _d("aclrtMemcpyAsync", _vp, c_size_t, _vp, c_size_t, c_int, _vp),
    _d("aclrtMemset", _vp, c_size_t, c_int32, c_size_t),
    _d("aclrtMemsetAsync", _vp, c_size_t, c_int32, c_size_t, _vp),
    # §3.5 kernel binary loading
    _d("aclrtBinaryLoadFromFile", c_char_p, _opts, _out),
    _d("aclrtBinaryLoadFromData", _vp, c_size_t, _opts, _out),
    _d("aclrtRegisterCpuFunc", _vp, c_char_p, c_char_p, _out),
    _d("aclrtBinaryGetFunction", _vp, c_char_p, _out),
    _d("aclrtBinaryGetFunctionByEntry", _vp, c_uint64, _out),
    _d("aclrtBinaryUnLoad", _vp),
    _d("aclrtCreateBinary", _vp, c_size_t, restype=c_void_p),     # NULL on failure
    _d("aclrtDestroyBinary", _vp),
    _d("aclrtBinaryLoad", _vp, _out),
    # §3.6 argument list
    _d("aclrtKernelArgsInit", _vp, _out),
    _d("aclrtKernelArgsInitByUserMem", _vp, _vp, _vp, c_size_t),
    _d("aclrtKernelArgsGetHandleMemSize", _vp, POINTER(c_size_t)),
    _d("aclrtKernelArgsGetMemSize", _vp, c_size_t, POINTER(c_size_t)),
    _d("aclrtKernelArgsAppend", _vp, _vp, c_size_t, _out),
    _d("aclrtKernelArgsAppendPlaceHolder", _vp, _out),
    _d("aclrtKernelArgsGetPlaceHolderBuffer", _vp, _vp, c_size_t, _out),
    _d("aclrtKernelArgsParaUpdate", _vp, _vp, _vp, c_size_t),
    _d("aclrtKernelArgsFinalize", _vp),
    # §3.7 launch
    _d("aclrtLaunchKernelWithConfig", _vp, c_uint32, _vp, _cfg, _vp, _vp),
    _d("aclrtLaunchKernel", _vp, c_uint32, _vp, c_size_t, _vp),
    _d("aclrtLaunchKernelV2", _vp, c_uint32, _vp, c_size_t, _cfg, _vp),
    _d("aclrtLaunchKernelWithHostArgs", _vp, c_uint32, _vp, _cfg, _vp, c_size_t,
       POINTER(aclrtPlaceHolderInfo), c_size_t),
    _d("aclrtLaunchKernelWithArgsArray", _vp, c_uint32, _vp, _cfg, _out),
    _d("aclrtGetOpTimeOutInterval", POINTER(c_uint64)),
    # §3.8 notifies
    _d("aclrtCreateNotify", _out, c_uint64),
    _d("aclrtDestroyNotify", _vp),
    _d("aclrtRecordNotify", _vp, _vp),
    _d("aclrtWaitAndResetNotify", _vp, _vp, c_uint32),
    _d("aclrtGetNotifyId", _vp, POINTER(c_uint32)),
    # §3.9 events
    _d("aclrtCreateEvent", _out),
    _d("aclrtCreateEventWithFlag", _out, c_uint32),
    _d("aclrtCreateEventExWithFlag", _out, c_uint32),
    _d("aclrtRecordEvent", _vp, _vp),
    _d("aclrtStreamWaitEvent", _vp, _vp),
    _d("aclrtSetOpWaitTimeout", c_uint32),
    _d("aclrtSynchronizeEvent", _vp),
    _d("aclrtSynchronizeEventWithTimeout", _vp, c_int32),
    _d("aclrtEventElapsedTime", POINTER(c_float), _vp, _vp),
    _d("aclrtQueryEvent", _vp, POINTER(c_int)),
    _d("aclrtQueryEventStatus", _vp, POINTER(c_int)),
    _d("aclrtDestroyEvent", _vp),
    # §3.10 host callbacks
    _d("aclrtSubscribeReport", c_uint64, _vp),
    _d("aclrtLaunchCallback", aclrtCallback, _vp, c_int, _vp),
    _d("aclrtProcessReport", c_int32),
    _d("aclrtUnSubscribeReport", c_uint64, _vp),
    _d("aclrtLaunchHostFunc", _vp, aclrtHostFunc, _vp),
)
