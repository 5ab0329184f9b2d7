"""The cloud link: the server's address, TLS 1.3, the authenticated WebSocket, one-line reasons."""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from urllib.parse import urlparse

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from app.cloud import protocol as P
from app.core.errors import UserError

# websockets logs every request header at DEBUG, the bearer token included: this logger never
# goes below INFO, whatever level the user asks for.
WS_LOG = logging.getLogger("relay.cloud.ws")
WS_LOG.setLevel(logging.INFO)


def validate_url(url: str) -> str | None:
    u = urlparse(url)
    if u.scheme not in ("wss", "ws") or not u.hostname:
        return "write it as wss://HOST:PORT"
    if u.scheme == "ws" and u.hostname not in ("127.0.0.1", "localhost", "::1"):
        return "plain ws:// is allowed on loopback only; use wss://"
    try:
        u.port
    except ValueError:
        return "the port is not a number"
    return None


def ssl_context(url: str, ca: str | None) -> ssl.SSLContext | None:
    if not url.startswith("wss://"):
        return None
    if ca and not os.path.isfile(ca):
        raise UserError(f"{ca}: no such certificate file")
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except ssl.SSLError:
        raise UserError(f"{ca}: not a PEM certificate") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def reason(e: BaseException) -> str:
    if isinstance(e, InvalidStatus):
        code = e.response.status_code
        return "the server refused the access token" if code == 401 else f"the server answered HTTP {code}"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"the server's certificate is not trusted ({e.verify_message}); pass it with --ca"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower()
    return str(e).splitlines()[0] if str(e) else type(e).__name__


async def open_ws(url: str, token: str, ctx, timeout: float):
    return await connect(url, ssl=ctx, additional_headers={"Authorization": f"Bearer {token}"},
                         subprotocols=[P.SUBPROTOCOL], compression=None, open_timeout=timeout,
                         ping_interval=None, max_size=P.MAX_MESSAGE_BYTES, proxy=None,
                         close_timeout=0.5, logger=WS_LOG)


def check_server(url: str, token: str, ca: str | None = None, timeout: float = 3.0) -> None:
    """Open and close a connection: raises UserError with the reason when it fails."""
    problem = validate_url(url)
    if problem:
        raise UserError(f"{url}: {problem}")
    ctx = ssl_context(url, ca)

    async def probe():
        ws = await open_ws(url, token, ctx, timeout)
        await ws.close()

    try:
        asyncio.run(probe())
    except UserError:
        raise
    except Exception as e:
        raise UserError(f"cannot use the Relay server at {url}: {reason(e)}") from None
