"""`relay run` end to end with the real models on real recorded speech."""

import json
import wave

import numpy as np
import pytest

from app.session.subtitles import parse_srt

from .conftest import DATA, relay, summary_of

pytestmark = pytest.mark.models


def read_wav(path):
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768, w.getframerate()


@pytest.fixture(scope="module")
def zh_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("zh")
    p = relay("run", "--input", str(DATA / "zh_demo_20s.wav"), "--pair", "zh-en", "--json",
              "--dub-out", str(out / "dub.wav"), "--srt", str(out / "out.srt"), "--vtt", str(out / "out.vtt"))
    assert p.returncode == 0, p.stderr
    return p, out


def test_zh_en_pipeline_translates_the_meeting(zh_run):
    p, _ = zh_run
    s = summary_of(p)
    target = " ".join(x["target"] or "" for x in s["segments"]).lower()
    source = "".join(x["source"] for x in s["segments"])
    for zh in ("大家好", "销售", "第三季度"):
        assert zh in source
    for en in ("hello", "hear me", "third quarter", "sales"):
        assert en in target, f"{en!r} missing from {target!r}"
    for k in ("pair", "models", "audio_s", "wall_s", "rtf", "segments", "latency_ms"):
        assert k in s
    for k in ("asr_first_token", "mt_queue_wait", "tts_first_audio", "e2e_subtitle", "e2e_dub"):
        assert s["latency_ms"][k]["n"] > 0 and s["latency_ms"][k]["p50"] is not None
        assert s["latency_ms"][k]["p50"] <= s["latency_ms"][k]["p95"] <= s["latency_ms"][k]["p99"]
    for seg in s["segments"]:
        assert {"src_start", "src_end", "source", "target", "emitted_at"} <= seg.keys()
        assert seg["src_start"] <= seg["src_end"]
    # translation starts before the speaker has finished: the first subtitle comes long before the end
    first = min(x["emitted_at"] for x in s["segments"] if x["emitted_at"] is not None)
    assert first < s["audio_s"] / 2
    events = [json.loads(line) for line in p.stdout.splitlines()]
    types = {e["type"] for e in events}
    assert {"partial", "committed", "segment", "translation", "dub_chunk", "summary"} <= types


def test_a_fast_run_dubs_every_final(tmp_path):
    """--fast reads the file in seconds; its dub is laid on the source timeline, so no sentence
    is skipped for being "late" by the wall clock (3 of 7 were, before)."""
    p = relay("run", "--input", str(DATA / "zh_demo_20s.wav"), "--fast", "--json", "--dub-out", str(tmp_path / "d.wav"))
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    assert s["stages"]["tts"]["skipped"] == 0
    dubbed = {json.loads(ln)["seq"] for ln in p.stdout.splitlines() if '"type": "dub_chunk"' in ln}
    assert dubbed == {x["id"] for x in s["segments"] if x["target"].strip()}


def test_dub_wav_is_on_the_source_timeline_and_not_silent(zh_run):
    p, out = zh_run
    s = summary_of(p)
    audio, sr = read_wav(out / "dub.wav")
    assert sr == 22050
    assert len(audio) / sr >= s["segments"][0]["src_end"]
    first = s["segments"][0]["src_start"]
    loud = np.flatnonzero(np.abs(audio) > 0.05)
    assert len(loud) > sr  # over a second of speech
    assert loud[0] / sr >= first  # the dub never starts before the source was spoken
    # silence between the dub's utterances exists (it is a timeline, not a concatenation)
    frame = sr // 10
    rms = np.sqrt(np.mean(audio[: len(audio) // frame * frame].reshape(-1, frame) ** 2, axis=1))
    assert (rms < 1e-4).sum() > 5


def test_subtitle_files_parse_back(zh_run):
    p, out = zh_run
    s = summary_of(p)
    cues = parse_srt((out / "out.srt").read_text(encoding="utf-8"))
    finals = [x for x in s["segments"] if x["target"]]
    assert len(cues) >= len(finals)  # a final longer than 2 lines × 42 characters takes several cues
    assert all(len(line) <= 42 for _, _, text in cues for line in text.splitlines())
    assert all(len(text.splitlines()) <= 2 for _, _, text in cues)
    # every cue's text is a final's, in order: the finals' words, nothing of the first pass
    assert " ".join(t.replace("\n", " ") for _, _, t in cues).split() == " ".join(x["target"] for x in finals).split()
    assert all(a < b for a, b, _ in cues)
    assert [a for a, _, _ in cues] == sorted(a for a, _, _ in cues)
    vtt = (out / "out.vtt").read_text(encoding="utf-8")
    assert vtt.startswith("WEBVTT") and "-->" in vtt


def test_serial_cascade_runs_and_is_later():
    p = relay("run", "--input", str(DATA / "zh_05.wav"), "--serial", "--json", "--fast")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    assert s["mode"].startswith("serial")
    assert len(s["segments"]) >= 1 and s["segments"][0]["target"]
    assert s["latency_ms"]["e2e_dub"]["n"] >= 1


def test_en_captions_on_jfk():
    p = relay("run", "--input", str(DATA / "jfk.wav"), "--pair", "en-en", "--json")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    text = " ".join(x["source"] for x in s["segments"]).lower()
    # tiny.en streaming sometimes hears "ask not like": check the phrases it gets reliably
    for phrase in ("fellow americans", "your country can do for you", "ask what you can do for your country"):
        assert phrase in text.replace(",", "")
    assert s["models"]["tts"] == "none"


def test_xx_en_uses_whisper_translation():
    p = relay("run", "--input", str(DATA / "zh_03.wav"), "--pair", "xx-en", "--json", "--no-tts", "--fast")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    assert s["models"]["asr_task"] == "translate"
    text = " ".join(x["target"] or "" for x in s["segments"]).lower()
    # 今天主要讨论第三季度的销售数据: Whisper base's own translation of "third quarter" wavers
    # ("third level", "third system") with tiny feature differences, its start does not
    assert "today" in text and "discuss" in text and "third" in text, text
    assert sum(c.isascii() for c in text) / max(len(text), 1) > 0.95, "the output should be English"


def test_an_m4a_recording_is_interpreted_like_its_wav(tmp_path):
    """A meeting platform's M4A (AAC) recording, which only FFmpeg reads and is decoded block by
    block as the session goes: the same sentences come out as from the WAV it was made from."""
    import av

    x, rate = read_wav(DATA / "zh_demo_20s.wav")
    path = tmp_path / "meeting.m4a"
    with av.open(str(path), "w") as c:
        st = c.add_stream("aac", rate=rate, layout="mono", bit_rate=64000)
        for i in range(0, len(x), 1024):
            f = av.AudioFrame.from_ndarray(np.ascontiguousarray(x[None, i:i + 1024]), format="fltp", layout="mono")
            f.sample_rate = rate
            for pkt in st.encode(f):
                c.mux(pkt)
        for pkt in st.encode(None):
            c.mux(pkt)
    p = relay("run", "--input", str(path), "--fast", "--json", "--no-tts")
    assert p.returncode == 0, p.stderr
    s = summary_of(p)
    assert abs(s["audio_s"] - len(x) / rate) < 0.2
    source = "".join(seg["source"] for seg in s["segments"])
    target = " ".join(seg["target"] for seg in s["segments"]).lower()
    for zh in ("大家好", "第三季度"):
        assert zh in source
    assert "third quarter" in target
