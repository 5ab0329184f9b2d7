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
