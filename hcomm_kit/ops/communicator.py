"""The communicator users get (:func:`hcomm_kit.init`): the core host object
(:class:`hcomm_kit.core.communicator.Communicator`) with the operators layer attached, the
built-in collectives (:class:`~hcomm_kit.ops.collectives.CollectiveOps`) and ``load_op``.

Example::

    import hcomm_kit
    with hcomm_kit.init() as comm:            # under mpirun: one rank per process
        y = comm.all_reduce(np.ones(8, np.float32))
        op = comm.load_op("ops/my_allgather")
        out = op(np.arange(8, dtype=np.float32))
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base import envs
from ..core import communicator as _core
from ..core.bootstrap import Bootstrap
from ..base.resources import aicpu_kernels_dir
from .algorithms import ALGORITHMS
from .collectives import CollectiveOps
from .p2p import P2PQueue

if TYPE_CHECKING:
    from .custom_op import CustomOp

__all__ = ["Communicator", "init"]


class Communicator(_core.Communicator, CollectiveOps):
    """One HCCL communicator of this rank, with the built-in collectives and custom operators.

    See :class:`hcomm_kit.core.communicator.Communicator` for its attributes, and
    :class:`~hcomm_kit.ops.collectives.CollectiveOps` for the collectives.
    """

    @classmethod
    def _blank(cls, rt, boot: Bootstrap) -> "Communicator":
        self = super()._blank(rt, boot)
        self._resources: dict = {}      # (op tag, stream) -> op resources (see hcomm_kit.ops.resources)
        self._ops: dict = {}            # opdir -> CustomOp
        self._builtins: dict = {}       # built-in collective name -> CustomOp (hcomm_kit.ops.collectives)
        self._hccl_algo = envs.hccl_algo()  # read once, at creation, as HCCL reads HCCL_ALGO
        self._sig_cache: dict = {}      # call-check descriptions of the collectives
        self._plans: dict = {}          # repeated collective calls on device buffers (CollectiveOps._call)
        self._fast: dict = {}           # ... and their one-C-call form (CollectiveOps._run_fast)
        self._host_stage: dict = {}     # small host arrays' device pairs (PlannedCalls._small_host)
        self._p2p = P2PQueue(self)      # send / recv posted and not started (hcomm_kit.ops.p2p)
        return self

    def load_op(self, path: "str | os.PathLike[str]", **build_options: Any) -> CustomOp:
        """Load (building if needed) the custom operator in ``path`` (its directory or op.toml).

        Args:
            path: the operator directory or its op.toml.
            build_options: ``debug=True`` loads the debug build (``-O0 -g``, kernel ``OP_LOG_INFO``
                logs on stderr; default: ``HCOMM_KIT_DEBUG``), ``verbose=True`` echoes the build.

        Returns:
            The operator (cached per directory and build options).
        """
        self._check_open()
        if build_options.get("debug") is None:
            build_options["debug"] = envs.debug()
        key = (str(Path(path).resolve()), tuple(sorted(build_options.items())))
        op = self._ops.get(key)
        if op is None:
            from .custom_op import CustomOp

            op = CustomOp(self, path, **build_options)
            d = Path(path).resolve()
            d = d.parent if d.name == "op.toml" else d
            if not op.spec.algorithms and d.parent == aicpu_kernels_dir().resolve() and d.name in ALGORITHMS:
                op.set_builtin_algorithms(ALGORITHMS[d.name], d.name)  # a built-in's directory: its algorithm names
            self._ops[key] = op
        return op

    def _finish_pending(self, abort: bool, timeout: float) -> None:
        if abort:
            self._p2p.drop()
        else:
            self._p2p.finish(timeout)

    def _release_operators(self) -> None:
        self._p2p.close()
        for res in list(self._resources.values()):
            try:
                res.close()
            except Exception:  # noqa: BLE001 - closing: release the rest
                pass
        self._resources.clear()
        for op in list(self._ops.values()):
            op._release()
        self._ops.clear()
        self._builtins.clear()
        self._plans.clear()
        self._drop_fast()
        self._drop_host_stage()


def init(comm: Any = None, *, backend: str | None = None, soc: str | None = None,
         bootstrap: Bootstrap | None = None, pin: bool | None = None) -> Communicator:
    """Create the communicator of this process.

    Args:
        comm: an mpi4py communicator to bootstrap from (default: ``MPI.COMM_WORLD`` under an MPI
            launcher, else ``HCOMM_KIT_RANK``/``HCOMM_KIT_WORLD_SIZE``/``HCOMM_KIT_ROOT_INFO``, else a
            1-rank communicator).
        backend: ``"emu"`` / ``"cann"`` / ``"auto"`` (default ``HCOMM_KIT_BACKEND``).
        soc: emulator personality (``Ascend910B``, ``Ascend910_93``, ``Ascend950``); sets
            ``HCOMM_KIT_SOC`` before the runtime loads.
        bootstrap: an explicit :class:`~hcomm_kit.core.bootstrap.Bootstrap` instead of ``comm`` /
            the environment (e.g. ``Bootstrap.from_store(store, rank, size)``).
        pin: False: never bind this process to one CPU (e.g. a training job whose compute
            threads would share that CPU); None: as ``HCOMM_KIT_PIN`` says.

    Returns:
        A :class:`Communicator` (also a context manager).

    Raises:
        ConfigError: bad soc / env bootstrap; AclError / HcclError from the runtime.

    Example:
        >>> comm = hcomm_kit.init()          # doctest: +SKIP
        >>> comm.rank, comm.size             # doctest: +SKIP
        (0, 1)
    """
    return _core.init(comm, backend=backend, soc=soc, bootstrap=bootstrap, pin=pin, cls=Communicator)
