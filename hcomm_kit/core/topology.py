"""The cluster topology of a communicator, as the emulator built it (``comm.topology``).

Sources, in this order: the CANN rank table the communicator was created from (its
``server_list`` entries are servers; ``super_pod_list`` groups them into super-pods),
``HCOMM_KIT_TOPOLOGY=PRODUCT:SERVERSxNPUS``, else one server holding every rank. Links taken
down come from ``HCOMM_KIT_LINKS_DOWN``. The link type rules (HCCS inside an A2 server, UB inside
an A3/950 super-pod, RoCE between servers otherwise) are the emulator's: this view reads them from
it (``HcommKitCommTopology``), it does not restate them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Topology:
    """Servers, super-pods and links of a communicator's ranks.

    Attributes:
        product: ``'A2'``, ``'A3'`` or ``'950'``.
        source: where it came from (``'rank table PATH'``, ``'HCOMM_KIT_TOPOLOGY=A2:2x8'``,
            ``'default (one server)'``).
        servers: the ranks of each server, in order.
        pods: the servers (indices into ``servers``) of each super-pod; AI Server mode (no
            super-pods, A2 and the presets): one per server.
        links_down: the links taken down, ``(a, b)`` with a < b.
    """

    product: str
    source: str
    servers: tuple[tuple[int, ...], ...]
    pods: tuple[tuple[int, ...], ...]
    links_down: tuple[tuple[int, int], ...]
    link_in_server: str = "HCCS"
    link_in_pod: str = "RoCE"
    link_between_pods: str = "RoCE"

    @classmethod
    def from_json(cls, text: str) -> "Topology":
        d = json.loads(text)
        return cls(product=d["product"], source=d["source"],
                   servers=tuple(tuple(s) for s in d["servers"]), pods=tuple(tuple(p) for p in d["pods"]),
                   links_down=tuple((int(a), int(b)) for a, b in d["down"]),
                   link_in_server=d["link_in_server"], link_in_pod=d["link_in_pod"],
                   link_between_pods=d["link_between_pods"])

    @classmethod
    def single_server(cls, nranks: int, product: str = "A2") -> "Topology":
        """Today's default (and the CANN backend's answer here): one server holding every rank."""
        return cls(product=product, source="default (one server)", servers=(tuple(range(nranks)),), pods=((0,),),
                   links_down=(), link_in_server="HCCS" if product == "A2" else "UB",
                   link_in_pod="RoCE" if product == "A2" else "UB")

    @property
    def nranks(self) -> int:
        return sum(len(s) for s in self.servers)

    def server_of(self, rank: int) -> int:
        """Index of the server holding ``rank``."""
        for i, s in enumerate(self.servers):
            if rank in s:
                return i
        raise ValueError(f"rank {rank} is not in this topology ({self.nranks} ranks)")

    def pod_of(self, rank: int) -> int:
        server = self.server_of(rank)
        return next(i for i, p in enumerate(self.pods) if server in p)

    def link_type(self, a: int, b: int) -> str:
        """``'HCCS'``, ``'UB'`` or ``'RoCE'``: what joins ranks a and b (whether up or down)."""
        if a == b:
            raise ValueError(f"ranks {a} and {b} are the same rank: no link")
        if self.server_of(a) == self.server_of(b):
            return self.link_in_server
        return self.link_in_pod if self.pod_of(a) == self.pod_of(b) else self.link_between_pods

    def is_down(self, a: int, b: int) -> bool:
        return (min(a, b), max(a, b)) in self.links_down

    def link(self, a: int, b: int) -> str | None:
        """The link type between a and b, or None when it was taken down."""
        kind = self.link_type(a, b)
        return None if self.is_down(a, b) else kind
