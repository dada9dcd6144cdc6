"""Operators through CANN's two-phase aclnn interface (issue 24).

* the generated interface: names, header prototypes (no rank needed);
* a C++ host written as on Ascend (tests/c/aclnn_host/main.cc: aclnn_ring_sum.h, aclnn/acl_meta.h,
  HcclGetCommName as the group, a stream) calling a scaffolded ring_sum at 2, 3 and 4 ranks as
  threads and under mpirun: sums and max against references, a strided input view and a strided
  output view (staged through the workspace), an output view at an offset with untouched
  neighbours, a repeatable executor run 3 times, every refusal of phase one (NULLs, dtype, shape,
  group, reduce op, root, host memory, aliasing) and of phase two (workspace), the product gate;
* the vendor package of a CANN-shaped tree (``hcomm-kit config --ascend-home``), self-contained
  (kernels and op-info JSON in aicpu/{kernel,config}: runs with the build cache's copies deleted); one
  ``op_api/lib/libcust_opapi.so`` holding the built-in collectives' ``aclnnHk*`` and ring_sum
  (installed as ``hcomm-kit build`` does), hosts linked with ``-lcust_opapi``: ring_sum's host, and
  tests/c/aclnn_coll/main.cc calling every built-in collective through aclnn (contiguous, strided
  and transposed views in and out, a repeatable executor, every refusal) at 2, 3 and 4 ranks as
  threads and under mpirun, every output checked against numpy (tests/hccl_capi.py);
* the Python invoker (hcomm_kit.aclnn) under mpirun: numpy, DeviceBuffer and torch inputs, the
  built-in collectives' operators (aclnnHk*, no load) against comm's collectives and numpy,
  identical results to comm.load_op(dir), two streams, refusals as AclError with the ACLNN code,
  and the workspace pool reusing its memory across 1000 calls.
"""

from __future__ import annotations

import gc
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from test_orchestrator import expected, make_input, scaffold

C_HOST = Path(__file__).parent / "c" / "aclnn_host" / "main.cc"
C_COLL = Path(__file__).parent / "c" / "aclnn_coll" / "main.cc"
NP4 = pytest.param(4, marks=pytest.mark.slow)


