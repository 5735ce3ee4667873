"""Truncation and lifecycle of a segment: what happens to its files as a whole (Kafka's ``LogSegment.truncateTo``,
``onBecomeInactiveSegment``, ``flush``, ``close``, ``deleteIfExists``, ``changeFileSuffixes``, ``updateParentDir``),
plus kafkalog's ``suspend``/``release_indexes`` that hand descriptors and mappings back while the segment stays usable.

``SegmentLifecycle`` is a mixin of ``LogSegment``: it uses the segment's indexes (``_offset_index``,
``_time_index``, ``_txn_index``, ``_indexes_made``), the ``.log`` side of ``SegmentLogFile`` (``_open_file``,
``_close_log_file``, ``_truncate_file``, ``scan``, ``size``, ``_lock``, ``_unsynced``), ``translate_offset`` and
the segment's own bookkeeping (``_max_ts_and_offset``, ``_bytes_since_last_index_entry``, ``created_ms``, ``_clock``,
``_log_path``, ``_dir``, ``_suffix``).
"""

from __future__ import annotations

import os
from pathlib import Path

from kafkalog.index.time_index import TimestampOffset
from kafkalog.io import file_access
from kafkalog.io.cpu_gate import io_wait

__all__ = ["SegmentLifecycle"]


class SegmentLifecycle:
    """Truncation, flush, close, suspend, delete and renames of a ``LogSegment``'s files."""

    def truncate_to(self, offset: int) -> int:
        """Drop every batch and index entry with offsets >= ``offset``; returns the log bytes removed."""
        mapping = self.translate_offset(offset)
        self._offset_index.truncate_to(offset)
        self._time_index.truncate_to(offset)
        self._txn_index.truncate_to(offset)
        self._offset_index.resize(self.max_index_size)
        self._time_index.resize(self.max_index_size)
        removed = 0
        if mapping is not None:
            removed = self.size - mapping.position
            self._truncate_file(mapping.position)
        if self.size == 0:
            self.created_ms = self._clock()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_ts_and_offset = None
        if self.max_timestamp_so_far >= 0:
            self._max_ts_and_offset = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        last_ts, last_off = self._time_index.last_entry
        position = self._offset_index.lookup(last_off)[1]
        best = TimestampOffset(last_ts, last_off)
        it, _ = self.scan(position)
        for batch in it:
            if batch.max_timestamp > best.timestamp:
                best = TimestampOffset(batch.max_timestamp, batch.offset_of_max_timestamp)
        return best

    def resize_indexes(self, size: int) -> None:
        """Resize the offset and time index files to ``size`` bytes (Kafka's ``LogSegment.resizeIndexes``)."""
        self._offset_index.resize(size)
        self._time_index.resize(size)

    def on_becoming_inactive(self) -> None:
        """Write the final time-index entry and trim the indexes (Kafka's onBecomeInactiveSegment)."""
        mt = self._read_max_ts_and_offset()
        self._time_index.maybe_append(mt.timestamp, mt.offset, skip_full_check=True)
        self._offset_index.trim_to_valid_size()
        self._time_index.trim_to_valid_size()

    def flush(self) -> None:
        """fsync the log and its indexes, so a crash after this call cannot lose what was appended."""
        if self._file is not None or self._unsynced:
            with self._lock:  # reopens a file the handle cache closed with bytes not yet on disk
                f = self._open_file()
                self._unsynced = False
                with io_wait():
                    file_access.sync(f)
        self._offset_index.flush()
        self._time_index.flush()
        self._txn_index.flush()

    def close(self) -> None:
        """Write the final time-index entry, trim and release everything (Kafka's LogSegment.close)."""
        if not self._indexes_made():
            self._close_log_file(ignore_errors=False)
            return
        if self._max_ts_and_offset is not None:
            self._time_index.maybe_append(*self._max_ts_and_offset, skip_full_check=True)
        self._offset_index.close()
        self._time_index.close()
        self._txn_index.close()
        self.close_handlers()

    def close_handlers(self) -> None:
        """Release file handles and index maps without flushing or trimming (for an offline dir)."""
        for idx in (self._offset_index, self._time_index) if self._indexes_made() else ():
            try:
                idx.close_handler()
            except OSError:
                pass
        self._close_log_file(ignore_errors=True)

    def suspend(self) -> None:
        """Give back every descriptor and mapping of a segment that stays usable (the active one included):
        indexes unmapped untrimmed (they come back with the same entries and room), the ``.log`` closed; all
        reopen on first use. Startup does this for every loaded partition so that thousands of partitions do
        not hold three descriptors each until they are used."""
        if not self._indexes_made():
            self._close_log_file()
            return
        self._offset_index.suspend()
        self._time_index.suspend()
        self._txn_index.close()
        self._close_log_file()

    def release_indexes(self) -> None:
        """Unmap the indexes (they reopen lazily), keeping the segment usable."""
        if not self._indexes_made():
            return
        self._offset_index.close()
        self._time_index.close()
        self._txn_index.close()

    def delete(self) -> None:
        """Remove the ``.log`` and every index file (missing files are fine)."""
        self._unsynced = False  # nothing left to make durable: a later flush must not recreate the file
        self.close_handlers()
        self._offset_index.delete()
        self._time_index.delete()
        self._txn_index.delete()
        try:
            os.remove(self._log_path)
        except FileNotFoundError:
            pass

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment from ``old_suffix`` to ``new_suffix`` (``""``, ``.deleted``,
        ``.swap``, ``.cleaned``)."""

        def swap(p: Path) -> Path:
            name = p.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return p.with_name(name + new_suffix)

        self.close_handlers()
        new_log = swap(self._log_path)
        if self._log_path.exists():
            os.replace(self._log_path, new_log)
        self._log_path = new_log
        for idx in (self._offset_index, self._time_index, self._txn_index):
            idx.rename_to(swap(Path(idx.file)))
        self._suffix = new_suffix

    def rename_suffix(self, suffix: str) -> None:
        """Rename every file of the segment to ``suffix`` (``.deleted``, ``.cleaned``, ``.swap``, '')."""
        self.change_file_suffixes(self._suffix, suffix)

    def update_parent_dir(self, new_dir: str | os.PathLike) -> None:
        """Point the segment at a renamed partition dir (the files moved with it)."""
        new_dir = Path(new_dir)
        self.close_handlers()
        self._dir = new_dir
        self._log_path = new_dir / self._log_path.name
        for idx in (self._offset_index, self._time_index, self._txn_index):
            idx.update_parent_dir(new_dir)
