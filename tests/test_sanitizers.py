"""Runs tests/c/test_acl_runtime.cc against the sanitizer builds of the emulator:

* ``address``: library from ``get_library(sanitize='address')`` (ASan + UBSan), program and kernels
  compiled with ``-fsanitize=address,undefined``;
* ``thread``: library from ``get_library(sanitize='thread')``, program and kernels with
  ``-fsanitize=thread``.

The subtests whose kernel crashes on purpose (SIGSEGV caught by the emulator's guard) are skipped
with ``ACL_TEST_SKIP_CRASH=1``: the sanitizers own the SIGSEGV handler and would report the fault
instead of letting the emulator turn it into 507018.

Leak checking stays on (``detect_leaks=1``). The LeakSanitizer suppressions below cover only
memory the emulator keeps on purpose until exit:

* ``pthread_create``: thread control blocks / static TLS of detached threads still alive at exit
  (stream workers are detached; a worker abandoned by the launch-timeout watchdog keeps running
  its sleeping kernel after the process has moved on, and the watchdog thread never exits);
* ``emu::device_get``: ``Device`` objects are retired, not freed, by ``aclFinalize`` (handles the
  user failed to destroy may still point at them; see ``finalize_all`` in acl_core.cc).

Anything else reported (a use after free, a data race, a UBSan "runtime error", another leak)
fails the test.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("_acl_c_helpers", Path(__file__).with_name("test_acl_c.py"))
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)  # type: ignore[union-attr]

LSAN_SUPPRESSIONS = """\
# Detached emulator threads (stream workers, abandoned kernel workers, watchdog) alive at exit.
leak:pthread_create
# Device objects retired by aclFinalize (acl_core.cc finalize_all), by design.
leak:emu::device_get
"""

SANITIZER_ERROR_RE = re.compile(
    r"(ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|WARNING: ThreadSanitizer|runtime error:)"
)


def report_text(out: str, limit: int = 6000) -> str:
    """The sanitizer reports of ``out`` themselves (up to ``limit`` characters from each of the
    first two), then the output's tail: a report followed by many lines is not lost to the tail."""
    parts = [out[m.start():m.start() + limit] for m in list(SANITIZER_ERROR_RE.finditer(out))[:2]]
    return "\n...\n".join(parts + [out[-4000:]])


def _env(mode: str, tmp: Path) -> dict[str, str]:
    env = {"ACL_TEST_SKIP_CRASH": "1"}
    if mode == "address":
        supp = tmp / "lsan.supp"
        supp.write_text(LSAN_SUPPRESSIONS)
        env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:halt_on_error=1:handle_segv=1"
        env["LSAN_OPTIONS"] = f"suppressions={supp}:print_suppressions=0"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=0"
    else:
        # halt_on_error=0: collect every report in one run; the output check below fails the test.
        env["TSAN_OPTIONS"] = "second_deadlock_stack=1:halt_on_error=0:report_signal_unsafe=0"
    return env


def test_reports_and_build_flags_are_recognized(tmp_path: Path) -> None:
    """Quick: what the slow tests rely on to fail (report patterns, sanitizer flags of both builds)."""
    from hcomm_kit.build import emulator as _emulator

    for line in ("==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x602",
                 "==1==ERROR: LeakSanitizer: detected memory leaks",
                 "WARNING: ThreadSanitizer: data race (pid=7)",
                 "json.cc:12:5: runtime error: signed integer overflow"):
        assert SANITIZER_ERROR_RE.search(line), line
    assert not SANITIZER_ERROR_RE.search("42 passed, 0 failed")
    for mode, flag in (("address", "-fsanitize=address"), ("thread", "-fsanitize=thread")):
        assert any(f.startswith(flag) for f in _emulator.compile_flags(mode))
        assert any(f.startswith(flag) for f in _helpers.SANITIZE_CFLAGS[mode])
    assert "detect_leaks=1" in _env("address", tmp_path)["ASAN_OPTIONS"]


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("mode", ["address", "thread"])
def test_acl_runtime_under_sanitizer(mode: str, tmp_path: Path) -> None:
    kdir, ddir = _helpers.build_kernels(tmp_path, mode)
    # -O0: every memory access stays instrumented, and the program compiles ~10x faster than at -O2
    # (the emulator library under test is built by get_library(sanitize=mode) with its own flags).
    exe = _helpers.build_program(tmp_path, mode, opt="-O0")
    proc = _helpers.run_program(exe, kdir, ddir, env=_env(mode, tmp_path), timeout=600)
    out = proc.stdout + proc.stderr
    print(out[-20000:])
    passed, failed = _helpers.summary(proc)
    reports = SANITIZER_ERROR_RE.findall(out)
    assert not reports, f"{len(reports)} sanitizer report(s) under {mode}:\n{report_text(out)}"
    assert failed == 0 and proc.returncode == 0, out[-20000:]
    assert passed > 500
    assert "skipped: crashing-kernel subtests" in proc.stdout




@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode,soc", [("thread", "Ascend910B"), ("thread", "Ascend950"), ("address", "Ascend910B")])
def test_dataplane_under_sanitizer(mode: str, soc: str, tmp_path: Path, example_build) -> None:
    """tests/c/dataplane (Hcomm data plane, 4 ranks as threads, every scenario) under the sanitizers.
    DP_NO_POLL=1: the kernel does not poll memory that device threads write (an intended race)."""
    import os
    import subprocess

    from test_dataplane import SCENARIOS

    exe, json = example_build("dataplane", sanitize=mode)  # built once per session and mode
    env = dict(os.environ, **_env(mode, tmp_path))
    env.update(DP_NO_POLL="1", HCOMM_KIT_KERNEL_PATH=str(json.parent), HCOMM_KIT_SOC=soc, HCOMM_KIT_DEVICE_COUNT="8",
               HCCL_BUFFSIZE="4")
    scenarios = SCENARIOS + ",timeout_thread"
    proc = subprocess.run([str(exe), str(json), "threads", "4", scenarios], env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    reports = SANITIZER_ERROR_RE.findall(out)
    assert not reports, f"{len(reports)} sanitizer report(s) under {mode}:\n{report_text(out)}"
    assert proc.returncode == 0 and f"PASS: 4 ranks as threads, {soc}" in proc.stdout, out[-20000:]
