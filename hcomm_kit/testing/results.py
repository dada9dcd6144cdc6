"""The results of the multi-rank jobs: each rank's report file (JSON lines written by the rank
side of the plugin), one outcome per item over all ranks, and the failure text shown by pytest
(each distinct error once with its ranks, the failing rank's log tail, what every rank was doing
when a timeout fired)."""

from __future__ import annotations

import json
import re
from pathlib import Path

_LOG_TAIL = 60


class _FailureRepr:
    """The report of a failed multi-rank item: its whole text in the FAILURES section, one line
    (what failed where, and the error) in the short summary, also on CI where pytest would
    otherwise repeat the whole text there."""

    def __init__(self, text: str, nodeid: str) -> None:
        self.text = text
        lines = text.splitlines()
        head = lines[0] if lines else ""
        head = head[len(nodeid):].strip() if head.startswith(nodeid) else head
        err = next((ln[1:].strip() for ln in lines if ln.startswith("E ")), "")
        msg = f"{head} {err}".strip()
        self.reprcrash = _Crash(msg if len(msg) <= 300 else msg[:297] + "...")

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


class _Crash:
    __slots__ = ("message", "path", "lineno")

    def __init__(self, message: str) -> None:
        self.message, self.path, self.lineno = message, "", 0


def _captured(report, limit: int = 40) -> str:
    """What the test printed (e.g. the kernel's logs on stderr), last ``limit`` lines per stream."""
    out = []
    for title, content in getattr(report, "sections", []):
        if title.startswith("Captured std") and content.strip():
            lines = content.rstrip().splitlines()
            cut = f" (last {limit} of {len(lines)} lines)" if len(lines) > limit else ""
            out.append(f"\n--- {title.lower()}{cut} ---\n" + "\n".join(lines[-limit:]))
    return "".join(out)


def _collect(batch, results, logdir: Path, np_: int, timeout: float, timed_out: bool, proc) -> None:
    per_rank = {r: _read_reports(logdir / f"rank{r}.jsonl") for r in range(np_)}
    current = None
    for it in batch:
        outcome, text = _combine(it.nodeid, per_rank)
        if outcome is None:
            if current is None and (timed_out or proc.returncode != 0):
                current = it
                results[it.nodeid] = ("failed", _failure_text(it, per_rank, logdir, np_, timeout, timed_out,
                                                             proc.returncode))
            break
        if outcome == "failed":
            # in a job killed by its timeout, a failed item is the one the kill stopped (any earlier
            # failure would have aborted the job): its report is what the ranks said as they stopped
            text = _failure_text(it, per_rank, logdir, np_, timeout, timed_out, proc.returncode, text)
        results[it.nodeid] = (outcome, text)
        if outcome == "failed":
            break


def _read_reports(path: Path) -> list[dict]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _finished_ids(logdir: Path, rank: int) -> set[str]:
    return {r["nodeid"] for r in _read_reports(logdir / f"rank{rank}.jsonl") if r["when"] == "teardown"}


def _combine(nodeid: str, per_rank: dict[int, list[dict]]):
    """(outcome, text) of one item over all ranks, or (None, '') if it did not finish everywhere.

    A failure's text shows each distinct error once, with the ranks that reported it
    (``ranks 0-3 (call):``); what differs between ranks (their number, handles) is ignored."""
    from hcomm_kit.jobs.output import format_ranks, normalize

    failed, skipped, complete = [], None, True
    for rank, recs in per_rank.items():
        mine = [r for r in recs if r["nodeid"] == nodeid]
        for r in mine:
            if r["outcome"] == "failed":
                failed.append((rank, r))
            elif r["outcome"] == "skipped" and skipped is None:
                skipped = r.get("text", "skipped on the ranks")
        if not any(r["when"] == "teardown" for r in mine):
            complete = False
    if failed:
        groups: dict[tuple, tuple[list[int], dict]] = {}
        for rank, r in failed:
            key = (r["when"], normalize(r.get("text", "").splitlines(), rank))
            groups.setdefault(key, ([], r))[0].append(rank)
        parts, shown = [], set()
        for (when, _), (ranks, r) in groups.items():
            who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_ranks(ranks)}"
            parts.append(f"{who} ({when}):\n{r.get('text', '')}{_new_lines(r.get('captured', ''), ranks[0], shown)}")
        return "failed", "\n".join(parts)
    if not complete:
        return None, ""
    if skipped is not None:
        return "skipped", skipped
    return "passed", ""


