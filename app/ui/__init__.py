"""Qt desktop interface (PySide6). The pipeline never imports this package."""

import sys


def _immortal_singletons() -> None:
    """shiboken6 6.12 returns None/True/False without a new reference (correct only on Python
    3.12+, where they are immortal), so on 3.10/3.11 every Qt call that returns nothing or a
    bool takes one reference away and a long session dies with "deallocating None". Give the
    three singletons the huge reference count 3.12 gives them; they are static and are never
    freed either way."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("shiboken6").split(".")[:2])
    except Exception:
        return
    if (major, minor) < (6, 12):
        return
    import ctypes

    for obj in (None, True, False):
        ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40


_immortal_singletons()
