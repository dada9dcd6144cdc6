"""The ``hcomm`` backend under the launchers a training job uses: ``torchrun`` (no MPI: root info
through the c10d store), ``hcomm-kit launch`` (mpirun: env:// variables filled from Open MPI's),
and plain processes with env:// (failure handling).

* the examples (DDP with each reduction, FSDP2) end with single-process full-batch parameters;
* a gloo-style script that only names the "hcomm" backend (no hcomm_kit import: the
  ``torch.backends`` entry point registers it) trains unchanged under both launchers;
* a rank that raises makes the others fail within the group's timeout + 1 s, a rank that stops
  issuing collectives makes them time out within timeout + 1 s; every process ends, and nothing
  of theirs is left in /dev/shm;
* third-party-shaped scripts (no hcomm_kit import) run unchanged: rank branches around the same
  collectives, a batched isend/irecv ring at 2, 3 and 4 ranks, receives posted before sends
  (osu_bibw's window), a DDP job whose rank raises (the others raise a RuntimeError); a rank that
  skips a collective and goes on still fails the job, naming both lines.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_emu_comm import _unlocked


pytestmark = pytest.mark.slow  # the quick run has one torch smoke test (test_torch_pg.py)
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SHM = Path("/dev/shm")


def _run(argv: list[str], *, timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a launcher in its own session; on timeout kill the whole session (no leftover ranks)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(argv)} did not finish within {timeout} s:\n{out[-4000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, "")


def _torchrun(np_: int, *args: str, **kw) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(np_),
                 *args], **kw)


def _launch(np_: int, *args: str, **kw) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "hcomm_kit", "launch", "--np", str(np_), "--", sys.executable, *args], **kw)


def _matches(out: str, np_: int) -> None:
    assert out.count("parameters match single-process full-batch training") == np_, out[-4000:]


# ---- the examples -------------------------------------------------------------------------------
@pytest.mark.parametrize("np_", [2, 4])
def test_examples_under_torchrun(np_: int) -> None:
    p = _torchrun(np_, str(EXAMPLES / "train_ddp.py"), "--check", "--steps", "6", "--hook", "allreduce")
    assert p.returncode == 0, p.stdout[-4000:]
    _matches(p.stdout, np_)
    p = _torchrun(np_, str(EXAMPLES / "train_fsdp.py"), "--check", "--steps", "6")
    assert p.returncode == 0, p.stdout[-4000:]
    _matches(p.stdout, np_)


def test_examples_under_hcomm_kit_launch() -> None:
    np_ = 2  # 4 ranks under mpirun: tests/test_torch_train.py
    p = _launch(np_, str(EXAMPLES / "train_ddp.py"), "--check", "--steps", "6", "--hook", "op")
    assert p.returncode == 0, p.stdout[-4000:]
    _matches(p.stdout, np_)
    p = _launch(np_, str(EXAMPLES / "train_fsdp.py"), "--check", "--steps", "6")
    assert p.returncode == 0, p.stdout[-4000:]
    _matches(p.stdout, np_)


# ---- a gloo script with only the backend name changed ------------------------------------------
GLOO_STYLE = textwrap.dedent('''
    import sys, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))

    def train(m, rank, world, steps=5):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(7)
        x, y = torch.randn(24, 8, generator=g), torch.randn(24, 1, generator=g)
        per = 24 // world
        for _ in range(steps):
            opt.zero_grad()
            torch.nn.functional.mse_loss(m(x[rank * per:(rank + 1) * per]), y[rank * per:(rank + 1) * per]).backward()
            opt.step()
        return m

    dist.init_process_group(sys.argv[1])
    rank, world = dist.get_rank(), dist.get_world_size()
    ddp = train(DDP(model()), rank, world)
    ref = train(model(), 0, 1)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(ddp.module.parameters(), ref.parameters()))
    print(f"rank {rank}: {dist.get_backend()} parameters match", flush=True)
    h = dist.new_group(backend="hcomm")  # split off the world's communicator, or (gloo world) bootstrapped
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, group=h)
    assert t.tolist() == [world * (world + 1) / 2] * 3, t
    print(f"rank {rank}: hcomm subgroup of a {dist.get_backend()} world works", flush=True)
    dist.destroy_process_group()
''')


@pytest.fixture
def autoload_env(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH that makes the ``torch.backends`` entry point visible, as an install does.

    The installed hcomm-kit declares it in pyproject.toml; a checkout used through PYTHONPATH
    (or installed before the entry point existed) gets an equivalent dist-info here.
    """
    from importlib.metadata import entry_points

    paths = [str(ROOT)]
    if not any(ep.value == "hcomm_kit.torch:_autoload" for ep in entry_points(group="torch.backends")):
        info = tmp_path / "site" / "hcomm_kit_torch_autoload-0.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hcomm-kit-torch-autoload\nVersion: 0.0\n")
        (info / "entry_points.txt").write_text("[torch.backends]\nhcomm_kit = hcomm_kit.torch:_autoload\n")
        paths.insert(0, str(info.parent))
    old = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(paths + ([old] if old else []))}


