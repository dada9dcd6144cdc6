"""Algorithm selection of the built-in collectives: the algorithm CANN's HCCL chooses for the AICPU
engine, the one ``algorithm=`` / ``--algorithm`` / ``HCCL_ALGO`` asks for, or the timing model's
fastest.

The choice itself is made in one place, the emulator (``hcomm_kit/emu/src/hccl/algo_select.cc``),
for the Python collectives and the HCCL C API alike: CANN's topology fields from the rank graph,
the rule of CANN's auto selector for the op (hicann/hccl ``src/ops/<op>/selector/``, each branch
with its source line), ``HCCL_ALGO`` in both of CANN's grammars, ``HCCL_USE_NEW_SELECTOR=1`` with
CANN's cost table and tuner plugin, and the built-in kernel that runs the algorithm. This module
asks it (:func:`select` on a communicator, :func:`select_on` without one) and adds what only the
Python side can do: ``algorithm="fastest"``, which runs every algorithm the built-in kernels have
once on scratch buffers and keeps the one the timing model predicts fastest
(:func:`fastest_of`).
"""

from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ..base.errors import ConfigError

__all__ = ["CMD", "Selection", "select", "select_on", "check_hccl_algo", "apply_hccl_algo", "kernel_table",
           "fastest_of", "two_level"]

#: Built-in collective (an ``aicpu_kernels/`` directory) -> HcclCMDType (hccl_types.h).
CMD: dict[str, int] = {"broadcast": 1, "allreduce": 2, "reduce": 3, "allgather": 6, "reduce_scatter": 7,
                       "alltoallv": 8, "alltoall": 10, "gather": 11, "scatter": 12, "barrier": 103}
_SEND, _RECV = 4, 5  # send_recv: by direction


@dataclass(frozen=True)
class Selection:
    """The algorithm of one call.

    Attributes:
        name: the algorithm that runs (CANN's name, or a built-in kernel's own); "" when no kernel
            implements the one chosen and the kernel chose by itself.
        chosen: the algorithm chosen (= ``name`` when a kernel implements it).
        cann: CANN's own choice for the call (before ``HCCL_ALGO`` or ``algorithm=``).
        source: the file and line of CANN's selector that choice follows (hicann/hccl at 09300b70).
        how: ``auto``, ``HCCL_ALGO <rule>``, ``algorithm=<name>``, ``cost table``, ...
        kernel: the built-in kernel's ``OpParam.algo``.
        tuner_matched: CANN's tuner plugin changed the choice.
        entries: CANN's cost table when ``HCCL_USE_NEW_SELECTOR=1`` chose (algName, engine,
            executor, template, model_cost, cost).
        modelled: ``algorithm="fastest"``: the modelled time (us) of every algorithm tried.
    """

    name: str
    chosen: str = ""
    cann: str = ""
    source: str = ""
    how: str = ""
    kernel: int = 0
    tuner_matched: bool = False
    entries: tuple[dict, ...] = ()
    modelled: tuple[tuple[str, float], ...] = field(default=())

    @classmethod
    def from_json(cls, text: str) -> "Selection":
        d = json.loads(text)
        return cls(name=d["name"], chosen=d["chosen"], cann=d["cann"], source=d["source"], how=d["how"], kernel=int(d["kernel"]),
                   tuner_matched=bool(d["tuner_matched"]), entries=tuple(d["entries"]))

    @property
    def shown(self) -> str:
        """The name for tables and logs: what ran, or the choice when no kernel had it."""
        return self.name or f"kernel's own (chosen: {self.chosen or self.cann})"


def cmd_of(collective: str, params: dict | None = None) -> int:
    """HcclCMDType of a built-in collective (send_recv: by ``params['direction']``)."""
    if collective == "send_recv":
        return _RECV if params and params.get("direction") else _SEND
    try:
        return CMD[collective]
    except KeyError:
        raise ConfigError(f"{collective!r} is not a built-in collective ({', '.join(sorted(CMD))}, send_recv)",
                          key="collective") from None


_BUF = 1 << 16


def _error(rt: Any, code: int, what: str) -> ConfigError:
    msg = rt.recent_error_message() if rt is not None else ""
    return ConfigError(msg or f"{what} failed with HCCL code {code}", key="algorithm")


def select(comm: Any, collective: str, count: int, dtype_value: int, reduce_op: int = 0, forced: str | None = None,
           params: dict | None = None) -> Selection:
    """The algorithm of a call on ``comm`` (the emulator's ``HcommKitAlgoSelect``): CANN's choice,
    ``HCCL_ALGO``'s, or ``forced``; logged at info level and noted on the trace.

    ``count`` is what CANN's op puts in ``DataDes.count``: allreduce / broadcast / reduce the count,
    allgather the count sent, reduce_scatter / scatter the count received, alltoall the count per peer.

    Raises:
        ConfigError: a link the collective needs is down (naming it and ``HCOMM_KIT_LINKS_DOWN``),
            ``forced`` is unknown or has no kernel, ``HCCL_ALGO`` leaves nothing that runs.
    """
    rt = comm.rt
    buf = ctypes.create_string_buffer(_BUF)
    n = rt.checked.HcommKitAlgoSelect(comm.handle, cmd_of(collective, params), int(count), int(dtype_value),
                                      int(reduce_op), forced.encode() if forced else None, buf, len(buf))
    if n < 0:
        raise _error(rt, -n, "HcommKitAlgoSelect")
    return Selection.from_json(buf.value.decode())


# ---- without a communicator: the emulator library's pure functions ---------------------------
_LIB: list = []


