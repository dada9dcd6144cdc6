"""Build hook: copy the top-level data trees into the wheel as ``hcomm_kit/_data/<name>``.

All metadata lives in pyproject.toml. ``hcomm_kit.base.resources`` finds these trees at the repo root
in a checkout and under ``hcomm_kit/_data/`` in an installed wheel.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA_TREES = ("templates", "aicpu_kernels", "docs")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.o", "*.so", ".*")
# docs/pending/ holds texts not yet placed in a page (not part of the documentation)
IGNORE_DOCS = shutil.ignore_patterns("__pycache__", "*.pyc", "*.o", "*.so", ".*", "pending")


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # editable installs read the trees from the checkout
        here = Path(__file__).resolve().parent
        for name in DATA_TREES:
            src = here / name
            if src.is_dir():
                dst = Path(self.build_lib) / "hcomm_kit" / "_data" / name
                shutil.rmtree(dst, ignore_errors=True)
                shutil.copytree(src, dst, ignore=IGNORE_DOCS if name == "docs" else IGNORE)


setup(cmdclass={"build_py": BuildPyWithData})
