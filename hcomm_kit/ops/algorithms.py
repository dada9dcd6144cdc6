"""Algorithm names of the built-in collectives and their ids in ``OpParam.algo``; ``HCCL_ALGO``'s
flat form (``level0:NA;level1:fullmesh``) read into one of those names.

The names are CANN's (``<Engine><Op><Executor><Template>``, as its AICPU selector registers them:
hicann/hccl ``src/ops/<op>/executor/*.cc`` ``REGISTER_EXEC_V2``); the ids are ``HK_ALGO_*`` of
``aicpu_kernels/_common/hk_coll.h``, whose algorithm table lists the same pairs (a test checks that
they agree). Which algorithm ``auto`` becomes per call is :mod:`hcomm_kit.ops.selector`'s (for the
collectives of ``_SELECTED``) or the kernel's own choice. Short aliases (``mesh``, ``nhr``,
``hierarchical``) name an algorithm of that shape (:data:`ALIASES`); lookups ignore case.
"""

from __future__ import annotations

from ..base.errors import ConfigError

__all__ = ["ALGORITHMS", "ALIASES", "LEVELS", "WRITE_REDUCE", "parse_hccl_algo", "algo_id", "canonical",
           "primitive_reduces", "check_runnable"]

# HK_ALGO_* of aicpu_kernels/_common/hk_coll.h (checked by a test).
_AUTO, _MESH, _ONE_SHOT, _TWO_SHOT, _CHUNK, _NHR, _NHR_AICPU, _PARALLEL, _SEQUENCE, _SEQUENCE3 = range(10)

#: collective -> CANN algorithm name -> ``OpParam.algo`` (``auto``: 0, the kernel or the selector chooses).
ALGORITHMS: dict[str, dict[str, int]] = {
    "allreduce": {"auto": _AUTO, "AicpuAllReduceSoleMeshOneShot": _ONE_SHOT,
                  "AicpuAllReduceSoleMeshTwoShot": _TWO_SHOT, "AicpuAllReduceSoleMeshChunkTwoShot": _CHUNK,
                  "AicpuAllReduceSoleNHR": _NHR, "AicpuAllReduceSoleNHRAicpuReduce": _NHR_AICPU,
                  "AicpuAllReduceParallelMeshNHR": _PARALLEL, "AicpuAllReduceSequenceMeshConcurNHR": _SEQUENCE},
    "allgather": {"auto": _AUTO, "AicpuAllGatherSoleMesh": _MESH, "AicpuAllGatherSoleNHR": _NHR,
                  "AicpuAllGatherParallelMeshNHR": _PARALLEL, "AicpuAllGatherSequenceMeshConcurNHR": _SEQUENCE},
    "reduce_scatter": {"auto": _AUTO, "AicpuReduceScatterSoleMesh": _MESH, "AicpuReduceScatterSoleMeshChunk": _CHUNK,
                       "AicpuReduceScatterSoleNHR": _NHR, "AicpuReduceScatterSoleNHRAicpuReduce": _NHR_AICPU,
                       "AicpuReduceScatterParallelMeshNHR": _PARALLEL,
                       "AicpuReduceScatterSequenceMeshConcurNHR": _SEQUENCE},
    "alltoall": {"auto": _AUTO, "AicpuAllToAllSoleMesh": _MESH},
    "alltoallv": {"auto": _AUTO, "AicpuAllToAllVSoleMesh": _MESH},
    "broadcast": {"auto": _AUTO, "mesh": _MESH},
    "reduce": {"auto": _AUTO, "mesh": _MESH},
    "scatter": {"auto": _AUTO, "mesh": _MESH},
    "gather": {"auto": _AUTO, "mesh": _MESH},
    "barrier": {"auto": _AUTO},
    "send_recv": {"auto": _AUTO},
}

#: collective -> short name -> the algorithm of that shape it stands for.
ALIASES: dict[str, dict[str, str]] = {
    "allreduce": {"mesh": "AicpuAllReduceSoleMeshOneShot", "nhr": "AicpuAllReduceSoleNHR",
                  "hierarchical": "AicpuAllReduceSequenceMeshConcurNHR"},
    "allgather": {"mesh": "AicpuAllGatherSoleMesh", "nhr": "AicpuAllGatherSoleNHR",
                  "hierarchical": "AicpuAllGatherSequenceMeshConcurNHR"},
    "reduce_scatter": {"mesh": "AicpuReduceScatterSoleMesh", "nhr": "AicpuReduceScatterSoleNHR",
                       "hierarchical": "AicpuReduceScatterSequenceMeshConcurNHR"},
    "alltoall": {"mesh": "AicpuAllToAllSoleMesh", "AicpuAllToAllSoleMeshSingleChannel": "AicpuAllToAllSoleMesh"},
    "alltoallv": {"mesh": "AicpuAllToAllVSoleMesh"},
}

