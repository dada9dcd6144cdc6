"""Algorithm selection of the built-in collectives: each offers its algorithms with a cost, the
cheapest runs unless ``algorithm=`` / ``--algorithm`` / ``HCCL_ALGO`` names one.

The cost has the shape of HCCL's own model (hicann/hccl ``src/ops/op_common/selector/cost_model.cc``:
the transfers over the links, the local copies and reductions, a latency per AICPU task, "aicpu
unfolding time taken as max at the end"), counted as the built-in kernels really run
(``aicpu_kernels/*/exec_op.cc``): the slices they cut a message into (``HK_CACHE_SLICE_BYTES``),
the tasks each slice issues on the busiest rank, which transfers one thread makes one after
another (the one-shot allreduce reads its peers in turn) and which run on a thread per peer. Every
figure comes from the timing model's parameters of the topology's product
(:mod:`hcomm_kit.base.model_params`, ``model/params/<product>.toml``: task, launch, copy and
reduce figures, per link type its latency, bandwidth, utilisation by size and port), so the cost
is the model's estimate of the call: ``launch + max(tasks x task_us, data time)``, and the choice
agrees with the modelled time (tests/test_model.py). An algorithm that needs a link taken down
(``HCOMM_KIT_LINKS_DOWN``) is not offered.

On a topology of several servers of equal size, allreduce and allgather also offer the two-level
algorithm (``hierarchical``; CANN's executor ``sequence`` with a mesh at level 0, inside a server,
and at level 1, among the ranks with the same local index: ``AicpuAllReduceSequenceMeshMesh``), its
cost the sum of its levels' costs, as CANN's sequence executors add theirs.

``HCCL_ALGO`` in the grammar of CANN's ``alg_parse.cc`` (``[op:]executor{level0=tpl,level1=tpl}``,
``[op:]template``, ``not(...)``, segments separated by ``;``, later ones first) filters the entries
as CANN's ``UpdateCostModelWithAlgo`` does: a rule that matches keeps only what it names, a
``not(...)`` rule drops what it names, a rule that matches nothing leaves the choice to the model.
(CANN's documented ``level0:NA;level1:ring`` form names one flat algorithm and is handled by
:func:`hcomm_kit.ops.algorithms.parse_hccl_algo`.)

CANN's tuner plugin (``HCCL_TUNER_PLUGIN``) then sees the entries (named as CANN names them:
engine ``aicpu``, executor ``sole`` / ``sequence``, template ``ring`` / ``mesh`` / ``meshoneshot`` /
``pairwise``) and may change their costs (< 0 disables, 0 prefers); the emulator loads it
(``HcommKitTunerSelect``) and logs the choice at info level.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

from ..base import model_params
from ..base.errors import ConfigError
from ..core.topology import Topology

__all__ = ["Entry", "AlgoRule", "offer", "choose", "two_level", "parse_algo_rules"]

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


# Slicing of the built-in kernels (aicpu_kernels/_common/hk_coll.h: HK_CACHE_SLICE_BYTES, the
# largest piece a kernel moves per peer region or chunk; HK_PIPE_SLICE_BYTES / HK_PIPE_MIN_BYTES,
# the pairwise alltoall's pipeline; checked against the header by tests/test_model.py).
CACHE_SLICE_BYTES = 512 * 1024
PIPE_SLICE_BYTES = 2 << 20
PIPE_MIN_BYTES = 4 << 20


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

    def link(self, a: int, b: int, nbytes: float, op: str = "write") -> float:
        """One transfer (a write or a read) of nbytes between ranks a and b, alone on its link
        (latency included), and the notify that tells the peer it landed."""
        if nbytes <= 0:
            return 0.0
        lp = self.p.links[self.topo.link_type(a, b)]
        return lp.transfer_us(nbytes, op) + lp.notify_us

    def parallel(self, rank: int, peers, nbytes: float, op: str = "write") -> float:
        """rank moving nbytes with each of peers at once (a thread per peer): its own links in
        parallel, each link type's port (when the product has one) shared by the peers behind it."""
        by_kind: dict[str, list[int]] = {}
        for q in peers:
            if q != rank:
                by_kind.setdefault(self.topo.link_type(rank, q), []).append(q)
        worst = 0.0
        for kind, qs in by_kind.items():
            lp = self.p.links[kind]
            t = max(self.link(rank, q, nbytes, op) for q in qs)
            if lp.port_GBps > 0:
                t = max(t, lp.latency_us + len(qs) * nbytes / (lp.port_GBps * 1e3))
            worst = max(worst, t)
        return worst

    def serial(self, rank: int, peers, nbytes: float, op: str = "write") -> float:
        """rank moving nbytes with each of peers in turn (one thread)."""
        return sum(self.link(rank, q, nbytes, op) for q in peers if q != rank)

    def serial_all(self, rank: int, nbytes: float, op: str = "read") -> float:
        """rank reading nbytes from every peer in rank order while every other rank does the same
        (the one-shot allreduce): a peer's port of a link type (when the product has one) serves
        all the ranks that reach it over that type at once."""
        n = self.topo.nranks
        total = 0.0
        for q in range(n):
            if q == rank:
                continue
            kind = self.topo.link_type(rank, q)
            lp = self.p.links[kind]
            t = self.link(rank, q, nbytes, op)
            if lp.port_GBps > 0:
                readers = sum(1 for r in range(n) if r != q and self.topo.link_type(r, q) == kind)
                t = max(t, lp.latency_us + readers * nbytes / (lp.port_GBps * 1e3))
            total += t
        return total

    def total(self, tasks: float, data: float, last: float = 0.0) -> float:
        """A call: the host launch, then the AICPU's issue of every task and the run of the last
        one(s) issued (last), or the data, whichever is longer (the issue overlaps the transfers)."""
        return self.p.launch_us + max(self.tasks(tasks) + last, data)


