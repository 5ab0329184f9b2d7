"""Logging with levels, one structured line per record (logfmt: ``key=value``):

* ERROR / WARNING — faults: a stage failed or was restarted, a device was lost, the cloud link cut;
* INFO — per-segment metrics (timings and sizes, never the words) and session milestones;
* DEBUG — adds the recognised and translated text (the only level that carries speech content);
* TRACE — adds per-block and per-step timestamps (audio arrival, recognition steps, word times).

Nothing above DEBUG may carry what was said: ``SessionLog`` keeps text out of its INFO lines and
the tests check it."""

from __future__ import annotations

import logging
import sys
import time

from app.core.errors import UserError
from app.pipeline.messages import CommittedWords, DubChunk, Metric, Segment, TentativeText, Translation
from app.pipeline.policy import PolicyTransition

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
LEVELS = {"trace": TRACE, "debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


def _quote(v) -> str:
    s = f"{v:.4g}" if isinstance(v, float) else str(v)
    if not s or any(c in s for c in ' "=\n'):
        s = '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return s


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [f"ts={t}", f"level={record.levelname}", f"logger={record.name}",
                 f"msg={_quote(record.getMessage())}"]
        for k, v in (getattr(record, "fields", None) or {}).items():
            parts.append(f"{k}={_quote(v)}")
        if record.exc_info and record.levelno <= logging.DEBUG:
            parts.append(f"trace={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


def level_of(name: str | None, verbose: bool = False) -> int:
    if name is None:
        return logging.INFO if verbose else logging.WARNING
    try:
        return LEVELS[name.lower()]
    except KeyError:
        raise UserError(f"--log-level must be one of {', '.join(LEVELS)}") from None


def setup_logging(level: int, stream=None) -> logging.Handler:
    """One handler on the root logger (replacing earlier ones), logfmt lines to ``stream``."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("numba", "urllib3", "websockets", "asyncio", "jieba", "matplotlib"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    return handler


class SessionLog:
    """Bus observer: one INFO line per committed segment and per first dub audio, timings only;
    text at DEBUG; recognition steps and word times at TRACE."""

    def __init__(self, pipe, logger: logging.Logger | None = None):
        self.pipe = pipe
        self.log = logger or logging.getLogger("relay.session")

    def _emit(self, _level: int, _msg: str, **fields) -> None:
        self.log.log(_level, _msg, extra={"fields": fields})

    def __call__(self, ev) -> None:
        lg = self.log
        if not lg.isEnabledFor(logging.INFO):
            return
        if isinstance(ev, Translation) and not ev.preview and ev.segment is not None:
            seg = ev.segment
            heard = self.pipe.arrival.played_at(seg.src_end)
            self._emit(logging.INFO, "segment", seq=ev.seq, src_start=round(seg.src_start, 2),
                       src_end=round(seg.src_end, 2), words=len(seg.words), reason=seg.reason,
                       target_chars=len(ev.target), mt_wait_ms=round((ev.started_at - ev.queued_at) * 1000),
                       mt_ms=round((ev.emitted_at - ev.started_at) * 1000),
                       e2e_ms=round(max(0.0, ev.emitted_at - heard) * 1000))
            if lg.isEnabledFor(logging.DEBUG):
                self._emit(logging.DEBUG, "segment text", seq=ev.seq, source=seg.text, target=ev.target)
        elif isinstance(ev, DubChunk) and ev.first_of_segment:
            self._emit(logging.INFO, "dub", seq=ev.seq, skipped=ev.skipped, speed=round(ev.speed, 2),
                       audio_s=round(len(ev.audio) / ev.sample_rate, 2),
                       start_at=round(ev.start_at, 3))
        elif isinstance(ev, PolicyTransition):
            self._emit(logging.INFO, "degradation", level=ev.level, rule=ev.rule, reason=ev.reason)
        elif not lg.isEnabledFor(TRACE):
            return
        elif isinstance(ev, Metric):
            self._emit(TRACE, "metric", name=ev.name, value=round(ev.value, 3), at=round(ev.at, 3),
                       **{f"l_{k}": v for k, v in ev.labels})
        elif isinstance(ev, CommittedWords):
            self._emit(TRACE, "committed", n=len(ev.words), at=round(ev.emitted_at, 3),
                       ends=",".join(f"{w.end:.2f}" for w in ev.words))
        elif isinstance(ev, TentativeText):
            self._emit(TRACE, "tentative", n=len(ev.words), at=round(ev.emitted_at, 3))
        elif isinstance(ev, Segment):
            self._emit(TRACE, "segment committed", seq=ev.seq, at=round(ev.emitted_at, 3))
