"""Show a documentation page shipped with hcomm-kit.

  hcomm-kit docs                 list the pages (the documentation site's pages, as Markdown)
  hcomm-kit docs hcomm           the Hcomm rules your kernel relies on (cited by generated files)
  hcomm-kit docs topology        any other page of the list
  hcomm-kit docs optoml          every op.toml key (default, meaning) and every kind
  hcomm-kit docs --path hcomm    where the page's file is
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

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
    print(path if args.path else _expand_snippets(path), end="\n" if args.path else "")
    return 0


_SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::(\w+))?"$')


def _expand_snippets(page: Path) -> str:
    """The page's text with the site's includes (``--8<-- "README.md:tour"``, pymdownx.snippets)
    replaced by the section they name, read beside the docs directory (a checkout), or by a
    pointer to it where the file is not there (an installed package)."""
    out = []
    for line in page.read_text().splitlines(keepends=True):
        m = _SNIPPET.match(line.strip())
        if not m:
            out.append(line)
            continue
        source = page.parent.parent / m.group(1)
        if not source.is_file():
            out.append(f"(see {m.group(1)} of hcomm-kit's source, or the documentation site)\n")
            continue
        text = source.read_text()
        if m.group(2):
            begin, end = f"--8<-- [start:{m.group(2)}]", f"--8<-- [end:{m.group(2)}]"
            text = text.split(begin, 1)[-1].split(end, 1)[0]
            text = text.split("\n", 1)[1] if "\n" in text else text  # the rest of the marker's line
            text = text.rsplit("\n", 1)[0] + "\n"                     # the start of the end marker's line
        out.append(text)
    return "".join(out)
