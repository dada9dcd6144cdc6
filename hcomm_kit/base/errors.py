"""Every exception hcomm-kit raises. One module, one base class (:class:`HcommKitError`).

Runtime errors carry the numeric code, its symbolic name, the API that failed and the
runtime's own message. Build errors carry the command, return code, compiler output and the
failing source path, and can print that source with line numbers (:meth:`CompileError.excerpt`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Iterable, Sequence

__all__ = [
    "HcommKitError",
    "ConfigError",
    "UsageError",
    "BuildError",
    "BuildInterrupted",
    "CompileError",
    "BackendError",
    "AclError",
    "HcclError",
    "OpTimeoutError",
    "DeadlockError",
    "KernelError",
    "CheckError",
    "CollectiveMismatchError",
    "RemoteError",
    "ProcessGroupError",
]


class HcommKitError(Exception):
    """Base class of every hcomm-kit error."""


class ConfigError(HcommKitError, ValueError):
    """A bad environment variable, option, dtype/op name or op.toml entry.

    Attributes:
        reason: what is wrong and how to fix it.
        key: the variable / option / table key at fault, if any.
        path: the file at fault (e.g. an op.toml), if any.
    """

    def __init__(self, reason: str, *, key: str | None = None, path: str | Path | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key = key
        self.path = Path(path) if path is not None else None

    def __str__(self) -> str:
        prefix = ""
        if self.path is not None:
            prefix += f"{self.path}: "
        if self.key and self.key not in self.reason:
            prefix += f"{self.key}: "
        return prefix + self.reason


class UsageError(ConfigError):
    """A bad command-line option or environment value, found by the ``hcomm-kit`` command before
    anything started: the command prints one line and exits 2 (as argparse does)."""

    @classmethod
    def of(cls, exc: ConfigError) -> "UsageError":
        """The same error (reason, key, path) as a usage error."""
        return exc if isinstance(exc, UsageError) else cls(exc.reason, key=exc.key, path=exc.path)


class BuildError(HcommKitError):
    """A build step failed (missing compiler, missing output, ...)."""


class BuildInterrupted(BuildError):
    """The process got SIGTERM or SIGHUP during a cache build.

    Raised only to unwind the build so its temporary files are removed; the signal is then
    delivered again with its previous disposition (normally: the process ends).

    Attributes:
        signum: the signal number.
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        super().__init__(f"build interrupted by {signal.Signals(signum).name}; its temporary files were removed")


# "file:line:" or "file:line:col:" in compiler output, e.g. "src/a.cc:12:5: error: ...", also after
# "In file included from". The first diagnostic that is an error wins, else the first location.
_LOCATION_RE = re.compile(
    r"^(?:In file included from\s+|\s+from\s+)?(?P<file>[^\s:][^:\n]*?):(?P<line>\d+):(?:\d+:)?"
    r"(?P<error>\s*(?:fatal error|error):)?",
    re.MULTILINE,
)
_OUTPUT_LINES_SHOWN = 40


class CompileError(BuildError):
    """The compiler exited non-zero.

    Attributes:
        cmd: the exact argv that was run.
        returncode: the compiler's exit status.
        output: its combined stdout+stderr.
        source_path: the file of the first ``file:line:`` in the output (None if not found).
        line: that line number (None if not found).
    """

    def __init__(
        self,
        cmd: Sequence[str],
        returncode: int,
        output: str,
        *,
        sources: Iterable[str | Path] = (),
        cwd: str | Path | None = None,
    ) -> None:
        self.cmd = [str(c) for c in cmd]
        self.returncode = returncode
        self.output = output
        self.source_path: Path | None = None
        self.line: int | None = None
        self._source_lines: list[str] | None = None
        self._locate(list(sources), cwd)
        super().__init__(self._summary())

    def _locate(self, sources: list[str | Path], cwd: str | Path | None) -> None:
        matches = list(_LOCATION_RE.finditer(self.output or ""))
        if not matches:
            return
        match = next((m for m in matches if m.group("error")), matches[0])
        name, line = match.group("file"), int(match.group("line"))
        candidates = [Path(name)]
        if cwd is not None and not Path(name).is_absolute():
            candidates.insert(0, Path(cwd) / name)
        candidates += [Path(s) for s in sources if Path(s).name == Path(name).name]
        for cand in candidates:
            if cand.is_file():
                self.source_path, self.line = cand, line
                try:
                    # Read now: the source may be a temp file that is gone when the error is shown.
                    self._source_lines = cand.read_text(errors="replace").splitlines()
                except OSError:
                    self._source_lines = None
                return
        self.source_path, self.line = Path(name), line

    def excerpt(self, context: int = 3) -> str:
        """Return the failing source lines with numbers, the failing line marked with ``>``.

        Args:
            context: lines shown before and after the failing line.

        Returns:
            The excerpt, or an empty string when no ``file:line:`` was found or the file is unreadable.
        """
        if self.line is None or not self._source_lines:
            return ""
        lo = max(1, self.line - context)
        hi = min(len(self._source_lines), self.line + context)
        width = len(str(hi))
        out = [f"{self.source_path}:{self.line}:"]
        for n in range(lo, hi + 1):
            mark = ">" if n == self.line else " "
            out.append(f"{mark} {n:>{width}} | {self._source_lines[n - 1]}")
        return "\n".join(out)

    def _summary(self) -> str:
        where = f" at {self.source_path}:{self.line}" if self.line is not None else ""
        return f"compilation failed (exit {self.returncode}){where}"

    def __str__(self) -> str:
        parts = [self._summary(), f"command: {shlex.join(self.cmd)}"]
        ex = self.excerpt()
        if ex:
            parts.append(ex)
        lines = (self.output or "").rstrip().splitlines()
        if len(lines) > _OUTPUT_LINES_SHOWN:
            lines = lines[:_OUTPUT_LINES_SHOWN] + [f"... ({len(lines) - _OUTPUT_LINES_SHOWN} more lines)"]
        if lines:
            parts.append("compiler output:\n" + "\n".join(lines))
        return "\n".join(parts)


