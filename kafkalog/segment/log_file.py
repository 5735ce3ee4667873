"""The ``.log`` file of a segment: its lazily opened descriptor, size, batch scans and whole-file views.

This is the segment side of Kafka's ``FileRecords``. OS access (maps, positional reads, the non-mapping path
for filesystems that cannot map) is :mod:`kafkalog.io.file_access`'s; this mixin adds the segment's lock, the
handle-cache bookkeeping and the batch framing on top. :class:`~kafkalog.segment.log_segment.LogSegment` sets the attributes
declared here in its constructor.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from kafkalog.errors import CorruptRecordError
from kafkalog.io import file_access
from kafkalog.io.handle_cache import HandleCache, default_cache
from kafkalog.names import LazyPath
from kafkalog.records.reader import read_batches

__all__ = ["AppendedBatches", "SegmentLogFile", "frame_appended"]


class AppendedBatches(NamedTuple):
    """What ``LogSegment.append`` reads from the batches it appends: the first base offset, the last offset, the
    first batch's max timestamp, the largest max timestamp and the last offset of the first batch that has it
    (``batches``: the batches themselves, when framed here)."""

    first_base_offset: int
    last_offset: int
    first_max_timestamp: int
    max_timestamp: int
    last_offset_of_max_timestamp: int
    batches: tuple = ()


def frame_appended(data: memoryview) -> AppendedBatches:
    """The batches of an append, framed (whole batches only, else ``CorruptRecordError``)."""
    reader = read_batches(data)
    batches = tuple(reader)
    if reader.invalid_bytes:
        raise CorruptRecordError(
            f"append of {len(data)} bytes holds {reader.invalid_bytes} bytes that are not whole batches",
            position=reader.valid_bytes,
        )
    top = max(batches, key=lambda b: b.max_timestamp)  # the first of the largest
    return AppendedBatches(batches[0].base_offset, batches[-1].last_offset, batches[0].max_timestamp,
                           top.max_timestamp, top.last_offset, batches)


_LOCK_CREATION = threading.Lock()
#: ``scan`` reads a ``.log`` of up to this many bytes instead of mapping it (the reads before ``start`` included:
#: below this size they cost less than a map's page faults and munmap).
SCAN_READ_NOT_MAP_BYTES = 64 * 1024


class SegmentLogFile:
    """The ``.log`` side of a segment. Every use of the descriptor happens under ``_lock``: the handle cache may
    close it whenever the lock is free, and it reopens on the next use."""

    _handles: HandleCache | None = None  # None: the process-wide default cache
    _handle_used = False  # CLOCK bit for the handle cache
    _unsynced = False  # bytes written or cut since the last fsync (a flush after eviction reopens to fsync)
    _file: BinaryIO | None
    _size: int | None
    _lock_obj: threading.RLock | None
    _log_fspath: str
    _log_path_obj: Path | None
    _read_only: bool

    @property
    def _lock(self) -> threading.RLock:
        """Guards the lazy open and every use of the descriptor (the non-mapping path seeks it). Made on first use: a lazily loaded partition's
        segments mostly never open, and an RLock made per segment up front would be a GC-tracked object each."""
        lock = self._lock_obj
        if lock is None:
            with _LOCK_CREATION:
                lock = self._lock_obj
                if lock is None:
                    lock = self._lock_obj = threading.RLock()
        return lock

    _log_path = LazyPath("_log_fspath", "_log_path_obj")

    def _cache(self) -> HandleCache:
        return self._handles or default_cache()

    def _open_file(self):
        """The ``.log`` file object, opened on first use. Callers use it under ``_lock`` (the handle cache closes
        it whenever the lock is free)."""
        self._handle_used = True
        with self._lock:
            if self._file is None:
                # O_NOFOLLOW: a segment file that is a symlink may point outside the log dir, and recovery would
                # truncate whatever it points at; refuse it (ELOOP) instead of following it.
                mode = os.O_RDONLY if self._read_only else os.O_RDWR | os.O_CREAT
                flags = mode | getattr(os, "O_NOFOLLOW", 0)
                cache = self._cache()
                fd = cache.call(lambda: os.open(self._log_fspath, flags, 0o644), f"opening {self._log_fspath}")
                try:
                    self._size = os.fstat(fd).st_size
                    self._file = os.fdopen(fd, "rb" if self._read_only else "r+b", buffering=0)
                except BaseException:
                    os.close(fd)
                    raise
                cache.add(self)
            return self._file

    def _evict_handles(self) -> bool:
        """The handle cache wants the descriptor back: close it unless a thread is using it."""
        lock = self._lock
        if not lock.acquire(blocking=False):
            return False
        try:
            f, self._file, self._size = self._file, None, None
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass  # close(2) errors on a read/written file are reported by the next fsync
            return True
        finally:
            lock.release()

    @property
    def size(self) -> int:
        """Bytes in the ``.log`` (stat, not open, when the file is not open)."""
        size = self._size
        if size is not None:
            return size
        with self._lock:  # the handle cache may close the file between a check and a read of _size
            if self._file is None:
                return os.stat(self._log_fspath).st_size
            return self._size  # type: ignore[return-value]

    def batches(self, start: int = 0, end: int | None = None, *, validate: bool = False) -> Iterator:
        """Whole batches in ``[start, end)`` of the ``.log``, with absolute positions, stopping at bad bytes.

        Uses a map when :mod:`~kafkalog.io.file_access` can map the file, else one positional read per batch.
        The iterator's ``reader`` attribute is not exposed; callers that need the stop position use
        :meth:`scan`.
        """
        yield from self.scan(start, end, validate=validate)[0]

    def scan(self, start: int = 0, end: int | None = None, *, validate: bool = False):
        """Return ``(iterator of batches, state)``; after iteration ``state['valid_end']`` is the end of the last
        whole batch and ``state['error']`` why iteration stopped early (or None)."""
        with self._lock:  # the map takes its own descriptor: after this the file may be closed
            f = self._open_file()
            size = self._size
            end = size if end is None else min(end, size)  # type: ignore[type-var]
            state: dict = {"valid_end": start, "error": None}
            if end <= start:
                return iter(()), state
            view, _ = self._whole_view(f, end, SCAN_READ_NOT_MAP_BYTES)
            if view is None:
                return self._scan_chunked(start, end, validate, state), state
        return self._scan_buffer(view, start, end, validate, state), state

    @staticmethod
    def _whole_view(f: BinaryIO, size: int, read_not_map_bytes: int) -> tuple[memoryview | None, mmap.mmap | None]:
        """(a view of the ``.log``'s first ``size`` bytes, the map under it or None): read when ``size`` is at most
        ``read_not_map_bytes`` (one read costs less than map + page faults + munmap), mapped otherwise; (None,
        None) where :mod:`~kafkalog.io.file_access` can neither (the caller's batch-by-batch path). Under the lock."""
        if size <= read_not_map_bytes:
            whole = file_access.read_whole(f, size)
            return (None if whole is None else memoryview(whole)), None
        mm = file_access.map_file(f, size)
        return (None if mm is None else memoryview(mm)), mm

    @staticmethod
    def _scan_buffer(buf, start, end, validate, state):
        reader = read_batches(buf, position=start, end=end, validate=validate)
        for batch in reader:
            state["valid_end"] = batch.position + batch.size_in_bytes
            yield batch
        state["valid_end"] = reader.valid_bytes if reader.valid_bytes else state["valid_end"]
        state["error"] = reader.error

    def read_owned(self, start: int, end: int) -> list:
        """The whole batches in ``[start, end)`` from one positional read, stopping at bad bytes: the batches own
        their bytes, so a caller may keep them without keeping a descriptor or a map of the ``.log`` (a map holds
        a duplicate descriptor outside the handle cache's bound for as long as any view of it lives)."""
        size = self.size
        end = min(end, size)
        if end <= start:
            return []
        batches = []
        for batch in read_batches(self._pread(start, end - start)):
            batch.position += start  # the buffer starts at ``start``; report file positions
            batches.append(batch)
        return batches

    def batch_at(self, position: int, end: int | None = None):
        """The whole batch at ``position`` (ending by ``end``, default the file's end), read on its own; None when
        its length field is impossible or runs past ``end``."""
        end = self.size if end is None else min(end, self.size)
        state: dict = {"valid_end": position, "error": None}
        return next(self._scan_chunked(position, end, False, state), None)

    def _scan_chunked(self, start, end, validate, state):
        """Fallback without mmap: one pread per batch, never more than the bytes present in the file."""
        pos = start
        while pos + 12 <= end:
            length = int.from_bytes(self._pread(pos, 12)[8:12], "big", signed=True)
            total = 12 + length
            if length <= 0 or pos + total > end:
                break
            reader = read_batches(self._pread(pos, total), validate=validate)
            got = None
            for batch in reader:
                batch.position = pos  # the buffer starts at the batch; report the file position
                got = batch
            if got is None or got.size_in_bytes != total:
                state["error"] = reader.error
                return
            state["valid_end"] = pos + total
            yield got
            pos += total
        if pos < end and state["error"] is None:
            state["error"] = CorruptRecordError(f"{end - pos} trailing bytes do not form a batch", position=pos)

    def _pread(self, position: int, size: int) -> bytes:
        """Positional read, under the segment lock (the file access layer may seek+read where there is no pread)."""
        with self._lock:
            return file_access.pread(self._open_file(), position, size)

    @contextlib.contextmanager
    def _read_map(self, size: int, read_not_map_bytes: int) -> Iterator[memoryview | None]:
        """A read-only view of the ``.log``'s first ``size`` bytes (empty for 0), or None where the file cannot
        be mapped (:mod:`~kafkalog.io.file_access`'s non-mapping path): the caller then takes its batch-by-batch
        path. A file of up to ``read_not_map_bytes`` is read instead: every caller touches all of it, and a read
        costs a fraction of mmap + page faults + munmap. The map is closed on exit unless a view of it is still
        referenced (it then goes with the last one)."""
        if size == 0:
            yield memoryview(b"")
            return
        with self._lock:  # the descriptor is used only here: the map holds its own
            buf, mm = self._whole_view(self._open_file(), size, read_not_map_bytes)
        if mm is None:
            yield buf
            return
        assert buf is not None
        try:
            yield buf
        finally:
            try:
                buf.release()
                mm.close()
            except BufferError:
                pass

    def _truncate_file(self, size: int) -> None:
        with self._lock:
            f = self._open_file()
            self._unsynced = True
            file_access.truncate(f, size)
            self._size = size

    def _close_log_file(self, *, ignore_errors: bool = False) -> None:
        """Close the ``.log`` descriptor (it reopens on first use); ``ignore_errors`` for a dir that may be gone."""
        if self._file is None:
            return  # never opened (or closed already): nothing to close, and no lock to make for it
        with self._lock:
            f, self._file, self._size = self._file, None, None
            if f is not None:
                self._cache().discard(self)
                try:
                    f.close()
                except OSError:
                    if not ignore_errors:
                        raise
