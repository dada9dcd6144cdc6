"""Routing around downed links: op.toml's ring layouts (``ring_order``, ``rings``), the ring in the
resource context, the refusal of a ring across a downed link; op.toml ``[test]`` (the topology and
links down of the generated tests, run, bench and model explain); the generated tests' counts past
the HCCL buffer."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hcomm_kit.base.errors import ConfigError
from hcomm_kit.build.opspec import parse_opspec
from hcomm_kit.build.rings import ring_orders

ROOT = Path(__file__).resolve().parents[1]

MINIMAL = '[op]\nname = "x"\n[resources.channels]\ntopology = "ring"\n'


def _edges(ring: tuple[int, ...]) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in zip(ring, ring[1:] + ring[:1])}


@pytest.mark.parametrize("n,down", [(4, ()), (4, ((0, 1),)), (5, ((0, 1),)), (6, ((0, 1), (2, 3))),
                                    (8, ((0, 1),)), (8, ((0, 1), (0, 2), (5, 6))), (9, ((3, 7),)),
                                    (16, ((0, 1), (2, 3), (14, 15))), (64, ((0, 1), (5, 9)))])
def test_rings_never_cross_a_downed_link(n: int, down: tuple[tuple[int, int], ...]) -> None:
    """Every ring visits every rank once, none of its neighbours sits across a downed link, the rings
    share no link; ring 0 is rank order when nothing is down; a full mesh of 8 (with or without one
    link down) holds three such rings, the most there are ((8 - 1) // 2)."""
    rings = ring_orders(n, down, rings=8)
    used: set[tuple[int, int]] = set()
    for ring in rings:
        assert sorted(ring) == list(range(n)), ring
        edges = _edges(ring)
        assert not edges & set(down), (ring, down)
        assert not edges & used, (ring, used)
        used |= edges
    if not down:
        assert rings[0] == tuple(range(n))
    assert len(rings) <= (n - 1) // 2
    if n == 8 and len(down) <= 1:
        assert len(rings) == 3
    assert ring_orders(n, down, rings=1) == rings[:1]


def test_a_ring_that_cannot_be_formed_names_the_link() -> None:
    with pytest.raises(ConfigError, match=r"ranks 0 and 1, whose link 0-1 is down \(HCOMM_KIT_LINKS_DOWN=0-1\); "
                                          r"set \[resources.channels\] ring_order = \"avoid-down\""):
        ring_orders(8, [(1, 0)], order="rank")
    assert ring_orders(8, [(0, 2)], order="rank")[0] == tuple(range(8))  # rank order does not use 0-2
    with pytest.raises(ConfigError, match=r"no ring through all 3 ranks avoids the downed links "
                                          r"\(HCOMM_KIT_LINKS_DOWN=0-1\): rank 0 has 1 link\(s\) up"):
        ring_orders(3, [(0, 1)])
    with pytest.raises(ConfigError, match="needs the link 0-1, which is down"):
        ring_orders(2, [(0, 1)])
    # a star of downed links around rank 5 leaves it one link: no ring
    with pytest.raises(ConfigError, match="rank 5 has 1 link"):
        ring_orders(8, [(5, r) for r in range(8) if r not in (5, 6)])


def test_ring_layout_in_op_toml_channels_and_context() -> None:
    """ring_order / rings: checked keys; channels[2k] / [2k+1] are ring k's prev / next; the header's
    RingInfo and its mirror come from one field list."""
    spec = parse_opspec(MINIMAL + 'ring_order = "avoid-down"\nrings = 3\n')
    rings = spec.ring_layout(8, [(0, 1)])
    assert len(rings) == 3 and spec.channel_num(8, [(0, 1)]) == 6
    for rank in range(8):
        peers = spec.channel_peers(rank, 8, [(0, 1)])
        assert [i for i, _ in peers] == list(range(6))
        for k, ring in enumerate(rings):
            pos = ring.index(rank)
            assert peers[2 * k] == (2 * k, ring[pos - 1]) and peers[2 * k + 1] == (2 * k + 1, ring[(pos + 1) % 8])
        assert all({rank, p} != {0, 1} for _, p in peers)
    mirrors = spec.struct_mirrors()
    assert [f[0] for f in mirrors["RingInfo"]._fields_] == ["pos", "prev", "next", "order"]
    assert [f[0] for f in mirrors["AlgResourceCtx"]._fields_][-3:] == ["ringNum", "ringOrder", "rings"]
    # rank order stays the default: ring operators written for rank-1 / rank+1 keep their layout
    plain = parse_opspec(MINIMAL)
    assert plain.ring_order == "rank" and plain.channel_peers(3, 8) == [(0, 2), (1, 4)]
    with pytest.raises(ConfigError, match="ring_order = 'avoid_down' is not accepted; did you mean 'avoid-down'"):
        parse_opspec(MINIMAL + 'ring_order = "avoid_down"\n')
    with pytest.raises(ConfigError, match=r"resources.channels.rings shapes a ring: it needs topology = \"ring\""):
        parse_opspec(MINIMAL.replace('"ring"', '"mesh"') + "rings = 2\n")
    with pytest.raises(ConfigError, match=r"rings = 9 is out of range \[1, 8\]"):
        parse_opspec(MINIMAL + "rings = 9\n")


def test_link_map_gives_the_kernel_the_rank_graph(tmp_path: Path) -> None:
    """link_map = true: AlgResourceCtx.linkUp (one word per rank) in the header and the mirror; an
    operator that lists algorithms gets the kind test, which tries each of them."""
    from hcomm_kit.scaffold.render import new_op, update_op

    spec = parse_opspec('[op]\nname = "x"\n[resources.channels]\ntopology = "mesh"\nlink_map = true\n')
    field = spec.struct_mirrors()["AlgResourceCtx"]._fields_[-1]
    assert field[0] == "linkUp" and field[1]._length_ == 64
    assert "linkUp" not in [f[0] for f in parse_opspec('[op]\nname = "x"\n').struct_mirrors()["AlgResourceCtx"]._fields_]
    d = new_op("rr", pattern="ring-allreduce", directory=tmp_path).opdir
    assert "check_operator" not in (d / "tests" / "test_rr.py").read_text()  # the pattern's own test
    toml = d / "op.toml"
    toml.write_text(toml.read_text().replace('kind = "allreduce"', 'kind = "allreduce"\nalgorithms = ["a", "b"]')
                    .replace("topology = \"ring\"", "topology = \"ring\"\nlink_map = true")
                    + '\n[[param]]\nname = "algo"\ntype = "uint32_t"\n')
    update_op(d)
    assert "uint64_t linkUp[RR_MAX_CHANNELS];" in (d / "inc" / "rr_param.h").read_text()
    test = (d / "tests" / "test_rr.py").read_text()
    assert "check_operator" in test and "ALGORITHMS = algorithms_to_try(OP_DIR)" in test


def test_the_scaffolded_ring_reads_its_ring_from_the_context(tmp_path: Path) -> None:
    from hcomm_kit.scaffold.render import new_op

    res = new_op("rr", pattern="ring-allreduce", directory=tmp_path)
    assert res.spec.ring_order == "avoid-down"
    header = (tmp_path / "rr" / "inc" / "rr_param.h").read_text()
    assert "} RingInfo;" in header and "RingInfo rings[RR_MAX_RINGS];" in header
    code = (tmp_path / "rr" / "op_kernel_aicpu" / "exec_op.cc").read_text()
    assert "const uint32_t pos = ring.pos;" in code and "resCtx.rank" in code
    assert "missing ring channel" not in code and "HCOMM_KIT_LINKS_DOWN" in code


def _rank_order_ring() -> Path:
    """The scaffolded ring-allreduce with ring_order = "rank", built once per test session."""
    from filelock import FileLock
    from test_orchestrator import _ops_root

    from hcomm_kit.build.opbuild import build_op
    from hcomm_kit.scaffold.render import new_op, update_op

    root = _ops_root()
    root.mkdir(parents=True, exist_ok=True)
    d = root / "t_ring_rank_order"
    with FileLock(str(root / "t_ring_rank_order.lock")):
        if not (d / ".built").exists():
            new_op(d.name, pattern="ring-allreduce", directory=root, force=True)
            toml = d / "op.toml"
            toml.write_text(toml.read_text().replace('ring_order = "avoid-down"', 'ring_order = "rank"'))
            update_op(d)
            build_op(d)
            (d / ".built").write_text("ok")
    return d


@pytest.mark.mpi(np=[4, pytest.param(5, marks=pytest.mark.slow), pytest.param(8, marks=pytest.mark.slow)],
                 links_down="0-1", timeout=300)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_the_scaffolded_ring_routes_around_a_downed_link(comm) -> None:
    """0-1 down: the scaffolded ring (avoid-down) computes the allreduce on a ring whose neighbours are
    all linked, read from AlgResourceCtx.rings[0]; the same kernel in rank order is refused on every
    rank, naming the link (it used to fail in the kernel with a raw channel handle)."""
    from test_orchestrator import expected, make_input, scaffold

    op = comm.load_op(scaffold("ring-allreduce"))
    for count, dtype in ((1, "fp32"), (1031, "int32"), (65537, "fp16")):
        out = op(make_input(comm.rank, count, dtype), dtype=dtype)
        np.testing.assert_allclose(out.astype(np.float64), expected("ring-allreduce", comm.rank, comm.size, count,
                                                                    dtype).astype(np.float64), rtol=3e-3 * comm.size)
    ctx = op.resources().ctx
    ring = tuple(ctx.rings[0].order[:comm.size])
    assert sorted(ring) == list(range(comm.size)) and (0, 1) not in _edges(ring), ring
    info = ctx.rings[0]
    assert ring[info.pos] == comm.rank and ctx.ringNum == 1
    assert (ctx.channels[0].remoteRank, ctx.channels[1].remoteRank) == (info.prev, info.next)
    assert (info.prev, info.next) == (ring[info.pos - 1], ring[(info.pos + 1) % comm.size])
    assert ctx.channels[0].handle and ctx.channels[1].handle
    rank_order = comm.load_op(_rank_order_ring())
    with pytest.raises(ConfigError, match=r"its ring in rank order joins ranks 0 and 1, whose link 0-1 is down "
                                          r"\(HCOMM_KIT_LINKS_DOWN=0-1\)"):
        rank_order(make_input(comm.rank, 61, "fp32"))


# ---- op.toml [test]: the job of the generated tests, run, bench and model explain ------------------
TEST_TABLE = '[op]\nname = "x"\n[test]\ntopology = "A2:1x8"\nlinks_down = "1-0"\n'


def test_op_toml_test_table_is_the_default_job_unless_told_otherwise() -> None:
    from hcomm_kit.build.testjob import op_job

    spec = parse_opspec(TEST_TABLE)
    assert (spec.test_topology, spec.test_links_down) == ("A2:1x8", "1-0")
    job = op_job(spec, environ={})
    assert job.env == {"HCOMM_KIT_TOPOLOGY": "A2:1x8", "HCOMM_KIT_SOC": "Ascend910B", "HCOMM_KIT_DEVICE_COUNT": "8",
                       "HCOMM_KIT_LINKS_DOWN": "0-1"}
    assert (job.np, job.topology, job.links_down, job.notes) == (8, "A2:1x8", "0-1", ())
    assert op_job(spec, np=8, environ={}).env == job.env
    # --topology (exported) or the environment decide per variable; empty counts as decided
    told = op_job(spec, environ={"HCOMM_KIT_TOPOLOGY": "A2:2x4"})
    assert told.env == {"HCOMM_KIT_LINKS_DOWN": "0-1"} and told.np == 8 and told.topology == "A2:2x4"
    up = op_job(spec, environ={"HCOMM_KIT_LINKS_DOWN": ""})
    assert "HCOMM_KIT_LINKS_DOWN" not in up.env and up.links_down == "" and up.np == 8
    assert op_job(spec, environ={"HCOMM_KIT_LINKS_DOWN": "none"}).links_down == ""
    # another rank count: none of [test] (one cluster), said once
    other = op_job(spec, np=4, environ={})
    assert other.env == {} and other.np is None
    assert other.notes == ("op.toml [test] topology = 'A2:1x8' is 8 ranks: on 4 ranks neither it nor its links_down "
                           "is used",)
    # links_down alone applies at any rank count holding its ranks
    alone = parse_opspec('[op]\nname = "x"\n[test]\nlinks_down = "2-5"\n')
    assert op_job(alone, np=6, environ={}).env == {"HCOMM_KIT_LINKS_DOWN": "2-5"}
    assert op_job(alone, np=4, environ={}).env == {} and "2-5 is outside the 4 ranks" in op_job(
        alone, np=4, environ={}).notes[0]
    assert op_job(parse_opspec('[op]\nname = "x"\n'), environ={}) == op_job(parse_opspec('[op]\nname = "x"\n'), np=3,
                                                                             environ={})


@pytest.mark.parametrize("table,key,words", [
    ('topology = "B2:1x8"', "test.topology", "is not PRODUCT:SERVERSxNPUS"),
    ('topology = "A2:1x4"\nlinks_down = "0-5"', "test.links_down", "0-5 joins a rank outside the 4 ranks"),
    ('links_down = "0-0"', "test.links_down", "is not RANK-RANK of two different ranks"),
    ('topolgy = "A2:1x8"', "test.topolgy", "did you mean 'topology'"),
    ("topology = 8", "test.topology", "must be a string"),
])
def test_op_toml_test_table_errors(table: str, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_opspec(f'[op]\nname = "x"\n[test]\n{table}\n', path="op.toml")
    assert info.value.key == key and words in str(info.value), str(info.value)


def test_generated_tests_and_commands_take_the_job_from_op_toml(tmp_path: Path, monkeypatch) -> None:
    """The generated tests' markers (mpi_job) and run / bench / model explain (--np unset) run on
    op.toml's [test] topology at its rank count; --np of another count leaves it out."""
    import argparse

    from hcomm_kit.cli import _apply_op_job
    from hcomm_kit.scaffold.render import new_op
    from hcomm_kit.testing import mpi_job

    for var in ("HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_LINKS_DOWN", "HCOMM_KIT_SOC", "HCOMM_KIT_DEVICE_COUNT",
                "HCCL_BUFFSIZE"):
        monkeypatch.setenv(var, "")  # recorded: restored as it was when the test ends (_apply_op_job exports)
        monkeypatch.delenv(var)
    d = new_op("rr", pattern="ring-allreduce", directory=tmp_path).opdir
    assert mpi_job(d) == {"np": [2, 3, 4], "env": {}}
    assert mpi_job(d, small_buffer=True)["env"] == {"HCCL_BUFFSIZE": "1"}
    (d / "op.toml").write_text((d / "op.toml").read_text() + '\n[test]\ntopology = "A2:1x8"\nlinks_down = "0-1"\n')
    job = mpi_job(d, np=[2, 3])
    assert job["np"] == [8] and job["env"]["HCOMM_KIT_TOPOLOGY"] == "A2:1x8"
    assert job["env"]["HCOMM_KIT_LINKS_DOWN"] == "0-1"
    args = argparse.Namespace(np=None, _command="run")
    _apply_op_job(args, [str(d)])
    assert args.np == 8 and os.environ["HCOMM_KIT_TOPOLOGY"] == "A2:1x8" and os.environ["HCOMM_KIT_LINKS_DOWN"] == "0-1"
    # exported now: the markers see the job decided (what `hcomm-kit test` does) and agree
    assert mpi_job(d, np=[2, 3])["np"] == [8] and "HCOMM_KIT_TOPOLOGY" not in mpi_job(d)["env"]
    for var in ("HCOMM_KIT_TOPOLOGY", "HCOMM_KIT_LINKS_DOWN", "HCOMM_KIT_SOC", "HCOMM_KIT_DEVICE_COUNT"):
        monkeypatch.delenv(var, raising=False)
    args = argparse.Namespace(np=4, _command="bench")
    _apply_op_job(args, [str(d)])
    assert args.np == 4 and "HCOMM_KIT_TOPOLOGY" not in os.environ and "HCOMM_KIT_LINKS_DOWN" not in os.environ


def test_beyond_buffer_counts() -> None:
    """The generated tests' counts past the HCCL buffer: `times` buffers of the largest operand per
    rank and a tail of 7 (in elements of the dtype; per block for the block kinds)."""
    from hcomm_kit.testing import beyond_buffer_count

    mb = 1 << 20
    allreduce = parse_opspec('[op]\nname = "x"\nkind = "allreduce"\nreduce_ops = ["sum"]\n')
    alltoall = parse_opspec('[op]\nname = "x"\nkind = "alltoall"\n')
    gather = parse_opspec('[op]\nname = "x"\nkind = "gather"\n')
    old = os.environ.get("HCCL_BUFFSIZE")
    os.environ["HCCL_BUFFSIZE"] = "1"
    try:
        assert beyond_buffer_count(allreduce, 4, "fp32", 3) == 3 * mb // 4 + 7
        assert beyond_buffer_count(allreduce, 4, "int8", 1) == mb + 7
        assert beyond_buffer_count(alltoall, 4, "fp16", 3) == 3 * mb // 2 // 4 + 7
        assert beyond_buffer_count(gather, 3, "fp32", 1) == mb // 4 // 3 + 7
        for spec, n in ((allreduce, 3), (alltoall, 3), (gather, 4)):
            count = beyond_buffer_count(spec, n, "fp32", 3)
            largest = max(spec.input_count(count, n), spec.output_count(count, n)) * 4
            assert 3 * mb < largest <= 3 * mb + 7 * 4 * n
    finally:
        if old is None:
            os.environ.pop("HCCL_BUFFSIZE")
        else:
            os.environ["HCCL_BUFFSIZE"] = old


_FIRST_SLICE_ONLY = ("for (uint64_t done = 0; done < param.count; done += maxSliceCount) {",
                     "for (uint64_t done = 0; done < Min(param.count, maxSliceCount); done += maxSliceCount) {")


@pytest.mark.slow  # two 2-rank test runs of a scaffolded operator (~15 s)
def test_generated_tests_reach_past_the_hccl_buffer(tmp_path: Path) -> None:
    """A kernel that computes only its first slice passes the generated tests within one HCCL buffer
    (all the generated tests had) and fails the beyond-buffer ones (HCCL_BUFFSIZE=1, 1 and 3 buffers)."""
    from hcomm_kit.scaffold.render import new_op

    d = new_op("first_slice", pattern="ring-allreduce", directory=tmp_path).opdir
    src = d / "op_kernel_aicpu" / "exec_op.cc"
    assert _FIRST_SLICE_ONLY[0] in src.read_text()
    src.write_text(src.read_text().replace(*_FIRST_SLICE_ONLY))
    env = {k: v for k, v in os.environ.items() if k != "HCCL_BUFFSIZE"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")

    def test(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "hcomm_kit", "test", str(d), "--np", "2", "--", *args],
                              capture_output=True, text=True, env=env, timeout=600)

    within = test("-k", "int32 and sum", "-m", "not slow")
    assert within.returncode == 0 and "8 passed" in within.stdout, within.stdout[-3000:] + within.stderr[-3000:]
    beyond = test("-k", "int32 and beyond_buffer")
    assert beyond.returncode != 0 and "FAILED tests/test_first_slice.py::test_first_slice_beyond_buffer[np2-buffers1-" \
        "int32]" in beyond.stdout, beyond.stdout[-3000:] + beyond.stderr[-3000:]
