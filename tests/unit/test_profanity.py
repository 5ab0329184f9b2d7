"""The profanity setting (issue 24, part 5): the filter and its shipped word lists, the events and
the dub a session shows, the command line's option and the cloud protocol's field."""

import asyncio
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli.commands import main as cli_main
from app.cli.parser import build_parser
from app.cli.run import options_from_args
from app.cloud import protocol as P
from app.cloud.client import CloudClient
from app.core import profanity
from app.core.errors import UserError
from app.core.profanity import ProfanityFilter, filter_text, make_filter
from app.pipeline.engine import PipelineConfig, SerialCascade, StreamingPipeline
from app.pipeline.final_stage import FinalConfig
from app.pipeline.messages import (CommittedWords, DubChunk, FinalSentence, Metric, Segment, TentativeText,
                                   Translation)
from app.pipeline.mt_stage import MTConfig
from app.pipeline.protocols import Word
from app.pipeline.recognizer import ASRConfig
from app.pipeline.segmenter import SegmenterConfig
from app.session.build import profanity_notes, shown_text, text_languages
from app.session.options import SessionOptions
from app.session.subtitles import to_srt, to_vtt

from .fakes import WORD_S, FakeASR, FakeMT, FakeTTS, FakeVAD, speech

ROOT = Path(__file__).resolve().parents[2]


def en(text, mode):
    return filter_text(text, mode, "en")


# -- the filter ----------------------------------------------------------------------------------

def test_masked_keeps_the_first_letter_and_stars_the_rest_whatever_the_case():
    assert en("You're a fucking asshole.", "masked") == "You're a f****** a******."
    assert en("I'm a Fucking therapist Dad.", "masked") == "I'm a F****** therapist Dad."
    assert en("SHIT, that hurt!", "masked") == "S***, that hurt!"
    assert en("What the fuck?", "masked") == "What the f***?"
    # inflections are entries of their own; a hyphen or an apostrophe stays
    assert en("He fucked up, the motherfucker", "masked") == "He f***** up, the m***********"
    assert en("a blow-job and a blow job", "masked") == "a b***-*** and a b*** ***"
    assert en("fuckin' hell, fuckin’ hell", "masked") == "f*****' hell, f*****’ hell"


def test_only_whole_words_match():
    for clean in ("class assessment", "the Scunthorpe team", "a cocktail in Sussex", "shitake mushrooms",
                  "a bass cumulus", "passion fruit", "Dick Smith", "hell and damn", "summa cum laude"):
        for mode in profanity.MODES:
            assert en(clean, mode) == clean


def test_removed_leaves_no_double_space_and_no_space_before_punctuation():
    assert en("You're a fucking asshole.", "removed") == "You're a."
    assert en("I'm a fucking therapist Dad.", "removed") == "I'm a therapist Dad."
    assert en("Well, fuck, that's it", "removed") == "Well, that's it"
    assert en("Fuck, I forgot.", "removed") == "I forgot."
    assert en("Okay. Shit! I forgot.", "removed") == "Okay. I forgot."
    assert en("Fucking great.", "removed") == "Great."
    assert en("It was shit.", "removed") == "It was."
    assert en("  shit  ", "removed") == ""
    assert filter_text("C'est de la merde, putain!", "removed", "fr") == "C'est de la!"


def test_raw_changes_nothing_and_a_language_without_a_list_is_not_filtered():
    assert en("You're a fucking asshole.", "raw") == "You're a fucking asshole."
    assert make_filter("raw", "en") is None
    assert make_filter("masked", "xq") is None and filter_text("fuck", "masked", "xq") == "fuck"
    with pytest.raises(ValueError):
        make_filter("bleep", "en")


def test_chinese_entries_match_inside_unspaced_text_but_not_inside_ordinary_words():
    assert filter_text("你这个傻逼。", "masked", "zh") == "你这个傻*。"
    assert filter_text("你这个傻逼。", "removed", "zh") == "你这个。"
    assert filter_text("傻逼，你好", "removed", "zh") == "你好"
    assert filter_text("他妈的真烦", "masked", "zh") == "他**真烦"
    assert filter_text("操作系统逼迫我们", "masked", "zh") == "操作系统逼迫我们"


WORDS = st.lists(st.sampled_from(["you", "are", "a", "fucking", "Shit", "asshole", "great", "cunt", "bitches",
                                  "fine", "OK"]), min_size=1, max_size=12)
