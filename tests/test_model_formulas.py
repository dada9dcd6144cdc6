"""HCCL's published formulas (hcomm_kit.base.model_formulas) against values worked out by hand
from the documents (hicann/hccl docs/zh/user_guide/coll_algo_intro/Mesh.md, Ring.md, NHR.md,
hierarchical_comm_principle.md) and A2.toml's figures. Single process, no emulator, except the
last test (slow: one 6-rank job), which holds the emulator's modelled time of the two-level rooted
built-ins against their formula.

The A2 figures the arithmetic below uses (asserted first, so a change of A2.toml shows here):
HCCS latency 1.0 + notify 1.0 -> alpha 2.0 us; write 20.284 GB/s = 20284 B/us, read 26814 B/us;
port 392 GB/s; RoCE alpha 0.21 + 0.21 = 0.42 us, write 23827 B/us, port 25000 B/us; reduce
483000 B/us; task 0.9 us; launch 10 us.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hcomm_kit.base import model_params
from hcomm_kit.base.errors import ConfigError
from hcomm_kit.base.model_formulas import COLLECTIVES, FAMILIES, formula, formula_us, levels

MiB = 1 << 20


def test_a2_figures_the_arithmetic_assumes() -> None:
    p = model_params.load("A2")
    h, r = p.links["HCCS"], p.links["RoCE"]
    assert (h.latency_us, h.notify_us, h.write_GBps, h.read_GBps, h.port_GBps) == (1.0, 1.0, 20.284, 26.814, 392.0)
    assert (r.latency_us, r.notify_us, r.write_GBps, r.port_GBps) == (0.21, 0.21, 23.827, 25.0)
    assert (p.reduce_GBps, p.task_us, p.launch_us) == (483.0, 0.9, 10.0)


def test_mesh_allreduce_64m_a2_1x8() -> None:
    """Mesh.md AllReduce = ReduceScatter + AllGather, 2a + (2/p) n b + ((p-1)/p) n g, p = 8,
    n = 64 MiB = 67108864 B: 2 x 2.0 = 4.0; 2/8 x 67108864 / 20284 = 827.1158;
    7/8 x 67108864 / 483000 = 121.5740; link 952.6898 us. beta: 1/20284 > 7/392000 (the ports
    bind only below 392/7 = 56 GB/s a link).
    Issue: the ReduceScatter step's 9 x 7 + 7 = 70 tasks (63.0 us), the AllGather's 63 (56.7 us):
    the ReduceScatter runs once issued, the AllGather's tasks are issued meanwhile, so
    us = 10 + 63.0 + 952.6898 = 1025.6898. busbw = 2 x 7/8 x 67108864 / 1025.6898 us = 114.5 GB/s;
    with the read figure 2/8 x 67108864 / 26814 = 625.6887 -> link 751.2627,
    us 10 + 63.0 + 751.2627 = 824.2627, busbw 142.5 GB/s."""
    f = formula("allreduce", "mesh", "A2:1x8", 64 * MiB)
    assert f.link_us == pytest.approx(4.0 + 827.1158 + 121.5740, abs=1e-3)
    assert f.tasks == 133 and f.issue_us == pytest.approx(119.7)
    assert f.us == pytest.approx(1025.6898, abs=1e-3)
    assert 2 * 7 / 8 * 64 * MiB / (f.us * 1e3) == pytest.approx(114.5, abs=0.05)
    r = formula("allreduce", "mesh", "A2:1x8", 64 * MiB, figure="read")
    assert r.us == pytest.approx(10 + 63.0 + 4.0 + 625.6887 + 121.5740, abs=1e-3)
    assert 2 * 7 / 8 * 64 * MiB / (r.us * 1e3) == pytest.approx(142.5, abs=0.05)
    assert "Mesh.md AllReduce" in f.citation
    assert [s.what for s in f.steps] == ["mesh reduce_scatter (p=8, HCCS)", "mesh allgather (p=8, HCCS)"]


def test_small_sizes_are_bound_by_the_aicpu_issue() -> None:
    """64 KiB: the ReduceScatter step runs 2.0 + 65536/8/20284 + 7/8 x 65536/483000
    = 2.0 + 0.4039 + 0.1187 = 2.5226 us, the AllGather 2.0 + 0.4039 = 2.4039 us (link 4.9265);
    the AICPU issues 133 tasks in 119.7 us, then the last step runs: us = 10 + 119.7 + 2.4039
    = 132.1039. Without the issue: 10 + 4.9265."""
    f = formula("allreduce", "mesh", "A2:1x8", 64 << 10)
    assert f.link_us == pytest.approx(4.9265, abs=1e-3)
    assert f.us == pytest.approx(132.1039, abs=1e-3)
    assert formula_us("allreduce", "mesh", "A2:1x8", 64 << 10, issue=False) == pytest.approx(14.9265, abs=1e-3)
    assert formula_us("allreduce", "mesh", "A2:1x8", 64 << 10, issue=False, launch=False) == \
        pytest.approx(4.9265, abs=1e-3)


def test_mesh_oneshot_allgather_reduce_scatter() -> None:
    """one-shot (Mesh.md Gather of p blocks of n, then p-1 reductions of n), p = 8, n = 1 MiB:
    a + n b + 7 n g = 2.0 + 1048576/20284 + 7 x 1048576/483000 = 2.0 + 51.6947 + 15.1968 = 68.8915;
    one step of 9 x 7 + 7 = 70 tasks (63.0 us), then its run: us = 10 + 63.0 + 68.8915.
    Mesh.md AllGather a + n/p b, n = 8 MiB (8 blocks of 1 MiB): 2.0 + 1048576/20284 = 53.6947.
    Mesh.md ReduceScatter a + n/p b + (p-1)/p n g, n = 8 MiB:
    2.0 + 51.6947 + 7/8 x 8388608/483000 = 2.0 + 51.6947 + 15.1968 = 68.8915."""
    f = formula("allreduce", "mesh_oneshot", "A2:1x8", MiB)
    assert f.link_us == pytest.approx(68.8915, abs=1e-3) and f.tasks == 70
    assert f.us == pytest.approx(141.8915, abs=1e-3)
    assert formula("allgather", "mesh", "A2:1x8", 8 * MiB).link_us == pytest.approx(53.6947, abs=1e-3)
    assert formula("reduce_scatter", "mesh", "A2:1x8", 8 * MiB).link_us == pytest.approx(68.8915, abs=1e-3)


def test_ring_pipeline_of_steps() -> None:
    """Ring.md AllReduce on A2:1x4, n = 1 MiB: 2 x 3 steps; ReduceScatter steps each
    2.0 + 262144/20284 + 262144/483000 = 2.0 + 12.9237 + 0.5427 = 15.4664 us with 6 tasks
    (5.4 us), AllGather steps 2.0 + 12.9237 = 14.9237 us with 5 tasks (4.5 us): the links decide,
    us = 10 + 5.4 + 3 x 15.4664 + 3 x 14.9237 = 106.5703."""
    f = formula("allreduce", "ring", "A2:1x4", MiB)
    assert f.link_us == pytest.approx(3 * 15.4664 + 3 * 14.9237, abs=1e-3)
    assert f.us == pytest.approx(106.5703, abs=1e-3)


def test_ring_and_nhr_rows() -> None:
    """Ring.md AllGather (p-1) a + ((p-1)/p) n b, p = 4 (A2:1x4), n = 4 MiB:
    3 x 2.0 + 3/4 x 4194304 / 20284 = 6.0 + 155.0842 = 161.0842.
    Ring.md Broadcast (p-1) a + (p-1) n b, n = 1 MiB: 3 x 2.0 + 3 x 1048576/20284 = 6.0 + 155.0842.
    NHR.md AllReduce 2 ceil(log2 p) a + 2 (p-1)/p n b + (p-1)/p n g with p = 6 (A2:1x6, ceil(log2 6)
    = 3), n = 6 MiB: 6 x 2.0 + 2 x 5/6 x 6291456/20284 + 5/6 x 6291456/483000
    = 12.0 + 516.9473 + 10.8548 = 539.8022; tasks 11 x 3 = 33."""
    assert formula("allgather", "ring", "A2:1x4", 4 * MiB).link_us == pytest.approx(161.0842, abs=1e-3)
    assert formula("broadcast", "ring", "A2:1x4", MiB).link_us == pytest.approx(161.0842, abs=1e-3)
    f = formula("allreduce", "nhr", "A2:1x6", 6 * MiB)
    assert f.link_us == pytest.approx(539.8022, abs=1e-3) and f.tasks == 33


def test_flat_algorithms_across_servers_take_the_slower_link() -> None:
    """Ring.md AllGather over A2:2x4 (p = 8): the ring crosses RoCE, beta = 1/23827 beside HCCS's
    1/20284... RoCE is the faster stream on A2 (HIXL: 23.8 against 20.3 GB/s), so HCCS decides:
    7 x 2.0 + 7/8 x 8388608/20284 = 14.0 + 361.8631 = 375.8631 (n = 8 MiB)."""
    assert formula("allgather", "ring", "A2:2x4", 8 * MiB).link_us == pytest.approx(375.8631, abs=1e-3)


def test_sequence_mesh_nhr_allreduce_two_servers() -> None:
    """hierarchical_comm_principle.md AllReduce on A2:2x8 (p0 = 8 by HCCS, p1 = 2 by RoCE),
    n = 16 MiB = 16777216:
      Mesh.md ReduceScatter (8, n):  2.0 + 16777216/8/20284 + 7/8 x 16777216/483000
                                    = 2.0 + 103.3895 + 30.3935 = 135.7830
      NHR.md AllReduce (2, n/8 = 2097152): beta 1/min(23827, port 25000) = 1/23827:
                                    2 x 1 x 0.42 + 2 x 1/2 x 2097152/23827 + 1/2 x 2097152/483000
                                    = 0.84 + 88.0158 + 2.1709 = 91.0267
      Mesh.md AllGather (8, n):      2.0 + 103.3895 = 105.3895
    link 332.1992 us; tasks (9x7 + 7) + 11 x 1 + 9 x 7 = 70 + 11 + 63 = 144."""
    f = formula("allreduce", "sequence_mesh_nhr", "A2:2x8", 16 * MiB)
    assert f.link_us == pytest.approx(135.7830 + 91.0267 + 105.3895, abs=2e-3)
    assert f.tasks == 144
    assert [s.link for s in f.steps] == ["HCCS", "RoCE", "RoCE", "HCCS"]  # NHR AllReduce = RS + AG


def test_parallel_mesh_nhr_takes_the_slower_part_of_each_step() -> None:
    """The parallel composition's four steps each cost the slower of its two parts, and its total
    lies between the better half of the work and the sequential composition; the split follows
    CANN's ratio: on A2:2x8 the mesh moves 7 x 20.284 GB/s a rank, RoCE 23.827, so most data
    starts inside: r = 0.75 (clos 1/2/23827 = 2.0984e-5 against mesh 21x7/(20x8x141988) =
    6.4711e-6 per byte: r = 2.0984/(2.0984 + 0.6471) = 0.764 -> 6/8)."""
    f = formula("allreduce", "parallel_mesh_nhr", "A2:2x8", 64 * MiB)
    assert "part 0.75" in f.steps[0].what
    seq = formula("allreduce", "sequence_mesh_nhr", "A2:2x8", 64 * MiB)
    pairs = [f.steps[i:i + 2] for i in range(0, len(f.steps), 2)]
    assert f.link_us == pytest.approx(sum(max(a.us, b.us) for a, b in pairs))
    assert f.link_us < seq.link_us


def test_sequence_mesh_nhr_rooted_two_servers() -> None:
    """The rooted collectives down and up the levels on A2:2x8 (p0 = 8 by HCCS, p1 = 2 by RoCE),
    n = 16 MiB = 16777216 (CANN's BroadcastSequenceMesh1dNHRNHRExecutor and
    ScatterSequenceAicpu3LevelExecutor on two levels):
      Mesh.md Scatter (8, n) from the root in its server: 2.0 + 16777216/8/20284 = 105.3895
      NHR.md Scatter (2, n/8 = 2097152): 0.42 + 1/2 x 2097152/23827 = 0.42 + 44.0079 = 44.4279
    broadcast (+ NHR.md AllGather (2, n/8) 44.4279 + Mesh.md AllGather (8, n) 105.3895):
    299.6347 us, tasks 63 + 5 + 5 + 63 = 136; scatter: 149.8174 us, tasks 63 + 5 = 68. The
    reduce runs the allreduce's steps (ReduceSequenceExecutorAicpu3Level), so the allreduce's
    figure."""
    f = formula("broadcast", "sequence_mesh_nhr", "A2:2x8", 16 * MiB)
    assert f.link_us == pytest.approx(2 * 105.3895 + 2 * 44.4279, abs=2e-3)
    assert f.tasks == 136
    assert [s.link for s in f.steps] == ["HCCS", "RoCE", "RoCE", "HCCS"]
    f = formula("scatter", "sequence_mesh_nhr", "A2:2x8", 16 * MiB)
    assert f.link_us == pytest.approx(105.3895 + 44.4279, abs=2e-3)
    assert f.tasks == 68
    assert formula("reduce", "sequence_mesh_nhr", "A2:2x8", 16 * MiB).link_us == pytest.approx(
        135.7830 + 91.0267 + 105.3895, abs=2e-3)


def test_parallel_mesh_nhr_rooted_two_servers() -> None:
    """A2:2x4 (p0 = 4, p1 = 2), n = 64 MiB = 67108864.
    Broadcast (CANN's InsBroadcastParallelExecutor; CalcParallelDataSplitRatio's SCATTER kind:
    mesh 3/(4 x 3 x 20284) = 1.2325e-5, clos 1/(2 x 23827) = 2.0985e-5 a byte, r = 0.630 -> 5/8):
    part a = 41943040, part b = 25165824;
      step 1: Mesh.md Scatter (4, a) 2.0 + a/4/20284 = 518.9473 | NHR.md Scatter (2, b)
              0.42 + b/2/23827 = 528.5147 -> 528.5147
      step 2: NHR.md Scatter (2, a/4) 0.42 + a/8/23827 = 220.4595 | Mesh.md Scatter (4, b/2)
              2.0 + b/8/20284 = 157.0842 -> 220.4595
      steps 3, 4: the AllGathers, the same figures in reverse: link 2 x (528.5147 + 220.4595)
              = 1497.9483 us; tasks 4 x (27 + 5) = 128.
    On A2:2x3 the SCATTER kind gives mesh 2/(3 x 2 x 20284) = 1.6433e-5: r = 0.561 -> 4/8.
    Scatter (InsV2ScatterParallelExecutor: halves, no ratio): a = b = 33554432;
      step 1: Mesh.md Scatter (4, a) 415.5579 | NHR.md Scatter (2, b) 704.5462
      step 2: NHR.md Scatter (2, a/4) 176.4516 | Mesh.md Scatter (4, b/2) 208.7789
    link 913.3252 us, tasks 2 x (27 + 5) = 64. Reduce (ReduceParallelExecutor) = the
    allreduce's four steps and split."""
    f = formula("broadcast", "parallel_mesh_nhr", "A2:2x4", 64 * MiB)
    assert "part 0.625" in f.steps[0].what and "part 0.375" in f.steps[1].what
    assert f.link_us == pytest.approx(2 * (528.5147 + 220.4595), abs=2e-3)
    assert f.tasks == 128
    assert "part 0.5 " in formula("broadcast", "parallel_mesh_nhr", "A2:2x3", 64 * MiB).steps[0].what
    f = formula("scatter", "parallel_mesh_nhr", "A2:2x4", 64 * MiB)
    assert f.link_us == pytest.approx(704.5462 + 208.7789, abs=2e-3)
    assert f.tasks == 64
    for topo in ("A2:2x4", "A2:2x8", "A3:2x16"):
        r, a = (formula(c, "parallel_mesh_nhr", topo, 64 * MiB) for c in ("reduce", "allreduce"))
        assert (r.link_us, r.tasks, [s.what for s in r.steps]) == (a.link_us, a.tasks, [s.what for s in a.steps])
    assert "ins_v2_scatter_parallel_executor.cc" in f.citation


def test_loops_over_the_ccl_buffer() -> None:
    """n larger than the CCL buffer runs the algorithm once per buffer: 3 loops of 1/3 of the data,
    so three times the alphas and the tasks, the same bytes."""
    one = formula("allgather", "mesh", "A2:1x8", 48 * MiB, buffer_bytes=64 * MiB)
    three = formula("allgather", "mesh", "A2:1x8", 48 * MiB, buffer_bytes=16 * MiB)
    assert (one.loops, three.loops) == (1, 3)
    assert three.link_us - one.link_us == pytest.approx(2 * 2.0)
    assert three.tasks == 3 * one.tasks


def test_a3_shape_and_the_port_bound() -> None:
    """A3:1x16 mesh allgather: 15 peers at once through a 196 GB/s port: beta = max(1/164610,
    15/196000) = 7.653e-5 us/B, so n/p = 1 MiB takes 1048576 x 15 / 196000 = 80.2482 us
    (not 1048576/164610 = 6.3701), + alpha 0.83 + 0.83."""
    f = formula("allgather", "mesh", "A3:1x16", 16 * MiB)
    assert f.link_us == pytest.approx(1.66 + 80.2482, abs=1e-3)
    assert levels("A3:2x16") == ("A3", 16, 2, "UB", "RoCE")


