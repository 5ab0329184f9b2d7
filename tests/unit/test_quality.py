"""bench/quality.py without running relay: the manifest formats it reads, one run's figures from a
hand-made summary, the medians and the table."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

pytest.importorskip("omnisteval")

import quality  # noqa: E402
from omni import Reference  # noqa: E402


def test_manifest_jsonl_with_sentences_and_aliases(tmp_path):
    (tmp_path / "a.wav").write_bytes(b"")
    lines = [
        {"id": "a", "wav": "a.wav", "pair": "zh-en",
         "sentences": [{"zh": "你好。", "en": "Hello.", "start": 0.5, "end": 1.5},
                       {"text": "再见。", "translation": "Goodbye.", "offset": 2.0, "duration": 1.0}]},
        {"audio": "b.wav", "segments": [{"source": "谢谢", "translations": {"en": "Thanks"}}]},
    ]
    m = tmp_path / "manifest.jsonl"
    m.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    files = quality.load_manifest(tmp_path)  # a folder: its manifest.jsonl
    assert [f["id"] for f in files] == ["a", "b"]
    assert files[0]["wav"] == (tmp_path / "a.wav").resolve()
    assert files[0]["refs"] == [Reference("你好。", "Hello.", 0.5, 1.5),
                                Reference("再见。", "Goodbye.", 2.0, 3.0)]
    assert files[1]["refs"] == [Reference("谢谢", "Thanks", None, None)]
    assert files[1]["pair"] == "zh-en" and files[1]["src"] == "zh"


def test_manifest_json_pointing_at_a_reference_file(tmp_path):
    ref = {"segments": [{"text": "大家好。", "en": "Hello everyone.", "start_s": 0.3, "end_s": 2.5}]}
    (tmp_path / "m.json").write_text(json.dumps(ref, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "manifest.json").write_text(json.dumps({"files": [{"id": "m", "wav": "m.wav", "ref": "m.json"}]}))
    files = quality.load_manifest(tmp_path / "manifest.json")
    assert files[0]["refs"] == [Reference("大家好。", "Hello everyone.", 0.3, 2.5)]


def test_fallback_is_the_shared_zh_data():
    if not (quality.SHARED / "data" / "zh" / "manifest.jsonl").is_file():
        pytest.skip("no shared data")
    files = quality.fallback_manifest()
    assert files[0]["id"] == "zh_meeting" and len(files[0]["refs"]) == 16
    assert files[0]["refs"][0].start == pytest.approx(0.3)
    assert len(files) == 17 and all(len(f["refs"]) == 1 for f in files[1:])
    assert files[1]["refs"][0].end == pytest.approx(2.739 - 0.3)


def _summary():
    t0 = 50.0
    return {"mode": "pipeline/realtime", "clock": {"first_audio_at": t0}, "rtf": 0.4, "cpu_rtf": 0.6,
            "peak_rss_mb": 800.0, "display": {"erasure": 0.12},
            "latency_ms": {"e2e_first_display": {"p50": 900.0}, "e2e_final": {"p50": 1800.0},
                           "e2e_dub": {"p50": 1500.0}, "e2e_subtitle": {"p50": 950.0}},
            "segments": [{"id": 0, "source": "你好。", "target": "Hello there, my good friend.", "src_start": 0.0,
                          "src_end": 2.0, "final_at": t0 + 2.6, "emitted_at": t0 + 1.0, "failed": False,
                          "covers": [0]}],
            "first_pass": [{"seq": 0, "source": "你好。", "target": "Hello there, my good friend.",
                            "src_start": 0.0, "src_end": 2.0, "emitted_at": t0 + 1.0}]}


def test_figures_of_one_run():
    f = {"id": "x", "src": "zh", "tgt": "en",
         "refs": [Reference("你好。", "Hello there, my good friend.", 0.0, 2.0),
                  Reference("再见。", "Goodbye.", 3.0, 4.0)]}
    fig = quality.figures(_summary(), f)
    assert fig["src_error_pct"] == pytest.approx(50.0)  # 再见 missing: 2 of 4 characters
    assert fig["first_display_p50"] == 900.0 and fig["final_p50"] == 1800.0 and fig["erasure"] == 0.12
    # 5 words over 2000 ms: γ = 1/400; first pass at 1000 ms: 1000 − 800 = 200; the final at 2600 ms
    assert fig["first_long_yaal"] == pytest.approx(200.0)
    assert fig["final_long_yaal"] == pytest.approx(1800.0)
    assert fig["final_empty"] == 1 and fig["sentences"] == 2


def test_median_rows_and_table():
    runs = [{"src_error_pct": 4.0, "final_chrf": 50.0, "final_long_yaal": None, "rtf": 0.4},
            {"src_error_pct": 6.0, "final_chrf": 54.0, "final_long_yaal": 2000.0, "rtf": 0.5},
            {"src_error_pct": 5.0, "final_chrf": 40.0, "final_long_yaal": 3000.0, "rtf": 0.45}]
    row = quality.median_row("two-pass", runs)
    assert row["n"] == 3 and row["src_error_pct"] == 5.0 and row["final_chrf"] == 50.0
    assert row["final_long_yaal"] == 2500.0  # the run without one is left out
    assert row["erasure"] is None
    text = quality.table([row, {"setting": "offline", "n": 2, "src_error_pct": 2.14}])
    lines = text.splitlines()
    assert lines[0].startswith("| setting | n | CER %") and len(lines) == 4
    assert "| two-pass | 3 | 5.000 | 50.0 |" in lines[2] and "| offline | 2 | 2.140 | – |" in lines[3]


def test_parse_setting():
    assert quality.parse_setting("serial=--serial") == ("serial", "--serial")
    assert quality.parse_setting("eager 6=--eager 6") == ("eager 6", "--eager 6")
    assert quality.parse_setting("two-pass=") == ("two-pass", "")


def test_the_corpus_manifest_line_and_rows_by_a_field(tmp_path):
    line = {"id": "long_jf_alpha_meeting_01_pink10", "wav": "long/x.wav", "pair": "zh-en", "lang": "zh",
            "tgt_lang": "en", "kind": "longform", "snr_db": 10.0,
            "sentences": [{"id": "l002", "kind": "long", "zh": "你好。", "en": "Hello.", "start": 0.3, "end": 1.4}]}
    (tmp_path / "manifest.jsonl").write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")
    f = quality.load_manifest(tmp_path / "manifest.jsonl")[0]
    assert f["wav"] == (tmp_path / "long" / "x.wav").resolve() and f["meta"]["snr_db"] == 10.0
    assert f["refs"] == [Reference("你好。", "Hello.", 0.3, 1.4)]
    per_run = [{"setting": "a", "group": g, "figures": {"src_error_pct": v}}
               for g, v in ((10.0, 8.0), (10.0, 6.0), (None, 2.0))]
    rows = quality.rows_of(per_run, ["a"], {}, by="snr_db")
    assert [(r["setting"], r["n"], r["src_error_pct"]) for r in rows] == [  # all files first, then by field
        ("a", 3, 6.0), ("a [snr_db=10.0]", 2, 7.0), ("a [snr_db=None]", 1, 2.0)]
