"""DDP communication hooks on the ``hcomm`` backend.

``DistributedDataParallel.register_comm_hook(state, hook)`` calls ``hook(state, bucket)`` for each
gradient bucket during the backward pass; the hook returns a ``torch.futures.Future`` whose value
is the reduced bucket tensor. ``state`` is the process group to use (``None``: the default group);
it must be an ``hcomm`` group.

* :func:`allreduce_hook`: the gradient average through the built-in allreduce (what DDP does
  without a hook, as one AVG collective per bucket);
* :func:`op_hook`: a custom operator directory (e.g. ``hcomm-kit new my_ar --pattern
  ring-allreduce``) as the gradient reduction, followed by the division by the rank count.

Example::

    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(None, hcomm_kit.torch.op_hook("ops/my_ring_allreduce"))
"""

# No `from __future__ import annotations`: DDP checks the hooks' annotations as objects
# (bucket: dist.GradBucket, return: torch.futures.Future[torch.Tensor]).
import os
from typing import Any, Callable

import torch
import torch.distributed as dist

from .process_group import ProcessGroupHcomm

__all__ = ["allreduce_hook", "op_hook"]


def _group(state: Any, what: str) -> ProcessGroupHcomm:
    pg = state if state is not None else dist.group.WORLD
    if not isinstance(pg, ProcessGroupHcomm):
        raise TypeError(f"hcomm_kit.torch.{what} needs an 'hcomm' process group as the hook state (or None for "
                        f"the default group), got {type(pg).__name__} (backend {dist.get_backend(pg)!r})")
    return pg


def allreduce_hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average the bucket's gradients over the group (one AVG allreduce, in place).

    Args:
        state: an ``hcomm`` ProcessGroup, or None for the default group.
        bucket: the DDP gradient bucket.

    Returns:
        A future completed with the averaged bucket tensor.
    """
    pg = _group(state, "allreduce_hook")
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    return pg.allreduce([bucket.buffer()], opts).get_future().then(lambda fut: fut.value()[0])


def op_hook(path: "str | os.PathLike[str]", *, reduce_op: str = "sum", average: bool = True, via: str = "load_op",
            **params: Any) -> Callable[[Any, dist.GradBucket], "torch.futures.Future[torch.Tensor]"]:
    """A DDP comm hook that reduces each gradient bucket with the custom operator in ``path``.

    The operator is built now (build cache), so a broken operator fails at registration rather
    than in the first backward pass. It must produce as many elements as it reads
    (``[io].output = "count"``, e.g. an allreduce) and accept the gradients' dtype.

    Args:
        path: the operator directory (or its op.toml).
        reduce_op: passed to the operator (``"sum"`` for a gradient allreduce).
        average: divide the result by the rank count (DDP's gradient average).
        via: ``"load_op"`` (default) or ``"aclnn"``: the operator's generated aclnn interface, as
            torch_npu reaches custom operators (:meth:`ProcessGroupHcomm.run_op`); same results.
        **params: the operator's ``[[param]]`` values.

    Returns:
        ``hook(state, bucket) -> Future[Tensor]`` for ``DistributedDataParallel.register_comm_hook``.
    """
    from ..build.opbuild import build_op
    from ..base.errors import ConfigError
    from ..build.opspec import load_opspec

    spec = load_opspec(path)
    if spec.output != "count":
        raise ConfigError(f"op_hook needs an operator whose output has the input's size ([io].output = \"count\", "
                          f"an allreduce); {spec.name} has [io].output = {spec.output!r}", key="[io].output",
                          path=spec.opdir / "op.toml")
    if via not in ("load_op", "aclnn"):
        raise ConfigError(f"op_hook(via={via!r}): use 'load_op' or 'aclnn'", key="via")
    spec = build_op(path).spec
    opdir = spec.opdir
    if via == "aclnn":
        from ..aclnn import load

        load(opdir)  # the aclnn host library too, now: a broken one fails at registration

    def hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        pg = _group(state, "op_hook")
        buf = bucket.buffer()
        work = pg.run_op(opdir, buf, reduce_op=reduce_op, via=via, **params)
        n = pg.size()

        def done(fut: "torch.futures.Future[list[torch.Tensor]]") -> torch.Tensor:
            out = fut.value()[0]
            return out.div_(n) if average else out
        return work.get_future().then(done)

    hook.__name__ = f"op_hook[{spec.name}{', aclnn' if via == 'aclnn' else ''}]"
    hook.__qualname__ = hook.__name__
    return hook
