"""hcomm-kit: write, build, test and run custom HCCL collective operators for Huawei Ascend,
on real CANN or on the bundled CPU emulator.

Public names are listed in ``__all__``; to add one, import it below and append it there.
"""

from __future__ import annotations

from .build.emulator import get_include, get_library
from ._version import __version__

__all__ = [
    "__version__",
    "get_include",
    "get_library",
    "init",
    "Communicator",
    "CustomOp",
    "Work",
    "DeviceBuffer",
    "same_call",
]

# Imported on first use so that `import hcomm_kit` (and the CLI) stays cheap.
_LAZY = {
    "init": "hcomm_kit.ops.communicator",
    "Communicator": "hcomm_kit.ops.communicator",
    "DeviceBuffer": "hcomm_kit.core.device",
    "CustomOp": "hcomm_kit.ops.custom_op",
    "Work": "hcomm_kit.ops.work",
    "same_call": "hcomm_kit.ops.callsite",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hcomm_kit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
