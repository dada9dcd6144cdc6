"""Checking an operator by its kind inside a multi-rank test (the generated tests use this).

:func:`check_operator` runs the operator once on this rank with every rank's deterministic input
and asserts this rank's output against the operator's numpy reference (op.toml ``reference``,
else its kind's), on the ranks the kind checks; :func:`roots_to_try` says which roots a test of a
rooted kind tries.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["check_operator", "roots_to_try", "input_count"]


def input_count(spec: Any, count: int, rank_size: int) -> int:
    """The input count of a test case of ``count`` elements per block: kinds that cut the input in
    one block per rank (alltoall, scatter, reduce_scatter) get ``count * rank_size``."""
    return count * rank_size if spec.kind_info.divisible else count


def roots_to_try(spec: Any, rank_size: int, count: int, every_up_to: int = 1031) -> list[int | None]:
    """``[None]`` for kinds without a root; else every root for counts up to ``every_up_to``, the last
    rank for larger ones (each root is a full collective call)."""
    if not spec.rooted:
        return [None]
    return list(range(rank_size)) if count <= every_up_to else [rank_size - 1]


def check_operator(comm: Any, op: Any, count: int, dtype: str, make_input: Callable[[int, int, str], np.ndarray], *,
                   reduce_op: str | None = None, root: int | None = None,
                   params: dict[str, Any] | None = None) -> np.ndarray:
    """Call ``op`` (a loaded operator) on this rank and assert its output.

    Args:
        comm: the communicator (every rank calls this with the same arguments).
        op: ``comm.load_op(...)``.
        count: input elements per rank.
        dtype: dtype name.
        make_input: ``make_input(rank, count, dtype)`` -> that rank's input (deterministic, so that
            every rank can build every rank's input for the reference).
        reduce_op: None: the operator's first listed (reductions).
        root: rooted kinds (None: 0).
        params: the operator's ``[[param]]`` values (alltoallv: generated counts when absent).

    Returns:
        This rank's output.

    Raises:
        AssertionError: the output differs from the reference (count and first differing index),
            or its shape is wrong.
    """
    from ..ops.expect import call_arguments, compare, expected_outputs

    spec = op.spec
    rop = spec.default_reduce_op(reduce_op)
    if root is None and spec.rooted:
        root = 0
    call, ref = call_arguments(spec, comm.rank, comm.size, count, root, params)
    inputs = [make_input(r, count, dtype) for r in range(comm.size)]
    out = op(inputs[comm.rank], dtype=dtype, reduce_op=rop, root=root, **call)
    exps = expected_outputs(spec, inputs, dtype=dtype, reduce_op=rop, root=root or 0, params=ref)
    assert exps is not None, f"operator {spec.name} ({spec.kind}) has no reference: set op.toml reference"
    exp = exps[comm.rank]
    if exp is None:
        return out  # this rank's output is not part of the result (e.g. a reduce's non-root)
    assert out.shape == exp.shape, f"rank {comm.rank}: output shape {out.shape}, expected {exp.shape}"
    wrong, err = compare(out, exp, dtype, reduction=spec.is_reduction, rank_size=comm.size)
    if wrong:
        diff = np.flatnonzero(out.ravel() != np.asarray(exp).ravel())
        first = int(diff[0]) if diff.size else -1
        raise AssertionError(f"rank {comm.rank}: {wrong} of {exp.size} elements differ from the {spec.kind} "
                             f"reference (root={root}, reduce_op={rop}, max error {err:g}; first at index {first}: "
                             f"got {out.ravel()[first] if first >= 0 else '-'}, "
                             f"expected {np.asarray(exp).ravel()[first] if first >= 0 else '-'})")
    return out
