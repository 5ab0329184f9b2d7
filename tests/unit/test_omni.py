"""bench/omni.py: a relay summary scored by OmniSTEval (longform resegmentation, BLEU, chrF,
computation-aware LongYAAL). Hand-made summaries whose figures can be worked out by hand.

The reference: three sentences of 5 English words, speech at 0–2 s, 3–5 s and 6–8 s of the file
(the recording ends at 8 s for OmniSTEval: the end of its last sentence). LongYAAL of a sentence
with offset o, |X| = 2000 ms and 5 words whose words were all emitted at t ms: γ = 5/2000, so
YAAL = mean_i (t − o − 400·(i−1)) = t − o − 800. A sentence whose first word comes at or after the
recording's end (8000 ms) is not scored."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

pytest.importorskip("omnisteval")

from omni import Emitted, Reference, score_stream, score_summary, streams, write_inputs  # noqa: E402

REFS = [Reference("今天天气很好。", "The weather is nice today.", 0.0, 2.0),
        Reference("我们开始开会。", "Let us start the meeting.", 3.0, 5.0),
        Reference("谢谢大家。", "Thank you all very much.", 6.0, 8.0)]
T0 = 1000.0  # the pipeline clock when the first audio arrived


def two_pass(final_after_end: float = 0.5, first_after_start: float = 1.0, targets=None, fail: int | None = None):
    """A two-pass summary: one first-pass piece and one final per sentence; piece i shown
    ``first_after_start`` s after its sentence began, final i ``final_after_end`` s after it ended."""
    targets = targets or [r.target for r in REFS]
    pieces = [{"seq": i, "source": r.source, "target": t, "src_start": r.start, "src_end": r.end,
               "emitted_at": T0 + r.start + first_after_start} for i, (r, t) in enumerate(zip(REFS, targets))]
    finals = [{"id": i, "source": r.source, "target": t, "src_start": r.start, "src_end": r.end,
               "emitted_at": T0 + r.start + first_after_start, "final_at": T0 + r.end + final_after_end,
               "failed": i == fail, "covers": [i], "words": []} for i, (r, t) in enumerate(zip(REFS, targets))]
    return {"mode": "pipeline/realtime", "clock": {"first_audio_at": T0}, "segments": finals, "first_pass": pieces}


def test_final_and_first_pass_latency_by_hand():
    s = score_summary(two_pass(), REFS)
    # finals at 2.5, 5.5, 8.5 s: 2500 − 0 − 800 = 1700, 5500 − 3000 − 800 = 1700; the third (8.5 s,
    # after the recording's end) is not scored
    assert s["final"]["long_yaal_ca_ms"] == pytest.approx(1700.0)
    assert s["final"]["latency_instances"] == 2
    # pieces 1 s after each start: 1000 − 800 = 200 for all three
    assert s["first_pass"]["long_yaal_ca_ms"] == pytest.approx(200.0)
    assert s["first_pass"]["latency_instances"] == 3
    for k in ("final", "first_pass"):
        assert s[k]["bleu"] == pytest.approx(100.0) and s[k]["chrf"] == pytest.approx(100.0)
    assert s["src_error_pct"] == 0.0


def test_a_later_stream_has_a_larger_long_yaal():
    soon, late = score_summary(two_pass(0.5), REFS), score_summary(two_pass(1.2), REFS)
    assert late["final"]["long_yaal_ca_ms"] == pytest.approx(soon["final"]["long_yaal_ca_ms"] + 700.0)


def test_the_clock_origin_is_first_audio_at():
    s = two_pass()
    s["clock"]["first_audio_at"] = T0 - 0.3  # the audio began 0.3 s sooner: every word 300 ms later
    assert score_summary(s, REFS)["final"]["long_yaal_ca_ms"] == pytest.approx(2000.0)


def test_a_wrong_translation_scores_lower():
    good = score_summary(two_pass(), REFS)
    bad = score_summary(two_pass(targets=["The weather is nice today.", "We open a shop.", "Thanks, all."]), REFS)
    assert bad["final"]["chrf"] < good["final"]["chrf"] - 20
    assert bad["final"]["bleu"] < good["final"]["bleu"] - 20


def test_a_final_spanning_two_references_is_resegmented():
    s = two_pass()
    a, b, c = s["segments"]
    merged = dict(a, target=a["target"] + " " + b["target"], src_end=b["src_end"], final_at=b["final_at"],
                  covers=[0, 1])
    s["segments"] = [merged, c]
    r = score_summary(s, REFS)["final"]
    assert r["resegmented"][:2] == [REFS[0].target, REFS[1].target]
    assert r["chrf"] == pytest.approx(100.0)
    # the first sentence's words came at 5.5 s: 5500 − 800 = 4700; the second's 1700 as before
    assert r["long_yaal_ca_ms"] == pytest.approx((4700 + 1700) / 2)


def test_a_failed_final_keeps_the_times_its_pieces_were_shown():
    r = score_summary(two_pass(fail=0), REFS)["final"]
    assert r["long_yaal_ca_ms"] == pytest.approx((200 + 1700) / 2)


def test_source_error_rate_of_the_finals():
    s = two_pass()
    s["segments"][2]["source"] = "谢谢大姐。"
    s["first_pass"][0]["source"] = "今天天汽很好。"
    r = score_summary(s, REFS)
    assert r["src_error_pct"] == pytest.approx(100 / 16, abs=0.01)  # 1 of 16 characters
    assert r["first_pass_src_error_pct"] == pytest.approx(100 / 16, abs=0.01)


def test_no_final_pass_and_serial_summaries_have_one_stream():
    pieces = two_pass()["first_pass"]
    nf = {"mode": "pipeline/realtime", "clock": {"first_audio_at": T0}, "segments": pieces, "first_pass": []}
    st = streams(nf)
    assert st["final"] == st["first_pass"] and st["final"][0] == Emitted(REFS[0].target, 1.0)
    utt = [{"id": i, "source": r.source, "target": r.target, "src_start": r.start, "src_end": r.end,
            "emitted_at": T0 + r.end + 1.0, "final_at": T0 + r.end + 1.0} for i, r in enumerate(REFS)]
    ser = {"mode": "serial/realtime", "clock": {"first_audio_at": T0}, "segments": utt, "first_pass": []}
    r = score_summary(ser, REFS)
    assert r["final"]["long_yaal_ca_ms"] == pytest.approx(2200.0)  # 3000 − 800 for the first two
    assert r["first_pass"]["long_yaal_ca_ms"] == r["final"]["long_yaal_ca_ms"]


def test_without_a_clock_quality_only():
    s = two_pass()
    del s["clock"]
    r = score_summary(s, REFS)
    assert r["final"]["long_yaal_ca_ms"] is None and r["final"]["chrf"] == pytest.approx(100.0)


def test_untranslated_pieces_are_not_emitted():
    s = two_pass()
    s["first_pass"][1]["target"] = None
    s["first_pass"][1]["emitted_at"] = None
    r = score_summary(s, REFS)["first_pass"]
    assert r["resegmented"][1] == "" and r["empty"] == 1


def test_the_cli_gives_the_same_figures(tmp_path):
    cli = shutil.which("omnisteval") or str(Path(sys.executable).with_name("omnisteval"))
    if not Path(cli).exists():
        pytest.skip("no omnisteval command")
    hyps = {"a": [Emitted("The weather is nice", 1.5), Emitted("today. Let us start", 3.9),
                  Emitted("the meeting. Thank you all", 6.8), Emitted("very much.", 8.2)]}
    refs = {"a": REFS}
    mine = score_stream(refs, hyps, keep=tmp_path)
    p = subprocess.run([cli, "longform", "--speech_segmentation", "segmentation.json", "--ref_sentences_file",
                        "references.txt", "--hypothesis_file", "hypothesis.jsonl", "--word_level", "--lang", "en",
                        "--output_folder", "out"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-500:]
    tsv = dict(line.split("\t") for line in (tmp_path / "out" / "scores.tsv").read_text().splitlines()[1:])
    assert mine["long_yaal_ca_ms"] == pytest.approx(float(tsv["LongYAAL (CA)"]), abs=0.01)
    assert mine["chrf"] == pytest.approx(float(tsv["chrF"]), abs=0.01)
    assert mine["bleu"] == pytest.approx(float(tsv["BLEU"]), abs=0.01)


def test_several_recordings_in_one_scoring(tmp_path):
    refs = {"a": REFS[:2], "b": REFS[2:]}
    hyps = {"a": [Emitted(REFS[0].target, 2.5), Emitted(REFS[1].target, 4.0)], "b": [Emitted(REFS[2].target, 7.0)]}
    paths = write_inputs(tmp_path, refs, hyps)
    assert len(paths["hypothesis"].read_text().splitlines()) == 2
    assert json.loads(paths["segmentation"].read_text())[2] == {"wav": "b.wav", "offset": 6.0, "duration": 2.0}
    r = score_stream(refs, hyps)
    # a: 2500 − 800 = 1700 and (5 s end) 4000 − 3000 − 800 = 200; b: 7000 − 6000 − 800 = 200
    assert r["long_yaal_ca_ms"] == pytest.approx((1700 + 200 + 200) / 3)
    assert r["chrf"] == pytest.approx(100.0)


def test_serial_listing_its_utterances_as_first_pass_is_one_stream():
    utt = [{"id": i, "source": r.source, "target": r.target, "src_start": r.start, "src_end": r.end,
            "emitted_at": T0 + r.end + 1.0, "final_at": T0 + r.end + 1.0} for i, r in enumerate(REFS)]
    early = [dict(u, seq=u["id"], emitted_at=T0) for u in utt]  # were they read as pieces, latency would fall
    ser = {"mode": "serial/realtime", "clock": {"first_audio_at": T0}, "segments": utt, "first_pass": early}
    st = streams(ser)
    assert st["first_pass"] == st["final"] and st["final"][0].at == pytest.approx(3.0)
