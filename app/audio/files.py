"""Reading audio files into 16 kHz mono float32, with one-line errors for bad input.

``load_audio`` decodes a whole file into one array (short clips, the warm-up, the self-test).
``open_audio`` is what a session uses: a file libsndfile reads (WAV, FLAC, Ogg, MP3, ...) is
checked in one pass and then read block by block while the session runs, so a three-hour recording
costs a block of memory, not 0.7 GB of samples. Other formats (M4A/AAC, a meeting platform's MP4 or
WebM recording, ...) go through FFmpeg (PyAV): their start is decoded to check them, and they are
then decoded block by block as well.
"""

from __future__ import annotations

import os
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from app.accel.dispatch import choose_backend
from app.accel.resample import StreamingResampler, resample_oneshot
from app.core.audio import SR
from app.core.errors import UserError

MAX_FILE_SECONDS = 6 * 3600  # a longer file is refused: split it (the session's record grows with it)
READ_BLOCK = 1 << 18  # frames per read when a file is streamed (5.5 s at 48 kHz)


def _display(path) -> str:
    return os.fsdecode(path).encode("utf-8", "replace").decode("utf-8")


def _check_path(p: Path, name: str) -> None:
    if not p.exists():
        raise UserError(f"{name}: no such file")
    if p.is_dir():
        raise UserError(f"{name}: is a folder, not an audio file")
    if not os.access(p, os.R_OK):
        raise UserError(f"{name}: permission denied")
    if p.stat().st_size == 0:
        raise UserError(f"{name}: the file is empty")


def load_audio(path: str | os.PathLike, accel: str = "numpy") -> np.ndarray:
    p = Path(path)
    name = _display(p)
    _check_path(p, name)
    audio, sr = _read_soundfile(p)
    if audio is None:
        audio, sr = _read_av(p, name)
    if audio.size == 0:
        raise UserError(f"{name}: contains no audio samples")
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    audio = np.ascontiguousarray(audio, dtype=np.float32)
    if not np.isfinite(audio).all():
        raise UserError(f"{name}: contains invalid (NaN/Inf) samples")
    if len(audio) / sr > MAX_FILE_SECONDS:
        raise UserError(f"{name}: longer than {MAX_FILE_SECONDS // 3600} hours; split it first")
    if sr != SR:
        audio = resample(audio, sr, SR, accel)
    return audio


ACCEL_RATES = (48000, 44100, 8000)  # our polyphase kernel's rates; soxr does the rest


def _kernel_backend(sr_in: int, sr_out: int, accel: str) -> str | None:
    """Our polyphase kernel's backend for this conversion, or None for soxr."""
    if sr_out != SR or sr_in not in ACCEL_RATES:
        return None
    try:
        backend = choose_backend(accel)
    except ValueError as e:
        raise UserError(str(e)) from None
    return None if backend == "numpy" else backend  # the NumPy reference is for tests: ~70x slower than soxr


def resample(audio: np.ndarray, sr_in: int, sr_out: int, accel: str = "numpy") -> np.ndarray:
    backend = _kernel_backend(sr_in, sr_out, accel)
    if backend is not None:
        return resample_oneshot(audio, sr_in, sr_out, backend=backend).astype(np.float32)
    return soxr.resample(audio, sr_in, sr_out, quality="HQ").astype(np.float32)


