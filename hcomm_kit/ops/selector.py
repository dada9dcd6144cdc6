"""Algorithm selection of the built-in collectives: each offers its algorithms with a cost, the
cheapest runs unless ``algorithm=`` / ``--algorithm`` / ``HCCL_ALGO`` names one.

The cost has the shape of HCCL's own model (hicann/hccl ``src/ops/op_common/selector/cost_model.cc``:
``cost = A * D + B * D + C``, A the transfer over the links, B the local copies and reductions,
C a latency per task; on a mesh a rank's peers move in parallel, on a switched network (CLOS)
its remote peers share its port), with HCCL's bandwidths where it has them (cross-chip 56 GB/s,
local copy 750 GB/s, local reduce 483 GB/s, 2 us per AICPU task) and, per link type of the
communicator's topology, RoCE at 25 GB/s (a 200 Gb/s port: hcomm-kit's assumption). An algorithm
that needs a link taken down (``HCOMM_KIT_LINKS_DOWN``) is not offered.

CANN's tuner plugin (``HCCL_TUNER_PLUGIN``) then sees the entries (named as CANN names them:
engine ``aicpu``, executor ``sole``, template ``ring`` / ``mesh`` / ``meshoneshot`` / ``pairwise``)
and may change their costs (< 0 disables, 0 prefers); the emulator loads it
(``HcommKitTunerSelect``) and logs the choice at info level.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..base.errors import ConfigError
from ..core.topology import Topology

__all__ = ["Entry", "offer", "choose"]

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


@dataclass
class Entry:
    """One algorithm offered for a call: our name, CANN's names, its cost (s; < 0 = disabled)."""

    algorithm: str
    alg_name: str
    template: str
    cost: float
    why: str = ""


def _peer_time(topo: Topology, rank: int, nranks: int, nbytes: float) -> float:
    """A rank moving nbytes with every peer at once: mesh links in parallel, the remote peers
    (RoCE, a switched network) through one port one after another."""
    local = remote = 0.0
    for peer in range(nranks):
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

    def add(algo: str, cost: float, pairs) -> None:
        down = _down_in(topo, pairs)
        template = _TEMPLATE.get((collective, algo), algo)
        name = f"Aicpu{_CMD[collective][1]}Sole{template.capitalize()}"
        if down is not None:
            out.append(Entry(algo, name, template, -1.0, f"needs the {down[0]}-{down[1]} link, which is down"))
        else:
            out.append(Entry(algo, name, template, cost))

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
    return out


def choose(collective: str, nbytes: int, dtype_value: int, topo: Topology, nranks: int, rt=None,
           handle=None) -> str | None:
    """The algorithm to run (None: the collective has no choice, let the kernel decide).

    The emulator's ``HcommKitTunerSelect`` (when present) runs CANN's tuner plugin over the
    entries, logs the choice and returns it; otherwise the cheapest enabled entry wins.

    Raises:
        ConfigError: every algorithm needs a link that is down.
    """
    entries = offer(collective, nbytes, topo, nranks)
    if not entries:
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
