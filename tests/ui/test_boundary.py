"""The pipeline stays Qt-free: an import-linter contract, and a direct check of every module."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QT = ("PySide6", "shiboken6", "pyqtgraph", "PyQt5", "PyQt6", "app.ui")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_pipeline_and_accel_never_import_qt():
    bad = []
    for pkg in ("core", "accel", "pipeline", "session"):
        for f in (ROOT / "app" / pkg).rglob("*.py"):
            for mod in _imports(f):
                if any(mod == q or mod.startswith(q + ".") for q in QT):
                    bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    assert not bad, bad


def test_checker_sees_a_violation(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from PySide6.QtCore import QObject\nimport app.ui.window\n")
    assert {"PySide6.QtCore", "app.ui.window"} <= _imports(f)


def test_import_linter_contract_holds():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    text = (ROOT / "pyproject.toml").read_text()
    assert "[tool.importlinter]" in text and "app.pipeline" in text
    proc = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout
