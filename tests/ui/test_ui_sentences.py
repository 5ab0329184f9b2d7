"""One row per sentence: the first pass's pieces gather, lighter, into their sentence's row; the
second pass's FinalSentence replaces them in place (revised words marked for a moment, a failed
second pass marked); exports and corrections hold finals; the overlay shows the last two lines of
the running target text. Fake events go through the window's bridge, as a session sends them."""

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetricsF

from app.pipeline.messages import FinalSentence, Segment, Translation
from app.pipeline.protocols import Word
from app.session.subtitles import MAX_CHARS, parse_srt, text_width
from app.ui.bridge import EventBridge
from app.ui.subtitles_view import revision_alpha
from app.ui.transcript import FADE_S


def seg(seq, text, a, b, end=False):
    return Segment(seq, (Word(text, a, b, 0.9),), "punctuation", end, b + 0.3, "zh")


def tr(seq, target, a=0.0, b=1.0, preview=False):
    return Translation(seq, "", target, a, b, b + 0.6, preview)


def fin(fid, source, target, a, b, covers, failed=False, first_target=""):
    words = tuple(Word(ch, a + i * (b - a) / len(source), a + (i + 1) * (b - a) / len(source), 0.9)
                  for i, ch in enumerate(source))
    return FinalSentence(fid, words, source, target, a, b, b + 2.0, b + 0.6, tuple(covers), "", first_target,
                         "pause", failed)


def send(w, *events):
    for ev in events:
        w.bridge(ev)
    w.bridge.flush()


def rows(w):
    return [ln for ln in w.model.data_.lines]


def first_sentence(w):
    """Sentence 1 in two pieces (0, 1), sentence 2 begun (piece 2)."""
    w.model.set_live_active(True)
    send(w, seg(0, "今天我们", 0.0, 1.0), tr(0, "Today we"),
         seg(1, "讨论预算。", 1.0, 2.2, end=True), tr(1, "talk budget."),
         seg(2, "然后", 2.5, 3.0), tr(2, "Then"))


def test_bridge_forwards_final_sentences(qtbot):
    bridge = EventBridge()
    got = []
    bridge.final.connect(got.append)
    f = fin(0, "大家好", "Hello everyone", 0.0, 1.0, (0,))
    bridge(seg(0, "大家好", 0.0, 1.0, True))
    bridge(f)
    bridge.flush()
    assert got == [f]


def test_pieces_gather_into_one_row_per_sentence_lighter_until_final(window):
    w = window
    w.model.final_mode = True
    first_sentence(w)
    lines = rows(w)
    assert len(lines) == 2  # two sentences, not three pieces
    assert w.model.rowCount() == 3  # and the live row
    assert lines[0].pending and lines[0].source == "今天我们讨论预算。"
    assert lines[0].target == "Today we talk budget."
    assert lines[1].pending and lines[1].target == "Then"
    assert "being recognised and translated again" in w.model.index(0).data(Qt.ToolTipRole)
    assert not (w.model.flags(w.model.index(0)) & Qt.ItemIsEditable)  # corrections apply to finals


def test_final_replaces_its_pieces_in_place_and_marks_revised_words(window, qtbot):
    w = window
    first_sentence(w)
    row_obj = rows(w)[1]
    send(w, fin(0, "今天我们讨论预算。", "Today we discuss the budget.", 0.0, 2.2, (0, 1)))
    lines = rows(w)
    assert len(lines) == 2 and w.model.final_mode
    f = lines[0]
    assert not f.pending and f.final_id == 0 and f.target == "Today we discuss the budget."
    assert lines[1] is row_obj and lines[1].pending  # the next sentence's row is untouched
    marked = [f.target[a:b] for a, b in f.revised]
    assert marked == ["discuss the"]  # "talk" became "discuss the"; "Today we" and "budget." stay
    assert revision_alpha(f) > 0.5 and w.model.fade.isActive()
    assert revision_alpha(f, f.revised_at + FADE_S + 0.01) == 0.0
    w.subtitles.list.viewport().grab()  # painted with the mark
    qtbot.waitUntil(lambda: f.revised_at is None and not w.model.fade.isActive(), timeout=5000)
    assert w.model.flags(w.model.index(0)) & Qt.ItemIsEditable
    # late first-pass events for covered pieces are ignored
    send(w, tr(1, "LATE"), seg(0, "今天我们", 0.0, 1.0))
    assert [ln.target for ln in rows(w)] == ["Today we discuss the budget.", "Then"]
    # the view paints finals, drafts, marks and the live row without error
    w.subtitles.list.viewport().grab()


def test_failed_final_is_marked_and_a_partial_cover_keeps_the_rest_pending(window):
    w = window
    w.model.set_live_active(True)
    send(w, seg(0, "第一", 0.0, 1.0), tr(0, "First"), seg(1, "第二", 1.0, 2.0), tr(1, "second"),
         seg(2, "第三。", 2.0, 3.0, end=True), tr(2, "third."))
    assert len(rows(w)) == 1
    send(w, fin(0, "第一第二", "First second", 0.0, 2.0, (0, 1), failed=True))
    lines = rows(w)
    assert [ln.pending for ln in lines] == [False, True]
    assert lines[0].failed and lines[0].revised == []
    assert lines[1].source == "第三。" and lines[1].target == "third."
    assert "Not revised" in w.model.index(0).data(Qt.ToolTipRole)
    send(w, fin(1, "第三。", "Third.", 2.0, 3.0, (2,)))
    assert [(ln.final_id, ln.pending) for ln in rows(w)] == [(0, False), (1, False)]
    w.subtitles.list.viewport().grab()


