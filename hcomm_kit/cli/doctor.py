"""Check the installation and print what hcomm-kit would use.

Reports the package version, backend and library path, SoC personality, C++ compiler, MPI
library and mpirun, whether CANN was found, and the cache directory; then builds the emulator
library as a smoke test. Exits non-zero, naming each problem and its fix, if anything fails.

  hcomm-kit doctor            full report (builds the emulator on first run)
  hcomm-kit doctor --env      table of every environment variable hcomm-kit reads
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

from .._version import __version__
from ..base.errors import BackendError, BuildError, HcommKitError

HELP = "check the installation (doctor --env: list environment variables)"

_WIDTH = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options: --env, --no-build, --verbose."""
    parser.add_argument("--env", action="store_true", help="print the environment variable table and exit")
    parser.add_argument("--no-build", action="store_true", help="do not build the emulator library")
    parser.add_argument("-v", "--verbose", action="store_true", help="show compiler commands and output")


def cann_library(ascend_home: Path | None) -> Path | None:
    """``$ASCEND_HOME_PATH/lib64/libascendcl.so`` if it exists, else None."""
    if ascend_home is None:
        return None
    lib = ascend_home / "lib64" / "libascendcl.so"
    return lib if lib.is_file() else None


def _print_env_table() -> int:
    from ..base import envs

    rows = envs.describe()
    bad = 0
    for name, default, current, meaning in rows:
        try:
            envs.get(name)
            status = ""
        except HcommKitError as exc:
            status, bad = f"  INVALID: {exc}", bad + 1
        shown = f"{current!r}" if current else "(unset)"
        print(f"{name:<22} default {default:<12} current {shown}{status}\n    {meaning}")
    return 1 if bad else 0


class _Report:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def line(self, label: str, value: str) -> None:
        print(f"{label:<{_WIDTH}} {value}", flush=True)

    def check(self, label: str, fn: Callable[[], str]) -> str | None:
        try:
            value = fn()
        except HcommKitError as exc:
            self.problems.append(f"{label}: {exc}")
            self.line(label, f"FAILED: {exc}")
            return None
        self.line(label, value)
        return value


def leftovers(shm_dir: str = "/dev/shm") -> str:
    """Remove what processes of hcomm-kit that died left in ``shm_dir`` (emulator segments, Open MPI
    backing directories of SIGKILLed launchers: :mod:`hcomm_kit.base.leftovers`) and say what."""
    from ..base.leftovers import reclaim_all

    removed = reclaim_all(shm_dir)
    if not removed:
        return f"none in {shm_dir}"
    return f"removed {len(removed)} left in {shm_dir} by processes that died: {', '.join(sorted(removed))}"


def run(args: argparse.Namespace) -> int:
    """Print the report; return 0 when every check passed, else 1."""
    if args.env:
        return _print_env_table()

    from ..build import emulator as _emulator
    from ..base import envs
    from ..jobs import mpirun as mpi
    from ..build import cache

    rep = _Report()
    rep.line("hcomm-kit", f"{__version__} ({Path(__file__).resolve().parent.parent})")
    rep.line("python", f"{sys.version.split()[0]} ({sys.executable})")

    for name in envs.VARIABLES:  # surface every bad variable at once, not just the first used
        try:
            envs.get(name)
        except HcommKitError as exc:
            rep.problems.append(str(exc))
            rep.line("env", f"FAILED: {exc}")

    def backend() -> str:
        requested = envs.backend()
        cann = cann_library(envs.ascend_home_path())
        if requested == "cann" and cann is None:
            raise BackendError("HCOMM_KIT_BACKEND=cann but $ASCEND_HOME_PATH/lib64/libascendcl.so was not "
                               "found; set ASCEND_HOME_PATH to the CANN install or use HCOMM_KIT_BACKEND=emu")
        used = "cann" if (requested == "cann" or (requested == "auto" and cann)) else "emu"
        return f"{used} (HCOMM_KIT_BACKEND={requested})"

    used = rep.check("backend", backend)
    rep.check("soc", envs.soc)
    rep.check("compiler", lambda: cache.compiler_identity(cache.default_cxx()))
    rep.check("mpi", mpi.mpi_library_version)
    rep.check("mpirun", lambda: str(mpi.find_mpirun()))

    def cann() -> str:
        home = envs.ascend_home_path()
        lib = cann_library(home)
        if lib:
            return f"found: {lib}"
        return "not found (ASCEND_HOME_PATH unset)" if home is None else f"not found ({home}/lib64/libascendcl.so)"

    rep.check("cann", cann)
    rep.check("cache", lambda: str(cache.cache_root()))

    if used and used.startswith("cann"):
        rep.check("library", lambda: str(cann_library(envs.ascend_home_path())))
    if not args.no_build:
        def build() -> str:
            start = time.monotonic()
            lib = _emulator.get_library(verbose=args.verbose)
            if not _emulator.validate(lib.parent):
                raise BuildError(f"{lib} is not a valid shared library; delete {lib.parent} and retry")
            return f"{lib} (ok, {time.monotonic() - start:.1f}s)"

        rep.check("emulator", build)

        def fast_path() -> str:  # not a problem when missing: the Python path does the same work
            from ..build import pyext

            mod = pyext.fastcall()
            if mod is None:
                return f"not built, repeated calls run in Python ({pyext.why_no_fastcall()})"
            return f"{mod.__file__} (compiled steady state of repeated all_reduce calls)"

        rep.check("fast path", fast_path)

        def network() -> str:  # not a problem when missing: one-host jobs do not need it
            from ..build import ucx

            u = ucx.find()
            if u.problem:
                return f"ranks on one host only ({u.problem})"
            major, minor = u.header_version or (0, 0)
            return f"ranks on several hosts possible: UCX {major}.{minor} headers in {u.include}, library {u.library}"

        rep.check("network", network)

    rep.check("leftovers", leftovers)

    if rep.problems:
        print(f"\nhcomm-kit doctor: {len(rep.problems)} problem(s):", file=sys.stderr)
        for p in rep.problems:
            print(f"  - {p}", file=sys.stderr)
        return 1
    print("\nall checks passed")
    return 0
