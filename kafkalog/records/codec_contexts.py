"""The codec contexts kept per thread (zstandard's compressor and decompressor) and the zstd fast path that uses
them, apart from ``compression``.

A zstd context costs several times the decoding of a small batch to make, so one is made per thread and reused;
it is not safe to share between threads, hence a ``threading.local``. They live in their own module because
``compression`` (the codecs' framings, bounds and limits) is long enough without them; ``compression`` imports
them, so its names keep working.
"""

from __future__ import annotations

import threading

import zstandard

from .native import compiled

__all__ = ["zstd_decoder"]

#: cramjam's streaming decoder refuses frames whose window exceeds zstd's default limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT
#: = 27); zstandard's one-shot decode into a bounded buffer would not, so such frames go to cramjam.
_ZSTD_WINDOW_LIMIT = 1 << 27
_CONTEXTS = threading.local()
#: the compiled decoder's maker of a libzstd context (``_columns.zstd_context``), None when it was built without
#: libzstd's headers (or is not built): ``zstd_decoder`` then hands it zstandard's decompress instead
_LIBZSTD_CONTEXT = getattr(compiled, "zstd_context", None)


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


def _zstd_fast(mv: bytes | memoryview, room: int) -> bytes | None:
    """A payload of one zstd frame decoded with this thread's reused context, when its output fits ``room``
    bytes; None for anything else (several or skippable frames, a content size of 0 or beyond ``room``, a window
    beyond the streaming limit, a dictionary, a frame that does not decode): ``compression``'s cramjam call then
    gives the answer. No allocation beyond ``room``: the frame's declared content size is checked before zstandard
    allocates it."""
    try:
        params = zstandard.get_frame_parameters(mv)
        size = params.content_size
        if size == 0 or (size > room and size != zstandard.CONTENTSIZE_UNKNOWN) or params.dict_id \
                or params.window_size > _ZSTD_WINDOW_LIMIT:
            return None
        out = _zstd_dctx().decompress(mv, max_output_size=room, allow_extra_data=False)
    except zstandard.ZstdError:
        return None
    return out if len(out) <= room else None


def zstd_decoder() -> object:
    """What the compiled walker decodes a payload of one plain zstd frame with (the header checks of ``_zstd_fast``
    made in C) before asking ``compression._zstd_into``: this thread's libzstd context when the extension was built
    with libzstd's headers (decoded in C straight into its buffer, no Python call per batch), else this thread's
    ``ZstdDecompressor.decompress``, which it calls itself."""
    if _LIBZSTD_CONTEXT is None:
        return _zstd_dctx().decompress
    try:
        return _CONTEXTS.libzstd
    except AttributeError:
        _CONTEXTS.libzstd = _LIBZSTD_CONTEXT()
        return _CONTEXTS.libzstd
