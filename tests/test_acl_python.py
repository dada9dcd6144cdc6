"""The ACL runtime from Python through ``hcomm_kit.runtime`` (emulator backend).

A smaller set than tests/c/test_acl_runtime.cc: one test per error path of the checklist in
acl_runtime.md §4 (asserting the AclError code, the API and that the message names the API and
the bad value), plus the elapsed-time, launch-timeout, placeholder, callback and notify tests.
init/finalize runs in a subprocess so this process keeps one initialised runtime.
"""

from __future__ import annotations

import ctypes
import importlib.util
import subprocess
import sys
import textwrap
import threading
import time
from ctypes import byref, c_float, c_int, c_size_t, c_uint32, c_uint64, c_void_p
from pathlib import Path

import pytest

from hcomm_kit.base import errors
from hcomm_kit.runtime import aclrtCallback, aclrtHostFunc, load, structs

_spec = importlib.util.spec_from_file_location("_acl_c_helpers", Path(__file__).with_name("test_acl_c.py"))
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)  # type: ignore[union-attr]

OPS = {"EmptyOp": "empty", "SleepOp": "sleep", "FailOp": "fail", "CopyArgsOp": "copy", "PlaceholderOp": "ph"}


class Env:
    """The loaded runtime, the kernel directory and function handles of the test kernels."""

    def __init__(self, kdir: Path, ddir: Path) -> None:
        self.rt = load("emu")
        self.acl, self.chk = self.rt.acl, self.rt.checked
        self.kdir, self.ddir = kdir, ddir
        assert self.acl.aclInit(None) in (0, 100002)
        self.chk.aclrtSetDevice(0)
        self.bin = c_void_p()
        self.opts = structs.cpu_kernel_load_options(1)
        self.chk.aclrtBinaryLoadFromFile(str(kdir / "acl_test_kernels.json").encode(), byref(self.opts),
                                         byref(self.bin))
        self.f: dict[str, c_void_p] = {}
        for op, name in OPS.items():
            fh = c_void_p()
            self.chk.aclrtBinaryGetFunction(self.bin, op.encode(), byref(fh))
            self.f[name] = fh

    def stream(self) -> c_void_p:
        s = c_void_p()
        self.chk.aclrtCreateStream(byref(s))
        return s

    def args(self, func: str, *blobs: bytes) -> c_void_p:
        ah = c_void_p()
        self.chk.aclrtKernelArgsInit(self.f[func], byref(ah))
        for b in blobs:
            buf = ctypes.create_string_buffer(b, len(b))
            self.chk.aclrtKernelArgsAppend(ah, buf, len(b), byref(c_void_p()))
        self.chk.aclrtKernelArgsFinalize(ah)
        return ah

    def launch(self, func: str, stream, *blobs: bytes, cfg=None) -> None:
        ah = self.args(func, *blobs)
        self.chk.aclrtLaunchKernelWithConfig(self.f[func], 1, stream, byref(cfg) if cfg is not None else None, ah,
                                             None)

    def sleep(self, stream, ms: int, cfg=None) -> None:
        self.launch("sleep", stream, c_uint32(ms).value.to_bytes(4, "little"), cfg=cfg)

    def malloc(self, n: int) -> c_void_p:
        p = c_void_p()
        self.chk.aclrtMalloc(byref(p), n, 0)
        return p


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("acl_py")
    kdir, ddir = _helpers.build_kernels(root)
    e = Env(kdir, ddir)
    yield e
    e.acl.aclrtSynchronizeDevice()
    e.acl.aclrtBinaryUnLoad(e.bin)
    e.acl.aclrtResetDevice(0)


def expect(exc_info: pytest.ExceptionInfo, code: int, api: str, *needles: str) -> errors.AclError:
    err = exc_info.value
    assert isinstance(err, errors.AclError)
    assert (err.code, err.api) == (code, api), (err.code, err.api, err.message)
    assert api in err.message, err.message
    for n in needles:
        assert n in err.message, (n, err.message)
    assert str(code) in str(err) and err.name.startswith("ACL_")
    return err


