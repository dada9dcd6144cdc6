"""op.toml ``kind`` / ``reference`` / ``algorithms`` (issue 22): the kinds table (HCCL's count), the
patterns of every kind, the built-ins described by their kind, and ``run``, ``test``, ``bench`` and
``comm.load_op`` following the kind, against numpy; each pattern also with a planted bug (wrong
root, stale non-root output, wrong slice) that every command must fail.

The single-process tests read the tables; the command tests start their own mpirun jobs (one
per command and operator set, 3 ranks: with 2, a pairwise step's source and destination coincide).
The product x handshake x rank-count matrix of the generated tests is in the full run (slow).
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
from hcomm_kit.ops.algorithms import canonical
from hcomm_kit.scaffold.render import new_op, update_op

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = {"direct-reduce": "reduce", "direct-broadcast": "broadcast", "pairwise-alltoall": "alltoall",
            "halo-exchange": "custom", "pairwise-alltoallv": "alltoallv", "direct-scatter": "scatter",
            "direct-gather": "gather", "pairwise-reduce-scatter": "reduce_scatter"}
NEW = ("pairwise-alltoallv", "direct-scatter", "direct-gather", "pairwise-reduce-scatter")  # issue 22, second part
#: pattern -> (text in exec_op.cc, its buggy replacement, what the bug is)
BUGS = {
    "direct-reduce": ("const uint32_t root = param.root;", "const uint32_t root = 0;", "wrong root"),
    "direct-broadcast": ("OP_CHECK(param.tag, HcommReadOnThread(thread, fromRoot.handle, output + offset, "
                         "fromRoot.remoteBuffer.addr, len));", "", "stale output on non-roots"),
    "pairwise-alltoall": ("output + src * blockBytes + offset", "output + dst * blockBytes + offset", "wrong slice"),
    "halo-exchange": ("leftGhost + offset, peerBuf + sliceBytes, len", "leftGhost + offset, peerBuf, len",
                      "wrong slice"),
    "pairwise-alltoallv": ("uint8_t *recvBlock = output + recvDispl[src] * unitSize;",
                           "uint8_t *recvBlock = output + recvDispl[dst] * unitSize;", "wrong slice"),
    "direct-scatter": ("OP_CHECK(param.tag, HcommReadOnThread(thread, fromRoot.handle, output + offset, staged, len));",
                       "", "stale output on non-roots"),
    "direct-gather": ("const uint32_t root = param.root;", "const uint32_t root = 0;", "wrong root"),
    "pairwise-reduce-scatter": ("input + dst * blockBytes + offset", "input + src * blockBytes + offset",
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
    # count is HCCL's: one block per rank where the input holds one (HcclReduceScatter's recvCount, ...)
    assert {k: (v.input, v.output) for k, v in KINDS.items() if v.input != "count" or v.output != "count"} == {
        "allgather": ("count", "count*ranks"), "reduce_scatter": ("count*ranks", "count"),
        "alltoall": ("count*ranks", "count*ranks"), "alltoallv": ("send_counts", "recv_counts"),
        "scatter": ("count*ranks", "count"), "gather": ("count", "count*ranks"), "custom": ("count", "")}
    assert [k for k, v in KINDS.items() if v.blocks] == ["reduce_scatter", "alltoall", "scatter"]


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
    assert v.output_count(10, 3, [1, 2, 4]) == 7 and v.input_count(10, 3) == 10
    assert v.count_params() == {"send_counts": "send_counts", "recv_counts": "recv_counts"}
    a2a = parse_opspec(_toml('kind = "alltoall"\n'))
    assert (a2a.call_count(12, 3), a2a.input_count(4, 3), a2a.output_count(4, 3)) == (4, 12, 12)
    with pytest.raises(ConfigError, match="do not split into 3 equal blocks"):
        a2a.call_count(10, 3)
    rs = parse_opspec(_toml('kind = "reduce_scatter"\nreduce_ops = ["sum"]\n'))
    assert (rs.call_count(12, 3), rs.output_count(4, 3)) == (4, 4)
    with pytest.raises(ConfigError, match="HCCL's count"):  # an alltoall written when count was the input
        parse_opspec(_toml('kind = "alltoall"\n[io]\noutput = "count"\n'))
    # the built-in alltoallv spells its counts as HCCL's C API does, with displacements
    hv = parse_opspec(_toml('kind = "alltoallv"\n' + "".join(
        f'[[param]]\nname = "{n}"\ntype = "uint64_t"\narray = 64\n' for n in ("sendCounts", "sdispls", "recvCounts",
                                                                           "rdispls"))))
    assert hv.count_params() == {"send_counts": "sendCounts", "recv_counts": "recvCounts", "send_displs": "sdispls",
                                 "recv_displs": "rdispls"}
    with pytest.raises(ConfigError, match="clashes with a keyword of the operator's Python call"):
        parse_opspec(_toml('[[param]]\nname = "timeout"\ntype = "uint32_t"\n'))


def test_op_toml_algorithms() -> None:
    algo = '[[param]]\nname = "algo"\ntype = "uint32_t"\n'
    spec = parse_opspec(_toml('algorithms = ["direct", "ring"]\n' + algo))
    assert spec.algorithms == ("direct", "ring") and spec.algorithm_value("ring") == 2
    with pytest.raises(ConfigError, match="did you mean 'ring'"):
        spec.algorithm_value("rign")
    with pytest.raises(ConfigError, match="lists no algorithms"):
        parse_opspec(_toml("")).algorithm_value("ring")
    with pytest.raises(ConfigError, match='add \\[\\[param\\]\\] name = "algo"'):
        parse_opspec(_toml('algorithms = ["direct"]\n'))
    with pytest.raises(ConfigError, match="scalar integer"):
        parse_opspec(_toml('algorithms = ["direct"]\n[[param]]\nname = "algo"\ntype = "float"\n'))
    with pytest.raises(ConfigError, match="not an identifier"):
        parse_opspec(_toml('algorithms = ["two words"]\n' + algo))
    with pytest.raises(ConfigError, match="RING named twice"):
        parse_opspec(_toml('algorithms = ["ring", "Ring"]\n' + algo))


def test_algorithms_are_named_in_the_generated_header(tmp_path: Path) -> None:
    d = new_op("algos", pattern="direct-reduce", directory=tmp_path).opdir
    toml = d / "op.toml"
    toml.write_text(toml.read_text().replace('kind = "reduce"', 'kind = "reduce"\nalgorithms = ["direct", "tree"]')
                    + '\n[[param]]\nname = "algo"\ntype = "uint32_t"\n')
    update_op(d)
    header = (d / "inc" / "algos_param.h").read_text()
    assert "#define ALGOS_ALGO_NONE 0u" in header and "#define ALGOS_ALGO_DIRECT 1u" in header
    assert "#define ALGOS_ALGO_TREE 2u" in header


@pytest.mark.parametrize("pattern,output,reduction,kind", [
    ("ring-allreduce", "count", True, "allreduce"), ("mesh-allgather", "count*ranks", False, "allgather"),
    ("p2p", "count", False, "sendrecv"), ("empty", "count", False, "custom"),
    # a reduce-scatter from the ring scaffold took the whole input's count: custom with the reference
    ("ring-allreduce", "count/ranks", True, "custom"), ("mesh-allgather", "count", False, "custom"),
])
def test_op_toml_without_kind_keeps_working(pattern: str, output: str, reduction: bool, kind: str) -> None:
    assert infer_kind(pattern, output, reduction)[0] == kind
    ops = '["sum"]' if reduction else "[]"
    spec = parse_opspec(_toml(f'pattern = "{pattern}"\nreduce_ops = {ops}\n[io]\noutput = "{output}"\n'))
    assert spec.kind == kind and not spec.kind_explicit
    if pattern == "empty":
        assert spec.reference == "hcomm_kit.ops.reference:copy"
    if output == "count/ranks":
        assert spec.reference == "hcomm_kit.ops.reference:reduce_scatter" and spec.output_count(12, 3) == 4


def test_new_update_adds_the_kind_to_an_old_op_toml(tmp_path: Path) -> None:
    d = new_op("old_ring", pattern="ring-allreduce", directory=tmp_path).opdir
    text = (d / "op.toml").read_text()
    (d / "op.toml").write_text(re.sub(r"(?m)^kind = .*\n", "", text))
    assert not load_opspec(d).kind_explicit
    update_op(d)
    spec = load_opspec(d)
    assert spec.kind_explicit and spec.kind == "allreduce"
    assert re.search(r'(?m)^pattern = .*\nkind = "allreduce"', (d / "op.toml").read_text())


def test_optoml_reference_is_generated_from_the_definitions_and_the_operators_page_holds_it() -> None:
    text = optoml_reference()
    for table, keys in _SCHEMA.items():
        for key, (_, meaning) in keys.items():
            if table and meaning != "table":
                assert f"{key}` |" in text, f"{table}.{key} missing from the op.toml reference"
    for kind in KINDS:
        assert f"| `{kind}` |" in text
    page = (ROOT / "docs" / "operators.md").read_text()
    block = page.split("<!-- optoml:begin -->\n", 1)[1].split("\n<!-- optoml:end -->", 1)[0]
    assert block == text, ("docs/operators.md's op.toml table is stale: paste `hcomm-kit docs optoml` between "
                           "the markers")
    for kind in KINDS:  # the page's section on kinds shows every kind
        assert f'kind = "{kind}"' in page.split("## Kinds", 1)[1].split("<!-- optoml:begin", 1)[0]


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
    assert (a["count"], a["elements"], a["root"]) == (10, 30, None)  # HCCL's count: one block per rank
    red = job_arguments(parse_opspec(_toml('kind = "reduce"\nreduce_ops = ["min", "sum"]\n')), 0, 3, {})
    assert red["root"] == 0 and red["reduce_op"] == "min"


def test_bench_sizes_and_compares_an_operator_by_its_kind(tmp_path: Path) -> None:
    from hcomm_kit.bench.cases import COLLECTIVES, builtin_collective, op_target

    for pattern, kind in PATTERNS.items():
        d = new_op(pattern.replace("-", "_"), pattern=pattern, directory=tmp_path).opdir
        t = op_target(str(d))
        assert t.kind == kind and t.builtin == KINDS[kind].builtin and (t.builtin is None or t.builtin in COLLECTIVES)
        f = t.coll.bus_factor
        assert (f is None) if kind == "custom" else f(4) == KINDS[kind].bus_factor()(4)
        assert t.coll.rooted == KINDS[kind].rooted
    assert COLLECTIVES["allreduce"].bus_factor(4) == 1.5  # the built-ins' factors come from the same table
    assert builtin_collective("all_to_all_v") == "alltoallv" and builtin_collective(str(tmp_path)) is None


# ---- the built-ins, described by their kind -------------------------------------------------------
def test_builtins_carry_their_kind() -> None:
    """Every built-in's op.toml states its kind; a fixed kind's input/output rules are the built-in's
    (HCCL's count: reduce_scatter, alltoall and scatter take one block per rank), and each directory
    names its bench collective by its kind."""
    from hcomm_kit.base.resources import aicpu_kernels_dir
    from hcomm_kit.bench.cases import builtin_collective

    dirs = {p.parent.name: p.parent for p in aicpu_kernels_dir().glob("*/op.toml")}
    kinds = {name: load_opspec(d) for name, d in dirs.items()}
    assert all(s.kind_explicit for s in kinds.values())
    assert {n: s.kind for n, s in kinds.items()} == {
        "allgather": "allgather", "allreduce": "allreduce", "alltoall": "alltoall", "alltoallv": "alltoallv",
        "barrier": "custom", "batch_send_recv": "custom", "broadcast": "broadcast", "gather": "gather",
        "reduce": "reduce", "reduce_scatter": "reduce_scatter", "scatter": "scatter", "send_recv": "custom"}
    for name, spec in kinds.items():
        rule = KINDS[spec.kind].output
        assert rule not in ("count", "count*ranks", "count/ranks") or rule == spec.output, name
        want = {"custom": {"send_recv": "sendrecv"}.get(name)}.get(spec.kind, spec.kind)
        assert builtin_collective(str(dirs[name])) == want, name
    assert kinds["alltoallv"].count_params()["send_counts"] == "sendCounts"
    # what the kernels read: the block per rank (their own comment says so)
    src = (dirs["reduce_scatter"] / "op_kernel_aicpu" / "exec_op.cc").read_text()
    assert "OpParam.count = elements per rank's result" in src


def test_a_builtin_gets_its_kinds_generated_test() -> None:
    from hcomm_kit.base.resources import aicpu_kernels_dir
    from hcomm_kit.scaffold.render import render_kind_test

    d = aicpu_kernels_dir() / "reduce_scatter"
    text = render_kind_test(load_opspec(d), d)
    assert f"OP_DIR = Path({json.dumps(str(d.resolve()))})" in text and "check_operator(" in text
    compile(text, "test_reduce_scatter.py", "exec")
    with pytest.raises(ConfigError, match="nothing to test it against"):
        render_kind_test(load_opspec(aicpu_kernels_dir() / "barrier"), aicpu_kernels_dir() / "barrier")


# ---- the commands on the patterns, correct and with planted bugs ------------------------------
def _hk(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "hcomm_kit", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _plant(d: Path, text: str, bug: str) -> None:
    src = d / "op_kernel_aicpu" / "exec_op.cc"
    code = src.read_text()
    assert text in code, f"{d.name}: the planted bug's line is gone from the template"
    src.write_text(code.replace(text, bug))


@pytest.fixture(scope="module")
def ops(tmp_path_factory) -> dict[str, dict[str, Path]]:
    """``{"good"|"bug": {pattern: opdir}}``: every kind's pattern as scaffolded, and with its planted bug;
    ``"algo"``: a reduce listing the algorithms direct and broken (wrong root)."""
    base = tmp_path_factory.mktemp("kinds")
    out: dict[str, dict[str, Path]] = {"good": {}, "bug": {}}
    for pattern, (text, bug, _) in BUGS.items():
        name = pattern.replace("-", "_")
        out["good"][pattern] = new_op(f"k_{name}", pattern=pattern, directory=base).opdir
        d = new_op(f"b_{name}", pattern=pattern, directory=base).opdir
        _plant(d, text, bug)
        out["bug"][pattern] = d
    out["algo"] = {"direct-reduce": _with_algorithms(new_op("k_algos", pattern="direct-reduce", directory=base).opdir)}
    return out


def _with_algorithms(d: Path) -> Path:
    """The direct-reduce operator ``d`` listing the algorithms direct and broken (wrong root: 0)."""
    toml = d / "op.toml"
    if not load_opspec(d).algorithms:
        toml.write_text(toml.read_text().replace('kind = "reduce"', 'kind = "reduce"\nalgorithms = ["direct", "broken"]')
                        + '\n[[param]]\nname = "algo"\ntype = "uint32_t"\n')
        update_op(d)
    if "_ALGO_BROKEN" not in (d / "op_kernel_aicpu" / "exec_op.cc").read_text():
        _plant(d, "const uint32_t root = param.root;",
               f"const uint32_t root = param.algo == {d.name.upper()}_ALGO_BROKEN ? 0 : param.root;")
    return d


def _scaffold_algorithms() -> Path:
    """:func:`_with_algorithms` once per test session, built, in the directory the session's ranks share."""
    from filelock import FileLock
    from test_orchestrator import _ops_root

    from hcomm_kit.build.opbuild import build_op

    root = _ops_root()
    root.mkdir(parents=True, exist_ok=True)
    d = root / "t_algo_reduce"
    with FileLock(str(root / "t_algo_reduce.lock")):
        if not (d / ".built").exists():
            new_op("t_algo_reduce", pattern="direct-reduce", directory=root, force=True)
            build_op(_with_algorithms(d))
            (d / ".built").write_text("ok")
    return d


@pytest.mark.slow  # full run only: over the quick run's budget
def test_run_checks_every_kind_and_fails_each_planted_bug(ops, tmp_path: Path) -> None:
    """One job per set at 3 ranks, root 2: every pattern passes by its kind, each planted bug fails its row."""
    rows = {}
    for which in ("good", "bug"):
        js = tmp_path / f"{which}.jsonl"
        r = _hk("run", *map(str, ops[which].values()), "--np", "3", "-r", "2", "--iters", "0", "--count", "1031",
                "--json", str(js))
        assert r.returncode == (0 if which == "good" else 1), r.stdout + r.stderr
        rows[which] = [json.loads(line) for line in js.read_text().splitlines()]
    assert [(r["kind"], r["root"], r["ok"]) for r in rows["good"]] == [
        ("reduce", 2, True), ("broadcast", 2, True), ("alltoall", None, True), ("custom", 2, True),
        ("alltoallv", None, True), ("scatter", 2, True), ("gather", 2, True), ("reduce_scatter", None, True)]
    assert all(r["count"] == 1031 for r in rows["good"])  # HCCL's count: not rounded to a multiple of the ranks
    assert [r["ok"] for r in rows["bug"]] == [False] * len(BUGS), rows["bug"]


@pytest.mark.slow
def test_run_checks_the_builtins_by_their_kind(tmp_path: Path) -> None:
    """A built-in's directory runs the built-in collective its op.toml kind names (with its algorithm
    selection), checked as that kind at HCCL's count (a block per rank for reduce_scatter, alltoall,
    scatter); alltoallv with uneven counts; --algorithm picks the built-in's."""
    from hcomm_kit.base.resources import aicpu_kernels_dir

    js = tmp_path / "b.jsonl"
    names = ["allreduce", "reduce", "reduce_scatter", "alltoall", "alltoallv", "scatter", "gather", "broadcast",
             "allgather", "send_recv"]
    r = _hk("run", *(str(aicpu_kernels_dir() / n) for n in names), "--np", "3", "-r", "2", "--iters", "0",
            "--count", "1031", "-d", "int32", "--json", str(js))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in js.read_text().splitlines()]
    assert [(x["collective"], x["check"]) for x in rows] == [(n.replace("send_recv", "sendrecv"), "success")
                                                             for n in names]
    assert [x["size"] for x in rows if x["collective"] in ("reduce_scatter", "alltoall", "scatter")] == [1031 * 3 * 4] * 3
    # a predicted time for each, also paired send/recv where rank 2 sits out (it used to wait 30 s for rank 2);
    # --iters 0 checks one call and times nothing (the first call's tens of ms used to show as its time)
    assert all(x["model_time_us"] and x["model_time_us"] > 0 for x in rows), rows
    assert all(x["time_us"] is None and x["busbw"] is None for x in rows), rows
    assert "one call, checked, not timed (--iters 0)" in r.stdout, r.stdout
    r = _hk("run", "allgather", "--np", "3", "--iters", "0", "--algorithm", "AicpuAllGatherSoleNHR", "--json", str(js))
    assert r.returncode == 0 and json.loads(js.read_text())["algorithm"] == "AicpuAllGatherSoleNHR", r.stdout + r.stderr


