"""Reading ``HCOMM_KIT_TRACE`` files (Chrome / Perfetto JSON written by the emulator).

The trace has one "process" per rank and one track per device thread ("thread t0"), stream thread
("stream thread s3"), stream ("stream 3 (kernels)") and the host; task slices carry the category
``copy``, ``reduce``, ``notify`` (records) or ``wait``, and flow arrows (``s``/``f`` events with
one id) lead from each notify record to the wait that consumed it. Open it in https://ui.perfetto.dev
or chrome://tracing; :func:`summary` gives busy / wait time per track.

Example::

    rows = summary(load("trace.json"))
    print(format_summary(rows))
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import ConfigError

__all__ = ["TrackStats", "load", "summary", "format_summary"]


@dataclass
class TrackStats:
    """Time of one track (microseconds): ``busy`` in copy/reduce/record/kernel slices, ``wait`` in waits."""

    rank: int
    track: str
    tasks: int = 0
    busy_us: float = 0.0
    wait_us: float = 0.0
    first_us: float | None = None
    last_us: float = 0.0

    @property
    def span_us(self) -> float:
        return 0.0 if self.first_us is None else self.last_us - self.first_us


def load(path: "str | os.PathLike[str]") -> list[dict]:
    """The ``traceEvents`` of a trace file.

    Raises:
        ConfigError: the file is missing or is not a Chrome trace.
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"trace file {p} does not exist (set HCOMM_KIT_TRACE={p} for the job that writes it)",
                          key="FILE") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{p} is not a readable JSON trace: {exc}", key="FILE") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise ConfigError(f"{p} has no traceEvents list (not a Chrome/Perfetto JSON trace)", key="FILE")
    return events


def summary(events: list[dict]) -> list[TrackStats]:
    """Busy and wait time per (rank, track), ordered by rank and track name."""
    names: dict[tuple[int, int], str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e.get("args", {}).get("name", str(e["tid"]))
    stats: dict[tuple[int, int], TrackStats] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        key = (e["pid"], e["tid"])
        st = stats.get(key)
        if st is None:
            st = stats[key] = TrackStats(rank=e["pid"], track=names.get(key, f"track {e['tid']}"))
        dur = float(e.get("dur", 0.0))
        ts = float(e["ts"])
        st.tasks += 1
        if "wait" in str(e.get("cat", "")).split(","):
            st.wait_us += dur
        else:
            st.busy_us += dur
        st.first_us = ts if st.first_us is None else min(st.first_us, ts)
        st.last_us = max(st.last_us, ts + dur)
    return sorted(stats.values(), key=lambda s: (s.rank, s.track))


def format_summary(rows: list[TrackStats]) -> str:
    """A table: rank, track, tasks, busy, wait, span (microseconds) and busy share of the span."""
    head = f"{'rank':>4}  {'track':<26} {'tasks':>7} {'busy(us)':>11} {'wait(us)':>11} {'span(us)':>11} {'busy%':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        share = 100.0 * r.busy_us / r.span_us if r.span_us > 0 else 0.0
        lines.append(f"{r.rank:>4}  {r.track:<26} {r.tasks:>7} {r.busy_us:>11.1f} {r.wait_us:>11.1f} "
                     f"{r.span_us:>11.1f} {share:>5.1f}%")
    return "\n".join(lines)
