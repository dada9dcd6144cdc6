"""Run an operator on N ranks and check it against numpy.

  hcomm-kit run ops/my_allreduce --np 4 --count 65536 -d fp32 -o sum
  hcomm-kit run ops/my_allgather --np 3 -d bf16 --json rows.jsonl
  hcomm-kit run ops/my_allgather --np 2 --debug          (debug build, kernel logs shown)
  hcomm-kit run ops/my_allgather --np 2 --nnodes 2 --node-rank K --rdzv-endpoint HOST:PORT   (on each of 2 hosts)

OP is an operator directory (with op.toml) or a built-in (its name or directory in
aicpu_kernels/: the collective its op.toml kind names, with its algorithm selection). The input of each rank is deterministic; what is
checked follows op.toml's kind (hcomm-kit docs optoml): --count is OpParam.count, HCCL's count
(alltoall, reduce_scatter, scatter: one block per rank, the input holds count x ranks), output
size, root (-r, default 0; operators that take none ignore it), the ranks checked (a reduce: the
root), the numpy reference (op.toml reference overrides the kind's); the reduce op is -o, else the
operator's first listed; --algorithm NAME one of op.toml's algorithms (a built-in's: its table).
Outputs start filled with a poison byte, so an output the kernel leaves unwritten fails. Prints a
table on rank 0; exit status 1 when a result does not match. --iters 0 only checks (no timing).
--json FILE writes the rows, one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..base.errors import ConfigError

HELP = "run an operator on N ranks and check it against numpy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ops", nargs="+", metavar="OP", help="operator directory or built-in name")
    parser.add_argument("--np", "-n", type=int, default=None, metavar="N",
                        help="number of ranks (default: op.toml [test] topology's, --topology's, else 2)")
    parser.add_argument("--count", "-c", type=int, default=4096, metavar="C",
                        help="OpParam.count, HCCL's count: elements per rank, per block where the input holds one "
                             "block per rank (default 4096)")
    parser.add_argument("-d", "--dtype", default=None, help="element type (default fp32 if supported)")
    parser.add_argument("-o", "--op", dest="reduce_op", default=None, help="reduce op for reductions (default: the operator's first listed)")
    parser.add_argument("-r", "--root", type=int, default=None, help="root rank of rooted kinds (default 0)")
    parser.add_argument("--algorithm", default=None, metavar="NAME",
                        help="one of the operator's algorithms (op.toml [op].algorithms; a built-in's: CANN's names, "
                             "e.g. AicpuAllReduceSoleMeshTwoShot, or mesh, nhr, hierarchical)")
    parser.add_argument("--iters", type=int, default=20,
                        help="timed calls after the checked one (default 20; 0 = check only)")
    parser.add_argument("--timeout", type=float, default=300, help="kill the job after S seconds (default 300)")
    parser.add_argument("--json", dest="json_out", default=None, metavar="FILE",
                        help="write the rows to FILE, one JSON object per line")
    parser.add_argument("--debug", action="store_true",
                        help="load the operators' debug builds and show their kernel logs (HCOMM_KIT_DEBUG=1)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show mpirun's own messages")
    from .launch import add_node_arguments

    add_node_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..core.bootstrap import under_mpi
    from ..jobs.runner import resolve_op
    from ..base.limits import check_np
    from ..jobs.preflight import usage_errors

    with usage_errors():  # bad input: one line, exit 2, nothing started
        if args.np is not None:
            check_np(args.np)
        opdirs = [str(resolve_op(o).resolve()) for o in args.ops]
        from . import _apply_op_job

        _apply_op_job(args, opdirs)  # op.toml [test]: topology, links down, the rank count
        check_np(args.np)
        if args.iters < 0:
            raise ConfigError(f"--iters {args.iters}: use 0 (check only) or more timed calls", key="--iters")
        if args.count < 1:
            raise ConfigError(f"--count {args.count}: an operator call needs at least 1 element per rank",
                              key="--count")
        from .launch import job_size, nodes_of

        nodes = None if under_mpi() else nodes_of(args, args.np)
        size = job_size(args, args.np)
        if args.root is not None and not 0 <= args.root < size:
            raise ConfigError(f"-r {args.root} is not a rank of a {size}-rank job (0..{size - 1})", key="-r")
        if not under_mpi():
            _preflight(args, opdirs)
    if args.debug:
        os.environ["HCOMM_KIT_DEBUG"] = "1"
    if not under_mpi() and (args.np > 1 or nodes is not None):
        from .bench import _prebuild
        from ..jobs.launch import launch

        _prebuild([d for d in opdirs if _builtin_name(d) is None])  # compile once, here: errors show once
        argv = [sys.executable, "-m", "hcomm_kit", "run", *opdirs, "--np", str(args.np), "--count", str(args.count),
                "--iters", str(args.iters)]
        for flag, val in (("-d", args.dtype), ("-o", args.reduce_op), ("-r", args.root), ("--json", args.json_out),
                          ("--algorithm", args.algorithm)):
            if val is not None:
                argv += [flag, str(val)]
        return launch(argv, args.np, timeout=args.timeout, tag_output=False, verbose=args.verbose, nodes=nodes)
    if size == 1 and not under_mpi():
        from ..core.communicator import expect_single_rank

        expect_single_rank()  # one rank was asked for: no single-rank note
    return _run_rank(args, opdirs)


def _preflight(args: argparse.Namespace, opdirs: list[str]) -> None:
    """The launcher's checks of what the ranks would refuse: environment, --timeout, dtype and
    reduce op (also against each operator's op.toml), and the memory the run needs."""
    from ..bench import sweep as bench
    from ..base import dtypes as _dtypes
    from ..jobs.preflight import check_env, check_memory, check_names, check_op_algorithm, check_seconds
    from ..build.opspec import load_opspec

    from .launch import job_size

    size = job_size(args, args.np)
    check_env(size)  # the topology holds every host's ranks
    check_seconds(args.timeout, "--timeout")
    check_names(dtype=args.dtype, reduce_op=args.reduce_op)
    elements = args.count
    rooted = []
    for d in opdirs:
        name = _builtin_name(d)
        if name is not None:
            if bench.COLLECTIVES[name].split:
                elements = max(elements, args.count * size)
            if args.algorithm:
                check_names(algorithm=args.algorithm, collective={"sendrecv": "send_recv"}.get(name, name))
            continue
        spec = load_opspec(d)
        elements = max(elements, spec.input_count(args.count, size), spec.output_count(args.count, size)
                       if spec.kind_info.output != "recv_counts" else 0)
        if args.algorithm:
            check_op_algorithm(d, spec, args.algorithm)
        if _takes_root(spec):
            rooted.append(spec.name)
        if args.dtype is not None and _dtypes.get_dtype(args.dtype).name not in spec.dtypes:
            raise ConfigError(f"-d {args.dtype}: operator {spec.name} supports {', '.join(spec.dtypes)} "
                              f"(op.toml [op].dtypes)", key="-d", path=spec.path("op.toml"))
        if args.reduce_op is not None and spec.is_reduction and \
                _dtypes.get_reduce_op(args.reduce_op).name not in spec.reduce_ops:
            raise ConfigError(f"-o {args.reduce_op}: operator {spec.name} supports {', '.join(spec.reduce_ops)} "
                              f"(op.toml [op].reduce_ops)", key="-o", path=spec.path("op.toml"))
    if args.root is not None and not rooted and not all(_builtin_name(d) for d in opdirs):
        raise ConfigError(f"-r {args.root}: none of the operators takes a root (op.toml [op].kind: reduce, broadcast, "
                          "scatter, gather or custom)", key="-r")
    itemsize = _dtypes.get_dtype(args.dtype or "fp32").itemsize
    check_memory(elements, itemsize, args.np)


def _takes_root(spec) -> bool:
    """The operator takes a root: rooted kinds, custom operators, peer topologies (op.toml)."""
    return spec.rooted or spec.kind == "custom" or spec.topology == "peer"


def _builtin_name(opdir: str) -> str | None:
    """The built-in collective of a directory of ``aicpu_kernels/``, by its op.toml kind (run as the
    collective: its algorithm selection, checked by the bench's check of that kind); None for users'
    operators and the built-ins that are no collective of their own (barrier, batch_send_recv)."""
    from ..bench import sweep as bench

    return bench.builtin_collective(opdir)


def _run_rank(args, opdirs) -> int:
    import hcomm_kit
    from ..bench import sweep as bench
    from ..base import dtypes as _dtypes
    from ..jobs.runner import format_table, run_ops

    comm = hcomm_kit.init()
    ok = True
    all_rows: list[dict] = []
    try:
        users = [d for d in opdirs if _builtin_name(d) is None]
        if users:
            from ..build.opspec import load_opspec

            # -r goes to the operators that take a root (several operators may be listed)
            jobs = [{"op": d, "count": args.count, "dtype": args.dtype, "reduce_op": args.reduce_op,
                     "root": args.root if _takes_root(load_opspec(d)) else None, "algorithm": args.algorithm}
                    for d in users]
            rows = run_ops(comm, jobs, iters=args.iters)
            if comm.rank == 0:
                print(format_table(rows), flush=True)
            ok = all(r["ok"] is not False for r in rows)
            all_rows += rows
        for d in opdirs:
            name = _builtin_name(d)
            if name is None:
                continue
            # Built-in collectives: the bench's exact-by-construction check at count elements per rank.
            dtype = args.dtype or "fp32"
            nbytes = args.count * _dtypes.get_dtype(dtype).itemsize
            if bench.COLLECTIVES[name].split:
                nbytes *= comm.size
            rows = bench.run_bench(comm, name, [nbytes], dtype=dtype, op=args.reduce_op or "sum",
                                   root=args.root or 0, iters=args.iters, warmup=1 if args.iters else 0,
                                   check=2, algorithm=args.algorithm)
            ok = ok and all(r["check"] != "failed" for r in rows)
            all_rows += [{**r, "builtin": True} for r in rows]
        if comm.rank == 0 and args.json_out:
            with open(args.json_out, "w") as f:
                for r in all_rows:
                    f.write(json.dumps(r) + "\n")
    finally:
        comm.close()
    sys.stdout.flush()
    return 0 if ok else 1