def test_every_family_evaluates_and_bad_input_is_named() -> None:
    for fam, colls in FAMILIES.items():
        topo = "A2:2x4" if fam.endswith("_nhr") and fam != "nhr" else "A2:1x8"
        for c in colls:
            assert formula_us(c, fam, topo, 3 * MiB + 128) > 0
    assert set(COLLECTIVES) >= {"allreduce", "allgather", "reduce_scatter"}
    with pytest.raises(ConfigError, match="one-server"):
        formula("allreduce", "mesh", "A2:2x8", MiB)
    with pytest.raises(ConfigError, match="no published formula"):
        formula("alltoall", "mesh", "A2:1x8", MiB)
    with pytest.raises(ConfigError, match="unknown algorithm family"):
        formula("allreduce", "hypercube", "A2:1x8", MiB)
    with pytest.raises(ConfigError, match="PRODUCT:SERVERSxNPUS"):
        formula("allreduce", "mesh", "A2-8", MiB)
    with pytest.raises(ConfigError, match="'write' or 'read'"):
        formula("allreduce", "mesh", "A2:1x8", MiB, figure="copy")
    assert math.isclose(formula_us("allreduce", "mesh", "A2:1x8", 0, issue=False, launch=False), 4.0)


# Rank side: each built-in named once at SIZE (bench's n), rank 0 printing its modelled time and
# the algorithm CANN's selector gave it.
_RANK = r"""
import json, os, sys
import hcomm_kit
from hcomm_kit.bench import sweep as bench
comm = hcomm_kit.init()
for coll in sys.argv[1].split(","):
    with open(os.devnull, "w") as q:
        (row,) = bench.run_bench(comm, coll, [int(sys.argv[2])], iters=1, warmup=0, check=0, out=q)
    if comm.rank == 0:
        print("ROW " + json.dumps({"coll": coll, "model": row["model_time_us"], "algo": row["selected"]}), flush=True)
comm.close()
"""


