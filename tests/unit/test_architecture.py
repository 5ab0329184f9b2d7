"""The house's rules, checked: no import circles, the command line imported by nobody, the running
session declared (no duck-typing by attribute), deferred imports explained."""

import ast
import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"


def _cycles(graph) -> list[tuple]:
    out = []
    for m in sorted(graph.modules):
        for n in graph.find_modules_directly_imported_by(m):
            if graph.chain_exists(importer=n, imported=m):
                out.append(graph.find_shortest_chain(importer=n, imported=m) + (m,))
    return out


def test_no_import_circles_anywhere_in_app():
    assert _cycles(grimp.build_graph("app")) == []


def test_cycle_finder_sees_a_circle(tmp_path, monkeypatch):
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from circ import b  # deferred, still a circle\n")
    (pkg / "b.py").write_text("import circ.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("circ"))


def _python_files():
    return [p for p in APP.rglob("*.py") if "__pycache__" not in p.parts]


def test_nothing_outside_the_command_line_imports_it():
    bad = []
    for f in _python_files():
        if f.is_relative_to(APP / "cli") or f == APP / "main.py":
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "app.cli" or n.startswith("app.cli.") for n in names):
                bad.append(str(f.relative_to(ROOT)))
    assert bad == []


def test_running_sessions_are_told_apart_by_their_protocol_not_by_attributes():
    hits = []
    for f in _python_files():
        text = f.read_text(encoding="utf-8")
        for i, line in enumerate(text.splitlines(), 1):
            if re.search(r"hasattr\(.*connect", line) or re.search(r"\w\._abort\(", line):
                hits.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert hits == []


def _deferred_imports(path: Path) -> list[tuple[int, str]]:
    """Imports inside a function body without a reason comment on their line."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    line = lines[sub.lineno - 1]
                    end = lines[sub.end_lineno - 1]
                    if "#" not in line and "#" not in end:
                        out.append((sub.lineno, line.strip()))
    return out


def test_every_function_local_import_says_why():
    """Imports go at the top of a module; one deferred on purpose (a heavy or optional library
    that only some paths need) says why on its line."""
    bad = []
    for f in _python_files():
        bad += [f"{f.relative_to(ROOT)}:{n}: {s}" for n, s in _deferred_imports(f)]
    assert bad == []


def test_the_reason_check_sees_an_unexplained_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f():\n    import json\n    import os  # a reason\n")
    assert _deferred_imports(f) == [(2, "import json")]
