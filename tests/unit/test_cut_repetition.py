"""Whisper's hallucination loops are cut from a window's tokens (pure function, no model)."""

from app.backends.whisper_ct2 import cut_repetition


def test_a_span_said_twice_back_to_back_is_kept_once():
    assert cut_repetition([1, 2, 3, 4, 1, 2, 3, 4]) == [1, 2, 3, 4]
    assert cut_repetition([9, 1, 2, 3, 4, 1, 2, 3, 4, 5]) == [9, 1, 2, 3, 4]


def test_short_repeats_need_more_copies():
    assert cut_repetition([7, 8, 7, 8]) == [7, 8, 7, 8]  # "very, very"
    assert cut_repetition([7, 8, 7, 8, 7, 8]) == [7, 8]


def test_a_restart_of_the_whole_text_that_breaks_off_is_cut():
    # 请谈品经理先介绍 + 请谈品经理先介 (the copy cut off by the length limit)
    text = [11, 12, 13, 14, 15, 16, 17, 18]
    assert cut_repetition(text + text[:7]) == text
    assert cut_repetition(text + text[:4]) == text


def test_a_partial_restart_needs_four_tokens_and_half_the_text():
    text = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
    assert cut_repetition(text + text[:3]) == text + text[:3]  # too short to be sure
    assert cut_repetition(text + text[:4]) == text + text[:4]  # under half of what came before
    assert cut_repetition(text + text[:5]) == text
    # a phrase said again that is not the text's start stays
    assert cut_repetition([1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6]) == [1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6]


# -- the rest of the hallucination guard's helpers (no model) ------------------------------------

from app.backends.whisper_ct2 import _merge_punctuation, compression_ratio, is_silence  # noqa: E402
from app.core.text import norm  # noqa: E402
from app.pipeline.messages import join_words  # noqa: E402
from app.pipeline.protocols import Word  # noqa: E402
from app.pipeline.stability import split_prefix  # noqa: E402


def _w(*texts):
    return [Word(t, i * 0.3, i * 0.3 + 0.3) for i, t in enumerate(texts)]


def test_a_percent_sign_joins_its_number_and_is_not_written_twice():
    # split on spaces Whisper's " 78" "%" came as two words; "%" has no comparison form, so the
    # streaming prefix match (committed " 78%") kept the hypothesis's "%" as new: "78%%"
    merged = _merge_punctuation(_w(" up", " 78", "%", " this", " year", "."))
    assert [w.text for w in merged] == [" up", " 78%", " this", " year."]
    committed = merged[:2]
    again = _merge_punctuation(_w(" up", " 78", "%", " this"))
    new = split_prefix(again, join_words(committed))
    assert join_words(committed + new) == "up 78% this"


def test_opening_marks_stay_with_the_next_word():
    merged = _merge_punctuation(_w(" costs", " $", "5", " (", "about", ")", "."))
    assert [w.text for w in merged] == [" costs", " $", "5", " (", "about)."]
    assert _merge_punctuation(_w("大家", "好", "，", "增长", "12", "%", "。"))[-1].text == "12%。"


def test_loops_compress_well_speech_does_not():
    loop = "You can act with the system. " * 6
    assert compression_ratio(loop) > 2.4
    assert compression_ratio("Last month's revenue was 23 million yuan, up 12% year on year.") < 2.4
    assert compression_ratio("") == 0.0


def test_silence_needs_both_the_no_speech_probability_and_a_low_log_probability():
    assert is_silence(0.8, -1.5)
    assert not is_silence(0.8, -0.4)  # confident text over what looked like silence: kept
    assert not is_silence(0.3, -1.5)  # unsure speech is still speech


def test_english_words_never_glue_after_a_mark_but_a_word_straddling_a_prefix_stays_whole():
    assert join_words(_w(" Let's", " start", " now.", "Today", " we"), "en") == "Let's start now. Today we"
    assert join_words(_w(" up", " 12%,", "which", " is"), "en") == "up 12%, which is"
    # "time" committed, then the rest of the word ("s") from the next hypothesis: one word
    assert join_words(_w(" three", " time", "s", " the"), "en") == "three times the"
    assert join_words(_w(" 3", ".5", " U", ".S."), "en") == "3.5 U.S."
    # Chinese is joined as written
    assert join_words(_w("大家好，", "我们", "开始", "吧。"), "zh") == "大家好，我们开始吧。"


def test_a_text_that_reads_out_its_prompt_is_an_echo():
    from app.backends.whisper_ct2 import reads_out_prompt

    prompt = norm("Let's take a look at the design route of the new function in the capital.")
    assert reads_out_prompt(norm("Let's take a look at"), prompt, 12)
    assert reads_out_prompt(norm("Let's take a look at the design route of it. Then everyone"), prompt, 12)
    assert not reads_out_prompt(norm("Then everyone will ask questions."), prompt, 12)
    assert not reads_out_prompt(norm("the capital"), prompt, 12)  # a short phrase said again
    assert not reads_out_prompt(norm("Let's take a look at the budget for next year and the risks"), prompt, 12)


def _words(spec):
    from app.pipeline.protocols import Word

    return [Word(t, a, b, 0.9) for t, a, b in spec]


def test_words_piled_up_at_the_audio_end_are_dropped():
    """A loop the alignment had no audio for: 14 repeated words all in the last 60 ms of a 5 s
    sentence (music at 0 dB, tiny.en, bench/robust). The real last word stays."""
    from app.backends.whisper_ct2 import drop_crammed_tail

    said = _words([(" is", 3.7, 3.74), (" to", 3.74, 3.9), (" be", 3.9, 4.05), (" ill", 4.05, 4.27),
                   ("-disposed.", 4.27, 4.95)])
    loop = _words([(w, 4.95, 4.95) for w in " I must be rather cold -hearted and rather selfish, is to be ill".split(" ")[1:]])
    loop.append(_words([("-disposed.", 4.95, 5.0)])[0])
    assert drop_crammed_tail(said + loop, 5.0) == said


def test_a_word_or_two_at_the_audio_end_are_kept():
    """A streaming window that ends inside speech: its last word or two may start near the end."""
    from app.backends.whisper_ct2 import drop_crammed_tail

    ws = _words([(" we", 1.0, 1.2), (" need", 1.2, 1.5), (" to", 1.88, 1.95), (" do", 1.93, 2.0)])
    assert drop_crammed_tail(ws, 2.0) == ws
    fast = _words([(" of", 1.0, 1.1), (" the", 1.1, 1.3), (" team", 1.3, 1.6)])  # three words, none crammed
    assert drop_crammed_tail(fast, 1.62) == fast