@pytest.mark.slow  # one 6-rank job of three 16 MiB calls (about 10 s on the 2-core VM)
def test_rooted_two_level_builtins_model_within_the_formula(tmp_path: Path) -> None:
    """A2:2x3 (two servers of 3: a non-power-of-two mesh), 16 MiB: the built-in broadcast, reduce
    and scatter run CANN's AicpuBroadcastParallelMeshNHR, AicpuReduceParallelMeshNHR and
    AicpuScatterParallelMeshNHR, and each models within 15 % of the parallel_mesh_nhr formula (the
    bound of the two-level allreduce's check in test_model.py). The model adds what the formula
    leaves out (the scatter root's staging copy of the input), the kernels split as CANN's
    executors do (the scatter in halves)."""
    script = tmp_path / "rank.py"
    script.write_text(_RANK)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo))
    env.pop("HCOMM_KIT_SOC", None)
    size = 16 * MiB
    cmd = [sys.executable, "-m", "hcomm_kit", "launch", "--np", "6", "--topology", "A2:2x3", "--",
           sys.executable, str(script), "broadcast,reduce,scatter", str(size)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    rows = {r["coll"]: r for r in (json.loads(line.split("ROW ", 1)[1]) for line in res.stdout.splitlines()
                                   if "ROW " in line)}
    assert sorted(rows) == ["broadcast", "reduce", "scatter"], res.stdout[-2000:]
    for coll, algo in (("broadcast", "AicpuBroadcastParallelMeshNHR"), ("reduce", "AicpuReduceParallelMeshNHR"),
                       ("scatter", "AicpuScatterParallelMeshNHR")):
        want = formula(coll, "parallel_mesh_nhr", "A2:2x3", size).us
        assert rows[coll]["algo"] == algo, rows[coll]
        assert abs(rows[coll]["model"] - want) / want <= 0.15, (coll, rows[coll]["model"], want)
