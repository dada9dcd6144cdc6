"""Algorithm selection of the built-in collectives: each offers its algorithms with a cost, the
cheapest runs unless ``algorithm=`` / ``--algorithm`` / ``HCCL_ALGO`` names one.

The algorithms are CANN's AICPU ones (names, executors and templates as CANN registers them;
:mod:`hcomm_kit.ops.algorithms`). Until the choice follows CANN's own selector, the cost of each is
HCCL's alpha-beta formula for it (``coll_algo_intro/Mesh.md``, ``NHR.md``; a sequence executor adds
its levels, a parallel one overlaps them) evaluated with the timing model's figures of the
topology's product (:mod:`hcomm_kit.base.model_params`: task, launch, copy and reduce figures, per
link type its latency, bandwidth, utilisation by size and port), bounded below by the AICPU's issue
of the tasks its kernel makes, as HCCL's cost model does (``src/ops/op_common/selector/cost_model.cc``,
"aicpu unfolding time taken as max at the end"): ``launch + max(tasks x task_us, data time)``. An
algorithm that needs a link taken down (``HCOMM_KIT_LINKS_DOWN``) is offered with cost -1; one that
reduces with write-reduce where the product's primitive cannot reduce the dtype / op (A2/A3 int64,
prod) is replaced by its ``...AicpuReduce`` form.

On a topology of several servers of equal size, allreduce, allgather and reduce_scatter also offer
the two-level algorithms (``...ParallelMeshNHR``, ``...SequenceMeshConcurNHR``: a mesh inside a
server, NHR among the ranks with the same local index).

``HCCL_ALGO`` in the grammar of CANN's ``alg_parse.cc`` (``[op:]executor{level0=tpl,level1=tpl}``,
``[op:]template``, ``not(...)``, segments separated by ``;``, later ones first) filters the entries
as CANN's ``UpdateCostModelWithAlgo`` does: a rule that matches keeps only what it names, a
``not(...)`` rule drops what it names, a rule that matches nothing leaves the choice to the model.
(CANN's documented ``level0:NA;level1:nhr`` form names one flat algorithm and is handled by
:func:`hcomm_kit.ops.algorithms.parse_hccl_algo`.)

CANN's tuner plugin (``HCCL_TUNER_PLUGIN``) then sees the entries (named as CANN names them:
engine ``aicpu``, executor ``sole`` / ``sequence`` / ``parallel``, templates ``meshoneshot``,
``meshtwoshot``, ``mesh``, ``nhr``, ...) and may change their costs (< 0 disables, 0 prefers); the emulator loads it
(``HcommKitTunerSelect``) and logs the choice at info level.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..base import model_params
from ..base.errors import ConfigError
from ..core.topology import Topology

__all__ = ["Entry", "AlgoRule", "offer", "choose", "two_level", "parse_algo_rules"]

# collective -> HcclCMDType (hccl_types.h), CANN's op name in the tuner's entries
_CMD = {"allreduce": (2, "AllReduce"), "allgather": (6, "AllGather"), "reduce_scatter": (7, "ReduceScatter"),
        "alltoall": (10, "AlltoAll")}
# our algorithm -> CANN template name, per collective


# The largest communicator the layout of servers describes (HK_MAX_RANKS of hk_coll.h).
HIER_MAX_RANKS = 64


@dataclass
class Entry:
    """One algorithm offered for a call: our name, CANN's names, its cost (s; < 0 = disabled).

    ``executor`` and ``levels`` are CANN's executor and the template of each level (one for the
    flat ``sole`` algorithms, level 0 and level 1 for ``sequence``); ``template`` is what the
    tuner plugin sees (level 0's).
    """

    algorithm: str
    alg_name: str
    template: str
    cost: float
    why: str = ""
    executor: str = "sole"
    levels: tuple[str, ...] = ()


def two_level(topo: Topology, nranks: int) -> "tuple[tuple[int, ...], ...] | str":
    """The servers of a two-level collective (each server's ranks ascending, servers in the
    topology's order), or why there are none: servers of different sizes, or more ranks than the
    kernel's layout holds. One server, or one rank per server, is a valid (degenerate) layout."""
    servers = tuple(tuple(sorted(s)) for s in topo.servers)
    if nranks > HIER_MAX_RANKS:
        return f"{nranks} ranks; the two-level layout holds at most {HIER_MAX_RANKS}"
    sizes = sorted({len(s) for s in servers})
    if len(sizes) != 1:
        detail = ", ".join(f"server {i}: {len(s)}" for i, s in enumerate(servers))
        return f"its servers hold different numbers of ranks ({detail}); the two-level algorithm needs equal servers"
    return servers


class _Cost:
    """The model's figures for one topology, in microseconds (model/params/<product>.toml)."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.p = model_params.load(topo.product)

    def tasks(self, n: float) -> float:
        return n * self.p.task_us

    def copy(self, nbytes: float) -> float:
        return nbytes / (self.p.copy_GBps * 1e3)

    def reduce(self, nbytes: float) -> float:
        return nbytes / (self.p.reduce_GBps * 1e3)

    def link(self, a: int, b: int, nbytes: float) -> float:
        """One transfer of nbytes between ranks a and b, alone on its link (latency included)."""
        return self.p.links[self.topo.link_type(a, b)].transfer_us(nbytes) if nbytes > 0 else 0.0

    def parallel(self, rank: int, peers, nbytes: float) -> float:
        """rank moving nbytes with each of peers at once (a thread per peer): its own links in
        parallel, each link type's port (when the product has one) shared by the peers behind it."""
        by_kind: dict[str, list[int]] = {}
        for q in peers:
            if q != rank:
                by_kind.setdefault(self.topo.link_type(rank, q), []).append(q)
        worst = 0.0
        for kind, qs in by_kind.items():
            lp = self.p.links[kind]
            t = max(self.link(rank, q, nbytes) for q in qs)
            if lp.port_GBps > 0:
                t = max(t, lp.latency_us + len(qs) * nbytes / (lp.port_GBps * 1e3))
            worst = max(worst, t)
        return worst

    def total(self, tasks: float, data: float) -> float:
        """A call: the host launch, then the AICPU's issue of every task or the data, whichever is longer."""
        return self.p.launch_us + max(self.tasks(tasks), data)


def _nhr_steps(n: int) -> int:
    return max(0, (n - 1).bit_length())


def _nhr_time(c: _Cost, group: list[int], nbytes: float, reduce: bool) -> tuple[float, float]:
    """(time, tasks) of an NHR reduce-scatter or all-gather of nbytes over group (NHR.md: step s
    sends ceil((p-1)/2^(s+1)) parts of nbytes / p to the rank 2^s away; the slowest pair decides)."""
    p = len(group)
    t = tasks = 0.0
    for s in range(_nhr_steps(p)):
        d = 1 << s
        parts = (p - 1 + d) // (2 * d)
        size = parts * nbytes / p
        t += max(c.link(group[i], group[(i - d) % p], size) for i in range(p)) + (c.reduce(size) if reduce else 0)
        tasks += 4 + parts
    return t, tasks


def _mesh_time(c: _Cost, group: list[int], nbytes: float) -> float:
    """Every member moving nbytes with each other member at once (the slowest member decides)."""
    return max(c.parallel(r, group, nbytes) for r in group) if len(group) > 1 else 0.0


def _mesh_tasks(n: int) -> float:
    """A mesh phase on a member: fork and join (2 per worker) and a 5-task exchange per peer."""
    return (2 * (n - 1) if n > 2 else 0) + 5 * (n - 1)


def _flat_costs(collective: str, c: _Cost, n: int, d: float) -> dict[str, tuple[float, list]]:
    """(cost us, links needed) of the flat algorithms for d bytes per rank (the kernel's measure:
    allreduce the message, allgather / reduce_scatter the block, alltoall the send buffer), after
    HCCL's formulas (Mesh.md, NHR.md) with the model's link figures and the tasks the kernels issue."""
    ranks = list(range(n))
    every = [(a, b) for a in range(n) for b in range(a + 1, n)]
    nhr_pairs = sorted({(min(a, (a + (1 << s)) % n), max(a, (a + (1 << s)) % n)) for a in range(n)
                        for s in range(_nhr_steps(n))})
    out: dict[str, tuple[float, list]] = {}
    mt = _mesh_tasks(n)
    if collective == "allreduce":
        chunk = d / n
        out["AicpuAllReduceSoleMeshOneShot"] = (c.total(mt + n + 1, _mesh_time(c, ranks, d) + c.copy(d)
                                                        + (n - 1) * c.reduce(d)), every)
        rs = _mesh_time(c, ranks, chunk) + c.copy(chunk) + (n - 1) * c.reduce(chunk)
        ag = _mesh_time(c, ranks, chunk) + c.copy(chunk)
        out["AicpuAllReduceSoleMeshTwoShot"] = (c.total(2 * mt + n + 1, rs + ag), every)
        steps = (n - 1) * (_mesh_time(c, ranks, chunk / (n - 1)) + c.reduce(chunk / (n - 1)))
        out["AicpuAllReduceSoleMeshChunkTwoShot"] = (c.total(n * mt + 2, c.copy(chunk) + steps + ag), every)
        trs, krs = _nhr_time(c, ranks, d, True)
        tag, kag = _nhr_time(c, ranks, d, False)
        nhr = c.total(krs + kag + 2, trs + tag + 2 * c.copy(d))
        out["AicpuAllReduceSoleNHR"] = (nhr, nhr_pairs)
    elif collective in ("allgather", "reduce_scatter"):
        red = collective == "reduce_scatter"
        mesh = _mesh_time(c, ranks, d) + c.copy(d) + ((n - 1) * c.reduce(d) if red else c.copy(d))
        name = "AicpuReduceScatter" if red else "AicpuAllGather"
        out[f"{name}SoleMesh"] = (c.total(mt + n, mesh), every)
        if red:
            steps = (n - 1) * (_mesh_time(c, ranks, d / (n - 1)) + c.reduce(d / (n - 1)))
            out[f"{name}SoleMeshChunk"] = (c.total((n - 1) * mt + 2, 2 * c.copy(d) + steps), every)
        t, k = _nhr_time(c, ranks, n * d, red)
        out[f"{name}SoleNHR"] = (c.total(k + n + 1, t + n * c.copy(d) + c.copy(d)), nhr_pairs)
    else:
        b = d / n
        out["AicpuAllToAllSoleMesh"] = (c.total(mt + 2 * (n - 1) + 1, _mesh_time(c, ranks, b) + 2 * c.copy(b) * n),
                                        every)
    return out


def _two_level_costs(collective: str, c: _Cost, servers, d: float) -> dict[str, tuple[float, list]]:
    """(cost us, links needed) of the two-level algorithms (CANN's sequence executors add their
    levels' costs; the parallel ones overlap the levels: the longer of each phase's two halves)."""
    nl, ns = len(servers[0]), len(servers)
    local = [[s[j] for j in range(nl)] for s in servers]
    inter = [[s[j] for s in servers] for j in range(nl)]
    pairs = [(a, b) for g in local + inter for i, a in enumerate(g) for b in g[i + 1:]]
    mt0, red = _mesh_tasks(nl), collective != "allgather"
    name = {"allreduce": "AicpuAllReduce", "allgather": "AicpuAllGather", "reduce_scatter": "AicpuReduceScatter"}[
        collective]

    def mesh(nbytes: float, reduce: bool) -> float:  # a level-0 mesh phase with the volume of nbytes per rank
        return max(_mesh_time(c, g, nbytes / nl) for g in local) + (nl - 1) * (c.reduce(nbytes / nl) if reduce else 0)

    def nhr(nbytes: float, reduce: bool) -> tuple[float, float]:
        t = k = 0.0
        for g in inter:
            tt, kk = _nhr_time(c, g, nbytes, reduce)
            t, k = max(t, tt), max(k, kk)
        return t, k

    if collective == "allreduce":  # RS in the server, AR among servers on 1/L, AG in the server
        t1, k1 = nhr(d / nl, True)
        t2, k2 = nhr(d / nl, False)
        seq = mesh(d, True) + t1 + t2 + mesh(d, False)
        tasks = 2 * mt0 + k1 + k2 + nl + 1
        e = 0.75
        par = (max(mesh(e * d, True), nhr((1 - e) * d, True)[0]) + max(nhr(e * d / nl, True)[0], mesh((1 - e) * d / ns, True))
               + max(nhr(e * d / nl, False)[0], mesh((1 - e) * d / ns, False)) + max(mesh(e * d, False), nhr((1 - e) * d, False)[0]))
    elif collective == "allgather":  # blocks of d bytes: L blocks in the server, then S groups of L
        t1, k1 = nhr(ns * nl * d, False)
        seq = mesh(nl * d, False) + t1
        tasks = mt0 + k1 + 2 * nl * ns
        e = 0.5
        par = (max(mesh(nl * e * d, False), nhr(ns * (1 - e) * d, False)[0])
               + max(nhr(ns * nl * e * d, False)[0], mesh(nl * ns * (1 - e) * d, False)))
    else:  # reduce_scatter of blocks of d bytes: every server's L blocks in the server, then S among servers
        t1, k1 = nhr(ns * d, True)
        seq = mesh(nl * ns * d, True) + t1
        tasks = mt0 + k1 + 2
        e = 0.75
        par = (max(mesh(nl * ns * e * d, True), nhr(ns * nl * (1 - e) * d, True)[0])
               + max(nhr(ns * e * d, True)[0], mesh(nl * (1 - e) * d, True)))
    return {f"{name}SequenceMeshConcurNHR": (c.total(tasks, seq), pairs),
            f"{name}ParallelMeshNHR": (c.total(tasks + 8, par), pairs)}


def offer(collective: str, nbytes: int, topo: Topology, nranks: int, dtype_value: int | None = None,
          reduce_op: int | None = None) -> list[Entry]:
    """The algorithms of a built-in collective for a call of ``nbytes`` per rank (the kernel's
    measure: allreduce the input, allgather / reduce_scatter the block, alltoall the whole send
    buffer), with their costs (s); an algorithm that needs a downed link gets cost -1, one that
    reduces with write-reduce where the product's primitive cannot reduce the dtype/op (A2/A3
    int64, prod) is not offered, nor its AicpuReduce form where the primitive can."""
    if collective not in _CMD or nranks < 2:
        return []
    n, d = nranks, float(nbytes)
    c = _Cost(topo)
    staged = _staged(topo.product, dtype_value, reduce_op) if collective in ("allreduce", "reduce_scatter") else False
    costs = _flat_costs(collective, c, n, d)
    servers = two_level(topo, n) if collective in ("allreduce", "allgather", "reduce_scatter") else ""
    if not isinstance(servers, str) and len(servers) > 1 and len(servers[0]) > 1:
        costs.update(_two_level_costs(collective, c, servers, d))
    if collective in ("allreduce", "reduce_scatter"):
        op = "AicpuAllReduce" if collective == "allreduce" else "AicpuReduceScatter"
        cost, pairs = costs[f"{op}SoleNHR"]
        if staged:  # write-reduce refused: the kernel's own reduction instead
            costs.pop(f"{op}SoleNHR")
            costs.pop(f"{op}SoleMeshChunk" + ("TwoShot" if collective == "allreduce" else ""))
            costs[f"{op}SoleNHRAicpuReduce"] = (cost * 1.5, pairs)
    out: list[Entry] = []
    for name, (cost_us, pairs) in costs.items():
        down = _down_in(topo, pairs)
        executor, levels = _split_name(name)
        why = f"needs the {down[0]}-{down[1]} link, which is down" if down is not None else ""
        out.append(Entry(name, name, levels[0], -1.0 if why else cost_us * 1e-6, why, executor, levels))
    return out


def _staged(product: str, dtype_value: int | None, reduce_op: int | None) -> bool:
    """The Hcomm reduce primitive cannot take the dtype / op on this product (A2/A3: int8, int16,
    int32, fp16, fp32, bf16 with sum / max / min; Ascend950 everything)."""
    if product == "950" or dtype_value is None:
        return False
    return dtype_value not in (0, 1, 2, 3, 4, 11) or reduce_op == 1


_TEMPLATE_WORDS = ("MeshChunkTwoShot", "MeshOneShot", "MeshTwoShot", "MeshChunk", "MeshConcur", "Mesh",
                   "NHRAicpuReduce", "NHR")


def _split_name(name: str) -> tuple[str, tuple[str, ...]]:
    """CANN's executor and templates of an algorithm name (lower-cased, as the tuner plugin and
    HCCL_ALGO's grammar see them): AicpuAllReduceSequenceMeshConcurNHR -> sequence, (meshconcur, nhr)."""
    for op in _CMD.values():
        prefix = "Aicpu" + op[1]
        if name.startswith(prefix):
            rest = name[len(prefix):]
            break
    else:
        return "sole", (name.lower(),)
    executor = next(e for e in ("Sole", "Sequence", "Parallel") if rest.startswith(e))
    rest = rest[len(executor):]
    levels = []
    while rest:
        word = next(w for w in _TEMPLATE_WORDS if rest.startswith(w))
        levels.append(word.lower())
        rest = rest[len(word):]
    return executor.lower(), tuple(levels)


def _down_in(topo: Topology, pairs) -> tuple[int, int] | None:
    for a, b in pairs:
        if topo.is_down(a, b):
            return (min(a, b), max(a, b))
    return None


# ---- HCCL_ALGO in CANN's executor grammar (hicann/hccl src/common/alg_parse.cc) ----------------
_OP_TYPES = {"allgather", "allgatherv", "allreduce", "alltoall", "alltoallv", "alltoallvc", "broadcast", "reduce",
             "reducescatter", "reducescatterv", "scatter"}
_EXECUTORS = {"sole", "sequence", "parallel", "pipeline", "concur", "strictordered"}
_ALGO_TYPES = {"mesh", "mesh2die", "meshoneshot", "meshtwoshot", "meshconcur", "meshmultilink", "meshchunk",
               "meshchunktwoshot", "nhr", "nhrmultilink", "nhraicpureduce", "nhrsinglechannel", "meshconcurrent"}
_OUR_OP_TYPE = {"allreduce": "allreduce", "allgather": "allgather", "reduce_scatter": "reducescatter",
                "alltoall": "alltoall"}


@dataclass(frozen=True)
class AlgoRule:
    """One segment of ``HCCL_ALGO`` in CANN's executor grammar.

    Attributes:
        op: CANN's op type (``allreduce``, ``reducescatter``, ...) or None for every op.
        executor: ``sole``, ``sequence``, ...
        levels: (template, enabled) per level; empty = any templates.
        enable: False for ``not(...)``.
    """

    op: str | None
    executor: str
    levels: tuple[tuple[str, bool], ...]
    enable: bool = True

    def matches(self, entry: Entry) -> bool:
        if entry.executor != self.executor:
            return False
        if not self.levels:
            return True
        return len(self.levels) == len(entry.levels) and all(
            (tpl == have) == on for (tpl, on), have in zip(self.levels, entry.levels))


def _camel_lower(name: str) -> str:
    """CANN's UnderscoreToCamelCase, lowered: ``mesh_one_shot`` -> ``meshoneshot``."""
    return name.replace("_", "").lower()


def parse_algo_rules(text: str | None) -> tuple[AlgoRule, ...] | None:
    """``HCCL_ALGO`` parsed in CANN's executor grammar, or None when it is not that grammar (then
    CANN tries its older ``level0:NA;level1:ring`` rules, as
    :func:`hcomm_kit.ops.algorithms.parse_hccl_algo` does)::

        rules    := segment (';' segment)*
        segment  := [op ':'] ( 'not' '(' unit ')' | unit )
        unit     := executor '{' [item (',' item)*] '}' | template      (template = sole{template})
        item     := ['levelN' '='] ( 'not' '(' template ')' | template )
    """
    if not text or not text.strip():
        return None
    try:
        return tuple(_parse_segment(seg) for seg in text.split(";"))
    except ValueError:
        return None


def _parse_segment(seg: str) -> AlgoRule:
    seg = seg.strip()
    op = None
    head, sep, rest = seg.partition(":")
    if sep and "{" not in head and "(" not in head:
        op = head.strip().lower()
        if op not in _OP_TYPES:
            raise ValueError(op)
        seg = rest.strip()
    enable = True
    if seg.lower().startswith("not(") and seg.endswith(")"):
        enable, seg = False, seg[4:-1].strip()
    if "{" in seg:
        name, _, body = seg.partition("{")
        executor = name.strip().lower()
        if executor not in _EXECUTORS or not body.endswith("}"):
            raise ValueError(seg)
        slots: dict[int, tuple[str, bool]] = {}
        items = [i.strip() for i in body[:-1].split(",") if i.strip()]
        for k, item in enumerate(items):
            where = k
            if item.lower().startswith("level") and "=" in item:
                lv, _, item = item.partition("=")
                if not lv[5:].strip().isdigit():
                    raise ValueError(lv)
                where = int(lv[5:])
            item = item.strip()
            on = not (item.lower().startswith("not(") and item.endswith(")"))
            tpl = _camel_lower(item if on else item[4:-1].strip())
            if tpl not in _ALGO_TYPES:
                raise ValueError(tpl)
            slots[where] = (tpl, on)
        return AlgoRule(op, executor, tuple(slots[k] for k in sorted(slots)), enable)
    tpl = _camel_lower(seg)
    if tpl not in _ALGO_TYPES:
        raise ValueError(tpl)
    return AlgoRule(op, "sole", ((tpl, True),), enable)


def _apply_rules(collective: str, entries: list[Entry], rules: tuple[AlgoRule, ...]) -> list[Entry]:
    """The entries ``HCCL_ALGO`` leaves (CANN's UpdateCostModelWithAlgo: the last rule for this op
    that matches something decides; a positive one keeps only its matches among the enabled
    entries, a ``not(...)`` one drops its matches)."""
    op = _OUR_OP_TYPE.get(collective)
    for rule in reversed(rules):
        if rule.op is not None and rule.op != op:
            continue
        if rule.enable:
            hit = [e for e in entries if e.cost >= 0 and rule.matches(e)]
            if hit:
                return hit
        else:
            kept = [e for e in entries if not rule.matches(e)]
            if len(kept) != len(entries):
                return kept
    return entries


def choose(collective: str, nbytes: int, dtype_value: int, topo: Topology, nranks: int, rt=None,
           handle=None, rules: tuple[AlgoRule, ...] | None = None, reduce_op: int | None = None) -> str | None:
    """The algorithm to run (None: the collective has no choice, let the kernel decide).

    ``rules`` (``HCCL_ALGO`` in CANN's executor grammar, :func:`parse_algo_rules`) filter the
    offered entries first. The emulator's ``HcommKitTunerSelect`` (when present) runs CANN's tuner
    plugin over the entries, logs the choice and returns it; otherwise the cheapest enabled entry
    wins.

    Raises:
        ConfigError: every algorithm needs a link that is down, or ``HCCL_ALGO`` left none.
    """
    entries = offer(collective, nbytes, topo, nranks, dtype_value, reduce_op)
    if rules:
        entries = _apply_rules(collective, entries, rules)
    if not entries:
        if rules:
            raise ConfigError(f"{collective}: HCCL_ALGO excludes every algorithm of the built-in "
                              f"({'; '.join(_rule_text(r) for r in rules)})", key="HCCL_ALGO")
        return None
    if rt is not None and handle is not None and rt.backend == "emu" and rt.has("HcommKitTunerSelect"):
        k = len(entries)
        names = (ctypes.c_char_p * k)(*(e.alg_name.encode() for e in entries))
        templates = (ctypes.c_char_p * k)(*(e.template.encode() for e in entries))
        costs = (ctypes.c_float * k)(*(e.cost for e in entries))
        idx = rt.checked.HcommKitTunerSelect(handle, _CMD[collective][0], nbytes, dtype_value, names, templates,
                                             costs, k)
        if 0 <= idx < k:
            return entries[idx].algorithm
    else:
        live = [e for e in entries if e.cost >= 0]
        if live:
            return min(live, key=lambda e: e.cost).algorithm
    why = "; ".join(f"{e.algorithm} {e.why}" for e in entries if e.why) or "every algorithm was disabled"
    raise ConfigError(f"{collective}: no algorithm of the built-in can run on this topology ({topo.source}, "
                      f"links down {', '.join(f'{a}-{b}' for a, b in topo.links_down) or 'none'}): {why}; "
                      f"route around the link with an operator of your own", key="algorithm")


def _rule_text(rule: AlgoRule) -> str:
    levels = ",".join(f"level{i}={t if on else f'not({t})'}" for i, (t, on) in enumerate(rule.levels))
    unit = f"{rule.executor}{{{levels}}}"
    return f"{rule.op + ':' if rule.op else ''}{unit if rule.enable else f'not({unit})'}"
