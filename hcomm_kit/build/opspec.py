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
    pattern     = "mesh-allgather"               # what `new` generated (implies kind when kind is absent)
    kind        = "allgather"                    # what it computes (hcomm_kit.build.kinds.KINDS)
    reference   = "reference:myref"              # optional: module:function, the numpy reference
    algorithms  = ["direct", "ring"]             # optional: values 1, 2 of the [[param]] algo (0 = none asked)
    products    = ["Ascend910B", "Ascend910_93", "Ascend950"]
    dtypes      = ["int8", "fp16", "fp32", ...]  # names from hcomm_kit.base.dtypes
    reduce_ops  = []                             # subset of sum/prod/max/min; [] = not a reduction
    vendor      = "cust"                         # opp/vendors/<vendor>/ on CANN

    [io]
    output  = "count"        # output element count: "count" | "count*ranks" | "count/ranks"
    inplace = false          # the kernel accepts output == input
    same_args = true         # every rank passes the same count, root and parameters (checked per call)

    [resources]
    threads             = 1  # AICPU device threads (int, "ranks", "ranks-1", "ranks+2" or "peers"); threads[0] = main
    notifies_per_thread = 0  # the pattern's own thread-notify slots, numbered 1..N (slot 0 = host "go")

    [resources.channels]
    topology = "none"        # "none" | "p2p" | "ring" | "mesh" | "peer"
    notifies = 0             # notify slots per channel end
    ring_order = "rank"      # ring: "rank" (rank-1, rank+1) or "avoid-down" (no neighbour across a downed link)
    rings = 1                # ring: up to this many link-disjoint rings (AlgResourceCtx.rings[])
    link_map = false         # AlgResourceCtx.linkUp[r]: bit q = ranks r and q have a link (relaying kernels)

    [test]                   # the job of the generated tests, run, bench and model explain (unless told otherwise)
    topology = "A2:1x8"      # HCOMM_KIT_TOPOLOGY (--topology); the tests run at its rank count
    links_down = "0-1"       # HCOMM_KIT_LINKS_DOWN (--links-down)

    [[param]]                # user fields appended to OpParam
    name  = "alpha"
    type  = "float"          # int8_t..uint64_t, float, double, void*
    array = 4                # optional fixed length

