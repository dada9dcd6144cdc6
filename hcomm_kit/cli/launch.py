"""Start any program on N ranks (re-executed under mpirun unless already under MPI).

  hcomm-kit launch --np 4 -- python train.py --epochs 1
  hcomm-kit launch --np 2 --timeout 60 -- ./my_host_program
  hcomm-kit launch --nnodes 2 --node-rank 0 --rdzv-endpoint 10.0.0.1:29400 --np 4 -- python train.py   # on host 0
  hcomm-kit launch --nnodes 2 --node-rank 1 --rdzv-endpoint 10.0.0.1:29400 --np 4 -- python train.py   # on host 1

Adds --oversubscribe, --allow-run-as-root (when root) and per-rank output tags. When one rank
exits non-zero, mpirun terminates the others; Python programs that call hcomm_kit.init() under
mpirun also abort the whole job on an uncaught exception (see hcomm_kit.core.rank.install_abort_hook).
--timeout kills the whole job after S seconds (exit status 124).

SIGTERM, SIGINT (Ctrl-C) and SIGHUP, e.g. from `timeout 15 hcomm-kit launch ...` or a CI runner
cancelling the job, stop the whole job: the ranks still running are listed with what they were
doing, the signal is forwarded, and after --grace seconds (default 5) everything left is killed;
nothing stays behind (processes, /dev/shm segments, temporary directories). Exit status 128+N.
"""

from __future__ import annotations

import argparse

HELP = "run a command on N ranks under mpirun"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--np", "-n", type=int, required=True, metavar="N",
                        help="number of ranks (with --nnodes: ranks on this host)")
    add_node_arguments(parser)
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="kill the whole job after S seconds (exit 124)")
    parser.add_argument("--grace", type=float, default=5.0, metavar="S",
                        help="on SIGTERM/SIGINT/SIGHUP or --timeout: seconds the ranks get to exit before SIGKILL "
                             "(default 5)")
    parser.add_argument("--no-tag-output", action="store_true", help="do not prefix output lines with the rank")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="show mpirun's own messages (by default each distinct error is shown once, with its ranks)")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the program and its arguments")


def add_node_arguments(parser: argparse.ArgumentParser) -> None:
    """torchrun's multi-node flags (``launch``, ``run``, ``test``, ``bench``; the pytest plugin registers
    the same, :data:`hcomm_kit.jobs.nodes.NODE_OPTIONS`)."""
    from ..jobs.nodes import NODE_OPTIONS

    g = parser.add_argument_group("several hosts (as torchrun: start the same command on every host)")
    for flags, kwargs in NODE_OPTIONS:
        g.add_argument(*flags, **kwargs)


def nodes_of(args: argparse.Namespace, np: int):
    """The :class:`~hcomm_kit.jobs.nodes.Nodes` of a multi-host launch, or None (one host).

    Raises:
        ConfigError: --nnodes > 1 without --rdzv-endpoint, or a bad value.
    """
    from ..jobs.nodes import nodes_from

    return nodes_from(getattr(args, "nnodes", 1), getattr(args, "node_rank", 0), getattr(args, "rdzv_endpoint", None),
                      np)


def job_size(args: argparse.Namespace, np: int) -> int:
    """The job's rank count: ``np`` on one host; on several (every host running ``np``) ``np`` x
    --nnodes, and in a rank of a multi-host launch the size its launcher passed on."""
    from ..base import envs

    if envs.rank_offset() is not None and envs.get("HCOMM_KIT_WORLD_SIZE"):
        return int(envs.get("HCOMM_KIT_WORLD_SIZE"))
    return np * max(1, getattr(args, "nnodes", 1))


def node_argv(args: argparse.Namespace) -> list[str]:
    """The node flags of ``args`` as arguments (for a command that passes them on), [] on one host."""
    if getattr(args, "nnodes", 1) == 1 and getattr(args, "rdzv_endpoint", None) is None:
        return []
    return ["--nnodes", str(args.nnodes), "--node-rank", str(args.node_rank), "--rdzv-endpoint",
            str(args.rdzv_endpoint)]


def run(args: argparse.Namespace) -> int:
    from ..base.errors import ConfigError
    from ..jobs.launch import launch
    from ..base.limits import check_np

    from ..jobs.preflight import check_env, check_seconds, usage_errors

    with usage_errors():  # bad input: one line, exit 2, nothing started
        check_np(args.np)
        cmd = list(args.command)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            raise ConfigError("missing command: `hcomm-kit launch --np N -- CMD ...`", key="CMD")
        check_seconds(args.timeout, "--timeout")
        check_seconds(args.grace, "--grace", zero_ok=True)
        nodes = nodes_of(args, args.np)
        check_env(args.np * (nodes.nnodes if nodes else 1))  # the topology holds every host's ranks
    return launch(cmd, args.np, timeout=args.timeout, tag_output=not args.no_tag_output, grace=args.grace,
                  verbose=args.verbose, nodes=nodes)
