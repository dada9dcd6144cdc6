"""The checked form of ``op.toml``: :class:`OpSpec`, the tables it is checked against (products,
patterns, handshakes, topologies, output and thread rules, the A2/A3 reduce dtypes and ops, the
resource limits), and what follows from it: thread, notify and channel counts, the C field lists of
``OpParam`` / ``AlgResourceCtx`` and their ``ctypes`` mirrors. Parsing and validating the file is
:mod:`hcomm_kit.build.opspec`."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.errors import ConfigError

if TYPE_CHECKING:
    from .kinds import Kind


OP_TOML = "op.toml"
PATTERNS = ("empty", "p2p", "ring-allreduce", "mesh-allgather", "direct-reduce", "direct-broadcast",
            "pairwise-alltoall", "halo-exchange", "pairwise-alltoallv", "direct-scatter", "direct-gather",
            "pairwise-reduce-scatter")
HANDSHAKES = ("thread-notify", "acl-notify")
PRODUCTS = ("Ascend910B", "Ascend910_93", "Ascend950")
A2A3 = ("Ascend910B", "Ascend910_93")
TOPOLOGIES = ("none", "p2p", "ring", "mesh", "peer")
OUTPUT_RULES = ("count", "count*ranks", "count/ranks")
THREAD_RULES = ("ranks", "ranks-1", "ranks+2", "peers")
# Hcomm reduce (local, write-reduce, read-reduce) on A2/A3: these dtypes x sum/max/min only (hcomm.md §3.1).
A2A3_REDUCE_DTYPES = ("int8", "int16", "int32", "fp16", "fp32", "bf16")
A2A3_REDUCE_OPS = ("sum", "max", "min")

MAX_CHANNELS = 64            # channels[] length; also the largest rank count of mesh/p2p operators
MIN_MAX_THREADS = 8          # threads[] is at least this long
MAX_THREADS_LIMIT = 64
MAX_NOTIFIES_PER_THREAD = 39  # + the reserved slot 0 = 40, HCCL-VM's per-thread limit
MAX_CHANNEL_NOTIFIES = 64
MAX_PARAM_ARRAY = 4096
MAX_RINGS = 8                # [resources.channels] rings: AlgResourceCtx.rings[] holds at most this many
#: The [[param]] an operator with ``algorithms`` reads: 0 = none asked, i = the i-th listed (from 1).
ALGO_PARAM = "algo"
#: alltoallv's call arguments -> the [[param]] names that may carry them (snake case as the Python
#: call, or HCCL's C names as the built-in alltoallv); the displacements are optional (packed).
COUNT_PARAMS: dict[str, tuple[str, ...]] = {
    "send_counts": ("send_counts", "sendCounts"), "recv_counts": ("recv_counts", "recvCounts"),
    "send_displs": ("send_displs", "sdispls"), "recv_displs": ("recv_displs", "rdispls"),
}
NOTIFY_TIMEOUT_DEFAULT = 1836  # seconds (hcomm.md §1.7)
TAG_LENGTH = 160
COMM_NAME_LENGTH = 128

# C scalar types accepted for user [[param]] fields -> ctypes type.
PARAM_TYPES: dict[str, Any] = {
    "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8,
    "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16,
    "int32_t": ctypes.c_int32, "uint32_t": ctypes.c_uint32,
    "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float, "double": ctypes.c_double,
    "void*": ctypes.c_void_p,
}


@dataclass(frozen=True)
class ParamField:
    """One user field of ``OpParam`` (a ``[[param]]`` table)."""

    name: str
    type: str
    array: int | None = None


@dataclass(frozen=True)
class CField:
    """One field of a generated C struct, as both the header template and the mirror see it.

    Attributes:
        name: field name.
        ctype: C type text (``uint32_t``, ``ThreadHandle``, ``CommBuffer``, ``AlgResourceCtx*`` ...).
        array: fixed array length (the length expression for the header is ``array_text``).
        comment: one-line comment for the header.
        array_text: how the length is spelt in C (a macro or a number).
    """

    name: str
    ctype: str
    array: int | None = None
    comment: str = ""
    array_text: str = ""

    @property
    def declaration(self) -> str:
        """``ThreadHandle threads[MY_OP_MAX_THREADS]`` (without the semicolon)."""
        suffix = f"[{self.array_text or self.array}]" if self.array else ""
        return f"{self.ctype} {self.name}{suffix}"


@dataclass(frozen=True)
class OpSpec:
    """A validated ``op.toml``. Build it with :func:`load_opspec` or :func:`parse_opspec`.

    Attributes mirror the op.toml keys (``threads`` keeps the rule as written: an int or one of
    ``"ranks"``, ``"ranks-1"``, ``"ranks+2"``, ``"peers"``; ``kind`` is set, from the pattern when op.toml has no
    ``kind``: ``kind_explicit`` says which; ``reference`` is "" for the kind's own; ``algorithms``
    names the values of the ``algo`` parameter, from 1). ``opdir`` is the operator directory (None
    when parsed from text) and ``toml_sha256`` the hash of the op.toml bytes.
    """

    name: str
    kernel: str
    so: str
    handshake: str
    pattern: str
    products: tuple[str, ...]
    dtypes: tuple[str, ...]
    reduce_ops: tuple[str, ...]
    vendor: str
    output: str
    inplace: bool
    threads: int | str
    notifies_per_thread: int
    topology: str
    channel_notifies: int
    params: tuple[ParamField, ...]
    same_args: bool = True
    kind: str = "custom"
    reference: str = ""
    kind_explicit: bool = False
    algorithms: tuple[str, ...] = ()
    ring_order: str = "rank"
    rings: int = 1
    link_map: bool = False
    test_topology: str = ""
    test_links_down: str = ""
    opdir: Path | None = None
    toml_sha256: str = ""
    _memo: dict = field(default_factory=dict, compare=False, repr=False, hash=False)

    # ---- names and paths ------------------------------------------------------------------

    @property
    def stem(self) -> str:
        """File stem of the kernel and its op-info JSON: ``lib<name>_aicpu_kernel``."""
        return self.so[: -len(".so")]

    @property
    def macro_prefix(self) -> str:
        """``MY_OP`` for operator ``my_op``."""
        return self.name.upper()

    @property
    def namespace(self) -> str:
        """C++ namespace of the kernel code: ``ops_<name>``."""
        return f"ops_{self.name}"

    @property
    def header_name(self) -> str:
        """``<name>_param.h``."""
        return f"{self.name}_param.h"

    @property
    def json_name(self) -> str:
        """``<stem>.json``, the op-info file."""
        return f"{self.stem}.json"

    def path(self, relative: str) -> Path:
        """A path inside the operator directory."""
        if self.opdir is None:
            raise ConfigError("this OpSpec was parsed from text and has no operator directory", key="opdir")
        return self.opdir / relative

    # ---- resources ---------------------------------------------------------------------------

    @property
    def is_reduction(self) -> bool:
        """True when the operator takes a reduce op (``reduce_ops`` is not empty)."""
        return bool(self.reduce_ops)

    def product_limits(self) -> list[str]:
        """What some of ``products`` cannot run of ``reduce_ops`` x ``dtypes``, one sentence each.

        A scaffolded kernel reduces with HcommLocalReduceOnThread, which on A2/A3 takes only
        :data:`A2A3_REDUCE_DTYPES` x :data:`A2A3_REDUCE_OPS` (hcomm.md §3.1); a list mixing A2/A3
        with Ascend950 is valid (the call refuses the rest on A2/A3; the generated tests check that).
        """
        a2a3 = [p for p in self.products if p in A2A3]
        if not self.reduce_ops or not a2a3:
            return []
        ops = [r for r in self.reduce_ops if r not in A2A3_REDUCE_OPS]
        dts = [d for d in self.dtypes if d not in A2A3_REDUCE_DTYPES]
        if not ops and not dts:
            return []
        what = " and ".join(x for x in (f"reduce op(s) {', '.join(ops)}" if ops else "",
                                        f"dtype(s) {', '.join(dts)}" if dts else "") if x)
        return [f"{what} run on {', '.join(p for p in self.products if p not in A2A3)} only: on "
                f"{', '.join(a2a3)} HcommLocalReduceOnThread reduces {'/'.join(A2A3_REDUCE_DTYPES)} x "
                f"{'/'.join(A2A3_REDUCE_OPS)}, so the operator refuses the rest there (the generated tests "
                "check the refusal); reduce them in your kernel's own code to support them on A2/A3"]

    @property
    def max_threads(self) -> int:
        """Length of ``AlgResourceCtx.threads``: the resolved maximum, at least 8."""
        if isinstance(self.threads, int):
            return max(MIN_MAX_THREADS, self.threads)
        return MAX_CHANNELS

    @property
    def thread_notify_slots(self) -> int:
        """Notify slots acquired per thread: the pattern's N plus slot 0 (host "go")."""
        return self.notifies_per_thread + 1

    def ring_layout(self, rank_size: int, links_down: "tuple[tuple[int, int], ...] | list" = ()) -> list[tuple[int, ...]]:
        """The rings of a ``ring`` topology on ``rank_size`` ranks with ``links_down`` down: each
        as its ranks in ring order (:func:`hcomm_kit.build.rings.ring_orders` with ``ring_order``
        and ``rings``); ``[]`` for other topologies.

        Raises:
            ConfigError: no ring 0 (rank order crosses a downed link, or no ring avoids them).
        """
        if self.topology != "ring":
            return []
        from .rings import ring_orders

        key = ("rings", rank_size, tuple(sorted((min(a, b), max(a, b)) for a, b in links_down)))
        if key not in self._memo:
            try:
                self._memo[key] = ring_orders(rank_size, key[2], order=self.ring_order, rings=self.rings,
                                              what=f"operator {self.name}")
            except ConfigError as exc:
                raise ConfigError(exc.reason, key=exc.key,
                                  path=self.opdir / OP_TOML if self.opdir is not None else None) from None
        return self._memo[key]

    def channel_peers(self, rank: int, rank_size: int,
                      links_down: "tuple[tuple[int, int], ...] | list" = ()) -> list[tuple[int, int]]:
        """Which channels the host acquires: ``[(index in channels[], peer rank), ...]``.

        * ``mesh``: every other rank, at index = peer rank.
        * ``p2p``: the ring neighbours ``rank-1`` and ``rank+1`` (one entry if they coincide),
          at index = peer rank.
        * ``ring``: per ring k of :meth:`ring_layout` (``links_down``: the links taken down),
          index 2k = the rank before this one (prev), 2k + 1 = the rank after it (next); in rank
          order (``ring_order = "rank"``) that is ``rank-1`` and ``rank+1``. Both name the same
          peer (and channel) when there are 2 ranks.
        * ``peer``: none up front; the channel to the peer named by ``OpParam.root`` is acquired
          on the first call with that peer (collective between the two ends only), at index =
          peer rank (see :meth:`hcomm_kit.ops.custom_op.CustomOp.launch`).
        * ``none`` or a single rank: no channel.
        """
        _check_rank(rank, rank_size)
        if self.topology in ("none", "peer") or rank_size == 1:
            return []
        prev, nxt = (rank - 1) % rank_size, (rank + 1) % rank_size
        if self.topology == "ring":
            out = []
            for k, ring in enumerate(self.ring_layout(rank_size, links_down)):
                pos = ring.index(rank)
                out += [(2 * k, ring[pos - 1]), (2 * k + 1, ring[(pos + 1) % rank_size])]
            return out
        if rank_size > MAX_CHANNELS:
            raise ConfigError(f"{self.topology} operators support at most {MAX_CHANNELS} ranks, got {rank_size}",
                              key="resources.channels.topology")
        if self.topology == "mesh":
            return [(p, p) for p in range(rank_size) if p != rank]
        return [(p, p) for p in sorted({prev, nxt})]

    def channel_num(self, rank_size: int, links_down: "tuple[tuple[int, int], ...] | list" = ()) -> int:
        """Value of ``AlgResourceCtx.channelNum``: the length of the used part of ``channels[]``."""
        if self.topology == "none" or rank_size == 1:
            return 0
        return 2 * len(self.ring_layout(rank_size, links_down)) if self.topology == "ring" else rank_size

    def thread_count(self, rank_size: int) -> int:
        """Device threads to acquire for ``rank_size`` ranks (at least 1: threads[0] is the main thread)."""
        if rank_size < 1:
            raise ConfigError(f"rank count must be >= 1, got {rank_size}", key="rank_size")
        if isinstance(self.threads, int):
            n = self.threads
        elif self.threads == "ranks":
            n = rank_size
        elif self.threads == "ranks-1":
            n = rank_size - 1
        elif self.threads == "ranks+2":
            n = rank_size + 2
        else:  # peers: distinct channel peers of rank 0
            n = len({peer for _, peer in self.channel_peers(0, rank_size)})
        n = max(1, n)
        if n > self.max_threads:
            raise ConfigError(f"operator {self.name} needs {n} threads for {rank_size} ranks but "
                              f"threads[] holds {self.max_threads}", key="resources.threads")
        return n

    @property
    def kind_info(self) -> "Kind":
        """The :class:`~hcomm_kit.build.kinds.Kind` row of this operator's kind."""
        from .kinds import KINDS

        return KINDS[self.kind]

    @property
    def rooted(self) -> bool:
        """The operator takes a root (rooted kinds)."""
        return self.kind_info.rooted

    def default_reduce_op(self, given: str | None = None) -> str | None:
        """The reduce op of a call: ``given`` (``-o``, ``reduce_op=``), else the first of ``reduce_ops``;
        None for an operator that does not reduce. The one rule of run, test, bench and Python calls."""
        if not self.reduce_ops:
            return None
        return given if given is not None else self.reduce_ops[0]

    def input_count(self, count: int, rank_size: int) -> int:
        """Input elements of a call of ``count`` (``OpParam.count``, HCCL's count: see
        :class:`~hcomm_kit.build.kinds.Kind`) on ``rank_size`` ranks: ``count * rank_size`` for
        the kinds whose input holds one block per rank, else ``count``."""
        return count * rank_size if self.kind_info.blocks else count

    def call_count(self, elements: int, rank_size: int) -> int:
        """``OpParam.count`` of a call whose input holds ``elements`` (the inverse of
        :meth:`input_count`).

        Raises:
            ConfigError: the kind cuts the input into one block per rank and ``elements`` does not split.
        """
        if not self.kind_info.blocks:
            return elements
        if elements % rank_size:
            raise ConfigError(f"operator {self.name} ({self.kind}): the input's {elements} elements do not split "
                              f"into {rank_size} equal blocks (one per rank; count is the block, as HCCL's)",
                              key="count")
        return elements // rank_size

    def output_count(self, count: int, rank_size: int, recv_counts: Any = None) -> int:
        """Output element count of a call of ``count`` (``OpParam.count``) on ``rank_size`` ranks
        (``recv_counts``: the call's, for the rule ``"recv_counts"``)."""
        if self.kind_info.output == "recv_counts":
            if recv_counts is None:
                raise ConfigError(f"operator {self.name} ({self.kind}) needs recv_counts=[...] (one count per "
                                  "rank): its output holds their sum", key="recv_counts")
            return int(sum(int(c) for c in list(recv_counts)[:rank_size]))
        if self.output == "count":
            return count
        if self.output == "count*ranks":
            return count * rank_size
        if count % rank_size:
            raise ConfigError(f"operator {self.name} needs a count divisible by the rank count "
                              f"({count} % {rank_size} != 0)", key="count")
        return count // rank_size

    def count_params(self) -> dict[str, str]:
        """alltoallv: the ``[[param]]`` field of each count argument of the call that op.toml
        declares (``{"send_counts": "sendCounts", ...}``, see :data:`COUNT_PARAMS`); {} otherwise."""
        if self.kind != "alltoallv":
            return {}
        have = {p.name for p in self.params}
        return {arg: next(n for n in names if n in have) for arg, names in COUNT_PARAMS.items()
                if any(n in have for n in names)}

    def algorithm_value(self, name: str) -> int:
        """The ``algo`` value of the algorithm ``name`` of ``[op].algorithms`` (1 for the first).

        Raises:
            ConfigError: the operator lists no algorithms, or not this one (did-you-mean).
        """
        import difflib

        if not self.algorithms:
            raise ConfigError(f"operator {self.name} lists no algorithms (op.toml [op].algorithms = [...], read by "
                              f"the kernel from OpParam.{ALGO_PARAM})", key="--algorithm")
        if name not in self.algorithms:
            close = difflib.get_close_matches(name, self.algorithms, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"operator {self.name} has no algorithm {name!r}{hint} (op.toml [op].algorithms: "
                              f"{', '.join(self.algorithms)})", key="--algorithm")
        return self.algorithms.index(name) + 1

    # ---- C layout (one list for the header template and the ctypes mirror) -------------------

    def resctx_fields(self) -> list[CField]:
        """Fields of ``AlgResourceCtx`` in declaration order."""
        p = self.macro_prefix
        return [
            CField("aicpuThread", "ThreadHandle", comment="main AICPU thread, == threads[0]"),
            CField("cpuThreadOnAicpu", "ThreadHandle",
                   comment='host stream thread exported to AICPU_TS; "done" goes to its slot 0 (thread-notify)'),
            CField("notifyIds", "uint32_t", 2, array_text="2",
                   comment='ACL notify ids (acl-notify): [0] "go" host->kernel, [1] "done" kernel->host'),
            CField("rank", "uint32_t", comment="this rank"),
            CField("rankSize", "uint32_t", comment="ranks in the communicator"),
            CField("threadNum", "uint32_t", comment="valid entries of threads[]"),
            CField("channelNum", "uint32_t", comment="used entries of channels[]"),
            CField("notifyNumPerThread", "uint32_t",
                   comment=f"slots acquired per thread: {p}_THREAD_NOTIFY_NUM + 1 (slot 0 = host \"go\")"),
            CField("reserved0", "uint32_t", comment="padding, keep 0"),
            CField("localBuffer", "CommBuffer", comment="this rank's HCCL buffer (device memory)"),
            CField("threads", "ThreadHandle", self.max_threads, array_text=f"{p}_MAX_THREADS",
                   comment="AICPU_TS device threads; [0] is the main thread"),
            CField("channels", "ChannelInfo", MAX_CHANNELS, array_text=f"{p}_MAX_CHANNELS",
                   comment=self._channel_comment()),
            *(self._ring_fields() if self.topology == "ring" else ()),
            *((CField("linkUp", "uint64_t", MAX_CHANNELS, array_text=f"{p}_MAX_CHANNELS",
                      comment="op.toml link_map: bit q of linkUp[r] set when ranks r and q have a link (not taken "
                      "down, HCOMM_KIT_LINKS_DOWN)"),) if self.link_map else ()),
        ]

    def _ring_fields(self) -> list[CField]:
        p = self.macro_prefix
        return [
            CField("ringNum", "uint32_t", comment="valid entries of rings[]: op.toml rings, fewer where the rank graph "
                   "holds fewer link-disjoint rings (1 on 2-4 ranks)"),
            CField("ringOrder", "uint32_t", comment=f"op.toml ring_order: {p}_RING_ORDER_RANK or "
                   f"{p}_RING_ORDER_AVOID_DOWN"),
            CField("rings", "RingInfo", self.rings, array_text=f"{p}_MAX_RINGS",
                   comment="ring k: this rank's position and neighbours; channels[2k] = prev, [2k+1] = next"),
        ]

    def _channel_comment(self) -> str:
        if self.topology == "ring":
            return ("ring k: [2k] = prev, [2k+1] = next (rings[k]; rank order: rank-1, rank+1); the same channel when "
                    "rankSize == 2")
        if self.topology == "none":
            return "unused (topology none)"
        if self.topology == "peer":
            return ("indexed by peer rank; the peer named by OpParam.root is acquired on first use, "
                    "others may be 0")
        return "indexed by peer rank; handle 0 for this rank and for ranks without a channel"

    def _count_comment(self) -> str:
        info = self.kind_info
        if info.input == "send_counts":
            return f"input element count (kind {self.kind}: the counts are parameters)"
        if not info.output:
            return f"element count of the call: input count, output {self.output} elements"
        return f"HCCL's count (kind {self.kind}): input {info.input}, output {info.output} elements"

    def param_fields(self) -> list[CField]:
        """Fields of ``OpParam`` in declaration order: the standard ones, then the user's."""
        fields = [
            CField("tag", "char", TAG_LENGTH, array_text=str(TAG_LENGTH), comment="op tag, also the batch-mode tag"),
            CField("commName", "char", COMM_NAME_LENGTH, array_text=str(COMM_NAME_LENGTH),
                   comment="HcclGetCommName(); used by HcommAcquireComm"),
            CField("inputPtr", "void*", comment="input, device memory"),
            CField("outputPtr", "void*", comment="output, device memory"),
            CField("count", "uint64_t", comment=self._count_comment()),
            CField("devType", "int32_t", comment="DeviceType: 0 A2, 1 A3, 2 A5 (Ascend950)"),
            CField("dataType", "int32_t", comment="HcclDataType"),
            CField("opType", "int32_t", comment="HcclCMDType"),
            CField("reduceOp", "int32_t", comment="HcclReduceOp (reductions only)"),
            CField("root", "uint32_t", comment="root rank (rooted collectives only)"),
            CField("notifyTimeout", "uint32_t", comment="wait timeout of every kernel wait, seconds, 0 = forever"),
            CField("cpuThread", "ThreadHandle", comment="host stream thread (CPU_TS)"),
            CField("aicpuThreadOnCpu", "ThreadHandle", comment="main AICPU thread exported to CPU_TS"),
            CField("resCtx", "AlgResourceCtx*", comment="engine context, device memory"),
        ]
        for pf in self.params:
            fields.append(CField(pf.name, pf.type, pf.array, array_text=str(pf.array or ""),
                                 comment="user parameter (op.toml [[param]])"))
        return fields

    def param_struct(self) -> type[ctypes.Structure]:
        """ctypes mirror of ``OpParam`` (cached)."""
        return self._structs()["OpParam"]

    def resctx_struct(self) -> type[ctypes.Structure]:
        """ctypes mirror of ``AlgResourceCtx`` (cached)."""
        return self._structs()["AlgResourceCtx"]

    def struct_mirrors(self) -> dict[str, type[ctypes.Structure]]:
        """Every mirrored struct by C name: CommBuffer, ChannelInfo, RingInfo (``ring`` topology),
        AlgResourceCtx, OpParam."""
        return dict(self._structs())

    def _structs(self) -> dict[str, type[ctypes.Structure]]:
        if "structs" not in self._memo:
            self._memo["structs"] = _make_structs(self)
        return self._memo["structs"]

    def to_answers(self) -> dict[str, object]:
        """The op.toml content as a plain dict (for templates and the answers file)."""
        return {
            "name": self.name, "kernel": self.kernel, "so": self.so, "handshake": self.handshake,
            "pattern": self.pattern, "products": list(self.products), "dtypes": list(self.dtypes),
            "reduce_ops": list(self.reduce_ops), "vendor": self.vendor, "output": self.output,
            "inplace": self.inplace, "same_args": self.same_args, "threads": self.threads,
            "notifies_per_thread": self.notifies_per_thread, "topology": self.topology,
            "channel_notifies": self.channel_notifies, "kind": self.kind, "reference": self.reference,
            "algorithms": list(self.algorithms), "ring_order": self.ring_order, "rings": self.rings,
            "link_map": self.link_map,
            "test_topology": self.test_topology, "test_links_down": self.test_links_down,
            "params": [{"name": p.name, "type": p.type, "array": p.array} for p in self.params],
        }