def _slices(nbytes: float, piece: float) -> int:
    return max(1, math.ceil(nbytes / piece)) if nbytes > 0 else 1


def _ring_pairs(n: int) -> list[tuple[int, int]]:
    return [(r, (r + 1) % n) for r in range(n)]


def _ring_step(c: _Cost, n: int, nbytes: float) -> float:
    """One ring step: every rank sends nbytes to its next, which then tells it that it may send the
    next piece (a second notify); the slowest link decides."""
    return max(c.link(a, b, nbytes) + c.p.links[c.topo.link_type(a, b)].notify_us for a, b in _ring_pairs(n))


def _allreduce_costs(c: _Cost, n: int, d: float) -> dict[str, float]:
    """allreduce of d bytes per rank (aicpu_kernels/allreduce/op_kernel_aicpu/exec_op.cc)."""
    out = {}
    # one-shot mesh, slices of CACHE_SLICE_BYTES, one thread: stage the slice, then read (and
    # reduce) every peer's slice in turn; 5n - 1 tasks a slice
    k = _slices(d, CACHE_SLICE_BYTES)
    s = d / k
    last = max(c.link(r, q, s, "read") for r in range(n) for q in range(n) if q != r) + c.reduce(s)
    out["mesh"] = c.total(k * (5 * n - 1), k * (c.copy(s) + max(c.serial_all(r, s) for r in range(n))
                                                  + (n - 1) * c.reduce(s)), last)
    if n == 2:
        # pair: slices of 2 x CACHE_SLICE_BYTES; write-reduce half, read it back, copies; 8 tasks a slice
        k = _slices(d, 2 * CACHE_SLICE_BYTES)
        h = d / k / 2
        out["ring"] = c.total(2 + 8 * k, k * (2 * c.link(0, 1, h) + c.reduce(h) + 2 * c.copy(h)))
    else:
        # ring: slices of n x CACHE_SLICE_BYTES cut into n chunks; reduce-scatter by write-reduce
        # over the ring (n - 1 steps), allgather by reads from every peer in turn; 10n - 5 tasks a slice
        k = _slices(d, n * CACHE_SLICE_BYTES)
        ch = d / k / n
        out["ring"] = c.total(k * (10 * n - 5), k * ((n - 1) * (_ring_step(c, n, ch) + c.reduce(ch)) + c.copy(
            (n - 1) * ch) + c.copy(ch) + max(c.serial(r, range(n), ch, "read") for r in range(n))))
    return out


