"""What an mpirun job prints, made readable: the launcher's output filter (``hcomm-kit run/bench/launch``).

mpirun runs with ``--tag-output`` so that every line of a rank says which rank it comes from;
:class:`JobOutput` reads mpirun's stdout and stderr and

* passes each rank's stdout through as it comes (tags removed unless the caller wants them);
* groups each rank's stderr into blocks (lines with no pause between them) and prints each
  distinct block once, with the list of ranks that printed it (``[ranks 0-3] hcomm-kit: error: ...``);
  blocks that differ only in the printing rank's own number, pids, addresses and handles are one
  block, shown with what differs in place (``rank N`` = each rank's own number, ``pid {101,102}``
  = each rank's value in rank order); any other difference keeps blocks apart;
* prints each emulator hang report (``[hcomm-kit] DEADLOCK on communicator ...``) once per job: it
  is every rank's error message and the finder's stderr, so later copies are cut to their headline
  plus a note that the report is above;
* hides Open MPI's banners about a failing job (``MPI_ABORT was invoked ...``, ``prterun has exited
  due to ...``, ``... exited with non-zero status``, ``Epoll ... Bad file descriptor``) and sums them
  up in one line (:meth:`JobOutput.finish`); other banners are shown. Open MPI's aftermath lines
  (``Abort is in progress``, ``PMIX ERROR: PMIX_ERR_UNREACH``) are held back and dropped when the
  job failed with a cause already shown. ``verbose`` shows everything exactly as mpirun printed it.

It also mirrors the ranks' progress file into a progress bar (:mod:`hcomm_kit.base.progress`).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, TextIO

__all__ = ["JobOutput", "format_ranks", "normalize", "merge_lines"]

_TAG = re.compile(r"^\[(\d+),(\d+)\]<(stdout|stderr|stddiag)>: ?(.*)$")
_BANNER = "-" * 74  # Open MPI's show-help separator
_NOISE = (re.compile(r"^\[warn\] Epoll [A-Z]+\(\d+\) on fd \d+ failed"),)
# Open MPI's lines about tearing a failed job down: dropped when the job failed with a cause shown.
_AFTERMATH = (re.compile(r"Abort is in progress"), re.compile(r"PMIX ERROR: PMIX_ERR_UNREACH"))
# Banners that only say that a rank failed (its own output says why): summed up, not shown.
_KNOWN = (
    (re.compile(r"MPI_ABORT was invoked on rank (\d+)"), "called MPI_Abort"),
    (re.compile(r"exited due to process rank (\d+) with PID \d+ on\s+node \S+ calling\s+\"abort\"", re.S),
     "called MPI_Abort"),
    (re.compile(r"exited with non-zero status.*?Process name:\s+\[\S*,(\d+)\]\s.*?Exit code:\s+(\d+)", re.S),
     "exited with status {1} first"),
    (re.compile(r"noticed that process rank (\d+) with PID \d+ on node \S+ exited on\s+signal (\d+)(?: \(([^)]*)\))?",
                re.S), "was killed by signal {1}"),
    (re.compile(r"Primary job\s+terminated normally, but (\d+) process returned", re.S), None),
    (re.compile(r"exited due to process rank (\d+) with PID \d+ on\s+node \S+ exiting improperly", re.S),
     "exited without finalizing MPI"),
)
# The headline of an emulator hang report; the report's other lines are indented under it.
_REPORT = re.compile(r"\[hcomm-kit\] DEADLOCK on communicator (\S+) \(\d+ ranks\), found by rank \d+")
_PAUSE = 0.2      # s without a new line that ends a block of stderr lines
_MAX_AGE = 1.0    # s after which a block is printed even if lines keep coming
_OPEN_PAUSE = 2.0  # s a Python traceback that has not reached its exception line waits for it
_MAX_LINES = 200  # lines after which a block is printed
_GROUP = 0.3      # s a finished block waits for the same block from other ranks
_SAME_TIME = 5.0  # s within which the same block from other ranks is folded into the first one


def format_ranks(ranks) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    rs = sorted(set(ranks))
    parts, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        parts.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}" if j > i + 1 else f"{rs[i]},{rs[j]}")
        i = j + 1
    return ",".join(parts)


_VARIANT = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x#"),
    (re.compile(r"\[\[\d+,\d+\],\d+\]"), "[[#]]"),
    (re.compile(r"\b(PID|pid) \d+"), r"\1 #"),
)
_NUMBER = re.compile(r"(0x[0-9a-fA-F]+|\d+)")
_LISTED = 4  # values that differ between more ranks than this show as "*"


def normalize(lines: list[str], rank: int) -> str:
    """The text of a block with what differs between ranks (their number, handles...) masked."""
    text = "\n".join(lines)
    text = re.sub(rf"\b(rank|Rank|RANK|ranks?) {rank}\b", r"\1 #", text)
    text = re.sub(rf"\brank{rank}\b", "rank#", text)
    for pat, rep in _VARIANT:
        text = pat.sub(rep, text)
    return text


def merge_lines(blocks: dict[int, list[str]]) -> list[str]:
    """One text for blocks of several ranks that :func:`normalize` found equal (``{rank: lines}``).

    A number that is the same everywhere is kept; one that is each rank's own number shows as
    ``N``; other differing numbers (pids, handles) show as ``{a,b}`` in rank order (``*`` beyond
    a few ranks). Never one rank's text for all."""
    ranks = sorted(blocks)
    first = blocks[ranks[0]]
    if len(ranks) == 1 or any(len(blocks[r]) != len(first) for r in ranks):
        return list(first)
    out = []
    for i, line in enumerate(first):
        parts = {r: _NUMBER.split(blocks[r][i]) for r in ranks}
        if any(len(p) != len(parts[ranks[0]]) for p in parts.values()):
            out.append(line)
            continue
        merged = []
        for j, piece in enumerate(parts[ranks[0]]):
            values = [parts[r][j] for r in ranks]
            if j % 2 == 0 or len(set(values)) == 1:
                merged.append(piece)
            elif all(v == str(r) for v, r in zip(values, ranks)):
                merged.append("N")
            elif len(ranks) <= _LISTED:
                merged.append("{" + ",".join(values) + "}")
            else:
                merged.append("*")
        out.append("".join(merged))
    return out


