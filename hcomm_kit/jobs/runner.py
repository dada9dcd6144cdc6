"""Run operators on every rank and check them against numpy (``hcomm-kit run`` / ``demo``).

Executed on each rank (under mpirun); rank 0 prints one table row per operator.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import CheckError, ConfigError
from ..core import world
from ..ops import reference

__all__ = ["resolve_op", "make_input", "job_arguments", "run_ops", "format_table", "POISON_BYTE"]


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


def make_input(rank: int, count: int, dtype: str) -> np.ndarray:
    """Deterministic input of ``rank`` (small integers: reductions are exact in every dtype)."""
    dt = _dtypes.get_dtype(dtype)
    rng = np.random.default_rng(1000003 * rank + count)
    vals = rng.integers(-4, 5, count) if not np.issubdtype(dt.numpy, np.unsignedinteger) or dt.name == "bf16" \
        else rng.integers(0, 8, count)
    if dt.name == "bf16":
        return _dtypes.float32_to_bf16_bits(vals.astype(np.float32))
    return vals.astype(dt.numpy)


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


#: Byte that fills an output before the checked call: a kernel that leaves (part of) it unwritten
#: (a stale output, a wrong slice) is caught, never passed by leftovers of an earlier call.
POISON_BYTE = 0x5A


def job_arguments(spec, rank: int, size: int, job: dict[str, Any]) -> dict[str, Any]:
    """What one row of ``run`` calls: dtype, reduce op and root by the kind's rules, the count
    (``OpParam.count``, HCCL's: the input holds ``count * ranks`` for the kinds that cut it in one
    block per rank), the input's size, the call's keywords and the reference's view of them."""
    from ..ops.expect import call_arguments

    dtype = job.get("dtype") or ("fp32" if "fp32" in spec.dtypes else spec.dtypes[0])
    rop = spec.default_reduce_op(job.get("reduce_op"))
    root = job.get("root")
    if root is not None and not (spec.rooted or spec.kind == "custom" or spec.topology == "peer"):
        raise ConfigError(f"-r {root}: operator {spec.name} is a {spec.kind} (op.toml [op].kind), which takes no "
                          "root", key="-r", path=spec.path("op.toml") if spec.opdir else None)
    if root is None and spec.rooted:
        root = 0
    count = int(job.get("count") or 4096)
    call, ref = call_arguments(spec, rank, size, count, root, job.get("params"))
    if job.get("algorithm"):
        call["algorithm"] = job["algorithm"]
    return {"dtype": dtype, "reduce_op": rop, "root": root, "count": count, "elements": spec.input_count(count, size),
            "call": call, "ref": ref}


def checked_call(comm, op, x: np.ndarray, out_n: int, dt: "_dtypes.DType", kwargs: dict[str, Any]) -> np.ndarray:
    """``op(x, **kwargs)`` into a device output filled with :data:`POISON_BYTE` first; the output."""
    from ..core.device import DeviceBuffer

    poison = np.full(out_n * dt.itemsize, POISON_BYTE, np.uint8).view(dt.numpy)
    out_buf = DeviceBuffer.from_numpy(poison, dt, rt=comm.rt)
    try:
        op(x, out_buf, **kwargs)
        return out_buf.numpy()
    finally:
        out_buf.close()


