"""``hcomm-kit run``'s per-rank check (hcomm_kit.jobs.runner): every rank joins every collective.

Single process: the communicator and the operator are stand-ins, so what is asserted is the
sequence of MPI calls each rank makes, which must be the same on every rank whatever its output.
"""

from __future__ import annotations

import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from hcomm_kit.build.opspec import parse_opspec
from hcomm_kit.jobs import runner


class _FakeMpi:
    """Records the allreduces a rank makes; MAX over the values the other ranks would give."""

    def __init__(self, others: list[float]) -> None:
        self.others, self.calls = others, 0

    def allreduce(self, value: float, op=None) -> float:
        self.calls += 1
        return max([value, *self.others])


@pytest.fixture(autouse=True)
def _host_outputs(monkeypatch) -> None:
    """No device here: the stand-in operator returns its result (no poisoned device output); no MPI
    either: the runner's ``from mpi4py import MPI`` gets a stand-in (a real import in this process
    would be an Open MPI singleton, whose MPI_Init leaves a 16 MiB /dev/shm segment behind)."""
    monkeypatch.setattr(runner, "checked_call", lambda comm, op, x, out_n, dt, kw: op(x, **kw))
    mpi = SimpleNamespace(MAX="max")
    monkeypatch.setitem(sys.modules, "mpi4py", SimpleNamespace(MPI=mpi))
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", mpi)


def _comm(rank: int, size: int, out: np.ndarray, spec) -> SimpleNamespace:
    op = lambda x, **kw: out.copy()  # noqa: E731 - the operator's result, whatever the input
    op.spec = spec
    return SimpleNamespace(rank=rank, size=size, load_op=lambda _: op, mpi_comm=_FakeMpi([0.0]),
                           barrier=lambda: None)


ALLREDUCE = parse_opspec('[op]\nname = "x"\npattern = "ring-allreduce"\nreduce_ops = ["sum"]\ndtypes = ["fp32"]\n')


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_rank_whose_output_holds_nan_still_joins_the_error_allreduce(bad: float) -> None:
    count, size = 64, 3
    want = sum(runner.make_input(r, count, "fp32") for r in range(size)).astype(np.float32)
    out = want.copy()
    out[5] = bad  # an unwritten / garbage element on this rank only
    comm = _comm(1, size, out, ALLREDUCE)
    rows = runner.run_ops(comm, [{"op": "x", "count": count, "dtype": "fp32"}], iters=0)
    assert comm.mpi_comm.calls == 1, "the rank with a NaN output skipped the allreduce its peers wait in"
    assert rows[0]["ok"] is False and rows[0]["max_error"] == "inf"


def test_a_correct_rank_and_a_wrong_shape() -> None:
    count, size = 10, 2
    want = sum(runner.make_input(r, count, "fp32") for r in range(size)).astype(np.float32)
    comm = _comm(0, size, want, ALLREDUCE)
    rows = runner.run_ops(comm, [{"op": "x", "count": count}], iters=0)
    assert comm.mpi_comm.calls == 1 and rows[0]["ok"] is True and rows[0]["max_error"] == 0.0
    comm = _comm(0, size, want[:-1], ALLREDUCE)
    rows = runner.run_ops(comm, [{"op": "x", "count": count}], iters=0)
    assert comm.mpi_comm.calls == 1 and rows[0]["ok"] is False


def test_no_reference_is_the_same_on_every_rank() -> None:
    spec = parse_opspec('[op]\nname = "x"\nkind = "custom"\ndtypes = ["fp32"]\n')
    comm = _comm(0, 2, np.zeros(4, np.float32), spec)
    rows = runner.run_ops(comm, [{"op": "x", "count": 2}], iters=0)
    # the same one allreduce as with a reference (a checker's finding on one rank fails the row everywhere)
    assert comm.mpi_comm.calls == 1 and rows[0]["ok"] is None and rows[0]["max_error"] is None
    assert math.isnan(runner._max_error(np.zeros(1), None, "fp32"))
