#!/usr/bin/env bash
# Install Relay into ./.venv and its offline model packs (pinned, sha256-checked) into the model store.
#   scripts/setup.sh          # app only
#   scripts/setup.sh test     # app + test tools
# On Linux it also installs the system libraries Qt's xcb platform plugin needs (a fresh desktop
# lacks some, and Qt then aborts), with apt-get or dnf when run as root or with password-less sudo;
# otherwise it says which packages to install and goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extra=""
[ "${1:-}" = "test" ] && extra="[test]"
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".${extra}"

# The Qt xcb runtime: every library PySide6's libqxcb.so links against outside the wheel
# (app/ui/qtdeps.py maps each one to these packages; tests/unit/test_qtdeps.py keeps them in step).
QT_APT="libxcb1 libxcb-cursor0 libxcb-icccm4 libxcb-ewmh2 libxcb-image0 libxcb-keysyms1 libxcb-render-util0
  libxcb-util1 libxcb-glx0 libxcb-randr0 libxcb-render0 libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0
  libxcb-xinerama0 libxcb-xinput0 libxcb-xkb1 libx11-xcb1 libx11-6 libxau6 libxdmcp6 libxkbcommon-x11-0
  libxkbcommon0 libsm6 libice6 libegl1 libgl1 libglx0 libopengl0 libglvnd0 libfontconfig1 libfreetype6
  libdbus-1-3 libglib2.0-0 libpng16-16 zlib1g"
QT_DNF="libxcb xcb-util-cursor xcb-util-wm xcb-util-image xcb-util-keysyms xcb-util-renderutil xcb-util
  libX11-xcb libX11 libXau libXdmcp libxkbcommon-x11 libxkbcommon libSM libICE libglvnd-egl libglvnd-glx
  libglvnd-opengl libglvnd fontconfig freetype dbus-libs glib2 libpng zlib"

# pkg_install COMMAND... -- PACKAGES...: all at once, else one by one (a release may lack a name)
pkg_install() {
  local cmd=() p
  while [ "$1" != "--" ]; do cmd+=("$1"); shift; done
  shift
  "${cmd[@]}" "$@" >/dev/null 2>&1 && return 0
  for p in "$@"; do "${cmd[@]}" "$p" >/dev/null 2>&1 || true; done
}

if [ "$(uname -s)" = Linux ] && ! .venv/bin/python -m app.ui.qtdeps 2>/dev/null; then
  SUDO=()
  can=yes
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO=(sudo -n); else can=no; fi
  fi
  # shellcheck disable=SC2086  # the package lists are meant to split into words
  if [ $can = yes ] && command -v apt-get >/dev/null; then
    echo "setup: installing the Qt xcb runtime libraries (apt-get)"
    ${SUDO[@]+"${SUDO[@]}"} apt-get update -qq >/dev/null 2>&1 || true
    pkg_install ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends -- $QT_APT
  elif [ $can = yes ] && command -v dnf >/dev/null; then
    echo "setup: installing the Qt xcb runtime libraries (dnf)"
    pkg_install ${SUDO[@]+"${SUDO[@]}"} dnf install -y -q -- $QT_DNF
  fi
  # still missing (no package manager, no rights, no network): say what to install, and go on
  .venv/bin/python -m app.ui.qtdeps ||
    echo "setup: the window will not open until those are installed; the command line works without them" >&2
fi

export HF_HUB_OFFLINE=1
.venv/bin/relay models install
# compile the audio front-end's Numba kernels now, not during the first session (a few seconds)
.venv/bin/relay --compile-kernels > /dev/null
