#!/usr/bin/env python3
"""Micro-benchmark: empty AICPU kernel launch + aclrtSynchronizeStream round trip on the emulator.

Two measurements, each the median over ``--runs`` runs of ``--iters`` iterations:

* **C**: tests/c/test_acl_runtime.cc built with -O2 against the emulator and run in its
  ``--bench N`` mode (a compiled loop of aclrtLaunchKernelWithConfig + aclrtSynchronizeStream with
  one prebuilt, finalized args handle);
* **Python**: the same loop through ``hcomm_kit.runtime`` checked calls
  (``rt.checked.aclrtLaunchKernelWithConfig`` / ``rt.checked.aclrtSynchronizeStream``) with a
  prebuilt args handle.

Targets (issue 2, 2-core machine): C <= 10 us, Python <= 15 us. This is a benchmark, not a
test: it reports, and only ``--check`` turns a missed target into exit status 1.
Emulator timings are CPU timings of the emulator, not Ascend hardware figures.

Usage: python scripts/bench_launch.py [--iters 20000] [--runs 5] [--json FILE] [--check]
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from ctypes import byref, c_void_p
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET_C_US, TARGET_PY_US = 10.0, 15.0


def _helpers():
    spec = importlib.util.spec_from_file_location("_acl_c_helpers", ROOT / "tests" / "test_acl_c.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def bench_c(work: Path, iters: int, runs: int) -> list[float]:
    h = _helpers()
    kdir, ddir = h.build_kernels(work)
    exe = h.build_program(work)
    samples = []
    for _ in range(runs):
        proc = h.run_program(exe, kdir, ddir, "--bench", str(iters), timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"C benchmark failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}")
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("bench_launch_us "))
        samples.append(float(line.split()[1]))
    return samples


def bench_python(kdir: Path, iters: int, runs: int) -> list[float]:
    from hcomm_kit.runtime import load, structs

    rt = load("emu")
    acl, chk = rt.acl, rt.checked
    if acl.aclInit(None) not in (0, 100002):
        raise SystemExit(f"aclInit failed: {rt.recent_error_message()}")
    chk.aclrtSetDevice(0)
    b, f, s, ah = c_void_p(), c_void_p(), c_void_p(), c_void_p()
    opts = structs.cpu_kernel_load_options(1)
    chk.aclrtBinaryLoadFromFile(str(kdir / "acl_test_kernels.json").encode(), byref(opts), byref(b))
    chk.aclrtBinaryGetFunction(b, b"EmptyOp", byref(f))
    chk.aclrtCreateStream(byref(s))
    chk.aclrtKernelArgsInit(f, byref(ah))
    chk.aclrtKernelArgsFinalize(ah)
    launch, sync = chk.aclrtLaunchKernelWithConfig, chk.aclrtSynchronizeStream
    fv, sv, av = f.value, s.value, ah.value  # plain ints: the cheapest argument conversion

    def loop(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            launch(fv, 1, sv, None, av, None)
            sync(sv)
        return (time.perf_counter() - t0) * 1e6 / n

    loop(1000)  # warm-up
    samples = [loop(iters) for _ in range(runs)]
    chk.aclrtDestroyStream(s)
    chk.aclrtBinaryUnLoad(b)
    chk.aclrtResetDevice(0)
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=20000, help="iterations per run (default 20000)")
    ap.add_argument("--runs", type=int, default=5, help="runs; the median is reported (default 5)")
    ap.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="hcomm_bench_launch_") as tmp:
        work = Path(tmp)
        c_samples = bench_c(work, args.iters, args.runs)
        py_samples = bench_python(work / "kernels", args.iters, args.runs)
    c_med, py_med = statistics.median(c_samples), statistics.median(py_samples)
    print("# empty-kernel launch + aclrtSynchronizeStream round trip (hcomm-kit CPU emulator timings, "
          "not Ascend hardware)")
    print(f"# host: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; "
          f"{args.runs} runs x {args.iters} iterations, median")
    print(f"{'path':<8} {'median_us':>10} {'min_us':>8} {'max_us':>8} {'target_us':>10}  result")
    ok = True
    for name, med, samples, target in (("C", c_med, c_samples, TARGET_C_US),
                                       ("Python", py_med, py_samples, TARGET_PY_US)):
        hit = med <= target
        ok &= hit
        print(f"{name:<8} {med:>10.2f} {min(samples):>8.2f} {max(samples):>8.2f} {target:>10.1f}  "
              f"{'ok' if hit else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps({"c_us": c_med, "python_us": py_med, "c_samples": c_samples,
                                         "python_samples": py_samples, "iters": args.iters, "runs": args.runs,
                                         "cpus": os.cpu_count()}, indent=2))
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
