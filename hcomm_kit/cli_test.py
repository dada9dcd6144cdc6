"""Run an operator's generated multi-rank tests (pytest on OPDIR/tests with the hcomm_kit plugin).

  hcomm-kit test ops/my_allgather --np 4
  hcomm-kit test ops/my_allgather --np 2 -- -k fp32      (arguments after -- go to pytest)

Tests marked @pytest.mark.mpi(np=[...]) run on the rank count given by --np (default: every
count the marker lists); each rank count runs under mpirun with a timeout, and a failure shows
the failing rank's traceback.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

HELP = "run an operator's multi-rank tests"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("opdir", metavar="OPDIR", help="operator directory (with op.toml and tests/)")
    parser.add_argument("--np", "-n", type=int, default=None, metavar="N",
                        help="only this rank count (default: all counts of each test's mpi marker)")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="-- PYTEST_ARGS",
                        help="extra pytest arguments (after --)")


def run(args: argparse.Namespace) -> int:
    from .build.opbuild import build_op
    from .core.runner import resolve_op
    from .errors import ConfigError
    from .testing.plugin import entry_point_installed

    opdir = resolve_op(args.opdir).resolve()
    tests = opdir / "tests"
    if not tests.is_dir():
        raise ConfigError(f"{opdir} has no tests/ directory; re-create it with `hcomm-kit new --update {opdir}`",
                          key="OPDIR")
    build_op(opdir)  # compile once, before the ranks start
    extra = list(args.pytest_args)
    # Options written after OPDIR land in the remainder: take ours, pass the rest to pytest.
    while extra and extra[0] != "--" and extra[0] in ("--np", "-n") and len(extra) > 1:
        args.np = int(extra[1])
        extra = extra[2:]
    if extra and extra[0] == "--":
        extra = extra[1:]
    argv = [sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "--rootdir", str(opdir)]
    if not entry_point_installed():
        argv += ["-p", "hcomm_kit.testing.plugin"]
    if args.np is not None:
        expr = f"np{args.np}"
        if "-k" in extra[:-1]:  # pytest keeps only the last -k: merge the user's expression into ours
            i = extra.index("-k")
            expr = f"{expr} and ({extra[i + 1]})"
            extra = extra[:i] + extra[i + 2:]
        argv += ["-k", expr]
    argv += extra
    return subprocess.call(argv, cwd=str(opdir))

