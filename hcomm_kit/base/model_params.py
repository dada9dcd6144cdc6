"""The timing model's parameters per product: ``hcomm_kit/emu/src/model/params/<product>.toml``.

One file per product (``A2``, ``A3``, ``950``), each number with its source in the file. This is
the one reader: the emulator build writes the JSON the C side reads (:func:`to_json`, beside
``libhcomm_emu.so``), the tests take the calibration points from here, and the calibration table of
docs/predicted-time.md is made from the same files. A transfer of ``B`` bytes over a link costs ``task_us + latency_us +
B / (bandwidth x utilisation(B))`` (utilisation log-linear in ``B`` between the listed sizes).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import ConfigError
from .resources import emu_dir

__all__ = ["LinkParams", "ModelParams", "PARAMS_DIR", "products", "load", "to_json"]

#: Where the product files live (shipped inside the package with the emulator sources).
PARAMS_DIR = emu_dir() / "src" / "model" / "params"
LINK_TYPES = ("HCCS", "UB", "RoCE")


@dataclass(frozen=True)
class LinkParams:
    """One link type: latency (us), one link's bandwidth and an NPU's port limit (GB/s, 0 none),
    utilisation by transfer size ((bytes, u) ascending)."""

    latency_us: float
    bandwidth_GBps: float
    port_GBps: float
    utilisation: tuple[tuple[float, float], ...]

    def util(self, nbytes: float) -> float:
        """Utilisation at ``nbytes`` (log-linear between the table's sizes, clamped at its ends)."""
        u = self.utilisation
        if not u:
            return 1.0
        if nbytes <= u[0][0]:
            return u[0][1]
        if nbytes >= u[-1][0]:
            return u[-1][1]
        for (b0, u0), (b1, u1) in zip(u, u[1:]):
            if nbytes <= b1:
                f = (math.log2(nbytes) - math.log2(b0)) / (math.log2(b1) - math.log2(b0))
                return u0 + f * (u1 - u0)
        return u[-1][1]

    def transfer_us(self, nbytes: float) -> float:
        """A lone transfer's time after its issue: latency + bytes at bandwidth x utilisation."""
        return self.latency_us + nbytes / (self.bandwidth_GBps * 1e3 * self.util(nbytes))


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
        util = tuple((float(b), float(u)) for b, u in lt.get("utilisation", []))
        if any(not 0 < u <= 1 for _, u in util) or any(a[0] >= b[0] for a, b in zip(util, util[1:])):
            raise ConfigError(f"{where}: utilisation must be [[bytes, 0 < u <= 1], ...] with bytes ascending")
        parsed[name] = LinkParams(_num(lt, "latency_us", where), _num(lt, "bandwidth_GBps", where, positive=True),
                                  _num(lt, "port_GBps", where), util)
    return ModelParams(
        product=str(doc.get("product", path.stem)), file=path,
        task_us=_num(aicpu, "task_us", f"{path} [aicpu]"), launch_us=_num(aicpu, "launch_us", f"{path} [aicpu]"),
        thread_notify_us=_num(aicpu, "thread_notify_us", f"{path} [aicpu]"),
        copy_GBps=_num(local, "copy_GBps", f"{path} [local]", positive=True),
        reduce_GBps=_num(local, "reduce_GBps", f"{path} [local]", positive=True),
        reduce_GBps_by_dtype={str(k): float(v) for k, v in local.get("reduce_GBps_by_dtype", {}).items()},
        links=parsed, calibration=tuple(doc.get("calibration", [])))


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
            "links": {k: {"latency_us": v.latency_us, "bandwidth_GBps": v.bandwidth_GBps, "port_GBps": v.port_GBps,
                          "notify_us": v.latency_us, "utilisation": [list(x) for x in v.utilisation]}
                      for k, v in p.links.items()},
        }
    return json.dumps(out, indent=1)
