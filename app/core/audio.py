"""Audio constants every layer shares."""

SR = 16000  # the pipeline's sample rate: Whisper's, and what every source is resampled to
HOP = 160  # Whisper's feature hop: one log-mel frame per 10 ms
BLOCK_S = 0.02  # the capture block: what the live capture pump and the file feeder hand over
