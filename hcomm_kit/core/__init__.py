"""Host objects: devices, streams, events, device buffers and the communicator."""

from .communicator import Communicator, init
from .device import BufferPool, Device, DeviceBuffer, Event, Stream

__all__ = ["init", "Communicator", "Device", "Stream", "Event", "DeviceBuffer", "BufferPool"]