def _quick_first(patterns: list[str]) -> list:
    """The first pattern in the quick run, the others in the full run (each costs seconds of mpirun jobs)."""
    return [patterns[0], *(pytest.param(p, marks=pytest.mark.slow) for p in patterns[1:])]


@pytest.mark.parametrize("pattern", _quick_first(list(BUGS)))
@pytest.mark.slow  # full run only: over the quick run's budget
def test_test_and_bench_fail_the_planted_bug(ops, pattern: str) -> None:
    bug = str(ops["bug"][pattern])
    r = _hk("test", bug, "--np", "3", "--", "-k", "int32 and 1031")
    assert r.returncode != 0 and "failed" in r.stdout + r.stderr, f"{BUGS[pattern][2]} passed `hcomm-kit test`"
    r = _hk("bench", bug, "--np", "3", "-b", "64K", "-e", "64K", "-r", "1", "-n", "1", "-w", "0")
    # wrong data in the table, or output it never wrote named by the checked calls before it
    assert r.returncode == 1 and ("failed" in r.stdout or "unwritten output" in r.stderr), r.stdout + r.stderr


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
    # the built-in ran here: its own modelled time and algorithm, no note
    assert all(x["builtin_model_time_us"] > 0 and not x["builtin_links_up"] and x["builtin_why"] is None
               and x["builtin_algorithm"] not in (None, "auto") for x in rows), rows


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["pairwise-alltoall", *NEW])
def test_bench_passes_the_new_kinds_and_compares_them(ops, pattern: str, tmp_path: Path) -> None:
    """Each kind sized in blocks against its built-in (with the built-in's algorithm mesh) and MPI: sized
    by the kind (data_size = count x ranks x item for the block kinds), checked, compared."""
    js = tmp_path / "b.jsonl"
    r = _hk("bench", str(ops["good"][pattern]), "--np", "3", "-b", "1K", "-e", "1M", "-f", "32", "-r", "1",
            "-n", "2", "-w", "1", "--compare", "builtin:mesh,mpi", "--json", str(js))
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(line) for line in js.read_text().splitlines()]
    kind = PATTERNS[pattern]
    mesh = canonical(KINDS[kind].builtin, "mesh")  # the alias of CANN's mesh algorithm (gather: hcomm-kit's own mesh)
    assert mesh and (mesh.startswith("Aicpu") or KINDS[kind].builtin == "gather")
    assert {(x["kind"], x["check"], x["builtin"], x["builtin_algorithm"]) for x in rows} == {
        (kind, "success", KINDS[kind].builtin, mesh)}
    assert all(x["builtin_time_us"] and x["mpi_time_us"] for x in rows), rows
    assert ("(algorithm mesh)" if mesh == "mesh" else f"(algorithm mesh = {mesh})") in r.stdout


