"""Where a collective call comes from: the user's ``file:line``, for the collective-call check.

The emulator's call check (:meth:`hcomm_kit.ops.custom_op.CustomOp.check_call`) matches every rank's k-th
collective call and compares their descriptions. Each call also carries its call site: the first
frame outside hcomm-kit (and outside torch and the standard library, so that ``torch.distributed``
calls and DDP's hooks name the user's line, e.g. ``loss.backward()``). Ranks may make the same call
from different lines (``if rank == 0: comm.barrier() else: comm.barrier()``): that alone is no
error. A rank that skips a call posts the next call's site where the others post the skipped one's;
its calls then differ from the others' (at its next different call, a barrier, or ``close()``),
and every rank fails with a report naming both sites.

:func:`same_call` labels calls (reports then name the label instead of the lines);
``HCOMM_KIT_CALL_CHECK=loose`` posts no sites.

Cost: one ``sys._getframe`` and a dict lookup per frame (the verdict "internal or not" is cached per
code object, the text per code object and instruction): about 0.3 µs per call.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import sysconfig
from collections.abc import Iterator
from types import CodeType

from ..base.resources import package_dir

__all__ = ["SEPARATOR", "site", "same_call", "label"]

#: Between a call's description and its call site in the text posted to the emulator (diag.cc
#: ``sig_split`` splits at the last one; a text without it has no site and matches any site).
SEPARATOR = " @ "

_PKG = str(package_dir()) + os.sep
_STDLIB = tuple({os.path.abspath(p) + os.sep for p in (sysconfig.get_paths().get("stdlib"),
                                                       sysconfig.get_paths().get("platstdlib")) if p})
_MAX_TEXT = 96  # the posted text has room for ~240 characters (comm.h CallSig.text)

# Keyed by id(code) (hashing a code object hashes its bytecode and constants: slow); the cached
# code objects are kept alive (so their ids are not reused) and hits are checked with `is`.
_INTERNAL: set[int] = set()  # ids of code objects of hcomm-kit, torch, the standard library
_KEEP: list[CodeType] = []    # ... and those code objects
# (id(code), instruction offset) -> (code, "file:line").
_SITES: dict[tuple[int, int], tuple[CodeType, str]] = {}
_MAX_CACHED = 8192
# None: use the caller's site; "": post no site (matches any); else this label instead of the site.
_OVERRIDE: contextvars.ContextVar[str | None] = contextvars.ContextVar("hcomm_kit_same_call", default=None)


def _torch_dir() -> str | None:
    mod = sys.modules.get("torch")
    f = getattr(mod, "__file__", None) if mod is not None else None
    return os.path.dirname(os.path.abspath(f)) + os.sep if f else None


def _classify(code: CodeType) -> str | None:
    """None for a frame of hcomm-kit, torch, the standard library or frozen bootstrap code; else the
    display name of the code's file (relative to the working directory when inside it)."""
    fn = code.co_filename
    if fn.startswith("<frozen"):
        return None
    path = os.path.abspath(fn) if not fn.startswith("<") else fn
    if path.startswith(_PKG):
        return None
    torch_dir = _torch_dir()
    if torch_dir is not None and path.startswith(torch_dir):
        return None
    if path.startswith(_STDLIB) and "-packages" + os.sep not in path:
        return None
    if not fn.startswith("<"):
        rel = os.path.relpath(path)
        path = rel if not rel.startswith("..") else path
    return path if len(path) <= _MAX_TEXT else "..." + path[-(_MAX_TEXT - 3):]


def site(depth: int = 1) -> str:
    """The call site of the collective being made, for the call check.

    Args:
        depth: frames to skip first (1: the caller of this function's caller).

    Returns:
        ``"file:line"`` of the first frame outside hcomm-kit, torch and the standard library; the
        label of an enclosing :func:`same_call` instead; ``""`` (matches any site) under
        ``same_call()`` without a label or when no such frame exists (e.g. a thread of torch's).
    """
    over = _OVERRIDE.get()
    if over is not None:
        return over
    f = sys._getframe(depth + 1)
    internal, sites = _INTERNAL, _SITES
    while f is not None:
        code = f.f_code
        if id(code) in internal:
            f = f.f_back
            continue
        key = (id(code), f.f_lasti)  # the instruction: f_lineno costs more (line table decoding)
        hit = sites.get(key)
        if hit is not None and hit[0] is code:
            return hit[1]
        name = _classify(code)  # first time at this instruction
        if name is None:
            if len(_KEEP) < _MAX_CACHED:
                _KEEP.append(code)
                internal.add(id(code))
            f = f.f_back
            continue
        text = f"{name}:{f.f_lineno}"
        if len(sites) < _MAX_CACHED:
            sites[key] = (code, text)
        return text
    return ""


def label() -> str | None:
    """The site override of an enclosing :func:`same_call` (``""``: no site), or None."""
    return _OVERRIDE.get()


@contextlib.contextmanager
def same_call(name: str | None = None) -> Iterator[None]:
    """Collective calls made inside carry a label (or no site) instead of their line.

    A difference in call site alone is no error, so ranks may reach one collective from different
    lines without it; the label only changes what reports name (``same_call('init')`` instead of the
    lines)::

        with hcomm_kit.same_call():
            if comm.rank == 0:
                y = comm.all_reduce(x)
            else:
                y = comm.all_reduce(x)

    Args:
        name: post this label instead of the call site; None: post no site (the arguments are
            compared either way).

    The setting is per thread and per asyncio task (a context variable); blocks nest.
    """
    if name is not None and (not isinstance(name, str) or not name or SEPARATOR in name or len(name) > 80):
        from ..base.errors import ConfigError

        raise ConfigError(f"same_call: name={name!r} must be a non-empty string of at most 80 characters "
                          f"without {SEPARATOR!r}, or None", key="name")
    token = _OVERRIDE.set("" if name is None else f"same_call({name!r})")
    try:
        yield
    finally:
        _OVERRIDE.reset(token)
