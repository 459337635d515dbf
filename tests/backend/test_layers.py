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
