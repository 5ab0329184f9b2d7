from app.pipeline.protocols import Word
from app.pipeline.stability import LocalAgreement, drop_echo, split_prefix


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


def test_lookahead_holds_words_near_the_audio_end():
    la = LocalAgreement(min_lookahead_s=0.4)
    hyp = [W(" the", 0), W(" cat", 0.3), W(" sat", 0.6)]  # ends at 0.3, 0.6, 0.9
    la.insert(hyp, 1.0, audio_end=1.0)
    c, _ = la.insert(hyp, 2.0, audio_end=1.1)
    # agreed on all three, but only " the" and " cat" end 0.4 s before the audio does
    assert [w.text for w in c] == [" the", " cat"]
    assert [w.text for w in la.tentative] == [" sat"]
    c, _ = la.insert([W(" sat", 0.6)], 3.0, audio_end=1.3)
    assert [w.text for w in c] == [" sat"]


def test_no_lookahead_keeps_plain_local_agreement():
    la = LocalAgreement()
    hyp = [W(" the", 0), W(" cat", 0.3)]
    la.insert(hyp, 1.0, audio_end=0.6)
    c, _ = la.insert(hyp, 2.0, audio_end=0.6)
    assert len(c) == 2


def test_drop_echo_removes_words_inside_committed_time():
    committed = [Word("为了", 16.6, 17.2), Word("控制", 17.2, 17.8), Word("成本。", 17.8, 18.5)]
    hyp = [Word("为了", 18.12, 18.2), Word("控制", 18.2, 18.3), Word("成本。", 18.3, 18.48), Word("我们", 19.0, 19.3)]
    assert [w.text for w in drop_echo(hyp, committed)] == ["我们"]


def test_drop_echo_removes_a_reread_clause_just_after_the_commit():
    committed = [Word("降", 21.5, 21.8), Word("到六十五", 21.8, 22.6), Word("万元。", 22.6, 23.1)]
    hyp = [Word("到六十五", 23.05, 23.12), Word("万元。", 23.12, 23.2), Word("我", 23.9, 24.0)]
    assert [w.text for w in drop_echo(hyp, committed)] == ["我"]


def test_drop_echo_removes_a_squeezed_reread_that_corrects_a_character():
    # seen in the local fallback of tests/integration/test_cloud_faults.py: the clause committed
    # with 三 for 上, then re-read, corrected, in 0.38 s of audio and shown twice
    committed = [Word("三个月的", 8.99, 9.8), Word("营收", 9.8, 10.53), Word("是", 10.51, 10.8),
                 Word("两千", 10.8, 11.3), Word("三百万元。", 11.3, 12.25)]
    hyp = [Word("上个月的", 12.25, 12.25), Word("营收", 12.25, 12.3), Word("是两千", 12.3, 12.4),
           Word("三百万元。", 12.4, 12.63), Word("同比", 12.9, 13.3), Word("增长了", 13.3, 13.83)]
    assert [w.text for w in drop_echo(hyp, committed)] == ["同比", "增长了"]
    # the same words at a speaking pace are speech said again: kept
    spoken = [Word("上个月的", 12.3, 13.0), Word("营收", 13.0, 13.4), Word("是两千", 13.4, 14.0),
              Word("三百万元。", 14.0, 14.9)]
    assert drop_echo(spoken, committed) == spoken
    # squeezed, but a different clause (more than one character in six differs): kept
    other = [Word("下个季度的", 12.25, 12.3), Word("营收是两千", 12.3, 12.4),
             Word("三百万元。", 12.4, 12.6)]
    assert drop_echo(other, committed) == other


def test_drop_echo_keeps_real_repetition_and_new_speech():
    committed = [Word(" very", 1.0, 1.3)]
    hyp = [Word(" very", 1.35, 1.6), Word(" good", 1.6, 1.9)]
    assert [w.text for w in drop_echo(hyp, committed)] == [" very", " good"]
    after_pause = [Word("谢谢", 5.0, 5.4), Word("大家。", 5.4, 5.9)]
    committed = [Word("谢谢", 3.0, 3.4), Word("大家。", 3.4, 3.9)]
    assert drop_echo(after_pause, committed) == after_pause
    assert drop_echo(after_pause, []) == after_pause


def test_prompt_echo_is_recognised():
    from app.backends.whisper_ct2 import _echoes_prompt

    assert _echoes_prompt("普通话的句子。")
    assert _echoes_prompt("以下是")
    assert not _echoes_prompt("的")  # too short to tell
    assert not _echoes_prompt("我们说普通话")


