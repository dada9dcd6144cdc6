"""Builds the CANN-example-style operators under tests/c/ (kernel .so + C++ host program) against the emulator."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from hcomm_kit.build import emulator as _emulator

C_DIR = Path(__file__).parent / "c"
FLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror"]
SANITIZE_FLAGS = {
    "": [],
    "address": ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-Og", "-g1"],
    "thread": ["-fsanitize=thread", "-g"],
}


def build_example(name: str, out: Path, sanitize: str = "", extra: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """Compiles tests/c/<name>/{kernel.cc,main.cc}; returns (host program, op-info JSON beside the kernel .so).

    sanitize: "" or a sanitizer variant of the emulator ("address", "thread"): the program and the
    kernel are then compiled with the same -fsanitize flags and linked against that library.
    extra: more compiler flags for both (e.g. "-g")."""
    src = C_DIR / name
    cflags = _emulator.cflags().split() + SANITIZE_FLAGS[sanitize] + list(extra)
    libs = _emulator.libs(sanitize or None).split()
    json_src = next(src.glob("*.json"))
    so = out / (json_src.stem + ".so")
    shutil.copy(json_src, out / json_src.name)
    exe = out / f"{name}_main"
    for cmd in (["g++", *FLAGS, "-fPIC", "-shared", str(src / "kernel.cc"), *cflags, *libs, "-o", str(so)],
                ["g++", *FLAGS, f"-I{src}", str(src / "main.cc"), *cflags, *libs, "-lpthread", "-o", str(exe)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    return exe, out / json_src.name
