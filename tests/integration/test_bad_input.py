"""Bad input: one clear line on stderr, exit 2, no traceback, nothing half-written."""

import shutil

import pytest

from .conftest import DATA, relay

pytestmark = pytest.mark.models


def one_line_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    err = p.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("relay: ")
    for n in needles:
        assert n in err, err


def test_missing_file():
    one_line_error(relay("run", "--input", "/nonexistent/x.wav"), "no such file")


def test_not_audio(tmp_path):
    f = tmp_path / "notes.wav"
    f.write_text("this is not audio at all\n" * 50)
    one_line_error(relay("run", "--input", str(f)), "not a readable audio file")


def test_empty_file(tmp_path):
    f = tmp_path / "empty.wav"
    f.write_bytes(b"")
    one_line_error(relay("run", "--input", str(f)), "empty")


def test_truncated_wav(tmp_path):
    data = (DATA / "zh_05.wav").read_bytes()
    f = tmp_path / "cut.wav"
    f.write_bytes(data[:30])  # header cut short
    one_line_error(relay("run", "--input", str(f)))


def test_folder_instead_of_file(tmp_path):
    one_line_error(relay("run", "--input", str(tmp_path)), "folder")


def test_unknown_pair():
    one_line_error(relay("run", "--input", str(DATA / "zh_05.wav"), "--pair", "zh-de"),
                   "no translation model for zh→de", "relay models import")
    one_line_error(relay("run", "--input", str(DATA / "zh_05.wav"), "--pair", "nonsense"), "unknown pair")


def test_missing_model_names_the_install_command(tmp_path):
    p = relay("run", "--input", str(DATA / "zh_05.wav"), env={"RELAY_MODELS": str(tmp_path)})
    one_line_error(p, "relay models install whisper-base")


def test_damaged_model_is_detected(tmp_path):
    from app.models import store

    src = store.get("opus-mt-zh-en").path
    root = tmp_path / "models"
    for pid in ("whisper-base", "piper-joe-en"):
        (root / pid).mkdir(parents=True)
        for f in store.get(pid).path.iterdir():
            (root / pid / f.name).symlink_to(f)
    shutil.copytree(src, root / "opus-mt-zh-en")
    (root / "opus-mt-zh-en" / "sentencepiece.model").write_bytes(b"broken")
    p = relay("run", "--input", str(DATA / "zh_05.wav"), env={"RELAY_MODELS": str(root)})
    one_line_error(p, "opus-mt-zh-en", "damaged", "relay models install --force opus-mt-zh-en")
    v = relay("models", "verify", "opus-mt-zh-en", env={"RELAY_MODELS": str(root)})
    assert v.returncode == 2 and "sentencepiece.model" in v.stdout


def test_bad_options():
    one_line_error(relay("run", "--input", str(DATA / "zh_05.wav"), "--beam", "0"), "--beam")
    one_line_error(relay("run", "--bogus-flag"), "unrecognized arguments")
    one_line_error(relay("run"), "--input")
    one_line_error(relay("run", "--input", str(DATA / "zh_05.wav"), "--profanity", "bleep"), "--profanity", "masked")


def test_output_folder_missing_writes_nothing(tmp_path):
    p = relay("run", "--input", str(DATA / "zh_05.wav"), "--srt", str(tmp_path / "no" / "x.srt"))
    one_line_error(p, "does not exist")
    assert list(tmp_path.iterdir()) == []
