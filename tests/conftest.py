"""Session-wide pytest fixtures shared by all test modules.

The real user build cache (~/.cache/hcomm_kit or $HCOMM_KIT_CACHE_DIR) is kept by default so
the emulator compiles once per machine; tests that must not see or touch it use
``isolated_cache``. Add new shared fixtures here, one small fixture per scenario.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Python's compiled bytecode is kept for the session even where PYTHONDONTWRITEBYTECODE is
    set (some CI images set it): the suite starts a few thousand Python processes (ranks, the
    command line, the workers), and each would otherwise compile hcomm_kit, the tests and pytest's
    rewritten test modules from source again (quick run 131 -> 114-118 s here). The bytecode goes
    to the usual __pycache__ directories (git ignores them). Runs before the workers start, so
    they and every process they start inherit it."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


def pytest_sessionstart(session: pytest.Session) -> None:
    """Scratch operators of the tests (test_orchestrator.scaffold) go under this session's pytest
    base temp (pytest keeps the last few), never a fixed /tmp path; the mpirun jobs the session
    starts inherit the variable, so their ranks share the directory."""
    from test_orchestrator import OPS_DIR_ENV

    if not os.environ.get(OPS_DIR_ENV):
        factory = getattr(session.config, "_tmp_path_factory", None)
        if factory is not None:
            os.environ[OPS_DIR_ENV] = str(factory.getbasetemp() / "ops")
    # built before any test runs: with the suite split over workers (pytest-xdist), a test that
    # starts ranks as subprocesses would otherwise spend its timeout on another worker's first build
    from hcomm_kit.testing.runner import warm_emulator

    warm_emulator()


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HCOMM_KIT_CACHE_DIR at an empty per-test directory and return it."""
    root = tmp_path / "cache"
    monkeypatch.setenv("HCOMM_KIT_CACHE_DIR", str(root))
    return root


@pytest.fixture
def clean_hcomm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every variable declared in hcomm_kit.base.envs (except the cache dir) for this test."""
    from hcomm_kit.base import envs

    for name in envs.VARIABLES:
        if name != "HCOMM_KIT_CACHE_DIR":
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def example_build(tmp_path_factory: pytest.TempPathFactory):
    """``build(name, sanitize="")``: tests/c/<name> built once per session and sanitizer (cann_style)."""
    from cann_style import build_example

    built: dict[tuple[str, str], tuple[Path, Path]] = {}

    def build(name: str, sanitize: str = "") -> tuple[Path, Path]:
        key = (name, sanitize)
        if key not in built:
            built[key] = build_example(name, tmp_path_factory.mktemp(f"{name}-{sanitize or 'plain'}"), sanitize)
        return built[key]

    return build