def test_first_commit_of_an_utterance_needs_the_larger_margin():
    la = LocalAgreement(min_lookahead_s=0.1, first_lookahead_s=0.6)
    hyp = [W("三个", 0), W("月的", 0.3)]  # end at 0.3 and 0.6
    la.insert(hyp, 1.0, audio_end=0.8)
    c, _ = la.insert(hyp, 2.0, audio_end=0.8)
    assert c == []  # with the plain 0.1 s margin both would commit
    c, _ = la.insert(hyp + [W("营收", 0.6)], 3.0, audio_end=1.0)
    assert [w.text for w in c] == ["三个"]  # 0.3 <= 1.0 - 0.6
    # later commits of the same utterance use the plain margin
    c, _ = la.insert([W("月的", 0.3), W("营收", 0.6)], 4.0, audio_end=0.95)
    assert [w.text for w in c] == ["月的"]
    # a flush starts a new utterance: the larger margin again
    la.flush()
    nxt = [W("我们", 2.0), W("同意", 2.3)]
    la.insert(nxt, 5.0, audio_end=2.8)
    c, _ = la.insert(nxt, 6.0, audio_end=2.8)
    assert c == []


def test_a_split_character_is_never_committed():
    la = LocalAgreement()
    hyp = [W("比预期", 0), W("\ufffd", 0.3)]
    la.insert(hyp, 1.0)
    c, _ = la.insert(hyp + [W("为了", 0.6)], 2.0)
    assert [w.text for w in c] == ["比预期"]
    assert [w.text for w in la.tentative] == ["\ufffd", "为了"]
    c, _ = la.insert([W("要好。", 0.3), W("为了", 0.6)], 3.0)
    assert c == []  # the completed character replaces the partial one as a new hypothesis
    c, _ = la.flush()
    assert [w.text for w in c] == ["要好。", "为了"]
    la.insert([W("控制", 1.0), W("\ufffd", 1.3)], 4.0)
    c, _ = la.flush()  # at an utterance end the partial character is dropped, not committed
    assert [w.text for w in c] == ["控制"]


def test_first_commit_margin_defaults_and_bounds():
    import pytest

    from app.core.errors import UserError
    from app.session.options import SessionOptions
    from app.session.tuning import asr_defaults

    assert asr_defaults("zh") == (0.25, 0.25, 0.75, 0.0)
    assert asr_defaults("en") == (0.5, 0.0, 0.0, 0.0)
    with pytest.raises(UserError, match="--first-commit-lookahead"):
        SessionOptions(pair="zh-en", first_commit_lookahead=5).validate()
    SessionOptions(pair="zh-en", first_commit_lookahead=0.5).validate()
    with pytest.raises(UserError, match="--asr-context"):
        SessionOptions(pair="zh-en", asr_context=-1).validate()
    with pytest.raises(UserError, match="--confident-commit"):
        SessionOptions(pair="zh-en", confident_commit=1.5).validate()
    with pytest.raises(UserError, match="--confident-lookahead"):
        SessionOptions(pair="zh-en", confident_lookahead=-0.1).validate()
    with pytest.raises(UserError, match="--final-lead-in"):
        SessionOptions(pair="zh-en", final_lead_in=11).validate()
    SessionOptions(pair="zh-en", final_lead_in=0).validate()
    with pytest.raises(UserError, match="--final-pause"):
        SessionOptions(pair="zh-en", final_pause=0.1).validate()
    with pytest.raises(UserError, match="--final-wait"):
        SessionOptions(pair="zh-en", final_wait=-1).validate()
    with pytest.raises(UserError, match="--final-early"):
        SessionOptions(pair="zh-en", final_early=0.1).validate()
    SessionOptions(pair="zh-en", final_early=0).validate()
    SessionOptions(pair="zh-en", final_pause=0.4, final_wait=0).validate()


def test_mt_beam_defaults_greedy_for_pieces_and_beam_search_for_whole_sentences():
    from app.session.options import SessionOptions

    assert SessionOptions(pair="zh-en").mt_beam == 1
    assert SessionOptions(pair="zh-en", serial=True).mt_beam == 4
    assert SessionOptions(pair="zh-en", beam=3).mt_beam == 3
    assert SessionOptions(pair="zh-en", beam=2, serial=True).mt_beam == 2


def P(text, t, p):
    return Word(text, t, t + 0.3, p)


def test_a_confident_word_commits_on_one_hypothesis():
    la = LocalAgreement(min_lookahead_s=0.25, confident_prob=0.5, confident_lookahead_s=0.15)
    la.insert([P("我们", 0, 0.9), P("今天", 0.3, 0.9)], 1.0, audio_end=0.9)
    c, _ = la.insert([P("我们", 0, 0.9), P("今天", 0.3, 0.9)], 2.0, audio_end=1.2)
    assert [w.text for w in c] == ["我们", "今天"]  # agreed: plain LocalAgreement
    # new words, seen once: the sure ones that end 0.15 s before the audio and have a word
    # after them commit now; the unsure one, and all after it, wait for a second hypothesis
    hyp = [P("讨论", 0.6, 0.95), P("预算", 0.9, 0.8), P("问题", 1.2, 0.3), P("吧", 1.5, 0.99), P("好", 1.8, 0.9)]
    c, _ = la.insert(hyp, 3.0, audio_end=2.2)
    assert [w.text for w in c] == ["讨论", "预算"]
    assert la.confident_commits == 2
    # the last word of a hypothesis never commits alone, however sure (its punctuation is open)
    c, _ = la.insert([P("问题", 1.2, 0.9), P("吧。", 1.5, 0.99)], 4.0, audio_end=3.0)
    assert [w.text for w in c] == ["问题"]  # agreed with the hypothesis before
    assert [w.text for w in la.tentative] == ["吧。"] and la.confident_commits == 2


