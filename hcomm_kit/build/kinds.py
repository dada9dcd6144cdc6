"""What an operator computes: the one table of collective kinds (op.toml ``[op].kind``).

Every command that runs, checks, sizes or compares an operator reads the operator's kind from
here (``hcomm-kit run`` / ``test`` / ``bench``, the generated tests, ``comm.load_op``): the output
size, the bus bandwidth factor (nccl-tests' PERFORMANCE.md conventions), the matching built-in
collective and MPI call of ``--compare builtin,mpi``, which ranks' outputs are checked, the numpy
reference (``"module:function"``, resolved by :mod:`hcomm_kit.ops.expect`) and the extra call
arguments. Operators written before ``kind`` existed get one from their pattern
(:func:`infer_kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Kind", "KINDS", "KIND_NAMES", "BUS_FACTORS", "PATTERN_KINDS", "PATTERN_REFERENCES", "infer_kind",
           "get_kind", "kinds_table"]

#: Bus bandwidth factor expressions (n = ranks) -> their function (nccl-tests PERFORMANCE.md).
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "2(n-1)/n": lambda n: 2 * (n - 1) / n,
    "(n-1)/n": lambda n: (n - 1) / n,
    "1": lambda n: 1.0,
}

_REF = "hcomm_kit.ops.reference"


@dataclass(frozen=True)
class Kind:
    """One kind of collective.

    ``count`` is HCCL's count of the matching API (``HcclReduceScatter``'s ``recvCount``,
    ``HcclAlltoAll``'s ``sendCount``, ``HcclScatter``'s ``recvCount``, ...): the kernel's
    ``OpParam.count``, a per-rank block for the kinds whose input holds one block per rank. The
    built-in collectives of ``aicpu_kernels/`` follow it, and so do the patterns of ``hcomm-kit new``.

    Attributes:
        name: the op.toml value.
        input: input element count rule for a call of ``count`` on ``ranks`` ranks (``"count"``,
            ``"count*ranks"``: one block of ``count`` per rank; ``"send_counts"``: the call's
            ``send_counts`` reach into it, ``count`` is the input's size).
        output: output element count rule (``"count"``, ``"count*ranks"``, ``"recv_counts"``: the
            sum of the call's ``recv_counts``; ``""``: ``[io].output`` says, custom operators).
        bus: bus bandwidth factor expression (a key of :data:`BUS_FACTORS`; ``""``: time only).
        split: benchmarks cut data_size into one block per rank (nccl-tests' sizing).
        reduction: takes a reduce op (op.toml ``reduce_ops`` must not be empty).
        rooted: takes a root rank (call argument ``root``, ``-r``; default 0).
        checked: whose outputs the reference checks: ``"all"`` or ``"root"`` (the other ranks'
            calls return None in Python, as the built-in ``comm.reduce`` / ``comm.gather``).
        builtin: the built-in collective of ``--compare builtin`` (a ``hcomm-kit bench`` name).
        mpi: the MPI call of ``--compare mpi``.
        reference: the default numpy reference, ``"module:function"``.
        call_args: extra call arguments besides input, dtype, reduce_op.
        summary: what rank r's output holds.
    """

    name: str
    input: str
    output: str
    bus: str
    split: bool
    reduction: bool
    rooted: bool
    checked: str
    builtin: str | None
    mpi: str | None
    reference: str | None
    call_args: tuple[str, ...]
    summary: str

    def bus_factor(self) -> Callable[[int], float] | None:
        """busbw = algbw x factor(ranks); None: time only."""
        return BUS_FACTORS[self.bus] if self.bus else None

    def checks_rank(self, rank: int, root: int) -> bool:
        """Whether ``rank``'s output is checked against the reference."""
        return self.checked == "all" or rank == root

    @property
    def blocks(self) -> bool:
        """The input holds one block of ``count`` elements per rank (alltoall, reduce_scatter, scatter)."""
        return self.input == "count*ranks"


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("allreduce", "count", "count", "2(n-1)/n", False, True, False, "all", "allreduce", "Allreduce",
         f"{_REF}:allreduce", (), "the element-wise reduction of every rank's input"),
    Kind("reduce", "count", "count", "1", False, True, True, "root", "reduce", "Reduce",
         f"{_REF}:reduce_root", ("root",), "root: the element-wise reduction; other ranks: None (not checked)"),
    Kind("broadcast", "count", "count", "1", False, False, True, "all", "broadcast", "Bcast",
         f"{_REF}:broadcast", ("root",), "the root's input"),
    Kind("allgather", "count", "count*ranks", "(n-1)/n", True, False, False, "all", "allgather", "Allgather",
         f"{_REF}:allgather", (), "every rank's input, concatenated in rank order"),
    Kind("reduce_scatter", "count*ranks", "count", "(n-1)/n", True, True, False, "all", "reduce_scatter",
         "Reduce_scatter_block", f"{_REF}:reduce_scatter", (), "block r of the element-wise reduction"),
    Kind("alltoall", "count*ranks", "count*ranks", "(n-1)/n", True, False, False, "all", "alltoall", "Alltoall",
         f"{_REF}:alltoall", (), "block r of every rank's input, in source-rank order"),
    Kind("alltoallv", "send_counts", "recv_counts", "(n-1)/n", True, False, False, "all", "alltoallv",
         "Alltoallv", f"{_REF}:alltoallv", ("send_counts", "recv_counts"),
         "what each rank i sends to r (its send_counts[r] elements, packed), in source-rank order"),
    Kind("scatter", "count*ranks", "count", "(n-1)/n", True, False, True, "all", "scatter", "Scatter",
         f"{_REF}:scatter", ("root",), "block r of the root's input"),
    Kind("gather", "count", "count*ranks", "(n-1)/n", True, False, True, "root", "gather", "Gather",
         f"{_REF}:gather", ("root",), "root: every rank's input concatenated; other ranks: None (not checked)"),
    Kind("sendrecv", "count", "count", "1", False, False, False, "all", "shift", "Sendrecv",
         f"{_REF}:shift", (), "the input of rank r-1 (a ring shift: every rank sends to r+1)"),
    Kind("custom", "count", "", "", False, False, False, "all", None, None, None, (),
         "what op.toml's reference computes (no reference: not checked, time only)"),
)}
KIND_NAMES = tuple(KINDS)


def get_kind(name: str) -> Kind:
    """The :class:`Kind` named ``name`` (KeyError for an unknown one)."""
    return KINDS[name]


def infer_kind(pattern: str, output: str, reduction: bool) -> tuple[str, str]:
    """``(kind, reference)`` of an op.toml without ``[op].kind`` (written before the key existed),
    from what ``hcomm-kit new`` generated: the pattern's kind (:data:`PATTERN_KINDS`; p2p is a
    ring shift, empty a local copy), else a reduction of output "count" is an allreduce and
    "count*ranks" an allgather. A reduction of output "count/ranks" (a reduce-scatter written when
    ``count`` was the input's size) is ``custom`` with the reduce_scatter reference: its kernel
    takes the whole input's count, where kind reduce_scatter passes HCCL's per-rank count.
    Anything else is custom without a reference (not checked). ``reference`` is "" unless implied."""
    if pattern in PATTERN_KINDS:
        kind = KINDS[PATTERN_KINDS[pattern]]
        # Only while op.toml still describes what the pattern computes: an operator whose output
        # rule or reduction was changed since (the built-ins, written from the p2p pattern) is
        # judged by those instead.
        if (kind.output == output or kind.output not in ("count", "count*ranks", "count/ranks")) and \
                (kind.reduction == reduction or kind.name == "custom"):
            return kind.name, PATTERN_REFERENCES.get(pattern, "")
    if output == "count*ranks":
        return "allgather", ""
    if reduction and output == "count":
        return "allreduce", ""
    if reduction and output == "count/ranks":
        return "custom", f"{_REF}:reduce_scatter"
    return "custom", ""


#: What the patterns of ``hcomm-kit new`` compute (ring-allreduce and mesh-allgather: by their
#: op.toml, see :func:`infer_kind`, as users turned them into other things before kinds existed).
PATTERN_KINDS: dict[str, str] = {
    "empty": "custom", "p2p": "sendrecv", "direct-reduce": "reduce", "direct-broadcast": "broadcast",
    "pairwise-alltoall": "alltoall", "halo-exchange": "custom", "pairwise-alltoallv": "alltoallv",
    "direct-scatter": "scatter", "direct-gather": "gather", "pairwise-reduce-scatter": "reduce_scatter",
}
#: The reference a pattern's custom kind implies (the halo example writes its own into op.toml).
PATTERN_REFERENCES: dict[str, str] = {"empty": f"{_REF}:copy"}


def kinds_table() -> str:
    """The kinds as a Markdown table (docs/operators.md, ``hcomm-kit docs optoml``)."""
    rows = ["| kind | rank r's output | input / output count | root | reduce op | busbw factor | checked | "
            "--compare builtin / mpi |", "|---|---|---|---|---|---|---|---|"]
    for k in KINDS.values():
        extra = ", ".join(a for a in k.call_args if a != "root")
        out = f"`{k.output}`" if k.output else "`[io].output`"
        rows.append(f"| `{k.name}` | {k.summary}{' (call arguments ' + extra + ')' if extra else ''} | "
                    f"`{k.input}` / {out} | {'yes' if k.rooted else '-'} | "
                    f"{'yes' if k.reduction else 'if reduce_ops' if k.name == 'custom' else '-'} | "
                    f"{k.bus or 'time only'} | {'root' if k.checked == 'root' else 'every rank'} | "
                    f"{k.builtin or '-'} / {k.mpi or '-'} |")
    return "\n".join(rows)
