"""The jobs of an operator's generated tests: rank counts and environment from op.toml ``[test]``,
and the counts that reach past the HCCL buffer.

``@pytest.mark.mpi(**mpi_job(OP_DIR))`` runs a test on op.toml's ``[test] topology`` (at its rank
count) with its ``links_down``, unless ``--topology`` / ``--links-down`` / the environment say
otherwise (the one rule: :func:`hcomm_kit.build.testjob.op_job`); ``small_buffer=True`` adds
``HCCL_BUFFSIZE=1`` (1 MB, unless the environment sets it), so that :func:`beyond_buffer_count`'s
counts of a few times the buffer stay a few MB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["mpi_job", "beyond_buffer_count", "BEYOND_BUFFER"]

#: How many HCCL buffers the largest operand of a beyond-buffer test holds (plus an odd tail):
#: just past one (a full slice and a tail), and a few (several slices).
BEYOND_BUFFER = (1, 3)


def mpi_job(opdir: str | Path, np: list[Any] | tuple[Any, ...] = (2, 3, 4), *, small_buffer: bool = False,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments of ``@pytest.mark.mpi`` for a test of the operator in ``opdir``.

    Args:
        opdir: the operator directory (its op.toml ``[test]`` is read).
        np: the rank counts when no topology is in effect (else the topology's count only).
        small_buffer: the job runs with ``HCCL_BUFFSIZE=1`` (MB) unless the environment sets it.
        env: more variables for the job.

    Returns:
        ``{"np": [...], "env": {...}}``.
    """
    import os

    from ..build.opspec import load_opspec
    from ..build.testjob import op_job

    job = op_job(load_opspec(opdir))
    extra = dict(job.env)
    if small_buffer and "HCCL_BUFFSIZE" not in os.environ:
        extra["HCCL_BUFFSIZE"] = "1"
    extra.update(env or {})
    return {"np": [job.np] if job.np else list(np), "env": extra}


def beyond_buffer_count(spec: Any, rank_size: int, dtype: str, times: int) -> int:
    """``OpParam.count`` of a call whose largest operand per rank (input or output) holds ``times``
    HCCL buffers (``HCCL_BUFFSIZE`` of this job) and an odd tail of 7 elements beyond; a multiple of
    the rank count where the output is ``count/ranks``."""
    from ..base import envs
    from ..base.dtypes import get_dtype

    buffer_bytes = envs.hccl_buffsize_mb() << 20
    per = rank_size if spec.kind_info.blocks or spec.output == "count*ranks" else 1
    count = times * buffer_bytes // get_dtype(dtype).itemsize // per + 7
    if spec.output == "count/ranks" and spec.kind_info.output != "recv_counts":
        count += -count % rank_size
    return count
