"""Relay: live interpretation for meetings."""

import os

__version__ = "0.1.0"

# Privacy: never reach for a model hub at run time, and keep onnxruntime (Piper, Silero VAD)
# from writing its telemetry database under ~/.cache on every session.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
