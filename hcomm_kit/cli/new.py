"""Create a custom-operator project, or re-render one after its op.toml changed.

  hcomm-kit new my_allgather --pattern mesh-allgather --dir ops
  hcomm-kit new --update ops/my_allgather

NAME must be a C identifier. The project holds op.toml (the description), the generated
kernel entry, header, op-info JSON, tests, CMakeLists.txt and BUILD_ON_CANN.md, and
op_kernel_aicpu/exec_op.cc: your algorithm, which is written only when absent (never by
--update or --force).
"""

from __future__ import annotations

import argparse

HELP = "scaffold a custom operator (op.toml, kernel entry, header, tests, CMake)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..build.opspec import HANDSHAKES, PATTERNS

    parser.add_argument("name", metavar="NAME", nargs="?", help="operator name (a C identifier)")
    parser.add_argument("--pattern", choices=PATTERNS, default=None,
                        help="algorithm to start from (default: empty = local copy)")
    parser.add_argument("--handshake", choices=HANDSHAKES, default=None,
                        help="host<->kernel handshake (default: thread-notify; acl-notify is A2/A3 only)")
    parser.add_argument("--dir", default=".", metavar="DIR", help="parent directory (default: .)")
    parser.add_argument("--force", action="store_true",
                        help="re-render into an existing directory (op.toml and generated files are "
                             "overwritten; exec_op.cc is kept)")
    parser.add_argument("--update", metavar="OPDIR",
                        help="re-render the generated files of OPDIR from its op.toml (exec_op.cc is kept)")


def run(args: argparse.Namespace) -> int:
    from ..base.errors import ConfigError
    from ..scaffold.render import new_op, update_op

    if args.update:
        if args.name or args.pattern or args.handshake:
            raise ConfigError("--update takes only the operator directory: pattern and handshake come from "
                              "its op.toml", key="--update")
        result = update_op(args.update)
        action = "updated"
    else:
        if not args.name:
            raise ConfigError("missing NAME (e.g. `hcomm-kit new my_allgather --pattern mesh-allgather`), or "
                              "use --update OPDIR", key="NAME")
        result = new_op(args.name, pattern=args.pattern or "empty", handshake=args.handshake or "thread-notify",
                        directory=args.dir, force=args.force)
        action = "created"
    spec = result.spec
    print(f"{action} operator {spec.name} in {result.opdir} (pattern {spec.pattern}, {spec.handshake})")
    for rel in result.written:
        print(f"  wrote      {rel}")
    for rel in result.unchanged:
        print(f"  unchanged  {rel}")
    for rel in result.kept:
        what = "the generated page" if rel == "README.md" else f"the {spec.pattern} pattern"
        print(f"  kept       {rel} (yours; delete it to get {what} back)")
    for note in spec.product_limits():
        print(f"note: {note}")
    if action == "created":
        print(f"next: edit {result.opdir}/op_kernel_aicpu/exec_op.cc, then `hcomm-kit build {result.opdir}`")
    return 0
