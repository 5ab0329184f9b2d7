"""The writing side of one server connection: sends with a deadline, closes that never wait
long on a peer that does not read, and the two ways a session ends on purpose."""

from __future__ import annotations

import asyncio
import socket

from websockets.exceptions import ConnectionClosed

from app.cloud import protocol as P

CLOSE_GRACE_S = 1.0  # a close handshake waits this long for the peer, then the socket is dropped


class Fatal(Exception):
    """Ends a session: an error frame with ``code`` (fatal) and a close."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class SlowClient(Exception):
    pass


class Link:
    """The writing side of one connection: every send has a deadline (``send_timeout_s``: a
    client that does not read is a slow client), and closing never waits on a peer that does
    not read for longer than ``CLOSE_GRACE_S``."""

    def __init__(self, ws, send_timeout_s: float):
        self.ws, self.send_timeout_s = ws, send_timeout_s
        self.closing = False
        self.sent_error: str | None = None

    async def send(self, data) -> None:
        try:
            await asyncio.wait_for(self.ws.send(data), self.send_timeout_s)
        except TimeoutError:
            raise SlowClient() from None

    async def fail(self, code: str, message: str) -> None:
        """A fatal error frame (best effort) and the close; once, whoever asks first."""
        if self.closing:
            return
        self.closing = True
        self.sent_error = code
        slow = code == "slow_client"
        frame = P.encode_json({"type": "error", "code": code, "message": message, "fatal": True})
        try:  # the frame is written at once; a reader that does not read is not waited for
            await asyncio.wait_for(self.ws.send(frame), 0.05 if slow else CLOSE_GRACE_S)
        except (TimeoutError, ConnectionClosed):
            pass
        close_code = 1011 if code == "server" else 1001 if code == "shutdown" else 1008
        await self.close(close_code, code, 0.1 if slow else CLOSE_GRACE_S)

    async def close(self, code: int, reason: str, grace: float = CLOSE_GRACE_S) -> None:
        self.closing = True
        # what the client still sends is read and dropped meanwhile: unread, it would stop the
        # reading (flow control) before the client's close frame could arrive
        discard = asyncio.ensure_future(self._discard())
        try:
            await asyncio.wait_for(self.ws.close(code, reason), grace)
        except TimeoutError:
            self.ws.transport.abort()
        finally:
            discard.cancel()

    async def _discard(self) -> None:
        try:
            while True:
                await self.ws.recv()
                await asyncio.sleep(0)  # a flood's backlog is read between everyone else's work
        except (ConnectionClosed, RuntimeError):  # RuntimeError: another task is reading
            pass


def set_send_buffer(ws, size: int) -> None:
    """A bounded kernel send buffer: a client that stops reading pins at most this much kernel
    memory, and its send timeout starts once this is full."""
    sock = ws.transport.get_extra_info("socket")
    if size and sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        except OSError:
            pass
