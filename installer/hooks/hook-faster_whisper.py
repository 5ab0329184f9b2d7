# faster-whisper keeps the Silero VAD model in faster_whisper/assets/silero_vad_v6.onnx, which
# app/backends/silero_vad.py loads from there.
from PyInstaller.utils.hooks import collect_data_files

datas = collect_data_files("faster_whisper", includes=["assets/*.onnx"])
