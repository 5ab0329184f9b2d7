"""Where the packs live and what their manifests say.

Layout: ``<models_dir>/<pack id>/`` holds the pack's files and ``manifest.json`` (role, languages,
licence, and each file's size and sha256).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from app.models.safety import valid_pack_id

MANIFEST = "manifest.json"


def relay_home() -> Path:
    env = os.environ.get("RELAY_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "relay"


def models_dir() -> Path:
    return Path(os.environ.get("RELAY_MODELS") or relay_home() / "models")


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


def read_manifest(folder: Path) -> dict | None:
    try:
        m = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


def write_manifest(folder: Path, pack_id: str, role: str, languages: list[str], licence: str,
                   files: dict, **extra) -> None:
    m = {"id": pack_id, "role": role, "languages": languages, "licence": licence, "files": files}
    m.update({k: v for k, v in extra.items() if v})
    (folder / MANIFEST).write_text(json.dumps(m, indent=1, ensure_ascii=False), encoding="utf-8")


def installed(root: Path | None = None) -> dict[str, Installed]:
    """The packs in the models folder. A manifest whose id is not a valid pack id is skipped: pack
    ids end up in paths, so one from a hand-edited or hostile manifest is never used."""
    root = root or models_dir()
    out: dict[str, Installed] = {}
    if not root.is_dir():
        return out
    for d in sorted(root.iterdir()):
        if not d.is_dir() or d.name.endswith(".partial") or d.name.startswith("."):
            continue
        m = read_manifest(d)
        if m is None or not valid_pack_id(m.get("id")) or not isinstance(m.get("role"), str):
            continue
        out[m["id"]] = Installed(m["id"], m["role"], list(m.get("languages", [])), m.get("licence", "?"), d, m)
    return out
