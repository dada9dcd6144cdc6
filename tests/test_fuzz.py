"""Hostile inputs to the emulator's C API: the fuzzing suite (tests/fuzz/) and the issue's cases.

* Regression corpus (quick): every stored input of ``tests/fuzz/regressions/<target>/`` (the issue's
  cases, encoded by tests/fuzz/regressions.py, plus inputs the fuzzers once crashed on) and the seed
  corpus, replayed through each target built with any C++ compiler; the targets assert the
  documented return codes and buffer layouts (see the targets' headers). Slow: the same replay
  against the ASan+UBSan build of the emulator.
* Coverage-guided fuzzing (slow): each target under libFuzzer (clang) for
  ``HCOMM_KIT_FUZZ_SECONDS`` seconds (default 12; the hcomm target half of it per product). Without
  clang the test skips and says how to install it; in CI (``CI=true``) it fails instead, since
  .ci/run installs clang.
* Direct checks of the same edge cases through ctypes, with their messages: the op-info loader
  (FIFO, /dev/zero, directory, a 17 MB file, duplicate keys, wrong types) and the size limits of
  the args-handle, launch and memory calls.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from ctypes import byref, c_size_t, c_void_p
from pathlib import Path

import pytest

from hcomm_kit.base import envs, errors
from hcomm_kit.runtime import load, structs

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
import harness  # noqa: E402
import regressions  # noqa: E402

SIZE_MAX = 2**64 - 1
RUNS = [("json", None), ("args", None), ("hcomm", "Ascend910B"), ("hcomm", "Ascend950")]


def _inputs(target: str) -> list[Path]:
    dirs = [harness.REGRESSION_DIR / target, harness.CORPUS_DIR / target]
    return [p for d in dirs if d.is_dir() for p in sorted(d.iterdir()) if p.is_file()]


def _replay(bindir: Path, target: str, soc: str | None) -> None:
    files = _inputs(target)
    proc = harness.replay(bindir / f"replay_{target}", files, soc=soc, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"replay of {target} inputs failed (exit {proc.returncode}):\n{out[-8000:]}"
    assert f"replayed {len(files)} inputs" in proc.stdout, out[-2000:]


# ---- the regression corpus ----------------------------------------------------------------------
def test_regression_files_match_their_encoder() -> None:
    """The stored issue cases are exactly what tests/fuzz/regressions.py encodes (no drift)."""
    for target, cases in regressions.CASES.items():
        for name, data in cases.items():
            path = harness.REGRESSION_DIR / target / name
            assert path.is_file(), f"{path} missing: run `python tests/fuzz/regressions.py`"
            assert path.read_bytes() == data, f"{path} differs from its encoding in regressions.py"
    found = [p.name for t in harness.TARGETS for p in (harness.REGRESSION_DIR / t).glob("found-*")]
    assert found, "the fuzzers' own finds are kept as regressions too"


@pytest.fixture(scope="module")
def replay_dir() -> Path:
    return harness.build_replay()


@pytest.mark.parametrize("target,soc", RUNS, ids=[f"{t}-{s or 'default'}" for t, s in RUNS])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_regression_corpus(replay_dir: Path, target: str, soc: str | None) -> None:
    _replay(replay_dir, target, soc)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("target,soc", RUNS, ids=[f"{t}-{s or 'default'}" for t, s in RUNS])
def test_regression_corpus_under_sanitizers(target: str, soc: str | None) -> None:
    """The same inputs against the ASan+UBSan emulator: no memory error or UB inside the library."""
    _replay(harness.build_replay(sanitize="address"), target, soc)


# ---- coverage-guided fuzzing --------------------------------------------------------------------
@pytest.fixture(scope="module")
def libfuzzer_dir() -> Path:
    clang = harness.find_clang()
    if clang is None:
        why = harness.why_no_libfuzzer()
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI must run the fuzzers: {why}")
        pytest.skip(why)
    return harness.build_libfuzzer(clang)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("target,soc", RUNS, ids=[f"{t}-{s or 'default'}" for t, s in RUNS])
def test_libfuzzer(libfuzzer_dir: Path, target: str, soc: str | None, tmp_path: Path) -> None:
    budget = envs.fuzz_seconds()
    if budget == 0:
        pytest.skip("HCOMM_KIT_FUZZ_SECONDS=0: fuzzing runs disabled (the regression corpus still runs)")
    seconds = budget / 2 if target == "hcomm" else budget
    res = harness.fuzz(libfuzzer_dir, target, seconds, tmp_path, soc=soc)
    print(f"fuzz_{target} ({soc or 'default'}): {res.executions} executions in {seconds:g} s, "
          f"coverage {res.coverage}, {res.new_units} new units")
    if res.crash is not None:
        data = res.crash.read_bytes()
        pytest.fail(f"fuzz_{target} found a failing input ({len(data)} bytes: {data[:256].hex()}); keep it as "
                    f"tests/fuzz/regressions/{target}/found-<what> once fixed.\n{res.log[-6000:]}")
    assert res.returncode == 0, res.log[-4000:]
    assert res.executions > 500, f"the fuzzer barely ran:\n{res.log[-3000:]}"


# ---- the same edge cases, called directly ---------------------------------------------------------
class Acl:
    """The emulator runtime with device 0 set and the fuzz kernel (FuzzNop) loaded."""

    def __init__(self, kernel_dir: Path) -> None:
        self.rt = load("emu")
        self.acl, self.chk = self.rt.acl, self.rt.checked
        assert self.acl.aclInit(None) in (0, 100002)
        self.chk.aclrtSetDevice(0)
        self.rt.recent_error_message()
        self.bin = c_void_p()
        self.chk.aclrtBinaryLoadFromFile(str(kernel_dir / "fuzz_kernels.json").encode(),
                                         byref(structs.cpu_kernel_load_options(1)), byref(self.bin))
        self.fn = c_void_p()
        self.chk.aclrtBinaryGetFunction(self.bin, b"FuzzNop", byref(self.fn))

    def fails(self, api: str, code: int, *args, needles: tuple[str, ...] = ()) -> str:
        with pytest.raises(errors.AclError) as ei:
            getattr(self.chk, api)(*args)
        err = ei.value
        assert (err.code, err.api) == (code, api), (err.code, err.api, err.message)
        for n in needles:
            assert n in err.message, (n, err.message)
        return err.message

    def load_json(self, path: Path) -> None:
        self.chk.aclrtBinaryLoadFromFile(str(path).encode(), byref(structs.cpu_kernel_load_options(1)),
                                         byref(c_void_p()))


@pytest.fixture(scope="module")
def acl() -> Acl:
    a = Acl(harness.build_kernels())
    yield a
    a.acl.aclrtSynchronizeDevice()
    a.acl.aclrtBinaryUnLoad(a.bin)


def test_loader_refuses_fifo_without_blocking(acl: Acl, tmp_path: Path) -> None:
    fifo = tmp_path / "op.json"
    os.mkfifo(fifo)
    result: list = []

    def call() -> None:
        try:
            acl.load_json(fifo)
        except errors.AclError as e:
            result.append(e)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the reader before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("aclrtBinaryLoadFromFile blocked on a FIFO")
    assert result and result[0].code == 100003, result
    assert "FIFO" in result[0].message and str(fifo) in result[0].message


@pytest.mark.parametrize("kind", ["dev-zero", "directory"])
def test_loader_refuses_non_regular_files(acl: Acl, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "op.json"
    if kind == "dev-zero":
        os.symlink("/dev/zero", path)
        what = "character device"
    else:
        path.mkdir()
        what = "directory"
    msg = acl.fails("aclrtBinaryLoadFromFile", 100003, str(path).encode(),
                    byref(structs.cpu_kernel_load_options(1)), byref(c_void_p()), needles=(what, str(path)))
    assert "regular file" in msg


def test_loader_refuses_a_17_mb_file(acl: Acl, tmp_path: Path) -> None:
    path = tmp_path / "op.json"
    with open(path, "wb") as fh:
        fh.write(b'{"Op": {"opInfo": {"functionName": "F", "kernelSo": "x.so"}}, "pad": "')
        fh.write(b"x" * 17_000_000)
        fh.write(b'"}')
    acl.fails("aclrtBinaryLoadFromFile", 100005, str(path).encode(), byref(structs.cpu_kernel_load_options(1)),
              byref(c_void_p()), needles=("4194304 bytes", "17000", str(path)))


@pytest.mark.parametrize("text,code,needles", [
    ('{"Op": {"opInfo": {"functionName": "F",\n "functionName": "G", "kernelSo": "x.so"}}}', 100006,
     ('duplicate key "functionName"', "line 2, column 2", "first at line 1, column 20")),
    ('{"Op": {"opInfo": {"functionName": 5, "kernelSo": "x.so"}}}', 100008,
     ('"Op.opInfo.functionName" must be a string, not a number',)),
    ('{"Op": {"opInfo": {"functionName": "F", "kernelSo": ["x.so"]}}}', 100008,
     ('"Op.opInfo.kernelSo" must be a string, not a array',)),
    ('{"Op": {"opInfo": "F"}}', 100008, ('"Op.opInfo" must be an object, not a string',)),
    ('{"Op": {"opInfo": {"functionName": "", "kernelSo": "x.so"}}}', 100008,
     ('"Op.opInfo.functionName" must be a non-empty string',)),
    ('{"Op": {"opInfo": {"kernelSo": "x.so"}}}', 100007, ('"Op.opInfo.functionName" is missing',)),
])
def test_loader_reports_duplicates_and_types(acl: Acl, tmp_path: Path, text: str, code: int,
                                            needles: tuple[str, ...]) -> None:
    path = tmp_path / "op.json"
    path.write_text(text)
    acl.fails("aclrtBinaryLoadFromFile", code, str(path).encode(), byref(structs.cpu_kernel_load_options(1)),
              byref(c_void_p()), needles=(*needles, str(path)))


def test_args_handle_size_overflows(acl: Acl) -> None:
    ah = c_void_p()
    acl.chk.aclrtKernelArgsInit(acl.fn, byref(ah))
    eight = ctypes.create_string_buffer(8)
    acl.chk.aclrtKernelArgsAppend(ah, eight, 8, byref(c_void_p()))
    for size in (SIZE_MAX, SIZE_MAX - 7, 65536 - 7):
        acl.fails("aclrtKernelArgsAppend", 107000, ah, eight, c_size_t(size), byref(c_void_p()),
                  needles=(str(size), "65536-byte argument buffer"))
    ph = c_void_p()
    acl.chk.aclrtKernelArgsAppendPlaceHolder(ah, byref(ph))
    for size in (SIZE_MAX - 7, SIZE_MAX, 65536 - 15):
        acl.fails("aclrtKernelArgsGetPlaceHolderBuffer", 107000, ah, ph, c_size_t(size), byref(c_void_p()),
                  needles=(str(size), "overflows"))
    buf = c_void_p()
    acl.chk.aclrtKernelArgsGetPlaceHolderBuffer(ah, ph, 65536 - 16, byref(buf))  # exactly the room left
    ctypes.memset(buf, 0x5A, 65536 - 16)
    misaligned = c_void_p(ph.value + 1)
    acl.fails("aclrtKernelArgsParaUpdate", 107000, ah, misaligned, eight, 8, needles=("does not belong",))
    acl.chk.aclrtKernelArgsFinalize(ah)
    acl.chk.aclrtLaunchKernelWithConfig(acl.fn, 1, None, None, ah, None)
    acl.chk.aclrtSynchronizeStream(None)
    handle = ctypes.create_string_buffer(4096)
    acl.fails("aclrtKernelArgsInitByUserMem", 107000, acl.fn, handle, eight, c_size_t(2**33),
              needles=("8589934592", "32-bit"))


def test_launch_size_checks(acl: Acl) -> None:
    blob = ctypes.create_string_buffer(64)
    acl.fails("aclrtLaunchKernelWithHostArgs", 107000, acl.fn, 1, None, None, blob, c_size_t(2**33), None, 0,
              needles=("argsSize 8589934592",))
    ph = structs.aclrtPlaceHolderInfo() if hasattr(structs, "aclrtPlaceHolderInfo") else None
    if ph is not None:
        acl.fails("aclrtLaunchKernelWithHostArgs", 107000, acl.fn, 1, None, None, blob, 64, byref(ph),
                  c_size_t(2**40), needles=("placeHolderNum 1099511627776",))
    dev = c_void_p()
    acl.chk.aclrtMalloc(byref(dev), 256, 0)
    acl.fails("aclrtLaunchKernel", 107000, acl.fn, 1, dev, c_size_t(2**33), None, needles=("argsSize 8589934592",))
    acl.chk.aclrtFree(dev)


def test_memory_size_overflows(acl: Acl) -> None:
    p = c_void_p()
    for size in (SIZE_MAX, SIZE_MAX - 16, 2**63):
        acl.fails("aclrtMalloc", 207001, byref(p), c_size_t(size), 0, needles=(str(size),))
        acl.fails("aclrtMallocHost", 207001, byref(p), c_size_t(size), needles=(str(size),))
    dev = c_void_p()
    acl.chk.aclrtMalloc(byref(dev), 64, 0)
    host = ctypes.create_string_buffer(64)
    # A range that wraps the address space is refused before anything computes its end.
    acl.fails("aclrtMemcpy", 107000, c_void_p(2**64 - 32), c_size_t(SIZE_MAX), host, c_size_t(64), 0,
              needles=("end of the address space",))
    acl.fails("aclrtMemset", 107000, dev, c_size_t(SIZE_MAX), 0, c_size_t(SIZE_MAX), needles=("address space",))
    acl.fails("aclrtMemcpy", 100000, dev, 64, host, 64, 99, needles=("kind 99",))
    acl.chk.aclrtFree(dev)
