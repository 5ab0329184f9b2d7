"""What a session writes when the user asks for it: subtitles (SRT, WebVTT) and the dub on the
source timeline. Nothing is written otherwise; each file is written atomically."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.audio.files import write_wav
from app.core.audio import BLOCK_S
from app.core.errors import UserError
from app.session.subtitles import to_srt, to_vtt, write_text


@dataclass
class Outputs:
    srt: str | None = None
    vtt: str | None = None
    dub_out: str | None = None

    @property
    def wants_dub_audio(self) -> bool:
        """Only a dub file needs the session to keep the dub's audio (else it piles up in memory)."""
        return bool(self.dub_out)

    def check(self, has_tts: bool) -> None:
        """Before anything runs: every output's folder exists, and a dub needs speech synthesis."""
        for val in (self.dub_out, self.srt, self.vtt):
            if val and not Path(val).resolve().parent.is_dir():
                raise UserError(f"{val}: the folder it would be written to does not exist")
        if self.dub_out and not has_tts:
            raise UserError("--dub-out needs speech synthesis, which is off for this run")

    def write(self, session, realtime: bool) -> None:
        """Write what was asked from what the session holds (also after a failure: what was
        already processed is kept)."""
        segments = session.record.segments
        if self.srt:
            write_text(self.srt, to_srt(segments))
        if self.vtt:
            write_text(self.vtt, to_vtt(segments))
        if self.dub_out:
            res = dub_timeline(session, realtime)
            write_wav(self.dub_out, *(res if res is not None else (np.zeros(22050, "float32"), 22050)))


def dub_timeline(session, realtime: bool):
    """The dub on the source timeline (or None when nothing was spoken)."""
    arrival_start = (session.first_audio_at or 0.0) - BLOCK_S
    return session.record.dub_timeline(arrival_start, realtime=realtime)
