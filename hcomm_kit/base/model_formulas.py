"""HCCL's published cost formulas for its collective algorithms, evaluated on the timing model's
link figures: a reference the modelled time of an operator can be checked against without the
simulation (no simulated task counts go in).

The formulas are the alpha-beta(-gamma) ones of hicann/hccl ``docs/zh/user_guide/coll_algo_intro/``
(``algo_intro.md``: one step moving and reducing n bytes costs ``alpha + n beta + n gamma``),
``Mesh.md``, ``Ring.md``, ``NHR.md``, and the two-level compositions of
``hierarchical_comm_principle.md`` (AllReduce = ReduceScatter inside the servers, AllReduce
between them, AllGather inside; AllGather = inside, then between; ReduceScatter = between, then
inside) as CANN's AICPU executors run them: ``sequence_mesh_nhr`` (``AicpuAllReduceSequenceMeshConcurNHR``
& co., one level after the other) and ``parallel_mesh_nhr`` (``AicpuAllReduceParallelMeshNHR`` & co.,
the data cut in two parts that run the levels in opposite orders at once, the cut as CANN's
``CalcParallelDataSplitRatio`` computes it). The rooted collectives compose the same rows as
CANN's executors of those names run them: a broadcast scatters down the levels (Mesh.md Scatter in
the root's server, NHR.md Scatter between the servers) and all-gathers back up, a scatter only
scatters (the parallel one in halves: CANN's executor takes no ratio), a reduce runs the
allreduce's steps. The three-level executors (``...NHRNHR``) have no family here.

Usage::

    from hcomm_kit.base.model_formulas import formula, formula_us
    formula_us("allreduce", "mesh", "A2:1x8", 64 << 20)                  # us, comparable with a modelled time
    f = formula("allreduce", "sequence_mesh_nhr", "A2:2x8", 16 << 20, figure="read")
    f.us, f.link_us, f.issue_us, f.citation, f.steps                      # the figure and its terms

``nbytes`` is the size HCCL's documents call n, the size ``hcomm-kit bench`` prints: the buffer of
an allreduce / broadcast / reduce, the whole output of an allgather / gather, the whole input of a
reduce-scatter / scatter (nccl-tests' convention). The parameters (:mod:`.model_params`) give:

* beta = 1 / the bandwidth of one stream of the level's link type, the write or the read figure
  (``figure=``); in a mesh step a rank moves n/p to each of p - 1 peers at once, so beta is at
  least (p - 1) / the NPU's port figure of that link type (Mesh.md assumes every link carries its
  share at once; the port figure says how much of that an NPU's links carry together);
* alpha = the link's latency + its notify latency (one transfer and the notify telling the peer
  that it landed: ASSUMPTION, HCCL's documents give alpha no value);
* gamma = 1 / the local reduce bandwidth.

``us`` adds what the model adds to an operation and the documents leave out: the host launch
(``launch_us``) and the AICPU issuing the algorithm's tasks one after another (tasks x
``task_us``), which overlaps the transfers (HCCL's cost model takes the AICPU's unfolding time "as
max at the end", cost_model.cc ``CalcLatencyParams``; issuing a wait never blocks the AICPU,
alg_data_trans_wrapper.cc). Each step of the formula (a Hockney step: one alpha) is issued and
then run, a step running once it is issued and the step before it has run, so ``us = launch_us +
max over k of (issue of steps 1..k + run of steps k..last)``: ``link_us`` when the links decide,
``issue_us`` + one step's run when the AICPU does. The task count is the algorithm's, counted
from CANN's AICPU templates and their transfer wrapper
(``src/ops/op_common/template/wrapper/alg_data_trans_wrapper.cc``), one loop per
``HCCL_BUFFSIZE`` of data:

* a mesh step among p ranks, a thread per peer: 9 (p - 1) tasks (the main thread starts and
  joins each peer's thread: 2 + 2; ``SendRecvWrite`` with the peer: record, wait, write, record,
  wait), plus p - 1 local reductions for a reduce-scatter step;
* a ring or NHR step: 5 tasks (``SendRecvWrite`` with the step's peers), plus one reduction in a
  reduce-scatter step.

``issue=False`` leaves the issue out (the documents' formula alone, plus the launch unless
``launch=False``). The interface other code relies on: :func:`formula`, :func:`formula_us`,
:class:`Formula`'s fields, :data:`FAMILIES`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from . import model_params
from .errors import ConfigError

__all__ = ["COLLECTIVES", "FAMILIES", "Formula", "Step", "formula", "formula_us", "levels"]

#: Algorithm families and the collectives each has a published formula for.
FAMILIES: dict[str, tuple[str, ...]] = {
    "mesh": ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "scatter", "gather"),
    "mesh_oneshot": ("allreduce",),
    "ring": ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "scatter", "gather"),
    "nhr": ("allreduce", "allgather", "reduce_scatter", "broadcast", "scatter"),
    "sequence_mesh_nhr": ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "scatter"),
    "parallel_mesh_nhr": ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "scatter"),
}
COLLECTIVES = tuple(sorted({c for cs in FAMILIES.values() for c in cs}))

_DOCS = "hicann/hccl 09300b70, docs/zh/user_guide/coll_algo_intro/:"
# The documents' formula of each (family, collective), as they write it.
_CITE = {
    ("mesh", "allreduce"): "Mesh.md AllReduce (ReduceScatter + AllGather): 2a + (2/p) n b + ((p-1)/p) n g",
    ("mesh", "allgather"): "Mesh.md AllGather: a + (1/p) n b",
    ("mesh", "reduce_scatter"): "Mesh.md ReduceScatter: a + (1/p) n b + ((p-1)/p) n g",
    ("mesh", "broadcast"): "Mesh.md Broadcast (Scatter + AllGather): 2a + (2/p) n b",
    ("mesh", "reduce"): "Mesh.md Reduce (ReduceScatter + Gather): 2a + (2/p) n b + ((p-1)/p) n g",
    ("mesh", "scatter"): "Mesh.md Scatter: a + (1/p) n b",
    ("mesh", "gather"): "Mesh.md Gather: a + (1/p) n b",
    ("mesh_oneshot", "allreduce"): "Mesh.md Gather of every peer's whole buffer (p blocks of n: a + n b), then "
                                   "p-1 local reductions of n (CANN's AicpuAllReduceSoleMeshOneShot): "
                                   "a + n b + (p-1) n g",
    ("ring", "allreduce"): "Ring.md AllReduce: 2(p-1) a + 2((p-1)/p) n b + ((p-1)/p) n g",
    ("ring", "allgather"): "Ring.md AllGather: (p-1) a + ((p-1)/p) n b",
    ("ring", "reduce_scatter"): "Ring.md ReduceScatter: (p-1) a + ((p-1)/p) n b + ((p-1)/p) n g",
    ("ring", "broadcast"): "Ring.md Broadcast: (p-1) a + (p-1) n b",
    ("ring", "reduce"): "Ring.md Reduce: (p-1) a + (p-1) n b + (p-1) n g",
    ("ring", "scatter"): "Ring.md Scatter: (p-1) a + ((p-1)/p) n b",
    ("ring", "gather"): "Ring.md Gather: (p-1) a + ((p-1)/p) n b",
    ("nhr", "allreduce"): "NHR.md AllReduce: 2 ceil(log2 p) a + 2((p-1)/p) n b + ((p-1)/p) n g",
    ("nhr", "allgather"): "NHR.md AllGather: ceil(log2 p) a + ((p-1)/p) n b",
    ("nhr", "reduce_scatter"): "NHR.md ReduceScatter: ceil(log2 p) a + ((p-1)/p) n b + ((p-1)/p) n g",
    ("nhr", "broadcast"): "NHR.md Broadcast (Scatter + AllGather): 2 ceil(log2 p) a + 2((p-1)/p) n b",
    ("nhr", "scatter"): "NHR.md Scatter: ceil(log2 p) a + ((p-1)/p) n b",
    ("sequence_mesh_nhr", "allreduce"): "hierarchical_comm_principle.md AllReduce: Mesh.md ReduceScatter (p0, n) + "
                                        "NHR.md AllReduce (p1, n/p0) + Mesh.md AllGather (p0, n)",
    ("sequence_mesh_nhr", "allgather"): "hierarchical_comm_principle.md AllGather: Mesh.md AllGather (p0, n/p1) + "
                                        "NHR.md AllGather (p1, n)",
    ("sequence_mesh_nhr", "reduce_scatter"): "hierarchical_comm_principle.md ReduceScatter: NHR.md ReduceScatter "
                                             "(p1, n) + Mesh.md ReduceScatter (p0, n/p1)",
    ("sequence_mesh_nhr", "broadcast"): "Mesh.md Scatter (p0, n) from the root in its server + NHR.md Broadcast "
                                        "(Scatter + AllGather; p1, n/p0) + Mesh.md AllGather (p0, n), as CANN's "
                                        "BroadcastSequenceMesh1dNHRNHRExecutor (src/ops/broadcast/executor/"
                                        "ins_v2_broadcast_sequence_executor_aicpu_3level.cc) on two levels",
    ("sequence_mesh_nhr", "reduce"): "hierarchical_comm_principle.md AllReduce, the root keeping the result, as CANN's "
                                     "ReduceSequenceExecutorAicpu3Level (src/ops/reduce/executor/"
                                     "reduce_sequence_executor_aicpu_3level.cc) on two levels: Mesh.md ReduceScatter "
                                     "(p0, n) + NHR.md AllReduce (p1, n/p0) + Mesh.md AllGather (p0, n)",
    ("sequence_mesh_nhr", "scatter"): "Mesh.md Scatter (p0, n) from the root in its server + NHR.md Scatter "
                                      "(p1, n/p0), as CANN's ScatterSequenceAicpu3LevelExecutor (src/ops/scatter/"
                                      "executor/scatter_sequence_aicpu_executor_3level.cc) on two levels",
    ("parallel_mesh_nhr", "allreduce"): "hierarchical_comm_principle.md AllReduce run as CANN's "
                                        "InsAllReduceParallelExecutor (src/ops/all_reduce/executor/"
                                        "ins_v2_all_reduce_parallel_executor.cc): part r of n mesh first, part 1-r "
                                        "NHR first, each of the four steps the slower part's",
    ("parallel_mesh_nhr", "allgather"): "hierarchical_comm_principle.md AllGather run as CANN's "
                                        "InsAllGatherParallelExecutor (src/ops/all_gather/executor/"
                                        "ins_v2_all_gather_parallel_executor.cc): part r mesh then NHR, part 1-r NHR "
                                        "then mesh, each step the slower part's",
    ("parallel_mesh_nhr", "reduce_scatter"): "hierarchical_comm_principle.md ReduceScatter run as CANN's "
                                             "InsReduceScatterParallelExecutor (src/ops/reduce_scatter/executor/"
                                             "ins_reduce_scatter_parallel_executor.cc): part r mesh then NHR, part "
                                             "1-r NHR then mesh, each step the slower part's",
    ("parallel_mesh_nhr", "broadcast"): "Mesh.md and NHR.md Scatter then AllGather run as CANN's "
                                        "InsBroadcastParallelExecutor (src/ops/broadcast/executor/"
                                        "ins_v2_broadcast_parallel_executor.cc): part r Mesh.md Scatter (p0, rn), "
                                        "NHR.md Scatter (p1, rn/p0), NHR.md AllGather (p1, rn/p0), Mesh.md AllGather "
                                        "(p0, rn); part 1-r NHR first; each of the four steps the slower part's",
    ("parallel_mesh_nhr", "reduce"): "hierarchical_comm_principle.md AllReduce run as CANN's ReduceParallelExecutor "
                                     "(src/ops/reduce/executor/reduce_parallel_executor.cc: the parallel allreduce's "
                                     "four steps, the root keeping the result), each step the slower part's",
    ("parallel_mesh_nhr", "scatter"): "Mesh.md and NHR.md Scatter run as CANN's InsV2ScatterParallelExecutor "
                                      "(src/ops/scatter/executor/ins_v2_scatter_parallel_executor.cc): half of n "
                                      "Mesh.md Scatter (p0, n/2) then NHR.md Scatter (p1, n/(2 p0)), the other half "
                                      "NHR.md Scatter (p1, n/2) then Mesh.md Scatter (p0, n/(2 p1)), each step the "
                                      "slower half's",
}


@dataclass(frozen=True)
class Step:
    """One term of a formula: ``us = alphas x alpha + nbeta / bandwidth + ngamma x gamma``."""

    what: str          # e.g. "mesh reduce_scatter inside the servers (p=8, HCCS)"
    link: str          # link type, "" for a purely local step
    p: int             # ranks taking part in the step
    alphas: float      # how many alphas
    nbeta: float       # bytes over the busiest link at the level's beta
    ngamma: float      # bytes reduced
    tasks: int         # tasks the AICPU issues for it (per loop)
    us: float


@dataclass(frozen=True)
class Formula:
    """A formula evaluated (times in us).

    Attributes:
        us: the launch, then the steps issued and run (see the module doc; without either, see
            :func:`formula`): the figure to compare with a modelled time.
        link_us: the documents' alpha-beta-gamma time.
        issue_us: tasks x ``task_us`` (0 with ``issue=False``).
        launch_us: the host launch added (0 with ``launch=False``).
        tasks: the AICPU tasks of the algorithm on one rank (all loops).
        loops: passes over ``HCCL_BUFFSIZE``.
        steps: the terms of link_us for one loop (n / loops bytes).
        citation: the document and table row.
    """

    collective: str
    algorithm: str
    topology: str
    nbytes: int
    figure: str
    us: float
    link_us: float
    issue_us: float
    launch_us: float
    tasks: int
    loops: int
    steps: tuple[Step, ...] = field(default_factory=tuple)
    citation: str = ""


@dataclass(frozen=True)
class _Level:
    p: int
    link: str
    alpha: float      # us
    beta: float       # us per byte of one stream
    port: float       # us per byte through the NPU's ports of the type (0: none)
    gamma: float      # us per byte reduced

    def beta_mesh(self) -> float:
        """beta of a mesh step: every peer at once, bounded by the NPU's ports together."""
        return max(self.beta, (self.p - 1) * self.port)

    def beta_one(self) -> float:
        """beta of a step with one peer at a time."""
        return max(self.beta, self.port)


