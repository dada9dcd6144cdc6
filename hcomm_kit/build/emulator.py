"""Locate and build the bundled CPU emulator library (``libhcomm_emu.so``).

The library is compiled on first use from every ``hcomm_kit/emu/src/**/*.cc`` (one folder per
library and concern: ``base/``, ``acl/``, ``hccl/``, ``hcomm/``, ``diag/``) into the build
cache (``<cache>/emu-<key>/``, key over sources, headers, flags, sanitizer and compiler
identity). Beside it are symlinks with the CANN library names (``libascendcl.so`` ...), so
CANN-style Makefiles (``-lascendcl -lhcomm -lc_sec``) link unchanged.

Example:
    >>> import hcomm_kit
    >>> lib = hcomm_kit.get_library()          # builds once per machine, then cached
    >>> flags = f"{cflags()} {libs()}"         # like pkg-config --cflags --libs
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from ..base import envs
from . import cache
from ..base.errors import BuildError, ConfigError
from ..base.resources import aicpu_kernels_dir, emu_dir

__all__ = [
    "LIB_NAME",
    "BUILTIN_DIR",
    "COMPAT_NAMES",
    "emu_root",
    "get_include",
    "get_library",
    "library_dir",
    "validate",
    "cflags",
    "libs",
    "compile_flags",
    "compile_units",
    "Unit",
]

LIB_NAME = "libhcomm_emu.so"
#: Directory beside the library holding the built-in operators (``<stem>.so`` + ``<stem>.json``),
#: found by the library itself (dladdr) when a program calls HcclAllReduce and friends.
BUILTIN_DIR = "builtin_kernels"
#: The timing model's parameters beside the library (from model/params/*.toml, read by model/params.cc).
MODEL_PARAMS = "model_params.json"
COMPAT_NAMES = ("libascendcl.so", "libacl_rt.so", "libhccl.so", "libhcomm.so", "libc_sec.so",
                "libnnopbase.so", "libopapi.so")  # the last two: the aclnn meta API (aclnn/acl_meta.h)
BASE_FLAGS = (
    "-std=c++17", "-O2", "-g1", "-fPIC", "-fvisibility=hidden", "-DFUNC_VISIBILITY",
    "-Wall", "-Wextra", "-Werror", "-pthread",
)
LINK_LIBS = ("-ldl", "-lrt")
SANITIZE_FLAGS: dict[str, tuple[str, ...]] = {
    "": (),
    "address": ("-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-Og"),
    "thread": ("-fsanitize=thread", "-O1"),
}
# -g1: line tables (backtraces, gdb and sanitizer reports name file:line) without the types and
# locals of -g, a third less compile time for every variant, which a fresh machine builds first
# (the kernels, whose lines the emulator's reports show, keep -g). -Og for ASan+UBSan: gcc's -O1
# with UBSan's checks took 100 CPU-s for the library against 73 at -Og.

_EMU_ROOT = emu_dir()
_built: dict[tuple[Path, Path, str, str], Path] = {}  # (cache root, emu root, sanitize, key) -> lib, per process


def emu_root() -> Path:
    """The emulator tree (``include/`` and ``src/``) shipped inside the package."""
    return _EMU_ROOT


def get_include() -> Path:
    """Directory of the emulator's public C headers (real CANN include paths: ``acl/acl.h`` ...)."""
    return _EMU_ROOT / "include"


def _sanitize_mode(sanitize: str | None) -> str:
    mode = envs.sanitize() if sanitize is None else sanitize
    if mode not in SANITIZE_FLAGS:
        raise ConfigError(
            f"unknown sanitizer {mode!r}; accepted: '' (none), 'address', 'thread'", key="sanitize"
        )
    return mode


def _has_builtins(root: Path) -> bool:
    """The tree implements HCCL's collective API, so the library ships the built-in operators."""
    return (root / "src" / "hccl" / "collectives.cc").is_file()


def compile_flags(sanitize: str | None = None, *, root: Path | None = None) -> list[str]:
    """Flags used for every emulator translation unit (sanitizer flags, then the emulator's own
    include directories last). ``aicpu_kernels/`` is on the include path for the built-ins'
    generated ``<op>/inc/<op>_param.h`` (the HCCL collective API launches them). ``src/`` is on
    the include path after ``include/``, so internal headers read ``"base/json.h"``; the public
    ``include/acl/``, ``include/hccl/`` ... are found first, so an internal header must not take
    the name of a public one (``src/hccl/hccl.h`` would never be read)."""
    from . import ucx

    root = root or _EMU_ROOT
    kernels = [f"-I{aicpu_kernels_dir()}"] if _has_builtins(root) else []
    return [*BASE_FLAGS, *kernels, *ucx.compile_flags(), *SANITIZE_FLAGS[_sanitize_mode(sanitize)],
            f"-I{root / 'include'}", f"-I{root / 'src'}"]