def test_aclnn_names_and_header(tmp_path: Path) -> None:
    from hcomm_kit.build.aclnnbuild import aclnn_name, render_sources
    from hcomm_kit.build.opspec import load_opspec
    from hcomm_kit.scaffold.render import new_op

    assert aclnn_name("ring_sum") == "aclnnRingSum"
    assert aclnn_name("allreduce") == "aclnnAllreduce"
    new_op("my_gather", pattern="mesh-allgather", directory=tmp_path)
    spec = load_opspec(tmp_path / "my_gather")
    src = render_sources(spec)
    h = src["aclnn_my_gather.h"]
    assert "GENERATED" in h and '#include "aclnn/aclnn_base.h"' in h
    assert re.search(r"aclnnStatus aclnnMyGatherGetWorkspaceSize\(\s*const aclTensor \*x,\s*int64_t root,\s*"
                     r"const char \*group,\s*aclTensor \*out,\s*uint64_t \*workspaceSize,\s*"
                     r"aclOpExecutor \*\*executor\);", h), h
    assert "aclnnStatus aclnnMyGather(void *workspace, uint64_t workspaceSize," in h
    assert "reduceOp" not in h  # not a reduction


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ring_sum scaffolded + built (kernel and aclnn library), and the C host linked to it."""
    from hcomm_kit.build import emulator as _emulator
    from hcomm_kit.build.aclnnbuild import build_aclnn
    from hcomm_kit.build.opbuild import build_op

    res = build_op(scaffold("ring-allreduce", name="ring_sum"))
    api = build_aclnn(res.spec, res.json_path)
    out = tmp_path_factory.mktemp("aclnn_host")
    inc, lib = _emulator.get_include(), _emulator.library_dir()
    exe = out / "aclnn_host"
    cmd = ["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{inc}", f"-I{api.include_dir}", str(C_HOST),
           "-o", str(exe), f"-L{api.lib_dir}", f"-lcust_opapi_{res.spec.name}", f"-L{lib}", "-lnnopbase", "-lhccl",
           "-lascendcl", "-pthread", f"-Wl,-rpath,{api.lib_dir}", f"-Wl,-rpath,{lib}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return exe


def _env(ranks: int, **extra: str) -> dict[str, str]:
    import hccl_capi

    return hccl_capi.env(ranks, extra.pop("soc", "Ascend910B"), **extra)


@pytest.mark.parametrize("ranks", [2, pytest.param(3, marks=pytest.mark.slow), NP4])
def test_c_host_threads(host: Path, ranks: int) -> None:
    r = subprocess.run([str(host), "threads"], env=_env(ranks), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert len(re.findall(r"^OK rank \d+", r.stdout, re.M)) == ranks, r.stdout


@pytest.mark.parametrize("ranks", [2, pytest.param(3, marks=pytest.mark.slow), NP4])
def test_c_host_mpirun(host: Path, tmp_path: Path, ranks: int) -> None:
    r = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", str(ranks), "--timeout", "200", "--",
                        str(host), "mpi", str(tmp_path)], env=_env(ranks), capture_output=True, text=True, timeout=260)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert len(re.findall(r"OK rank \d+", r.stdout)) == ranks, r.stdout


@pytest.mark.slow  # full run only: over the quick run's budget
def test_c_host_product_gate(tmp_path: Path) -> None:
    """An operator whose op.toml lists only Ascend910B is refused on Ascend950 by phase one."""
    from hcomm_kit.build import emulator as _emulator
    from hcomm_kit.build.aclnnbuild import build_aclnn
    from hcomm_kit.build.opbuild import build_op
    from hcomm_kit.scaffold.render import new_op, update_op

    new_op("ring_sum", pattern="ring-allreduce", directory=tmp_path)
    toml = tmp_path / "ring_sum" / "op.toml"
    toml.write_text(re.sub(r"products = \[.*\]", 'products = ["Ascend910B"]', toml.read_text()))
    update_op(tmp_path / "ring_sum")
    res = build_op(tmp_path / "ring_sum")
    api = build_aclnn(res.spec, res.json_path)
    inc, lib = _emulator.get_include(), _emulator.library_dir()
    exe = tmp_path / "host"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{inc}", f"-I{api.include_dir}", str(C_HOST), "-o", str(exe),
                    f"-L{api.lib_dir}", "-lcust_opapi_ring_sum", f"-L{lib}", "-lnnopbase", "-lhccl", "-lascendcl",
                    "-pthread", f"-Wl,-rpath,{api.lib_dir}", f"-Wl,-rpath,{lib}"], check=True, timeout=300)
    r = subprocess.run([str(exe), "product"], env=_env(1, soc="Ascend950"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "OK product refused" in r.stdout, r.stdout + r.stderr


# ---- the vendor package of a CANN-shaped tree: built-in collectives + installed operators ---------

def _link(src: Path, exe: Path, tree: Path, *extra: str) -> Path:
    """Compile a host against the tree as on Ascend: -I$ASCEND_HOME_PATH/include, the vendor's
    op_api/include, -lcust_opapi -lnnopbase -lhccl -lascendcl."""
    api = tree / "opp" / "vendors" / "cust" / "op_api"
    cmd = ["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", *extra, f"-I{tree / 'include'}",
           f"-I{api / 'include'}", str(src), "-o", str(exe), f"-L{api / 'lib'}", "-lcust_opapi",
           f"-L{tree / 'lib64'}", "-lnnopbase", "-lhccl", "-lascendcl", "-pthread", f"-Wl,-rpath,{api / 'lib'}",
           f"-Wl,-rpath,{tree / 'lib64'}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, " ".join(cmd) + "\n" + r.stdout + r.stderr
    return exe


def test_config_op_api_flags() -> None:
    """`hcomm-kit config --op-api`: the built-ins' aclnn package beside the emulator library."""
    r = subprocess.run([sys.executable, "-m", "hcomm_kit", "config", "--op-api"], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    flags = r.stdout.split()
    inc, lib = Path(flags[0][2:]), Path(flags[1][2:])
    assert flags[2] == "-lcust_opapi" and (inc / "aclnn_hk_all_reduce.h").is_file()
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib / "libcust_opapi.so")], capture_output=True,
                          text=True, check=True).stdout
    assert "aclnnHkAllReduceGetWorkspaceSize" in syms and "aclnnHkRecv" in syms


def _vendor_tree(root: Path, sanitize: str = "") -> Path:
    """A CANN-shaped tree with ring_sum installed into vendor cust (as `hcomm-kit build` does)."""
    from hcomm_kit.build import cann_tree
    from hcomm_kit.build.aclnnbuild import build_aclnn, install
    from hcomm_kit.build.opbuild import build_op

    tree = cann_tree.write_tree(root, sanitize=sanitize)
    assert cann_tree.check_tree(tree) == []
    res = build_op(scaffold("ring-allreduce", name="ring_sum"))
    inst = install(build_aclnn(res.spec, res.json_path), res.spec, tree)
    assert inst.library == tree / "opp" / "vendors" / "cust" / "op_api" / "lib" / "libcust_opapi.so"
    return tree


