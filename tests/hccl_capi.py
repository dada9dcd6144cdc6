"""numpy references for tests/c/hccl_coll/main.cc (HCCL's collective C API on the emulator).

The C program writes each rank's output of every case to ``<case>.r<rank>.bin`` and a manifest;
:func:`check_outputs` recomputes every expected output here, independently, with numpy: the
inputs (small integers, :func:`inputs`), the block layouts of the V-collectives and batch
patterns (:func:`vcount`), the reductions in int64 / float64 (exact for these values), and the
sentinel bytes of the gaps a collective must leave alone.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from hcomm_kit.build import emulator as _emulator

C_DIR = Path(__file__).parent / "c"
SENTINEL = 0xA5
NP = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
      "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "fp16": np.float16, "fp32": np.float32,
      "fp64": np.float64, "bf16": np.uint16}
SUM, PROD, MAX, MIN = 0, 1, 2, 3


SANITIZE_CFLAGS = {"": [], "address": ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"],
                   "thread": ["-fsanitize=thread", "-g"]}


def build(out: Path, sanitize: str = "") -> Path:
    """Compile the program CANN-style: ``g++ main.cc -I<include> -L<lib> -lhccl -lascendcl``
    (against the ``sanitize`` variant of the emulator, with the same -fsanitize flags)."""
    inc, lib = _emulator.get_include(), _emulator.library_dir(sanitize)
    exe = out / f"hccl_coll_main{'_' + sanitize if sanitize else ''}"
    cmd = ["g++", "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", *SANITIZE_CFLAGS[sanitize], f"-I{inc}",
           str(C_DIR / "hccl_coll" / "main.cc"), "-o", str(exe), f"-L{lib}", "-lhccl", "-lascendcl", "-pthread",
           f"-Wl,-rpath,{lib}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    return exe


def env(ranks: int, soc: str, **extra: str) -> dict[str, str]:
    """Environment of a run: the product, the device count, a 1 MB HCCL buffer (messages get sliced)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("HCOMM_KIT_") or k == "HCOMM_KIT_CACHE_DIR"}
    e.update(HCOMM_KIT_SOC=soc, HCOMM_KIT_DEVICE_COUNT=str(ranks), HCCL_BUFFSIZE="1", HCCL_EXEC_TIMEOUT="120",
             HCCL_CONNECT_TIMEOUT="60")
    e.update(extra)
    return e


def vcount(i: int, j: int, base: int, seed: int) -> int:
    return base + (i * 3 + j * 5 + seed) % 4


def inputs(seed: int, rank: int, count: int, dtype: str, op: int) -> np.ndarray:
    """The input of ``rank`` as int64 values (main.cc Value())."""
    m = 3 if op == PROD else 23
    v = (seed * 31 + rank * 7 + np.arange(count, dtype=np.int64) * 3) % m
    return v if dtype.startswith("uint") else v - m // 2


def encode(values: np.ndarray, dtype: str) -> bytes:
    """Element bytes of integer values in ``dtype`` (bf16: the upper half of the fp32 bits)."""
    if dtype == "bf16":
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    if dtype in ("fp16", "fp32", "fp64"):
        return values.astype(np.float64).astype(NP[dtype]).tobytes()
    return values.astype(NP[dtype]).tobytes()  # integers wrap like the C casts


def reduce(blocks: list[np.ndarray], op: int, dtype: str) -> np.ndarray:
    """Element-wise reduction over ranks; floats in float64 (keeps the sign of a zero product)."""
    stack = np.stack(blocks)
    if dtype in ("fp16", "bf16", "fp32", "fp64"):
        stack = stack.astype(np.float64)
    return {SUM: stack.sum(0), PROD: stack.prod(0), MAX: stack.max(0), MIN: stack.min(0)}[op]


