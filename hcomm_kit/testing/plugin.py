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
marker's (what ``hcomm-kit test --np N`` uses); ``--keep-logs``; ``--nnodes N --node-rank K
--rdzv-endpoint HOST:PORT`` (torchrun's flags, as ``hcomm-kit launch``): the same pytest command on
each of N hosts runs every job's ranks spread over them, node K running its share (a rank count
that does not split evenly over the hosts is skipped); each host reports its own ranks' outcomes, a
failure on one host stops the job on all (see :mod:`hcomm_kit.jobs.nodes`). On several hosts there
is no job-wide MPI world: the ``mpi_comm`` fixture skips the test. A failure shows each distinct
error once, with the ranks that reported it, and what the test printed (e.g. kernel logs);
Open MPI's banners only with ``-v``. Items run grouped by rank count (file by file), and a line
per rank count sums up the outcome at the end.

Fixtures: ``comm`` (one ``hcomm_kit.init()`` per process, closed at session end), ``mpi_comm``
(``mpi4py.MPI.COMM_WORLD``), ``mpi_np`` (the rank count of the item).

This module holds the pytest hooks and fixtures (the rank side writes its reports here); the marker
and environment helpers are in :mod:`.items`, the outer mpirun job runner in :mod:`.runner`, the
collection of the ranks' results and the failure texts in :mod:`.results`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from .items import (ENV_NP, ENV_RESULTS, _inner, _item_np, _marker_params, _outer_item, _world_rank,
                    _world_size)
from .results import _captured, _FailureRepr
from .runner import _run_group

_MARKER_HELP = ("mpi(np=[2, 3, 4], timeout=120, env={}, topology='A2:2x4', links_down='0-1'): run the test on "
                "each rank count under mpirun, with extra environment variables for the job, its cluster topology "
                "and links taken down (hcomm_kit.testing.plugin)")
_COMM = None


# ---- hooks -----------------------------------------------------------------------------------
class _Alias:
    """Placeholder registered as ``hcomm_kit`` when this module was loaded with ``-p``, so that the
    ``pytest11`` entry point of the same module is skipped instead of registered twice."""


def pytest_addhooks(pluginmanager) -> None:
    if pluginmanager.get_plugin("hcomm_kit") is None:
        pluginmanager.register(_Alias(), name="hcomm_kit")


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
    # the generated operator tests mark their 8-rank runs slow (as this project's own suite does)
    config.addinivalue_line("markers", "slow: long-running (e.g. 8-rank) runs; deselect with -m 'not slow'")
    if _inner():
        _die_with_parent()
        config._hk_results = None
        d = os.environ.get(ENV_RESULTS)
        if d:
            config._hk_results = open(Path(d) / f"rank{_world_rank()}.jsonl", "a", buffering=1)
    else:
        config._hk_node_session = _node_session(config)


def pytest_unconfigure(config) -> None:
    session = getattr(config, "_hk_node_session", None)
    if session is not None:
        session.close()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("hcomm_kit", "hcomm-kit multi-rank tests")
    group.addoption("--mpi-np", default=None, metavar="N[,M...]",
                    help="run every @pytest.mark.mpi test at these rank counts instead of its marker's")
    group.addoption("--keep-logs", action="store_true", default=False,
                    help="keep the log directory of every mpirun job (default: only failed jobs', the last 10)")
    group.addoption("--op-algorithm", default=None, metavar="NAME",
                    help="only the tests whose 'algorithm' parameter is NAME (hcomm-kit test --algorithm; tests "
                         "without that parameter are kept)")
    from hcomm_kit.jobs.nodes import NODE_OPTIONS

    for flags, kwargs in NODE_OPTIONS:  # the flags of hcomm-kit launch/run/test/bench
        group.addoption(*flags, **kwargs)


def _node_session(config):
    """The :class:`~hcomm_kit.jobs.nodes.NodeSession` of ``--nnodes`` (None: one host)."""
    from hcomm_kit.base.errors import ConfigError
    from hcomm_kit.jobs.nodes import NodeSession, nodes_from

    nnodes = config.getoption("nnodes", default=1)
    rank = config.getoption("node_rank", default=0)
    endpoint = config.getoption("rdzv_endpoint", default=None)
    try:
        if nodes_from(nnodes, rank, endpoint, 1) is None:
            return None
        return NodeSession(nnodes, rank, endpoint)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


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
    algo = config.getoption("op_algorithm", default=None)
    if algo:
        drop = [it for it in items if "algorithm" in getattr(getattr(it, "callspec", None), "params", {})
                and it.callspec.params["algorithm"] != algo]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = [it for it in items if it not in drop]
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
        session = getattr(config, "_hk_node_session", None)
        uneven = set()
        if session is not None:
            for it in items:
                n = _item_np(it)
                if _outer_item(it) and n % session.nnodes:
                    uneven.add(it)
                    it.add_marker(pytest.mark.skip(reason=f"{n} ranks do not split evenly over --nnodes "
                                                          f"{session.nnodes} hosts"))
        config._hk_items = [it for it in items if _outer_item(it) and it not in uneven]
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
    # the failure names every rank that saw it ("ranks 0-3"), then stop the job. Another rank's abort
    # may end this one meanwhile (SIGTERM raises SystemExit here): this rank is ending the job too, so
    # it goes on quietly to the same abort instead of printing pytest's INTERNALERROR for it.
    try:
        time.sleep(0.3)
    except SystemExit:
        pass
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
    """``mpi4py.MPI.COMM_WORLD`` (None in the outer process of an mpi-marked test). On several hosts
    (``--nnodes``) there is no job-wide MPI world (each host's ranks are their own mpirun job): the
    test is skipped."""
    if _outer_item(request.node):
        return None
    from hcomm_kit.base import envs

    if envs.rank_offset() is not None:
        pytest.skip("needs a job-wide MPI world (mpi_comm), which ranks on several hosts do not have")
    from mpi4py import MPI

    return MPI.COMM_WORLD
