"""Progress display of long work (bench sweeps, test jobs, demo steps, the first emulator build).

Drawn with `rich <https://github.com/Textualize/rich>`_ on the terminal only: nothing is drawn
when stderr is not a TTY (CI logs, pytest captures, pipes), when ``TERM=dumb`` or ``CI`` is set.

Inside an MPI job the ranks' stderr is a pipe, so the launcher draws for them: when it draws a
bar, it sets ``HCOMM_KIT_PROGRESS_FILE`` for the job, rank 0 appends one JSON line per step
there (:class:`Progress` does it), and :class:`Watcher` mirrors the file into the launcher's bar.

Example::

    with progress.Progress("bench allreduce", total=len(sizes)) as bar:
        for s in sizes:
            ...
            bar.advance(detail=f"{s} bytes")
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, TextIO

__all__ = ["enabled", "Progress", "status", "Watcher"]


def enabled(stream: TextIO | None = None) -> bool:
    """True when a progress display may be drawn on ``stream`` (default: stderr)."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        return False
    if not tty or os.environ.get("TERM") == "dumb" or os.environ.get("CI"):
        return False
    try:
        import rich  # noqa: F401
    except ImportError:  # pragma: no cover - rich is a dependency
        return False
    return True


def _rich_progress(transient: bool = True):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, SpinnerColumn, TextColumn
    from rich.progress import TimeElapsedColumn

    console = Console(file=sys.stderr)
    return RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=console,
                        transient=transient, redirect_stdout=True, redirect_stderr=True)


class Progress:
    """A counted task: a rich bar on a terminal, the progress file inside a launched job, else nothing.

    Args:
        description: what is being done (e.g. ``"bench allreduce"``).
        total: number of steps (None: unknown).
        rank: this process's rank; only rank 0 reports inside a job.
    """

    def __init__(self, description: str, total: int | None = None, *, rank: int = 0) -> None:
        from . import envs

        self.description, self.total, self.done = description, total, 0
        self._bar = self._task = None
        self._lock = threading.Lock()  # steps may finish on several threads
        self._file: Path | None = None
        if rank != 0:
            return
        path = None
        try:
            path = envs.progress_file()
        except Exception:
            path = None
        if path is not None:
            self._file = Path(path)
        elif enabled():
            self._bar = _rich_progress()

    def __enter__(self) -> "Progress":
        if self._bar is not None:
            try:
                self._bar.start()
            except Exception:  # another live display is active: it keeps the terminal
                self._bar = None
                return self
            self._task = self._bar.add_task(self.description, total=self.total, detail="")
        self._emit("")
        return self

    def advance(self, n: int = 1, *, detail: str = "") -> None:
        """Count ``n`` more steps done; ``detail`` names the step just finished or started."""
        with self._lock:
            self.done += n
            if self._bar is not None and self._task is not None:
                self._bar.update(self._task, advance=n, detail=detail)
            self._emit(detail)

    def _emit(self, detail: str) -> None:
        if self._file is None:
            return
        rec = {"description": self.description, "total": self.total, "done": self.done, "detail": detail}
        try:
            with open(self._file, "a") as f:
                f.write(json.dumps(rec) + "\n")
        except OSError:
            self._file = None

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self._file is not None:
            self._emit("")


@contextlib.contextmanager
def status(text: str) -> Iterator[None]:
    """A spinner with ``text`` while the block runs (terminal only)."""
    if not enabled():
        yield
        return
    from rich.console import Console

    spinner = Console(file=sys.stderr).status(text)
    try:
        spinner.start()
    except Exception:  # another live display is active (e.g. a progress bar around this step)
        spinner = None
    try:
        yield
    finally:
        if spinner is not None:
            spinner.stop()


class Watcher:
    """The launcher's side: mirror the progress file ranks write into a rich bar (terminal only).

    Call :meth:`poll` periodically (it reads only what was appended) and :meth:`close` at the end.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._pos = 0
        self._bar = None
        self._tasks: dict[str, Any] = {}
        self._lock = threading.Lock()

    def poll(self) -> None:
        try:
            with open(self.path) as f:
                f.seek(self._pos)
                chunk = f.read()
        except OSError:
            return
        end = chunk.rfind("\n")
        if end < 0:
            return
        self._pos += len(chunk[: end + 1].encode())
        for line in chunk[: end + 1].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self._show(rec)

    def _show(self, rec: dict) -> None:
        with self._lock:
            if self._bar is False:
                return
            if self._bar is None:
                bar = _rich_progress()
                try:
                    bar.start()
                except Exception:  # another live display is active (e.g. the caller's own bar)
                    self._bar = False
                    return
                self._bar = bar
            desc = str(rec.get("description", ""))
            task = self._tasks.get(desc)
            if task is None:
                task = self._tasks[desc] = self._bar.add_task(desc, total=rec.get("total"), detail="")
            self._bar.update(task, completed=int(rec.get("done", 0)), total=rec.get("total"),
                             detail=str(rec.get("detail", "")))

    def close(self) -> None:
        self.poll()
        with self._lock:
            if self._bar:
                self._bar.stop()
            self._bar = None
