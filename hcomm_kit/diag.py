"""Diagnosis from the Python side: rank state dumps for launchers and the test plugin, and the
per-rank log (``HCOMM_KIT_LOG_DIR``).

The emulator answers a dump request: when the file ``$HCOMM_KIT_JOB_DIR/dump.request`` appears
(or changes), every live rank's monitor writes ``rank<R>.state.json`` there within about 0.2 s:
``{"rank": R, "pid": P, "summary": "<one line: what it waits for>", "report": "<cross-rank report>"}``.
:func:`collect` makes the request and gathers the answers; :func:`format_states` turns them into
text for a timeout message.

Example::

    states = collect(job_dir, ranks=4, timeout=1.5)
    print(format_states(states, ranks=4))
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import envs

__all__ = ["DUMP_REQUEST", "collect", "format_states", "log"]

DUMP_REQUEST = "dump.request"


def collect(job_dir: "str | os.PathLike[str]", ranks: int | None = None, timeout: float = 1.5) -> dict[int, dict]:
    """Ask every rank of the job for its state and return ``{rank: state}`` (what arrived in time).

    Args:
        job_dir: the job's ``HCOMM_KIT_JOB_DIR``.
        ranks: how many answers to wait for (None: wait the whole timeout).
        timeout: seconds to wait for the answers.
    """
    d = Path(job_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
        req = d / DUMP_REQUEST
        t0 = time.time()
        req.write_text(f"{t0}\n")
        os.utime(req, None)
    except OSError:
        return {}
    deadline = time.monotonic() + timeout
    states: dict[int, dict] = {}
    while True:
        for f in d.glob("*.state.json"):
            try:
                if f.stat().st_mtime + 1e-3 < t0:
                    continue  # an answer to an earlier request
                data = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            key = data.get("rank")
            if not isinstance(key, int):
                key = -int(data.get("pid") or 0)
            states[key] = data
        if (ranks is not None and len(states) >= ranks) or time.monotonic() >= deadline:
            return states
        time.sleep(0.05)


def format_states(states: dict[int, dict], ranks: int | None = None) -> str:
    """One line per rank (its summary), then the first full cross-rank report that arrived."""
    lines = []
    keys = sorted(states) if ranks is None else list(range(ranks))
    for r in keys:
        s = states.get(r)
        if s is None:
            lines.append(f"rank {r}: no state reported (not in an hcomm-kit call, or not started)")
        else:
            lines.append(f"rank {r} (pid {s.get('pid')}): {s.get('summary', '?')}")
    report = next((s.get("report") for s in states.values() if s.get("report")), "")
    return "\n".join(lines) + (f"\n{report}" if report else "")


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
