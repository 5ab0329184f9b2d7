"""The observability options of ``relay run`` (file, live and cloud sources alike): logging
level, the metrics exporter, the session log, the report."""

from __future__ import annotations

import json
import os
import sys

from app.obs import faults
from app.obs.logs import SessionLog, level_of, setup_logging
from app.obs.metrics import start_exporter
from app.obs.report import check_writable, write_report
from app.pipeline.supervisor import StageRestarted


class RunObservability:
    """Started before the models load (a bad option or a busy port fails fast), attached to the
    pipeline once it exists, closed when the run ends."""

    def __init__(self, args):
        self.args = args
        setup_logging(level_of(getattr(args, "log_level", None), getattr(args, "verbose", False)))
        faults.from_env(os.environ)  # a malformed test-only knob fails before the models load
        if getattr(args, "report", None):
            check_writable(args.report)
        self.exporter = None
        if getattr(args, "metrics_port", None):
            self.exporter = start_exporter(args.metrics_port)
            print(f"relay: metrics on http://{self.exporter.host}:{self.exporter.port}/metrics",
                  file=sys.stderr, flush=True)

    def attach(self, pipe, capture=None) -> None:
        if self.exporter is not None:
            self.exporter.attach(pipe, capture)
        pipe.bus.subscribe(SessionLog(pipe))
        if getattr(self.args, "json", False):
            pipe.bus.subscribe(_json_restarts)

    def write_report(self, summary: dict, pipe) -> None:
        if getattr(self.args, "report", None):
            write_report(self.args.report, summary, pipe)

    def close(self) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None


def _json_restarts(ev) -> None:
    if isinstance(ev, StageRestarted):
        print(json.dumps({"type": "stage_restarted", **ev.as_dict()}), flush=True)
