"""Single source of the package version (read by pyproject.toml and the build cache key)."""

__version__ = "0.2.0"
"""The version of the installed package (``hcomm-kit --version``); releases are listed in CHANGELOG.md."""
