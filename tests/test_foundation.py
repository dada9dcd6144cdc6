"""Tests of the foundation: envs, dtypes, errors, build cache, emulator build driver, mpi, CLI."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hcomm_kit.build import emulator as _emulator
from hcomm_kit.base import dtypes, envs
from hcomm_kit.jobs import mpirun as mpi
from hcomm_kit.build import cache
from hcomm_kit.runtime import codes
from hcomm_kit.cli import main as cli_main
from hcomm_kit.base.errors import AclError, BuildError, CompileError, ConfigError, HcclError, HcommKitError, OpTimeoutError

REPO = Path(__file__).resolve().parent.parent
HAVE_CXX = shutil.which(os.environ.get("CXX", "g++").split()[0] if os.environ.get("CXX") else "g++") is not None
needs_cxx = pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler")


# ----------------------------------------------------------------------------- envs

def test_env_defaults(clean_hcomm_env: None) -> None:
    assert envs.backend() == "emu"
    assert envs.soc() == "Ascend910B"
    assert envs.device_count() == 8
    assert envs.hccl_buffsize_mb() == 200
    assert envs.hccl_exec_timeout_s() == 1836
    assert envs.hccl_connect_timeout_s() == 120
    assert envs.sanitize() == ""
    assert envs.hccl_algo() is None
    assert envs.ascend_home_path() is None
    assert envs.cxx() == "g++"
    assert envs.kernel_path() == []


def test_env_values_parsed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HCOMM_KIT_SOC", "ascend910_93")  # case-insensitive, canonical spelling back
    monkeypatch.setenv("HCCL_BUFFSIZE", " 64 ")
    monkeypatch.setenv("HCOMM_KIT_SANITIZE", "")  # empty = default
    monkeypatch.setenv("HCOMM_KIT_KERNEL_PATH", f"{tmp_path}/a{os.pathsep}{tmp_path}/b")
    monkeypatch.setenv("HCOMM_KIT_CACHE_DIR", str(tmp_path / "c"))
    assert envs.soc() == "Ascend910_93"
    assert envs.hccl_buffsize_mb() == 64
    assert envs.sanitize() == ""
    assert envs.kernel_path() == [tmp_path / "a", tmp_path / "b"]
    assert envs.cache_dir() == tmp_path / "c"


@pytest.mark.parametrize(
    "name, value, accepted",
    [
        ("HCOMM_KIT_BACKEND", "gpu", "'emu', 'cann', 'auto'"),
        ("HCOMM_KIT_SOC", "Ascend310", "'Ascend910B', 'Ascend910_93', 'Ascend950'"),
        ("HCOMM_KIT_LOG", "verbose", "'error', 'warn', 'info', 'debug'"),
        ("HCOMM_KIT_SANITIZE", "memory", "'address', 'thread'"),
        ("HCCL_BUFFSIZE", "big", "an integer in [1, 65536]"),
        ("HCCL_BUFFSIZE", "0", "an integer in [1, 65536]"),
        ("HCOMM_KIT_DEVICE_COUNT", "-1", "an integer in [1, 64]"),
        ("HCOMM_KIT_DEVICE_COUNT", "65", "an integer in [1, 64]"),
        ("HCCL_EXEC_TIMEOUT", "1.5", "an integer in [0, 65535]"),
    ],
)
def test_env_bad_values(monkeypatch: pytest.MonkeyPatch, name: str, value: str, accepted: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        envs.get(name)
    msg = str(info.value)
    assert name in msg and repr(value) in msg and accepted in msg
    assert info.value.key == name
    assert isinstance(info.value, HcommKitError)


def test_env_table_is_complete() -> None:
    expected = {
        "HCOMM_KIT_BACKEND", "HCOMM_KIT_SOC", "HCOMM_KIT_CACHE_DIR", "HCOMM_KIT_KERNEL_PATH", "HCOMM_KIT_LOG",
        "HCOMM_KIT_SPIN_US", "HCOMM_KIT_PIN", "HCOMM_KIT_DEVICE_COUNT", "HCOMM_KIT_SANITIZE", "HCCL_BUFFSIZE", "HCCL_EXEC_TIMEOUT",
        "HCCL_CONNECT_TIMEOUT", "HCCL_ALGO", "ASCEND_HOME_PATH", "CXX", "HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_LINKS_DOWN",
        "HCOMM_KIT_RANK", "HCOMM_KIT_WORLD_SIZE", "HCOMM_KIT_ROOT_INFO", "HCOMM_KIT_LOCAL_RANK",
        "HCOMM_KIT_ABORT_ON_ERROR", "HCOMM_KIT_CROSS_TOOL", "HCOMM_KIT_MPI_NP", "HCOMM_KIT_MPI_RESULTS", "HCOMM_KIT_JOB_DIR",
        "HCOMM_KIT_FUZZ_SECONDS", "HCOMM_KIT_DEBUG", "HCOMM_KIT_QUIET", "HCOMM_KIT_PROGRESS_FILE",
        "HCOMM_KIT_CHECK", "HCOMM_KIT_CALL_CHECK", "HCOMM_KIT_LOG_DIR", "HCOMM_KIT_TRACE", "HCOMM_KIT_TRACE_CLOCK",
        "HCOMM_KIT_PROGRESS_SECONDS",
        "HCOMM_KIT_MODEL", "HCOMM_KIT_MODEL_WAIT", "HCOMM_KIT_MODEL_PARAMS", "HCOMM_KIT_FAULT_COPY_RESTORE_US",
    }
    assert set(envs.VARIABLES) == expected
    assert all(v.meaning for v in envs.VARIABLES.values())
    page = (REPO / "docs" / "environment.md").read_text()
    missing = [name for name in expected if f"`{name}`" not in page]
    assert not missing, f"the table of docs/environment.md misses {missing}"
    # Every HCOMM_KIT_* variable the package or the emulator reads is declared in the table.
    import re
    used = set()
    for path in [*(REPO / "hcomm_kit").rglob("*.py"), *(REPO / "hcomm_kit" / "emu" / "src").rglob("*.cc")]:
        used |= set(re.findall(r"HCOMM_KIT_[A-Z][A-Z0-9_]*[A-Z0-9]", path.read_text()))
    used -= {"HCOMM_KIT_CODES", *codes.HCOMM_KIT_CODES.values()}  # error-code names, not variables
    # ... nor are the macros of the emulator's extension header (HcommKitStreamCalls' call kinds and flags)
    ext = (REPO / "hcomm_kit" / "emu" / "include" / "hcomm_kit" / "emu_ext.h").read_text()
    used -= set(re.findall(r"#define (HCOMM_KIT_[A-Z0-9_]+)", ext))
    assert used <= set(envs.VARIABLES), f"undeclared environment variables: {sorted(used - set(envs.VARIABLES))}"


# ----------------------------------------------------------------------------- dtypes

def test_dtype_table() -> None:
    expect = {"int8": (0, 1), "int16": (1, 2), "int32": (2, 4), "fp16": (3, 2), "fp32": (4, 4), "int64": (5, 8),
              "uint64": (6, 8), "uint8": (7, 1), "uint16": (8, 2), "uint32": (9, 4), "fp64": (10, 8), "bf16": (11, 2)}
    assert {d.name: (d.value, d.itemsize) for d in dtypes.DTYPES} == expect
    bf16 = dtypes.get_dtype("bfloat16")
    assert bf16.storage_only and bf16.numpy == np.uint16 and bf16.hccl_name == "HCCL_DATA_TYPE_BFP16"
    assert dtypes.get_dtype("float") is dtypes.get_dtype(4) is dtypes.get_dtype(np.float32)
    assert dtypes.get_dtype("half").name == "fp16"
    assert dtypes.get_dtype("torch.bfloat16").name == "bf16"
    assert dtypes.get_dtype(np.dtype(np.uint16)).name == "uint16"  # never silently bf16


@pytest.mark.parametrize("bad", ["complex64", 13, np.complex64, None, "avg"])
def test_dtype_unknown(bad: object) -> None:
    with pytest.raises(ConfigError, match="accepted: int8"):
        dtypes.get_dtype(bad)


def test_reduce_ops() -> None:
    assert [(op.name, op.value) for op in dtypes.REDUCE_OPS] == [("sum", 0), ("prod", 1), ("max", 2), ("min", 3)]
    assert dtypes.get_reduce_op("ADD").name == "sum"
    assert dtypes.get_reduce_op(3).hccl_name == "HCCL_REDUCE_MIN"
    with pytest.raises(ConfigError, match="divide by the number of ranks"):
        dtypes.get_reduce_op("avg")
    with pytest.raises(ConfigError, match="accepted: sum"):
        dtypes.get_reduce_op("xor")


def _bf16_reference(x: np.float32) -> int:
    """Nearest bf16 by exact float64 distance comparison, ties to even (independent algorithm)."""
    xf = float(x)
    if np.isnan(x):
        return -1
    bits = int(np.float32(x).view(np.uint32))
    lo = bits >> 16
    hi = lo + 1
    to_f = lambda b: float(np.uint32((b & 0xFFFF) << 16).view(np.float32))  # noqa: E731
    if np.isinf(x):
        return lo
    d_lo, d_hi = abs(xf - to_f(lo)), abs(to_f(hi) - xf)
    if (hi & 0x7FFF) == 0x7F80:  # rounding up reaches inf: treat inf as the next value 2^128
        d_hi = abs(2.0 ** 128 - abs(xf))
    if d_lo < d_hi:
        return lo
    if d_hi < d_lo:
        return hi & 0xFFFF
    return lo if lo % 2 == 0 else hi & 0xFFFF


def test_bf16_known_values() -> None:
    f = lambda b: np.uint32(b).view(np.float32)  # noqa: E731
    cases = {
        1.0: 0x3F80, -2.0: 0xC000, 0.0: 0x0000,
        float(f(0x3F808000)): 0x3F80,  # tie, even stays
        float(f(0x3F818000)): 0x3F82,  # tie, odd rounds up
        float(f(0x3F808001)): 0x3F81,  # just above half
        float(f(0x3F807FFF)): 0x3F80,  # just below half
        float(np.finfo(np.float32).max): 0x7F80,  # overflows to inf
        float("inf"): 0x7F80, float("-inf"): 0xFF80,
    }
    got = dtypes.float32_to_bf16_bits(np.array(list(cases), dtype=np.float32))
    assert [hex(g) for g in got] == [hex(v) for v in cases.values()]
    assert dtypes.float32_to_bf16_bits(-0.0) == 0x8000
    nan_bits = dtypes.float32_to_bf16_bits(np.array([np.nan, -np.nan, f(0x7F800001)], dtype=np.float32))
    assert np.isnan(dtypes.bf16_bits_to_float32(nan_bits)).all()


def test_bf16_matches_reference_on_random_values() -> None:
    rng = np.random.default_rng(1234)
    bits = rng.integers(0, 2**32, size=4000, dtype=np.uint64).astype(np.uint32)
    bits[:500] = (bits[:500] & np.uint32(0xFFFF0000)) | np.uint32(0x8000)  # force exact ties
    values = bits.view(np.float32)
    got = dtypes.float32_to_bf16_bits(values)
    for v, g in zip(values, got):
        ref = _bf16_reference(v)
        if ref == -1:
            assert np.isnan(dtypes.bf16_bits_to_float32(g))
        else:
            assert int(g) == ref, f"{v!r}: got {int(g):#06x} want {ref:#06x}"


def test_bf16_roundtrip_all_patterns() -> None:
    patterns = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    back = dtypes.float32_to_bf16_bits(dtypes.bf16_bits_to_float32(patterns))
    finite = ~np.isnan(dtypes.bf16_bits_to_float32(patterns))
    assert np.array_equal(back[finite], patterns[finite])
    assert np.isnan(dtypes.bf16_bits_to_float32(back[~finite])).all()


# ----------------------------------------------------------------------------- errors

def test_runtime_error_text() -> None:
    e = AclError(100000, "ACL_ERROR_INVALID_PARAM", "aclrtMalloc", "size must be > 0")
    assert str(e) == "aclrtMalloc failed: 100000 ACL_ERROR_INVALID_PARAM: size must be > 0"
    h = HcclError(4, "HCCL_E_INTERNAL", "HcclCommInitRootInfo")
    assert str(h) == "HcclCommInitRootInfo failed: 4 HCCL_E_INTERNAL"
    t = OpTimeoutError(507017, "ACL_ERROR_RT_AICPU_TIMEOUT", "aclrtSynchronizeStream", op="ag", rank=2, timeout=5)
    assert isinstance(t, TimeoutError) and isinstance(t, AclError)
    assert "op ag, rank 2, timeout 5s" in str(t)


@needs_cxx
def test_compile_error_excerpt(tmp_path: Path) -> None:
    src = tmp_path / "bad.cc"
    src.write_text("int ok() { return 0; }\n\nint broken() {\n  return undefined_name;\n}\n")
    cmd = [cache.default_cxx(), "-c", str(src), "-o", str(tmp_path / "bad.o")]
    with pytest.raises(CompileError) as info:
        cache.run_compiler(cmd, sources=[src])
    err = info.value
    assert err.returncode != 0 and err.source_path == src and err.line == 4
    excerpt = err.excerpt()
    assert "> 4 |   return undefined_name;" in excerpt and "  3 | int broken() {" in excerpt
    text = str(err)
    assert f"{src}:4" in text and "command: " in text and "undefined_name" in text


def test_compile_error_without_location() -> None:
    err = CompileError(["cc", "x.cc"], 1, "cc: fatal: something odd")
    assert err.excerpt() == "" and "exit 1" in str(err) and "something odd" in str(err)


# ----------------------------------------------------------------------------- build cache

def test_hash_key_stable(tmp_path: Path) -> None:
    a, b = tmp_path / "a.cc", tmp_path / "b.h"
    a.write_text("A")
    b.write_text("B")
    k = cache.hash_key([a, b], ["-O2"])
    assert len(k) == 20 and k == cache.hash_key([b, a], ["-O2"])
    assert k != cache.hash_key([a, b], ["-O1"])
    b.write_text("B2")
    assert k != cache.hash_key([a, b], ["-O2"])


def _counting_build(marker: Path, content: str = "payload", delay: float = 0.0):
    def build(out: Path) -> None:
        with open(marker, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(delay)
        (out / "lib.so").write_text(content)
    return build


def _builds(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def test_cached_dir_hit_miss_and_corruption(isolated_cache: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    d1 = cache.cached_dir("thing", "k1", _counting_build(marker))
    assert d1 == isolated_cache / "thing-k1" and (d1 / "lib.so").read_text() == "payload"
    assert (d1 / cache.STAMP_NAME).is_file()
    assert cache.cached_dir("thing", "k1", _counting_build(marker)) == d1 and _builds(marker) == 1  # hit
    cache.cached_dir("thing", "k2", _counting_build(marker))  # new key = miss
    assert _builds(marker) == 2

    (d1 / "lib.so").write_text("truncat")  # corrupt content -> stamp mismatch -> rebuild
    cache.cached_dir("thing", "k1", _counting_build(marker))
    assert _builds(marker) == 3 and (d1 / "lib.so").read_text() == "payload"

    (d1 / cache.STAMP_NAME).unlink()  # incomplete entry -> rebuild
    cache.cached_dir("thing", "k1", _counting_build(marker))
    assert _builds(marker) == 4

    cache.cached_dir("thing", "k1", _counting_build(marker), validate=lambda d: False)  # invalid -> rebuild
    assert _builds(marker) == 5


def test_cached_dir_failed_build_leaves_nothing(isolated_cache: Path) -> None:
    def build(out: Path) -> None:
        (out / "half").write_text("x")
        raise BuildError("boom")

    with pytest.raises(BuildError, match="boom"):
        cache.cached_dir("fail", "k", build)
    leftovers = [p.name for p in isolated_cache.iterdir() if p.name != "locks"]
    assert leftovers == []


def test_cached_file(isolated_cache: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"

    def build(tmp: Path) -> None:
        assert tmp.suffix == ".so" and tmp.parent == isolated_cache / "ops"
        marker.open("a").write("1\n")
        tmp.write_bytes(b"\x7fELFdata")

    p = cache.cached_file("libop", ".so", "abc", build, subdir="ops")
    assert p == isolated_cache / "ops" / "libop-abc.so" and p.read_bytes() == b"\x7fELFdata"
    assert cache.cached_file("libop", ".so", "abc", build, subdir="ops") == p and _builds(marker) == 1
    p.write_bytes(b"\x7fELFdat")  # corrupt
    cache.cached_file("libop", ".so", "abc", build, subdir="ops")
    assert _builds(marker) == 2 and p.read_bytes() == b"\x7fELFdata"
    with pytest.raises(BuildError, match="did not produce"):
        cache.cached_file("none", ".so", "k", lambda tmp: None, subdir="ops")
    assert sorted(x.name for x in (isolated_cache / "ops").iterdir()) == ["libop-abc.so", "libop-abc.so.sha256"]


def test_atomic_write_bytes(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "f.bin"
    cache.atomic_write_bytes(target, b"one")
    cache.atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two" and [p.name for p in target.parent.iterdir()] == ["f.bin"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_what_killed_builds_left(isolated_cache: Path) -> None:
    """Leftovers of killed builds go at the first use of the cache; live or locked ones stay."""
    from filelock import FileLock

    dead = _dead_pid()
    root = isolated_cache
    (root / "kernels").mkdir(parents=True)
    (root / "locks").mkdir()
    stale = [root / f".emu-abc.tmp-{dead}-140-x1y2", root / "kernels" / f".libop-k1.tmp-{dead}-7.so",
             root / "kernels" / f".libop-k2.so.sha256.tmp-{dead}-7", root / f".trash-emu-old-{dead}-9"]
    (stale[0] / "obj").mkdir(parents=True)
    (stale[0] / "obj" / "a.o").write_bytes(b"half")
    for f in stale[1:3]:
        f.write_bytes(b"half")
    stale[3].mkdir()
    keep = [root / ".emu-live.tmp-1-1-abcd",                       # pid 1 is alive
            root / "kernels" / f".libop-locked.tmp-{dead}-1.so",   # dead pid, but its entry lock is held
            root / "kernels" / "libop-k1.so", root / ".hidden-user-file"]
    keep[0].mkdir()
    for f in keep[1:]:
        f.write_bytes(b"ok")
    lock = FileLock(str(root / "locks" / "kernels-libop-locked.lock"))
    with lock:
        removed = cache.sweep_stale(root)
    assert sorted(removed) == sorted(stale)
    assert not any(p.exists() for p in stale) and all(p.exists() for p in keep)
    # cache_root() sweeps once per root and process.
    again = root / f".emu-again.tmp-{dead}-1-zz"
    again.mkdir()
    cache._SWEPT.discard(root)
    assert cache.cache_root() == root and not again.exists()


_KILLED_BUILD = """
import os, subprocess, sys
from pathlib import Path
from hcomm_kit.build import cache

