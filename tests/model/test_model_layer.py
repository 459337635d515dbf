"""icoforge.model is a lab layer: it imports grids, suite, backend (and the shared top-level
modules settings, errors, stalls, owners), and only the CLI imports it. Read from the source (ast), imports
inside functions included."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2] / "icoforge"
ALLOWED = {"model", "grids", "suite", "backend", "settings", "errors", "stalls", "owners", "portable_numpy"}


def _icoforge_imports(path: pathlib.Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + ([f"icoforge.{a.name}" for a in node.names] if node.module == "icoforge" else [])
        out |= {n.split(".")[1] for n in names if n.startswith("icoforge.")}
    return out


def test_model_imports_only_its_layers():
    bad = {p.name: _icoforge_imports(p) - ALLOWED for p in (ROOT / "model").glob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_only_the_cli_imports_model():
    users = sorted(
        str(p.relative_to(ROOT))
        for p in ROOT.rglob("*.py")
        if "model" in _icoforge_imports(p) and p.parent.name not in ("model", "cli")
    )
    assert users == []
    assert "model" in _icoforge_imports(ROOT / "cli" / "model_cmd.py")
