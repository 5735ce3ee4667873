"""The cleaner's optional compiled core (``_cleaner.c``): loaded once here so every user agrees on whether it is on.

Without a C compiler at install time the extension is absent and the cleaner runs in Python (a dict offset map,
records decoded as objects); ``KAFKALOG_NO_EXTENSIONS=1`` turns it off at run time, like the record decoder's
(tests run both paths and compare them).
"""

from __future__ import annotations

from kafkalog.records.native import extensions_enabled

try:
    from . import _cleaner as compiled
except ImportError:  # built without a compiler: the pure-Python paths do everything
    compiled = None

__all__ = ["compiled", "available"]


def available() -> bool:
    """True when the C extension is built and not disabled by ``KAFKALOG_NO_EXTENSIONS``."""
    return compiled is not None and extensions_enabled()