def _open_traceback(lines: list[str]) -> bool:
    """A block ending inside a Python traceback (its header or a frame line, not yet the exception):
    a rank that an abort elsewhere slows down may pause there, and its block must not split."""
    last = lines[-1]
    return any(ln.startswith("Traceback (most recent call last):") for ln in lines) and (
        last.startswith("Traceback (most recent call last):") or last.startswith(" "))


class _Group:
    """One distinct block of stderr lines and the ranks that printed it (``shown``: ranks printed with it)."""

    __slots__ = ("lines", "ranks", "ready", "shown", "blocks")

    def __init__(self, lines: list[str], rank: int, now: float) -> None:
        self.lines, self.ranks, self.ready, self.shown = lines, [rank], now, 0
        self.blocks = {rank: lines}  # each rank's own words (merged for display)


class JobOutput:
    """Read an mpirun job's output and print it readably (see the module docstring).

    Args:
        np: ranks of the job.
        tag_output: keep a rank tag on every line (``hcomm-kit launch``'s default).
        verbose: print everything exactly as mpirun does (banners included).
        out, err: where to print (default: sys.stdout / sys.stderr at print time).
        progress: draw the ranks' progress (a bar on a terminal; see :mod:`hcomm_kit.base.progress`).
    """

    def __init__(self, np: int, *, tag_output: bool = False, verbose: bool = False, out: TextIO | None = None,
                 err: TextIO | None = None, progress: bool = True) -> None:
        from ..base import progress as _progress

        self.np, self.tag_output, self.verbose = np, tag_output, verbose
        self._out, self._err = out, err
        self._lock = threading.RLock()
        self._blocks: dict[int, tuple[list[str], float, float]] = {}
        self._groups: dict[str, _Group] = {}
        self._pending: list[_Group] = []
        self._banner: dict[object, list[str] | None] = {}
        self.notes: dict[str, list[int]] = {}  # what the hidden banners said -> ranks
        self._aftermath: list[str] = []  # Open MPI's teardown lines, held until the end
        self._causes = 0                 # blocks of the ranks' stderr shown
        self.hidden = 0                  # lines hidden
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._reports: set[str] = set()  # hang reports printed (their headlines)
        self.first_error: tuple[list[int], str] | None = None  # ranks and last line of the first block shown
        self._dir: Path | None = None
        self._watcher = None
        if progress and _progress.enabled(err or sys.stderr):
            self._dir = Path(tempfile.mkdtemp(prefix="hcomm_kit_job_"))
            self._watcher = _progress.Watcher(self._dir / "progress.jsonl")

    # ---- set-up ----------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """Variables for the job (the progress file, when a bar is drawn)."""
        if self._dir is None:
            return {}
        return {"HCOMM_KIT_PROGRESS_FILE": str(self._dir / "progress.jsonl")}

    @staticmethod
    def popen_kwargs() -> dict:
        return {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}

    def start(self, proc: subprocess.Popen) -> None:
        """Start reading ``proc``'s stdout and stderr (started with :meth:`popen_kwargs`)."""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                t = threading.Thread(target=self._pump, args=(stream,), daemon=True)
                t.start()
                self._threads.append(t)
        t = threading.Thread(target=self._ticker, daemon=True)
        t.start()
        self._ticker_thread = t

    def finish(self, returncode: int | None) -> str | None:
        """Wait for the readers, print what is pending; return a one-line account of a failure."""
        for t in self._threads:
            t.join(timeout=10)
        self._stop.set()
        t = getattr(self, "_ticker_thread", None)
        if t is not None:
            t.join(timeout=5)
        with self._lock:
            for key in list(self._banner):
                lines = self._banner.get(key)
                if lines:  # an unterminated banner: show what there is
                    self._print_err(lines)
                self._banner[key] = None
            self._flush(force=True)
            for g in self._groups.values():
                self._note_late(g)
            if returncode and (self._causes or self.notes):
                self.hidden += len(self._aftermath)  # the job failed and said why: teardown noise
            else:
                self._print_err(self._aftermath)
            self._aftermath = []
        if self._watcher is not None:
            self._watcher.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        if not returncode:
            return None
        notes = [f"rank{'s' if len(r) > 1 else ''} {format_ranks(r)} {text}" for text, r in self.notes.items()]
        what = "; ".join(notes) if notes else f"exit status {returncode}"
        if self.hidden and not self.verbose:
            what += " (-v shows mpirun's messages)"
        return what

    # ---- reading ---------------------------------------------------------------------------
    def _pump(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            self.feed(raw.decode(errors="replace").rstrip("\n"))
        stream.close()

    def _ticker(self) -> None:
        while not self._stop.wait(0.05):
            with self._lock:
                self._flush(force=False)
            if self._watcher is not None:
                self._watcher.poll()

    def feed(self, line: str) -> None:
        """Handle one line of mpirun's output (either stream)."""
        line = line.replace("\x00", "")
        m = _TAG.match(line)
        with self._lock:
            if self.verbose:
                self._write(self._err_stream() if m is None or m.group(3) != "stdout" else self._out_stream(),
                            line if (self.tag_output or m is None) else m.group(4))
                return
            if m is None:
                source: object = "mpirun"
                kind, text, rank = "stderr", line, None
            else:
                rank, kind, text = int(m.group(2)), m.group(3), m.group(4)
                source = rank
            if text.strip() == _BANNER:
                lines = self._banner.get(source)
                if lines is None:
                    self._banner[source] = [text]
                else:
                    lines.append(text)
                    self._banner[source] = None
                    self._banner_done(lines, rank)
                return
            if self._banner.get(source) is not None:
                self._banner[source].append(text)  # type: ignore[union-attr]
                return
            if any(p.search(text) for p in _NOISE):
                self.hidden += 1
                return
            if any(p.search(text) for p in _AFTERMATH):
                self._aftermath.append(line if rank is None or self.tag_output else text)
                return
            if rank is None:
                self._print_err([text])
            elif kind == "stdout":
                self._write(self._out_stream(), line if self.tag_output else text)
            else:
                now = time.monotonic()
                lines, first, _ = self._blocks.get(rank, ([], now, now))
                lines.append(text)
                self._blocks[rank] = (lines, first, now)
                if len(lines) >= _MAX_LINES:
                    self._close_block(rank, now)

    def _banner_done(self, lines: list[str], rank: int | None) -> None:
        body = "\n".join(lines[1:-1])
        for pat, note in _KNOWN:
            m = pat.search(body)
            if m:
                if note:
                    text = note.format(*m.groups()) + (f" ({m.group(3)})" if m.lastindex == 3 and m.group(3) else "")
                    ranks = self.notes.setdefault(text, [])
                    if int(m.group(1)) not in ranks:
                        ranks.append(int(m.group(1)))
                self.hidden += len(lines)
                return
        if rank is None:
            self._print_err(lines)
        else:
            self._blocks.setdefault(rank, ([], time.monotonic(), time.monotonic()))[0].extend(lines)

    # ---- grouping --------------------------------------------------------------------------
    def _elide_reports(self, lines: list[str]) -> list[str]:
        """A hang report already printed by this job: keep its headline, drop its indented body."""
        out: list[str] = []
        skipping = False
        for ln in lines:
            if skipping and ln.startswith("  "):
                continue
            skipping = False
            m = _REPORT.search(ln)
            if m is None:
                out.append(ln)
                continue
            head = ln[m.start():]
            if head not in self._reports:
                self._reports.add(head)
                out.append(ln)
                continue
            out.append(ln[:m.start()] + f"[hcomm-kit] DEADLOCK on communicator {m.group(1)} (report above)")
            skipping = True
        return out

    def _close_block(self, rank: int, now: float) -> None:
        lines = self._elide_reports(self._blocks.pop(rank)[0])
        while lines and not lines[-1].strip():
            lines.pop()
        if not lines:
            return
        key = normalize(lines, rank)
        g = self._groups.get(key)
        # Same block from another rank, not long after: one group. The same rank again (a log line
        # of every call) or much later: printed again.
        if g is not None and rank not in g.ranks and now - g.ready < _SAME_TIME:
            g.ranks.append(rank)
            if not g.shown:
                g.blocks[rank] = lines
                g.lines = merge_lines(g.blocks)  # what differs between the ranks, in place
            return
        if g is not None:
            self._note_late(g)
        g = self._groups[key] = _Group(lines, rank, now)
        self._pending.append(g)

    def _flush(self, force: bool) -> None:
        now = time.monotonic()
        for rank, (lines, first, last) in list(self._blocks.items()):
            pause, age = (_OPEN_PAUSE, _OPEN_PAUSE) if _open_traceback(lines) else (_PAUSE, _MAX_AGE)
            if force or now - last >= pause or now - first >= age:
                self._close_block(rank, now)
        keep = []
        for g in self._pending:
            if force or now - g.ready >= _GROUP:
                g.shown = len(g.ranks)
                self._print_group(g)
            else:
                keep.append(g)
        self._pending = keep

    def _note_late(self, g: _Group) -> None:
        """Ranks that printed a group's block after it was shown."""
        late = g.ranks[g.shown:]
        if g.shown and late:
            what = "line" if len(g.lines) == 1 else f"{len(g.lines)} lines"
            self._print_err([f"(the same {what} also came from rank{'s' if len(late) > 1 else ''} "
                             f"{format_ranks(late)})"])
            g.shown = len(g.ranks)

    def _print_group(self, g: _Group) -> None:
        self._causes += 1
        lines = list(g.lines)
        said = [ln.strip() for ln in lines if ln.strip()]
        if self.first_error is None and said:
            self.first_error = (list(g.ranks), said[-1])
        if self.tag_output:
            tag = f"[1,{format_ranks(g.ranks)}]<stderr>: "
            self._print_err([tag + ln for ln in lines])
            return
        if self.np > 1:
            who = f"[rank {g.ranks[0]}] " if len(g.ranks) == 1 else f"[ranks {format_ranks(g.ranks)}] "
            lines[0] = who + lines[0]
        self._print_err(lines)

    # ---- writing ---------------------------------------------------------------------------
    def _out_stream(self) -> TextIO:
        return self._out or sys.stdout

    def _err_stream(self) -> TextIO:
        return self._err or sys.stderr

    def _print_err(self, lines: list[str]) -> None:
        s = self._err_stream()
        for ln in lines:
            self._write(s, ln)

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        try:
            stream.write(text + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass
