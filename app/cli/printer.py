"""What `relay run` prints: committed subtitles (text mode) or every event (JSON lines), device
events, and the closing summary."""

from __future__ import annotations

import json
import sys

from app.audio.live import DeviceEvent
from app.pipeline.messages import (CommittedWords, DubChunk, DubPlayed, Metric, Segment, TentativeText,
                                   Translation)
from app.pipeline.policy import PolicyTransition
from app.pipeline.speculation import SpeculationEvent


class Printer:
    """Prints committed subtitles (text mode) or every event (JSON lines)."""

    def __init__(self, as_json: bool, out=sys.stdout):
        self.json = as_json
        self.out = out
        self._src: dict[int, object] = {}

    def _emit(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()

    def __call__(self, ev) -> None:
        if isinstance(ev, PolicyTransition):
            if self.json:
                self._emit({"type": "degradation", **ev.as_dict()})
            else:  # a log line, not a subtitle
                print(f"relay: degradation level {ev.level} ({ev.rule} {ev.from_level}→{ev.to_level}): "
                      f"{ev.reason}; {'; '.join(ev.effects) or 'no change'}", file=sys.stderr, flush=True)
            return
        if isinstance(ev, SpeculationEvent):
            if self.json:
                self._emit({"type": "speculation", "kind": ev.kind, "stream": ev.stream, "reason": ev.reason,
                            "at": ev.at})
            else:
                print(f"relay: speculation {ev.kind} ({ev.stream}): {ev.reason}", file=sys.stderr, flush=True)
            return
        if not self.json:
            if isinstance(ev, Translation) and not ev.preview and ev.segment is not None:
                s = ev.segment
                # a piece whose meaning the sentence's earlier translation already carried adds no text
                target = ev.target or "(already covered above)"
                self.out.write(f"[{_clock(s.src_start)} → {_clock(s.src_end)}] {s.text}\n    {target}\n")
                self.out.flush()
            return
        if isinstance(ev, TentativeText):
            self._emit({"type": "partial", "text": ev.text, "at": round(ev.emitted_at, 3)})
        elif isinstance(ev, CommittedWords):
            self._emit({"type": "committed", "text": "".join(w.text for w in ev.words).strip(),
                        "words": [[w.text.strip(), round(w.start, 2), round(w.end, 2)] for w in ev.words],
                        "at": round(ev.emitted_at, 3), "pause_after": ev.pause_after})
        elif isinstance(ev, Segment):
            self._emit({"type": "segment", "seq": ev.seq, "source": ev.text, "src_start": round(ev.src_start, 3),
                        "src_end": round(ev.src_end, 3), "reason": ev.reason, "sentence_end": ev.sentence_end,
                        "at": round(ev.emitted_at, 3)})
        elif isinstance(ev, Translation):
            self._emit({"type": "preview" if ev.preview else "translation", "seq": ev.seq, "source": ev.source,
                        "target": ev.target, "src_start": round(ev.src_start, 3), "src_end": round(ev.src_end, 3),
                        "at": round(ev.emitted_at, 3)})
        elif isinstance(ev, DubChunk):
            self._emit({"type": "dub_chunk", "seq": ev.seq, "text": ev.text, "skipped": ev.skipped,
                        "duration_s": round(len(ev.audio) / ev.sample_rate, 3), "ready_at": round(ev.ready_at, 3),
                        "start_at": round(ev.start_at, 3), "speed": round(ev.speed, 2)})
        elif isinstance(ev, Metric):
            self._emit({"type": "metric", "name": ev.name, "value": ev.value, "at": round(ev.at, 3),
                        **dict(ev.labels)})


def _clock(t: float) -> str:
    m, s = divmod(max(0.0, t), 60)
    return f"{int(m):02d}:{s:05.2f}"


def print_summary(s: dict) -> None:
    lat = s["latency_ms"]

    def row(name):
        d = lat[name]
        if not d["n"]:
            return f"  {name:<16} -"
        return f"  {name:<16} p50 {d['p50']:>7.0f}  p95 {d['p95']:>7.0f}  p99 {d['p99']:>7.0f} ms  (n={d['n']})"

    print(f"\nsession: {s['pair']} {s['mode']}, {s['audio_s']:.1f} s of audio in {s['wall_s']:.1f} s, "
          f"{len(s['segments'])} segments (mean {s['mean_segment_s']:.1f} s), rtf {s['rtf']}, "
          f"peak RSS {s['peak_rss_mb']:.0f} MB", file=sys.stderr)
    for name in ("asr_first_token", "mt_queue_wait", "tts_first_audio", "e2e_subtitle", "e2e_dub"):
        print(row(name), file=sys.stderr)
    se = s["simuleval"]
    if se["AL_ms"] is not None:
        print(f"  AL {se['AL_ms']:.0f} ms, LAAL {se['LAAL_ms']:.0f} ms over {se['sentences']} sentences", file=sys.stderr)
    sp = s.get("speculation") or {}
    if sp.get("drafts"):
        print(f"  speculation ({sp['mode']}): {sp['drafts']} drafts, {sp['accepted_tokens']} tokens accepted, "
              f"{sp['rejected_tokens']} rejected, {sp['full_accepts']} decodes skipped, {sp['fallbacks']} fallbacks",
              file=sys.stderr)
    if s.get("coverage") is not None:
        print(f"  coverage {s['coverage']:.1%} of {s['voiced_s']:.0f} s of voiced audio; "
              f"{s['lost_speech_s']:.1f} s gave no words", file=sys.stderr)
    for w in s.get("warnings") or ():
        print(f"relay: warning: {w}", file=sys.stderr)
    dg = s.get("degradation") or {}
    if dg.get("policy") == "on":
        levels = ", ".join(f"level {k} {v:.1f} s" for k, v in dg["seconds_at_level"].items())
        print(f"  degradation: {len(dg['transitions'])} transitions; {levels}", file=sys.stderr)


class DevicePrinter:
    """Device events of a live session: JSON lines on stdout with --json, else lines on stderr."""

    def __init__(self, as_json: bool):
        self.json = as_json

    def __call__(self, ev) -> None:
        if not self.json:
            if isinstance(ev, DeviceEvent):
                print(f"relay: {ev.message}", file=sys.stderr, flush=True)
            return
        if isinstance(ev, DeviceEvent):
            obj = {"type": ev.kind, "message": ev.message, "at": round(ev.at, 3)}
        elif isinstance(ev, DubPlayed):
            obj = {"type": "dub_played", "seq": ev.seq, "first_of_segment": ev.first_of_segment,
                   "scheduled_at": round(ev.scheduled_at, 3), "played_at": round(ev.played_at, 3)}
        else:
            return
        print(json.dumps(obj), flush=True)


def print_result(summary: dict, as_json: bool) -> None:
    """The closing summary: one JSON object on stdout, or a table on stderr."""
    if as_json:
        print(json.dumps({"type": "summary", **summary}, ensure_ascii=False), flush=True)
        return
    print_summary(summary)
    d = summary.get("devices")
    if d:
        print(f"  capture {d['capture']['device']}: {d['capture']['overflows']} overflows, "
              f"lost {d['capture']['lost']}×" + (f"; dub {d['playback']['device']}: "
                                                 f"{d['playback']['underflows']} underflows"
                                                 if "playback" in d else ""), file=sys.stderr)
