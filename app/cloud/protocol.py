"""Relay cloud protocol, version 1 (the full description is docs/PROTOCOL.md).

One WebSocket per session, subprotocol ``relay.v1``, access token in the upgrade request's
``Authorization: Bearer`` header. Text frames carry JSON control messages and events; binary
frames carry audio (client → server) and dub audio (server → client). Everything here is pure:
encode and decode, with every limit checked, so the server and the client agree by construction
and the fuzz tests can drive the decoders directly. Optional features (``FEATURES``: the second
pass's ``final`` events, the ``profanity`` setting) are negotiated in the hello and welcome within
version 1.
"""

from __future__ import annotations

import json
import math
import re
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from app.core.audio import SR
from app.core.profanity import DEFAULT_MODE as PROFANITY_DEFAULT
from app.core.profanity import MODES as PROFANITY_MODES
from app.pipeline.messages import CommittedWords, FinalSentence, Metric, Segment, TentativeText, Translation
from app.pipeline.protocols import Word

VERSION = 1
SUBPROTOCOL = "relay.v1"
HEARTBEAT_S = 0.1

AUDIO_MAGIC = b"RLA1"
DUB_MAGIC = b"RLD1"
FLAG_ZLIB = 0x01
_AUDIO_HDR = struct.Struct("<4sBxIQ")  # magic, flags, pad, frame seq, first sample index
_DUB_HDR = struct.Struct("<4sIIQI")  # magic, event n, frame seq, sample, JSON header length

MAX_FRAME_SAMPLES = SR  # at most one second of audio per frame
MAX_AUDIO_PAYLOAD = 2 * MAX_FRAME_SAMPLES  # PCM16 bytes once decompressed
MAX_TEXT_BYTES = 4096  # a client control message
MAX_MESSAGE_BYTES = 1 << 20  # the WebSocket layer closes (1009) above this
AUDIO_BURST_S = 3.0  # how far real-time audio may run ahead of the wall clock (catching up after a stall)
FAST_AHEAD_S = 30.0  # fast mode: how far audio may run ahead of what has been answered
TEXT_RATE_PER_S = 50.0  # client control messages (heartbeats are 10 a second)
MAX_START_SAMPLE = 1 << 48  # ~557 years of audio: far past any session, far inside u64
PAIR_RE = re.compile(r"[a-z]{2,3}-[a-z]{2,3}")

CODECS = ("pcm16", "pcm16-zlib")
CLIENT_TYPES = ("hello", "hb", "end")
# Optional features, negotiated within version 1: the client lists those it wants in the hello
# ("features"), the server answers in the welcome with those it grants (absent: none). A server
# sends an event kind that belongs to a feature only to a client it granted that feature to, so a
# client that does not know the feature never sees its events; a server that does not know it
# ignores the hello field and does not echo it, so the client knows it will not come.
#   "final": run the second pass and send its ``final`` events; the dub is then made from finals
#            (a dub frame's ``seq`` is a final's ``id``), without it from the pieces (``seq``).
#   "profanity": apply the hello's ``profanity`` setting (masked | removed | raw, default masked)
#            to every event's text and to the dub; without it the text goes out as recognised and
#            translated (raw), and a client that asked filters what it shows itself.
FEATURES = ("final", "profanity")
MAX_FEATURES = 16
EVENT_KINDS = ("partial", "committed", "segment", "translation", "preview", "metric", "final")


class ProtocolError(ValueError):
    """A malformed or out-of-limits frame; ``code`` goes into the error frame."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class AudioFrame:
    seq: int
    first_sample: int
    samples: np.ndarray  # float32 in [-1, 1]

    @property
    def end_sample(self) -> int:
        return self.first_sample + len(self.samples)


def encode_audio(seq: int, first_sample: int, samples: np.ndarray, compress: bool = False) -> bytes:
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    flags = 0
    if compress:
        pcm = zlib.compress(pcm, 1)
        flags |= FLAG_ZLIB
    return _AUDIO_HDR.pack(AUDIO_MAGIC, flags, seq, first_sample) + pcm


def decode_audio(data: bytes) -> AudioFrame:
    if len(data) < _AUDIO_HDR.size:
        raise ProtocolError("malformed", f"audio frame of {len(data)} bytes is shorter than its header")
    magic, flags, seq, first = _AUDIO_HDR.unpack_from(data)
    if magic != AUDIO_MAGIC:
        raise ProtocolError("malformed", "binary frame is not a v1 audio frame")
    if flags & ~FLAG_ZLIB:
        raise ProtocolError("malformed", f"unknown audio flags {flags:#x}")
    payload = data[_AUDIO_HDR.size:]
    if flags & FLAG_ZLIB:
        d = zlib.decompressobj()
        try:
            payload = d.decompress(payload, MAX_AUDIO_PAYLOAD + 1)
        except zlib.error:
            raise ProtocolError("malformed", "audio payload is not valid zlib") from None
        if len(payload) > MAX_AUDIO_PAYLOAD or d.unconsumed_tail:
            raise ProtocolError("too_large", f"audio frame over {MAX_FRAME_SAMPLES} samples")
    if len(payload) > MAX_AUDIO_PAYLOAD:
        raise ProtocolError("too_large", f"audio frame over {MAX_FRAME_SAMPLES} samples")
    if len(payload) % 2:
        raise ProtocolError("malformed", "PCM16 payload has an odd number of bytes")
    if not payload:
        raise ProtocolError("malformed", "empty audio frame")
    samples = np.frombuffer(payload, dtype="<i2").astype(np.float32) / 32768.0
    return AudioFrame(seq, first, samples)


def encode_json(obj: dict) -> str:
    """Strict JSON: NaN and Infinity are not JSON, so they raise ValueError instead of travelling."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):  # 1e999 parses to inf
        raise ValueError("a number out of range")
    return x


def decode_client_text(text: str) -> dict:
    """A client control message: a JSON object of a known type, within the size limit, with
    finite numbers only (NaN, Infinity and overflowing floats are refused)."""
    if len(text) > MAX_TEXT_BYTES:
        raise ProtocolError("too_large", f"control message over {MAX_TEXT_BYTES} bytes")
    try:
        obj = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, RecursionError):
        raise ProtocolError("malformed", "control message is not JSON (or holds a non-finite number)") from None
    if not isinstance(obj, dict) or obj.get("type") not in CLIENT_TYPES:
        raise ProtocolError("malformed", "control message needs a known 'type'")
    t = obj.get("t", 0)
    if obj["type"] == "hb" and (not isinstance(t, (int, float)) or isinstance(t, bool) or abs(t) > 1e12):
        raise ProtocolError("malformed", "heartbeat 't' must be a finite number")
    return obj


@dataclass(frozen=True)
class Hello:
    pair: str
    codec: str
    start_sample: int
    options: dict
    features: tuple[str, ...] = ()  # the known features the client asked for (unknown ones are ignored)
    profanity: str = PROFANITY_DEFAULT  # applied with the feature "profanity" (else raw)

    @property
    def profanity_applied(self) -> str:
        """What the server does with profanity for this client: its setting when it asked for
        the feature, else the text as recognised (a client that predates the setting)."""
        return self.profanity if "profanity" in self.features else "raw"


_NUM = (int, float, type(None))
_OPTION_TYPES = {"no_tts": bool, "beam": (int, type(None)), "asr_step": _NUM, "commit_lookahead": _NUM,
                 "first_commit_lookahead": _NUM, "asr_context": _NUM, "confident_commit": _NUM,
                 "confident_lookahead": _NUM, "preview": str, "eager": (int, type(None)), "speculative": str,
                 "policy": str, "realtime": bool}
_OPTION_CHOICES = {"preview": ("auto", "on", "off"), "speculative": ("auto", "on", "off"), "policy": ("on", "off")}
_OPTION_MAX = 1_000_000  # no option means anything past this; the server's own bounds are tighter


def parse_hello(obj: dict) -> Hello:
    """The hello's shape: a known version, pair, codec and start, options of the right types and
    within their choices (``bad_options``). Ranges are the server's (app/cloud/limits.py)."""
    if obj.get("type") != "hello":
        raise ProtocolError("malformed", "the first message must be 'hello'")
    if obj.get("v") != VERSION:
        raise ProtocolError("version", f"protocol version {obj.get('v')!r} is not supported (server speaks {VERSION})")
    pair = obj.get("pair")
    if not isinstance(pair, str) or not PAIR_RE.fullmatch(pair):
        raise ProtocolError("malformed", "hello needs a 'pair' such as zh-en")
    codec = obj.get("codec", "pcm16")
    if codec not in CODECS:
        raise ProtocolError("malformed", f"unknown codec {str(codec)[:20]!r}")
    start = obj.get("start_sample", 0)
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start < MAX_START_SAMPLE:
        raise ProtocolError("malformed", f"'start_sample' must be an integer from 0 to {MAX_START_SAMPLE - 1}")
    opts = obj.get("options", {})
    if not isinstance(opts, dict):
        raise ProtocolError("malformed", "'options' must be an object")
    clean = {}
    for k, v in opts.items():
        t = _OPTION_TYPES.get(k)
        if t is None or not isinstance(v, t) or (isinstance(v, bool) and t is not bool):
            raise ProtocolError("malformed", f"option {str(k)[:30]!r} is unknown or has the wrong type")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (math.isfinite(v) and abs(v) <= _OPTION_MAX):
            raise ProtocolError("bad_options", f"option {k!r} is out of range")
        if k in _OPTION_CHOICES and v not in _OPTION_CHOICES[k]:
            raise ProtocolError("bad_options", f"option {k!r} must be one of {', '.join(_OPTION_CHOICES[k])}")
        clean[k] = v
    feats = obj.get("features", [])
    if (not isinstance(feats, list) or len(feats) > MAX_FEATURES
            or not all(isinstance(f, str) and len(f) <= 32 for f in feats)):
        raise ProtocolError("malformed", f"'features' must be a list of at most {MAX_FEATURES} short strings")
    profanity = obj.get("profanity", PROFANITY_DEFAULT)
    if not isinstance(profanity, str):
        raise ProtocolError("malformed", "'profanity' must be a string")
    if profanity not in PROFANITY_MODES:
        raise ProtocolError("bad_options", f"'profanity' must be one of {', '.join(PROFANITY_MODES)}, "
                                           f"not {profanity[:20]!r}")
    return Hello(pair, codec, start, clean, tuple(f for f in FEATURES if f in feats), profanity)


def granted_features(welcome: dict) -> tuple[str, ...]:
    """The features a server's welcome grants; a server that predates features grants none."""
    feats = welcome.get("features", [])
    return tuple(f for f in FEATURES if isinstance(feats, list) and f in feats)


