#!/usr/bin/env python3
"""Per-call host overhead of ``op()`` (8 bytes, 2 ranks) against the same sequence in C++.

Scaffolds a ring-allreduce operator ``bench`` into a temp dir, builds it, compiles
``bench_op_overhead_host.cc`` against the emulator, then alternates rounds of

  * C++: two processes of the host program (root info through a file), timing
    memcpy H2D -> record "go" -> launch -> wait "done" -> synchronize -> memcpy D2H;
  * Python: two processes (bootstrap through HCOMM_KIT_RANK / HCOMM_KIT_ROOT_INFO) timing
    ``op(x)`` for a 2-element fp32 array (8 bytes);

and prints the median per-call time of each, their difference, and the cost of the Python
layer alone (every C call replaced by a no-op, i.e. argument checks, OpParam key, dispatch).

  python scripts/bench_op_overhead.py [--iters 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _worker(args) -> None:
    import numpy as np

    import hcomm_kit

    comm = hcomm_kit.init()
    op = comm.load_op(args.opdir)
    x = np.full(args.count, 1.0 + comm.rank, dtype=np.float32)
    for _ in range(20):
        y = op(x)
    comm.barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        y = op(x)
    us = (time.perf_counter() - t0) / args.iters * 1e6
    assert y[0] == comm.size * (comm.size + 1) / 2, y
    comm.barrier()
    if comm.rank == 0:
        # The Python layer alone: same call with every C function stubbed out.
        stub = lambda *a: 0  # noqa: E731
        for name in ("_memcpy", "_launch", "_sync", "_go", "_done", "_para_update", "_finalize"):
            setattr(op, name, stub)
        t0 = time.perf_counter()
        for _ in range(args.iters * 5):
            op(x)
        py_only = (time.perf_counter() - t0) / (args.iters * 5) * 1e6
        print(f"us_per_call {us:.3f}")
        print(f"python_layer_us {py_only:.3f}")
    comm.close()


def _run_pair(cmds: list[list[str]], envs: list[dict]) -> str:
    procs = [subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, e in zip(cmds, envs)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (o, e) in zip(procs, outs):
        if p.returncode != 0:
            raise SystemExit(f"benchmark process failed ({p.returncode}):\n{o}\n{e}")
    return outs[0][0]


def _value(text: str, key: str) -> float:
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[1])
    raise SystemExit(f"no {key} in output:\n{text}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=2, help="fp32 elements (default 2 = 8 bytes)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--opdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return 0

    from hcomm_kit import get_include, get_library
    from hcomm_kit.build.opbuild import build_op
    from hcomm_kit.scaffold.render import new_op

    work = Path(tempfile.mkdtemp(prefix="hcomm_kit_bench_"))
    res = new_op("bench", pattern="ring-allreduce", handshake="thread-notify", directory=work)
    build = build_op(res.opdir)
    lib = Path(get_library())
    exe = work / "bench_host"
    subprocess.run([os.environ.get("CXX", "g++"), "-std=c++17", "-O2", str(HERE / "bench_op_overhead_host.cc"),
                    f"-I{get_include()}", f"-I{res.opdir / 'inc'}", f"-L{lib.parent}", "-lhcomm_emu",
                    f"-Wl,-rpath,{lib.parent}", "-o", str(exe)], check=True)
    c_times, py_times, py_layer = [], [], []
    for rnd in range(args.rounds):
        rootfile = work / f"root_c_{rnd}"
        c_out = _run_pair([[str(exe), str(r), "2", str(rootfile), str(build.json_path), str(args.iters),
                            str(args.count)] for r in range(2)], [dict(os.environ)] * 2)
        c_times.append(_value(c_out, "us_per_call"))
        rootfile = work / f"root_py_{rnd}"
        envs = [dict(os.environ, HCOMM_KIT_RANK=str(r), HCOMM_KIT_WORLD_SIZE="2", HCOMM_KIT_ROOT_INFO=str(rootfile))
                for r in range(2)]
        py_out = _run_pair([[sys.executable, __file__, "--worker", "--opdir", str(res.opdir), "--iters",
                             str(args.iters), "--count", str(args.count)]] * 2, envs)
        py_times.append(_value(py_out, "us_per_call"))
        py_layer.append(_value(py_out, "python_layer_us"))
        print(f"round {rnd}: C++ {c_times[-1]:8.1f} us/call   Python op() {py_times[-1]:8.1f} us/call", flush=True)
    c, py, layer = statistics.median(c_times), statistics.median(py_times), statistics.median(py_layer)
    print(f"\nop() host overhead, {args.count * 4} bytes, 2 ranks, ring-allreduce on the emulator "
          f"(median of {args.rounds} rounds x {args.iters} calls):")
    print(f"  C++ host program       {c:8.1f} us/call")
    print(f"  Python op()            {py:8.1f} us/call")
    print(f"  difference             {py - c:8.1f} us/call")
    print(f"  Python layer alone     {layer:8.2f} us/call (C calls stubbed out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
