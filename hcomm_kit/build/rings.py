"""Rings through every rank of a communicator whose neighbours never sit across a downed link.

An operator with ``[resources.channels] topology = "ring"`` gets its ring from here: ring 0 in
rank order (``ring_order = "rank"``) or the Hamiltonian cycle of the rank graph closest to rank
order (``ring_order = "avoid-down"``: the complete graph of the ranks minus the links taken down,
``HCOMM_KIT_LINKS_DOWN``), and with ``rings = N`` up to N - 1 more rings that share no link with
each other or with ring 0 (so that N rings, each run in both directions, use 2N links of every
rank at once). Every rank computes the same rings from the same topology: the search is
deterministic (lowest rank first) and bounded.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..base.errors import ConfigError

__all__ = ["RING_ORDERS", "ring_orders", "rank_ring_crossing"]

#: ``[resources.channels] ring_order`` values.
RING_ORDERS = ("rank", "avoid-down")

# Steps of the depth-first search per ring (a dense rank graph needs a few dozen; a graph with no
# Hamiltonian cycle left is given up on after this many, which takes a few tens of ms).
_SEARCH_STEPS = 20000


def _links_text(down: Iterable[tuple[int, int]]) -> str:
    return ",".join(f"{a}-{b}" for a, b in sorted(down)) or "none"


def rank_ring_crossing(n: int, down: Iterable[tuple[int, int]]) -> tuple[int, int] | None:
    """The first downed link the ring in rank order (0, 1, ..., n-1, 0) crosses, or None."""
    dset = {(min(a, b), max(a, b)) for a, b in down}
    if n < 2:
        return None
    for r in range(n):
        a, b = r, (r + 1) % n
        if a != b and (min(a, b), max(a, b)) in dset:
            return (min(a, b), max(a, b))
    return None


def _cycle(n: int, allowed: list[set[int]], *, fewest_first: bool = False) -> list[int] | None:
    """A Hamiltonian cycle from rank 0 through ``allowed`` (adjacency sets), lowest rank first (or,
    ``fewest_first``, the rank with the fewest ways left first: Warnsdorff's rule, which finds a
    cycle in a dense graph with little backtracking); None when there is none (or none found
    within :data:`_SEARCH_STEPS`)."""
    if any(len(a) < 2 for a in allowed):
        return None
    path = [0]
    on_path = [False] * n
    on_path[0] = True
    options = [sorted(allowed[0])]
    steps = 0
    while path:
        if len(path) == n:
            if 0 in allowed[path[-1]]:
                return path
            options.pop()
            on_path[path.pop()] = False
            continue
        if not options[-1]:
            options.pop()
            on_path[path.pop()] = False
            continue
        steps += 1
        if steps > _SEARCH_STEPS:
            return None
        nxt = options[-1].pop(0)
        if on_path[nxt]:
            continue
        # prune: every rank still to visit keeps two ways in (free ranks, the new end or rank 0);
        # only the neighbours of the old and the new end lose one
        ends = (nxt, 0)
        if any(not on_path[v] and v != nxt and
               sum(1 for w in allowed[v] if (not on_path[w] and w != nxt) or w in ends) < 2
               for v in allowed[nxt] | allowed[path[-1]]):
            continue
        path.append(nxt)
        on_path[nxt] = True
        free = [w for w in allowed[nxt] if not on_path[w]]
        if fewest_first:
            free.sort(key=lambda w: (sum(1 for x in allowed[w] if not on_path[x]), w))
        else:
            free.sort()
        options.append(free)
    return None


def ring_orders(n: int, down: Iterable[tuple[int, int]] = (), *, order: str = "avoid-down", rings: int = 1,
                what: str = "the operator") -> list[tuple[int, ...]]:
    """Up to ``rings`` rings through all ``n`` ranks, each as the ranks in ring order.

    Ring 0 is in rank order (``order = "rank"``) or the cycle closest to it that uses no downed
    link (``"avoid-down"``; rank order itself when nothing is down); the further rings share no
    link with any earlier one, as many as the rank graph holds up to ``rings`` (none on 2 or 3
    ranks, one more on 5 or 6 ranks of a full mesh, three rings in all on 8). One rank: ``[(0,)]``;
    two ranks: ``[(0, 1)]`` (one link, both directions).

    Raises:
        ConfigError: ring 0 cannot be formed: rank order crosses a downed link, or no ring avoids
            the downed links; the message names the links and the fix.
    """
    dset = {(min(a, b), max(a, b)) for a, b in down if a != b and max(a, b) < n}
    where = f"HCOMM_KIT_LINKS_DOWN={_links_text(dset)}"
    if order not in RING_ORDERS:
        raise ConfigError(f"ring order {order!r} is not one of {', '.join(RING_ORDERS)}",
                          key="resources.channels.ring_order")
    if n == 1:
        return [(0,)]
    if n == 2:
        if dset:
            raise ConfigError(f"{what}: its ring of 2 ranks needs the link 0-1, which is down ({where}); a ring "
                              "cannot avoid it", key="resources.channels.topology")
        return [(0, 1)]
    if order == "rank":
        cross = rank_ring_crossing(n, dset)
        if cross is not None:
            raise ConfigError(
                f"{what}: its ring in rank order joins ranks {cross[0]} and {cross[1]}, whose link {cross[0]}-{cross[1]} "
                f"is down ({where}); set [resources.channels] ring_order = \"avoid-down\" in op.toml to route the "
                "ring around downed links (the kernel then reads its neighbours and position from "
                "AlgResourceCtx.rings[])", key="resources.channels.ring_order")
        first: list[int] | None = list(range(n))
    else:
        allowed = [{w for w in range(n) if w != v and (min(v, w), max(v, w)) not in dset} for v in range(n)]
        first = _cycle(n, allowed) or _cycle(n, allowed, fewest_first=True)
        if first is None:
            lonely = [v for v in range(n) if len(allowed[v]) < 2]
            why = (f"rank {lonely[0]} has {len(allowed[lonely[0]])} link(s) up" if lonely
                   else "the links left up form no cycle through every rank")
            raise ConfigError(f"{what}: no ring through all {n} ranks avoids the downed links ({where}): {why}; "
                              "bring a link up or use a mesh operator that relays (topology = \"mesh\")",
                              key="resources.channels.ring_order")
    out = [tuple(first)]
    used = set(dset)
    for _ in range(1, rings):
        for ring in out[-1:]:
            used |= {(min(a, b), max(a, b)) for a, b in zip(ring, ring[1:] + ring[:1])}
        allowed = [{w for w in range(n) if w != v and (min(v, w), max(v, w)) not in used} for v in range(n)]
        more = _cycle(n, allowed, fewest_first=True)
        if more is None:
            break
        out.append(tuple(more))
    return out
