"""``hcomm-kit bench --latency``: the small-message latency table in one command.

For 2, 4 and 8 ranks, one job each (repeated ``--runs`` times), every rank measures the fp32 sum
allreduce of 8 B, 512 B and 32 KiB (and 64 MiB on 2 ranks) three ways in the same job:

* hcomm-kit, as ``hcomm-kit bench`` does (hccl_test's method: calls enqueued back to back on the
  stream, device events around them; the notify checker on for two untimed calls, then off);
* Open MPI through mpi4py (blocking ``Allreduce`` from Python, as ``--compare mpi``);
* gloo through ``torch.distributed`` (blocking ``all_reduce``), when torch is installed;

and the 2-rank job also times a blocking 8-byte allreduce from Python (the loop of
``scripts/bench_small_allreduce.py``: launch + synchronize, ``all_reduce`` on device buffers and on
a numpy array, with the emulator's defaults, the notify checker on) against mpi4py's, and a 64 MiB
memcpy (the memory bound of a 2-rank allreduce: each rank reads two inputs and writes one output,
three passes where a copy makes two, so at most 2/3 of the copy's bandwidth).

The launcher prints one table: per row the value of every run and the ratio (theirs / ours: > 1
means hcomm-kit is faster), and the machine's load average (a loaded machine slows both sides,
unevenly). Times are CPU timings of this host (the emulator), not Ascend figures.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, TextIO

import numpy as np

from ..base import dtypes as _dtypes
from .baseline import time_mpi
from .cases import COLLECTIVES, _Case
from .timing import _checked_calls, _checker_switch, _max_over_ranks, _time_ours

__all__ = ["RANKS", "sizes_for", "measure", "run_table", "format_table"]

RANKS = (2, 4, 8)
SMALL = (8, 512, 32 << 10)
BIG = 64 << 20


def sizes_for(nranks: int) -> tuple[int, ...]:
    """The message sizes measured on ``nranks`` ranks (64 MiB on 2 ranks only)."""
    return SMALL + ((BIG,) if nranks == 2 else ())


def _iters(nbytes: int, nranks: int) -> tuple[int, int]:
    """(timed calls, warm-ups) for a size: 5000 small calls on 2 ranks (the issue's figure)."""
    if nbytes >= 1 << 20:
        return 10, 2
    return (5000, 300) if nranks <= 2 else (2000, 100)


def _barrier(comm) -> None:
    if comm.mpi_comm is not None and comm.size > 1:
        comm.mpi_comm.Barrier()


# ---- rank side ----------------------------------------------------------------------------------
class _Gloo:
    """gloo through torch.distributed beside the communicator (None-like when torch is missing)."""

    def __init__(self, comm, store_file: str) -> None:
        self.dist = None
        try:
            import torch
            import torch.distributed as dist
        except Exception:  # noqa: BLE001 - torch is optional
            return
        torch.set_num_threads(1)  # the ranks share the machine's CPUs already
        dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=comm.rank, world_size=comm.size)
        self.dist, self.torch = dist, torch

    def time(self, comm, x: np.ndarray, iters: int, warmup: int) -> float | None:
        if self.dist is None:
            return None
        t = self.torch.from_numpy(x.copy())
        self.dist.barrier()
        for _ in range(warmup):
            self.dist.all_reduce(t)
        t0 = time.perf_counter()
        for _ in range(iters):
            self.dist.all_reduce(t)
        return _max_over_ranks(comm, (time.perf_counter() - t0) * 1e6 / iters)

    def close(self) -> None:
        if self.dist is not None:
            self.dist.destroy_process_group()


def _loop_us(comm, fn: Callable[[], Any], iters: int) -> float:
    _barrier(comm)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return _max_over_ranks(comm, (time.perf_counter() - t0) * 1e6 / iters)


