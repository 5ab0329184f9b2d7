"""What one `relay serve` process allows: its settings (``ServerLimits``, documented in
docs/DEPLOY.md) and the small meters that enforce them (per-session message budget, per-peer
refusal throttle, rate-limited log lines, session counts).

Every setting has a default, a ``relay serve`` flag (when the CLI defines it) and an environment
variable ``RELAY_SERVE_<NAME>``; a flag wins over the environment.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
from dataclasses import dataclass

from app.cloud.protocol import ProtocolError, TokenBucket
from app.core.errors import UserError
from app.models.catalog import FINAL_MT_CHOICES

MIN_USEFUL_SAMPLES = 160  # a message with less new audio than 10 ms is overhead (see FrameLimiter)


@dataclass(frozen=True)
class ServerLimits:
    pairs: str = "zh-en"  # served pairs, loaded at start
    lazy_pairs: bool = False  # also serve other installed pairs, loading them on first use
    max_sessions: int = 32  # sessions open at once, all tokens together
    max_sessions_per_token: int = 8
    frames_per_s: float = 200.0  # client messages a second, per session (a real-time client sends ~60)
    bytes_per_s: float = float(1 << 20)  # client bytes a second, per session; audio counted decompressed
    burst_s: float = 10.0  # bursts of this many seconds' budget (fast mode sends 20 s of audio at once)
    flood_s: float = 2.0  # throttled this long on near-empty messages: the client is flooding
    send_timeout_s: float = 5.0  # a client that reads nothing for this long is closed (slow_client)
    send_buffer: int = 64 << 10  # kernel send buffer per connection (bytes, Linux doubles it); 0: the system's
    outbox_items: int = 4096  # events waiting for a slow client before it is closed
    outbox_bytes: int = 8 << 20
    outbox_soft: int = 256  # above this partials, previews and metrics are dropped
    max_errors: int = 20  # protocol errors before a session is closed
    client_silence_s: float = 5.0  # nothing from the client for this long ends the session
    hello_timeout_s: float = 10.0
    max_beam: int = 8  # hello option bounds (the rest: SessionOptions.validate)
    min_asr_step: float = 0.3
    allow_fast: bool = True  # sessions with realtime:false (audio as fast as answered)
    refusals_per_min: int = 10  # refused connections from one address before it gets 429 for a minute
    shutdown_s: float = 3.0  # graceful shutdown: sessions are told and closed within this
    final_mt: str = "auto"  # what translates the finals: auto (the qwen-1.5b pack when installed), opus, a pack
    final_mt_budget: float = 1.5  # a final the LLM would not finish within this many s of its sentence's end: OPUS-MT

    @classmethod
    def from_settings(cls, args=None, environ=None) -> "ServerLimits":
        """Flags (``args.<name>`` when not None) over ``RELAY_SERVE_<NAME>`` over the defaults."""
        environ = environ or {}
        values = {}
        for f in dataclasses.fields(cls):
            raw = getattr(args, f.name, None) if args is not None else None
            source = f"--{f.name.replace('_', '-')}"
            if raw is None:
                raw = environ.get(f"RELAY_SERVE_{f.name.upper()}")
                source = f"RELAY_SERVE_{f.name.upper()}"
            if raw is None:
                continue
            values[f.name] = _convert(f.name, type(f.default), raw, source)
        limits = cls(**values)
        limits.check()
        return limits

    def check(self) -> None:
        positive = ("max_sessions", "max_sessions_per_token", "frames_per_s", "bytes_per_s", "burst_s", "flood_s",
                    "send_timeout_s", "outbox_items", "outbox_bytes", "outbox_soft", "max_errors",
                    "client_silence_s", "hello_timeout_s", "max_beam", "min_asr_step", "refusals_per_min",
                    "shutdown_s")
        for name in positive:
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise UserError(f"relay serve: {name.replace('_', '-')} must be above 0, got {v}")
        if self.final_mt not in FINAL_MT_CHOICES:
            raise UserError(f"relay serve: final-mt must be one of {', '.join(FINAL_MT_CHOICES)}, "
                            f"got {self.final_mt[:30]!r}")
        if not 0 < self.final_mt_budget <= 60:
            raise UserError(f"relay serve: final-mt-budget must be above 0 and at most 60 s, got {self.final_mt_budget}")
        if self.send_buffer < 0:
            raise UserError("relay serve: send-buffer must be 0 (the system's) or a size in bytes")
        if self.outbox_soft > self.outbox_items:
            raise UserError("relay serve: outbox-soft must not exceed outbox-items")

    @property
    def pair_list(self) -> list[str]:
        return [p.strip() for p in self.pairs.split(",") if p.strip()]


def _convert(name: str, kind: type, raw, source: str):
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise UserError(f"relay serve: {source} must be {kind.__name__}, got {text[:40]!r}") from None


def check_hello_options(options: dict, limits: ServerLimits) -> None:
    """This server's bounds on what a hello may ask (ProtocolError ``bad_options``)."""
    beam = options.get("beam")
    if beam is not None and not 1 <= beam <= limits.max_beam:
        raise ProtocolError("bad_options", f"beam must be between 1 and {limits.max_beam} on this server")
    step = options.get("asr_step")
    if step is not None and not limits.min_asr_step <= step <= 10:
        raise ProtocolError("bad_options", f"asr_step must be between {limits.min_asr_step:g} and 10 s on this server")
    if options.get("realtime") is False and not limits.allow_fast:
        raise ProtocolError("bad_options", "this server takes real-time sessions only")