def test_gloo_script_with_the_backend_name_changed(tmp_path: Path, autoload_env: dict[str, str]) -> None:
    script = tmp_path / "train_gloo_style.py"
    script.write_text(GLOO_STYLE)
    p = _torchrun(2, str(script), "hcomm", env=autoload_env)
    assert p.returncode == 0, p.stdout[-4000:]
    assert p.stdout.count("hcomm parameters match") == 2, p.stdout[-4000:]
    p = _launch(2, str(script), "hcomm", env=autoload_env)
    assert p.returncode == 0, p.stdout[-4000:]
    assert p.stdout.count("hcomm parameters match") == 2, p.stdout[-4000:]
    assert p.stdout.count("hcomm subgroup of a hcomm world works") == 2, p.stdout[-4000:]
    p = _torchrun(2, str(script), "gloo", env=autoload_env)
    assert p.returncode == 0, p.stdout[-4000:]
    assert p.stdout.count("hcomm subgroup of a gloo world works") == 2, p.stdout[-4000:]


# ---- failures ------------------------------------------------------------------------------------
FAILING = textwrap.dedent('''
    import datetime, os, sys, time, torch, torch.distributed as dist
    import hcomm_kit.torch
    mode, timeout = sys.argv[1], float(sys.argv[2])
    print(f"pid {os.getpid()}", flush=True)
    dist.init_process_group("hcomm", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    t = torch.ones(4096)
    dist.all_reduce(t)
    if rank == 1:
        if mode == "raise":
            raise RuntimeError("rank 1 fails on purpose")
        time.sleep(2 * timeout)  # "hang": alive, but no collective
        sys.exit(3)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    except Exception as exc:
        print(f"rank {rank} failed after {time.monotonic() - t0:.3f} s: {type(exc).__name__}: {exc}", flush=True)
        raise
    print(f"rank {rank}: the allreduce succeeded", flush=True)
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shm_of(pids: set[int]) -> list[str]:
    """/dev/shm entries of the emulator that name one of ``pids`` (device and buffer segments)."""
    if not SHM.is_dir():
        return []
    return [e.name for e in SHM.iterdir() if e.name.startswith("hcomm_kit.") and
            any(re.search(rf"\.(?:d|buf\.){pid}\.", e.name) for pid in pids)]


def _jobs() -> set[str]:
    """The emulator's job segments in /dev/shm (one per communicator, shared by its ranks) that no
    living process holds: a live one belongs to a job still running (another test session or
    pytest-xdist worker), a leaked one has no holder left."""
    return {e.name for e in SHM.iterdir() if e.name.startswith("hcomm_kit.") and ".job." in e.name
            and _unlocked(e.name)} if SHM.is_dir() else set()


def _assert_no_shm_left(pids: set[int], jobs_before: set[str]) -> None:
    """No segment of ``pids`` and no new job segment remains (cleanup may take a moment)."""
    deadline = time.monotonic() + 5
    while (_shm_of(pids) or _jobs() - jobs_before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _shm_of(pids) and not _jobs() - jobs_before, (_shm_of(pids), _jobs() - jobs_before)


@pytest.mark.parametrize("mode", ["raise", "hang"])
def test_failing_rank_fails_the_others_within_the_timeout(tmp_path: Path, mode: str) -> None:
    timeout, n = 4.0, 3
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    jobs_before = _jobs()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": str(n)}
    procs = [subprocess.Popen([sys.executable, str(script), mode, str(timeout)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env={**env, "RANK": str(r)},
                              start_new_session=True) for r in range(n)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=120)[0])  # startup + 2 x timeout, with room for a loaded CI
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = "\n".join(f"--- rank {r} (exit {p.returncode}) ---\n{o[-2500:]}" for r, (p, o) in
                     enumerate(zip(procs, outs)))
    for r in (0, 2):
        assert procs[r].returncode != 0, text
        m = re.search(rf"rank {r} failed after ([0-9.]+) s: (\w+)", outs[r])
        assert m, text
        assert float(m.group(1)) < timeout + 1.0, text
        if mode == "hang":
            # the first rank to time out says so; a peer failing with it names that timeout
            assert float(m.group(1)) > timeout - 1.0, text
            assert re.search(r"did not finish within|timed out after", outs[r]), text
    assert any("did not finish within" in outs[r] for r in (0, 2)) or mode == "raise", text
    assert procs[1].returncode != 0, text
    pids = {int(x) for o in outs for x in re.findall(r"^pid (\d+)$", o, re.M)}
    assert len(pids) == n, text
    _assert_no_shm_left(pids, jobs_before)


@pytest.mark.parametrize("launcher", ["torchrun", "hcomm-kit launch"])
def test_failing_rank_ends_the_job(tmp_path: Path, launcher: str) -> None:
    script = tmp_path / "failing.py"
    script.write_text(FAILING)
    jobs_before = _jobs()
    t0 = time.monotonic()
    p = (_torchrun(2, str(script), "raise", "4") if launcher == "torchrun"
         else _launch(2, str(script), "raise", "4"))
    assert p.returncode != 0, p.stdout[-4000:]
    assert "rank 1 fails on purpose" in p.stdout, p.stdout[-4000:]
    assert time.monotonic() - t0 < 90, p.stdout[-4000:]
    pids = {int(x) for x in re.findall(r"pid (\d+)$", p.stdout, re.M)}
    assert pids, p.stdout[-4000:]
    _assert_no_shm_left(pids, jobs_before)


# ---- a DDP job whose rank raises (a gloo script, only the backend name changed) -------------------
DDP_RAISING = textwrap.dedent('''
    import os, sys, torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    print(f"pid {os.getpid()}", flush=True)
    dist.init_process_group(sys.argv[1])
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)),
                bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 32)
    for step in range(6):
        if step == 3 and rank == 1:
            raise ValueError("rank 1 fails on purpose")
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    print(f"rank {rank}: trained", flush=True)
''')


def test_ddp_rank_that_raises_fails_the_others_with_an_error(tmp_path: Path, autoload_env: dict[str, str]) -> None:
    """A rank raising mid-training: every other rank's backward raises a RuntimeError naming the
    failed collective (as gloo's 'Connection closed by peer'), never a crash of DDP's reducer on
    the future's value (SIGSEGV in parseCppCommHookResult); nothing is left in /dev/shm."""
    n = 3
    script = tmp_path / "ddp_raising.py"
    script.write_text(DDP_RAISING)
    jobs_before = _jobs()
    env = {**os.environ, **autoload_env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
           "WORLD_SIZE": str(n)}
    procs = [subprocess.Popen([sys.executable, str(script), "hcomm"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env={**env, "RANK": str(r)},
                              start_new_session=True) for r in range(n)]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=120)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = "\n".join(f"--- rank {r} (exit {p.returncode}) ---\n{o[-2500:]}" for r, (p, o) in
                     enumerate(zip(procs, outs)))
    assert procs[1].returncode == 1 and "ValueError: rank 1 fails on purpose" in outs[1], text
    for r in (0, 2):
        assert procs[r].returncode == 1, text  # a Python exception, not -11 (SIGSEGV)
        assert re.search(r"^(\[rank\d\]: )?RuntimeError: .*rank 1", outs[r], re.M), text
        assert "trained" not in outs[r], text
    pids = {int(x) for o in outs for x in re.findall(r"^pid (\d+)$", o, re.M)}
    assert len(pids) == n, text
    _assert_no_shm_left(pids, jobs_before)


# ---- third-party-shaped scripts: correct ones pass, a skipped collective fails ---------------------
THIRD_PARTY = textwrap.dedent('''
    import sys, torch, torch.distributed as dist

    dist.init_process_group(sys.argv[1])
    rank, world = dist.get_rank(), dist.get_world_size()
    nxt, prv = (rank + 1) % world, (rank - 1) % world

    # rank-0 branches around the same collectives, as training scripts have around logging
    t = torch.full((5,), float(rank + 1))
    if rank == 0:
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        dist.barrier()
    else:
        dist.all_reduce(t)
        dist.broadcast(t, src=0)
        dist.barrier()
    assert t.tolist() == [world * (world + 1) / 2] * 5, t
    print(f"rank {rank}: rank branches ok", flush=True)

    # a batched ring exchange (pipeline stages, ring attention): isend to the next, irecv from the previous
    for step in range(3):
        send = torch.arange(7, dtype=torch.float32) + 100 * rank + step
        recv = torch.empty(7)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)])
        for req in reqs:
            req.wait()
        assert recv.tolist() == (torch.arange(7, dtype=torch.float32) + 100 * prv + step).tolist(), recv
    print(f"rank {rank}: batched ring ok", flush=True)

    # receives posted before sends, between pairs of ranks (OSU osu_bibw's window of 64)
    if rank < world - world % 2:
        peer = rank ^ 1
        bufs = [torch.empty(33) for _ in range(64)]
        reqs = [dist.irecv(b, peer) for b in bufs]
        reqs += [dist.isend(torch.full((33,), peer * 1000 + i + 0.5 * rank), peer) for i in range(64)]
        for req in reqs:
            req.wait()
        for i, b in enumerate(bufs):
            assert b.tolist() == [rank * 1000 + i + 0.5 * peer] * 33, (i, b[:3])
    print(f"rank {rank}: receives before sends ok", flush=True)
    dist.destroy_process_group()
