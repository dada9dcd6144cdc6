"""pytest plugin for multi-rank tests (registered as ``pytest11`` entry point ``hcomm_kit``).

Mark a test with ``@pytest.mark.mpi(np=[2, 3, 4])`` (optional ``timeout=`` seconds per test,
default 120, and ``env={"HCCL_BUFFSIZE": "1"}``: variables set for the whole mpirun job, read by
the runtime at start-up; ``${HCOMM_KIT_MPI_RESULTS}`` in a value is the job's own log directory,
removed with it when the job passed): it is parametrized over the rank counts (ids ``np2``, ``np3``, ...).
A rank count may carry marks: ``np=[2, 3, pytest.param(8, marks=pytest.mark.slow)]``.

* **Under MPI** (``mpirun -np N python -m pytest ...``): only the items with ``np == N`` are kept
  and the body runs on every rank; ranks meet at a barrier before each test. A rank whose test
  fails prints the traceback and aborts the whole job (``MPI_Abort``), so no rank hangs.
* **Not under MPI** (plain ``pytest``): the items of one file with the same rank count run in one
  ``mpirun -np N python -m pytest <node ids> -x -q -p no:cacheprovider`` child job
  (``HCOMM_KIT_MPI_NP=N``), each rank's output going to its own log file. Each item passes or
  fails with what the ranks reported; a timeout (per item) or a crash fails the running item and
  shows the failing rank's traceback and log tail. Items not reached after a failure run in a
  new job. The per-job log directory is removed when the job passed; a failed job's stays (named
  in the failure message; the last 10 are kept, ``--keep-logs`` keeps every job's).

Options: ``--mpi-np N[,M]`` runs every mpi-marked test at these rank counts instead of its
marker's (what ``hcomm-kit test --np N`` uses); ``--keep-logs``. A failure shows each distinct
error once, with the ranks that reported it, and what the test printed (e.g. kernel logs);
Open MPI's banners only with ``-v``. Items run grouped by rank count (file by file), and a line
per rank count sums up the outcome at the end.

Fixtures: ``comm`` (one ``hcomm_kit.init()`` per process, closed at session end), ``mpi_comm``
(``mpi4py.MPI.COMM_WORLD``), ``mpi_np`` (the rank count of the item).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

ENV_NP = "HCOMM_KIT_MPI_NP"            # set by the harness in the child job: the item rank count
ENV_RESULTS = "HCOMM_KIT_MPI_RESULTS"  # child job: directory for per-rank result and log files
DEFAULT_TIMEOUT = 120.0
_MARKER_HELP = ("mpi(np=[2, 3, 4], timeout=120, env={}): run the test on each rank count under mpirun, "
                "with extra environment variables for the job (hcomm_kit.testing.plugin)")
_LOG_TAIL = 60
# Plugins that cost a lot at start-up (hypothesis: ~1.6 s) or reorder items; off in the child jobs.
_SLOW_PLUGINS_OFF = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:randomly", "-p", "no:xdist")
_COMM = None


# ---- helpers ---------------------------------------------------------------------------------
def _world_size() -> int | None:
    """The MPI world size of this process when started by an MPI launcher, else None."""
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        raw = os.environ.get(name, "")
        if raw.isdigit():
            return int(raw)
    if "PMIX_RANK" in os.environ:
        return int(os.environ.get(ENV_NP, "1"))
    return None


def _world_rank() -> int:
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        raw = os.environ.get(name, "")
        if raw.isdigit():
            return int(raw)
    return 0


def _inner() -> bool:
    return _world_size() is not None


def _marker_params(marker) -> list:
    """The rank counts of a marker as ``pytest.param`` objects (marks of ``pytest.param(8, marks=...)`` kept)."""
    nps = marker.kwargs.get("np", marker.args[0] if marker.args else [2])
    if isinstance(nps, int) or hasattr(nps, "marks"):
        nps = [nps]
    out = []
    for n in nps:
        value, marks = (n.values[0], n.marks) if hasattr(n, "marks") else (n, ())
        out.append(pytest.param(int(value), marks=marks, id=f"np{int(value)}"))
    if not out:
        raise ValueError(f"@pytest.mark.mpi(np={nps!r}): give at least one rank count")
    from hcomm_kit.base.limits import check_np

    for prm in out:
        check_np(prm.values[0], what=f"@pytest.mark.mpi(np={nps!r}):")
    return out


def _marker_nps(marker) -> list[int]:
    """The rank counts of a marker (``np=[2, 3, pytest.param(8, marks=pytest.mark.slow)]`` -> [2, 3, 8])."""
    return [prm.values[0] for prm in _marker_params(marker)]


def _item_np(item) -> int | None:
    cs = getattr(item, "callspec", None)
    if cs is not None and "mpi_np" in cs.params:
        return int(cs.params["mpi_np"])
    return None


def _item_timeout(item) -> float:
    m = item.get_closest_marker("mpi")
    return float(m.kwargs.get("timeout", DEFAULT_TIMEOUT)) if m is not None else DEFAULT_TIMEOUT


def _item_env(item) -> tuple[tuple[str, str], ...]:
    m = item.get_closest_marker("mpi")
    env = (m.kwargs.get("env") if m is not None else None) or {}
    return tuple(sorted((str(k), str(v)) for k, v in env.items()))


def _outer_item(item) -> bool:
    return not _inner() and item.get_closest_marker("mpi") is not None and _item_np(item) is not None


# ---- hooks -----------------------------------------------------------------------------------
class _Alias:
    """Placeholder registered as ``hcomm_kit`` when this module was loaded with ``-p``, so that the
    ``pytest11`` entry point of the same module is skipped instead of registered twice."""


def pytest_addhooks(pluginmanager) -> None:
    if pluginmanager.get_plugin("hcomm_kit") is None:
        pluginmanager.register(_Alias(), name="hcomm_kit")


def entry_point_installed() -> bool:
    """True when the ``pytest11`` entry point of this plugin is installed (child pytest runs find it)."""
    from importlib.metadata import entry_points

    return any(ep.value == __name__ for ep in entry_points(group="pytest11"))


def _die_with_parent() -> None:
    """Linux: SIGKILL this rank when its launcher (Open MPI's prted) dies, e.g. when the harness
    kills a timed-out job; ranks live in their own process groups and would otherwise linger."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    if _inner():
        _die_with_parent()
        config._hk_results = None
        d = os.environ.get(ENV_RESULTS)
        if d:
            config._hk_results = open(Path(d) / f"rank{_world_rank()}.jsonl", "a", buffering=1)


def pytest_addoption(parser) -> None:
    group = parser.getgroup("hcomm_kit", "hcomm-kit multi-rank tests")
    group.addoption("--mpi-np", default=None, metavar="N[,M...]",
                    help="run every @pytest.mark.mpi test at these rank counts instead of its marker's")
    group.addoption("--keep-logs", action="store_true", default=False,
                    help="keep the log directory of every mpirun job (default: only failed jobs', the last 10)")


def _override_nps(config) -> list[int] | None:
    raw = config.getoption("mpi_np", default=None)
    if not raw:
        return None
    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.base.limits import check_np

    out = []
    for part in str(raw).split(","):
        try:
            out.append(check_np(int(part), what="--mpi-np"))
        except ValueError:
            raise pytest.UsageError(f"--mpi-np {raw!r}: expected rank counts like 4 or 2,3") from None
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
    return out


def pytest_generate_tests(metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("mpi")
    if marker is None:
        return
    override = _override_nps(metafunc.config)
    params = [pytest.param(n, id=f"np{n}") for n in override] if override else _marker_params(marker)
    if "mpi_np" not in metafunc.fixturenames:
        metafunc.fixturenames.append("mpi_np")
    metafunc.parametrize("mpi_np", params, scope="function")


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: jobs run only the selected items
def pytest_collection_modifyitems(session, config, items) -> None:
    world = _world_size()
    if world is not None:
        want = int(os.environ.get(ENV_NP, world))
        keep, drop = [], []
        for it in items:
            n = _item_np(it)
            (drop if n is not None and n != want else keep).append(it)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    else:
        # Group by rank count within each file: one job per (file, rank count) runs before the next
        # starts, so a run stopped at its first failure (-x) starts no other rank count.
        files: dict[str, int] = {}
        keyed = [((files.setdefault(str(it.path), len(files)), _item_np(it) or 0), i, it)
                 for i, it in enumerate(items)]
        items[:] = [it for _, _, it in sorted(keyed, key=lambda k: (k[0], k[1]))]
        config._hk_items = [it for it in items if _outer_item(it)]
        config._hk_results_by_id = {}
        config._hk_outcomes = {}  # rank count -> {outcome: count}
        config._hk_failed_logs = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    if _inner() and (_world_size() or 1) > 1 and "mpi4py.MPI" in sys.modules:
        sys.modules["mpi4py.MPI"].COMM_WORLD.Barrier()  # keep ranks in step (only once MPI is up)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    if not _outer_item(pyfuncitem):
        return None
    result = pyfuncitem.config._hk_results_by_id.get(pyfuncitem.nodeid)
    if result is None:
        _run_group(pyfuncitem)
        result = pyfuncitem.config._hk_results_by_id.get(pyfuncitem.nodeid)
    if result is None:
        pytest.fail("the mpirun job ended without running this test (see the log directory above)", pytrace=False)
    outcome, text = result
    counts = pyfuncitem.config._hk_outcomes.setdefault(_item_np(pyfuncitem), {})
    counts[outcome] = counts.get(outcome, 0) + 1
    if outcome == "passed":
        return True
    if outcome == "skipped":
        pytest.skip(text)
    pyfuncitem._hk_failure_text = text
    pytest.fail(text, pytrace=False)


class _FailureRepr:
    """The report of a failed multi-rank item: its whole text in the FAILURES section, one line
    (what failed where, and the error) in the short summary, also on CI where pytest would
    otherwise repeat the whole text there."""

    def __init__(self, text: str, nodeid: str) -> None:
        self.text = text
        lines = text.splitlines()
        head = lines[0] if lines else ""
        head = head[len(nodeid):].strip() if head.startswith(nodeid) else head
        err = next((ln[1:].strip() for ln in lines if ln.startswith("E ")), "")
        msg = f"{head} {err}".strip()
        self.reprcrash = _Crash(msg if len(msg) <= 300 else msg[:297] + "...")

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


class _Crash:
    __slots__ = ("message", "path", "lineno")

    def __init__(self, message: str) -> None:
        self.message, self.path, self.lineno = message, "", 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    text = getattr(item, "_hk_failure_text", None)
    if text is not None and rep.when == "call" and rep.failed:
        rep.longrepr = _FailureRepr(text, item.nodeid)


def pytest_runtest_logreport(report) -> None:
    if not _inner():
        return
    f = _RESULTS_FILE[0]
    if f is not None:
        rec = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
        if report.failed:
            rec["text"] = report.longreprtext
            rec["captured"] = _captured(report)
        elif report.skipped and isinstance(report.longrepr, tuple):
            rec["text"] = str(report.longrepr[2])
        f.write(json.dumps(rec) + "\n")
        f.flush()
    if report.failed and (_world_size() or 1) > 1:
        _abort(report)


_RESULTS_FILE: list = [None]


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session) -> None:
    _RESULTS_FILE[0] = getattr(session.config, "_hk_results", None)


def pytest_sessionfinish(session, exitstatus) -> None:
    global _COMM
    if _COMM is not None:
        try:
            _COMM.close()
        except Exception:
            pass
        _COMM = None


def _captured(report, limit: int = 40) -> str:
    """What the test printed (e.g. the kernel's logs on stderr), last ``limit`` lines per stream."""
    out = []
    for title, content in getattr(report, "sections", []):
        if title.startswith("Captured std") and content.strip():
            lines = content.rstrip().splitlines()
            cut = f" (last {limit} of {len(lines)} lines)" if len(lines) > limit else ""
            out.append(f"\n--- {title.lower()}{cut} ---\n" + "\n".join(lines[-limit:]))
    return "".join(out)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """One line per rank count: how its items ended, and which were not reached."""
    outcomes = getattr(config, "_hk_outcomes", None)
    items = getattr(config, "_hk_items", None)
    if outcomes is None or not items:
        return
    wanted: dict[int, int] = {}
    for it in items:
        n = _item_np(it)
        wanted[n] = wanted.get(n, 0) + 1
    parts = []
    for n in sorted(wanted):
        got = outcomes.get(n, {})
        words = [f"{v} {k}" for k, v in sorted(got.items())]
        left = wanted[n] - sum(got.values())
        if left:
            words.append(f"{left} not run")
        parts.append(f"np{n}: " + ", ".join(words))
    line = "hcomm_kit mpi tests: " + "; ".join(parts)
    if any(o.get("failed") for o in outcomes.values()) and any(
            wanted[n] > sum(outcomes.get(n, {}).values()) for n in wanted):
        line += " (stopped at the first failure; `hcomm-kit test --keep-going`, or pytest without -x, runs the rest)"
    logs = getattr(config, "_hk_failed_logs", [])
    if logs:
        line += f"; logs of the failed job{'s' if len(logs) > 1 else ''}: {', '.join(map(str, logs))}"
    terminalreporter.write_line(line)


def _abort(report) -> None:
    """One rank failed: print its traceback and abort every rank (no one waits for it forever)."""
    rank = _world_rank()
    sys.stderr.write(f"\n[hcomm_kit.testing] rank {rank}: {report.nodeid} {report.when} FAILED; aborting the "
                     f"MPI job\n{report.longreprtext}\n")
    sys.stderr.flush()
    sys.stdout.flush()
    # Ranks failing the same check report it within moments: let them write their report first, so
    # the failure names every rank that saw it ("ranks 0-3"), then stop the job.
    time.sleep(0.3)
    try:
        from mpi4py import MPI

        MPI.COMM_WORLD.Abort(1)
    except Exception:
        os._exit(1)


# ---- fixtures --------------------------------------------------------------------------------
@pytest.fixture
def mpi_np(request) -> int:
    """The rank count of this item (from @pytest.mark.mpi)."""
    return int(getattr(request, "param", 1))


@pytest.fixture
def comm(request):
    """The hcomm_kit communicator of this process (``hcomm_kit.init()``, shared by all tests).

    In the outer (non-MPI) process of an mpi-marked test it is None: the body runs under mpirun.
    """
    global _COMM
    if _outer_item(request.node):
        return None
    if _COMM is None or _COMM.closed:
        import hcomm_kit

        _COMM = hcomm_kit.init()
    return _COMM


@pytest.fixture
def mpi_comm(request):
    """``mpi4py.MPI.COMM_WORLD`` (None in the outer process of an mpi-marked test)."""
    if _outer_item(request.node):
        return None
    from mpi4py import MPI

    return MPI.COMM_WORLD


# ---- the outer runner ------------------------------------------------------------------------
def _group_key(item):
    """Items run in one job when they share file, rank count and job environment (timeouts are
    per item: the watchdog uses the running item's)."""
    return (str(item.path), _item_np(item), _item_env(item))


def _run_group(first) -> None:
    """Run ``first`` and the pending items of its group in one mpirun job; store their results."""
    import subprocess

    from hcomm_kit.jobs.mpirun import mpirun_argv, shm_backing_dir

    config = first.config
    results = config._hk_results_by_id
    key = _group_key(first)
    items = config._hk_items
    start = items.index(first) if first in items else 0
    batch = [first] + [it for it in items[start + 1:] if _group_key(it) == key and it.nodeid not in results]
    np_, timeout = key[1], _item_timeout(first)
    logdir = _new_logdir(np_)
    env = {ENV_NP: str(np_), ENV_RESULTS: str(logdir), "HCOMM_KIT_JOB_DIR": str(logdir),
           **{k: v.replace("${" + ENV_RESULTS + "}", str(logdir)) for k, v in key[2]}}
    if "HCCL_EXEC_TIMEOUT" not in os.environ:
        # device waits fail before the harness kills (the shortest item timeout of the job)
        env["HCCL_EXEC_TIMEOUT"] = str(max(1, int(min(_item_timeout(it) for it in batch)) - 5))
    if "HCOMM_KIT_SPIN_US" not in os.environ and (os.cpu_count() or 1) < np_:
        env["HCOMM_KIT_SPIN_US"] = "0"
    pytest_args = [sys.executable, "-m", "pytest", *[it.nodeid for it in batch], "-x", "-q",
                   "-p", "no:cacheprovider", *_SLOW_PLUGINS_OFF, "--rootdir", str(config.rootpath)]
    if config.inifile:
        pytest_args += ["-c", str(config.inifile)]
    if not entry_point_installed():
        pytest_args += ["-p", "hcomm_kit.testing.plugin"]
    if config.getoption("mpi_np", default=None):
        pytest_args += ["--mpi-np", str(config.getoption("mpi_np"))]  # the same items (ids) in the job
    tb = config.getoption("tbstyle", default="auto")
    if tb and tb != "auto":
        pytest_args += [f"--tb={tb}"]
    redirect = 'exec "$0" "$@" >"$HCOMM_KIT_MPI_RESULTS/rank${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}.log" 2>&1'
    argv = mpirun_argv(np_, ["/bin/sh", "-c", redirect, *pytest_args], env=env, tag_output=False)
    # Open MPI occasionally fails to start its PMIx listener ("The PMIx server's listener thread
    # failed to start"), before any rank exists: that launcher failure alone is retried, once.
    for attempt in range(2):
        with shm_backing_dir() as shm_env, open(logdir / "mpirun.log", "ab") as mlog, \
                _job_progress(config, f"{Path(first.path).name} np{np_}", len(batch)) as show:
            full_env = dict(os.environ, **env, **shm_env)
            proc = subprocess.Popen(argv, cwd=str(config.rootpath), env=full_env, stdout=mlog,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            done_ids: set[str] = set()
            last = time.monotonic()
            timed_out = False
            while proc.poll() is None:
                time.sleep(0.05)
                finished = _finished_ids(logdir, 0)
                if len(finished) > len(done_ids):
                    done_ids, last = finished, time.monotonic()
                    show(len(done_ids))
                    running = next((it for it in batch if it.nodeid not in done_ids), None)
                    timeout = _item_timeout(running) if running is not None else timeout
                elif time.monotonic() - last > timeout:
                    timed_out = True
                    # what every rank waits for, before the job is killed (the emulator answers)
                    from hcomm_kit.jobs.job import describe_ranks, job_processes, request_rank_states

                    states = request_rank_states(logdir, np_, wait=1.5)
                    lines = describe_ranks(np_, states, job_processes([proc.pid]))
                    report = next((st["report"] for st in states.values() if st.get("report")), "")
                    (logdir / "hang-state.txt").write_text("\n".join(lines) + (f"\n{report}" if report else ""))
                    _kill(proc)
                    break
            proc.wait()
        if attempt or proc.returncode == 0 or timed_out or not _launcher_failed(logdir):
            break
    _collect(batch, results, logdir, np_, timeout, timed_out, proc)
    _settle_logdir(config, logdir, batch, results, proc.returncode)


# ---- per-job log directories -----------------------------------------------------------------
_KEEP_FAILED = 10  # failed jobs' log directories kept (newest first)


def _logs_root() -> Path:
    import tempfile

    return Path(tempfile.gettempdir()) / "hcomm_kit_logs"


def _new_logdir(np_: int) -> Path:
    import tempfile

    root = _logs_root()
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"np{np_}-{time.strftime('%Y%m%d-%H%M%S')}-", dir=root))


