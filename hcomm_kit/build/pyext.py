"""The compiled helper of the Python hot path (``hcomm_kit/emu/pyext/fastcall.cc``).

A CPython extension module, ``_hk_fastcall``, built on first use with the host C++ compiler
against this interpreter's headers and kept in the build cache (key: source, interpreter ABI,
compiler). :func:`fastcall` returns the module, or None where it cannot be built (no compiler, no
``Python.h``): the pure-Python path then does the same work (``hcomm_kit.ops.call_plans``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shlex
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType

from ..base.errors import BuildError
from ..base.resources import emu_dir
from . import cache

__all__ = ["fastcall", "why_no_fastcall", "headers"]

MODULE = "_hk_fastcall"
FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden")

_lock = threading.Lock()
_state: dict[str, object] = {}  # "module": the loaded module or None; "why": why there is none


def source() -> Path:
    """The extension's C++ source inside the package."""
    return emu_dir() / "pyext" / "fastcall.cc"


def headers() -> Path | None:
    """This interpreter's include directory when it holds ``Python.h`` (else None: not buildable)."""
    inc = sysconfig.get_paths().get("include")
    return Path(inc) if inc and (Path(inc) / "Python.h").is_file() else None


def _build(include: Path) -> Path:
    cxx = cache.default_cxx()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    parts = [*FLAGS, sys.version, sysconfig.get_config_var("SOABI") or "", str(include),
             cache.compiler_identity(cxx)]
    key = cache.hash_key([source()], parts)

    def build(tmp: Path) -> None:
        cache.run_compiler([*shlex.split(cxx), *FLAGS, f"-I{include}", str(source()), "-o", str(tmp)],
                           sources=[source()])

    return cache.cached_file(MODULE, suffix, key, build, subdir="pyext")


def fastcall() -> ModuleType | None:
    """The ``_hk_fastcall`` module (built once per cache key), or None when it cannot be built
    here; :func:`why_no_fastcall` then says why."""
    with _lock:
        if "module" in _state:
            return _state["module"]  # type: ignore[return-value]
        module: ModuleType | None = None
        include = headers()
        if include is None:
            _state["why"] = (f"no Python.h under {sysconfig.get_paths().get('include')!r} (install this "
                             f"interpreter's development headers)")
        else:
            try:
                path = _build(include)
                spec = importlib.util.spec_from_file_location(f"hcomm_kit.{MODULE}", path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except (BuildError, ImportError, OSError) as exc:
                _state["why"] = f"{type(exc).__name__}: {exc}"
                module = None
        _state["module"] = module
        return module


def why_no_fastcall() -> str | None:
    """Why :func:`fastcall` gave None (None when it gave the module or was not called yet)."""
    return _state.get("why")  # type: ignore[return-value]
