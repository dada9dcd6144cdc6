"""The ``hcomm`` backend of ``torch.distributed``, and DDP gradient hooks.

A script written for ``gloo`` runs on hcomm-kit by changing the backend name::

    import torch.distributed as dist
    dist.init_process_group("hcomm")          # torchrun, or hcomm-kit launch / mpirun
    model = torch.nn.parallel.DistributedDataParallel(model)

The backend registers itself when torch is imported (a ``torch.backends`` entry point of the
installed package; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off, then ``import
hcomm_kit.torch`` registers it). Under an MPI launcher it also fills ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` for ``env://`` (see :mod:`hcomm_kit.torch._env`).

Names (imported on first use, so that registering stays cheap):

* :class:`~hcomm_kit.torch.process_group.ProcessGroupHcomm`, :class:`~hcomm_kit.torch.work.HcommWork`: the backend.
* :func:`~hcomm_kit.torch.hooks.allreduce_hook`: a DDP comm hook averaging gradients on hcomm.
* :func:`~hcomm_kit.torch.hooks.op_hook`: a DDP comm hook running a custom operator directory.
* :func:`~hcomm_kit.torch._tensors.registration_stats`: counters of the zero-copy path.
"""

from __future__ import annotations

from typing import Any

from ._env import apply_launcher_env

__all__ = ["BACKEND_NAME", "register", "ProcessGroupHcomm", "HcommWork", "allreduce_hook", "op_hook",
           "registration_stats", "apply_launcher_env"]

BACKEND_NAME = "hcomm"
"""The backend's name in ``torch.distributed`` (``dist.init_process_group("hcomm")``)."""

_LAZY = {
    "ProcessGroupHcomm": "hcomm_kit.torch.process_group",
    "HcommWork": "hcomm_kit.torch.work",
    "allreduce_hook": "hcomm_kit.torch.hooks",
    "op_hook": "hcomm_kit.torch.hooks",
    "registration_stats": "hcomm_kit.torch._tensors",
}

# torch is imported inside the functions below, never at module level: `import hcomm_kit.torch`
# before torch imports torch, whose entry-point autoload then calls _autoload() of this
# (partially initialised) module, which must already define it.


def _create(opts: Any, backend_options: Any = None):
    """torch's extended creation API: ``opts`` carries the store, group rank and size, timeout,
    group name and the group's global ranks (empty for the default group)."""
    from .process_group import create_process_group

    return create_process_group(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                                group_id=str(opts.group_id), global_ranks=list(opts.global_ranks_in_group))


def register() -> bool:
    """Register ``"hcomm"`` with ``torch.distributed`` for CPU tensors (idempotent).

    Returns:
        False when this PyTorch build has no ``torch.distributed`` (nothing to register with).

    Raises:
        ImportError: PyTorch is not installed (``pip install 'hcomm-kit[torch]'``).
    """
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError("hcomm_kit.torch needs PyTorch: python -m pip install 'hcomm-kit[torch]'") from exc
    if not dist.is_available():
        return False
    if BACKEND_NAME not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cpu"])
    return True


def _autoload() -> None:
    """``torch.backends`` entry point, run inside ``import torch``: cheap, and never fails that
    import (a problem becomes a warning)."""
    try:
        apply_launcher_env()
        register()
    except Exception as exc:  # noqa: BLE001 - must not break `import torch`
        import warnings

        warnings.warn(f"hcomm-kit: could not register the 'hcomm' torch.distributed backend: {exc}",
                      RuntimeWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hcomm_kit.torch' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


apply_launcher_env()
register()  # importing the module registers the backend (raises ImportError without torch)
