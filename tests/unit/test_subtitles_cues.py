"""Subtitle cues from finals: at most 2 lines × 42 columns, split at word boundaries, times from
the source words, never overlapping, at least a second where there is room."""

import random

import pytest

from app.session.subtitles import (MAX_CHARS, MIN_CUE_S, cues, parse_srt, text_width, to_srt, to_vtt,
                                   tokens)

LOREM = ("so today we are going to talk about the budget for next year and then we will discuss how the "
         "team should plan the migration of the old servers, which has been delayed twice already; after "
         "that, questions").split()


def final(fid, target, start, n_words, step=0.35, gap=0.05, **kw):
    words = [[f"w{i}", round(start + i * step, 3), round(start + i * step + step - gap, 3)] for i in range(n_words)]
    return {"id": fid, "source": "", "target": target, "src_start": start, "src_end": words[-1][2] if words else start,
            "words": words, "covers": [fid], "failed": False, **kw}


def check(cs, segments):
    allowed = set()
    for s in segments:
        allowed |= {t for t, _ in tokens(s.get("target") or "")}
    prev_end = -1.0
    for a, b, text in cs:
        lines = text.split("\n")
        assert 1 <= len(lines) <= 2, text
        assert all(text_width(ln) <= MAX_CHARS for ln in lines), text
        assert all(ln == ln.strip() and ln for ln in lines), text
        for t, _ in tokens(text):  # only whole words (a word wider than a line is cut, alone)
            assert t in allowed or any(t in w and text_width(w) >= MAX_CHARS for w in allowed), (t, text)
        assert a < b, (a, b)
        assert a >= prev_end - 1e-9, "cues overlap"
        prev_end = b


def test_a_short_final_is_one_cue_on_its_source_span():
    f = final(0, "Hello everyone, can you hear me?", 1.0, 6)
    (a, b, text), = cues([f])
    assert text == "Hello everyone, can you hear me?"
    assert a == pytest.approx(1.0) and b == pytest.approx(f["words"][-1][2])


def test_a_long_final_splits_at_word_boundaries_with_times_from_its_words():
    text = " ".join(LOREM)
    f = final(0, text, 10.0, 30)
    cs = cues([f])
    check(cs, [f])
    assert len(cs) >= 3
    assert " ".join(c[2].replace("\n", " ") for c in cs) == text  # nothing lost, nothing reordered
    assert cs[0][0] == pytest.approx(10.0) and cs[-1][1] == pytest.approx(f["words"][-1][2])
    starts = {w[1] for w in f["words"]}
    for a, _b, _t in cs[1:]:  # each split falls on a source word's start
        assert any(abs(a - s) < 1e-6 for s in starts), a
    for a, b, _t in cs:
        assert b - a >= MIN_CUE_S - 1e-6


def test_split_prefers_punctuation_and_balanced_cues():
    text = "We finished the first part of the review yesterday afternoon, and the second part will start tomorrow."
    cs = cues([final(0, text, 0.0, 20)])
    if len(cs) == 2:
        assert cs[0][2].replace("\n", " ").endswith("afternoon,")
    lens = [len(c[2]) for c in cs]
    assert max(lens) - min(lens) < 45


def test_pauses_take_no_text():
    # 4 words, then 5 s of silence, then 4 words: the split lands at the second burst, not mid-pause
    words = [[f"a{i}", i * 0.4, i * 0.4 + 0.35] for i in range(4)] + \
            [[f"b{i}", 7.0 + i * 0.4, 7.0 + i * 0.4 + 0.35] for i in range(4)]
    text = "The first half says quite a lot of words here, and the second half says just as many words again."
    cs = cues([{"target": text, "src_start": 0.0, "src_end": 8.6, "words": words}])
    assert len(cs) == 2
    assert cs[1][0] >= 1.2  # after the first burst's speech


def test_cjk_target_counts_two_columns_and_breaks_between_characters():
    text = "今天我们主要讨论明年的预算，然后讨论团队应该如何安排旧服务器的迁移工作以及后续的测试计划。"
    cs = cues([final(0, text, 0.0, 20)])
    check(cs, [final(0, text, 0.0, 20)])
    assert "".join(c[2].replace("\n", "") for c in cs) == text
    assert not any(ln.startswith(("，", "。")) for c in cs for ln in c[2].split("\n"))


def test_a_word_longer_than_a_line_is_cut_rather_than_overflowing():
    url = "https://example.org/" + "x" * 80
    cs = cues([final(0, f"See {url} for details", 0.0, 6)])
    for _a, _b, text in cs:
        assert all(text_width(ln) <= MAX_CHARS for ln in text.split("\n"))


def test_cues_never_overlap_even_when_finals_do_and_short_ones_grow_into_gaps():
    fs = [final(0, "Yes.", 1.0, 1), final(1, "No.", 1.1, 1), final(2, "Maybe later then.", 5.0, 3),
          final(3, "Fine.", 5.2, 1)]
    cs = cues(fs)
    check(cs, fs)
    assert cs[2][1] - cs[2][0] >= MIN_CUE_S - 1e-6  # room before the next: a full second


def test_empty_and_missing_targets_and_no_words():
    assert cues([{"target": "", "src_start": 0, "src_end": 1}, {"target": None, "src_start": 1, "src_end": 2}]) == []
    (a, b, t), = cues([{"target": "Legacy piece", "src_start": 2.0, "src_end": 2.3}])
    assert (a, b, t) == (2.0, 3.0, "Legacy piece")


@pytest.mark.parametrize("seed", range(40))
def test_property_random_finals(seed):
    rnd = random.Random(seed)
    fs, t = [], rnd.uniform(0, 3)
    for fid in range(rnd.randint(1, 8)):
        n = rnd.randint(1, 40)
        words = rnd.choices(LOREM + ["a", "I", "extraordinarily-long-hyphenated-expression"], k=n)
        step = rnd.choice([0.05, 0.2, 0.35, 0.6])
        fs.append(final(fid, " ".join(words), round(t, 3), rnd.randint(1, 30), step=step, gap=step / 5))
        t = fs[-1]["src_end"] + rnd.choice([-0.5, 0.0, 0.1, 2.0])  # sometimes overlapping
    cs = cues(fs)
    check(cs, fs)
    joined = "".join(c[2] for c in cs)
    assert "".join(joined.split()) == "".join("".join(f["target"] for f in fs).split())
    # SRT and VTT hold the same cues, to the millisecond
    back = parse_srt(to_srt(fs))
    assert [(round(a, 3), round(b, 3), x) for a, b, x in cs] == [(round(a, 3), round(b, 3), x) for a, b, x in back]
    assert to_vtt(fs).count("-->") == len(cs)


def test_summary_finals_and_the_cli_outputs_use_the_same_cues(tmp_path):
    from app.session.outputs import Outputs

    class Rec:
        segments = [final(0, " ".join(LOREM), 0.5, 30)]

    class Session:
        record = Rec()

    out = Outputs(srt=str(tmp_path / "o.srt"), vtt=str(tmp_path / "o.vtt"))
    out.write(Session(), realtime=True)
    assert parse_srt((tmp_path / "o.srt").read_text(encoding="utf-8")) == \
        [(round(a, 3), round(b, 3), x) for a, b, x in cues(Rec.segments)]