The checked form and its tables are :mod:`hcomm_kit.build.opmodel`, the op-info JSON and answers
file checks :mod:`hcomm_kit.build.opinfo`; their public names are importable from here too.
"""

from __future__ import annotations

import difflib
import hashlib
import tomllib
from pathlib import Path
from typing import Any, Callable

from ..base.errors import ConfigError
from . import names
from .opinfo import ANSWERS_FILE, check_op_info, read_answers
from .kinds import KIND_NAMES, KINDS, infer_kind
from .rings import RING_ORDERS
from .opmodel import (_DUMMY, A2A3, ALGO_PARAM, COUNT_PARAMS, A2A3_REDUCE_DTYPES, A2A3_REDUCE_OPS, HANDSHAKES, MAX_CHANNEL_NOTIFIES,
                      MAX_CHANNELS, MAX_NOTIFIES_PER_THREAD, MAX_PARAM_ARRAY, MAX_RINGS, MAX_THREADS_LIMIT, OP_TOML,
                      OUTPUT_RULES, PARAM_TYPES, PATTERNS, PRODUCTS, THREAD_RULES, TOPOLOGIES, CField, OpSpec,
                      ParamField)

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
    "KIND_NAMES",
    "optoml_table",
    "optoml_reference",
]

_UNSET = object()
_INT_TYPES = ("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t")
#: Keywords of ``op(...)`` itself (hcomm_kit.ops.custom_op.CustomOp.__call__): no [[param]] may take them.
_CALL_KEYWORDS = frozenset({"input", "output", "dtype", "reduce_op", "stream", "async_op", "timeout", "algorithm"})

# Every accepted key per table: key -> (default, meaning). The one definition of op.toml's keys: the
# validator accepts these and nothing else (did-you-mean), and `hcomm-kit docs optoml` / the table
# of docs/operators.md are generated from it (optoml_table; tests/test_kinds.py checks the page against it).
_SCHEMA: dict[str, dict[str, tuple[str, str]]] = {
    "": {"op": ("", "table"), "io": ("", "table"), "resources": ("", "table"),
         "param": ("", "array of tables"), "test": ("", "table")},
    "op": {
        "name": ("required", "operator name, a C identifier (also the directory name of `new`)"),
        "kernel": ("`Hccl<Name>AicpuKernel`", "kernel entry symbol = op-info key = functionName"),
        "so": ("`lib<name>_aicpu_kernel.so`", "kernel library file name"),
        "handshake": ('`"thread-notify"`', 'host<->kernel handshake: `"thread-notify"` (A2/A3/950) or '
                      '`"acl-notify"` (A2/A3)'),
        "pattern": ('`"empty"`', "what `hcomm-kit new` generated: " + ", ".join(PATTERNS) +
                    " (gives the kind when `kind` is absent)"),
        "kind": ("from `pattern`", "what the operator computes: " + ", ".join(f"`{k}`" for k in KIND_NAMES) +
                 " (output size, root, reduce op, busbw factor, checked ranks, built-in and MPI "
                 "counterparts, reference: the kinds table)"),
        "reference": ("the kind's", '`"module:function"`, a numpy function of every rank\'s inputs and the '
                      "call's arguments returning every rank's expected output (None: not checked); "
                      "`module` is a `.py` file of the operator directory or an importable module; "
                      "required to check a `custom` operator"),
        "algorithms": ("`[]`", "names of the algorithms the kernel tells apart by `OpParam.algo` (declare "
                       "`[[param]] name = \"algo\"`, an integer type): 1 = the first listed, 2 = the second, ..., "
                       "0 = none asked (the kernel's choice); `--algorithm NAME` of run/test/bench, "
                       "`op(x, algorithm=NAME)`; the generated header defines `<NAME>_ALGO_<ALGORITHM>`"),
        "products": ("all (acl-notify: A2/A3)", "products the operator runs on: " + ", ".join(PRODUCTS)),
        "dtypes": ("every dtype (reductions: the A2/A3 reduce dtypes)", "element types the kernel supports"),
        "reduce_ops": ("`[]`", "reduce ops (sum/prod/max/min), the first is the default of every command; "
                       "`[]` = not a reduction"),
        "vendor": ('`"cust"`', "CANN install: `opp/vendors/<vendor>/`"),
    },
    "io": {
        "output": ("the kind's, else `\"count\"`", "output element count: " +
                   ", ".join(f'`"{r}"`' for r in OUTPUT_RULES) + " (must agree with the kind)"),
        "inplace": ("`false`", "the kernel accepts output == input"),
        "same_args": ("`true`", "every rank passes the same count, root and parameters (checked per call)"),
    },
    "resources": {
        "threads": ("`1`", 'AICPU device threads: an integer, `"ranks"`, `"ranks-1"`, `"ranks+2"` or `"peers"`; '
                    "threads[0] = main"),
        "notifies_per_thread": ("`0`", 'the pattern\'s own thread-notify slots, numbered 1..N (slot 0 = host "go")'),
        "channels": ("", "table"),
    },
    "resources.channels": {
        "topology": ('`"none"`', "channels acquired: " + ", ".join(f'`"{t}"`' for t in TOPOLOGIES)),
        "notifies": ("`2` (`0` for none)", "notify slots per channel end"),
        "ring_order": ('`"rank"`', 'ring only: `"rank"` (ring k = 0 is rank-1, rank, rank+1; a downed link on it '
                       'fails every rank at the first call, naming the link) or `"avoid-down"` (the ring through '
                       "every rank closest to rank order whose neighbours never sit across a downed link, "
                       "`HCOMM_KIT_LINKS_DOWN`); the kernel reads its position and neighbours from "
                       "`AlgResourceCtx.rings[k]`"),
        "rings": ("`1`", f"ring only: up to this many rings that share no link (1..{MAX_RINGS}; "
                  "`AlgResourceCtx.ringNum` says how many the rank graph gave: 1 on 2-4 ranks, 3 on a full mesh "
                  "of 8), ring k on `channels[2k]` (prev) and `channels[2k+1]` (next)"),
        "link_map": ("`false`", "`AlgResourceCtx.linkUp[r]`: bit q set when ranks r and q have a link (none taken down, "
                     "`HCOMM_KIT_LINKS_DOWN`): the rank graph a kernel that relays around downed links needs (which "
                     "ranks reach both ends of a downed link)"),
    },
    "test": {
        "topology": ("none (one server)", "`PRODUCT:SERVERSxNPUS` (`A2:1x8`): the cluster topology of the generated "
                     "tests (at its rank count), `run`, `bench` and `model explain` (their `-n` defaults to its "
                     "rank count) unless `--topology`, `--np` of another count or `HCOMM_KIT_TOPOLOGY` says otherwise"),
        "links_down": ("none", '`"A-B,..."` (`"0-1"`): links taken down for the same jobs unless `--links-down` '
                       "or `HCOMM_KIT_LINKS_DOWN` says otherwise (`--links-down none`: all up)"),
    },
    "param": {
        "name": ("required", "a field appended to OpParam, passed as a keyword of the call"),
        "type": ("required", "C type: " + ", ".join(PARAM_TYPES)),
        "array": ("scalar", "fixed array length (1..4096)"),
    },
}


def optoml_reference() -> str:
    """The op.toml reference: every key (:func:`optoml_table`) and every kind
    (:func:`hcomm_kit.build.kinds.kinds_table`). ``hcomm-kit docs optoml`` prints it; docs/operators.md
    holds it between ``<!-- optoml:begin -->`` and ``<!-- optoml:end -->`` (checked by a test)."""
    from .kinds import kinds_table

    return (optoml_table() + "\n\nKinds (`[op].kind`; count = `OpParam.count`, HCCL's count of the matching API; "
            "busbw factors as nccl-tests' PERFORMANCE.md, n = ranks):\n\n" + kinds_table())


def optoml_table() -> str:
    """Every op.toml key with its default and meaning, as one Markdown table (from :data:`_SCHEMA`)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for table, keys in _SCHEMA.items():
        if not table:
            continue
        where = "[[param]]" if table == "param" else f"[{table}]"
        for key, (default, meaning) in keys.items():
            if meaning == "table":
                continue
            rows.append(f"| `{where} {key}` | {default or '-'} | {meaning} |")
    return "\n".join(rows)


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

    def canonical(self, values: list[str], key: str, lookup: Callable[[str], Any]) -> list[str]:
        """The canonical names (``lookup(v).name``) of ``values``, each once: aliases ("add" and "sum",
        "float32" and "fp32") name one entry. An unknown value fails at ``key``."""
        out: list[str] = []
        for v in values:
            try:
                name = lookup(v).name
            except ConfigError as exc:
                raise self.fail(key, exc.reason) from None
            if name not in out:
                out.append(name)
        return out

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
        test = self.table(doc, "test", "test")
        self.check_keys(test, "test", "test")
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
        canon_ops = self.canonical(reduce_ops, "op.reduce_ops", dtype_table.get_reduce_op)
        default_dtypes = list(A2A3_REDUCE_DTYPES if canon_ops else (d.name for d in dtype_table.DTYPES))
        dtype_names = self.str_list(op, "dtypes", "op", default_dtypes)
        if not dtype_names:
            raise self.fail("op.dtypes", "op.dtypes is empty; list the element types the kernel supports")
        canon_dtypes = self.canonical(dtype_names, "op.dtypes", dtype_table.get_dtype)
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

        kind, reference, kind_explicit = self.kind(op, pattern, io, canon_ops)
        rule = KINDS[kind].output
        output = self.choice(io, "output", "io", OUTPUT_RULES, rule if rule in OUTPUT_RULES else "count")
        if rule in OUTPUT_RULES and output != rule:
            blocks = (f" (count is HCCL's count: the input holds {KINDS[kind].input} elements)"
                      if KINDS[kind].blocks else "")
            raise self.fail("io.output", f"io.output = {output!r} contradicts kind {kind!r}, whose output is "
                            f"{rule!r}{blocks}; remove io.output (the kind sets it) or choose another kind")
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

        ring_order = self.choice(chan, "ring_order", "resources.channels", RING_ORDERS, "rank")
        rings = self.int_range(chan, "rings", "resources.channels", 1, MAX_RINGS, 1)
        for key in ("ring_order", "rings"):
            if key in chan and topology != "ring":
                raise self.fail(f"resources.channels.{key}", f"resources.channels.{key} shapes a ring: it needs "
                                f"topology = \"ring\" (this operator's is {topology!r}); remove it")
        link_map = self.get(chan, "link_map", "resources.channels", bool, False)
        test_topology, test_links_down = self.test_job(test)

        params = self.params(doc.get("param", []))
        algorithms = self.algorithms(op, params)
        return OpSpec(
            name=name, kernel=kernel, so=so, handshake=handshake, pattern=pattern,
            products=tuple(products), dtypes=tuple(canon_dtypes), reduce_ops=tuple(canon_ops),
            vendor=vendor, output=output, inplace=inplace, threads=threads,
            notifies_per_thread=notifies, topology=topology, channel_notifies=chan_notifies,
            params=tuple(params), same_args=same_args, kind=kind, reference=reference,
            kind_explicit=kind_explicit, algorithms=tuple(algorithms), ring_order=ring_order, rings=rings,
            link_map=link_map,
            test_topology=test_topology, test_links_down=test_links_down, opdir=opdir, toml_sha256=sha256,
        )

    def test_job(self, test: dict[str, Any]) -> tuple[str, str]:
        """``[test] topology`` and ``links_down``, checked as HCOMM_KIT_TOPOLOGY / HCOMM_KIT_LINKS_DOWN
        check them (and every downed link inside the topology's ranks)."""
        from ..base import envs

        topology = self.get(test, "topology", "test", str, "")
        links = self.get(test, "links_down", "test", str, "")
        size = None
        if topology:
            try:
                _, servers, npus = envs.parse_topology(topology)
            except ConfigError as exc:
                raise self.fail("test.topology", f"test.topology = {topology!r}: {exc.reason}") from None
            size = servers * npus
        if links:
            try:
                pairs = envs.parse_links_down(links)
            except ConfigError as exc:
                raise self.fail("test.links_down", f"test.links_down = {links!r}: {exc.reason}") from None
            outside = [f"{a}-{b}" for a, b in pairs if size is not None and b >= size]
            if outside:
                raise self.fail("test.links_down", f"test.links_down = {links!r}: {', '.join(outside)} joins a rank "
                                f"outside the {size} ranks of test.topology = {topology!r}")
        return topology, links

    def algorithms(self, op: dict[str, Any], params: list[ParamField]) -> list[str]:
        """``[op].algorithms``: distinct C identifiers, read by the kernel from an integer scalar
        ``[[param]] algo``."""
        names_ = self.str_list(op, "algorithms", "op", [])
        for n in names_:
            if not n.isidentifier() or not n.isascii():
                raise self.fail("op.algorithms", f"op.algorithms: {n!r} is not an identifier (letters, digits, '_'; "
                                "it names the macro <NAME>_ALGO_<ALGORITHM> of the generated header)")
        upper = [n.upper() for n in names_]
        dups = sorted({n for n in upper if upper.count(n) > 1})
        if dups:
            raise self.fail("op.algorithms", f"op.algorithms: {', '.join(dups)} named twice (the macros ignore case)")
        if names_:
            algo = next((p for p in params if p.name == ALGO_PARAM), None)
            if algo is None or algo.array or algo.type not in _INT_TYPES:
                raise self.fail("op.algorithms", f"op.algorithms needs the parameter the kernel reads: add "
                                f"[[param]] name = \"{ALGO_PARAM}\", type = \"uint32_t\" (a scalar integer; "
                                "0 = none asked, 1 = the first listed, ...)")
        return names_

    def kind(self, op: dict[str, Any], pattern: str, io: dict[str, Any],
             reduce_ops: list[str]) -> tuple[str, str, bool]:
        """``(kind, reference, explicit)``: ``[op].kind`` checked against ``reduce_ops`` and the
        params, or the kind the pattern and ``[io].output`` imply (op.toml files older than kinds)."""
        explicit = "kind" in op
        if explicit:
            kind = self.choice(op, "kind", "op", KIND_NAMES, "custom")
            implied = ""
        else:
            kind, implied = infer_kind(pattern, io.get("output", "count"), bool(reduce_ops))
        reference = self.get(op, "reference", "op", str, implied)
        if reference and (reference.count(":") != 1 or not all(reference.split(":"))):
            raise self.fail("op.reference", f"op.reference = {reference!r} must be 'module:function' (e.g. "
                            "'reference:halo' for reference.py of the operator directory)")
        info = KINDS[kind]
        if explicit and info.reduction and not reduce_ops:
            raise self.fail("op.reduce_ops", f"kind {kind!r} is a reduction: list its reduce ops in "
                            "op.reduce_ops (e.g. [\"sum\", \"max\", \"min\"])")
        if explicit and kind != "custom" and not info.reduction and reduce_ops:
            raise self.fail("op.reduce_ops", f"kind {kind!r} does not reduce: op.reduce_ops must be [] "
                            "(or choose a reducing kind, or \"custom\")")
        if kind == "alltoallv":
            names_ = {p.get("name") for p in self.doc.get("param", []) if isinstance(p, dict)}
            missing = [n for n in ("send_counts", "recv_counts") if not names_ & set(COUNT_PARAMS[n])]
            if missing:
                raise self.fail("param", f"kind 'alltoallv' passes send_counts and recv_counts to the kernel: add "
                                f"[[param]] {', '.join(missing)} (type = \"uint64_t\", array = 64)")
        return kind, reference, explicit

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
            if pname in _CALL_KEYWORDS:
                raise self.fail(f"{where}.name", f"parameter {pname!r} clashes with a keyword of the operator's "
                                f"Python call ({', '.join(sorted(_CALL_KEYWORDS))}); pick another name")
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