def levels(topology: Any) -> tuple[str, int, int, str, str]:
    """``(product, ranks per server, servers, link inside a server, link between servers)`` of
    ``topology``: a ``PRODUCT:SERVERSxNPUS`` string (``"A2:2x8"``; the link types as the
    emulator's presets: HCCS inside an A2 server, UB inside A3 / 950 ones, RoCE between servers)
    or an object with ``product``, ``servers`` and ``link_type(a, b)`` (``comm.topology``), whose
    servers must hold equal numbers of ranks."""
    if isinstance(topology, str):
        try:
            product, shape = topology.split(":")
            ns, nl = (int(x) for x in shape.lower().split("x"))
        except ValueError:
            raise ConfigError(f"topology {topology!r} is not PRODUCT:SERVERSxNPUS (e.g. A2:1x8, A2:2x8, A3:1x16)",
                              key="topology") from None
        if ns < 1 or nl < 1:
            raise ConfigError(f"topology {topology!r}: servers and NPUs must be at least 1", key="topology")
        inside = "HCCS" if product == "A2" else "UB"
        return product, nl, ns, inside, "RoCE"
    servers = [tuple(s) for s in topology.servers]
    sizes = {len(s) for s in servers}
    if len(sizes) != 1:
        raise ConfigError(f"topology {getattr(topology, 'source', topology)!r}: servers of different sizes "
                          f"({', '.join(str(len(s)) for s in servers)}); the formulas need equal servers",
                          key="topology")
    nl = sizes.pop()
    inside = topology.link_type(servers[0][0], servers[0][1]) if nl > 1 else \
        ("HCCS" if topology.product == "A2" else "UB")
    between = topology.link_type(servers[0][0], servers[1][0]) if len(servers) > 1 else "RoCE"
    return topology.product, nl, len(servers), inside, between


