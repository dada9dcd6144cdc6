"""ctypes FFI of the ACL runtime and HCCL/Hcomm C API, for the emulator and for real CANN.

Public API::

    rt = hcomm_kit.runtime.load()        # Runtime (cached per process); backend from HCOMM_KIT_BACKEND
    rt.backend, rt.library_paths
    rt.acl.aclrtMalloc(...)              # raw call -> aclError int
    rt.hccl.HcclGetRankId(...)           # raw call -> HcclResult int
    rt.call("aclrtMalloc", ...)          # checked call: raises AclError / HcclError
    rt.checked.aclrtMalloc(...)          # same, attribute form (fastest)
    rt.has("HcclRankGraphGetLinks")      # is the symbol exported?

Submodules: :mod:`.codes` (error-code table), :mod:`.enums`, :mod:`.structs`,
:mod:`.acl` / :mod:`.hccl` (declaration tables), :mod:`.library` (loading).
"""

from . import codes, enums, structs
from .acl import Decl, aclrtCallback, aclrtHostFunc
from .library import (
    DECLS,
    FunctionTable,
    Runtime,
    cann_library_candidates,
    check_acl,
    check_hccl,
    load,
    loaded,
    resolve_backend,
)

__all__ = [
    "load",
    "loaded",
    "resolve_backend",
    "cann_library_candidates",
    "check_acl",
    "check_hccl",
    "Runtime",
    "FunctionTable",
    "Decl",
    "DECLS",
    "aclrtCallback",
    "aclrtHostFunc",
    "codes",
    "enums",
    "structs",
]
