"""Operator scaffolding: ``op.toml`` (:mod:`.opspec`), name checks (:mod:`.names`) and the
``hcomm-kit new`` renderer (:mod:`.render`)."""

from __future__ import annotations

from .opspec import HANDSHAKES, PATTERNS, OpSpec, load_opspec, parse_opspec
from .render import new_op, update_op

__all__ = ["HANDSHAKES", "PATTERNS", "OpSpec", "load_opspec", "parse_opspec", "new_op", "update_op"]
