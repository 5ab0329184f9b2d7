"""SRT and WebVTT writers (source timings), written atomically."""

from __future__ import annotations

import os
from pathlib import Path

from app.core.errors import UserError


def _ts(t: float, sep: str) -> str:
    ms = int(round(max(0.0, t) * 1000))
    h, ms = divmod(ms, 3600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


def cues(segments: list[dict]) -> list[tuple[float, float, str]]:
    out = []
    for s in segments:
        text = (s.get("target") or "").strip()
        if not text:
            continue
        start, end = s["src_start"], max(s["src_end"], s["src_start"] + 0.5)
        out.append((start, end, text))
    return out


def to_srt(segments: list[dict]) -> str:
    lines = []
    for i, (a, b, text) in enumerate(cues(segments), 1):
        lines += [str(i), f"{_ts(a, ',')} --> {_ts(b, ',')}", text, ""]
    return "\n".join(lines)


def to_vtt(segments: list[dict]) -> str:
    lines = ["WEBVTT", ""]
    for a, b, text in cues(segments):
        lines += [f"{_ts(a, '.')} --> {_ts(b, '.')}", text, ""]
    return "\n".join(lines)


def write_text(path: str | os.PathLike, text: str) -> None:
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{os.fsdecode(p)}: cannot write ({e.strerror})") from None


def parse_srt(text: str) -> list[tuple[float, float, str]]:
    """Parse SRT back (used by tests and by the GUI's import)."""
    out = []
    for block in text.strip().split("\n\n"):
        rows = block.strip().splitlines()
        if len(rows) < 3 or "-->" not in rows[1]:
            continue
        a, b = (x.strip() for x in rows[1].split("-->"))
        out.append((_parse_ts(a), _parse_ts(b), "\n".join(rows[2:])))
    return out


def _parse_ts(s: str) -> float:
    hms, ms = s.replace(".", ",").split(",")
    h, m, sec = (int(x) for x in hms.split(":"))
    return h * 3600 + m * 60 + sec + int(ms) / 1000
