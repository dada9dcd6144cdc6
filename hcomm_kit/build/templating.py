"""Jinja2 rendering of the packaged templates (``templates/``), for ``hcomm-kit new`` and the build's
generated sources: ``StrictUndefined`` (a missing variable is an error, never an empty string),
and template errors become :class:`BuildError` naming the template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..base.errors import BuildError

__all__ = ["templates_dir", "make_environment", "render_template"]


def templates_dir() -> Path:
    """The packaged templates (the checkout's ``templates/`` or ``hcomm_kit/_data/templates``)."""
    from ..base.resources import templates_dir as packaged

    path = Path(packaged())
    if not (path / "op").is_dir():
        raise BuildError(f"hcomm-kit templates not found in {path}; the installation is incomplete, "
                         "reinstall hcomm-kit")
    return path


def _toml_value(value: Any) -> str:
    """Format a scalar or list as TOML (strings as basic strings; JSON escapes are valid TOML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def make_environment(template_dir: Path | None = None):
    """A Jinja2 environment over ``template_dir`` with ``StrictUndefined`` and the ``toml`` filter."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir or templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["toml"] = _toml_value
    env.filters["pad"] = lambda text, width: str(text).ljust(width - 1) + " "  # align trailing comments
    return env


def render_template(env, name: str, context: Mapping[str, Any]) -> str:
    """Render one template; any template error becomes a :class:`BuildError` naming the template.

    Raises:
        BuildError: undefined variable (StrictUndefined), syntax error, missing template.
    """
    import jinja2

    try:
        return env.get_template(name).render(**context)
    except jinja2.UndefinedError as exc:
        raise BuildError(f"template {name}: {exc.message} (every variable must be defined; "
                         "templates are rendered with StrictUndefined)") from None
    except jinja2.TemplateSyntaxError as exc:
        raise BuildError(f"template {exc.filename or name}:{exc.lineno}: syntax error: {exc.message}") from None
    except jinja2.TemplateNotFound as exc:
        raise BuildError(f"template {exc.name} not found in {env.loader.searchpath}") from None