class FrameLimiter:
    """One session's budget for client messages: ``frames_per_s`` messages and ``bytes_per_s``
    bytes a second, bursts of ``burst_s`` seconds' worth. Over budget the server reads no faster
    than the budget (TCP pushes back on the client): a fast-mode client is slowed, not refused.
    Time spent throttled on messages that bring under 10 ms of new audio (control messages, tiny
    or repeated frames) counts as flooding, decaying at half the wall time; past ``flood_s`` the
    session is closed with ``rate``."""

    def __init__(self, limits: ServerLimits, now: float):
        self.frames = TokenBucket(limits.frames_per_s, limits.frames_per_s * limits.burst_s, now)
        self.bytes = TokenBucket(limits.bytes_per_s, limits.bytes_per_s * limits.burst_s, now)
        self.flood_s = limits.flood_s
        self.pressure = 0.0
        self.throttled_s = 0.0
        self._t = now

    def charge(self, now: float, frames: int, nbytes: int) -> float:
        """Debit a message; the seconds to wait before handling it."""
        wait = max(self.frames.debit(now, frames), self.bytes.debit(now, nbytes))
        self.throttled_s += wait
        return wait

    def account(self, now: float, waited: float, new_samples: int) -> None:
        """After handling a message that was held ``waited`` s: raises ProtocolError('rate') once
        the throttled time on near-empty messages passes ``flood_s``."""
        self.pressure = max(0.0, self.pressure - 0.5 * max(0.0, now - self._t))
        self._t = now
        if new_samples < MIN_USEFUL_SAMPLES:
            self.pressure += waited
        if self.pressure > self.flood_s:
            raise ProtocolError("rate", "too many messages: the client floods the server")


class PeerThrottle:
    """Refused connections per remote address: past ``limit`` in ``window_s`` the address is
    answered 429 without a token check until its refusals age out. Bounded to ``max_peers``
    addresses (the least recently refused are forgotten first)."""

    def __init__(self, limit: int, window_s: float = 60.0, max_peers: int = 4096):
        self.limit, self.window_s, self.max_peers = limit, window_s, max_peers
        self._peers: collections.OrderedDict[str, collections.deque[float]] = collections.OrderedDict()

    def _recent(self, peer: str, now: float) -> collections.deque[float] | None:
        q = self._peers.get(peer)
        if q is None:
            return None
        while q and q[0] <= now - self.window_s:
            q.popleft()
        if not q:
            del self._peers[peer]
            return None
        return q

    def blocked(self, peer: str, now: float) -> bool:
        q = self._recent(peer, now)
        return q is not None and len(q) >= self.limit

    def refused(self, peer: str, now: float) -> None:
        q = self._recent(peer, now)
        if q is None:
            q = self._peers[peer] = collections.deque(maxlen=self.limit)
        q.append(now)
        self._peers.move_to_end(peer)
        while len(self._peers) > self.max_peers:
            self._peers.popitem(last=False)


class LogLimiter:
    """At most one line per ``interval_s`` per key; the next line says how many were held back."""

    def __init__(self, logger: logging.Logger, interval_s: float = 10.0, max_keys: int = 256):
        self.logger, self.interval_s, self.max_keys = logger, interval_s, max_keys
        self._last: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._held: collections.Counter[str] = collections.Counter()

    def log(self, level: int, key: str, now: float, msg: str, *args) -> bool:
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] += 1
            return False
        held = self._held.pop(key, 0)
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self.max_keys:
            old, _ = self._last.popitem(last=False)
            self._held.pop(old, None)
        self.logger.log(level, msg + (" (%d similar held back)" if held else ""), *args, *((held,) if held else ()))
        return True


class SessionCounter:
    """Open sessions, all together and per token index."""

    def __init__(self, limits: ServerLimits):
        self.limits = limits
        self.total = 0
        self.by_token: collections.Counter[int] = collections.Counter()

    def acquire(self, token: int) -> str | None:
        """Count a new session in; None, or why it is refused."""
        if self.total >= self.limits.max_sessions:
            return f"the server is full ({self.limits.max_sessions} sessions)"
        if self.by_token[token] >= self.limits.max_sessions_per_token:
            return f"this token already has {self.limits.max_sessions_per_token} sessions open"
        self.total += 1
        self.by_token[token] += 1
        return None

    def release(self, token: int) -> None:
        self.total -= 1
        self.by_token[token] -= 1
        if self.by_token[token] <= 0:
            del self.by_token[token]
