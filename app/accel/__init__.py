"""Audio front-end kernels, each with Numba CUDA, Numba CPU and NumPy implementations.

Every public function takes ``backend="auto" | "cuda" | "cpu" | "numpy"`` (see ``dispatch``);
Numba is imported only when a Numba backend actually runs.
"""

from .dispatch import choose_backend
from .features import frame_features
from .logmel import IncrementalLogMel, log_mel_frames, log_mel_reference, mel_filters
from .mix import DuckState, mix_duck
from .quant import dequantize_int8, lowrank_basis, lowrank_project, lowrank_reconstruct, quantize_int8
from .resample import StreamingResampler, resample_oneshot

__all__ = [
    "choose_backend", "frame_features", "IncrementalLogMel", "log_mel_frames", "log_mel_reference",
    "mel_filters", "DuckState", "mix_duck", "dequantize_int8", "lowrank_basis", "lowrank_project",
    "lowrank_reconstruct", "quantize_int8", "StreamingResampler", "resample_oneshot",
]
