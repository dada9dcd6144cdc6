"""Builds and runs tests/c/test_emu_utils.cc (JSON reader, reductions, securec) three ways:
plain -O2, AddressSanitizer + UndefinedBehaviorSanitizer, and ThreadSanitizer."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hcomm_kit.build import cache

ROOT = Path(__file__).resolve().parents[1]
EMU = ROOT / "hcomm_kit" / "emu"
SOURCES = [
    EMU / "src" / "base" / "json.cc",
    EMU / "src" / "base" / "reduce.cc",
    EMU / "src" / "base" / "securec.cc",
    ROOT / "tests" / "c" / "test_emu_utils.cc",
]
# Same flags as the emulator library (see .dev/CONTRACTS.md), minus -shared.
PROJECT_FLAGS = [
    "-std=c++17", "-O2", "-g", "-fPIC", "-fvisibility=hidden", "-DFUNC_VISIBILITY",
    "-Wall", "-Wextra", "-Werror", "-pthread",
    f"-I{EMU / 'include'}", f"-I{EMU / 'src'}",
]
VARIANTS = {
    "plain": [],
    "asan_ubsan": ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"],
    "tsan": ["-fsanitize=thread"],
}
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1",
}


def _cxx() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        pytest.skip(f"C++ compiler {cxx!r} not found (set CXX to a g++ >= 12)")
    return cxx


@pytest.mark.parametrize("variant", [v if v == "plain" else pytest.param(v, marks=pytest.mark.slow) for v in VARIANTS])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_emu_utils(variant, tmp_path):
    assert (EMU / "include" / "securec.h").is_file(), "hcomm_kit/emu/include/securec.h is missing"
    flags = [*PROJECT_FLAGS, *VARIANTS[variant]]
    cxx = _cxx()
    headers = sorted(p for d in (EMU / "include", EMU / "src") for p in d.rglob("*.h"))
    key = cache.hash_key([*SOURCES, *headers], ["test_emu_utils", variant, *flags, cache.compiler_identity(cxx)])

    def build(out: Path) -> None:
        objs = [out / f"{src.stem}.o" for src in SOURCES]
        # One compiler per source, in parallel (the CPUs of the machine), then the link.
        procs = [(cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                 for cmd in ([cxx, *flags, "-c", str(src), "-o", str(obj)] for src, obj in zip(SOURCES, objs))]
        for cmd, proc in procs:
            text = proc.communicate(timeout=600)[0]
            assert proc.returncode == 0, f"compile failed:\n{' '.join(cmd)}\n{text}"
        cmd = [cxx, *flags, *map(str, objs), "-o", str(out / "test_emu_utils")]
        link = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert link.returncode == 0, f"link failed:\n{' '.join(cmd)}\n{link.stdout}{link.stderr}"
        for obj in objs:
            obj.unlink()

    # built once per content (the build cache), run every time
    exe = cache.cached_dir(f"test-emu-utils-{variant}", key, build) / "test_emu_utils"
    env = {**os.environ, **SANITIZER_ENV, "TMPDIR": str(tmp_path)}
    run = subprocess.run([str(exe), str(tmp_path)], capture_output=True, text=True, timeout=600, env=env)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{exe.name} exited with {run.returncode}:\n{output}"
    assert " 0 failed" in run.stdout, output