def _level(prm: model_params.ModelParams, p: int, link: str, figure: str) -> _Level:
    lp = prm.links[link]
    return _Level(p=p, link=link, alpha=lp.latency_us + lp.notify_us, beta=1.0 / (lp.bandwidth(figure) * 1e3),
                  port=1.0 / (lp.port_GBps * 1e3) if lp.port_GBps > 0 else 0.0, gamma=1.0 / (prm.reduce_GBps * 1e3))


def _step(what: str, lv: _Level, alphas: float, nbeta: float, beta: float, ngamma: float, tasks: int) -> Step:
    return Step(what=what, link=lv.link, p=lv.p, alphas=alphas, nbeta=nbeta, ngamma=ngamma, tasks=tasks,
                us=alphas * lv.alpha + nbeta * beta + ngamma * lv.gamma)


def _mesh(op: str, lv: _Level, n: float, where: str) -> list[Step]:
    """Mesh.md's rows on p = lv.p ranks for n bytes, a row "A + B" as its two steps (tasks: 9 (p-1)
    a step, + p-1 reductions in a reduce-scatter step)."""
    p = lv.p
    if p <= 1:
        return []
    b = lv.beta_mesh()
    step = 9 * (p - 1)

    def one(kind: str, nbeta: float, ngamma: float, tasks: int) -> Step:
        return _step(f"mesh {kind} {where} (p={p}, {lv.link})".replace("  ", " "), lv, 1, nbeta, b, ngamma, tasks)

    rs = one("reduce_scatter", n / p, (p - 1) / p * n, step + (p - 1))
    if op in ("allgather", "scatter", "gather", "reduce_scatter"):
        return [rs] if op == "reduce_scatter" else [one(op, n / p, 0, step)]
    if op == "allreduce":
        return [rs, one("allgather", n / p, 0, step)]
    if op == "reduce":
        return [rs, one("gather", n / p, 0, step)]
    if op == "broadcast":
        return [one("scatter", n / p, 0, step), one("allgather", n / p, 0, step)]
    if op == "oneshot":
        return [_step(f"mesh one-shot allreduce {where} (p={p}, {lv.link})".replace("  ", " "), lv, 1, n, b,
                      (p - 1) * n, step + (p - 1))]
    raise AssertionError(op)


