"""op.toml ``kind`` / ``reference`` (issue 22): the kinds table, the new patterns, and ``run``, ``test``,
``bench`` and ``comm.load_op`` following the kind, against numpy; each new pattern also with a
planted bug (wrong root, stale non-root output, wrong slice) that every command must fail.

The single-process tests read the tables; the command tests start their own mpirun jobs (one
per command and operator set, 3 ranks: with 2, a pairwise step's source and destination coincide).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hcomm_kit.base.errors import ConfigError
from hcomm_kit.build.kinds import KINDS, infer_kind
from hcomm_kit.build.opspec import _SCHEMA, load_opspec, optoml_reference, parse_opspec
from hcomm_kit.ops.expect import alltoallv_counts, expected_outputs, load_reference
from hcomm_kit.ops import reference
from hcomm_kit.scaffold.render import new_op, update_op

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = {"direct-reduce": "reduce", "direct-broadcast": "broadcast", "pairwise-alltoall": "alltoall",
            "halo-exchange": "custom"}
#: pattern -> (text in exec_op.cc, its buggy replacement, what the bug is)
BUGS = {
    "direct-reduce": ("const uint32_t root = param.root;", "const uint32_t root = 0;", "wrong root"),
    "direct-broadcast": ("OP_CHECK(param.tag, HcommReadOnThread(thread, fromRoot.handle, output + offset, "
                         "fromRoot.remoteBuffer.addr, len));", "", "stale output on non-roots"),
    "pairwise-alltoall": ("output + src * blockBytes + offset", "output + dst * blockBytes + offset", "wrong slice"),
    "halo-exchange": ("leftGhost + offset, peerBuf + sliceBytes, len", "leftGhost + offset, peerBuf, len",
                      "wrong slice"),
}


def _toml(body: str) -> str:
    return '[op]\nname = "x"\n' + body


# ---- the table and op.toml ---------------------------------------------------------------------
def test_every_kind_of_the_issue_is_in_the_one_table() -> None:
    assert set(KINDS) == {"allreduce", "reduce", "broadcast", "allgather", "reduce_scatter", "alltoall",
                          "alltoallv", "scatter", "gather", "sendrecv", "custom"}
    n = 4
    assert KINDS["allreduce"].bus_factor()(n) == 2 * (n - 1) / n
    assert KINDS["reduce"].bus_factor()(n) == 1.0 and KINDS["broadcast"].bus_factor()(n) == 1.0
    assert KINDS["alltoall"].bus_factor()(n) == (n - 1) / n
    assert KINDS["custom"].bus_factor() is None
    assert [k for k, v in KINDS.items() if v.checked == "root"] == ["reduce", "gather"]
    assert [k for k, v in KINDS.items() if v.rooted] == ["reduce", "broadcast", "scatter", "gather"]


def test_op_toml_kind_reference_and_their_checks() -> None:
    spec = parse_opspec(_toml('kind = "reduce"\nreduce_ops = ["max", "sum"]\n'))
    assert (spec.kind, spec.kind_explicit, spec.rooted, spec.output) == ("reduce", True, True, "count")
    assert spec.default_reduce_op() == "max" and spec.default_reduce_op("sum") == "sum"
    assert parse_opspec(_toml('kind = "allgather"\n')).output == "count*ranks"  # the kind sets [io].output
    with pytest.raises(ConfigError, match="contradicts kind 'allgather'"):
        parse_opspec(_toml('kind = "allgather"\n[io]\noutput = "count"\n'))
    with pytest.raises(ConfigError, match="is a reduction"):
        parse_opspec(_toml('kind = "reduce"\n'))
    with pytest.raises(ConfigError, match="does not reduce"):
        parse_opspec(_toml('kind = "broadcast"\nreduce_ops = ["sum"]\n'))
    with pytest.raises(ConfigError, match="did you mean 'alltoall'"):
        parse_opspec(_toml('kind = "alltoal"\n'))
    with pytest.raises(ConfigError, match="module:function"):
        parse_opspec(_toml('kind = "custom"\nreference = "nocolon"\n'))
    with pytest.raises(ConfigError, match="send_counts, recv_counts"):
        parse_opspec(_toml('kind = "alltoallv"\n'))
    v = parse_opspec(_toml('kind = "alltoallv"\n[[param]]\nname = "send_counts"\ntype = "uint64_t"\narray = 64\n'
                           '[[param]]\nname = "recv_counts"\ntype = "uint64_t"\narray = 64\n'))
    assert v.output_count(10, 3, [1, 2, 4]) == 7
    with pytest.raises(ConfigError, match="divisible"):
        parse_opspec(_toml('kind = "alltoall"\n')).output_count(10, 3)


@pytest.mark.parametrize("pattern,output,reduction,kind", [
    ("ring-allreduce", "count", True, "allreduce"), ("mesh-allgather", "count*ranks", False, "allgather"),
    ("p2p", "count", False, "sendrecv"), ("empty", "count", False, "custom"),
    ("ring-allreduce", "count/ranks", True, "reduce_scatter"), ("mesh-allgather", "count", False, "custom"),
])
def test_op_toml_without_kind_keeps_working(pattern: str, output: str, reduction: bool, kind: str) -> None:
    assert infer_kind(pattern, output, reduction)[0] == kind
    ops = '["sum"]' if reduction else "[]"
    spec = parse_opspec(_toml(f'pattern = "{pattern}"\nreduce_ops = {ops}\n[io]\noutput = "{output}"\n'))
    assert spec.kind == kind and not spec.kind_explicit
    if pattern == "empty":
        assert spec.reference == "hcomm_kit.ops.reference:copy"


def test_new_update_adds_the_kind_to_an_old_op_toml(tmp_path: Path) -> None:
    d = new_op("old_ring", pattern="ring-allreduce", directory=tmp_path).opdir
    text = (d / "op.toml").read_text()
    (d / "op.toml").write_text(re.sub(r"(?m)^kind = .*\n", "", text))
    assert not load_opspec(d).kind_explicit
    update_op(d)
    spec = load_opspec(d)
    assert spec.kind_explicit and spec.kind == "allreduce"
    assert re.search(r'(?m)^pattern = .*\nkind = "allreduce"', (d / "op.toml").read_text())


def test_optoml_reference_is_generated_from_the_definitions_and_the_readme_holds_it() -> None:
    text = optoml_reference()
    for table, keys in _SCHEMA.items():
        for key, (_, meaning) in keys.items():
            if table and meaning != "table":
                assert f"{key}` |" in text, f"{table}.{key} missing from the op.toml reference"
    for kind in KINDS:
        assert f"| `{kind}` |" in text
    readme = (ROOT / "README.md").read_text()
    block = readme.split("<!-- optoml:begin -->\n", 1)[1].split("\n<!-- optoml:end -->", 1)[0]
    assert block == text, "README's op.toml table is stale: paste `hcomm-kit docs optoml` between the markers"
    for kind in KINDS:  # the custom-operator section shows every kind
        assert f'kind = "{kind}"' in readme.split("## Custom operators", 1)[1].split("<!-- optoml:begin", 1)[0]


# ---- references ----------------------------------------------------------------------------
def test_expected_outputs_check_the_root_only_for_a_reduce() -> None:
    spec = parse_opspec(_toml('kind = "reduce"\nreduce_ops = ["sum"]\n'))
    ins = [np.arange(4, dtype=np.int32) + r for r in range(3)]
    exp = expected_outputs(spec, ins, dtype="int32", reduce_op="sum", root=2)
    assert exp[0] is None and exp[1] is None
    np.testing.assert_array_equal(exp[2], sum(ins))
    bc = expected_outputs(parse_opspec(_toml('kind = "broadcast"\n')), ins, dtype="int32", root=1)
    assert all(np.array_equal(e, ins[1]) for e in bc)


def test_a_custom_reference_from_the_operator_directory_gets_the_call_arguments(tmp_path: Path) -> None:
    (tmp_path / "op.toml").write_text(_toml('kind = "custom"\nreference = "myref:scaled"\n'
                                            '[[param]]\nname = "alpha"\ntype = "int32_t"\n'))
    (tmp_path / "myref.py").write_text("def scaled(inputs, alpha=1, **args):\n"
                                       "    return [x * alpha + args['rank_size'] for x in inputs]\n")
    spec = load_opspec(tmp_path)
    exp = expected_outputs(spec, [np.ones(2, np.int64)] * 2, dtype="int64", params={"alpha": 3})
    np.testing.assert_array_equal(exp[1], [5, 5])
    assert expected_outputs(parse_opspec(_toml('kind = "custom"\n')), [np.ones(1)], dtype="fp64") is None
    (tmp_path / "op.toml").write_text(_toml('kind = "custom"\nreference = "myref:nothere"\n'))
    with pytest.raises(ConfigError, match="no function 'nothere'"):
        load_reference(load_opspec(tmp_path))


def test_alltoallv_counts_and_reference_agree() -> None:
    m = alltoallv_counts(3, 12)
    assert (m.sum(axis=1) <= 12).all() and (m >= 0).all()
    ins = [np.arange(12) + 100 * r for r in range(3)]
    outs = reference.alltoallv(ins, m)
    assert [o.size for o in outs] == list(m.sum(axis=0))


def test_run_refuses_a_root_for_a_kind_without_one() -> None:
    from hcomm_kit.jobs.runner import job_arguments

    spec = parse_opspec(_toml('kind = "alltoall"\n'))
    with pytest.raises(ConfigError, match="takes no root"):
        job_arguments(spec, 0, 3, {"root": 1})
    a = job_arguments(spec, 0, 3, {"count": 10})
    assert a["count"] == 9 and a["root"] is None
    red = job_arguments(parse_opspec(_toml('kind = "reduce"\nreduce_ops = ["min", "sum"]\n')), 0, 3, {})
    assert red["root"] == 0 and red["reduce_op"] == "min"


def test_bench_sizes_and_compares_an_operator_by_its_kind(tmp_path: Path) -> None:
    from hcomm_kit.bench.cases import COLLECTIVES, op_target

    for pattern, kind in PATTERNS.items():
        d = new_op(pattern.replace("-", "_"), pattern=pattern, directory=tmp_path).opdir
        t = op_target(str(d))
        assert t.kind == kind and t.builtin == KINDS[kind].builtin
        f = t.coll.bus_factor
        assert (f is None) if kind == "custom" else f(4) == KINDS[kind].bus_factor()(4)
        assert t.coll.rooted == KINDS[kind].rooted
    assert COLLECTIVES["allreduce"].bus_factor(4) == 1.5  # the built-ins' factors come from the same table


# ---- the commands on the new patterns, correct and with planted bugs ---------------------------
def _hk(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "hcomm_kit", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.fixture(scope="module")
def ops(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """``{"good"|"bug": {pattern: opdir}}``: every new pattern as scaffolded, and with its planted bug."""
    base = tmp_path_factory.mktemp("kinds")
    out: dict[str, dict[str, Path]] = {"good": {}, "bug": {}}
    for pattern, (text, bug, _) in BUGS.items():
        name = pattern.replace("-", "_")
        out["good"][pattern] = new_op(f"k_{name}", pattern=pattern, directory=base).opdir
        d = new_op(f"b_{name}", pattern=pattern, directory=base).opdir
        src = d / "op_kernel_aicpu" / "exec_op.cc"
        code = src.read_text()
        assert text in code, f"{pattern}: the planted bug's line is gone from the template"
        src.write_text(code.replace(text, bug))
        out["bug"][pattern] = d
    return out


def test_run_checks_every_kind_and_fails_each_planted_bug(ops, tmp_path: Path) -> None:
    rows = {}
    for which in ("good", "bug"):
        js = tmp_path / f"{which}.jsonl"
        r = _hk("run", *map(str, ops[which].values()), "--np", "3", "-r", "2", "--iters", "0", "--count", "1031",
                "--json", str(js))
        assert r.returncode == (0 if which == "good" else 1), r.stdout + r.stderr
        rows[which] = [json.loads(line) for line in js.read_text().splitlines()]
    assert [(r["kind"], r["root"], r["ok"]) for r in rows["good"]] == [
        ("reduce", 2, True), ("broadcast", 2, True), ("alltoall", None, True), ("custom", 2, True)]
    assert rows["good"][2]["count"] == 1029  # alltoall: a multiple of the ranks
    assert [r["ok"] for r in rows["bug"]] == [False] * 4, rows["bug"]


def _quick_first(patterns: list[str]) -> list:
    """The first pattern in the quick run, the others in the full run (each costs seconds of mpirun jobs)."""
    return [patterns[0], *(pytest.param(p, marks=pytest.mark.slow) for p in patterns[1:])]


@pytest.mark.parametrize("pattern", _quick_first(list(BUGS)))
def test_test_and_bench_fail_the_planted_bug(ops, pattern: str) -> None:
    bug = str(ops["bug"][pattern])
    r = _hk("test", bug, "--np", "3", "--", "-k", "int32 and 1031")
    assert r.returncode != 0 and "failed" in r.stdout + r.stderr, f"{BUGS[pattern][2]} passed `hcomm-kit test`"
    r = _hk("bench", bug, "--np", "3", "-b", "64K", "-e", "64K", "-r", "1", "-n", "1", "-w", "0")
    assert r.returncode == 1 and "failed" in r.stdout, r.stdout + r.stderr


def test_bench_passes_a_correct_reduce_and_compares_it_with_the_builtin_and_mpi(ops, tmp_path: Path) -> None:
    js = tmp_path / "b.jsonl"
    r = _hk("bench", str(ops["good"]["direct-reduce"]), "--np", "3", "-b", "4K", "-e", "64K", "-f", "16", "-r", "2",
            "-n", "2", "-w", "1", "--compare", "builtin,mpi", "--json", str(js))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in js.read_text().splitlines()]
    assert {(x["kind"], x["root"], x["op"], x["check"], x["builtin"]) for x in rows} == {
        ("reduce", 2, "sum", "success", "reduce")}
    assert all(x["builtin_time_us"] and x["mpi_time_us"] for x in rows)
    assert "checked against the numpy reference hcomm_kit.ops.reference:reduce_root on the root" in r.stdout


@pytest.mark.parametrize("pattern", _quick_first(list(BUGS)))
def test_generated_tests_pass_with_every_root(ops, pattern: str) -> None:
    r = _hk("test", str(ops["good"][pattern]), "--np", "3", "--", "-k", "int32 or fp16")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("pattern", list(BUGS))
def test_generated_tests_pass_at_8_ranks(ops, pattern: str) -> None:
    r = _hk("test", str(ops["good"][pattern]), "--np", "8", "--", "-k", "int32 or bf16", timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.mpi(np=[3])
def test_load_op_call_follows_the_kind(comm) -> None:
    import tempfile

    d = Path(tempfile.gettempdir()) / f"hcomm_kit_test_kinds_{os.getuid()}"
    if comm.rank == 0:  # one directory for every rank of the job (rank 0 writes it, the others wait)
        new_op("k_alltoall", pattern="pairwise-alltoall", directory=d, force=True)
        new_op("k_reduce", pattern="direct-reduce", directory=d, force=True)
    comm.barrier()
    a2a = comm.load_op(d / "k_alltoall")
    with pytest.raises(ConfigError, match="takes no root"):
        a2a(np.zeros(6, np.float32), root=1)
    with pytest.raises(ConfigError, match="divisible"):
        a2a(np.zeros(4, np.float32))
    y = a2a(np.arange(6, dtype=np.float32) + 10 * comm.rank)
    np.testing.assert_array_equal(y, [10 * s + 2 * comm.rank + i for s in range(3) for i in range(2)])
    red = comm.load_op(d / "k_reduce")
    y = red(np.full(5, comm.rank + 1, np.int32), root=2, reduce_op="max")
    if comm.rank == 2:
        np.testing.assert_array_equal(y, np.full(5, 3, np.int32))


def test_op_toml_files_older_than_kinds_keep_parsing() -> None:
    """Every built-in's op.toml (written from the p2p / mesh patterns, then changed) parses: a pattern's
    kind is implied only while [io].output and reduce_ops still say what the pattern computes (the
    emulator's build of the built-ins failed on gather's output = "count*ranks" under kind sendrecv)."""
    from hcomm_kit.base.resources import aicpu_kernels_dir
    from hcomm_kit.build.kinds import KINDS
    from hcomm_kit.build.opspec import load_opspec

    dirs = sorted(p.parent for p in aicpu_kernels_dir().glob("*/op.toml"))
    assert len(dirs) >= 10
    for d in dirs:
        spec = load_opspec(d)
        rule = KINDS[spec.kind].output
        assert rule not in ("count", "count*ranks", "count/ranks") or rule == spec.output, (d.name, spec.kind)