class BackendError(HcommKitError):
    """The requested backend or its library is missing or cannot be loaded."""


class _RuntimeCallError(HcommKitError):
    """Common shape of errors returned by a C API call."""

    def __init__(self, code: int, name: str = "", api: str = "", message: str = "") -> None:
        self.code = int(code)
        self.name = name
        self.api = api
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.api} failed: " if self.api else ""
        text = f"{head}{self.code}"
        if self.name:
            text += f" {self.name}"
        if self.message:
            text += f": {self.message}"
        return text

    def __reduce__(self):  # keep pickling (multiprocessing, pytest-xdist) working with keyword state
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: type, state: dict) -> Exception:
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    Exception.__init__(obj, str(obj))
    return obj


class AclError(_RuntimeCallError):
    """An ACL runtime call failed, e.g. ``aclrtMalloc failed: 100000 ACL_ERROR_INVALID_PARAM: <msg>``.

    Attributes: ``code`` (int), ``name`` (symbolic), ``api`` (function), ``message`` (runtime text).
    """


class HcclError(_RuntimeCallError):
    """An HCCL / Hcomm call failed, e.g. ``HcclCommInitRootInfo failed: 4 HCCL_E_INTERNAL: <msg>``."""


class OpTimeoutError(AclError, TimeoutError):
    """An operator did not finish within its launch timeout (ACL 507017 on the emulator).

    Extra attributes: ``op`` (operator name), ``rank``, ``timeout`` (seconds),
    ``account`` (what each device thread was waiting on, as reported by the runtime).
    """

    def __init__(
        self,
        code: int,
        name: str = "",
        api: str = "",
        message: str = "",
        *,
        op: str = "",
        rank: int | None = None,
        timeout: float | None = None,
        account: str = "",
    ) -> None:
        self.op, self.rank, self.timeout, self.account = op, rank, timeout, account
        super().__init__(code, name, api, message)

    def __str__(self) -> str:
        text = super().__str__()
        ctx = []
        if self.op:
            ctx.append(f"op {self.op}")
        if self.rank is not None:
            ctx.append(f"rank {self.rank}")
        if self.timeout is not None:
            ctx.append(f"timeout {self.timeout:g}s")
        if ctx:
            text += f" ({', '.join(ctx)})"
        if self.account:
            text += "\n" + self.account
        return text


class DeadlockError(OpTimeoutError):
    """The emulator proved that an operator can never finish (a wait-for cycle across ranks, or a
    notify nobody will record) and failed it before its timeout (ACL 107020, as a timeout would).

    ``account`` holds the cross-rank hang report: root causes, knock-on waits, every rank's state.
    """


class KernelError(AclError):
    """A kernel returned non-zero or crashed (ACL 507018, AICPU exception)."""


class CheckError(AclError):
    """The emulator's notify checker found a protocol bug in an operator (code 509001,
    ``HCOMM_KIT_ERROR_CHECK``): a lost notify (recorded while still set), a notify consumed by another
    call, an unordered access to the same HCCL-buffer bytes, or a read of bytes nobody wrote. The
    message names operator, rank, thread, task, call and bytes. ``HCOMM_KIT_CHECK=warn`` reports
    without failing.
    """


class CollectiveMismatchError(HcommKitError):
    """The ranks of a communicator made different calls (operator, count, dtype, reduce op, root)
    at the same point; detected before data moved, on every rank.

    Attributes: ``call`` (this rank's call), ``message`` (every rank's call).
    """

    def __init__(self, message: str, call: str = "") -> None:
        self.message, self.call = message, call
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (self.message, self.call))


class RemoteError(AclError, HcclError):
    """Another rank of the communicator failed (crashed, died, timed out, found a bug) and this
    rank's operation failed with it: ACL 507057 (SUSPECT_REMOTE_ERROR) from an ACL call, 21
    (HCCL_E_REMOTE) from an HCCL / Hcomm call. The message names that rank and its reason; both
    ``except AclError`` and ``except HcclError`` catch it."""


class ProcessGroupError(HcommKitError, RuntimeError):
    """A collective of the ``hcomm`` torch.distributed backend failed or timed out.

    Attributes:
        op: the collective (``allreduce``, ...); ``seq``: its sequence number in the group;
        rank: this rank in the group; ``timeout``: seconds waited, when it timed out.
    """

    def __init__(self, message: str, *, op: str = "", seq: int = 0, rank: int | None = None,
                 timeout: float | None = None) -> None:
        super().__init__(message)
        self.op, self.seq, self.rank, self.timeout = op, seq, rank, timeout