# ---------------------------------------------------------------------------------------------
# init / finalize (own process), error text, devices

INIT_SCRIPT = textwrap.dedent("""
    from hcomm_kit.runtime import load
    from hcomm_kit.base import errors
    rt = load("emu"); a = rt.acl
    codes = [a.aclrtSetDevice(0), a.aclInit(None), a.aclInit(None)]
    ref = __import__("ctypes").c_uint64(99)
    codes += [a.aclFinalizeReference(__import__("ctypes").byref(ref)), ref.value]
    codes += [a.aclFinalize(), a.aclFinalize(), a.aclrtSetDevice(0)]
    try:
        rt.checked.aclFinalize()
    except errors.AclError as e:
        codes += [e.code, e.api]
    print(codes)
""")


def test_init_finalize_refcount() -> None:
    env_vars = {k: v for k, v in __import__("os").environ.items() if k != "HCOMM_KIT_SOC"}
    proc = subprocess.run([sys.executable, "-c", INIT_SCRIPT], capture_output=True, text=True, timeout=300,
                          env=env_vars)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str([100001, 0, 100002, 0, 1, 0, 100037, 100001, 100037, "aclFinalize"])


def test_errmsg_per_thread_and_cleared(env: Env) -> None:
    env.rt.recent_error_message()               # start clean (earlier tests in this process may leave text)
    assert env.rt.recent_error_message() == ""
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtSetDevice(77)
    expect(ei, 107001, "aclrtSetDevice", "77")
    assert env.acl.aclrtSetDevice(66) == 107001
    seen: list = []
    t = threading.Thread(target=lambda: seen.append(env.acl.aclGetRecentErrMsg()))
    t.start()
    t.join()
    assert seen == [None]                       # another thread's text is not visible there
    assert b"66" in env.acl.aclGetRecentErrMsg()
    assert env.acl.aclGetRecentErrMsg() is None  # cleared on read


def test_devices(env: Env) -> None:
    n, mode = c_uint32(), c_int(-1)
    env.chk.aclrtGetDeviceCount(byref(n))
    env.chk.aclrtGetRunMode(byref(mode))
    assert n.value >= 8 and mode.value == 1  # ACL_HOST
    assert env.rt.soc_name() == "Ascend910B"
    dev = ctypes.c_int32(-1)
    env.chk.aclrtGetDevice(byref(dev))
    assert dev.value == 0


# ---------------------------------------------------------------------------------------------
# 100000: NULL pointers, zero sizes, numBlocks 0, reserve, memcpy kinds, ProcessReport timeouts

def test_100000_null_and_zero_size(env: Env) -> None:
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtMalloc(byref(c_void_p()), 0, 0)
    expect(ei, 100000, "aclrtMalloc", "size")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtMalloc(None, 64, 0)
    expect(ei, 100000, "aclrtMalloc", "devPtr")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryLoadFromFile(str(env.kdir / "acl_test_kernels.json").encode(), byref(env.opts), None)
    expect(ei, 100000, "aclrtBinaryLoadFromFile", "binHandle")


def test_100000_launch_numblocks_reserve(env: Env) -> None:
    ah = env.args("empty")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtLaunchKernelWithConfig(env.f["empty"], 0, None, None, ah, None)
    expect(ei, 100000, "aclrtLaunchKernelWithConfig", "numBlocks")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtLaunchKernelWithConfig(env.f["empty"], 1, None, None, ah, c_void_p(8))
    expect(ei, 100000, "aclrtLaunchKernelWithConfig", "reserve")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtLaunchKernelWithConfig(None, 1, None, None, ah, None)
    expect(ei, 100000, "aclrtLaunchKernelWithConfig", "funcHandle")


@pytest.mark.parametrize("kind", [6, 7, -1, 8])
def test_100000_memcpy_kind(env: Env, kind: int) -> None:
    a, b = env.malloc(64), env.malloc(64)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtMemcpy(a, 64, b, 64, kind)
    expect(ei, 100000, "aclrtMemcpy", str(kind))