@pytest.fixture(scope="module")
def vendor(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tree, the collectives host and ring_sum's host, both linked with -lcust_opapi."""
    out = tmp_path_factory.mktemp("aclnn_vendor")
    tree = _vendor_tree(out / "cann")
    return {"tree": tree, "coll": _link(C_COLL, out / "aclnn_coll", tree),
            "ring": _link(C_HOST, out / "aclnn_ring", tree)}


@pytest.mark.slow  # full run only: over the quick run's budget
def test_vendor_package_is_one_library(vendor: dict[str, Path]) -> None:
    """CANN's layout: one libcust_opapi.so per vendor with every operator (built-ins and ring_sum),
    one header per operator; reinstalling an operator relinks, never duplicates."""
    from hcomm_kit.base.errors import BuildError
    from hcomm_kit.build.aclnnbuild import AclnnBuild, build_aclnn, install
    from hcomm_kit.build.builtins import BUILTIN_ACLNN
    from hcomm_kit.build.opbuild import build_op

    api = vendor["tree"] / "opp" / "vendors" / "cust" / "op_api"
    assert sorted(p.name for p in (api / "lib").iterdir()) == ["libcust_opapi.so"]
    syms = subprocess.run(["nm", "-D", "--defined-only", str(api / "lib" / "libcust_opapi.so")], capture_output=True,
                          text=True, check=True).stdout
    names = set(re.findall(r" T (aclnn\w+)", syms))
    want = {f"aclnn{n}{p}" for n in [*BUILTIN_ACLNN, "RingSum"] for p in ("", "GetWorkspaceSize")}
    assert names == want, names ^ want
    headers = {p.name for p in (api / "include").iterdir()}
    assert {"aclnn_ring_sum.h", "aclnn_hk_all_reduce.h", "aclnn_hk_send.h", "aclnn_hk_collectives.h"} <= headers
    res = build_op(scaffold("ring-allreduce", name="ring_sum"))
    install(build_aclnn(res.spec, res.json_path), res.spec, vendor["tree"])
    assert sorted(p.name for p in (api / "obj").iterdir()) == ["aclnn_hk_collectives.o", "aclnn_ring_sum.o"]
    # an operator named like a built-in is refused (the vendor's library would define it twice)
    built = build_aclnn(res.spec, res.json_path)
    with pytest.raises(BuildError, match="aclnnHkAllReduce"):
        install(AclnnBuild("aclnnHkAllReduce", built.header, built.library, built.obj), res.spec, vendor["tree"])


@pytest.mark.slow
def test_installed_package_needs_no_build_cache(tmp_path: Path) -> None:
    """An installed vendor package is self-contained, as CANN's custom operator package: the
    operator's kernel and op-info JSON are copied into the vendor's aicpu/{kernel,config}, and the
    installed library runs them after the build cache's copies (kernel, JSON, aclnn build) are
    deleted. The operator is a ring_sum only this test builds (a unique comment in its kernel)."""
    import shutil

    from hcomm_kit.build import cann_tree
    from hcomm_kit.build.aclnnbuild import build_aclnn, install
    from hcomm_kit.build.opbuild import build_op
    from hcomm_kit.scaffold.render import new_op

    new_op("ring_sum", pattern="ring-allreduce", directory=tmp_path)
    src = sorted((tmp_path / "ring_sum" / "op_kernel_aicpu").glob("*.cc"))[0]
    src.write_text(src.read_text() + f"\n// built only by the test in {tmp_path}\n")
    res = build_op(tmp_path / "ring_sum")
    built = build_aclnn(res.spec, res.json_path)
    tree = cann_tree.write_tree(tmp_path / "cann")
    install(built, res.spec, tree)
    vendor = tree / "opp" / "vendors" / "cust" / "aicpu"
    assert (vendor / "kernel" / res.so_path.name).is_file() and (vendor / "config" / res.json_path.name).is_file()
    exe = _link(C_HOST, tmp_path / "host", tree)
    res.so_path.unlink()
    res.json_path.unlink()
    shutil.rmtree(built.library.parents[2])
    r = subprocess.run([str(exe), "threads"], env=_env(2), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert len(re.findall(r"^OK rank \d+", r.stdout, re.M)) == 2, r.stdout


@pytest.mark.parametrize("ranks,soc", [(2, "Ascend910B"), pytest.param(3, "Ascend910_93", marks=pytest.mark.slow),
                                       pytest.param(4, "Ascend950", marks=pytest.mark.slow)])
def test_builtin_collectives_threads(vendor: dict[str, Path], tmp_path: Path, ranks: int, soc: str) -> None:
    import hccl_capi

    r = subprocess.run([str(vendor["coll"]), "threads", str(tmp_path)], env=_env(ranks, soc=soc),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert len(re.findall(r"^OK rank \d+", r.stdout, re.M)) == ranks, r.stdout
    assert hccl_capi.check_outputs(tmp_path, ranks, soc) >= 30


@pytest.mark.slow
@pytest.mark.parametrize("ranks,soc", [(2, "Ascend950"), (3, "Ascend910B"), (4, "Ascend910_93")])
def test_builtin_collectives_mpirun(vendor: dict[str, Path], tmp_path: Path, ranks: int, soc: str) -> None:
    import hccl_capi

    r = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", str(ranks), "--timeout", "200", "--",
                        str(vendor["coll"]), "mpi", str(tmp_path)], env=_env(ranks, soc=soc), capture_output=True,
                       text=True, timeout=260)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert len(re.findall(r"OK rank \d+", r.stdout)) == ranks, r.stdout
    assert hccl_capi.check_outputs(tmp_path, ranks, soc) >= 30


@pytest.mark.slow
def test_installed_operator_through_vendor_library(vendor: dict[str, Path]) -> None:
    """ring_sum's host linked with -lcust_opapi (the vendor's one library) at 3 ranks."""
    r = subprocess.run([str(vendor["ring"]), "threads"], env=_env(3), capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr[-6000:]
    assert len(re.findall(r"^OK rank \d+", r.stdout, re.M)) == 3, r.stdout


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("mode", ["thread", "address"])
def test_aclnn_hosts_under_sanitizer(tmp_path: Path, mode: str) -> None:
    """Both C hosts (the built-in collectives' and ring_sum's, through the vendor's libcust_opapi.so)
    built with -fsanitize=thread (or address,undefined) against that sanitizer build of the emulator
    (a CANN-shaped tree of it), at 3 ranks as threads and the collectives at 2 under mpirun: no
    report (ASan: leaks checked, with test_sanitizers' suppressions of what the emulator keeps)."""
    import hccl_capi
    from test_sanitizers import SANITIZER_ERROR_RE
    from test_sanitizers import _env as sanitizer_env

    tree = _vendor_tree(tmp_path / "cann", sanitize=mode)
    flags = tuple(hccl_capi.SANITIZE_CFLAGS[mode])
    coll = _link(C_COLL, tmp_path / f"aclnn_coll_{mode}", tree, *flags)
    ring = _link(C_HOST, tmp_path / f"aclnn_ring_{mode}", tree, *flags)
    san = {k: v for k, v in sanitizer_env(mode, tmp_path).items() if k != "ACL_TEST_SKIP_CRASH"}
    runs = [([str(coll), "threads", str(tmp_path / "t")], 3, "t"), ([str(ring), "threads"], 3, None),
            ([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--timeout", "600", "--", str(coll), "mpi",
              str(tmp_path / "m")], 2, "m")]
    for argv, ranks, out in runs:
        if out:
            (tmp_path / out).mkdir()
        env = {**_env(ranks, HCCL_EXEC_TIMEOUT="600"), **san}
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        text = proc.stdout + proc.stderr
        reports = SANITIZER_ERROR_RE.findall(text)
        assert not reports, f"{len(reports)} {mode} sanitizer report(s) from {argv[-2:]}:\n{text[-30000:]}"
        assert proc.returncode == 0 and len(re.findall(r"OK rank \d+", proc.stdout)) == ranks, text[-20000:]
        if out:
            assert hccl_capi.check_outputs(tmp_path / out, ranks, "Ascend910B") >= 30


# ---- the Python invoker, under mpirun ------------------------------------------------------------

@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow), NP4], timeout=300)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_invoker_matches_load_op(comm) -> None:
    import hcomm_kit.aclnn as aclnn
    from hcomm_kit.core.device import DeviceBuffer

    opdir = scaffold("ring-allreduce", name="ring_sum")
    op = aclnn.load(opdir)
    assert op.name == "RingSum" and "RingSum" in aclnn.registered()
    direct = comm.load_op(opdir)
    for dtype, rop, count in (("fp32", "sum", 1000), ("int32", "max", 77), ("fp16", "min", 5), ("fp32", "sum", 0)):
        x = make_input(comm.rank, count, dtype)
        want = expected("ring-allreduce", comm.rank, comm.size, count, dtype, rop)
        got = aclnn.invoke("RingSum", x, group=comm.name, reduce_op=rop).wait()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, direct(x, reduce_op=rop))
    # out given, 2-D input, the communicator as the group
    x = make_input(comm.rank, 600, "fp32").reshape(20, 30)
    y = np.empty_like(x)
    assert aclnn.invoke("aclnnRingSum", x, out=y, group=comm).wait() is y
    np.testing.assert_array_equal(y.ravel(), expected("ring-allreduce", comm.rank, comm.size, 600, "fp32"))
    # device buffers in and out; two calls in flight on two streams of two communicators (calls on
    # one communicator share its channels' notifies: as in HCCL, they go in order, one stream)
    other = comm.split(0)
    xb = DeviceBuffer.from_numpy(make_input(comm.rank, 256, "int32"))
    w1 = aclnn.invoke("RingSum", xb, group=other.name, stream=aclnn.stream_pool(comm.rt).get(1))
    w2 = aclnn.invoke("RingSum", make_input(comm.rank, 64, "fp32"), group=comm.name)
    yb = w1.wait()
    assert isinstance(yb, DeviceBuffer)
    np.testing.assert_array_equal(yb.numpy(), expected("ring-allreduce", comm.rank, comm.size, 256, "int32"))
    np.testing.assert_array_equal(w2.wait(), expected("ring-allreduce", comm.rank, comm.size, 64, "fp32"))
    # the README's snippet: a temporary DeviceBuffer given to an asynchronous call lives until the
    # call finished (the Work holds it; a dropped Work's call keeps it until its event completes),
    # as through comm.load_op and the collectives with async_op=True
    s1 = aclnn.stream_pool(comm.rt).get(1)
    x = make_input(comm.rank, 3001, "fp32")
    want = expected("ring-allreduce", comm.rank, comm.size, 3001, "fp32")
    w = aclnn.invoke("RingSum", comm.to_device(x), group=comm, stream=s1)
    gc.collect()
    scratch = [comm.to_device(np.zeros(3001, np.float32)) for _ in range(4)]  # reuse freed memory, if any
    np.testing.assert_array_equal(w.wait().numpy(), want)
    aclnn.invoke("RingSum", comm.to_device(x), group=comm, stream=s1)  # dropped unwaited
    gc.collect()
    np.testing.assert_array_equal(aclnn.invoke("RingSum", x, group=comm, stream=s1).wait(), want)
    np.testing.assert_array_equal(direct(comm.to_device(x), async_op=True).wait().numpy(), want)
    np.testing.assert_array_equal(comm.all_reduce(comm.to_device(x), async_op=True).wait().numpy(),
                                  sum(make_input(q, 3001, "fp32") for q in range(comm.size)))
    del scratch
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_numpy(make_input(comm.rank, 128, "fp32"))
        got = aclnn.invoke("RingSum", t, group=comm.name).wait()
        np.testing.assert_array_equal(got, expected("ring-allreduce", comm.rank, comm.size, 128, "fp32"))
    other.close()


