"""Chinese word boundaries (jieba), so segments never end inside a word."""

from __future__ import annotations

import logging
import os
import threading


class JiebaBoundaries:
    def __init__(self, cache_dir: str | None = None):
        import jieba  # Chinese sessions only; this module is imported by every session

        jieba.setLogLevel(logging.WARNING)
        self._tok = jieba.Tokenizer()
        if cache_dir:  # jieba caches its prefix dictionary (not user data) on first use
            os.makedirs(cache_dir, exist_ok=True)
            self._tok.tmp_dir = cache_dir
        self._lock = threading.Lock()
        with self._lock:
            self._tok.initialize()

    def __call__(self, text: str) -> list[int]:
        """Character offsets at which a word ends (the last is len(text))."""
        out, pos = [], 0
        with self._lock:
            for w in self._tok.cut(text, HMM=True):
                pos += len(w)
                out.append(pos)
        return out
