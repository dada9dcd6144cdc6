"""The per-rank log of the Python side (``HCOMM_KIT_LOG_DIR``), next to the emulator's.

The emulator writes one file per rank (``rank<R>.log``): every kernel launch with its operator, every
failed call with its message, hang reports and checker findings. The Python layer appends its own
failures (with the operator and the arguments) to the same file through :func:`log`. Rank state
dumps for launchers live in :mod:`hcomm_kit.jobs.job`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..base import envs

__all__ = ["log"]


def log(message: str) -> None:
    """Append one line to this rank's log in ``HCOMM_KIT_LOG_DIR`` (no-op when unset)."""
    d = envs.get("HCOMM_KIT_LOG_DIR")
    if not d:
        return
    rank = next((os.environ[v] for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HCOMM_KIT_RANK", "RANK")
                 if os.environ.get(v, "").isdigit()), None)
    path = Path(d) / (f"rank{rank}.log" if rank is not None else f"pid{os.getpid()}.log")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S") + f".{int(time.time() * 1e6) % 1000000:06d}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(f"{stamp} pid {os.getpid()} py: {message}\n")
    except OSError:
        pass
