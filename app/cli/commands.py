"""`relay` commands other than `run`: models, compile-kernels, and the dispatch of them all."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Callable

from app.accel.dispatch import numba_available
from app.accel.kernel_cache import BUNDLED_DIRNAME, compile_all
from app.audio.devices import cmd_devices
from app.cli.parser import build_parser
from app.cli.run import cmd_run
from app.cloud.server import cmd_serve
from app.core.errors import UserError
from app.core.memory import tune_allocator
from app.models import store
from app.models.catalog import PACKS, REQUIRES, default_packs
from app.obs.report import cmd_report

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None, *, window: Callable[[bool], int] | None = None,
         self_test: Callable[[bool], int] | None = None) -> int:
    """Run a `relay` command. The window and the self-test live in app.ui, which the command line
    does not import: the launcher (app/main.py) hands them in as ``window(demo)`` and
    ``self_test(with_window)``."""
    argv = sys.argv[1:] if argv is None else argv
    tune_allocator()  # before any worker thread exists: see app/core/memory.py
    try:
        args = build_parser().parse_args(argv)
        if args.self_test:
            if args.cmd is not None:
                raise UserError("--self-test takes no command")
            if self_test is None:
                raise UserError("--self-test needs the desktop window, which this entry point does not have")
            return self_test(not args.no_window)
        if args.no_window:
            raise UserError("--no-window goes with --self-test")
        if args.compile_kernels:
            if args.cmd is not None:
                raise UserError("--compile-kernels takes no command")
            return cmd_compile_kernels()
        if args.cmd in (None, "window"):  # `relay` alone opens the desktop window
            if window is None:
                raise UserError("this entry point has no desktop window; use `relay run`")
            return window(bool(getattr(args, "demo", False)))
        commands = {"models": cmd_models, "run": cmd_run, "devices": cmd_devices, "report": cmd_report,
                    "serve": cmd_serve}
        return commands[args.cmd](args)
    except UserError as e:
        print(f"relay: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("relay: interrupted", file=sys.stderr)
        return 130


def cmd_compile_kernels() -> int:
    if not numba_available():
        raise UserError("Numba is not installed: the NumPy front-end needs no compiling")
    out = compile_all()
    if getattr(sys, "frozen", False):  # where installer/build.sh puts the files to ship them
        out["bundle_cache_dir"] = os.path.join(getattr(sys, "_MEIPASS", os.path.dirname(sys.executable)),
                                               BUNDLED_DIRNAME)
    print(json.dumps(out), flush=True)
    return 0


def cmd_models(args) -> int:
    def progress(msg):
        print(msg, file=sys.stderr, flush=True)

    if args.mcmd in (None, "list"):
        inst = store.installed()
        print(f"model folder: {store.models_dir()}")
        print(f"{'pack':<18} {'role':<7} {'languages':<10} {'size':>7}  {'status':<13} licence")
        ids = list(PACKS) + [i for i in inst if i not in PACKS]
        for pid in ids:
            p = inst.get(pid)
            role = p.role if p else PACKS[pid].role
            langs = "-".join(p.languages if p else PACKS[pid].languages)
            lic = p.licence if p else PACKS[pid].licence
            size = f"{p.size / 1e6:.0f} MB" if p else "-"
            status = ("imported" if p.manifest.get("imported") else "installed") if p else "not installed"
            if not p and pid in PACKS and PACKS[pid].optional:
                status = "optional"
            print(f"{pid:<18} {role:<7} {langs:<10} {size:>7}  {status:<13} {lic}")
        missing = [pid for pid in default_packs() if pid not in inst]
        if missing:
            print(f"install with: relay models install {' '.join(missing)}")
        llm = [pid for pid, pk in PACKS.items() if pk.role == "llm" and pid not in inst]
        if llm:
            print(f"optional, a stronger translator for final text (zh→en): relay models install {llm[-1]}")
        return 0
    if args.mcmd == "install":
        packs = args.packs or default_packs()
        wh = Path(args.wheelhouse) if args.wheelhouse else None
        inst, want = store.installed(), []
        for pid in packs:  # an LLM pack brings its runtime
            want += [r for r in REQUIRES.get(pid, ()) if r not in inst and r not in want and r not in packs]
            want.append(pid)
        for pid in want:
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
