"""Algorithm names of the built-in collectives and their ids in ``OpParam.algo``, and the names a
caller may use for them (``algorithm=`` / ``--algorithm``).

The names are CANN's (``<Engine><Op><Executor><Template>``, as its AICPU selector registers them:
hicann/hccl ``src/ops/<op>/executor/*.cc`` ``REGISTER_EXEC_V2``); the ids are ``HK_ALGO_*`` of
``aicpu_kernels/_common/hk_coll.h``, whose algorithm table lists the same pairs (a test checks that
they agree, and that the emulator's table of the C API, ``hccl/algo_select.cc``, names the same).
Which algorithm runs when none is asked is CANN's choice (:mod:`hcomm_kit.ops.selector`). Short
aliases (``mesh``, ``nhr``, ``hierarchical``) name an algorithm of that shape (:data:`ALIASES`);
CANN's names may also be spelt without the engine and op (``SoleMeshTwoShot``) or, for a sole
executor, as its template (``meshtwoshot``, CANN's ``HCCL_ALGO`` shorthand); case is ignored.
"""

from __future__ import annotations

from ..base.errors import ConfigError

__all__ = ["ALGORITHMS", "ALIASES", "LEVELS", "WRITE_REDUCE", "SPECIAL", "canonical", "resolve", "choices",
           "primitive_reduces", "check_runnable"]

# HK_ALGO_* of aicpu_kernels/_common/hk_coll.h (checked by a test).
_AUTO, _MESH, _ONE_SHOT, _TWO_SHOT, _CHUNK, _NHR, _NHR_AICPU, _PARALLEL, _SEQUENCE, _SEQUENCE3 = range(10)

#: collective -> CANN algorithm name -> ``OpParam.algo`` (``auto``: 0, the kernel or the selector chooses).
ALGORITHMS: dict[str, dict[str, int]] = {
    "allreduce": {"auto": _AUTO, "AicpuAllReduceSoleMeshOneShot": _ONE_SHOT,
                  "AicpuAllReduceSoleMeshTwoShot": _TWO_SHOT, "AicpuAllReduceSoleMeshChunkTwoShot": _CHUNK,
                  "AicpuAllReduceSoleNHR": _NHR, "AicpuAllReduceSoleNHRAicpuReduce": _NHR_AICPU,
                  "AicpuAllReduceParallelMeshNHR": _PARALLEL, "AicpuAllReduceSequenceMeshConcurNHR": _SEQUENCE,
                  "AicpuAllReduceSequenceMeshConcurNHRNHR": _SEQUENCE3},
    "allgather": {"auto": _AUTO, "AicpuAllGatherSoleMesh": _MESH, "AicpuAllGatherSoleNHR": _NHR,
                  "AicpuAllGatherParallelMeshNHR": _PARALLEL, "AicpuAllGatherSequenceMeshConcurNHR": _SEQUENCE,
                  "AicpuAllGatherSequenceMeshConcurNHRNHR": _SEQUENCE3},
    "reduce_scatter": {"auto": _AUTO, "AicpuReduceScatterSoleMesh": _MESH, "AicpuReduceScatterSoleMeshChunk": _CHUNK,
                       "AicpuReduceScatterSoleNHR": _NHR, "AicpuReduceScatterSoleNHRAicpuReduce": _NHR_AICPU,
                       "AicpuReduceScatterParallelMeshNHR": _PARALLEL,
                       "AicpuReduceScatterSequenceMeshConcurNHR": _SEQUENCE,
                       "AicpuReduceScatterSequenceMeshConcurNHRNHR": _SEQUENCE3},
    "alltoall": {"auto": _AUTO, "AicpuAllToAllSoleMesh": _MESH},
    "alltoallv": {"auto": _AUTO, "AicpuAllToAllVSoleMesh": _MESH},
    "broadcast": {"auto": _AUTO, "AicpuBroadcastSoleMeshTwoShot": _TWO_SHOT, "AicpuBroadcastSoleNHR": _NHR,
                  "AicpuBroadcastParallelMeshNHR": _PARALLEL, "AicpuBroadcastSequenceMesh1dNHR": _SEQUENCE,
                  "AicpuBroadcastSequenceMesh1dNHRNHR": _SEQUENCE3},
    "reduce": {"auto": _AUTO, "AicpuReduceSoleMesh": _MESH, "AicpuReduceSoleMeshTwoShot": _TWO_SHOT,
               "AicpuReduceSoleNHR": _NHR, "AicpuReduceSoleNHRAicpuReduce": _NHR_AICPU,
               "AicpuReduceParallelMeshNHR": _PARALLEL, "AicpuReduceSequenceMesh1DNHR": _SEQUENCE,
               "AicpuReduceSequenceMesh1DNHRNHR": _SEQUENCE3},
    "scatter": {"auto": _AUTO, "AicpuScatterSoleMesh": _MESH, "AicpuScatterSoleNHR": _NHR,
                "AicpuScatterParallelMeshNHR": _PARALLEL, "AicpuScatterSequenceMeshConcurNHR": _SEQUENCE,
                "AicpuScatterSequenceMeshConcurNHRNHR": _SEQUENCE3},
    "gather": {"auto": _AUTO, "mesh": _MESH},  # CANN has no gather: hcomm-kit's own mesh
    "barrier": {"auto": _AUTO, "AicpuBarrierSoleNHR": _NHR},
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
    "broadcast": {"mesh": "AicpuBroadcastSoleMeshTwoShot", "nhr": "AicpuBroadcastSoleNHR",
                  "hierarchical": "AicpuBroadcastSequenceMesh1dNHR"},
    "reduce": {"mesh": "AicpuReduceSoleMesh", "nhr": "AicpuReduceSoleNHR",
               "hierarchical": "AicpuReduceSequenceMesh1DNHR"},
    "scatter": {"mesh": "AicpuScatterSoleMesh", "nhr": "AicpuScatterSoleNHR",
                "hierarchical": "AicpuScatterSequenceMeshConcurNHR"},
    "barrier": {"nhr": "AicpuBarrierSoleNHR"},
}

