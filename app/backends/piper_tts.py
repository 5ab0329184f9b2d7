"""Piper TTS (ONNX) for the dub."""

from __future__ import annotations

import json
import threading
from typing import Iterator

import numpy as np
import onnxruntime
from piper import PiperVoice, SynthesisConfig
from piper.config import PiperConfig


class PiperTTS:
    def __init__(self, model_path: str, config_path: str, *, name: str, threads: int = 1):
        self.name = name
        # one ONNX session, made with our thread settings (PiperVoice.load would make a second
        # one with ONNX Runtime's defaults first: ~0.5 s and its memory, thrown away)
        opts = onnxruntime.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        with open(config_path, encoding="utf-8") as f:
            config = PiperConfig.from_dict(json.load(f))
        session = onnxruntime.InferenceSession(model_path, sess_options=opts, providers=["CPUExecutionProvider"])
        self.voice = PiperVoice(session=session, config=config)
        self.sample_rate = int(self.voice.config.sample_rate)
        self._lock = threading.Lock()
        self._threads = threads

    def synthesize(self, text: str, speed: float = 1.0) -> Iterator[np.ndarray]:
        cfg = SynthesisConfig(length_scale=1.0 / max(0.5, speed))
        with self._lock:
            chunks = [c.audio_float_array.astype(np.float32) for c in self.voice.synthesize(text, syn_config=cfg)]
        yield from chunks
