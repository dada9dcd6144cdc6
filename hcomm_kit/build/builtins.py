"""Compile the built-in operators of ``aicpu_kernels/`` into the emulator library's directory.

The emulator implements HCCL's collective C API (``HcclAllReduce`` ...) by launching these
operators, so C programs must find them without Python at run time: they are compiled together
with ``libhcomm_emu.so`` (one cache entry, one content key covering both) into
``<library dir>/builtin_kernels/<stem>.so`` beside ``<stem>.json`` (cpuKernelMode 1), where the
library looks them up from its own path (``dladdr``). The kernels do not depend on the library's
variant (plain, ASan+UBSan, TSan: they are compiled without sanitizers and link against the
library's soname), so they are compiled once into their own cache entry (:func:`cached_builtins`) and
linked into each variant's directory. The Python collectives keep building the
same sources through :func:`hcomm_kit.build.opbuild.build_op`; each operator's ``op.toml`` stays
the single source of truth of its kernel name, file names and ``OpParam`` layout (the emulator
includes the generated ``inc/<name>_param.h``).

The built-ins also get CANN's two-phase aclnn interface (:data:`BUILTIN_ACLNN`: ``aclnnHkAllReduce``
...): the host library of ``aicpu_kernels/_op_api/`` is compiled beside them into
``<library dir>/op_api/{include,lib,obj}`` (:func:`build_builtin_op_api`), the layout of a CANN
vendor package (``lib/libcust_opapi.so``), and installed into the vendor of a CANN-shaped tree.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..base.errors import BuildError
from ..base.resources import aicpu_kernels_dir
from . import cache

__all__ = ["BUILTIN_FLAGS", "LINK_FLAGS", "BUILTIN_ACLNN", "OP_API_DIR", "builtin_dirs", "builtin_inputs",
           "build_builtins", "cached_builtins", "link_tree", "op_api_sources", "build_builtin_op_api"]

BUILTIN_FLAGS = ("-std=c++17", "-O2", "-g", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror")
# --no-undefined: a device-API call the emulator lacks fails here, not at load time.
# -Bsymbolic: the kernel binds its own symbols to itself even where the emulator cannot load it
# with RTLD_DEEPBIND (sanitizer builds), as it would on the device.
LINK_FLAGS = ("-Wl,--no-undefined", "-Wl,-Bsymbolic")
#: The built-in collectives' aclnn operator names (``aclnn<Name>GetWorkspaceSize`` / ``aclnn<Name>``),
#: declared in ``aicpu_kernels/_op_api/include/aclnn_hk_<snake>.h``; each runs as the HCCL API named
#: (HkGather as HcclAlltoAllV with every block toward the root: CANN has no HcclGather).
BUILTIN_ACLNN = {
    "HkAllReduce": "HcclAllReduce", "HkAllGather": "HcclAllGather", "HkReduceScatter": "HcclReduceScatter",
    "HkBroadcast": "HcclBroadcast", "HkReduce": "HcclReduce", "HkScatter": "HcclScatter",
    "HkAllToAll": "HcclAlltoAll", "HkSend": "HcclSend", "HkRecv": "HcclRecv",
    "HkAllGatherV": "HcclAllGatherV", "HkReduceScatterV": "HcclReduceScatterV", "HkAllToAllV": "HcclAlltoAllV",
    "HkAllToAllVC": "HcclAlltoAllVC", "HkGather": "HcclAlltoAllV", "HkBatchSendRecv": "HcclBatchSendRecv",
    "HkBarrier": "HcclBarrier",
}
#: Beside the emulator library: the built-ins' aclnn package (``include/``, ``lib/libcust_opapi.so``, ``obj/``).
OP_API_DIR = "op_api"


def builtin_dirs() -> list[Path]:
    """The operator directories of ``aicpu_kernels/`` (those holding an ``op.toml``), sorted."""
    root = aicpu_kernels_dir()
    return sorted(p for p in root.iterdir() if (p / "op.toml").is_file())


def builtin_inputs() -> list[Path]:
    """Every file the built-ins are made from (sources, headers, op.toml, op-info JSON), sorted.

    Hidden files (``.hcomm-kit-answers.json`` of ``hcomm-kit new``, ``.dev/``) are not inputs: the
    wheel leaves them out, and an installed package must find the checkout's build in the cache.
    """
    root = aicpu_kernels_dir()
    files = [p for p in root.rglob("*") if p.is_file() and "tests" not in (parts := p.relative_to(root).parts)
             and not any(part.startswith(".") for part in parts) and p.suffix in (".cc", ".cpp", ".h", ".toml", ".json")]
    return sorted(files)


def build_builtins(out: Path, *, lib_dir: Path, include: Path, cxx: str, verbose: bool = False) -> list[Path]:
    """Compile every built-in operator into ``out`` (``<stem>.so`` + ``<stem>.json``).

    Args:
        out: the output directory (created).
        lib_dir: directory of the freshly built ``libhcomm_emu.so`` the kernels link against.
        include: the emulator's public header directory.
        cxx: the C++ compiler command.
        verbose: echo the compiler commands.

    Returns:
        The kernel shared objects written.

    Raises:
        CompileError: a kernel does not compile (command, output, source excerpt).
        BuildError: an operator directory is inconsistent (op.toml against its op-info JSON).
    """
    from .opspec import check_op_info, load_opspec

    out.mkdir(parents=True, exist_ok=True)
    specs = [load_opspec(d) for d in builtin_dirs()]
    if not specs:
        raise BuildError(f"no built-in operators (op.toml) in {aicpu_kernels_dir()}; the package install is incomplete")
    argv = shlex.split(cxx)

    def build_one(spec) -> Path:
        kdir = spec.path("op_kernel_aicpu")
        sources = sorted([*kdir.glob("*.cc"), *kdir.glob("*.cpp")])
        info = kdir / spec.json_name
        check_op_info(info, spec, spec.so)
        so = out / spec.so
        headers = sorted(spec.path("inc").rglob("*.h"))
        cmd = [*argv, *BUILTIN_FLAGS, f"-I{spec.path('inc')}", f"-I{kdir}", f"-I{include}", *map(str, sources),
               "-o", str(so), f"-L{lib_dir}", "-lhcomm_emu", *LINK_FLAGS]
        cache.run_compiler(cmd, sources=[*sources, *headers], verbose=verbose)
        doc = json.loads(info.read_text())
        (out / spec.json_name).write_text(json.dumps(doc, indent=4) + "\n")
        return so

    jobs = max(1, min(len(specs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        built = list(pool.map(build_one, specs))  # re-raises the first failure in operator order
    if verbose:
        print(f"hcomm-kit: built {len(built)} built-in operators into {out}")
    return built


def cached_builtins(*, lib_dir: Path, include: Path, cxx: str, verbose: bool = False) -> Path:
    """The built-ins compiled by :func:`build_builtins` into a cache entry of their own
    (``<cache>/builtins-<key>/``, key over the kernels' inputs, the emulator's public headers, the
    flags and the compiler), shared by every variant of the library; built on first use against
    ``lib_dir``'s library (any variant: the kernels link against its soname)."""
    headers = sorted(p for p in Path(include).rglob("*") if p.is_file())
    inputs = builtin_inputs()
    kdir = aicpu_kernels_dir()
    key = cache.hash_key([*inputs, *headers],
                         ["builtins", *BUILTIN_FLAGS, *LINK_FLAGS, cache.compiler_identity(cxx),
                          *(f"aicpu_kernels/{p.relative_to(kdir).as_posix()}" for p in inputs),
                          *(f"include/{p.relative_to(include).as_posix()}" for p in headers)])
    return cache.cached_dir("builtins", key,
                            lambda out: build_builtins(out, lib_dir=lib_dir, include=include, cxx=cxx, verbose=verbose))


