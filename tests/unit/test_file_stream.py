"""A session reads its file block by block (app.audio.files.open_audio): the same samples as the
whole-file decode, the same one-line errors, and memory that does not grow with the file."""

import tracemalloc
import wave

import numpy as np
import pytest
import soundfile as sf

from app.audio.files import FileStream, load_audio, open_audio
from app.core.errors import UserError
from app.session.runner import feed_array


@pytest.mark.parametrize("rate, channels", [(16000, 1), (44100, 2), (8000, 1), (22050, 1), (48000, 1)])
@pytest.mark.parametrize("accel", ["numpy", "cpu"])
def test_streamed_blocks_are_the_whole_file_decode(tmp_path, rate, channels, accel):
    x = (np.random.default_rng(rate).standard_normal((rate * 13 + 7, channels)) * 0.1).astype(np.float32)
    path = tmp_path / "a.wav"
    sf.write(path, x, rate)
    whole = load_audio(path, accel)
    stream = open_audio(path, accel)
    assert isinstance(stream, FileStream)
    blocks = list(stream.blocks(1600))
    assert all(len(b) == 1600 for b in blocks[:-1]) and 0 < len(blocks[-1]) <= 1600
    got = np.concatenate(blocks)
    assert abs(len(got) - len(whole)) <= 1 and abs(len(stream) - len(whole)) <= 1
    n = min(len(got), len(whole))
    assert np.abs(got[:n] - whole[:n]).max() < 1e-4


def test_checking_pass_finds_a_bad_sample_deep_in_the_file(tmp_path):
    x = np.zeros(16000 * 60, np.float32)
    x[16000 * 50] = np.nan
    path = tmp_path / "nan.wav"
    sf.write(path, x, 16000, subtype="FLOAT")
    with pytest.raises(UserError, match="NaN/Inf"):
        open_audio(path)


def test_header_only_and_unreadable_files_keep_their_errors(tmp_path):
    empty = tmp_path / "empty.wav"
    with wave.open(str(empty), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    with pytest.raises(UserError, match="no audio samples"):
        open_audio(empty)
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF not really a wave file at all" * 10)
    with pytest.raises(UserError, match="not a readable audio file|unsupported"):
        open_audio(junk)


class _Sink:
    """What feed_array pushes into: counts samples, keeps nothing."""

    def __init__(self):
        self.n = 0
        from app.pipeline.queues import MonotonicClock

        self.clock = MonotonicClock()

    def push_audio(self, x, wait_if_full=True):
        self.n += len(x)

    def failed(self):
        return False


def test_feeding_a_long_file_holds_a_block_not_the_file(tmp_path):
    path = tmp_path / "long.wav"
    minutes = 20  # 77 MB of float32 samples if decoded whole at 16 kHz
    with sf.SoundFile(str(path), "w", 16000, 1, subtype="PCM_16") as f:
        tone = (0.1 * np.sin(np.arange(16000 * 60) * 0.05)).astype(np.float32)
        for _ in range(minutes):
            f.write(tone)
    stream = open_audio(path)
    sink = _Sink()
    tracemalloc.start()
    try:
        assert feed_array(sink, stream, realtime=False) is False
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sink.n == 16000 * 60 * minutes
    assert peak < 20e6, f"feeding {minutes} min held {peak / 1e6:.0f} MB"
