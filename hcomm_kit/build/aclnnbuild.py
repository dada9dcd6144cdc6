"""An operator's aclnn interface: ``aclnn_<name>.h`` and its host library, from ``op.toml``.

``hcomm-kit build`` renders ``templates/op_api/aclnn_op.{h,cc}.jinja`` for the operator and
compiles the host library against the emulator (``-lhcomm_emu``: the two phases are the
emulator's ``HkAclnnGetWorkspaceSize`` / ``HkAclnnRun``, see ``hcomm_kit/aclnn_ext.h``), into the
build cache laid out as CANN lays out a custom operator package::

    <cache>/aclnn-<name>-<key>/op_api/include/aclnn_<name>.h
    <cache>/aclnn-<name>-<key>/op_api/lib/libcust_opapi_<name>.so    this operator alone
    <cache>/aclnn-<name>-<key>/obj/aclnn_<name>.o                    for the vendor's library

CANN packs every operator of a vendor package into one ``op_api/lib/libcust_opapi.so`` (hosts link
``-lcust_opapi``, frameworks dlopen it from ``ASCEND_CUSTOM_OPP_PATH``). hcomm-kit builds operators
one at a time, so :func:`install` keeps each operator's object in
``<ASCEND_HOME_PATH>/opp/vendors/<vendor>/op_api/obj/`` and relinks the vendor's
``libcust_opapi.so`` from all of them (the built-in collectives'
``aclnnHk*`` are one of them, installed by ``hcomm-kit config --ascend-home``), with the header in
``op_api/include`` (:mod:`.op_api`). The cache's ``libcust_opapi_<name>.so`` stays for a host that
links one operator.

Names: ``ring_sum`` -> ``aclnnRingSum`` (:func:`aclnn_name`, CANN camel-cases operator types).
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..base import dtypes as _dtypes
from ..base.errors import BuildError
from . import cache
from .rings import RING_ORDERS
from .op_api import OBJ_DIR, install_objects, link_op_api
from .opspec import A2A3_REDUCE_DTYPES, A2A3_REDUCE_OPS, PRODUCTS, OpSpec
from .templating import make_environment, render_template, templates_dir

__all__ = ["AclnnBuild", "aclnn_name", "render_sources", "build_aclnn", "install", "library_name"]

_TOPOLOGY = {"none": 0, "p2p": 1, "ring": 2, "mesh": 3, "peer": 4}
_OUTPUT = {"count": 0, "count*ranks": 1, "count/ranks": 2}
_INPUT_BLOCKS = 0x100  # HK_OUT_INPUT_BLOCKS: x holds one block of OpParam.count per rank (HCCL's count)
_THREAD_RULE = {"ranks": 0, "ranks-1": -1, "peers": -2, "ranks+2": -3}
_OP_TYPE = {"ring-allreduce": 2, "mesh-allgather": 6, "p2p": 4}  # HcclCMDType, as CustomOp sets OpParam.opType
_FLAGS = ("-std=c++17", "-O2", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror", "-fvisibility=hidden")


@dataclass(frozen=True)
class AclnnBuild:
    """The built aclnn interface of one operator.

    Attributes:
        api: ``aclnnRingSum`` (phase one is ``api + "GetWorkspaceSize"``).
        header: ``.../op_api/include/aclnn_<name>.h``.
        library: ``.../op_api/lib/libcust_opapi_<name>.so`` (installed: the vendor's ``libcust_opapi.so``).
        obj: the operator's object file (what the vendor's library is linked from).
        kernel_json: the kernel's op-info JSON (the kernel ``.so`` beside it, same stem), which
            :func:`install` copies into the vendor package; None for an installed build.
    """

    api: str
    header: Path
    library: Path
    obj: Path
    kernel_json: Path | None = None

    @property
    def include_dir(self) -> Path:
        """Directory to pass with ``-I``."""
        return self.header.parent

    @property
    def lib_dir(self) -> Path:
        """Directory to pass with ``-L`` (and the rpath)."""
        return self.library.parent


def aclnn_name(op_name: str) -> str:
    """``ring_sum`` -> ``aclnnRingSum``."""
    return "aclnn" + "".join(part[:1].upper() + part[1:] for part in op_name.split("_") if part)


def library_name(spec: OpSpec) -> str:
    """``libcust_opapi_<name>.so``."""
    return f"libcust_opapi_{spec.name}.so"


def _mask(values) -> int:
    m = 0
    for v in values:
        m |= 1 << v
    return m


def _user_args(spec: OpSpec) -> list[dict]:
    out = []
    for p in spec.params:
        if p.array:
            decl = f"const {p.type} *{p.name}" if p.type != "void*" else f"void *const *{p.name}"
            doc = f"{p.type}[{p.array}] (NULL = zeros)"
        else:
            decl = f"{p.type} {p.name}" if p.type != "void*" else f"void *{p.name}"
            doc = p.type
        out.append({"name": p.name, "decl": decl, "array": p.array, "doc": doc})
    return out


def phase1_params(spec: OpSpec) -> list[tuple[str, str]]:
    """``[(C declaration, doc), ...]`` of phase one's parameters, in order."""
    out = [("const aclTensor *x", "x: the input tensor")]
    if spec.is_reduction:
        names = ", ".join(f"{r} {_dtypes.get_reduce_op(r).value}" for r in spec.reduce_ops)
        out.append(("int64_t reduceOp", f"reduceOp: HcclReduceOp ({names})"))
    out.append(("int64_t root", "root: root rank of a rooted operator, the peer of a \"peer\" operator (0 otherwise)"))
    out += [(a["decl"], f"{a['name']}: op.toml [[param]] {a['doc']}") for a in _user_args(spec)]
    out += [("const char *group", "group: the communicator's name (HcclGetCommName)"),
            ("aclTensor *out", "out: the output tensor"),
            ("uint64_t *workspaceSize", "workspaceSize: set to the workspace phase two needs (bytes, may be 0)"),
            ("aclOpExecutor **executor", "executor: set to the executor phase two runs")]
    return out


