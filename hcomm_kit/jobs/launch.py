"""Run commands on N ranks: the shared helper of ``hcomm-kit launch/run/test/bench``.

:func:`launch` re-executes a command under ``mpirun`` (``hcomm_kit.jobs.mpirun.mpirun_argv``) unless
this process already runs under MPI, in which case it runs the command directly.
:func:`hcomm_kit.core.rank.install_abort_hook` makes an uncaught Python exception on one rank print its traceback
and abort every rank (``MPI.COMM_WORLD.Abort(1)``), so no rank hangs in a collective.

Nothing outlives a launch. While the job runs, SIGTERM, SIGINT and SIGHUP sent to the launcher
(``kill``, Ctrl-C, ``timeout 15 hcomm-kit launch ...``, a CI runner or scheduler cancelling the
job, a closed terminal) and the ``timeout=`` deadline all stop the job the same way:

1. the ranks are asked what they are doing (``HCOMM_KIT_JOB_DIR`` state dumps, see
   :mod:`hcomm_kit.jobs.job`) and one line per rank is printed: its own account of its current
   wait when the emulator gives one, else pid, command and kernel wait channel;
2. the signal is forwarded to mpirun and to every rank process;
3. after ``grace`` seconds (default 5) whatever is left of the job is killed (SIGKILL): mpirun,
   prted, ranks and anything they started (the launcher is the child subreaper of the job, so
   processes orphaned by a dead mpirun are found too);
4. the job directory, Open MPI's backing directory (``/dev/shm/hcomm_kit_mpi_*``) and the
   emulator segments of dead ranks (``/dev/shm/hcomm_kit.<uid>.*``) are removed.

The exit status is 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP),
or 124 on ``timeout=``. A second signal skips the grace period (the same signal twice within
0.25 s counts once: ``timeout`` signals its child, then its whole process group). A signal that
arrives while mpirun is exiting still stops the launch the same way (status 128 + N, ranks listed). Only SIGKILL of the launcher
itself cannot be handled; then mpirun gets SIGTERM (it is started with PR_SET_PDEATHSIG),
Python ranks die with their parent (see :func:`hcomm_kit.core.rank.install_abort_hook`) and the next launch removes
the job's Open MPI backing directory (:func:`hcomm_kit.jobs.mpirun.reclaim_backing_dirs`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Mapping, Sequence

__all__ = ["launch", "DEFAULT_GRACE"]

ENV_JOB_DIR = "HCOMM_KIT_JOB_DIR"
DEFAULT_GRACE = 5.0
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_DUMP_WAIT = 1.5  # seconds the ranks get to answer the state-dump request (they are asked to within 1 s)
_SAME_SIGNAL_S = 0.25  # a repeat of the same signal within this is one signal (not "impatient")


def launch(command: Sequence[str], np: int, *, timeout: float | None = None, tag_output: bool = True,
           env: Mapping[str, str] | None = None, cwd: str | None = None, grace: float = DEFAULT_GRACE,
           verbose: bool = False, nodes=None) -> int:
    """Run ``command`` on ``np`` ranks; return its exit status.

    Returns 124 when ``timeout`` seconds passed, 128 + N when the launcher got signal N
    (SIGTERM, SIGINT, SIGHUP); in both cases the job was stopped as the module docstring says
    and the ranks that were still running were listed on stderr.

    The job's output goes through :class:`~hcomm_kit.jobs.output.JobOutput`: each distinct
    error once with its ranks, Open MPI's failure banners summed up in one line (``verbose``:
    everything as mpirun prints it).

    ``nodes`` (a :class:`~hcomm_kit.jobs.nodes.Nodes`): this host's part of a job on several hosts;
    its launchers meet first, the ranks get their job ranks and the root info through them, and the
    job stops when another node's job failed or the rendezvous is lost.
    """
    from ..core.bootstrap import under_mpi
    from .output import JobOutput
    from .mpirun import mpirun_argv, shm_backing_dir
    from .job import JobDir

    inside = under_mpi() and nodes is None
    output = None if inside else JobOutput(np, tag_output=tag_output, verbose=verbose)
    argv = list(command) if inside else mpirun_argv(np, list(command), env=env, tag_output=True)
    with JobDir() as job, shm_backing_dir() as shm_env:
        full_env = dict(os.environ, **(env or {}), **({} if inside else {**shm_env, **output.env()}))
        full_env[ENV_JOB_DIR] = str(job.path)
        if not inside:
            argv[1:1] = ["-x", ENV_JOB_DIR]
        if nodes is not None:
            for name, value in nodes.start(job.path / "root_info").items():
                full_env[name] = value
                argv[1:1] = ["-x", name]
        status = 1
        try:
            status = _Job(argv, np, full_env, cwd, job.path, grace, output,
                          watch=nodes.watch if nodes is not None else None).run(timeout)
            return status
        finally:
            if nodes is not None:
                nodes.finish(status, _first_error(output, nodes.offset))


def _first_error(output, offset: int) -> str:
    """The first error the job's ranks printed, with their job ranks ("rank 5: ValueError: ..."), for
    the other hosts' launchers ("" when none was printed)."""
    first = getattr(output, "first_error", None)
    if not first:
        return ""
    from .output import format_ranks

    ranks, line = first
    return f"rank{'s' if len(ranks) > 1 else ''} {format_ranks([offset + r for r in ranks])}: {line}"