def _check_rank(rank: int, rank_size: int) -> None:
    if rank_size < 1 or not 0 <= rank < rank_size:
        raise ConfigError(f"bad rank {rank} for {rank_size} ranks", key="rank")


COMMBUFFER_FIELDS = (CField("addr", "void*"), CField("size", "uint64_t"))
CHANNELINFO_FIELDS = (
    CField("remoteRank", "uint32_t"),
    CField("notifyNum", "uint32_t"),
    CField("handle", "ChannelHandle"),
    CField("remoteBuffer", "CommBuffer"),
)
#: One ring of a ``ring`` topology (AlgResourceCtx.rings[k]).
RINGINFO_FIELDS = (
    CField("pos", "uint32_t", comment="this rank's position in the ring: order[pos] == rank"),
    CField("prev", "uint32_t", comment="the rank before this one: order[(pos + rankSize - 1) % rankSize]"),
    CField("next", "uint32_t", comment="the rank after this one: order[(pos + 1) % rankSize]"),
    CField("order", "uint32_t", MAX_CHANNELS, comment="the ranks in ring order (rankSize entries)"),
)


def _make_structs(spec: OpSpec) -> dict[str, type[ctypes.Structure]]:
    made: dict[str, type[ctypes.Structure]] = {}

    def ctype_of(f: CField) -> Any:
        base = {
            "ThreadHandle": ctypes.c_uint64, "ChannelHandle": ctypes.c_uint64, "char": ctypes.c_char,
            "AlgResourceCtx*": ctypes.c_void_p,
        }.get(f.ctype) or made.get(f.ctype) or PARAM_TYPES[f.ctype]
        return base * f.array if f.array else base

    rings = (("RingInfo", RINGINFO_FIELDS),) if spec.topology == "ring" else ()
    for cname, fields in (("CommBuffer", COMMBUFFER_FIELDS), ("ChannelInfo", CHANNELINFO_FIELDS), *rings,
                          ("AlgResourceCtx", spec.resctx_fields()), ("OpParam", spec.param_fields())):
        made[cname] = type(cname, (ctypes.Structure,), {
            "_fields_": [(f.name, ctype_of(f)) for f in fields],
            "__doc__": f"ctypes mirror of {cname} in inc/{spec.header_name} (operator {spec.name}).",
        })
    return made


# A spec with no user fields, used to list the standard OpParam field names.
_DUMMY = OpSpec(name="x", kernel="X", so="libx.so", handshake="thread-notify", pattern="empty",
                products=PRODUCTS, dtypes=("fp32",), reduce_ops=(), vendor="cust", output="count",
                inplace=False, threads=1, notifies_per_thread=0, topology="none", channel_notifies=0,
                params=())
