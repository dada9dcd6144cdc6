"""A CANN vendor package's aclnn host library: ``opp/vendors/<vendor>/op_api/lib/libcust_opapi.so``.

CANN packs every operator of a vendor package into one ``libcust_opapi.so`` (hosts link
``-lcust_opapi``; frameworks dlopen it from ``ASCEND_CUSTOM_OPP_PATH``) beside one
``aclnn_<op>.h`` per operator in ``op_api/include``. hcomm-kit builds operators one at a time, so
the installed package also keeps each operator's object in ``op_api/obj/`` and every install
relinks the library from all of them (:func:`install_objects`): the built-in collectives'
``aclnnHk*`` (``hcomm-kit config --ascend-home``) and each operator ``hcomm-kit build`` installs.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from ..base.errors import BuildError
from . import cache

__all__ = ["VENDOR_LIBRARY", "OBJ_DIR", "link_op_api", "link_vendor_library", "install_objects"]

#: CANN's name of a vendor package's host library (every operator of the vendor in one).
VENDOR_LIBRARY = "libcust_opapi.so"
#: Beside ``op_api/include`` and ``op_api/lib``: the objects the library is linked from.
OBJ_DIR = "obj"


def link_op_api(objects: list[Path], library: Path, *, lib_dir: Path, rpath: str, cxx: str | None = None,
                verbose: bool = False) -> Path:
    """Link aclnn host objects into the shared library ``library`` (its soname is its file name)
    against the emulator library in ``lib_dir``; written atomically (a temp name, then rename)."""
    cxx = cxx or cache.default_cxx()
    tmp = library.with_name(f".{library.name}.tmp{os.getpid()}")
    cmd = [*shlex.split(cxx), "-shared", *map(str, objects), "-o", str(tmp), f"-Wl,-soname,{library.name}",
           f"-L{lib_dir}", "-lhcomm_emu", "-lc", f"-Wl,-rpath,{rpath}", "-Wl,--no-undefined"]
    # -lc: the ThreadSanitizer build of the emulator leaves atexit to libtsan; without libc named after
    # it, ld pulls libc_nonshared's atexit into a library that uses no C++ runtime and fails --no-undefined
    try:
        cache.run_compiler(cmd, sources=objects, verbose=verbose)
        os.replace(tmp, library)
    finally:
        tmp.unlink(missing_ok=True)
    return library


def link_vendor_library(vendor: Path, *, verbose: bool = False) -> Path:
    """(Re)link ``<vendor>/op_api/lib/libcust_opapi.so`` from every object in ``<vendor>/op_api/obj``,
    against the tree's emulator library (``vendor`` is ``<tree>/opp/vendors/<name>``)."""
    objects = sorted((vendor / "op_api" / OBJ_DIR).glob("*.o"))
    lib64 = vendor.parents[2] / "lib64"
    if not any(lib64.glob("libhcomm_emu*.so")):
        raise BuildError(f"{lib64} has no emulator library: {vendor.parents[2]} is not a tree written by "
                         "hcomm-kit config --ascend-home")
    if not objects:
        raise BuildError(f"no aclnn objects in {vendor / 'op_api' / OBJ_DIR} to link {VENDOR_LIBRARY} from")
    out = vendor / "op_api" / "lib"
    out.mkdir(parents=True, exist_ok=True)
    # $ORIGIN = <tree>/opp/vendors/<vendor>/op_api/lib: the tree's lib64 is five levels up
    return link_op_api(objects, out / VENDOR_LIBRARY, lib_dir=lib64, rpath="$ORIGIN/../../../../../lib64",
                       verbose=verbose)


def install_objects(vendor: Path, headers: list[Path], objects: list[Path], *, verbose: bool = False) -> Path:
    """Copy headers into ``<vendor>/op_api/include`` and objects into ``<vendor>/op_api/obj``, then
    relink the vendor's ``libcust_opapi.so`` (under a file lock: installs may run concurrently)."""
    from filelock import FileLock

    api = vendor / "op_api"
    for sub in ("include", "lib", OBJ_DIR):
        (api / sub).mkdir(parents=True, exist_ok=True)
    with FileLock(str(api / ".install.lock")):
        for src, dst_dir in [*((h, api / "include") for h in headers), *((o, api / OBJ_DIR) for o in objects)]:
            dst = dst_dir / src.name
            tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
        return link_vendor_library(vendor, verbose=verbose)