def _block_costs(collective: str, c: _Cost, n: int, b: float) -> dict[str, float]:
    """allgather / reduce_scatter with blocks of b bytes (aicpu_kernels/{allgather,reduce_scatter}):
    slices of CACHE_SLICE_BYTES per block; mesh: a thread per peer (the main thread alone with 2
    ranks), ring: n - 1 steps on one thread."""
    k = _slices(b, CACHE_SLICE_BYTES)
    s = b / k
    red = collective == "reduce_scatter"
    workers = n - 1 if n > 2 else 0
    # tasks a slice on a rank (as the model logs them): mesh 9 with 2 ranks, else 10n - 7
    # (ACKs, fan-out / in, a worker per peer: start, wait, write, record, finish; n reductions) for
    # reduce_scatter and 9n - 5 (stage, fan-out / in, workers: start, record, wait, read, record,
    # wait, finish; own copy) for allgather; ring 6n - 3 (n - 1 steps of wait, write, record,
    # wait, ACK, copy / stage)
    mesh_tasks = 9 if n == 2 else (10 * n - 7 if red else 9 * n - 5)
    ring_tasks = 6 * n - 3
    if red:
        mesh_local = c.copy(s) + (n - 1) * c.reduce(s)
    else:
        mesh_local = 2 * c.copy(s)
    op = "write" if red else "read"  # reduce_scatter's workers write-reduce, allgather's read
    mesh_links = max(c.parallel(r, range(n), s, op) for r in range(n)) if workers else c.link(0, 1, s, op)
    out = {"mesh": c.total(k * mesh_tasks, k * (mesh_links + mesh_local))}
    if red:  # stage n - 1 blocks, n - 1 write-reduce steps, the result copied out
        ring_data = (n - 1) * (_ring_step(c, n, s) + c.reduce(s)) + n * c.copy(s)
    else:  # own copy, n - 1 write steps, each received block copied out
        ring_data = (n - 1) * (_ring_step(c, n, s) + c.copy(s)) + c.copy(s)
    out["ring"] = c.total(k * ring_tasks, k * ring_data)
    return out


def _alltoall_costs(c: _Cost, n: int, d: float) -> dict[str, float]:
    """alltoall with a send buffer of d bytes (d / n per peer; aicpu_kernels/_common/hk_alltoall.h):
    mesh, a thread per peer; pairwise, n - 1 exchanges in turn on the main thread, pipelined in
    PIPE_SLICE_BYTES rounds above PIPE_MIN_BYTES."""
    b = d / n
    rounds = 1 if b <= PIPE_MIN_BYTES else _slices(b, PIPE_SLICE_BYTES)
    s = b / rounds
    # tasks on a rank: mesh 10n - 7 (fan-out / in, a worker per peer), pairwise 6 (n - 1) per round + 7
    out = {"mesh": c.total(10 * n - 7 + 6 * (n - 1) * (rounds - 1),
                           max(c.parallel(r, range(n), s) for r in range(n)) * rounds + 2 * c.copy(b))}
    out["pairwise"] = c.total(7 + 6 * (n - 1) * rounds,
                              max(c.serial(r, range(n), s) for r in range(n)) * rounds + c.copy(b) * n)
    return out


