"""Who may use a `relay serve`: access tokens (a private file or ``RELAY_TOKENS``), the
upgrade request's ``Authorization`` header, and TLS 1.3."""

from __future__ import annotations

import hmac
import os
import re
import ssl
import stat
from pathlib import Path

from app.core.errors import UserError

MIN_TOKEN_CHARS = 16  # `openssl rand -hex 24` gives 48


def load_tokens(path: str | None, environ=None) -> list[bytes]:
    """Tokens from ``path`` (one a line, ``#`` comments), else from ``RELAY_TOKENS`` (separated by
    spaces, commas or new lines): never from the command line, where ``ps`` shows them."""
    environ = os.environ if environ is None else environ
    if path:
        where = path
        p = Path(path)
        try:
            mode = p.stat().st_mode
            lines = p.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise UserError(f"{path}: cannot read the tokens file ({e.strerror})") from None
        except UnicodeDecodeError:
            raise UserError(f"{path}: the tokens file is not UTF-8 text") from None
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UserError(f"{path}: the tokens file is readable by other users "
                            f"(mode {stat.S_IMODE(mode):o}); make it private: chmod 600 {path}")
        toks = [t.strip() for t in lines if t.strip() and not t.strip().startswith("#")]
    elif environ.get("RELAY_TOKENS", "").strip():
        where = "RELAY_TOKENS"
        toks = [t for t in re.split(r"[\s,]+", environ["RELAY_TOKENS"]) if t]
    else:
        raise UserError("relay serve needs --tokens FILE (one access token a line, chmod 600) or RELAY_TOKENS")
    if not toks:
        raise UserError(f"{where}: no tokens")
    if any(len(t) < MIN_TOKEN_CHARS for t in toks):
        raise UserError(f"{where}: tokens must be at least {MIN_TOKEN_CHARS} characters (openssl rand -hex 24)")
    if any(not t.isascii() or not t.isprintable() for t in toks):
        raise UserError(f"{where}: tokens must be printable ASCII")
    return [t.encode() for t in toks]


def token_index(given: str | None, tokens: list[bytes]) -> int | None:
    """Which token was given (None: none). Constant time in the token's content: every stored
    token is compared, always."""
    g = (given or "").encode("utf-8", "surrogateescape")
    found = None
    for i, t in enumerate(tokens):
        if hmac.compare_digest(g, t) and found is None:
            found = i
    return found


def token_ok(given: str | None, tokens: list[bytes]) -> bool:
    return token_index(given, tokens) is not None


def bearer(headers) -> tuple[str | None, str | None]:
    """The token of the request's one ``Authorization: Bearer`` header: (token, None), or
    (None, why the request is malformed) -- several Authorization headers are malformed."""
    values = headers.get_all("Authorization")
    if len(values) > 1:
        return None, "one Authorization header, not several"
    auth = values[0] if values else ""
    return (auth[7:] if auth.startswith("Bearer ") else None), None


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    for p in (cert, key):
        if not Path(p).is_file():
            raise UserError(f"{p}: no such file")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    # No TLS 1.3 session tickets. OpenSSL sends them just after the handshake, while a client
    # that reads on one thread and writes on another (websockets' sync client: a thread blocked
    # in recv() while connect() sends the upgrade request) is using the same SSL object from
    # both; about 1 connection in 1,100 then never got its handshake answered (9,000 loopback
    # connects: 8 timed out with tickets, 0 of 10,000 without; 0 of 3,000 over TLS 1.2, which
    # has no post-handshake tickets). Relay's clients never resume a session, so a ticket had
    # no use.
    ctx.num_tickets = 0
    try:
        ctx.load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError) as e:
        raise UserError(f"cannot use {cert} / {key} as a TLS certificate and key ({e.__class__.__name__})") from None
    return ctx
