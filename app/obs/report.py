"""Session reports: ``relay run --report session.json`` writes the summary (with the latency
timeline); ``relay report session.json`` prints it as a table and draws latency over time as a
PNG (with Qt's painter, offscreen). The report is an export the user asked for: like --srt it
carries the session's text (the segments)."""

from __future__ import annotations

import itertools
import json
import math
import os
import sys
import tempfile
from pathlib import Path

from app.core.errors import UserError

KINDS = {"e2e_subtitle": ("subtitle", (0x1f, 0x77, 0xb4)), "e2e_dub": ("dub", (0xd6, 0x27, 0x28))}
FORMAT = "relay-session-report/1"


def check_writable(path: str, what: str = "--report") -> None:
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise UserError(f"{path}: the folder it would be written to does not exist")
    if Path(path).is_dir():
        raise UserError(f"{what} {path}: is a folder")


def build(summary: dict, pipe) -> dict:
    timeline = [[round(at, 3), kind, round(v * 1000, 1)] for at, kind, v in list(pipe.tracker.timeline)]
    timeline.sort(key=lambda r: r[0])
    return {"format": FORMAT, **summary, "timeline": timeline}


def write_atomic(path: str, data: bytes) -> None:
    """All or nothing: a temporary file in the same folder, renamed over the target."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=str(target.resolve().parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; an export gets the usual mode
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_report(path: str, summary: dict, pipe) -> None:
    try:
        write_atomic(path, json.dumps(build(summary, pipe), ensure_ascii=False, indent=1).encode())
    except OSError as e:
        raise UserError(f"{path}: cannot write the report ({e.strerror or e})") from None


def load(path: str) -> dict:
    p = Path(path)
    if not p.exists():
        raise UserError(f"{path}: no such file")
    if p.is_dir():
        raise UserError(f"{path}: is a folder, not a session report")
    try:
        data = json.loads(p.read_bytes())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UserError(f"{path}: not a session report (not JSON)") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{path}: not a session report (write one with relay run --report FILE)")
    lat = data.get("latency_ms")
    if not isinstance(lat, dict) or not isinstance(data.get("timeline"), list):
        raise UserError(f"{path}: session report is incomplete (no latency figures)")
    return data


def _ms(v) -> str:
    return "-" if v is None else f"{v:.0f}"


def table(r: dict) -> str:
    run = (f"  {r.get('audio_s', 0):.1f} s of audio in {r.get('wall_s', 0):.1f} s; "
           f"{len(r.get('segments') or [])} segments; rtf {r.get('rtf')}; load {r.get('load_s')} s, "
           f"warm-up {r.get('warmup_s')} s; peak RSS {r.get('peak_rss_mb')} MB")
    lines = [f"session: {r.get('pair')} {r.get('mode')}, input {r.get('input')}", run,
             "", f"  {'latency (ms)':<18}{'p50':>8}{'p95':>8}{'p99':>8}{'mean':>8}{'n':>7}"]
    for name, d in r["latency_ms"].items():
        if isinstance(d, dict):
            lines.append(f"  {name:<18}{_ms(d.get('p50')):>8}{_ms(d.get('p95')):>8}{_ms(d.get('p99')):>8}"
                         f"{_ms(d.get('mean')):>8}{d.get('n', 0):>7}")
    se = r.get("simuleval") or {}
    if se.get("AL_ms") is not None:
        lines.append(f"  AL {se['AL_ms']:.0f} ms, LAAL {se['LAAL_ms']:.0f} ms over {se['sentences']} sentences")
    sup = (r.get("stages") or {}).get("supervisor") or {}
    lines.append(f"  stage restarts: {sup.get('restarts', 0)}"
                 + (" (" + ", ".join(f"{k} {v}" for k, v in sup.get("by_stage", {}).items()) + ")"
                    if sup.get("restarts") else ""))
    for ev in sup.get("events", []):
        lines.append(f"    {ev['at']:>8.1f} s  {ev['stage']} {ev['reason']}: {ev['error']}; resumed from {ev['resumed_from']}")
    dg = r.get("degradation") or {}
    if dg.get("policy") == "on":
        lines.append(f"  degradation: max level {dg.get('max_level', 0)}, {len(dg.get('transitions', []))} transitions")
    q = (r.get("stages") or {}).get("queues") or {}
    if q:
        lines.append("  queues: " + ", ".join(f"{k} {v}" for k, v in q.items()))
    return "\n".join(lines)


def plot_png(r: dict, path: str, width: int = 960, height: int = 420) -> int:
    """Latency over session time, one series per output; returns the number of points drawn."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, Qt  # Qt only to draw --plot
    from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter, QPen  # (offscreen QImage)

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841 - fonts need an application
    series = {k: [(t, v) for t, kind, v in r["timeline"] if kind == k] for k in KINDS}
    pts = [p for s in series.values() for p in s]
    img = QImage(width, height, QImage.Format_ARGB32)
    img.fill(QColor("white"))
    painter = QPainter(img)
    painter.setRenderHint(QPainter.Antialiasing)
    left, right, top, bottom = 70, 20, 30, 50
    area = QRectF(left, top, width - left - right, height - top - bottom)
    t_max = max([t for t, _ in pts] + [1.0])
    v_max = max([v for _, v in pts] + [1000.0]) * 1.1
    step = 10 ** math.floor(math.log10(v_max / 2))
    step *= 2 if v_max / step > 10 else 1

    def xy(t, v):
        return QPointF(area.left() + area.width() * t / t_max, area.bottom() - area.height() * v / v_max)

    painter.setPen(QPen(QColor(220, 220, 220), 1))
    v = 0.0
    while v <= v_max:
        painter.drawLine(xy(0, v), xy(t_max, v))
        painter.setPen(QColor(80, 80, 80))
        painter.drawText(QRectF(0, xy(0, v).y() - 8, left - 6, 16), Qt.AlignRight | Qt.AlignVCenter, f"{v:.0f}")
        painter.setPen(QPen(QColor(220, 220, 220), 1))
        v += step
    painter.setPen(QPen(QColor(0, 0, 0), 1))
    painter.drawRect(area)
    painter.drawText(QRectF(0, height - 24, width, 20), Qt.AlignCenter, "session time (s)")
    painter.drawText(QRectF(area.left(), area.bottom() + 4, 80, 16), Qt.AlignLeft, "0")
    painter.drawText(QRectF(area.right() - 80, area.bottom() + 4, 80, 16), Qt.AlignRight, f"{t_max:.0f}")
    painter.drawText(QRectF(left, 6, width - left, 20), Qt.AlignLeft,
                     f"latency (ms) over time — {r.get('pair')} {r.get('mode')}")
    legend_x = width - right - 270
    for i, (kind, (label, rgb)) in enumerate(KINDS.items()):
        color = QColor(*rgb)
        painter.setPen(QPen(color, 1.5))
        s = series[kind]
        for a, b in itertools.pairwise(s):
            painter.drawLine(xy(*a), xy(*b))
        painter.setPen(QPen(color, 4))
        for p in s:
            painter.drawPoint(xy(*p))
        painter.drawLine(QPointF(legend_x + 135 * i, 16), QPointF(legend_x + 135 * i + 20, 16))
        painter.setPen(QColor(0, 0, 0))
        painter.drawText(QPointF(legend_x + 135 * i + 25, 20), f"{label} ({len(s)})")
    painter.end()
    buf = QByteArray()
    dev = QBuffer(buf)
    dev.open(QIODevice.WriteOnly)
    if not img.save(dev, "PNG"):
        raise UserError(f"{path}: could not encode the plot")
    dev.close()
    try:
        write_atomic(path, bytes(buf.data()))
    except OSError as e:
        raise UserError(f"{path}: cannot write the plot ({e.strerror or e})") from None
    return len(pts)


def cmd_report(args) -> int:
    r = load(args.file)
    plot = None if args.no_plot else (args.plot or str(Path(args.file).with_suffix(".png")))
    if plot:
        check_writable(plot, "--plot")
    print(table(r))
    if plot:
        n = plot_png(r, plot)
        print(f"plot: {plot} ({n} points)", file=sys.stderr)
    return 0
