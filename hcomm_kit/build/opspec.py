"""``op.toml``: the single description of a custom operator, and its checked form :class:`OpSpec`.

One file describes the operator; from it come the C header shared by host and kernel
(``inc/<name>_param.h``), the op-info JSON, the kernel entry, the Python ``ctypes`` mirror of
``OpParam`` / ``AlgResourceCtx`` (:meth:`OpSpec.param_struct`, :meth:`OpSpec.resctx_struct`)
and what the host must acquire (threads, notify slots, channels). The C header and the mirror
are produced from the same field lists (:meth:`OpSpec.param_fields`, :meth:`OpSpec.resctx_fields`),
and ``hcomm-kit build`` compiles a probe to check that they agree.

Schema (every key except ``op.name`` is optional)::

    [op]
    name        = "my_allgather"                 # C identifier
    kernel      = "HcclMyAllgatherAicpuKernel"   # entry symbol = op-info key = functionName
    so          = "libmy_allgather_aicpu_kernel.so"
    handshake   = "thread-notify"                # or "acl-notify" (A2/A3 only)
    pattern     = "mesh-allgather"               # informational: what `new` generated
    products    = ["Ascend910B", "Ascend910_93", "Ascend950"]
    dtypes      = ["int8", "fp16", "fp32", ...]  # names from hcomm_kit.base.dtypes
    reduce_ops  = []                             # subset of sum/prod/max/min; [] = not a reduction
    vendor      = "cust"                         # opp/vendors/<vendor>/ on CANN

    [io]
    output  = "count"        # output element count: "count" | "count*ranks" | "count/ranks"
    inplace = false          # the kernel accepts output == input
    same_args = true         # every rank passes the same count, root and parameters (checked per call)

    [resources]
    threads             = 1  # AICPU device threads (int, "ranks", "ranks-1" or "peers"); threads[0] = main
    notifies_per_thread = 0  # the pattern's own thread-notify slots, numbered 1..N (slot 0 = host "go")

    [resources.channels]
    topology = "none"        # "none" | "p2p" | "ring" | "mesh" | "peer"
    notifies = 0             # notify slots per channel end

    [[param]]                # user fields appended to OpParam
    name  = "alpha"
    type  = "float"          # int8_t..uint64_t, float, double, void*
    array = 4                # optional fixed length
"""

from __future__ import annotations

import ctypes
import difflib
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.errors import BuildError, ConfigError
from . import names

__all__ = [
    "OP_TOML",
    "PATTERNS",
    "HANDSHAKES",
    "PRODUCTS",
    "TOPOLOGIES",
    "OUTPUT_RULES",
    "PARAM_TYPES",
    "MAX_CHANNELS",
    "CField",
    "ParamField",
    "OpSpec",
    "load_opspec",
    "parse_opspec",
    "check_op_info",
    "read_answers",
    "ANSWERS_FILE",
]

OP_TOML = "op.toml"
PATTERNS = ("empty", "p2p", "ring-allreduce", "mesh-allgather")
HANDSHAKES = ("thread-notify", "acl-notify")
PRODUCTS = ("Ascend910B", "Ascend910_93", "Ascend950")
A2A3 = ("Ascend910B", "Ascend910_93")
TOPOLOGIES = ("none", "p2p", "ring", "mesh", "peer")
OUTPUT_RULES = ("count", "count*ranks", "count/ranks")
THREAD_RULES = ("ranks", "ranks-1", "peers")
# Hcomm reduce (local, write-reduce, read-reduce) on A2/A3: these dtypes x sum/max/min only (hcomm.md §3.1).
A2A3_REDUCE_DTYPES = ("int8", "int16", "int32", "fp16", "fp32", "bf16")
A2A3_REDUCE_OPS = ("sum", "max", "min")

MAX_CHANNELS = 64            # channels[] length; also the largest rank count of mesh/p2p operators
MIN_MAX_THREADS = 8          # threads[] is at least this long
MAX_THREADS_LIMIT = 64
MAX_NOTIFIES_PER_THREAD = 39  # + the reserved slot 0 = 40, HCCL-VM's per-thread limit
MAX_CHANNEL_NOTIFIES = 64
MAX_PARAM_ARRAY = 4096
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