PUNCT = st.sampled_from(["", "", "", ",", ".", "!", "?", ";"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(WORDS, PUNCT), max_size=4))
def test_filtered_text_is_clean_tidy_and_filtered_again_unchanged(clauses):
    text = " ".join(" ".join(ws) + p for ws, p in clauses).strip()
    for mode in ("masked", "removed"):
        out = en(text, mode)
        assert not re.search(r"(?i)\b(fucking|shit|asshole|cunt|bitches)\b", out)
        assert en(out, mode) == out  # idempotent: the cloud client may filter a server's text again
        if mode == "masked":
            assert len(out) == len(text)
        else:
            assert "  " not in out and not re.search(r" [,.!?;]", out) and out == out.strip()
            assert not re.match(r"[,;]", out)


def test_recognised_words_are_matched_across_each_other_and_keep_their_places():
    zh = make_filter("masked", "zh")
    assert zh.words(["你", "傻", "逼", "。"]) == ["你", "傻", "*", "。"]  # 傻逼 split over two words
    rm = make_filter("removed", "en")
    assert rm.words([" You're", " a", " fucking", " asshole."]) == [" You're", " a", "", "."]
    assert make_filter("masked", "en").words([" a", " Fucking", " day"]) == [" a", " F******", " day"]
    assert rm.words([" fine", " day"]) == [" fine", " day"]


def test_every_shipped_list_parses_and_english_holds_the_words_that_reached_a_screen():
    langs = profanity.languages()
    assert {"en", "zh"} <= set(langs)
    for lang in langs:
        entries = profanity.word_list(lang)
        assert entries and all(e == " ".join(e.split()) and "#" not in e for e in entries), lang
        text = (profanity.LISTS / f"{lang}.txt").read_text(encoding="utf-8")
        assert "Origin and licence" in text, lang  # each list says where it comes from
        ProfanityFilter("masked", entries, lang)  # compiles
    assert {"fuck", "fucking", "fucked", "asshole", "shit", "cunt"} <= set(profanity.word_list("en"))
    assert not {"hell", "damn", "crap"} & set(profanity.word_list("en"))
    assert profanity.parse_list("# c\n\n a  b # x\nc\nc\n") == ("a b", "c")


def test_the_lists_ship_in_the_desktop_bundle():
    spec = (ROOT / "installer" / "relay.spec").read_text(encoding="utf-8")
    assert 'datas=[(str(ROOT / "resources"), "resources")' in spec  # resources/profanity/ with it
    assert profanity.LISTS == ROOT / "resources" / "profanity"


# -- events: what observers see -------------------------------------------------------------------

def shown(mode="masked"):
    return shown_text(mode, "en", "en")


def test_every_kind_of_event_is_shown_filtered_and_others_pass_as_they_are():
    s = shown()
    w = (Word(" a", 0.0, 0.5), Word(" fucking", 0.5, 1.0), Word(" day.", 1.0, 1.5))
    seg = Segment(0, w, "pause", True, 1.0, "en")
    out = s(seg)
    assert out.text == "a f****** day." and [x.start for x in out.words] == [0.0, 0.5, 1.0]
    tr = s(Translation(0, "a fucking day.", "A FUCKING DAY.", 0.0, 1.5, 2.0, segment=seg))
    assert (tr.source, tr.target, tr.segment.text) == ("a f****** day.", "A F****** DAY.", "a f****** day.")
    fin = s(FinalSentence(0, w, "a fucking day.", "shit day", 0.0, 1.5, 3.0, 2.0, (0,), "a fucking day",
                          "fucking day"))
    assert (fin.source, fin.target, fin.first_source, fin.first_target) == (
        "a f****** day.", "s*** day", "a f****** day", "f****** day")
    assert s(CommittedWords(w, (0.0, 0.0, 0.0), 1.0)).words[1].text == " f******"
    tt = s(TentativeText(w, "oh shit", 1.0))
    assert tt.text == "a f****** day." and tt.committed_tail == "oh s***"
    assert s(DubChunk(0, np.zeros(1), 8000, "fuck it", 1.0, 1.0, True, 1.5)).text == "f*** it"
    m = Metric("x", 1.0, 0.0)
    assert s(m) is m
    clean = Segment(1, (Word(" fine", 0.0, 0.5),), "pause", True, 1.0, "en")
    assert s(clean) is clean
    assert shown("raw") is None


