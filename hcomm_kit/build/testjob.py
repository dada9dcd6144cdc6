"""The job an operator runs in by default: op.toml ``[test] topology`` and ``links_down``.

The generated tests (:func:`hcomm_kit.testing.opjob.mpi_job`), ``hcomm-kit run``, ``bench``,
``test`` and ``model explain`` run an operator on the cluster its op.toml names, unless they are
told otherwise: ``--topology`` / ``--links-down`` (which the commands export), the variables
``HCOMM_KIT_TOPOLOGY`` / ``HCOMM_KIT_LINKS_DOWN`` set in the environment (even empty: one server,
every link up), or a rank count (``--np``) other than the topology's. One rule, here, for all of them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..base import envs
from .opmodel import OpSpec

__all__ = ["OpJob", "op_job"]

TOPOLOGY_VARS = ("HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_SOC", "HCOMM_KIT_DEVICE_COUNT")


@dataclass(frozen=True)
class OpJob:
    """What op.toml ``[test]`` adds to a job of the operator.

    Attributes:
        env: environment variables to set (HCOMM_KIT_TOPOLOGY, HCOMM_KIT_SOC,
            HCOMM_KIT_DEVICE_COUNT, HCOMM_KIT_LINKS_DOWN): only those nothing else decided.
        np: the rank count of the topology in effect (op.toml's or the environment's), None when
            none is set (one server of any size).
        topology: the topology in effect (``"A2:1x8"``), "" for the default.
        links_down: the downed links in effect (``"0-1"``), "" for none.
        notes: what of op.toml ``[test]`` was left out and why, one sentence each.
    """

    env: dict[str, str]
    np: int | None
    topology: str
    links_down: str
    notes: tuple[str, ...] = ()


def _size(topology: str) -> int:
    _, servers, npus = envs.parse_topology(topology)
    return servers * npus


def op_job(spec: OpSpec, np: int | None = None, environ: Mapping[str, str] | None = None) -> OpJob:
    """The environment op.toml ``[test]`` gives a job of ``spec`` on ``np`` ranks (None: the
    topology's count), where ``environ`` (default ``os.environ``, which the commands' ``--topology``
    and ``--links-down`` have written to) does not decide it already. ``[test]`` describes one
    cluster: on a rank count other than its topology's, neither its topology nor its links_down
    applies."""
    environ = os.environ if environ is None else environ
    env: dict[str, str] = {}
    notes: list[str] = []
    where = f"{spec.opdir / 'op.toml' if spec.opdir is not None else 'op.toml'} [test]"
    topology = environ.get("HCOMM_KIT_TOPOLOGY", "")
    skipped = False
    if "HCOMM_KIT_TOPOLOGY" not in environ and spec.test_topology:
        size = _size(spec.test_topology)
        if np is None or np == size:
            topology = spec.test_topology
            product, _, _ = envs.parse_topology(topology)
            env["HCOMM_KIT_TOPOLOGY"] = topology
            env["HCOMM_KIT_SOC"] = envs.TOPOLOGY_PRODUCTS[product]
            count = environ.get("HCOMM_KIT_DEVICE_COUNT", "")
            if not count.strip().isdigit() or int(count) < size:
                env["HCOMM_KIT_DEVICE_COUNT"] = str(max(size, 8))
        else:
            notes.append(f"{where} topology = {spec.test_topology!r} is {size} ranks: on {np} ranks neither it nor "
                         "its links_down is used")
            skipped = True
    nranks = _size(topology) if topology.strip() else np
    links = environ.get("HCOMM_KIT_LINKS_DOWN", "")
    if "HCOMM_KIT_LINKS_DOWN" not in environ and spec.test_links_down and not skipped:
        pairs = envs.parse_links_down(spec.test_links_down)
        outside = [f"{a}-{b}" for a, b in pairs if nranks is not None and b >= nranks]
        if outside:
            notes.append(f"{where} links_down = {spec.test_links_down!r}: {', '.join(outside)} is outside the "
                         f"{nranks} ranks: no link taken down")
        else:
            links = env["HCOMM_KIT_LINKS_DOWN"] = ",".join(f"{a}-{b}" for a, b in pairs)
    return OpJob(env=env, np=_size(topology) if topology.strip() else None, topology=topology.strip(),
                 links_down=links.strip() if links.strip().lower() != "none" else "", notes=tuple(notes))