def _python_loop(comm, iters: int, set_check) -> dict[str, float]:
    """A blocking 8-byte allreduce from Python, per call (max over ranks), median of 3 interleaved
    rounds: the three ways of bench_small_allreduce.py (notify checker on: the default), one with
    the checker off, and mpi4py's Allreduce."""
    x = np.full(2, 1.0 + comm.rank, dtype=np.float32)
    y = np.empty_like(x)
    d, o = comm.to_device(x), comm.empty(2, "fp32")
    op = comm.builtin_op("allreduce")

    def launch_sync() -> None:
        op.launch(d.ptr, o.ptr, 2, "fp32", algo=0)
        op.synchronize()

    ways: dict[str, tuple[Callable[[], Any], int]] = {
        "launch+sync": (launch_sync, 1), "all_reduce(device)": (lambda: comm.all_reduce(d, out=o), 1),
        "all_reduce(numpy)": (lambda: comm.all_reduce(x), 1),
        "all_reduce(device), checker off": (lambda: comm.all_reduce(d, out=o), 0)}
    if comm.mpi_comm is not None:
        mc = comm.mpi_comm
        ways["mpi4py Allreduce"] = (lambda: mc.Allreduce(x, y), 1)
    samples: dict[str, list[float]] = {k: [] for k in ways}
    try:
        for _ in range(3):
            for name, (fn, check) in ways.items():
                if set_check is not None:
                    set_check(check)
                for _ in range(200):
                    fn()
                samples[name].append(_loop_us(comm, fn, iters))
    finally:
        if set_check is not None:
            set_check(0)
    expect = float(sum(range(1, comm.size + 1)))
    if not (o.numpy() == expect).all():
        raise AssertionError(f"rank {comm.rank}: the blocking loop's allreduce gave {o.numpy()}, not {expect}")
    d.close()
    o.close()
    return {k: statistics.median(v) for k, v in samples.items()}


