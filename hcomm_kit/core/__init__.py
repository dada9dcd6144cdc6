"""Host objects: devices, streams, events, device buffers and the communicator.

Names are imported on first use (``hcomm_kit.ops.collectives`` and the communicator import each
other's modules; a lazy package keeps either import order working).
"""

from __future__ import annotations

__all__ = ["init", "Communicator", "Device", "Stream", "Event", "DeviceBuffer", "BufferPool"]

_LAZY = {"init": "communicator", "Communicator": "communicator", "Device": "device", "Stream": "device",
         "Event": "device", "DeviceBuffer": "device", "BufferPool": "device"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hcomm_kit.core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
