"""The hand-written regression inputs of the fuzz targets, encoded for their Reader (fuzz_common.h).

Each case reproduces a failure of issue 12 or one a fuzzer found, as the byte program the target
executes. ``python tests/fuzz/regressions.py`` (re)writes them to ``regressions/<target>/<name>``;
tests/test_fuzz.py checks that the stored files match this encoder and replays every stored file
(these and the ``found-*`` inputs the fuzzers saved) in the quick suite.
"""

from __future__ import annotations

import struct
from pathlib import Path

REGRESSION_DIR = Path(__file__).resolve().parent / "regressions"
U64_MAX = 2**64 - 1


def u8(v: int) -> bytes:
    return struct.pack("<B", v)


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def small(v: int) -> bytes:
    """Reader::size() taking the small branch (v must be below its bound)."""
    return u8(0) + u32(v)


def big(v: int) -> bytes:
    """Reader::size() taking the full 64-bit branch."""
    return u8(0x80) + u64(v)


# ---- fuzz_args opcodes ---------------------------------------------------------------------------
INIT, INIT_USER, APPEND, APPEND_PH, GET_PH_BUF, PARA_UPDATE, FINALIZE, LAUNCH_CFG, LAUNCH_HOST, LAUNCH, LAUNCH_V2 = range(11)
NO_CFG = u8(0)


def cfg_one(attr_id: int, value: bytes) -> bytes:
    """A launch cfg with one attribute (Cfg::read: sel % 4 == 2 -> 1 attribute)."""
    return u8(2) + u8(attr_id) + value


ARGS = {
    # aclrtKernelArgsAppend(..., SIZE_MAX) returned 0, then free() aborted (issue 12, item 3).
    "append-size-max-user-mem": u8(INIT_USER) + small(1024) + u8(APPEND) + small(8) + u8(APPEND) + big(U64_MAX)
    + u8(APPEND) + big(U64_MAX - 1000) + u8(FINALIZE)
    + u8(LAUNCH_CFG) + u8(1) + NO_CFG,
    "append-size-max-system-buffer": u8(INIT) + u8(APPEND) + small(16) + u8(APPEND) + big(U64_MAX)
    + u8(APPEND) + big(U64_MAX - 15) + u8(FINALIZE) + u8(LAUNCH_CFG) + u8(1) + NO_CFG,
    # aclrtKernelArgsGetPlaceHolderBuffer(SIZE_MAX - 7) returned 0 and a pointer past the buffer;
    # the launch then crashed the host (issue 12, item 3).
    "placeholder-buffer-size-max-minus-7": u8(INIT) + u8(APPEND_PH) + u8(GET_PH_BUF) + u8(0) + big(U64_MAX - 7)
    + u8(FINALIZE) + u8(LAUNCH_CFG) + u8(1) + NO_CFG,
    "placeholder-buffer-wraps-after-append": u8(INIT_USER) + small(64) + u8(APPEND) + small(40) + u8(APPEND_PH)
    + u8(GET_PH_BUF) + u8(1) + big(U64_MAX - 47) + u8(GET_PH_BUF) + u8(1) + small(16) + u8(FINALIZE)
    + u8(LAUNCH_CFG) + u8(1) + NO_CFG,
    # A paramHandle one byte into a parameter: used to be dereferenced misaligned (fuzzer find).
    "param-handle-misaligned": u8(INIT) + u8(APPEND) + small(8) + u8(PARA_UPDATE) + u8(201) + u8(0) + small(8)
    + u8(GET_PH_BUF) + u8(201) + small(8),
    # Host blob above 4 GiB: std::vector threw out of the C API (fuzzer find: abort).
    "host-args-8gib": u8(LAUNCH_HOST) + u8(0) + big(8 << 30) + small(0),
    "host-args-placeholder-count-huge": u8(LAUNCH_HOST) + u8(0) + small(64) + big(1 << 40) + u8(0) + u8(0) + u8(0),
    # Device-argument launch past its allocation and with an address + size that wraps.
    "device-args-past-end-and-wrap": u8(LAUNCH) + small(4000) + small(200) + u8(LAUNCH) + big(U64_MAX - 15) + small(64),
    # Launch timeout of 2^64-1 us: the ns deadline used to wrap into the past (instant 507017).
    "launch-timeout-us-max": u8(LAUNCH_V2) + small(0) + small(16) + cfg_one(8, u64(U64_MAX)),
}

# ---- fuzz_json (mode byte, then text) --------------------------------------------------------------
OPINFO = b'{"Op": {"opInfo": {"opKernelLib": "AICPUKernel", "functionName": "F", "kernelSo": "libop.so"}}}'
JSON = {
    "duplicate-key": u8(1) + b'{"Op": {"opInfo": {"functionName": "a", "functionName": "b", "kernelSo": "x.so"}}}',
    "duplicate-key-large-object": u8(1) + b"{" + b",".join(b'"k%d": %d' % (i, i) for i in range(40))
    + b', "k17": 0}',
    "wrong-type-function-name": u8(1) + b'{"Op": {"opInfo": {"functionName": 5, "kernelSo": "x.so"}}}',
    "wrong-type-opinfo": u8(1) + b'{"Op": {"opInfo": ["functionName"]}}',
    "nul-in-kernel-so": u8(1) + b'{"Op": {"opInfo": {"functionName": "F", "kernelSo": "a\\u0000.so"}}}',
    "valid-op-info": u8(3) + OPINFO,
    "nesting-65": u8(1) + b"[" * 65 + b"]" * 65,
    "number-overflow": u8(1) + b'{"Op": 1e400}',
    "lone-surrogate": u8(1) + b'["\\ud800"]',
    "size-limit-16-bytes": u8(2 | (1 << 2)) + b'{"abcdefghij":1}x',
}

# ---- fuzz_hcomm ----------------------------------------------------------------------------------
VALID_THREAD = u8(0)
NATIVE_CHANNEL = u8(0)
LOC = u8(0)  # pick_addr: rank 0's device memory
RBUF = u8(2)  # pick_addr: the peer's HCCL buffer


def xfer(dst: bytes, src: bytes, n: bytes, dt: int | None = None, op: int | None = None, idx: int = 0) -> bytes:
    """Xfer::read: dst, src, n, [dtype, op], notify index."""
    out = dst + src + n
    if dt is not None:
        out += u8(dt) + u8(op or 0)
    return out + u8(0) + u8(idx)


HCOMM = {
    # count x element size wrapped to a small byte count, so a huge reduce passed the range
    # checks (issue 12: size/count overflow in the Hcomm device API).
    "local-reduce-count-overflow": u8(1) + VALID_THREAD + xfer(LOC + small(0), LOC + small(0), big((1 << 62) + 1), 4, 0),
    "write-reduce-count-overflow": u8(3) + VALID_THREAD + NATIVE_CHANNEL
    + xfer(RBUF + small(0), LOC + small(0), big((1 << 63) + 1), 2, 0),
    "local-copy-len-wraps-address-space": u8(0) + VALID_THREAD + xfer(LOC + small(64), LOC + small(0), big(U64_MAX - 63)),
}

CASES = {"args": ARGS, "json": JSON, "hcomm": HCOMM}


def write_all(root: Path = REGRESSION_DIR) -> list[Path]:
    """Write every case to ``root/<target>/<name>``; returns the paths."""
    out = []
    for target, cases in CASES.items():
        d = root / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in cases.items():
            p = d / name
            p.write_bytes(data)
            out.append(p)
    return out


if __name__ == "__main__":
    for path in write_all():
        print(path)