def _memcpy_gbps(nbytes: int) -> float:
    """Single-thread copy bandwidth of this host (best of 5 copies of nbytes), GB/s."""
    a = np.ones(nbytes // 8, dtype=np.float64)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9


def measure(comm, *, gloo_store: str | None = None, python_iters: int = 3000) -> dict[str, Any]:
    """Every rank of one job: the rows of this rank count (see the module docstring); rank 0's
    result is the job's (every value is the maximum over the ranks already)."""
    dt = _dtypes.get_dtype("fp32")
    coll = COLLECTIVES["allreduce"]
    set_check = _checker_switch(comm)
    if set_check is not None:
        set_check(0)
    out: dict[str, Any] = {"ranks": comm.size}
    # gloo comes last: torch's own threads (its thread pool, gloo's) may keep spinning for a while
    # after its calls and would slow whatever is measured after them.
    if comm.size == 2:
        out["python"] = _python_loop(comm, python_iters, set_check)
    rows = []
    for nbytes in sizes_for(comm.size):
        iters, warmup = _iters(nbytes, comm.size)
        case = _Case(comm, coll, nbytes, dt, "sum", 0, "rand", False, None)
        try:
            if set_check is not None:
                _checked_calls(case, set_check)  # a finding raises: nothing is timed on a broken call
            ours = _time_ours(case, iters, warmup)
            mpi = time_mpi(case, iters, warmup)
            wrong, _, _ = case.check()
            if comm.mpi_comm is not None and comm.size > 1:
                wrong = int(comm.mpi_comm.allreduce(wrong))
        finally:
            case.close()
        row = {"ranks": comm.size, "size": case.data_size, "iters": iters, "ours_us": ours, "mpi_us": mpi,
               "gloo_us": None, "wrong": wrong}
        if nbytes >= 1 << 20:
            _barrier(comm)
            bw = _memcpy_gbps(nbytes) if comm.rank == 0 else 0.0
            if comm.mpi_comm is not None:
                bw = comm.mpi_comm.bcast(bw, root=0)
            row["memcpy_gbps"] = bw
        rows.append(row)
    out["rows"] = rows
    gloo = _Gloo(comm, gloo_store) if gloo_store else None
    if gloo is not None:
        try:
            for row in rows:
                iters, warmup = _iters(row["size"], comm.size)
                x = np.ones(row["size"] // dt.itemsize, dtype=dt.numpy)
                row["gloo_us"] = gloo.time(comm, x, iters, warmup)
        finally:
            gloo.close()
    return out


# ---- launcher side ------------------------------------------------------------------------------
def run_table(runs: int = 3, ranks: tuple[int, ...] = RANKS, *, timeout: float = 1800, verbose: bool = False,
              out: TextIO | None = None, json_path: str | None = None) -> int:
    """Start one job per rank count and run (``python -m hcomm_kit bench --latency --np N``), then
    print the table; returns 0, or the first failed job's status."""
    from ..jobs.launch import launch

    out = out if out is not None else sys.stdout
    results: dict[int, list[dict]] = {n: [] for n in ranks}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="hcomm_kit_latency_") as tmp:
        for run in range(runs):
            for n in ranks:
                path = Path(tmp) / f"np{n}_run{run}.json"
                argv = [sys.executable, "-m", "hcomm_kit", "bench", "--latency", "--np", str(n), "--json", str(path)]
                print(f"# run {run + 1}/{runs}: {n} ranks ...", file=sys.stderr, flush=True)
                rc = launch(argv, n, timeout=timeout, tag_output=False, verbose=verbose)
                if rc != 0:
                    print(f"# the {n}-rank job of run {run + 1} failed (exit status {rc})", file=out, flush=True)
                    return rc
                results[n].append(json.loads(path.read_text()))
    load1 = os.getloadavg()[0]
    print(format_table(results, runs, (load0, load1)), file=out, flush=True)
    if json_path:
        Path(json_path).write_text(json.dumps({"runs": runs, "load": [load0, load1],
                                               "results": {str(k): v for k, v in results.items()}}, indent=1))
    return 0


def _size_text(n: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def _cell(values: list[float | None], fmt: str) -> str:
    return " / ".join("-" if v is None else format(v, fmt) for v in values)


def _ratios(theirs: list[float | None], ours: list[float | None]) -> list[float | None]:
    return [t / o if t and o else None for t, o in zip(theirs, ours)]


def format_table(results: dict[int, list[dict]], runs: int, load: tuple[float, float]) -> str:
    """The table of :func:`run_table` (markdown; one value per run in each cell)."""
    cpus = os.cpu_count() or 1
    lines = [f"# hcomm-kit bench --latency: allreduce fp32 sum, {runs} run(s) (values per run, ' / ' between "
             f"runs); hcomm-kit = hccl_test method (calls enqueued back to back, device events), Open MPI "
             f"(mpi4py) and gloo (torch) = blocking calls from Python, each the max over ranks; vs X = X's time "
             f"/ ours (> 1: hcomm-kit faster)",
             f"# machine: {cpus} CPUs, 1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the end"
             + (" (LOADED: other processes competed for the CPUs)" if max(load) > 0.5 * cpus else ""),
             "# EMULATOR: CPU timings of this host, not Ascend hardware figures",
             "",
             "| ranks | size | hcomm-kit (us) | Open MPI (us) | vs MPI | gloo (us) | vs gloo |",
             "|---|---|---|---|---|---|---|"]
    big_lines = []
    for n, res in results.items():
        if not res:
            continue
        for i, row in enumerate(res[0]["rows"]):
            per = [r["rows"][i] for r in res]
            ours = [p["ours_us"] for p in per]
            mpi = [p["mpi_us"] for p in per]
            gl = [p["gloo_us"] for p in per]
            size = row["size"]
            if size >= 1 << 20:
                ours_ms, mpi_ms = [o / 1e3 for o in ours], [m / 1e3 if m else None for m in mpi]
                gl_ms = [g / 1e3 if g else None for g in gl]
                lines.append(f"| {n} | {_size_text(size)} (ms) | {_cell(ours_ms, '.2f')} | {_cell(mpi_ms, '.2f')} | "
                             f"{_cell(_ratios(mpi, ours), '.2f')} | {_cell(gl_ms, '.2f')} | "
                             f"{_cell(_ratios(gl, ours), '.2f')} |")
                algbw = [size / (o * 1e-6) / 1e9 for o in ours]
                bound = [p.get("memcpy_gbps", 0.0) * 2 / 3 for p in per]
                big_lines.append(f"* {n} ranks, {_size_text(size)}: hcomm-kit algbw {_cell(algbw, '.2f')} GB/s; memory "
                                 f"bound (2/3 of a {_size_text(size)} memcpy's {_cell([b * 1.5 for b in bound], '.2f')} "
                                 f"GB/s) {_cell(bound, '.2f')} GB/s; reached "
                                 f"{_cell([100 * a / b if b else None for a, b in zip(algbw, bound)], '.0f')} %")
            else:
                lines.append(f"| {n} | {_size_text(size)} | {_cell(ours, '.2f')} | {_cell(mpi, '.2f')} | "
                             f"{_cell(_ratios(mpi, ours), '.2f')} | {_cell(gl, '.2f')} | "
                             f"{_cell(_ratios(gl, ours), '.2f')} |")
            bad = sum(p["wrong"] for p in per)
            if bad:
                lines.append(f"|   | ^ {bad} WRONG elements in the checked calls | | | | | |")
    lines += [""] + big_lines
    py = [r.get("python") for r in results.get(2, []) if r.get("python")]
    if py:
        ref = [p.get("mpi4py Allreduce") for p in py]
        lines += ["", "| blocking 8-byte allreduce from Python, 2 ranks (us per call) | per run | vs mpi4py |",
                  "|---|---|---|"]
        for name in py[0]:
            vals = [p[name] for p in py]
            ratio = "" if name.startswith("mpi4py") else _cell([v / r if r else None for v, r in zip(vals, ref)],
                                                               ".1f") + " x"
            lines.append(f"| {name} | {_cell(vals, '.2f')} | {ratio} |")
    return "\n".join(lines)