@pytest.mark.parametrize("timeout", [0, -2])
def test_100000_process_report_timeout(env: Env, timeout: int) -> None:
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtProcessReport(timeout)
    expect(ei, 100000, "aclrtProcessReport", str(timeout))


# ---------------------------------------------------------------------------------------------
# 107000: bad values inside the runtime

def test_107000_129th_argument(env: Env) -> None:
    ah, one = c_void_p(), ctypes.c_uint8(1)
    env.chk.aclrtKernelArgsInit(env.f["empty"], byref(ah))
    for _ in range(128):
        env.chk.aclrtKernelArgsAppend(ah, byref(one), 1, byref(c_void_p()))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtKernelArgsAppend(ah, byref(one), 1, byref(c_void_p()))
    expect(ei, 107000, "aclrtKernelArgsAppend", "129")


def test_107000_args_over_64k(env: Env) -> None:
    ah = c_void_p()
    big = ctypes.create_string_buffer(65 * 1024)
    env.chk.aclrtKernelArgsInit(env.f["empty"], byref(ah))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtKernelArgsAppend(ah, big, 64 * 1024 + 1, byref(c_void_p()))
    expect(ei, 107000, "aclrtKernelArgsAppend", str(64 * 1024 + 1))


def test_107000_both_timeout_attributes(env: Env) -> None:
    cfg = structs.launch_cfg(timeout_s=1, timeout_us=1000)
    ah = env.args("empty")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtLaunchKernelWithConfig(env.f["empty"], 1, None, byref(cfg), ah, None)
    expect(ei, 107000, "aclrtLaunchKernelWithConfig", "(7)", "(8)")


def test_107000_cpu_kernel_mode_for_load_call(env: Env) -> None:
    opts2 = structs.cpu_kernel_load_options(2)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryLoadFromFile(str(env.kdir / "acl_test_kernels.json").encode(), byref(opts2),
                                        byref(c_void_p()))
    expect(ei, 107000, "aclrtBinaryLoadFromFile", "cpuKernelMode 2")
    data = (env.kdir / "acl_test_kernels.so").read_bytes()
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryLoadFromData(data, len(data), byref(env.opts), byref(c_void_p()))
    expect(ei, 107000, "aclrtBinaryLoadFromData", "cpuKernelMode 1")


def test_107000_option_type_and_null_array(env: Env) -> None:
    opts = structs.cpu_kernel_load_options(1)
    opts._keep[0].type = 4
    path = str(env.kdir / "acl_test_kernels.json").encode()
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryLoadFromFile(path, byref(opts), byref(c_void_p()))
    expect(ei, 107000, "aclrtBinaryLoadFromFile", "type 4")
    null_opts = structs.aclrtBinaryLoadOptions(None, 1)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryLoadFromFile(path, byref(null_opts), byref(c_void_p()))
    expect(ei, 107000, "aclrtBinaryLoadFromFile", "NULL")


def test_107000_sync_timeout_below_minus_one(env: Env) -> None:
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtSynchronizeStreamWithTimeout(None, -2)
    expect(ei, 107000, "aclrtSynchronizeStreamWithTimeout", "-2")
    ev = c_void_p()
    env.chk.aclrtCreateEvent(byref(ev))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtSynchronizeEventWithTimeout(ev, -5)
    expect(ei, 107000, "aclrtSynchronizeEventWithTimeout", "-5")
    env.chk.aclrtDestroyEvent(ev)


def test_107000_placeholder_buffer_on_ordinary_argument(env: Env) -> None:
    ah, p = c_void_p(), c_void_p()
    v = c_uint64(5)
    env.chk.aclrtKernelArgsInit(env.f["ph"], byref(ah))
    env.chk.aclrtKernelArgsAppend(ah, byref(v), 8, byref(p))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtKernelArgsGetPlaceHolderBuffer(ah, p, 16, byref(c_void_p()))
    expect(ei, 107000, "aclrtKernelArgsGetPlaceHolderBuffer", "ordinary")