def link_tree(src: Path, dst: Path) -> None:
    """``dst`` made with a hard link (a copy across file systems) of every file of ``src``, the cache
    entry's stamp left out."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.iterdir()):
        if f.is_file() and f.name != cache.STAMP_NAME:
            try:
                os.link(f, dst / f.name)
            except OSError:
                shutil.copy2(f, dst / f.name)


def op_api_sources() -> tuple[list[Path], list[Path]]:
    """The built-ins' aclnn host library: (sources, headers) of ``aicpu_kernels/_op_api/``."""
    root = aicpu_kernels_dir() / "_op_api"
    return sorted(root.glob("*.cc")), sorted((root / "include").glob("*.h"))


def build_builtin_op_api(out: Path, *, lib_dir: Path, include: Path, cxx: str, verbose: bool = False) -> Path:
    """Compile the built-ins' aclnn host library into ``out`` (``include/``: the headers,
    ``obj/``: the object, ``lib/libcust_opapi.so``: the library, linked against ``lib_dir``'s
    emulator with a relative rpath). Returns the library.

    Raises:
        CompileError: the sources do not compile.
    """
    from .op_api import OBJ_DIR, VENDOR_LIBRARY, link_op_api

    sources, headers = op_api_sources()
    if not sources:
        raise BuildError(f"no aclnn host sources in {aicpu_kernels_dir() / '_op_api'}; the package install is incomplete")
    inc, obj_dir, lib = out / "include", out / OBJ_DIR, out / "lib"
    for d in (inc, obj_dir, lib):
        d.mkdir(parents=True, exist_ok=True)
    for h in headers:
        (inc / h.name).write_bytes(h.read_bytes())
    objects = []
    for src in sources:
        obj = obj_dir / (src.stem + ".o")
        cache.run_compiler([*shlex.split(cxx), "-std=c++17", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-Wall",
                            "-Wextra", "-Werror", f"-I{inc}", f"-I{include}", "-c", str(src), "-o", str(obj)],
                           sources=[src, *headers], verbose=verbose)
        objects.append(obj)
    # $ORIGIN = <library dir>/op_api/lib
    return link_op_api(objects, lib / VENDOR_LIBRARY, lib_dir=lib_dir, rpath="$ORIGIN/../..", cxx=cxx, verbose=verbose)
