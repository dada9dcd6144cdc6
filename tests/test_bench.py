"""`hcomm-kit bench` (hccl_test flags, nccl-tests bandwidths) and `hcomm-kit run` of built-ins.

Benchmarks are checked for what they print and compute, never for how fast anything is.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hcomm_kit.bench import sweep as bench
from hcomm_kit.base.errors import ConfigError


def test_sizes_and_factors() -> None:
    assert bench.parse_size("64M") == 64 << 20 and bench.parse_size("1k") == 1024 and bench.parse_size("8") == 8
    assert bench.parse_size("2GB") == 2 << 30
    with pytest.raises(ConfigError, match="bad size"):
        bench.parse_size("lots")
    assert bench.sizes(8, 64, 2.0, None) == [8, 16, 32, 64]
    assert bench.sizes(0, 100, None, None) == list(range(0, 101, 10))       # hccl_test default (e-b)/10
    assert bench.sizes(1000, 1000, None, None) == [1000]
    with pytest.raises(ConfigError):
        bench.sizes(64, 8, None, None)
    ar, ag, bc = bench.COLLECTIVES["allreduce"], bench.COLLECTIVES["allgather"], bench.COLLECTIVES["broadcast"]
    assert ar.bus_factor(4) == pytest.approx(1.5) and ag.bus_factor(4) == pytest.approx(0.75)
    assert bc.bus_factor(8) == 1.0
    alg, bus = bench._bw(ar, 1_000_000, 1000.0, 4)            # 1 MB in 1 ms
    assert alg == pytest.approx(1.0) and bus == pytest.approx(1.5)


def _bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hcomm_kit", "bench", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("coll,np_", [("allreduce", 2), ("reduce_scatter", 3), ("alltoall", 2), ("scatter", 3),
                                      ("sendrecv", 2)])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_bench_table_and_json(tmp_path, coll: str, np_: int) -> None:
    out = tmp_path / "rows.jsonl"
    p = _bench(coll, "--np", str(np_), "-b", "8", "-e", "4K", "-f", "8", "-n", "3", "-w", "1", "-r", str(np_ - 1),
               "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert any(l.startswith("data_size(Bytes) | aveg_time(us) | alg_bandwidth(GB/s) | bus_bandwidth(GB/s) | "
                            "check_result | #wrong") for l in lines), p.stdout
    assert "EMULATOR" in p.stdout and "bytes taking part per rank" in p.stdout
    assert "# Out of bounds values : 0 OK" in p.stdout and "# Avg bus bandwidth" in p.stdout
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    assert [r["collective"] for r in rows] == [coll] * 4        # 8, 64, 512, 4096 bytes
    for r in rows:
        assert r["check"] == "success" and r["wrong"] == 0 and r["ranks"] == np_ and r["backend"] == "emu"
        assert r["time_us"] > 0 and r["busbw"] == pytest.approx(r["algbw"] * bench.COLLECTIVES[coll].bus_factor(np_))
        for key in ("algorithm", "dtype", "op", "size", "soc", "host"):
            assert key in r


def test_bench_baseline_mpi(tmp_path) -> None:
    out = tmp_path / "rows.jsonl"
    p = _bench("allreduce", "--np", "2", "-b", "1K", "-e", "1K", "-n", "3", "-w", "1", "-d", "int32", "-o", "max",
               "--baseline", "mpi", "--inplace", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "vs_mpi" in p.stdout and "in-place" in p.stdout
    row = json.loads(out.read_text())
    assert row["check"] == "success" and row["mpi_time_us"] > 0 and row["vs_mpi"] > 0


@pytest.mark.slow
def test_bench_product_past_the_dtype_is_null() -> None:
    # int8 prod over many ranks cannot hold 2**8: NULL, not failed (Ascend950 reduces int8 prod)
    p = subprocess.run([sys.executable, "-m", "hcomm_kit", "bench", "allreduce", "--np", "8", "-b", "64", "-e", "64",
                        "-n", "1", "-w", "0", "-d", "int8", "-o", "prod"], capture_output=True, text=True,
                       timeout=300, env={**__import__("os").environ, "HCOMM_KIT_SOC": "Ascend950"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "NULL" in p.stdout


def test_bench_bad_arguments() -> None:
    p = _bench("allreduse", "--np", "2")
    assert p.returncode != 0 and "unknown collective 'allreduse'" in p.stderr
    p = _bench("allreduce", "--np", "1", "-b", "1Q")
    assert p.returncode != 0 and "bad size '1Q'" in p.stderr


def test_run_builtin_collective() -> None:
    p = subprocess.run([sys.executable, "-m", "hcomm_kit", "run", "allgather", "--np", "3", "--count", "1031",
                        "-d", "bf16", "--iters", "2"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "success" in p.stdout and "allgather" in p.stdout


def test_plot_writes_png(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    rows = [{"collective": "allreduce", "backend": "emu", "size": s, "busbw": b, "time_us": t, "mpi_busbw": m,
             "mpi_time_us": mt} for s, b, t, m, mt in ((8, 0.0, 20.0, 0.01, 1.3), (1 << 20, 8.0, 130.0, 4.0, 260.0))]
    out = tmp_path / "bw.png"
    bench.plot(rows, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_latency_table_format() -> None:
    """`hcomm-kit bench --latency`'s table from the jobs' results (no timing): a value per run,
    the ratios theirs / ours, the 64 MiB memory bound and the Python loop against mpi4py."""
    from hcomm_kit.bench import latency

    def row(ranks, size, ours, mpi, gloo=None, **extra):
        return {"ranks": ranks, "size": size, "iters": 10, "ours_us": ours, "mpi_us": mpi, "gloo_us": gloo,
                "wrong": 0, **extra}

    two = [{"ranks": 2, "rows": [row(2, 8, 2.0, 1.0, 4.0), row(2, 64 << 20, 10000.0, 30000.0,
                                                               memcpy_gbps=12.0)],
            "python": {"all_reduce(device)": 6.0, "mpi4py Allreduce": 2.0}},
           {"ranks": 2, "rows": [row(2, 8, 4.0, 1.0), row(2, 64 << 20, 20000.0, 30000.0, memcpy_gbps=12.0)],
            "python": {"all_reduce(device)": 9.0, "mpi4py Allreduce": 3.0}}]
    text = latency.format_table({2: two, 4: []}, 2, (0.1, 0.2))
    assert "| 2 | 8 B | 2.00 / 4.00 | 1.00 / 1.00 | 0.50 / 0.25 | 4.00 / - | 2.00 / - |" in text, text
    assert "| 2 | 64 MiB (ms) | 10.00 / 20.00 | 30.00 / 30.00 | 3.00 / 1.50 |" in text, text
    # 64 MiB in 10 ms = 6.71 GB/s against a bound of 2/3 x 12 GB/s = 8 GB/s: 84 %
    assert "algbw 6.71 / 3.36 GB/s" in text and "bound" in text and "reached 84 / 42 %" in text, text
    assert "| all_reduce(device) | 6.00 / 9.00 | 3.0 / 3.0 x |" in text, text
    assert "LOADED" not in text
    assert latency.sizes_for(2)[-1] == 64 << 20 and latency.sizes_for(8) == (8, 512, 32 << 10)


def test_latency_bad_arguments() -> None:
    proc = _bench("allreduce", "--latency", timeout=60)
    assert proc.returncode == 2 and "--latency measures the built-in allreduce" in proc.stderr, proc.stderr
    proc = _bench("--np", "2", timeout=60)
    assert proc.returncode == 2 and "name a COLLECTIVE" in proc.stderr, proc.stderr


def test_formula_family_of_canns_algorithms() -> None:
    from hcomm_kit.bench.baseline import formula_family

    assert formula_family("allreduce", "AicpuAllReduceSoleMeshOneShot") == "mesh_oneshot"
    assert formula_family("allreduce", "AicpuAllReduceSoleMeshTwoShot") == "mesh"
    assert formula_family("allreduce", "AicpuAllReduceSoleMeshChunkTwoShot") == "mesh"
    assert formula_family("allgather", "AicpuAllGatherSoleMesh") == "mesh"
    assert formula_family("allreduce", "AicpuAllReduceSoleNHR") == "nhr"
    assert formula_family("allreduce", "AicpuAllReduceSequenceMeshConcurNHR") == "sequence_mesh_nhr"
    assert formula_family("reduce_scatter", "AicpuReduceScatterParallelMeshNHR") == "parallel_mesh_nhr"
    assert formula_family("allreduce", "AicpuAllReduceSoleRing") == "ring"
    assert formula_family("broadcast", "AicpuBroadcastParallelMeshNHR") == "parallel_mesh_nhr"
    assert formula_family("scatter", "AicpuScatterSequenceMeshConcurNHR") == "sequence_mesh_nhr"
    # the formulas compose two levels: no figure for the rooted three-level algorithms
    assert formula_family("broadcast", "AicpuBroadcastSequenceMesh1dNHRNHR") is None
    assert formula_family("reduce", "AicpuReduceSequenceMesh1DNHRNHR") is None
    assert formula_family("allreduce", "") is None and formula_family("broadcast", "pairwise") is None


@pytest.mark.slow  # full run only: over the quick run's budget
def test_compare_builtin_where_it_cannot_run(tmp_path) -> None:
    """An operator benched with --compare builtin on 4 ranks with the link 0-1 down (the scaffolded
    ring, routed around it): the built-in cannot run there (CANN's one-shot mesh needs 0-1), so
    its time column says why and the run goes on (it used to abort), with the built-in's modelled
    time on the same ranks with every link up, its algorithm by CANN's name (not "auto") and HCCL's
    formula for it (model_formulas, evaluated here independently)."""
    from test_orchestrator import scaffold

    from hcomm_kit.base.model_formulas import formula

    out = tmp_path / "rows.jsonl"
    p = _bench(str(scaffold("ring-allreduce")), "--np", "4", "--links-down", "0-1", "--compare", "builtin", "-b", "64K",
               "-e", "64K", "-n", "1", "-w", "0", "--json", str(out))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    row = json.loads(out.read_text())
    assert row["check"] == "success" and row["model_time_us"] > 0
    assert "cannot run: 0-1 down" in p.stdout and "every link up (*)" in p.stdout, p.stdout
    assert row["builtin_time_us"] is None and row["vs_builtin"] is None
    assert "link 0-1" in row["builtin_why"] and "HCOMM_KIT_LINKS_DOWN=0-1" in row["builtin_why"], row["builtin_why"]
    assert row["builtin_links_up"] is True and row["builtin_model_time_us"] > 0
    assert row["vs_builtin_model"] == pytest.approx(row["builtin_model_time_us"] / row["model_time_us"])
    # CANN's AICPU selector on one A2 server: the one-shot mesh up to 8 MiB (all_reduce_auto_selector.cc)
    assert "AicpuAllReduceSoleMeshOneShot" in row["builtin_algorithm"] and row["builtin_algorithm"] != "auto"
    want = formula("allreduce", "mesh_oneshot", "A2:1x4", 64 << 10)
    assert row["builtin_formula_us"] == pytest.approx(want.us) and "Mesh.md" in row["builtin_formula"]
