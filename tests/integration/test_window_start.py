"""`relay` on a desktop that lacks Qt's xcb libraries: one line naming the packages, exit 2 —
never Qt's own abort. The real `relay` process, with an `ldd` that reports a library missing."""

import os
import subprocess
import sys

from .conftest import ROOT, relay_env


def test_missing_xcb_libraries_are_named_before_qt_loads(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    ldd = fake / "ldd"
    ldd.write_text("#!/bin/sh\necho '\tlibxcb-cursor.so.0 => not found'\necho '\tlibc.so.6 => /lib/libc.so.6'\n")
    ldd.chmod(0o755)
    env = relay_env({"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "DISPLAY": ":99"})
    env.pop("QT_QPA_PLATFORM", None)
    env.pop("WAYLAND_DISPLAY", None)
    p = subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True, cwd=ROOT, env=env,
                       timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("relay: "), p.stderr
    assert "libxcb-cursor0" in lines[0] and "xcb-util-cursor" in lines[0]
    assert "Aborted" not in p.stderr and "Traceback" not in p.stderr
