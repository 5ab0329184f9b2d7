"""`relay serve` under abuse: threads, RSS and a healthy session's latency before, during and
after each attack. Loopback only; every loop is bounded in count and time and stops by itself.

The server is a child process started through ``cmd_serve`` (the CLI's entry) with the limits of
``ServerLimits`` (env ``RELAY_SERVE_*``). A healthy real-time session runs throughout (zh clip
looped, no TTS) and gives the e2e subtitle latency (segment end heard → its translation received)
and the heartbeat round trip per phase. Each attack runs in its own child process (no GIL shared
with the healthy client):

- churn: N sessions opened and ended every wrong way (closed without `end`, killed, killed right
  after `end`), 4 at a time; the server's threads and RSS afterwards vs the baseline;
- flood: one client sends one-sample frames as fast as it can until it is closed;
- silent: one real-time client reads nothing (4 KiB receive buffer) and pings 50 times a second;
  the server runs with a 4 KiB send buffer (RELAY_SERVE_SEND_BUFFER) so that the little it
  sends fills the way within seconds (a dub stream fills 64 KiB as fast, at 30-40 KB/s);
  on loopback the silent client's own TCP then stops carrying its data too, so the server
  closes it for silence (``timeout``) or a blocked send (``slow_client``), whichever comes first;
- fuzz: N fuzzed frames (seeded) over as many sessions as it takes;
- shutdown: SIGINT with sessions open (one busy, one killed after `end`, one silent).

Run: python bench/server_abuse.py [--sessions 1000] [--fuzz-frames 10000] [--phase-s 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.server_abuse_clients import ATTACKS, TOKEN, Healthy  # noqa: E402


def attack_cmd(name: str, url: str, cert: str, arg: float) -> list[str]:
    return [sys.executable, __file__, "--attack", name, "--url", url, "--cert", cert, "--arg", str(arg)]


def nice() -> None:
    # lowest priority: on a small machine the attacker's own CPU would otherwise be what slows
    # the healthy session down (a real attacker's CPU is elsewhere)
    os.nice(19)


def run_attack(name: str, url: str, cert: str, arg: float) -> dict:
    """In a child process, bounded by its own loop bounds and a timeout."""
    p = subprocess.run(attack_cmd(name, url, cert, arg), capture_output=True, text=True, timeout=1800,
                       preexec_fn=nice)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"failed": p.stderr[-500:]}


# -- the server and the measurements ---------------------------------------------------------------

class ServerProc:
    def __init__(self, folder: Path, env: dict):
        cert, key = folder / "cert.pem", folder / "key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        tokens = folder / "tokens"
        tokens.write_text(TOKEN + "\n")
        tokens.chmod(0o600)
        self.cert, self.log = str(cert), folder / "server.log"
        code = ("import sys, argparse; from app.cloud.server import cmd_serve; "
                "sys.exit(cmd_serve(argparse.Namespace(host='127.0.0.1', port=0, cert=sys.argv[1], key=sys.argv[2], "
                "tokens=sys.argv[3], verbose=True)))")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(cert), str(key), str(tokens)], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT), **env},
                                     stderr=open(self.log, "w"), stdout=subprocess.DEVNULL)
        end = time.monotonic() + 300
        while time.monotonic() < end:
            m = re.search(r"serving on wss://127.0.0.1:(\d+)", self.log.read_text())
            if m:
                self.url = f"wss://127.0.0.1:{m.group(1)}"
                break
            if self.proc.poll() is not None:
                raise RuntimeError(self.log.read_text()[-2000:])
            time.sleep(0.2)
        else:
            raise RuntimeError("the server did not start")
        import psutil

        self.ps = psutil.Process(self.proc.pid)

    def sample(self) -> tuple[int, float]:
        return self.ps.num_threads(), self.ps.memory_info().rss / 2 ** 20

    def settle(self, threads0: int, timeout: float = 60.0) -> tuple[int, float]:
        """Threads and RSS once the server is back to its baseline thread count (or the timeout)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            t, _ = self.sample()
            if t <= threads0:
                break
            time.sleep(0.5)
        time.sleep(3.0)  # a teardown's trim runs at most every 2 s
        return self.sample()

    def closed_with(self, since: int = 0) -> dict:
        """Sessions closed by the server per reason (from its log, after offset ``since``), with
        how long the abusers (not 'client left', 'done') lasted."""
        out: dict[str, int] = {}
        for why, after in re.findall(r"session \w+ closed \(([\w ]+)\) after ([\d.]+) s", self.log.read_text()[since:]):
            out[why] = out.get(why, 0) + 1
            if why not in ("client left", "done", "shutdown"):
                out[f"{why} after s"] = float(after)
        return out

    def tracebacks(self) -> int:
        return self.log.read_text().count("Traceback")