@pytest.mark.parametrize("pattern", _quick_first(list(BUGS)))
@pytest.mark.slow  # full run only: over the quick run's budget
def test_generated_tests_pass_with_every_root(ops, pattern: str) -> None:
    r = _hk("test", str(ops["good"][pattern]), "--np", "3", "--", "-k", "int32 or fp16", "-m", "not slow")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("pattern", [p for p in BUGS if p not in NEW])
def test_generated_tests_pass_at_8_ranks(ops, pattern: str) -> None:
    r = _hk("test", str(ops["good"][pattern]), "--np", "8", "--", "-k", "int32", "-m", "not slow",
            timeout=1800)  # bf16: 2-4 ranks
    assert r.returncode == 0, r.stdout + r.stderr


#: (product, handshake) pairs the products allow (acl-notify: A2/A3 only)
PRODUCT_HANDSHAKES = [(p, h) for p in ("Ascend910B", "Ascend910_93", "Ascend950") for h in ("thread-notify", "acl-notify")
                      if not (p == "Ascend950" and h == "acl-notify")]


@pytest.fixture(scope="module")
def matrix_ops(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """``{(pattern, handshake): opdir}`` of the new patterns, as scaffolded."""
    base = tmp_path_factory.mktemp("kinds_matrix")
    return {(p, h): new_op(f"m_{p.replace('-', '_')}_{h[:3]}", pattern=p, handshake=h, directory=base).opdir
            for p in NEW for h in ("thread-notify", "acl-notify")}


#: (pattern, product, handshake): the new patterns take turns over the (product, handshake) pairs, so
#: every pair runs and every pattern runs on one of them (5 runs of 4 jobs each; the whole cross
#: product cost 11 min of the full run for little more coverage: the patterns share the handshake
#: and product code, and each runs on the default product in the quick run)
MATRIX = [(pat, p, h) for i, pat in enumerate(NEW) for j, (p, h) in enumerate(PRODUCT_HANDSHAKES) if (i + j) % 4 == 0]
#: one rank count per entry: 8 (more ranks than cores) for each pattern's first, 3 for a second
MATRIX = [(pat, p, h, 8 if [m[0] for m in MATRIX].index(pat) == k else 3) for k, (pat, p, h) in enumerate(MATRIX)]


@pytest.mark.slow
@pytest.mark.parametrize("pattern,product,handshake,nranks", MATRIX)
def test_generated_tests_pass_on_every_product_and_handshake(matrix_ops, pattern: str, product: str,
                                                            handshake: str, nranks: int) -> None:
    """The generated tests at one rank count (MATRIX), one count inside and one beyond the 1 MB
    HCCL buffer (HCCL_BUFFSIZE=1: the slicing and tail paths), every root. 2 and 4 ranks run on the
    default product (test_every_new_kind_from_python, the quick run's kind checks); the product and
    handshake code does not depend on the rank count, and every marker's rank count per entry
    (four jobs) cost 2 min of the full run."""
    r = _hk("test", str(matrix_ops[(pattern, handshake)]), "--np", str(nranks), "--", "-k",
            "int32 and (-7- or 300007) and not max", env={"HCOMM_KIT_SOC": product, "HCCL_BUFFSIZE": "1"},
            timeout=3000)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"np{nranks}:" in r.stdout + r.stderr, r.stdout + r.stderr


@pytest.mark.slow
def test_algorithm_selects_the_operators_algorithm_in_run_test_and_bench(ops) -> None:
    """op.toml algorithms = ["direct", "broken"] (broken: wrong root): --algorithm picks one in every
    command; the generated tests try both (and fail on broken); an unknown name stops before any job."""
    d = str(ops["algo"]["direct-reduce"])
    assert _hk("run", d, "--np", "3", "-r", "2", "--iters", "0", "--algorithm", "direct").returncode == 0
    r = _hk("run", d, "--np", "3", "-r", "2", "--iters", "0", "--algorithm", "broken")
    assert r.returncode == 1 and "MISMATCH" in r.stdout and "broken" in r.stdout, r.stdout + r.stderr
    assert _hk("test", d, "--np", "3", "--algorithm", "direct", "--", "-k", "int32", "-m", "not slow").returncode == 0
    r = _hk("test", d, "--np", "3", "--", "-k", "int32 and 1031")
    assert r.returncode != 0 and "algo-broken" in r.stdout, r.stdout + r.stderr
    r = _hk("bench", d, "--np", "3", "-b", "4K", "-e", "4K", "-r", "1", "-n", "1", "-w", "0", "--algorithm", "broken")
    assert r.returncode == 1 and "algorithm broken" in r.stdout and (
        "failed" in r.stdout or "unwritten output: rank 1: operator k_algos" in r.stderr), r.stdout + r.stderr
    r = _hk("bench", d, "--np", "3", "-b", "4K", "-e", "4K", "-r", "1", "-n", "1", "-w", "0", "--algorithm", "direct",
            "--compare", "builtin:mesh")
    assert r.returncode == 0 and "success" in r.stdout, r.stdout + r.stderr


def test_algorithm_names_are_checked_before_any_job_starts(ops) -> None:
    d = str(ops["algo"]["direct-reduce"])
    for cmd in (("run", d, "--np", "3"), ("test", d)):
        r = _hk(*cmd, "--algorithm", "brokne")
        assert r.returncode == 2 and "did you mean 'broken'" in r.stderr, (cmd, r.stderr)
    r = _hk("bench", d, "--np", "2", "--algorithm", "direct", "--compare", "builtin:rign")
    assert r.returncode == 2 and "reduce: unknown algorithm 'rign'" in r.stderr, r.stderr


@pytest.mark.slow
def test_a_builtins_directory_is_tested_and_benched_by_its_kind() -> None:
    from hcomm_kit.base.resources import aicpu_kernels_dir

    d = aicpu_kernels_dir()
    r = _hk("test", str(d / "reduce_scatter"), "--np", "3", "--algorithm", "AicpuReduceScatterSoleNHR", "--", "-k",
            "int32 and sum")
    assert r.returncode == 0 and "passed" in r.stdout, r.stdout + r.stderr
    r = _hk("test", str(d / "scatter"), "--np", "3", "--", "-k", "bf16 and (-7- or 65537)")
    assert r.returncode == 0 and "passed" in r.stdout, r.stdout + r.stderr
    r = _hk("bench", str(d / "alltoallv"), "--np", "3", "-b", "4K", "-e", "64K", "-f", "16", "-n", "2", "-w", "1",
            "--compare", "mpi")
    assert r.returncode == 0 and "alltoallv" in r.stdout and "success" in r.stdout, r.stdout + r.stderr


# ---- Python: the call follows the kind -----------------------------------------------------------
@pytest.mark.mpi(np=[2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.slow  # full run only: over the quick run's budget
def test_every_new_kind_from_python(comm) -> None:
    """Each new pattern (scaffolded and built once per session) against numpy through
    check_operator, the first and the last root (the generated tests try every root, more counts
    and dtypes); alltoallv with uneven counts given by the caller."""
    from test_orchestrator import scaffold

    from hcomm_kit.testing import check_operator

    def make_input(rank: int, n: int, dtype: str) -> np.ndarray:
        return (np.arange(n) % 97 + 10 * rank).astype(dtype.replace("fp", "float"))

    n, r = comm.size, comm.rank
    ops_ = {p: comm.load_op(scaffold(p)) for p in NEW}
    for p in NEW:
        for count in ((3, 1031) if p == "pairwise-alltoallv" else (1031,)):  # 3: zero-length blocks
            for root in ((0, n - 1) if ops_[p].spec.rooted else [None]):
                check_operator(comm, ops_[p], count, "int32", make_input, root=root)
    # alltoallv: rank i sends i+j+1 elements to rank j
    v = ops_["pairwise-alltoallv"]
    sc, rc = [r + j + 1 for j in range(n)], [i + r + 1 for i in range(n)]
    x = np.arange(sum(sc), dtype=np.float32) + 1000 * r
    y = v(x, send_counts=sc, recv_counts=rc)
    want = reference.alltoallv([np.arange(sum(i + j + 1 for j in range(n)), dtype=np.float32) + 1000 * i
                                for i in range(n)], [[i + j + 1 for j in range(n)] for i in range(n)])[r]
    np.testing.assert_array_equal(y, want)


@pytest.mark.mpi(np=[2])
def test_the_call_follows_the_kind(comm) -> None:
    """The call's signature per kind: alltoallv's counts, a block count for the block kinds (also
    through aclnn), None from a reduce / gather on the other ranks (an out= stays untouched),
    algorithm= on an operator listing algorithms, no root for a kind without one."""
    from test_orchestrator import scaffold

    from hcomm_kit.base.errors import CheckError

    n, r = comm.size, comm.rank
    ops_ = {p: comm.load_op(scaffold(p)) for p in NEW}
    v = ops_["pairwise-alltoallv"]
    sc, rc = [r + j + 1 for j in range(n)], [i + r + 1 for i in range(n)]
    x = np.arange(sum(sc), dtype=np.float32)
    with pytest.raises(ConfigError, match="send_counts=\\[...\\] and recv_counts"):
        v(x)
    with pytest.raises(ConfigError, match="add up to"):
        v(x[:2], send_counts=sc, recv_counts=rc)
    # the block kinds: count is one block; the input must split into blocks
    rs = ops_["pairwise-reduce-scatter"]
    np.testing.assert_array_equal(rs(np.full(4 * n, r + 1, np.int32), reduce_op="max"), np.full(4, n, np.int32))
    assert rs(np.full(5 * n + 1, 1, np.int32), count=5).shape == (5,)
    with pytest.raises(ConfigError, match="do not split into"):
        rs(np.ones(4 * n + 1, np.int32))
    # through aclnn the same: x holds one block per rank, the kernel gets the block (HK_OUT_INPUT_BLOCKS)
    import hcomm_kit.aclnn as aclnn

    api = aclnn.load(scaffold("pairwise-reduce-scatter")).name
    x = np.arange(3 * n, dtype=np.float32) * (r + 1)
    np.testing.assert_array_equal(aclnn.invoke(api, x, group=comm.name, reduce_op="sum").wait(), rs(x, reduce_op="sum"))
    with pytest.raises(ConfigError, match="do not split into"):
        aclnn.invoke(api, np.ones(3 * n + 1, np.float32), group=comm.name)
    # a gather returns None off the root and leaves an out= untouched there
    g = ops_["direct-gather"]
    out = np.full(3 * n, -1, np.int32)
    got = g(np.full(3, r, np.int32), out, root=n - 1)
    if r == n - 1:
        assert got is out and (out == np.repeat(np.arange(n), 3)).all()
    else:
        assert got is None and (out == -1).all()
    w = g(np.full(3, r, np.int32), root=0, async_op=True)
    assert (w.wait() is None) == (r != 0)
    # algorithm=: none listed here; a name of the list, else the call is refused before launching
    with pytest.raises(ConfigError, match="lists no algorithms"):
        g(np.zeros(3, np.int32), algorithm="ring")
    red = comm.load_op(_scaffold_algorithms())
    assert red.algorithms == {"direct": 1, "broken": 2}
    x = np.full(5, r + 1, np.int32)
    out = comm.to_device(np.full(5, -7, np.int32))
    try:  # the broken algorithm reduces to rank 0: the root's output is never written
        red(x, out, root=n - 1, algorithm="broken")
        unwritten = None
    except CheckError as exc:
        unwritten = str(exc)
    if r == n - 1:
        assert unwritten is not None and "unwritten output" in unwritten and "t_algo_reduce" in unwritten, unwritten
        np.testing.assert_array_equal(out.numpy(), np.full(5, -7, np.int32))
    else:
        assert unwritten is None, unwritten
    good = red(x, out, root=n - 1, algorithm="direct")
    if r == n - 1:
        np.testing.assert_array_equal(good.numpy(), np.full(5, n * (n + 1) // 2, np.int32))
    with pytest.raises(ConfigError, match="did you mean 'broken'"):
        red(x, algorithm="brokn")
    a2a = comm.load_op(scaffold("pairwise-alltoall"))
    with pytest.raises(ConfigError, match="takes no root"):
        a2a(np.zeros(2 * n, np.float32), root=1)
    y = a2a(np.arange(2 * n, dtype=np.float32) + 10 * r)
    np.testing.assert_array_equal(y, [10 * s + 2 * r + i for s in range(n) for i in range(2)])