def _context(spec: OpSpec, api: str) -> dict:
    params = phase1_params(spec)
    rows = [(_dtypes.ACL_DATA_TYPE[d], _dtypes.get_dtype(d).value, d) for d in spec.dtypes]
    reduce_values = [_dtypes.get_reduce_op(r).value for r in spec.reduce_ops]
    return {
        "spec": spec,
        "api": api,
        "phase1_params": "\n    " + ",\n    ".join(d for d, _ in params),
        "phase1_doc": [doc for _, doc in params],
        "P": spec.macro_prefix,
        "version": __version__,
        "dtypes": rows,
        "dtype_names": ", ".join(spec.dtypes),
        "reduce_names": ", ".join(f"{r} {_dtypes.get_reduce_op(r).value}" for r in spec.reduce_ops),
        "out_rule": ({"count": "1/ranks as many", "count*ranks": "as many"}[spec.output] if spec.kind_info.blocks else
                     {"count": "as many", "count*ranks": "ranks x as many", "count/ranks": "1/ranks as many"}[spec.output])
        + " as x has",
        "user_args": _user_args(spec),
        "thread_rule": spec.threads if isinstance(spec.threads, int) else _THREAD_RULE[spec.threads],
        "topology": _TOPOLOGY[spec.topology],
        "output": _OUTPUT[spec.output] | (_INPUT_BLOCKS if spec.kind_info.blocks else 0),
        "op_type": _OP_TYPE.get(spec.pattern, 0),
        "reduce_mask": _mask(reduce_values),
        "product_mask": _mask(PRODUCTS.index(p) for p in spec.products),
        "a2a3_dtype_mask": _mask(_dtypes.get_dtype(d).value for d in A2A3_REDUCE_DTYPES),
        "a2a3_reduce_mask": _mask(_dtypes.get_reduce_op(r).value for r in A2A3_REDUCE_OPS),
        "same_args": _same_args(spec),
        "ring_order": RING_ORDERS.index(spec.ring_order),
    }


_SAME_COUNT, _SAME_ROOT = 1, 2  # HK_SAME_COUNT, HK_SAME_ROOT of hcomm_kit/aclnn_ext.h


def _same_args(spec: OpSpec) -> int:
    """What phase two's call check compares besides operator, dtype and reduce op, as the Python
    operators' check does (CustomOp._check_custom_call): with ``[io] same_args`` the count (not an
    alltoallv's: its counts differ per rank) and the root (not a peer operator's: it names the
    partner)."""
    if not spec.same_args:
        return 0
    return (0 if spec.count_params() else _SAME_COUNT) | (0 if spec.topology == "peer" else _SAME_ROOT)


def render_sources(spec: OpSpec) -> dict[str, str]:
    """``{"aclnn_<name>.h": text, "aclnn_<name>.cc": text}`` for the operator."""
    env = make_environment()
    ctx = _context(spec, aclnn_name(spec.name))
    return {f"aclnn_{spec.name}.h": render_template(env, "op_api/aclnn_op.h.jinja", ctx),
            f"aclnn_{spec.name}.cc": render_template(env, "op_api/aclnn_op.cc.jinja", ctx)}


def _ok(directory: Path) -> bool:
    return any((directory / "op_api" / "lib").glob("libcust_opapi_*.so")) and any((directory / OBJ_DIR).glob("*.o"))