@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow)], timeout=300)
@pytest.mark.slow  # full run only: over the quick run's budget
def test_invoker_views(comm) -> None:
    """Non-contiguous views go to the operator as views (aclTensor shape / strides / offset): numpy
    slices, columns, transposes and offsets, torch views and DeviceViews, in and out; each result
    equals numpy's on the same view of every rank's data and load_op's on a contiguous copy, and an
    ``out`` view gets its elements written, nothing else."""
    import hcomm_kit.aclnn as aclnn
    from hcomm_kit.aclnn.operands import _span
    from hcomm_kit.core.device import DeviceBuffer

    opdir = scaffold("ring-allreduce", name="ring_sum")
    aclnn.load(opdir)
    direct = comm.load_op(opdir)
    n, r = comm.size, comm.rank

    def data(rank: int, dtype: str = "fp32") -> np.ndarray:
        return make_input(rank, 6 * 40, dtype).reshape(6, 40)

    views = {"stride": lambda a: a.ravel()[1::2], "column": lambda a: a[:, 7], "transpose": lambda a: a.T,
             "offset": lambda a: a.ravel()[13:], "block": lambda a: a[1:5, 3:30:3], "reversed": lambda a: a[:, ::-1],
             "sparse": lambda a: a.ravel()[::50]}
    for rop, dtype in (("sum", "fp32"),) + ((("max", "int32"),) if n > 2 else ()):  # int32 max: full run
        reduce = {"sum": np.add, "max": np.maximum}[rop]
        for name, view in views.items():
            xv = view(data(r, dtype))
            want = view(data(0, dtype)).copy()
            for q in range(1, n):
                want = reduce(want, view(data(q, dtype)))
            got = aclnn.invoke("RingSum", xv, group=comm, reduce_op=rop).wait()
            np.testing.assert_array_equal(got, want, err_msg=name)
            np.testing.assert_array_equal(got.ravel(), direct(np.ascontiguousarray(xv), reduce_op=rop).ravel(),
                                          err_msg=name)
            # into a view of a larger array: only the view's elements change
            big = np.full((6, 40), -7, dtype=xv.dtype)
            outv = view(big)
            if outv.shape == xv.shape:
                assert aclnn.invoke("RingSum", xv, out=outv, group=comm, reduce_op=rop).wait() is outv
                np.testing.assert_array_equal(outv, want, err_msg=name)
                mask = np.ones(big.shape, bool)
                view(mask)[...] = False
                assert (big[mask] == -7).all(), name
    # staged as views: their spans; compacted: negative strides, and views far sparser than their bytes
    assert _span(views["stride"](data(r))) == (956, (2,)) and _span(views["transpose"](data(r))) == (960, (1, 40))
    assert _span(views["reversed"](data(r))) is None and _span(np.zeros(100000, np.float32)[::1000]) is None
    # device memory: column 1 of a [100, 2] matrix in, a strided view of a [100, 3] matrix out
    m = make_input(r, 200, "fp32").reshape(100, 2)
    dm = DeviceBuffer.from_numpy(m)
    dy = DeviceBuffer.from_numpy(np.zeros((100, 3), np.float32))
    w = aclnn.invoke("RingSum", aclnn.DeviceView(dm, (100,), (2,), 1), out=aclnn.DeviceView(dy, (100,), (3,), 2),
                     group=comm)
    w.wait(timeout=60)
    want = sum(make_input(q, 200, "fp32").reshape(100, 2)[:, 1] for q in range(n))
    y = dy.numpy()
    np.testing.assert_array_equal(y[:, 2], want)
    assert (y[:, :2] == 0).all()
    try:
        import torch
    except ImportError:
        return
    t = torch.from_numpy(data(r))
    for name, tv in (("column", t[:, 3]), ("transpose", t.t()), ("offset", t[2:, 5:]), ("step", t[:, ::4])):
        assert not tv.is_contiguous() or name == "offset"
        want = sum(np.asarray(tv_q) for tv_q in [{"column": lambda a: a[:, 3], "transpose": lambda a: a.T,
                                                   "offset": lambda a: a[2:, 5:], "step": lambda a: a[:, ::4]}[name](
                                                       data(q)) for q in range(n)])
        got = aclnn.invoke("RingSum", tv, group=comm).wait()
        np.testing.assert_array_equal(got, want, err_msg=name)
        out = torch.zeros(6, 40)
        ov = {"column": out[:, 3], "transpose": out.t(), "offset": out[2:, 5:], "step": out[:, ::4]}[name]
        aclnn.invoke("RingSum", tv, out=ov, group=comm).wait()
        np.testing.assert_array_equal(ov.numpy(), want, err_msg=name)
        assert float(out.abs().sum()) == float(np.abs(want).sum()), name  # nothing outside the view


