"""Show a documentation page shipped with hcomm-kit.

  hcomm-kit docs                 list the pages (the documentation site's pages, as Markdown)
  hcomm-kit docs hcomm           the Hcomm rules your kernel relies on (cited by generated files)
  hcomm-kit docs topology        any other page of the list
  hcomm-kit docs optoml          every op.toml key (default, meaning) and every kind
  hcomm-kit docs --path hcomm    where the page's file is
"""

from __future__ import annotations

import argparse

HELP = "show a documentation page shipped with hcomm-kit (e.g. `hcomm-kit docs hcomm`)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", metavar="TOPIC", nargs="?", default=None, help="page name (default: list them)")
    parser.add_argument("--path", action="store_true", help="print the file's path instead of its text")


def pages() -> dict[str, "object"]:
    """Page name -> path of every shipped page."""
    from ..base.resources import docs_dir

    return {p.stem: p for p in sorted(docs_dir().glob("*.md"))}


def run(args: argparse.Namespace) -> int:
    from ..base.errors import ConfigError

    found = pages()
    if args.topic == "optoml" and not args.path:  # generated from the definitions (build/opspec.py, build/kinds.py)
        from ..build.opspec import optoml_reference

        print(optoml_reference())
        return 0
    if args.topic is None:
        width = max(len(name) for name in [*found, "optoml"])
        for name, path in found.items():
            title = path.read_text().splitlines()[0].lstrip("# ").strip()
            print(f"{name:{width}s} {title}")
        print(f"{'optoml':{width}s} op.toml keys (default, meaning) and kinds")
        return 0
    path = found.get(args.topic)
    if path is None:
        raise ConfigError(f"no page {args.topic!r}; pages: {', '.join(found)}", key="TOPIC")
    print(path if args.path else path.read_text(), end="\n" if args.path else "")
    return 0