class ProfaneASR(FakeASR):
    """FakeASR, every odd word " shit" (every 4th still ends a sentence)."""

    def _words(self, audio, start_sample):
        out = []
        for w in super()._words(audio, start_sample):
            idx = round((start_sample / 16000 + w.start) / WORD_S)
            text = " shit" if idx % 2 else w.text
            out.append(Word(text + ("." if w.text.endswith(".") else ""), w.start, w.end, w.probability))
        return out


class ProfaneMT(FakeMT):
    """FakeMT ("w3z" → "T3Z"), each such word after "FUCKING"."""

    def translate(self, source, target_prefix="", beam_size=None):
        return re.sub(r"\bT(\d)", r"FUCKING T\1", super().translate(source, target_prefix, beam_size))


def cfg(mode, **final):
    return PipelineConfig(asr=ASRConfig(catch_up=False), mt=MTConfig(previews=False),
                          segmenter=SegmenterConfig(lang="en", eager_units=0),
                          final=FinalConfig(first_wait_s=5.0, **final), shown=shown(mode))


def run(pipe, audio):
    dubs = []
    pipe.bus.subscribe(lambda ev: dubs.append(ev.text) if isinstance(ev, DubChunk) else None)
    pipe.start()
    for off in range(0, len(audio), 1600):
        pipe.push_audio(audio[off:off + 1600], wait_if_full=True)
    pipe.finish(timeout=60)
    return dubs


def exported(pipe) -> str:
    segs = pipe.record.segments
    return json.dumps(segs) + to_srt(segs) + to_vtt(segs)


@pytest.mark.parametrize("two_pass", [False, True])
def test_a_session_shows_exports_and_dubs_the_masked_text(two_pass):
    tts = FakeTTS()
    pipe = StreamingPipeline(ProfaneASR(), ProfaneMT(), tts, FakeVAD(), cfg("masked", enabled=two_pass),
                             final_vad=FakeVAD() if two_pass else None)
    dubs = run(pipe, speech(4.0, 1.0))
    assert pipe.record.final_mode == two_pass
    out = exported(pipe)
    assert "S***" in out and "F******" in out
    assert not re.search(r"(?i)shit|fucking", out)
    spoken = " ".join(t for t, _ in tts.texts)
    assert "F******" in spoken and not re.search(r"(?i)fucking", spoken)
    assert dubs and not any(re.search(r"(?i)fucking", d) for d in dubs)
    # the stages kept the models' own text for their work: the forced prefix was never masked
    assert not any("*" in prefix for _, prefix, _ in pipe.mt_stage.mt.calls)


def test_removed_takes_the_words_out_of_the_exports_and_the_dub():
    tts = FakeTTS()
    pipe = StreamingPipeline(ProfaneASR(), ProfaneMT(), tts, FakeVAD(), cfg("removed", enabled=False))
    run(pipe, speech(4.0, 1.0))
    out = exported(pipe)
    assert not re.search(r"(?i)shit|fucking|\*", out) and "T0Z" in out
    assert not any(re.search(r"(?i)fucking|  ", t) for t, _ in tts.texts)


def test_raw_shows_what_the_models_wrote():
    """The same session with the setting off: the words the other tests filter are there."""
    tts = FakeTTS()
    pipe = StreamingPipeline(ProfaneASR(), ProfaneMT(), tts, FakeVAD(), cfg("raw", enabled=False))
    run(pipe, speech(4.0, 1.0))
    assert "shit" in exported(pipe) and "FUCKING" in exported(pipe)
    assert any("FUCKING" in t for t, _ in tts.texts)


def test_the_serial_cascade_exports_and_dubs_filtered_text():
    tts = FakeTTS()
    pipe = SerialCascade(ProfaneASR(), ProfaneMT(), tts, FakeVAD(), cfg("masked"))
    dubs = run(pipe, speech(4.0, 1.0))
    out = exported(pipe)
    assert "F******" in out and not re.search(r"(?i)shit|fucking", out)
    assert tts.texts and not any("FUCKING" in t for t, _ in tts.texts)
    assert dubs and not any("FUCKING" in d for d in dubs)


# -- the session: languages, options, notes -------------------------------------------------------

def models_for(out_lang, tgt):
    return SimpleNamespace(out_lang=out_lang, plan=SimpleNamespace(tgt=tgt))