def offer(collective: str, nbytes: int, topo: Topology, nranks: int) -> list[Entry]:
    """The algorithms of a built-in collective for a call of ``nbytes`` per rank (the kernel's
    measure: allreduce the input, allgather / reduce_scatter the block, alltoall the whole send
    buffer), with their costs (s); an algorithm that needs a downed link gets cost -1."""
    if collective not in _CMD or nranks < 2:
        return []
    n, d = nranks, float(nbytes)
    c = _Cost(topo)
    everyone = [(a, b) for a in range(n) for b in range(a + 1, n)]
    out: list[Entry] = []

    def add(algo: str, cost_us: float, pairs, levels: tuple[str, ...] = ()) -> None:
        down = _down_in(topo, pairs)
        template = _TEMPLATE.get((collective, algo), algo)
        executor = "sequence" if levels else "sole"
        levels = levels or (template,)
        name = f"Aicpu{_CMD[collective][1]}{executor.capitalize()}{''.join(t.capitalize() for t in levels)}"
        why = f"needs the {down[0]}-{down[1]} link, which is down" if down is not None else ""
        out.append(Entry(algo, name, levels[0], -1.0 if why else cost_us * 1e-6, why, executor, levels))

    if collective == "allreduce":
        costs = _allreduce_costs(c, n, d)
    elif collective in ("allgather", "reduce_scatter"):
        costs = _block_costs(collective, c, n, d)
    else:
        costs = _alltoall_costs(c, n, d)
    for algo, cost in costs.items():
        # a flat built-in opens a channel to every peer (HkMeshBufferBytes): it needs every link
        add(algo, cost, everyone)
    servers = two_level(topo, n) if collective in ("allreduce", "allgather") else ""
    if not isinstance(servers, str) and len(servers) > 1 and len(servers[0]) > 1:
        cost, pairs = _two_level_cost(collective, c, servers, d)
        add("hierarchical", cost, pairs, ("mesh", "mesh"))
    return out


def _down_in(topo: Topology, pairs) -> tuple[int, int] | None:
    for a, b in pairs:
        if topo.is_down(a, b):
            return (min(a, b), max(a, b))
    return None


def _two_level_cost(collective: str, c: _Cost, servers, d: float) -> tuple[float, list]:
    """Cost (us) of the two-level algorithm (CANN's sequence executors add their levels' costs)
    and the links it needs: every pair inside a server, and the pairs of ranks with the same local
    index on different servers. One thread, slices of CACHE_SLICE_BYTES per chunk region.

    allreduce (L ranks a server, S servers; slices of L chunks): stage the slice, read and reduce
    chunk li from each server peer in turn, then from each level-1 peer, then read each server
    peer's reduced chunk; 4 + 10 (L - 1) + 5 (S - 1) tasks a slice. allgather (slices of a block):
    read each level-1 peer's block, then each server peer's S blocks; 1 + S + 3 (S - 1) + (L - 1)
    (3 + S) + 1 tasks a slice.
    """
    nl, ns = len(servers[0]), len(servers)
    local = [[s[j] for j in range(nl)] for s in servers]
    inter = [[s[j] for s in servers] for j in range(nl)]
    group_of = {r: (g, inter[j]) for g in local for j, r in enumerate(g)}
    ranks = [r for g in local for r in g]

    def serial(which: int, nbytes: float) -> float:  # the two-level kernel reads its peers in turn
        return max(c.serial(r, group_of[r][which], nbytes, "read") for r in ranks)

    if collective == "allreduce":
        k = _slices(d, nl * CACHE_SLICE_BYTES)
        ch = d / k / nl
        data = (c.copy(nl * ch) + serial(0, ch) + (nl - 1) * c.reduce(ch) + serial(1, ch) + (ns - 1) * c.reduce(ch)
                + c.copy(ch) + serial(0, ch))
        last = max(c.link(r, q, ch, "read") for g in local for r in g for q in g if q != r)
        cost = c.total(k * (4 + 10 * (nl - 1) + 5 * (ns - 1)), k * data, last)
    else:
        k = _slices(d, CACHE_SLICE_BYTES)
        s = d / k
        data = c.copy(s) + serial(1, s) + ns * c.copy(s) + serial(0, ns * s)
        cost = c.total(k * (2 + ns + 3 * (ns - 1) + (nl - 1) * (3 + ns)), k * data)
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