def _new_lines(captured: str, rank: int, shown: set) -> str:
    """``captured`` without the lines another rank's error already showed (the same kernel log
    printed by every rank is shown once, even when the ranks' errors differ); ``shown`` grows."""
    from hcomm_kit.jobs.output import normalize

    out = []
    for ln in captured.splitlines(keepends=True):
        key = normalize([ln.rstrip("\n")], rank)
        if ln.startswith("--- captured ") or key.strip() == "" or key not in shown:
            out.append(ln)
            shown.add(key)
    # a section whose every line was already shown: no header left alone
    text = "".join(out)
    return re.sub(r"\n--- captured [^\n]*---(?=\n--- captured |\s*$)", "", text)


def _tail(path: Path, n: int = _LOG_TAIL, *, quiet: bool = False) -> str:
    """The last ``n`` lines of a log (``quiet``: without Open MPI's banners and pytest's dots)."""
    try:
        lines = path.read_text(errors="replace").replace("\x00", "").splitlines()
    except FileNotFoundError:
        return "(no log)"
    if quiet:
        lines = _without_noise(lines)
    return "\n".join(lines[-n:])


def _without_noise(lines: list[str]) -> list[str]:
    """Drop Open MPI's banner blocks, its Epoll warnings and pytest's progress-only lines."""
    import re

    out, banner = [], False
    for ln in lines:
        if ln.strip() == "-" * 74:
            banner = not banner
            continue
        if banner or re.match(r"^\[warn\] Epoll ", ln) or re.fullmatch(r"[.FEsxX]*\s*(\[\s*\d+%\])?\s*", ln):
            continue
        out.append(ln)
    return out


def _hang_state(logdir: Path) -> str:
    """The job's record of what every rank was doing when its timeout fired, as a block ("" if none)."""
    state = logdir / "hang-state.txt"
    if not state.is_file():
        return ""
    return f"--- what every rank was doing when the timeout fired ---\n{state.read_text().rstrip()}\n"


def _failure_text(item, per_rank, logdir: Path, np_: int, timeout: float, timed_out: bool, rc,
                  reported: str = "") -> str:
    import re

    from hcomm_kit.jobs.output import format_ranks

    verbose = item.config.getoption("verbose", default=0) > 0
    from .items import _item_np

    total = _item_np(item) or np_
    here = "" if total == np_ else f" ({np_} on this host; the ranks named below are this host's, from 0)"
    head = f"{item.nodeid} on {total} ranks{here}: "
    if reported:
        m = re.match(r"ranks? (\d+)", reported)
        rank = int(m.group(1)) if m else 0
        log = _tail(logdir / f"rank{rank}.log", quiet=not verbose).split("[hcomm_kit.testing] rank")[0].rstrip()
        before = f"--- rank {rank} output before the failure (tail) ---\n{log}\n" if log else ""
        if timed_out:
            head += (f"timed out after {timeout:g} s (@pytest.mark.mpi(timeout=...)); killed the mpirun job; "
                     "as it was stopped: ")
            before += _hang_state(logdir)
        return f"{head}failed on {reported}\n{before}(full logs of every rank: {logdir})"
    stopped = logdir / "stopped.txt"
    if timed_out:
        why = f"timed out after {timeout:g} s (@pytest.mark.mpi(timeout=...)); killed the mpirun job"
    elif stopped.is_file():
        why = f"stopped this host's part of the job: {stopped.read_text().strip()}"
    else:
        why = f"the mpirun job exited with status {rc} before the test finished (a rank crashed or aborted)"
    parts = [head + why]
    state = _hang_state(logdir) if timed_out else ""
    if state:
        parts.append(state.rstrip("\n"))
    tails: dict[str, list[int]] = {}
    for r in range(np_):
        tails.setdefault(_tail(logdir / f"rank{r}.log", 25, quiet=not verbose), []).append(r)
    for text, ranks in tails.items():
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_ranks(ranks)} (the same)"
        parts.append(f"--- {who} log (tail) ---\n{text}")
    mpirun = _tail(logdir / "mpirun.log", 15, quiet=not verbose)
    if mpirun.strip():
        parts.append(f"--- mpirun ---\n{mpirun}")
    parts.append(f"(full logs of every rank: {logdir}{'' if verbose else '; -v shows Open MPI messages'})")
    return "\n".join(parts)
