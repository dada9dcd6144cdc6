"""Run an operator's generated multi-rank tests (pytest on OPDIR/tests with the hcomm_kit plugin).

  hcomm-kit test ops/my_allgather                  every rank count of the tests' markers (2, 3, 4)
  hcomm-kit test ops/my_allgather --np 5           all tests at 5 ranks
  hcomm-kit test ops/my_allgather --np 2 -- -k fp32      (arguments after -- go to pytest)
  hcomm-kit test ops/my_allgather --debug          debug build; failures show the kernel's logs
  hcomm-kit test ops/my_allreduce --algorithm ring only the tests of one of op.toml's algorithms
  hcomm-kit test aicpu_kernels/reduce --np 3       a directory without tests/ (the built-ins): its kind's test
  hcomm-kit test ops/my_allgather --np 2 --nnodes 2 --node-rank K --rdzv-endpoint HOST:PORT   (on each of 2 hosts:
                                                   every test at 4 ranks, 2 on each host)

Each rank count runs under mpirun with a timeout. The run stops at the first failure (the other
rank counts are not started) unless --keep-going; a failure shows each distinct error once with
the ranks that reported it, and what the kernel printed. A line at the end sums up each rank
count. Log directories of passed jobs are removed; failed jobs' stay (the last 10), and
--keep-logs keeps all.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

HELP = "run an operator's multi-rank tests"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("opdir", metavar="OPDIR", help="operator directory (with op.toml and tests/)")
    parser.add_argument("--np", "-n", type=int, default=None, metavar="N",
                        help="run every test at N ranks (default: the counts of each test's mpi marker)")
    parser.add_argument("--keep-going", action="store_true",
                        help="run everything even after a failure (default: stop at the first failure)")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep every job's log directory (default: only failed jobs', the last 10)")
    parser.add_argument("--debug", action="store_true",
                        help="test the debug build (-O0 -g); failures show the kernel's OP_LOG_INFO logs")
    parser.add_argument("--algorithm", default=None, metavar="NAME",
                        help="only the tests of this algorithm (op.toml [op].algorithms; a built-in's: CANN's names, "
                             "e.g. AicpuAllReduceSoleNHR)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="one line per test, and Open MPI's messages in failures")
    from .launch import add_node_arguments

    add_node_arguments(parser)
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS",
                        help="extra pytest arguments (after --)")


# our options that may follow OPDIR (they then land in the remainder) -> attribute
_OURS = {"--np": "np", "-n": "np", "--keep-going": "keep_going", "--keep-logs": "keep_logs", "--debug": "debug",
         "-v": "verbose", "--verbose": "verbose", "--topology": "topology", "--links-down": "links_down",
         "--algorithm": "algorithm", "--nnodes": "nnodes", "--node-rank": "node_rank",
         "--rdzv-endpoint": "rdzv_endpoint"}
_VALUED = ("topology", "links_down", "algorithm", "nnodes", "node_rank", "rdzv_endpoint")  # take a value (besides --np)
_INTS = ("nnodes", "node_rank")


def run(args: argparse.Namespace) -> int:
    import shutil
    import tempfile
    from pathlib import Path

    from ..base.errors import ConfigError
    from ..base.limits import check_np
    from ..base.resources import aicpu_kernels_dir
    from ..build.opspec import load_opspec
    from ..jobs.preflight import check_env, check_op_algorithm, usage_errors
    from ..jobs.runner import resolve_op
    from ..scaffold.render import render_kind_test

    with usage_errors():  # bad input: one line, exit 2, nothing started
        extra = _take_ours(args, list(args.pytest_args))
        from . import _apply_topology_arguments

        _apply_topology_arguments(args)  # --topology / --links-down written after OPDIR
        if args.np is not None:
            check_np(args.np)
        from .launch import job_size, nodes_of

        nodes_of(args, args.np or 1)  # the node flags are checked here (the plugin meets the other hosts)
        check_env(job_size(args, args.np) if args.np is not None else None)
        opdir = resolve_op(args.opdir).resolve()
        tests = opdir / "tests"
        spec = load_opspec(opdir)
        _apply_op_job(spec, args.np)
        if args.algorithm:
            check_op_algorithm(str(opdir), spec, args.algorithm)
        rootdir = opdir
        if not tests.is_dir():
            if opdir.parent != aicpu_kernels_dir().resolve():
                raise ConfigError(f"{opdir} has no tests/ directory; re-create it with `hcomm-kit new --update "
                                  f"{opdir}`", key="OPDIR")
            # a built-in: its kind's generated test, written outside the package for this run
            text = render_kind_test(spec, opdir)
            rootdir = Path(tempfile.mkdtemp(prefix=f"hcomm_kit_test_{opdir.name}_"))
            tests = rootdir / "tests"
            tests.mkdir()
            (tests / f"test_{spec.name}.py").write_text(text)
    if args.debug:
        os.environ["HCOMM_KIT_DEBUG"] = "1"
    try:
        return _run_pytest(args, opdir, tests, rootdir, extra)
    finally:
        if rootdir != opdir:
            shutil.rmtree(rootdir, ignore_errors=True)


def _run_pytest(args: argparse.Namespace, opdir: "Path", tests: "Path", rootdir: "Path", extra: list[str]) -> int:
    """pytest on ``tests`` (the plugin starts the mpirun jobs); its exit status."""
    from ..base import envs
    from .bench import _prebuild
    from ..testing.runner import _SLOW_PLUGINS_OFF, entry_point_installed

    _prebuild([str(opdir)])  # compile once, before the ranks start
    argv = [sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", *_SLOW_PLUGINS_OFF,
            "--rootdir", str(rootdir), "--tb=short", "-v" if args.verbose else "-q"]
    if not entry_point_installed():
        argv += ["-p", "hcomm_kit.testing.plugin"]
    if args.np is not None:  # on several hosts --np is this host's ranks (as launch): every job runs np x nnodes
        argv += ["--mpi-np", str(args.np * args.nnodes)]
    from .launch import node_argv

    argv += node_argv(args)
    if not args.keep_going:
        argv.append("-x")
    if args.keep_logs:
        argv.append("--keep-logs")
    if args.algorithm:
        argv += ["--op-algorithm", args.algorithm]
    argv += extra
    rc = subprocess.call(argv, cwd=str(rootdir))
    if rc == 5:  # pytest: no test collected
        where = f" at --np {args.np}" if args.np is not None else ""
        print(f"hcomm-kit test: no test of {tests} was selected{where}; check the -k/-m arguments after --"
              if extra else f"hcomm-kit test: {tests} holds no test", file=sys.stderr)
    elif rc == 0 and envs.debug():
        print("hcomm-kit test: passed with the debug build (kernel logs are shown for failing tests)",
              file=sys.stderr)
    return rc


def _apply_op_job(spec, np: int | None) -> None:
    """op.toml ``[test]`` for the jobs of the generated tests: exported here (the tests' markers read
    the same, :func:`hcomm_kit.testing.opjob.mpi_job`); at a ``--np`` other than its topology's,
    HCOMM_KIT_TOPOLOGY and HCOMM_KIT_LINKS_DOWN are set empty (one server, every link up) so that
    the markers leave them out too."""
    from ..build.testjob import op_job

    job = op_job(spec, np=np)
    os.environ.update(job.env)
    if job.notes:
        os.environ.setdefault("HCOMM_KIT_TOPOLOGY", "")
        os.environ.setdefault("HCOMM_KIT_LINKS_DOWN", "")
        for note in job.notes:
            print(f"hcomm-kit test: note: {note}", file=sys.stderr)


def _take_ours(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """Options written after OPDIR land in the remainder: take ours, return the rest for pytest."""
    while extra and extra[0] != "--" and extra[0] in _OURS:
        flag = extra.pop(0)
        if _OURS[flag] == "np":
            if not extra:
                from ..base.errors import ConfigError

                raise ConfigError(f"{flag} needs a rank count", key="--np")
            try:
                args.np = int(extra.pop(0))
            except ValueError:
                from ..base.errors import ConfigError

                raise ConfigError(f"{flag}: expected a whole number of ranks", key="--np") from None
        elif _OURS[flag] in _VALUED:
            if not extra:
                from ..base.errors import ConfigError

                raise ConfigError(f"{flag} needs a value", key=flag)
            value = extra.pop(0)
            if _OURS[flag] in _INTS:
                try:
                    value = int(value)
                except ValueError:
                    from ..base.errors import ConfigError

                    raise ConfigError(f"{flag} {value!r}: expected a whole number", key=flag) from None
            setattr(args, _OURS[flag], value)
        else:
            setattr(args, _OURS[flag], True)
    if extra and extra[0] == "--":
        extra = extra[1:]
    return extra
