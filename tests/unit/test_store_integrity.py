"""The check at load: every file's sha256, re-hashed only when its stat changed, so a normal start
rehashes nothing and a weights file swapped for another of the same size fails with the one-line
ModelDamaged naming `relay models install --force <pack>`."""

import hashlib
import json
import os

import pytest

from app.core.errors import ModelDamaged
from app.models import integrity, store

WEIGHTS = bytes(range(256)) * 400


@pytest.fixture
def pack(tmp_path, monkeypatch):
    root = tmp_path / "models"
    monkeypatch.setenv("RELAY_MODELS", str(root))
    src = tmp_path / "voice.onnx"
    src.write_bytes(WEIGHTS)
    (tmp_path / "voice.onnx.json").write_text(json.dumps({"language": {"family": "en"}}))
    inst = store.import_model(src, root=root, name="my-voice", progress=lambda m: None)
    return root, inst


@pytest.fixture
def hashes(monkeypatch):
    """The files hashed, in order."""
    seen = []
    real = integrity.sha256_file

    def counting(p, *a, **kw):
        seen.append(p.name)
        return real(p, *a, **kw)

    monkeypatch.setattr(integrity, "sha256_file", counting)
    return seen


def swap(path, data, mtime_ns):
    """Replace a file the way a copy or an editor would: a new file renamed over it."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_normal_start_rehashes_nothing(pack, hashes):
    root, inst = pack
    for _ in range(3):
        assert store.get("my-voice", root).path == inst.path
    assert hashes == []  # the import recorded the files it had just hashed


def test_a_file_whose_stat_changed_is_rehashed_once(pack, hashes):
    root, inst = pack
    os.utime(inst.path / "voice.onnx")  # same content, new mtime: still intact
    store.get("my-voice", root)
    store.get("my-voice", root)
    assert hashes == ["voice.onnx"]


@pytest.mark.parametrize("shift_ns", [-10**12, 10**12, 0])  # older, newer, and the very same mtime
def test_weights_swapped_for_others_of_the_same_size_fail_at_load(pack, shift_ns):
    root, inst = pack
    w = inst.path / "voice.onnx"
    store.get("my-voice", root)
    swap(w, WEIGHTS[::-1], w.stat().st_mtime_ns + shift_ns)
    assert w.stat().st_size == len(WEIGHTS)
    with pytest.raises(ModelDamaged) as e:
        store.get("my-voice", root)
    msg = str(e.value)
    assert "\n" not in msg and "voice.onnx does not match its sha256" in msg
    assert msg.endswith("relay models install --force my-voice")
    with pytest.raises(ModelDamaged):  # and again: a failed check is not remembered as a pass
        store.get("my-voice", root)
    assert "voice.onnx sha256" in store.verify("my-voice", root)[0]


def test_the_check_also_works_without_a_record(pack):
    root, inst = pack
    (root / integrity.CHECKED).unlink()
    store.get("my-voice", root)
    swap(inst.path / "voice.onnx", WEIGHTS[::-1], 0)
    (root / integrity.CHECKED).write_text("not json")
    with pytest.raises(ModelDamaged, match="does not match its sha256"):
        store.get("my-voice", root)


def test_a_known_pack_is_checked_against_the_catalog_pin_not_only_its_manifest(tmp_path, monkeypatch):
    """A file swapped along with its manifest entry still fails: the catalog pins known packs."""
    root = tmp_path / "models"
    d = root / "piper-joe-en"
    d.mkdir(parents=True)
    files = {}
    for name in ("voice.onnx", "voice.onnx.json", "MODEL_CARD"):
        (d / name).write_bytes(name.encode())
        files[name] = {"size": len(name), "sha256": hashlib.sha256(name.encode()).hexdigest()}
    store._write_manifest(d, "piper-joe-en", "tts", ["en"], "CC0", files)
    with pytest.raises(ModelDamaged, match="relay models install --force piper-joe-en"):
        store.get("piper-joe-en", root)


def test_missing_and_resized_files_still_fail_at_once(pack, hashes):
    root, inst = pack
    (inst.path / "voice.onnx").write_bytes(WEIGHTS + b"x")
    with pytest.raises(ModelDamaged, match="wrong size"):
        store.get("my-voice", root)
    (inst.path / "voice.onnx").unlink()
    with pytest.raises(ModelDamaged, match="voice.onnx is missing"):
        store.get("my-voice", root)
    assert hashes == []


def test_verify_refreshes_the_record(pack, hashes):
    root, inst = pack
    os.utime(inst.path / "voice.onnx")
    assert store.verify("my-voice", root) == []
    hashes.clear()
    store.get("my-voice", root)
    assert hashes == []
