"""The released package: the sdist and the wheel build, the wheel installs into a fresh virtual
environment and works from a directory outside the checkout (the emulator's sources, the built-in
operators, the templates and the documentation pages all come from the wheel).

The environment sees the interpreter's site-packages (``--system-site-packages``) for the
dependencies (numpy, mpi4py, Open MPI, ...), so nothing is downloaded; hcomm-kit itself comes from
the wheel, which is checked. The build cache (``HCOMM_KIT_CACHE_DIR``) is the test run's: the
emulator's cache key covers its sources by content, so the wheel's copy reuses the build.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from hcomm_kit._version import __version__
from hcomm_kit.base import envs

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.slow,  # builds the sdist and the wheel, makes a virtual environment, runs a 2-rank job
    pytest.mark.skipif(importlib.util.find_spec("build") is None,
                       reason="the 'build' package is not installed (python -m pip install -e '.[test]')"),
]


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{' '.join(argv)} failed ({p.returncode}):\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p.stdout + p.stderr


def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # sdist first, then the wheel built from the unpacked sdist: what the sdist lacks, the wheel lacks
    _run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(dist)], cwd=REPO,
         timeout=900)
    (sdist,) = dist.glob(f"hcomm[-_]kit-{__version__}.tar.gz")
    (wheel,) = dist.glob(f"hcomm_kit-{__version__}-*.whl")
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in ("README.md", "CHANGELOG.md", "hcomm_kit/emu/src/hccl/comm.h", "aicpu_kernels/allreduce/op.toml",
                   "templates/op/op.toml.jinja", "docs/hcomm.md", "docs/index.md"):
        assert needed in names, f"the sdist misses {needed}"
    assert not any(n.startswith("docs/pending/") for n in names)
    with zipfile.ZipFile(wheel) as z:
        wnames = set(z.namelist())
    for needed in ("hcomm_kit/_data/docs/hcomm.md", "hcomm_kit/_data/docs/predicted-time.md",
                   "hcomm_kit/_data/aicpu_kernels/allreduce/op.toml", "hcomm_kit/_data/templates/op/op.toml.jinja",
                   "hcomm_kit/emu/src/hccl/comm.h", "hcomm_kit/emu/include/hccl/hccl.h"):
        assert needed in wnames, f"the wheel misses {needed}"
    assert not any("/_data/docs/pending/" in n for n in wnames)

    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", "--system-site-packages", str(venv)], cwd=tmp_path, timeout=300)
    py, hk = venv / "bin" / "python", venv / "bin" / "hcomm-kit"
    _run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall", "-q", str(wheel)],
         cwd=tmp_path, timeout=300)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", HCOMM_KIT_CACHE_DIR=str(envs.cache_dir()))
    where = _run([str(py), "-c", "import hcomm_kit, hcomm_kit.base.resources as r; "
                                 "print(hcomm_kit.__file__); print(r.docs_dir()); print(hcomm_kit.__version__)"],
                 cwd=elsewhere, env=env).split()
    assert where[0].startswith(str(venv)) and where[1].startswith(str(venv)), where  # the wheel's, not the checkout's
    assert where[2] == __version__
    assert _run([str(hk), "--version"], cwd=elsewhere, env=env).strip() == f"hcomm-kit {__version__}"
    from hcomm_kit.build.emulator import get_library

    lib = _run([str(py), "-c", "from hcomm_kit.build.emulator import get_library; print(get_library())"],
               cwd=elsewhere, env=env, timeout=280).split()[-1]
    assert lib == str(get_library()), "the wheel's emulator sources hash to another cache entry than the checkout's"
    _run([str(hk), "doctor"], cwd=elsewhere, env=env, timeout=600)
    out = _run([str(hk), "run", "allreduce", "--np", "2", "--count", "1000"], cwd=elsewhere, env=env, timeout=300)
    assert " OK" in out, out
    # the README's first command after the install: the demo (scaffold, build, run on 4 ranks, check)
    out = _run([str(hk), "demo", "--count", "1000"], cwd=elsewhere, env=env, timeout=300)
    assert "demo_ring_allreduce" in out and "demo_mesh_allgather" in out and "all results match numpy" in out, out
    assert "Hcomm for operator authors" in _run([str(hk), "docs", "hcomm"], cwd=elsewhere, env=env)

    # the documents the wheel ships speak of the software
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from test_docs import history_wording, shipped_documents
    finally:
        sys.path.pop(0)
    data = Path(where[1]).parent
    files = shipped_documents(data)
    assert len(files) > 20
    found = history_wording(files)
    assert not found, "development-history wording in a shipped document:\n" + "\n".join(found)
