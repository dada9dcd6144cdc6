"""Declarations of the HCCL host control plane and the Hcomm data plane (``hcomm.md`` §3.1–§3.10),
as one data table of :class:`~hcomm_kit.runtime.acl.Decl` (``kind='hccl'``).

Handles: ``HcclComm`` -> ``c_void_p``; ``ThreadHandle``/``ChannelHandle`` (uint64) -> ``c_uint64``;
enums (``CommEngine``, ``HcommDataType``, ...) -> ``c_int``. Device-side functions return
``int32_t`` (``HcommResult``); host functions return ``HcclResult`` (also 4-byte int).
"""

from __future__ import annotations

from ctypes import POINTER, c_bool, c_char_p, c_double, c_float, c_int, c_int32, c_uint32, c_uint64, c_void_p

from .acl import Decl
from .structs import (
    CommLink, CommMem, EndpointDesc, HcclChannelDesc, HcclCommConfig, HcclKernelFuncInfo,
    HcclKernelLaunchCfg, HcclOpDesc, HcclRootInfo, HcclSendRecvItem, HcommBatchTransferDesc, HcommKitStreamCall,
    ThreadConfig,
)

__all__ = ["DECLS", "HcclResultT", "HcommResultT"]

HcclResultT = c_int
HcommResultT = c_int32

_vp = c_void_p
_out = POINTER(c_void_p)
_h = c_uint64                 # ThreadHandle / ChannelHandle
_hout = POINTER(c_uint64)
_u32p = POINTER(c_uint32)
_u64p = POINTER(c_uint64)


def _host(name: str, *argtypes, restype=HcclResultT, **kw) -> Decl:
    return Decl(name, restype, tuple(argtypes), "hccl", **kw)


def _dev(name: str, *argtypes, **kw) -> Decl:
    return Decl(name, HcommResultT, tuple(argtypes), "hccl", side="device", **kw)


