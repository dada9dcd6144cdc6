"""Collective benchmarks in the hccl_test / nccl-tests conventions (``hcomm-kit bench``).

Runs on every rank (under mpirun). For each message size: ``-w`` warm-up calls, ``-n`` timed calls
bracketed by device events (``aclrtEventElapsedTime``), the time reduced across ranks (max), then
one checked call on exact-by-construction data compared with the numpy reference of
:mod:`hcomm_kit.ops.reference`. Optionally, in the same job on the same ranks, sizes and dtype:
the same collective through mpi4py (Open MPI, ``--compare mpi``) and, for a user's operator, the
matching built-in collective (``--compare builtin``).

A user's operator directory is measured like a built-in of its kind (op.toml ``kind``, the
table :data:`hcomm_kit.build.kinds.KINDS`: sizes, bus bandwidth factor, the ranks checked, the
built-in and MPI call of ``--compare``; ``custom``: time only unless ``--busbw-factor``). See ``spec/bench.md`` for the conventions.

This module runs the sweep (:func:`run_bench`); what is measured is in :mod:`.cases`, the timed
loop in :mod:`.timing`, the ``--compare`` baselines in :mod:`.baseline`, the table, JSON and plot in
:mod:`.report`. Their public names are importable from here too.
"""

from __future__ import annotations

import socket
from typing import Any

from ..base import dtypes as _dtypes
from ..base.errors import ConfigError
from .baseline import BuiltinBaseline, _model_time, _selected, time_mpi
from .cases import (ALIASES, COLLECTIVES, COMPARES, _SHIFT, Collective, OpTarget, _Case, _OpCase, _target,
                    builtin_collective, check_target, op_target, parse_size, sizes)
from .report import _backend, _CurrentStdout, format_header, format_row, plot, plot_title, write_json
from ..core import world
from .timing import CHECKED_CALLS, _bw, _checked_calls, _checker_switch, _max_over_ranks, _time_ours

__all__ = ["COLLECTIVES", "Collective", "OpTarget", "op_target", "parse_size", "sizes", "run_bench", "format_header",
           "format_row", "COMPARES", "ALIASES", "CHECKED_CALLS", "check_target", "write_json", "plot", "plot_title",
           "builtin_collective", "split_compare"]


def split_compare(items: "tuple[str, ...] | list[str]") -> tuple[list[str], str | None]:
    """``--compare`` values -> (the baselines of :data:`COMPARES`, the built-in's algorithm of
    ``builtin:NAME``, else None). Raises ConfigError for anything else."""
    out: list[str] = []
    algo = None
    for c in items:
        name, _, arg = c.partition(":")
        if name not in COMPARES or (arg and name != "builtin") or (not arg and c.endswith(":")):
            raise ConfigError(f"--compare {c!r}: choose from {', '.join(COMPARES)} (builtin:ALGORITHM picks the "
                              "built-in's algorithm)", key="--compare")
        if arg:
            if algo is not None and algo != arg:
                raise ConfigError(f"--compare builtin:{algo} and builtin:{arg}: one algorithm of the built-in",
                                  key="--compare")
            algo = arg
        if name not in out:
            out.append(name)
    return out, algo


def _checks_over_ranks(comm, wrong: int, first, holdable: bool) -> tuple[int, list | None, bool]:
    """Every rank's check of one case combined: the wrong elements summed, each rank's first bad
    element (on rank 0), whether every rank's output could hold the check. One exchange."""
    every = world.allgather(comm, (int(wrong), first, bool(holdable)))
    return (sum(w for w, _, _ in every), [f for _, f, _ in every] if comm.rank == 0 else None,
            all(h for _, _, h in every))


