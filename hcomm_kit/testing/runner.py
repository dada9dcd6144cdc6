"""The outer side of the plugin: run the items of one (file, rank count, job environment) in one
``mpirun ... python -m pytest`` job, watch it (progress, per-item timeout, the ranks' state before
a timed-out job is killed) and keep the failed jobs' log directories. With ``--nnodes`` each host's
plugin runs its share of every job's ranks as its part of a multi-host launch
(:mod:`hcomm_kit.jobs.nodes`), and a job stops when another host's part failed."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

from .items import ENV_NP, ENV_RESULTS, _item_env, _item_np, _item_timeout
from .results import _collect, _finished_ids

PLUGIN_MODULE = "hcomm_kit.testing.plugin"
# Plugins that cost a lot at start-up (hypothesis: ~1.6 s) or reorder items; off in the child jobs.
_SLOW_PLUGINS_OFF = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:randomly", "-p", "no:xdist")


def entry_point_installed() -> bool:
    """True when the ``pytest11`` entry point of this plugin is installed (child pytest runs find it)."""
    from importlib.metadata import entry_points

    return any(ep.value == PLUGIN_MODULE for ep in entry_points(group="pytest11"))


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
    total, timeout = key[1], _item_timeout(first)
    # Several hosts (--nnodes): this host runs its share of the ranks, as its part of a multi-host
    # launch (hcomm_kit.jobs.nodes: the same meeting, environment and watch as `hcomm-kit launch`).
    session = getattr(config, "_hk_node_session", None)
    nodes = session.job(total // session.nnodes) if session is not None else None
    np_ = total if nodes is None else nodes.np
    logdir = _new_logdir(total)
    env = {ENV_NP: str(total), ENV_RESULTS: str(logdir), "HCOMM_KIT_JOB_DIR": str(logdir),
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
        pytest_args += ["-p", PLUGIN_MODULE]
    if config.getoption("mpi_np", default=None):
        pytest_args += ["--mpi-np", str(config.getoption("mpi_np"))]  # the same items (ids) in the job
    tb = config.getoption("tbstyle", default="auto")
    if tb and tb != "auto":
        pytest_args += [f"--tb={tb}"]
    warm_emulator(env)
    stopped = ""
    if nodes is not None:
        try:
            env.update(nodes.start(logdir / "root_info"))
        except Exception as exc:  # noqa: BLE001 - the other hosts never came: every item says so
            stopped = f"the hosts did not meet: {exc}"
    redirect = 'exec "$0" "$@" >"$HCOMM_KIT_MPI_RESULTS/rank${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}.log" 2>&1'
    argv = mpirun_argv(np_, ["/bin/sh", "-c", redirect, *pytest_args], env=env, tag_output=False)
    if stopped:
        argv = ["/bin/sh", "-c", "exit 1"]
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
            next_watch = last + 0.5
            timed_out = False
            while proc.poll() is None:
                time.sleep(0.05)
                if nodes is not None and time.monotonic() >= next_watch:
                    next_watch = time.monotonic() + 0.5
                    why = nodes.watch()
                    if why:  # another host's part of the job failed, or its launcher is gone
                        stopped = why
                        _kill(proc)
                        break
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
        if attempt or proc.returncode == 0 or timed_out or nodes is not None or not _launcher_failed(logdir):
            break  # (a multi-host job is not started again alone: the other hosts' parts have ended)
    if stopped:
        (logdir / "stopped.txt").write_text(stopped + "\n")
    _collect(batch, results, logdir, np_, timeout, timed_out, proc)
    if nodes is not None:
        failed = [results[it.nodeid][1] for it in batch if it.nodeid in results and results[it.nodeid][0] == "failed"]
        nodes.finish(proc.returncode or (1 if failed else 0), failed[0].splitlines()[0] if failed else "")
    _settle_logdir(config, logdir, batch, results, proc.returncode)


# ---- per-job log directories -----------------------------------------------------------------
_KEEP_FAILED = 10  # failed jobs' log directories kept (newest first)


def warm_emulator(job_env: dict[str, str] | None = None) -> None:
    """Compile the emulator library here, before a job or a test starts, when it will load it: a
    first build (or one that waits for another process's build, e.g. a parallel test worker's) then
    does not eat into its timeout. A build error is left for the ranks or tests to report."""
    job_env = job_env or {}
    if any(k in job_env for k in ("HCOMM_KIT_BACKEND", "HCOMM_KIT_SANITIZE", "HCOMM_KIT_CACHE_DIR")):
        return  # the job builds another variant or elsewhere: let its ranks do it
    from hcomm_kit.build import emulator
    from hcomm_kit.runtime.library import resolve_backend

    try:
        if resolve_backend() == "emu":
            emulator.get_library()
    except Exception:  # noqa: BLE001 - the ranks report it with their context
        pass


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