def test_each_line_is_filtered_with_the_list_of_its_own_language():
    assert text_languages(None, "zh-en") == ("zh", "en")
    assert text_languages(None, "xx-en") == ("en", "en")  # Whisper translates: the source line is English
    assert text_languages(models_for("en", "en"), "zh-en") == ("en", "en")  # no zh→en translator
    s = shown_text("masked", "zh", "en")
    assert s.source("傻逼 fuck") == "傻* fuck" and s.target("傻逼 fuck") == "傻逼 f***"
    opts = SessionOptions(pair="ko-en")
    assert profanity_notes(opts) == ["no profanity word list for 'ko': its text is shown unfiltered"]
    assert profanity_notes(SessionOptions(pair="ko-en", profanity="raw")) == []
    assert profanity_notes(SessionOptions(pair="zh-en")) == []


def test_the_option_is_validated():
    assert SessionOptions().profanity == "masked"
    for mode in profanity.MODES:
        SessionOptions(profanity=mode).validate()
    with pytest.raises(UserError, match="--profanity must be masked, removed or raw"):
        SessionOptions(profanity="bleep").validate()


def test_the_command_line_takes_the_setting_and_refuses_a_bad_one_in_one_line(capsys):
    p = build_parser()
    assert options_from_args(p.parse_args(["run", "--demo"])).profanity == "masked"
    assert options_from_args(p.parse_args(["run", "--demo", "--profanity", "removed"])).profanity == "removed"
    assert options_from_args(p.parse_args(["run", "--demo", "--profanity", "raw"])).profanity == "raw"
    code = cli_main(["run", "--demo", "--profanity", "bleep"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("relay: ")
    assert "--profanity" in err and "bleep" in err and "masked" in err


# -- the cloud protocol ---------------------------------------------------------------------------

HELLO = {"type": "hello", "v": 1, "pair": "zh-en"}


def test_the_hello_carries_the_setting_and_a_bad_one_is_a_clean_error():
    assert P.parse_hello({**HELLO, "features": ["profanity"], "profanity": "removed"}).profanity_applied == "removed"
    assert P.parse_hello({**HELLO, "features": ["profanity"]}).profanity_applied == "masked"  # the default
    # a client that predates the setting asks for nothing: its text goes out as before
    assert P.parse_hello(HELLO).profanity_applied == "raw"
    with pytest.raises(P.ProtocolError) as e:
        P.parse_hello({**HELLO, "features": ["profanity"], "profanity": "bleep"})
    assert e.value.code == "bad_options" and "masked" in str(e.value)
    with pytest.raises(P.ProtocolError) as e:
        P.parse_hello({**HELLO, "profanity": 3})
    assert e.value.code == "malformed"
    assert P.granted_features({"features": ["final", "profanity"]}) == ("final", "profanity")


class HelloWS:
    def __init__(self, welcome):
        self.welcome, self.sent = welcome, []
        self.transport = SimpleNamespace(abort=lambda: None)

    async def send(self, text):
        self.sent.append(json.loads(text))

    async def recv(self):
        return json.dumps(self.welcome)


@pytest.mark.parametrize("granted", [True, False])
def test_the_client_asks_the_server_to_filter_and_filters_itself_when_the_server_cannot(granted):
    opts = SessionOptions(pair="zh-en", profanity="removed")
    c = CloudClient("ws://127.0.0.1:9", "a-token-of-sixteen+", opts=opts, fallback=False)
    began = []
    c._begin_cloud = lambda ws, start, finals=False: began.append(start)
    seen = []
    c.bus.subscribe(seen.append)
    ws = HelloWS({"type": "welcome", "v": 1, "features": ["final", "profanity"] if granted else ["final"]})
    try:
        asyncio.run_coroutine_threadsafe(c._open_session(0, ws, 5.0), c._loop).result(10)
        hello = ws.sent[0]
        assert hello["profanity"] == "removed" and "profanity" in hello["features"]
        assert P.parse_hello(hello).profanity_applied == "removed"  # what the server will apply
        assert began == [0]
        c.bus.publish(Translation(0, "傻逼", "a shit day", 0.0, 1.0, 1.0))
        assert seen[-1].target == ("a shit day" if granted else "a day")
        c._mode, c._dub_end = "cloud", 0.0
        c._deliver_cloud("dub", {"seq": 0, "sample_rate": 8000, "text": "shit", "first": True, "src_end": 1.0},
                         np.full(80, 0.5, np.float32))
        dub = seen[-1]
        assert isinstance(dub, DubChunk) and bool(np.any(dub.audio)) == granted  # muted when unfiltered
    finally:
        c.abort()
