"""Algorithm selection of the built-in collectives: each offers its algorithms with a cost, the
cheapest runs unless ``algorithm=`` / ``--algorithm`` / ``HCCL_ALGO`` names one.

The cost has the shape of HCCL's own model (hicann/hccl ``src/ops/op_common/selector/cost_model.cc``:
``cost = A * D + B * D + C``, A the transfer over the links, B the local copies and reductions,
C a latency per task; on a mesh a rank's peers move in parallel, on a switched network (CLOS)
its remote peers share its port), with HCCL's bandwidths where it has them (cross-chip 56 GB/s,
local copy 750 GB/s, local reduce 483 GB/s, 2 us per AICPU task) and, per link type of the
communicator's topology, RoCE at 25 GB/s (a 200 Gb/s port: hcomm-kit's assumption). An algorithm
that needs a link taken down (``HCOMM_KIT_LINKS_DOWN``) is not offered.

On a topology of several servers of equal size, allreduce and allgather also offer the two-level
algorithm (``hierarchical``; CANN's executor ``sequence`` with a mesh at level 0, inside a server,
and at level 1, among the ranks with the same local index: ``AicpuAllReduceSequenceMeshMesh``), its
cost the sum of its levels' costs, as CANN's sequence executors add theirs.

``HCCL_ALGO`` in the grammar of CANN's ``alg_parse.cc`` (``[op:]executor{level0=tpl,level1=tpl}``,
``[op:]template``, ``not(...)``, segments separated by ``;``, later ones first) filters the entries
as CANN's ``UpdateCostModelWithAlgo`` does: a rule that matches keeps only what it names, a
``not(...)`` rule drops what it names, a rule that matches nothing leaves the choice to the model.
(CANN's documented ``level0:NA;level1:ring`` form names one flat algorithm and is handled by
:func:`hcomm_kit.ops.collectives.parse_hccl_algo`.)

CANN's tuner plugin (``HCCL_TUNER_PLUGIN``) then sees the entries (named as CANN names them:
engine ``aicpu``, executor ``sole`` / ``sequence``, template ``ring`` / ``mesh`` / ``meshoneshot`` /
``pairwise``) and may change their costs (< 0 disables, 0 prefers); the emulator loads it
(``HcommKitTunerSelect``) and logs the choice at info level.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..base.errors import ConfigError
from ..core.topology import Topology

__all__ = ["Entry", "AlgoRule", "offer", "choose", "two_level", "parse_algo_rules"]

# HCCL's cost-model constants (cost_model.cc InitBandwidth / CalcLatencyParams), bytes/s and s.
CROSS_CHIP_BW = 56e9
LOCAL_COPY_BW = 750e9
LOCAL_REDUCE_BW = 483e9
TASK_LATENCY = 2e-6
LINK_BW = {"HCCS": CROSS_CHIP_BW, "UB": CROSS_CHIP_BW, "RoCE": 25e9}

# collective -> HcclCMDType (hccl_types.h), CANN's op name in the tuner's entries
_CMD = {"allreduce": (2, "AllReduce"), "allgather": (6, "AllGather"), "reduce_scatter": (7, "ReduceScatter"),
        "alltoall": (10, "AlltoAll")}
# our algorithm -> CANN template name, per collective
_TEMPLATE = {("allreduce", "mesh"): "meshoneshot"}


# The largest communicator the two-level layout describes (HK_HIER_MAX_RANKS of hk_coll.h).
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


def _peer_time(topo: Topology, rank: int, nranks: int, nbytes: float) -> float:
    """A rank moving nbytes with every peer at once: mesh links in parallel, the remote peers
    (RoCE, a switched network) through one port one after another."""
    return _peers_time(topo, rank, range(nranks), nbytes)


def _peers_time(topo: Topology, rank: int, peers, nbytes: float) -> float:
    """:func:`_peer_time` with the given peers only (``rank`` itself is skipped)."""
    local = remote = 0.0
    for peer in peers:
        if peer == rank:
            continue
        kind = topo.link_type(rank, peer)
        if kind == "RoCE":
            remote += nbytes / LINK_BW["RoCE"]
        else:
            local = max(local, nbytes / LINK_BW[kind])
    return max(local, remote)


def _mesh_time(topo: Topology, nranks: int, nbytes: float) -> float:
    return max(_peer_time(topo, r, nranks, nbytes) for r in range(nranks))


def _ring_bw(topo: Topology, nranks: int) -> float:
    return min(LINK_BW[topo.link_type(r, (r + 1) % nranks)] for r in range(nranks))


def _down_in(topo: Topology, pairs) -> tuple[int, int] | None:
    for a, b in pairs:
        if topo.is_down(a, b):
            return (min(a, b), max(a, b))
    return None


def offer(collective: str, nbytes: int, topo: Topology, nranks: int) -> list[Entry]:
    """The algorithms of a built-in collective for a call of ``nbytes`` per rank (the kernel's
    measure: allreduce the input, allgather / reduce_scatter the block, alltoall the whole send
    buffer), with their costs; an algorithm that needs a downed link gets cost -1."""
    if collective not in _CMD or nranks < 2:
        return []
    n, d = nranks, float(nbytes)
    everyone = [(a, b) for a in range(n) for b in range(a + 1, n)]
    ring = [(r, (r + 1) % n) for r in range(n)]
    out: list[Entry] = []

    def add(algo: str, cost: float, pairs, levels: tuple[str, ...] = ()) -> None:
        down = _down_in(topo, pairs)
        template = _TEMPLATE.get((collective, algo), algo)
        executor = "sequence" if levels else "sole"
        levels = levels or (template,)
        name = f"Aicpu{_CMD[collective][1]}{executor.capitalize()}{''.join(t.capitalize() for t in levels)}"
        why = f"needs the {down[0]}-{down[1]} link, which is down" if down is not None else ""
        out.append(Entry(algo, name, levels[0], -1.0 if why else cost, why, executor, levels))

    if collective == "allreduce":
        add("mesh", _mesh_time(topo, n, d) + (n - 1) * d / LOCAL_REDUCE_BW + TASK_LATENCY * 2 * (n - 1), everyone)
        add("ring", 2 * (n - 1) / n * d / _ring_bw(topo, n) + (n - 1) / n * d / LOCAL_REDUCE_BW + d / LOCAL_COPY_BW
            + TASK_LATENCY * 4 * (n - 1), ring)
    elif collective in ("allgather", "reduce_scatter"):
        local = (n - 1) * d / LOCAL_REDUCE_BW if collective == "reduce_scatter" else d / LOCAL_COPY_BW
        add("mesh", _mesh_time(topo, n, d) + local + TASK_LATENCY * 2 * (n - 1), everyone)
        add("ring", (n - 1) * d / _ring_bw(topo, n) + local + TASK_LATENCY * 2 * (n - 1), ring)
    else:  # alltoall(v): d is the whole send buffer, d / n per peer
        add("mesh", _mesh_time(topo, n, d / n) + TASK_LATENCY * 2 * (n - 1), everyone)
        add("pairwise", sum(d / n / LINK_BW[topo.link_type(0, s)] for s in range(1, n)) + TASK_LATENCY * 2 * (n - 1),
            everyone)
    servers = two_level(topo, n) if collective in ("allreduce", "allgather") else ""
    if not isinstance(servers, str) and len(servers) > 1 and len(servers[0]) > 1:
        cost, pairs = _two_level_cost(collective, topo, servers, d)
        add("hierarchical", cost, pairs, ("mesh", "mesh"))
    return out


def _two_level_cost(collective: str, topo: Topology, servers, d: float) -> tuple[float, list]:
    """Cost of the two-level algorithm (the sum of its levels, as CANN's sequence executors add
    their templates' costs) and the links it needs: every pair inside a server, and the pairs of
    ranks with the same local index on different servers.

    allreduce: level-0 reduce-scatter (d/L to and from each server peer, L - 1 reductions of d/L,
    the input staged once), level-1 allreduce of d/L (S - 1 partial chunks in, S - 1 reductions),
    level-0 allgather (d/L per server peer, a copy of d/L). allgather (d = the block): level 1
    brings S - 1 blocks in (one staged), level 0 the S blocks each server peer gathered (S copies).
    A mesh phase costs two notify tasks per peer, as the flat mesh does.
    """
    nl, ns = len(servers[0]), len(servers)
    local = [[s[j] for j in range(nl)] for s in servers]
    inter = [[s[j] for s in servers] for j in range(nl)]
    group_of = {r: (g, inter[j]) for g in local for j, r in enumerate(g)}

    def level(which: int, nbytes: float) -> float:
        return max(_peers_time(topo, r, group_of[r][which], nbytes) for g in local for r in g)

    if collective == "allreduce":
        c = d / nl
        cost = (level(0, c) + (nl - 1) * c / LOCAL_REDUCE_BW + d / LOCAL_COPY_BW
                + level(1, c) + (ns - 1) * c / LOCAL_REDUCE_BW
                + level(0, c) + c / LOCAL_COPY_BW + TASK_LATENCY * 2 * (2 * (nl - 1) + ns - 1))
    else:
        cost = (level(1, d) + d / LOCAL_COPY_BW + level(0, ns * d) + ns * d / LOCAL_COPY_BW
                + TASK_LATENCY * 2 * (nl - 1 + ns - 1))
    pairs = [(a, b) for g in local + inter for i, a in enumerate(g) for b in g[i + 1:]]
    return cost, pairs


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
    :func:`hcomm_kit.ops.collectives.parse_hccl_algo` does)::

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
           handle=None, rules: tuple[AlgoRule, ...] | None = None) -> str | None:
    """The algorithm to run (None: the collective has no choice, let the kernel decide).

    ``rules`` (``HCCL_ALGO`` in CANN's executor grammar, :func:`parse_algo_rules`) filter the
    offered entries first. The emulator's ``HcommKitTunerSelect`` (when present) runs CANN's tuner
    plugin over the entries, logs the choice and returns it; otherwise the cheapest enabled entry
    wins.

    Raises:
        ConfigError: every algorithm needs a link that is down, or ``HCCL_ALGO`` left none.
    """
    entries = offer(collective, nbytes, topo, nranks)
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
