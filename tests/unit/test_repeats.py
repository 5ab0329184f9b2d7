"""The hallucination guard's pure parts (no model): loops cut on normalised words, against the
text before them too; a final sentence that only repeats the previous ones; a recogniser's
hypothesis that runs on a loop of committed words."""

from app.pipeline.protocols import Word
from app.pipeline.repeats import SentenceRepeats, cut_hypothesis, cut_words, loop_cut, restart_cut


def words(text):
    return [" " + w for w in text.split()]


def test_a_loop_that_differs_in_case_and_punctuation_is_cut_after_its_first_copy():
    # whisper tiny.en on one 2.6 s JFK sentence: " like" vs " Like", "you." vs "you..."
    texts = words("like your country can do for you. Like your country can do for you...")
    keep = cut_words(texts)
    assert "".join(texts[:keep]) == " like your country can do for you."


def test_punctuation_after_the_last_kept_word_stays_with_it():
    texts = [" I'll", " say", " it", " again", ".", " I'll", " say", " it", " again", "."]
    assert cut_words(texts) == 5


def test_speech_repeats_are_kept():
    assert cut_words(words("very, very good")) == 3
    assert cut_words(words("no, no, no, that is wrong")) == 6
    assert cut_words(words("I think, I think we should go")) == 7  # a 2-word restart, said twice
    assert cut_words(words("we went to the shop and then to the park")) == 10


def test_single_and_double_word_loops_need_more_copies():
    assert loop_cut([1, 2, 1, 2]) == 4
    assert loop_cut([1, 2, 1, 2, 1, 2]) == 2
    assert loop_cut([5, 5, 5, 5]) == 4
    assert loop_cut([5, 5, 5, 5, 5]) == 1


def test_context_counts_as_earlier_copies_and_is_never_cut():
    a = words("you can act with the system.")
    # said once before: a speaker may say it again
    assert cut_words(a, context=a) == len(a)
    # said twice before: a third copy is the loop
    assert cut_words(a, context=a + a) == 0
    assert cut_words(a + words("and then we stop"), context=a + a) == 0
    # the new text's own copy of the context's sentence, twice: one is kept at most
    assert cut_words(a + a, context=a) == 0
    # a repeat that does not follow its copy back to back is not a loop here
    assert cut_words(words("so") + a, context=a + a) == 1 + len(a)
    # text before the loop stays
    texts = words("and so") + a + a + a
    assert "".join(texts[:cut_words(texts, context=words("we begin"))]) == " and so you can act with the system."


def test_a_loop_committed_piece_by_piece_is_cut_once_its_copy_is_clear():
    a = words("you can act with the system.")
    # a third copy broken off at the end: three words and half the sentence
    assert cut_words(words("you can act"), context=a + a) == 0
    assert cut_words(words("you can"), context=a + a) == 2  # too little to tell yet
    assert cut_words(words("you can see"), context=a + a) == 3  # not a copy


def test_a_restart_of_the_whole_text_that_breaks_off_is_cut():
    keys = list("abcdefgh")
    assert restart_cut(keys + keys[:4]) == 8
    assert restart_cut(keys + keys[:2]) == 10


def test_sentences_a_third_time_in_a_row_are_dropped_twice_is_speech():
    r = SentenceRepeats("en")
    assert not r.check("I'll say it again.", 1.5)
    assert not r.check("I'll say it again!", 1.5)  # said twice: speech
    assert r.check("i'll say it again", 1.5)  # a third time in a row: a loop
    assert r.check("I'll say it again.", 1.5)
    assert not r.check("Now something else.", 2.0)
    assert r.dropped == 2


def test_a_repeat_heard_in_much_less_audio_is_the_prompt_read_out():
    r = SentenceRepeats("en")
    assert not r.check("You can act with the system.", 2.0)
    assert r.check("You can act with the system.", 0.6)
    assert not r.check("You can act with the system.", 1.8)


def test_an_alternating_loop_is_dropped_at_the_third_copy_short_answers_are_not():
    r = SentenceRepeats("en", recent=8)
    seq = ["You can act with the system.", "Thank you.", "You can act with the system.", "Thank you.",
           "You can act with the system.", "Thank you."]
    assert [r.check(s, 2.0) for s in seq] == [False, False, False, False, True, False]
    # "Thank you." is short (2 words): only a run of three in a row drops it


def test_a_sentence_said_again_minutes_later_is_speech_not_a_loop():
    # a long recording with the same address every five minutes lost its third copy on
    r = SentenceRepeats("en", window_s=60.0)
    line = "What your country can do for you."
    assert [r.check(line, 2.4, t, t + 2.4) for t in (6.0, 306.0, 606.0, 906.0)] == [False] * 4
    # a loop runs on in consecutive decodes: within the window it is still dropped
    assert [r.check(line, 2.4, t, t + 2.4) for t in (910.0, 913.0)] == [False, True]
    # the window counts from the kept sentence's end
    r = SentenceRepeats("en", window_s=60.0)
    assert [r.check("Thank you all.", 1.0, t, t + 1.0) for t in (0.0, 5.0, 10.0)] == [False, False, True]


def test_chinese_sentences_compare_without_punctuation():
    r = SentenceRepeats("zh")
    assert not r.check("大家好，我们开始吧。", 2.0)
    assert not r.check("大家好我们开始吧", 2.0)
    assert r.check("大家好,我们开始吧!", 2.0)


def test_a_hypothesis_that_runs_on_a_committed_loop_is_cut_statelessly():
    def ws(text, t0=0.0):
        return [Word(t, t0 + i * 0.3, t0 + i * 0.3 + 0.3) for i, t in enumerate(words(text))]

    committed = ws("I'll say it again. I'll say it again.")
    hyp = ws("I'll say it again. I'll say it", 3.0)
    assert cut_hypothesis(hyp, committed) == []
    assert [w.text for w in cut_hypothesis(ws("and then we stop."), committed)] == words("and then we stop.")
    # Chinese: tokens as words; a loop inside the hypothesis is left to the token-level cut
    zh = [Word(t, 0, 0.1) for t in ["对", "对", "对", "，", "对", "对", "对"]]
    assert cut_hypothesis(zh, [], spaced=False) == zh
    said = [Word(t, 0, 0.1) for t in ["请", "产品", "经理", "先", "介绍", "。"]]
    assert cut_hypothesis(said, said + said, spaced=False) == []
