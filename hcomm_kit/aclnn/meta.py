"""ctypes declarations of CANN's aclnn meta API (``aclnn/acl_meta.h``, library ``libnnopbase``)
and :class:`TensorDesc`, an ``aclTensor`` built from a device pointer and a numpy-style view.

On the emulator ``libnnopbase.so`` is a name of ``libhcomm_emu.so``; on CANN it is the library
of that name beside ``libascendcl.so``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Sequence

from ..base import dtypes as _dtypes
from ..base.errors import AclError, ConfigError
from ..runtime import codes

__all__ = ["MetaApi", "meta_api", "TensorDesc", "check_status"]

_i64p = ctypes.POINTER(ctypes.c_int64)
_u64p = ctypes.POINTER(ctypes.c_uint64)
ACL_FORMAT_ND = 2


class MetaApi:
    """The meta functions with argtypes/restype, bound on ``libnnopbase.so`` of the runtime."""

    def __init__(self, rt) -> None:
        self.rt = rt
        lib_dir = Path(rt.library_paths[0]).parent
        path = lib_dir / "libnnopbase.so"
        self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL) if path.exists() else rt.libs[0]
        L = self.lib
        self.aclCreateTensor = L.aclCreateTensor
        self.aclCreateTensor.argtypes = [_i64p, ctypes.c_uint64, ctypes.c_int, _i64p, ctypes.c_int64, ctypes.c_int,
                                         _i64p, ctypes.c_uint64, ctypes.c_void_p]
        self.aclCreateTensor.restype = ctypes.c_void_p
        self.aclDestroyTensor = L.aclDestroyTensor
        self.aclDestroyTensor.argtypes = [ctypes.c_void_p]
        self.aclDestroyTensor.restype = ctypes.c_int32
        self.aclSetAclOpExecutorRepeatable = L.aclSetAclOpExecutorRepeatable
        self.aclSetAclOpExecutorRepeatable.argtypes = [ctypes.c_void_p]
        self.aclSetAclOpExecutorRepeatable.restype = ctypes.c_int32
        self.aclDestroyAclOpExecutor = L.aclDestroyAclOpExecutor
        self.aclDestroyAclOpExecutor.argtypes = [ctypes.c_void_p]
        self.aclDestroyAclOpExecutor.restype = ctypes.c_int32
        self.aclGetViewShape = L.aclGetViewShape
        self.aclGetViewShape.argtypes = [ctypes.c_void_p, ctypes.POINTER(_i64p), _u64p]
        self.aclGetViewShape.restype = ctypes.c_int32
        self.aclGetDataType = L.aclGetDataType
        self.aclGetDataType.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        self.aclGetDataType.restype = ctypes.c_int32
        self.aclCreateIntArray = L.aclCreateIntArray
        self.aclCreateIntArray.argtypes = [_i64p, ctypes.c_uint64]
        self.aclCreateIntArray.restype = ctypes.c_void_p
        self.aclDestroyIntArray = L.aclDestroyIntArray
        self.aclDestroyIntArray.argtypes = [ctypes.c_void_p]
        self.aclDestroyIntArray.restype = ctypes.c_int32
        self.aclCreateTensorList = L.aclCreateTensorList
        self.aclCreateTensorList.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
        self.aclCreateTensorList.restype = ctypes.c_void_p
        self.aclDestroyTensorList = L.aclDestroyTensorList  # destroys its tensors too
        self.aclDestroyTensorList.argtypes = [ctypes.c_void_p]
        self.aclDestroyTensorList.restype = ctypes.c_int32


_APIS: dict[int, MetaApi] = {}


def meta_api(rt) -> MetaApi:
    """The (cached) :class:`MetaApi` of a runtime."""
    api = _APIS.get(id(rt))
    if api is None or api.rt is not rt:
        api = _APIS[id(rt)] = MetaApi(rt)
    return api


def check_status(rt, status: int, api: str) -> None:
    """Raise :class:`AclError` (code, ACLNN name, ``aclGetRecentErrMsg()``) for a non-zero status."""
    if status:
        raise AclError(status, codes.acl_name(status), api, rt.recent_error_message())


class TensorDesc:
    """An ``aclTensor`` over device memory: ``shape`` / ``strides`` (elements) / ``offset``
    (elements) of a view into a storage of ``storage`` elements at ``ptr``. Destroyed by
    :meth:`close` (or garbage collection)."""

    __slots__ = ("api", "handle", "shape", "dtype")

    def __init__(self, api: MetaApi, ptr: int, shape: Sequence[int], dtype, *, strides: Sequence[int] | None = None,
                 offset: int = 0, storage: Sequence[int] | None = None) -> None:
        self.api = api
        self.handle = 0
        self.dtype = _dtypes.get_dtype(dtype)
        self.shape = tuple(int(s) for s in shape)
        acl_dt = _dtypes.ACL_DATA_TYPE.get(self.dtype.name)
        if acl_dt is None:
            raise ConfigError(f"dtype {self.dtype.name} has no aclDataType", key="dtype")
        if strides is None:
            strides, acc = [], 1
            for s in reversed(self.shape):
                strides.insert(0, acc)
                acc *= max(s, 1)
        if storage is None:
            n = 1 + sum((s - 1) * st for s, st in zip(self.shape, strides)) if all(self.shape) else 0
            storage = (offset + n,)
        nd = len(self.shape)
        dims = (ctypes.c_int64 * max(nd, 1))(*self.shape)
        st = (ctypes.c_int64 * max(nd, 1))(*[int(x) for x in strides])
        sd = (ctypes.c_int64 * max(len(storage), 1))(*[int(x) for x in storage])
        h = api.aclCreateTensor(dims, nd, acl_dt, st, int(offset), ACL_FORMAT_ND, sd, len(storage), ptr or None)
        if not h:
            raise AclError(161002, codes.acl_name(161002), "aclCreateTensor", api.rt.recent_error_message())
        self.handle = h

    def close(self) -> None:
        """Destroy the aclTensor (``aclDestroyTensor``; again: nothing)."""
        if self.handle:
            self.api.aclDestroyTensor(self.handle)
            self.handle = 0

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass
