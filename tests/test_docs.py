"""The documentation: the MkDocs site builds with every link and anchor valid, its copies of the
code's tables are current, and the API reference lists every public name."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _block(page: str, name: str) -> str:
    text = (DOCS / page).read_text()
    return text.split(f"<!-- {name}:begin -->\n", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def test_reduce_table_is_the_one_of_dtypes() -> None:
    from hcomm_kit.base.dtypes import hccl_api_reduce_table

    assert _block("cann.md", "reduce-table") == hccl_api_reduce_table(), (
        "docs/cann.md's reduce table is stale: paste hcomm_kit.base.dtypes.hccl_api_reduce_table() between the markers")


@pytest.mark.parametrize("module, page", [("hcomm_kit", "hcomm_kit.md"), ("hcomm_kit.aclnn", "aclnn.md"),
                                          ("hcomm_kit.torch", "torch.md")])
def test_api_reference_lists_every_public_name(module: str, page: str) -> None:
    """Each name of the module's ``__all__`` has a ``::: path.to.name`` entry on its reference page."""
    names = importlib.import_module(module).__all__
    documented = set(re.findall(r"^::: [\w.]+\.(\w+)$", (DOCS / "reference" / page).read_text(), re.M))
    assert set(names) <= documented, f"docs/reference/{page} misses {sorted(set(names) - documented)}"


@pytest.mark.slow  # ~10 s: renders every page and the API reference
@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (python -m pip install -e '.[docs]')")
def test_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, a missing anchor, a page left out of the navigation
    or a docstring the API reference cannot parse fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "hcomm_kit" / "index.html").is_file()
    assert not (tmp_path / "site" / "pending").exists()
