"""Cloud benchmark: N concurrent real-time sessions against one `relay serve` on this machine
(subtitle latency p50/p95 per N, micro-batching on vs off) and the fallback time over injected
link cuts. Run: RELAY_HOME=... python bench/cloud.py [--ns 1,2,4,8] [--cuts 20] [--clip zh_05.wav]"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.test_cloud import TOKEN, Server  # noqa: E402
from tests.integration.test_cloud_faults import FaultProxy  # noqa: E402


def sessions(url, cert, n, audio, hb_timeout=5.0):
    from app.cloud.client import CloudClient
    from app.session.options import SessionOptions
    from app.session.runner import feed_array

    lat, clients = [], []

    def one():
        c = CloudClient(url, TOKEN, cert, opts=SessionOptions(pair="zh-en", no_tts=True), fallback=False,
                        heartbeat_timeout=hb_timeout)
        c.start()
        feed_array(c, audio, realtime=True)
        c.finish(300)
        c.abort()
        clients.append(c)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        lat += c.tracker.e2e_subtitle
    a = np.asarray(lat) * 1000
    return {"n": n, "p50_ms": round(float(np.percentile(a, 50)), 0), "p95_ms": round(float(np.percentile(a, 95)), 0),
            "words": int(a.size), "switches": sum(len(c.switches) for c in clients)}


def cuts(url, cert, models, audio, k):
    from app.cloud.client import CloudClient
    from app.session.options import SessionOptions

    out, spurious = [], 0
    for _ in range(k):
        proxy = FaultProxy(int(url.rsplit(":", 1)[1]))
        c = CloudClient(f"wss://127.0.0.1:{proxy.port}", TOKEN, cert, opts=SessionOptions(pair="zh-en", no_tts=True),
                        models=models, heartbeat_timeout=0.2)
        c.start()
        block = 1600
        for i, off in enumerate(range(0, len(audio), block)):
            c.push_audio(audio[off:off + block])
            if i == 15:
                proxy.cut()
            time.sleep(0.1)
            if c.switches:
                break
        time.sleep(0.3)
        if c.switches and proxy.fault_at is None:
            spurious += 1
        elif c.switches:
            abs_sw = time.monotonic() - c.clock.now() + c.switches[0]["at_s"]
            out.append((abs_sw - proxy.fault_at) * 1000)
        c.finish(60)
        c.abort()
        proxy.close()
    a = np.asarray(out)
    return {"cuts": k, "switched": len(out), "spurious_before_cut": spurious, "p50_ms": round(float(np.percentile(a, 50)), 1),
            "p99_ms": round(float(np.percentile(a, 99)), 1), "max_ms": round(float(a.max()), 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="1,2,4,8")
    ap.add_argument("--cuts", type=int, default=20)
    ap.add_argument("--clip", default="zh_05.wav")
    a = ap.parse_args()
    from app.audio.files import load_audio
    from app.session.models import load_models
    from app.session.options import SessionOptions

    audio = load_audio(str(ROOT / "tests" / "data" / a.clip))
    res = {"clip": a.clip, "audio_s": round(len(audio) / 16000, 2), "sessions": {}}
    for batching in ("on", "off") if a.ns != "none" else ():
        with tempfile.TemporaryDirectory() as d:
            srv = Server(Path(d), env={"RELAY_SERVE_BATCHING": batching})
            try:
                res["sessions"][batching] = [sessions(srv.url, srv.cert, int(n), audio) for n in a.ns.split(",")]
            finally:
                srv.stop()
        print(json.dumps({batching: res["sessions"][batching]}), file=sys.stderr, flush=True)
    if res["sessions"]:
        res["ratio_p50_on_over_off"] = [round(x["p50_ms"] / y["p50_ms"], 2)
                                        for x, y in zip(res["sessions"]["on"], res["sessions"]["off"])]
    if a.cuts:
        models = load_models(SessionOptions(pair="zh-en", no_tts=True))
        with tempfile.TemporaryDirectory() as d:
            srv = Server(Path(d))
            try:
                res["fallback"] = cuts(srv.url, srv.cert, models, audio, a.cuts)
            finally:
                srv.stop()
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