def _inputs(root: Path) -> tuple[list[Path], list[Path]]:
    """Sources (``src/**/*.cc``) and headers (every other file below ``include/`` and ``src/`` but
    the Markdown notes: editing those rebuilds nothing)."""
    sources = sorted((root / "src").rglob("*.cc"))
    headers = sorted(p for p in (root / "include").rglob("*") if p.is_file() and p.suffix != ".md")
    headers += sorted(p for p in (root / "src").rglob("*") if p.is_file() and p.suffix not in (".cc", ".md"))
    return sources, headers


def object_name(src: Path, root: Path) -> str:
    """Object file of a source, unique across the source folders: ``src/acl/stream.cc`` ->
    ``acl-stream.o``."""
    rel = src.relative_to(root / "src").with_suffix("")
    return "-".join(rel.parts) + ".o"


_OWN_UNIT = re.compile(r"^using namespace (?!emu;)", re.M)


class Unit(NamedTuple):
    """A translation unit of :func:`compile_units`: the file given to the compiler, its object's
    name and the sources it compiles."""

    source: Path
    obj: str
    members: tuple[Path, ...]


def compile_units(sources: list[Path], root: Path, objdir: Path) -> list[Unit]:
    """The translation units of a build, largest first: one per source folder
    (``objdir/unity-acl.cc`` including ``src/acl/*.cc`` in name order, object ``unity-acl.o``),
    about half the compile time of one unit per source, which a fresh machine pays for every
    variant (plain, sanitizers, fuzzing). Diagnostics still name the source file and line.

    A folder's sources therefore share one unit: file-local names (anonymous namespaces, statics)
    must differ within a folder. A source with a using-directive other than ``using namespace
    emu;`` (``hccl/collectives.cc``: ``emu::coll``) is its own unit, so that its names never
    reach another source's lookups."""
    folders: dict[Path, list[Path]] = {}
    units: list[Unit] = []
    for src in sources:
        if _OWN_UNIT.search(src.read_text(errors="replace")):
            units.append(Unit(src, object_name(src, root), (src,)))
        else:
            folders.setdefault(src.parent, []).append(src)
    for folder, members in folders.items():
        if len(members) == 1:
            units.append(Unit(members[0], object_name(members[0], root), (members[0],)))
            continue
        name = "unity-" + "-".join(folder.relative_to(root / "src").parts)
        unit = objdir / f"{name}.cc"
        unit.write_text("".join(f'#include "{m}"\n' for m in sorted(members)))
        units.append(Unit(unit, f"{name}.o", tuple(sorted(members))))
    # the largest first: on few cores the last unit to start is then never the longest
    units.sort(key=lambda u: -sum(m.stat().st_size for m in u.members))
    return units


