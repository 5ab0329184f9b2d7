"""Prometheus metrics for a running session, served with the official client library
(``relay run --metrics-port [HOST:]PORT``; loopback unless a host is given). Names, units and
labels are listed in docs/OBSERVABILITY.md.

Latency histograms are fed from the session's ``LatencyTracker`` (so they hold exactly the
figures the summary reports); gauges are read from the pipeline at scrape time."""

from __future__ import annotations

import logging
import threading

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from app.core.errors import UserError
from app.pipeline.messages import Translation
from app.pipeline.supervisor import StageRestarted

log = logging.getLogger("relay.metrics")

# seconds; sub-second steps where streaming latencies live, then up to the dub's skip limit
BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0)
# tracker list -> (histogram, labels)
_FEEDS = (("asr_first_token", "asr_first_token", {}), ("mt_queue_wait", "mt_queue_wait", {}),
          ("tts_first_audio", "tts_first_audio", {}), ("e2e_subtitle", "e2e", {"output": "subtitle"}),
          ("e2e_dub", "e2e", {"output": "dub"}))
CLOUD_STATES = ("connecting", "cloud", "cloud-lost", "local", "cloud-available", "failed")


def parse_bind(value: str) -> tuple[str, int]:
    """'9100' → loopback:9100; 'HOST:PORT' binds HOST (the user's choice)."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    try:
        n = int(port)
    except ValueError:
        raise UserError(f"--metrics-port: '{value}' is not a port (PORT or HOST:PORT)") from None
    if not 0 <= n <= 65535:
        raise UserError(f"--metrics-port: {n} is not a port number (0-65535)")
    return host, n


class SessionMetrics:
    """Bus observer and scrape-time collector for one pipeline at a time (``attach`` moves it
    to the next session, as the window's Start/Stop does)."""

    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self.asr_first_token = Histogram("asr_first_token_latency_seconds",
                                         "Source word heard → it first appeared in a hypothesis",
                                         registry=registry, buckets=BUCKETS)
        self.mt_queue_wait = Histogram("mt_queue_wait_seconds", "Segment committed → MT started on it",
                                       registry=registry, buckets=BUCKETS)
        self.tts_first_audio = Histogram("tts_first_audio_latency_seconds",
                                         "Translation committed → its first dub audio existed",
                                         registry=registry, buckets=BUCKETS)
        self.e2e = Histogram("e2e_latency_seconds", "Source word heard → its subtitle shown / its dub started",
                             ["output"], registry=registry, buckets=BUCKETS)
        self.restarts = Counter("relay_stage_restarts", "Stage workers replaced by the supervisor",
                                ["stage", "reason"], registry=registry)
        self.segments = Counter("relay_segments", "Committed segments translated", registry=registry)
        self.pipe = None
        self.capture = None
        self._pos: dict[str, int] = {}
        self._lock = threading.Lock()
        registry.register(_PipelineCollector(self))

    def attach(self, pipe, capture=None) -> None:
        with self._lock:
            self.pipe, self.capture = pipe, capture
            self._pos = {name: 0 for name, _, _ in _FEEDS}
        pipe.bus.subscribe(self)

    def __call__(self, ev) -> None:
        if isinstance(ev, StageRestarted):
            self.restarts.labels(ev.stage, ev.reason).inc()
        elif isinstance(ev, Translation) and not ev.preview:
            self.segments.inc()
        with self._lock:
            pipe = self.pipe
            if pipe is None:
                return
            tracker = pipe.tracker  # subscribed before us: it has already seen this event
            for name, hist, labels in _FEEDS:
                values = getattr(tracker, name)
                i = self._pos[name]
                if len(values) > i:
                    h = getattr(self, hist)
                    h = h.labels(**labels) if labels else h
                    for v in values[i:]:
                        h.observe(v)
                    self._pos[name] = len(values)


class _PipelineCollector:
    """What is read at scrape time: queue depths, dropped audio, degradation level, cloud link."""

    def __init__(self, metrics: SessionMetrics):
        self.m = metrics

    def collect(self):
        pipe, capture = self.m.pipe, self.m.capture
        depth = GaugeMetricFamily("relay_queue_depth", "Items waiting in a pipeline queue", labels=["queue"])
        dropped = CounterMetricFamily("relay_dropped_blocks", "Audio lost before recognition read it",
                                      labels=["where"])
        level = GaugeMetricFamily("relay_degradation_level", "Degradation policy level (0 = full quality)")
        link = GaugeMetricFamily("relay_cloud_link_state", "Cloud link state (1 for the current one)",
                                 labels=["state"])
        if pipe is not None:
            for q in (getattr(pipe, "seg_q", None), getattr(pipe, "tts_q", None)):
                if q is not None:
                    depth.add_metric([q.name], len(q))
            stage = getattr(pipe, "asr_stage", None)
            if stage is not None:
                dropped.add_metric(["ring_overrun"], stage.cursor.overruns)
            if capture is not None:
                dropped.add_metric(["capture_overflow"], capture.stats.overflows)
            policy = getattr(pipe, "policy", None)
            level.add_metric([], policy.engine.level if policy is not None else 0)
            status = getattr(pipe, "status", None)  # a cloud client
            if status is not None:
                for s in CLOUD_STATES:
                    link.add_metric([s], 1.0 if status == s else 0.0)
        yield from (depth, dropped, level, link)


class MetricsExporter:
    def __init__(self, host: str, port: int):
        self.registry = CollectorRegistry()
        self.metrics = SessionMetrics(self.registry)
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as e:
            raise UserError(f"--metrics-port: cannot listen on {host}:{port} ({e.strerror or e})") from None
        self.host, self.port = host, self._server.server_port
        log.info("metrics on http://%s:%d/metrics", host, self.port)

    def attach(self, pipe, capture=None) -> None:
        self.metrics.attach(pipe, capture)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_exporter(bind: str) -> MetricsExporter:
    host, port = parse_bind(bind)
    return MetricsExporter(host, port)