class FileStream:
    """A file libsndfile reads, as 16 kHz mono float32 blocks read while they are used. Made by
    ``open_audio`` after a pass over the whole file found it readable and its samples finite."""

    def __init__(self, path: Path, name: str, rate: int, frames: int, accel: str):
        self.path, self.name, self.rate, self.frames, self.accel = path, name, rate, frames, accel
        self.n_samples = frames if rate == SR else int(round(frames * SR / rate))

    def __len__(self) -> int:
        return self.n_samples

    def _resampler(self):
        """``f(block, last) -> 16 kHz samples``: our streaming kernel for the rates it has, soxr's
        stream (the same HQ filter ``load_audio`` uses) for the others."""
        if self.rate == SR:
            return lambda x, last: x
        backend = _kernel_backend(self.rate, SR, self.accel)
        if backend is not None:
            r = StreamingResampler(self.rate, SR, backend)
            return lambda x, last: np.concatenate([r.process(x), r.flush()]) if last else r.process(x)
        stream = soxr.ResampleStream(self.rate, SR, 1, dtype="float32", quality="HQ")
        return lambda x, last: stream.resample_chunk(x, last=last)

    def blocks(self, size: int) -> Iterator[np.ndarray]:
        """16 kHz blocks of exactly ``size`` samples (the last one shorter)."""
        return exact_blocks(self._pieces(), size)

    def _pieces(self) -> Iterator[np.ndarray]:
        resample = self._resampler()
        try:
            with sf.SoundFile(str(self.path)) as f:
                while True:
                    data = f.read(READ_BLOCK, dtype="float32", always_2d=True)
                    last = len(data) < READ_BLOCK
                    x = np.ascontiguousarray(data.mean(axis=1) if data.shape[1] > 1 else data[:, 0])
                    yield resample(x, last).astype(np.float32, copy=False)
                    if last:
                        break
        except (RuntimeError, sf.LibsndfileError) as e:  # changed on disk since it was checked
            raise UserError(f"{self.name}: could not be read to the end ({str(e).splitlines()[0]})") from None