def build_aclnn(spec: OpSpec, kernel_json: Path, *, verbose: bool = False) -> AclnnBuild:
    """Render and compile the aclnn interface of ``spec`` (cached by content).

    Args:
        spec: the operator (with its directory: the generated param header is included).
        kernel_json: the op-info JSON of its built kernel (``BuildResult.json_path``), which the
            library loads on the first phase-two call.

    Raises:
        CompileError: the generated sources do not compile (a bug: please report it).
    """
    from . import emulator as _emulator

    api = aclnn_name(spec.name)
    sources = render_sources(spec)
    include = _emulator.get_include()
    lib = _emulator.get_library()
    cxx = cache.default_cxx()
    param_header = spec.path(f"inc/{spec.header_name}")
    tmpl = templates_dir() / "op_api"
    key = cache.hash_key(
        [param_header, *sorted(tmpl.glob("*.jinja")), *sorted((include / "aclnn").glob("*.h")),
         include / "hcomm_kit" / "aclnn_ext.h"],
        ["aclnn", spec.name, *_FLAGS, cache.compiler_identity(cxx), lib.parent.name, str(kernel_json),
         *(f"{k}\0{v}" for k, v in sorted(sources.items()))],
    )

    def build(tmp: Path) -> None:
        inc = tmp / "op_api" / "include"
        out = tmp / "op_api" / "lib"
        src = tmp / "src"
        obj_dir = tmp / OBJ_DIR
        for d in (inc, out, src, obj_dir):
            d.mkdir(parents=True)
        (inc / f"aclnn_{spec.name}.h").write_text(sources[f"aclnn_{spec.name}.h"])
        cc = src / f"aclnn_{spec.name}.cc"
        cc.write_text(sources[f"aclnn_{spec.name}.cc"])
        define = f'-DHK_OP_INFO_JSON="{kernel_json}"'
        obj = obj_dir / f"aclnn_{spec.name}.o"
        cache.run_compiler([*shlex.split(cxx), *_FLAGS, define, f"-I{inc}", f"-I{spec.path('inc')}", f"-I{include}",
                            "-c", str(cc), "-o", str(obj)], sources=[cc], verbose=verbose)
        link_op_api([obj], out / library_name(spec), lib_dir=lib.parent, rpath=str(lib.parent), cxx=cxx,
                    verbose=verbose)

    directory = cache.cached_dir(f"aclnn-{spec.name}", key, build, validate=_ok)
    return AclnnBuild(api, directory / "op_api" / "include" / f"aclnn_{spec.name}.h",
                      directory / "op_api" / "lib" / library_name(spec), directory / OBJ_DIR / f"aclnn_{spec.name}.o",
                      Path(kernel_json))


def install(built: AclnnBuild, spec: OpSpec, ascend_home: str | os.PathLike[str], *,
            verbose: bool = False) -> AclnnBuild:
    """Install the operator into ``<ascend_home>/opp/vendors/<vendor>`` as CANN lays out a custom
    operator package: into ``op_api/``, its header into ``include/``, its object into ``obj/`` and
    the vendor's ``lib/libcust_opapi.so`` relinked from every installed object; its kernel into
    ``aicpu/kernel/`` and the kernel's op-info JSON into ``aicpu/config/`` (the installed library
    loads them from there: the package does not need the build cache). Returns the installed
    paths (``library`` is the vendor's ``libcust_opapi.so``).

    Raises:
        BuildError: not a CANN-shaped tree of ``hcomm-kit config --ascend-home`` with that vendor,
            or the operator's aclnn name is one of the built-in collectives'.
    """
    from .builtins import BUILTIN_ACLNN

    vendor = Path(ascend_home) / "opp" / "vendors" / spec.vendor
    if not vendor.is_dir():
        raise BuildError(f"{vendor} does not exist: {ascend_home} is not a CANN-shaped tree with vendor "
                         f"{spec.vendor!r} (hcomm-kit config --ascend-home DIR --vendor {spec.vendor})")
    if built.api[len("aclnn"):] in BUILTIN_ACLNN:
        raise BuildError(f"operator {spec.name} is called {built.api}, as a built-in collective of the vendor package "
                         f"(aclnnHk*): rename it in {spec.opdir / 'op.toml'} [op].name")
    old = vendor / "op_api" / "lib" / library_name(spec)  # the one-library-per-operator layout of earlier versions
    old.unlink(missing_ok=True)
    if built.kernel_json is not None:
        kernel = built.kernel_json.with_suffix(".so")
        for src, sub in ((kernel, "kernel"), (built.kernel_json, "config")):
            if not src.is_file():
                raise BuildError(f"{src} is missing: rebuild the operator (hcomm-kit build {spec.opdir})")
            dst = vendor / "aicpu" / sub / src.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
            shutil.copy2(src, tmp)
            os.replace(tmp, dst)
    library = install_objects(vendor, [built.header], [built.obj], verbose=verbose)
    return AclnnBuild(built.api, vendor / "op_api" / "include" / built.header.name, library,
                      vendor / "op_api" / OBJ_DIR / built.obj.name)
