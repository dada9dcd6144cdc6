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
