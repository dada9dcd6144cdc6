"""Checking an operator by its kind inside a multi-rank test (the generated tests use this).

:func:`check_operator` runs the operator once on this rank with every rank's deterministic input
and asserts this rank's output against the operator's numpy reference (op.toml ``reference``,
else its kind's), on the ranks the kind checks; :func:`roots_to_try` says which roots a test of a
rooted kind tries, :func:`algorithms_to_try` which algorithms (op.toml ``algorithms``, or the
built-in's), :func:`reduce_refusal` whether the running product must refuse a dtype / reduce op.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["check_operator", "roots_to_try", "input_count", "algorithms_to_try", "reduce_refusal"]


def input_count(spec: Any, count: int, rank_size: int) -> int:
    """The input elements of a call of ``count`` (``OpParam.count``, HCCL's count): ``count *
    rank_size`` for the kinds whose input holds one block per rank (alltoall, reduce_scatter,
    scatter), else ``count``."""
    return spec.input_count(count, rank_size)


def roots_to_try(spec: Any, rank_size: int, count: int, every_up_to: int = 1031) -> list[int | None]:
    """``[None]`` for kinds without a root; else every root for counts up to ``every_up_to``, the last
    rank for larger ones (each root is a full collective call)."""
    if not spec.rooted:
        return [None]
    return list(range(rank_size)) if count <= every_up_to else [rank_size - 1]


def algorithms_to_try(opdir: Any) -> list[str | None]:
    """The algorithms a generated test tries: every name of op.toml ``[op].algorithms`` (a
    built-in of ``aicpu_kernels/``: its table but ``auto``, with None = its own choice first), or
    ``[None]`` (no algorithm asked). ``hcomm-kit test --algorithm NAME`` deselects the others."""
    from pathlib import Path

    from ..base.resources import aicpu_kernels_dir
    from ..build.opspec import load_opspec

    spec = load_opspec(opdir)
    if spec.algorithms:
        return list(spec.algorithms)
    d = Path(opdir).resolve()
    if d.parent == aicpu_kernels_dir().resolve():
        from ..ops.algorithms import ALGORITHMS

        return [None, *(a for a in ALGORITHMS.get(d.name, {}) if a != "auto")]
    return [None]


def reduce_refusal(op: Any, dtype: str, reduce_op: str, algorithm: str | None = None) -> str | None:
    """The text of the refusal the running product must give for ``dtype`` x ``reduce_op`` (with
    ``algorithm``), or None when the operator must run it. From the tables, not from the operator's
    own gate: a built-in follows CANN's page of its HCCL API
    (:data:`hcomm_kit.base.dtypes.HCCL_API_REDUCE`), and its write-reduce algorithms the Hcomm
    primitive (:func:`hcomm_kit.ops.algorithms.check_runnable`); other operators the A2/A3 Hcomm
    reductions (hcomm.md §3.1; Ascend950 reduces everything)."""
    from ..base import dtypes as _dtypes
    from ..base.errors import ConfigError
    from ..build.opmodel import A2A3, A2A3_REDUCE_DTYPES, A2A3_REDUCE_OPS

    product = op.product
    dt, rop = _dtypes.get_dtype(dtype).name, _dtypes.get_reduce_op(reduce_op).name
    if op.hccl_api is not None:
        try:
            _dtypes.check_hccl_api_reduce(op.hccl_api, product, dt, rop)
            builtin = getattr(op, "_builtin_collective", None)
            if algorithm is not None and builtin is not None:
                from ..ops.algorithms import check_runnable

                check_runnable(builtin, op.algorithm_value(algorithm), op.comm.soc, _dtypes.get_dtype(dtype).value,
                               _dtypes.get_reduce_op(reduce_op).value)
        except ConfigError as exc:
            return exc.reason
        return None
    if product in A2A3 and (dt not in A2A3_REDUCE_DTYPES or rop not in A2A3_REDUCE_OPS):
        return f"{op.comm.soc} cannot reduce {dt} with {rop}"
    return None


def check_operator(comm: Any, op: Any, count: int, dtype: str, make_input: Callable[[int, int, str], np.ndarray], *,
                   reduce_op: str | None = None, root: int | None = None,
                   params: dict[str, Any] | None = None, algorithm: str | None = None) -> np.ndarray | None:
    """Call ``op`` (a loaded operator) on this rank and assert its output.

    Args:
        comm: the communicator (every rank calls this with the same arguments).
        op: ``comm.load_op(...)``.
        count: ``OpParam.count`` (HCCL's count: a block per rank for alltoall, reduce_scatter and
            scatter, whose inputs hold ``count * ranks``; alltoallv: the input's elements).
        dtype: dtype name.
        make_input: ``make_input(rank, elements, dtype)`` -> that rank's input (deterministic, so that
            every rank can build every rank's input for the reference).
        reduce_op: None: the operator's first listed (reductions).
        root: rooted kinds (None: 0).
        params: the operator's ``[[param]]`` values (alltoallv: generated counts when absent).
        algorithm: a name of the operator's algorithms (None: none asked).

    Returns:
        This rank's output (None on the ranks a reduce or gather does not return to).

    Raises:
        AssertionError: the output differs from the reference (count and first differing index),
            or its shape is wrong, or a reduce / gather returned something on a rank other than the root.
    """
    from ..ops.expect import call_arguments, compare, expected_outputs

    spec = op.spec
    rop = spec.default_reduce_op(reduce_op)
    if root is None and spec.rooted:
        root = 0
    call, ref = call_arguments(spec, comm.rank, comm.size, count, root, params)
    n_in = spec.input_count(count, comm.size)
    inputs = [make_input(r, n_in, dtype) for r in range(comm.size)]
    # into a device output filled with a poison byte: an output the kernel leaves unwritten fails
    from ..base import dtypes as _dtypes
    from ..core.device import DeviceBuffer
    from ..jobs.runner import POISON_BYTE

    dt = _dtypes.get_dtype(dtype)
    out_n = spec.output_count(count, comm.size, call.get("recv_counts"))
    out_buf = DeviceBuffer.from_numpy(np.full(out_n * dt.itemsize, POISON_BYTE, np.uint8).view(dt.numpy), dt,
                                      rt=comm.rt)
    try:
        ret = op(inputs[comm.rank], out_buf, count=count, dtype=dtype, reduce_op=rop, root=root, algorithm=algorithm,
                 **call)
        out = out_buf.numpy()
    finally:
        out_buf.close()
    exps = expected_outputs(spec, inputs, dtype=dtype, reduce_op=rop, root=root or 0, params=ref)
    assert exps is not None, f"operator {spec.name} ({spec.kind}) has no reference: set op.toml reference"
    exp = exps[comm.rank]
    if spec.kind_info.checked == "root" and comm.rank != (root or 0):
        assert ret is None, f"rank {comm.rank}: a {spec.kind} returns None on the ranks other than the root"
        return None
    assert ret is out_buf, f"rank {comm.rank}: the {spec.kind} did not return its output buffer"
    if exp is None:
        return out  # this rank's output is not part of the result
    assert out.shape == exp.shape, f"rank {comm.rank}: output shape {out.shape}, expected {exp.shape}"
    wrong, err = compare(out, exp, dtype, reduction=spec.is_reduction, rank_size=comm.size)
    if wrong:
        diff = np.flatnonzero(out.ravel() != np.asarray(exp).ravel())
        first = int(diff[0]) if diff.size else -1
        raise AssertionError(f"rank {comm.rank}: {wrong} of {exp.size} elements differ from the {spec.kind} "
                             f"reference (root={root}, reduce_op={rop}, algorithm={algorithm}, max error {err:g}; "
                             f"first at index {first}: got {out.ravel()[first] if first >= 0 else '-'}, "
                             f"expected {np.asarray(exp).ravel()[first] if first >= 0 else '-'})")
    return out
