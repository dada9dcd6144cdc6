"""A CANN-shaped install tree of the emulator, for building CANN's own projects unchanged.

``hcomm-kit config --ascend-home DIR`` calls :func:`write_tree`; then ``source DIR/set_env.sh``
makes ``$ASCEND_HOME_PATH`` point at DIR, and CANN's examples' Makefiles and CMake projects find
what they expect there:

=================================  ===========================================================
``include/``                       the emulator's headers at CANN's paths (``acl/``, ``hccl/``,
                                   ``hcomm/``, ``securec.h``), ``pkg_inc/hccl/`` likewise
``lib64/``                         ``libhcomm_emu.so`` (a copy) and its CANN names
                                   (:data:`EMULATED_LIBS`); link-only stubs for the libraries
                                   there is nothing to emulate for (:data:`STUB_LIBS`); the
                                   built-in operators (``builtin_kernels/``)
``share/cmake/{ASC,AICPU}/``       CMake packages (``find_package(ASC)``, ``find_package(AICPU)``):
                                   the ASC and AICPU languages and CANN's packaging functions
                                   (see ``emu/cann/cmake``)
``devlib/device/``                 ``libccl_kernel.so`` (the kernels' device API = the emulator)
``opp/vendors/<vendor>/``          ``aicpu/{kernel,config}``, ``include``, ``lib64``, ``scripts``;
                                   ``op_api/{include,lib}``: the vendor's aclnn package, one
                                   ``libcust_opapi.so`` with the built-in collectives'
                                   ``aclnnHk*`` and every operator ``hcomm-kit build`` installs
``toolkit/toolchain/hcc/bin/``     ``aarch64-target-linux-gnu-*``: the host tools (the emulator
                                   runs AICPU kernels on the host)
``bin/``                           ``hk-asc`` (ASC compiler), ``setenv.bash``
``tools/ccec_compiler/bin/``       ``ccec``, ``ld.lld``: refuse with a clear message (AI Core
                                   kernels are not emulated)
``set_env.sh``                     ``ASCEND_HOME_PATH``, ``LD_LIBRARY_PATH``, ``PATH``,
                                   ``CMAKE_PREFIX_PATH``, ...
=================================  ===========================================================

Rewriting a tree refreshes these files and keeps everything installed into ``opp/vendors``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import emulator as _emulator
from .._version import __version__
from . import cache
from ..base.errors import BuildError, ConfigError
from ..base.resources import emu_dir
from .op_api import OBJ_DIR, VENDOR_LIBRARY, install_objects
from .builtins import OP_API_DIR

__all__ = ["EMULATED_LIBS", "STUB_LIBS", "CROSS_TOOLS", "write_tree"]

#: Library names CANN build files link that the emulator implements: links to libhcomm_emu.so.
EMULATED_LIBS = ("ascendcl", "acl_rt", "hccl", "hcomm", "c_sec", "runtime", "nnopbase", "opapi")
#: Libraries CANN build files link that have nothing to emulate here (logging, profiling, dump,
#: error reporting, the Ascend C runtime of AI Core launches): empty shared objects, link-only.
STUB_LIBS = ("unified_dlog", "ascendalog", "alog", "profapi", "msprofiler", "error_manager", "ascend_dump",
             "ascendc_runtime", "mmpa", "tsdclient", "graph", "platform", "register")
#: The AICPU cross toolchain's tool names -> the host tool each wrapper runs.
CROSS_TOOLS = {"gcc": "gcc", "g++": "g++", "c++": "c++", "cpp": "cpp", "ar": "ar", "ld": "ld", "nm": "nm",
               "objcopy": "objcopy", "objdump": "objdump", "ranlib": "ranlib", "readelf": "readelf",
               "strip": "strip"}
CROSS_PREFIX = "aarch64-target-linux-gnu-"
_CANN = emu_dir() / "cann"

_README = """\
# hcomm-kit CPU emulator: CANN-shaped tree

Written by `hcomm-kit config --ascend-home {dest}` (hcomm-kit {version}, emulator library
{lib}). `source {dest}/set_env.sh`, then build and run CANN programs as on a CANN install: they
run on the CPU emulator (product: HCOMM_KIT_SOC, devices: HCOMM_KIT_DEVICE_COUNT).

Emulated: the ACL runtime, HCCL (communicators, collectives, resources), the Hcomm device API,
AICPU kernels (built for the host: the AICPU language and the aarch64-target-linux-gnu tools of
toolkit/ are the host compiler). Link-only stubs: {stubs}. Not emulated: AI Core / AIV kernels
(ccec, kernel_operator.h stop with a message).

Collectives through aclnn (no HCCL collective API needed): the aclnnHk* operators of
opp/vendors/<vendor>/op_api (include/aclnn_hk_*.h, lib/libcust_opapi.so, link -lcust_opapi).
`hcomm-kit build OPDIR` installs an operator's aclnn interface into the same library.

