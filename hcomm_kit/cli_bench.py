"""Benchmark a built-in collective, with hccl_test's flags and output columns.

  hcomm-kit bench allreduce --np 2 -b 8 -e 64M -f 2
  hcomm-kit bench allgather --np 4 -b 1K -e 16M -f 4 -d bf16 --baseline mpi --json ag.jsonl
  hcomm-kit bench broadcast --np 3 -b 64M -e 64M -r 2 -c 2

COLLECTIVE: allreduce, reduce_scatter, allgather, alltoall, broadcast, reduce, gather, scatter,
sendrecv. data_size is the bytes taking part per rank (hccl_test); algbw/busbw follow nccl-tests.
On the emulator the figures are CPU timings of this host, not Ascend hardware figures. The exit
status is 1 when a result check failed.
"""

from __future__ import annotations

import argparse
import sys

HELP = "benchmark a built-in collective (hccl_test flags, nccl-tests bandwidths)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("collective", metavar="COLLECTIVE", help="allreduce, allgather, reduce_scatter, ...")
    parser.add_argument("--np", type=int, default=2, metavar="N", help="number of ranks (default 2)")
    parser.add_argument("-b", "--minbytes", default="64M", help="smallest message (K/M/G suffixes; default 64M)")
    parser.add_argument("-e", "--maxbytes", default="64M", help="largest message (default 64M)")
    parser.add_argument("-f", "--stepfactor", type=float, default=None, help="multiply the size by F each step")
    parser.add_argument("-i", "--stepbytes", default=None, help="add this many bytes each step (default (e-b)/10)")
    parser.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (default 20)")
    parser.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations (default 5)")
    parser.add_argument("-c", "--check", type=int, default=1, choices=(0, 1, 2),
                        help="check results: 0 off, 1 on, 2 also print the first bad element (default 1)")
    parser.add_argument("-d", "--datatype", default="fp32", help="dtype (default fp32)")
    parser.add_argument("-o", "--op", default="sum", help="reduce op: sum prod max min (default sum)")
    parser.add_argument("-r", "--root", type=int, default=0, help="root rank of rooted collectives (default 0)")
    parser.add_argument("--algorithm", default=None, help="algorithm name (see hcomm_kit.collectives.ALGORITHMS)")
    parser.add_argument("--inplace", action="store_true", help="output = input where the collective allows it")
    parser.add_argument("--blocking", action="store_true",
                        help="wait for each call before the next (default: enqueue back to back, as hccl_test)")
    parser.add_argument("--fill", choices=("rand", "const"), default="rand",
                        help="rand: seeded small integers per rank (default); const: every rank holds 2")
    parser.add_argument("--baseline", choices=("mpi",), default=None,
                        help="also run the collective with mpi4py (Open MPI) and print vs_mpi")
    parser.add_argument("--json", dest="json_out", default=None, metavar="FILE", help="one JSON object per row")
    parser.add_argument("--plot", default=None, metavar="FILE.png", help="draw busbw and time against size")
    parser.add_argument("--timeout", type=float, default=1800, help="kill the job after S seconds (default 1800)")


def run(args: argparse.Namespace) -> int:
    from . import bench
    from .core.bootstrap import under_mpi

    name = bench.ALIASES.get(args.collective, args.collective)
    if name not in bench.COLLECTIVES:
        from .errors import ConfigError

        raise ConfigError(f"unknown collective {args.collective!r}; choose from {sorted(bench.COLLECTIVES)}",
                          key="COLLECTIVE")
    size_list = bench.sizes(bench.parse_size(args.minbytes), bench.parse_size(args.maxbytes), args.stepfactor,
                            bench.parse_size(args.stepbytes) if args.stepbytes else None)
    if not under_mpi() and args.np > 1:
        from .core.launch import launch

        argv = [sys.executable, "-m", "hcomm_kit", "bench", *_forward(args)]
        return launch(argv, args.np, timeout=args.timeout, tag_output=False)
    import hcomm_kit

    comm = hcomm_kit.init()
    try:
        rows = bench.run_bench(comm, name, size_list, dtype=args.datatype, op=args.op, root=args.root,
                               iters=args.iters, warmup=args.warmup_iters, check=args.check, fill=args.fill,
                               inplace=args.inplace, algorithm=args.algorithm, baseline=args.baseline,
                               blocking=args.blocking)
        if comm.rank == 0:
            if args.json_out:
                bench.write_json(rows, args.json_out)
            if args.plot:
                bench.plot(rows, args.plot)
        failed = any(r["check"] == "failed" for r in rows)
    finally:
        comm.close()
    sys.stdout.flush()
    return 1 if failed else 0


def _forward(args: argparse.Namespace) -> list[str]:
    """The argv that reproduces ``args`` in each rank."""
    out = [args.collective, "--np", str(args.np), "-b", str(args.minbytes), "-e", str(args.maxbytes),
           "-n", str(args.iters), "-w", str(args.warmup_iters), "-c", str(args.check), "-d", args.datatype,
           "-o", args.op, "-r", str(args.root), "--fill", args.fill, "--timeout", str(args.timeout)]
    for flag, val in (("-f", args.stepfactor), ("-i", args.stepbytes), ("--algorithm", args.algorithm),
                      ("--baseline", args.baseline), ("--json", args.json_out), ("--plot", args.plot)):
        if val is not None:
            out += [flag, str(val)]
    if args.inplace:
        out.append("--inplace")
    if args.blocking:
        out.append("--blocking")
    return out
