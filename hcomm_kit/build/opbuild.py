"""``hcomm-kit build``: compile an operator's AICPU kernel for the emulator or for CANN.

Compile, cache and load are separate: :func:`build_op` compiles into the content-hash cache
(:mod:`hcomm_kit.build.cache`) and checks the result; loading is the orchestrator's job.

* ``emu``: host ``g++`` against the emulator headers, linked to ``libhcomm_emu.so``. Outputs
  ``<cache>/kernels/<stem>-<key>.so`` and ``<stem>-<key>.json`` (the op-info JSON whose
  ``kernelSo`` names the keyed ``.so`` beside it, for ``aclrtBinaryLoadFromFile``). The key
  covers the sources, the operator's and the emulator's headers, op.toml, the flags, the
  compiler identity, the package version and the emulator library's key. A cache hit runs no
  compiler: it hashes a few small files and compares the cached layout probe with the mirror.
* ``ascend``: CANN's AICPU cross compiler with the flags of hcomm.md §3.13, laid out as
  ``opp/vendors/<vendor>/aicpu/{config,kernel}`` in an output directory.

Checks after every build: the op-info JSON schema, the exported ``functionName``, and the
layout of ``OpParam`` / ``AlgResourceCtx`` in C (a compiled probe) against the Python mirror.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..base import envs
from ..base.errors import BuildError, CompileError, ConfigError
from .opspec import OpSpec, check_op_info, load_opspec
from . import cache

__all__ = [
    "TARGETS",
    "BuildResult",
    "BuildPlan",
    "build_op",
    "plan_build",
    "check_op_info",
    "check_exports",
    "check_layout",
    "ascend_template_context",
]

TARGETS = ("emu", "ascend")

# ---- emulator target -------------------------------------------------------------------------
EMU_FLAGS = ("-std=c++17", "-fPIC", "-shared", "-Wall", "-Wextra")
WERROR_FLAGS = ("-Werror",)  # built-in operators always; users' operators with `--werror` (warnings are shown)
# --no-undefined: an Hcomm call the emulator lacks fails here, not at load. -Bsymbolic: the kernel
# binds its own symbols to itself also where the emulator loads it without RTLD_DEEPBIND (its
# sanitizer builds), so an inline class shared with the host program never runs the host's copy.
EMU_LINK_FLAGS = ("-Wl,--no-undefined", "-Wl,-Bsymbolic")
RELEASE_FLAGS = ("-O2",)
DEBUG_FLAGS = ("-O0", "-g", "-DOP_ENABLE_INFO_LOG")
PROBE_FLAGS = ("-std=c++17", "-O0", "-w")

# ---- CANN target (hcomm.md §3.13) ------------------------------------------------------------
TOOLCHAIN_REL = "toolkit/toolchain/hcc/bin"
CROSS_PREFIX = "aarch64-target-linux-gnu-"
CROSS_CXX = CROSS_PREFIX + "g++"
ASCEND_INCLUDES = ("include", "include/hccl", "include/hcomm", "pkg_inc", "pkg_inc/hccl")
ASCEND_DEFINES = ("AICPU_COMPILE",)
ASCEND_CFLAGS = ("-fstack-protector-all", "-fno-common", "-fno-strict-aliasing", "-Wall", "-Wextra", "-Werror")
ASCEND_LIBDIRS = ("lib64/device/lib64", "devlib/device")
ASCEND_LIBS = ("ccl_kernel",)
ASCEND_LDFLAGS = ("-Wl,-z,relro,-z,now,-z,noexecstack",)
DEFAULT_CANN = "/usr/local/Ascend/cann"


@dataclass
class BuildResult:
    """A built kernel.

    Attributes:
        so_path: the kernel shared object.
        json_path: its op-info JSON (``kernelSo`` names ``so_path``'s file name).
        key: the content hash of the inputs.
        cached: True when nothing was compiled (cache hit).
        spec: the operator description.
        target: ``"emu"`` or ``"ascend"``.
    """

    so_path: Path
    json_path: Path
    key: str
    cached: bool
    spec: OpSpec
    target: str = "emu"


@dataclass
class BuildPlan:
    """What a build would run and write (``--dry-run``)."""

    target: str
    commands: list[list[str]]
    files: list[str]
    notes: list[str] = field(default_factory=list)

    def format(self) -> str:
        """Human-readable plan: commands (shell-quoted) then the files written."""
        lines = [f"# hcomm-kit build --target {self.target} --dry-run: nothing is run"]
        lines += [f"# {n}" for n in self.notes]
        lines += [shell_join(cmd, width=120) for cmd in self.commands]
        lines.append("# files written:")
        lines += [f"#   {f}" for f in self.files]
        return "\n".join(lines)


def shell_join(cmd: list[str], width: int = 0) -> str:
    """Quote a command for a POSIX shell, keeping ``${VAR}`` expandable; wrap lines at ``width``."""
    words = [f'"{a}"' if "$" in a and '"' not in a else shlex.quote(a) for a in cmd]
    if not width:
        return " ".join(words)
    lines, line = [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = "    " + w
        else:
            line = f"{line} {w}" if line else w
    lines.append(line)
    return " \\\n".join(lines)


# ---- inputs ----------------------------------------------------------------------------------


def _sources(spec: OpSpec) -> list[Path]:
    kdir = spec.path("op_kernel_aicpu")
    sources = sorted([*kdir.glob("*.cc"), *kdir.glob("*.cpp")])
    if not sources:
        raise BuildError(f"no kernel sources (*.cc) in {kdir}; re-create them with `hcomm-kit new --update {spec.opdir}`")
    return sources


def _headers(spec: OpSpec) -> list[Path]:
    found = [*spec.path("inc").rglob("*.h"), *spec.path("op_kernel_aicpu").glob("*.h")]
    return sorted(p for p in found if p.is_file())


@functools.lru_cache(maxsize=None)
def _emu_headers(include: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in include.rglob("*") if p.is_file()))


def _check_fresh(spec: OpSpec) -> None:
    """op.toml edited after rendering means a stale header: say how to fix it."""
    from .opspec import read_answers

    answers = read_answers(spec.opdir) or {}
    stored = answers.get("op_toml_sha256")
    if stored and stored != spec.toml_sha256:
        raise ConfigError("op.toml changed since the generated files were rendered; run "
                          f"`hcomm-kit new --update {spec.opdir}` first (exec_op.cc is kept)",
                          path=spec.path("op.toml"))


# ---- checks ----------------------------------------------------------------------------------


def check_exports(so_path: Path, symbol: str, *, nm: str = "nm") -> None:
    """Check that ``so_path`` exports the function ``symbol`` (``nm -D --defined-only``).

    Raises:
        BuildError: the symbol is not exported (e.g. a missing ``extern "C"``).
    """
    tool = shutil.which(nm)
    if tool is not None:
        proc = subprocess.run([tool, "-D", "--defined-only", str(so_path)], capture_output=True, text=True)
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[2] == symbol and parts[1] in ("T", "W", "i"):
                    return
            found = False
        else:
            found = _dlsym_in_subprocess(so_path, symbol)
    else:
        found = _dlsym_in_subprocess(so_path, symbol)
    if not found:
        raise BuildError(f"{so_path.name} does not export the kernel function {symbol!r} (op.kernel / the op-info "
                         f"functionName); define it in op_kernel_aicpu/aicpu_kernel.cc as "
                         f"`extern \"C\" unsigned int {symbol}(void *args)`")


def _dlsym_in_subprocess(so_path: Path, symbol: str) -> bool:
    code = "import ctypes, sys; getattr(ctypes.CDLL(sys.argv[1]), sys.argv[2])"
    return subprocess.run([sys.executable, "-c", code, str(so_path), symbol], capture_output=True).returncode == 0


def _probe_structs(spec: OpSpec) -> list[dict]:
    return [{"name": n, "fields": [f[0] for f in cls._fields_]} for n, cls in spec.struct_mirrors().items()]


def _probe_layout(spec: OpSpec, cxx: str, verbose: bool) -> dict:
    """Compile and run the layout probe for ``spec``'s header; cached by content."""
    from . import templating as render
    from . import emulator as _emulator

    template = render.templates_dir() / "probe" / "layout_probe.cc.jinja"
    structs = _probe_structs(spec)
    include = _emulator.get_include()
    headers = _headers(spec)
    key = cache.hash_key([*headers, *_emu_headers(include), template],
                         ["layout-probe", *PROBE_FLAGS, cache.compiler_identity(cxx), json.dumps(structs)])

    def build(tmp: Path) -> None:
        from .._version import __version__

        env = render.make_environment()  # jinja2 is imported only when the probe is (re)built
        src_text = render.render_template(env, "probe/layout_probe.cc.jinja",
                                          {"spec": spec, "structs": structs, "version": __version__})
        with tempfile.TemporaryDirectory(prefix="hcomm-kit-probe-") as work:
            src = Path(work) / "layout_probe.cc"
            exe = Path(work) / "layout_probe"
            src.write_text(src_text)
            cmd = [*shlex.split(cxx), *PROBE_FLAGS, f"-I{spec.path('inc')}", f"-I{include}", str(src), "-o", str(exe)]
            try:
                cache.run_compiler(cmd, sources=[src, *headers], verbose=verbose)
            except CompileError as exc:
                raise BuildError(f"the layout probe does not compile against inc/{spec.header_name}: the header and "
                                 f"the Python mirror (op.toml) disagree on the fields; run `hcomm-kit new --update "
                                 f"{spec.opdir}`\n{exc}") from None
            proc = subprocess.run([str(exe)], capture_output=True, text=True)
            if proc.returncode != 0:
                raise BuildError(f"the layout probe failed (exit {proc.returncode}): {proc.stderr.strip()}")
            json.loads(proc.stdout)  # must be valid JSON before it is cached
            tmp.write_text(proc.stdout)

    path = cache.cached_file(f"layout-{spec.name}", ".json", key, build, subdir="probes",
                             validate=_json_ok)
    return json.loads(path.read_text())


def check_layout(spec: OpSpec, probe: dict) -> None:
    """Compare the C layout (probe output) with the ctypes mirror of ``spec``.

    Raises:
        BuildError: listing every struct size / field offset that differs.
    """
    problems: list[str] = []
    for sname, cls in spec.struct_mirrors().items():
        c = probe.get(sname)
        if c is None:
            problems.append(f"{sname}: missing from the C probe")
            continue
        if ctypes.sizeof(cls) != c["size"]:
            problems.append(f"sizeof({sname}): C {c['size']}, Python {ctypes.sizeof(cls)}")
        py_fields = {f[0] for f in cls._fields_}
        for fname, offset in c["fields"].items():
            if fname not in py_fields:
                problems.append(f"{sname}.{fname}: in C, missing from the Python mirror")
            elif getattr(cls, fname).offset != offset:
                problems.append(f"offsetof({sname}, {fname}): C {offset}, Python {getattr(cls, fname).offset}")
    if problems:
        raise BuildError(f"layout mismatch between inc/{spec.header_name} and the Python mirror of op.toml "
                         f"(OpSpec.param_struct / resctx_struct):\n  " + "\n  ".join(problems) +
                         f"\nThe header is stale or was edited by hand: run `hcomm-kit new --update {spec.opdir}`.")


def _json_ok(path: Path) -> bool:
    try:
        json.loads(path.read_text())
        return True
    except (OSError, ValueError):
        return False


def _elf_ok(path: Path) -> bool:
    """Cheap integrity check: ELF magic, and the section header table fits in the file."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:  # ELF64
            return False
        little = head[5] == 1
        order = "little" if little else "big"
        shoff = int.from_bytes(head[0x28:0x30], order)
        shentsize = int.from_bytes(head[0x3A:0x3C], order)
        shnum = int.from_bytes(head[0x3C:0x3E], order)
        return path.stat().st_size >= shoff + shentsize * shnum
    except (OSError, IndexError):
        return False


# ---- emu target ------------------------------------------------------------------------------


def _is_builtin(spec: OpSpec) -> bool:
    """An operator of the package's ``aicpu_kernels/`` (built with -Werror)."""
    from ..base.resources import aicpu_kernels_dir

    try:
        return Path(spec.opdir).resolve().parent == aicpu_kernels_dir().resolve()
    except Exception:
        return False


def _emu_inputs(spec: OpSpec, debug: bool, werror: bool | None = None):
    from . import emulator as _emulator

    cxx = cache.default_cxx()
    ident = cache.compiler_identity(cxx)
    lib = _emulator.get_library()
    include = _emulator.get_include()
    sources, headers = _sources(spec), _headers(spec)
    info_json = spec.path(f"op_kernel_aicpu/{spec.json_name}")
    if not info_json.is_file():
        raise BuildError(f"{info_json} is missing; re-create it with `hcomm-kit new --update {spec.opdir}`")
    if werror is None:
        werror = _is_builtin(spec)
    # -g in release builds too: the emulator names the source line of a crash, a hang or a checker
    # finding from the kernel's debug info (no cost at run time).
    flags = [*EMU_FLAGS, *(WERROR_FLAGS if werror else ()), *(DEBUG_FLAGS if debug else (*RELEASE_FLAGS, "-g"))]
    key = cache.hash_key(
        [*sources, *headers, *_emu_headers(include), info_json, spec.path("op.toml")],
        ["op-emu", *flags, *EMU_LINK_FLAGS, ident, lib.parent.name,
         *(p.relative_to(spec.opdir).as_posix() for p in (*sources, *headers))],
    )
    cmd = [*shlex.split(cxx), *flags, f"-I{spec.path('inc')}", f"-I{spec.path('op_kernel_aicpu')}", f"-I{include}",
           *map(str, sources), "-o", "<output>", f"-L{lib.parent}", "-lhcomm_emu", f"-Wl,-rpath,{lib.parent}",
           *EMU_LINK_FLAGS]
    return cxx, key, cmd, sources, headers, info_json


def _build_emu(spec: OpSpec, debug: bool, verbose: bool, force: bool, werror: bool | None = None) -> BuildResult:
    cxx, key, cmd, sources, headers, info_json = _emu_inputs(spec, debug, werror)
    check_op_info(info_json, spec, spec.so)
    kernels = cache.cache_root() / "kernels"
    if force:
        for suffix in (".so", ".json"):
            for p in (kernels / f"{spec.stem}-{key}{suffix}", kernels / f"{spec.stem}-{key}{suffix}.sha256"):
                p.unlink(missing_ok=True)
    built: list[str] = []

    def build_so(tmp: Path) -> None:
        argv = [str(tmp) if a == "<output>" else a for a in cmd]
        output = cache.run_compiler(argv, sources=[*sources, *headers], verbose=verbose)
        if output and output.strip() and not verbose:
            # Not fatal for users' kernels (no -Werror unless --werror), but never silent.
            print(f"hcomm-kit: {spec.name}: compiler warnings (not fatal; `hcomm-kit build --werror` makes them "
                  f"errors):\n{output.rstrip()}", file=sys.stderr, flush=True)
        check_exports(tmp, spec.kernel)
        built.append("so")

    with ThreadPoolExecutor(max_workers=1) as pool:
        probe = pool.submit(_probe_layout, spec, cxx, verbose)  # compiles alongside the kernel on a miss
        so_path = cache.cached_file(spec.stem, ".so", key, build_so, subdir="kernels", validate=_elf_ok)
        layout = probe.result()
    check_layout(spec, layout)

    def build_json(tmp: Path) -> None:
        doc = json.loads(info_json.read_text())
        doc[spec.kernel]["opInfo"]["kernelSo"] = so_path.name
        tmp.write_text(json.dumps(doc, indent=4) + "\n")
        built.append("json")

    json_path = cache.cached_file(spec.stem, ".json", key, build_json, subdir="kernels",
                                  validate=lambda p: _op_info_ok(p, spec, so_path.name))
    if verbose:
        state = "built" if built else "cache hit"
        print(f"hcomm-kit: {spec.name}: {state}: {so_path}", file=sys.stderr)
    # cached: nothing was compiled (the op-info JSON beside the .so is only written; a concurrent
    # builder may write it while another compiled the kernel).
    return BuildResult(so_path, json_path, key, cached="so" not in built, spec=spec, target="emu")


def _op_info_ok(path: Path, spec: OpSpec, so_name: str) -> bool:
    try:
        check_op_info(path, spec, so_name)
        return True
    except BuildError:
        return False


# ---- ascend target ---------------------------------------------------------------------------


def ascend_template_context(spec: OpSpec) -> dict:
    """Compiler, flags and libraries of the CANN build, for CMakeLists.txt and BUILD_ON_CANN.md."""
    plan = _ascend_plan(spec, cann="${ASCEND_HOME_PATH}", out=Path("build_out/ascend"), debug=False,
                        relative=True)
    return {
        "toolchain_rel": TOOLCHAIN_REL,
        "cross_cxx": CROSS_CXX,
        "ascend_includes": list(ASCEND_INCLUDES),
        "ascend_defines": list(ASCEND_DEFINES),
        "ascend_cflags": list(ASCEND_CFLAGS),
        "release_flags": list(RELEASE_FLAGS),
        "debug_flags": list(DEBUG_FLAGS),
        "ascend_libdirs": list(ASCEND_LIBDIRS),
        "ascend_libs": list(ASCEND_LIBS),
        "ascend_ldflags": list(ASCEND_LDFLAGS),
        "ascend_command_text": shell_join(plan.commands[0], width=96),
    }


def _vendor_dir(spec: OpSpec, out: Path) -> Path:
    return out / "opp" / "vendors" / spec.vendor / "aicpu"


def _ascend_plan(spec: OpSpec, *, cann: str, out: Path, debug: bool, relative: bool = False) -> BuildPlan:
    def src(rel: str) -> str:
        return rel if relative else str(spec.path(rel))

    kernel_dir = _vendor_dir(spec, out) / "kernel"
    config_dir = _vendor_dir(spec, out) / "config"
    so_out = kernel_dir / spec.so
    # The documented command (relative=True) names the generated sources; a real build all of them.
    sources = (["op_kernel_aicpu/aicpu_kernel.cc", "op_kernel_aicpu/exec_op.cc"] if relative
               else [p.relative_to(spec.opdir).as_posix() for p in _sources(spec)])
    compile_cmd = [
        f"{cann}/{TOOLCHAIN_REL}/{CROSS_CXX}", "-std=c++17", "-fPIC", "-shared", *ASCEND_CFLAGS,
        *(DEBUG_FLAGS if debug else RELEASE_FLAGS), *(f"-D{d}" for d in ASCEND_DEFINES),
        f"-I{src('inc')}", f"-I{src('op_kernel_aicpu')}", *(f"-I{cann}/{inc}" for inc in ASCEND_INCLUDES),
        *(src(s) if relative else str(spec.opdir / s) for s in sources),
        "-o", str(so_out), *(f"-L{cann}/{d}" for d in ASCEND_LIBDIRS), *(f"-l{lib}" for lib in ASCEND_LIBS),
        *ASCEND_LDFLAGS,
    ]
    tarball = kernel_dir / f"aicpu_hccl_custom_{spec.name}.tar.gz"
    return BuildPlan(
        target="ascend",
        commands=[compile_cmd],
        files=[str(so_out), str(config_dir / spec.json_name), str(tarball)],
        notes=[f"then: check that {spec.so} exports {spec.kernel} (nm -D), check the op-info JSON and the "
               f"OpParam layout, copy {spec.json_name} to config/, pack aicpu_kernels_device/{spec.so} "
               f"into {tarball.name} (unsigned; sign it with CANN's tools, see BUILD_ON_CANN.md)"],
    )


def _cann_root(required: bool) -> str:
    value = envs.ascend_home_path()
    if value is None:
        if required:
            raise BuildError("ASCEND_HOME_PATH is not set: the ascend target needs a CANN toolkit with the AICPU "
                             f"cross compiler ({TOOLCHAIN_REL}/{CROSS_CXX}); source the set_env.sh of your CANN "
                             f"install (e.g. {DEFAULT_CANN}/set_env.sh), or use --target emu, or --dry-run to "
                             "see the commands")
        return "${ASCEND_HOME_PATH}"
    return str(value)


def _build_ascend(spec: OpSpec, debug: bool, verbose: bool, out: Path | None) -> BuildResult:
    cann = _cann_root(required=True)
    root = Path(cann)
    missing = []
    cxx = root / TOOLCHAIN_REL / CROSS_CXX
    if not cxx.is_file():
        missing.append(f"the AICPU cross compiler {cxx}")
    if not any((root / d / "libccl_kernel.so").exists() for d in ASCEND_LIBDIRS):
        missing.append("libccl_kernel.so in " + " or ".join(str(root / d) for d in ASCEND_LIBDIRS))
    if not any((root / d / "hcomm_primitives.h").exists() for d in ("include/hccl", "include/hcomm")):
        missing.append(f"hcomm_primitives.h in {root / 'include/hccl'} or {root / 'include/hcomm'}")
    if missing:
        raise BuildError(f"ASCEND_HOME_PATH={cann} is not a usable CANN toolkit: missing " + "; ".join(missing) +
                         ". Install the CANN toolkit (with the AICPU toolchain) or fix ASCEND_HOME_PATH.")
    out = Path(out) if out is not None else spec.path("build_out/ascend")
    plan = _ascend_plan(spec, cann=cann, out=out, debug=debug)
    so_out, json_out, tarball = (Path(f) for f in plan.files)
    info_json = spec.path(f"op_kernel_aicpu/{spec.json_name}")
    check_op_info(info_json, spec, spec.so)
    so_out.parent.mkdir(parents=True, exist_ok=True)
    cache.run_compiler(plan.commands[0], sources=[*_sources(spec), *_headers(spec)], verbose=verbose)
    nm = root / TOOLCHAIN_REL / (CROSS_PREFIX + "nm")
    check_exports(so_out, spec.kernel, nm=str(nm) if nm.is_file() else "nm")
    check_layout(spec, _probe_layout(spec, cache.default_cxx(), verbose))  # LP64 on both x86-64 and aarch64
    cache.atomic_write_bytes(json_out, info_json.read_bytes())
    with tempfile.NamedTemporaryFile(dir=tarball.parent, suffix=".tar.gz", delete=False) as tmp:
        with tarfile.open(fileobj=tmp, mode="w:gz") as tar:
            tar.add(so_out, arcname=f"aicpu_kernels_device/{spec.so}")
    os.replace(tmp.name, tarball)
    key = cache.hash_key([*_sources(spec), *_headers(spec), info_json], ["op-ascend", *plan.commands[0][1:]])
    return BuildResult(so_out, json_out, key, cached=False, spec=spec, target="ascend")


# ---- entry points ----------------------------------------------------------------------------


def _load(opdir: str | Path) -> OpSpec:
    spec = load_opspec(opdir)
    _check_fresh(spec)
    return spec


def build_op(
    opdir: str | Path,
    target: str = "emu",
    debug: bool = False,
    verbose: bool = False,
    *,
    out: str | Path | None = None,
    force: bool = False,
    werror: bool | None = None,
) -> BuildResult:
    """Build an operator's kernel (cached for ``emu``) and check it.

    Args:
        opdir: the operator directory (holding op.toml) or its op.toml.
        target: ``"emu"`` (host compiler + emulator) or ``"ascend"`` (CANN AICPU cross compiler).
        debug: ``-O0 -g`` and info logs instead of ``-O2``.
        verbose: echo commands and compiler output to stderr.
        out: output directory of the ascend target (default ``<opdir>/build_out/ascend``).
        force: rebuild even if a cached entry exists (e.g. after it failed to load).
        werror: ``emu``: compiler warnings are errors (default: only for the built-in operators;
            users' kernels build with warnings shown on stderr, not fatal).

    Returns:
        A :class:`BuildResult`.

    Raises:
        ConfigError: invalid op.toml, or op.toml changed since rendering.
        CompileError: the kernel does not compile (command, output and source excerpt).
        BuildError: missing toolchain, failed post-build check.

    Example:
        >>> res = build_op("ops/my_allgather")            # doctest: +SKIP
        >>> res.so_path.name                              # doctest: +SKIP
        'libmy_allgather_aicpu_kernel-0123456789abcdef0123.so'
    """
    if target not in TARGETS:
        raise ConfigError(f"unknown build target {target!r}; accepted: {', '.join(TARGETS)}", key="--target")
    spec = _load(opdir)
    if target == "emu":
        return _build_emu(spec, debug, verbose, force, werror)
    return _build_ascend(spec, debug, verbose, Path(out) if out is not None else None)


def plan_build(opdir: str | Path, target: str = "emu", debug: bool = False, *,
               out: str | Path | None = None, werror: bool | None = None) -> BuildPlan:
    """The exact commands and files of a build, without running it (works without CANN)."""
    if target not in TARGETS:
        raise ConfigError(f"unknown build target {target!r}; accepted: {', '.join(TARGETS)}", key="--target")
    spec = _load(opdir)
    if target == "ascend":
        out_dir = Path(out) if out is not None else spec.path("build_out/ascend")
        plan = _ascend_plan(spec, cann=_cann_root(required=False), out=out_dir, debug=debug)
        if envs.ascend_home_path() is None:
            plan.notes.insert(0, "ASCEND_HOME_PATH is not set: shown as ${ASCEND_HOME_PATH}")
        return plan
    _, key, cmd, _, _, _ = _emu_inputs(spec, debug, werror)
    kernels = cache.cache_root() / "kernels"
    so_path = kernels / f"{spec.stem}-{key}.so"
    return BuildPlan(
        target="emu",
        commands=[[str(so_path) if a == "<output>" else a for a in cmd]],
        files=[str(so_path), str(kernels / f"{spec.stem}-{key}.json")],
        notes=[f"cache key {key}; the .so is written to a temp name and renamed"],
    )
