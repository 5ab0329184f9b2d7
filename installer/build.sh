#!/usr/bin/env bash
# Build the Relay desktop app with PyInstaller: a one-folder app plus an archive of it.
#   installer/build.sh [OUT_DIR]        (default: build/bundle, inside the clone)
# Produces  OUT_DIR/dist/relay/                      the one-folder app (run OUT_DIR/dist/relay/relay)
#           OUT_DIR/relay-VERSION-OS-ARCH.tar.gz     (Linux; macOS: .dmg of Relay.app; Windows: .zip,
#                                                     and Setup.exe when Inno Setup's iscc is on PATH)
#           OUT_DIR/build-info.json                  sizes and build time
# Everything (PyInstaller's work folder and its binary cache) stays under OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${1:-build/bundle}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=$(command -v python3)

if ! "$PY" -c "import PyInstaller" 2>/dev/null; then
  echo "build: installing PyInstaller (the 'bundle' extra)" >&2
  "$PY" -m pip install -q --disable-pip-version-check -e ".[bundle]"
fi

export PYINSTALLER_CONFIG_DIR="$OUT/pyinstaller-cache"  # no cache outside the clone
t0=$(date +%s)
"$PY" -m PyInstaller --noconfirm --log-level "${PYI_LOG_LEVEL:-WARN}" \
  --distpath "$OUT/dist" --workpath "$OUT/work" installer/relay.spec
# Drop debug sections (ctranslate2's extension alone carries 64 MB of them). Not PyInstaller's
# strip=True: that strips everything, and breaks the libraries auditwheel grafted into *.libs/.
if [ "$(uname -s)" = Linux ] && command -v strip >/dev/null && command -v readelf >/dev/null; then
  find "$OUT/dist/relay/_internal" -type f -name "*.so*" -not -path "*.libs/*" -print0 |
    while IFS= read -r -d '' f; do
      if readelf -S "$f" 2>/dev/null | grep -q '\.debug_info'; then strip --strip-debug "$f"; fi
    done
fi
t1=$(date +%s)

# Compile the Numba kernels now, for a generic CPU, and ship them (app/accel/numba_cache.py): the
# first launch after installing then compiles nothing. Runs the frozen app itself, so the cache
# matches the shipped launcher (Numba stamps a frozen app's cache with the executable's hash).
case "$(uname -s)" in
  Darwin*) FROZEN="$OUT/dist/Relay.app/Contents/MacOS/relay" ;;
  MINGW*|MSYS*|CYGWIN*) FROZEN="$OUT/dist/relay/relay-cli.exe" ;;
  *) FROZEN="$OUT/dist/relay/relay" ;;
esac
rm -rf "$OUT/kernel-cache"
NUMBA_CPU_NAME=generic NUMBA_CACHE_DIR="$OUT/kernel-cache" QT_QPA_PLATFORM=offscreen \
  "$FROZEN" --compile-kernels > "$OUT/kernels.json"
"$PY" - "$OUT/kernels.json" <<'PYEOF'
import json, os, shutil, sys
k = json.load(open(sys.argv[1]))
src, dst = k["cache_path"], k["bundle_cache_dir"]
os.makedirs(dst, exist_ok=True)
names = [n for n in os.listdir(src) if n.endswith((".nbi", ".nbc"))]
for n in names:
    shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))
assert names and k["compiled"] > 0, f"no kernels were compiled: {k}"
print(f"build: {k['compiled']} Numba kernels compiled for a generic CPU, {len(names)} files shipped")
PYEOF
t2k=$(date +%s)

VERSION=$("$PY" -c "import app; print(app.__version__)")
ARCH=$(uname -m)
case "$(uname -s)" in
  Linux*)
    NAME="relay-$VERSION-linux-$ARCH"
    ARCHIVE="$OUT/$NAME.tar.gz"
    rm -f "$ARCHIVE"
    # the weights are not in the bundle, so most of it is shared libraries: gzip -6 is the sweet spot
    tar -C "$OUT/dist" --transform "s,^relay,$NAME," -czf "$ARCHIVE" relay
    ;;
  Darwin*)
    NAME="Relay-$VERSION-macos-$ARCH"
    ARCHIVE="$OUT/$NAME.dmg"
    rm -f "$ARCHIVE"
    hdiutil create -volname "Relay $VERSION" -srcfolder "$OUT/dist/Relay.app" -ov -format UDZO "$ARCHIVE"
    ;;
  MINGW*|MSYS*|CYGWIN*)
    NAME="relay-$VERSION-windows-$ARCH"
    ARCHIVE="$OUT/$NAME.zip"
    rm -f "$ARCHIVE"
    (cd "$OUT/dist" && powershell -NoProfile -Command "Compress-Archive -Path relay -DestinationPath '$ARCHIVE'")
    if command -v iscc >/dev/null; then
      iscc -DAppVersion="$VERSION" -DDistDir="$(cygpath -w "$OUT/dist/relay")" -O"$(cygpath -w "$OUT")" \
        installer/windows/relay.iss
    fi
    ;;
esac
t2=$(date +%s)

"$PY" - "$OUT" "$ARCHIVE" "$((t1 - t0))" "$((t2 - t2k))" "$((t2k - t1))" <<'PYEOF'
import json, os, sys
out, archive, build_s, archive_s, kernels_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
folder = os.path.join(out, "dist", "relay")
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs
           if not os.path.islink(os.path.join(d, f)))
info = {"folder": folder, "folder_bytes": size, "archive": archive, "archive_bytes": os.path.getsize(archive),
        "pyinstaller_s": build_s, "archive_s": archive_s, "kernels_s": kernels_s}
with open(os.path.join(out, "build-info.json"), "w") as f:
    json.dump(info, f, indent=1)
print(f"build: {folder} ({size / 1e6:.0f} MB) and {archive} ({info['archive_bytes'] / 1e6:.0f} MB); "
      f"PyInstaller {build_s} s, kernels {kernels_s} s, archive {archive_s} s")
PYEOF