@pytest.fixture
def torch_world(comm):
    """The default "hcomm" torch process group of this job (torch skipped when missing); None in
    the outer pytest process, which only starts the mpirun job."""
    from hcomm_kit.core.bootstrap import under_mpi

    if not under_mpi():
        yield None
        return
    torch = pytest.importorskip("torch")
    import datetime

    import torch.distributed as dist

    import hcomm_kit.torch  # noqa: F401 - registers "hcomm"

    dist.init_process_group("hcomm", timeout=datetime.timedelta(seconds=120))
    try:
        yield torch, dist.group.WORLD
    finally:
        dist.destroy_process_group()


@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow)], timeout=300)
def test_torch_run_op_via_aclnn(comm, torch_world) -> None:
    """The torch backend runs a custom operator through its aclnn interface (run_op(via="aclnn"))
    with results identical to comm.load_op's (via="load_op") and to the sum / max over ranks:
    contiguous and non-contiguous tensors in and out (fp32 and bf16; int32 max and more views in the
    full run)."""
    torch, pg = torch_world
    from hcomm_kit.base.errors import ConfigError

    opdir = scaffold("ring-allreduce", name="ring_sum")
    r, n = comm.rank, comm.size
    cases = [(torch.float32, "sum"), (torch.bfloat16, "sum")] + ([(torch.int32, "max")] if n > 2 else [])
    views = [("whole", lambda t: t), ("column", lambda t: t[:, 4]), ("transpose", lambda t: t.t())]
    views += [("step", lambda t: t[1:, ::3])] if n > 2 else []
    for dtype, rop in cases:
        base = torch.from_numpy(make_input(r, 300, "fp32").reshape(10, 30)).to(dtype)
        for name, view in views:
            x = view(base.clone())
            outs = {}
            for via in ("load_op", "aclnn"):
                out = torch.full((10, 30), -1, dtype=dtype)
                pg.run_op(opdir, x, view(out), reduce_op=rop, via=via).wait()
                outs[via] = out
            assert torch.equal(outs["load_op"], outs["aclnn"]), (dtype, name)  # the -1 outside the view too
            want = view(torch.from_numpy(make_input(0, 300, "fp32").reshape(10, 30)).to(dtype))
            for q in range(1, n):
                other = view(torch.from_numpy(make_input(q, 300, "fp32").reshape(10, 30)).to(dtype))
                want = want + other if rop == "sum" else torch.maximum(want, other)
            assert torch.equal(view(outs["aclnn"]), want), (dtype, name)
    assert len(pg._aclnn_ops) == 1  # ran through the operator's aclnn library
    with pytest.raises(ConfigError, match="prod"):
        pg.run_op(opdir, torch.ones(4), reduce_op="prod", via="aclnn")
    with pytest.raises(ConfigError, match="via"):
        pg.run_op(opdir, torch.ones(4), via="ctypes")


