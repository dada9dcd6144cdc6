"""Look at a trace written with HCOMM_KIT_TRACE=FILE (Chrome / Perfetto JSON, every rank merged).

  HCOMM_KIT_TRACE=trace.json hcomm-kit run ops/my_op --np 4
  hcomm-kit trace summary trace.json          # busy / wait time per device thread of every rank

Open the file itself in https://ui.perfetto.dev (or chrome://tracing): a track per device thread
per rank, a slice per task, arrows from each notify record to the wait it released.
"""

from __future__ import annotations

import argparse

HELP = "summarise an HCOMM_KIT_TRACE file (busy/wait time per device thread)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser("summary", help="busy and wait time per track of every rank")
    s.add_argument("file", metavar="FILE", help="the trace (HCOMM_KIT_TRACE)")


def run(args: argparse.Namespace) -> int:
    from ..diag.trace import format_summary, load, summary

    rows = summary(load(args.file))
    print(format_summary(rows))
    return 0