def _ring(op: str, lv: _Level, n: float, where: str) -> list[Step]:
    """Ring.md's rows (tasks: 5 a step, + 1 reduction in a reduce-scatter step)."""
    p = lv.p
    if p <= 1:
        return []
    b = lv.beta_one()
    k = p - 1

    def one(kind: str, nbeta: float, ngamma: float, tasks: int) -> Step:
        return _step(f"ring {kind} {where} (p={p}, {lv.link})", lv, k, nbeta, b, ngamma, tasks)

    rs, ag = one("reduce_scatter", k / p * n, k / p * n, 6 * k), one("allgather", k / p * n, 0, 5 * k)
    return {"allgather": [ag], "scatter": [one("scatter", k / p * n, 0, 5 * k)],
            "gather": [one("gather", k / p * n, 0, 5 * k)], "reduce_scatter": [rs], "allreduce": [rs, ag],
            "broadcast": [one("broadcast", k * n, 0, 5 * k)], "reduce": [one("reduce", k * n, k * n, 6 * k)]}[op]


def _nhr(op: str, lv: _Level, n: float, where: str) -> list[Step]:
    """NHR.md's rows (tasks: 5 a step, + 1 reduction in a reduce-scatter step)."""
    p = lv.p
    if p <= 1:
        return []
    b = lv.beta_one()
    s = math.ceil(math.log2(p))
    f = (p - 1) / p * n

    def one(kind: str, ngamma: float, tasks: int) -> Step:
        return _step(f"NHR {kind} {where} (p={p}, {lv.link})", lv, s, f, b, ngamma, tasks)

    rs, ag = one("reduce_scatter", f, 6 * s), one("allgather", 0, 5 * s)
    return {"allgather": [ag], "scatter": [one("scatter", 0, 5 * s)], "reduce_scatter": [rs], "allreduce": [rs, ag],
            "broadcast": [one("scatter", 0, 5 * s), ag]}[op]