@pytest.mark.slow
@pytest.mark.mpi(np=[2, 3], timeout=300)
def test_torch_op_hook_via_aclnn(comm, torch_world) -> None:
    """DDP steps with op_hook(via="aclnn") end with parameters identical to op_hook(via="load_op")."""
    torch, pg = torch_world
    import hcomm_kit.torch

    opdir = scaffold("ring-allreduce", name="ring_sum")
    params = {}
    for via in ("load_op", "aclnn"):
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)))
        hook, calls = hcomm_kit.torch.op_hook(opdir, via=via), [0]

        def counted(state, bucket, hook=hook, calls=calls):
            calls[0] += 1
            return hook(state, bucket)
        model.register_comm_hook(None, counted)
        start = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            g = torch.Generator().manual_seed(100 * step + comm.rank)
            x = torch.randn(8, 16, generator=g)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), torch.sin(x[:, :4])).backward()
            opt.step()
        params[via] = [p.detach().clone() for p in model.parameters()]
        assert calls[0] >= 3 and not all(torch.equal(a, b) for a, b in zip(start, params[via])), via
    assert len(pg._aclnn_ops) == 1
    for a, b in zip(params["load_op"], params["aclnn"]):
        assert torch.equal(a, b)


@pytest.mark.mpi(np=[2, pytest.param(3, marks=pytest.mark.slow)], timeout=300)
def test_invoker_builtins(comm) -> None:
    """The built-in collectives' aclnn operators from Python (no load): equal to comm's collectives
    and to numpy, on numpy arrays (views too), device buffers and torch tensors; count tables and
    tensor lists as keywords; refusals as AclError naming the argument."""
    import hcomm_kit.aclnn as aclnn
    from hcomm_kit.base.errors import AclError, ConfigError
    from hcomm_kit.core.device import DeviceBuffer

    r, n, g = comm.rank, comm.size, comm.name
    ins = lambda c, dt="fp32": [make_input(q, c, dt) for q in range(n)]  # noqa: E731
    x = ins(1001)
    got = aclnn.invoke("HkAllReduce", x[r], group=g, reduce_op="sum").wait()
    np.testing.assert_array_equal(got, comm.all_reduce(x[r]))
    np.testing.assert_array_equal(got, np.sum(x, axis=0, dtype=np.float32))
    xi = ins(60 * n, "int32")
    y = np.empty_like(xi[r])
    assert aclnn.invoke("aclnnHkAllReduce", xi[r], out=y, group=comm, reduce_op="max").wait() is y
    np.testing.assert_array_equal(y, np.max(xi, axis=0))
    np.testing.assert_array_equal(aclnn.invoke("HkAllGather", x[r][::2], group=g).wait(),  # a strided view
                                  np.concatenate([v[::2] for v in x]))
    np.testing.assert_array_equal(aclnn.invoke("HkReduceScatter", xi[r], group=g, reduce_op="min").wait(),
                                  np.min(xi, axis=0)[r * 60:(r + 1) * 60])
    np.testing.assert_array_equal(aclnn.invoke("HkBroadcast", x[r], group=g, root=n - 1).wait(), x[n - 1])
    np.testing.assert_array_equal(x[r], make_input(r, 1001, "fp32"))  # a host x is left alone
    gathered = aclnn.invoke("HkGather", xi[r][:7], group=g, root=0).wait()
    if r == 0:
        np.testing.assert_array_equal(gathered, np.concatenate([v[:7] for v in xi]))
    else:
        assert gathered is None
    np.testing.assert_array_equal(aclnn.invoke("HkAllToAll", xi[r], group=g).wait(),
                                  np.concatenate([v[r * 60:(r + 1) * 60] for v in xi]))
    # V collectives: rank q contributes q + 2 elements, placed with a gap of 1 (left alone)
    counts = [q + 2 for q in range(n)]
    displs = [sum(counts[:q]) + q for q in range(n)]
    out = np.full(sum(counts) + n, -1, np.int32)
    aclnn.invoke("HkAllGatherV", xi[r][:counts[r]], out=out, group=g, recv_counts=counts, recv_displs=displs).wait()
    want = np.full_like(out, -1)
    for q in range(n):
        want[displs[q]:displs[q] + counts[q]] = xi[q][:counts[q]]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(
        aclnn.invoke("HkReduceScatterV", xi[r][:sum(counts)], group=g, send_counts=counts, reduce_op="sum").wait(),
        np.sum([v[:sum(counts)] for v in xi], axis=0)[sum(counts[:r]):sum(counts[:r + 1])])
    # all-to-all-v: rank i sends i + j + 1 elements to rank j (packed), as comm.all_to_all_v
    sc = [r + j + 1 for j in range(n)]
    rc = [i + r + 1 for i in range(n)]
    np.testing.assert_array_equal(aclnn.invoke("HkAllToAllV", xi[r][:sum(sc)], group=g, send_counts=sc,
                                               recv_counts=rc).wait(),
                                  comm.all_to_all_v(xi[r][:sum(sc)], sc, rc))
    matrix = [i + j + 1 for i in range(n) for j in range(n)]
    np.testing.assert_array_equal(aclnn.invoke("HkAllToAllVC", xi[r][:sum(sc)], group=g,
                                               send_count_matrix=matrix).wait(),
                                  comm.all_to_all_v(xi[r][:sum(sc)], sc, rc))
    # point to point: a ring through one batch, and 0 -> 1
    ring = np.empty(50, np.int32)
    res = aclnn.invoke("HkBatchSendRecv", None, group=g, send_tensors=[xi[r][:50]], send_ranks=[(r + 1) % n],
                       recv_tensors=[ring], recv_ranks=[(r - 1) % n]).wait()
    assert res == [ring]
    np.testing.assert_array_equal(ring, xi[(r - 1) % n][:50])
    if r == 0:
        assert aclnn.invoke("HkSend", xi[0][:9], group=g, root=1).wait() is None
    elif r == 1:
        np.testing.assert_array_equal(aclnn.invoke("HkRecv", None, out=np.empty(9, np.int32), group=g,
                                                   root=0).wait(), xi[0][:9])
    assert aclnn.invoke("HkBarrier", None, group=g).wait() is None
    # device buffers in and out (a device x is broadcast in place)
    xb = DeviceBuffer.from_numpy(x[r])
    yb = aclnn.invoke("HkAllReduce", xb, group=g).wait()
    assert isinstance(yb, DeviceBuffer)
    np.testing.assert_array_equal(yb.numpy(), np.sum(x, axis=0, dtype=np.float32))
    assert aclnn.invoke("HkBroadcast", xb, group=g, root=0).wait() is xb
    np.testing.assert_array_equal(xb.numpy(), x[0])
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_numpy(x[r].copy())
        np.testing.assert_array_equal(aclnn.invoke("HkAllGather", t, group=g).wait(), comm.all_gather(x[r]))
        tout = torch.empty(1001, dtype=torch.float32)
        aclnn.invoke("HkAllReduce", t, out=tout, group=g, reduce_op="max").wait()
        np.testing.assert_array_equal(tout.numpy(), np.max(x, axis=0))
    with pytest.raises(AclError) as ei:
        aclnn.invoke("HkAllGatherV", xi[r][:3], group=g, recv_counts=[3])
    assert ei.value.code == 161002 and "recvCounts has 1 entries" in ei.value.message
    with pytest.raises(AclError) as ei:
        aclnn.invoke("HkAllToAllV", xi[r], group=g, send_counts=[1] * n)
    assert ei.value.code == 161001 and "recvCounts is NULL" in ei.value.message
    with pytest.raises(ConfigError, match="takes no argument.*recv_count"):
        aclnn.invoke("HkAllGatherV", xi[r], group=g, recv_count=[1] * n)