def exact_blocks(pieces: Iterator[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """``pieces`` of any length cut into blocks of exactly ``size`` samples (the last one shorter)."""
    pending: list[np.ndarray] = []
    have = 0
    for x in pieces:
        if not len(x):
            continue
        pending.append(x)
        have += len(x)
        while have >= size:
            joined = np.concatenate(pending) if len(pending) > 1 else pending[0]
            yield joined[:size]
            rest = joined[size:]
            pending, have = ([rest] if len(rest) else []), len(rest)
    if have:
        yield np.concatenate(pending)


class AvStream:
    """A file FFmpeg decodes (M4A, MP4, WebM, ...), as 16 kHz mono float32 blocks decoded while
    they are used. Its length is the container's duration until the decode has reached the end,
    then the samples it gave. A decode error or a bad sample past the checked start is a one-line
    ``UserError`` when it is reached (the session keeps what it processed before it)."""

    def __init__(self, path: Path, name: str, duration_s: float):
        self.path, self.name = path, name
        self.n_samples = int(round(duration_s * SR))

    def __len__(self) -> int:
        return self.n_samples

    def blocks(self, size: int) -> Iterator[np.ndarray]:
        """16 kHz blocks of exactly ``size`` samples (the last one shorter)."""
        total = 0
        for block in exact_blocks(self._checked(), size):
            total += len(block)
            yield block
        self.n_samples = total

    def _checked(self) -> Iterator[np.ndarray]:
        for x in _av_decoded(self.path, self.name):
            if not np.isfinite(x).all():
                raise UserError(f"{self.name}: contains invalid (NaN/Inf) samples")
            yield x


def _av_decoded(p: Path, name: str, probe: bool = False) -> Iterator[np.ndarray]:
    """The file's first audio stream decoded by FFmpeg, as 16 kHz mono float32 pieces; one-line
    ``UserError`` for what cannot be read. ``probe``: a first piece then stop (a check)."""
    try:
        import av  # FFmpeg's libraries load only for files libsndfile cannot read
    except ImportError:  # pragma: no cover - av comes with faster-whisper
        raise UserError(f"{name}: unsupported audio format") from None
    started = False
    try:
        with av.open(str(p), metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise UserError(f"{name}: has no audio stream (is it an audio file?)")
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="flt", layout="mono", rate=SR)
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    x = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                    if len(x):
                        started = True
                        yield x
                        if probe:
                            return
            for out in resampler.resample(None):
                x = out.to_ndarray().reshape(-1).astype(np.float32, copy=False)
                if len(x):
                    started = True
                    yield x
    except (UserError, GeneratorExit):
        raise
    except Exception as e:  # av raises many error types for corrupt input
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if started:
            raise UserError(f"{name}: could not be decoded to the end ({msg})") from None
        raise UserError(f"{name}: not a readable audio file ({msg})") from None


def _av_duration(p: Path) -> float | None:
    """The container's (or its audio stream's) duration in seconds, when it states one."""
    import av  # FFmpeg's libraries, as in _av_decoded: only for files libsndfile cannot read

    try:
        with av.open(str(p), metadata_errors="ignore") as c:
            if c.streams.audio:
                st = c.streams.audio[0]
                if st.duration and st.time_base:
                    return float(st.duration * st.time_base)
            if c.duration:
                return c.duration / av.time_base
    except Exception:
        return None
    return None


def open_audio(path: str | os.PathLike, accel: str = "numpy") -> np.ndarray | FileStream | AvStream:
    """The file checked (one-line errors as ``load_audio`` gives them) and ready to stream.
    A format only FFmpeg reads is checked by decoding its start; one whose container states no
    duration comes back decoded whole."""
    p = Path(path)
    name = _display(p)
    _check_path(p, name)
    try:
        with sf.SoundFile(str(p)) as f:
            rate, frames = f.samplerate, f.frames
            if frames > MAX_FILE_SECONDS * rate:
                raise UserError(f"{name}: longer than {MAX_FILE_SECONDS // 3600} hours; split it first")
            n = 0
            while True:  # the checking pass: a block of memory, whatever the length
                data = f.read(READ_BLOCK, dtype="float32", always_2d=True)
                if not np.isfinite(data).all():
                    raise UserError(f"{name}: contains invalid (NaN/Inf) samples")
                n += len(data)
                if len(data) < READ_BLOCK:
                    break
    except UserError:
        raise
    except (RuntimeError, sf.LibsndfileError, TypeError, ValueError):
        return _open_av(p, name, accel)  # not a libsndfile format (or cut short)
    if n == 0:
        raise UserError(f"{name}: contains no audio samples")
    return FileStream(p, name, rate, n, accel)


def _open_av(p: Path, name: str, accel: str) -> np.ndarray | AvStream:
    first = next(_av_decoded(p, name, probe=True), None)
    if first is None:
        raise UserError(f"{name}: contains no audio samples")
    if not np.isfinite(first).all():
        raise UserError(f"{name}: contains invalid (NaN/Inf) samples")
    duration = _av_duration(p)
    if not duration:
        return load_audio(p, accel)  # no stated length: decoded whole
    if duration > MAX_FILE_SECONDS:
        raise UserError(f"{name}: longer than {MAX_FILE_SECONDS // 3600} hours; split it first")
    return AvStream(p, name, duration)


def _read_soundfile(p: Path):
    try:
        with sf.SoundFile(str(p)) as f:
            if f.frames > MAX_FILE_SECONDS * f.samplerate:
                raise UserError(f"{_display(p)}: longer than {MAX_FILE_SECONDS // 3600} hours; split it first")
            data = f.read(dtype="float32", always_2d=True)
            return data, f.samplerate
    except UserError:
        raise
    except (RuntimeError, sf.LibsndfileError, TypeError, ValueError):
        return None, None


def _read_av(p: Path, name: str):
    parts = list(_av_decoded(p, name))
    if not parts:
        raise UserError(f"{name}: contains no audio samples")
    return np.concatenate(parts).astype(np.float32), SR


def write_wav(path: str | os.PathLike, audio: np.ndarray, sr: int) -> None:
    """16-bit PCM WAV, written to a temporary name and renamed so a failure leaves nothing half-written."""
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2")
    try:
        with wave.open(str(tmp), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sr)
            w.writeframes(pcm.tobytes())
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{_display(p)}: cannot write ({e.strerror})") from None
