"""The documentation: the MkDocs site builds with every link and anchor valid, its copies of the
code's tables are current, the API reference lists every public name, and every shell and Python
block of README.md and docs/ either runs here or says why it cannot.

A block is marked by an HTML comment on the line before its fence: ``<!-- run: GROUP -->`` (run by
the test of that group below) or ``<!-- not-run: REASON -->``. Groups: ``tour`` (the README's tour,
one bash script in an empty directory, in order), ``python`` (each block a program, all run in one
2-rank job in the tour's directory, which holds ``my_allreduce`` and ``ops/my_allreduce``),
``shell`` (each block a bash script in an empty directory of its own, holding a ``main.cc``),
``pytest`` (a test file run with the hcomm-kit pytest plugin in the tour's directory).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


RUNNABLE = {"bash", "sh", "shell", "console", "python", "py", "pycon"}
GROUPS = {"tour", "python", "shell", "pytest"}
_FENCE = re.compile(r"^\s*```(\S*)")
_MARK = re.compile(r"^\s*<!--\s*(run|not-run):\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int       # of the opening fence, 1-based
    lang: str
    mark: str       # "run", "not-run" or "" (unmarked)
    arg: str        # the group or the reason
    code: str

    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def _documents() -> list[Path]:
    """README.md and the pages of docs/ (docs/pending/ holds texts not yet placed: not documentation)."""
    return [REPO / "README.md", *(p for p in sorted(DOCS.rglob("*.md")) if "pending" not in p.relative_to(DOCS).parts)]


def snippets() -> list[Snippet]:
    """Every fenced block of the documents, with the marker on the line before it."""
    found = []
    for path in _documents():
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            indent = len(lines[i]) - len(lines[i].lstrip())
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            mark = _MARK.match(lines[i - 1]) if i else None
            code = "\n".join(line[indent:] for line in lines[i + 1:j]) + "\n"
            found.append(Snippet(path, i + 1, m.group(1), mark.group(1) if mark else "", mark.group(2) if mark else "",
                                 code))
            i = j + 1
    return found


def _group(name: str) -> list[Snippet]:
    return [s for s in snippets() if s.mark == "run" and s.arg == name]


def test_every_snippet_is_run_or_says_why() -> None:
    problems = []
    for s in snippets():
        if s.lang not in RUNNABLE:
            continue
        if s.mark == "run" and s.arg not in GROUPS:
            problems.append(f"{s.where()}: unknown group {s.arg!r} (known: {', '.join(sorted(GROUPS))})")
        elif s.mark == "not-run" and len(s.arg) < 10:
            problems.append(f"{s.where()}: not-run needs its reason")
        elif not s.mark:
            problems.append(f"{s.where()}: a {s.lang} block without <!-- run: GROUP --> or <!-- not-run: REASON -->")
    assert not problems, "\n".join(problems)
    for group in GROUPS:
        assert _group(group), f"no block of group {group!r}: its test would run nothing"


def _block(page: str, name: str) -> str:
    text = (DOCS / page).read_text()
    return text.split(f"<!-- {name}:begin -->\n", 1)[1].split(f"<!-- {name}:end -->", 1)[0]


def test_reduce_table_is_the_one_of_dtypes() -> None:
    from hcomm_kit.base.dtypes import hccl_api_reduce_table

    assert _block("cann.md", "reduce-table") == hccl_api_reduce_table(), (
        "docs/cann.md's reduce table is stale: paste hcomm_kit.base.dtypes.hccl_api_reduce_table() between the markers")


@pytest.mark.parametrize("module, page", [("hcomm_kit", "hcomm_kit.md"), ("hcomm_kit.aclnn", "aclnn.md"),
                                          ("hcomm_kit.torch", "torch.md")])
def test_api_reference_lists_every_public_name(module: str, page: str) -> None:
    """Each name of the module's ``__all__`` has a ``::: path.to.name`` entry on its reference page
    (``__all__`` read from the source: importing hcomm_kit.torch imports torch, seconds)."""
    import ast

    source = REPO / Path(*module.split(".")) / "__init__.py"
    names = next(ast.literal_eval(node.value) for node in ast.parse(source.read_text()).body
                 if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets))
    documented = set(re.findall(r"^::: [\w.]+\.(\w+)$", (DOCS / "reference" / page).read_text(), re.M))
    assert set(names) <= documented, f"docs/reference/{page} misses {sorted(set(names) - documented)}"


@pytest.mark.slow  # ~10 s: renders every page and the API reference
@pytest.mark.skipif(shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (python -m pip install -e '.[docs]')")
def test_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link, a missing anchor, a page left out of the navigation
    or a docstring the API reference cannot parse fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=REPO, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert (tmp_path / "site" / "reference" / "hcomm_kit" / "index.html").is_file()
    assert not (tmp_path / "site" / "pending").exists()


# ---- running the blocks (full run: they build operators and start mpirun jobs) ----------------

def _env() -> dict[str, str]:
    """This interpreter's ``hcomm-kit`` and ``python`` first on PATH, the build cache shared."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "HCOMM_KIT_QUIET": "1"}


