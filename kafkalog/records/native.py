"""The optional compiled helpers (``_columns.c``): loaded once here so every user agrees on whether they are on.

Without a C compiler at install time the extension is absent and everything runs in Python;
``KAFKALOG_NO_EXTENSIONS=1`` turns it off at run time (tests run both paths and compare them).

Imported from a zip (kafkalog shipped to Spark executors, ``kafkalog.spark.session.package_zip``), the package
cannot load a compiled module in place (zipimport loads Python only): the one built for this interpreter, when the
zip holds it, is copied to a private cache dir and loaded from there (:func:`_from_zip`). A zip whose compiled
module was built for another Python or platform gives one warning and the pure-Python paths.
"""

from __future__ import annotations

import os
import sys
import warnings


def _from_zip():
    """The compiled module out of the zip this package was imported from, or None."""
    import hashlib
    import importlib.machinery
    import importlib.util
    import tempfile
    import zipfile
    import zipimport

    loader = globals().get("__loader__")
    if not isinstance(loader, zipimport.zipimporter):
        return None
    with zipfile.ZipFile(loader.archive) as zf:
        names = [n for n in zf.namelist() if n.startswith(loader.prefix + "_columns.") and not n.endswith(".c")]
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            name = loader.prefix + "_columns" + suffix
            if name not in names:
                continue
            data = zf.read(name)
            digest = hashlib.sha256(data).hexdigest()[:16]
            cache = os.path.join(tempfile.gettempdir(), f"kafkalog-ext-{os.getuid()}-{digest}")
            os.makedirs(cache, mode=0o700, exist_ok=True)
            if os.stat(cache).st_uid != os.getuid():
                return None
            target = os.path.join(cache, "_columns" + suffix)
            if not _holds(target, data):
                tmp = f"{target}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            try:
                spec = importlib.util.spec_from_file_location(__package__ + "._columns", target)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except (ImportError, OSError) as exc:
                warnings.warn(f"kafkalog: the shipped compiled decoder does not load here ({exc}); using the "
                              "pure-Python decoder", RuntimeWarning, stacklevel=2)  # fmt: skip
                return None
            sys.modules[spec.name] = module
            return module
    if names:
        warnings.warn(f"kafkalog: the shipped compiled decoder ({', '.join(os.path.basename(n) for n in names)}) "
                      f"was built for another Python or platform than {sys.implementation.cache_tag} "
                      f"({', '.join(importlib.machinery.EXTENSION_SUFFIXES)}); using the pure-Python decoder",
                      RuntimeWarning, stacklevel=2)  # fmt: skip
    return None


def _holds(path: str, data: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False


try:
    from . import _columns as compiled
except ImportError:  # built without a compiler, or imported from a zip: the pure-Python paths do everything
    try:
        compiled = _from_zip()
    except (OSError, ValueError):
        compiled = None

__all__ = ["compiled", "available", "extensions_enabled", "release_column_memory"]


def extensions_enabled() -> bool:
    """False when ``KAFKALOG_NO_EXTENSIONS`` asks for the pure-Python paths (of every compiled part of kafkalog)."""
    return not os.environ.get("KAFKALOG_NO_EXTENSIONS")


def available() -> bool:
    """True when the C extension is built and not disabled by ``KAFKALOG_NO_EXTENSIONS``."""
    return compiled is not None and extensions_enabled()


def release_column_memory() -> int:
    """Hand the compiled decoder's pool of freed column memory back to the OS; returns the resident bytes it held.

    The pool keeps up to ``mem_pool()[1]`` bytes of freed columns so the next decode reuses pages instead of
    faulting in fresh ones; a process that is done decoding (or about to fork) can give them back. 0 without the
    extension, which keeps no pool."""
    if compiled is None:
        return 0
    held = int(compiled.mem_pool()[0])
    compiled.mem_stats(True)
    return held