DECLS: tuple[Decl, ...] = (
    # ---- §3.1 local operations (device side) ---------------------------------------------
    _dev("HcommLocalCopyOnThread", _h, _vp, _vp, c_uint64),
    _dev("HcommLocalReduceOnThread", _h, _vp, _vp, c_uint64, c_int, c_int),
    _dev("HcommThreadNotifyRecordOnThread", _h, _h, c_uint32),
    _dev("HcommThreadNotifyWaitOnThread", _h, c_uint32, c_uint32),
    _dev("HcommThreadNotifyWaitOnThreadWithDefaultTimeout", _h, c_uint32),
    _dev("HcommAclrtNotifyRecordOnThread", _h, c_uint64),
    _dev("HcommAclrtNotifyWaitOnThread", _h, c_uint64, c_uint32),
    # ---- §3.2 channel operations (device side) -------------------------------------------
    _dev("HcommWriteOnThread", _h, _h, _vp, _vp, c_uint64),
    _dev("HcommWriteReduceOnThread", _h, _h, _vp, _vp, c_uint64, c_int, c_int),
    _dev("HcommWriteWithNotifyOnThread", _h, _h, _vp, _vp, c_uint64, c_uint32),
    _dev("HcommWriteReduceWithNotifyOnThread", _h, _h, _vp, _vp, c_uint64, c_int, c_int, c_uint32),
    _dev("HcommReadOnThread", _h, _h, _vp, _vp, c_uint64),
    _dev("HcommReadReduceOnThread", _h, _h, _vp, _vp, c_uint64, c_int, c_int),
    _dev("HcommChannelNotifyRecordOnThread", _h, _h, c_uint32),
    _dev("HcommChannelNotifyWaitOnThread", _h, _h, c_uint32, c_uint32),
    _dev("HcommChannelNotifyWaitOnThreadWithDefaultTimeout", _h, _h, c_uint32),
    _dev("HcommBatchTransferOnThread", _h, _h, POINTER(HcommBatchTransferDesc), c_uint32),
    _dev("HcommChannelFenceOnThread", _h, _h),
    _dev("HcommChannelDrainOnThread", _h, _h),
    # ---- §3.3 host-CPU-only and NBI variants ---------------------------------------------
    _dev("HcommWriteNbiOnThread", _h, _h, _vp, _vp, c_uint64),
    _dev("HcommWriteNbi", _h, _vp, _vp, c_uint64),
    _dev("HcommWriteWithNotifyNbiOnThread", _h, _h, _vp, _vp, c_uint64, c_uint32),
    _dev("HcommWriteWithNotifyNbi", _h, _vp, _vp, c_uint64, c_uint32),
    _dev("HcommReadNbiOnThread", _h, _h, _vp, _vp, c_uint64),
    _dev("HcommReadNbi", _h, _vp, _vp, c_uint64),
    _dev("HcommChannelNotifyRecord", _h, c_uint32),
    _dev("HcommChannelNotifyWait", _h, c_uint32, c_uint32),
    _dev("HcommChannelFence", _h),
    _dev("HcommFenceOnThread", _h),
    # ---- §3.4 device-side control --------------------------------------------------------
    _dev("HcommBatchModeStart", c_char_p),
    _dev("HcommBatchModeEnd", c_char_p),
    _dev("HcommAcquireComm", c_char_p),
    _dev("HcommReleaseComm", c_char_p),
    _dev("HcommSetNotifyWaitTimeOut", c_float),
    _dev("HcommThreadResAcquireTimeOut", c_float),
    _dev("HcommAicpuTsTaskCacheLookup", c_char_p, POINTER(c_bool)),
    _dev("HcommAicpuTsTaskCacheStart", c_char_p, _out, _u64p, c_uint64),
    _dev("HcommAicpuTsTaskCacheEnd", c_char_p),
    _dev("HcommAicpuTsTaskCacheExecute", c_char_p, _out, _u64p, c_uint64),
    _dev("HcommAicpuTsTaskCacheClear", c_char_p),
    # ---- §3.6 communicators ---------------------------------------------------------------
    _host("HcclCommInitClusterInfo", c_char_p, c_uint32, _out),
    _host("HcclCommInitClusterInfoConfig", c_char_p, c_uint32, POINTER(HcclCommConfig), _out),
    _host("HcclGetRootInfo", POINTER(HcclRootInfo)),
    _host("HcclCommInitRootInfo", c_uint32, POINTER(HcclRootInfo), c_uint32, _out),
    _host("HcclCommInitRootInfoConfig", c_uint32, POINTER(HcclRootInfo), c_uint32,
          POINTER(HcclCommConfig), _out),
    _host("HcclCommInitAll", c_uint32, POINTER(c_int32), _out),
    _host("HcclCreateSubCommConfig", POINTER(_vp), c_uint32, _u32p, c_uint64, c_uint32, POINTER(HcclCommConfig), _out,
          required=False),
    _host("HcclGetCommName", _vp, c_char_p),                 # buffer >= 128 bytes
    _host("HcclGetRankSize", _vp, _u32p),
    _host("HcclGetRankId", _vp, _u32p),
    _host("HcclBarrier", _vp, _vp),
    _host("HcclCommDestroy", _vp),
    _host("HcclGetErrorString", c_int, restype=c_char_p, required=False),
    # ---- §3.7 threads ----------------------------------------------------------------------
    _host("HcclThreadAcquire", _vp, c_int, c_uint32, c_uint32, _hout),
    _host("HcclThreadAcquireWithConfig", _vp, c_int, c_uint32, c_int, POINTER(ThreadConfig), _hout),
    _host("HcclThreadAcquireWithStream", _vp, c_int, _vp, c_uint32, _hout),
    _host("HcclDedicatedThreadAcquire", _vp, c_int, c_uint32, _hout),
    _host("HcclThreadResGetInfo", _vp, _h, c_int, c_uint32, _out),
    _host("HcclThreadExportToCommEngine", _vp, c_uint32, _hout, c_int, _hout),
    # ---- §3.8 channels and topology ---------------------------------------------------------
    _host("HcclChannelAcquire", _vp, c_int, POINTER(HcclChannelDesc), c_uint32, _hout),
    _host("HcclChannelAcquireWithConfig", _vp, c_int, POINTER(HcclChannelDesc), c_uint32, _vp, _hout),
    _host("HcclChannelQuery", _vp, c_int, POINTER(HcclChannelDesc), c_uint32, _hout),
    _host("HcclChannelDestroy", _vp, _hout, c_uint32),
    _host("HcclChannelGetHcclBuffer", _vp, _h, _out, _u64p),
    _host("HcclChannelGetRemoteMems", _vp, _h, _u32p, POINTER(POINTER(CommMem)), POINTER(POINTER(c_char_p))),
    _host("HcclRankGraphGetLinks", _vp, c_uint32, c_uint32, c_uint32, POINTER(POINTER(CommLink)), _u32p,
          required=False),
    _host("HcclRankGraphGetLayers", _vp, POINTER(_u32p), _u32p, required=False),
    _host("HcclRankGraphGetRanksByLayer", _vp, c_uint32, POINTER(_u32p), _u32p, required=False),
    _host("HcclRankGraphGetRankSizeByLayer", _vp, c_uint32, _u32p, required=False),
    _host("HcclRankGraphGetTopoTypeByLayer", _vp, c_uint32, POINTER(c_int), required=False),
    _host("HcclRankGraphGetInstSizeListByLayer", _vp, c_uint32, POINTER(_u32p), _u32p, required=False),
    _host("HcclRankGraphGetTopoInstsByLayer", _vp, c_uint32, POINTER(_u32p), _u32p, required=False),
    _host("HcclRankGraphGetTopoType", _vp, c_uint32, c_uint32, POINTER(c_int), required=False),
    _host("HcclRankGraphGetRanksByTopoInst", _vp, c_uint32, c_uint32, POINTER(_u32p), _u32p,
          required=False),
    _host("HcclGetHeterogMode", _vp, POINTER(c_int), required=False),
    _host("HcclRankGraphGetEndpointNum", _vp, c_uint32, c_uint32, _u32p, required=False),
    _host("HcclRankGraphGetEndpointDesc", _vp, c_uint32, c_uint32, _u32p, POINTER(EndpointDesc),
          required=False),
    _host("HcclRankGraphGetEndpointInfo", _vp, c_uint32, POINTER(EndpointDesc), c_int, c_uint32, _vp,
          required=False),
    # ---- §3.9 buffers and engine contexts ----------------------------------------------------
    _host("HcclGetHcclBuffer", _vp, _out, _u64p),
    _host("HcclGetHcclBufferCleared", _vp, _out, _u64p),
    _host("HcclEngineCtxCreate", _vp, c_char_p, c_int, c_uint64, _out),
    _host("HcclEngineCtxGet", _vp, c_char_p, c_int, _out, _u64p),
    _host("HcclEngineCtxCopy", _vp, c_int, c_char_p, _vp, c_uint64, c_uint64),
    _host("HcclEngineCtxDestroy", _vp, c_char_p, c_int),
    _host("HcclCommMemReg", _vp, c_char_p, POINTER(CommMem), _out),
    _host("HcclGetRemoteIpcHcclBuf", _vp, c_uint64, _out, _u64p),
    _host("HcclDevMemAcquire", _vp, c_char_p, _u64p, _out, POINTER(c_bool)),
    # ---- collective C API (hicann/hccl include/hccl.h): asynchronous on the stream ------------
    _host("HcclAllReduce", _vp, _vp, c_uint64, c_int, c_int, _vp, _vp),
    _host("HcclBroadcast", _vp, c_uint64, c_int, c_uint32, _vp, _vp),
    _host("HcclReduceScatter", _vp, _vp, c_uint64, c_int, c_int, _vp, _vp),
    _host("HcclReduceScatterV", _vp, _vp, _vp, _vp, c_uint64, c_int, c_int, _vp, _vp, required=False),
    _host("HcclScatter", _vp, _vp, c_uint64, c_int, c_uint32, _vp, _vp),
    _host("HcclAllGather", _vp, _vp, c_uint64, c_int, _vp, _vp),
    _host("HcclAllGatherV", _vp, c_uint64, _vp, _vp, _vp, c_int, _vp, _vp, required=False),
    _host("HcclSend", _vp, c_uint64, c_int, c_uint32, _vp, _vp),
    _host("HcclRecv", _vp, c_uint64, c_int, c_uint32, _vp, _vp),
    _host("HcclAlltoAllVC", _vp, _vp, c_int, _vp, c_int, _vp, _vp),
    _host("HcclAlltoAllV", _vp, _vp, _vp, c_int, _vp, _vp, _vp, c_int, _vp, _vp),
    _host("HcclAlltoAll", _vp, c_uint64, c_int, _vp, c_uint64, c_int, _vp, _vp),
    _host("HcclReduce", _vp, _vp, c_uint64, c_int, c_int, c_uint32, _vp, _vp),
    _host("HcclBatchSendRecv", POINTER(HcclSendRecvItem), c_uint32, _vp, _vp),
    # ---- hcomm-kit emulator extension (hcomm_kit/emu_ext.h; absent on CANN) ------------------
    # (HcommKitSetCheck / HcommKitCommReport return values, not status codes: C hosts only.)
    _host("HcommKitCallCheck", _vp, c_int32, c_char_p, c_char_p, c_char_p, c_uint64, required=False),
    _host("HcommKitP2PCheck", _vp, c_int32, c_int32, c_char_p, c_char_p, c_char_p, c_uint64, required=False),
    _host("HcommKitCommSetConnectTimeout", _vp, c_uint32, required=False),
    Decl("HcommKitCommAbortReason", c_int32, (_vp, c_char_p, c_uint64), "value", required=False),
    _host("HcommKitCommAbort", _vp, c_char_p, required=False),
    Decl("HcommKitCommTopology", c_int32, (_vp, c_char_p, c_uint64), "value", required=False),
    _host("HcommKitModelLastTime", _vp, POINTER(c_double), required=False),
    Decl("HcommKitModelExplain", c_int32, (_vp, c_int32, c_char_p, c_uint64), "value", required=False),
    Decl("HcommKitAlgoSelect", c_int32, (_vp, c_int32, c_uint64, c_int32, c_int32, c_char_p, c_char_p, c_uint64),
         "value", required=False),
    # (returns an aclError or an HCCL code, whichever call failed: the caller maps it, never checked)
    Decl("HcommKitStreamCalls", c_int32, (_vp, POINTER(HcommKitStreamCall), c_uint32, c_uint32, _u32p), "value",
         required=False),
    # ---- §3.10 alternative launcher (950) ------------------------------------------------
    _host("HcclAicpuKernelLaunch", _vp, POINTER(HcclOpDesc), POINTER(HcclKernelFuncInfo), _h, _vp,
          POINTER(HcclKernelLaunchCfg), required=False),
)
