"""The ctypes mirrors in hcomm_kit.runtime match the emulator's public C headers.

A probe program is compiled against the headers only (no emulator library needed) and prints
sizeof/offsetof of every mirrored struct, union and member, the value of every mirrored enum
member / flag macro / error code, and the bytes produced by the header-inline initialisers.
Probes are grouped per header, so a problem in one header fails only the tests that need it.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hcomm_kit.runtime import codes, enums, structs

try:
    from hcomm_kit.build.emulator import get_include

    INCLUDE = Path(get_include())
except Exception:  # noqa: BLE001 - the emulator package may be incomplete while it is being written
    INCLUDE = Path(__file__).resolve().parent.parent / "hcomm_kit" / "emu" / "include"

CXX = shutil.which("g++")

pytestmark = [
    pytest.mark.skipif(CXX is None, reason="g++ not found"),
    pytest.mark.skipif(not (INCLUDE / "acl" / "acl_rt.h").is_file(), reason=f"headers missing under {INCLUDE}"),
]


# ---- probe generation -----------------------------------------------------------------------
@dataclass
class Section:
    """One probe program: the headers it includes and the lines of its main()."""

    key: str
    headers: list[str]
    body: list[str] = field(default_factory=list)

    def source(self) -> str:
        inc = "\n".join(f'#include "{h}"' for h in self.headers)
        body = "\n".join("    " + line for line in self.body)
        return f"""#include <cstdio>
#include <cstddef>
#include <cstring>
{inc}
#define SZ(T) std::printf("S %s %zu\\n", #T, sizeof(T));
#define OFF(T, F) std::printf("F %s %s %zu %zu\\n", #T, #F, offsetof(T, F), sizeof(((T*)0)->F));
#define VAL(N) std::printf("V %s %lld\\n", #N, (long long)(N));
static void dump(const char* label, const void* p, size_t n) {{
    std::printf("B %s ", label);
    for (size_t i = 0; i < n; ++i) std::printf("%02x", ((const unsigned char*)p)[i]);
    std::printf("\\n");
}}
int main() {{
{body}
    return 0;
}}
"""


def _sections() -> dict[str, Section]:
    out: dict[str, Section] = {}

    def sec(key: str, header: str) -> Section:
        return out.setdefault(key, Section(key, [header]))

    for cls, cname, header, _optional in structs.LAYOUTS:
        s = sec(f"layout:{cname}" if _optional else header, header)
        s.body.append(f"SZ({cname})")
        for path, _off, _size in structs.iter_fields(cls):
            s.body.append(f"OFF({cname}, {path})")
    for enum_cls, header in enums.C_ENUMS:
        s = sec(header, header)
        for name in enum_cls.__members__:
            s.body.append(f"VAL({name})")
    s = sec("codes:acl", "acl/acl_rt.h")
    for name in list(codes.ACL_CODES.values()) + list(codes.ACL_RT_CODES.values()) + list(codes.ACL_ALIASES):
        s.body.append(f"VAL({name})")
    # Header-inline initialisers, each in its own probe.
    for key, header, ctype, call in _INITS:
        s = sec(f"init:{key}", header)
        for fill in ("5A", "A5"):  # bytes equal under both fills are the ones the initialiser writes
            s.body += ["{", f"{ctype} v[2];", f"std::memset(v, 0x{fill}, sizeof v);", call,
                       f'dump("{key}_{fill}", v, sizeof v);', "}"]
    return out


# (key, header, C type, C call on array v[2]) -> Python equivalent in _PY_INITS
_INITS = [
    ("HcclChannelDescInit", "hccl/hccl_channel.h", "HcclChannelDesc", "HcclChannelDescInit(v, 2);"),
    ("ThreadConfigInit", "hccl/hccl_res.h", "ThreadConfig", "ThreadConfigInit(v, 2);"),
    ("EndpointDescInit", "hcomm_res_defs.h", "EndpointDesc", "EndpointDescInit(v, 2);"),
    ("CommLinkInit", "hccl/hccl_rank_graph.h", "CommLink", "CommLinkInit(v, 2);"),
    ("HcclKernelLaunchCfgInit", "hccl/hccl_launch.h", "HcclKernelLaunchCfg",
     "HcclKernelLaunchCfgInit(&v[0]); HcclKernelLaunchCfgInit(&v[1]);"),
    ("HcclOpDescInit", "hccl/hccl_launch.h", "HcclOpDesc", "HcclOpDescInit(&v[0]); HcclOpDescInit(&v[1]);"),
    ("HcclCommConfigInit", "hccl/hccl_comm.h", "HcclCommConfig",
     "HcclCommConfigInit(&v[0]); HcclCommConfigInit(&v[1]);"),
]

_PY_INITS = {
    "HcclChannelDescInit": (structs.HcclChannelDesc, structs.channel_desc_init),
    "ThreadConfigInit": (structs.ThreadConfig, structs.thread_config_init),
    "EndpointDescInit": (structs.EndpointDesc, structs.endpoint_desc_init),
    "CommLinkInit": (structs.CommLink, structs.comm_link_init),
    "HcclKernelLaunchCfgInit": (structs.HcclKernelLaunchCfg, lambda a: [structs.kernel_launch_cfg_init(x) for x in a]),
    "HcclOpDescInit": (structs.HcclOpDesc, lambda a: [structs.op_desc_init(x) for x in a]),
    "HcclCommConfigInit": (structs.HcclCommConfig, lambda a: [structs.hccl_comm_config_init(x) for x in a]),
}


@dataclass
class ProbeResult:
    ok: bool
    output: str
    sizes: dict[str, int] = field(default_factory=dict)
    fields: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)


def _run_probe(section: Section, workdir: Path) -> ProbeResult:
    name = section.key.replace("/", "_").replace(":", "_").replace(".", "_")
    src = workdir / f"probe_{name}.cc"
    exe = workdir / f"probe_{name}"
    src.write_text(section.source())
    cmd = [CXX, "-std=c++17", "-Wno-invalid-offsetof", "-Wno-deprecated-declarations",
           f"-I{INCLUDE}", str(src), "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return ProbeResult(False, f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        return ProbeResult(False, f"probe exited {run.returncode}\n{run.stderr}")
    res = ProbeResult(True, run.stdout)
    for line in run.stdout.splitlines():
        tag, *rest = line.split()
        if tag == "S":
            res.sizes[rest[0]] = int(rest[1])
        elif tag == "F":
            res.fields[(rest[0], rest[1])] = (int(rest[2]), int(rest[3]))
        elif tag == "V":
            res.values[rest[0]] = int(rest[1])
        elif tag == "B":
            res.blobs[rest[0]] = bytes.fromhex(rest[1])
    return res


SECTIONS = _sections()


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProbeResult]:
    workdir = tmp_path_factory.mktemp("layout_probe")
    todo = {k: s for k, s in SECTIONS.items() if all((INCLUDE / h).is_file() for h in s.headers)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {k: pool.submit(_run_probe, s, workdir) for k, s in todo.items()}
        return {k: f.result() for k, f in futures.items()}


def _probe(probes: dict[str, ProbeResult], key: str, optional: bool = False) -> ProbeResult:
    if key not in probes:
        pytest.skip(f"header for probe {key!r} is not present under {INCLUDE}")
    res = probes[key]
    if not res.ok:
        if optional:
            pytest.skip(f"optional layout not declared compatibly:\n{res.output[-2000:]}")
        pytest.fail(f"probe {key!r} failed:\n{res.output[-4000:]}")
    return res


# ---- tests ----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,cname,header,optional", structs.LAYOUTS, ids=[l[1] for l in structs.LAYOUTS])
def test_struct_layout(probes, cls, cname, header, optional):
    res = _probe(probes, f"layout:{cname}" if optional else header, optional)
    assert ctypes.sizeof(cls) == res.sizes[cname], f"sizeof({cname})"
    mismatches = []
    for path, off, size in structs.iter_fields(cls):
        c_off, c_size = res.fields[(cname, path)]
        if (off, size) != (c_off, c_size):
            mismatches.append(f"{cname}.{path}: python offset {off} size {size}, C offset {c_off} size {c_size}")
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("enum_cls,header", enums.C_ENUMS, ids=[e[0].__name__ for e in enums.C_ENUMS])
def test_enum_values(probes, enum_cls, header):
    res = _probe(probes, header)
    wrong = {n: (int(m), res.values[n]) for n, m in enum_cls.__members__.items() if int(m) != res.values[n]}
    assert not wrong, f"{enum_cls.__name__} members (python, C) differ: {wrong}"


def test_acl_error_codes_match_headers(probes):
    res = _probe(probes, "codes:acl")
    table = {**{v: k for k, v in codes.ACL_CODES.items()}, **{v: k for k, v in codes.ACL_RT_CODES.items()},
             **codes.ACL_ALIASES}
    wrong = {n: (v, res.values[n]) for n, v in table.items() if res.values[n] != v}
    assert not wrong, f"(python, C) differ: {wrong}"


def test_hccl_result_codes_match_table(probes):
    res = _probe(probes, "hccl/hccl_types.h")
    for code, name in codes.HCCL_CODES.items():
        assert res.values[name] == code, name


@pytest.mark.parametrize("key", [i[0] for i in _INITS])
def test_inline_initialisers_match_python(probes, key):
    res = _probe(probes, f"init:{key}")
    cls, py_init = _PY_INITS[key]
    arr = (cls * 2)()
    ctypes.memset(arr, 0x5A, ctypes.sizeof(arr))
    py_init(arr)
    c_a, c_b = res.blobs[f"{key}_5A"], res.blobs[f"{key}_A5"]
    py_bytes = bytes(arr)
    assert len(c_a) == len(py_bytes)
    written = [i for i in range(len(c_a)) if c_a[i] == c_b[i]]
    assert written, f"{key} wrote nothing"
    diff = [i for i in written if c_a[i] != py_bytes[i]]
    if diff:
        pytest.fail(f"{key}: {len(diff)} initialised bytes differ, first at offsets {diff[:16]} "
                    f"(C {c_a[diff[0]]:#04x}, python {py_bytes[diff[0]]:#04x})")
