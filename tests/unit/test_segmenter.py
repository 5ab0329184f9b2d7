from app.pipeline.protocols import Word
from app.pipeline.segmenter import Segmenter, SegmenterConfig


def words(*texts, step=0.4):
    return [Word(t, i * step, i * step + step) for i, t in enumerate(texts)]


def word_ends(*vocab):
    """A stand-in for a Chinese word segmenter: the text's word ends, reading ``vocab``'s words
    in order from its start."""
    def boundaries(text):
        ends, pos = [], 0
        for w in vocab:
            if text[pos:pos + len(w)] == w:
                pos += len(w)
                ends.append(pos)
        return ends + [len(text)]
    return boundaries


def seg(lang="en", **kw):
    return Segmenter(SegmenterConfig(lang=lang, **kw), lambda: 0.0)


def test_boundary_on_sentence_punctuation():
    s = seg(eager_units=0)
    out = s.feed(words(" Hello", " there.", " How"))
    assert len(out) == 1 and out[0].reason == "punctuation" and out[0].sentence_end
    assert out[0].text == "Hello there."


def test_boundary_on_pause_closes_the_sentence():
    s = seg(eager_units=0)
    out = s.feed(words(" so", " we", " agree"), pause_after=True)
    assert [o.reason for o in out] == ["pause"] and out[0].sentence_end


def test_completeness_at_clause_mark_needs_enough_words():
    s = seg(eager_units=0, min_clause_units=3)
    assert s.feed(words(" yes,")) == []  # too short a clause
    out = s.feed(words(" and", " then", " we", " left,"))
    assert out and out[0].reason == "completeness" and not out[0].sentence_end


def test_max_length_but_never_after_a_number():
    s = seg(eager_units=0, max_units=3)
    out = s.feed(words(" it", " costs", " 23"))
    assert out == []  # a dangling number may continue ("23 00万")
    out = s.feed(words(" dollars"))
    assert out and out[0].reason == "max_length"


def test_eager_segment_at_a_stable_point():
    s = seg(eager_units=4)
    assert s.feed(words(" we", " will")) == []
    out = s.feed(words(" discuss", " the"))
    assert out and out[0].reason == "completeness" and out[0].text == "we will discuss the"


def test_cjk_eager_segment_does_not_cut_inside_a_word():
    # word boundaries as a Chinese segmenter would give them: 今天|主要|讨论
    boundaries = word_ends("今天", "主要", "讨论", "第三", "季度")
    s = Segmenter(SegmenterConfig(lang="zh", eager_units=4), lambda: 0.0, boundaries)
    out = s.feed(words("今天", "主要", "讨"), lookahead="论第三")
    assert out and out[0].text == "今天主要"
    out = s.feed(words("论", "第三", "季度"), pause_after=True)
    assert out[-1].text.startswith("讨论")


def test_cjk_piece_never_ends_inside_a_number():
    # seen in the demo: 降到六十五 | 万元。 became "to $65" + "million." (it is 650,000 yuan)
    boundaries = word_ends("降", "到", "六十五", "万元", "。")  # as jieba gives them
    s = Segmenter(SegmenterConfig(lang="zh", eager_units=6), lambda: 0.0, boundaries)
    # six units at a stable point, but 万 is held back (万元 goes on) and 六十五 is left dangling
    assert s.feed(words("降", "到", "六十五", "万"), lookahead="元。") == []
    out = s.feed(words("元。"))
    assert [o.text for o in out] == ["降到六十五万元。"]
    # the max-length cut waits for the number's end too
    s = seg(lang="zh", eager_units=0, max_units=4)
    assert s.feed(words("预算", "两千")) == []
    assert [o.reason for o in s.feed(words("万元"))] == ["max_length"]


def test_flush_and_mean_duration():
    s = seg(eager_units=0)
    s.feed(words(" a", " b"))
    out = s.flush()
    assert out[0].reason == "flush"
    assert abs(s.mean_duration - 0.8) < 1e-9
