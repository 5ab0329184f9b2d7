"""Importing hostile models: archive members with ``..``, absolute names or links, and metadata whose
language codes (or ``--name``) would make a pack id that walks out of the models folder. Nothing is
written, moved or removed outside the models folder, and each is refused with a one-line UserError."""

import io
import json
import os
import tarfile
import zipfile

import pytest

from app.core.errors import UserError
from app.models import store

WEIGHTS = b"ct2 weights " * 1000


@pytest.fixture
def env(tmp_path, monkeypatch):
    """tmp/models is the models folder; tmp/victim-en (what a traversing pack id would reach) and
    tmp/victim are folders outside it that must survive every test."""
    root = tmp_path / "models"
    root.mkdir()
    monkeypatch.setenv("RELAY_MODELS", str(root))
    for v in ("victim", "victim-en"):
        (tmp_path / v).mkdir()
        (tmp_path / v / "keep.txt").write_text("precious")
    return tmp_path, root


def outside(tmp_path, root) -> dict:
    """Every path under tmp_path outside the models folder and the test's inputs, with its content."""
    out = {}
    for d, dirs, files in os.walk(tmp_path):
        if os.path.realpath(d).startswith(os.path.realpath(root)) or "inputs" in d.split(os.sep):
            continue
        for n in dirs + files:
            p = os.path.join(d, n)
            out[p] = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else os.path.islink(p)
    return out


def argos_entries(from_code="zh", to_code="en", top="pkg"):
    meta = json.dumps({"from_code": from_code, "to_code": to_code}).encode()
    return [(f"{top}/metadata.json", meta), (f"{top}/sentencepiece.model", b"spm"),
            (f"{top}/model/model.bin", WEIGHTS), (f"{top}/model/config.json", b"{}")]


def make_zip(path, entries, links=()):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries:
            zf.writestr(zipfile.ZipInfo(name), data)  # a ZipInfo keeps the name exactly as given
        for name, target in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16  # a symbolic link, as `zip --symlinks` stores it
            zf.writestr(info, target)
    return path


def make_tar(path, entries, links=()):
    with tarfile.open(path, "w") as tf:
        for name, target, kind in links:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tf.addfile(info)
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def inputs(tmp_path):
    d = tmp_path / "inputs"
    d.mkdir(exist_ok=True)
    return d


def refused(tmp_path, root, path, match, **kw):
    before = outside(tmp_path, root)
    with pytest.raises(UserError, match=match) as e:
        store.import_model(path, root=root, progress=lambda m: None, **kw)
    assert "\n" not in str(e.value)
    assert outside(tmp_path, root) == before
    assert store.installed(root) == {}
    assert [p.name for p in root.iterdir() if p.name != ".checked.json"] == []  # no staging folder left


def test_a_well_formed_argosmodel_imports_from_zip_and_from_tar(env):
    tmp_path, root = env
    z = make_zip(inputs(tmp_path) / "a.argosmodel", argos_entries() + [("__MACOSX/pkg/._x", b"mac")])
    inst = store.import_model(z, root=root, progress=lambda m: None)
    assert inst.id == "user-mt-zh-en" and inst.languages == ["zh", "en"]
    assert (inst.path / "model" / "model.bin").read_bytes() == WEIGHTS
    t = make_tar(inputs(tmp_path) / "b.argosmodel", argos_entries(from_code="ja", top="./pkg"))
    assert store.import_model(t, root=root, progress=lambda m: None).id == "user-mt-ja-en"
    assert store.verify("user-mt-ja-en", root) == []


@pytest.mark.parametrize("member", [
    "pkg/../../../victim/evil.txt",  # resolves to tmp/victim/evil.txt from the staging folder
    "pkg/model/../../../../../victim/evil.txt",
    "/{tmp}/victim/evil.txt",  # absolute
    "pkg//{tmp}/victim/evil.txt",  # absolute once the top folder is cut off
    "pkg\\..\\..\\..\\victim\\evil.txt",  # a traversal on Windows
    "C:/victim/evil.txt",
])
def test_zip_members_outside_the_pack_are_refused_before_anything_is_written(env, member):
    tmp_path, root = env
    name = member.replace("/{tmp}", str(tmp_path)).replace("{tmp}", str(tmp_path).lstrip("/"))
    z = make_zip(inputs(tmp_path) / "evil.argosmodel", [(name, b"pwned")] + argos_entries())
    refused(tmp_path, root, z, "refusing archive member")
    assert not (tmp_path / "victim" / "evil.txt").exists()


def test_zip_symlink_members_are_refused(env):
    tmp_path, root = env
    z = make_zip(inputs(tmp_path) / "evil.argosmodel", argos_entries()[:2],
                 links=[("pkg/model", str(tmp_path / "victim"))])
    refused(tmp_path, root, z, "links and special files are not allowed")