def expected(kind: str, dtype: str, count: int, op: int, root: int, seed: int, n: int, r: int) -> bytes | None:
    """Expected output bytes of rank ``r`` (None: not compared, e.g. a non-root of reduce)."""
    size = np.dtype(NP[dtype]).itemsize
    x = lambda q, c: inputs(seed, q, c, dtype, op)  # noqa: E731
    gap = lambda elems: bytes([SENTINEL]) * (elems * size)  # noqa: E731
    if kind in ("allreduce", "allreduce_inplace"):
        return encode(reduce([x(q, count) for q in range(n)], op, dtype), dtype)
    if kind == "broadcast":
        return encode(x(root, count), dtype)
    if kind == "allgather":
        return b"".join(encode(x(q, count), dtype) for q in range(n))
    if kind == "reducescatter":
        return encode(reduce([x(q, count * n)[r * count:(r + 1) * count] for q in range(n)], op, dtype), dtype)
    if kind == "reduce":
        return encode(reduce([x(q, count) for q in range(n)], op, dtype), dtype) if r == root else None
    if kind == "gather":
        return b"".join(encode(x(q, count), dtype) for q in range(n)) if r == root else None
    if kind == "scatter":
        return encode(x(root, count * n)[r * count:(r + 1) * count], dtype)
    if kind == "alltoall":
        return b"".join(encode(x(q, count * n)[r * count:(r + 1) * count], dtype) for q in range(n))
    if kind in ("alltoallv", "alltoallvc"):
        out = b""
        for j in range(n):
            first = sum(vcount(j, k, count, seed) for k in range(r))  # rank j's packed send blocks
            c = vcount(j, r, count, seed)
            out += encode(x(j, first + c)[first:], dtype) + (gap(1) if kind == "alltoallv" else b"")
        return out
    if kind == "allgatherv":
        return b"".join(encode(x(j, vcount(j, 0, count, seed)), dtype) + gap(2) for j in range(n))
    if kind == "reducescatterv":
        first = sum(vcount(k, 0, count, seed) + 3 for k in range(r))
        c = vcount(r, 0, count, seed)
        total = sum(vcount(k, 0, count, seed) + 3 for k in range(n))
        return encode(reduce([x(q, total)[first:first + c] for q in range(n)], op, dtype), dtype)
    if kind == "sendrecv":
        return encode(x(r - 1, count), dtype) if r % 2 == 1 else gap(count)
    if kind in ("batchring", "batchring2", "batchmany"):  # aclnn_coll's batchring: one item each way
        return encode(x((r - 1) % n, count * {"batchring": 1, "batchring2": 2, "batchmany": 150}[kind]), dtype)
    if kind == "batchall":
        out = b""
        for j in range(n):
            if j == r:
                continue
            first = sum(vcount(j, k, count, seed) for k in range(r) if k != j)
            c = vcount(j, r, count, seed)
            out += encode(x(j, first + c)[first:], dtype)
        return out
    raise AssertionError(f"unknown case kind {kind}")


def check_outputs(out: Path, ranks: int, soc: str) -> int:
    """Compare every case's output files with numpy; returns the number of cases checked."""
    lines = (out / "manifest.txt").read_text().splitlines()
    header = lines[0].split()
    assert header == ["ranks", str(ranks), "soc", soc], header
    cases = 0
    for line in lines[1:]:
        name, kind, dtype, count, op, root, seed = line.split()
        for r in range(ranks):
            want = expected(kind, dtype, int(count), int(op), int(root), int(seed), ranks, r)
            if want is None:
                continue
            got = (out / f"{name}.r{r}.bin").read_bytes()
            if got != want:
                size = np.dtype(NP[dtype]).itemsize
                diff = next(i for i in range(min(len(got), len(want))) if got[i] != want[i]) \
                    if len(got) == len(want) else -1
                raise AssertionError(f"{name} (rank {r} of {ranks}, {soc}): {len(got)} bytes, expected {len(want)}; "
                                     f"first difference at element {diff // size if diff >= 0 else '?'}")
        cases += 1
    return cases
