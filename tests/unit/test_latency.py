import numpy as np

from app.pipeline.latency import ArrivalClock, LatencyTracker, average_lagging, percentiles
from app.pipeline.messages import CommittedWords, DubChunk, Segment, Translation
from app.pipeline.protocols import Word


def arrival_realtime(seconds=10.0, block=0.1):
    a = ArrivalClock()
    n = int(seconds / block)
    for i in range(1, n + 1):
        a.record(int(i * block * 16000), i * block)  # block i arrives when it has been played
    return a


def test_played_at_follows_the_feed():
    a = arrival_realtime()
    assert abs(a.played_at(1.0) - 1.0) < 1e-6
    assert abs(a.played_at(2.05) - 2.05) < 0.011


def test_percentiles_and_empty():
    p = percentiles([0.1, 0.2, 0.3, 0.4])
    assert p["p50"] == 250.0 and p["n"] == 4
    assert percentiles([])["p50"] is None


def test_subtitle_latency_is_per_source_word():
    a = arrival_realtime()
    tr = LatencyTracker(a)
    ws = (Word("a", 0.0, 0.5), Word("b", 0.5, 1.0), Word("c", 1.0, 2.0))
    tr(CommittedWords(ws, (0.9, 1.4, 2.4), 2.5))
    seg = Segment(0, ws, "punctuation", True, 2.5, "en")
    tr(Translation(0, "a b c", "A B C.", 0.0, 2.0, 3.0, False, 2.5, 2.6, seg))
    s = tr.summary()
    # the sentence was shown at 3.0 s; its words ended at 0.5, 1.0 and 2.0 s
    assert s["e2e_subtitle"]["n"] == 3
    np.testing.assert_allclose(sorted(tr.e2e_subtitle), [1.0, 2.0, 2.5], atol=0.02)
    np.testing.assert_allclose(sorted(tr.asr_first_token), [0.4, 0.4, 0.4], atol=0.02)
    assert abs(tr.mt_queue_wait[0] - 0.1) < 1e-9
    tr(DubChunk(0, np.zeros(10, np.float32), 22050, "A B C.", 3.2, 3.5, True, 2.0))
    assert abs(tr.tts_first_audio[0] - 0.2) < 1e-9
    assert abs(tr.e2e_dub[0] - 1.5) < 0.02


def test_average_lagging_matches_hand_computation():
    # source 3 s, 3 target words emitted at 1, 2, 3 s: rate 1 s/word -> lags 1, 1, 1
    al, laal = average_lagging([1.0, 2.0, 3.0], 3.0)
    assert abs(al - 1000.0) < 1e-6 and abs(laal - 1000.0) < 1e-6
    # everything at the end (serial): AL = 3000 - 0 for the first word only (tau = 1)
    al, _ = average_lagging([3.0, 3.0, 3.0], 3.0)
    assert abs(al - 3000.0) < 1e-6
    # LAAL with a longer reference is smaller lag per position
    _, laal = average_lagging([1.0, 2.0, 3.0], 3.0, ref_len=6)
    assert laal > 1000.0
