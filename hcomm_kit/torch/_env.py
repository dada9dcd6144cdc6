"""The ``torch.distributed`` environment (``env://``) for ranks started by an MPI launcher.

``torchrun`` sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
``mpirun`` / ``hcomm-kit launch`` set their own variables instead. :func:`apply_launcher_env` fills
the torch ones from Open MPI's / PMI's (never overriding a variable that is set), so a script
written for ``torchrun`` runs unchanged under ``hcomm-kit launch --np N -- python train.py``.

``MASTER_PORT``: ``hcomm-kit launch`` exports a free port; under a plain ``mpirun`` it is derived
from the job's identity (the same on every rank of the job, different between jobs), in
[20000, 30000). ``MASTER_ADDR`` defaults to 127.0.0.1 when every rank is on this node; a
multi-node mpirun job must export ``MASTER_ADDR`` (rank 0's host) itself.
"""

from __future__ import annotations

import os
import zlib

__all__ = ["apply_launcher_env", "launcher_env"]

# (torch variable, launcher variables in order of preference)
_FROM = (
    ("RANK", ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")),
    ("WORLD_SIZE", ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")),
    ("LOCAL_RANK", ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK")),
    ("LOCAL_WORLD_SIZE", ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE")),
)
_JOB_IDS = ("PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "OMPI_MCA_ess_base_jobid", "PMI_KVSNAME")
_PORT_BASE, _PORT_SPAN = 20000, 10000


def launcher_env(environ: "dict[str, str] | os._Environ[str] | None" = None) -> dict[str, str]:
    """The torch variables to add for an MPI-launched rank (empty when not under MPI or when
    ``RANK`` is already set, e.g. under torchrun)."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return {}
    found: dict[str, str] = {}
    for name, sources in _FROM:
        for src in sources:
            value = env.get(src, "").strip()
            if value.isdigit():
                found[name] = value
                break
    if "RANK" not in found or "WORLD_SIZE" not in found:
        return {}
    offset = env.get("HCOMM_KIT_RANK_OFFSET", "").strip()
    if offset.isdigit() and env.get("HCOMM_KIT_WORLD_SIZE", "").strip().isdigit():
        # a host of `hcomm-kit launch --nnodes` (hcomm_kit.jobs.nodes): job ranks, and the launcher's
        # MASTER_ADDR / MASTER_PORT (node 0)
        found["RANK"] = str(int(offset) + int(found["RANK"]))
        found["WORLD_SIZE"] = env["HCOMM_KIT_WORLD_SIZE"].strip()
    out = {k: v for k, v in found.items() if k not in env}
    local_size = found.get("LOCAL_WORLD_SIZE")
    if "MASTER_ADDR" not in env and local_size == found["WORLD_SIZE"]:
        out["MASTER_ADDR"] = "127.0.0.1"
    if "MASTER_PORT" not in env:
        job = next((env[k] for k in _JOB_IDS if env.get(k)), None) or f"ppid{os.getppid()}"
        out["MASTER_PORT"] = str(_PORT_BASE + zlib.crc32(job.encode()) % _PORT_SPAN)
    return out


def apply_launcher_env() -> dict[str, str]:
    """Set the variables of :func:`launcher_env` in ``os.environ``; returns what was set."""
    add = launcher_env()
    os.environ.update(add)
    return add