def run_ops(comm, jobs: list[dict[str, Any]], iters: int = 20) -> list[dict[str, Any]]:
    """Run each job ``{op, count, dtype, reduce_op, root, algorithm}`` on this rank; return rows (all
    ranks agree).

    The operator's kind (op.toml ``kind``, :data:`hcomm_kit.build.kinds.KINDS`) decides the output
    size, the default reduce op (the first listed), the root (rooted kinds: ``-r``, default 0),
    which ranks are checked and the numpy reference (op.toml ``reference`` overrides it)."""
    from ..ops.expect import compare, expected_outputs

    rows = []
    for job in jobs:
        op = comm.load_op(job["op"])
        spec = op.spec
        a = job_arguments(spec, comm.rank, comm.size, job)
        dtype, rop, root, count, call = a["dtype"], a["reduce_op"], a["root"], a["count"], a["call"]
        ins = [make_input(r, a["elements"], dtype) for r in range(comm.size)]
        x = ins[comm.rank]
        dt = _dtypes.get_dtype(dtype)
        out_n = spec.output_count(count, comm.size, call.get("recv_counts"))
        finding = None  # the checker's finding on this rank (e.g. output the operator never wrote)
        try:
            out = checked_call(comm, op, x, out_n, dt, dict(count=count, dtype=dtype, reduce_op=rop, root=root,
                                                            **call))
        except CheckError as exc:  # the call failed here only: the ranks agree on the row below
            finding, out = str(exc), None
            print(f"hcomm-kit: operator {spec.name}: {finding}", file=sys.stderr, flush=True)
        exps = expected_outputs(spec, ins, dtype=dtype, reduce_op=rop, root=root or 0, params=a["ref"])
        has_ref = exps is not None
        exp = exps[comm.rank] if has_ref else None
        err = float("inf") if finding is not None else 0.0
        if exp is not None and finding is None:
            # the inputs are small integers: every kind's result is exact, reductions too
            wrong, err = compare(out, exp, dtype)
            if wrong and err == 0.0:
                err = float("inf")  # bit-level difference (e.g. NaN payloads): never reported as 0
        # One allreduce on every rank, whatever its output (a rank whose output the kind does not
        # check contributes 0; a wrong output or a checker's finding is +inf, never NaN): the
        # ranks agree on the row, and on timing only an operator that passed.
        # The modelled time is the last call's: across hosts the exchanges (_job_max) are calls of
        # the communicator themselves, so it is read before each of them there.
        model_us = _model_time(comm) if world.job_wide(comm) else None
        err = _job_max(comm, err)
        dt_us: float | None = None
        if iters > 0 and err == 0.0:
            comm.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                op(x, count=count, dtype=dtype, reduce_op=rop, root=root, **call)
            dt_local = (time.perf_counter() - t0) / iters * 1e6
            model_us = _model_time(comm)  # the last timed call
            dt_us = _job_max(comm, dt_local)
        elif model_us is None:
            model_us = _model_time(comm)  # the checked call (the exchange went through MPI)
        if not has_ref and math.isfinite(err):
            err = 0.0
        rows.append(_row(spec, comm, dtype, rop, root, count, call, has_ref, err, dt_us, iters, model_us))
    return rows


def _job_max(comm, value: float) -> float:
    """The largest ``value`` of all ranks (the job's MPI world, or the communicator across hosts:
    :mod:`hcomm_kit.core.world`)."""
    return float(world.allreduce(comm, value, "max"))


def _row(spec, comm, dtype: str, rop: str | None, root: int | None, count: int, call: dict, has_ref: bool,
         err: float, dt_us: float | None, iters: int, model_us: float | None) -> dict[str, Any]:
    """One row of :func:`run_ops` (``err``: the largest error of all ranks; inf for a wrong output or a
    checker's finding, which fails the row also without a reference)."""
    return {"op": spec.name, "pattern": spec.pattern, "kind": spec.kind, "handshake": spec.handshake,
            "ranks": comm.size, "dtype": dtype, "reduce_op": rop or "-", "root": root, "count": count,
            "algorithm": call.get("algorithm"),
            "reference": spec.reference or spec.kind_info.reference,
            "checked": spec.kind_info.checked if has_ref else None,
            "max_error": (err if math.isfinite(err) else "inf") if has_ref else None,
            "us_per_call": dt_us, "iters": iters, "ok": ((err == 0.0) if has_ref else None) if math.isfinite(err)
            else False, "model_time_us": model_us}


def _model_time(comm) -> float | None:
    """Predicted Ascend time (us) of the communicator's last call (timing model). Every rank asks
    for itself (the simulation is deterministic: the same figure everywhere, no MPI call added);
    None without a model or when it fails (rank 0 prints the reason)."""
    from ..base.errors import HcommKitError

    if not hasattr(comm, "last_model_time"):
        return None
    try:
        return comm.last_model_time
    except HcommKitError as exc:
        if comm.rank == 0:
            print(f"note: no predicted time: {exc}", file=sys.stderr, flush=True)
        return None


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of :func:`run_ops` as a text table (time/call "-" when nothing was timed)."""
    algo = any(r.get("algorithm") for r in rows)
    head = ("operator", "kind", "handshake", "ranks", "dtype", "op", "root", *(("algorithm",) if algo else ()),
            "count", "max error", "time/call", "model/call", "check")
    lines = []
    for r in rows:
        check = {True: "OK", False: "MISMATCH", None: "(no reference)"}[r["ok"]]
        e = r["max_error"]
        err = "-" if e is None else e if isinstance(e, str) else f"{e:g}"
        us = "-" if r["us_per_call"] is None else f"{r['us_per_call']:.0f} us"
        root = "-" if r.get("root") is None else str(r["root"])
        model = "-" if r.get("model_time_us") is None else f"{r['model_time_us']:.1f} us"
        lines.append((r["op"], r["kind"], r["handshake"], str(r["ranks"]), r["dtype"], r["reduce_op"], root,
                      *((r.get("algorithm") or "-",) if algo else ()), str(r["count"]), err, us, model, check))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*l) for l in lines]
    return "\n".join(out)
