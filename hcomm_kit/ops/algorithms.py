"""Algorithm names of the built-in collectives and their ids in ``OpParam.algo``, and the names a
caller may use for them (``algorithm=`` / ``--algorithm``).

The ids are ``HK_ALGO_*`` of ``aicpu_kernels/_common/hk_coll.h`` (a test checks they agree, and that
the emulator's kernel table, ``hccl/algo_select.cc``, names the same); which algorithm runs when none
is asked is CANN's choice (:mod:`hcomm_kit.ops.selector`).
"""

from __future__ import annotations

from ..base.errors import ConfigError

__all__ = ["ALGORITHMS", "SPECIAL", "canonical", "choices"]

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

#: Names that are not an algorithm but a way to choose one: ``auto`` (CANN's choice, as when none
#: is given) and ``fastest`` (every algorithm of the built-in run once, the timing model's fastest kept).
SPECIAL = ("auto", "fastest")

# CANN's op names inside its algorithm names (src/common/alg_parse.cc OP_TYPES).
_CANN_OP = {"allreduce": "AllReduce", "allgather": "AllGather", "reduce_scatter": "ReduceScatter",
            "alltoall": "AllToAll", "alltoallv": "AllToAllV", "broadcast": "Broadcast", "reduce": "Reduce",
            "scatter": "Scatter"}


def _aliases(collective: str, name: str) -> set[str]:
    """The lower-case spellings of ``name``: itself; for CANN's ``Aicpu<Op><Executor><templates>``,
    the part after the op (``solemeshtwoshot``) and, for a sole executor, its template alone
    (``meshtwoshot``, as CANN's HCCL_ALGO shorthand names it)."""
    low = name.lower()
    out = {low}
    head = f"aicpu{_CANN_OP.get(collective, '').lower()}"
    if _CANN_OP.get(collective) and low.startswith(head) and len(low) > len(head):
        rest = low[len(head):]
        out.add(rest)
        if rest.startswith("sole") and len(rest) > 4:
            out.add(rest[4:])
    return out


def choices(collective: str) -> list[str]:
    """The algorithm names of a built-in collective (its kernels') and the special ones."""
    table = ALGORITHMS[collective]
    return [*SPECIAL, *(n for n in table if n not in SPECIAL)]


def canonical(collective: str, algorithm: str) -> str:
    """The name of :data:`ALGORITHMS` (or of :data:`SPECIAL`) that ``algorithm`` spells, case
    ignored: a kernel's name, CANN's full name (``AicpuAllReduceSoleMeshTwoShot``), the part after
    the op (``SoleMeshTwoShot``), or a sole executor's template (``meshtwoshot``). A CANN name no
    kernel implements is returned as given: the selection (:func:`hcomm_kit.ops.selector.select`)
    refuses it naming the kernels there are.

    Raises:
        ConfigError: unknown, naming the collective and its choices.
    """
    if collective not in ALGORITHMS:
        raise ConfigError(f"{collective!r} is not a built-in collective ({', '.join(sorted(ALGORITHMS))})",
                          key="collective")
    key = str(algorithm).strip().lower()
    if key in SPECIAL:
        return key
    if key == "fullmesh":  # CANN's old HCCL_ALGO spelling of the mesh
        key = "mesh"
    for name in ALGORITHMS[collective]:
        if key in _aliases(collective, name):
            return name
    if key.startswith("aicpu") and _CANN_OP.get(collective, "-").lower() in key:
        return str(algorithm).strip()  # CANN's name of an algorithm no kernel implements: the selection says so
    raise ConfigError(f"{collective}: unknown algorithm {algorithm!r}; choose from {', '.join(choices(collective))}",
                      key="algorithm")
