"""The check before Qt loads: on a fresh desktop Qt's xcb plugin misses system libraries and Qt
aborts the process; app.ui.qtdeps finds them with ldd first and names the packages to install."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.errors import UserError
from app.ui import qtdeps

ROOT = Path(__file__).resolve().parents[2]

# what ldd printed for PySide6 6.11's libqxcb.so on a fresh Debian 12 (abridged)
FRESH_DEBIAN = """\
\tlinux-vdso.so.1 (0x00007ffd5a1f2000)
\tlibQt6XcbQpa.so.6 => /venv/PySide6/Qt/plugins/platforms/../../lib/libQt6XcbQpa.so.6 (0x00007f5c)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-image.so.0 => /lib/x86_64-linux-gnu/libxcb-image.so.0 (0x00007f5c3f71a000)
\tlibxkbcommon-x11.so.0 => /lib/x86_64-linux-gnu/libxkbcommon-x11.so.0 (0x00007f5c3f72f000)
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f5c3da1e000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f5c3f89c000)
"""
X11 = {"DISPLAY": ":0"}


def test_not_found_lists_each_missing_soname_once_in_order():
    assert qtdeps.not_found(FRESH_DEBIAN) == ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert qtdeps.not_found("") == []


def test_sonames_map_to_debian_and_fedora_packages():
    deb, fedora, unknown = qtdeps.packages_for(
        ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-randr.so.0",
         "libxcb-shape.so.0", "libxkbcommon-x11.so.0", "libwhatever.so.3"])
    assert deb == ["libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1", "libxcb-randr0", "libxcb-shape0",
                   "libxkbcommon-x11-0"]
    assert fedora == ["xcb-util-cursor", "xcb-util-wm", "xcb-util-keysyms", "libxcb", "libxkbcommon-x11"]
    assert unknown == ["libwhatever.so.3"]


def test_every_xcb_and_x11_library_of_the_plugin_is_mapped():
    """Each library the plugin (and the Qt libraries it pulls in) links against outside the wheel
    and outside glibc/the C++ runtime has a package; checked on this machine's real plugin."""
    plugin = qtdeps.xcb_plugin()
    if not sys.platform.startswith("linux") or plugin is None:
        pytest.skip("needs Linux and PySide6's libqxcb.so")
    names = re.findall(r"^\s*(\S+\.so\S*) =>", qtdeps.run_ldd(plugin), re.M)
    xlibs = [n for n in names if re.match(r"lib(xcb|X|xkbcommon|SM|ICE|E?GL|OpenGL)", n)]
    assert xlibs and [n for n in xlibs if n not in qtdeps.PACKAGES] == []


def test_the_message_is_one_line_with_both_package_managers():
    with pytest.raises(UserError) as e:
        qtdeps.check_qt_runtime(environ=X11, platform="linux", ldd=lambda p: FRESH_DEBIAN)
    msg = str(e.value)
    assert "\n" not in msg and e.value.exit_code == 2
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 (Debian/Ubuntu)" in msg
    assert "sudo dnf install xcb-util-cursor xcb-util-wm xcb-util-keysyms (Fedora)" in msg
    assert "libxcb-cursor.so.0, libxcb-icccm.so.4, libxcb-keysyms.so.1" in msg


def test_unknown_libraries_are_named_as_they_are():
    with pytest.raises(UserError, match=r"your system's packages for libodd\.so\.1"):
        qtdeps.check_qt_runtime(environ=X11, platform="linux", ldd=lambda p: "\tlibodd.so.1 => not found\n")


def test_nothing_missing_passes():
    qtdeps.check_qt_runtime(environ=X11, platform="linux", ldd=lambda p: FRESH_DEBIAN.replace("not found", "/x"))


@pytest.mark.parametrize("environ, platform, xcb", [
    ({}, "linux", True),  # Qt's default on Linux
    ({"DISPLAY": ":0"}, "linux", True),
    ({"QT_QPA_PLATFORM": "xcb"}, "linux", True),
    ({"QT_QPA_PLATFORM": "xcb:dpi=96"}, "linux", True),
    ({"QT_QPA_PLATFORM": "offscreen"}, "linux", False),
    ({"QT_QPA_PLATFORM": "minimal"}, "linux", False),
    ({"QT_QPA_PLATFORM": "wayland"}, "linux", False),
    ({"QT_QPA_PLATFORM": "wayland;xcb"}, "linux", False),
    ({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, "linux", False),
    ({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "x11", "DISPLAY": ":0"}, "linux", True),
    ({}, "darwin", False),
    ({}, "win32", False),
])
def test_only_the_xcb_platform_is_checked(environ, platform, xcb):
    calls = []
    assert qtdeps.will_use_xcb(environ, platform) is xcb
    try:
        qtdeps.check_qt_runtime(environ=environ, platform=platform, ldd=lambda p: calls.append(p) or FRESH_DEBIAN)
    except UserError:
        pass
    assert bool(calls) is (xcb and qtdeps.xcb_plugin() is not None)


def test_importing_the_check_does_not_import_qt():
    code = "import sys, app.ui.qtdeps as q; q.xcb_plugin(); print(any(m.startswith('PySide6') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_setup_installs_the_debian_packages_of_every_mapped_library():
    """scripts/setup.sh's apt list covers the map, so a fresh Debian/Ubuntu gets them all."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    listed = set(re.search(r'QT_APT="([^"]*)"', text).group(1).split())
    assert {deb for deb, _ in qtdeps.PACKAGES.values()} <= listed
    fedora = set(re.search(r'QT_DNF="([^"]*)"', text).group(1).split())
    assert {f for _, f in qtdeps.PACKAGES.values()} <= fedora


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Qt's xcb plugin and ldd are Linux only")
def test_after_setup_the_real_plugin_finds_every_library():
    """Fails on a machine where scripts/setup.sh has not installed the Qt xcb runtime packages."""
    plugin = qtdeps.xcb_plugin()
    if plugin is None:
        pytest.skip("PySide6 has no libqxcb.so here (not a wheel install)")
    out = qtdeps.run_ldd(plugin)
    assert out, "ldd gave no output"
    assert qtdeps.not_found(out) == [], qtdeps.message(qtdeps.not_found(out))