def test_confident_commits_wait_for_the_margin_and_skip_an_utterances_first_words():
    la = LocalAgreement(min_lookahead_s=0.25, first_lookahead_s=0.75, confident_prob=0.5,
                        confident_lookahead_s=0.15)
    # an utterance's first words: agreement and the wide margin, however sure the recogniser is
    c, _ = la.insert([P("三个", 0, 0.99), P("月", 0.3, 0.99), P("的", 0.6, 0.99)], 1.0, audio_end=1.5)
    assert c == []
    c, _ = la.insert([P("上个", 0, 0.99), P("月", 0.3, 0.99), P("的", 0.6, 0.99), P("营收", 0.9, 0.99)],
                     2.0, audio_end=1.6)
    assert c == []
    # agreed, and 0.75 s heard after them: the first words commit
    c, _ = la.insert([P("上个", 0, 0.99), P("月", 0.3, 0.99), P("的", 0.6, 0.99), P("营收", 0.9, 0.99)],
                     3.0, audio_end=1.9)
    assert [w.text for w in c] == ["上个", "月", "的"]
    # then a sure word still needs 0.15 s of audio after it: 是 ends at 1.5, 0.1 s before 1.6
    c, _ = la.insert([P("营收", 0.9, 0.99), P("是", 1.2, 0.99), P("两", 1.5, 0.99)], 4.0, audio_end=1.6)
    assert [w.text for w in c] == ["营收"] and la.confident_commits == 0
    c, _ = la.insert([P("是", 1.2, 0.99), P("两千", 1.5, 0.6), P("万", 1.8, 0.99)], 5.0, audio_end=2.0)
    assert [w.text for w in c] == ["是", "两千"] and la.confident_commits == 1
    # off: two hypotheses as before
    la = LocalAgreement(confident_prob=0.0)
    la.insert([P("a", 0, 0.99), P("b", 0.3, 0.99)], 1.0, audio_end=2.0)
    c, _ = la.insert([P("a", 0, 0.99), P("b", 0.3, 0.99), P("c", 0.6, 0.99), P("d", 0.9, 0.99)], 2.0, audio_end=3.0)
    assert [w.text for w in c] == ["a", "b"] and la.confident_commits == 0


def test_a_confident_last_word_commits_once_silence_follows_it():
    la = LocalAgreement(min_lookahead_s=0.25, confident_prob=0.5, confident_lookahead_s=0.15,
                        confident_silence_s=0.25)
    la.insert([P("我们", 0, 0.9)], 1.0, audio_end=1.0)
    c, _ = la.insert([P("我们", 0, 0.9), P("开始", 0.3, 0.9)], 2.0, audio_end=1.0)
    assert [w.text for w in c] == ["我们"]
    # 吧。 ends the hypothesis: alone it waits (its "。" may be a guess at the audio's end) ...
    c, _ = la.insert([P("开始", 0.3, 0.9), P("吧。", 0.6, 0.9)], 3.0, audio_end=1.05, silent_from=0.9)
    assert [w.text for w in c] == ["开始"] and la.confident_commits == 0
    # ... until the VAD has heard 0.25 s of silence after the speech: then the mark is heard
    # too (agreement alone would still wait: 吧。 ends less than 0.25 s before the audio)
    c, _ = la.insert([P("吧。", 0.6, 0.9)], 4.0, audio_end=1.1, silent_from=0.85)
    assert [w.text for w in c] == ["吧。"] and la.confident_commits == 1


def test_the_second_pass_takes_its_pause_and_wait_from_the_options():
    from types import SimpleNamespace

    from app.pipeline.final_stage import FinalConfig
    from app.session.build import pipeline_config
    from app.session.options import SessionOptions

    models = SimpleNamespace(out_lang="zh", plan=SimpleNamespace(tgt="en"))
    cfg = pipeline_config(models, SessionOptions(pair="zh-en", final_pause=0.4, final_wait=0.0, profanity="raw"))
    assert (cfg.final.pause_s, cfg.final.first_wait_s) == (0.4, 0.0)
    cfg = pipeline_config(models, SessionOptions(pair="zh-en", profanity="raw"))
    assert cfg.final.pause_s == FinalConfig.pause_s
    assert cfg.final.early_s == FinalConfig.early_s
    cfg = pipeline_config(models, SessionOptions(pair="zh-en", final_early=0.3, profanity="raw"))
    assert cfg.final.early_s == 0.3
    # a file read as fast as it goes sees each pause whole: no early decodes there
    cfg = pipeline_config(models, SessionOptions(pair="zh-en", realtime=False, final_early=0.3, profanity="raw"))
    assert cfg.final.early_s == 0.0
    # a file fed as fast as it goes waits for the first pass (it lags far behind there)
    cfg = pipeline_config(models, SessionOptions(pair="zh-en", realtime=False, final_wait=0.0, profanity="raw"))
    assert cfg.final.first_wait_s == 120.0
