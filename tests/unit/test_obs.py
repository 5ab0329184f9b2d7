"""Observability with fake backends: the Prometheus exporter, the leveled session log (no text
above DEBUG), the session report and its plot, the fault-injection spec."""

import io
import logging
import urllib.request

import pytest

from app.core.errors import UserError
from app.obs import faults, logs, report
from app.obs.faults import FaultyBackend
from app.obs.metrics import MetricsExporter, parse_bind
from app.pipeline.engine import PipelineConfig, StreamingPipeline
from app.pipeline.segmenter import SegmenterConfig
from app.pipeline.mt_stage import MTConfig
from app.pipeline.recognizer import ASRConfig

from .fakes import FakeASR, FakeMT, FakeTTS, FakeVAD, speech


def pipeline(mt=None):
    return StreamingPipeline(FakeASR(), mt or FakeMT(), FakeTTS(), FakeVAD(), PipelineConfig(
        asr=ASRConfig(catch_up=False), mt=MTConfig(previews=False), segmenter=SegmenterConfig(lang="en", eager_units=0)))


def run(pipe):
    pipe.start()
    audio = speech(6.0, 1.0)
    for off in range(0, len(audio), 1600):
        pipe.push_audio(audio[off:off + 1600], wait_if_full=True)
    pipe.finish(timeout=30)
    return pipe


def scrape(exp) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_exporter_serves_the_trackers_figures_on_loopback():
    exp = MetricsExporter(*parse_bind("0"))
    try:
        assert exp.host == "127.0.0.1"
        mt = FaultyBackend(FakeMT(), "mt", faults.parse("mt:raise@2"))
        pipe = pipeline(mt)
        exp.attach(pipe)
        run(pipe)
        m = scrape(exp)
        t = pipe.tracker
        assert m["asr_first_token_latency_seconds_count"] == len(t.asr_first_token) > 0
        assert m["mt_queue_wait_seconds_count"] == len(t.mt_queue_wait) > 0
        assert m["tts_first_audio_latency_seconds_count"] == len(t.tts_first_audio) > 0
        assert m['e2e_latency_seconds_count{output="subtitle"}'] == len(t.e2e_subtitle)
        assert m['e2e_latency_seconds_count{output="dub"}'] == len(t.e2e_dub)
        assert m['e2e_latency_seconds_sum{output="subtitle"}'] == pytest.approx(sum(t.e2e_subtitle))
        assert m['relay_stage_restarts_total{reason="error",stage="mt"}'] == 1
        assert m["relay_segments_total"] == len(pipe.record.segments)
        assert m['relay_queue_depth{queue="segments"}'] == 0
        assert 'relay_dropped_blocks_total{where="ring_overrun"}' in m
        assert m["relay_degradation_level"] == 0
    finally:
        exp.close()


def test_bind_parsing():
    assert parse_bind("9100") == ("127.0.0.1", 9100)
    assert parse_bind("0.0.0.0:9100") == ("0.0.0.0", 9100)
    for bad in ("x", "70000", "host:"):
        with pytest.raises(UserError):
            parse_bind(bad)


def test_busy_port_is_a_one_line_error():
    exp = MetricsExporter("127.0.0.1", 0)
    try:
        with pytest.raises(UserError, match="cannot listen on 127.0.0.1"):
            MetricsExporter("127.0.0.1", exp.port)
    finally:
        exp.close()


def session_log(level):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.LogfmtFormatter())
    lg = logging.getLogger(f"relay.test.{level}")
    lg.handlers[:] = [handler]
    lg.setLevel(level)
    lg.propagate = False
    pipe = pipeline()
    pipe.bus.subscribe(logs.SessionLog(pipe, lg))
    run(pipe)
    return stream.getvalue().splitlines(), pipe


def test_info_log_has_per_segment_metrics_and_no_text():
    lines, pipe = session_log(logging.INFO)
    segs = [ln for ln in lines if "msg=segment " in ln]
    assert len(segs) == len(pipe.record.segments) > 0
    assert all("e2e_ms=" in ln and "mt_ms=" in ln and "level=INFO" in ln for ln in segs)
    texts = [w for s in pipe.record.segments for w in (s["source"] + " " + s["target"]).replace(".", "").split()]
    assert texts
    for line in lines:
        assert not any(w in line for w in texts), line


def test_debug_adds_text_and_trace_adds_timestamps():
    lines, pipe = session_log(logging.DEBUG)
    assert any(pipe.record.segments[0]["source"] in ln for ln in lines if "level=DEBUG" in ln)
    assert not any("level=TRACE" in ln for ln in lines)
    lines, _ = session_log(logs.TRACE)
    assert any("level=TRACE" in ln and "msg=committed" in ln and "ends=" in ln for ln in lines)


def test_log_level_names():
    assert logs.level_of("trace") == logs.TRACE
    assert logs.level_of(None, verbose=True) == logging.INFO
    with pytest.raises(UserError):
        logs.level_of("chatty")


def test_report_round_trip_table_and_plot(tmp_path):
    pipe = run(pipeline())
    summary = {"pair": "en-en", "mode": "pipeline/fast", "latency_ms": pipe.tracker.summary(),
               "segments": pipe.record.segments, "stages": pipe.stage_stats(), "audio_s": 7.0, "wall_s": 1.0}
    path = tmp_path / "s.json"
    report.write_report(str(path), summary, pipe)
    r = report.load(str(path))
    assert len(r["timeline"]) == len(pipe.tracker.timeline) > 0
    text = report.table(r)
    assert "e2e_subtitle" in text and "stage restarts: 0" in text
    png = tmp_path / "s.png"
    n = report.plot_png(r, str(png))
    assert n == len(r["timeline"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "s.png"]  # no temporary left behind


@pytest.mark.parametrize("content,needle", [(b"\xff\xfe not json", "not JSON"), (b'{"a": 1}', "not a session report"),
                                            (b"", "not JSON")])
def test_bad_report_files(tmp_path, content, needle):
    f = tmp_path / "x.json"
    f.write_bytes(content)
    with pytest.raises(UserError, match=needle):
        report.load(str(f))


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import os

    def boom(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        report.write_atomic(str(tmp_path / "r.json"), b"{}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spec", ["mt:explode@1", "mt:raise", "mem:raise@1", "asr:pressure@2s", "tts:raise@2s"])
def test_fault_spec_errors(spec):
    with pytest.raises(UserError, match="RELAY_FAULTS"):
        faults.parse(spec)


def test_fault_spec():
    got = faults.parse("mt:raise@3, asr:stall@5:30s,mem:pressure@4s:10s")
    assert [(f.target, f.kind, f.at) for f in got] == [("mt", "raise", 3), ("asr", "stall", 5), ("mem", "pressure", 4)]
    assert (got[1].seconds, got[2].seconds) == (30.0, 10.0)
    assert faults.from_env({"RELAY_STALL_S": "2"}) == ([], 2.0)
    with pytest.raises(UserError):
        faults.from_env({"RELAY_STALL_S": "soon"})
