"""Algorithm names of the built-in collectives and their ids in ``OpParam.algo``; ``HCCL_ALGO``'s
flat form (``level0:NA;level1:ring``) read into one of those names.

The ids are ``HK_ALGO_*`` of ``aicpu_kernels/_common/hk_coll.h`` (a test checks they agree); which
algorithm ``auto`` becomes per call is :mod:`hcomm_kit.ops.selector`'s (for the collectives of
``_SELECTED``) or the kernel's own choice.
"""

from __future__ import annotations

from ..base.errors import ConfigError

__all__ = ["ALGORITHMS", "parse_hccl_algo", "algo_id"]

# Algorithm names -> OpParam.algo (HK_ALGO_* in aicpu_kernels/_common/hk_coll.h; checked by a test).
_AUTO, _RING, _MESH, _PAIRWISE, _HIER = 0, 1, 2, 3, 4
ALGORITHMS: dict[str, dict[str, int]] = {
    "allreduce": {"auto": _AUTO, "ring": _RING, "mesh": _MESH, "hierarchical": _HIER},
    "allgather": {"auto": _AUTO, "ring": _RING, "mesh": _MESH, "hierarchical": _HIER},
    "reduce_scatter": {"auto": _AUTO, "ring": _RING, "mesh": _MESH},
    "alltoall": {"auto": _AUTO, "pairwise": _PAIRWISE, "mesh": _MESH},
    "alltoallv": {"auto": _AUTO, "pairwise": _PAIRWISE, "mesh": _MESH},
    "broadcast": {"auto": _AUTO, "mesh": _MESH},
    "reduce": {"auto": _AUTO, "mesh": _MESH},
    "scatter": {"auto": _AUTO, "mesh": _MESH},
    "gather": {"auto": _AUTO, "mesh": _MESH},
    "barrier": {"auto": _AUTO},
    "send_recv": {"auto": _AUTO},
}
# HCCL_ALGO spellings (CANN's level0/level1 values) -> our names.
_HCCL_ALGO_NAMES = {"ring": "ring", "fullmesh": "mesh", "mesh": "mesh", "pairwise": "pairwise", "na": "auto",
                    "auto": "auto"}
_SELECTED = frozenset({"allreduce", "allgather", "reduce_scatter", "alltoall"})  # chosen by ops/selector.py


def parse_hccl_algo(value: str | None, collective: str) -> str | None:
    """The flat algorithm name ``HCCL_ALGO`` asks for ``collective``, or None.

    Accepted forms (CANN's documented ones): ``"level0:NA;level1:ring"`` for every collective, and
    per collective ``"allreduce=level0:NA;level1:ring/allgather=level0:fullmesh"``. The first
    level that is not ``NA`` wins and names one flat algorithm. Values: ring, fullmesh (= mesh),
    pairwise, NA. Text in CANN's executor grammar (``allreduce:sequence{level0=mesh,level1=mesh}``,
    ``not(...)``; :func:`hcomm_kit.ops.selector.parse_algo_rules`) gives None here: it filters
    the selector's entries instead, which is how the two-level algorithm is forced or forbidden.

    Raises:
        ConfigError: malformed text or an algorithm hcomm-kit does not implement for it.
    """
    if not value or not value.strip():
        return None
    from .selector import parse_algo_rules

    if parse_algo_rules(value) is not None:
        return None
    if "{" in value or "not(" in value.replace(" ", "").lower():
        raise ConfigError(f"HCCL_ALGO={value!r} is not CANN's executor grammar: '[op:]executor{{level0=template,"
                          f"level1=template}}', '[op:]template' or 'not(...)', segments separated by ';' "
                          f"(executors sole, sequence, ...; templates mesh, meshoneshot, nhr, ...)", key="HCCL_ALGO")
    text = value.strip()
    chosen: str | None = None
    for part in text.split("/"):
        part = part.strip()
        if not part:
            continue
        target = None
        if "=" in part:
            target, part = (s.strip() for s in part.split("=", 1))
            target = target.lower().replace("-", "_")
        if target is not None and target not in (collective, collective.replace("_", "")):
            continue
        for level in part.split(";"):
            if ":" not in level:
                raise ConfigError(f"HCCL_ALGO={value!r}: {level!r} is not 'levelN:algorithm' "
                                  f"(e.g. 'level0:NA;level1:ring'), nor CANN's executor grammar "
                                  f"(e.g. 'allreduce:sequence{{level0=mesh,level1=mesh}}')", key="HCCL_ALGO")
            name = level.split(":", 1)[1].strip().lower()
            mapped = _HCCL_ALGO_NAMES.get(name)
            if mapped is None:
                raise ConfigError(f"HCCL_ALGO={value!r}: algorithm {name!r} is not implemented by hcomm-kit "
                                  f"(supported: ring, fullmesh, pairwise, NA)", key="HCCL_ALGO")
            if mapped != "auto" and chosen is None:
                chosen = mapped
    return chosen


_ALGO_CACHE: dict = {}  # (collective, algorithm, HCCL_ALGO text) -> algo id (hot path)


def algo_id(collective: str, algorithm: str | None, hccl_algo: str | None) -> int:
    """Algorithm id for the kernel: ``algorithm=``, else the communicator's ``HCCL_ALGO`` text."""
    if algorithm is not None and type(algorithm) is not str:
        return _algo_id_uncached(collective, algorithm, hccl_algo)
    key = (collective, algorithm, hccl_algo if algorithm is None else None)
    v = _ALGO_CACHE.get(key)
    if v is None:
        v = _algo_id_uncached(collective, algorithm, hccl_algo)
        if len(_ALGO_CACHE) < 256:
            _ALGO_CACHE[key] = v
    return v


def _algo_id_uncached(collective: str, algorithm: str | None, hccl_algo: str | None) -> int:
    table = ALGORITHMS[collective]
    from_env = False
    if algorithm is None:
        algorithm = parse_hccl_algo(hccl_algo, collective)
        from_env = algorithm is not None
        if algorithm is None:
            return _AUTO
    key = str(algorithm).lower()
    if key == "fullmesh":
        key = "mesh"
    if key not in table:
        if from_env:
            return _AUTO  # a global HCCL_ALGO names an algorithm this collective does not have
        raise ConfigError(f"{collective}: unknown algorithm {algorithm!r}; choose from {sorted(table)}",
                          key="algorithm")
    return table[key]
