"""Piper TTS (ONNX) for the dub."""

from __future__ import annotations

import threading
from typing import Iterator

import numpy as np


class PiperTTS:
    def __init__(self, model_path: str, config_path: str, *, name: str, threads: int = 1):
        import onnxruntime
        from piper import PiperVoice

        self.name = name
        self.voice = PiperVoice.load(model_path, config_path=config_path)
        self.sample_rate = int(self.voice.config.sample_rate)
        self._lock = threading.Lock()
        sess = getattr(self.voice, "session", None)
        self._threads = threads
        if sess is not None and threads:
            opts = onnxruntime.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            self.voice.session = onnxruntime.InferenceSession(model_path, sess_options=opts,
                                                              providers=["CPUExecutionProvider"])

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[np.ndarray]:
        from piper import SynthesisConfig

        cfg = SynthesisConfig(length_scale=1.0 / max(0.5, speed))
        with self._lock:
            chunks = [c.audio_float_array.astype(np.float32) for c in self.voice.synthesize(text, syn_config=cfg)]
        yield from chunks