#: ids of the algorithms that need the layout of servers (``OpParam.hierInfo``): id -> levels.
LEVELS: dict[int, int] = {_PARALLEL: 2, _SEQUENCE: 2, _SEQUENCE3: 3}

#: ids of the algorithms that reduce with write-reduce (the Hcomm primitive must take the dtype/op).
WRITE_REDUCE: frozenset[int] = frozenset({_CHUNK, _NHR})

#: Names that are not an algorithm but a way to choose one: ``auto`` (CANN's choice, as when none
#: is given) and ``fastest`` (every algorithm of the built-in run once, the timing model's fastest kept).
SPECIAL = ("auto", "fastest")

# CANN's op names inside its algorithm names (src/common/alg_parse.cc OP_TYPES).
_CANN_OP = {"allreduce": "AllReduce", "allgather": "AllGather", "reduce_scatter": "ReduceScatter",
            "alltoall": "AllToAll", "alltoallv": "AllToAllV", "broadcast": "Broadcast", "reduce": "Reduce",
            "scatter": "Scatter"}


def _spellings(collective: str, name: str) -> list[str]:
    """Lower-case spellings of CANN's ``Aicpu<Op><Executor><templates>``: the part after the op
    (``solemeshtwoshot``) and, for a sole executor, its template alone (``meshtwoshot``)."""
    low, head = name.lower(), f"aicpu{_CANN_OP.get(collective, '-').lower()}"
    if not low.startswith(head) or len(low) == len(head):
        return []
    rest = low[len(head):]
    return [rest, rest[4:]] if rest.startswith("sole") and len(rest) > 4 else [rest]

# collective -> lower-cased name, spelling or alias -> canonical name (built once)
_INDEX: dict[str, dict[str, str]] = {
    coll: {**{sp: k for k in table for sp in _spellings(coll, k)}, **{k.lower(): k for k in table},
           **{a.lower(): t for a, t in ALIASES.get(coll, {}).items()}}
    for coll, table in ALGORITHMS.items()}


def canonical(collective: str, name: str) -> str | None:
    """The algorithm ``name`` (any case, a spelling of CANN's name, or an alias) stands for in
    ``collective``, or None."""
    return _INDEX.get(collective, {}).get(str(name).strip().lower())


def choices(collective: str) -> list[str]:
    """The algorithm names of a built-in collective (its kernels'), then the special ones."""
    return [*(n for n in ALGORITHMS[collective] if n != "auto"), *SPECIAL]


def resolve(collective: str, algorithm: str) -> str:
    """``algorithm=`` of a call: the name of :data:`ALGORITHMS` it stands for, or ``auto`` /
    ``fastest``. A CANN name no kernel implements is returned as given: the selection
    (:func:`hcomm_kit.ops.selector.select`) refuses it naming the kernels there are.

    Raises:
        ConfigError: unknown, naming the collective, its algorithms and aliases.
    """
    if collective not in ALGORITHMS:
        raise ConfigError(f"{collective!r} is not a built-in collective ({', '.join(sorted(ALGORITHMS))})",
                          key="collective")
    key = str(algorithm).strip().lower()
    if key in SPECIAL:
        return key
    name = canonical(collective, algorithm)
    if name is not None:
        return name
    if key.startswith("aicpu") and _CANN_OP.get(collective, "-").lower() in key:
        return str(algorithm).strip()
    aliases = sorted(ALIASES.get(collective, {}))
    raise ConfigError(f"{collective}: unknown algorithm {algorithm!r}; choose from {', '.join(choices(collective))}"
                      + (f" (aliases: {', '.join(aliases)})" if aliases else ""), key="algorithm")


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
    want = _NHR_AICPU if algo == _NHR else (_TWO_SHOT if collective == "allreduce" else _MESH)
    instead = next((k for k, v in table.items() if v == want), "auto")
    raise ConfigError(f"{collective}: {name} reduces with write-reduce, which {soc} cannot do for this dtype / reduce "
                      f"op (A2/A3: no int64, no prod); use {instead} (or auto)", key="algorithm")
