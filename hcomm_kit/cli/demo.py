"""End-to-end demo: scaffold two operators, build them, run them on 4 ranks on the emulator and
check them against numpy.

  hcomm-kit demo                    # ring-allreduce and mesh-allgather, 4 ranks, fp32
  hcomm-kit demo --np 2 --count 1000 --keep

Steps: build the emulator (once per machine; its own line), `hcomm-kit new demo_allreduce
--pattern ring-allreduce` and `... --pattern mesh-allgather` into a temporary directory,
`hcomm-kit build` both, then `hcomm-kit run` them on N ranks.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HELP = "scaffold, build and run two operators on 4 ranks, checked against numpy"

PATTERNS = ("ring-allreduce", "mesh-allgather")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--np", "-n", type=int, default=4, metavar="N", help="number of ranks (default 4)")
    parser.add_argument("--count", "-c", type=int, default=65536, help="elements per rank (default 65536)")
    parser.add_argument("-d", "--dtype", default="fp32", help="element type (default fp32)")
    parser.add_argument("--handshake", choices=("thread-notify", "acl-notify"), default="thread-notify")
    parser.add_argument("--keep", action="store_true", help="keep the scaffolded operators (prints where)")
    parser.add_argument("--timeout", type=float, default=300, help="kill the run after S seconds (default 300)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show mpirun's own messages")


def run(args: argparse.Namespace) -> int:
    from ..base import progress
    from ..build.opbuild import build_op
    from ..jobs.launch import launch
    from ..base.errors import ConfigError
    from ..base.limits import check_np
    from ..scaffold.render import new_op

    from ..base import dtypes
    from ..jobs.preflight import check_env, check_memory, check_names, check_seconds, usage_errors

    with usage_errors():  # bad input: one line, exit 2, nothing started
        check_np(args.np)
        if args.count < 1:
            raise ConfigError(f"--count {args.count}: use at least 1 element per rank", key="--count")
        check_seconds(args.timeout, "--timeout")
        check_names(dtype=args.dtype)
        check_env(args.np)
        check_memory(args.count, dtypes.get_dtype(args.dtype).itemsize, args.np)
    work = Path(tempfile.mkdtemp(prefix="hcomm_kit_demo_"))
    try:
        opdirs = []
        with progress.Progress("demo", total=len(PATTERNS) + 2) as bar:
            _emulator_step()  # its one-time build is its own line, not the first operator's time
            bar.advance(detail="emulator")
            for pattern in PATTERNS:
                name = "demo_" + pattern.replace("-", "_")
                t0 = time.perf_counter()
                res = new_op(name, pattern=pattern, handshake=args.handshake, directory=work)
                b = build_op(res.opdir)
                print(f"[demo] {pattern:15s} scaffolded + built {b.so_path.name} "
                      f"({'cached' if b.cached else 'compiled'}, {time.perf_counter() - t0:.1f} s)", flush=True)
                opdirs.append(str(res.opdir))
                bar.advance(detail=pattern)
            print(f"[demo] running on {args.np} ranks (mpirun, emulator {_soc()}) ...", flush=True)
            table = work / "rows.jsonl"
            argv = [sys.executable, "-m", "hcomm_kit", "run", *opdirs, "--np", str(args.np), "--count",
                    str(args.count), "-d", args.dtype, "--iters", "10", "--json", str(table)]
            rc = launch(argv, args.np, timeout=args.timeout, tag_output=False, verbose=args.verbose)
            bar.advance(detail="run")
        if rc != 0:
            print(f"hcomm-kit demo: the run failed (exit status {rc})", file=sys.stderr)
            return rc or 1
        rows = [json.loads(line) for line in table.read_text().splitlines() if line.strip()]
        bad = [r for r in rows if r["ok"] is not True]
        print(f"[demo] {'all results match numpy' if not bad else 'MISMATCH'}"
              + (f"; operators kept in {work}" if args.keep else ""))
        return 0 if not bad else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _emulator_step() -> None:
    """Build (or find in the cache) the emulator library and say which, with the time it took."""
    from ..build import emulator as _emulator
    from ..build import cache

    start, t0 = time.time(), time.perf_counter()
    lib = _emulator.get_library()
    try:
        fresh = (lib.parent / cache.STAMP_NAME).stat().st_mtime >= start - 1.0
    except OSError:
        fresh = False
    print(f"[demo] emulator        {'compiled' if fresh else 'cached'} {lib.name} "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)


def _soc() -> str:
    from ..base import envs

    return envs.soc()
