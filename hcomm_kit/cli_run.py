"""Run an operator on N ranks and check it against numpy.

  hcomm-kit run ops/my_allreduce --np 4 --count 65536 -d fp32 -o sum
  hcomm-kit run ops/my_allgather --np 3 -d bf16

OP is an operator directory (with op.toml) or the name of a built-in operator. The input of
each rank is deterministic; the reference is chosen from op.toml (pattern / [io].output /
reduce_ops). Prints a table on rank 0; exit status 1 when a result does not match.
"""

from __future__ import annotations

import argparse
import json
import sys

HELP = "run an operator on N ranks and check it against numpy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="+", metavar="OP", help="operator directory or built-in name")
    parser.add_argument("--np", "-n", type=int, default=2, metavar="N", help="number of ranks (default 2)")
    parser.add_argument("--count", "-c", type=int, default=4096, metavar="C", help="elements per rank (default 4096)")
    parser.add_argument("-d", "--dtype", default=None, help="element type (default fp32 if supported)")
    parser.add_argument("-o", "--op", dest="reduce_op", default=None, help="reduce op for reductions (default sum)")
    parser.add_argument("-r", "--root", type=int, default=None, help="root rank (rooted operators)")
    parser.add_argument("--iters", type=int, default=20, help="timed calls after the checked one (default 20)")
    parser.add_argument("--timeout", type=float, default=300, help="kill the job after S seconds (default 300)")
    parser.add_argument("--json", dest="json_out", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from .core.bootstrap import under_mpi
    from .core.runner import resolve_op

    opdirs = [str(resolve_op(o).resolve()) for o in args.ops]
    if not under_mpi() and args.np > 1:
        from .build.opbuild import build_op
        from .core.launch import launch

        for d in opdirs:
            build_op(d)  # compile once, here, so errors show once
        argv = [sys.executable, "-m", "hcomm_kit", "run", *opdirs, "--np", str(args.np), "--count", str(args.count),
                "--iters", str(args.iters)]
        for flag, val in (("-d", args.dtype), ("-o", args.reduce_op), ("-r", args.root), ("--json", args.json_out)):
            if val is not None:
                argv += [flag, str(val)]
        return launch(argv, args.np, timeout=args.timeout, tag_output=False)
    return _run_rank(args, opdirs)


def _builtin_name(opdir: str) -> str | None:
    """The bench name of a built-in collective directory (None for users' operators)."""
    from pathlib import Path

    from . import bench
    from .resources import aicpu_kernels_dir

    p = Path(opdir)
    if p.parent.resolve() != aicpu_kernels_dir().resolve():
        return None
    name = bench.ALIASES.get(p.name, p.name)
    return name if name in bench.COLLECTIVES else None


def _run_rank(args, opdirs) -> int:
    import hcomm_kit
    from . import bench
    from . import dtypes as _dtypes
    from .core.runner import format_table, run_ops

    comm = hcomm_kit.init()
    ok = True
    users = [d for d in opdirs if _builtin_name(d) is None]
    if users:
        jobs = [{"op": d, "count": args.count, "dtype": args.dtype, "reduce_op": args.reduce_op, "root": args.root}
                for d in users]
        rows = run_ops(comm, jobs, iters=args.iters)
        if comm.rank == 0:
            print(format_table(rows), flush=True)
            if args.json_out:
                with open(args.json_out, "w") as f:
                    json.dump(rows, f)
        ok = all(r["ok"] is not False for r in rows)
    for d in opdirs:
        name = _builtin_name(d)
        if name is None:
            continue
        # Built-in collectives: the bench's exact-by-construction check at count elements per rank.
        dtype = args.dtype or "fp32"
        nbytes = args.count * _dtypes.get_dtype(dtype).itemsize
        if bench.COLLECTIVES[name].split:
            nbytes *= comm.size
        rows = bench.run_bench(comm, name, [nbytes], dtype=dtype, op=args.reduce_op or "sum", root=args.root or 0,
                               iters=args.iters, warmup=1, check=2)
        ok = ok and all(r["check"] != "failed" for r in rows)
    comm.close()
    sys.stdout.flush()
    return 0 if ok else 1