_UNSET = object()

# Accepted keys per table: key -> description (used for did-you-mean and docs).
_SCHEMA: dict[str, dict[str, str]] = {
    "": {"op": "table", "io": "table", "resources": "table", "param": "array of tables"},
    "op": {k: "" for k in ("name", "kernel", "so", "handshake", "pattern", "products", "dtypes",
                           "reduce_ops", "vendor")},
    "io": {"output": "", "inplace": "", "same_args": ""},
    "resources": {"threads": "", "notifies_per_thread": "", "channels": "table"},
    "resources.channels": {"topology": "", "notifies": ""},
    "param": {"name": "", "type": "", "array": ""},
}


@dataclass(frozen=True)
class OpSpec:
    """A validated ``op.toml``. Build it with :func:`load_opspec` or :func:`parse_opspec`.

    Attributes mirror the op.toml keys (``threads`` keeps the rule as written: an int or one of
    ``"ranks"``, ``"ranks-1"``, ``"peers"``). ``opdir`` is the operator directory (None when
    parsed from text) and ``toml_sha256`` the hash of the op.toml bytes.
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

    def channel_peers(self, rank: int, rank_size: int) -> list[tuple[int, int]]:
        """Which channels the host acquires: ``[(index in channels[], peer rank), ...]``.

        * ``mesh``: every other rank, at index = peer rank.
        * ``p2p``: the ring neighbours ``rank-1`` and ``rank+1`` (one entry if they coincide),
          at index = peer rank.
        * ``ring``: index 0 = ``rank-1`` (prev), index 1 = ``rank+1`` (next); both name the same
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
            return [(0, prev), (1, nxt)]
        if rank_size > MAX_CHANNELS:
            raise ConfigError(f"{self.topology} operators support at most {MAX_CHANNELS} ranks, got {rank_size}",
                              key="resources.channels.topology")
        if self.topology == "mesh":
            return [(p, p) for p in range(rank_size) if p != rank]
        return [(p, p) for p in sorted({prev, nxt})]

    def channel_num(self, rank_size: int) -> int:
        """Value of ``AlgResourceCtx.channelNum``: the length of the used part of ``channels[]``."""
        if self.topology == "none" or rank_size == 1:
            return 0
        return 2 if self.topology == "ring" else rank_size

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
        else:  # peers: distinct channel peers of rank 0
            n = len({peer for _, peer in self.channel_peers(0, rank_size)})
        n = max(1, n)
        if n > self.max_threads:
            raise ConfigError(f"operator {self.name} needs {n} threads for {rank_size} ranks but "
                              f"threads[] holds {self.max_threads}", key="resources.threads")
        return n

    def output_count(self, count: int, rank_size: int) -> int:
        """Output element count for an input of ``count`` elements on ``rank_size`` ranks."""
        if self.output == "count":
            return count
        if self.output == "count*ranks":
            return count * rank_size
        if count % rank_size:
            raise ConfigError(f"operator {self.name} needs a count divisible by the rank count "
                              f"({count} % {rank_size} != 0)", key="count")
        return count // rank_size

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
        ]

    def _channel_comment(self) -> str:
        if self.topology == "ring":
            return "[0] = prev (rank-1), [1] = next (rank+1); the same channel when rankSize == 2"
        if self.topology == "none":
            return "unused (topology none)"
        if self.topology == "peer":
            return ("indexed by peer rank; the peer named by OpParam.root is acquired on first use, "
                    "others may be 0")
        return "indexed by peer rank; handle 0 for this rank and for ranks without a channel"

    def param_fields(self) -> list[CField]:
        """Fields of ``OpParam`` in declaration order: the standard ones, then the user's."""
        fields = [
            CField("tag", "char", TAG_LENGTH, array_text=str(TAG_LENGTH), comment="op tag, also the batch-mode tag"),
            CField("commName", "char", COMM_NAME_LENGTH, array_text=str(COMM_NAME_LENGTH),
                   comment="HcclGetCommName(); used by HcommAcquireComm"),
            CField("inputPtr", "void*", comment="input, device memory"),
            CField("outputPtr", "void*", comment="output, device memory"),
            CField("count", "uint64_t", comment="input element count"),
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
        """Every mirrored struct by C name: CommBuffer, ChannelInfo, AlgResourceCtx, OpParam."""
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
            "channel_notifies": self.channel_notifies,
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


def _make_structs(spec: OpSpec) -> dict[str, type[ctypes.Structure]]:
    made: dict[str, type[ctypes.Structure]] = {}

    def ctype_of(f: CField) -> Any:
        base = {
            "ThreadHandle": ctypes.c_uint64, "ChannelHandle": ctypes.c_uint64, "char": ctypes.c_char,
            "AlgResourceCtx*": ctypes.c_void_p,
        }.get(f.ctype) or made.get(f.ctype) or PARAM_TYPES[f.ctype]
        return base * f.array if f.array else base

    for cname, fields in (("CommBuffer", COMMBUFFER_FIELDS), ("ChannelInfo", CHANNELINFO_FIELDS),
                          ("AlgResourceCtx", spec.resctx_fields()), ("OpParam", spec.param_fields())):
        made[cname] = type(cname, (ctypes.Structure,), {
            "_fields_": [(f.name, ctype_of(f)) for f in fields],
            "__doc__": f"ctypes mirror of {cname} in inc/{spec.header_name} (operator {spec.name}).",
        })
    return made


# ---- loading and validation ------------------------------------------------------------------


def load_opspec(path: str | Path) -> OpSpec:
    """Load and validate an operator's ``op.toml``.

    Args:
        path: the operator directory or its ``op.toml``.

    Returns:
        The validated :class:`OpSpec` (``opdir`` set).

    Raises:
        ConfigError: missing file, TOML syntax error, unknown key, bad value; the message names
            the file, the key and the reason.
    """
    path = Path(path)
    toml_path = path / OP_TOML if path.is_dir() else path
    try:
        data = toml_path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            f"no {OP_TOML} found; an operator directory holds one (create it with `hcomm-kit new NAME`)",
            path=toml_path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc}", path=toml_path) from None
    return parse_opspec(data.decode("utf-8", errors="replace"), path=toml_path, opdir=toml_path.parent,
                        sha256=hashlib.sha256(data).hexdigest())