def _bash(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The README's tour, run once in an empty directory (its steps share the operator it scaffolds)."""
    where = tmp_path_factory.mktemp("tour")
    script = "".join(s.code for s in _group("tour"))
    return where, _bash(script, where, timeout=900)


@pytest.mark.slow
def test_readme_tour(tour) -> None:
    where, p = tour
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-6000:]
    assert re.search(r"my_allreduce +allreduce .* OK", out), out[-6000:]          # run: checked against numpy
    assert re.search(r"^\d+ passed", p.stdout, re.M) and " failed" not in p.stdout, out[-6000:]   # test
    assert "success" in p.stdout and "model_time(us)" in p.stdout, out[-6000:]    # bench, with the model
    assert "DEADLOCK" in out and "exec_op.cc:" in out and "failed as expected" in p.stdout, out[-6000:]


@pytest.mark.slow
def test_python_blocks_and_examples(tour) -> None:
    """Every ``run: python`` block and ``examples/custom_allreduce.py``, in one 2-rank job."""
    where, p = tour
    assert p.returncode == 0, "the tour failed (test_readme_tour says why)"
    if not (where / "ops" / "my_allreduce").exists():
        shutil.copytree(where / "my_allreduce", where / "ops" / "my_allreduce")
    programs = []
    for k, s in enumerate(_group("python")):
        f = where / f"snippet_{k}.py"
        f.write_text(s.code)
        programs.append((s.where(), str(f), []))
    programs.append(("examples/custom_allreduce.py", str(REPO / "examples" / "custom_allreduce.py"), ["ops/my_allreduce"]))
    driver = where / "run_snippets.py"
    driver.write_text(
        "import json, runpy, sys\n"
        f"for where, path, args in json.loads({json.dumps(json.dumps(programs))}):\n"
        "    sys.argv = [path, *args]\n"
        "    runpy.run_path(path, run_name='__main__')\n"
        "    print('ran', where, flush=True)\n")
    job = subprocess.run([sys.executable, "-m", "hcomm_kit", "launch", "--np", "2", "--timeout", "400", "--",
                          sys.executable, str(driver)], cwd=where, env=_env(), capture_output=True, text=True,
                         timeout=480)
    assert job.returncode == 0, (job.stdout + job.stderr)[-6000:]
    for where_, _, _ in programs:
        assert f"ran {where_}" in job.stdout, (where_, job.stdout[-3000:], job.stderr[-3000:])


@pytest.mark.slow
def test_shell_blocks(tmp_path: Path) -> None:
    """Each ``run: shell`` block in an empty directory of its own (with a C host ``main.cc``)."""
    for k, s in enumerate(_group("shell")):
        d = tmp_path / f"block{k}"
        d.mkdir()
        (d / "main.cc").write_text("#include <acl/acl.h>\n#include <stdio.h>\n"
                                   "int main() { if (aclInit(NULL) != ACL_SUCCESS) return 1; puts(\"ok\"); "
                                   "return aclFinalize() == ACL_SUCCESS ? 0 : 1; }\n")
        p = _bash(s.code, d, timeout=600)
        assert p.returncode == 0, f"{s.where()}:\n{s.code}\n{(p.stdout + p.stderr)[-4000:]}"


@pytest.mark.slow
def test_pytest_blocks(tour) -> None:
    """Each ``run: pytest`` block as a test file in the tour's directory, at 2 ranks."""
    where, p = tour
    assert p.returncode == 0, "the tour failed (test_readme_tour says why)"
    for k, s in enumerate(_group("pytest")):
        f = where / f"test_doc_block_{k}.py"
        f.write_text(s.code)
        job = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--mpi-np", "2",
                              f.name], cwd=where, env=_env(), capture_output=True, text=True, timeout=300)
        assert job.returncode == 0 and " passed" in job.stdout, f"{s.where()}:\n{(job.stdout + job.stderr)[-4000:]}"


