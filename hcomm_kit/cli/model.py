"""The timing model: the predicted Ascend time of one call, and what made it up.

  hcomm-kit model explain allreduce -n 8 --topology A2:1x8 -b 1M
  hcomm-kit model explain allgather -n 8 --topology A2:2x4 -b 64M --algorithm AicpuAllGatherSoleNHR --json
  hcomm-kit model explain ops/my_allreduce -n 4 -b 256K --links-down 0-1
  hcomm-kit model params A3

explain runs one call of COLLECTIVE (a built-in) or OPDIR (an operator directory) on N ranks in
the emulator, then simulates the tasks every rank's kernel issued on the product's parameters
(docs/predicted-time.md) and prints the modelled time and its critical path: the chain of tasks,
ranks and links whose ends decided the time (why: "issued" = the AICPU issued it then, "thread" =
its thread's previous task ended, "notify" = the record it waited for arrived, "shared link" = it
shared a link or port). --json prints the whole simulation as JSON (--all: every task).
params prints a product's parameters with their sources (model/params/<product>.toml).
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
    ex.add_argument("-n", "--np", type=int, default=2, metavar="N", help="number of ranks (default 2)")
    ex.add_argument("-b", "--bytes", default="1M", help="data size per rank as hcomm-kit bench counts it (default 1M)")
    ex.add_argument("-d", "--datatype", default="fp32", help="dtype (default fp32)")
    ex.add_argument("-o", "--op", default=None, help="reduce op (default: sum / the operator's first listed)")
    ex.add_argument("-r", "--root", type=int, default=0, help="root rank of rooted collectives (default 0)")
    ex.add_argument("--algorithm", default=None,
                    help="built-ins: CANN's name (e.g. AicpuAllReduceSoleMeshTwoShot), an alias (mesh, nhr, "
                         "hierarchical) or fastest (default: CANN's choice)")
    ex.add_argument("--json", action="store_true", help="print the simulation as JSON")
    ex.add_argument("--all", action="store_true", help="with --json: every task, not only the critical path")
    ex.add_argument("--trace", default=None, metavar="FILE.json",
                    help="write the job's trace on the modelled clock (HCOMM_KIT_TRACE=FILE with HCOMM_KIT_TRACE_CLOCK=model: "
                         "every task of every rank, an arrow per notify edge, the critical path marked)")
    ex.add_argument("--timeout", type=float, default=600, help="kill the job after S seconds (default 600)")
    ex.add_argument("--topology", default=None, metavar="PRODUCT:SxN",
                    help="cluster topology: A2:2x8, A3:1x16, 950:4x8 (sets HCOMM_KIT_TOPOLOGY and HCOMM_KIT_SOC)")
    ex.add_argument("--links-down", default=None, metavar="A-B,...", help="links taken down (HCOMM_KIT_LINKS_DOWN)")
    ex.add_argument("-v", "--verbose", action="store_true", help="show mpirun's own messages")
    pa = sub.add_parser("params", help="print a product's parameters and their sources")
    pa.add_argument("product", nargs="?", default=None, help="A2, A3 or 950 (default: all)")


def run(args: argparse.Namespace) -> int:
    if args.model_command == "params":
        return _params(args.product)
    if args.model_command != "explain":
        print("hcomm-kit model: choose explain or params (hcomm-kit model -h)", file=sys.stderr)
        return 2
    return _explain(args)


def _params(product: str | None) -> int:
    from ..base import model_params

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
    from . import _apply_topology_arguments

    with usage_errors():
        check_np(args.np)
        if args.np < 2:
            raise ConfigError("-n 1: one rank issues no Hcomm tasks, there is nothing to model", key="-n")
        nbytes = bench.parse_size(args.bytes)
        target = bench._target(args.collective, None)
        if target is not None:
            bench.check_target(target, args.datatype, args.op)
        _apply_topology_arguments(args)
    subject = target.opdir if target is not None else args.collective
    if not under_mpi():
        from ..jobs.launch import launch
        from .bench import _prebuild

        if target is not None:
            _prebuild([target.opdir])
        argv = [sys.executable, "-m", "hcomm_kit", "model", "explain", subject, "-n", str(args.np), "-b",
                str(nbytes), "-d", args.datatype, "-r", str(args.root), "--timeout", str(args.timeout)]
        for flag, val in (("-o", args.op), ("--algorithm", args.algorithm)):
            if val is not None:
                argv += [flag, str(val)]
        argv += ["--json"] if args.json else []
        argv += ["--all"] if args.all else []
        env = _trace_env(args.trace)
        return launch(argv, args.np, timeout=args.timeout, tag_output=False, verbose=args.verbose, env=env or None)
    import hcomm_kit

    os.environ.update(_trace_env(args.trace))  # under mpirun already: before the emulator reads its config

    comm = hcomm_kit.init()
    try:
        with open(os.devnull, "w") as quiet:
            rows = bench.run_bench(comm, subject, [nbytes], dtype=args.datatype, op=args.op, root=args.root,
                                   iters=1, warmup=0, check=0, algorithm=args.algorithm, out=quiet)
        if comm.rank == 0:
            sim = comm.model_explain(args.all)
            sim["selected"] = rows[0].get("selected")  # the algorithm that ran (a built-in's: CANN's name)
            if args.json:
                print(json.dumps(sim))
            else:
                print(format_explain(sim, rows[0], comm.topology))
    finally:
        comm.close()
    sys.stdout.flush()
    return 0


def _trace_env(trace: str | None) -> dict[str, str]:
    """--trace FILE: the job writes its trace on the modelled clock (HCOMM_KIT_TRACE_CLOCK=model, the
    emulator's one writer of modelled traces)."""
    return {"HCOMM_KIT_TRACE": str(Path(trace).resolve()), "HCOMM_KIT_TRACE_CLOCK": "model"} if trace else {}


def format_explain(sim: dict, row: dict, topo) -> str:
    """The simulation as text: the time, then the critical path one task a line."""
    shape = f"{len(topo.servers)} server(s) x {len(topo.servers[0])}"
    down = f", links down {', '.join(f'{a}-{b}' for a, b in topo.links_down)}" if topo.links_down else ""
    bus = f", busbw {row['model_busbw']:.3f} GB/s" if row.get("model_busbw") else ""
    algo = row.get("selected") or row.get("algorithm", "auto")
    lines = [f"# {row['collective']} ({algo}), {row['ranks']} ranks, {row['size']} bytes, "
             f"{row['dtype']} on {sim['product']} ({shape}{down}): modelled {sim['time_us']:.2f} us{bus}",
             f"# operation '{sim['op']}' #{sim['instance']}: {sim['tasks']} tasks on {len(sim['ranks'])} ranks; "
             f"critical path ({len(sim['critical_path'])} tasks, first to last):",
             f"{'issue_us':>10} {'start_us':>10} {'end_us':>10}  {'rank':>4}  {'thread':<16} {'task':<22} "
             f"{'bytes':>10} {'peer':>4} {'link':<5} why"]
    for t in sim["critical_path"]:
        lines.append(f"{t['issue_us']:>10.2f} {t['start_us']:>10.2f} {t['end_us']:>10.2f}  {t['rank']:>4}  "
                     f"{t['thread']:<16} {t['task']:<22} {t.get('bytes', ''):>10} {t.get('peer', ''):>4} "
                     f"{t.get('link', ''):<5} {t['why']}"
                     + (f" (rank {t['after'][0]} task {t['after'][1]})" if t.get("after") and t["why"] == "notify"
                        else ""))
    for n in sim.get("notes", []):
        lines.append(f"# note: {n}")
    return "\n".join(lines)
