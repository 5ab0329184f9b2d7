"""WER/CER and chrF as the shared data's README defines them (normalised, numbers as digits)."""

from __future__ import annotations

import re

import numpy as np

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if w != "_"}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


def _words_to_digits(tokens: list[str]) -> list[str]:
    out, num, cur, active = [], 0, 0, False

    def flush():
        nonlocal num, cur, active
        if active:
            out.extend(list(str(num + cur)))
        num, cur, active = 0, 0, False

    for t in tokens:
        if t in _UNITS:
            cur += _UNITS[t]
            active = True
        elif t in _TENS:
            cur += _TENS[t]
            active = True
        elif t in _SCALES and active:
            if t == "hundred":
                cur = max(cur, 1) * 100
            else:
                num += max(cur, 1) * _SCALES[t]
                cur = 0
        elif t.isdigit():
            flush()
            out.extend(list(t))
        else:
            flush()
            out.append(t)
    flush()
    return out


def en_tokens(text: str) -> list[str]:
    text = text.lower().replace("-", " ")
    text = re.sub(r"(\d),(\d)", r"\1\2", text)
    text = re.sub(r"[^\w\s']", " ", text).replace("'", "")
    return _words_to_digits(text.split())


_CN_DIGITS = "零一二三四五六七八九"


def _int_to_cn(n: int) -> str:
    if n == 0:
        return "零"
    parts = []
    for unit_val, unit in ((100_000_000, "亿"), (10_000, "万")):
        if n >= unit_val:
            parts.append(_int_to_cn(n // unit_val) + unit)
            n %= unit_val
            if 0 < n < unit_val // 10:
                parts.append("零")
    s = ""
    for val, ch in ((1000, "千"), (100, "百"), (10, "十")):
        d = n // val
        if d:
            s += _CN_DIGITS[d] + ch
        elif s and n % val:
            s += "零" if not s.endswith("零") else ""
        n %= val
    if n:
        s += _CN_DIGITS[n]
    if s.startswith("一十"):
        s = s[1:]
    return "".join(parts) + s


def zh_tokens(text: str) -> list[str]:
    try:
        import zhconv

        text = zhconv.convert(text, "zh-cn")
    except ImportError:
        pass
    # "12%" is read, and written in Chinese numerals, as 百分之十二: the mark goes in front
    text = re.sub(r"(\d+)\s*[%％]", r"百分之\1", text)
    text = re.sub(r"\d+", lambda m: _int_to_cn(int(m.group())), text)
    text = text.replace("两", "二")
    toks = []
    for piece in re.findall(r"[a-zA-Z]+|[\u3400-\u9fff]", text):
        toks.append(piece.lower())
    return toks


def edit_distance(a: list[str], b: list[str]) -> int:
    if not a:
        return len(b)
    if not b:
        return len(a)
    prev = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        cur = np.empty_like(prev)
        cur[0] = i
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return int(prev[-1])


def error_rate(ref: str, hyp: str, lang: str) -> tuple[float, int]:
    tok = zh_tokens if lang == "zh" else en_tokens
    r, h = tok(ref), tok(hyp)
    return (edit_distance(r, h) / max(1, len(r))) * 100.0, len(r)


def chrf(hyps: list[str], refs: list[str]) -> float:
    import sacrebleu

    return float(sacrebleu.corpus_chrf(hyps, [refs]).score)