def run_bench(comm, collective: str, size_list: list[int], *, dtype: str = "fp32", op: str | None = None, root: int = 0,
              iters: int = 20, warmup: int = 5, check: int = 1, fill: str = "rand", inplace: bool = False,
              algorithm: str | None = None, baseline: str | None = None, blocking: bool = False,
              compare: tuple[str, ...] | list[str] = (), busbw_factor: float | None = None,
              out=None, checked_first: bool = False) -> list[dict[str, Any]]:
    """Run the sweep on this rank; rank 0 prints the table. Returns the rows (every rank).

    Args:
        collective: a built-in collective (``allreduce``, ...) or a user's operator directory.
        algorithm: a built-in's algorithm (:data:`hcomm_kit.ops.algorithms.ALGORITHMS`), or an
            operator's (op.toml ``[op].algorithms``).
        compare: ``"mpi"`` (the same through mpi4py; ``baseline="mpi"`` is the same) and, for an
            operator, ``"builtin"`` (the matching built-in collective; ``"builtin:NAME"``: with its
            algorithm NAME): time, busbw and a ``vs_`` ratio (their time / ours: > 1 means ours is
            faster) per row.
        busbw_factor: an operator's bus bandwidth factor (default: from its pattern / output rule).
        checked_first: emulator: before each size is timed, :data:`CHECKED_CALLS` calls run with the
            notify checker on (a finding raises its :class:`~hcomm_kit.base.errors.CheckError`), then
            the checker is off for the timed and the numpy-checked calls (``hcomm-kit bench``
            when ``HCOMM_KIT_CHECK`` is unset).

    Calls are enqueued back to back and timed between device events, as hccl_test does;
    ``blocking`` waits for each call instead (see :func:`_time_ours`)."""
    from ..base import progress

    out = out if out is not None else _CurrentStdout()
    names, builtin_algo = split_compare([*compare, *([baseline] if baseline else [])])
    compare = tuple(names)
    target = _target(collective, busbw_factor)
    coll = target.coll if target else COLLECTIVES[builtin_collective(collective) or collective]
    name = coll.name
    if target is None and "builtin" in compare:
        raise ConfigError(f"--compare builtin is for your own operators; {name} is a built-in collective",
                          key="--compare")
    dt = _dtypes.get_dtype(dtype)
    # one rule: -o, else the operator's first listed reduce op (built-ins: sum)
    rop = _dtypes.get_reduce_op((target.spec.default_reduce_op(op) if target else op) or "sum").name
    if not 0 <= root < comm.size:
        raise ConfigError(f"-r {root} is not a rank of this {comm.size}-rank job", key="-r")
    if name == "sendrecv" and comm.size < 2:
        raise ConfigError("sendrecv needs at least 2 ranks", key="--np")
    custom = None
    if target is not None:
        check_target(target, dt.name, rop)
        custom = comm.load_op(target.opdir)
        if algorithm is not None:
            custom.algorithm_value(algorithm)  # raises for a name the operator does not list
    builtin = None
    if "builtin" in compare:
        if target.builtin is None:
            builtin = None
        else:
            builtin = _SHIFT if target.builtin == "shift" else COLLECTIVES[target.builtin]
    baseline_b = BuiltinBaseline(comm, builtin, target, builtin_algo) if builtin is not None else None
    set_check = _checker_switch(comm) if checked_first else None
    if set_check is not None:
        set_check(0)  # until the first checked calls: nothing is timed with the checker on
    lead = comm.rank == 0
    if lead:
        print(format_header(comm, coll, dt.name, rop if coll.reduction else None, root if coll.rooted else None,
                            iters, warmup, inplace and coll.inplace, algorithm, compare, blocking, target=target,
                            checked_first=set_check is not None, builtin_algorithm=_algo_shown(builtin, builtin_algo)),
              file=out, flush=True)
        if "builtin" in compare and builtin is None:
            print(f"# --compare builtin: no built-in counterpart of kind {target.kind}", file=out)
    rows = []
    total_wrong = 0
    shown_why: set[str] = set()
    with progress.Progress(f"bench {name}", total=len(size_list), rank=comm.rank) as bar:
        for nbytes in size_list:
            if target is not None:
                case: _Case = _OpCase(comm, target, custom, nbytes, dt, rop if target.spec.is_reduction else None,
                                      root if target.coll.rooted or target.kind == "custom" else None, fill, inplace,
                                      algorithm)
            else:
                case = _Case(comm, coll, nbytes, dt, rop, root, fill, inplace, algorithm)
            if case.rounded and lead:
                print(f"# warning: {nbytes} bytes rounded to {case.data_size} "
                      f"({'a multiple of ranks x ' if coll.split else ''}{dt.itemsize}-byte elements)", file=out)
            if set_check is not None:
                _checked_calls(case, set_check)
            if iters:
                us: float | None = _time_ours(case, iters, warmup, blocking, over_ranks=False)
            else:  # check only (`hcomm-kit run --iters 0`): one untimed call, its result checked
                case.call(async_op=False)
                us = None
            # what the last call ran and its modelled time first: on several hosts the exchanges
            # below (hcomm_kit.core.world) are calls of the communicator themselves
            selected = _selected(comm) if target is None else None
            model_us = _model_time(comm)
            if us is not None:
                us = _max_over_ranks(comm, us)
            wrong, first, holdable = case.check() if check else (0, None, True)
            if comm.size > 1:
                wrong, firsts, holdable = _checks_over_ranks(comm, wrong, first, holdable)
                first = next((f for f in (firsts or []) if f), None)
            alg, bus = _bw(coll, case.data_size, us, comm.size) if us is not None else (None, None)
            m_alg, m_bus = _bw(coll, case.data_size, model_us, comm.size) if model_us else (None, None)
            status = "NULL" if not check or not holdable else ("success" if wrong == 0 else "failed")
            row = {"collective": name, "algorithm": algorithm or "auto", "selected": selected, "ranks": comm.size,
                   "dtype": dt.name,
                   "op": rop if coll.reduction else None, "root": root if coll.rooted else None,
                   "size": case.data_size, "time_us": us, "algbw": alg, "busbw": bus, "check": status,
                   "wrong": wrong if holdable else None, "inplace": case.inplace, "backend": _backend(comm),
                   "soc": comm.soc, "host": socket.gethostname(), "blocking": blocking,
                   "model_time_us": model_us, "model_algbw": m_alg, "model_busbw": m_bus,
                   "model_product": comm.topology.product if model_us else None}
            if target is not None:
                row.update(operator=target.opdir, pattern=target.spec.pattern, kind=target.kind,
                           reference=target.spec.reference or target.spec.kind_info.reference)
            if "builtin" in compare:
                if baseline_b is not None:
                    row.update(baseline_b.measure(nbytes, case.data_size, dt, rop, root, fill, inplace, iters, warmup,
                                                  blocking, us, model_us))
                    if lead and row["builtin_why"] and row["builtin_why"] not in shown_why:
                        shown_why.add(row["builtin_why"])
                        print(f"# --compare builtin: the built-in {target.builtin} cannot run here: "
                              f"{row['builtin_why']}; builtin_model is the same call with every link up (*)",
                              file=out, flush=True)
                else:
                    row.update(builtin=None, builtin_algorithm=None, builtin_selected=None, builtin_time_us=None,
                               builtin_busbw=None, vs_builtin=None, builtin_why=None, builtin_links_up=False,
                               builtin_model_time_us=None, builtin_model_busbw=None, vs_builtin_model=None,
                               builtin_formula_us=None, builtin_formula=None)
            if "mpi" in compare:
                mpi_us = time_mpi(case, iters, warmup)
                _, mbus = _bw(coll, case.data_size, mpi_us, comm.size)
                row.update(mpi_time_us=mpi_us, mpi_busbw=mbus if mpi_us else None,
                           vs_mpi=(mpi_us / us) if mpi_us and us else None)
            if status == "failed":
                total_wrong += wrong
            rows.append(row)
            if lead:
                print(format_row(row, compare), file=out, flush=True)
                if check == 2 and first is not None:
                    print(f"#   first wrong element: rank {first[0]}, index {first[1]}, expected {first[2]}, "
                          f"got {first[3]}", file=out, flush=True)
            case.close()
            bar.advance(detail=f"{case.data_size} B")
    if baseline_b is not None:
        baseline_b.close()
    if lead:
        buses = [r["busbw"] for r in rows if r["busbw"] is not None]
        print(f"# Out of bounds values : {total_wrong} {'OK' if total_wrong == 0 else 'FAILED'}", file=out)
        print(f"# Avg bus bandwidth    : {sum(buses) / len(buses):.4f}" if buses else
              f"# Avg bus bandwidth    : N/A ({'time only' if iters else 'nothing timed'})", file=out, flush=True)
    return rows


def _algo_shown(builtin, algorithm: str | None) -> str | None:
    """``--compare builtin:<algorithm>`` as the header names it: an alias with the algorithm it stands
    for (``mesh = AicpuAllToAllSoleMesh``), CANN's name as given."""
    if algorithm is None or builtin is None or builtin is _SHIFT:
        return algorithm
    from ..ops.algorithms import canonical

    name = canonical(builtin.name, algorithm)
    return algorithm if name is None or name.lower() == algorithm.strip().lower() else f"{algorithm} = {name}"
