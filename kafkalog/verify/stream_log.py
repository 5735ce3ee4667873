"""A segment's ``.log`` read in one pass over its fetched bytes: what ``kafkalog dump`` of a URL or of an Aiven
tiered-storage segment reads, with no copy on disk.

:class:`StreamedBatches` is :func:`kafkalog.records.read_batches` over an object that arrives in pieces (ranged GETs,
or Aiven chunk groups fetched, decrypted and decompressed in the read pool, several in flight): the same batches
at the same positions, the same ``valid_bytes``/``invalid_bytes``. The pieces are written at their own offsets into
an anonymous memory map the size of the object, read in windows of at least ``stream.WINDOW_BYTES`` up to the last
whole batch (a batch cut by a window's end is read with the next one), and the pages behind the caller go back to
the OS (``release_before``). Memory: the reads in flight (parallelism x 8 MiB) + a window + one batch.

:func:`scan_streamed_log` gives an index check the log's batch columns from one such pass, and the largest record
timestamp of the batches a time index names; :class:`RangedLog` reads the odd batch an index entry points at by
ranged reads, so index entries are matched as :mod:`kafkalog.verify.index_match` matches them on a local file.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from kafkalog.archive import storage
from kafkalog.records.batch import LOG_OVERHEAD
from kafkalog.records.reader import (
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_RECORD_OVERHEAD_V0,
    LEGACY_RECORD_OVERHEAD_V1,
    V2_MIN_LENGTH,  # fmt: skip
    BatchReader,
    read_batches,
)
from kafkalog.records.scan import scan_batches

from . import stream
from .index_match import LogBatches, max_record_timestamp
from .stream import needs_more, scan_stream

__all__ = ["AivenLog", "LogSource", "RangedLog", "RemoteLog", "StreamedBatches", "scan_streamed_log"]

_PAGE = mmap.PAGESIZE
#: pages are given back in steps of this many bytes (one madvise call per step)
_RELEASE_EVERY = 1 << 20
_SIZE_MAGIC = struct.Struct(">8xi4xb").unpack_from
_MIN_SIZE = {0: LEGACY_RECORD_OVERHEAD_V0, 1: LEGACY_RECORD_OVERHEAD_V1, 2: V2_MIN_LENGTH}


class LogSource:
    """A segment's ``.log`` bytes behind a URL or in an Aiven segment: ``open(end)`` gives ``(size, pieces)`` of
    ``[0, min(end, object size))`` fetched in order, ``read(start, end)`` one range."""

    name: str

    def open(self, end: int | None = None) -> tuple[int, Iterator[bytes | memoryview]]:
        raise NotImplementedError

    def read(self, start: int, end: int) -> bytes | bytearray:
        raise NotImplementedError


class RemoteLog(LogSource):
    """A ``.log`` object behind a URL (``s3://``, ``gs://``, ...), read by ranged GETs several in flight."""

    def __init__(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        self.name = url
        self.options = options

    def open(self, end: int | None = None) -> tuple[int, Iterator[bytes | memoryview]]:
        return storage.open_object_ranges(self.name, self.options, part=stream.FETCH_BYTES, end=end)

    def read(self, start: int, end: int) -> bytes | bytearray:
        return storage.read_range(self.name, start, end, self.options)


class AivenLog(LogSource):
    """The original ``.log`` of an Aiven segment (:class:`kafkalog.archive.tiered.AivenSegment`), restored chunk
    group by chunk group in the read pool."""

    def __init__(self, segment: Any) -> None:
        self.segment = segment
        self.name = segment.log_url

    def open(self, end: int | None = None) -> tuple[int, Iterator[bytes | memoryview]]:
        size = self.segment.size if end is None else max(0, min(end, self.segment.size))
        return size, self.segment.iter_range(0, size)

    def read(self, start: int, end: int) -> bytes | bytearray:
        return self.segment.read(start, end)


class StreamedBatches:
    """:class:`kafkalog.records.reader.BatchReader` over ``source``'s ``[0, end)`` as it is fetched: iterate once;
    afterwards ``valid_bytes``/``invalid_bytes``/``error`` say where and why it stopped, as for a local file.
    Raises StorageError when the object is shorter or longer than it was when opened."""

    def __init__(self, source: LogSource, *, end: int | None = None) -> None:
        self.name = source.name
        self.size, self._pieces = source.open(end)
        self.valid_bytes = 0
        self.invalid_bytes = 0
        self.error: Exception | None = None
        self._mm: mmap.mmap | None = None
        self._released = 0

    def __iter__(self) -> Iterator[Any]:
        return self._iterate()

    def release_before(self, position: int) -> None:
        """Give back the pages wholly before ``position`` (the caller is done with the batches there)."""
        keep = position // _PAGE * _PAGE
        if self._mm is not None and keep - self._released >= _RELEASE_EVERY:
            self._mm.madvise(mmap.MADV_DONTNEED, self._released, keep - self._released)
            self._released = keep

    def _iterate(self) -> Iterator[Any]:
        size = self.size
        it = iter(self._pieces)
        if size <= 0:
            for _ in it:
                pass
            return
        mm = self._mm = mmap.mmap(-1, size)
        view = memoryview(mm)
        filled = pos = 0
        more = False  # the window's end cut a batch: read at least one more piece before the next window
        try:
            while True:
                while filled < size and (more or filled - pos < stream.WINDOW_BYTES):
                    piece = next(it, None)
                    if piece is None:
                        raise storage.StorageError(f"{self.name}: object ended at byte {filled}, expected {size}")
                    n = len(piece)
                    if filled + n > size:
                        raise storage.StorageError(f"{self.name}: object is longer than the {size} bytes it had "
                                                   "when opened")  # fmt: skip
                    view[filled : filled + n] = piece
                    filled += n
                    more = False
                reader = BatchReader(view, position=pos, end=filled)
                yield from reader
                pos = reader.valid_bytes
                if reader.error is None:
                    if filled >= size:
                        self.valid_bytes, self.invalid_bytes = size, 0
                        return
                    continue
                if filled < size and needs_more(view, pos, filled, size):
                    more = True
                    continue
                # damage no more bytes can mend: stop where the whole file's reader stops
                self.valid_bytes, self.invalid_bytes, self.error = pos, size - pos, reader.error
                return
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()  # a pass that stopped early cancels the fetches not started
            self._mm = None
            try:
                view.release()
                mm.close()
            except BufferError:  # a batch's view is still referenced; the map goes with it
                pass


class RangedLog:
    """A ``.log`` read batch by batch with ranged reads, for the index entries that point between batch starts or
    past the readable region: ``len()`` and :meth:`batch_at` are what :mod:`kafkalog.verify.index_match` reads."""

    def __init__(self, source: LogSource, size: int) -> None:
        self.source = source
        self.size = size

    def __len__(self) -> int:
        return self.size

    def batch_at(self, position: int, end: int | None = None) -> Any:
        """The batch at ``position`` if one lies whole within ``[position, end)``, as ``read_batches`` reads it
        (headers only checked; its position is 0); None otherwise."""
        end = self.size if end is None else min(end, self.size)
        if position < 0 or end - position < HEADER_SIZE_UP_TO_MAGIC:
            return None
        length, magic = _SIZE_MAGIC(self.source.read(position, position + HEADER_SIZE_UP_TO_MAGIC), 0)
        stop = position + LOG_OVERHEAD + length
        if magic not in _MIN_SIZE or length < _MIN_SIZE[magic] or stop > end:
            return None
        return next(iter(read_batches(self.source.read(position, stop))), None)


def scan_streamed_log(source: LogSource, timestamps_of: np.ndarray | None = None) -> tuple[LogBatches, RangedLog,
                                                                                          dict[int, int]]:
    """One pass over ``source``: the batch columns :func:`kafkalog.verify.index_match.scan_log_batches` gives for a
    local file, the log for reading single batches, and ``{position: largest record timestamp}`` of every batch
    whose last offset is in ``timestamps_of`` (the offsets of a time index's entries: the batches it is matched
    against)."""
    size, pieces = source.open()
    found: dict[int, int] = {}
    hook: Callable[[memoryview, int, int], None] | None = None
    if timestamps_of is not None and len(timestamps_of):
        wanted = np.unique(np.asarray(timestamps_of, dtype=np.int64))

        def hook(view: memoryview, start: int, stop: int) -> None:
            scan = scan_batches(view, position=start, end=stop, check_crc=False)
            for i in np.flatnonzero(np.isin(scan.last_offsets.astype(np.int64), wanted)).tolist():
                p = int(scan.positions[i])
                found[p] = max_record_timestamp(view, p)

    scan = scan_stream(pieces, size, on_window=hook, check_crc=False)
    batches = LogBatches(scan.positions.astype(np.int64), scan.sizes.astype(np.int64),
                         scan.last_offsets.astype(np.int64))  # fmt: skip
    return batches, RangedLog(source, size), found
