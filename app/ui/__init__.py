"""Qt desktop interface (PySide6). The pipeline never imports this package."""

import sys
from importlib.metadata import version

from app.core.errors import UserError


def _check_shiboken() -> None:
    """shiboken6 6.12.0 returns None/True/False without a new reference (only harmless on Python
    3.12+, where they are immortal): on 3.10/3.11 a session dies after a few thousand Qt calls
    with "deallocating None". pyproject excludes that release; say so if it is installed anyway."""
    if sys.version_info >= (3, 12):
        return
    try:
        v = version("shiboken6")
    except Exception:
        return
    if v.startswith("6.12.0"):
        raise UserError(f"PySide6 {v} crashes on Python {sys.version_info.major}.{sys.version_info.minor}; "
                        "install another release: pip install 'PySide6-Essentials!=6.12.0'")


_check_shiboken()
