"""ACL behaviour that CANN's published HCCL examples rely on (issue 13).

* Kernel isolation: tests/c/abi_isolation/ is the 05_custom_ops_allgather situation -- a host
  library built with ``-D_GLIBCXX_USE_CXX11_ABI=0`` and an AICPU kernel built with the default ABI
  define the same inline class. The kernel must run its own copy (the emulator loads kernels
  with RTLD_DEEPBIND); with default symbol binding it ran the host library's old-ABI code and
  crashed (``free(): invalid pointer`` / 507018).
* tests/c/acl_extras/: aclrtGetLastError / aclrtPeekAtLastError, aclrtCreateBinary /
  aclrtBinaryLoad / aclrtDestroyBinary, aclrtGetOpTimeOutInterval, and the message of a missing
  kernel library when CANN's signed package was installed instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hcomm_kit.build import emulator as _emulator

C_DIR = Path(__file__).parent / "c"
FLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror"]


def _cc(*args: str) -> None:
    cmd = ["g++", *FLAGS, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HCOMM_KIT_") or k == "HCOMM_KIT_CACHE_DIR"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


def test_kernel_sharing_an_inline_class_with_an_old_abi_host_library(tmp_path: Path) -> None:
    src = C_DIR / "abi_isolation"
    inc, lib = str(_emulator.get_include()), str(_emulator.library_dir())
    _cc("-fPIC", "-shared", "-D_GLIBCXX_USE_CXX11_ABI=0", str(src / "hostlib.cc"), "-o", str(tmp_path / "libabi_host.so"))
    _cc("-fPIC", "-shared", f"-I{inc}", str(src / "kernel.cc"), "-o", str(tmp_path / "abi_kernel.so"),
        f"-L{lib}", "-lhcomm_emu")
    (tmp_path / "abi_kernel.json").write_text((src / "abi_kernel.json").read_text())
    _cc(f"-I{inc}", str(src / "main.cc"), "-o", str(tmp_path / "abi_main"), f"-L{tmp_path}", "-labi_host",
        f"-L{lib}", "-lascendcl", f"-Wl,-rpath,{tmp_path}:{lib}")
    r = _run([str(tmp_path / "abi_main"), str(tmp_path)])
    assert r.returncode == 0 and r.stdout.strip() == "OK", r.stdout + r.stderr


def test_last_error_binary_images_timeout_interval_and_missing_kernel_message(tmp_path: Path) -> None:
    src = C_DIR / "acl_extras"
    inc, lib = str(_emulator.get_include()), str(_emulator.library_dir())
    so = tmp_path / "libhk_extras.so"
    _cc("-fPIC", "-shared", str(src / "kernel.cc"), "-o", str(so))
    exe = tmp_path / "acl_extras_main"
    _cc(f"-I{inc}", str(src / "main.cc"), "-o", str(exe), "-pthread", f"-L{lib}", "-lascendcl", "-lhccl",
        f"-Wl,-rpath,{lib}")
    # CANN's install layout: the op-info JSON in aicpu/config, only the signed package in aicpu/kernel.
    aicpu = tmp_path / "opp" / "vendors" / "cust" / "aicpu"
    (aicpu / "config").mkdir(parents=True)
    (aicpu / "kernel").mkdir()
    (aicpu / "config" / "extras_kernel.json").write_text((src / "extras_kernel.json").read_text())
    (aicpu / "kernel" / "aicpu_hccl_custom_extras.tar.gz").write_bytes(b"\x1f\x8b signed package stand-in")
    r = _run([str(exe), str(so), str(aicpu / "config")])
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "ALL OK" in r.stdout, out
    for group in ("lasterr", "binary", "interval", "missing"):
        assert f"ok {group}" in r.stdout, out
