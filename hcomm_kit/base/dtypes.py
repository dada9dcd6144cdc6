"""The one dtype table and the one reduce-op table.

Values are ``HcclDataType`` / ``HcommDataType`` (same numbering) and ``HcclReduceOp`` /
``HcommReduceOp``. numpy has no bfloat16: bf16 data is stored as ``np.uint16`` bit patterns
(``DType.storage_only`` is True); use :func:`float32_to_bf16_bits` / :func:`bf16_bits_to_float32`
to convert (round-to-nearest-even, NaN stays NaN).

``avg`` is not an HCCL reduce op: compute it as ``sum`` followed by a division by the number of
ranks on the host (or in the caller's framework).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

__all__ = [
    "DType",
    "ReduceOp",
    "DTYPES",
    "REDUCE_OPS",
    "get_dtype",
    "get_reduce_op",
    "float32_to_bf16_bits",
    "bf16_bits_to_float32",
    "HCCL_PRODUCTS",
    "HCCL_API_REDUCE",
    "HCCL_API_MOVE",
    "hccl_api_reduces",
    "hccl_api_reduce_summary",
    "hccl_api_reduce_table",
    "check_hccl_api_reduce",
    "render_c_header",
]


@dataclass(frozen=True)
class DType:
    """One row of the dtype table.

    Attributes:
        name: canonical short name (``fp32``), as used by the CLI and op.toml.
        value: ``HcclDataType`` value.
        itemsize: bytes per element.
        numpy: numpy dtype holding the data (the storage type when ``storage_only``).
        storage_only: True when ``numpy`` only stores the bits (bf16 as uint16).
        aliases: other accepted spellings.
    """

    name: str
    value: int
    itemsize: int
    numpy: np.dtype
    storage_only: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def hccl_name(self) -> str:
        """The C enumerator, e.g. ``HCCL_DATA_TYPE_FP32`` (bf16 is ``HCCL_DATA_TYPE_BFP16``)."""
        return "HCCL_DATA_TYPE_" + ("BFP16" if self.name == "bf16" else self.name.upper())

    @property
    def is_float(self) -> bool:
        """True for floating-point types (fp16, fp32, fp64, bf16)."""
        return self.name.startswith(("fp", "bf"))

    def __str__(self) -> str:
        return self.name


def _dt(name: str, value: int, np_type: type, aliases: tuple[str, ...], storage_only: bool = False) -> DType:
    npd = np.dtype(np_type)
    return DType(name, value, npd.itemsize, npd, storage_only, aliases)


DTYPES: tuple[DType, ...] = (
    _dt("int8", 0, np.int8, ("char", "i8")),
    _dt("int16", 1, np.int16, ("short", "i16")),
    _dt("int32", 2, np.int32, ("int", "i32")),
    _dt("fp16", 3, np.float16, ("float16", "half", "f16")),
    _dt("fp32", 4, np.float32, ("float32", "float", "f32", "single")),
    _dt("int64", 5, np.int64, ("long", "i64")),
    _dt("uint64", 6, np.uint64, ("u64",)),
    _dt("uint8", 7, np.uint8, ("u8", "byte")),
    _dt("uint16", 8, np.uint16, ("u16",)),
    _dt("uint32", 9, np.uint32, ("u32",)),
    _dt("fp64", 10, np.float64, ("float64", "double", "f64")),
    _dt("bf16", 11, np.uint16, ("bfloat16", "bfp16"), storage_only=True),
)

_BY_NAME: dict[str, DType] = {}
for _d in DTYPES:
    for _n in (_d.name, *_d.aliases):
        _BY_NAME[_n] = _d
_BY_VALUE: dict[int, DType] = {d.value: d for d in DTYPES}
# numpy dtype -> table row; uint16 maps to uint16, never to bf16 (bf16 must be asked for by name).
_BY_NUMPY: dict[np.dtype, DType] = {d.numpy: d for d in DTYPES if not d.storage_only}


def get_dtype(spec: "str | int | DType | np.dtype | type | object") -> DType:
    """Look up a dtype by name/alias, ``HcclDataType`` value, numpy dtype or torch dtype.

    Args:
        spec: e.g. ``"fp32"``, ``"bfloat16"``, ``4``, ``np.float32``, ``torch.bfloat16``.

    Returns:
        The table row.

    Raises:
        ConfigError: unknown dtype; the message lists the accepted names.

    Example:
        >>> get_dtype("float").value
        4
    """
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if int(spec) in _BY_VALUE:
            return _BY_VALUE[int(spec)]
        raise _unknown_dtype(spec)
    if spec is None:  # np.dtype(None) would silently mean float64
        raise _unknown_dtype(spec)
    text = spec if isinstance(spec, str) else str(spec)
    if isinstance(spec, str) or text.startswith("torch."):
        # Names, and torch dtypes (torch.float32, torch.bfloat16, ...) without importing torch.
        key = text.strip().lower().removeprefix("torch.")
        if key in _BY_NAME:
            return _BY_NAME[key]
        raise _unknown_dtype(spec)
    try:
        npd = np.dtype(spec)  # type: ignore[arg-type]
    except TypeError:
        raise _unknown_dtype(spec) from None
    if npd in _BY_NUMPY:
        return _BY_NUMPY[npd]
    raise _unknown_dtype(spec)


def _unknown_dtype(spec: object) -> ConfigError:
    names = ", ".join(f"{d.name} ({'/'.join(d.aliases)})" if d.aliases else d.name for d in DTYPES)
    return ConfigError(f"unknown dtype {spec!r}; accepted: {names}", key="dtype")


@dataclass(frozen=True)
class ReduceOp:
    """One row of the reduce-op table: canonical name, ``HcclReduceOp`` value, aliases."""

    name: str
    value: int
    aliases: tuple[str, ...] = ()

    @property
    def hccl_name(self) -> str:
        """The C enumerator, e.g. ``HCCL_REDUCE_SUM``."""
        return "HCCL_REDUCE_" + self.name.upper()

    def __str__(self) -> str:
        return self.name


REDUCE_OPS: tuple[ReduceOp, ...] = (
    ReduceOp("sum", 0, ("add", "+")),
    ReduceOp("prod", 1, ("product", "mul", "*")),
    ReduceOp("max", 2, ("maximum",)),
    ReduceOp("min", 3, ("minimum",)),
)
_OP_BY_NAME: dict[str, ReduceOp] = {n: op for op in REDUCE_OPS for n in (op.name, *op.aliases)}
_OP_BY_VALUE: dict[int, ReduceOp] = {op.value: op for op in REDUCE_OPS}


def get_reduce_op(spec: "str | int | ReduceOp") -> ReduceOp:
    """Look up a reduce op by name/alias or ``HcclReduceOp`` value.

    Raises:
        ConfigError: unknown op (the message lists the accepted names; for ``avg`` it explains
            to use ``sum`` and divide by the number of ranks).
    """
    if isinstance(spec, ReduceOp):
        return spec
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if int(spec) in _OP_BY_VALUE:
            return _OP_BY_VALUE[int(spec)]
    elif isinstance(spec, str):
        key = spec.strip().lower()
        if key in _OP_BY_NAME:
            return _OP_BY_NAME[key]
        if key in ("avg", "mean", "average"):
            raise ConfigError(
                f"reduce op {spec!r} is not an HCCL op: use 'sum' and divide by the number of ranks",
                key="reduce op",
            )
    names = ", ".join(f"{op.name} ({'/'.join(op.aliases)})" for op in REDUCE_OPS)
    raise ConfigError(f"unknown reduce op {spec!r}; accepted: {names}", key="reduce op")


def float32_to_bf16_bits(x: "np.ndarray | float") -> np.ndarray:
    """Convert float32 values to bf16 bit patterns (uint16), round-to-nearest-even.

    NaN stays NaN (sign kept, made quiet); +-inf stay inf; values that round past the bf16
    maximum become inf. Vectorised; accepts anything ``np.asarray(x, np.float32)`` accepts.
    """
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)  # same itemsize: no copy needed
    upper = bits >> np.uint32(16)
    # Add 0x7FFF plus the LSB of the kept half: ties go to the even bf16 value.
    rounded = (bits + (np.uint32(0x7FFF) + (upper & np.uint32(1)))) >> np.uint32(16)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    out = np.where(is_nan, upper | np.uint32(0x0040), rounded)
    return out.astype(np.uint16)


def bf16_bits_to_float32(bits: "np.ndarray | int") -> np.ndarray:
    """Convert bf16 bit patterns (uint16) to float32 exactly."""
    b = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return b.view(np.float32)


# ---------------------------------------------------------------------------------------------
# What CANN's HCCL collective API accepts, per API and product: the ONE table. The emulator's C
# gate (hcomm_kit/emu/src/hccl/hccl_api_support.h, generated from this table by
# ``python -m hcomm_kit.base.dtypes --c-header``; tests/test_dtypes.py checks it is current), the
# built-in collectives (hcomm_kit.ops.collectives, through CustomOp) and the torch backend read it.
#
# Source: CANN's HCCL API pages, hicann/hccl at commit 09300b70df9a031339f08e5f2ca06d7bf294d009,
# docs/zh/api_ref/comm_op_interface/<Api>.md, sections "dataType说明" and "op说明" (reducing
# APIs) and "数据类型说明" (the others), product blocks npu="910b" (A2), "A3" and "950":
#  * HcclAllReduce.md, HcclReduce.md, HcclReduceScatter.md: A2 and A3 int8, int16, int32, int64,
#    fp16, fp32, bf16 (A2: int64 "slower"); 950 also uint64 and fp64; ops sum, prod, max, min on
#    all three, prod not for int16 and bf16.
#  * HcclReduceScatterV.md: A2 int8, int16, int32, fp16, fp32, bf16 (no int64); A3 and 950 int8,
#    int16, int32, int64, fp16, fp32, bf16 (950: no uint64/fp64 here); ops A2 and A3 sum, max, min
#    (no prod), 950 sum, prod, max, min with prod not for int16 and bf16.
#  * HcclAllGather(V).md, HcclBroadcast.md, HcclScatter.md, HcclAlltoAll(V, VC).md, HcclSend.md,
#    HcclRecv.md, HcclBatchSendRecv.md: every integer type of 8 to 64 bits, fp16, fp32, fp64, bf16
#    on A2, A3 and 950 (950 also the fp8 / hif8 types, which the emulator does not have).
# This is wider than the Hcomm primitive HcommLocalReduceOnThread on A2/A3 (no int64, no prod;
# hcomm.md §3.1): the built-ins compute those combinations in their own kernel code.
# ---------------------------------------------------------------------------------------------

#: The products of HCOMM_KIT_SOC, in the table's column order.
HCCL_PRODUCTS: tuple[str, ...] = ("Ascend910B", "Ascend910_93", "Ascend950")

_RED_A2A3 = ("int8", "int16", "int32", "int64", "fp16", "fp32", "bf16")
_RED_950 = (*_RED_A2A3, "uint64", "fp64")
_NO_PROD = ("int16", "bf16")
_ALL_OPS = ("sum", "prod", "max", "min")
_MOVE_ALL = tuple(d.name for d in DTYPES)


def _reduces(dtypes: tuple[str, ...], ops: tuple[str, ...] = _ALL_OPS,
             no_prod: tuple[str, ...] = _NO_PROD) -> dict[str, frozenset[str]]:
    return {op: frozenset(d for d in dtypes if not (op == "prod" and d in no_prod)) for op in ops}


#: Reducing APIs: api -> product -> reduce op -> the dtypes it accepts with that op.
HCCL_API_REDUCE: dict[str, dict[str, dict[str, frozenset[str]]]] = {
    **{api: {"Ascend910B": _reduces(_RED_A2A3), "Ascend910_93": _reduces(_RED_A2A3),
             "Ascend950": _reduces(_RED_950)}
       for api in ("HcclAllReduce", "HcclReduce", "HcclReduceScatter")},
    "HcclReduceScatterV": {
        "Ascend910B": _reduces(tuple(d for d in _RED_A2A3 if d != "int64"), ("sum", "max", "min")),
        "Ascend910_93": _reduces(_RED_A2A3, ("sum", "max", "min")),
        "Ascend950": _reduces(_RED_A2A3),
    },
}

#: Non-reducing APIs: api -> product -> the dtypes it moves (the emulator's 12 types everywhere).
HCCL_API_MOVE: dict[str, dict[str, frozenset[str]]] = {
    api: {p: frozenset(_MOVE_ALL) for p in HCCL_PRODUCTS}
    for api in ("HcclAllGather", "HcclAllGatherV", "HcclBroadcast", "HcclScatter", "HcclAlltoAll",
                "HcclAlltoAllV", "HcclAlltoAllVC", "HcclSend", "HcclRecv", "HcclBatchSendRecv")
}


def _product(product: str) -> str:
    if product not in HCCL_PRODUCTS:
        raise ConfigError(f"unknown product {product!r}; accepted: {', '.join(HCCL_PRODUCTS)}", key="product")
    return product


def hccl_api_reduces(api: str, product: str, dtype: "str | int | DType", op: "str | int | ReduceOp") -> bool:
    """True when CANN's reducing HCCL API ``api`` accepts ``dtype`` with ``op`` on ``product``.

    Args:
        api: ``"HcclAllReduce"``, ``"HcclReduce"``, ``"HcclReduceScatter"`` or ``"HcclReduceScatterV"``.
        product: ``"Ascend910B"`` (A2), ``"Ascend910_93"`` (A3) or ``"Ascend950"``.
        dtype: anything :func:`get_dtype` accepts. op: anything :func:`get_reduce_op` accepts.

    Raises:
        ConfigError: unknown API, product, dtype or op.
    """
    if api not in HCCL_API_REDUCE:
        raise ConfigError(f"{api!r} is not a reducing HCCL API; known: {', '.join(HCCL_API_REDUCE)}", key="api")
    ops = HCCL_API_REDUCE[api][_product(product)]
    rop = get_reduce_op(op).name
    return rop in ops and get_dtype(dtype).name in ops[rop]


def hccl_api_reduce_summary(api: str, product: str) -> str:
    """What ``api`` reduces on ``product``, as text: ``int8, int16, ... x sum, max, min (prod: ...)``."""
    ops = HCCL_API_REDUCE[api][_product(product)]
    order = [d.name for d in DTYPES]
    dts = sorted(set().union(*ops.values()), key=order.index)
    plain = [op for op in _ALL_OPS if op in ops and ops[op] == frozenset(dts)]
    text = f"{', '.join(dts)} x {', '.join(plain)}"
    for op in _ALL_OPS:
        if op in ops and op not in plain:
            text += f"; {op}: {', '.join(d for d in order if d in ops[op])}"
    return text


def hccl_api_reduce_table() -> str:
    """:data:`HCCL_API_REDUCE` as a Markdown table, one row per API and product (the documentation's
    copy, docs/cann.md, is checked against it)."""
    order = [d.name for d in DTYPES]
    rows = ["| API | product | dtypes with sum, max, min | dtypes with prod |", "|---|---|---|---|"]
    for api, per_product in HCCL_API_REDUCE.items():
        for product, ops in per_product.items():
            plain = sorted(ops.get("sum", frozenset()) | ops.get("max", frozenset()) | ops.get("min", frozenset()),
                           key=order.index)
            assert all(ops.get(op, frozenset()) == frozenset(plain) for op in ("sum", "max", "min"))
            prod = sorted(ops.get("prod", frozenset()), key=order.index)
            rows.append(f"| `{api}` | {product} | {', '.join(plain)} | {', '.join(prod) or '-'} |")
    return "\n".join(rows) + "\n"


def check_hccl_api_reduce(api: str, product: str, dtype: "str | int | DType", op: "str | int | ReduceOp") -> None:
    """Raise a ConfigError naming API, dtype, op and product unless the table accepts the call.

    The error's key is ``dtype`` when no op of ``api`` takes the dtype on ``product``, else ``reduce_op``.
    """
    if hccl_api_reduces(api, product, dtype, op):
        return
    dt, rop = get_dtype(dtype), get_reduce_op(op)
    ops = HCCL_API_REDUCE[api][product]
    key = "reduce_op" if any(dt.name in v for v in ops.values()) else "dtype"
    raise ConfigError(f"{api} does not reduce {dt.name} with {rop.name} on {product} (CANN's {api} page; "
                      f"{product} accepts {hccl_api_reduce_summary(api, product)})", key=key)


def render_c_header() -> str:
    """The C header ``hcomm_kit/emu/src/hccl/hccl_api_support.h``: :data:`HCCL_API_REDUCE` and
    :data:`HCCL_API_MOVE` as bit masks of ``HcclDataType`` values (bit ``1 << value``)."""
    def mask(names: "frozenset[str] | tuple[str, ...]") -> str:
        return f"0x{sum(1 << get_dtype(n).value for n in names):04x}u"

    lines = [
        "/* hccl_api_support.h -- GENERATED from hcomm_kit/base/dtypes.py (HCCL_API_REDUCE, HCCL_API_MOVE) by",
        " *   python -m hcomm_kit.base.dtypes --c-header > hcomm_kit/emu/src/hccl/hccl_api_support.h",
        " * Do not edit: change the Python table (its comment cites CANN's pages); tests/test_dtypes.py",
        " * fails while this file differs from the rendering. Masks: bit (1u << HcclDataType value). */",
        "#ifndef EMU_HCCL_API_SUPPORT_H",
        "#define EMU_HCCL_API_SUPPORT_H",
        "",
        "#include <stdint.h>",
        "",
        "namespace emu {",
        "",
        "/* A reducing API on a product: ops[HcclReduceOp] = the dtypes it accepts with that op. */",
        "struct HcclApiReduceRow {",
        "    const char* api;",
        "    const char* product; /* HCOMM_KIT_SOC name */",
        "    uint32_t ops[4];     /* sum, prod, max, min */",
        "};",
        "",
        "static const HcclApiReduceRow kHcclApiReduce[] = {",
    ]
    for api, per_product in HCCL_API_REDUCE.items():
        for product, ops in per_product.items():
            masks = ", ".join(mask(ops.get(op.name, ())) for op in REDUCE_OPS)
            lines.append(f'    {{"{api}", "{product}", {{{masks}}}}},')
    lines += [
        "};",
        "",
        "/* A non-reducing API on a product: the dtypes it moves. */",
        "struct HcclApiMoveRow {",
        "    const char* api;",
        "    const char* product;",
        "    uint32_t dtypes;",
        "};",
        "",
        "static const HcclApiMoveRow kHcclApiMove[] = {",
    ]
    for api, per_product in HCCL_API_MOVE.items():
        for product, names in per_product.items():
            lines.append(f'    {{"{api}", "{product}", {mask(names)}}},')
    lines += ["};", "", "}  // namespace emu", "", "#endif", ""]
    return "\n".join(lines)


if __name__ == "__main__":  # python -m hcomm_kit.base.dtypes --c-header
    import sys

    if sys.argv[1:] != ["--c-header"]:
        sys.exit("usage: python -m hcomm_kit.base.dtypes --c-header > hcomm_kit/emu/src/hccl/hccl_api_support.h")
    sys.stdout.write(render_c_header())


#: ``aclDataType`` of each dtype (the aclnn API describes tensors with it; CANN's
#: ``acl/acl_base.h`` enum: ACL_FLOAT 0, ACL_FLOAT16 1, ACL_INT8 2, ACL_INT32 3, ACL_UINT8 4,
#: ACL_INT16 6, ACL_UINT16 7, ACL_UINT32 8, ACL_INT64 9, ACL_UINT64 10, ACL_DOUBLE 11, ACL_BF16 27).
#: The generated aclnn host code maps it to ``HcclDataType`` (:attr:`DType.value`) from here.
ACL_DATA_TYPE: dict[str, int] = {
    "fp32": 0, "fp16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7, "uint32": 8,
    "int64": 9, "uint64": 10, "fp64": 11, "bf16": 27,
}
__all__.append("ACL_DATA_TYPE")
