"""``hcomm-kit new``: render ``templates/op`` into an operator directory, and re-render it.

Only ``*.jinja`` files are rendered (Jinja2, ``StrictUndefined``: a missing variable is an
error, never an empty string); answers are validated (as an ``op.toml``) before anything is
written; the answers are stored in ``.hcomm-kit-answers.json`` so that ``--update`` can
re-render after ``op.toml`` changes. ``op_kernel_aicpu/exec_op.cc`` and ``README.md`` belong to the
user: they are written only when absent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._version import __version__
from ..build.cache import atomic_write_bytes
from ..base.errors import BuildError, ConfigError
from ..build.templating import make_environment, render_template, templates_dir
from ..build import names
from ..build.opinfo import ANSWERS_FILE, read_answers
from ..build.opmodel import (
    A2A3,
    A2A3_REDUCE_DTYPES,
    HANDSHAKES,
    RINGINFO_FIELDS,
    CField,
    MAX_CHANNELS,
    NOTIFY_TIMEOUT_DEFAULT,
    OP_TOML,
    PATTERNS,
    PRODUCTS,
    OpSpec,
)
from ..build.opspec import load_opspec, parse_opspec

__all__ = [
    "ANSWERS_FILE",
    "PATTERN_DEFAULTS",
    "PATTERN_FILES",
    "RenderResult",
    "templates_dir",
    "make_environment",
    "render_template",
    "new_op",
    "update_op",
    "read_answers",
    "render_kind_test",
]

USER_FILES = ("op_kernel_aicpu/exec_op.cc", "reference.py", "README.md")

# Element size per HcclDataType value 0..17 (hcomm.md §2.2; 13 is unused and holds 2).
SIZE_TABLE = (1, 2, 4, 2, 4, 8, 8, 1, 2, 4, 8, 2, 16, 2, 1, 1, 1, 1)

# What each pattern needs; becomes the op.toml written by `new` (the user edits it afterwards).
PATTERN_DEFAULTS: dict[str, dict[str, Any]] = {
    "empty": dict(kind="custom", reference="hcomm_kit.ops.reference:copy", output="count", inplace=True, threads=1,
                  notifies_per_thread=0, topology="none", channel_notifies=0, reduce_ops=[]),
    "p2p": dict(kind="sendrecv", output="count", inplace=True, threads=1, notifies_per_thread=0, topology="p2p",
                channel_notifies=2, reduce_ops=[]),
    "ring-allreduce": dict(kind="allreduce", output="count", inplace=True, threads=1, notifies_per_thread=0,
                           topology="ring", channel_notifies=2, ring_order="avoid-down", rings=1,
                           reduce_ops=["sum", "max", "min"], dtypes=list(A2A3_REDUCE_DTYPES)),
    "mesh-allgather": dict(kind="allgather", output="count*ranks", inplace=False, threads="ranks",
                           notifies_per_thread=2, topology="mesh", channel_notifies=2, reduce_ops=[]),
    "direct-reduce": dict(kind="reduce", output="count", inplace=True, threads=1, notifies_per_thread=0,
                          topology="mesh", channel_notifies=2, reduce_ops=["sum", "max", "min"],
                          dtypes=list(A2A3_REDUCE_DTYPES)),
    "direct-broadcast": dict(kind="broadcast", output="count", inplace=True, threads=1, notifies_per_thread=0,
                             topology="mesh", channel_notifies=2, reduce_ops=[]),
    "pairwise-alltoall": dict(kind="alltoall", output="count*ranks", inplace=False, threads=1, notifies_per_thread=0,
                              topology="mesh", channel_notifies=2, reduce_ops=[]),
    "halo-exchange": dict(kind="custom", reference="reference:halo", output="count", inplace=False, threads=1,
                          notifies_per_thread=0, topology="p2p", channel_notifies=2, reduce_ops=[],
                          params=[{"name": "halo", "type": "uint32_t", "array": None,
                                   "comment": "ghost cells per side, elements (0 = 1)"}]),
}
_COUNTS = [{"name": "send_counts", "type": "uint64_t", "array": 64,
            "comment": "elements sent to rank j (packed in rank order in the input)"},
           {"name": "recv_counts", "type": "uint64_t", "array": 64,
            "comment": "elements received from rank i (packed in rank order in the output)"}]
PATTERN_DEFAULTS.update({
    "pairwise-alltoallv": dict(kind="alltoallv", output="", inplace=False, threads=1, notifies_per_thread=0,
                               topology="mesh", channel_notifies=2, reduce_ops=[], params=_COUNTS),
    "direct-scatter": dict(kind="scatter", output="count", inplace=False, threads=1, notifies_per_thread=0,
                           topology="mesh", channel_notifies=2, reduce_ops=[]),
    "direct-gather": dict(kind="gather", output="count*ranks", inplace=False, threads=1, notifies_per_thread=0,
                          topology="mesh", channel_notifies=2, reduce_ops=[]),
    "pairwise-reduce-scatter": dict(kind="reduce_scatter", output="count", inplace=False, threads=1,
                                    notifies_per_thread=0, topology="mesh", channel_notifies=2,
                                    reduce_ops=["sum", "max", "min"], dtypes=list(A2A3_REDUCE_DTYPES)),
})
#: User files a pattern adds besides exec_op.cc: template -> path (written once, never overwritten).
PATTERN_FILES: dict[str, dict[str, str]] = {
    "halo-exchange": {"op/reference/halo-exchange.py.jinja": "reference.py"},
}


@dataclass
class RenderResult:
    """What ``new`` / ``--update`` did.

    Attributes:
        opdir: the operator directory.
        spec: the validated operator description.
        written: files (re)written, relative to ``opdir``.
        unchanged: generated files whose content did not change.
        kept: user files left as they were (``exec_op.cc``).
    """

    opdir: Path
    spec: OpSpec
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def default_answers(name: str, pattern: str, handshake: str) -> dict[str, Any]:
    """The op.toml values ``new NAME --pattern P --handshake H`` writes."""
    from ..base import dtypes as dtype_table

    if pattern not in PATTERNS:
        raise ConfigError(f"unknown pattern {pattern!r}; accepted: {', '.join(PATTERNS)}", key="--pattern")
    if handshake not in HANDSHAKES:
        raise ConfigError(f"unknown handshake {handshake!r}; accepted: {', '.join(HANDSHAKES)}",
                          key="--handshake")
    pat = dict(PATTERN_DEFAULTS[pattern])
    return {
        "name": name,
        "kernel": names.default_kernel_name(name),
        "so": f"lib{name}_aicpu_kernel.so",
        "handshake": handshake,
        "pattern": pattern,
        "products": list(PRODUCTS if handshake == "thread-notify" else A2A3),
        "dtypes": pat.pop("dtypes", [d.name for d in dtype_table.DTYPES]),
        "vendor": "cust",
        "reference": "",
        "params": [],
        "algorithms": [],
        **pat,
    }


def _context(spec: OpSpec) -> dict[str, Any]:
    from ..build import opbuild

    return {
        "spec": spec,
        "P": spec.macro_prefix,
        "version": __version__,
        "max_channels": MAX_CHANNELS,
        "ring_fields": [CField(f.name, f.ctype, f.array, f.comment, f"{spec.macro_prefix}_MAX_CHANNELS" if f.array else "")
                        for f in RINGINFO_FIELDS],
        "notify_timeout_default": NOTIFY_TIMEOUT_DEFAULT,
        "size_table": list(SIZE_TABLE),
        "width": 48,
        "test_dtypes": list(spec.dtypes),
        # the kind-driven test (hcomm_kit.testing.check_operator) unless a first pattern still computes
        # what it was generated for (its own hand-written reference test) with one algorithm (the kind
        # test tries each of op.toml's algorithms)
        "kind_test": spec.pattern not in ("empty", "p2p", "ring-allreduce", "mesh-allgather")
        or PATTERN_DEFAULTS[spec.pattern]["kind"] != spec.kind
        or spec.reference not in ("", PATTERN_DEFAULTS[spec.pattern].get("reference", ""))
        or bool(spec.algorithms),
        "op_dir": None,
        **opbuild.ascend_template_context(spec),
    }


def render_kind_test(spec: OpSpec, op_dir: Path, template_dir: Path | None = None) -> str:
    """The generated multi-rank test of ``spec``'s kind (as ``hcomm-kit new`` writes it into
    ``tests/``), testing the operator in ``op_dir``: ``hcomm-kit test`` runs it for a directory
    that has no tests of its own, the built-ins of ``aicpu_kernels/``.

    Raises:
        ConfigError: the operator has nothing to check against (a ``custom`` kind without reference).
    """
    if not (spec.reference or spec.kind_info.reference):
        raise ConfigError(f"operator {spec.name} is of kind {spec.kind} without a reference: there is nothing to "
                          "test it against (set op.toml [op].reference)", key="op.reference",
                          path=Path(op_dir) / OP_TOML)
    ctx = {**_context(spec), "kind_test": True, "op_dir": str(Path(op_dir).resolve())}
    return render_template(make_environment(template_dir), "op/tests/test_op.py.jinja", ctx)


def _manifest(spec: OpSpec) -> list[tuple[str, str, str]]:
    """(template, output path, kind) for every file; kind is "generated" or "user"."""
    return [
        ("op/inc/param.h.jinja", f"inc/{spec.header_name}", "generated"),
        ("op/inc/log.h.jinja", f"inc/{spec.name}_log.h", "generated"),
        ("op/op_kernel_aicpu/aicpu_kernel.cc.jinja", "op_kernel_aicpu/aicpu_kernel.cc", "generated"),
        ("op/op_kernel_aicpu/exec_op.h.jinja", "op_kernel_aicpu/exec_op.h", "generated"),
        (f"op/op_kernel_aicpu/exec_op/{spec.pattern}.cc.jinja", "op_kernel_aicpu/exec_op.cc", "user"),
        ("op/op_kernel_aicpu/op_info.json.jinja", f"op_kernel_aicpu/{spec.json_name}", "generated"),
        ("op/tests/test_op.py.jinja", f"tests/test_{spec.name}.py", "generated"),
        ("op/CMakeLists.txt.jinja", "CMakeLists.txt", "generated"),
        ("op/BUILD_ON_CANN.md.jinja", "BUILD_ON_CANN.md", "generated"),
        ("op/README.md.jinja", "README.md", "user"),  # the operator's own documentation: written once
        *((t, rel, "user") for t, rel in PATTERN_FILES.get(spec.pattern, {}).items()),
    ]


def _render_all(spec: OpSpec, env) -> dict[str, tuple[bytes, str]]:
    """Render every file in memory first, so that a template error writes nothing."""
    ctx = _context(spec)
    out: dict[str, tuple[bytes, str]] = {}
    for template, rel, kind in _manifest(spec):
        if template.endswith(".jinja"):
            text = render_template(env, template, ctx)
            data = text.encode()
        else:  # only *.jinja files are rendered; anything else is copied verbatim
            data = (Path(env.loader.searchpath[0]) / template).read_bytes()
        out[rel] = (data, kind)
    return out


def _write(opdir: Path, files: dict[str, tuple[bytes, str]], result: RenderResult, *, overwrite_user: bool) -> None:
    for rel, (data, kind) in files.items():
        target = opdir / rel
        if kind == "user" and target.exists() and not overwrite_user:
            result.kept.append(rel)
            continue
        if target.is_file() and target.read_bytes() == data:
            result.unchanged.append(rel)
            continue
        atomic_write_bytes(target, data)
        result.written.append(rel)


def _write_answers(opdir: Path, spec: OpSpec, files: dict[str, tuple[bytes, str]]) -> None:
    answers = {
        "_hcomm_kit_version": __version__,
        "_template": "op",
        "name": spec.name,
        "pattern": spec.pattern,
        "handshake": spec.handshake,
        "op_toml_sha256": spec.toml_sha256,
        "generated": sorted(rel for rel, (_, kind) in files.items() if kind == "generated"),
        "user": sorted(rel for rel, (_, kind) in files.items() if kind == "user"),
    }
    atomic_write_bytes(opdir / ANSWERS_FILE, (json.dumps(answers, indent=2) + "\n").encode())


def new_op(
    name: str,
    *,
    pattern: str = "empty",
    handshake: str = "thread-notify",
    directory: str | Path = ".",
    force: bool = False,
    template_dir: Path | None = None,
) -> RenderResult:
    """Create ``directory/name/`` from the templates.

    Args:
        name: operator name (a C identifier; also the directory name).
        pattern: one of :data:`~hcomm_kit.build.opspec.PATTERNS`.
        handshake: ``"thread-notify"`` or ``"acl-notify"``.
        directory: parent directory.
        force: re-render into an existing directory (op.toml and generated files are
            overwritten; ``exec_op.cc`` is kept if it exists).
        template_dir: alternative template tree (tests).

    Returns:
        A :class:`RenderResult`.

    Raises:
        ConfigError: bad name/pattern/handshake, or the directory exists without ``force``.
        BuildError: a template failed to render (nothing is written then).

    Example:
        >>> new_op("my_allgather", pattern="mesh-allgather", directory="ops")  # doctest: +SKIP
    """
    names.check_op_name(name, key="NAME")
    opdir = Path(directory) / name
    if opdir.exists() and not opdir.is_dir():
        raise ConfigError(f"{opdir} exists and is not a directory; pick another name or --dir", key="NAME")
    if opdir.exists() and any(opdir.iterdir()) and not force:
        what = "an hcomm-kit operator" if (opdir / ANSWERS_FILE).exists() else "a non-empty directory"
        raise ConfigError(f"{opdir} already exists ({what}); use `hcomm-kit new --update {opdir}` after editing "
                          f"its op.toml, --force to re-render it (your exec_op.cc is kept), or another "
                          f"NAME / --dir", key="NAME")
    env = make_environment(template_dir)
    answers = default_answers(name, pattern, handshake)
    toml_text = render_template(env, "op/op.toml.jinja", {"a": answers, "version": __version__})
    toml_path = opdir / OP_TOML
    spec = parse_opspec(toml_text, path=toml_path, opdir=opdir)  # validate before writing anything
    files = _render_all(spec, env)
    result = RenderResult(opdir=opdir, spec=spec)
    opdir.mkdir(parents=True, exist_ok=True)
    _write(opdir, {OP_TOML: (toml_text.encode(), "generated"), **files}, result, overwrite_user=False)
    _write_answers(opdir, spec, files)
    return result


def _add_kind(opdir: Path, spec: OpSpec) -> OpSpec:
    """Write the kind an op.toml without ``[op].kind`` implies into it (after ``pattern``, else at the
    top of ``[op]``), so that what the operator computes is stated; returns the re-read spec."""
    path = opdir / OP_TOML
    lines = path.read_text().splitlines(keepends=True)
    entry = f'kind = "{spec.kind}"'.ljust(40) + "# what it computes (added by `hcomm-kit new --update`)\n"
    if spec.reference:
        entry += f'reference = "{spec.reference}"\n'
    section, at = "", None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
            if section == "[op]" and at is None:
                at = i + 1
        elif section == "[op]" and stripped.split("=")[0].strip() == "pattern":
            at = i + 1
    if at is None:
        lines += ["\n[op]\n"]
        at = len(lines)
    lines.insert(at, entry)
    atomic_write_bytes(path, "".join(lines).encode())
    new = load_opspec(opdir)
    if new.kind != spec.kind:  # never change what the operator computes
        raise BuildError(f"{path}: adding kind = {spec.kind!r} changed the kind to {new.kind!r}")
    return new


def update_op(opdir: str | Path, *, template_dir: Path | None = None) -> RenderResult:
    """Re-render the generated files of ``opdir`` from its (edited) ``op.toml``.

    ``exec_op.cc`` is never written (created only if missing); ``op.toml`` only gains ``kind`` (and
    the implied ``reference``) when it has none (written before kinds existed), as its pattern implies.

    Raises:
        ConfigError: not an operator directory, invalid op.toml, or the operator was renamed.
        BuildError: a template failed to render.
    """
    opdir = Path(opdir)
    if not (opdir / OP_TOML).is_file():
        raise ConfigError(f"{opdir} is not an operator directory (no {OP_TOML}); create one with "
                          "`hcomm-kit new NAME`", key="--update")
    answers = read_answers(opdir) or {}
    spec = load_opspec(opdir)
    if not spec.kind_explicit:
        spec = _add_kind(opdir, spec)
    old = answers.get("name")
    if old and old != spec.name:
        raise ConfigError(f"op.name changed from {old!r} to {spec.name!r}: renaming is not supported by "
                          f"--update (exec_op.cc and the file names depend on it); create a new operator "
                          f"with `hcomm-kit new {spec.name}` and move your exec_op.cc", key="op.name",
                          path=opdir / OP_TOML)
    env = make_environment(template_dir)
    files = _render_all(spec, env)
    result = RenderResult(opdir=opdir, spec=spec)
    _write(opdir, files, result, overwrite_user=False)
    _write_answers(opdir, spec, files)
    return result
