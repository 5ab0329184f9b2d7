"""Importing the user's own models: a CTranslate2 translator folder, an ``.argosmodel`` file (zip,
or tar), a Whisper CTranslate2 folder, or a Piper voice (.onnx with its .onnx.json).

Everything an import reads is untrusted: archive member names are checked (no absolute paths, no
``..``, no links or special files) before anything is written, language codes and pack ids are
checked before they become paths, and the pack is staged in a hidden folder inside the models
folder and renamed into place, so nothing outside the models folder is written, moved or removed.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from app.core.errors import UserError
from app.models import integrity
from app.models.integrity import sha256_file
from app.models.layout import Installed, installed, models_dir, write_manifest
from app.models.safety import check_language, check_pack_id, member_target, move_into, remove_tree


def import_model(path: Path, root: Path | None = None, langs: str | None = None, name: str | None = None,
                 progress=print) -> Installed:
    root = root or models_dir()
    path = Path(path)
    if name is not None:
        check_pack_id(name, "--name")
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".relay-import-", dir=root) as tmp:
        stage = Path(tmp) / "pack"
        stage.mkdir()
        if path.is_file() and path.suffix == ".argosmodel":
            role, languages, licence = _import_argos(path, stage, langs)
        elif path.is_file() and path.suffix == ".onnx":
            role, languages, licence = _import_piper(path, stage)
        elif path.is_dir() and (path / "model.bin").is_file():
            cfg = _json(path / "config.json") if (path / "config.json").is_file() else {}
            if "alignment_heads" in cfg or "suppress_ids" in cfg or (path / "tokenizer.json").is_file() \
                    and (path / "vocabulary.txt").is_file() and not _has_sp(path):
                role, languages, licence = _import_whisper(path, stage)
            else:
                role, languages, licence = _import_ct2_translator(path, stage, langs)
        else:
            raise UserError(f"{path}: not a recognised model (expected a CTranslate2 folder, an .argosmodel "
                            "file, a Whisper CTranslate2 folder or a Piper .onnx voice)")
        if langs and role == "mt":
            languages = _parse_langs(langs)
        pack_id = check_pack_id(name or "user-" + "-".join([role] + [c.replace("*", "multi") for c in languages]))
        files = {str(p.relative_to(stage)): {"size": p.stat().st_size, "sha256": sha256_file(p)}
                 for p in sorted(stage.rglob("*")) if p.is_file()}
        write_manifest(stage, pack_id, role, languages, licence, files, source=[str(path)], imported=True)
        final = root / pack_id
        remove_tree(root, final)
        move_into(root, stage, final)
    progress(f"imported {path} as '{pack_id}' ({role}, {'-'.join(languages)})")
    inst = installed(root)[pack_id]
    integrity.remember(inst, root)
    return inst


def _json(p: Path) -> dict:
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{p}: unreadable JSON ({e})") from None
    if not isinstance(d, dict):
        raise UserError(f"{p}: expected a JSON object")
    return d


def _has_sp(d: Path) -> bool:
    return any((d / n).is_file() for n in ("sentencepiece.model", "source.spm", "spm.model"))


def _parse_langs(s: str) -> list[str]:
    parts = s.split("-")
    if len(parts) != 2 or not all(parts):
        raise UserError(f"--langs must look like SRC-TGT (e.g. en-zh), got '{s}'")
    return [check_language(p, "--langs") for p in parts]


@contextlib.contextmanager
def _archive_members(path: Path):
    """(name, kind, open) for each member of a zip or tar file; kind: file, dir, link or special."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                yield [(i.filename, "link" if stat.S_ISLNK(i.external_attr >> 16) else "dir" if i.is_dir()
                        else "file", lambda i=i: zf.open(i)) for i in zf.infolist()]
        elif tarfile.is_tarfile(path):
            with tarfile.open(path) as tf:
                yield [(m.name, "file" if m.isfile() else "dir" if m.isdir() else
                        "link" if m.issym() or m.islnk() else "special",
                        lambda m=m: tf.extractfile(m)) for m in tf.getmembers()]
        else:
            raise UserError(f"{path}: not a valid .argosmodel (zip or tar) file")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as e:
        raise UserError(f"{path}: not a valid .argosmodel (zip or tar) file ({e})") from None


