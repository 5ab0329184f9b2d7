"""SRT and WebVTT writers (source timings), written atomically.

What they hold is the session's ``segments`` (the finals of the second pass when the session
makes them, else the first pass's pieces). Each becomes one or more cues of at most
``MAX_LINES`` lines of ``MAX_CHARS`` columns (a CJK character counts two), split at word
boundaries, preferably after punctuation, into cues of balanced length. A cue's times come from the
segment's source words (``words``: ``[text, start, end]``): the target text is laid over the speech
proportionally (pauses between words take no text) and each split is moved to the nearest start
of a source word. Cues never overlap and last ``MIN_CUE_S`` at least where the next cue leaves
room."""

from __future__ import annotations

import math
import os
import unicodedata
from pathlib import Path

from app.core.errors import UserError

MAX_CHARS = 42
MAX_LINES = 2
MIN_CUE_S = 1.0
SNAP_S = 0.6  # a split moves to a source word's start at most this far
BREAK_AFTER = ",.;:!?，。；：！？、…)]\"'”’»"


def _ts(t: float, sep: str) -> str:
    ms = int(round(max(0.0, t) * 1000))
    h, ms = divmod(ms, 3600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


# -- text: tokens, widths, lines -----------------------------------------------------------------
def char_width(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def text_width(s: str) -> int:
    return sum(char_width(c) for c in s)


def tokens(text: str) -> list[tuple[str, bool]]:
    """The places a line may break: ``(token, space_before)``. Space-separated words stay whole;
    CJK text breaks between characters; punctuation stays with what precedes it."""
    out: list[tuple[str, bool]] = []
    for chunk in text.split():
        first = True
        buf = ""
        for ch in chunk:
            wide = char_width(ch) == 2
            punct = unicodedata.category(ch).startswith("P") and ch not in "(（[「『“‘"
            if wide and not punct:
                if buf:
                    out.append((buf, first))
                    first = False
                buf = ch
            elif wide and punct:
                buf += ch
            else:
                if buf and char_width(buf[-1]) == 2 and not punct:
                    out.append((buf, first))
                    first = False
                    buf = ""
                buf += ch
        if buf:
            out.append((buf, first))
    return out


def join_tokens(toks: list[tuple[str, bool]]) -> str:
    return "".join((" " if sp and i else "") + t for i, (t, sp) in enumerate(toks))


def _hard_split(toks: list[tuple[str, bool]], limit: int) -> list[tuple[str, bool]]:
    """A token wider than a line (a URL, a long unbroken CJK run) is cut into pieces that fit."""
    out = []
    for t, sp in toks:
        if text_width(t) + 1 <= limit:
            out.append((t, sp))
            continue
        piece, w = "", 0
        for ch in t:
            if w + char_width(ch) > limit - 1 and piece:
                out.append((piece, sp))
                sp, piece, w = False, "", 0
            piece += ch
            w += char_width(ch)
        out.append((piece, sp))
    return out


def _widths(toks) -> list[int]:
    """Width each token adds after the one before it on the same line (its space included)."""
    return [text_width(t) + (1 if sp and i else 0) for i, (t, sp) in enumerate(toks)]


def wrap(toks: list[tuple[str, bool]], limit: int = MAX_CHARS) -> list[str]:
    """Greedy word wrap (the fewest lines)."""
    lines: list[list] = []
    w = 0
    for t, sp in toks:
        tw = text_width(t)
        if lines and w + (1 if sp else 0) + tw <= limit:
            lines[-1].append((t, sp))
            w += (1 if sp else 0) + tw
        else:
            lines.append([(t, sp)])
            w = tw
    return [join_tokens([(t, sp if j else False) for j, (t, sp) in enumerate(ln)]) for ln in lines]


def cue_lines(toks: list[tuple[str, bool]], limit: int = MAX_CHARS) -> list[str]:
    """One line when it fits, else two balanced lines (the shorter first line when equal)."""
    one = join_tokens(toks)
    if text_width(one) <= limit or len(toks) < 2:
        return [one]
    best = None
    for k in range(1, len(toks)):
        a = join_tokens(toks[:k])
        b = join_tokens([(toks[k][0], False)] + toks[k + 1:])
        wa, wb = text_width(a), text_width(b)
        if wa > limit or wb > limit:
            continue
        score = (max(wa, wb), 0 if toks[k - 1][0][-1] in BREAK_AFTER else 1, wa > wb)
        if best is None or score < best[0]:
            best = (score, [a, b])
    return best[1] if best else wrap(toks, limit)


def split_cues(toks: list[tuple[str, bool]], limit: int = MAX_CHARS, lines: int = MAX_LINES) -> list[list]:
    """The tokens in the fewest groups that each fit ``lines`` × ``limit``, balanced in length and
    cut after punctuation where that costs little."""
    toks = _hard_split(toks, limit)
    n = len(toks)
    if n == 0:
        return []
    # far[i]: the largest j such that toks[i:j] wraps into `lines` lines (greedy wrap is optimal)
    far = []
    for i in range(n):
        used, w, j = 1, 0, i
        while j < n:
            t, sp = toks[j]
            tw = text_width(t)
            add = tw if j == i else (1 if sp else 0) + tw
            if w and w + add > limit:
                used += 1
                if used > lines:
                    break
                w = tw
            else:
                w += add
            j += 1
        far.append(j)
    # the fewest groups
    k, i = 0, 0
    while i < n:
        i, k = far[i], k + 1
    if n > 400:  # a pathological sentence: greedy groups
        out, i = [], 0
        while i < n:
            out.append(toks[i:far[i]])
            i = far[i]
        return out
    widths = _widths(toks)
    pre = [0]
    for w in widths:
        pre.append(pre[-1] + w)
    target = pre[n] / k

    def cost(i: int, j: int) -> float:
        c = (pre[j] - pre[i] - target) ** 2
        if j < n and toks[j - 1][0][-1] in BREAK_AFTER:
            c -= target * target / 8 + 1
        return c

    inf = math.inf
    # best[g][j]: least cost of toks[:j] in g groups
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    back = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0.0
    for g in range(1, k + 1):
        for i in range(n):
            if best[g - 1][i] == inf:
                continue
            for j in range(i + 1, far[i] + 1):
                c = best[g - 1][i] + cost(i, j)
                if c < best[g][j]:
                    best[g][j], back[g][j] = c, i
    out, j = [], n
    for g in range(k, 0, -1):
        i = back[g][j]
        out.append(toks[i:j])
        j = i
    out.reverse()
    return [grp if grp[0][1] is False else [(grp[0][0], False)] + grp[1:] for grp in out]


# -- time: the source words' speech ---------------------------------------------------------------
def _speech(seg: dict) -> list[tuple[float, float]]:
    a0, b0 = float(seg.get("src_start") or 0.0), float(seg.get("src_end") or 0.0)
    spans = []
    for w in seg.get("words") or ():
        try:
            a, b = float(w[1]), float(w[2])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(a) and math.isfinite(b):
            spans.append((a, max(a, b)))
    spans.sort()
    if not spans:
        return [(a0, max(a0, b0))]
    return spans


def _time_at(spans: list[tuple[float, float]], f: float) -> float:
    """The time at fraction ``f`` of the speech (pauses between words take no share)."""
    total = sum(b - a for a, b in spans)
    if total <= 0:
        return spans[0][0] + f * (spans[-1][1] - spans[0][0])
    left = f * total
    for a, b in spans:
        if left <= b - a:
            return a + left
        left -= b - a
    return spans[-1][1]


def _segment_cues(seg: dict, limit: int, lines: int) -> list[tuple[float, float, str]]:
    text = (seg.get("target") or "").strip()
    if not text:
        return []
    groups = split_cues(tokens(text), limit, lines)
    spans = _speech(seg)
    start, end = spans[0][0], max(b for _, b in spans)
    if len(groups) == 1:
        return [(start, end, "\n".join(cue_lines(groups[0], limit)))]
    widths = [text_width(join_tokens(g)) + 1 for g in groups]
    total = sum(widths)
    starts = [a for a, _ in spans[1:]]
    bounds = [start]
    acc = 0
    for gi in range(1, len(groups)):
        acc += widths[gi - 1]
        t = _time_at(spans, acc / total)
        near = min(starts, key=lambda s: abs(s - t), default=None)
        lo = bounds[-1] + MIN_CUE_S
        hi = end - MIN_CUE_S * (len(groups) - gi)
        if near is not None and abs(near - t) <= SNAP_S and lo <= near <= hi:
            t = near
        elif lo <= hi:
            t = min(max(t, lo), hi)
        else:  # too little time for every cue to last MIN_CUE_S: share it evenly
            t = bounds[-1] + (end - bounds[-1]) / (len(groups) - gi + 1)
        bounds.append(t)
    bounds.append(end)
    return [(bounds[i], bounds[i + 1], "\n".join(cue_lines(g, limit))) for i, g in enumerate(groups)]


def cues(segments: list[dict], limit: int = MAX_CHARS, lines: int = MAX_LINES) -> list[tuple[float, float, str]]:
    """Every segment's cues in source order: at most ``lines`` × ``limit``, never overlapping,
    ``MIN_CUE_S`` long at least where the next cue leaves room (times rounded to milliseconds)."""
    raw = []
    for seg in segments:  # in their order (finals by id, pieces by seq): a revision never reorders
        raw += _segment_cues(seg, limit, lines)
    out: list[tuple[float, float, str]] = []
    prev_end = 0
    for i, (a, b, text) in enumerate(raw):
        a_ms = max(int(round(a * 1000)), prev_end)
        b_ms = max(int(round(b * 1000)), a_ms)
        nxt = int(round(raw[i + 1][0] * 1000)) if i + 1 < len(raw) else None
        want = a_ms + int(MIN_CUE_S * 1000)
        if b_ms < want:
            b_ms = want if nxt is None else max(b_ms, min(want, nxt))
        if b_ms <= a_ms:  # no room at all: a short cue rather than none (it pushes the next)
            b_ms = a_ms + 200
        out.append((a_ms / 1000, b_ms / 1000, text))
        prev_end = b_ms
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


def to_text(segments: list[dict]) -> str:
    """Plain text: each segment's time span, source and target (corrected / kept-first-pass marks)."""
    rows = []
    for s in segments:
        mark = "  [corrected]" if s.get("corrected") else ""
        if s.get("failed"):
            mark += "  [not revised]"
        rows.append(f"[{_clock(s['src_start'])} → {_clock(s['src_end'])}]{mark}\n{s.get('source') or ''}\n"
                    f"{s.get('target') or ''}\n")
    return "\n".join(rows)


def _clock(t: float) -> str:
    m, s = divmod(max(0.0, float(t or 0.0)), 60)
    return f"{int(m):02d}:{s:04.1f}"


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