def build(tmp: Path) -> None:
    tmp.write_bytes(b"half-written")
    print("BUILDING", flush=True)
    subprocess.run(["sleep", "47.25"])      # a slow compiler

cache.cached_file("libslow", ".so", "k", build, subdir="kernels")
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT", "SIGKILL"])
def test_build_killed_mid_compile_leaves_nothing(isolated_cache: Path, sig: str) -> None:
    import signal

    proc = subprocess.Popen([sys.executable, "-c", _KILLED_BUILD], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "HCOMM_KIT_CACHE_DIR": str(isolated_cache)})
    assert proc.stdout.readline().strip() == "BUILDING"
    kernels = isolated_cache / "kernels"
    assert [p.name for p in kernels.iterdir() if ".tmp-" in p.name]  # the temporary .so exists now
    children: list[int] = []
    for _ in range(200):  # the "compiler" process of the build, once it runs (exec'd)
        children = [int(c) for c in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        if children and Path(f"/proc/{children[0]}/comm").read_text().strip() == "sleep":
            break
        time.sleep(0.05)
    assert children
    time.sleep(0.3)  # subprocess.run is waiting on it now (not still inside Popen())
    proc.send_signal(getattr(signal, sig))
    rc = proc.wait(timeout=30)
    proc.stdout.close()
    left = [p.name for p in kernels.iterdir()]
    if sig == "SIGKILL":
        assert rc == -signal.SIGKILL and left  # nothing can run in the killed process ...
        cache.sweep_stale(isolated_cache)      # ... so the next process's start-up removes it
        left = [p.name for p in kernels.iterdir()]
    elif sig == "SIGINT":
        assert rc != 0                          # KeyboardInterrupt: the normal exception path
    else:
        assert rc == -getattr(signal, sig)     # ended by the signal, as without hcomm-kit
    assert left == [], left
    # The slow "compiler" did not outlive the build (subprocess.run kills it on the way out); after
    # SIGKILL nothing could, so the test ends it.
    for pid in children:
        if sig == "SIGKILL":
            os.kill(pid, signal.SIGKILL)
        else:
            deadline = time.monotonic() + 10
            while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text() \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()


def _concurrent_worker(cache_dir: str, marker: str, queue) -> None:  # runs in a child process
    os.environ["HCOMM_KIT_CACHE_DIR"] = cache_dir
    path = cache.cached_dir("race", "samekey", _counting_build(Path(marker), delay=0.5))
    queue.put(str(path))


def test_concurrent_processes_build_once(isolated_cache: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_concurrent_worker, args=(str(isolated_cache), str(marker), queue)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    paths = {queue.get(timeout=10) for _ in procs}
    assert paths == {str(isolated_cache / "race-samekey")}
    assert _builds(marker) == 1


# ----------------------------------------------------------------------------- emulator build driver

DUMMY_HEADER = """#pragma once
#ifdef __cplusplus
extern "C" {
#endif
int aclDummyAdd(int a, int b);
#ifdef __cplusplus
}
#endif
"""
DUMMY_SOURCE = """#pragma GCC visibility push(default)
#include "acl/acl_dummy.h"
#pragma GCC visibility pop
#include "helper.h"

int aclDummyAdd(int a, int b) { return emu_helper(a) + b; }
"""
DUMMY_HELPER = "#pragma once\nstatic inline int emu_helper(int a) { return a * 10; }\n"


@pytest.fixture
def dummy_emu(tmp_path: Path) -> Path:
    """A minimal emulator tree (include/ + src/) that compiles with the real flags."""
    root = tmp_path / "emu"
    (root / "include" / "acl").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "include" / "acl" / "acl_dummy.h").write_text(DUMMY_HEADER)
    (root / "src" / "dummy.cc").write_text(DUMMY_SOURCE)
    (root / "src" / "helper.h").write_text(DUMMY_HELPER)
    (root / "src" / "second.cc").write_text("int emu_internal_symbol() { return 1; }\n")
    return root


@needs_cxx
def test_emulator_build_from_dummy_tree(isolated_cache: Path, dummy_emu: Path) -> None:
    import ctypes

    lib = _emulator.get_library("", root=dummy_emu)
    assert lib.name == "libhcomm_emu.so" and lib.parent.parent == isolated_cache
    assert _emulator.validate(lib.parent)
    for name in _emulator.COMPAT_NAMES:
        link = lib.parent / name
        assert link.is_symlink() and os.readlink(link) == "libhcomm_emu.so"
    assert not (lib.parent / "obj").exists()
    dll = ctypes.CDLL(str(lib.parent / "libascendcl.so"))
    assert dll.aclDummyAdd(4, 2) == 42
    with pytest.raises(AttributeError):
        dll.emu_internal_symbol  # hidden by -fvisibility=hidden
    assert _emulator.get_library("", root=dummy_emu) == lib  # cached

    (dummy_emu / "src" / "helper.h").write_text(DUMMY_HELPER.replace("10", "100"))
    lib2 = _emulator.get_library("", root=dummy_emu)  # header change -> new key
    assert lib2 != lib and ctypes.CDLL(str(lib2)).aclDummyAdd(4, 2) == 402


@needs_cxx
def test_emulator_compile_error_points_at_source(isolated_cache: Path, dummy_emu: Path) -> None:
    (dummy_emu / "src" / "second.cc").write_text("int f() {\n  int unused;\n  return 1;\n}\n")  # -Werror
    with pytest.raises(CompileError) as info:
        _emulator.get_library("", root=dummy_emu)
    assert info.value.source_path.name == "second.cc" and info.value.line == 2
    assert [p.name for p in isolated_cache.iterdir() if p.name != "locks"] == []


def test_emulator_flags_and_errors(isolated_cache: Path, tmp_path: Path) -> None:
    assert _emulator.cflags() == f"-I{_emulator.get_include()}"
    assert (_emulator.get_include().parent / "src").is_dir()
    flags = _emulator.compile_flags("address")
    assert flags[-4:-2] == ["-fno-omit-frame-pointer", "-Og"] and "-fsanitize=address,undefined" in flags
    assert "-g1" in flags and "-g" not in flags  # line tables only
    assert "-fsanitize=thread" in _emulator.compile_flags("thread")
    with pytest.raises(ConfigError, match="sanitizer"):
        _emulator.compile_flags("memory")
    (tmp_path / "empty" / "src").mkdir(parents=True)
    (tmp_path / "empty" / "include").mkdir()
    with pytest.raises(BuildError, match="no emulator sources"):
        _emulator.get_library("", root=tmp_path / "empty")


# ----------------------------------------------------------------------------- mpi helper

def test_mpirun_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.delenv("OMPI_MCA_btl", raising=False)
    argv = mpi.mpirun_argv(4, ["python", "x.py"], env={"A": "1"}, export=["PATH"], mpirun="/opt/mpirun")
    assert argv == ["/opt/mpirun", "-n", "4", "--oversubscribe", "--allow-run-as-root", "--mca", "btl", "^ofi",
                    "--tag-output", "--bind-to", "none", "-x", "PATH", "-x", "A=1", "python", "x.py"]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "--allow-run-as-root" not in mpi.mpirun_argv(1, ["true"], mpirun="m")
    monkeypatch.setenv("OMPI_MCA_btl", "self,tcp")  # the user's transport choice wins
    assert "^ofi" not in mpi.mpirun_argv(1, ["true"], mpirun="m")


@pytest.mark.mpi
def test_mpirun_runs_two_ranks() -> None:
    code = "from mpi4py import MPI; c = MPI.COMM_WORLD; print('rank', c.rank, 'of', c.size)"
    argv = mpi.mpirun_argv(2, [sys.executable, "-c", code], env={"HCOMM_KIT_LOG": "warn"})
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 of 2" in proc.stdout and "rank 1 of 2" in proc.stdout


# ----------------------------------------------------------------------------- CLI

def test_cli_config_cflags(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["config", "--cflags"]) == 0
    assert capsys.readouterr().out.strip() == f"-I{_emulator.get_include()}"
    assert cli_main(["config"]) == 2


def test_python_m_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "doctor" in proc.stdout and "config" in proc.stdout
    ver = subprocess.run([sys.executable, "-m", "hcomm_kit", "--version"], capture_output=True, text=True, timeout=60)
    from hcomm_kit import __version__

    assert ver.stdout.strip() == f"hcomm-kit {__version__}"
    # the version is a release of CHANGELOG.md (the user's record of what it holds)
    assert f"## [{__version__}] - " in (REPO / "CHANGELOG.md").read_text(), f"CHANGELOG.md has no section {__version__}"


def test_doctor_env_table(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCOMM_KIT_SOC", "nope")
    assert cli_main(["doctor", "--env"]) == 1
    out = capsys.readouterr().out
    assert all(name in out for name in envs.VARIABLES) and "INVALID" in out


def test_doctor_reports_bad_env(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCOMM_KIT_LOG", "loud")
    assert cli_main(["doctor", "--no-build"]) == 1
    captured = capsys.readouterr()
    assert "HCOMM_KIT_LOG='loud'" in captured.err and "problem" in captured.err


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not list((REPO / "hcomm_kit" / "emu" / "src").rglob("*.cc")), reason="no emulator sources yet")
def test_doctor_builds_emulator() -> None:
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "doctor"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all checks passed" in proc.stdout and "libhcomm_emu.so" in proc.stdout


def test_ci_runs_the_readme_test_command() -> None:
    """CI runs exactly what the README tells a new user to run for the test suite."""
    import re

    readme = (REPO / "README.md").read_text()
    section = readme.split("Run the test suite", 1)[1]
    command = re.search(r"```bash\n\s*(.+?)\n\s*```", section).group(1).strip()
    ci_lines = [l.strip() for l in (REPO / ".ci" / "run").read_text().splitlines()
                if l.strip() and not l.lstrip().startswith("#")]
    assert command in ci_lines, f"{command!r} not in .ci/run: {ci_lines}"
