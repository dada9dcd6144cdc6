"""The baselines of ``hcomm-kit bench --compare``: the same collective through mpi4py (Open MPI), and,
for a user's operator, the matching built-in collective on the same sizes (:class:`BuiltinBaseline`:
its CPU time, its modelled time and algorithm, and HCCL's formula for that algorithm)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

from ..base.errors import ConfigError
from ..core import world
from .cases import Collective, OpTarget, _Case
from .timing import _bw, _max_over_ranks, _time_ours

__all__ = ["time_mpi", "time_builtin", "BuiltinBaseline", "formula_family"]


def _selected(comm) -> str | None:
    """The algorithm the last built-in call on ``comm`` ran (CANN's name; see
    :attr:`hcomm_kit.ops.collectives.CollectiveOps.last_selection`)."""
    sel = getattr(comm, "last_selection", None)
    return sel.shown if sel is not None else None


def _model_time(comm) -> float | None:
    """The timing model's figure for the last timed call (rank 0 simulates, every rank gets it);
    None where there is no model (CANN backend, one rank, HCOMM_KIT_MODEL=0)."""
    from ..base.errors import HcommKitError

    us: float | None = None
    if comm.rank == 0:
        try:
            us = comm.last_model_time
        except HcommKitError as exc:  # e.g. more tasks than the model's log keeps: the row says NULL
            print(f"# model: {exc}", flush=True)
    return world.bcast(comm, us, root=0)




def time_mpi(case: _Case, iters: int, warmup: int) -> float | None:
    """The same collective through mpi4py (None when MPI cannot do it: no MPI, fp16/bf16...)."""
    comm = case.comm
    mc = comm.mpi_comm
    if mc is None or case.dt.name in ("bf16", "fp16"):
        return None
    from mpi4py import MPI

    ops = {"sum": MPI.SUM, "prod": MPI.PROD, "max": MPI.MAX, "min": MPI.MIN}
    x = case.inputs[comm.rank].copy()
    c = case.mpi_name
    y = np.empty(case.y.size if case.y is not case.x else x.size, dtype=x.dtype)
    root = case.root
    rop = ops.get(case.rop, MPI.SUM)
    n, r = comm.size, comm.rank
    # keyed by the kinds table's MPI call (hcomm_kit.build.kinds.KINDS[...].mpi)
    calls: dict[str, Callable[[], Any]] = {
        "Allreduce": lambda: mc.Allreduce(x, y, rop),
        "Reduce_scatter_block": lambda: mc.Reduce_scatter_block(x, y, rop),
        "Allgather": lambda: mc.Allgather(x, y),
        "Alltoall": lambda: mc.Alltoall(x, y),
        "Bcast": lambda: mc.Bcast(x, root),
        "Reduce": lambda: mc.Reduce(x, y, rop, root),
        "Gather": lambda: mc.Gather(x, y if comm.rank == root else None, root),
        "Scatter": lambda: mc.Scatter(x if comm.rank == root else None, y, root),
        "Sendrecv": lambda: mc.Sendrecv(x, (r + 1) % n, recvbuf=y, source=(r - 1) % n),  # the ring shift
    }
    kw = getattr(case, "call_kw", {})
    if c == "Alltoallv" and "send_counts" in kw:
        sc, rc = np.asarray(kw["send_counts"]), np.asarray(kw["recv_counts"])
        sd, rd = np.concatenate([[0], np.cumsum(sc)[:-1]]), np.concatenate([[0], np.cumsum(rc)[:-1]])
        calls["Alltoallv"] = lambda: mc.Alltoallv([x, (sc, sd)], [y, (rc, rd)])
    if c == "Send/Recv":
        if case.peer is None:
            fn: Callable[[], Any] = lambda: None  # noqa: E731
        elif comm.rank % 2 == 0:
            fn = lambda: mc.Send(x, case.peer)  # noqa: E731
        else:
            fn = lambda: mc.Recv(y, case.peer)  # noqa: E731
    elif c in calls:
        fn = calls[c]
    else:
        return None  # no MPI counterpart (a local copy)
    try:
        mc.Barrier()
        for _ in range(warmup):
            fn()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        us = (time.perf_counter() - t0) * 1e6 / max(1, iters)
    except (MPI.Exception, KeyError, TypeError, ValueError):
        return None
    return _max_over_ranks(comm, us)


def time_builtin(comm, builtin: Collective, target: OpTarget, nbytes: int, dt: Any, rop: str, root: int, fill: str,
                 inplace: bool, algorithm: str | None, iters: int, warmup: int, blocking: bool) -> float:
    """Mean time per call (us, max over ranks) of ``builtin``, the built-in counterpart of the
    operator ``target``, on the same size, data and timing as the operator (``--compare builtin``)."""
    case = _Case(comm, builtin, nbytes, dt, rop, root, fill, inplace, algorithm)  # sized as the operator: same kind
    try:
        return _time_ours(case, iters, warmup, blocking, over_ranks=not world.job_wide(comm))
    finally:
        case.close()


def formula_family(collective: str, cann_name: str) -> str | None:
    """The family of HCCL's published formulas (:data:`hcomm_kit.base.model_formulas.FAMILIES`) an
    algorithm of CANN's (``AicpuAllReduceSoleMeshOneShot``, ``AicpuAllGatherSoleNHR``, ...) follows,
    or None (a kernel's own algorithm, a family without a formula; a three-level broadcast, reduce
    or scatter, ``...NHRNHR``: the formulas compose two levels)."""
    name = cann_name or ""
    if name.endswith("NHRNHR") and collective in ("broadcast", "reduce", "scatter"):
        return None
    if "Parallel" in name and "NHR" in name:
        return "parallel_mesh_nhr"
    if "Sequence" in name and "NHR" in name:
        return "sequence_mesh_nhr"
    if "OneShot" in name and collective == "allreduce":
        return "mesh_oneshot"
    for key, family in (("NHR", "nhr"), ("Ring", "ring"), ("Mesh", "mesh")):
        if key in name:
            return family
    return None


class BuiltinBaseline:
    """``--compare builtin`` for one sweep: per size, the matching built-in collective's CPU time,
    its modelled time, the algorithm it ran (CANN's name) and HCCL's formula for that algorithm.

    Where the built-in cannot run on the topology (CANN's choice needs a link that is down), every
    rank finds so at its selection, before anything moves; the row then says why
    (``builtin_why``), and the modelled time and algorithm are those of the built-in on the same
    ranks and topology with every link up (``builtin_links_up``; a communicator split off for it
    once, with ``HCOMM_KIT_LINKS_DOWN`` empty): what HCCL would take if the link were there.
    """

    def __init__(self, comm, builtin: Collective, target: OpTarget, algorithm: str | None) -> None:
        self.comm, self.builtin, self.target, self.algorithm = comm, builtin, target, algorithm
        self._intact = None
        self.notes: list[str] = []

    def close(self) -> None:
        if self._intact is not None:
            self._intact.close()
            self._intact = None

    def _intact_comm(self):
        """The same ranks and topology with every link up (created once, collectively)."""
        if self._intact is None:
            saved = os.environ.get("HCOMM_KIT_LINKS_DOWN")
            os.environ["HCOMM_KIT_LINKS_DOWN"] = ""
            try:
                self._intact = self.comm.split(0)
            finally:
                if saved is None:
                    os.environ.pop("HCOMM_KIT_LINKS_DOWN", None)
                else:
                    os.environ["HCOMM_KIT_LINKS_DOWN"] = saved
        return self._intact

    def measure(self, nbytes: int, data_size: int, dt: Any, rop: str, root: int, fill: str, inplace: bool,
                iters: int, warmup: int, blocking: bool, ours_us: float | None,
                ours_model_us: float | None) -> dict[str, Any]:
        """The row's ``builtin_*`` fields at one size (every rank calls it; rank 0's figures count)."""
        comm, coll = self.comm, self.target.coll
        why = None
        links_up = False
        try:
            b_us: float | None = time_builtin(comm, self.builtin, self.target, nbytes, dt, rop, root, fill, inplace,
                                              self.algorithm, iters, warmup, blocking)
            on = comm
        except ConfigError as exc:
            if exc.key != "algorithm":  # only the selection's refusal, made alike on every rank before any transfer
                raise
            why, b_us, links_up = exc.reason, None, True
            on = self._intact_comm()
            time_builtin(on, self.builtin, self.target, nbytes, dt, rop, root, fill, inplace, self.algorithm, 1, 0,
                         blocking)
        selected = _selected(on)  # before the exchanges (on several hosts they are calls themselves)
        sel = getattr(on, "last_selection", None)
        model = _model_time(on)
        if b_us is not None and world.job_wide(comm):
            b_us = _max_over_ranks(comm, b_us)  # time_builtin left it this rank's
        _, b_bus = _bw(coll, data_size, b_us, comm.size) if b_us else (None, None)
        _, m_bus = _bw(coll, data_size, model, comm.size) if model else (None, None)
        f_us, f_cite = self._formula(sel.cann if sel is not None else None, data_size)
        return {"builtin": self.target.builtin,
                "builtin_algorithm": (sel.name or sel.cann) if sel is not None else self.algorithm,
                "builtin_selected": selected, "builtin_time_us": b_us, "builtin_busbw": b_bus,
                "vs_builtin": (b_us / ours_us) if b_us and ours_us else None,
                "builtin_why": why, "builtin_links_up": links_up,
                "builtin_model_time_us": model, "builtin_model_busbw": m_bus,
                "vs_builtin_model": (model / ours_model_us) if model and ours_model_us else None,
                "builtin_formula_us": f_us, "builtin_formula": f_cite}

    def _formula(self, cann: str | None, data_size: int) -> tuple[float | None, str | None]:
        """HCCL's formula for the algorithm CANN's selector chose for the call (``cann``), on this
        topology's shape with every link up (us, citation); (None, why not) where there is none."""
        name = self.target.builtin
        family = formula_family(name, cann or "")
        if family is None:
            return None, f"no published formula for {cann or 'its algorithm'}"
        from ..base.model_formulas import formula

        try:
            f = formula(name, family, self.comm.topology, data_size)
        except ConfigError as exc:
            return None, exc.reason
        return f.us, f"{family}: {f.citation}"
