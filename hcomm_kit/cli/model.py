"""The timing model: the predicted Ascend time of one call, and what made it up.

  hcomm-kit model explain allreduce -n 8 --topology A2:1x8 -b 1M
  hcomm-kit model explain allgather -n 8 --topology A2:2x4 -b 64M --algorithm AicpuAllGatherSoleNHR --json
  hcomm-kit model explain ops/my_allreduce -n 8 --topology A2:1x8 -b 1M,64M --compare allreduce
  hcomm-kit model explain ops/my_allreduce -n 4 -b 256K --links-down 0-1
  hcomm-kit model params A3

explain runs one call of COLLECTIVE (a built-in) or OPDIR (an operator directory) on N ranks in
the emulator per size, then simulates the tasks every rank's kernel issued on the product's
parameters (docs/predicted-time.md) and says what bound the modelled time: the time by bound along
the critical path (the AICPU's issue, a link, a local copy / reduction, a peer's notify, the host
launch) and why, in sentences naming the ranks, threads and links; every directed link's bytes,
busy time and utilisation, the idle links; every device thread's use; the critical path in
phases (--tasks: task by task, why = "issued": the AICPU issued it then, "thread": its thread's
previous task ended, "notify": the record it waited for arrived, "shared link": it shared a link
or port). --compare OTHER runs a second operator or built-in on the same ranks, topology and
sizes and puts the two side by side. --json prints all of it (one object per run; the keys are
HcommKitModelExplain's, see emu_ext.h, plus "subject", "size" and "summary": {"bound_us",
"dominant", "why"}), --all adds every task. params prints a product's parameters with their
sources (model/params/<product>.toml), --calibration its calibration table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HELP = "predicted Ascend time of one call and its critical path (timing model)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="model_command", metavar="explain|params")
    ex = sub.add_parser("explain", help="simulate one call and print its critical path")
    ex.add_argument("collective", metavar="COLLECTIVE|OPDIR", help="a built-in collective or an operator directory")
    ex.add_argument("-n", "--np", type=int, default=None, metavar="N",
                    help="number of ranks (default: an operator's op.toml [test] topology's, --topology's, else 2)")
    ex.add_argument("-b", "--bytes", default="1M",
                    help="data size per rank as hcomm-kit bench counts it, or a comma-separated list (default 1M)")
    ex.add_argument("-d", "--datatype", default="fp32", help="dtype (default fp32)")
    ex.add_argument("-o", "--op", default=None, help="reduce op (default: sum / the operator's first listed)")
    ex.add_argument("-r", "--root", type=int, default=0, help="root rank of rooted collectives (default 0)")
    ex.add_argument("--algorithm", default=None,
                    help="built-ins: CANN's name (e.g. AicpuAllReduceSoleMeshTwoShot), an alias (mesh, nhr, "
                         "hierarchical) or fastest (default: CANN's choice); operators: one of op.toml's algorithms")
    ex.add_argument("--compare", default=None, metavar="OTHER",
                    help="a second built-in collective or operator directory, modelled beside the first")
    ex.add_argument("--tasks", action="store_true", help="also print the critical path task by task")
    ex.add_argument("--json", action="store_true", help="print the simulation and its summary as JSON")
    ex.add_argument("--all", action="store_true", help="with --json: every task, not only the critical path")
    ex.add_argument("--trace", default=None, metavar="FILE.json",
                    help="write the job's trace on the modelled clock (HCOMM_KIT_TRACE=FILE with HCOMM_KIT_TRACE_CLOCK=model: "
                         "every task of every rank, an arrow per notify edge, the critical path marked)")
    ex.add_argument("--timeout", type=float, default=600, help="kill the job after S seconds (default 600)")
    ex.add_argument("--topology", default=None, metavar="PRODUCT:SxN",
                    help="cluster topology: A2:2x8, A3:1x16, 950:4x8, A3:2x2x8 (super-pods x servers x NPUs); sets "
                         "HCOMM_KIT_TOPOLOGY and HCOMM_KIT_SOC")
    ex.add_argument("--links-down", default=None, metavar="A-B,...", help="links taken down (HCOMM_KIT_LINKS_DOWN)")
    ex.add_argument("-v", "--verbose", action="store_true", help="show mpirun's own messages")
    pa = sub.add_parser("params", help="print a product's parameters and their sources")
    pa.add_argument("product", nargs="?", default=None, help="A2, A3 or 950 (default: all)")
    pa.add_argument("--calibration", action="store_true",
                    help="print the calibration table (HIXL's figure beside the model's) instead of the file")


def run(args: argparse.Namespace) -> int:
    if args.model_command == "params":
        return _params(args.product, args.calibration)
    if args.model_command != "explain":
        print("hcomm-kit model: choose explain or params (hcomm-kit model -h)", file=sys.stderr)
        return 2
    return _explain(args)


def _params(product: str | None, calibration: bool = False) -> int:
    from ..base import model_params

    if calibration:
        print(model_params.calibration_table([product] if product else None))
        return 0
    for name in [product] if product else model_params.products():
        p = model_params.load(name)
        print(p.file.read_text().rstrip())
        print()
    return 0


def _explain(args: argparse.Namespace) -> int:
    from ..bench import sweep as bench
    from ..base.limits import check_np
    from ..core.bootstrap import under_mpi
    from ..jobs.preflight import usage_errors
    from ..base.errors import ConfigError
    from . import _apply_op_job, _apply_topology_arguments

    with usage_errors():
        if args.np is not None:
            check_np(args.np)
        first = bench._target(args.collective, None)
        _apply_topology_arguments(args)
        _apply_op_job(args, [first.opdir] if first is not None else [])  # op.toml [test]: topology, links, -n
        check_np(args.np)
        if args.np < 2:
            raise ConfigError("-n 1: one rank issues no Hcomm tasks, there is nothing to model", key="-n")
        sizes = [bench.parse_size(x) for x in str(args.bytes).split(",") if x.strip()]
        if not sizes:
            raise ConfigError(f"-b {args.bytes!r}: no size", key="-b")
        subjects = []
        for what in [args.collective] + ([args.compare] if args.compare else []):
            target = bench._target(what, None)
            if target is not None:
                bench.check_target(target, args.datatype, args.op)
            subjects.append(target.opdir if target is not None else what)
    if not under_mpi():
        from ..jobs.launch import launch
        from .bench import _prebuild

        dirs = [s for s in subjects if bench._target(s, None) is not None]
        if dirs:
            _prebuild(dirs)
        argv = [sys.executable, "-m", "hcomm_kit", "model", "explain", subjects[0], "-n", str(args.np), "-b",
                ",".join(map(str, sizes)), "-d", args.datatype, "-r", str(args.root), "--timeout", str(args.timeout)]
        for flag, val in (("-o", args.op), ("--algorithm", args.algorithm),
                          ("--compare", subjects[1] if len(subjects) > 1 else None)):
            if val is not None:
                argv += [flag, str(val)]
        argv += ["--json"] if args.json else []
        argv += ["--all"] if args.all else []
        argv += ["--tasks"] if args.tasks else []
        env = _trace_env(args.trace)
        return launch(argv, args.np, timeout=args.timeout, tag_output=False, verbose=args.verbose, env=env or None)
    import hcomm_kit

    from ..bench.explain import format_compare, format_explain, summarise

    os.environ.update(_trace_env(args.trace))  # under mpirun already: before the emulator reads its config

    comm = hcomm_kit.init()
    runs: list[tuple[dict, dict]] = []
    try:
        for nbytes in sizes:
            for i, subject in enumerate(subjects):
                with open(os.devnull, "w") as quiet:
                    rows = bench.run_bench(comm, subject, [nbytes], dtype=args.datatype, op=args.op, root=args.root,
                                           iters=1, warmup=0, check=0, algorithm=args.algorithm if i == 0 else None,
                                           out=quiet)
                sim = comm.model_explain(args.all) if comm.rank == 0 else {}
                runs.append((sim, rows[0]))
        if comm.rank == 0:
            if args.json:
                docs = [dict(sim, subject=subjects[i % len(subjects)], size=row["size"],
                             algorithm=row.get("selected") or row.get("algorithm"), summary=summarise(sim))
                        for i, (sim, row) in enumerate(runs)]
                print(json.dumps(docs[0] if len(docs) == 1 else {"runs": docs}))
            elif len(subjects) > 1:
                names = tuple(Path(x).name if os.path.isdir(x) else x for x in subjects)
                print(format_compare(runs, names, comm.topology))  # type: ignore[arg-type]
            else:
                print("\n\n".join(format_explain(sim, row, comm.topology, tasks=args.tasks) for sim, row in runs))
    finally:
        comm.close()
    sys.stdout.flush()
    return 0


def _trace_env(trace: str | None) -> dict[str, str]:
    """--trace FILE: the job writes its trace on the modelled clock (HCOMM_KIT_TRACE_CLOCK=model, the
    emulator's one writer of modelled traces)."""
    return {"HCOMM_KIT_TRACE": str(Path(trace).resolve()), "HCOMM_KIT_TRACE_CLOCK": "model"} if trace else {}
