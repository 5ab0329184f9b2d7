"""The model store with the real packs: list, verify, import of user models."""

import zipfile

import pytest

from app.models import store

from .conftest import DATA, relay, summary_of

pytestmark = pytest.mark.models


def test_list_shows_installed_packs_with_size_and_licence():
    p = relay("models", "list")
    assert p.returncode == 0, p.stderr
    for pid in ("whisper-base", "whisper-tiny-en", "opus-mt-zh-en", "piper-joe-en"):
        line = next(row for row in p.stdout.splitlines() if row.startswith(pid))
        assert "installed" in line and "MB" in line
    assert "CC-BY-4.0" in p.stdout and "GPL" in p.stdout


def test_verify_passes_on_intact_packs():
    p = relay("models", "verify", "opus-mt-zh-en", "piper-joe-en")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "opus-mt-zh-en: ok" in p.stdout


def test_install_is_idempotent_and_offline_when_intact():
    p = relay("models", "install", "piper-joe-en")
    assert p.returncode == 0 and "already installed" in p.stderr


def test_unknown_pack():
    p = relay("models", "install", "no-such-pack")
    assert p.returncode == 2 and "unknown model pack" in p.stderr


def _argos_from_installed(tmp_path):
    """Rebuild an .argosmodel file (zip with one top folder) from the installed OPUS-MT pack."""
    src = store.get("opus-mt-zh-en").path
    out = tmp_path / "translate-zh_en.argosmodel"
    with zipfile.ZipFile(out, "w") as zf:
        for f in src.rglob("*"):
            if f.is_file() and f.name != "manifest.json":
                zf.write(f, "translate-zh_en/" + str(f.relative_to(src)))
    return out


def test_import_argosmodel_and_use_it_for_the_pair(tmp_path):
    models = tmp_path / "models"
    env = {"RELAY_MODELS": str(models)}
    for pid in ("whisper-base", "piper-joe-en"):
        (models / pid).mkdir(parents=True)
        for f in store.get(pid).path.iterdir():
            (models / pid / f.name).symlink_to(f)
    argos = _argos_from_installed(tmp_path)
    p = relay("models", "import", str(argos), env=env)
    assert p.returncode == 0, p.stderr
    assert "user-mt-zh-en" in p.stderr
    run = relay("run", "--input", str(DATA / "zh_03.wav"), "--json", "--fast", "--no-tts", env=env)
    assert run.returncode == 0, run.stderr
    s = summary_of(run)
    assert s["models"]["mt"] == "user-mt-zh-en"
    assert "quarter" in " ".join(x["target"] or "" for x in s["segments"]).lower()


def test_import_ct2_folder_needs_languages(tmp_path):
    src = store.get("opus-mt-zh-en").path
    folder = tmp_path / "ct2"
    (folder).mkdir()
    for f in (src / "model").iterdir():
        (folder / f.name).symlink_to(f)
    (folder / "sentencepiece.model").symlink_to(src / "sentencepiece.model")
    env = {"RELAY_MODELS": str(tmp_path / "models")}
    p = relay("models", "import", str(folder), env=env)
    assert p.returncode == 2 and "--langs" in p.stderr
    p = relay("models", "import", str(folder), "--langs", "zh-en", "--name", "my-zh-en", env=env)
    assert p.returncode == 0, p.stderr
    assert store.verify("my-zh-en", tmp_path / "models") == []


def test_import_piper_voice_and_whisper_folder(tmp_path):
    env = {"RELAY_MODELS": str(tmp_path / "models")}
    voice_dir = store.get("piper-joe-en").path
    v = tmp_path / "en_US-test.onnx"
    v.symlink_to(voice_dir / "voice.onnx")
    (tmp_path / "en_US-test.onnx.json").symlink_to(voice_dir / "voice.onnx.json")
    p = relay("models", "import", str(v), "--name", "my-voice", env=env)
    assert p.returncode == 0, p.stderr
    w = relay("models", "import", str(store.get("whisper-tiny-en").path), "--name", "my-whisper", env=env)
    assert w.returncode == 0, w.stderr
    inst = store.installed(tmp_path / "models")
    assert inst["my-voice"].role == "tts" and inst["my-voice"].languages == ["en"]
    assert inst["my-whisper"].role == "asr" and inst["my-whisper"].languages == ["en"]


def test_import_rejects_garbage(tmp_path):
    f = tmp_path / "x.argosmodel"
    f.write_bytes(b"not a zip")
    p = relay("models", "import", str(f), env={"RELAY_MODELS": str(tmp_path / "m")})
    assert p.returncode == 2 and "not a valid .argosmodel" in p.stderr