def _lib() -> Any:
    """The emulator library for its pure functions (built on first use, as every rank loads it)."""
    if not _LIB:
        from ..build.emulator import get_library

        lib = ctypes.CDLL(str(get_library()))
        lib.HcommKitAlgoSelectOn.restype = ctypes.c_int32
        lib.HcommKitAlgoSelectOn.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64,
                                             ctypes.c_int32, ctypes.c_int32, ctypes.c_char_p, ctypes.c_char_p,
                                             ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint64]
        lib.HcommKitAlgoConfigCheck.restype = ctypes.c_int32
        lib.HcommKitAlgoConfigCheck.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64]
        lib.HcommKitAlgoConfigApply.restype = ctypes.c_int32
        lib.HcommKitAlgoConfigApply.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p, ctypes.c_uint64]
        lib.HcommKitAlgoKernels.restype = ctypes.c_int32
        lib.HcommKitAlgoKernels.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        _LIB.append(lib)
    return _LIB[0]


def _topology_json(topology: Any) -> str:
    return json.dumps({"product": topology.product, "servers": [list(s) for s in topology.servers],
                       "pods": [list(p) for p in topology.pods], "down": [list(d) for d in topology.links_down]})


def select_on(topology: Any, rank: int, collective: str, count: int, dtype_value: int, reduce_op: int = 0,
              hccl_algo: str | None = None, forced: str | None = None, new_selector: bool = False,
              params: dict | None = None) -> tuple[dict, Selection]:
    """CANN's topology fields of ``rank`` in ``topology`` (a :class:`hcomm_kit.core.topology.Topology`)
    and the selection of a call there, without a communicator. ``hccl_algo``: the ``HCCL_ALGO`` text
    to apply; ``new_selector``: as ``HCCL_USE_NEW_SELECTOR=1`` (CANN's cost table; the tuner plugin
    needs a communicator).

    Raises:
        ConfigError: as :func:`select`, and for a malformed topology or ``HCCL_ALGO``.
    """
    lib = _lib()
    buf = ctypes.create_string_buffer(_BUF)
    n = lib.HcommKitAlgoSelectOn(_topology_json(topology).encode(), rank, cmd_of(collective, params), int(count),
                                 int(dtype_value), int(reduce_op), hccl_algo.encode() if hccl_algo else None,
                                 forced.encode() if forced else None, int(new_selector), buf, len(buf))
    if n < 0:
        msg = lib.aclGetRecentErrMsg()
        raise ConfigError(msg.decode() if msg else f"HcommKitAlgoSelectOn failed with HCCL code {-n}",
                          key="algorithm")
    d = json.loads(buf.value.decode())
    return d["topo"], Selection.from_json(json.dumps(d["selection"]))


def check_hccl_algo(text: str | None) -> None:
    """``HCCL_ALGO`` as communicator creation checks it (CANN's executor grammar, else its
    documented ``level0:NA;level1:<algo>`` form).

    Raises:
        ConfigError: naming the text, where it stopped and both grammars.
    """
    if not text:
        return
    msg = ctypes.create_string_buffer(4096)
    if _lib().HcommKitAlgoConfigCheck(text.encode(), msg, len(msg)):
        raise ConfigError(msg.value.decode(), key="HCCL_ALGO")


def apply_hccl_algo(text: str, collective: str) -> dict:
    """``HCCL_ALGO`` applied to CANN's registered algorithms of ``collective`` (what the selection
    does with it): ``{"decided", "rule", "kept": [names], "kernel"}``.

    Raises:
        ConfigError: malformed, or the documented form names nothing there is.
    """
    lib = _lib()
    buf = ctypes.create_string_buffer(_BUF)
    n = lib.HcommKitAlgoConfigApply(text.encode(), cmd_of(collective), buf, len(buf))
    if n < 0:
        msg = lib.aclGetRecentErrMsg()
        raise ConfigError(msg.decode() if msg else f"HCCL code {-n}", key="HCCL_ALGO")
    return json.loads(buf.value.decode())


def kernel_table() -> list[dict]:
    """The built-in kernels' algorithms as the emulator maps names to ``OpParam.algo``:
    ``[{"coll", "collective", "name", "id"}, ...]``."""
    buf = ctypes.create_string_buffer(_BUF)
    _lib().HcommKitAlgoKernels(buf, len(buf))
    return json.loads(buf.value.decode())


# ---- algorithm="fastest" -----------------------------------------------------------------------
def fastest_of(candidates: "list[tuple[str, int]]", trial: Callable[[int], "float | None"]) -> Selection:
    """The candidate ``(name, kernel id)`` whose trial run the timing model predicts fastest.

    ``trial(kernel_id)`` runs the collective once with that kernel algorithm (on scratch buffers,
    every rank the same) and returns the modelled time in us, or None when it cannot run there.
    Ties go to the earlier candidate.

    Raises:
        ConfigError: no candidate could run, or the timing model is off.
    """
    times: list[tuple[str, float]] = []
    for name, kernel in candidates:
        us = trial(kernel)
        if us is not None:
            times.append((name, us))
    if not times:
        raise ConfigError("algorithm='fastest': none of the built-in's algorithms could be run and modelled "
                          f"({', '.join(n for n, _ in candidates)})", key="algorithm")
    best = min(times, key=lambda t: t[1])
    return Selection(name=best[0], chosen=best[0], how="fastest by the timing model (" +
                     ", ".join(f"{n} {us:.1f} us" for n, us in times) + ")",
                     kernel=dict(candidates)[best[0]], modelled=tuple(times))


# ---- the emulator's two-level kernel ("hierarchical") -------------------------------------------
#: The largest communicator the two-level layout describes (HK_HIER_MAX_RANKS of hk_coll.h).
HIER_MAX_RANKS = 64


def two_level(topo: Any, nranks: int) -> "tuple[tuple[int, ...], ...] | str":
    """The servers of the two-level kernel (each server's ranks ascending, servers in the
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