@pytest.mark.mpi(np=[2], timeout=300)
def test_invoker_refusals(comm) -> None:
    import hcomm_kit.aclnn as aclnn
    from hcomm_kit.base.errors import AclError, ConfigError

    aclnn.load(scaffold("ring-allreduce", name="ring_sum"))
    x = np.ones(16, np.float32)
    cases = [(dict(group="no_such_group"), 161002, "no_such_group"),
             (dict(group=comm.name, reduce_op="prod"), 161002, "prod"),
             (dict(group=comm.name, root=comm.size), 161002, "root"),
             (dict(group=comm.name, out=np.empty(15, np.float32), ranks=comm.size), None, "out")]
    for kw, code, word in cases:
        with pytest.raises((AclError, ConfigError)) as ei:
            aclnn.invoke("RingSum", x, **kw)
        if code is not None:
            assert ei.value.code == code and ei.value.name == "ACLNN_ERR_PARAM_INVALID", ei.value
        assert word in str(ei.value)
    with pytest.raises(AclError) as ei:
        aclnn.invoke("RingSum", np.ones(4, np.int64), group=comm.name)
    assert ei.value.code == 161002 and "ACL_INT64" in ei.value.message
    with pytest.raises(ConfigError, match="no aclnn operator 'Nope'"):
        aclnn.invoke("Nope", x, group=comm.name)
    # the pool and the executor survive refusals: a good call still works
    np.testing.assert_array_equal(aclnn.invoke("RingSum", x, group=comm.name).wait(), x * comm.size)
    # counts that differ across ranks: a mismatch naming each rank's call (phase two's collective-call
    # check), on a first call (before the channels' set-up) and on a later one, never a race report
    from hcomm_kit.base.errors import CollectiveMismatchError

    s = aclnn.stream_pool(comm.rt).get(3)  # its failed kernel's error stays with the stream: not the default one
    for warm in (False, True):
        other = comm.split(0)
        if warm:
            aclnn.invoke("RingSum", x, group=other, stream=s).wait()
        with pytest.raises(CollectiveMismatchError) as ei:
            aclnn.invoke("RingSum", np.ones(16 if comm.rank == 0 else 24, np.float32), group=other, stream=s).wait()
        text = str(ei.value)
        assert "collective mismatch" in text, text
        assert "rank 0: aclnnRingSum(dtype=fp32, op=sum, count=16, root=0)" in text, text
        assert "rank 1: aclnnRingSum(dtype=fp32, op=sum, count=24, root=0)" in text, text
        try:
            s.synchronize()  # a rank whose kernel was enqueued: the stream's error, consumed
        except Exception:  # noqa: BLE001 - the mismatch again
            pass
        other.abort()


