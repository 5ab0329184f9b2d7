"""The `relay` entry point: the command line, with the desktop window and the self-test handed in.

app.cli and app.ui are siblings that never import each other; this launcher sits above both.
Qt is imported only when the window is asked for, after its system libraries were checked, so
the command line runs on machines without a display or Qt's xcb libraries."""

from __future__ import annotations

import os
import sys

from app.cli.commands import main as cli_main
from app.pipeline.stage import workers_alive


def _window(demo: bool) -> int:
    from app.ui.main import run_gui  # Qt loads only for the window (see the module docstring)

    return run_gui([], demo=demo)


def _self_test(with_window: bool) -> int:
    from app.ui.selftest import run  # Qt loads only for the window (see the module docstring)

    return run(window=with_window)


def main(argv: list[str] | None = None) -> int:
    return cli_main(argv, window=_window, self_test=_self_test)


def entry() -> None:
    """The process's entry (console script, `python -m app`, the frozen app): run ``main`` and exit.

    A model call that stalled cannot be interrupted in Python: the supervisor abandons its worker
    and the session ends without it. If such a thread is still inside the model library when the
    interpreter finalises, the library's C++ destructors race it (seen: SIGSEGV, or "terminate
    called without an active exception" and SIGABRT, instead of the exit code). Every output is
    written and closed by then, so the process leaves without finalising."""
    code = main()
    if workers_alive():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
