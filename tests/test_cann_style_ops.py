"""Operators written exactly like CANN's examples (host programs with one thread per device,
HcclCommInitRootInfo, kernels loaded from op-info JSON) produce correct data on the emulator."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cann_style import build_example


@pytest.fixture(scope="module")
def p2p(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_example("p2p", tmp_path_factory.mktemp("p2p"))


def run(exe: Path, json: Path, ranks: int, soc: str = "Ascend910B", iters: int = 3) -> subprocess.CompletedProcess:
    env = dict(os.environ, HCOMM_KIT_DEVICE_COUNT=str(ranks), HCOMM_KIT_SOC=soc,
               HCOMM_KIT_KERNEL_PATH=str(json.parent))
    return subprocess.run([str(exe), str(json), str(iters)], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("ranks", [2, 3, 4, 8])
def test_p2p_send_recv_threads_as_ranks(p2p: tuple[Path, Path], ranks: int) -> None:
    r = run(*p2p, ranks)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"OK: {ranks} ranks" in r.stdout


@pytest.mark.parametrize("soc", ["Ascend910_93", "Ascend950"])
def test_p2p_send_recv_other_products(p2p: tuple[Path, Path], soc: str) -> None:
    r = run(*p2p, 4, soc=soc)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def allgather(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_example("allgather", tmp_path_factory.mktemp("allgather"))


@pytest.mark.parametrize("ranks", [2, 3, 4, 8])
@pytest.mark.parametrize("soc", ["Ascend910B", "Ascend950"])
def test_mesh_allgather_thread_per_peer(allgather: tuple[Path, Path], ranks: int, soc: str) -> None:
    r = run(*allgather, ranks, soc=soc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"OK: {ranks} ranks" in r.stdout
