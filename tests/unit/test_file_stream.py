"""A session reads its file block by block (app.audio.files.open_audio): the same samples as the
whole-file decode, the same one-line errors, and memory that does not grow with the file."""

import tracemalloc
import wave
from pathlib import Path

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
    sink, peak = _fed(open_audio(path))
    assert sink.n == 16000 * 60 * minutes
    assert peak < 20e6, f"feeding {minutes} min held {peak / 1e6:.0f} MB"


def _fed(stream_or_path) -> tuple[_Sink, int]:
    """``feed_array`` run over a stream (or over ``open_audio`` of a path, the opening included):
    the sink it fed and the peak of Python allocations on the way."""
    sink = _Sink()
    tracemalloc.start()
    try:
        stream = open_audio(stream_or_path) if isinstance(stream_or_path, Path) else stream_or_path
        assert not isinstance(stream, np.ndarray)
        assert feed_array(sink, stream, realtime=False) is False
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return sink, peak


def _write_av(path, x: np.ndarray, rate: int, codec: str, fmt: str, layout: str = "mono", block: int = 1024):
    """``x`` (channels × samples, float32) encoded with FFmpeg (PyAV) into ``path``."""
    import av

    with av.open(str(path), "w") as c:
        st = c.add_stream(codec, rate=rate, layout=layout)
        for i in range(0, x.shape[1], block):
            f = av.AudioFrame.from_ndarray(np.ascontiguousarray(x[:, i:i + block]), format=fmt, layout=layout)
            f.sample_rate = rate
            for pkt in st.encode(f):
                c.mux(pkt)
        for pkt in st.encode(None):
            c.mux(pkt)


def test_an_m4a_recording_streams_the_same_samples_as_its_whole_decode(tmp_path):
    """M4A (AAC), what meeting platforms record: libsndfile cannot read it, FFmpeg decodes it as
    the session goes, sample for sample as the whole-file decode does."""
    from app.audio.files import AvStream

    rate = 44100
    x = (np.random.default_rng(3).standard_normal((2, rate * 13 + 7)) * 0.1).astype(np.float32)
    path = tmp_path / "meeting.m4a"
    _write_av(path, x, rate, "aac", "fltp", "stereo", 1024)
    whole = load_audio(path)
    stream = open_audio(path)
    assert isinstance(stream, AvStream)
    assert abs(len(stream) - len(whole)) < SR_TOL  # the container's duration, before decoding
    blocks = list(stream.blocks(1600))
    assert all(len(b) == 1600 for b in blocks[:-1]) and 0 < len(blocks[-1]) <= 1600
    got = np.concatenate(blocks)
    assert len(got) == len(whole) == len(stream)  # once decoded, the samples it gave
    assert np.array_equal(got, whole)


SR_TOL = 16000 // 10  # AAC's priming and padding: under 0.1 s either way


def test_feeding_a_long_ffmpeg_only_file_holds_a_block_not_the_file(tmp_path):
    """A Matroska file (PCM inside; the codec does not matter, the container is one libsndfile
    cannot read): 20 minutes fed through the session's feeder. Decoded whole, as before, it held
    the file's 77 MB of samples twice over."""
    path = tmp_path / "long.mka"
    minutes = 20
    tone = (0.1 * np.sin(np.arange(16000 * 60) * 0.05) * 32767).astype(np.int16)
    import av

    with av.open(str(path), "w", format="matroska") as c:
        st = c.add_stream("pcm_s16le", rate=16000, layout="mono")
        for _ in range(minutes):
            for i in range(0, len(tone), 16000):
                f = av.AudioFrame.from_ndarray(tone[None, i:i + 16000], format="s16", layout="mono")
                f.sample_rate = 16000
                for pkt in st.encode(f):
                    c.mux(pkt)
        for pkt in st.encode(None):
            c.mux(pkt)
    assert abs(len(open_audio(path)) - 16000 * 60 * minutes) < 16000
    sink, peak = _fed(path)  # opening included: the old whole decode happened there
    assert sink.n == 16000 * 60 * minutes
    assert peak < 20e6, f"feeding {minutes} min held {peak / 1e6:.0f} MB"


def test_ffmpeg_only_files_keep_their_one_line_errors(tmp_path):
    import av

    video_only = tmp_path / "slides.mkv"  # a recording with a picture and no sound
    with av.open(str(video_only), "w", format="matroska") as c:
        st = c.add_stream("ffv1", rate=5)
        st.width, st.height, st.pix_fmt = 32, 32, "yuv420p"
        for i in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((32, 32, 3), i * 40, np.uint8), format="rgb24")
            for pkt in st.encode(frame):
                c.mux(pkt)
        for pkt in st.encode(None):
            c.mux(pkt)
    with pytest.raises(UserError, match="has no audio stream"):
        open_audio(video_only)
    good = tmp_path / "talk.m4a"
    _write_av(good, (np.random.default_rng(1).standard_normal((1, 16000 * 5)) * 0.1).astype(np.float32),
              16000, "aac", "fltp", "mono", 1024)
    cut = tmp_path / "cut.m4a"  # a download that stopped early: the index at the end is missing
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(UserError, match="not a readable audio file"):
        open_audio(cut)
