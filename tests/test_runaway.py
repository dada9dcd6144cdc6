"""Kernels that overrun their launch timeout (issue: nothing left running).

A kernel stuck in its own code is interrupted (the watchdog signals its worker; the crash guard
leaves the entry): no core stays busy, the next call names the kernel that overran, and close()
returns at once. A kernel stuck in a system call cannot be interrupted: the device is marked lost,
every later launch says which kernel is to blame, and close() and exit still return in bounded time.
Each case runs in its own process (a lost device stays lost for the process).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from test_orchestrator import scaffold

SPIN = """\
#include "exec_op.h"
#include "{name}_log.h"

namespace ops_{name} {{

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{{
    (void)resCtx;
    volatile uint64_t spins = 0;
    while (param.count != 123456789) {{  // BUG: never ends
        spins = spins + 1;
    }}
    return HCCL_SUCCESS;
}}

}}  // namespace ops_{name}
"""

SLEEP = """\
#include <unistd.h>

#include "exec_op.h"
#include "{name}_log.h"

namespace ops_{name} {{

HcclResult ExecOp(const OpParam &param, const AlgResourceCtx &resCtx)
{{
    (void)resCtx;
    while (param.count != 123456789) {{  // BUG: never ends, inside a system call
        sleep(1);
    }}
    return HCCL_SUCCESS;
}}

}}  // namespace ops_{name}
"""

SCRIPT = """\
import sys, time, resource
import numpy as np
import hcomm_kit
from hcomm_kit.base.errors import OpTimeoutError, HcommKitError

comm = hcomm_kit.init()
op = comm.load_op(sys.argv[1])
t0 = time.monotonic()
try:
    op(np.ones(4, np.float32), timeout=1)
    print("NO-ERROR")
except OpTimeoutError as e:
    print("FIRST", round(time.monotonic() - t0, 2), type(e).__name__, str(e).replace(chr(10), " | "))
time.sleep(float(sys.argv[2]))          # interruption attempts run meanwhile
c0 = time.process_time()
time.sleep(1.0)
print("CPU", round(time.process_time() - c0, 3))
try:
    op(np.ones(4, np.float32), timeout=1)
    print("NO-ERROR-2")
except HcommKitError as e:
    print("SECOND", type(e).__name__, str(e).replace(chr(10), " | "))
t1 = time.monotonic()
comm.close()
print("CLOSE", round(time.monotonic() - t1, 2))
"""


def _run(opdir, wait: float) -> str:
    env = dict(os.environ)
    env.pop("HCCL_EXEC_TIMEOUT", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(opdir), str(wait)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def _line(out: str, key: str) -> str:
    return next((l for l in out.splitlines() if l.startswith(key + " ")), "")


@pytest.mark.slow  # fault injection with real timeouts: full suite only
def test_spinning_kernel_is_interrupted() -> None:
    opdir = scaffold("empty", name="spin", exec_op=SPIN.format(name="spin"))
    out = _run(opdir, 0.3)
    first = _line(out, "FIRST")
    assert first and "AICPU kernel HcclSpinAicpuKernel on stream" in first and "launch timeout" in first, out
    assert float(first.split()[1]) < 5, out
    # the worker left the kernel: the process no longer burns a core
    assert float(_line(out, "CPU").split()[1]) < 0.5, out
    second = _line(out, "SECOND")
    assert "HcclSpinAicpuKernel" in second and "launch timeout" in second, out  # blames the right kernel
    assert float(_line(out, "CLOSE").split()[1]) < 5, out


@pytest.mark.slow  # fault injection with real timeouts: full suite only
def test_kernel_stuck_in_a_system_call_loses_the_device() -> None:
    opdir = scaffold("empty", name="sleeper", exec_op=SLEEP.format(name="sleeper"))
    out = _run(opdir, 2.5)
    assert "AICPU kernel HcclSleeperAicpuKernel on stream" in _line(out, "FIRST"), out
    second = _line(out, "SECOND")
    assert "device 0 is lost" in second and "HcclSleeperAicpuKernel" in second and "could not be interrupted" in second, out
    assert float(_line(out, "CLOSE").split()[1]) < 5, out