@pytest.mark.mpi(np=[1], env={"HCOMM_KIT_SOC": "Ascend950"}, timeout=300)
def test_invoker_product_gate(comm) -> None:
    """acl-notify operators run on A2/A3 only (op.toml products): phase one refuses on 950."""
    import hcomm_kit.aclnn as aclnn
    from hcomm_kit.base.errors import AclError

    op = aclnn.load(scaffold("ring-allreduce", "acl-notify"))
    with pytest.raises(AclError, match="op.toml products") as ei:
        aclnn.invoke(op.name, np.ones(8, np.float32), group=comm.name)
    assert ei.value.code == 161002


@pytest.mark.mpi(np=[2], timeout=300)
def test_workspace_pool_reuses_memory(comm) -> None:
    """1000 calls (staged numpy in/out, and a strided device view needing a workspace) allocate
    nothing after the first; the pool's size stays put and everything is back when idle."""
    import hcomm_kit.aclnn as aclnn
    from hcomm_kit.aclnn.meta import TensorDesc
    from hcomm_kit.core.device import DeviceBuffer

    op = aclnn.load(scaffold("ring-allreduce", name="ring_sum"))
    pool = aclnn.workspace_pool(comm.rt)
    x = make_input(comm.rank, 100, "fp32")
    want = expected("ring-allreduce", comm.rank, comm.size, 100, "fp32")
    np.testing.assert_array_equal(aclnn.invoke("RingSum", x, group=comm.name).wait(), want)
    # a strided view: column 0 of a [100, 2] matrix -> the workspace stages it
    m = DeviceBuffer.from_numpy(np.stack([x, np.zeros_like(x)], axis=1))
    yb = DeviceBuffer.empty(100, "fp32")
    tx = TensorDesc(op.meta, m.ptr, (100,), "fp32", strides=(2,), storage=(100, 2))
    ty = TensorDesc(op.meta, yb.ptr, (100,), "fp32")
    s = aclnn.stream_pool(comm.rt).get(0)
    size, ex = op.get_workspace_size(tx, ty, group=comm.name)
    assert size >= 400
    ws = pool.acquire(size)
    op.run(ws.ptr, size, ex, s.handle)
    s.synchronize()
    pool.release(ws)
    np.testing.assert_array_equal(yb.numpy(), want)
    allocs, held = pool.allocations, pool.size
    for i in range(1000):
        got = aclnn.invoke("RingSum", x, group=comm.name).wait()
        if i % 250 == 0:
            size, ex = op.get_workspace_size(tx, ty, group=comm.name)
            ws = pool.acquire(size)
            op.run(ws.ptr, size, ex, s.handle)
            s.synchronize()
            pool.release(ws)
    np.testing.assert_array_equal(got, want)
    assert (pool.allocations, pool.size) == (allocs, held), pool
    assert pool.in_use == 0
    tx.close()
    ty.close()