''')


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_third_party_scripts_run_unchanged(tmp_path: Path, autoload_env: dict[str, str], np_: int) -> None:
    script = tmp_path / "third_party.py"
    script.write_text(THIRD_PARTY)
    p = _torchrun(np_, str(script), "hcomm", env=autoload_env)
    assert p.returncode == 0, p.stdout[-4000:]
    for what in ("rank branches ok", "batched ring ok", "receives before sends ok"):
        assert p.stdout.count(what) == np_, p.stdout[-4000:]


SKIPPING = textwrap.dedent('''
    import sys, torch, torch.distributed as dist

    dist.init_process_group(sys.argv[1])
    rank = dist.get_rank()
    t = torch.ones(8)
    if rank != 1:
        dist.all_reduce(torch.full((8,), 10.0))  # rank 1 skips this one and goes on
    dist.all_reduce(t)
    print(f"rank {rank}: result {t[0].item()}", flush=True)
    dist.destroy_process_group()
    print(f"rank {rank}: done", flush=True)
''')


def test_skipped_collective_fails_the_job_naming_both_lines(tmp_path: Path, autoload_env: dict[str, str]) -> None:
    """Rank 1's all_reduce meets rank 0's first one (another line: no error by itself); then rank 1
    closes where rank 0 makes its second all_reduce: both fail, naming the lines, and the job fails."""
    script = tmp_path / "skipping.py"
    script.write_text(SKIPPING)
    p = _torchrun(2, str(script), "hcomm", env=autoload_env)
    assert p.returncode != 0, p.stdout[-4000:]
    assert "rank 1: done" not in p.stdout and "rank 0: done" not in p.stdout, p.stdout[-4000:]
    assert re.search(r"rank 0: all_reduce\(count=8, dtype=fp32, op=sum\) at \S*skipping\.py:8; "
                     r"rank 1: all_reduce\(count=8, dtype=fp32, op=sum\) at \S*skipping\.py:9", p.stdout), \
        p.stdout[-4000:]
    assert "rank 1: close()" in p.stdout, p.stdout[-4000:]


LATE = textwrap.dedent('''
    import datetime, os, sys, time, torch.distributed as dist

    rank = int(os.environ["RANK"])
    if rank == 1:
        time.sleep(12)  # never arrives within the group's timeout
        sys.exit(0)
    t0 = time.monotonic()
    try:
        dist.init_process_group(sys.argv[1], timeout=datetime.timedelta(seconds=4))
    except Exception as exc:
        print(f"rank {rank} raised after {time.monotonic() - t0:.2f} s: {type(exc).__name__}: {exc}", flush=True)
        raise
    print(f"rank {rank}: init_process_group returned", flush=True)
''')


def test_init_process_group_timeout_governs_a_rank_that_never_arrives(tmp_path: Path,
                                                                     autoload_env: dict[str, str]) -> None:
    """As with gloo, ``init_process_group(timeout=4 s)`` raises after about 4 s naming the missing
    rank, not after the communicator creation's HCCL_CONNECT_TIMEOUT (120 s)."""
    script = tmp_path / "late.py"
    script.write_text(LATE)
    p = _torchrun(2, str(script), "hcomm", env=autoload_env, timeout=120)
    assert p.returncode != 0, p.stdout[-4000:]
    m = re.search(r"rank 0 raised after ([0-9.]+) s: HcommKitError: rank 0: rank\(s\) 1 of 2 did not reach the "
                  r"creation of the communicator within 4 s \(the process group's timeout\)", p.stdout)
    assert m and 3.5 < float(m.group(1)) < 10, p.stdout[-4000:]
