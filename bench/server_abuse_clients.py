"""The clients of bench/server_abuse.py: a healthy real-time session that measures, and the
attacks, each run in a child process (``python bench/server_abuse.py --attack NAME``). Loopback
only; every loop is bounded in count and time."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import socket
import ssl
import threading
import time
from pathlib import Path

import numpy as np
from websockets.exceptions import ConnectionClosed

from app.cloud import protocol as P

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-abuse-token-0123456789abcdef"
CLIP = ROOT / "tests" / "data" / "zh_demo_20s.wav"
BLOCK = 320  # 20 ms frames, as a capture client sends


# -- the clients ----------------------------------------------------------------------------------

def client_ctx(cert: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=cert)


async def open_session(url, cert, options=None, **kw):
    from websockets.asyncio.client import connect

    ws = await connect(url, ssl=client_ctx(cert), additional_headers={"Authorization": f"Bearer {TOKEN}"},
                       subprotocols=[P.SUBPROTOCOL], compression=None, ping_interval=None, max_size=None,
                       open_timeout=20, **kw)
    try:
        await ws.send(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en",
                                     "options": {"no_tts": True, **(options or {})}}))
        first = json.loads(await asyncio.wait_for(ws.recv(), 30))
    except ConnectionClosed as e:  # refused at once (busy), before the hello was read
        raise RuntimeError(e.rcvd.reason if e.rcvd else "closed") from None
    if first["type"] != "welcome":
        ws.transport.abort()
        raise RuntimeError(first.get("code", first["type"]))
    return ws


def load_clip() -> np.ndarray:
    from app.audio.files import load_audio

    return load_audio(str(CLIP))


class Healthy:
    """A real-time session on its own thread and loop; latencies are labelled with the phase."""

    def __init__(self, url, cert):
        self.url, self.cert = url, cert
        self.phase = "warm-up"
        self.e2e: dict[str, list[float]] = {}
        self.rtt: dict[str, list[float]] = {}
        self.error: str | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self):
        try:
            ws = await open_session(self.url, self.cert)
            audio = load_clip()
            sent: list[float] = []
            await asyncio.gather(self._send(ws, audio, sent), self._read(ws, sent), self._beat(ws))
        except Exception as e:  # reported in the table
            self.error = f"{type(e).__name__}: {e}"

    async def _send(self, ws, audio, sent):
        t0, i = time.monotonic(), 0
        while not self.stop.is_set() and i < 3600 * 50:  # at most an hour
            off = (i * BLOCK) % (len(audio) - BLOCK)
            await asyncio.sleep(max(0.0, t0 + (i + 1) * BLOCK / P.SR - time.monotonic()))
            await ws.send(P.encode_audio(i, i * BLOCK, audio[off:off + BLOCK]))
            sent.append(time.monotonic())
            i += 1
        await ws.close()

    async def _beat(self, ws):
        while not self.stop.is_set():
            await ws.send(P.encode_json({"type": "hb", "t": time.monotonic()}))
            await asyncio.sleep(P.HEARTBEAT_S)

    async def _read(self, ws, sent):
        async for m in ws:
            if isinstance(m, bytes):
                continue
            d = json.loads(m)
            now = time.monotonic()
            if d["type"] == "pong":
                self.rtt.setdefault(self.phase, []).append(now - d["t"])
            elif d["type"] == "ev" and d["ev"]["k"] == "translation":
                k = int(d["ev"]["src_end"] * P.SR) // BLOCK
                if k < len(sent):
                    self.e2e.setdefault(self.phase, []).append(now - sent[k])
            elif d["type"] == "error" and d["fatal"]:
                self.error = d["code"]


# -- attacks (each in a child process: python bench/server_abuse.py --attack NAME ...) ------------

async def attack_churn(url, cert, n):
    audio = load_clip()[: P.SR // 2]
    counts = {"closed": 0, "killed": 0, "killed_after_end": 0, "busy_retries": 0, "failed": 0}
    todo = list(range(n))

    async def worker():
        while todo:
            i = todo.pop()
            for _ in range(50):
                try:
                    ws = await open_session(url, cert, {"realtime": False})
                    break
                except RuntimeError as e:  # busy while earlier sessions are still stopping
                    if str(e) != "busy":
                        raise
                    counts["busy_retries"] += 1
                    await asyncio.sleep(0.1)
            else:
                counts["failed"] += 1
                continue
            kind = ("closed", "killed", "killed_after_end")[i % 3]
            try:
                for seq, off in enumerate(range(0, len(audio), 4000)):
                    await ws.send(P.encode_audio(seq, off, audio[off:off + 4000], compress=i % 2 == 0))
                if kind == "closed":
                    await ws.close()
                else:
                    if kind == "killed_after_end":
                        await ws.send(P.encode_json({"type": "end"}))
                    ws.transport.abort()
                counts[kind] += 1
            except ConnectionClosed:  # closed by the server meanwhile
                counts["failed"] += 1

    await asyncio.gather(*(worker() for _ in range(4)))
    return counts


async def attack_flood(url, cert, limit_s):
    ws = await open_session(url, cert)
    frames, t0, err = 0, time.monotonic(), None
    one = np.zeros(1, np.float32)

    async def reader():
        nonlocal err
        async for m in ws:
            if isinstance(m, str) and json.loads(m)["type"] == "error":
                err = json.loads(m)

    r = asyncio.ensure_future(reader())
    try:
        while time.monotonic() - t0 < limit_s and frames < 2_000_000:
            await ws.send(P.encode_audio(frames, frames, one, compress=True))
            frames += 1
    except Exception:  # closed by the server
        pass
    took = time.monotonic() - t0
    await asyncio.wait([r], timeout=5)
    return {"frames": frames, "closed_after_s": round(took, 2), "error": err and err["code"],
            "close_code": ws.close_code}


def ws_frame(data: bytes | str) -> bytes:
    """One masked client frame (RFC 6455), text or binary."""
    op, payload = (1, data.encode()) if isinstance(data, str) else (2, data)
    n = len(payload)
    head = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else bytes([0xFE]) + n.to_bytes(2, "big")
                                 if n < 65536 else bytes([0xFF]) + n.to_bytes(8, "big"))
    mask = os.urandom(4)
    body = (np.frombuffer(payload, np.uint8) ^ np.resize(np.frombuffer(mask, np.uint8), n)).tobytes()
    return head + mask + body


def attack_silent(url, cert, limit_s):
    """A real-time session that never reads (4 KiB receive buffer) and pings at the most the
    server allows (50 a second), so that its answers pile up on the way. A raw TLS socket:
    a websockets client reads in the background, or stops sending once its queue is full."""
    raw = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s = client_ctx(cert).wrap_socket(raw, server_hostname="127.0.0.1")
    s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n"
               f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {P.SUBPROTOCOL}\r\n"
               f"Authorization: Bearer {TOKEN}\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:  # the 101 response, byte by byte: nothing after it is read
        head += s.recv(1)
    s.sendall(ws_frame(P.encode_json({"type": "hello", "v": 1, "pair": "zh-en", "options": {"no_tts": True}})))
    audio, t0, i = load_clip(), time.monotonic(), 0
    s.settimeout(10)
    try:
        while time.monotonic() - t0 < limit_s:
            off = (i * BLOCK) % (len(audio) - BLOCK)
            time.sleep(max(0.0, t0 + (i + 1) * BLOCK / P.SR - time.monotonic()))
            s.sendall(ws_frame(P.encode_audio(i, i * BLOCK, audio[off:off + BLOCK])))
            s.sendall(ws_frame(P.encode_json({"type": "hb", "t": 1.0})))
            i += 1
    except OSError:  # reset by the server
        pass
    took = time.monotonic() - t0
    s.close()
    return {"closed_after_s": round(took, 2)}


def fuzz_frame(rng: random.Random) -> bytes | str:
    k = rng.randrange(7)
    if k == 0:
        return rng.randbytes(rng.randrange(64))
    if k == 1:
        return P.AUDIO_MAGIC + rng.randbytes(rng.randrange(48))
    if k == 2:
        data = P.encode_audio(rng.randrange(2 ** 32), rng.randrange(2 ** 40), np.zeros(rng.randrange(1, 400), np.float32),
                              rng.random() < 0.5)
        return data[:4] + bytes([rng.choice([0, 0, 2, 3, 255])]) + data[5:]
    if k == 3:
        return "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(60)))
    if k == 4:
        num = rng.choice(["NaN", "Infinity", "1e999", "9" * 400, str(rng.randrange(-10, 10 ** 6)), str(rng.random())])
        return '{"type":"%s","t":%s}' % (rng.choice(["hb", "hello", "x"]), num)
    if k == 5:
        return json.dumps({"type": "hello", "v": rng.randrange(3), "pair": rng.choice(["zh-en", "en-en", "x"]),
                           "options": {rng.choice(["beam", "eager", "speculative"]): rng.choice([10 ** 9, "x", -1])}})
    return json.dumps({"type": "hb", "t": rng.random(), "pad": "x" * rng.randrange(5000)})


async def attack_fuzz(url, cert, n, seed=1234):
    rng = random.Random(seed)
    stats = {"frames": 0, "sessions": 0, "errors": {}, "closes": {}, "other": {}}
    while stats["frames"] < n:
        ws = await open_session(url, cert)
        stats["sessions"] += 1

        async def reader():
            async for m in ws:
                if isinstance(m, str):
                    d = json.loads(m)  # the server's JSON must always be strict JSON
                    if d["type"] == "error":
                        stats["errors"][d["code"]] = stats["errors"].get(d["code"], 0) + 1
                    elif d["type"] not in ("hb", "pong", "ev"):
                        stats["other"][d["type"]] = stats["other"].get(d["type"], 0) + 1

        r = asyncio.ensure_future(reader())
        try:
            while stats["frames"] < n:
                await ws.send(fuzz_frame(rng))
                stats["frames"] += 1
                if stats["frames"] % 50 == 0:
                    await asyncio.sleep(0.05)
            await ws.close()
        except ConnectionClosed:
            pass
        await asyncio.wait([r], timeout=5)
        code = ws.close_code
        stats["closes"][str(code)] = stats["closes"].get(str(code), 0) + 1
    return stats


async def attack_hold(url, cert, limit_s):
    """For the shutdown: one session busy in fast mode, one killed right after `end`; held open."""
    busy = await open_session(url, cert, {"realtime": False})
    ended = await open_session(url, cert, {"realtime": False})
    clip = load_clip()
    for ws in (busy, ended):
        for seq, off in enumerate(range(0, 3 * P.SR, 8000)):
            await ws.send(P.encode_audio(seq, off, clip[off:off + 8000]))
    await ended.send(P.encode_json({"type": "end"}))
    ended.transport.abort()
    print("ready", flush=True)
    await asyncio.sleep(limit_s)
    busy.transport.abort()
    return {}


ATTACKS = {"churn": attack_churn, "flood": attack_flood, "silent": attack_silent, "fuzz": attack_fuzz,
           "hold": attack_hold}
