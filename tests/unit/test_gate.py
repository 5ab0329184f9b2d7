"""The voice gate's hysteresis, and the level a quiet sentence is recognised at."""

import numpy as np

from app.pipeline.final_stage import level
from app.pipeline.gate import Hysteresis


def test_speech_starts_above_on_and_lasts_until_below_off_across_blocks():
    g = Hysteresis(0.3, 0.15)
    # a telephone-band sentence: Silero's probabilities hover around 0.2-0.4 (measured); a plain
    # 0.5 threshold heard none of it
    first = g(np.array([0.05, 0.2, 0.35, 0.25, 0.2]))
    assert first.tolist() == [False, False, True, True, True]
    assert g.speaking
    second = g(np.array([0.16, 0.1, 0.25, 0.31]))  # the state carries over the block boundary
    assert second.tolist() == [True, False, False, True]
    g.reset()
    assert g(np.array([0.2])).tolist() == [False]


def test_a_quiet_sentence_is_brought_up_and_a_normal_one_left_alone():
    quiet = np.full(1600, 0.02, dtype=np.float32)
    up = level(quiet)
    assert abs(float(np.max(up)) - 0.02 * 31.6) < 1e-4  # +30 dB at most (0.7 would need +31)
    assert abs(float(np.max(level(quiet * 5))) - 0.7) < 1e-4  # else to a 0.7 peak
    normal = np.full(1600, 0.5, dtype=np.float32)
    assert level(normal) is normal
    silent = np.zeros(1600, dtype=np.float32)
    assert level(silent) is silent


def _speech():
    import soundfile as sf
    from pathlib import Path
    audio, sr = sf.read(Path(__file__).parents[1] / "data" / "jfk.wav", dtype="float32")
    assert sr == 16000
    return audio if audio.ndim == 1 else audio.mean(axis=1)


def _telephone(audio):
    """300-3400 Hz, as a telephone line passes it (a brick-wall filter over the whole clip)."""
    spec = np.fft.rfft(audio)
    f = np.fft.rfftfreq(len(audio), 1 / 16000)
    spec[(f < 300) | (f > 3400)] = 0
    return np.fft.irfft(spec, len(audio)).astype(np.float32)


def test_the_band_watch_tells_a_telephone_line_from_wideband_speech_and_silence():
    from app.pipeline.gate import BandWatch
    speech = _speech()
    wide, phone, quiet = BandWatch(), BandWatch(), BandWatch()
    for off in range(0, len(speech), 1600):  # in blocks, as the audio arrives
        wide.feed(speech[off:off + 1600])
        phone.feed(_telephone(speech)[off:off + 1600])
        quiet.feed(np.zeros(1600, dtype=np.float32))
    assert phone.narrow and not wide.narrow and not quiet.narrow
    # music or noise kept to the low band is not mistaken for a line until there is enough of it
    early = BandWatch()
    assert not early.feed(_telephone(speech)[:2048 * 8])


def test_the_gate_halves_its_thresholds_on_a_telephone_line_only():
    speech = _speech()[: 16000 * 4]
    probs = np.full(len(speech) // 512, 0.2, dtype=np.float32)  # a voice Silero barely hears
    heard = {}
    for name, audio in (("wide", speech), ("phone", _telephone(speech)), ("none", None)):
        g = Hysteresis(0.3, 0.15)
        out = [g(probs[i:i + 5], None if audio is None else audio[i * 512:(i + 5) * 512])
               for i in range(0, len(probs), 5)]
        heard[name] = (float(np.concatenate(out).mean()), g.narrow)
    assert heard["wide"] == (0.0, False) and heard["none"] == (0.0, False)
    share, narrow = heard["phone"]
    assert narrow and share > 0.4  # from the 16th loud piece (about 2 s) on
