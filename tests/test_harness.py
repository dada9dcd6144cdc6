"""The multi-rank harness: pytest plugin (outer/inner runs), reference collectives, launchers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hcomm_kit.base.dtypes import bf16_bits_to_float32, float32_to_bf16_bits
from hcomm_kit.ops import reference

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_orchestrator import scaffold  # noqa: E402  (shared operator cache)


# ---- reference collectives ---------------------------------------------------------------------
def test_reference_collectives() -> None:
    a, b = np.array([1, 2, 3, 4], np.int8), np.array([5, -6, 7, 8], np.int8)
    np.testing.assert_array_equal(reference.allreduce([a, b])[1], [6, -4, 10, 12])
    np.testing.assert_array_equal(reference.allreduce([a, b], "max")[0], [5, 2, 7, 8])
    np.testing.assert_array_equal(reference.allgather([a, b])[0], np.concatenate([a, b]))
    np.testing.assert_array_equal(reference.reduce_scatter([a, b], "min")[1], [3, 4])
    np.testing.assert_array_equal(reference.broadcast([a, b], root=1)[0], b)
    np.testing.assert_array_equal(reference.alltoall([a, b])[0], [1, 2, 5, -6])
    np.testing.assert_array_equal(reference.alltoall([a, b])[1], [3, 4, 7, 8])
    x, y = float32_to_bf16_bits(np.array([1.5, 2.0], np.float32)), float32_to_bf16_bits(np.array([0.25, -4], np.float32))
    np.testing.assert_array_equal(bf16_bits_to_float32(reference.allreduce([x, y], "sum", "bf16")[0]), [1.75, -2.0])
    with pytest.raises(ValueError, match="divisible"):
        reference.reduce_scatter([np.ones(3), np.ones(3)])


def test_reference_reduction_is_the_stacked_one_in_rank_order() -> None:
    """The reductions accumulate rank after rank (memory of two arrays, not the ranks' stack) and
    give bit for bit what numpy's reduction over the stacked inputs gives (random floats: the order
    matters), wrapping integers as the stack does."""
    rng = np.random.default_rng(5)
    for dtype in (np.float32, np.float64, np.int32, np.uint8, np.int64):
        ins = [(rng.standard_normal(1001) * 100).astype(dtype) for _ in range(7)]
        for op, f in (("sum", np.sum), ("prod", np.prod), ("max", np.max), ("min", np.min)):
            wide = np.float64 if np.issubdtype(dtype, np.floating) else \
                np.uint64 if np.issubdtype(dtype, np.unsignedinteger) else np.int64
            want = f(np.stack([x.astype(wide) for x in ins]), axis=0).astype(dtype)
            np.testing.assert_array_equal(reference.reduce(ins, op), want, err_msg=f"{dtype} {op}")
    nan = [np.array([1.0, np.nan]), np.array([np.nan, 2.0])]
    assert np.isnan(reference.reduce(nan, "max")).all()


def test_memory_preflight_names_the_need_and_fits_an_8_rank_64_mib_sweep(monkeypatch) -> None:
    """bench -e 64M at 8 ranks (fp32: 16 Mi elements) needs under 16 GiB with the HCCL buffers (the
    reductions' references no longer stack every rank's input); a count beyond the machine is
    refused before any job, naming the option, both figures and the limit."""
    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.jobs import preflight

    need = 8 * preflight.host_bytes_per_rank(1 << 24, 4, 8) + 8 * (200 << 20)
    assert need < 16 << 30, need / (1 << 30)
    monkeypatch.setattr(preflight, "available_memory", lambda: 8 << 30)
    with pytest.raises(ConfigError, match=r"-e 64M: 8 rank\(s\) of 16777216 x 4-byte elements need about .* GiB "
                                          r"of memory .* but 8.0 GiB is available; use a smaller -e"):
        preflight.check_memory(1 << 24, 4, 8, what="-e", given="64M")


# ---- the plugin, driven like a user would: a plain pytest run of a multi-rank test file -----------
PLUGIN_TESTS = '''
import time
import pytest

@pytest.mark.mpi(np=[1, 2])
def test_ranks(comm, mpi_comm, mpi_np):
    assert comm.size == mpi_np == mpi_comm.Get_size()
    assert comm.rank == mpi_comm.Get_rank()

@pytest.mark.mpi(np=[2])
def test_fails_on_rank_1(comm):
    assert comm.rank != 1, "rank one says no"

@pytest.mark.mpi(np=[2], timeout=3)
def test_hangs(comm):
    if comm.rank == 0:
        time.sleep(60)

@pytest.mark.mpi(np=[2])
def test_skipped(comm):
    pytest.skip("not today")
'''


@pytest.mark.slow  # a nested pytest run with several mpirun jobs: full suite only
def test_plugin_outer_run(tmp_path: Path) -> None:
    (tmp_path / "test_m.py").write_text(PLUGIN_TESTS)
    t0 = time.monotonic()
    logs = tmp_path / "tmp"  # the failed jobs' logs go to $TMPDIR/hcomm_kit_logs: here, not the machine's /tmp
    logs.mkdir()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "hcomm_kit.testing.plugin", "-p", "no:cacheprovider",
                           "-rA", "test_m.py"], cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "TMPDIR": str(logs)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    kept = sorted(d.name for d in (logs / "hcomm_kit_logs").iterdir())
    assert len(kept) == 2 and all((logs / "hcomm_kit_logs" / d / "FAILED").is_file() for d in kept), kept
    assert "2 failed, 2 passed, 1 skipped" in out, out
    # The killed job leaves no rank behind (test_hangs' rank 0 would sleep on for a minute).
    deadline = time.monotonic() + 10
    while True:
        left = subprocess.run(["pgrep", "-f", f"--rootdir {tmp_path}"], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not left, f"ranks of the killed job are still running: {left}"
    assert "PASSED test_m.py::test_ranks[np1]" in out and "PASSED test_m.py::test_ranks[np2]" in out
    # The failing rank's own traceback, not just "mpirun failed".
    assert "failed on rank 1 (call)" in out and "rank one says no" in out
    assert "timed out after 3 s" in out, out
    assert "not today" in out
    assert time.monotonic() - t0 < 120


def test_plugin_under_mpirun_selects_world_size(tmp_path: Path) -> None:
    """`mpirun -np 2 python -m pytest`: only the np2 items run, on every rank."""
    from hcomm_kit.jobs.mpirun import mpirun_argv

    (tmp_path / "test_m.py").write_text(PLUGIN_TESTS)
    from hcomm_kit.testing.runner import _SLOW_PLUGINS_OFF

    argv = mpirun_argv(2, [sys.executable, "-m", "pytest", "-p", "hcomm_kit.testing.plugin", "-p", "no:cacheprovider",
                           *_SLOW_PLUGINS_OFF, "-q", "--color=no", "test_m.py::test_ranks"])
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("1 passed, 1 deselected") == 2, proc.stdout


# ---- launchers ------------------------------------------------------------------------------------
def test_launch_failing_rank_aborts_job() -> None:
    code = "import hcomm_kit; c = hcomm_kit.init(); c.barrier()\nif c.rank == 1: 1 / 0\nc.barrier(); c.barrier()"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--timeout", "100", "--",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=150)
    assert proc.returncode not in (0, 124), proc.stdout + proc.stderr
    assert "ZeroDivisionError" in proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 60


@pytest.mark.slow  # fault injection with real timeouts: full suite only
def test_launch_timeout_kills_job() -> None:
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--timeout", "3", "--",
                           sys.executable, "-c", "import time; time.sleep(60)"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 124
    assert "did not finish within 3 s" in proc.stderr


def test_run_command_table() -> None:
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "run", str(scaffold("ring-allreduce")), "--np", "3",
                           "--count", "1000", "-d", "int32", "-o", "max", "--iters", "2"],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "max error" in proc.stdout and " OK" in proc.stdout and "int32" in proc.stdout


@pytest.mark.slow  # full run only: over the quick run's budget
def test_test_command(tmp_path: Path) -> None:
    """`hcomm-kit test OPDIR --np 2` runs the generated tests (a subset here, for time)."""
    from hcomm_kit.scaffold.render import new_op

    res = new_op("gen_ag", pattern="mesh-allgather", directory=tmp_path)
    proc = subprocess.run([sys.executable, "-m", "hcomm_kit", "test", str(res.opdir), "--np", "2", "--",
                           "-k", "-7-fp32 or -1031-fp32 or -300007-fp32", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout, proc.stdout
