"""``hcomm-kit new``: render ``templates/op`` into an operator directory, and re-render it
(:mod:`.render`). The ``op.toml`` model it validates against is :mod:`hcomm_kit.build.opspec`."""

from __future__ import annotations

from .render import new_op, update_op

__all__ = ["new_op", "update_op"]
