"""Content-hash build cache shared by the emulator and operator builds.

Layout under :func:`cache_root`::

    <root>/<name>-<key>/            cached_dir() entries, each with a BUILD_OK stamp
    <root>/<subdir>/<stem>-<key><suffix>   cached_file() entries (+ ``.sha256`` stamp beside)
    <root>/locks/*.lock             one file lock per entry

Guarantees: concurrent callers (processes or threads) build a key once; nothing half-written
ever appears under a final name (build in a temp name unique per pid+thread, then rename);
an entry whose stamp is missing or wrong, or that fails ``validate``, is removed and rebuilt.

Interrupted builds leave nothing behind: an exception (Ctrl-C included) removes the temporary
entry; during a build in the main thread SIGTERM and SIGHUP (when they have their default
action) first unwind the build the same way, then end the process as they would have; and the
first use of a cache root in a process removes what a killed build left (``.<entry>.tmp-<pid>-...``
and ``.trash-...`` names whose process no longer exists and whose entry lock is free), see
:func:`sweep_stale`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from filelock import FileLock, Timeout

from ..base import envs
from .._version import __version__
from ..base.errors import BuildError, BuildInterrupted, CompileError

__all__ = [
    "cache_root",
    "hash_key",
    "compiler_identity",
    "default_cxx",
    "run_compiler",
    "cached_dir",
    "cached_file",
    "atomic_write_bytes",
    "sweep_stale",
    "STAMP_NAME",
]

STAMP_NAME = "BUILD_OK"
KEY_LENGTH = 20


def cache_root() -> Path:
    """Return (and create) the cache root: ``$HCOMM_KIT_CACHE_DIR`` or ``~/.cache/hcomm_kit``.

    The first call for a root in a process also removes what killed builds left there
    (:func:`sweep_stale`).
    """
    root = envs.cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    if root not in _SWEPT:
        _SWEPT.add(root)
        try:
            sweep_stale(root)
        except OSError:
            pass  # best effort: a read-only or vanishing cache must not break a build
    return root


_SWEPT: set[Path] = set()
# ".<base>.tmp-<pid>-<thread>..." (cached_dir / cached_file / atomic_write_bytes temporaries) and
# ".trash-<name>-<pid>-<thread>" (entries being discarded).
_TMP_RE = re.compile(r"^\.(?P<base>.+)\.tmp-(?P<pid>\d+)-\d+")
_TRASH_RE = re.compile(r"^\.trash-.+-(?P<pid>\d+)-\d+$")


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def sweep_stale(root: Path | None = None) -> list[Path]:
    """Remove temporary cache entries left by builds that were killed; return what was removed.

    Looks at ``root`` and its immediate subdirectories for the temporary names this module
    uses. One is removed when its process no longer exists on this machine and, when the entry
    has a lock file, that lock is free (so a build still running elsewhere, e.g. on another host
    sharing the cache, is left alone).
    """
    root = Path(root) if root is not None else envs.cache_dir()
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    dirs = [root] + [d for d in root.iterdir() if d.is_dir() and not d.is_symlink() and not d.name.startswith(".")
                     and d.name != "locks"]
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            if not name.startswith("."):
                continue
            m = _TMP_RE.match(name)
            trash = _TRASH_RE.match(name) if m is None else None
            if m is None and trash is None:
                continue
            pid = int((m or trash).group("pid"))
            if _pid_alive(pid):
                continue
            path = d / name
            label = None
            if m is not None:
                label = m.group("base") if d == root else f"{d.relative_to(root).as_posix().replace('/', '_')}-{m.group('base')}"
            if label is not None and (root / "locks" / f"{label}.lock").exists():
                lock = FileLock(str(root / "locks" / f"{label}.lock"))
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    continue  # a build of that entry is running (another host or a reused pid)
                try:
                    _remove(path)
                finally:
                    lock.release()
            else:
                _remove(path)
            removed.append(path)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """While a build runs in the main thread: SIGTERM/SIGHUP with their default action raise
    :class:`BuildInterrupted`, so the caller removes its temporary files and then calls
    :func:`_redeliver` (the process still ends as the sender intended)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[int, object] = {}

    def handler(signum, frame):
        raise BuildInterrupted(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                installed[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, old in installed.items():
            signal.signal(sig, old)


def _redeliver(exc: BaseException) -> None:
    """After the temporary files of an interrupted build are gone: send the signal again (its
    default action is back in place, so this normally ends the process)."""
    if isinstance(exc, BuildInterrupted):
        os.kill(os.getpid(), exc.signum)
        time.sleep(1)


def hash_key(files: Iterable[Path], parts: Iterable[str]) -> str:
    """Stable content hash of files and string parts, plus the package version.

    Files are identified by base name and content (not by absolute path, so two checkouts of
    the same sources share entries) and sorted, so the order given does not matter. ``parts``
    (flags, compiler identity, ...) keep their order, since flag order matters to compilers.

    Returns:
        20 lowercase hex characters.
    """
    entries = sorted((Path(f).name, hashlib.sha256(Path(f).read_bytes()).hexdigest()) for f in files)
    h = hashlib.sha256()
    h.update(f"hcomm_kit {__version__}\0".encode())
    for name, digest in entries:
        h.update(f"file {name} {digest}\0".encode())
    for part in parts:
        h.update(f"part {part}\0".encode())
    return h.hexdigest()[:KEY_LENGTH]


@functools.lru_cache(maxsize=None)
def compiler_identity(cxx: str) -> str:
    """``<realpath of the compiler> <first line of --version>``, cached per process.

    Raises:
        BuildError: the compiler is not found or does not run.
    """
    argv0 = shlex.split(cxx)[0] if cxx.strip() else cxx
    found = shutil.which(argv0)
    if found is None:
        raise BuildError(f"C++ compiler {cxx!r} not found on PATH; install g++ or set CXX to a compiler")
    try:
        proc = subprocess.run([*shlex.split(cxx), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot run C++ compiler {cxx!r}: {exc}; set CXX to a working compiler") from exc
    first = (proc.stdout or proc.stderr).strip().splitlines()
    return f"{os.path.realpath(found)} {first[0] if first else '?'}"


def default_cxx() -> str:
    """The host C++ compiler: ``$CXX`` or ``g++``."""
    return envs.cxx()


def run_compiler(
    cmd: list[str],
    *,
    sources: Sequence[Path],
    cwd: str | Path | None = None,
    verbose: bool = False,
) -> str:
    """Run a compiler command; raise with a useful report if it fails.

    Args:
        cmd: full argv.
        sources: the sources compiled (used to find the failing file for the excerpt).
        cwd: working directory.
        verbose: echo the command and the compiler output to stderr.

    Returns:
        The compiler's output (warnings) of a successful run.

    Raises:
        CompileError: non-zero exit (command, return code, output, source excerpt).
        BuildError: the compiler could not be started.
    """
    if verbose:
        print("+ " + shlex.join(cmd), file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace")
    except OSError as exc:
        raise BuildError(f"cannot run {shlex.join(cmd)}: {exc}; check CXX / PATH") from exc
    if verbose and proc.stdout:
        print(proc.stdout, end="" if proc.stdout.endswith("\n") else "\n", file=sys.stderr, flush=True)
    if proc.returncode != 0:
        raise CompileError(cmd, proc.returncode, proc.stdout or "", sources=sources, cwd=cwd)
    return proc.stdout or ""


def _temp_tag() -> str:
    return f"{os.getpid()}-{threading.get_ident()}"


def _lock(root: Path, label: str) -> FileLock:
    locks = root / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    return FileLock(str(locks / f"{label}.lock"))


def _tree_digest(directory: Path) -> str:
    """sha256 over every file (relative path + content) and symlink (path + target), stamp excluded."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames.sort()
        for fname in sorted(filenames):
            p = Path(dirpath) / fname
            rel = p.relative_to(directory).as_posix()
            if rel == STAMP_NAME:
                continue
            if p.is_symlink():
                h.update(f"L {rel} {os.readlink(p)}\0".encode())
            else:
                h.update(f"F {rel} {hashlib.sha256(p.read_bytes()).hexdigest()}\0".encode())
    return h.hexdigest()


def _dir_ok(path: Path, validate: Callable[[Path], bool] | None) -> bool:
    stamp = path / STAMP_NAME
    try:
        if not stamp.is_file() or stamp.read_text().strip() != _tree_digest(path):
            return False
        return validate is None or bool(validate(path))
    except OSError:
        return False


def _discard(path: Path) -> None:
    """Remove a file or tree; rename it aside first so the final name frees atomically."""
    if not os.path.lexists(path):
        return
    trash = path.with_name(f".trash-{path.name}-{_temp_tag()}")
    try:
        os.rename(path, trash)
    except OSError:
        trash = path
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)


def cached_dir(
    name: str,
    key: str,
    build: Callable[[Path], None],
    *,
    validate: Callable[[Path], bool] | None = None,
) -> Path:
    """Return ``<root>/<name>-<key>/``, building it once with ``build(tmp_dir)`` if needed.

    ``build`` fills an empty temp directory; the stamp is written last and the directory is
    renamed into place under a file lock, so concurrent callers build once and never see a
    partial entry. An existing entry with a missing/mismatched stamp or failing ``validate``
    is removed and rebuilt.
    """
    root = cache_root()
    final = root / f"{name}-{key}"
    if _dir_ok(final, validate):
        return final
    with _lock(root, f"{name}-{key}"):
        if _dir_ok(final, validate):
            return final
        _discard(final)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-{key}.tmp-{_temp_tag()}-", dir=root))
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700; entries are meant to be readable like any build output
        try:
            with _signals_unwind():
                build(tmp)
                (tmp / STAMP_NAME).write_text(_tree_digest(tmp) + "\n")
                os.rename(tmp, final)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            _redeliver(exc)
            raise
    return final


def _file_ok(path: Path, validate: Callable[[Path], bool] | None) -> bool:
    stamp = path.with_name(path.name + ".sha256")
    try:
        if not path.is_file() or not stamp.is_file():
            return False
        if stamp.read_text().strip() != hashlib.sha256(path.read_bytes()).hexdigest():
            return False
        return validate is None or bool(validate(path))
    except OSError:
        return False


def cached_file(
    filename_stem: str,
    suffix: str,
    key: str,
    build: Callable[[Path], None],
    *,
    subdir: str,
    validate: Callable[[Path], bool] | None = None,
) -> Path:
    """Return ``<root>/<subdir>/<stem>-<key><suffix>``, building it once with ``build(tmp_file)``.

    ``build`` must write the given temp path (same directory and suffix as the final file);
    it is moved into place with ``os.replace`` and a ``.sha256`` stamp is written beside it.
    A file with a missing/mismatched stamp or failing ``validate`` is rebuilt.

    Raises:
        BuildError: ``build`` returned without writing the temp file.
    """
    directory = cache_root() / subdir
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{filename_stem}-{key}{suffix}"
    if _file_ok(final, validate):
        return final
    with _lock(cache_root(), f"{subdir.replace(os.sep, '_')}-{filename_stem}-{key}"):
        if _file_ok(final, validate):
            return final
        tmp = directory / f".{filename_stem}-{key}.tmp-{_temp_tag()}{suffix}"
        try:
            with _signals_unwind():
                build(tmp)
            if not tmp.is_file():
                raise BuildError(f"build step for {final.name} did not produce {tmp}")
            digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
            os.replace(tmp, final)
            atomic_write_bytes(final.with_name(final.name + ".sha256"), (digest + "\n").encode())
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            _redeliver(exc)
            raise
    return final


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same directory, then ``os.replace``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{_temp_tag()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