#: ids of the algorithms that need the layout of servers (``OpParam.hierInfo``): id -> levels.
LEVELS: dict[int, int] = {_PARALLEL: 2, _SEQUENCE: 2, _SEQUENCE3: 3}

#: ids of the algorithms that reduce with write-reduce (the Hcomm primitive must take the dtype/op).
WRITE_REDUCE: frozenset[int] = frozenset({_CHUNK, _NHR})

# HCCL_ALGO's flat values (CANN's level0/level1 names) -> our short names.
_HCCL_ALGO_NAMES = {"fullmesh": "mesh", "mesh": "mesh", "nhr": "nhr", "na": "auto", "auto": "auto"}
_SELECTED = frozenset({"allreduce", "allgather", "reduce_scatter", "alltoall"})  # chosen by ops/selector.py

# collective -> lower-cased name or alias -> canonical name (built once)
_INDEX: dict[str, dict[str, str]] = {
    coll: {**{k.lower(): k for k in table}, **{a.lower(): t for a, t in ALIASES.get(coll, {}).items()}}
    for coll, table in ALGORITHMS.items()}


def canonical(collective: str, name: str) -> str | None:
    """The algorithm ``name`` (any case, or an alias) stands for in ``collective``, or None."""
    return _INDEX.get(collective, {}).get(str(name).lower())


def primitive_reduces(soc: str, dtype_value: int, reduce_op: int | None) -> bool:
    """The Hcomm reduce primitives take (dtype, op) on this SoC (hcomm.md §3.1: A2/A3 int8, int16,
    int32, fp16, fp32, bf16 with sum / max / min; Ascend950 everything); as the kernels'
    ``HkPrimitiveReduces``."""
    if soc == "Ascend950":
        return True
    return dtype_value in (0, 1, 2, 3, 4, 11) and reduce_op != 1


def check_runnable(collective: str, algo: int, soc: str, dtype_value: int, reduce_op: int | None) -> None:
    """Refuse, before anything is launched, an algorithm that cannot reduce this dtype / op here: the
    write-reduce ones (:data:`WRITE_REDUCE`) need the primitive (A2/A3: no int64, no prod).

    Raises:
        ConfigError: naming the algorithm and the one to use instead.
    """
    if algo not in WRITE_REDUCE or reduce_op is None or primitive_reduces(soc, dtype_value, reduce_op):
        return
    table = ALGORITHMS[collective]
    name = next(k for k, v in table.items() if v == algo)
    instead = next((k for k, v in table.items() if v == (_NHR_AICPU if algo == _NHR else _TWO_SHOT
                                                            if collective == "allreduce" else _MESH)), "auto")
    raise ConfigError(f"{collective}: {name} reduces with write-reduce, which {soc} cannot do for this dtype / reduce "
                      f"op (A2/A3: no int64, no prod); use {instead} (or auto)", key="algorithm")


def parse_hccl_algo(value: str | None, collective: str) -> str | None:
    """The flat algorithm name ``HCCL_ALGO`` asks for ``collective``, or None.

    Accepted forms (CANN's documented ones): ``"level0:NA;level1:fullmesh"`` for every collective,
    and per collective ``"allreduce=level0:NA;level1:nhr/allgather=level0:fullmesh"``. The first
    level that is not ``NA`` wins and names one flat algorithm. Values: fullmesh (= mesh), nhr, NA.
    Text in CANN's executor grammar (``allreduce:sequence{level0=mesh,level1=nhr}``, ``not(...)``;
    :func:`hcomm_kit.ops.selector.parse_algo_rules`) gives None here: it filters the selector's
    entries instead, which is how a multi-level algorithm is forced or forbidden.

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
                                  f"(e.g. 'level0:NA;level1:nhr'), nor CANN's executor grammar "
                                  f"(e.g. 'allreduce:sequence{{level0=mesh,level1=nhr}}')", key="HCCL_ALGO")
            name = level.split(":", 1)[1].strip().lower()
            mapped = _HCCL_ALGO_NAMES.get(name)
            if mapped is None:
                raise ConfigError(f"HCCL_ALGO={value!r}: algorithm {name!r} is not implemented by hcomm-kit "
                                  f"(supported: fullmesh, nhr, NA)", key="HCCL_ALGO")
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
    name = canonical(collective, algorithm)
    if name is None:
        if from_env:
            return _AUTO  # a global HCCL_ALGO names an algorithm this collective does not have
        aliases = sorted(ALIASES.get(collective, {}))
        raise ConfigError(f"{collective}: unknown algorithm {algorithm!r}; choose from {', '.join(table)}"
                          + (f" (aliases: {', '.join(aliases)})" if aliases else ""), key="algorithm")
    return table[name]
