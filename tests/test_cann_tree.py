"""The CANN-shaped tree (``hcomm-kit config --ascend-home DIR``): CANN-style build files run
unchanged against it, with ``source DIR/set_env.sh`` as on a CANN install.

* tests/cann_tree/collectives: a program and Makefile shaped like CANN's 01/02 HCCL examples
  (``-I$ASCEND_HOME_PATH/include -L$ASCEND_HOME_PATH/lib64 -lhccl -lascendcl``, ``make``, ``make test``).
* tests/cann_tree/custom_op: a custom operator project shaped like CANN's 04/05 examples
  (``find_package(ASC)``, ``find_package(AICPU)``, ``project(... LANGUAGES CXX AICPU ASC)``, the host
  library built with ``_GLIBCXX_USE_CXX11_ABI=0`` and linked against every CANN library name, an
  ``.asc`` launch with ``<<<>>>`` and an ``.aicpu`` kernel entry, the device pass with
  ``KERNEL_MODE=ON`` linking ``ccl_kernel`` and packing/signing/registering the AICPU package,
  installs into ``opp/vendors/cust``), and its testcase Makefile: ``make``, ``make test`` through both
  launch paths (aclrt and ``HCCL_CUSTOM_KERNEL_LAUNCH_ASC=1``), several rank counts and products.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hcomm_kit.build import cann_tree

SRC = Path(__file__).parent / "cann_tree"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = cann_tree.write_tree(tmp_path_factory.mktemp("cann") / "Ascend" / "cann")
    assert cann_tree.check_tree(root) == []
    return root


def sh(tree: Path, script: str, cwd: Path, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run ``script`` with bash after ``source <tree>/set_env.sh`` (a clean HCOMM_KIT_* environment)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("HCOMM_KIT_", "ASCEND_")) or k == "HCOMM_KIT_CACHE_DIR"}
    e.update(HCCL_EXEC_TIMEOUT="120", HCCL_CONNECT_TIMEOUT="60", **env)
    return subprocess.run(["bash", "-c", f"set -e; source '{tree}/set_env.sh'; {script}"], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)


def test_tree_layout_and_environment(tree: Path) -> None:
    r = sh(tree, 'echo "$ASCEND_HOME_PATH|$LD_LIBRARY_PATH|$CMAKE_PREFIX_PATH"; command -v hk-asc', tree)
    assert r.returncode == 0, r.stderr
    home, ld, prefix = r.stdout.splitlines()[0].split("|")
    assert home == str(tree) and ld.startswith(f"{tree}/lib64") and prefix.startswith(str(tree))
    assert r.stdout.splitlines()[1] == f"{tree}/bin/hk-asc"
    for name in cann_tree.EMULATED_LIBS:
        assert os.path.realpath(tree / "lib64" / f"lib{name}.so") == str(tree / "lib64" / "libhcomm_emu.so")
    for name in cann_tree.STUB_LIBS:  # link-only stubs with their own soname
        out = subprocess.run(["readelf", "-d", str(tree / "lib64" / f"lib{name}.so")], capture_output=True, text=True)
        assert f"[lib{name}.so]" in out.stdout
    assert (tree / "lib64" / "builtin_kernels" / "liballreduce_aicpu_kernel.so").is_file()
    for sub in ("aicpu/kernel", "aicpu/config", "include", "lib64"):
        assert (tree / "opp" / "vendors" / "cust" / sub).is_dir()
    # refreshing the tree keeps installed operators
    marker = tree / "opp" / "vendors" / "cust" / "lib64" / "libmine.so"
    marker.write_text("x")
    cann_tree.write_tree(tree)
    assert marker.read_text() == "x"
    marker.unlink()


def test_cann_example_makefile_builds_and_runs(tree: Path, tmp_path: Path) -> None:
    work = tmp_path / "collectives"
    shutil.copytree(SRC / "collectives", work)
    r = sh(tree, "make && make test", work, HCOMM_KIT_DEVICE_COUNT="3")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS 3 ranks" in r.stdout and "rankId: 2, output:" in r.stdout


def test_ai_core_kernels_are_refused_clearly(tree: Path, tmp_path: Path) -> None:
    src = tmp_path / "vec.asc"
    src.write_text("__global__ __aicore__ void add(int* x) { x[0] = 1; }\n")
    r = sh(tree, f"hk-asc -o {tmp_path}/vec.o -c {src}", tmp_path)
    assert r.returncode != 0 and "AI Core kernels" in r.stderr and str(src) in r.stderr
    r = sh(tree, "$ASCEND_HOME_PATH/tools/ccec_compiler/bin/ccec -c x.cce", tmp_path)
    assert r.returncode != 0 and "not emulated" in r.stderr


def test_cross_compiler_named_in_cxx_never_execs_itself(tree: Path, tmp_path: Path) -> None:
    # CMake exports CXX=<the compiler it was given>: the wrapper must not exec itself forever.
    gxx = tree / "toolkit" / "toolchain" / "hcc" / "bin" / f"{cann_tree.CROSS_PREFIX}g++"
    gcc = gxx.with_name(f"{cann_tree.CROSS_PREFIX}gcc")
    for tool, var in ((gxx, "CXX"), (gcc, "CC")):
        r = sh(tree, f"{tool} -dumpversion", tmp_path, timeout=20, **{var: str(tool)})
        assert r.returncode == 0 and r.stdout.strip()[:1].isdigit(), r.stderr
    # a user's CXX is still honoured (one level)
    r = sh(tree, f"{gxx} -dumpversion", tmp_path, timeout=20, CXX="echo user-cxx")
    assert r.stdout.strip() == "user-cxx -dumpversion"


def test_asc_launch_rewrite_skips_strings_and_comments(tree: Path, tmp_path: Path) -> None:
    # CANN's 04/05 examples log "... with <<<>>> syntax" next to the real launch.
    src = tmp_path / "launch.asc"
    src.write_text('#include <cstdio>\n#include <cstdint>\n'
                   'extern "C" __global__ __aicpu__ uint32_t K(void *args);\n'
                   '// K<<<1, nullptr, s>>>(x) in a comment; __aicore__ too\n'
                   'int Launch(void *stream) {\n'
                   '    std::puts("Launching kernel with <<<>>> syntax");\n'
                   '    const char *raw = R"x(K<<<2>>>( and "quotes" )x"; (void)raw;\n'
                   '    long big = 1\'000\'000; char q = \'"\'; (void)big; (void)q;\n'
                   '    int arg = 0;\n'
                   '    K<<<1, nullptr, stream>>>(&arg, sizeof(arg));\n'
                   '    std::puts("done <<<>>> (");\n'
                   '    return 0;\n}\n')
    r = sh(tree, f"hk-asc -std=c++17 -Wall -Werror -o {tmp_path}/launch.o -c {src}", tmp_path)
    assert r.returncode == 0, r.stderr
    body = (tmp_path / "launch.o.hk.cc").read_text()
    assert body.count("hcomm_kit_asc_launch_aicpu(") == 1
    assert 'hcomm_kit_asc_launch_aicpu("K", 1, nullptr, stream, &arg, sizeof(arg));' in body
    assert '"Launching kernel with <<<>>> syntax"' in body and 'R"x(K<<<2>>>( and "quotes" )x"' in body


def _build_custom_op(tree: Path, work: Path) -> None:
    shutil.copytree(SRC / "custom_op", work)
    device, host = work / "build_device", work / "build"
    steps = (f"cmake -S . -B {device} -DKERNEL_MODE=ON -DBUILD_DEVICE_DIR={device}",
             f"cmake --build {device}", f"cmake --install {device}",
             f"cmake -S . -B {host} -DBUILD_DEVICE_DIR={device}", f"cmake --build {host}", f"cmake --install {host}",
             "make -C testcase")
    for step in steps:
        r = sh(tree, step, work)
        assert r.returncode == 0, f"{step}\n{r.stdout[-4000:]}{r.stderr[-4000:]}"


@pytest.mark.slow
def test_custom_operator_cmake_project_builds_installs_and_runs(tree: Path, tmp_path: Path) -> None:
    work = tmp_path / "custom_op"
    _build_custom_op(tree, work)
    cust = tree / "opp" / "vendors" / "cust"
    for f in ("lib64/libhccl_custom_shift.so", "include/hccl_custom_shift.h", "aicpu/config/libshift_aicpu_kernel.json",
              "aicpu/kernel/libshift_aicpu_kernel.so", "aicpu/kernel/aicpu_hccl_custom_shift.tar.gz"):
        assert (cust / f).is_file(), f
    for ranks, soc, asc in ((2, "Ascend910B", ""), (4, "Ascend910_93", "1"), (8, "Ascend950", ""), (3, "Ascend950", "1")):
        r = sh(tree, "make test", work / "testcase", HCOMM_KIT_DEVICE_COUNT=str(ranks), HCOMM_KIT_SOC=soc,
               HCCL_BUFFSIZE="1", HCCL_CUSTOM_KERNEL_LAUNCH_ASC=asc)
        assert r.returncode == 0 and f"PASS {ranks} ranks" in r.stdout, f"{ranks} {soc} asc={asc}\n{r.stdout}{r.stderr}"
    # Only the signed package installed (as on CANN): the load error names the paths and the package.
    (cust / "aicpu" / "kernel" / "libshift_aicpu_kernel.so").unlink()
    r = sh(tree, "make test", work / "testcase", HCOMM_KIT_DEVICE_COUNT="2")
    assert r.returncode != 0
    assert "libshift_aicpu_kernel.so" in r.stderr and "aicpu_hccl_custom_shift.tar.gz" in r.stderr, r.stderr