class _Job:
    """The running mpirun (or command) and the signal handling around it."""

    def __init__(self, argv: list[str], np: int, env: dict[str, str], cwd: str | None, job_dir, grace: float,
                 output=None, watch=None) -> None:
        self.argv, self.np, self.env, self.cwd, self.job_dir, self.grace = argv, np, env, cwd, job_dir, grace
        self.watch = watch  # called every ~0.5 s while the job runs: a reason to stop it, or None
        self.output = output  # JobOutput reading mpirun's stdout/stderr (None: inherited)
        self.signals: list[int] = []
        self._last_signal = 0.0
        self.proc: subprocess.Popen | None = None
        self._other_children: set[int] = set()  # children of this process that are not the job's

    # ---- signal handlers (main thread only) -------------------------------------------------
    def _on_signal(self, signum, frame) -> None:
        now = time.monotonic()
        if self.signals and self.signals[-1] == signum and now - self._last_signal < _SAME_SIGNAL_S:
            return  # the same signal twice at once: `timeout` signals its child, then its process group
        self._last_signal = now
        self.signals.append(signum)
        if len(self.signals) > 1 and self.proc is not None:
            self._kill_now()  # impatient second signal: no grace period

    def _install(self) -> dict:
        old: dict = {}
        if threading.current_thread() is not threading.main_thread():
            return old
        for sig in _FORWARDED:
            try:
                old[sig] = signal.signal(sig, self._on_signal)
            except (ValueError, OSError):
                pass
        return old

    def run(self, timeout: float | None) -> int:
        from .job import children_of, set_child_subreaper

        old_handlers = self._install()
        status: int | None = None
        rc: int | None = None
        was_reaper = set_child_subreaper(True)
        self._other_children = set(children_of(os.getpid()))
        try:
            # Single-threaded: mpirun gets SIGTERM should this launcher be SIGKILLed (preexec_fn
            # is only safe without other threads).
            pre = _pdeathsig_term if threading.active_count() == 1 else None
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, start_new_session=True,
                                         preexec_fn=pre, **(self.output.popen_kwargs() if self.output else {}))
            if self.output:
                self.output.start(self.proc)
            deadline = time.monotonic() + timeout if timeout is not None else None
            next_watch = time.monotonic() + 0.5
            while True:
                if self.watch is not None and time.monotonic() >= next_watch:
                    next_watch = time.monotonic() + 0.5
                    why = self.watch()
                    if why:
                        status = self._stop(why, signal.SIGTERM, 1, extra="; killed the ranks of this host")
                        return status
                if self.signals:
                    status = self._stop(f"got {signal.Signals(self.signals[0]).name}", self.signals[0],
                                        128 + self.signals[0])
                    return status
                if deadline is not None and time.monotonic() >= deadline:
                    status = self._stop(f"the job did not finish within {timeout:g} s", signal.SIGTERM, 124,
                                        extra="; killed all ranks")
                    return status
                try:
                    rc = self.proc.wait(timeout=0.1)
                except subprocess.TimeoutExpired:
                    continue
                if self.signals:  # a signal came while mpirun was exiting: it still stops the launch
                    status = self._stop(f"got {signal.Signals(self.signals[0]).name}", self.signals[0],
                                        128 + self.signals[0])
                    return status
                self._end_leftovers()
                status = rc
                return rc
        except KeyboardInterrupt:  # handlers not installed (not the main thread)
            status = self._stop("got SIGINT", signal.SIGINT, 130)
            return status
        finally:
            if self.output:
                failure = self.output.finish(status)
                if failure and status == rc:
                    print(f"hcomm-kit: the job failed: {failure}", file=sys.stderr)
            if not was_reaper:
                set_child_subreaper(False)
            for sig, h in old_handlers.items():
                signal.signal(sig, h)
            _cleanup_shm()

    # ---- stopping -------------------------------------------------------------------------
    def _pids(self) -> dict:
        """The job's processes: mpirun and its descendants, plus descendants re-parented to this
        process (it is their subreaper) after their parent died."""
        from .job import children_of, job_processes

        roots = [c for c in children_of(os.getpid()) if c not in self._other_children]
        if self.proc is not None:
            roots.append(self.proc.pid)
        return job_processes(roots)

    def _stop(self, why: str, sig: int, status: int, extra: str = "") -> int:
        from .job import describe_ranks, request_rank_states, stop_processes

        procs = self._pids()
        ranks = [p for p in procs.values() if p.rank is not None]
        running = sorted({p.rank for p in ranks})
        states = request_rank_states(self.job_dir, nranks=len(running) or None, wait=_DUMP_WAIT,
                                     pids=[p.pid for p in ranks]) if ranks else {}
        lines = [f"hcomm-kit launch: {why}; stopping the job ({len(running)} of {self.np} rank(s) still running"
                 f"{'' if not running else ': ' + ', '.join(map(str, running))})"]
        if running:
            lines += ["  " + l for l in describe_ranks(self.np, states, procs) if not l.endswith("not started)")]
        print("\n".join(lines), file=sys.stderr, flush=True)
        groups = [self.proc.pid] if self.proc is not None else []
        _, killed = stop_processes(procs.keys(), sig, 0.0 if len(self.signals) > 1 else self.grace,
                                   groups=groups, rescan=lambda: self._pids().keys())
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        tail = f"killed {len(killed)} process(es) still running after {self.grace:g} s" if killed else \
            "every process exited"
        print(f"hcomm-kit launch: job stopped ({tail}){extra}", file=sys.stderr, flush=True)
        return status

    def _kill_now(self) -> None:
        from .job import stop_processes

        stop_processes(self._pids().keys(), signal.SIGKILL, 0.0,
                       groups=[self.proc.pid] if self.proc is not None else [])

    def _end_leftovers(self) -> None:
        """After a normal end: anything the job left running (a rank's own background process)
        is ended too, so nothing outlives the launch."""
        from .job import stop_processes

        left = self._pids()
        if left:
            stop_processes(left.keys(), signal.SIGTERM, 1.0, rescan=lambda: self._pids().keys())


def _pdeathsig_term() -> None:
    from .job import die_with_parent

    die_with_parent(signal.SIGTERM)


def _cleanup_shm() -> None:
    from .job import reclaim_shm

    try:
        reclaim_shm()
    except OSError:
        pass