def test_environment_page_defaults_are_the_declared_ones() -> None:
    """Each row of docs/environment.md names declared variables and gives their declared default
    (``hcomm_kit.base.envs``: the one table), every declared variable has a row."""
    from hcomm_kit.base import envs

    computed = {"HCOMM_KIT_CACHE_DIR": "`~/.cache/hcomm_kit`"}  # None in the table: derived from $XDG_CACHE_HOME
    rows = re.findall(r"^\| (`[A-Z][A-Z0-9_]*`(?:, `[A-Z][A-Z0-9_]*`)*) \| ([^|]+) \|", (DOCS / "environment.md").read_text(),
                      re.M)
    seen, problems = set(), []
    for names, default in rows:
        default = default.strip()
        for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", names):
            seen.add(name)
            var = envs.VARIABLES.get(name)
            if var is None:
                problems.append(f"{name}: not declared in hcomm_kit/base/envs.py")
                continue
            want = computed.get(name) or ("`''`" if var.default == "" else f"`{var.default}`" if var.default is not None
                                          else None)
            if want is None:
                if not default.startswith("("):
                    problems.append(f"{name}: no declared default, the page says {default}")
            elif default != want:
                problems.append(f"{name}: the page says {default}, envs.py {want}")
    missing = set(envs.VARIABLES) - seen
    assert not problems and not missing, "\n".join(problems + [f"no row for {sorted(missing)}"])


def test_command_line_page_lists_every_command() -> None:
    """docs/cli.md's table has a row for each subcommand of ``hcomm-kit`` (hcomm_kit.cli.SUBCOMMANDS)."""
    from hcomm_kit.cli import SUBCOMMANDS

    page = (DOCS / "cli.md").read_text()
    rows = set(re.findall(r"^\| `hcomm-kit (\w+)", page, re.M))
    assert set(SUBCOMMANDS) <= rows, f"docs/cli.md has no row for {sorted(set(SUBCOMMANDS) - rows)}"
    assert rows <= set(SUBCOMMANDS), f"docs/cli.md lists commands that do not exist: {sorted(rows - set(SUBCOMMANDS))}"


# Words about how the software's development was organised, not about the software: none of them in
# what a user reads (README, CHANGELOG, docs/, the pages and templates shipped in the wheel).
HISTORY_WORDING = re.compile(r"\b(this|previous|last|next|earlier) stop\b|\bstops? \d+\b|\bsessions?\b|"
                             r"\bhelper runs?\b|\bthe lead\b", re.I)


def shipped_documents(root: Path) -> list[Path]:
    """The documents a user reads under ``root`` (a checkout, or an installed package's data tree)."""
    files = [root / name for name in ("README.md", "CHANGELOG.md") if (root / name).is_file()]
    for tree in ("docs", "templates"):
        if (root / tree).is_dir():
            files += [p for p in sorted((root / tree).rglob("*")) if p.is_file() and p.suffix in (".md", ".jinja")
                      and "pending" not in p.relative_to(root / tree).parts]
    return files


def history_wording(files: list[Path]) -> list[str]:
    found = []
    for path in files:
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if HISTORY_WORDING.search(line):
                found.append(f"{path}:{n}: {line.strip()[:120]}")
    return found


def test_documents_speak_of_the_software() -> None:
    files = shipped_documents(REPO)
    assert len(files) > 20 and REPO / "README.md" in files
    found = history_wording(files)
    assert not found, "development-history wording in a user document:\n" + "\n".join(found)


@pytest.mark.parametrize("module", ["hcomm_kit", "hcomm_kit.aclnn", "hcomm_kit.testing",
                                    pytest.param("hcomm_kit.torch", marks=pytest.mark.slow)])  # imports torch
def test_public_api_has_docstrings(module: str) -> None:
    """The API reference is generated from the docstrings: every public function, class, method and
    property of the module's ``__all__`` (hcomm-kit's own, inherited ones included) has one."""
    import inspect

    if module == "hcomm_kit.torch":
        pytest.importorskip("torch")
    mod = importlib.import_module(module)
    missing = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if not (inspect.isclass(obj) or callable(obj)):
            continue  # constants: documented by the page's text
        if not inspect.getdoc(obj):
            missing.append(f"{module}.{name}")
        if not inspect.isclass(obj):
            continue
        for klass in obj.__mro__:
            if not klass.__module__.startswith("hcomm_kit"):
                continue
            for attr, value in vars(klass).items():
                if attr.startswith("_") or not (inspect.isfunction(value) or isinstance(value, (property, staticmethod,
                                                                                                  classmethod))):
                    continue
                if not (value.__doc__ if not isinstance(value, (staticmethod, classmethod)) else value.__func__.__doc__):
                    missing.append(f"{module}.{name}.{attr} ({klass.__module__}.{klass.__qualname__})")
    assert not missing, "no docstring:\n" + "\n".join(sorted(set(missing)))


def test_docs_command_prints_the_pages_with_their_includes(capsys) -> None:
    """``hcomm-kit docs index`` prints the home page with the README's tour in place of the site's
    include line; every page of the site is listed."""
    from hcomm_kit import cli

    assert cli.main(["docs", "index"]) == 0
    text = capsys.readouterr().out
    assert "--8<--" not in text and "hcomm-kit new my_allreduce --pattern ring-allreduce" in text
    assert "[end:tour]" not in text and "[start:tour]" not in text
    assert cli.main(["docs"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert {p.stem for p in DOCS.glob("*.md")} | {"optoml"} == listed