def pct(xs, q):
    return round(float(np.percentile(np.asarray(xs) * 1000, q)), 1) if xs else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--fuzz-frames", type=int, default=10000)
    ap.add_argument("--phase-s", type=float, default=20.0, help="quiet phase and attack bound (s)")
    ap.add_argument("--only", default="churn,flood,silent,fuzz", help="attacks to run, in order")
    ap.add_argument("--log", help="keep the server's log (-v) in this file")
    for hidden in ("--attack", "--url", "--cert", "--arg"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.attack:
        out = ATTACKS[a.attack](a.url, a.cert, int(float(a.arg)) if a.attack in ("churn", "fuzz") else float(a.arg))
        print(json.dumps(asyncio.run(out) if asyncio.iscoroutine(out) else out))
        return 0

    env = {"RELAY_SERVE_MAX_SESSIONS_PER_TOKEN": "16", "RELAY_SERVE_SEND_BUFFER": "4096", "HF_HUB_OFFLINE": "1"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        srv = ServerProc(Path(tmp), env)
        print(f"server up: {srv.url} ({', '.join(f'{k}={v}' for k, v in env.items())})", flush=True)
        run_attack("churn", srv.url, srv.cert, 12)  # warm: every lazily made object exists
        healthy = Healthy(srv.url, srv.cert)
        healthy.thread.start()
        time.sleep(8.0)
        threads0 = srv.sample()[0]

        def phase(name, attack=None, arg=0.0):
            healthy.phase = name
            before = srv.sample()
            peak, stop = list(before), threading.Event()

            def watch():
                while not stop.wait(0.5):
                    peak[:] = [max(x, y) for x, y in zip(peak, srv.sample())]

            w = threading.Thread(target=watch, daemon=True)
            w.start()
            t0, mark = time.monotonic(), len(srv.log.read_text())
            result = run_attack(attack, srv.url, srv.cert, arg) if attack else time.sleep(a.phase_s) or {}
            stop.set()
            w.join()
            healthy.phase = f"after {name}"
            after = srv.settle(threads0) if attack else srv.sample()
            result["server closed"] = srv.closed_with(mark)
            e2e, rtt = healthy.e2e.get(name, []), healthy.rtt.get(name, [])
            rows.append({"phase": name, "s": round(time.monotonic() - t0, 1), "threads": [before[0], peak[0], after[0]],
                         "rss_mb": [round(before[1]), round(peak[1]), round(after[1])], "e2e_p50_ms": pct(e2e, 50),
                         "n": len(e2e), "rtt_p50_ms": pct(rtt, 50), "rtt_p95_ms": pct(rtt, 95),
                         "e2e_after_p50_ms": pct(healthy.e2e.get(f"after {name}", []), 50), "result": result})
            print(json.dumps(rows[-1]), flush=True)

        phase("quiet")
        threads0, rss0 = srv.sample()
        bounds = {"churn": a.sessions, "flood": a.phase_s, "silent": a.phase_s, "fuzz": a.fuzz_frames}
        for name in a.only.split(","):
            phase(name, name, bounds[name])
        healthy.phase = "end"
        t_end, r_end = srv.settle(threads0)
        healthy.stop.set()
        healthy.thread.join(10)
        # graceful shutdown with sessions open: busy, killed after `end`, silent
        holders = [subprocess.Popen(attack_cmd(n, srv.url, srv.cert, 30), stdout=subprocess.PIPE, text=True,
                                    preexec_fn=nice) for n in ("hold", "silent")]
        holders[0].stdout.readline()  # "ready"
        time.sleep(2.0)
        t = time.monotonic()
        srv.proc.send_signal(signal.SIGINT)
        try:
            srv.proc.wait(30)
            shutdown_s = round(time.monotonic() - t, 2)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            shutdown_s = None
        for h in holders:
            h.kill()
            h.wait()
        closed, tracebacks = srv.closed_with(), srv.tracebacks()
        if a.log:
            Path(a.log).write_text(srv.log.read_text())

    print("\nphase     threads before/peak/after   RSS MB before/peak/after   healthy e2e p50 (n)   hb RTT p50/p95")
    for r in rows:
        print(f"{r['phase']:<9} {'/'.join(map(str, r['threads'])):>24} {'/'.join(map(str, r['rss_mb'])):>25}"
              f"   {r['e2e_p50_ms']!s:>8} ms ({r['n']:>3})   {r['rtt_p50_ms']}/{r['rtt_p95_ms']} ms")
    print(f"\nbaseline threads {threads0}, RSS {rss0:.0f} MB; at the end threads {t_end} "
          f"({100 * (t_end - threads0) / threads0:+.1f} %), RSS {r_end:.0f} MB ({100 * (r_end - rss0) / rss0:+.1f} %)")
    print(f"sessions closed by the server with: {closed}")
    print(f"graceful shutdown with 3 sessions open: {shutdown_s} s; tracebacks in the server log: {tracebacks}")
    print(f"healthy session: {healthy.error or 'served throughout'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
