"""Multi-rank testing: a pytest plugin and numpy reference collectives.

* ``@pytest.mark.mpi(np=[2, 3, 4])`` runs a test body on 2, 3 and 4 ranks. A plain ``pytest``
  starts each rank count under ``mpirun`` (with a timeout) and reports the failing rank's
  traceback; under ``mpirun ... python -m pytest`` the body simply runs on every rank.
* fixtures ``comm`` (``hcomm_kit.init()``, one per MPI run) and ``mpi_comm`` (mpi4py ``COMM_WORLD``).
* :mod:`hcomm_kit.ops.reference`: allreduce / allgather / reduce_scatter / broadcast / alltoall.
* :func:`check_operator` (:mod:`.kinds`): run a custom operator and assert its output against its
  kind's (or op.toml's) reference on the ranks the kind checks; :func:`roots_to_try`,
  :func:`algorithms_to_try`, :func:`reduce_refusal` (what the generated tests use).
* :func:`mpi_job` (:mod:`.opjob`): the ``@pytest.mark.mpi`` arguments of an operator's tests from
  op.toml ``[test]`` (topology, links down); :func:`beyond_buffer_count`: counts past the HCCL buffer.

The plugin is registered through the ``pytest11`` entry point; without the installed entry point
use ``pytest -p hcomm_kit.testing.plugin``.
"""

__all__ = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "check_operator", "roots_to_try",
           "input_count", "algorithms_to_try", "reduce_refusal", "mpi_job", "beyond_buffer_count", "BEYOND_BUFFER"]
_KIND_HELPERS = ("check_operator", "roots_to_try", "input_count", "algorithms_to_try", "reduce_refusal")
_JOB_HELPERS = ("mpi_job", "beyond_buffer_count", "BEYOND_BUFFER")


def __getattr__(name: str):
    # Lazy: the pytest plugin in this package is loaded by every pytest run; numpy is not needed there.
    if name in _JOB_HELPERS:
        from . import opjob

        return getattr(opjob, name)
    if name in _KIND_HELPERS:
        from . import kinds

        return getattr(kinds, name)
    if name in __all__:
        from ..ops import reference

        return getattr(reference, name)
    raise AttributeError(f"module 'hcomm_kit.testing' has no attribute {name!r}")
