"""Checking a pack's files: a full re-hash (``verify``), and the check at load (``check_at_load``).

At load every file's sha256 is compared with its pin (the catalog's for a known pack, the
manifest's for an imported one), but a file is only re-hashed when its size, mtime, ctime or inode
differ from the last time it hashed right: the results are kept in ``<models_dir>/.checked.json``,
so a normal start only calls stat(). A file swapped for another of the same size (any mtime) has a
new ctime or inode, is re-hashed, and fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from app.core.errors import ModelDamaged
from app.models.catalog import PACKS
from app.models.layout import Installed, installed

CHECKED = ".checked.json"


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def pins(inst: Installed) -> dict[str, str]:
    """Each file's expected sha256: the catalog's pin where there is one, else the manifest's."""
    want = {name: info.get("sha256", "") for name, info in inst.manifest.get("files", {}).items()}
    pack = PACKS.get(inst.id)
    if pack is not None:
        pinned = dict(pack.files) | {name: sha for name, (_parts, sha) in pack.joined.items()}
        want.update({name: pinned[name] for name in want if name in pinned})
    return want


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _load_checked(root: Path) -> dict:
    try:
        d = json.loads((root / CHECKED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _save_checked(root: Path, checked: dict) -> None:
    """Written atomically; a read-only models folder only means re-hashing at each start."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".checked-", dir=root)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(checked, f)
        os.replace(tmp, root / CHECKED)
    except OSError:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def remember(inst: Installed, root: Path) -> None:
    """Record a pack's files as checked (just installed or verified against their pins)."""
    checked = _load_checked(root)
    for name, sha in pins(inst).items():
        try:
            checked[f"{inst.id}/{name}"] = _stamp((inst.path / name).stat()) + [sha]
        except OSError:
            pass
    _save_checked(root, checked)


def check_at_load(inst: Installed, root: Path) -> None:
    """Raise ModelDamaged when a file is missing, has the wrong size, or (re-hashed only when its
    stat changed) the wrong sha256."""
    sizes = {name: info.get("size") for name, info in inst.manifest.get("files", {}).items()}
    checked = _load_checked(root)
    changed = False
    for name, sha in pins(inst).items():
        p = inst.path / name
        try:
            st = p.stat()
        except OSError:
            raise ModelDamaged(inst.id, f"{name} is missing") from None
        if not p.is_file():
            raise ModelDamaged(inst.id, f"{name} is missing")
        if st.st_size != sizes[name]:
            raise ModelDamaged(inst.id, f"{name} has the wrong size")
        key, stamp = f"{inst.id}/{name}", _stamp(st)
        if checked.get(key) == stamp + [sha]:
            continue
        if sha256_file(p) != sha:
            checked.pop(key, None)
            _save_checked(root, checked)
            raise ModelDamaged(inst.id, f"{name} does not match its sha256")
        checked[key] = stamp + [sha]
        changed = True
    if changed:
        _save_checked(root, checked)


def verify(pack_id: str, root: Path) -> list[str]:
    """Re-hash every file; returns the problems found (empty when the pack is intact)."""
    inst = installed(root).get(pack_id)
    if inst is None:
        return [f"{pack_id}: not installed"]
    problems = []
    for name, want in pins(inst).items():
        p = inst.path / name
        if not p.is_file():
            problems.append(f"{pack_id}: {name} is missing")
            continue
        digest = sha256_file(p)
        if digest != want:
            problems.append(f"{pack_id}: {name} sha256 {digest[:12]}… differs from {want[:12]}…")
    if not problems:
        remember(inst, root)
    return problems
