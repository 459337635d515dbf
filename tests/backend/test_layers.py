"""The compiler (`icoforge.backend`) is a layer the lab sits on: it never imports the lab, and the
packages of icoforge import each other without a cycle. Read from the source (ast), so imports
inside functions count as much as those at the top of a module."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "icoforge"
LAB = ("suite", "grids", "granule", "perf", "tune", "cli", "bench")


def imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in the file, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
            if node.module == "icoforge":  # from icoforge import suite
                out += [(node.lineno, f"icoforge.{a.name}") for a in node.names]
    return out


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "icoforge" and len(parts) > 1 else None


def test_backend_imports_nothing_from_the_lab():
    bad = [
        f"{path.relative_to(ROOT.parent)}:{line}: {module}"
        for path in sorted((ROOT / "backend").rglob("*.py"))
        for line, module in imports(path)
        if package_of(module) in LAB
    ]
    assert not bad, "the compiler imports the lab:\n" + "\n".join(bad)


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).parts
        src = rel[0] if len(rel) > 1 else path.stem  # icoforge/cache.py is the package "cache"
        for _, module in imports(path):
            dst = package_of(module)
            if dst is not None and dst != src:
                graph.setdefault(src, set()).add(dst)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return path[path.index(m) :] + [m]
            if m not in state and (cycle := visit(m)):
                return cycle
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (cycle := visit(n)):
            return cycle
    return None


def test_packages_import_each_other_without_a_cycle():
    graph = package_graph()
    assert "backend" in graph and "suite" in graph["cli"]  # the walk sees the real packages
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


@pytest.mark.parametrize("graph, cycle", [({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]), ({"a": {"b"}, "b": set()}, None)])
def test_find_cycle(graph, cycle):
    assert find_cycle(graph) == cycle


def test_the_compiler_is_made_of_small_pieces():
    """No module over 600 lines and no function over 80 in icoforge/backend (issue 18): a compiler
    a newcomer reads module by module."""
    too_long = []
    for path in sorted((ROOT / "backend").rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(ROOT.parent)
        if (n := len(text.splitlines())) > 600:
            too_long.append(f"{name}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                too_long.append(f"{name}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not too_long, "\n".join(too_long)


# --- module level: no import circle between any two modules, stages import only downward ------
# The backend's stages in data-flow order. A stage imports its own modules and those of the stages
# before it, never a later one: the runtime drives the others (it is their caller), the schedule
# runs the passes, codegen prints what the schedule gives. `icoforge.backend` itself (the facade:
# make_backend, the backend objects) is above them all and no stage imports it.
STAGES = ("frontend", "ir", "lowering", "passes", "schedule", "codegen", "runtime")


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def executed_imports(tree: ast.AST) -> list[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) of every absolute import that can run, in functions too; those under
    `if TYPE_CHECKING:` never run (annotations only) and are left out."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module, tuple(a.name for a in node.names)))
        children = list(ast.iter_child_nodes(node))
        if _type_checking_only(node):
            children = node.orelse
        stack += children
    return out


def module_graph(root: pathlib.Path) -> dict[str, dict[str, int]]:
    """module -> {imported module: line} for the package at `root` (its name: root's name); a
    package is its `__init__`. `from p import x` is an edge to the module p.x where there is one,
    else to p."""
    base = root.parent
    names = {".".join(p.relative_to(base).with_suffix("").parts).removesuffix(".__init__"): p for p in root.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for name, path in names.items():
        edges = graph.setdefault(name, {})
        for line, module, imported in executed_imports(ast.parse(path.read_text(), str(path))):
            targets = [f"{module}.{n}" if f"{module}.{n}" in names else module for n in imported] or [module]
            for t in targets:
                while t and t not in names:  # import a.b.c where a.b.c is no module of ours: its nearest package
                    t = t.rpartition(".")[0]
                if t and t != name:
                    edges.setdefault(t, line)
    return graph


def stage_of(module: str, backend: str) -> int | None:
    parts = module.split(".")
    prefix = backend.split(".")
    if parts[: len(prefix)] != prefix:
        return None
    rest = parts[len(prefix) :]
    return STAGES.index(rest[0]) if rest and rest[0] in STAGES else len(STAGES)  # the facade: above all


def upward_imports(graph: dict[str, dict[str, int]], backend: str) -> list[str]:
    """`module:line -> imported` for every import of a later stage (or of the facade) by a stage."""
    bad = []
    for src, edges in sorted(graph.items()):
        s = stage_of(src, backend)
        if s is None or s == len(STAGES):
            continue
        for dst, line in sorted(edges.items()):
            d = stage_of(dst, backend)
            if d is not None and d > s:
                bad.append(f"{src}:{line} -> {dst}")
    return bad


def test_modules_import_each_other_without_a_cycle():
    graph = module_graph(ROOT)
    assert "icoforge.backend.runtime.workflow" in graph["icoforge.backend.runtime.gpu"]  # real edges seen
    cycle = find_cycle({m: set(e) for m, e in graph.items()})
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_backend_stages_import_only_earlier_stages():
    graph = module_graph(ROOT)
    assert {m.split(".")[2] for m in graph if m.count(".") >= 3 and m.startswith("icoforge.backend.")} >= set(STAGES)
    bad = upward_imports(graph, "icoforge.backend")
    assert not bad, "a stage imports a later one:\n" + "\n".join(bad)


def _plant(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / next(iter(files)).split("/")[0]


def test_the_checks_report_a_planted_circle_and_a_planted_upward_import(tmp_path):
    """The two checks above can fail: a circle closed by an import inside a function, and a
    frontend module importing the runtime, both planted in a package of their own."""
    pkg = _plant(tmp_path, {
        "planted/__init__.py": "",
        "planted/a.py": "from planted import b\n",
        "planted/b.py": "def f():\n    from planted.c import g\n",
        "planted/c.py": "import planted.a\ndef g(): pass\n",
        "planted/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted import a\n",
        "planted/backend/__init__.py": "",
        "planted/backend/frontend/__init__.py": "",
        "planted/backend/frontend/read.py": "def f():\n    from planted.backend.runtime import run\n",
        "planted/backend/runtime/__init__.py": "",
        "planted/backend/runtime/run.py": "from planted.backend.frontend import read\n",
    })  # fmt: skip
    graph = module_graph(pkg)
    assert find_cycle({m: set(e) for m, e in graph.items()}) == ["planted.a", "planted.b", "planted.c", "planted.a"]
    assert graph["planted.typed"] == {}  # TYPE_CHECKING imports never run
    assert upward_imports(graph, "planted.backend") == ["planted.backend.frontend.read:2 -> planted.backend.runtime.run"]
    # the facade is above every stage: a stage importing it is upward too
    (pkg / "backend/frontend/read.py").write_text("from planted.backend import make\n")
    assert upward_imports(module_graph(pkg), "planted.backend") == ["planted.backend.frontend.read:1 -> planted.backend"]
