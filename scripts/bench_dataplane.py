#!/usr/bin/env python3
"""Data-plane micro-benchmark (not a test): channel-notify ping-pong and 64 MiB remote write
bandwidth between 2 emulated ranks, with single-core memcpy bandwidth from the same run."""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hcomm_kit.build import emulator as _emulator

HERE = Path(__file__).parent


def main() -> int:
    """Builds the benchmark kernel and host program, runs them, prints the figures."""
    flags = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", *_emulator.cflags().split()]
    libs = _emulator.libs().split()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        (out / "bench.json").write_text(json.dumps({"BenchKernel": {"opInfo": {
            "opKernelLib": "AICPUKernel", "kernelSo": "bench.so", "functionName": "BenchKernel"}}}))
        subprocess.run(["g++", *flags, "-fPIC", "-shared", str(HERE / "bench_dataplane_kernel.cc"), *libs,
                        "-o", str(out / "bench.so")], check=True)
        subprocess.run(["g++", *flags, str(HERE / "bench_dataplane_main.cc"), *libs, "-lpthread",
                        "-o", str(out / "bench")], check=True)
        return subprocess.run([str(out / "bench"), str(out / "bench.json")]).returncode


if __name__ == "__main__":
    sys.exit(main())
