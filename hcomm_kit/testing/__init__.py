"""Multi-rank testing: a pytest plugin and numpy reference collectives.

* ``@pytest.mark.mpi(np=[2, 3, 4])`` runs a test body on 2, 3 and 4 ranks. A plain ``pytest``
  starts each rank count under ``mpirun`` (with a timeout) and reports the failing rank's
  traceback; under ``mpirun ... python -m pytest`` the body simply runs on every rank.
* fixtures ``comm`` (``hcomm_kit.init()``, one per MPI run) and ``mpi_comm`` (mpi4py ``COMM_WORLD``).
* :mod:`hcomm_kit.testing.reference`: allreduce / allgather / reduce_scatter / broadcast / alltoall.

The plugin is registered through the ``pytest11`` entry point; without the installed entry point
use ``pytest -p hcomm_kit.testing.plugin``.
"""

from .reference import allgather, allreduce, alltoall, broadcast, reduce_scatter

__all__ = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"]
