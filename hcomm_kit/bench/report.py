"""The output of ``hcomm-kit bench``: the table (hccl_test's columns first, then the baselines'),
the JSON lines file and the plot."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from ..base import envs
from ..base.errors import ConfigError
from .cases import Collective, OpTarget
from .timing import CHECKED_CALLS

__all__ = ["format_header", "format_row", "write_json", "plot_title", "plot"]


class _CurrentStdout:
    """Writes to whatever ``sys.stdout`` is at the time (a progress bar redirects it to print above)."""

    @staticmethod
    def write(text: str) -> int:
        return sys.stdout.write(text)

    @staticmethod
    def flush() -> None:
        sys.stdout.flush()


def _backend(comm) -> str:
    return comm.rt.backend


_COLS = ("data_size(Bytes)", "aveg_time(us)", "alg_bandwidth(GB/s)", "bus_bandwidth(GB/s)", "check_result", "#wrong",
         "model_time(us)", "model_algbw(GB/s)", "model_busbw(GB/s)")


def _compares(compare: "tuple[str, ...] | list[str] | str | None") -> tuple[str, ...]:
    if not compare:
        return ()
    return (compare,) if isinstance(compare, str) else tuple(compare)


def format_header(comm, coll: Collective, dtype: str, op: str | None, root: int | None, iters: int, warmup: int,
                  inplace: bool, algorithm: str | None, compare: "tuple[str, ...] | str | None" = (),
                  blocking: bool = False, *, target: OpTarget | None = None, checked_first: bool = False,
                  builtin_algorithm: str | None = None) -> str:
    """The header: what ran where, and the column names (hccl_test's first)."""
    backend = _backend(comm)
    compare = _compares(compare)
    subject = f"operator {coll.name} ({target.opdir})" if target else coll.name
    what = (f"# hcomm-kit bench {subject}: {comm.size} ranks, dtype {dtype}"
            + (f", op {op}" if op else "") + (f", root {root}" if root is not None else "")
            + (f", algorithm {algorithm}" if target and algorithm else "" if target
               else f", algorithm {algorithm or 'auto'}")
            + f", {'in-place' if inplace else 'out-of-place'}"
            + (", one call, checked, not timed (--iters 0)" if not iters else
               f", {iters} iterations after {warmup} warm-ups"
               + (", each call waited for (--blocking)" if blocking else ", calls enqueued back to back (hccl_test)")))
    lines = [what,
             f"# backend {backend}, soc {comm.soc}"
             + (" -- EMULATOR: CPU timings of the emulator on this host, not Ascend hardware figures; notify "
                + (f"checker on for {CHECKED_CALLS} untimed calls per size, off while timing" if checked_first else
                   f"checker {'off' if envs.check_mode() == '0' else 'ON (HCOMM_KIT_CHECK): slower'}")
                if backend == "emu" else "")]
    if target is not None:
        ref = target.spec.reference or target.spec.kind_info.reference
        checked = (f"the numpy reference {ref}" + (" on the root" if target.spec.kind_info.checked == "root" else "")
                   if ref else "nothing (no numpy reference: set op.toml reference)")
        lines.append(f"# {target.note}; checked against {checked}"
                     + (f"; compared with the built-in {'all_to_all_v (ring shift)' if target.builtin == 'shift' else target.builtin}"
                        f" (algorithm {builtin_algorithm or 'auto'})" if "builtin" in compare and target.builtin else ""))
    lines.append("# data_size = bytes taking part per rank (hccl_test); algbw = S/time, busbw = algbw x factor "
                 "(nccl-tests, GB = 1e9 bytes); time = mean per call, max over ranks (device events)"
                 + ("; selected = the algorithm that ran (CANN's name: what HCCL's selector picks for the AICPU "
                    "engine unless --algorithm or HCCL_ALGO says otherwise)" if target is None or "builtin" in compare
                    else ""))
    if backend == "emu":
        topo = comm.topology
        shape = f"{len(topo.servers)} server(s) x {len(topo.servers[0]) if topo.servers else 0}"
        down = f", links down {', '.join(f'{a}-{b}' for a, b in topo.links_down)}" if topo.links_down else ""
        lines.append(f"# model_* = predicted Ascend time of the last timed call: the tasks it issued on every "
                     f"rank taking part, simulated on the {topo.product} parameters ({shape}{down}; see "
                     f"`hcomm-kit docs predicted-time`), not this host's timing")
    cols = list(_COLS)
    if "builtin" in compare:
        cols += ["builtin_time(us)", "builtin_busbw(GB/s)", "vs_builtin", "builtin_model(us)", "vs_builtin_model",
                 "builtin_formula(us)"]
    if "mpi" in compare:
        cols += ["mpi_time(us)", "mpi_busbw(GB/s)", "vs_mpi"]
    if target is None:
        cols.append("selected")
    elif "builtin" in compare:
        cols.append("builtin_selected")
    if compare:
        lines.append("# vs_X = X's time / ours (> 1: ours is faster)"
                     + ("; builtin_model = the built-in's modelled time (* with every link up: it cannot run here), "
                        "vs_builtin_model = builtin_model / model_time; builtin_formula = HCCL's published formula "
                        "for the algorithm it ran (model_formulas: Mesh.md / Ring.md / NHR.md on the model's link "
                        "figures)" if "builtin" in compare else ""))
    lines.append(" | ".join(cols))
    return "\n".join(lines)


def _short_why(reason: str) -> str:
    """The table's few words for why the built-in cannot run (the row's builtin_why has it all)."""
    links = re.findall(r"link (\d+-\d+)", reason)
    return f"cannot run: {links[0]} down" if links else "cannot run here"


def _cell(v: float | None, width: int, fmt: str, none: str = "N/A") -> str:
    """v formatted; ``none`` when there is no value (N/A: no such figure, -: not timed), NULL for NaN."""
    return f"{v:>{width}{fmt}}" if v is not None and v == v else f"{none if v is None else 'NULL':>{width}s}"


def format_row(row: dict[str, Any], compare: "tuple[str, ...] | str | None" = ()) -> str:
    """One table row in the header's column order."""
    compare = _compares(compare)
    wrong = "NULL" if row["wrong"] is None else str(row["wrong"])
    untimed = "-" if row["time_us"] is None else "N/A"  # `run --iters 0`: checked, not timed
    cells = [f"{row['size']:>16d}", _cell(row["time_us"], 13, ".2f", "-"), _cell(row["algbw"], 19, ".4f", untimed),
             _cell(row["busbw"], 19, ".4f", untimed), f"{row['check']:>12s}", f"{wrong:>6s}",
             _cell(row.get("model_time_us"), 14, ".2f"), _cell(row.get("model_algbw"), 17, ".4f"),
             _cell(row.get("model_busbw"), 17, ".4f")]
    for c, w1, w2 in (("builtin", 16, 19), ("mpi", 12, 15)):
        if c in compare:
            t, b, v = row.get(f"{c}_time_us"), row.get(f"{c}_busbw"), row.get(f"vs_{c}")
            w3 = max(6, len("vs_" + c))
            # N/A: there is no counterpart (or no bandwidth convention); NULL: it could not be measured.
            none = "N/A" if (c == "builtin" and not row.get("builtin")) or row.get("reference") == "copy" else "NULL"
            why = row.get("builtin_why") if c == "builtin" else None
            cells += [f"{t:>{w1}.2f}" if t else f"{_short_why(why) if why else none:>{w1}s}",
                      f"{b:>{w2}.4f}" if b else f"{none if row['busbw'] is not None else 'N/A':>{w2}s}",
                      f"{v:>{w3}.2f}" if v else f"{none:>{w3}s}"]
            if c == "builtin":
                m = row.get("builtin_model_time_us")
                star = "*" if row.get("builtin_links_up") else ""
                cells += [f"{f'{m:.2f}{star}':>17s}" if m else f"{'N/A':>17s}",
                          _cell(row.get("vs_builtin_model"), 16, ".2f"), _cell(row.get("builtin_formula_us"), 19, ".2f")]
    # the algorithm that ran (CANN's name): a built-in's, or the compared built-in's
    if row.get("operator") is None:
        cells.append(str(row.get("selected") or "N/A"))
    elif "builtin" in compare:
        cells.append(str(row.get("builtin_selected") or "N/A"))
    return " | ".join(cells)


def write_json(rows: list[dict[str, Any]], path: str) -> None:
    """One JSON object per line."""
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def plot_title(rows: list[dict[str, Any]]) -> str:
    """What was measured, for the figure: collective, ranks, dtype, op, backend."""
    if not rows:
        return "hcomm-kit bench (no rows)"
    r = rows[0]
    what = f"{'operator ' if r.get('operator') else ''}{r.get('collective', '?')}: {r.get('ranks', '?')} ranks"
    for key, fmt in (("dtype", "{}"), ("op", "{}"), ("root", "root {}")):
        if r.get(key) is not None:
            what += ", " + fmt.format(r[key])
    where = f"{r.get('backend', '')} {r.get('soc', '')}".strip()
    if r.get("backend") == "emu":
        where += " (emulator CPU timings)"
    return f"hcomm-kit bench {what} -- {where}"


def plot(rows: list[dict[str, Any]], path: str) -> None:
    """busbw and time against size, one line per series (ours, the built-in and MPI when measured)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'hcomm-kit[plot]' (or pip install matplotlib)",
                          key="--plot") from None

    def ys(key: str) -> list[float]:
        return [math.nan if r.get(key) is None else r[key] for r in rows]

    xs = [max(r["size"], 1) for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.3))
    label = f"{rows[0]['collective']} (hcomm-kit, {rows[0]['backend']})" if rows else "hcomm-kit"
    ax1.plot(xs, ys("busbw"), marker="o", label=label)
    ax2.plot(xs, ys("time_us"), marker="o", label=label)
    if rows and any(r.get("model_time_us") for r in rows):
        mlabel = f"{rows[0]['collective']} (model: predicted Ascend {rows[0].get('model_product') or ''})"
        ax1.plot(xs, ys("model_busbw"), marker="D", linestyle="--", label=mlabel)
        ax2.plot(xs, ys("model_time_us"), marker="D", linestyle="--", label=mlabel)
    series = (("builtin", f"built-in {rows[0].get('builtin')}" if rows else "built-in", "^"),
              ("mpi", "Open MPI (mpi4py)", "s"))
    for key, name, marker in series:
        if rows and f"{key}_time_us" in rows[0]:
            ax1.plot(xs, ys(f"{key}_busbw"), marker=marker, label=name)
            ax2.plot(xs, ys(f"{key}_time_us"), marker=marker, label=name)
    if rows and rows[0].get("busbw") is None:
        ax1.text(0.5, 0.5, "no bandwidth convention:\ntime only (--busbw-factor)", ha="center", va="center",
                 transform=ax1.transAxes)
    for ax, yl in ((ax1, "bus bandwidth (GB/s)"), (ax2, "time per call (us)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("data size per rank (bytes)")
        ax.set_ylabel(yl)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    ax2.set_yscale("log")
    fig.suptitle(plot_title(rows), fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