def _pipeline(items: list[tuple[float, float]]) -> float:
    """The end of a two-stage pipeline: the AICPU issues the items in order (stage 1, first of
    each pair), the engines run each once it is issued and the one before it has run (stage 2):
    max over k of (issue of items 1..k + run of items k..last)."""
    best, issued = 0.0, 0.0
    runs = [r for _, r in items]
    tail = sum(runs)
    for (i, r) in items:
        issued += i
        best = max(best, issued + tail)
        tail -= r
    return best


def _items(step: Step, task_us: float) -> list[tuple[float, float]]:
    """A step of k alphas as k equal rounds of (issue, run)."""
    k = max(1, int(round(step.alphas)))
    return [(step.tasks * task_us / k, step.us / k)] * k


def _flat_level(prm: model_params.ModelParams, nl: int, ns: int, inside: str, between: str, figure: str) -> _Level:
    """All ranks as one level: its link the slower of the two (a single beta, as the documents
    write the flat formulas)."""
    if ns == 1:
        return _level(prm, nl, inside, figure)
    a, b = _level(prm, nl * ns, inside, figure), _level(prm, nl * ns, between, figure)
    return b if b.beta_one() >= a.beta_one() else a


def _split_ratio(inner: _Level, outer: _Level, collective: str) -> float:
    """CANN's CalcParallelDataSplitRatio (src/ops/op_common/template/template_utils.cc) with the
    link figures in place of its port counts: the share r of the data that starts with the mesh
    balances the two first steps, clos / (clos + mesh), rounded to eighths in [1/8, 7/8], at most
    1/2 for an allgather. Its kinds: ALL_GATHER (allgather), SCATTER (broadcast: the scatter
    steps go first), REDUCE_SCATTER_WITH_LOCAL_REDUCE (allreduce, reduce, reduce_scatter). The
    scatter takes no ratio: InsV2ScatterParallelExecutor::GetParallelDataSplit cuts in halves."""
    if collective == "scatter":
        return 0.5
    p0, p1 = inner.p, outer.p
    mesh_rate = (p0 - 1) / inner.beta_mesh()          # bytes/us the mesh level moves per rank
    clos_rate = 1.0 / outer.beta_one()
    if collective == "allgather":
        mesh, clos = (p0 - 1) / mesh_rate, (p1 - 1) / clos_rate
    elif collective == "broadcast":
        mesh, clos = (p0 - 1) / (p0 * mesh_rate), (p1 - 1) / (p1 * clos_rate)
    else:  # allreduce, reduce, reduce_scatter: REDUCE_SCATTER_WITH_LOCAL_REDUCE
        mesh, clos = 21.0 * (p0 - 1) / (20.0 * p0 * mesh_rate), (p1 - 1) / (p1 * clos_rate)
    r = clos / (clos + mesh) if clos + mesh > 0 else 0.5
    if collective == "allgather":
        r = min(r, 0.5)
    return min(7, max(1, round(r * 8))) / 8


