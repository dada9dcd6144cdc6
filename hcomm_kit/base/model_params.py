"""The timing model's parameters per product: ``hcomm_kit/emu/src/model/params/<product>.toml``.

One file per product (``A2``, ``A3``, ``950``), each number with its source in the file. This is
the one reader: the emulator build writes the JSON the C side reads (:func:`to_json`, beside
``libhcomm_emu.so``), the tests take the calibration points from here, and the documentation's
tables are made from the same files (:mod:`hcomm_kit.base.model_formulas` evaluates HCCL's
published formulas on them). Once its task has started, a transfer of ``B`` bytes over a link
costs ``latency_us + B / bandwidth``, the bandwidth of one stream in the transfer's direction
(``write_GBps`` or ``read_GBps``); the streams on one directed link share ``link_GBps``, and an
NPU's links of one type share ``port_GBps`` per direction.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import ConfigError
from .resources import emu_dir

__all__ = ["LinkParams", "ModelParams", "PARAMS_DIR", "LINK_TYPES", "OPS", "products", "load", "to_json",
           "calibration_table"]

#: Where the product files live (shipped inside the package with the emulator sources).
PARAMS_DIR = emu_dir() / "src" / "model" / "params"
LINK_TYPES = ("HCCS", "UB", "RoCE")
#: The directions of a transfer: a write moves the initiator's bytes to its peer, a read the
#: peer's bytes to the initiator (HIXL's D2rD and rD2D).
OPS = ("write", "read")


@dataclass(frozen=True)
class LinkParams:
    """One link type (all figures per direction).

    Attributes:
        latency_us: a transfer's fixed cost before its bytes move (alpha).
        notify_us: a channel notify record reaches the peer after this.
        write_GBps: one stream's bandwidth when the initiator writes (GB/s = 1e9 B/s).
        read_GBps: one stream's bandwidth when the initiator reads.
        link_GBps: what all the streams on one directed link (a -> b) move together.
        port_GBps: what an NPU's links of this type move together per direction (0: no limit).
    """

    latency_us: float
    notify_us: float
    write_GBps: float
    read_GBps: float
    link_GBps: float
    port_GBps: float

    @property
    def bandwidth_GBps(self) -> float:
        """The write figure (the bandwidth of one stream writing)."""
        return self.write_GBps

    def bandwidth(self, op: str = "write") -> float:
        """One stream's bandwidth (GB/s) of a ``'write'`` or a ``'read'``."""
        if op not in OPS:
            raise ValueError(f"op must be 'write' or 'read', got {op!r}")
        return self.write_GBps if op == "write" else self.read_GBps

    def transfer_us(self, nbytes: float, op: str = "write") -> float:
        """A lone transfer's time once its task has started: latency + bytes at one stream's bandwidth."""
        return self.latency_us + nbytes / (self.bandwidth(op) * 1e3)


@dataclass(frozen=True)
class ModelParams:
    """A product's parameters (see the module doc) and its calibration points."""

    product: str
    file: Path
    task_us: float
    launch_us: float
    thread_notify_us: float
    copy_GBps: float
    reduce_GBps: float
    reduce_GBps_by_dtype: dict[str, float]
    links: dict[str, LinkParams]
    calibration: tuple[dict, ...]


def products() -> list[str]:
    """Products with a parameter file."""
    return sorted(p.stem for p in PARAMS_DIR.glob("*.toml"))


def _num(table: dict, key: str, where: str, *, positive: bool = False) -> float:
    v = table.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 or (positive and v == 0):
        raise ConfigError(f"{where}: {key} must be a {'positive' if positive else 'non-negative'} number, got {v!r}",
                          key=key)
    return float(v)


