"""Benchmark a built-in collective or your own operator, with hccl_test's flags and output columns.

  hcomm-kit bench allreduce --np 2 -b 8 -e 64M -f 2
  hcomm-kit bench allgather --np 4 -b 1K -e 16M -f 4 -d bf16 --compare mpi --json ag.jsonl
  hcomm-kit bench broadcast --np 3 -b 64M -e 64M -r 2 -c 2
  hcomm-kit bench ops/my_allreduce --np 4 -b 1K -e 16M -f 4 --compare builtin --compare mpi
  hcomm-kit bench --latency [--runs 3]
  hcomm-kit bench allreduce --np 2 --nnodes 2 --node-rank K --rdzv-endpoint HOST:PORT   (on each of 2 hosts)

COLLECTIVE: allreduce, reduce_scatter, allgather, alltoall, alltoallv, broadcast, reduce, gather,
scatter, sendrecv (or its directory in aicpu_kernels/, by its op.toml kind); or OPDIR, an operator
directory (with op.toml). An operator is sized, checked, given bandwidth factors and compared as
its op.toml kind says (`hcomm-kit docs optoml`): a reduce as the built-in reduce with -r ROOT,
checked on the root; custom: its reference, time only unless --busbw-factor F. -o defaults to the
operator's first listed reduce op; --algorithm NAME is one of its op.toml algorithms (a built-in's:
CANN's names, e.g. AicpuAllReduceSoleMeshTwoShot, or mesh, nhr, hierarchical). --compare builtin adds the matching built-in collective in the same job
(builtin:NAME with the built-in's algorithm NAME, default its own choice), --compare mpi the same
through mpi4py (Open MPI), each with its time, busbw and a vs_ ratio (its time / ours).

--latency (no COLLECTIVE): the small-message latency table (allreduce of 8 B, 512 B and 32 KiB on 2, 4
and 8 ranks, 64 MiB on 2, against Open MPI and gloo in the same jobs, plus a blocking 8-byte call
from Python against mpi4py), one job per rank count and run; see hcomm_kit/bench/latency.py.

data_size is the bytes taking part per rank (hccl_test); algbw/busbw follow nccl-tests. On the
emulator the figures are CPU timings of this host, not Ascend hardware figures. The exit
status is 1 when a result check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HELP = "benchmark a built-in collective or your operator (hccl_test flags, nccl-tests bandwidths)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("collective", metavar="COLLECTIVE|OPDIR", nargs="?", default=None,
                        help="allreduce, allgather, reduce_scatter, ... or an operator directory")
    parser.add_argument("--latency", action="store_true",
                        help="print the small-message latency table (2/4/8 ranks against Open MPI and gloo) "
                             "instead of a sweep; no COLLECTIVE")
    parser.add_argument("--runs", type=int, default=3, metavar="N",
                        help="--latency: repeat every job N times (default 3)")
    parser.add_argument("--np", type=int, default=None, metavar="N",
                        help="number of ranks (default: an operator's op.toml [test] topology's, --topology's, else 2)")
    parser.add_argument("-b", "--minbytes", default="64M", help="smallest message (K/M/G suffixes; default 64M)")
    parser.add_argument("-e", "--maxbytes", default="64M", help="largest message (default 64M)")
    parser.add_argument("-f", "--stepfactor", type=float, default=None, help="multiply the size by F each step")
    parser.add_argument("-i", "--stepbytes", default=None, help="add this many bytes each step (default (e-b)/10)")
    parser.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (default 20)")
    parser.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations (default 5)")
    parser.add_argument("-c", "--check", type=int, default=1, choices=(0, 1, 2),
                        help="check results: 0 off, 1 on, 2 also print the first bad element (default 1)")
    parser.add_argument("-d", "--datatype", default="fp32", help="dtype (default fp32)")
    parser.add_argument("-o", "--op", default=None,
                        help="reduce op: sum prod max min (default: an operator's first listed; built-ins: sum)")
    parser.add_argument("-r", "--root", type=int, default=0, help="root rank of rooted collectives (default 0)")
    parser.add_argument("--algorithm", default=None,
                        help="algorithm: a built-in's (hcomm_kit.ops.algorithms.ALGORITHMS), or one of an operator's "
                             "op.toml [op].algorithms")
    parser.add_argument("--inplace", action="store_true", help="output = input where the collective allows it")
    parser.add_argument("--blocking", action="store_true",
                        help="wait for each call before the next (default: enqueue back to back, as hccl_test)")
    parser.add_argument("--fill", choices=("rand", "const"), default="rand",
                        help="rand: seeded small integers per rank (default); const: every rank holds 2")
    parser.add_argument("--compare", action="append", default=[], metavar="builtin[:ALGO]|mpi",
                        help="also measure the matching built-in collective (operators only; builtin:ring picks its "
                             "algorithm) and/or Open MPI through mpi4py in the same job; repeat or comma-separate")
    parser.add_argument("--baseline", choices=("mpi",), default=None, help="same as --compare mpi")
    parser.add_argument("--busbw-factor", type=float, default=None, metavar="F",
                        help="operators: busbw = algbw x F (default: from op.toml's pattern / [io].output)")
    parser.add_argument("--json", dest="json_out", default=None, metavar="FILE", help="one JSON object per row")
    parser.add_argument("--plot", default=None, metavar="FILE.png", help="draw busbw and time against size")
    parser.add_argument("--timeout", type=float, default=1800, help="kill the job after S seconds (default 1800)")
    parser.add_argument("--debug", action="store_true",
                        help="load the operators' debug builds and show their kernel logs (HCOMM_KIT_DEBUG=1)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show mpirun's own messages")
    from .launch import add_node_arguments

    add_node_arguments(parser)


def _compare_list(args: argparse.Namespace) -> list[str]:
    from ..bench import sweep as bench

    out = [c.strip() for item in args.compare for c in item.split(",") if c.strip()]
    if args.baseline:
        out.append(args.baseline)
    bench.split_compare(out)  # raises for an unknown one
    return list(dict.fromkeys(out))


def _run_latency(args: argparse.Namespace) -> int:
    """``--latency``: the launcher starts the jobs and prints the table; each rank measures."""
    from ..base.errors import ConfigError
    from ..bench import latency
    from ..core.bootstrap import under_mpi
    from ..jobs.preflight import check_env, usage_errors

    with usage_errors():
        if args.collective is not None:
            raise ConfigError(f"--latency measures the built-in allreduce: drop {args.collective!r}", key="--latency")
        if args.nnodes != 1 or args.rdzv_endpoint:
            raise ConfigError("--latency runs its own jobs on one host (against Open MPI and gloo): drop --nnodes",
                              key="--latency")
        if args.runs < 1:
            raise ConfigError(f"--runs {args.runs}: at least 1", key="--runs")
        if not under_mpi():
            check_env()
    if not under_mpi():
        return latency.run_table(args.runs, timeout=args.timeout, verbose=args.verbose, json_path=args.json_out)
    import hcomm_kit

    comm = hcomm_kit.init()
    try:
        result = latency.measure(comm, gloo_store=(args.json_out + ".gloo") if args.json_out else None)
        if comm.rank == 0 and args.json_out:
            Path(args.json_out).write_text(json.dumps(result))
    finally:
        comm.close()
    return 0


def run(args: argparse.Namespace) -> int:
    from ..bench import sweep as bench
    from ..core.bootstrap import under_mpi
    from ..base.errors import ConfigError
    from ..base.limits import check_np
    from ..jobs.preflight import usage_errors

    if args.latency:
        return _run_latency(args)
    with usage_errors():  # bad input: one line, exit 2, nothing started
        if args.collective is None:
            raise ConfigError("name a COLLECTIVE or an operator directory (or pass --latency)", key="COLLECTIVE")
        if args.np is not None:
            check_np(args.np)
        target = bench._target(args.collective, args.busbw_factor)  # raises for an unknown name
        from . import _apply_op_job

        _apply_op_job(args, [target.opdir] if target is not None else [])  # op.toml [test]
        check_np(args.np)
        from .launch import job_size, nodes_of

        nodes = None if under_mpi() else nodes_of(args, args.np)
        size = job_size(args, args.np)
        if args.iters < 1:
            raise ConfigError(f"-n {args.iters}: a benchmark needs at least 1 timed iteration", key="-n")
        if args.warmup_iters < 0:
            raise ConfigError(f"-w {args.warmup_iters}: warm-up iterations cannot be negative", key="-w")
        if not 0 <= args.root < size:
            raise ConfigError(f"-r {args.root} is not a rank of a {size}-rank job (0..{size - 1})", key="-r")
        compare = _compare_list(args)
        if "mpi" in compare and (nodes is not None or size != args.np):
            raise ConfigError("--compare mpi needs one MPI world, which a job on several hosts does not have (each "
                              "host's ranks are their own mpirun job): compare on one host", key="--compare")
        names, builtin_algo = bench.split_compare(compare)
        if target is None and "builtin" in names:
            raise ConfigError(f"--compare builtin is for your own operators; {args.collective} is a built-in "
                              f"collective (--compare mpi compares it with Open MPI)", key="--compare")
        if target is not None:
            bench.check_target(target, args.datatype, args.op)
            from ..jobs.preflight import check_names, check_op_algorithm

            if args.algorithm:
                check_op_algorithm(target.opdir, target.spec, args.algorithm)
            if builtin_algo is not None and target.builtin not in (None, "shift"):
                check_names(algorithm=builtin_algo, collective=target.builtin)
        size_list = bench.sizes(bench.parse_size(args.minbytes), bench.parse_size(args.maxbytes), args.stepfactor,
                                bench.parse_size(args.stepbytes) if args.stepbytes else None)
        if not under_mpi():
            _preflight(args, target, size_list)
    if args.debug:
        os.environ["HCOMM_KIT_DEBUG"] = "1"
    subject = target.opdir if target is not None else args.collective
    if not under_mpi() and (args.np > 1 or nodes is not None):
        from ..jobs.launch import launch

        if target is not None:
            _prebuild([target.opdir])
        argv = [sys.executable, "-m", "hcomm_kit", "bench", *_forward(args, subject, compare)]
        return launch(argv, args.np, timeout=args.timeout, tag_output=False, verbose=args.verbose, nodes=nodes)
    import hcomm_kit

    if size == 1 and not under_mpi():
        from ..core.communicator import expect_single_rank

        expect_single_rank()  # one rank was asked for: no single-rank note
    comm = hcomm_kit.init()
    try:
        rows = bench.run_bench(comm, subject, size_list, dtype=args.datatype, op=args.op, root=args.root,
                               iters=args.iters, warmup=args.warmup_iters, check=args.check, fill=args.fill,
                               inplace=args.inplace, algorithm=args.algorithm, compare=compare,
                               blocking=args.blocking, busbw_factor=args.busbw_factor,
                               # Figures of the data path: the emulator's notify checker (records every
                               # buffer access and notify) checks untimed calls of each size, then is off
                               # (HCOMM_KIT_CHECK set: as it says, throughout).
                               checked_first=not os.environ.get("HCOMM_KIT_CHECK", "").strip())
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


def _preflight(args: argparse.Namespace, target, size_list: list[int]) -> None:
    """The launcher's checks of what the ranks would refuse: environment, --timeout, dtype, reduce
    op and algorithm names, and the memory the largest size needs."""
    from ..bench import sweep as bench
    from ..base import dtypes as _dtypes
    from ..jobs.preflight import check_env, check_memory, check_names, check_seconds

    from .launch import job_size

    check_env(job_size(args, args.np))  # the topology holds every host's ranks
    check_seconds(args.timeout, "--timeout")
    coll = bench.builtin_collective(args.collective) if target is None else None
    algo_table = {"sendrecv": "send_recv"}.get(coll, coll) if coll else None
    check_names(dtype=args.datatype, reduce_op=args.op, algorithm=args.algorithm, collective=algo_table)
    if size_list:
        item = _dtypes.get_dtype(args.datatype).itemsize
        check_memory(max(size_list) // item, item, args.np, what="-e", given=args.maxbytes)


def _prebuild(opdirs: list[str]) -> None:
    """Build the operators once, here, before the ranks start (errors and warnings show once)."""
    from ..base import envs, progress
    from ..build.opbuild import build_op

    for d in opdirs:
        with progress.status(f"building {Path(d).name}"):
            build_op(d, debug=envs.debug())


def _forward(args: argparse.Namespace, subject: str, compare: list[str]) -> list[str]:
    """The argv that reproduces ``args`` in each rank."""
    out = [subject, "--np", str(args.np), "-b", str(args.minbytes), "-e", str(args.maxbytes),
           "-n", str(args.iters), "-w", str(args.warmup_iters), "-c", str(args.check), "-d", args.datatype,
           "-r", str(args.root), "--fill", args.fill, "--timeout", str(args.timeout)]
    for flag, val in (("-o", args.op), ("-f", args.stepfactor), ("-i", args.stepbytes), ("--algorithm", args.algorithm),
                      ("--busbw-factor", args.busbw_factor), ("--json", args.json_out), ("--plot", args.plot)):
        if val is not None:
            out += [flag, str(val)]
    for c in compare:
        out += ["--compare", c]
    if args.inplace:
        out.append("--inplace")
    if args.blocking:
        out.append("--blocking")
    return out