def validate(directory: Path) -> bool:
    """True when ``directory`` holds a ``libhcomm_emu.so`` that starts with the ELF magic and every
    one of its :data:`COMPAT_NAMES` (an entry that lacks one is rebuilt, never used half-made)."""
    lib = Path(directory) / LIB_NAME
    try:
        with open(lib, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                return False
    except OSError:
        return False
    return all((Path(directory) / name).exists() for name in (*COMPAT_NAMES, MODEL_PARAMS))


def _build(out: Path, root: Path, sources: list[Path], cxx: str, flags: list[str], verbose: bool,
           builtins: bool) -> None:
    from ..base import progress

    objdir = out / "obj"
    objdir.mkdir()
    cxx_argv = shlex.split(cxx)
    bar = progress.Progress("building the emulator (once per machine)", total=len(sources) + 1)
    pch = _precompile_std_headers(objdir, root, cxx, cxx_argv, flags, verbose)

    units = compile_units(sources, root, objdir)

    def compile_one(unit: Unit) -> Path:
        obj = objdir / unit.obj
        cache.run_compiler([*cxx_argv, *flags, *pch, "-c", str(unit.source), "-o", str(obj)], sources=unit.members,
                           verbose=verbose)
        bar.advance(n=len(unit.members), detail=Path(unit.obj).stem)
        return obj

    jobs = max(1, min(len(units), os.cpu_count() or 1))
    with bar, ThreadPoolExecutor(max_workers=jobs) as pool:
        objects = list(pool.map(compile_one, units))  # re-raises the first CompileError in unit order
        lib = out / LIB_NAME
        link = [*cxx_argv, *flags, "-shared", *map(str, objects), "-o", str(lib),
                f"-Wl,-soname,{LIB_NAME}", *LINK_LIBS]
        cache.run_compiler(link, sources=sources, verbose=verbose)
        bar.advance(detail="link")
    shutil.rmtree(objdir)
    from ..base import model_params

    (out / MODEL_PARAMS).write_text(model_params.to_json())  # the timing model's parameters (C reads)
    for name in COMPAT_NAMES:
        os.symlink(LIB_NAME, out / name)
    if builtins:
        from .builtins import OP_API_DIR, build_builtin_op_api, cached_builtins, link_tree

        link_tree(cached_builtins(lib_dir=out, include=root / "include", cxx=cxx, verbose=verbose), out / BUILTIN_DIR)
        build_builtin_op_api(out / OP_API_DIR, lib_dir=out, include=root / "include", cxx=cxx, verbose=verbose)


def _precompile_std_headers(objdir: Path, root: Path, cxx: str, cxx_argv: list[str], flags: list[str],
                            verbose: bool) -> list[str]:
    """With g++, ``src/base/std_headers.h`` precompiled into objdir with the build's own flags; the
    flags that make every unit read it (``-include``: g++ takes the ``.gch`` beside the header).
    Nothing (the units parse the headers themselves) with another compiler, or when it fails."""
    header = root / "src" / "base" / "std_headers.h"
    if not header.is_file() or "clang" in cache.compiler_identity(cxx).lower():
        return []
    copy = objdir / header.name
    shutil.copyfile(header, copy)
    try:
        cache.run_compiler([*cxx_argv, *flags, "-x", "c++-header", str(copy), "-o", f"{copy}.gch"], sources=[header],
                           verbose=verbose)
    except BuildError:
        return []
    return ["-include", str(copy)]


def get_library(sanitize: str | None = None, *, verbose: bool = False, root: Path | None = None) -> Path:
    """Return the path of ``libhcomm_emu.so``, compiling it into the cache on first use.

    Args:
        sanitize: ``''``, ``'address'`` or ``'thread'``; None = ``$HCOMM_KIT_SANITIZE``.
        verbose: echo compiler commands and output.
        root: emulator tree to build (default: the packaged one; tests pass a copy).

    Raises:
        BuildError: no sources, or no compiler. CompileError: the sources do not compile.
        ConfigError: unknown sanitizer.
    """
    root = Path(root) if root is not None else _EMU_ROOT
    mode = _sanitize_mode(sanitize)
    sources, headers = _inputs(root)
    if not sources:
        raise BuildError(f"no emulator sources (**/*.cc) in {root / 'src'}; the package install is incomplete")
    from . import ucx

    cxx = cache.default_cxx()
    flags = compile_flags(mode, root=root)
    builtins = _has_builtins(root)
    kernels: list[Path] = []
    kflags: tuple[str, ...] = ()
    if builtins:
        from .builtins import BUILTIN_FLAGS, LINK_FLAGS as BUILTIN_LINK_FLAGS, builtin_inputs

        kernels = builtin_inputs()
        kflags = ("builtins", *BUILTIN_FLAGS, *BUILTIN_LINK_FLAGS)
        kdir = aicpu_kernels_dir()
    # Flags are hashed without the absolute -I paths: headers are hashed by content instead.
    key = cache.hash_key(
        [*sources, *headers, *kernels],
        ["emu", mode, *COMPAT_NAMES, *BASE_FLAGS, *SANITIZE_FLAGS[mode], *LINK_LIBS, *kflags, *ucx.key_parts(),
         cache.compiler_identity(cxx), *(f"{p.relative_to(root).as_posix()}" for p in [*sources, *headers]),
         *(f"aicpu_kernels/{p.relative_to(kdir).as_posix()}" for p in kernels)],
    )
    memo = (cache.cache_root(), root, mode, key)
    if memo in _built and _built[memo].is_file():
        return _built[memo]
    name = "emu" if not mode else f"emu-{mode}"
    directory = cache.cached_dir(name, key, lambda out: _build(out, root, sources, cxx, flags, verbose, builtins),
                                 validate=validate)
    _built[memo] = directory / LIB_NAME
    return _built[memo]


def library_dir(sanitize: str | None = None) -> Path:
    """Directory holding ``libhcomm_emu.so`` and its CANN-named symlinks (built if needed)."""
    return get_library(sanitize).parent


def cflags() -> str:
    """Compile flags for code using the emulator headers, like ``pkg-config --cflags``."""
    return f"-I{get_include()}"


def libs(sanitize: str | None = None) -> str:
    """Link flags for the emulator library, like ``pkg-config --libs`` (builds it if needed)."""
    d = library_dir(sanitize)
    return f"-L{d} -lhcomm_emu -Wl,-rpath,{d}"
