"""The codec contexts kept per thread (zstandard's compressor and decompressor), apart from ``compression``.

A zstd context costs several times the decoding of a small batch to make, so one is made per thread and reused;
it is not safe to share between threads, hence a ``threading.local``. They live in their own module because
``compression`` (the codecs' framings and limits) is long enough without them; ``compression`` imports them, so
its names keep working.
"""

from __future__ import annotations

import threading

import zstandard

__all__ = ["zstd_decoder"]

_CONTEXTS = threading.local()


def _zstd_dctx() -> zstandard.ZstdDecompressor:
    """This thread's decompressor: a context is not safe to share, and making one per call is the cost avoided."""
    try:
        return _CONTEXTS.dctx
    except AttributeError:
        _CONTEXTS.dctx = zstandard.ZstdDecompressor()
        return _CONTEXTS.dctx


def _zstd_cctx() -> zstandard.ZstdCompressor:
    """This thread's level 3 compressor (Kafka's ``compression.zstd.level`` default)."""
    try:
        return _CONTEXTS.cctx
    except AttributeError:
        _CONTEXTS.cctx = zstandard.ZstdCompressor(level=3)
        return _CONTEXTS.cctx


def zstd_decoder() -> object:
    """This thread's ``ZstdDecompressor.decompress``: the compiled walker calls it itself (as
    ``compression._zstd_fast`` does, after the same header checks, made in C) before ``compression._zstd_into``,
    sparing two Python calls per batch."""
    return _zstd_dctx().decompress
