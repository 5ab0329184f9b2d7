"""Path safety for the model store: pack ids, language codes and archive member names come from
untrusted places (an imported file's metadata, ``--name``, a zip's member list), and each ends up in
a path. Nothing is ever written, moved or removed outside the models folder."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PurePosixPath

from app.core.errors import UserError

PACK_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
MAX_ID = 100  # well under any file system's name limit, with room for ".partial"
# ISO 639-1/-3 codes with an optional region or script (Argos: "zh", "pt"; Piper: "en", "zh_CN")
LANG = re.compile(r"^[a-z]{2,3}(_[a-z0-9]{2,8})?$")


def valid_pack_id(pack_id) -> bool:
    return (isinstance(pack_id, str) and len(pack_id) <= MAX_ID and pack_id not in (".", "..")
            and PACK_ID.match(pack_id) is not None)


def check_pack_id(pack_id: str, where: str = "pack id") -> str:
    if not valid_pack_id(pack_id):
        raise UserError(f"{where} {pack_id!r} is not a valid pack id: use lowercase letters, digits, '.', '_' "
                        f"and '-', starting with a letter or digit (at most {MAX_ID} characters), e.g. my-zh-en")
    return pack_id


def check_language(code, where: str) -> str:
    """A language code from metadata, lower-cased; raises a one-line error for anything else."""
    low = code.strip().lower().replace("-", "_") if isinstance(code, str) else ""
    if not LANG.match(low):
        raise UserError(f"{where}: {code!r} is not a language code (expected e.g. en, zh or pt_BR)")
    return low


def contained(root: Path, path: Path) -> Path:
    """``path`` with its parent resolved, checked to lie inside ``root`` (itself resolved: the
    models folder may be a link to another disk). The last component is not resolved, so a link
    there is dealt with as the link itself."""
    root_r = root.resolve()
    parent = path.parent.resolve()
    if path.name in ("", ".", "..") or (parent != root_r and root_r not in parent.parents):
        raise UserError(f"{path}: refusing to touch a path outside the models folder {root_r}")
    return parent / path.name


def remove_tree(root: Path, path: Path) -> None:
    """Remove a pack folder inside ``root``; a link there is unlinked, never followed."""
    p = contained(root, path)
    if p.is_symlink() or p.is_file():
        p.unlink()
    elif p.is_dir():
        shutil.rmtree(p)


def move_into(root: Path, src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, both inside ``root`` (one file system: a rename, never a copy)."""
    s, d = contained(root, src), contained(root, dst)
    if os.path.lexists(d):
        raise UserError(f"{d}: already exists")
    os.rename(s, d)


def member_target(stage: Path, name: str, archive: Path) -> Path:
    """Where an archive member named ``name`` is written under ``stage``; refuses absolute names,
    empty components, drive letters, backslashes and ``..`` before anything is written."""
    bad = (not name or name.startswith("/") or "//" in name or "\\" in name or "\0" in name
           or re.match(r"^[A-Za-z]:", name) is not None or ".." in PurePosixPath(name).parts)
    target = stage.joinpath(*PurePosixPath(name).parts) if not bad else stage
    if bad or target == stage or not target.resolve().is_relative_to(stage.resolve()):
        raise UserError(f"{archive}: refusing archive member {name!r} (it would be written outside the pack)")
    return target
