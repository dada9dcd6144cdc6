"""Reference collectives in numpy: the expected result of each rank from every rank's input.

Every function takes ``inputs``: a list with one 1-D array per rank (in rank order) and returns
the list of per-rank outputs. Reductions run in float64 (or int64/uint64 for integers) and are
cast back to the input dtype; ``dtype="bf16"`` marks uint16 arrays as bf16 bit patterns.

Example:
    >>> import numpy as np
    >>> allreduce([np.array([1, 2], np.int32), np.array([3, 4], np.int32)])[0]
    array([4, 6], dtype=int32)
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from ..base.dtypes import bf16_bits_to_float32, float32_to_bf16_bits, get_dtype, get_reduce_op

__all__ = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "alltoallv", "reduce", "reduce_root",
           "scatter", "gather", "shift", "copy", "to_float", "from_float",
           "accumulate"]

#: element-wise combining ufunc of each reduce op (applied rank after rank, in rank order)
_UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


def _is_bf16(dtype: Any) -> bool:
    return dtype is not None and get_dtype(dtype).name == "bf16"


def to_float(x: np.ndarray, dtype: Any = None) -> np.ndarray:
    """Values of ``x`` as float64 (bf16 bit patterns decoded when ``dtype`` is bf16)."""
    if _is_bf16(dtype):
        return bf16_bits_to_float32(x).astype(np.float64)
    return np.asarray(x).astype(np.float64)


def from_float(x: np.ndarray, like: np.ndarray, dtype: Any = None) -> np.ndarray:
    """Cast back to the storage dtype of ``like`` (bf16 re-encoded with round-to-nearest-even)."""
    if _is_bf16(dtype):
        return float32_to_bf16_bits(x.astype(np.float32))
    return x.astype(like.dtype)


def accumulate(arrays: Iterable[np.ndarray], op: Any = "sum") -> np.ndarray:
    """``arrays[0] op arrays[1] op ...`` element-wise, in order, into a copy of the first array.

    One array is alive at a time beside the result (the arrays may be generated one by one), so
    the memory is twice one array's, not the ranks' stack."""
    ufunc = _UFUNCS[get_reduce_op(op).name]
    it = iter(arrays)
    first = next(it, None)
    if first is None:
        raise ValueError("accumulate needs at least one array (one per rank)")
    acc = np.array(first, copy=True)
    for x in it:
        ufunc(acc, x, out=acc)
    return acc


def reduce(inputs: Sequence[np.ndarray], op: Any = "sum", dtype: Any = None) -> np.ndarray:
    """Element-wise reduction of all ranks' inputs (one array)."""
    first = np.asarray(inputs[0])
    if not _is_bf16(dtype) and np.issubdtype(first.dtype, np.integer):
        wide = np.uint64 if np.issubdtype(first.dtype, np.unsignedinteger) else np.int64
        return accumulate((np.asarray(x).astype(wide) for x in inputs), op).astype(first.dtype)
    return from_float(accumulate((to_float(x, dtype) for x in inputs), op), first, dtype)


def allreduce(inputs: Sequence[np.ndarray], op: Any = "sum", dtype: Any = None) -> list[np.ndarray]:
    """Every rank gets the element-wise reduction."""
    r = reduce(inputs, op, dtype)
    return [r.copy() for _ in inputs]


def allgather(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Every rank gets the concatenation of all inputs in rank order."""
    cat = np.concatenate([np.asarray(x).ravel() for x in inputs])
    return [cat.copy() for _ in inputs]


def reduce_scatter(inputs: Sequence[np.ndarray], op: Any = "sum", dtype: Any = None) -> list[np.ndarray]:
    """Rank r gets block r (count/ranks elements) of the reduction."""
    n = len(inputs)
    r = reduce(inputs, op, dtype)
    if r.size % n:
        raise ValueError(f"reduce_scatter needs a count divisible by {n} ranks, got {r.size}")
    return [b.copy() for b in np.split(r, n)]


def broadcast(inputs: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray]:
    """Every rank gets the root's input."""
    return [np.asarray(inputs[root]).copy() for _ in inputs]


def alltoall(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Rank r gets block r of every rank's input, in rank order (inputs hold ranks equal blocks)."""
    n = len(inputs)
    blocks = []
    for x in inputs:
        x = np.asarray(x).ravel()
        if x.size % n:
            raise ValueError(f"alltoall needs a count divisible by {n} ranks, got {x.size}")
        blocks.append(np.split(x, n))
    return [np.concatenate([blocks[src][dst] for src in range(n)]) for dst in range(n)]


def scatter(inputs: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray]:
    """Rank r gets block r of the root's input (ranks equal blocks)."""
    n = len(inputs)
    x = np.asarray(inputs[root]).ravel()
    if x.size % n:
        raise ValueError(f"scatter needs a count divisible by {n} ranks, got {x.size}")
    return [b.copy() for b in np.split(x, n)]


def gather(inputs: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray | None]:
    """The root gets the concatenation of all inputs in rank order; the others get None."""
    cat = np.concatenate([np.asarray(x).ravel() for x in inputs])
    return [cat if r == root else None for r in range(len(inputs))]


def alltoallv(inputs: Sequence[np.ndarray], send_counts: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """Rank i sends ``send_counts[i][j]`` elements (packed, in peer order) to rank j; rank j gets them in
    source-rank order."""
    n = len(inputs)
    parts: list[list[np.ndarray]] = []
    for i, x in enumerate(inputs):
        x = np.asarray(x).ravel()
        edges = np.concatenate([[0], np.cumsum(np.asarray(send_counts[i], dtype=np.int64))])
        parts.append([x[edges[j]:edges[j + 1]] for j in range(n)])
    return [np.concatenate([parts[i][j] for i in range(n)]) for j in range(n)]


def reduce_root(inputs: Sequence[np.ndarray], op: Any = "sum", dtype: Any = None, root: int = 0) -> list[np.ndarray | None]:
    """The root gets the element-wise reduction; the others None (not checked)."""
    r = reduce(inputs, op, dtype)
    return [r if i == root else None for i in range(len(inputs))]


def shift(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Ring shift: rank r gets the input of rank r-1."""
    n = len(inputs)
    return [np.asarray(inputs[(r - 1) % n]).copy() for r in range(n)]


def copy(inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """A local copy: every rank gets its own input."""
    return [np.asarray(x).copy() for x in inputs]
