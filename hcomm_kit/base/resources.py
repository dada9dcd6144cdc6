"""Paths of the data directories shipped with hcomm-kit.

In a source checkout (editable install) they are the repository's top-level ``templates/``,
``aicpu_kernels/`` and ``docs/``. In a wheel, ``setup.py``'s ``build_py`` step copies them to
``hcomm_kit/_data/templates``, ``hcomm_kit/_data/aicpu_kernels`` and ``hcomm_kit/_data/docs``. Always use these
functions; never build paths to those directories by hand.
"""

from __future__ import annotations

from pathlib import Path

from .errors import BackendError

__all__ = ["package_dir", "templates_dir", "aicpu_kernels_dir", "docs_dir", "emu_dir"]

_PKG = Path(__file__).resolve().parent.parent


def package_dir() -> Path:
    """The installed ``hcomm_kit`` package directory."""
    return _PKG


def _data_dir(name: str) -> Path:
    checkout = _PKG.parent / name
    # A checkout is recognised by pyproject.toml beside the package (never true in site-packages).
    if checkout.is_dir() and (_PKG.parent / "pyproject.toml").is_file():
        return checkout
    packaged = _PKG / "_data" / name
    if packaged.is_dir():
        return packaged
    raise BackendError(
        f"hcomm-kit data directory {name!r} not found (looked in {checkout} and {packaged}); "
        "reinstall hcomm-kit (pip install --force-reinstall hcomm-kit) or use an editable checkout"
    )


def templates_dir() -> Path:
    """Directory of the Jinja2 templates used by ``hcomm-kit new``."""
    return _data_dir("templates")


def aicpu_kernels_dir() -> Path:
    """Directory of the built-in collective operators' sources."""
    return _data_dir("aicpu_kernels")


def docs_dir() -> Path:
    """Directory of the user documentation pages (``hcomm-kit docs``)."""
    return _data_dir("docs")


def emu_dir() -> Path:
    """The emulator tree (``include/``, ``src/``) inside the package."""
    return _PKG / "emu"
