"""Build and run the emulator's fuzz targets (tests/fuzz/fuzz_*.cc).

Two builds of every target, both cached in the hcomm-kit build cache (content-hashed):

* **libFuzzer** (needs clang with libFuzzer: ``apt-get install clang libclang-rt-14-dev``): every
  emulator source and the target compiled with ``-fsanitize=fuzzer-no-link,address,undefined``
  (coverage-guided, AddressSanitizer + UBSan), linked with ``-fsanitize=fuzzer``.
* **replay** (any C++ compiler, ``$CXX`` or g++): the target with ``replay_main.cc`` and
  ``-fsanitize=address,undefined``, linked against the ordinary emulator library; it re-runs stored
  inputs (the regression corpus) in the quick test suite.

Targets: ``json`` (JSON reader + op-info loader), ``args`` (args-handle API + launch size checks),
``hcomm`` (Hcomm data-plane address/length/count checks; run once per product personality).

Corpora: ``tests/fuzz/corpus/<target>/`` (seeds) and ``tests/fuzz/regressions/<target>/``
(inputs that once crashed or reproduce the issue's cases; replayed by the quick suite).

Longer campaigns from the command line::

    python tests/fuzz/harness.py args --seconds 600          # new inputs are printed, not stored
    python tests/fuzz/harness.py hcomm --seconds 300 --soc Ascend950
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
TARGETS = ("json", "args", "hcomm")
CORPUS_DIR = FUZZ_DIR / "corpus"
REGRESSION_DIR = FUZZ_DIR / "regressions"
_COMMON = ["-std=c++17", "-g1", "-pthread", "-Wall", "-Wextra"]  # line tables: reports name file:line
_FUZZ_SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]
_KERNEL_JSON = """{
    "FuzzNop": {"opInfo": {"opKernelLib": "AICPUKernel", "kernelSo": "fuzz_kernels.so", "functionName": "FuzzNop"}}
}
"""
# Sanitizer options for every run: leaks are not checked (the emulator keeps detached worker
# threads and retired devices until exit on purpose, see tests/test_sanitizers.py); any other
# report aborts the run.
SAN_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:handle_abort=1:allocator_may_return_null=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


def _emu():
    from hcomm_kit.build import emulator as _emulator

    return _emulator


def _sources(emu: Path | None = None) -> tuple[list[Path], list[Path]]:
    emu = emu or _emu().emu_root()
    srcs = sorted((emu / "src").rglob("*.cc"))
    hdrs = sorted(p for p in (emu / "include").rglob("*") if p.is_file())
    hdrs += sorted(p for p in (emu / "src").rglob("*") if p.is_file() and p.suffix != ".cc")
    return srcs, hdrs


def _fuzz_files() -> list[Path]:
    return sorted([*FUZZ_DIR.glob("*.cc"), *FUZZ_DIR.glob("*.c"), *FUZZ_DIR.glob("*.h")])


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"build step failed ({proc.returncode}): {shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")


def _shim(out: Path, cc: list[str], flags: list[str], inc: list[str]) -> Path:
    """fuzz_shim.c compiled as C (enum arguments passed as plain ints, as C callers do)."""
    obj = out / "fuzz_shim.o"
    _run([*cc, "-x", "c", "-std=c11", *[f for f in flags if not f.startswith("-std=")], *inc, "-c",
          str(FUZZ_DIR / "fuzz_shim.c"), "-o", str(obj)])
    return obj


def _write_kernels(out: Path, cxx: list[str]) -> None:
    _run([*cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror",
          str(FUZZ_DIR / "fuzz_kernels.cc"), "-o", str(out / "fuzz_kernels.so")])
    (out / "fuzz_kernels.json").write_text(_KERNEL_JSON)


# ---- toolchains ---------------------------------------------------------------------------------
def find_clang() -> str | None:
    """A clang++ whose ``-fsanitize=fuzzer`` links (None when there is none)."""
    for name in ("clang++", *(f"clang++-{v}" for v in range(20, 13, -1))):
        path = shutil.which(name)
        if path and _links_libfuzzer(path):
            return path
    return None


def _links_libfuzzer(clang: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="hcomm_kit_fuzzprobe_") as d:
        src = Path(d) / "t.cc"
        src.write_text('#include <cstdint>\n#include <cstddef>\nextern "C" int LLVMFuzzerTestOneInput'
                       '(const uint8_t*, size_t) { return 0; }\n')
        proc = subprocess.run([clang, "-fsanitize=fuzzer,address", str(src), "-o", str(Path(d) / "t")],
                              capture_output=True, text=True, timeout=120)
        return proc.returncode == 0


def why_no_libfuzzer() -> str:
    """Why the libFuzzer build is unavailable here (for skip messages)."""
    if not any(shutil.which(n) for n in ("clang++", *(f"clang++-{v}" for v in range(20, 13, -1)))):
        return ("clang++ is not installed, so the coverage-guided fuzzers (libFuzzer) cannot be built; "
                "install it with `apt-get install -y clang libclang-rt-14-dev` (.ci/run does this in CI)")
    return ("clang++ is installed but `-fsanitize=fuzzer` does not link (the libFuzzer runtime is missing); "
            "install it with `apt-get install -y libclang-rt-14-dev` (the package matching `clang++ --version`)")


# ---- builds -------------------------------------------------------------------------------------
def build_libfuzzer(clang: str, *, emu_root: Path | None = None, targets: tuple[str, ...] = TARGETS,
                    lenient: bool = False) -> Path:
    """Directory with ``fuzz_<target>`` libFuzzer executables and the fuzz kernel (cached).

    ``emu_root``: another emulator tree to fuzz (e.g. an older version, to count what the fuzzers
    find in it); default the packaged one. ``lenient``: model mismatches are reported but not fatal
    (only crashes and sanitizer reports stop a run), for measuring versions whose documented
    behaviour differs.
    """
    from hcomm_kit.build import cache

    emu = Path(emu_root) if emu_root else _emu().emu_root()
    srcs, hdrs = _sources(emu)
    inc = [f"-I{emu / 'include'}", f"-I{emu / 'src'}", f"-I{FUZZ_DIR}"]
    kernel_hdrs: list[Path] = []
    if _emu()._has_builtins(emu):  # the HCCL collective API includes the built-ins' <op>/inc/<op>_param.h
        from hcomm_kit.base.resources import aicpu_kernels_dir

        inc.insert(0, f"-I{aicpu_kernels_dir()}")
        kernel_hdrs = sorted(aicpu_kernels_dir().glob("*/inc/*.h"))
    # -O0: half the compile time of -O1 under clang with ASan (the whole emulator is built here); the
    # fuzzers run slower per input but cover the same code
    cflags = [*_COMMON, "-O0", *_FUZZ_SAN, "-fsanitize=fuzzer-no-link", *(["-DFUZZ_LENIENT"] if lenient else [])]
    key = cache.hash_key([*srcs, *hdrs, *kernel_hdrs, *_fuzz_files()],
                         ["fuzz-libfuzzer", *targets, *cflags, cache.compiler_identity(clang),
                          *(p.relative_to(emu).as_posix() for p in hdrs)])

    def build(out: Path) -> None:
        objdir = out / "obj"
        objdir.mkdir()
        from concurrent.futures import ThreadPoolExecutor

        # the emulator's standard headers precompiled once (clang takes <header>.pch for -include):
        # a quarter of this build's compile time, as the emulator's own g++ builds do
        pch: list[str] = []
        std = emu / "src" / "base" / "std_headers.h"
        if std.is_file():
            shutil.copyfile(std, objdir / std.name)
            _run([clang, *cflags, *inc, "-x", "c++-header", str(objdir / std.name), "-o", f"{objdir / std.name}.pch"])
            pch = ["-include", str(objdir / std.name)]

        # the packaged tree in one unit per folder, as the emulator's own builds; another tree (an
        # older version, whose file-local names may repeat within a folder) one unit per source
        units = (_emu().compile_units(srcs, emu, objdir) if emu_root is None
                 else [_emu().Unit(src, _emu().object_name(src, emu), (src,)) for src in srcs])

        def compile_one(unit) -> Path:
            obj = objdir / unit.obj
            _run([clang, *cflags, *inc, *pch, "-c", str(unit.source), "-o", str(obj)])
            return obj

        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            objs = list(pool.map(compile_one, units))
        shim = _shim(objdir, [clang], cflags, inc)
        for t in targets:
            extra = [str(shim)] if t == "hcomm" else []
            _run([clang, *cflags, *inc, "-fsanitize=fuzzer", str(FUZZ_DIR / f"fuzz_{t}.cc"), *extra, *map(str, objs),
                  "-o", str(out / f"fuzz_{t}"), "-ldl", "-lrt"])
        shutil.rmtree(objdir)
        _write_kernels(out, [clang])

    return cache.cached_dir("fuzz-libfuzzer", key, build)


def build_kernels() -> Path:
    """Directory with only the fuzz kernel (``fuzz_kernels.so`` + ``.json``), for the direct checks
    (cached; a second's build instead of the replay targets')."""
    from hcomm_kit.build import cache

    cxx = shlex.split(cache.default_cxx())
    key = cache.hash_key([FUZZ_DIR / "fuzz_kernels.cc"], ["fuzz-kernels", _KERNEL_JSON,
                                                          cache.compiler_identity(cache.default_cxx())])
    return cache.cached_dir("fuzz-kernels", key, lambda out: _write_kernels(out, cxx))


def build_replay(sanitize: str = "") -> Path:
    """Directory with ``replay_<target>`` executables (any C++ compiler, ASan+UBSan) (cached).

    ``sanitize=""`` links the ordinary emulator library: the targets' own checks (return codes,
    layouts) and ASan on the harness side (the library's memcpy/memset are intercepted).
    ``sanitize="address"`` links the ASan+UBSan library as well, so undefined behaviour and memory
    errors inside the emulator are reported too (a slower first build, shared with
    tests/test_sanitizers.py).
    """
    from hcomm_kit.build import cache

    emu = _emu()
    lib = emu.get_library(sanitize=sanitize)
    cxx = shlex.split(cache.default_cxx())
    srcs, hdrs = _sources()
    inc = [f"-I{emu.get_include()}", f"-I{emu.emu_root() / 'src'}", f"-I{FUZZ_DIR}"]
    cflags = [*_COMMON, "-Og", *_FUZZ_SAN]  # -Og: ASan+UBSan at -O1 costs gcc twice the compile time
    key = cache.hash_key([*_fuzz_files(), emu.emu_root() / "src" / "base" / "json.cc",
                          emu.emu_root() / "src" / "base" / "json.h",
                          lib], ["fuzz-replay", sanitize, *cflags, cache.compiler_identity(cache.default_cxx())])

    def build(out: Path) -> None:
        shim = _shim(out, cxx, cflags, inc)
        for t in TARGETS:
            extra = {"json": [str(emu.emu_root() / "src" / "base" / "json.cc")], "hcomm": [str(shim)]}.get(t, [])
            _run([*cxx, *cflags, *inc, str(FUZZ_DIR / f"fuzz_{t}.cc"), str(FUZZ_DIR / "replay_main.cc"), *extra,
                  "-o", str(out / f"replay_{t}"), f"-L{lib.parent}", "-lhcomm_emu", f"-Wl,-rpath,{lib.parent}"])
        shim.unlink()
        _write_kernels(out, cxx)

    return cache.cached_dir("fuzz-replay" + (f"-{sanitize}" if sanitize else ""), key, build)


# ---- runs ---------------------------------------------------------------------------------------
def run_env(soc: str | None = None) -> dict[str, str]:
    """Environment of a fuzz run: this process's, minus HCOMM_KIT_* settings, plus the sanitizer options."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HCOMM_KIT_") or k == "HCOMM_KIT_CACHE_DIR"}
    env.update(SAN_ENV)
    env["HCOMM_KIT_LOG"] = "error"
    # The targets model the spec's return codes for arbitrary call sequences (doubled records
    # included): the notify checker's findings are not part of that model, so it runs in warn mode
    # (its code is fuzzed too; HCOMM_KIT_LOG=error keeps its reports quiet).
    env["HCOMM_KIT_CHECK"] = "warn"
    if soc:
        env["HCOMM_KIT_SOC"] = soc
    return env


def replay(exe: Path, inputs: list[Path], *, soc: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the replay build of a target over ``inputs`` (files or directories)."""
    return subprocess.run([str(exe), *map(str, inputs)], capture_output=True, text=True, timeout=timeout,
                          env=run_env(soc))


@dataclass
class FuzzResult:
    """Outcome of one libFuzzer run."""

    target: str
    soc: str | None
    seconds: float
    executions: int
    coverage: int
    new_units: int
    crash: Path | None
    returncode: int
    log: str


_STAT_RE = re.compile(r"stat::(\w+):\s*(\d+)")
_COV_RE = re.compile(r"cov: (\d+)")


def fuzz(bindir: Path, target: str, seconds: float, workdir: Path, *, soc: str | None = None,
         max_len: int = 4096) -> FuzzResult:
    """Run ``fuzz_<target>`` for ``seconds`` from the stored corpora; new units go to ``workdir``."""
    corpus = workdir / f"corpus_{target}"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = workdir / f"artifacts_{target}"
    artifacts.mkdir(exist_ok=True)
    seeds = [d for d in (CORPUS_DIR / target, REGRESSION_DIR / target) if d.is_dir()]
    argv = [str(bindir / f"fuzz_{target}"), f"-max_total_time={int(max(1, seconds))}", f"-max_len={max_len}",
            "-timeout=30", "-rss_limit_mb=2560", "-print_final_stats=1", "-detect_leaks=0",
            f"-artifact_prefix={artifacts}/", str(corpus), *map(str, seeds)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 300, env=run_env(soc))
    log = proc.stdout + proc.stderr
    stats = {k: int(v) for k, v in _STAT_RE.findall(log)}
    cov = [int(c) for c in _COV_RE.findall(log)]
    crashes = sorted(artifacts.iterdir())
    return FuzzResult(target, soc, seconds, stats.get("number_of_executed_units", 0), max(cov, default=0),
                      stats.get("new_units_added", 0), crashes[0] if crashes else None, proc.returncode, log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", choices=TARGETS)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--soc", default=None, help="HCOMM_KIT_SOC for the run (hcomm target)")
    ap.add_argument("--keep", type=Path, default=None, help="directory to keep the grown corpus in")
    ap.add_argument("--emu-root", type=Path, default=None, help="emulator tree to fuzz (default: the packaged one)")
    ap.add_argument("--lenient", action="store_true", help="model mismatches are not fatal (older versions)")
    args = ap.parse_args(argv)
    clang = find_clang()
    if clang is None:
        print(why_no_libfuzzer(), file=sys.stderr)
        return 2
    bindir = build_libfuzzer(clang, emu_root=args.emu_root, targets=(args.target,), lenient=args.lenient)
    work = args.keep or Path(tempfile.mkdtemp(prefix="hcomm_kit_fuzz_"))
    res = fuzz(bindir, args.target, args.seconds, work, soc=args.soc)
    print(f"{args.target}: {res.executions} executions, coverage {res.coverage}, {res.new_units} new units, "
          f"exit {res.returncode}" + (f", CRASH: {res.crash}" if res.crash else ""))
    if res.crash:
        print(res.log[-6000:])
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if res.crash or res.returncode else 0


if __name__ == "__main__":
    sys.path.insert(0, str(FUZZ_DIR.parents[1]))
    raise SystemExit(main())
