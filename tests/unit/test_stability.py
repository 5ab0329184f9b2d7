from app.pipeline.protocols import Word
from app.pipeline.stability import LocalAgreement, split_prefix


def W(text, t):
    return Word(text, t, t + 0.3)


def test_commits_only_what_two_hypotheses_agree_on():
    la = LocalAgreement()
    c, _ = la.insert([W(" the", 0), W(" cat", 0.3)], now=1.0)
    assert c == []
    c, seen = la.insert([W(" the", 0), W(" cat", 0.3), W(" sat", 0.6)], now=2.0)
    assert [w.text for w in c] == [" the", " cat"]
    assert seen == [1.0, 1.0]  # first appearance, not commit time
    assert [w.text for w in la.tentative] == [" sat"]


def test_disagreement_stops_the_commit():
    la = LocalAgreement()
    la.insert([W(" a", 0), W(" big", 0.3)], 1.0)
    c, _ = la.insert([W(" a", 0), W(" pig", 0.3)], 2.0)
    assert [w.text for w in c] == [" a"]
    assert [w.text for w in la.tentative] == [" pig"]


def test_missing_sentence_mark_is_not_committed_away():
    la = LocalAgreement()
    la.insert([W("开始", 0), W("吧", 0.5)], 1.0)
    c, _ = la.insert([W("开始", 0), W("吧。", 0.5)], 2.0)
    assert [w.text for w in c] == ["开始"]  # "吧" vs "吧。" differ: wait for agreement
    c, _ = la.insert([W("吧。", 0.5), W("能", 1.0)], 3.0)
    assert [w.text for w in c] == ["吧。"]


def test_flush_commits_tentative():
    la = LocalAgreement()
    la.insert([W(" end", 0)], 1.0)
    c, seen = la.flush()
    assert [w.text for w in c] == [" end"] and seen == [1.0]
    assert la.tentative == []


def test_split_prefix():
    words = [W(" hello", 0), W(" world", 0.3), W(" again", 0.6)]
    assert [w.text for w in split_prefix(words, "Hello world")] == [" again"]
    assert split_prefix(words, "goodbye") is None
    zh = [W("大家", 0), W("好,我们", 0.3)]
    rest = split_prefix(zh, "大家好")
    assert [w.text for w in rest] == ["我们"]
    assert split_prefix(words, "") == words
