"""The package's layers (docs/architecture.md): every module imports only its own layer and the
layers below it, and no group of modules imports each other in a circle (lazy imports inside
functions count too). Single process, reads the sources only."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hcomm_kit"

#: Bottom to top. A module's layer is its first package below hcomm_kit (or its own name).
LAYERS = [
    {"_version", "base"},   # errors, environment variables, dtypes, limits, validation, data trees
    {"diag"},               # the per-rank log, trace files
    {"build"},              # op.toml model, compiler cache, the emulator's and operators' builds, CANN tree
    {"scaffold"},           # hcomm-kit new
    {"runtime"},            # ctypes declarations of the C API, backend selection
    {"core"},               # device, streams, events, bootstrap, the communicator host object
    {"ops"},                # custom operators, built-in collectives, references
    {"aclnn"},              # operators through the two-phase aclnn interface (invoker, pools)
    {"jobs"},               # mpirun lookup and launch, job output, per-rank runner
    {"bench"},
    {"testing"},            # the pytest plugin
    {"torch"},              # the torch.distributed backend
    {"cli"},
]
FACADES = {"hcomm_kit", "hcomm_kit.__main__"}  # the public API (lazy) and `python -m hcomm_kit`


def _modules() -> dict[str, Path]:
    mods = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = f
    return mods


def _imports(mod: str, path: Path, mods: dict[str, Path]) -> set[str]:
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                absmod = ".".join(base + ([node.module] if node.module else []))
            else:
                absmod = node.module or ""
            subs = [f"{absmod}.{a.name}" for a in node.names]
            # `from . import codes` imports the submodule; the package itself only for other names
            names = subs + ([absmod] if any(n not in mods for n in subs) else [])
        else:
            continue
        for n in names:
            while n and n not in mods and "." in n:
                n = n.rsplit(".", 1)[0]
            if n in mods and n.startswith("hcomm_kit") and n != mod:
                out.add(n)
    return out


def _layer(mod: str) -> int:
    part = mod.split(".")[1]
    return next(i for i, group in enumerate(LAYERS) if part in group)


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {i for i in _imports(m, p, mods) if i != "hcomm_kit"} for m, p in mods.items() if m not in FACADES}


def test_every_module_belongs_to_a_layer() -> None:
    unknown = sorted(m for m in _graph() if not any(m.split(".")[1] in g for g in LAYERS))
    assert not unknown, f"modules outside every layer (add the package to LAYERS and docs/architecture.md): {unknown}"


def test_imports_point_down() -> None:
    up = sorted(f"{m} -> {i}" for m, deps in _graph().items() for i in deps
                if i not in FACADES and _layer(i) > _layer(m))
    assert not up, "upward imports:\n" + "\n".join(up)


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles = []
    counter = [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
