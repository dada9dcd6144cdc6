"""Build an operator's AICPU kernel.

  hcomm-kit build [OPDIR]                       emulator build (host g++), cached by content
  hcomm-kit build OPDIR --target ascend         CANN AICPU cross build + vendor layout
  hcomm-kit build OPDIR --target ascend --dry-run   print the exact commands and files

Compiler warnings of your kernel are shown but do not fail the build (--werror makes them
errors; the built-in operators always build with -Werror). After building, the op-info JSON,
the exported kernel symbol and the OpParam/AlgResourceCtx layout (C vs the Python mirror of
op.toml) are checked. `--debug` builds what `hcomm-kit run/test/bench --debug` load.
"""

from __future__ import annotations

import argparse

HELP = "build an operator's AICPU kernel for the emulator or for CANN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("opdir", metavar="OPDIR", nargs="?", default=".",
                        help="operator directory holding op.toml (default: .)")
    parser.add_argument("--target", choices=("emu", "ascend"), default="emu",
                        help="emu = host compiler + emulator (default); ascend = CANN AICPU cross compiler")
    parser.add_argument("--debug", action="store_true",
                        help="-O0 -g and kernel info logs (what `run/test/bench --debug` load)")
    parser.add_argument("--werror", action="store_true",
                        help="compiler warnings are errors (default: shown, not fatal; built-in operators always)")
    parser.add_argument("-v", "--verbose", action="store_true", help="echo commands and compiler output")
    parser.add_argument("--dry-run", action="store_true", help="print the commands and files, run nothing")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="output directory of --target ascend (default: OPDIR/build_out/ascend)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache has the kernel")


def run(args: argparse.Namespace) -> int:
    from ..build.opbuild import build_op, plan_build

    if args.dry_run:
        print(plan_build(args.opdir, args.target, args.debug, out=args.out, werror=args.werror or None).format())
        return 0
    res = build_op(args.opdir, args.target, args.debug, args.verbose, out=args.out, force=args.force,
                   werror=args.werror or None)
    state = "cached" if res.cached else "built"
    print(f"{res.spec.name}: {state} ({res.target}, key {res.key})")
    print(f"  kernel   {res.so_path}")
    print(f"  op-info  {res.json_path}")
    if res.target == "emu":
        from ..build.aclnnbuild import build_aclnn, install
        from ..base import envs

        api = build_aclnn(res.spec, res.json_path, verbose=args.verbose)
        print(f"  aclnn    {api.api}GetWorkspaceSize / {api.api}")
        print(f"  header   {api.header}")
        print(f"  library  {api.library}")
        home = envs.ascend_home_path()
        # a CANN-shaped tree written by `hcomm-kit config --ascend-home`: install as a custom op package
        if home and (home / "README.hcomm-kit.md").is_file() and (home / "opp" / "vendors" / res.spec.vendor).is_dir():
            inst = install(api, res.spec, home)
            print(f"  installed {inst.header}")
            print(f"            {inst.library}")
    return 0