def parse_opspec(text: str, *, path: str | Path | None = None, opdir: Path | None = None,
                 sha256: str | None = None) -> OpSpec:
    """Validate op.toml text (``path`` is only used in messages). See the module docstring."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"TOML syntax error: {exc}", path=path) from None
    v = _Validator(doc, path)
    return v.spec(opdir, sha256 or hashlib.sha256(text.encode()).hexdigest())


class _Validator:
    def __init__(self, doc: dict[str, Any], path: str | Path | None) -> None:
        self.doc, self.path = doc, path

    def fail(self, key: str, reason: str) -> ConfigError:
        return ConfigError(reason, key=key, path=self.path)

    def check_keys(self, table: dict[str, Any], schema_key: str, where: str) -> None:
        allowed = _SCHEMA[schema_key]
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, list(allowed), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                full = f"{where}.{key}" if where else key
                raise self.fail(full, f"unknown key {full!r}{hint} (accepted in "
                                f"{'[' + where + ']' if where else 'the top level'}: "
                                f"{', '.join(allowed)})")

    def table(self, parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
        value = parent.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(where, f"[{where}] must be a table, got {type(value).__name__}")
        return value

    def get(self, table: dict[str, Any], key: str, where: str, kind: type | tuple, default: Any = _UNSET) -> Any:
        full = f"{where}.{key}"
        if key not in table:
            if default is _UNSET:
                raise self.fail(full, f"required key {full!r} is missing")
            return default
        value = table[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        # bool is an int in Python, but `threads = true` is a mistake, not 1.
        if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
            want = " or ".join(k.__name__.replace("str", "string").replace("int", "integer") for k in kinds)
            raise self.fail(full, f"{full} must be a {want}, got {value!r}")
        return value

    def choice(self, table: dict[str, Any], key: str, where: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(table, key, where, str, default)
        if value not in choices:
            close = difflib.get_close_matches(value, choices, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.fail(f"{where}.{key}", f"{where}.{key} = {value!r} is not accepted{hint} "
                            f"(one of {', '.join(repr(c) for c in choices)})")
        return value

    def str_list(self, table: dict[str, Any], key: str, where: str, default: list[str]) -> list[str]:
        value = self.get(table, key, where, list, default)
        full = f"{where}.{key}"
        for item in value:
            if not isinstance(item, str):
                raise self.fail(full, f"{full} must be a list of strings, got item {item!r}")
        dups = sorted({x for x in value if value.count(x) > 1})
        if dups:
            raise self.fail(full, f"{full} lists {', '.join(map(repr, dups))} more than once")
        return value

    def int_range(self, table: dict[str, Any], key: str, where: str, lo: int, hi: int, default: int,
                  why: str = "") -> int:
        value = self.get(table, key, where, int, default)
        if not lo <= value <= hi:
            raise self.fail(f"{where}.{key}", f"{where}.{key} = {value} is out of range [{lo}, {hi}]{why}")
        return value

    def spec(self, opdir: Path | None, sha256: str) -> OpSpec:
        from ..base import dtypes as dtype_table

        doc = self.doc
        self.check_keys(doc, "", "")
        op = self.table(doc, "op", "op")
        io = self.table(doc, "io", "io")
        res = self.table(doc, "resources", "resources")
        chan = self.table(res, "channels", "resources.channels")
        self.check_keys(op, "op", "op")
        self.check_keys(io, "io", "io")
        self.check_keys(res, "resources", "resources")
        self.check_keys(chan, "resources.channels", "resources.channels")

        name = names.check_op_name(self.get(op, "name", "op", str), path=self.path)
        kernel = names.check_kernel_name(
            self.get(op, "kernel", "op", str, names.default_kernel_name(name)), path=self.path)
        so = self.get(op, "so", "op", str, f"lib{name}_aicpu_kernel.so")
        stem = so[:-3] if so.endswith(".so") else ""
        if not stem or "/" in so or not all(c.isalnum() or c in "_-." for c in stem):
            raise self.fail("op.so", f"op.so = {so!r} must be a plain file name ending in '.so' "
                            f"(letters, digits, '_', '-', '.'), e.g. 'lib{name}_aicpu_kernel.so'")
        handshake = self.choice(op, "handshake", "op", HANDSHAKES, "thread-notify")
        pattern = self.choice(op, "pattern", "op", PATTERNS, "empty")
        default_products = list(PRODUCTS if handshake == "thread-notify" else A2A3)
        products = self.str_list(op, "products", "op", default_products)
        if not products:
            raise self.fail("op.products", f"op.products is empty; list at least one of {', '.join(PRODUCTS)}")
        for prod in products:
            if prod not in PRODUCTS:
                close = difflib.get_close_matches(prod, PRODUCTS, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.fail("op.products", f"unknown product {prod!r} in op.products{hint} "
                                f"(accepted: {', '.join(PRODUCTS)})")
        if handshake == "acl-notify" and "Ascend950" in products:
            raise self.fail("op.products", "the acl-notify handshake uses HcommAclrtNotify*OnThread, which "
                            "Ascend950 does not support; remove 'Ascend950' from op.products or set "
                            "op.handshake = 'thread-notify'")
        reduce_ops = self.str_list(op, "reduce_ops", "op", [])
        canon_ops: list[str] = []
        for r in reduce_ops:
            try:
                op_name = dtype_table.get_reduce_op(r).name
            except ConfigError as exc:
                raise self.fail("op.reduce_ops", exc.reason) from None
            if op_name not in canon_ops:  # aliases ("add" and "sum") name one op: listed once
                canon_ops.append(op_name)
        default_dtypes = list(A2A3_REDUCE_DTYPES if canon_ops else (d.name for d in dtype_table.DTYPES))
        dtype_names = self.str_list(op, "dtypes", "op", default_dtypes)
        if not dtype_names:
            raise self.fail("op.dtypes", "op.dtypes is empty; list the element types the kernel supports")
        canon_dtypes: list[str] = []
        for d in dtype_names:
            try:
                dt_name = dtype_table.get_dtype(d).name
            except ConfigError as exc:
                raise self.fail("op.dtypes", exc.reason) from None
            if dt_name not in canon_dtypes:  # aliases ("float32" and "fp32") name one dtype: listed once
                canon_dtypes.append(dt_name)
        # Mixed A2/A3 + 950 lists are allowed: the call-time gate (hcomm_kit.ops.custom_op) then refuses the
        # combinations the running product cannot reduce.
        if canon_ops and all(p in A2A3 for p in products):
            bad_ops = [r for r in canon_ops if r not in A2A3_REDUCE_OPS]
            bad_dt = [d for d in canon_dtypes if d not in A2A3_REDUCE_DTYPES]
            if bad_ops or bad_dt:
                what = ", ".join([*(f"reduce op {r!r}" for r in bad_ops), *(f"dtype {d!r}" for d in bad_dt)])
                raise self.fail("op.reduce_ops" if bad_ops else "op.dtypes",
                                f"{what}: Hcomm reduces on A2/A3 support only "
                                f"{'/'.join(A2A3_REDUCE_DTYPES)} x {'/'.join(A2A3_REDUCE_OPS)}; remove "
                                "them or add 'Ascend950' to op.products")
        vendor = self.get(op, "vendor", "op", str, "cust")
        if not vendor or not all(c.isalnum() or c == "_" for c in vendor):
            raise self.fail("op.vendor", f"op.vendor = {vendor!r} must be letters, digits and '_' (e.g. 'cust')")

        output = self.choice(io, "output", "io", OUTPUT_RULES, "count")
        inplace = self.get(io, "inplace", "io", bool, False)
        same_args = self.get(io, "same_args", "io", bool, True)

        threads = self.get(res, "threads", "resources", (int, str), 1)
        if isinstance(threads, str) and threads not in THREAD_RULES:
            raise self.fail("resources.threads", f"resources.threads = {threads!r} is not accepted (an integer "
                            f"or one of {', '.join(repr(t) for t in THREAD_RULES)})")
        if isinstance(threads, int) and not 1 <= threads <= MAX_THREADS_LIMIT:
            raise self.fail("resources.threads", f"resources.threads = {threads} is out of range "
                            f"[1, {MAX_THREADS_LIMIT}] (threads[0] is the main thread)")
        notifies = self.int_range(res, "notifies_per_thread", "resources", 0, MAX_NOTIFIES_PER_THREAD, 0,
                                  " (slot 0 is added for the host \"go\"; 40 slots per thread at most)")
        topology = self.choice(chan, "topology", "resources.channels", TOPOLOGIES, "none")
        chan_notifies = self.int_range(chan, "notifies", "resources.channels", 0, MAX_CHANNEL_NOTIFIES,
                                       0 if topology == "none" else 2)
        if topology == "none" and chan_notifies:
            raise self.fail("resources.channels.notifies", "resources.channels.notifies must be 0 when "
                            "topology = 'none' (no channel is acquired)")
        if topology != "none" and not chan_notifies:
            raise self.fail("resources.channels.notifies", f"topology {topology!r} needs at least one notify "
                            "slot per channel (resources.channels.notifies >= 1; the patterns use 2: ACK, DATA)")

        params = self.params(doc.get("param", []))
        return OpSpec(
            name=name, kernel=kernel, so=so, handshake=handshake, pattern=pattern,
            products=tuple(products), dtypes=tuple(canon_dtypes), reduce_ops=tuple(canon_ops),
            vendor=vendor, output=output, inplace=inplace, threads=threads,
            notifies_per_thread=notifies, topology=topology, channel_notifies=chan_notifies,
            params=tuple(params), same_args=same_args, opdir=opdir, toml_sha256=sha256,
        )

    def params(self, raw: Any) -> list[ParamField]:
        if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
            raise self.fail("param", "param must be an array of tables: [[param]] name = ..., type = ...")
        standard = {f.name for f in _DUMMY.param_fields()}
        seen: set[str] = set()
        out: list[ParamField] = []
        for i, table in enumerate(raw):
            where = f"param[{i}]"
            self.check_keys(table, "param", where)
            pname = names.check_identifier(self.get(table, "name", where, str), key=f"{where}.name",
                                           what="parameter name", path=self.path)
            if pname in standard:
                raise self.fail(f"{where}.name", f"parameter {pname!r} clashes with a standard OpParam field "
                                f"({', '.join(sorted(standard))})")
            if pname in seen:
                raise self.fail(f"{where}.name", f"parameter {pname!r} is defined twice")
            if pname in names.GENERATED_SYMBOLS:
                raise self.fail(f"{where}.name", f"parameter {pname!r} clashes with a generated symbol")
            seen.add(pname)
            ptype = self.get(table, "type", where, str)
            if ptype.replace(" ", "") == "void*":
                ptype = "void*"
            if ptype not in PARAM_TYPES:
                close = difflib.get_close_matches(ptype, list(PARAM_TYPES), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise self.fail(f"{where}.type", f"{where}.type = {ptype!r} is not accepted{hint} "
                                f"(one of {', '.join(PARAM_TYPES)})")
            array = self.get(table, "array", where, int, None)
            if array is not None and not 1 <= array <= MAX_PARAM_ARRAY:
                raise self.fail(f"{where}.array", f"{where}.array = {array} is out of range [1, {MAX_PARAM_ARRAY}]")
            out.append(ParamField(pname, ptype, array))
        return out


# A spec with no user fields, used to list the standard OpParam field names.
_DUMMY = OpSpec(name="x", kernel="X", so="libx.so", handshake="thread-notify", pattern="empty",
                products=PRODUCTS, dtypes=("fp32",), reduce_ops=(), vendor="cust", output="count",
                inplace=False, threads=1, notifies_per_thread=0, topology="none", channel_notifies=0,
                params=())


ANSWERS_FILE = ".hcomm-kit-answers.json"  # beside op.toml: what `hcomm-kit new` rendered, for --update


def read_answers(opdir: str | Path) -> dict[str, Any] | None:
    """The stored answers of an operator directory, or None if it has none."""
    path = Path(opdir) / ANSWERS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the answers file: {exc}; re-create it with `hcomm-kit new --force`",
                          path=path) from None
    if not isinstance(data, dict):
        raise ConfigError("the answers file is not a JSON object", path=path)
    return data


def check_op_info(path: Path, spec: OpSpec, so_name: str) -> dict:
    """Validate an op-info JSON: top key == functionName == op.kernel, AICPUKernel, kernelSo.

    Raises:
        BuildError: naming the file, the key at fault and the expected value.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise BuildError(f"{path}: not valid JSON ({exc}); re-create it with `hcomm-kit new --update`") from None

    def bad(reason: str) -> BuildError:
        return BuildError(f"{path}: {reason}; the op-info JSON is generated from op.toml, re-create it with "
                          f"`hcomm-kit new --update {spec.opdir}`")

    if not isinstance(doc, dict) or list(doc) != [spec.kernel]:
        raise bad(f"expected exactly one top-level key {spec.kernel!r} (op.kernel), found {list(doc)!r}"
                  if isinstance(doc, dict) else "expected a JSON object")
    info = doc[spec.kernel].get("opInfo") if isinstance(doc[spec.kernel], dict) else None
    if not isinstance(info, dict):
        raise bad(f"{spec.kernel}.opInfo is missing or not an object")
    expected = {"opKernelLib": "AICPUKernel", "functionName": spec.kernel, "kernelSo": so_name}
    for key, want in expected.items():
        if info.get(key) != want:
            raise bad(f"{spec.kernel}.opInfo.{key} is {info.get(key)!r}, expected {want!r}")
    return doc
