"""Backend selection, library loading, binding of the declaration tables and error mapping.

Backends (``HCOMM_KIT_BACKEND``):

* ``emu``: the bundled CPU emulator, one library exporting every symbol
  (:func:`hcomm_kit.build.emulator.get_library`, built on first use).
* ``cann``: ``$ASCEND_HOME_PATH/lib64/libascendcl.so`` plus ``libhcomm.so`` / ``libhccl.so``
  when present.
* ``auto``: ``cann`` when ``$ASCEND_HOME_PATH/lib64/libascendcl.so`` exists, else ``emu``.

All libraries are opened with ``RTLD_GLOBAL`` (kernels ``dlopen``-ed later resolve ``Hcomm*``
against them). :func:`load` is cached per process.

Example::

    rt = load()
    dev = ctypes.c_void_p()
    rt.call("aclInit", None)
    rt.call("aclrtSetDevice", 0)
    rt.call("aclrtMalloc", ctypes.byref(dev), 1024, 0)   # raises AclError on failure
    ret = rt.acl.aclrtFree(dev)                           # raw: returns the aclError
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
from pathlib import Path
from typing import Callable, Sequence

from ..base import envs, errors
from . import codes
from .acl import DECLS as ACL_DECLS, Decl
from .hccl import DECLS as HCCL_DECLS

__all__ = [
    "Runtime",
    "FunctionTable",
    "DECLS",
    "load",
    "loaded",
    "resolve_backend",
    "cann_library_candidates",
    "check_acl",
    "check_hccl",
]

#: Every declared function, ACL first.
DECLS: tuple[Decl, ...] = ACL_DECLS + HCCL_DECLS

_CANN_DEFAULT_HOMES = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")
_CANN_EXTRA_LIBS = ("libhcomm.so", "libhccl.so")


class FunctionTable:
    """A plain namespace of bound functions: ``table.aclrtMalloc(...)``.

    Attribute access is the only lookup on the hot path (no per-call dict lookups).
    """

    def __init__(self, label: str) -> None:
        self._label = label

    def __iter__(self):
        return (k for k in self.__dict__ if not k.startswith("_"))

    def __repr__(self) -> str:
        return f"<{self._label}: {sum(1 for _ in self)} functions>"


def _missing_function(name: str, backend: str, paths: Sequence[Path]) -> Callable:
    where = ", ".join(str(p) for p in paths) or "(no library)"

    def missing(*_args, **_kw):
        raise errors.BackendError(
            f"{name} is not exported by the {backend} backend ({where}). This CANN release does not "
            f"provide it; upgrade CANN, or run with HCOMM_KIT_BACKEND=emu."
        )

    missing.__name__ = name
    missing.__qualname__ = name
    return missing


class Runtime:
    """The loaded backend: raw and checked function tables plus error mapping.

    Attributes:
        backend: ``'emu'`` or ``'cann'``.
        library_paths: the libraries that were opened, in search order.
        acl: raw ACL functions (return the ``aclError`` int).
        hccl: raw HCCL/Hcomm functions (return the ``HcclResult`` int).
        checked: checked wrappers of every function (raise :class:`~hcomm_kit.base.errors.AclError`
            / :class:`~hcomm_kit.base.errors.HcclError`; ``const char*`` results come back as ``str``).
        missing: names of declared functions the libraries do not export.
    """

    def __init__(self, backend: str, libs: Sequence[ctypes.CDLL], library_paths: Sequence[Path]) -> None:
        self.backend = backend
        self.libs = tuple(libs)
        self.library_paths = tuple(Path(p) for p in library_paths)
        self.acl = FunctionTable(f"acl functions ({backend})")
        self.hccl = FunctionTable(f"hccl functions ({backend})")
        self.checked = FunctionTable(f"checked functions ({backend})")
        self._present: set[str] = set()
        missing: list[str] = []
        for decl in DECLS:
            fn = self._bind(decl)
            table = self.acl if decl.kind in ("acl", "value") else self.hccl
            if fn is None:
                missing.append(decl.name)
                stub = _missing_function(decl.name, backend, self.library_paths)
                setattr(table, decl.name, stub)
                setattr(self.checked, decl.name, stub)
                continue
            self._present.add(decl.name)
            setattr(table, decl.name, fn)
            setattr(self.checked, decl.name, self._make_checked(decl, fn))
        self.missing: tuple[str, ...] = tuple(missing)
        self._errmsg = getattr(self.acl, "aclGetRecentErrMsg")
        self._hccl_errstr = self.hccl.HcclGetErrorString if "HcclGetErrorString" in self._present else None

    # ---- binding ----------------------------------------------------------------------------
    def _bind(self, decl: Decl):
        for lib in self.libs:
            try:
                fn = lib[decl.name]  # a fresh function object per lookup: argtypes are ours alone
            except AttributeError:
                continue
            fn.restype = decl.restype
            fn.argtypes = decl.argtypes
            return fn
        return None

    def _make_checked(self, decl: Decl, fn):
        api = decl.name
        if decl.kind == "value" or decl.restype is ctypes.c_void_p:
            return fn  # the result is data (an error code to report, a handle), not a status
        if decl.restype is ctypes.c_char_p:
            def checked_str(*args):
                res = fn(*args)
                return res.decode("utf-8", "replace") if res is not None else None
            checked_str.__name__ = api
            return checked_str
        check = self.check_acl if decl.kind == "acl" else self.check_hccl
        ok = frozenset(decl.ok)
        if ok:
            def checked_ok(*args):
                ret = fn(*args)
                if ret and ret not in ok:
                    check(ret, api)
                return ret
            checked_ok.__name__ = api
            return checked_ok

        def checked(*args):
            ret = fn(*args)
            if ret:
                check(ret, api)
            return ret
        checked.__name__ = api
        return checked

    # ---- public helpers ---------------------------------------------------------------------
    def untyped(self, name: str):
        """A fresh function object for the declared function ``name`` with its restype and no
        argtypes, for a hot path that passes ctypes objects built once (``c_void_p`` for handles,
        pointers, ``byref``) or ints of 31 bits: ctypes then skips the per-argument ``from_param``
        conversion (about 0.5 us of a 5-argument call). None when the libraries lack it."""
        decl = next((d for d in DECLS if d.name == name), None)
        if decl is None or name not in self._present:
            return None
        for lib in self.libs:
            try:
                fn = lib[name]
            except AttributeError:
                continue
            fn.restype = decl.restype
            return fn
        return None

    def has(self, name: str) -> bool:
        """True when the loaded libraries export the declared function ``name``."""
        return name in self._present

    def call(self, name: str, *args):
        """Call a declared function by name and raise on a non-zero return code.

        Example:
            >>> rt.call("aclrtSetDevice", 0)
            0
        """
        return getattr(self.checked, name)(*args)

    def recent_error_message(self) -> str:
        """``aclGetRecentErrMsg()`` decoded (and thereby cleared); empty when there is none."""
        try:
            raw = self._errmsg()
        except errors.BackendError:
            return ""
        return raw.decode("utf-8", "replace").strip() if raw else ""

    def soc_name(self) -> str:
        """``aclrtGetSocName()`` decoded (empty when unknown)."""
        raw = self.acl.aclrtGetSocName()
        return raw.decode("utf-8", "replace") if raw else ""

    def check_acl(self, ret: int, api: str) -> None:
        """Raise the :class:`~hcomm_kit.base.errors.AclError` for ``ret`` (no-op when 0).

        The message is ``aclGetRecentErrMsg()`` or, when empty, the code's documented meaning.
        507018 raises :class:`~hcomm_kit.base.errors.KernelError`, 507017
        :class:`~hcomm_kit.base.errors.OpTimeoutError`.
        """
        if not ret:
            return
        raise _acl_error(ret, api, self.recent_error_message())

    def check_hccl(self, ret: int, api: str) -> None:
        """Raise the :class:`~hcomm_kit.base.errors.HcclError` for ``ret`` (no-op when 0).

        The name comes from the codes table (or ``HcclGetErrorString`` for unknown codes); the
        message is the emulator's / runtime's ``aclGetRecentErrMsg()`` text, else
        ``HcclGetErrorString``, else the documented meaning.
        """
        if not ret:
            return
        ret = int(ret)
        name = codes.HCCL_CODES.get(ret)
        lib_text = ""
        if self._hccl_errstr is not None:
            raw = self._hccl_errstr(ret)
            lib_text = raw.decode("utf-8", "replace").strip() if raw else ""
        if name is None:
            name = lib_text or codes.hccl_name(ret)
        message = self.recent_error_message()
        if not message:
            message = lib_text if lib_text and lib_text != name else codes.hccl_meaning(ret)
        raise _hccl_error_class(ret)(ret, name, api, message)

    def __repr__(self) -> str:
        libs = ", ".join(str(p) for p in self.library_paths)
        return f"<hcomm_kit Runtime backend={self.backend} libs=[{libs}] missing={len(self.missing)}>"


def _acl_error(ret: int, api: str, message: str) -> errors.AclError:
    ret = int(ret)
    if not message:
        message = codes.acl_meaning(ret)
    cls = errors.AclError
    if ret == codes.ACL_ERROR_RT_AICPU_EXCEPTION:
        cls = errors.KernelError
    elif ret == codes.ACL_ERROR_RT_AICPU_TIMEOUT:
        cls = errors.OpTimeoutError
    elif ret == codes.ACL_ERROR_RT_SUSPECT_REMOTE_ERROR:
        cls = errors.RemoteError
    return cls(ret, codes.acl_name(ret), api, message)


# ---- backend selection ----------------------------------------------------------------------
def cann_library_candidates() -> list[Path]:
    """Paths of ``libascendcl.so`` the ``cann`` backend tries, in order."""
    home = envs.ascend_home_path()
    homes = [Path(home)] if home is not None else [Path(h) for h in _CANN_DEFAULT_HOMES]
    return [h / "lib64" / "libascendcl.so" for h in homes]


def resolve_backend(backend: str | None = None) -> str:
    """Turn ``backend`` (or ``HCOMM_KIT_BACKEND``) into ``'emu'`` or ``'cann'``.

    ``auto`` picks ``cann`` only when ``$ASCEND_HOME_PATH/lib64/libascendcl.so`` exists.

    Raises:
        ConfigError: unknown backend name.
    """
    name = envs.backend() if backend is None else str(backend).strip().lower()
    if name not in ("emu", "cann", "auto"):
        raise errors.ConfigError(
            f"unknown backend {backend!r}: expected 'emu', 'cann' or 'auto' "
            f"(argument of hcomm_kit.runtime.load or HCOMM_KIT_BACKEND)",
            key="HCOMM_KIT_BACKEND",
        )
    if name == "auto":
        home = envs.ascend_home_path()
        if home is not None and (Path(home) / "lib64" / "libascendcl.so").is_file():
            return "cann"
        return "emu"
    return name


def _open(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path), mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)


def _load_emu() -> tuple[list[ctypes.CDLL], list[Path]]:
    from ..build import emulator as _emulator  # imported lazily: it may build the library

    path = Path(_emulator.get_library())
    try:
        return [_open(path)], [path]
    except OSError as exc:
        raise errors.BackendError(
            f"cannot load the emulator library {path}: {exc}. Remove the build cache "
            f"(HCOMM_KIT_CACHE_DIR, default ~/.cache/hcomm_kit) to force a rebuild."
        ) from exc


def _find_cann() -> Path:
    tried = cann_library_candidates()
    found = next((p for p in tried if p.is_file()), None)
    if found is None:
        listed = ", ".join(str(p) for p in tried)
        raise errors.BackendError(
            f"HCOMM_KIT_BACKEND=cann but libascendcl.so was not found (tried: {listed}). "
            f"Set ASCEND_HOME_PATH to the CANN install root (e.g. `source "
            f"/usr/local/Ascend/ascend-toolkit/set_env.sh`), or use HCOMM_KIT_BACKEND=emu."
        )
    return found


def _load_cann(found: Path) -> tuple[list[ctypes.CDLL], list[Path]]:
    try:
        libs, paths = [_open(found)], [found]
    except OSError as exc:
        raise errors.BackendError(
            f"cannot load {found}: {exc}. Its dependencies must be on LD_LIBRARY_PATH "
            f"(`source <ASCEND_HOME_PATH>/../set_env.sh`), or use HCOMM_KIT_BACKEND=emu."
        ) from exc
    for extra in _CANN_EXTRA_LIBS:
        p = found.parent / extra
        if p.is_file():
            try:
                libs.append(_open(p))
                paths.append(p)
            except OSError:
                continue  # its functions are reported missing (BackendError when called)
    return libs, paths


_LOCK = threading.Lock()
_CACHE: dict[str, Runtime] = {}


def load(backend: str | None = None) -> Runtime:
    """Load (once per process) and return the runtime of ``backend`` (default ``HCOMM_KIT_BACKEND``).

    Args:
        backend: ``'emu'``, ``'cann'``, ``'auto'`` or None (read ``HCOMM_KIT_BACKEND``).

    Returns:
        The cached :class:`Runtime`.

    Raises:
        BackendError: the backend's library is missing or cannot be loaded, or another backend
            is already loaded in this process.
        ConfigError: unknown backend name.
        BuildError: the emulator library could not be built.
    """
    name = resolve_backend(backend)
    rt = _CACHE.get(name)
    if rt is not None:
        return rt
    with _LOCK:
        rt = _CACHE.get(name)
        if rt is not None:
            return rt
        found = _find_cann() if name == "cann" else None  # report a missing CANN before anything else
        other = next(iter(_CACHE), None)
        if other is not None:
            raise errors.BackendError(
                f"backend {other!r} is already loaded in this process; cannot also load {name!r} "
                f"(their libraries export the same symbols). Use one HCOMM_KIT_BACKEND per process."
            )
        libs, paths = _load_emu() if found is None else _load_cann(found)
        rt = Runtime(name, libs, paths)
        _CACHE[name] = rt
        if rt.has("HcommKitProcessExiting"):
            # Registered before any communicator's close-all, so it runs after them (atexit: last
            # in, first out). An interpreter ended by KeyboardInterrupt kills itself with SIGINT
            # after this, skipping the emulator's C exit handler: unlink its segments here.
            atexit.register(_process_exiting, rt)
        return rt


def _process_exiting(rt: Runtime) -> None:
    """At exit: the emulator unlinks the names of this process's shared-memory segments."""
    try:
        rt.checked.HcommKitProcessExiting()
    except Exception:  # noqa: BLE001 - exiting: nothing to report to
        pass


