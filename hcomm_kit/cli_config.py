"""Print compiler/linker flags for the emulator, like pkg-config.

Examples:
  g++ $(hcomm-kit config --cflags) my.cc $(hcomm-kit config --libs)
  hcomm-kit config --include        # header directory
  hcomm-kit config --library-dir    # directory with libhcomm_emu.so and libascendcl.so etc.
"""

from __future__ import annotations

import argparse
import sys

HELP = "print emulator build flags (--cflags, --libs, --include, --library-dir)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options: one or more of --cflags/--libs/--include/--library-dir, and --sanitize."""
    parser.add_argument("--cflags", action="store_true", help="compile flags (-I<include>)")
    parser.add_argument("--libs", action="store_true", help="link flags (-L<dir> -lhcomm_emu -Wl,-rpath,<dir>); builds the library if needed")
    parser.add_argument("--include", action="store_true", help="the include directory")
    parser.add_argument("--library-dir", action="store_true", help="the library directory; builds the library if needed")
    parser.add_argument("--sanitize", choices=("", "address", "thread"), default=None,
                        help="sanitizer variant of the library (default: $HCOMM_KIT_SANITIZE)")


def run(args: argparse.Namespace) -> int:
    """Print the requested values, space-separated on one line (pkg-config style)."""
    from . import _emulator

    out: list[str] = []
    if args.cflags:
        out.append(_emulator.cflags())
    if args.libs:
        out.append(_emulator.libs(args.sanitize))
    if args.include:
        out.append(str(_emulator.get_include()))
    if args.library_dir:
        out.append(str(_emulator.library_dir(args.sanitize)))
    if not out:
        print("hcomm-kit config: give at least one of --cflags, --libs, --include, --library-dir",
              file=sys.stderr)
        return 2
    print(" ".join(out))
    return 0