@pytest.mark.parametrize("member", ["pkg/../../../victim/evil.txt", "/{tmp}/victim/evil.txt"])
def test_tar_members_outside_the_pack_are_refused(env, member):
    tmp_path, root = env
    t = make_tar(inputs(tmp_path) / "evil.argosmodel",
                 [(member.replace("{tmp}", str(tmp_path).lstrip("/")), b"pwned")] + argos_entries())
    refused(tmp_path, root, t, "refusing archive member")


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_tar_links_are_refused(env, kind):
    """The classic: a link to a folder outside, then a file written "through" it."""
    tmp_path, root = env
    target = str(tmp_path / "victim") if kind == tarfile.SYMTYPE else "pkg/metadata.json"
    t = make_tar(inputs(tmp_path) / "evil.argosmodel", argos_entries(),
                 links=[("pkg/model", target, kind)])
    refused(tmp_path, root, t, "links and special files are not allowed")


@pytest.mark.parametrize("code", ["../../../victim", "../../x", "/abs", "zh/../..", "", None, 7])
def test_argos_metadata_language_codes_never_become_paths(env, code):
    tmp_path, root = env
    (root / "user-mt-..").mkdir()  # what a first hostile import left behind (see the next assertion)
    z = make_zip(inputs(tmp_path) / "evil.argosmodel", argos_entries(from_code=code))
    before = outside(tmp_path, root)
    with pytest.raises(UserError, match="is not a language code"):
        store.import_model(z, root=root, progress=lambda m: None)
    assert outside(tmp_path, root) == before  # tmp/victim-en was neither removed nor replaced


def test_ct2_folder_metadata_language_codes_are_checked(env):
    tmp_path, root = env
    d = inputs(tmp_path) / "ct2"
    d.mkdir()
    (d / "model.bin").write_bytes(WEIGHTS)
    (d / "sentencepiece.model").write_bytes(b"spm")
    (d / "metadata.json").write_text(json.dumps({"from_code": "../../../victim", "to_code": "en"}))
    refused(tmp_path, root, d, "is not a language code")


def test_piper_language_family_is_checked(env):
    tmp_path, root = env
    v = inputs(tmp_path) / "voice.onnx"
    v.write_bytes(b"onnx")
    (inputs(tmp_path) / "voice.onnx.json").write_text(json.dumps({"language": {"family": "../../../victim"}}))
    refused(tmp_path, root, v, "is not a language code")


@pytest.mark.parametrize("name", ["../victim-en", "..", ".", "a/b", "/abs", "Upper", "-x", "x" * 101, ""])
def test_name_must_be_a_plain_pack_id(env, name):
    tmp_path, root = env
    z = make_zip(inputs(tmp_path) / "a.argosmodel", argos_entries())
    refused(tmp_path, root, z, "not a valid pack id", name=name)


def test_langs_option_is_checked_too(env):
    tmp_path, root = env
    z = make_zip(inputs(tmp_path) / "a.argosmodel", argos_entries())
    refused(tmp_path, root, z, "is not a language code", langs="..-en")


def test_a_pack_folder_linked_elsewhere_is_replaced_not_followed(env):
    """Importing over a pack whose folder is a link to another disk removes the link only."""
    tmp_path, root = env
    (root / "user-mt-zh-en").symlink_to(tmp_path / "victim", target_is_directory=True)
    z = make_zip(inputs(tmp_path) / "a.argosmodel", argos_entries())
    inst = store.import_model(z, root=root, progress=lambda m: None)
    assert not inst.path.is_symlink() and (inst.path / "model" / "model.bin").is_file()
    assert (tmp_path / "victim" / "keep.txt").read_text() == "precious"


def test_manifests_with_a_traversing_id_are_ignored(env):
    tmp_path, root = env
    d = root / "odd"
    d.mkdir()
    store._write_manifest(d, "../victim", "mt", ["zh", "en"], "?", {})
    assert store.installed(root) == {}


def test_damaged_and_garbage_archives_are_one_line_errors(env):
    tmp_path, root = env
    z = make_zip(inputs(tmp_path) / "bad.argosmodel", argos_entries())
    data = bytearray(z.read_bytes())
    at = data.find(WEIGHTS[:24])
    data[at + 100] ^= 0xFF  # a stored member whose CRC no longer matches
    z.write_bytes(bytes(data))
    refused(tmp_path, root, z, "could not unpack pkg/model/model.bin")
    g = inputs(tmp_path) / "garbage.argosmodel"
    g.write_bytes(b"not a zip")
    refused(tmp_path, root, g, "not a valid .argosmodel")