def _parse(path: Path) -> ModelParams:
    try:
        doc = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from e
    aicpu, local, links = doc.get("aicpu", {}), doc.get("local", {}), doc.get("links", {})
    parsed = {}
    for name in LINK_TYPES:
        lt = links.get(name)
        if not isinstance(lt, dict):
            raise ConfigError(f"{path}: [links.{name}] missing")
        where = f"{path} [links.{name}]"
        if "utilisation" in lt or "bandwidth_GBps" in lt:
            raise ConfigError(f"{where}: 'utilisation' / 'bandwidth_GBps' are gone: a transfer costs latency_us + "
                              f"bytes / write_GBps (or read_GBps); give those, link_GBps and port_GBps")
        parsed[name] = LinkParams(
            _num(lt, "latency_us", where), _num(lt, "notify_us", where),
            _num(lt, "write_GBps", where, positive=True), _num(lt, "read_GBps", where, positive=True),
            _num(lt, "link_GBps", where, positive=True), _num(lt, "port_GBps", where))
    calibration = tuple(doc.get("calibration", []))
    for c in calibration:
        if c.get("link") not in LINK_TYPES or c.get("op") not in OPS or not isinstance(c.get("bytes"), int) \
                or not isinstance(c.get("GBps"), (int, float)):
            raise ConfigError(f"{path}: [[calibration]] {c!r}: needs link (one of {', '.join(LINK_TYPES)}), "
                              f"op (write or read), bytes (an integer) and GBps")
    return ModelParams(
        product=str(doc.get("product", path.stem)), file=path,
        task_us=_num(aicpu, "task_us", f"{path} [aicpu]"), launch_us=_num(aicpu, "launch_us", f"{path} [aicpu]"),
        thread_notify_us=_num(aicpu, "thread_notify_us", f"{path} [aicpu]"),
        copy_GBps=_num(local, "copy_GBps", f"{path} [local]", positive=True),
        reduce_GBps=_num(local, "reduce_GBps", f"{path} [local]", positive=True),
        reduce_GBps_by_dtype={str(k): float(v) for k, v in local.get("reduce_GBps_by_dtype", {}).items()},
        links=parsed, calibration=calibration)


@lru_cache(maxsize=None)
def load(product: str) -> ModelParams:
    """The parameters of ``product`` (ConfigError naming the file when missing or malformed)."""
    path = PARAMS_DIR / f"{product}.toml"
    if not path.is_file():
        raise ConfigError(f"no timing-model parameters for product {product!r} ({path} missing; have "
                          f"{', '.join(products())})", key="product")
    return _parse(path)


def to_json() -> str:
    """Every product's parameters as the JSON the emulator reads (``model_params.json``)."""
    out = {}
    for name in products():
        p = load(name)
        out[p.product] = {
            "file": str(p.file), "task_us": p.task_us, "launch_us": p.launch_us,
            "thread_notify_us": p.thread_notify_us, "copy_GBps": p.copy_GBps, "reduce_GBps": p.reduce_GBps,
            "reduce_GBps_by_dtype": p.reduce_GBps_by_dtype,
            "links": {k: {"latency_us": v.latency_us, "notify_us": v.notify_us, "write_GBps": v.write_GBps,
                          "read_GBps": v.read_GBps, "link_GBps": v.link_GBps, "port_GBps": v.port_GBps}
                      for k, v in p.links.items()},
        }
    return json.dumps(out, indent=1)


def calibration_table(products_: list[str] | None = None) -> str:
    """The calibration points of ``products_`` (default: all) as a Markdown table: HIXL's figure
    beside the model's for one transfer of the block (latency + bytes at the write or read
    figure, what the emulator's modelled transfer takes: tests/test_model.py checks both)."""
    lines = ["| product | link | op | block | HIXL (GB/s) | model (GB/s) | model / HIXL | source |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for name in products_ or products():
        p = load(name)
        for c in p.calibration:
            lp = p.links[c["link"]]
            model = c["bytes"] / lp.transfer_us(c["bytes"], c["op"]) / 1e3
            b = c["bytes"]
            block = f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
            lines.append(f"| {p.product} | {c['link']} | {c['op']} | {block} | {c['GBps']:.3f} | {model:.3f} | "
                         f"{model / c['GBps']:.2f} | {c['source']} |")
    return "\n".join(lines)
