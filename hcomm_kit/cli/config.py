"""Print compiler/linker flags for the emulator, like pkg-config, or write a CANN-shaped tree.

Examples:
  g++ $(hcomm-kit config --cflags) my.cc $(hcomm-kit config --libs)
  hcomm-kit config --include        # header directory
  hcomm-kit config --library-dir    # directory with libhcomm_emu.so and libascendcl.so etc.
  g++ $(hcomm-kit config --cflags --op-api) my.cc $(hcomm-kit config --libs) -lnnopbase -lhccl -lascendcl
                                    # the built-in collectives through aclnn (aclnn_hk_*.h, -lcust_opapi)
  hcomm-kit config --ascend-home ~/cann-emu && source ~/cann-emu/set_env.sh
                                    # a directory laid out like a CANN install ($ASCEND_HOME_PATH):
                                    # CANN's own Makefiles / CMake projects then build unchanged
"""

from __future__ import annotations

import argparse
import sys

HELP = "print emulator build flags (--cflags, --libs, --include, --library-dir) or write a CANN-shaped tree"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options: one or more of --cflags/--libs/--include/--library-dir, and --sanitize."""
    parser.add_argument("--cflags", action="store_true", help="compile flags (-I<include>)")
    parser.add_argument("--libs", action="store_true", help="link flags (-L<dir> -lhcomm_emu -Wl,-rpath,<dir>); builds the library if needed")
    parser.add_argument("--include", action="store_true", help="the include directory")
    parser.add_argument("--library-dir", action="store_true", help="the library directory; builds the library if needed")
    parser.add_argument("--op-api", action="store_true",
                        help="flags of the built-in collectives' aclnn package (-I<op_api/include> -L<op_api/lib> "
                             "-lcust_opapi -Wl,-rpath,<op_api/lib>: aclnnHkAllReduce ...); builds the library if needed")
    parser.add_argument("--sanitize", choices=("", "address", "thread"), default=None,
                        help="sanitizer variant of the library (default: $HCOMM_KIT_SANITIZE)")
    parser.add_argument("--ascend-home", metavar="DIR", default=None,
                        help="write (or refresh) a CANN-shaped tree at DIR for $ASCEND_HOME_PATH (include/, lib64/ "
                             "with every CANN library name, CMake packages ASC/AICPU, opp/vendors/<vendor>/, "
                             "set_env.sh); operators installed under opp/vendors are kept")
    parser.add_argument("--vendor", default="cust", help="custom-operator vendor directory of --ascend-home (default cust)")


def run(args: argparse.Namespace) -> int:
    """Print the requested values, space-separated on one line (pkg-config style)."""
    from ..build import emulator as _emulator

    out: list[str] = []
    if args.ascend_home:
        from ..build.cann_tree import write_tree

        root = write_tree(args.ascend_home, sanitize=args.sanitize, vendor=args.vendor)
        print(f"hcomm-kit: CANN-shaped tree written to {root}; use it with:  source {root}/set_env.sh",
              file=sys.stderr)
        out.append(str(root))
    if args.cflags:
        out.append(_emulator.cflags())
    if args.libs:
        out.append(_emulator.libs(args.sanitize))
    if args.include:
        out.append(str(_emulator.get_include()))
    if args.library_dir:
        out.append(str(_emulator.library_dir(args.sanitize)))
    if args.op_api:
        from ..build.builtins import OP_API_DIR

        d = _emulator.library_dir(args.sanitize) / OP_API_DIR
        out.append(f"-I{d / 'include'} -L{d / 'lib'} -lcust_opapi -Wl,-rpath,{d / 'lib'}")
    if not out:
        print("hcomm-kit config: give at least one of --cflags, --libs, --include, --library-dir, --op-api, --ascend-home DIR",
              file=sys.stderr)
        return 2
    print(" ".join(out))
    return 0
