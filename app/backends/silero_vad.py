"""Silero VAD (the ONNX model shipped inside faster-whisper), run as a stream with carried state."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime


class SileroVAD:
    frame_samples = 512  # 32 ms at 16 kHz
    _context = 64

    def __init__(self, path: str | None = None):
        if path is None:
            from faster_whisper.utils import get_assets_path  # loads CTranslate2: only for the bundled model

            path = os.path.join(get_assets_path(), "silero_vad_v6.onnx")
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"], sess_options=opts)
        self.reset()

    def reset(self) -> None:
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._ctx = np.zeros(self._context, dtype=np.float32)

    def process(self, audio: np.ndarray) -> np.ndarray:
        """Speech probability for each whole 512-sample frame of ``audio`` (a multiple of 512)."""
        n = len(audio) // self.frame_samples
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        frames = np.asarray(audio[: n * self.frame_samples], dtype=np.float32).reshape(n, self.frame_samples)
        ctx = np.empty((n, self._context), dtype=np.float32)
        ctx[0] = self._ctx
        ctx[1:] = frames[:-1, -self._context :]
        batch = np.concatenate([ctx, frames], axis=1)
        # The model's recurrent state runs across the batch in order (it is a sequence model
        # batched over frames in faster-whisper's own use), so one call covers the block.
        out, self._h, self._c = self._session.run(None, {"input": batch, "h": self._h, "c": self._c})
        self._ctx = frames[-1, -self._context :].copy()
        return np.asarray(out, dtype=np.float32).reshape(-1)
