"""`relay run`: one session from a file, a live device or a Relay server, through the runner."""

from __future__ import annotations

import os
import signal
import sys
import threading

from app.audio.files import open_audio
from app.audio.live import LiveSource
from app.cli.printer import DevicePrinter, Printer, print_result
from app.cloud.client import CloudClient
from app.cloud.link import validate_url
from app.core.errors import UserError
from app.obs.run import RunObservability
from app.session.build import build_pipeline, profanity_notes
from app.session.models import check_models, load_models
from app.session.options import DEMO_CLIP, SessionOptions
from app.session.outputs import Outputs
from app.session.runner import FileSource, run_session


def options_from_args(args) -> SessionOptions:
    return SessionOptions(pair=args.pair, no_tts=args.no_tts, serial=args.serial, realtime=args.realtime,
                          beam=args.beam, asr_step=args.asr_step, commit_lookahead=args.commit_lookahead,
                          first_commit_lookahead=args.first_commit_lookahead, asr_context=args.asr_context,
                          confident_commit=args.confident_commit, confident_lookahead=args.confident_lookahead,
                          asr_model=args.asr_model, preview=args.preview, eager=args.eager, threads=args.threads,
                          accel=args.accel, speculative=args.speculative, policy=args.policy,
                          final_pass=not args.no_final_pass, final_lead_in=args.final_lead_in,
                          final_pause=args.final_pause, final_wait=args.final_wait,
                          final_early=args.final_early,
                          final_mt=args.final_mt, final_mt_budget=args.final_mt_budget,
                          profanity=args.profanity)


def _check_combinations(args) -> None:
    if args.source and (args.input or args.demo):
        raise UserError("--source captures live audio: leave out --input/--demo")
    if args.cloud and args.serial:
        raise UserError("--serial is a local comparison: leave out --cloud")
    if args.source and args.serial:
        raise UserError("--serial compares on files: use it with --input")
    if args.demo and not args.input:
        args.input = str(DEMO_CLIP)
    if not args.input and not args.source:
        raise UserError("say which audio to use: --input FILE (or --demo, or --source DEVICE)")
    if args.cloud:
        problem = validate_url(args.cloud)
        if problem:
            raise UserError(f"{args.cloud}: {problem}")


def cmd_run(args) -> int:
    obs = RunObservability(args)  # log level, --report path, --metrics-port: before anything loads
    _check_combinations(args)
    token = None
    if args.cloud:
        token = args.token or _read_token(args.token_file) or os.environ.get("RELAY_TOKEN")
        if not token:
            raise UserError("--cloud needs an access token: --token-file FILE, $RELAY_TOKEN or --token T")
    opts = options_from_args(args)
    if args.source:
        opts.realtime = True  # a live source has its own pace
    opts.validate()

    def status(msg):
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    if args.source:  # devices are resolved (a wrong name fails) before any model loads
        source = LiveSource(args.source, args.dub_device, args.passthrough, args.duck, duration=args.duration,
                            dub=not opts.no_tts, accel=opts.accel_request)
    else:
        source = FileSource(open_audio(args.input, accel=opts.accel_request), os.fsdecode(args.input),
                            realtime=opts.realtime)
    outputs = Outputs(args.srt, args.vtt, args.dub_out)
    local_models = not (args.cloud and args.no_fallback)
    models = None
    if local_models:
        plan = check_models(opts)
        for note in plan.notes:
            print(f"relay: note: {note}", file=sys.stderr)
        outputs.check(has_tts=plan.tts_pack is not None)
        models = load_models(opts, status, plan=plan)  # with --cloud: warm, so a fallback is instant
        for note in profanity_notes(opts, models):
            print(f"relay: note: {note}", file=sys.stderr)
    else:
        outputs.check(has_tts=not opts.no_tts)
    if args.cloud:
        session = CloudClient(args.cloud, token, args.ca, opts=opts, models=models, fallback=local_models,
                              on_status=lambda s: print(f"relay: cloud: {s}", file=sys.stderr, flush=True))
    else:
        session = build_pipeline(models, opts)
    if source.live and models is not None:
        source.accel = models.accel  # resample with the kernels the models' front-end uses
    stop = threading.Event()
    old_term = signal.signal(signal.SIGTERM, lambda *a: stop.set())
    try:
        summary = run_session(session, models, opts, source, sinks=_sinks(args, source), outputs=outputs, obs=obs,
                              stop=stop, on_started=lambda s: _started(source), status=status)
    except KeyboardInterrupt:  # a second Ctrl-C while finishing: what was processed is written
        return 130
    finally:
        signal.signal(signal.SIGTERM, old_term)
    print_result(summary, args.json)
    if "error" in summary:
        raise UserError(f"pipeline failed: {summary['error']}")
    return 0


def _read_token(path: str | None) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise UserError(f"{path}: cannot read the token file ({e.strerror})") from None
    if not token or "\n" in token:
        raise UserError(f"{path}: the token file must hold one token")
    return token


def _sinks(args, source) -> list:
    sinks = [Printer(args.json)]
    if source.live:
        sinks.append(DevicePrinter(args.json))
    return sinks


def _started(source) -> None:
    if source.live:  # stderr, also with --json (stdout carries the events): scripts wait for this line
        print(f"relay: listening on {source.source.label}" + (f", dub on {source.sink.label}" if source.sink else "")
              + " — Ctrl-C to stop", file=sys.stderr, flush=True)

