"""An operator's parameters beyond the buffers: its algorithms (op.toml ``[op].algorithms`` or a
built-in's table), its ``[[param]]`` fields in ``OpParam`` and an alltoallv's counts and
displacements. Mixed into :class:`~hcomm_kit.ops.custom_op.CustomOp`.
"""

from __future__ import annotations

import ctypes
import difflib
from typing import Any

import numpy as np

from ..base.errors import ConfigError

__all__ = ["OpParams"]


class OpParams:
    """The parameter side of :class:`~hcomm_kit.ops.custom_op.CustomOp` (its attributes below)."""

    name: str
    spec: Any
    comm: Any
    _builtin_algorithms: dict[str, int]
    _builtin_collective: str | None
    _algo_cache: dict
    _count_fields: dict
    _param: Any
    _param_names: dict

    def _toml(self):
        return self.spec.opdir / "op.toml" if self.spec.opdir else None

    @property
    def algorithms(self) -> dict[str, int]:
        """The algorithms ``algorithm=`` / ``--algorithm`` accepts, name -> ``OpParam.algo``: op.toml
        ``[op].algorithms`` (1 for the first), or a built-in's (:meth:`set_builtin_algorithms`);
        {} when there are none."""
        if self.spec.algorithms:
            return {a: i + 1 for i, a in enumerate(self.spec.algorithms)}
        return dict(self._builtin_algorithms)

    def set_builtin_algorithms(self, table: dict[str, int], collective: str | None = None) -> None:
        """The algorithm names of this operator, a built-in collective loaded from its directory
        (``comm.load_op`` passes its :data:`hcomm_kit.ops.algorithms.ALGORITHMS` table and the
        collective's name: a call of an algorithm that cannot reduce its dtype / op here is then
        refused before it is posted, as the built-in refuses it)."""
        self._builtin_algorithms = dict(table)
        self._builtin_collective = collective
        self._algo_cache.clear()

    def _check_builtin_algorithm(self, algo: int, dt_value: int, rop: int) -> None:
        """A built-in's directory: refuse an algorithm that cannot reduce ``dt_value`` x ``rop`` on
        this product (ConfigError, as the built-in collective), before the call is posted."""
        if self._builtin_collective is not None and self.spec.is_reduction:
            from .algorithms import check_runnable

            check_runnable(self._builtin_collective, algo, self.comm.device.soc, dt_value, rop)

    def algorithm_value(self, name: str) -> int:
        """``OpParam.algo`` of the algorithm ``name`` (see :attr:`algorithms`).

        Raises:
            ConfigError: the operator has no such algorithm (the message lists those it has).
        """
        v = self._algo_cache.get(name)
        if v is None:
            table = self.algorithms
            if name not in table:
                if self.spec.algorithms or not table:
                    self.spec.algorithm_value(str(name))  # raises, naming op.toml's list
                close = difflib.get_close_matches(str(name), list(table), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"operator {self.name} has no algorithm {name!r}{hint} (the built-in's: "
                                  f"{', '.join(table)})", key="algorithm")
            v = self._algo_cache[name] = table[name]
        return v

    def _extra_params(self, params: dict, algorithm: str | None, elements: int | None) -> dict:
        """``params`` with ``algorithm=`` as the ``algo`` field and alltoallv's ``send_counts`` /
        ``recv_counts`` (and displacements, packed when not given) under op.toml's field names;
        ``elements``: the input's size (checked against the send counts), None: not checked."""
        from ..build.opmodel import ALGO_PARAM

        if algorithm is not None:
            if ALGO_PARAM in params:
                raise ConfigError(f"operator {self.name}: pass algorithm= or {ALGO_PARAM}=, not both", key="algorithm")
            params = {**params, ALGO_PARAM: self.algorithm_value(algorithm)}
            if self._builtin_collective is not None and "hierInfo" not in params:
                # a built-in's directory run as an operator: a multi-level algorithm gets the layout of
                # servers the built-in gets (raises, naming why, when the communicator has none)
                from .algorithms import LEVELS

                if params[ALGO_PARAM] in LEVELS:
                    params = {**params, "hierInfo": self.comm._hier_info(self._builtin_collective)}
        if self._count_fields:
            params = self._alltoallv_params(params, elements)
        return params

    def _alltoallv_params(self, params: dict, elements: int | None) -> dict:
        size = self.comm.size
        fields = self._count_fields
        out = {k: v for k, v in params.items() if k not in fields}
        counts = {}
        for arg in ("send_counts", "recv_counts"):
            if arg not in params:
                if fields[arg] in params:  # given under the C name (the built-in's sendCounts)
                    counts[arg] = np.asarray(params[fields[arg]], dtype=np.int64).ravel()
                    continue
                raise ConfigError(f"operator {self.name} is an alltoallv: pass send_counts=[...] and "
                                  f"recv_counts=[...] (one count per rank, {size} ranks)", key=arg)
            c = np.asarray(params[arg]).ravel()
            if c.size != size or (c.size and (not np.issubdtype(c.dtype, np.integer) or c.min() < 0)):
                raise ConfigError(f"operator {self.name}: {arg} must hold {size} non-negative integers (one per "
                                  f"rank), got {list(c.tolist())[:8]}", key=arg)
            counts[arg] = c.astype(np.int64)
        sc, rc = counts["send_counts"], counts["recv_counts"]
        for arg, c in (("send_displs", sc), ("recv_displs", rc)):
            if arg in fields and arg not in params and fields[arg] not in params:
                out[fields[arg]] = np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64)
            elif arg in params:
                if arg not in fields:
                    raise ConfigError(f"operator {self.name} declares no [[param]] for {arg} (its blocks are packed)",
                                      key=arg)
                out[fields[arg]] = params[arg]
        if elements is not None and fields.get("send_displs") is None and int(sc.sum()) > elements:
            raise ConfigError(f"operator {self.name}: send_counts add up to {int(sc.sum())} elements, the input has "
                              f"{elements}", key="send_counts")
        out[fields["send_counts"]], out[fields["recv_counts"]] = sc, rc
        return out

    def _set_params(self, params: dict) -> None:
        p = self._param
        for name, field in self._param_names.items():
            value = params.get(name, 0)
            if field.array:
                arr = getattr(p, name)
                vals = np.asarray(value).ravel() if name in params else np.zeros(0)
                if vals.size > field.array:
                    raise ConfigError(f"parameter {name} holds {field.array} values, got {vals.size}", key=name)
                ctypes.memset(arr, 0, ctypes.sizeof(arr))
                for i, x in enumerate(vals.tolist()):
                    arr[i] = x
            else:
                setattr(p, name, value)

    def _check_params(self, params: dict) -> None:
        for name in params:
            if name not in self._param_names:
                close = difflib.get_close_matches(name, list(self._param_names), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                known = ", ".join(self._param_names) or "none"
                raise ConfigError(f"operator {self.name} has no parameter {name!r} (op.toml [[param]]: {known}){hint}",
                                  key=name, path=self._toml())
