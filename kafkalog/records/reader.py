"""Walk a buffer or file of record batches in file order, as Kafka's FileLogInputStream does.

Iteration never raises for bad bytes: it stops at the first truncated or structurally impossible batch (and, with
``validate=True``, at the first CRC failure) and records where, so callers (segment recovery, verify, dump) can
report "valid up to X, then N invalid bytes". A length field is always compared with the bytes present before it
is used, so a lying length never leads to an allocation or a read beyond the source.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import struct
from collections.abc import Iterator

from crc32c import crc32c

from kafkalog.io.file_access import drop_pages, map_file

from ..errors import (
    CorruptRecordError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    TieredConfigError,
    UnsupportedMagicError,
)
from .batch import HEADER, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, RecordBatch
from .legacy import LegacyBatch

__all__ = ["BatchReader", "SourceReader", "read_batches", "open_source", "HEADER_SIZE_UP_TO_MAGIC", "V2_MIN_LENGTH"]

HEADER_SIZE_UP_TO_MAGIC = 17  # baseOffset, length, partitionLeaderEpoch/crc, magic
LEGACY_RECORD_OVERHEAD_V0 = 14  # crc, magic, attributes, key length, value length
LEGACY_RECORD_OVERHEAD_V1 = 22  # + timestamp

V2_MIN_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # the smallest length field of a v2 batch
_LEGACY_MINIMUM = (LEGACY_RECORD_OVERHEAD_V0, LEGACY_RECORD_OVERHEAD_V1)  # the smallest size of a message, by magic


def _framing_error(magic: int, size: int, minimum: int, left: int, pos: int) -> CorruptRecordError:
    """Why a batch (magic 2) or message (0, 1) whose size field is below ``minimum`` or past the ``left`` bytes of
    the source cannot be read."""
    if size < minimum:
        if magic == 2:
            return CorruptRecordError(f"batch length {size} is smaller than the v2 header", position=pos)
        return CorruptRecordError(f"message size {size} is smaller than the minimum {minimum}", position=pos)
    unit, field = ("batch", "length") if magic == 2 else ("message", "size")
    return CorruptRecordError(
        f"truncated {unit}: {field} says {size + LOG_OVERHEAD} bytes, {left} present", position=pos
    )


_PREFIX = struct.Struct(">qiib")
_unpack_prefix = _PREFIX.unpack_from
_unpack_header = HEADER.unpack_from


def open_source(source, *, populate: bool = True) -> tuple[memoryview, object | None]:
    """A read-only memoryview over ``source`` (path, bytes, bytearray, memoryview, mmap) and the object to keep
    alive (the mmap) if one was created. ``populate=False`` maps a path without prefaulting it, for one pass over
    a file larger than memory should hold (see :meth:`BatchReader.release_before`)."""
    if isinstance(source, memoryview):
        return (source if source.format == "B" and source.ndim == 1 else source.cast("B")), None
    if isinstance(source, (bytes, bytearray, mmap.mmap)):
        return memoryview(source), None
    if isinstance(source, (str, os.PathLike)):
        _refuse_transformed(os.fspath(source))
        with open(source, "rb") as f:
            mm = map_file(f, 0, populate=populate)
            if mm is None:  # empty, or a filesystem that cannot map: read it
                return memoryview(f.read()), None
        return memoryview(mm), mm
    raise InvalidArgumentTypeError(f"cannot read record batches from {type(source).__name__}")


#: an Aiven tiered-storage ``.log`` object: ``<20 digits>-<segment id>.log`` beside its ``.rsm-manifest``
_TIERED_LOG = re.compile(r"\d{20}-[A-Za-z0-9_-]{22}\.log$")


def _refuse_transformed(path: str) -> None:
    """A ``.log`` object Aiven's tiered-storage plugin stored compressed or encrypted holds chunks, not batches:
    read as a segment it would look like a few bytes of garbage (zero records). Say what it is instead."""
    if not _TIERED_LOG.search(path):
        return
    manifest = path[: -len(".log")] + ".rsm-manifest"
    try:
        with open(manifest, "rb") as f:
            m = json.loads(f.read(16 << 20))
    except (OSError, ValueError):
        return  # no manifest beside it (Kafka's LocalTieredStorage: plain segments), or not one to go by
    if isinstance(m, dict) and (m.get("compression") or m.get("encryption") is not None):
        raise TieredConfigError(f"{path}: an Aiven tiered-storage object stored "
                                f"{'encrypted' if m.get('encryption') is not None else 'zstd-compressed'} in chunks "
                                "(see its .rsm-manifest): read it through kafkalog.archive.tiered.AivenSegment, or kafkalog "
                                "verify/dump --rsm-config FILE")  # fmt: skip


class SourceReader:
    """A reader over ``open_source``'s view (``buffer``) and mapping (``_keep``): ``release_before()``
    (``_released`` tracks it), ``close()`` and ``with``."""

    __slots__ = ()

    #: pages are given back in steps of this many bytes (one madvise call per step)
    RELEASE_EVERY = 32 << 20

    def release_before(self, position: int) -> None:
        """Give back the mapped pages wholly before ``position`` (a no-op until 32 MiB have passed, or when the
        source is not a file this reader mapped).

        Every page a pass over an mmap touches stays in the process's resident set until the mapping closes, so
        dumping a 1 GiB segment would show 1 GiB of RSS; ``MADV_DONTNEED`` on a read-only file mapping drops the
        pages from this process only (the page cache keeps them), which keeps one pass's memory flat.
        """
        mm = self._keep
        if not isinstance(mm, mmap.mmap) or position - self._released < self.RELEASE_EVERY:
            return
        end = position - position % mmap.PAGESIZE
        if drop_pages(mm, self._released, end - self._released):
            self._released = end

    def close(self) -> None:
        """Release the mmap when no view of it is still alive (otherwise the GC releases it later)."""
        if self._keep is not None:
            try:
                self.buffer.release()
                self._keep.close()
            except BufferError:
                return
            self._keep = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BatchReader(SourceReader):
    """Iterate once over the batches of a source; afterwards ``valid_bytes``/``invalid_bytes``/``error`` tell
    where and why iteration stopped. ``valid_bytes`` is the absolute end position of the last good batch."""

    __slots__ = (
        "buffer", "_keep", "start", "end", "validate", "valid_bytes", "invalid_bytes", "error", "_used", "_released",
    )  # fmt: skip

    def __init__(
        self, source, *, position: int = 0, end: int | None = None, validate: bool = False, populate: bool = True
    ) -> None:
        buf, keep = open_source(source, populate=populate)
        total = len(buf)
        if end is None or end > total:
            end = total
        if position < 0 or position > end:
            raise InvalidArgumentError(f"position {position} outside the source (0..{end})")
        self.buffer = buf
        self._keep = keep
        self.start = position
        self.end = end
        self.validate = validate
        self.valid_bytes = position
        self.invalid_bytes = 0
        self.error: CorruptRecordError | None = None
        self._used = False
        self._released = 0

    def __iter__(self) -> Iterator[RecordBatch]:
        if self._used:
            raise RuntimeError("a BatchReader can be iterated only once")
        self._used = True
        return self._iterate()

    def _stop(self, pos: int, error: CorruptRecordError) -> None:
        self.valid_bytes = pos
        self.invalid_bytes = self.end - pos
        self.error = error

    def _iterate(self) -> Iterator[RecordBatch]:
        buf = self.buffer
        end = self.end
        pos = self.start
        validate = self.validate
        from_header = RecordBatch._from_header
        while pos < end:
            if end - pos < HEADER_SIZE_UP_TO_MAGIC:
                self._stop(pos, CorruptRecordError(f"truncated batch header: {end - pos} bytes left", position=pos))
                return
            _, size, _, magic = _unpack_prefix(buf, pos)
            stop = pos + LOG_OVERHEAD + size
            if magic == 2:
                minimum = V2_MIN_LENGTH
            elif magic == 0 or magic == 1:
                minimum = _LEGACY_MINIMUM[magic]
            else:
                self._stop(pos, UnsupportedMagicError(f"unknown magic byte {magic}", position=pos))
                return
            if size < minimum or stop > end:
                self._stop(pos, _framing_error(magic, size, minimum, end - pos, pos))
                return
            if magic == 2:
                raw = buf[pos:stop]
                if validate:
                    h = _unpack_header(buf, pos)
                    if crc32c(raw[21:]) != h[4]:
                        self._stop(pos, CorruptRecordError("record batch CRC mismatch", position=pos))
                        return
                    batch = from_header(raw, pos, h)
                else:
                    batch = from_header(raw, pos, _unpack_header(buf, pos))
            else:
                try:
                    batch = LegacyBatch(buf[pos:stop], pos)
                except CorruptRecordError as exc:
                    self._stop(pos, exc)
                    return
                if validate and not batch.is_valid():
                    self._stop(pos, CorruptRecordError("message CRC mismatch", position=pos))
                    return
            pos = stop
            self.valid_bytes = pos
            yield batch
        self.valid_bytes = pos
        self.invalid_bytes = 0


def read_batches(
    source, *, position: int = 0, end: int | None = None, validate: bool = False, populate: bool = True
) -> BatchReader:
    """Batches of ``source`` (path, bytes, bytearray or memoryview) from ``position`` to ``end``, shallowly.

    ``populate=False``: map a path without prefaulting it (a single pass that calls ``release_before``)."""
    return BatchReader(source, position=position, end=end, validate=validate, populate=populate)