def loaded() -> Runtime | None:
    """The runtime loaded in this process, or None."""
    return next(iter(_CACHE.values()), None)


def check_acl(ret: int, api: str) -> None:
    """Raise :class:`~hcomm_kit.base.errors.AclError` for a non-zero ``aclError`` (message from the loaded runtime)."""
    if not ret:
        return
    rt = loaded()
    if rt is not None:
        rt.check_acl(ret, api)
    raise _acl_error(ret, api, "")


def check_hccl(ret: int, api: str) -> None:
    """Raise :class:`~hcomm_kit.base.errors.HcclError` for a non-zero ``HcclResult`` (message from the loaded runtime)."""
    if not ret:
        return
    rt = loaded()
    if rt is not None:
        rt.check_hccl(ret, api)
    ret = int(ret)
    raise _hccl_error_class(ret)(ret, codes.hccl_name(ret), api, codes.hccl_meaning(ret))


def _hccl_error_class(ret: int) -> type:
    """The exception of a failed HCCL call: :class:`~hcomm_kit.base.errors.RemoteError` for
    HCCL_E_REMOTE (another rank failed), else :class:`~hcomm_kit.base.errors.HcclError`."""
    return errors.RemoteError if ret == codes.HCCL_E_REMOTE else errors.HcclError


def _reset_for_tests() -> None:
    """Forget cached runtimes (the libraries stay mapped). Tests only."""
    with _LOCK:
        _CACHE.clear()
