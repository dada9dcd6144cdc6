"""Builds tests/c/test_acl_runtime.cc (written only against <acl/acl.h>) and its AICPU test kernels
with the emulator's flags, runs it, and checks its "N passed, M failed" summary.

The helpers here (:func:`build_kernels`, :func:`build_program`, :func:`run_program`) are also used
by tests/test_sanitizers.py, tests/test_acl_python.py and scripts/bench_launch.py, which load this
file by path.

Layout of a build directory (``root``)::

    root/kernels/   acl_test_kernels.json + acl_test_kernels.so (cpuKernelMode 1: .so beside the JSON)
                    bad_*.json (error paths)
    root/device/    libacl_test_kernels.so (cpuKernelMode 0: found through HCOMM_KIT_KERNEL_PATH)
    root/test_acl_runtime
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
C_DIR = ROOT / "tests" / "c"
KERNEL_SRC_DIR = C_DIR / "kernels"
PROGRAM_SRC = C_DIR / "test_acl_runtime.cc"
KERNEL_SRC = KERNEL_SRC_DIR / "acl_test_kernels.cc"

WARN_FLAGS = ["-Wall", "-Wextra", "-Werror"]
SANITIZE_CFLAGS = {
    "": [],
    "address": ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"],
    "thread": ["-fsanitize=thread"],
}
SUMMARY_RE = re.compile(r"^(\d+) passed, (\d+) failed$", re.M)


def cxx() -> list[str]:
    """The C++ compiler argv ($CXX or g++); skips the calling test when there is none."""
    argv = shlex.split(os.environ.get("CXX") or "g++")
    if shutil.which(argv[0]) is None:
        pytest.skip(f"C++ compiler {argv[0]!r} not found (set CXX)")
    return argv


def _run_compiler(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"compile failed ({proc.returncode}):\n{shlex.join(cmd)}\n{proc.stdout}{proc.stderr}")


def build_kernels(root: Path, sanitize: str = "") -> tuple[Path, Path]:
    """Compile the test kernels and lay out ``root/kernels`` and ``root/device``; returns both dirs."""
    kdir, ddir = root / "kernels", root / "device"
    kdir.mkdir(parents=True, exist_ok=True)
    ddir.mkdir(parents=True, exist_ok=True)
    so = kdir / "acl_test_kernels.so"
    _run_compiler([*cxx(), "-std=c++17", "-O2", "-g", "-fPIC", "-shared", *WARN_FLAGS,
                   *SANITIZE_CFLAGS[sanitize], str(KERNEL_SRC), "-o", str(so)])
    shutil.copy2(so, ddir / "libacl_test_kernels.so")
    for js in KERNEL_SRC_DIR.glob("*.json"):
        shutil.copy2(js, kdir / js.name)
    return kdir, ddir


def build_program(root: Path, sanitize: str = "", *, opt: str = "-O2") -> Path:
    """Compile tests/c/test_acl_runtime.cc against the emulator (library variant ``sanitize``)."""
    from hcomm_kit.build import emulator as _emulator

    lib = _emulator.get_library(sanitize=sanitize)
    exe = root / ("test_acl_runtime" + (f"_{sanitize}" if sanitize else ""))
    _run_compiler([*cxx(), "-std=c++17", opt, "-g", "-pthread", *WARN_FLAGS, *SANITIZE_CFLAGS[sanitize],
                   _emulator.cflags(), str(PROGRAM_SRC), "-o", str(exe),
                   f"-L{lib.parent}", "-lhcomm_emu", f"-Wl,-rpath,{lib.parent}"])
    return exe


def run_program(exe: Path, kdir: Path, ddir: Path, *args: str, env: dict[str, str] | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("HCOMM_KIT_") or k == "HCOMM_KIT_CACHE_DIR"}
    full_env.update(env or {})
    return subprocess.run([str(exe), str(kdir), str(ddir), *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def summary(proc: subprocess.CompletedProcess) -> tuple[int, int]:
    """(passed, failed) from the program's last summary line; fails the test when absent."""
    found = SUMMARY_RE.findall(proc.stdout)
    assert found, f"no summary line (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    passed, failed = map(int, found[-1])
    return passed, failed


@pytest.fixture(scope="module")
def plain_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("acl_c")
    kdir, ddir = build_kernels(root)
    # -O0: the program only drives the emulator (built -O2); -O2 costs ~10x the compile time.
    return build_program(root, opt="-O0"), kdir, ddir


@pytest.mark.slow  # full run only: over the quick run's budget
def test_acl_runtime_c_program(plain_build: tuple[Path, Path, Path]) -> None:
    exe, kdir, ddir = plain_build
    proc = run_program(exe, kdir, ddir)
    out = proc.stdout + proc.stderr
    print(out)
    passed, failed = summary(proc)
    assert failed == 0 and proc.returncode == 0, out
    assert passed > 500, out
    for group in ("errmsg", "devices", "contexts", "streams", "memory", "events", "notifies", "callbacks",
                  "binaries", "args", "launch", "fifo"):
        assert re.search(rf"^group {group}\s+ok", proc.stdout, re.M), f"group {group} did not pass:\n{out}"


@pytest.mark.slow  # full run only: over the quick run's budget
def test_acl_runtime_c_program_group_selection(plain_build: tuple[Path, Path, Path]) -> None:
    """A single group runs on its own (device 0 is then set by main)."""
    exe, kdir, ddir = plain_build
    proc = run_program(exe, kdir, ddir, "args")
    passed, failed = summary(proc)
    assert failed == 0 and proc.returncode == 0, proc.stdout + proc.stderr
    assert "group args" in proc.stdout and "group launch" not in proc.stdout


def test_acl_runtime_c_program_usage(plain_build: tuple[Path, Path, Path]) -> None:
    exe, _, _ = plain_build
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage" in proc.stderr