def test_107000_register_cpu_func_on_non_aicpu_binary(env: Env) -> None:
    data = (env.kdir / "acl_test_kernels.so").read_bytes()
    b = c_void_p()
    env.chk.aclrtBinaryLoadFromData(data, len(data), None, byref(b))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtRegisterCpuFunc(b, b"EmptyKernel", b"EmptyKernel", byref(c_void_p()))
    expect(ei, 107000, "aclrtRegisterCpuFunc", "cpuKernelMode")
    env.chk.aclrtBinaryUnLoad(b)


def test_mode2_register_cpu_func(env: Env) -> None:
    data = (env.kdir / "acl_test_kernels.so").read_bytes()
    b, f1, f2 = c_void_p(), c_void_p(), c_void_p()
    env.chk.aclrtBinaryLoadFromData(data, len(data), byref(structs.cpu_kernel_load_options(2)), byref(b))
    env.chk.aclrtRegisterCpuFunc(b, b"EmptyKernel", b"EmptyKernel", byref(f1))
    env.chk.aclrtRegisterCpuFunc(b, b"EmptyKernel", b"EmptyKernel", byref(f2))
    assert f1.value == f2.value
    ah = c_void_p()
    env.chk.aclrtKernelArgsInit(f1, byref(ah))
    env.chk.aclrtKernelArgsFinalize(ah)
    env.chk.aclrtLaunchKernelWithConfig(f1, 1, None, None, ah, None)
    env.chk.aclrtSynchronizeStream(None)
    env.chk.aclrtBinaryUnLoad(b)


# ---------------------------------------------------------------------------------------------
# kernel-binary file errors (own codes; the message names the path and the key)

@pytest.mark.parametrize("name,mode,code,needle", [
    ("bad_malformed.json", 1, 100006, "bad_malformed.json"),
    ("bad_missing_function_name.json", 1, 100007, "functionName"),
    ("bad_missing_so.json", 0, 107009, "libhcomm_kit_no_such_kernels.so"),
    ("bad_missing_so.json", 1, 107009, "bad_missing_so.so"),
])
def test_binary_file_errors(env: Env, name: str, mode: int, code: int, needle: str) -> None:
    path = str(env.kdir / name)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryLoadFromFile(path.encode(), byref(structs.cpu_kernel_load_options(mode)),
                                        byref(c_void_p()))
    err = expect(ei, code, "aclrtBinaryLoadFromFile", needle)
    assert str(env.kdir) in err.message