def _settle_logdir(config, logdir: Path, batch, results, returncode) -> None:
    """Remove a passed job's logs (unless --keep-logs); mark a failed job's and prune old ones."""
    import shutil

    failed = returncode != 0 or any(results[it.nodeid][0] == "failed" for it in batch if it.nodeid in results)
    if not failed:
        if not config.getoption("keep_logs", default=False):
            shutil.rmtree(logdir, ignore_errors=True)
        return
    (logdir / "FAILED").write_text("this mpirun job failed; hcomm-kit keeps the last "
                                   f"{_KEEP_FAILED} failed jobs' logs\n")
    config._hk_failed_logs.append(logdir)
    marked = []
    for d in _logs_root().iterdir():
        try:
            if (d / "FAILED").is_file():
                marked.append((d.stat().st_mtime, d))
        except OSError:
            continue
    for _, d in sorted(marked, reverse=True)[_KEEP_FAILED:]:
        if d != logdir:
            shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def _job_progress(config, label: str, total: int):
    """A progress bar of one job's finished items, on a terminal only; yields ``show(done)``."""
    from hcomm_kit.base import progress

    capman = config.pluginmanager.getplugin("capturemanager")
    quiet = contextlib.nullcontext()
    with (capman.global_and_fixture_disabled() if capman is not None else quiet):
        if not progress.enabled(sys.stderr) or total < 2:
            yield lambda done: None
            return
        bar = progress._rich_progress()
        tw = config.pluginmanager.getplugin("terminalreporter")
        col = tw._tw.width_of_current_line if tw is not None else 0
        sys.stderr.write("\n")  # draw below pytest's line of dots, then come back to its end
        try:
            bar.start()
        except Exception:
            yield lambda done: None
            return
        task = bar.add_task(f"mpirun {label}", total=total, detail="")
        try:
            yield lambda done: bar.update(task, completed=done)
        finally:
            bar.stop()
            sys.stderr.write(f"\x1b[1A\x1b[{col + 1}G")
            sys.stderr.flush()


def _launcher_failed(logdir: Path) -> bool:
    """mpirun failed to start its PMIx server before any rank ran (no rank log exists)."""
    if any(logdir.glob("rank*")):
        return False
    text = (logdir / "mpirun.log").read_text(errors="replace")
    return "listener thread failed to start" in text


def _collect(batch, results, logdir: Path, np_: int, timeout: float, timed_out: bool, proc) -> None:
    per_rank = {r: _read_reports(logdir / f"rank{r}.jsonl") for r in range(np_)}
    current = None
    for it in batch:
        outcome, text = _combine(it.nodeid, per_rank)
        if outcome is None:
            if current is None and (timed_out or proc.returncode != 0):
                current = it
                results[it.nodeid] = ("failed", _failure_text(it, per_rank, logdir, np_, timeout, timed_out,
                                                             proc.returncode))
            break
        if outcome == "failed":
            text = _failure_text(it, per_rank, logdir, np_, timeout, False, proc.returncode, text)
        results[it.nodeid] = (outcome, text)
        if outcome == "failed":
            break


def _kill(proc) -> None:
    """SIGTERM first (mpirun then terminates its ranks), SIGKILL the group if it is still there."""
    import signal
    import subprocess

    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            proc.kill()
        if grace is None:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_reports(path: Path) -> list[dict]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _finished_ids(logdir: Path, rank: int) -> set[str]:
    return {r["nodeid"] for r in _read_reports(logdir / f"rank{rank}.jsonl") if r["when"] == "teardown"}


def _combine(nodeid: str, per_rank: dict[int, list[dict]]):
    """(outcome, text) of one item over all ranks, or (None, '') if it did not finish everywhere.

    A failure's text shows each distinct error once, with the ranks that reported it
    (``ranks 0-3 (call):``); what differs between ranks (their number, handles) is ignored."""
    from hcomm_kit.jobs.output import format_ranks, normalize

    failed, skipped, complete = [], None, True
    for rank, recs in per_rank.items():
        mine = [r for r in recs if r["nodeid"] == nodeid]
        for r in mine:
            if r["outcome"] == "failed":
                failed.append((rank, r))
            elif r["outcome"] == "skipped" and skipped is None:
                skipped = r.get("text", "skipped on the ranks")
        if not any(r["when"] == "teardown" for r in mine):
            complete = False
    if failed:
        groups: dict[tuple, tuple[list[int], dict]] = {}
        for rank, r in failed:
            key = (r["when"], normalize(r.get("text", "").splitlines(), rank))
            groups.setdefault(key, ([], r))[0].append(rank)
        parts, shown = [], set()
        for (when, _), (ranks, r) in groups.items():
            who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_ranks(ranks)}"
            parts.append(f"{who} ({when}):\n{r.get('text', '')}{_new_lines(r.get('captured', ''), ranks[0], shown)}")
        return "failed", "\n".join(parts)
    if not complete:
        return None, ""
    if skipped is not None:
        return "skipped", skipped
    return "passed", ""


def _new_lines(captured: str, rank: int, shown: set) -> str:
    """``captured`` without the lines another rank's error already showed (the same kernel log
    printed by every rank is shown once, even when the ranks' errors differ); ``shown`` grows."""
    from hcomm_kit.jobs.output import normalize

    out = []
    for ln in captured.splitlines(keepends=True):
        key = normalize([ln.rstrip("\n")], rank)
        if ln.startswith("--- captured ") or key.strip() == "" or key not in shown:
            out.append(ln)
            shown.add(key)
    # a section whose every line was already shown: no header left alone
    text = "".join(out)
    return re.sub(r"\n--- captured [^\n]*---(?=\n--- captured |\s*$)", "", text)


def _tail(path: Path, n: int = _LOG_TAIL, *, quiet: bool = False) -> str:
    """The last ``n`` lines of a log (``quiet``: without Open MPI's banners and pytest's dots)."""
    try:
        lines = path.read_text(errors="replace").replace("\x00", "").splitlines()
    except FileNotFoundError:
        return "(no log)"
    if quiet:
        lines = _without_noise(lines)
    return "\n".join(lines[-n:])


def _without_noise(lines: list[str]) -> list[str]:
    """Drop Open MPI's banner blocks, its Epoll warnings and pytest's progress-only lines."""
    import re

    out, banner = [], False
    for ln in lines:
        if ln.strip() == "-" * 74:
            banner = not banner
            continue
        if banner or re.match(r"^\[warn\] Epoll ", ln) or re.fullmatch(r"[.FEsxX]*\s*(\[\s*\d+%\])?\s*", ln):
            continue
        out.append(ln)
    return out


def _failure_text(item, per_rank, logdir: Path, np_: int, timeout: float, timed_out: bool, rc,
                  reported: str = "") -> str:
    import re

    from hcomm_kit.jobs.output import format_ranks

    verbose = item.config.getoption("verbose", default=0) > 0
    head = f"{item.nodeid} on {np_} ranks: "
    if reported:
        m = re.match(r"ranks? (\d+)", reported)
        rank = int(m.group(1)) if m else 0
        log = _tail(logdir / f"rank{rank}.log", quiet=not verbose).split("[hcomm_kit.testing] rank")[0].rstrip()
        before = f"--- rank {rank} output before the failure (tail) ---\n{log}\n" if log else ""
        return f"{head}failed on {reported}\n{before}(full logs of every rank: {logdir})"
    if timed_out:
        why = f"timed out after {timeout:g} s (@pytest.mark.mpi(timeout=...)); killed the mpirun job"
    else:
        why = f"the mpirun job exited with status {rc} before the test finished (a rank crashed or aborted)"
    parts = [head + why]
    state = logdir / "hang-state.txt"
    if timed_out and state.is_file():
        parts.append(f"--- what every rank was doing when the timeout fired ---\n{state.read_text().rstrip()}")
    tails: dict[str, list[int]] = {}
    for r in range(np_):
        tails.setdefault(_tail(logdir / f"rank{r}.log", 25, quiet=not verbose), []).append(r)
    for text, ranks in tails.items():
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {format_ranks(ranks)} (the same)"
        parts.append(f"--- {who} log (tail) ---\n{text}")
    mpirun = _tail(logdir / "mpirun.log", 15, quiet=not verbose)
    if mpirun.strip():
        parts.append(f"--- mpirun ---\n{mpirun}")
    parts.append(f"(full logs of every rank: {logdir}{'' if verbose else '; -v shows Open MPI messages'})")
    return "\n".join(parts)
