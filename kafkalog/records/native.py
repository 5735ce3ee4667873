"""The optional compiled helpers (``_columns.c``): loaded once here so every user agrees on whether they are on.

Without a C compiler at install time the extension is absent and everything runs in Python;
``KAFKALOG_NO_EXTENSIONS=1`` turns it off at run time (tests run both paths and compare them).
"""

from __future__ import annotations

import os

try:
    from . import _columns as compiled
except ImportError:  # built without a compiler: the pure-Python paths do everything
    compiled = None

__all__ = ["compiled", "available", "extensions_enabled"]


def extensions_enabled() -> bool:
    """False when ``KAFKALOG_NO_EXTENSIONS`` asks for the pure-Python paths (of every compiled part of kafkalog)."""
    return not os.environ.get("KAFKALOG_NO_EXTENSIONS")


def available() -> bool:
    """True when the C extension is built and not disabled by ``KAFKALOG_NO_EXTENSIONS``."""
    return compiled is not None and extensions_enabled()