def test_binary_missing_symbol_and_unknown_key(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCOMM_KIT_KERNEL_PATH", str(env.ddir))
    b = c_void_p()
    env.chk.aclrtBinaryLoadFromFile(str(env.kdir / "bad_missing_symbol.json").encode(),
                                    byref(structs.cpu_kernel_load_options(0)), byref(b))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryGetFunction(b, b"MissingSymbolOp", byref(c_void_p()))
    expect(ei, 107042, "aclrtBinaryGetFunction", "NoSuchKernelSymbol")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtBinaryGetFunction(env.bin, b"NotAnOp", byref(c_void_p()))
    expect(ei, 100029, "aclrtBinaryGetFunction", "NotAnOp")
    env.chk.aclrtBinaryUnLoad(b)


# ---------------------------------------------------------------------------------------------
# 107017, 207000

def test_107017_invalid_function_handle(env: Env) -> None:
    b, f = c_void_p(), c_void_p()
    env.chk.aclrtBinaryLoadFromFile(str(env.kdir / "acl_test_kernels.json").encode(), byref(env.opts), byref(b))
    env.chk.aclrtBinaryGetFunction(b, b"EmptyOp", byref(f))
    env.chk.aclrtBinaryUnLoad(b)
    ah = env.args("empty")
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtLaunchKernelWithConfig(f, 1, None, None, ah, None)
    expect(ei, 107017, "aclrtLaunchKernelWithConfig", hex(f.value)[2:])


def test_207000_wrong_order(env: Env) -> None:
    ah, slot = c_void_p(), c_void_p()
    v = c_uint64(1)
    env.chk.aclrtKernelArgsInit(env.f["ph"], byref(ah))
    env.chk.aclrtKernelArgsAppendPlaceHolder(ah, byref(slot))
    env.chk.aclrtKernelArgsGetPlaceHolderBuffer(ah, slot, 8, byref(c_void_p()))
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtKernelArgsAppend(ah, byref(v), 8, byref(c_void_p()))
    expect(ei, 207000, "aclrtKernelArgsAppend", "aclrtKernelArgsGetPlaceHolderBuffer")
    env.chk.aclrtKernelArgsFinalize(ah)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtKernelArgsAppendPlaceHolder(ah, byref(c_void_p()))
    expect(ei, 207000, "aclrtKernelArgsAppendPlaceHolder", "aclrtKernelArgsFinalize")


# ---------------------------------------------------------------------------------------------
# sync timeouts, callbacks

def test_507046_stream_sync_timeout(env: Env) -> None:
    s = env.stream()
    env.sleep(s, 300)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtSynchronizeStreamWithTimeout(s, 30)
    expect(ei, 507046, "aclrtSynchronizeStreamWithTimeout", "30 ms")
    env.chk.aclrtSynchronizeStream(s)
    env.chk.aclrtDestroyStream(s)


def test_507047_event_sync_timeout(env: Env) -> None:
    s, ev = env.stream(), c_void_p()
    env.chk.aclrtCreateEvent(byref(ev))
    env.sleep(s, 300)
    env.chk.aclrtRecordEvent(ev, s)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtSynchronizeEventWithTimeout(ev, 25)
    expect(ei, 507047, "aclrtSynchronizeEventWithTimeout", "25 ms")
    env.chk.aclrtSynchronizeEvent(ev)
    env.chk.aclrtDestroyEvent(ev)
    env.chk.aclrtDestroyStream(s)


def test_107012_not_subscribed(env: Env) -> None:
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtProcessReport(10)
    expect(ei, 107012, "aclrtProcessReport", "not subscribed")


def test_callbacks_and_507012(env: Env) -> None:
    s = env.stream()
    calls: list[int] = []
    cb = aclrtCallback(lambda data: calls.append(data or 0))  # kept alive for the whole test
    results: dict[str, object] = {}
    ready, stop, timed_out = threading.Event(), threading.Event(), threading.Event()

    def reporter() -> None:
        results["tid"] = threading.get_ident()  # pthread_self() on Linux
        ready.set()
        while "subscribed" not in results:
            time.sleep(0.001)
        try:
            env.chk.aclrtProcessReport(20)
        except errors.AclError as e:
            results["timeout"] = e
        timed_out.set()
        while not stop.is_set():
            env.acl.aclrtProcessReport(20)

    t = threading.Thread(target=reporter)
    t.start()
    ready.wait()
    env.chk.aclrtSubscribeReport(results["tid"], s)
    results["subscribed"] = True
    assert timed_out.wait(10)  # nothing pending yet: the first ProcessReport times out
    env.chk.aclrtLaunchCallback(cb, c_void_p(1), 1, s)  # ACL_CALLBACK_BLOCK
    env.chk.aclrtLaunchCallback(cb, c_void_p(2), 0, s)  # ACL_CALLBACK_NO_BLOCK
    env.chk.aclrtSynchronizeStream(s)
    deadline = time.monotonic() + 5
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    stop.set()
    t.join()
    assert calls == [1, 2]
    err = results["timeout"]
    assert isinstance(err, errors.AclError) and (err.code, err.api) == (507012, "aclrtProcessReport")
    assert "20 ms" in err.message
    env.chk.aclrtUnSubscribeReport(results["tid"], s)
    env.chk.aclrtDestroyStream(s)


# ---------------------------------------------------------------------------------------------
# asynchronous failures: reported by the NEXT sync, never by the launch

def test_507017_launch_timeout_attr7(env: Env) -> None:
    s = env.stream()
    cfg = structs.launch_cfg(timeout_s=1)
    t0 = time.monotonic()
    env.sleep(s, 1500, cfg=cfg)  # launch returns at once, no error
    assert time.monotonic() - t0 < 0.2
    with pytest.raises(errors.OpTimeoutError) as ei:
        env.chk.aclrtSynchronizeStream(s)
    elapsed = time.monotonic() - t0
    expect(ei, 507017, "aclrtSynchronizeStream", "SleepKernel")
    assert 0.9 <= elapsed < 1.45, elapsed
    env.chk.aclrtSynchronizeStream(s)  # reported once
    env.chk.aclrtDestroyStream(s)


def test_507017_launch_timeout_attr8(env: Env) -> None:
    s = env.stream()
    env.sleep(s, 600, cfg=structs.launch_cfg(timeout_us=150_000))
    with pytest.raises(errors.OpTimeoutError) as ei:
        env.chk.aclrtSynchronizeStream(s)
    expect(ei, 507017, "aclrtSynchronizeStream", "SleepKernel")
    env.chk.aclrtDestroyStream(s)


def test_507018_nonzero_return(env: Env) -> None:
    s = env.stream()
    env.launch("fail", s)
    with pytest.raises(errors.KernelError) as ei:
        env.chk.aclrtSynchronizeStream(s)
    expect(ei, 507018, "aclrtSynchronizeStream", "FailKernel", "7")
    env.launch("empty", s)
    env.chk.aclrtSynchronizeStream(s)
    env.chk.aclrtDestroyStream(s)


def test_107020_notify_wait_timeout_seconds(env: Env) -> None:
    s, n = env.stream(), c_void_p()
    env.chk.aclrtCreateNotify(byref(n), 0)
    t0 = time.monotonic()
    env.chk.aclrtWaitAndResetNotify(n, s, 1)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtSynchronizeStream(s)
    assert 0.9 <= time.monotonic() - t0 < 3.0
    expect(ei, 107020, "aclrtSynchronizeStream", "notify", "1 s")
    # Recorded from another stream, 0 = wait forever.
    s2 = env.stream()
    env.chk.aclrtWaitAndResetNotify(n, s, 0)
    env.sleep(s2, 50)
    env.chk.aclrtRecordNotify(n, s2)
    env.chk.aclrtSynchronizeStream(s)
    nid = c_uint32()
    env.chk.aclrtGetNotifyId(n, byref(nid))
    env.chk.aclrtDestroyNotify(n)
    env.chk.aclrtDestroyStream(s)
    env.chk.aclrtDestroyStream(s2)


# ---------------------------------------------------------------------------------------------
# elapsed time, placeholder, memory

def test_event_elapsed_time(env: Env) -> None:
    s, e1, e2 = env.stream(), c_void_p(), c_void_p()
    env.chk.aclrtCreateEvent(byref(e1))
    env.chk.aclrtCreateEvent(byref(e2))
    host_sleep = aclrtHostFunc(lambda _arg: time.sleep(0.2))
    env.chk.aclrtRecordEvent(e1, s)
    env.chk.aclrtLaunchHostFunc(s, host_sleep, None)
    env.chk.aclrtRecordEvent(e2, s)
    env.chk.aclrtSynchronizeStream(s)
    ms = c_float()
    env.chk.aclrtEventElapsedTime(byref(ms), e1, e2)
    assert 160.0 <= ms.value <= 240.0, ms.value
    for e in (e1, e2):
        env.chk.aclrtDestroyEvent(e)
    env.chk.aclrtDestroyStream(s)


def test_placeholder(env: Env) -> None:
    s = env.stream()
    out = env.malloc(64)
    data = b"python-placeholder!"
    ah, p = c_void_p(), c_void_p()
    env.chk.aclrtKernelArgsInit(env.f["ph"], byref(ah))
    env.chk.aclrtKernelArgsAppend(ah, byref(c_void_p(out.value)), 8, byref(c_void_p()))
    env.chk.aclrtKernelArgsAppendPlaceHolder(ah, byref(p))
    env.chk.aclrtKernelArgsAppend(ah, byref(c_uint32(len(data))), 4, byref(c_void_p()))
    buf = c_void_p()
    env.chk.aclrtKernelArgsGetPlaceHolderBuffer(ah, p, len(data), byref(buf))
    ctypes.memmove(buf, data, len(data))
    env.chk.aclrtKernelArgsFinalize(ah)
    env.chk.aclrtLaunchKernelWithConfig(env.f["ph"], 1, s, None, ah, None)
    env.chk.aclrtSynchronizeStream(s)
    got = ctypes.create_string_buffer(64)
    env.chk.aclrtMemcpy(got, 64, out, len(data), 2)  # DEVICE_TO_HOST
    assert got.raw[: len(data)] == data
    env.chk.aclrtFree(out)
    env.chk.aclrtDestroyStream(s)


def test_launch_with_host_args_copies_blob(env: Env) -> None:
    s = env.stream()
    out = env.malloc(64)
    payload = b"0123456789abcdef"
    blob = ctypes.create_string_buffer(out.value.to_bytes(8, "little") + bytes(8) + (16).to_bytes(4, "little")
                                       + payload, 36)
    ph = structs.aclrtPlaceHolderInfo(8, 20)
    env.sleep(s, 100)
    env.chk.aclrtLaunchKernelWithHostArgs(env.f["ph"], 1, s, None, blob, 36, byref(ph), 1)
    ctypes.memset(blob, 0xFF, 36)  # reuse the blob at once
    env.chk.aclrtSynchronizeStream(s)
    got = ctypes.create_string_buffer(16)
    env.chk.aclrtMemcpy(got, 16, out, 16, 2)
    assert got.raw == payload
    env.chk.aclrtFree(out)
    env.chk.aclrtDestroyStream(s)


@pytest.mark.parametrize("size,policy,usable", [(1, 0, 64), (32, 0, 64), (33, 0, 96), (1, 6, 32)])
def test_malloc_rounding(env: Env, size: int, policy: int, usable: int) -> None:
    p = c_void_p()
    env.chk.aclrtMalloc(byref(p), size, policy)
    assert p.value % 64 == 0
    src = ctypes.create_string_buffer(usable + 1)
    env.chk.aclrtMemcpy(p, usable, src, usable, 1)
    with pytest.raises(errors.AclError) as ei:
        env.chk.aclrtMemcpy(p, usable + 1, src, usable + 1, 1)
    expect(ei, 107000, "aclrtMemcpy", "runs past")
    env.chk.aclrtFree(p)


def test_memcpy_async_pageable_is_synchronous(env: Env) -> None:
    s, d = env.stream(), env.malloc(64)
    env.sleep(s, 150)
    src = ctypes.create_string_buffer(b"x" * 64, 64)
    t0 = time.monotonic()
    env.chk.aclrtMemcpyAsync(d, 64, src, 64, 1, s)
    assert time.monotonic() - t0 >= 0.1
    got = ctypes.create_string_buffer(64)
    env.chk.aclrtMemcpy(got, 64, d, 64, 2)
    assert got.raw == b"x" * 64
    env.chk.aclrtFree(d)
    env.chk.aclrtDestroyStream(s)


def test_args_packed_layout(env: Env) -> None:
    s, out = env.stream(), env.malloc(64)
    parts = [out.value.to_bytes(8, "little"), (23).to_bytes(4, "little"), b"\xa1", b"\xc3\xb2",
             (0x1122334455667788).to_bytes(8, "little")]
    env.launch("copy", s, *parts)
    env.chk.aclrtSynchronizeStream(s)
    got = ctypes.create_string_buffer(23)
    env.chk.aclrtMemcpy(got, 23, out, 23, 2)
    assert got.raw == b"".join(parts)
    env.chk.aclrtFree(out)
    env.chk.aclrtDestroyStream(s)


def test_get_handle_and_mem_size(env: Env) -> None:
    hs, ms = c_size_t(), c_size_t()
    env.chk.aclrtKernelArgsGetHandleMemSize(env.f["copy"], byref(hs))
    env.chk.aclrtKernelArgsGetMemSize(env.f["copy"], 40, byref(ms))
    assert hs.value > 0 and ms.value == 40
