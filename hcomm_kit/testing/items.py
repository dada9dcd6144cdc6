"""Where a test process runs (an MPI rank or the outer pytest) and what an item of
``@pytest.mark.mpi`` asks for: its rank counts, timeout and job environment."""

from __future__ import annotations

import os

import pytest

ENV_NP = "HCOMM_KIT_MPI_NP"            # set by the harness in the child job: the item rank count
ENV_RESULTS = "HCOMM_KIT_MPI_RESULTS"  # child job: directory for per-rank result and log files
DEFAULT_TIMEOUT = 120.0


def _world_size() -> int | None:
    """The MPI world size of this process when started by an MPI launcher, else None."""
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        raw = os.environ.get(name, "")
        if raw.isdigit():
            return int(raw)
    if "PMIX_RANK" in os.environ:
        return int(os.environ.get(ENV_NP, "1"))
    return None


def _world_rank() -> int:
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        raw = os.environ.get(name, "")
        if raw.isdigit():
            return int(raw)
    return 0


def _inner() -> bool:
    return _world_size() is not None


def _marker_params(marker) -> list:
    """The rank counts of a marker as ``pytest.param`` objects (marks of ``pytest.param(8, marks=...)`` kept)."""
    nps = marker.kwargs.get("np", marker.args[0] if marker.args else [2])
    if isinstance(nps, int) or hasattr(nps, "marks"):
        nps = [nps]
    out = []
    for n in nps:
        value, marks = (n.values[0], n.marks) if hasattr(n, "marks") else (n, ())
        out.append(pytest.param(int(value), marks=marks, id=f"np{int(value)}"))
    if not out:
        raise ValueError(f"@pytest.mark.mpi(np={nps!r}): give at least one rank count")
    from hcomm_kit.base.limits import check_np

    for prm in out:
        check_np(prm.values[0], what=f"@pytest.mark.mpi(np={nps!r}):")
    return out


def _marker_nps(marker) -> list[int]:
    """The rank counts of a marker (``np=[2, 3, pytest.param(8, marks=pytest.mark.slow)]`` -> [2, 3, 8])."""
    return [prm.values[0] for prm in _marker_params(marker)]


def _item_np(item) -> int | None:
    cs = getattr(item, "callspec", None)
    if cs is not None and "mpi_np" in cs.params:
        return int(cs.params["mpi_np"])
    return None


def _item_timeout(item) -> float:
    m = item.get_closest_marker("mpi")
    return float(m.kwargs.get("timeout", DEFAULT_TIMEOUT)) if m is not None else DEFAULT_TIMEOUT


def _item_env(item) -> tuple[tuple[str, str], ...]:
    m = item.get_closest_marker("mpi")
    env = dict((m.kwargs.get("env") if m is not None else None) or {})
    if m is not None and m.kwargs.get("topology"):
        env.update(_topology_env(str(m.kwargs["topology"])))
    if m is not None and m.kwargs.get("links_down"):
        env["HCOMM_KIT_LINKS_DOWN"] = str(m.kwargs["links_down"])
    return tuple(sorted((str(k), str(v)) for k, v in env.items()))


def _topology_env(topology: str) -> dict[str, str]:
    """``topology="A2:2x4"`` of the marker: the job's HCOMM_KIT_TOPOLOGY, HCOMM_KIT_SOC and
    HCOMM_KIT_DEVICE_COUNT (as ``--topology`` sets them)."""
    from hcomm_kit.base import envs

    saved = os.environ.get("HCOMM_KIT_TOPOLOGY")
    os.environ["HCOMM_KIT_TOPOLOGY"] = topology
    try:
        product, servers, npus = envs.topology()  # type: ignore[misc]
    finally:
        if saved is None:
            os.environ.pop("HCOMM_KIT_TOPOLOGY", None)
        else:
            os.environ["HCOMM_KIT_TOPOLOGY"] = saved
    return {"HCOMM_KIT_TOPOLOGY": topology, "HCOMM_KIT_SOC": envs.TOPOLOGY_PRODUCTS[product],
            "HCOMM_KIT_DEVICE_COUNT": str(max(8, servers * npus))}


def _outer_item(item) -> bool:
    return not _inner() and item.get_closest_marker("mpi") is not None and _item_np(item) is not None
