"""One launched job: its directory, its processes, their state, and stopping it completely.

Used by :func:`hcomm_kit.jobs.launch.launch` (``hcomm-kit launch/run/test/bench``) and reusable
by the pytest plugin:

* :class:`JobDir`: the per-job directory exported to every rank as ``HCOMM_KIT_JOB_DIR`` (rank
  state dumps, logs); removed with the job.
* :func:`request_rank_states`: the state-dump protocol. The launcher creates
  ``$HCOMM_KIT_JOB_DIR/dump.request``; within about a second every live rank that uses the
  emulator writes ``rank<R>.state.json`` (atomically) with at least ``{"rank": int, "pid": int,
  "summary": str}`` (summary: one line, what the rank waits for). This function makes the request
  and collects the answers.
* :func:`job_processes` / :func:`describe_ranks`: the processes of a job (read from ``/proc``:
  the launcher's descendants; a rank is one with ``OMPI_COMM_WORLD_RANK`` / ``PMIX_RANK`` in its
  environment) and one line per rank for the user: the rank's own summary when it answered,
  otherwise what the launcher can tell (pid, still running, command, kernel wait channel).
* :func:`stop_processes`: signal, wait a grace period, SIGKILL what is left, reap.
* :func:`reclaim_shm`: remove the emulator's shared-memory segments whose owner is dead.

Linux only (``/proc``); elsewhere the process helpers return nothing and stopping falls back to
the process group.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..base.leftovers import pid_alive, reclaim_shm, reclaim_unlocked  # noqa: F401 - re-exported
from ..core.rank import die_with_parent, prctl as _prctl  # noqa: F401 - die_with_parent: launcher side too

__all__ = [
    "JobDir",
    "ProcInfo",
    "DUMP_REQUEST",
    "request_rank_states",
    "children_of",
    "job_processes",
    "describe_ranks",
    "stop_processes",
    "reclaim_shm",
    "set_child_subreaper",
    "die_with_parent",
]

DUMP_REQUEST = "dump.request"
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "HCOMM_KIT_RANK")
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


# ---- the job directory ----------------------------------------------------------------------------
class JobDir:
    """A fresh per-job directory (``hcomm_kit_job_*`` in the temp directory), removed on exit.

    Example::

        with JobDir() as job:
            env = {"HCOMM_KIT_JOB_DIR": str(job.path)}
            ...
    """

    def __init__(self, base: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="hcomm_kit_job_", dir=base))

    def __enter__(self) -> "JobDir":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def request_rank_states(job_dir: str | os.PathLike[str], nranks: int | None = None, wait: float = 1.0,
                        pids: Iterable[int] | None = None) -> dict[int, dict]:
    """Ask the ranks of a job for their state; return ``{rank: state}`` of those that answered.

    Creates ``<job_dir>/dump.request`` (removing older answers first), then polls for
    ``rank<R>.state.json`` until ``nranks`` valid answers arrived or ``wait`` seconds passed. Only
    answers with an integer ``rank`` and a string ``summary`` count; when ``pids`` is given, only
    answers from those processes.
    """
    d = Path(job_dir)
    for old in d.glob("rank*.state.json"):
        old.unlink(missing_ok=True)
    req = d / DUMP_REQUEST
    req.unlink(missing_ok=True)
    tmp = d / f".{DUMP_REQUEST}.{os.getpid()}"
    tmp.write_text(json.dumps({"pid": os.getpid(), "time": time.time()}) + "\n")
    os.replace(tmp, req)
    allowed = set(pids) if pids is not None else None
    deadline = time.monotonic() + max(0.0, wait)
    states: dict[int, dict] = {}
    while True:
        for p in d.glob("rank*.state.json"):
            try:
                st = json.loads(p.read_text())
            except (OSError, ValueError):
                continue  # not complete yet (writers rename atomically, but be tolerant)
            if not isinstance(st, dict) or type(st.get("rank")) is not int or not isinstance(st.get("summary"), str):
                continue
            if allowed is not None and st.get("pid") not in allowed:
                continue
            states[st["rank"]] = st
        if (nranks is not None and len(states) >= nranks) or time.monotonic() >= deadline:
            return states
        time.sleep(0.05)


# ---- processes ----------------------------------------------------------------------------------
@dataclass
class ProcInfo:
    """One process of a job, as read from ``/proc``."""

    pid: int
    ppid: int
    rank: int | None = None
    cmdline: list[str] = field(default_factory=list)
    state: str = "?"
    wchan: str = ""

    def command(self, width: int = 80) -> str:
        text = " ".join(self.cmdline) or "?"
        return text if len(text) <= width else text[: width - 3] + "..."


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _proc_info(pid: int) -> ProcInfo | None:
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    if len(rest) < 2:
        return None
    info = ProcInfo(pid=pid, ppid=int(rest[1]), state=rest[0])
    info.cmdline = [a for a in _read(f"/proc/{pid}/cmdline").split("\0") if a]
    wchan = _read(f"/proc/{pid}/wchan").strip()
    info.wchan = "" if wchan in ("", "0") else wchan
    env = _read(f"/proc/{pid}/environ").split("\0")
    for name in _RANK_VARS:
        for kv in env:
            if kv.startswith(name + "=") and kv[len(name) + 1:].isdigit():
                info.rank = int(kv[len(name) + 1:])
                break
        if info.rank is not None:
            break
    return info


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (all its threads), from /proc."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        out += [int(c) for c in _read(f"/proc/{pid}/task/{t}/children").split()]
    return out


def job_processes(roots: Iterable[int]) -> dict[int, ProcInfo]:
    """``roots`` and all their living descendants (zombies excluded), by pid."""
    seen: dict[int, ProcInfo] = {}
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        info = _proc_info(pid)
        if info is None:
            continue
        if info.state != "Z":
            seen[pid] = info
        todo += children_of(pid)
    return seen


def describe_ranks(nranks: int, states: Mapping[int, dict], procs: Mapping[int, ProcInfo] | None = None) -> list[str]:
    """One line per rank ``0..nranks-1``: its own summary if it answered the dump request, else
    what ``/proc`` shows (pid, running, command, kernel wait channel), else that it is gone."""
    by_rank: dict[int, ProcInfo] = {}
    for info in (procs or {}).values():
        if info.rank is not None and info.rank not in by_rank:
            by_rank[info.rank] = info
    lines = []
    for r in range(nranks):
        st = states.get(r)
        info = by_rank.get(r)
        if st is not None:
            pid = st.get("pid", info.pid if info else "?")
            lines.append(f"rank {r} (pid {pid}): {st['summary'].strip().splitlines()[0] if st['summary'].strip() else '(no summary)'}")
        elif info is not None:
            where = f", in {info.wchan}" if info.wchan else ""
            lines.append(f"rank {r} (pid {info.pid}): still running `{info.command()}` (state {info.state}{where}); "
                         f"it did not report what it waits for")
        else:
            lines.append(f"rank {r}: not running (already exited or not started)")
    return lines


def stop_processes(pids: Iterable[int], sig: int, grace: float, *, groups: Iterable[int] = (),
                   rescan=None) -> tuple[list[int], list[int]]:
    """Send ``sig`` to ``pids`` (and to the process groups ``groups``), wait up to ``grace``
    seconds for them to exit, then SIGKILL what is left.

    ``rescan()`` (optional) returns the current set of job pids, so processes that appeared or
    were re-parented meanwhile are covered too. Returns ``(exited in the grace period, killed)``.
    """
    pids = set(pids)
    for g in groups:
        try:
            os.killpg(g, sig)
        except OSError:
            pass
    for pid in pids:
        _kill(pid, sig)
    deadline = time.monotonic() + max(0.0, grace)
    alive = set(pids)
    while True:
        if rescan is not None:
            alive |= set(rescan())
        alive = {p for p in alive if pid_alive(p)}
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    killed = sorted(alive)
    for g in groups:
        try:
            os.killpg(g, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(3):  # a process may fork while we kill: repeat until nothing is left
        for pid in alive:
            _kill(pid, signal.SIGKILL)
        if rescan is not None:
            alive = {p for p in set(rescan()) if pid_alive(p)}
        else:
            alive = {p for p in alive if pid_alive(p)}
        if not alive:
            break
        time.sleep(0.05)
    return sorted(pids - set(killed)), killed


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass




# ---- process attributes ---------------------------------------------------------------------------
def set_child_subreaper(on: bool) -> bool:
    """Linux: make this process the reaper of its orphaned descendants (so the ranks of a job
    whose mpirun died are re-parented here and can still be found and ended). Returns whether
    it was on before."""
    before = ctypes.c_int(0)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    _prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0)
    return bool(before.value)