def _import_argos(path: Path, stage: Path, langs: str | None):
    with _archive_members(path) as members:
        for n, kind, _open in members:  # every member is checked before anything is written
            if kind in ("link", "special"):
                raise UserError(f"{path}: refusing archive member {n!r} (links and special files are not allowed)")
            if PurePosixPath(n).parts or kind != "dir":
                member_target(stage, n, path)
        files = [(PurePosixPath(n).parts, opener) for n, kind, opener in members if kind == "file"]
        meta_at = next((i for i, (parts, _o) in enumerate(files) if len(parts) == 2 and parts[1] == "metadata.json"),
                       None)
        if meta_at is None:
            raise UserError(f"{path}: .argosmodel without metadata.json")
        top = files[meta_at][0][0]
        try:
            with files[meta_at][1]() as f:
                meta = json.loads(f.read(1 << 20))
        except (ValueError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as e:
            raise UserError(f"{path}: unreadable metadata.json ({e})") from None
        if not isinstance(meta, dict):
            raise UserError(f"{path}: metadata.json is not a JSON object")
        languages = None if langs else [check_language(meta.get(k), f"{path}: metadata.json {k}")
                                        for k in ("from_code", "to_code")]
        for parts, opener in files:
            if parts[0] != top or len(parts) < 2 or parts[1] == "stanza":
                continue  # other top folders (a Mac's __MACOSX/) and Stanza's sentence splitter
            out = member_target(stage, "/".join(parts[1:]), path)
            try:
                out.parent.mkdir(parents=True, exist_ok=True)
                with opener() as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            except (OSError, EOFError, zipfile.BadZipFile, tarfile.TarError, zlib.error) as e:
                raise UserError(f"{path}: could not unpack {'/'.join(parts)} ({e})") from None
    if not (stage / "model" / "model.bin").is_file() or not (stage / "sentencepiece.model").is_file():
        raise UserError(f"{path}: .argosmodel lacks model/model.bin or sentencepiece.model")
    return "mt", languages or [], "see the package's README"


def _import_ct2_translator(path: Path, stage: Path, langs: str | None):
    languages = None
    if not langs:
        meta = path / "metadata.json"
        if not meta.is_file():
            raise UserError(f"{path}: say which languages it translates with --langs SRC-TGT")
        m = _json(meta)
        languages = [check_language(m.get(k), f"{meta} {k}") for k in ("from_code", "to_code")]
    if not _has_sp(path) and not _has_sp(path.parent):
        raise UserError(f"{path}: no SentencePiece model (sentencepiece.model or source.spm/target.spm) found")
    try:
        shutil.copytree(path, stage / "model", dirs_exist_ok=True)
        for n in ("sentencepiece.model", "source.spm", "target.spm"):
            for d in (path, path.parent):
                if (d / n).is_file() and not (stage / n).is_file():
                    shutil.copy2(d / n, stage / n)
    except (OSError, shutil.Error) as e:
        raise UserError(f"{path}: could not copy the model ({str(e).splitlines()[0][:200]})") from None
    return "mt", languages or [], "as stated by the model's authors"


def _import_whisper(path: Path, stage: Path):
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
    family = cfg.get("language", {}).get("family") if isinstance(cfg.get("language"), dict) else None
    voice = cfg.get("espeak", {}).get("voice") if isinstance(cfg.get("espeak"), dict) else None
    lang = family or (voice[:2] if isinstance(voice, str) else None)
    lang = check_language(lang, f"{cfg_path}: language.family")
    shutil.copy2(path, stage / "voice.onnx")
    shutil.copy2(cfg_path, stage / "voice.onnx.json")
    return "tts", [lang], "see the voice's model card"
