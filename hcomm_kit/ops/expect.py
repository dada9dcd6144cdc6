"""What an operator must output: its numpy reference (op.toml ``reference``, else its kind's in
:data:`hcomm_kit.build.kinds.KINDS`), called with every rank's inputs and the call's arguments,
restricted to the ranks its kind checks (a reduce or gather: the root only).

Used by ``hcomm-kit run`` (:mod:`hcomm_kit.jobs.runner`), ``hcomm-kit bench``, the generated tests
(:func:`hcomm_kit.testing.check_operator`) and anyone checking an operator by hand::

    fn = load_reference(op.spec)                     # None: nothing to check against
    exp = expected_outputs(op.spec, inputs, dtype="fp32", reduce_op="sum", root=2)[comm.rank]

A reference is ``def ref(inputs, **args) -> list``: ``inputs`` has one 1-D array per rank (rank
order); it receives, among ``dtype`` (a dtype name), ``op`` / ``reduce_op`` (a reduce op name or
None), ``root``, ``rank_size`` and the operator's ``[[param]]`` values, those its signature names
(all of them with ``**args``), and returns one array per rank (None for a rank not checked).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError
from . import reference as _reference

__all__ = ["load_reference", "expected_outputs", "compare", "alltoallv_counts", "call_arguments", "TOLERANCE"]

#: Relative tolerance per float dtype and rank of a reduction computed in another order.
TOLERANCE = {"fp16": 2e-3, "bf16": 1.6e-2, "fp32": 1e-6, "fp64": 1e-12}

_CACHE: dict[tuple, Callable[..., Any]] = {}


def load_reference(spec: Any) -> Callable[..., Any] | None:
    """The reference function of the operator ``spec`` (an :class:`~hcomm_kit.build.opmodel.OpSpec`),
    or None when it has none (a ``custom`` operator without ``reference``).

    ``module`` of ``"module:function"`` is first looked up as ``<module>.py`` in the operator
    directory (dots are subdirectories), then imported.

    Raises:
        ConfigError: the module or the function cannot be found or loaded (names op.toml).
    """
    text = spec.reference or spec.kind_info.reference
    if not text:
        return None
    module, func = text.split(":", 1)
    path = Path(spec.opdir) / (module.replace(".", "/") + ".py") if spec.opdir is not None else None
    key = (text, str(path), path.stat().st_mtime_ns if path is not None and path.is_file() else 0)
    fn = _CACHE.get(key)
    if fn is not None:
        return fn
    toml = Path(spec.opdir) / "op.toml" if spec.opdir is not None else None
    try:
        if path is not None and path.is_file():
            name = f"_hcomm_kit_reference_{spec.name}_{module.replace('.', '_')}"
            mspec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(mspec)  # type: ignore[arg-type]
            sys.modules[name] = mod
            mspec.loader.exec_module(mod)  # type: ignore[union-attr]
        else:
            mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's module: any error is a configuration error
        raise ConfigError(f"reference {text!r}: cannot load module {module!r} ({type(exc).__name__}: {exc}); "
                          f"put {module}.py in the operator directory or name an importable module",
                          key="op.reference", path=toml) from None
    fn = getattr(mod, func, None)
    if not callable(fn):
        raise ConfigError(f"reference {text!r}: module {module!r} has no function {func!r}", key="op.reference",
                          path=toml)
    _CACHE[key] = fn
    return fn


def _call(fn: Callable[..., Any], inputs: list[np.ndarray], args: dict[str, Any]) -> Any:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn(inputs, **args)
    ps = list(sig.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in ps):
        return fn(inputs, **args)
    return fn(inputs, **{k: v for k, v in args.items() if k in sig.parameters and k != ps[0].name})


def expected_outputs(spec: Any, inputs: Sequence[np.ndarray], *, dtype: str, reduce_op: str | None = None,
                     root: int = 0, params: dict[str, Any] | None = None) -> list[np.ndarray | None] | None:
    """Every rank's expected output (None where the kind checks nothing), or None without a reference.

    Args:
        spec: the operator's OpSpec.
        inputs: one 1-D array per rank, in rank order.
        dtype: the call's dtype name; reduce_op: its reduce op (None: not a reduction); root: its root.
        params: the call's ``[[param]]`` values as the reference sees them (for ``alltoallv``:
            ``send_counts`` of every rank, one row per rank).

    Raises:
        ConfigError: the reference cannot be loaded, or returns something else than one array per rank.
    """
    fn = load_reference(spec)
    if fn is None:
        return None
    n = len(inputs)
    rop = _dtypes.get_reduce_op(reduce_op).name if reduce_op is not None else None
    args: dict[str, Any] = {"dtype": _dtypes.get_dtype(dtype).name, "op": rop, "reduce_op": rop, "root": root,
                            "rank_size": n, **(params or {})}
    if rop is None:  # the built-in references of non-reductions take no op
        args.pop("op")
    outs = _call(fn, [np.asarray(x) for x in inputs], args)
    if not isinstance(outs, (list, tuple)) or len(outs) != n:
        raise ConfigError(f"reference {spec.reference or spec.kind_info.reference!r} of operator {spec.name} must "
                          f"return a list of {n} arrays (one per rank, None for a rank not checked), got "
                          f"{type(outs).__name__}", key="op.reference")
    info = spec.kind_info
    return [None if o is None or not info.checks_rank(r, root) else np.asarray(o) for r, o in enumerate(outs)]


def call_arguments(spec: Any, rank: int, rank_size: int, count: int, root: int | None,
                   params: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(call keywords of rank, the reference's view of them)`` for a kind's extra arguments: the
    root of rooted (and custom) kinds, ``send_counts`` / ``recv_counts`` of alltoallv (generated
    by :func:`alltoallv_counts` unless ``params`` gives them)."""
    call: dict[str, Any] = dict(params or {})
    ref: dict[str, Any] = dict(params or {})
    if spec.kind == "alltoallv" and "send_counts" not in call:
        matrix = alltoallv_counts(rank_size, count)
        call.update(send_counts=matrix[rank], recv_counts=matrix[:, rank])
        ref.update(send_counts=matrix)
    return call, ref