def _two_level(family: str, collective: str, inner: _Level, outer: _Level, n: float,
               task_us: float) -> tuple[list[Step], float, list[tuple[float, float]]]:
    """Steps, link time and pipeline items of the mesh + NHR compositions (one loop)."""
    p0, p1 = inner.p, outer.p
    if family == "sequence_mesh_nhr":
        if collective in ("allreduce", "reduce"):
            steps = (_mesh("reduce_scatter", inner, n, "inside the servers") +
                     _nhr("allreduce", outer, n / p0, "between the servers") +
                     _mesh("allgather", inner, n, "inside the servers"))
        elif collective == "allgather":
            steps = _mesh("allgather", inner, n / p1, "inside the servers") + \
                _nhr("allgather", outer, n, "between the servers")
        elif collective in ("broadcast", "scatter"):
            # the root scatters down the levels; a broadcast then gathers back up them
            steps = (_mesh("scatter", inner, n, "in the root's server") +
                     _nhr("scatter", outer, n / p0, "between the servers"))
            if collective == "broadcast":
                steps += (_nhr("allgather", outer, n / p0, "between the servers") +
                          _mesh("allgather", inner, n, "inside the servers"))
        else:
            steps = _nhr("reduce_scatter", outer, n, "between the servers") + \
                _mesh("reduce_scatter", inner, n / p1, "inside the servers")
        return steps, sum(s.us for s in steps), [it for s in steps for it in _items(s, task_us)]
    r = _split_ratio(inner, outer, collective)
    a, b = r * n, (1 - r) * n
    if collective in ("allreduce", "reduce"):
        pairs = [(_mesh("reduce_scatter", inner, a, f"inside, part {r:g}"),
                  _nhr("reduce_scatter", outer, b, f"between, part {1 - r:g}")),
                 (_nhr("reduce_scatter", outer, a / p0, f"between, part {r:g}"),
                  _mesh("reduce_scatter", inner, b / p1, f"inside, part {1 - r:g}")),
                 (_nhr("allgather", outer, a / p0, f"between, part {r:g}"),
                  _mesh("allgather", inner, b / p1, f"inside, part {1 - r:g}")),
                 (_mesh("allgather", inner, a, f"inside, part {r:g}"),
                  _nhr("allgather", outer, b, f"between, part {1 - r:g}"))]
    elif collective == "allgather":
        pairs = [(_mesh("allgather", inner, a / p1, f"inside, part {r:g}"),
                  _nhr("allgather", outer, b / p0, f"between, part {1 - r:g}")),
                 (_nhr("allgather", outer, a, f"between, part {r:g}"),
                  _mesh("allgather", inner, b, f"inside, part {1 - r:g}"))]
    elif collective in ("broadcast", "scatter"):
        # part r: scattered in the root's server, then among the servers; part 1-r the other way
        pairs = [(_mesh("scatter", inner, a, f"in the root's server, part {r:g}"),
                  _nhr("scatter", outer, b, f"between, part {1 - r:g}")),
                 (_nhr("scatter", outer, a / p0, f"between, part {r:g}"),
                  _mesh("scatter", inner, b / p1, f"inside, part {1 - r:g}"))]
        if collective == "broadcast":  # then gathered back: part r among the servers first
            pairs += [(_nhr("allgather", outer, a / p0, f"between, part {r:g}"),
                       _mesh("allgather", inner, b / p1, f"inside, part {1 - r:g}")),
                      (_mesh("allgather", inner, a, f"inside, part {r:g}"),
                       _nhr("allgather", outer, b, f"between, part {1 - r:g}"))]
    else:
        pairs = [(_mesh("reduce_scatter", inner, a, f"inside, part {r:g}"),
                  _nhr("reduce_scatter", outer, b, f"between, part {1 - r:g}")),
                 (_nhr("reduce_scatter", outer, a / p0, f"between, part {r:g}"),
                  _mesh("reduce_scatter", inner, b / p1, f"inside, part {1 - r:g}"))]
    steps = [s for x, y in pairs for s in x + y]
    # each pair runs at once: the slower part's time, both parts' tasks issued
    items = [(sum(s.tasks for s in x + y) * task_us, max(sum(s.us for s in x), sum(s.us for s in y)))
             for x, y in pairs]
    return steps, sum(r for _, r in items), items


