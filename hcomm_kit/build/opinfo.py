"""The files beside op.toml that the build checks or `hcomm-kit new --update` reads: the op-info JSON
(checked against op.toml before a build) and the answers file of `hcomm-kit new`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base.errors import BuildError, ConfigError
from .opmodel import OpSpec

__all__ = ["ANSWERS_FILE", "read_answers", "check_op_info"]


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