def dub_body(header: dict, audio: np.ndarray) -> tuple[int, bytes]:
    """A dub frame without its number: (JSON header length, header + PCM). Encoded where the
    audio is produced; ``number_dub`` only prepends the binary header."""
    h = encode_json(header).encode()
    pcm = (np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
    return len(h), h + pcm


def number_dub(n: int, stamp: tuple[int, int], body: tuple[int, bytes]) -> bytes:
    return _DUB_HDR.pack(DUB_MAGIC, n, stamp[0], stamp[1], body[0]) + body[1]


def encode_dub(n: int, stamp: tuple[int, int], header: dict, audio: np.ndarray) -> bytes:
    return number_dub(n, stamp, dub_body(header, audio))


def number_event(n: int, ts: tuple[int, int], body: str) -> str:
    """An ``ev`` message from its event's JSON (``encode_json`` of ``event_to_wire``): the same
    text as ``encode_json({"type": "ev", "n": n, "ts": ts, "ev": ...})``, numbered without
    re-encoding (numbers are given on the event loop, in order, and must never fail there)."""
    return f'{{"type":"ev","n":{int(n)},"ts":[{int(ts[0])},{int(ts[1])}],"ev":{body}}}'


def decode_dub(data: bytes) -> tuple[int, tuple[int, int], dict, np.ndarray]:
    if len(data) < _DUB_HDR.size:
        raise ProtocolError("malformed", "short dub frame")
    magic, n, seq, sample, hlen = _DUB_HDR.unpack_from(data)
    if magic != DUB_MAGIC or _DUB_HDR.size + hlen > len(data):
        raise ProtocolError("malformed", "not a v1 dub frame")
    header = json.loads(data[_DUB_HDR.size:_DUB_HDR.size + hlen])
    pcm = data[_DUB_HDR.size + hlen:]
    audio = np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    return n, (seq, sample), header, audio


class TokenBucket:
    """Rate limit: ``rate`` per second with bursts up to ``burst``."""

    def __init__(self, rate: float, burst: float, now: float):
        self.rate, self.burst = rate, burst
        self.level = burst
        self.t = now

    def _refill(self, now: float) -> None:
        self.level = min(self.burst, self.level + max(0.0, now - self.t) * self.rate)
        self.t = max(self.t, now)

    def take(self, now: float, amount: float = 1.0) -> bool:
        self._refill(now)
        if self.level >= amount:
            self.level -= amount
            return True
        return False

    def debit(self, now: float, amount: float) -> float:
        """Take ``amount`` even if that overdraws the bucket; the seconds until it is paid back."""
        self._refill(now)
        self.level -= amount
        return max(0.0, -self.level / self.rate)


# -- events: pipeline messages <-> JSON ---------------------------------------------------------

def _words(words, off: float) -> list:
    return [[w.text, round(w.start + off, 3), round(w.end + off, 3), round(w.probability, 3)] for w in words]


def _unwords(rows) -> tuple:
    return tuple(Word(str(t), float(s), float(e), float(p)) for t, s, e, p in rows)


def event_to_wire(ev, off: float) -> dict | None:
    """A pipeline event as JSON (times shifted by ``off`` seconds onto the session timeline);
    None for events that do not travel (dub chunks travel as binary frames)."""
    if isinstance(ev, TentativeText):
        return {"k": "partial", "words": _words(ev.words, off), "tail": ev.committed_tail}
    if isinstance(ev, CommittedWords):
        lags = [round(max(0.0, ev.emitted_at - s), 3) for s in ev.first_seen_at]
        return {"k": "committed", "words": _words(ev.words, off), "lags": lags, "pause_after": ev.pause_after}
    if isinstance(ev, Segment):
        return {"k": "segment", "seq": ev.seq, "words": _words(ev.words, off), "reason": ev.reason,
                "sentence_end": ev.sentence_end, "lang": ev.lang}
    if isinstance(ev, Translation):
        return {"k": "preview" if ev.preview else "translation", "seq": ev.seq, "source": ev.source,
                "target": ev.target, "src_start": round(ev.src_start + off, 3),
                "src_end": round(ev.src_end + off, 3),
                "queue_s": round(max(0.0, ev.started_at - ev.queued_at), 4),
                "compute_s": round(max(0.0, ev.emitted_at - ev.started_at), 4)}
    if isinstance(ev, FinalSentence):
        shown = None if ev.first_shown_at is None else round(max(0.0, ev.final_at - ev.first_shown_at), 4)
        return {"k": "final", "id": ev.id, "words": _words(ev.words, off), "source": ev.source,
                "target": ev.target, "src_start": round(ev.src_start + off, 3), "src_end": round(ev.src_end + off, 3),
                "covers": list(ev.covers), "first_source": ev.first_source, "first_target": ev.first_target,
                "reason": ev.reason, "failed": ev.failed, "shown_ago_s": shown, "mt": ev.mt,
                "compute_s": round(max(0.0, ev.final_at - ev.started_at), 4)}
    if isinstance(ev, Metric):
        return {"k": "metric", "name": ev.name, "value": ev.value, "labels": dict(ev.labels)}
    return None


def wire_to_event(d: dict, now: float, segments: dict):
    """Rebuild a pipeline message from its JSON, stamped with the receiver's clock ``now``.
    ``segments`` maps seq → Segment so a translation can carry its segment."""
    k = d["k"]
    if k == "partial":
        return TentativeText(_unwords(d["words"]), d.get("tail", ""), now)
    if k == "committed":
        lags = d.get("lags") or [0.0] * len(d["words"])
        return CommittedWords(_unwords(d["words"]), tuple(now - float(x) for x in lags), now, bool(d["pause_after"]))
    if k == "segment":
        return Segment(int(d["seq"]), _unwords(d["words"]), d["reason"], bool(d["sentence_end"]), now, d.get("lang", ""))
    if k in ("translation", "preview"):
        seg = segments.get(int(d["seq"])) if k == "translation" else None
        started = now - float(d.get("compute_s", 0.0))
        queued = started - float(d.get("queue_s", 0.0))
        if seg is not None:
            queued = seg.emitted_at
        return Translation(int(d["seq"]), d["source"], d["target"], float(d["src_start"]), float(d["src_end"]),
                           now, k == "preview", queued, max(queued, started), seg)
    if k == "final":
        ago = d.get("shown_ago_s")
        return FinalSentence(int(d["id"]), _unwords(d["words"]), str(d["source"]), str(d["target"]),
                             float(d["src_start"]), float(d["src_end"]), now,
                             None if ago is None else now - float(ago), tuple(int(c) for c in d.get("covers", ())),
                             str(d.get("first_source", "")), str(d.get("first_target", "")),
                             str(d.get("reason", "pause")), bool(d.get("failed", False)),
                             now - float(d.get("compute_s", 0.0)), str(d.get("mt", "")))
    if k == "metric":
        return Metric(d["name"], float(d["value"]), now, tuple(sorted((str(a), str(b)) for a, b in d.get("labels", {}).items())))
    raise ProtocolError("malformed", f"unknown event kind {k!r}")