def formula(collective: str, algorithm: str, topology: Any, nbytes: int,
            params: "model_params.ModelParams | str | None" = None, figure: str = "write", *,
            issue: bool = True, launch: bool = True, buffer_bytes: int | None = None) -> Formula:
    """HCCL's formula for ``collective`` by ``algorithm`` on ``topology`` (see the module doc).

    Args:
        collective: one of :data:`COLLECTIVES` (``allreduce``, ``allgather``, ...).
        algorithm: a family of :data:`FAMILIES`: ``mesh`` (Mesh.md; the allreduce two-shot),
            ``mesh_oneshot``, ``ring``, ``nhr``, ``sequence_mesh_nhr``, ``parallel_mesh_nhr``.
            ``mesh`` and ``mesh_oneshot`` need one server; ``ring`` and ``nhr`` run over every
            rank with the slower link's beta; the compositions need two or more servers.
        topology: ``"A2:1x8"`` or ``comm.topology`` (see :func:`levels`).
        nbytes: HCCL's n (bench's size, see the module doc).
        params: the product's :class:`~.model_params.ModelParams`, or a product name (default:
            the topology's product).
        figure: ``"write"`` or ``"read"``: which stream figure gives beta.
        issue: include the AICPU's issue of the algorithm's tasks (overlapping the steps' runs).
        launch: add the host launch.
        buffer_bytes: the CCL buffer (default ``HCCL_BUFFSIZE`` MB).

    Raises:
        ConfigError: an unknown collective, family or figure, a family without a formula for the
            collective, a topology the family does not fit, or n < 0.
    """
    from .envs import hccl_buffsize_mb

    if algorithm not in FAMILIES:
        raise ConfigError(f"unknown algorithm family {algorithm!r}; the formulas cover {', '.join(FAMILIES)}",
                          key="algorithm")
    if collective not in FAMILIES[algorithm]:
        raise ConfigError(f"{algorithm} has no published formula for {collective!r} (it has: "
                          f"{', '.join(FAMILIES[algorithm])})", key="collective")
    if figure not in model_params.OPS:
        raise ConfigError(f"figure must be 'write' or 'read', got {figure!r}", key="figure")
    if nbytes < 0:
        raise ConfigError(f"nbytes must be >= 0, got {nbytes}", key="nbytes")
    product, nl, ns, inside, between = levels(topology)
    prm = params if isinstance(params, model_params.ModelParams) else model_params.load(params or product)
    spec = topology if isinstance(topology, str) else f"{product}:{ns}x{nl}"
    buf = buffer_bytes if buffer_bytes is not None else hccl_buffsize_mb() << 20
    loops = max(1, math.ceil(nbytes / buf)) if buf > 0 else 1
    n = float(nbytes) / loops  # each loop runs the algorithm on its part of the data
    if algorithm in ("mesh", "mesh_oneshot"):
        if ns != 1:
            raise ConfigError(f"{algorithm} is a one-server algorithm (Mesh.md: a full mesh inside a server); "
                              f"{spec} has {ns} servers: use sequence_mesh_nhr or parallel_mesh_nhr",
                              key="algorithm")
        lv = _level(prm, nl, inside, figure)
        steps = _mesh("oneshot" if algorithm == "mesh_oneshot" else collective, lv, n, "")
    elif algorithm in ("ring", "nhr"):
        lv = _flat_level(prm, nl, ns, inside, between, figure)
        steps = (_ring if algorithm == "ring" else _nhr)(collective, lv, n, "over every rank")
    else:
        if ns == 1:
            raise ConfigError(f"{algorithm} composes two levels; {spec} has one server: use mesh or nhr",
                              key="algorithm")
        steps, _, items = _two_level(algorithm, collective, _level(prm, nl, inside, figure),
                                     _level(prm, ns, between, figure), n, prm.task_us)
    if algorithm in ("mesh", "mesh_oneshot", "ring", "nhr"):
        items = [it for st in steps for it in _items(st, prm.task_us)]
    link = loops * sum(r for _, r in items)
    tasks = loops * sum(st.tasks for st in steps)
    issue_us = tasks * prm.task_us if issue else 0.0
    launch_us = prm.launch_us if launch else 0.0
    total = _pipeline(items * loops) if issue else link
    return Formula(collective=collective, algorithm=algorithm, topology=spec, nbytes=int(nbytes), figure=figure,
                   us=launch_us + total, link_us=link, issue_us=issue_us, launch_us=launch_us,
                   tasks=tasks, loops=loops, steps=tuple(steps), citation=f"{_DOCS} {_CITE[(algorithm, collective)]}")


def formula_us(collective: str, algorithm: str, topology: Any, nbytes: int,
               params: "model_params.ModelParams | str | None" = None, figure: str = "write", **kw: Any) -> float:
    """:func:`formula`'s ``us``: HCCL's formula for the call, comparable with a modelled time."""
    return formula(collective, algorithm, topology, nbytes, params, figure, **kw).us