Custom operators: build the device pass (-DKERNEL_MODE=ON) and the host pass of the operator's
CMake project and install both into this tree (CMAKE_INSTALL_PREFIX defaults to it); the kernel
libraries land in opp/vendors/<vendor>/aicpu/kernel beside the (unsigned) AICPU package.
"""

_CCEC = """#!/bin/sh
echo "$(basename "$0"): AI Core (Ascend C vector/cube) kernels are not emulated by hcomm-kit; only AICPU kernels run on the emulator ($0)" >&2
exit 1
"""

_KERNEL_OPERATOR_H = """/* kernel_operator.h -- Ascend C's AI Core kernel API: not emulated by hcomm-kit. */
#error "AI Core (Ascend C vector/cube) kernels are not emulated by hcomm-kit; only AICPU kernels run on the emulator"
"""


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cache.atomic_write_bytes(path, text.encode())
    os.chmod(path, mode)


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    os.symlink(target, path)


def _copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _stubs(lib64: Path, cxx: str) -> None:
    """One empty shared object per :data:`STUB_LIBS` name (its own soname)."""
    with tempfile.TemporaryDirectory(prefix="hcomm-kit-stub-") as tmp:
        src = Path(tmp) / "stub.c"
        src.write_text("/* hcomm-kit: link-only stub of a CANN library the emulator has nothing to emulate for. */\n"
                       "int hcomm_kit_stub_library;\n")
        for name in STUB_LIBS:
            out = lib64 / f"lib{name}.so"
            tmp_out = Path(tmp) / out.name
            cache.run_compiler([*shlex.split(cxx), "-x", "c", "-shared", "-fPIC", str(src), "-o", str(tmp_out),
                                f"-Wl,-soname,lib{name}.so"], sources=[src])
            shutil.copy2(tmp_out, out)


def _cross_tools(bindir: Path) -> None:
    """One ``aarch64-target-linux-gnu-<tool>`` script per :data:`CROSS_TOOLS` entry, running the host's tool.

    The compilers honour ``$CC``/``$CXX`` (a user's ccache or clang), except when that is one of these
    scripts: CMake sets ``CXX`` to the compiler it was given, i.e. the script itself, which would then
    exec itself forever. ``HCOMM_KIT_CROSS_TOOL`` marks a second pass, which always runs the host tool.
    """
    for tool, host in CROSS_TOOLS.items():
        env_var = {"gcc": "CC", "g++": "CXX", "c++": "CXX"}.get(tool)
        run = (f'if [ -n "${{{env_var}}}" ] && [ -z "$HCOMM_KIT_CROSS_TOOL" ]; then\n'
               f'    HCOMM_KIT_CROSS_TOOL=1; export HCOMM_KIT_CROSS_TOOL\n    exec ${env_var} "$@"\nfi\n'
               if env_var else "")
        _write(bindir / f"{CROSS_PREFIX}{tool}",
               "#!/bin/sh\n# hcomm-kit: the emulator runs AICPU kernels on the host: this 'cross' tool is the "
               f"host's {host}.\n{run}exec {host} \"$@\"\n", 0o755)


def write_tree(dest: str | os.PathLike[str], *, sanitize: str | None = None, vendor: str = "cust") -> Path:
    """Write (or refresh) the CANN-shaped tree at ``dest``; returns its absolute path.

    Args:
        dest: the directory (created if needed).
        sanitize: sanitizer variant of the emulator library (``''``, ``'address'``, ``'thread'``;
            None = ``$HCOMM_KIT_SANITIZE``).
        vendor: the custom-operator vendor directory to create under ``opp/vendors``.

    Raises:
        ConfigError: ``dest`` is a file, or ``vendor`` is not a plain name.
        BuildError / CompileError: the emulator library or a stub does not build.

    Example:
        >>> root = write_tree("/tmp/cann")            # doctest: +SKIP
        >>> (root / "lib64" / "libhccl.so").exists()  # doctest: +SKIP
        True
    """
    root = Path(dest).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--ascend-home {root} is a file; give a directory (created if missing)", key="ascend-home")
    if not vendor or not all(c.isalnum() or c == "_" for c in vendor):
        raise ConfigError(f"vendor {vendor!r} must be letters, digits and '_' (e.g. 'cust')", key="vendor")
    lib = _emulator.get_library(sanitize)
    builtins = lib.parent / _emulator.BUILTIN_DIR
    if not builtins.is_dir():
        raise BuildError(f"the emulator library at {lib.parent} has no {_emulator.BUILTIN_DIR}/ (built-in "
                         "operators); remove that cache directory and run `hcomm-kit config --libs` to rebuild it")
    root.mkdir(parents=True, exist_ok=True)
    lib64 = root / "lib64"
    lib64.mkdir(exist_ok=True)
    # headers
    include = _emulator.get_include()
    _copy_tree(include, root / "include")
    _copy_tree(include / "hccl", root / "pkg_inc" / "hccl")
    _write(root / "asc" / "include" / "aicpu_api" / "aicpu_api.h", (_CANN / "asc_include" / "aicpu_api.h").read_text())
    _write(root / "include" / "tikcpp" / "tikcfw" / "kernel_operator.h", _KERNEL_OPERATOR_H)
    # libraries: a copy of the emulator (the tree outlives cache clean-ups) under every CANN name
    tmp_lib = lib64 / f".{_emulator.LIB_NAME}.tmp"
    shutil.copy2(lib, tmp_lib)
    os.replace(tmp_lib, lib64 / _emulator.LIB_NAME)
    for name in EMULATED_LIBS:
        _link(lib64 / f"lib{name}.so", _emulator.LIB_NAME)
    _copy_tree(builtins, lib64 / _emulator.BUILTIN_DIR)
    _stubs(lib64, cache.default_cxx())
    (lib64 / "device" / "lib64").mkdir(parents=True, exist_ok=True)
    _link(lib64 / "device" / "lib64" / "libccl_kernel.so", f"../../{_emulator.LIB_NAME}")
    _link(root / "devlib" / "device" / "libccl_kernel.so", f"../../lib64/{_emulator.LIB_NAME}")
    # CMake packages (find_package(ASC), find_package(AICPU)) and their languages
    # share/cmake: searched under every prefix even before project() enables a language (lib64 is not)
    cm = root / "share" / "cmake"
    _write(cm / "ASC" / "ASCConfig.cmake", (_CANN / "cmake" / "ASCConfig.cmake").read_text())
    _write(cm / "AICPU" / "AICPUConfig.cmake", (_CANN / "cmake" / "AICPUConfig.cmake").read_text())
    _write(cm / "hcomm_kit" / "hcomm_kit_cann.cmake", (_CANN / "cmake" / "hcomm_kit_cann.cmake").read_text())
    _copy_tree(_CANN / "cmake" / "modules", cm / "hcomm_kit" / "modules")
    # tools
    _write(root / "bin" / "hk-asc", (_CANN / "bin" / "hk-asc").read_text(), 0o755)
    _cross_tools(root / "toolkit" / "toolchain" / "hcc" / "bin")
    for tool in ("ccec", "ld.lld"):
        _write(root / "tools" / "ccec_compiler" / "bin" / tool, _CCEC, 0o755)
    # environment
    env_text = (_CANN / "set_env.sh").read_text()
    _write(root / "set_env.sh", env_text, 0o755)
    _write(root / "bin" / "setenv.bash", env_text, 0o755)
    # custom-operator install locations
    opp = root / "opp" / "vendors" / vendor
    for sub in ("aicpu/kernel", "aicpu/config", "include", "lib64", "scripts"):
        (opp / sub).mkdir(parents=True, exist_ok=True)
    (root / "opp" / "built-in" / "op_impl" / "aicpu" / "config").mkdir(parents=True, exist_ok=True)
    # the built-in collectives' aclnn interface (aclnnHk*) joins the vendor's libcust_opapi.so
    pkg = lib.parent / OP_API_DIR
    install_objects(opp, sorted((pkg / "include").glob("*.h")), sorted((pkg / OBJ_DIR).glob("*.o")))
    _write(root / "version.info", f"Version=hcomm-kit-emu-{__version__}\n")
    _write(root / "README.hcomm-kit.md", _README.format(dest=root, version=__version__, lib=lib,
                                                        stubs=", ".join(f"lib{s}.so" for s in STUB_LIBS)))
    return root


def check_tree(root: Path, vendor: str = "cust") -> list[str]:
    """Problems of a written tree (missing parts), empty when complete. Used by tests and doctor."""
    root = Path(root)
    need = [root / "set_env.sh", root / "include" / "hccl" / "hccl.h", root / "include" / "acl" / "acl.h",
            root / "lib64" / _emulator.LIB_NAME, root / "share" / "cmake" / "ASC" / "ASCConfig.cmake",
            root / "share" / "cmake" / "AICPU" / "AICPUConfig.cmake", root / "devlib" / "device" / "libccl_kernel.so",
            root / "bin" / "hk-asc", *(root / "lib64" / f"lib{n}.so" for n in (*EMULATED_LIBS, *STUB_LIBS)),
            root / "opp" / "vendors" / vendor / "op_api" / "lib" / VENDOR_LIBRARY,
            root / "opp" / "vendors" / vendor / "op_api" / "include" / "aclnn_hk_all_reduce.h"]
    problems = [f"missing {p}" for p in need if not p.exists()]
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", str(root / "lib64" / "libhccl.so")], capture_output=True,
                             text=True, timeout=60).stdout
        if "HcclAllReduce" not in out:
            problems.append("lib64/libhccl.so does not export HcclAllReduce")
    except (OSError, subprocess.SubprocessError) as exc:
        problems.append(f"cannot inspect lib64/libhccl.so: {exc}")
    return problems
