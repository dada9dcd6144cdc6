"""Run operators on every rank and check them against numpy (``hcomm-kit run`` / ``demo``).

Executed on each rank (under mpirun); rank 0 prints one table row per operator.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError
from ..ops import reference

__all__ = ["resolve_op", "reference_kind", "make_input", "run_ops", "format_table"]


def resolve_op(name: str) -> Path:
    """An operator directory, or the name of a built-in operator in ``aicpu_kernels/``."""
    p = Path(name)
    if (p / "op.toml").is_file() or (p.name == "op.toml" and p.is_file()):
        return p.parent if p.name == "op.toml" else p
    from ..base.resources import aicpu_kernels_dir

    cand = aicpu_kernels_dir() / name
    if not name.startswith("_") and (cand / "op.toml").is_file():
        return cand
    raise ConfigError(f"{name!r} is neither an operator directory (with op.toml) nor a built-in operator "
                      f"(aicpu_kernels/<name>); create one with `hcomm-kit new {Path(name).name} --pattern ...`",
                      key="OP")


def reference_kind(spec) -> str:
    """Which numpy reference fits the operator: allreduce/allgather/reduce_scatter/shift/copy/none."""
    if spec.pattern == "p2p":
        return "shift"
    if spec.pattern == "empty":
        return "copy"
    if spec.output == "count*ranks":
        return "allgather"
    if spec.is_reduction and spec.output == "count":
        return "allreduce"
    if spec.is_reduction and spec.output == "count/ranks":
        return "reduce_scatter"
    return "none"


def make_input(rank: int, count: int, dtype: str) -> np.ndarray:
    """Deterministic input of ``rank`` (small integers: reductions are exact in every dtype)."""
    dt = _dtypes.get_dtype(dtype)
    rng = np.random.default_rng(1000003 * rank + count)
    vals = rng.integers(-4, 5, count) if not np.issubdtype(dt.numpy, np.unsignedinteger) or dt.name == "bf16" \
        else rng.integers(0, 8, count)
    if dt.name == "bf16":
        return _dtypes.float32_to_bf16_bits(vals.astype(np.float32))
    return vals.astype(dt.numpy)


def _expected(kind: str, rank: int, size: int, count: int, dtype: str, reduce_op: str):
    ins = [make_input(r, count, dtype) for r in range(size)]
    if kind == "allreduce":
        return reference.allreduce(ins, reduce_op, dtype)[rank]
    if kind == "allgather":
        return reference.allgather(ins)[rank]
    if kind == "reduce_scatter":
        return reference.reduce_scatter(ins, reduce_op, dtype)[rank]
    if kind == "shift":
        return ins[(rank - 1) % size]
    if kind == "copy":
        return ins[rank]
    return None


def _max_error(out: np.ndarray, exp: np.ndarray | None, dtype: str) -> float:
    """Largest absolute difference of ``out`` from ``exp``; NaN when there is no reference.

    A shape mismatch, or a NaN/inf where the reference has none (an unwritten or garbage output),
    is ``inf``: never NaN, which would compare unequal to itself and hide the mismatch.
    """
    if exp is None:
        return float("nan")
    if exp.shape != out.shape:
        return float("inf")
    got, want = reference.to_float(out, dtype), reference.to_float(exp, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - want)
    if diff.size and not np.isfinite(diff).all():
        return float("inf")
    return float(np.max(diff, initial=0.0))


def run_ops(comm, jobs: list[dict[str, Any]], iters: int = 20) -> list[dict[str, Any]]:
    """Run each job ``{op, count, dtype, reduce_op, root}`` on this rank; return rows (all ranks agree)."""
    rows = []
    for job in jobs:
        op = comm.load_op(job["op"])
        spec = op.spec
        dtype = job.get("dtype") or ("fp32" if "fp32" in spec.dtypes else spec.dtypes[0])
        rop = job.get("reduce_op") or (spec.reduce_ops[0] if spec.is_reduction and "sum" not in spec.reduce_ops
                                       else "sum" if spec.is_reduction else None)
        count = int(job.get("count") or 4096)
        root = job.get("root")
        kind = reference_kind(spec)
        x = make_input(comm.rank, count, dtype)
        out = op(x, dtype=dtype, reduce_op=rop, root=root)
        exp = _expected(kind, comm.rank, comm.size, count, dtype, rop or "sum")
        err = _max_error(out, exp, dtype)
        dt_us: float | None = None
        if iters > 0:
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                op(x, dtype=dtype, reduce_op=rop, root=root)
            dt_us = (time.perf_counter() - t0) / iters * 1e6
        if comm.mpi_comm is not None:
            from mpi4py import MPI

            # Every rank joins (the kind, hence "no reference", is the same on all ranks; a wrong output
            # is +inf, never NaN, so no rank skips a collective its peers are waiting in).
            if exp is not None:
                err = comm.mpi_comm.allreduce(err, op=MPI.MAX)
            if dt_us is not None:
                dt_us = comm.mpi_comm.allreduce(dt_us, op=MPI.MAX)
        rows.append({"op": spec.name, "pattern": spec.pattern, "handshake": spec.handshake, "ranks": comm.size,
                     "dtype": dtype, "reduce_op": rop or "-", "count": count, "reference": kind,
                     "max_error": err if math.isfinite(err) else (None if err != err else "inf"),
                     "us_per_call": dt_us, "iters": iters, "ok": (err == 0.0) if kind != "none" else None})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`run_ops` as a text table (time/call "-" when nothing was timed)."""
    head = ("operator", "pattern", "handshake", "ranks", "dtype", "op", "count", "max error", "time/call", "check")
    lines = []
    for r in rows:
        check = {True: "OK", False: "MISMATCH", None: "(no reference)"}[r["ok"]]
        e = r["max_error"]
        err = "-" if e is None else e if isinstance(e, str) else f"{e:g}"
        us = "-" if r["us_per_call"] is None else f"{r['us_per_call']:.0f} us"
        lines.append((r["op"], r["pattern"], r["handshake"], str(r["ranks"]), r["dtype"], r["reduce_op"],
                      str(r["count"]), err, us, check))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*l) for l in lines]
    return "\n".join(out)