def test_exports_and_corrections_hold_finals_only(window, tmp_path):
    w = window
    w.model.final_mode = True
    first_sentence(w)
    assert not w.export_to(str(tmp_path / "none.srt"), "srt")  # drafts only: nothing final to export
    assert w.message_box.text().startswith("No sentence has its final text yet")
    send(w, fin(0, "今天我们讨论预算。", "Today we discuss the budget.", 0.0, 2.2, (0, 1)))
    assert [s["id"] for s in w.model.segments()] == [0]  # the pending "Then" is not exported
    assert not w.model.setData(w.model.index(1), ("然后", "Then!"))  # a draft is not corrected
    assert w.model.setData(w.model.index(0), ("今天我们讨论预算。", "Today we discuss next year's budget."))
    assert w.export_to(str(tmp_path / "s.srt"), "srt")
    cues = parse_srt((tmp_path / "s.srt").read_text(encoding="utf-8"))
    assert [c[2] for c in cues] == ["Today we discuss next year's budget."]
    assert w.export_to(str(tmp_path / "s.txt"), "txt")
    txt = (tmp_path / "s.txt").read_text(encoding="utf-8")
    assert "[corrected]" in txt and "Then" not in txt
    assert w.model.segments()[0]["corrected"]


def test_a_session_without_finals_keeps_its_pieces_by_sentence(window, tmp_path):
    w = window
    first_sentence(w)
    assert not w.model.final_mode
    assert [s["target"] for s in w.model.segments()] == ["Today we talk budget.", "Then"]
    assert w.model.flags(w.model.index(0)) & Qt.ItemIsEditable


def test_reconcile_takes_the_summary_finals(window):
    w = window
    first_sentence(w)
    summary = [{"id": 0, "source": "今天我们讨论预算。", "target": "Today we discuss the budget.", "src_start": 0.0,
                "src_end": 2.2, "covers": [0, 1], "failed": False, "words": [["今天", 0.0, 0.5]]},
               {"id": 1, "source": "然后", "target": "Then", "src_start": 2.5, "src_end": 3.0, "covers": [2],
                "failed": False, "words": []}]
    assert w.model.reconcile(summary) == 2
    assert [(ln.final_id, ln.target) for ln in rows(w)] == [(0, "Today we discuss the budget."), (1, "Then")]
    assert w.model.reconcile(summary) == 0


def test_overlay_shows_the_last_two_lines_of_running_text(window, qtbot):
    w = window
    w.act_overlay.trigger()
    assert w.overlay.isVisible()
    w.model.set_live_active(True)
    words = [f"word{i}" for i in range(60)]
    for i in range(0, 60, 4):
        send(w, seg(i, f"句{i}", i, i + 1, end=True), tr(i, " ".join(words[i:i + 4])))
    send(w, fin(0, "句0", " ".join(words[:4]), 0, 1, (0,)))
    shown = w.overlay.shown_lines()
    assert len(shown) == 2
    assert shown[-1].split()[-1] == "word59"  # the newest words, not the current piece only
    joined = " ".join(shown).split()
    assert joined == words[60 - len(joined):]
    assert len(joined) > 4
    fm = QFontMetricsF(w.overlay.target_label.font())
    width = w.overlay.target_label.contentsRect().width()
    assert all(fm.horizontalAdvance(s) <= width for s in shown)
    for source_shown in (True, False):  # both lines fit the bar, with or without the source line
        w.act_overlay_src.setChecked(source_shown)
        w.overlay.resize(700, 10)  # as small as it lets itself be
        qtbot.wait(10)
        assert w.overlay.target_label.height() >= 2 * fm.lineSpacing()
    assert "#d2d6dd" in w.overlay.target_label.text()  # the pending first pass, lighter
    # a preview tail joins the running text, dimmer still
    send(w, tr(99, "maybe", preview=True))
    assert w.overlay.shown_lines()[-1].endswith("maybe")
    assert "#9aa1ab" in w.overlay.target_label.text()
    w.act_overlay.trigger()


def test_cue_limits_hold_for_window_exports(window, tmp_path):
    w = window
    long = ("the committee agreed that the new schedule will start in March and that every team "
            "will report its progress at the end of each month")
    send(w, seg(0, "委员会同意", 0.0, 6.0, end=True), tr(0, "draft"),
         fin(0, "委员会同意新的时间表从三月开始每个团队每月底报告进度", long, 0.0, 6.0, (0,)))
    assert w.export_to(str(tmp_path / "l.srt"), "srt")
    cues = parse_srt((tmp_path / "l.srt").read_text(encoding="utf-8"))
    assert len(cues) >= 2
    assert " ".join(c[2].replace("\n", " ") for c in cues) == long
    for a, b, text in cues:
        assert len(text.split("\n")) <= 2 and all(text_width(x) <= MAX_CHARS for x in text.split("\n"))
        assert 0.0 <= a < b <= 6.0
    assert all(cues[i][1] <= cues[i + 1][0] for i in range(len(cues) - 1))
