"""Does Qt's xcb platform plugin find the system libraries it needs? Checked before Qt loads.

PySide6's wheels bring Qt but not the X11/xcb libraries its xcb plugin links against; on a fresh
Debian or Ubuntu desktop several are missing (libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1, ...),
and Qt then aborts the process with its own message. ``check_qt_runtime()`` runs ``ldd`` on the
plugin first and raises a one-line UserError naming the packages to install. This module never
imports Qt, so it is cheap to import. ``python -m app.ui.qtdeps`` checks from a shell (setup.sh).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from app.core.errors import UserError

# soname -> (Debian/Ubuntu package, Fedora package): every library outside the wheel that
# PySide6's libqxcb.so (and the libQt6XcbQpa/Gui/DBus it pulls in) links against on Linux
PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-ewmh.so.2": ("libxcb-ewmh2", "xcb-util-wm"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libXau.so.6": ("libxau6", "libXau"),
    "libXdmcp.so.6": ("libxdmcp6", "libXdmcp"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libSM.so.6": ("libsm6", "libSM"),
    "libICE.so.6": ("libice6", "libICE"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libGLX.so.0": ("libglx0", "libglvnd-glx"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libGLdispatch.so.0": ("libglvnd0", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libpng16.so.16": ("libpng16-16", "libpng"),
    "libz.so.1": ("zlib1g", "zlib"),
}

def packages_for(sonames: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(Debian/Ubuntu packages, Fedora packages, sonames with no known package), each in order,
    without repeats."""
    deb: list[str] = []
    fedora: list[str] = []
    unknown: list[str] = []
    for so in sonames:
        if so in PACKAGES:
            d, f = PACKAGES[so]
            deb += [d] if d not in deb else []
            fedora += [f] if f not in fedora else []
        elif so not in unknown:
            unknown.append(so)
    return deb, fedora, unknown


def not_found(ldd_output: str) -> list[str]:
    """The sonames ``ldd`` reports as "not found", in order, without repeats."""
    out: list[str] = []
    for line in ldd_output.splitlines():
        name, sep, where = line.strip().partition("=>")
        if sep and where.strip() == "not found" and name.strip() not in out:
            out.append(name.strip())
    return out


def will_use_xcb(environ=None, platform: str | None = None) -> bool:
    """Whether Qt will load its xcb plugin: on Linux, when QT_QPA_PLATFORM's first choice is xcb,
    or when nothing is chosen and the session is not Wayland's (offscreen, minimal, wayland, ...
    never load it)."""
    env = os.environ if environ is None else environ
    if not (platform or sys.platform).startswith("linux"):
        return False
    chosen = env.get("QT_QPA_PLATFORM", "").strip()
    if chosen:  # "xcb", "xcb:dpi=96", "wayland;xcb" (a list of fallbacks: the first is tried first)
        return chosen.split(";")[0].split(":")[0].strip().lower() == "xcb"
    return not (env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE", "").lower() == "wayland")


def xcb_plugin() -> Path | None:
    """PySide6's libqxcb.so, found without importing PySide6 (a source install or the bundle)."""
    try:
        spec = importlib.util.find_spec("PySide6")
    except (ImportError, ValueError):
        spec = None
    dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    if getattr(sys, "_MEIPASS", None):
        dirs.append(os.path.join(sys._MEIPASS, "PySide6"))
    for d in dirs:
        p = Path(d) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if p.is_file():
            return p
    return None


def run_ldd(path: Path) -> str:
    """ldd's output; empty when ldd is missing or fails (then nothing is reported missing)."""
    try:
        proc = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout


def missing_libraries(plugin: Path | None = None, ldd=run_ldd) -> list[str]:
    plugin = plugin or xcb_plugin()
    return not_found(ldd(plugin)) if plugin is not None else []


def message(missing: list[str]) -> str:
    deb, fedora, unknown = packages_for(missing)
    parts = []
    if deb:
        parts.append(f"sudo apt-get install {' '.join(deb)} (Debian/Ubuntu)")
    if fedora:
        parts.append(f"sudo dnf install {' '.join(fedora)} (Fedora)")
    if unknown:
        parts.append(f"your system's packages for {', '.join(unknown)}")
    return (f"the window cannot open: Qt's xcb platform plugin needs system libraries that are missing "
            f"({', '.join(missing)}); install them with: {' or '.join(parts)}")


def check_qt_runtime(environ=None, platform: str | None = None, ldd=run_ldd) -> None:
    """Raise a one-line UserError naming the packages to install when Qt would load its xcb
    plugin and that plugin's system libraries are missing; call it before anything imports Qt."""
    if not will_use_xcb(environ, platform):
        return
    missing = missing_libraries(ldd=ldd)
    if missing:
        raise UserError(message(missing))


def main(argv: list[str] | None = None) -> int:
    """Exit 1 (with the message) when libraries are missing; ``--packages`` prints the missing
    libraries' Debian/Ubuntu packages instead (``--fedora``: Fedora's)."""
    argv = sys.argv[1:] if argv is None else argv
    missing = missing_libraries()
    if "--packages" in argv:
        deb, fedora, unknown = packages_for(missing)
        print(" ".join((fedora if "--fedora" in argv else deb) + unknown))
    elif missing:
        print(message(missing), file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
