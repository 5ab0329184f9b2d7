"""More bad input through every entry point (run, report, the test-only knobs): a clear one-line
error and exit 2, or a normal run where the input is merely unusual; never a traceback, a hang
or a half-written file. The basics (missing, empty, not audio, cut header, damaged model) are in
test_bad_input.py."""

import os
import shutil
import struct
import wave

import numpy as np
import pytest

from .conftest import DATA, relay, summary_of
from .test_bad_input import one_line_error

pytestmark = pytest.mark.models
CLIP = DATA / "zh_03.wav"


def wav_header(frames: int, rate: int, channels: int, width: int) -> bytes:
    data = frames * channels * width
    return (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, channels, rate,
            rate * channels * width, channels * width, width * 8) + b"data" + struct.pack("<I", data))


def test_huge_file_is_refused_before_it_is_read(tmp_path):
    f = tmp_path / "huge.wav"
    frames = 7 * 3600 * 8000  # 7 hours of 8 kHz 8-bit mono: 200 MB, sparse on disk
    with open(f, "wb") as fh:
        fh.write(wav_header(frames, 8000, 1, 1))
        fh.truncate(44 + frames)
    one_line_error(relay("run", "--input", str(f), "--fast", timeout=120), "longer than 6 hours")


def test_data_cut_short_runs_on_what_is_there_or_says_so(tmp_path):
    raw = CLIP.read_bytes()
    f = tmp_path / "short.wav"
    f.write_bytes(raw[: len(raw) // 3])  # the header promises three times the data
    p = relay("run", "--input", str(f), "--fast", "--no-tts", "--json")
    if p.returncode == 0:
        assert summary_of(p)["audio_s"] < 2.0
    else:
        one_line_error(p)


def test_header_only_wav_has_no_samples(tmp_path):
    f = tmp_path / "nothing.wav"
    f.write_bytes(wav_header(0, 16000, 1, 2))
    one_line_error(relay("run", "--input", str(f)), "no audio samples")


def test_unusual_channels_and_rates_are_converted(tmp_path):
    """Six channels at 22.05 kHz (the soxr path): downmixed and resampled, same words."""
    with wave.open(str(CLIP)) as w:
        mono = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32)
        rate = w.getframerate()
    import soxr

    res = soxr.resample(mono, rate, 22050).astype(np.int16)
    f = tmp_path / "six.wav"
    with wave.open(str(f), "wb") as w:
        w.setnchannels(6)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes(np.repeat(res[:, None], 6, axis=1).tobytes())
    p = relay("run", "--input", str(f), "--fast", "--no-tts", "--json")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    assert abs(s["audio_s"] - len(mono) / rate) < 0.05
    assert "".join(x["source"] for x in s["segments"])


def test_non_utf8_paths(tmp_path):
    src = os.fsencode(tmp_path) + b"/clip-\xff\xfe.wav"
    shutil.copy(CLIP, src)
    srt = os.fsencode(tmp_path) + b"/subs-\xff.srt"
    p = relay("run", "--input", os.fsdecode(src), "--fast", "--no-tts", "--srt", os.fsdecode(srt))
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(srt) > 0
    one_line_error(relay("run", "--input", os.fsdecode(os.fsencode(tmp_path) + b"/gone-\xff.wav")), "no such file")


def test_json_output_stays_utf8_with_a_non_utf8_path(tmp_path):
    src = os.fsencode(tmp_path) + b"/clip-\xff.wav"
    shutil.copy(CLIP, src)
    p = relay("run", "--input", os.fsdecode(src), "--fast", "--no-tts", "--json")
    assert p.returncode == 0, p.stderr
    assert summary_of(p)["input"].endswith("/clip-\ufffd.wav")


@pytest.mark.parametrize("args,needle", [
    (["--asr-step", "abc"], "--asr-step"),
    (["--asr-step", "50"], "--asr-step"),
    (["--beam", "-1"], "--beam"),
    (["--metrics-port", "http"], "--metrics-port"),
    (["--metrics-port", "99999"], "--metrics-port"),
    (["--log-level", "loud"], "--log-level"),
    (["--report", "/nonexistent/dir/r.json"], "does not exist"),
    (["--accel", "warp"], "--accel"),
    (["--preview", "maybe"], "--preview"),
])
def test_malformed_options(args, needle):
    one_line_error(relay("run", "--input", str(CLIP), *args, timeout=120), needle)


@pytest.mark.parametrize("args,needle", [(["--threads", "-3"], "--threads"), (["--threads", "100000"], "--threads"),
                                          (["--eager", "-2"], "--eager")])
def test_out_of_range_counts(args, needle):
    one_line_error(relay("run", "--input", str(CLIP), "--fast", "--no-tts", *args, timeout=120), needle)


@pytest.mark.parametrize("env,needle", [
    ({"RELAY_FAULTS": "mt:explode@1"}, "RELAY_FAULTS"),
    ({"RELAY_STALL_S": "soon"}, "RELAY_STALL_S"),
])
def test_malformed_test_knobs_fail_before_loading(env, needle):
    p = relay("run", "--input", str(CLIP), env=env, timeout=120)
    one_line_error(p, needle)


def test_report_folder_is_checked_before_the_run(tmp_path):
    one_line_error(relay("run", "--input", str(CLIP), "--report", str(tmp_path)), "is a folder")
    assert list(tmp_path.iterdir()) == []


def test_model_pack_with_a_missing_file(tmp_path):
    from app.models import store

    root = tmp_path / "models"
    for pid in ("whisper-base", "piper-joe-en"):
        (root / pid).mkdir(parents=True)
        for f in store.get(pid).path.iterdir():
            (root / pid / f.name).symlink_to(f)
    shutil.copytree(store.get("opus-mt-zh-en").path, root / "opus-mt-zh-en")
    (root / "opus-mt-zh-en" / "sentencepiece.model").unlink()
    p = relay("run", "--input", str(CLIP), env={"RELAY_MODELS": str(root)})
    one_line_error(p, "opus-mt-zh-en", "relay models install --force opus-mt-zh-en")


@pytest.mark.parametrize("content,needle", [
    (None, "no such file"), (b"", "not JSON"), (b"\x00\xff\xfe", "not JSON"), (b"[1, 2]", "not a session report"),
    (b'{"format": "relay-session-report/1"}', "incomplete"),
])
def test_report_command_bad_files(tmp_path, content, needle):
    f = tmp_path / "r.json"
    if content is not None:
        f.write_bytes(content)
    before = sorted(tmp_path.iterdir())
    one_line_error(relay("report", str(f)), needle)
    assert sorted(tmp_path.iterdir()) == before  # no plot drawn for a bad report


def test_report_command_plot_folder_missing(tmp_path):
    f = tmp_path / "r.json"
    f.write_text('{"format": "relay-session-report/1", "latency_ms": {}, "timeline": []}')
    one_line_error(relay("report", str(f), "--plot", str(tmp_path / "no" / "p.png")), "does not exist")
