"""The ``hcomm-kit`` command line (also ``python -m hcomm_kit``).

Subcommands live in their own modules and are registered in :data:`SUBCOMMANDS`. To add one
(e.g. ``build``), write ``hcomm_kit/cli/build.py`` with::

    \"\"\"One-paragraph description shown by `hcomm-kit build --help`.\"\"\"
    HELP = "one line shown in `hcomm-kit --help`"

    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(...)

    def run(args: argparse.Namespace) -> int:   # exit status
        ...

and add ``"build": "hcomm_kit.cli.build"`` to :data:`SUBCOMMANDS`. Keep module import cheap
(import heavy things inside ``run``). Raise :class:`~hcomm_kit.base.errors.HcommKitError` for
user-facing failures: :func:`main` prints it as ``hcomm-kit: error: ...`` and exits 1; a bad
option or environment value found before anything starts is a :class:`~hcomm_kit.base.errors.UsageError`
(``hcomm-kit COMMAND: error: ...``, exit 2, as argparse's own).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Sequence

from .._version import __version__
from ..base.errors import HcommKitError, UsageError

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

# name -> module; the order here is the order in `hcomm-kit --help`.
SUBCOMMANDS: dict[str, str] = {
    "new": "hcomm_kit.cli.new",
    "build": "hcomm_kit.cli.build",
    "doctor": "hcomm_kit.cli.doctor",
    "config": "hcomm_kit.cli.config",
    "launch": "hcomm_kit.cli.launch",
    "run": "hcomm_kit.cli.run",
    "bench": "hcomm_kit.cli.bench",
    "test": "hcomm_kit.cli.test",
    "demo": "hcomm_kit.cli.demo",
    "trace": "hcomm_kit.cli.trace",
    "model": "hcomm_kit.cli.model",
    "docs": "hcomm_kit.cli.docs",
}


_TOPOLOGY_COMMANDS = ("launch", "run", "test", "bench", "demo")


def _add_topology_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", default=None, metavar="PRODUCT:SxN",
                        help="cluster topology of the job: A2:2x8, A3:1x16, 950:4x8, A3:2x2x8 (super-pods x servers x "
                             "NPUs); sets HCOMM_KIT_TOPOLOGY and HCOMM_KIT_SOC")
    parser.add_argument("--links-down", default=None, metavar="A-B,...",
                        help="links taken down, e.g. 0-1,2-5 (sets HCOMM_KIT_LINKS_DOWN)")


def _apply_topology_arguments(args: argparse.Namespace) -> None:
    """--topology / --links-down: validated, then exported for the job's processes."""
    from ..base import envs
    from ..base.errors import ConfigError

    try:
        _export_topology(args, envs)
    except UsageError:
        raise
    except ConfigError as exc:
        raise UsageError.of(exc) from None


def _export_topology(args: argparse.Namespace, envs) -> None:
    if getattr(args, "topology", None):
        os.environ["HCOMM_KIT_TOPOLOGY"] = args.topology
        product, servers, npus = envs.topology()  # type: ignore[misc]
        os.environ["HCOMM_KIT_SOC"] = envs.TOPOLOGY_PRODUCTS[product]
        need = servers * npus
        np_ = getattr(args, "np", None)
        if isinstance(np_, int) and np_ != need:
            raise UsageError(f"--topology {args.topology} describes {servers} servers x {npus} NPUs = {need} ranks, "
                             f"but --np is {np_}", key="--topology")
        if envs.device_count() < need:
            os.environ["HCOMM_KIT_DEVICE_COUNT"] = str(need)
    if getattr(args, "links_down", None):
        # "none": every link up, also against op.toml [test] links_down (the emulator reads "" so)
        os.environ["HCOMM_KIT_LINKS_DOWN"] = "" if args.links_down.strip().lower() == "none" else args.links_down
        envs.links_down()


def _apply_op_job(args: argparse.Namespace, opdirs: "list[str]", default_np: int | None = 2) -> None:
    """op.toml ``[test]`` of the operators in ``opdirs`` (the same in every one of them; else none):
    its topology and links down exported where ``--topology`` / ``--links-down`` / the environment /
    a ``--np`` of another rank count did not decide them (:func:`hcomm_kit.build.testjob.op_job`),
    and ``args.np`` (None: not given) set to the topology's rank count, else ``default_np``.
    Notes on what was left out go to stderr (once: not in the ranks)."""
    from pathlib import Path

    from ..build.opspec import OP_TOML, load_opspec
    from ..build.testjob import op_job
    from ..core.bootstrap import under_mpi

    specs = [load_opspec(d) for d in opdirs if (Path(d) / OP_TOML).is_file()]
    jobs = {(s.test_topology, s.test_links_down) for s in specs}
    if len(jobs) > 1:
        if not under_mpi():
            which = "; ".join(f"{s.name}: {s.test_topology or 'one server'}, links down {s.test_links_down or 'none'}"
                              for s in specs)
            print(f"hcomm-kit {args._command}: note: the operators' op.toml [test] tables differ ({which}): none is "
                  "used", file=sys.stderr)
        specs = []
    job = op_job(specs[0], np=args.np) if specs else None
    if job is not None:
        os.environ.update(job.env)
        if not under_mpi():
            for note in job.notes:
                print(f"hcomm-kit {args._command}: note: {note}", file=sys.stderr)
    if args.np is None:
        args.np = job.np if job is not None and job.np else _env_np(default_np)


def _env_np(default_np: int | None) -> int | None:
    """The rank count of HCOMM_KIT_TOPOLOGY when it is set, else ``default_np``."""
    from ..base import envs

    topo = envs.topology()
    return topo[1] * topo[2] if topo else default_np


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="hcomm-kit",
        description="Toolkit for custom HCCL collective operators on Ascend, with a CPU emulator.",
    )
    parser.add_argument("--version", action="version", version=f"hcomm-kit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        if name in _TOPOLOGY_COMMANDS:
            _add_topology_arguments(p)
        p.set_defaults(_run=module.run, _command=name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 = success)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        _apply_topology_arguments(args)
        return int(args._run(args) or 0)
    except UsageError as exc:
        print(f"hcomm-kit {args._command}: error: {exc}", file=sys.stderr)
        _end_job_of_rank()
        return 2
    except HcommKitError as exc:
        print(f"hcomm-kit: error: {exc}", file=sys.stderr)
        _end_job_of_rank()
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _stdout_closed()


def _end_job_of_rank() -> None:
    """A rank of an MPI job (``hcomm-kit run/bench/test`` started its ranks) that failed ends the whole
    job with ``MPI_Abort``: its peers may be waiting for it in an MPI call (the result check, a
    barrier), and a normal exit would wait for them in ``MPI_Finalize``: a job that never ends."""
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        if mpi is None or not mpi.Is_initialized() or mpi.Is_finalized() or mpi.COMM_WORLD.Get_size() < 2:
            return
        sys.stderr.flush()
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - nothing to end
        return
    mpi.COMM_WORLD.Abort(1)


def _stdout_closed() -> int:
    """The reader of our output went away (``hcomm-kit trace summary FILE | head``): stop quietly, as
    Unix tools do (status 128 + SIGPIPE), without Python's traceback or its complaint at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush of stdout must not fail again
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return 128 + signal.SIGPIPE