def alltoallv_counts(rank_size: int, count: int) -> np.ndarray:
    """Uneven but deterministic alltoallv counts: row i = what rank i sends to each rank; every
    row sums to at most ``count`` (rank i's input)."""
    base = count // rank_size
    i, j = np.meshgrid(np.arange(rank_size), np.arange(rank_size), indexing="ij")
    return np.maximum(0, base - (i + 2 * j) % 3).astype(np.int64)


def compare(out: np.ndarray, expected: np.ndarray, dtype: str, *, reduction: bool = False,
            rank_size: int = 1) -> tuple[int, float]:
    """``(#wrong elements, largest absolute error)`` of ``out`` against ``expected``; floats of a
    reduction may differ by the rounding of another summation order (:data:`TOLERANCE`), anything
    else must match bit for bit. A shape mismatch counts every element wrong (error inf)."""
    out, expected = np.asarray(out).ravel(), np.asarray(expected).ravel()
    if out.shape != expected.shape:
        return max(out.size, expected.size), float("inf")
    got, want = _reference.to_float(out, dtype), _reference.to_float(expected, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - want)
    diff[np.isnan(got) & np.isnan(want)] = 0.0
    err = float(np.max(diff, initial=0.0)) if np.isfinite(diff).all() else float("inf")
    name = _dtypes.get_dtype(dtype).name
    if reduction and name in TOLERANCE:
        tol = TOLERANCE[name] * max(1, rank_size)
        bad = ~(diff <= tol + tol * np.abs(want))
    else:
        k = out.itemsize
        bad = out.view(f"u{k}") != np.ascontiguousarray(expected.astype(out.dtype, copy=False)).view(f"u{k}")
    return int(np.count_nonzero(bad)), err
