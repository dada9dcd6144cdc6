"""hcomm-kit: write, build, test and run custom HCCL collective operators for Huawei Ascend,
on real CANN or on the bundled CPU emulator.

Public names are listed in ``__all__``; to add one, import it below and append it there.
"""

from __future__ import annotations

from ._emulator import get_include, get_library
from ._version import __version__

__all__ = [
    "__version__",
    "get_include",
    "get_library",
]
